/* Test-only "slow_init" backend: declares through TRITONBACKEND_GetBackendAttribute
 * that its instances may be initialized in parallel, and sleeps in every
 * ModelInstanceInitialize for the model parameter `init_ms` (default 300),
 * so a test can tell parallel from sequential instance loading by the load
 * time. Executes like identity. */
#include <stdlib.h>

#include "../../identity/identity_core.h"
#include "nereid/backend_utils.h"
#include "triton/core/tritonbackend.h"

#define EXPORT TRITONBACKEND_ISPEC

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
  slow_model *m = calloc(1, sizeof(*m));
  if (!m) err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "slow_init: out of memory");
  if (!err) err = nrd_identity_model_read(config, "slow_init", &m->identity);
  if (!err) err = nrd_bu_config_parameter_int(config, "init_ms", 300, 0, 10000, &m->init_ms);
  json_decref(config);
  if (!err) err = TRITONBACKEND_ModelSetState(model, m);
  if (err) free(m);
  return err;
}

EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model *model) {
  void *state = NULL;
  TRITONBACKEND_ModelState(model, &state);
  free(state);
  return NULL;
}

EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance *instance) {
  TRITONBACKEND_Model *model = NULL;
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelInstanceModel(instance, &model);
  if (!err) err = TRITONBACKEND_ModelState(model, &state);
  if (err) return err;
  nrd_bu_sleep_ms((uint64_t)((slow_model *)state)->init_ms);
  return NULL;
}

EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance *instance,
                                                              TRITONBACKEND_Request **requests,
                                                              const uint32_t request_count) {
  TRITONBACKEND_Model *model = NULL;
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelInstanceModel(instance, &model);
  if (!err) err = TRITONBACKEND_ModelState(model, &state);
  if (err) return err;
  nrd_identity_execute(instance, &((slow_model *)state)->identity, requests, request_count);
  return NULL;
}
