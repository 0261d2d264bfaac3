/* Test-only "slow_init" backend: declares through TRITONBACKEND_GetBackendAttribute
 * that its instances may be initialized in parallel, and sleeps in every
 * ModelInstanceInitialize for the model parameter `init_ms` (default 300),
 * so a test can tell parallel from sequential instance loading by the load
 * time. It also reports memory usage: the model 1000 bytes of CPU memory
 * (after a first report of 5 that the second replaces), each instance 10
 * bytes of CPU memory and 7 of pinned memory. Executes like identity. */
#include "../../identity/identity_core.h"
#include "nereid/backend_utils.h"
#include "triton/core/tritonbackend.h"

#define EXPORT TRITONBACKEND_ISPEC

/* Reports `cpu` bytes of CPU memory (and `pinned` of pinned memory when
 * non-zero) for the model (instance NULL) or an instance. */
static TRITONSERVER_Error *report_memory(TRITONBACKEND_Model *model, TRITONBACKEND_ModelInstance *instance,
                                         uint64_t cpu, uint64_t pinned) {
  TRITONSERVER_BufferAttributes *attrs[2] = {NULL, NULL};
  uint32_t n = pinned ? 2 : 1;
  TRITONSERVER_Error *err = NULL;
  for (uint32_t i = 0; i < n && !err; i++) {
    err = TRITONSERVER_BufferAttributesNew(&attrs[i]);
    if (!err)
      err = TRITONSERVER_BufferAttributesSetMemoryType(attrs[i],
                                                       i ? TRITONSERVER_MEMORY_CPU_PINNED : TRITONSERVER_MEMORY_CPU);
    if (!err) err = TRITONSERVER_BufferAttributesSetByteSize(attrs[i], i ? pinned : cpu);
  }
  if (!err)
    err = instance ? TRITONBACKEND_ModelInstanceReportMemoryUsage(instance, attrs, n)
                   : TRITONBACKEND_ModelReportMemoryUsage(model, attrs, n);
  for (uint32_t i = 0; i < n; i++) TRITONSERVER_BufferAttributesDelete(attrs[i]);
  return err;
}

typedef struct slow_model {
  nrd_identity_model identity;
  int64_t init_ms;
} slow_model;

EXPORT TRITONSERVER_Error *TRITONBACKEND_GetBackendAttribute(TRITONBACKEND_Backend *backend,
                                                             TRITONBACKEND_BackendAttribute *attributes) {
  (void)backend;
  return TRITONBACKEND_BackendAttributeSetParallelModelInstanceLoading(attributes, true);
}

EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model *model) {
  json_t *config = NULL;
  TRITONSERVER_Error *err = nrd_bu_model_config(model, &config);
  if (err) return err;
  slow_model m;
  err = nrd_identity_model_read(config, "slow_init", &m.identity);
  if (!err) err = nrd_bu_config_parameter_int(config, "init_ms", 300, 0, 10000, &m.init_ms);
  json_decref(config);
  if (!err) err = nrd_bu_model_state_set(model, &m, sizeof m, "slow_init");
  /* The second report replaces the first. */
  if (!err) err = report_memory(model, NULL, 5, 0);
  if (!err) err = report_memory(model, NULL, 1000, 0);
  if (err) nrd_bu_model_state_free(model);
  return err;
}

EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model *model) {
  return nrd_bu_model_state_free(model);
}

EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance *instance) {
  void *state = NULL;
  TRITONSERVER_Error *err = nrd_bu_instance_model_state(instance, "slow_init", &state);
  if (err) return err;
  nrd_bu_sleep_ms((uint64_t)((slow_model *)state)->init_ms);
  return report_memory(NULL, instance, 10, 7);
}

EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance *instance,
                                                              TRITONBACKEND_Request **requests,
                                                              const uint32_t request_count) {
  void *state = NULL;
  TRITONSERVER_Error *err = nrd_bu_instance_model_state(instance, "slow_init", &state);
  if (err) return err;
  nrd_identity_execute(instance, &((slow_model *)state)->identity, requests, request_count);
  return NULL;
}
