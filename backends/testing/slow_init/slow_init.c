/* Test-only "slow_init" backend: declares through TRITONBACKEND_GetBackendAttribute
 * that its instances may be initialized in parallel, and sleeps in every
 * ModelInstanceInitialize for the model parameter `init_ms` (default 300),
 * so a test can tell parallel from sequential instance loading by the load
 * time. Executes like identity. */
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
  slow_model m;
  err = nrd_identity_model_read(config, "slow_init", &m.identity);
  if (!err) err = nrd_bu_config_parameter_int(config, "init_ms", 300, 0, 10000, &m.init_ms);
  json_decref(config);
  if (!err) err = nrd_bu_model_state_set(model, &m, sizeof m, "slow_init");
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
  return NULL;
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
