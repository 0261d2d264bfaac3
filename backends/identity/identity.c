/*
 * identity backend: each requested output OUTPUT<n> returns input INPUT<n>
 * unchanged (datatype, shape and bytes, any datatype including BYTES).
 *
 * Model parameters:
 *   execute_delay_ms  sleep this long in every Execute call (default 0)
 *
 * Threads: the model state is written once in ModelInitialize and only read
 * afterwards, so instances share it without locking.
 */
#include "identity_core.h"
#include "nereid/backend_utils.h"

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_Initialize(TRITONBACKEND_Backend *backend) {
  (void)backend;
  return nrd_bu_api_version_check("identity");
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model *model) {
  json_t *config = NULL;
  TRITONSERVER_Error *err = nrd_bu_model_config(model, &config);
  if (err != NULL) {
    return err;
  }
  nrd_identity_model settings;
  err = nrd_identity_model_read(config, "identity", &settings);
  json_decref(config);
  if (err != NULL) {
    return err;
  }
  /* A malloc'ed copy becomes the model state, freed in ModelFinalize. */
  return nrd_bu_model_state_set(model, &settings, sizeof settings, "identity");
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model *model) {
  return nrd_bu_model_state_free(model);
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance *instance) {
  /* The instance only needs the model's settings: point at them so Execute
   * makes a single state lookup. */
  return nrd_bu_instance_share_model_state(instance, "identity");
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance *instance) {
  /* The state is the model's (borrowed): only forget it. */
  return TRITONBACKEND_ModelInstanceSetState(instance, NULL);
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance *instance,
                                                                          TRITONBACKEND_Request **requests,
                                                                          const uint32_t request_count) {
  void *state = NULL;
  TRITONSERVER_Error *err = nrd_bu_instance_state(instance, "identity", &state);
  if (err != NULL) {
    /* Nothing was touched: the server keeps the requests and answers them. */
    return err;
  }
  nrd_identity_execute(instance, state, requests, request_count);
  return NULL;
}
