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
#include <stdlib.h>

#include "identity_core.h"
#include "nereid/backend_utils.h"

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_Initialize(
    TRITONBACKEND_Backend *backend) {
  (void)backend;
  return nrd_bu_api_version_check("identity");
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInitialize(
    TRITONBACKEND_Model *model) {
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
  nrd_identity_model *state = malloc(sizeof *state);
  if (state == NULL) {
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE,
                                 "identity: out of memory");
  }
  *state = settings;
  err = TRITONBACKEND_ModelSetState(model, state);
  if (err != NULL) {
    free(state);
  }
  return err;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelFinalize(
    TRITONBACKEND_Model *model) {
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelState(model, &state);
  if (err != NULL) {
    return err;
  }
  free(state);
  return TRITONBACKEND_ModelSetState(model, NULL);
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceInitialize(
    TRITONBACKEND_ModelInstance *instance) {
  /* The instance only needs the model's settings: point at them so Execute
   * makes a single state lookup. */
  TRITONBACKEND_Model *model = NULL;
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelInstanceModel(instance, &model);
  if (err == NULL) {
    err = TRITONBACKEND_ModelState(model, &state);
  }
  if (err == NULL && state == NULL) {
    err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL,
                                "identity: model state missing");
  }
  if (err == NULL) {
    err = TRITONBACKEND_ModelInstanceSetState(instance, state);
  }
  return err;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceFinalize(
    TRITONBACKEND_ModelInstance *instance) {
  return TRITONBACKEND_ModelInstanceSetState(instance, NULL);
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance *instance, TRITONBACKEND_Request **requests,
    const uint32_t request_count) {
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelInstanceState(instance, &state);
  if (err != NULL) {
    /* Nothing was touched: the server keeps the requests and answers them. */
    return err;
  }
  if (state == NULL) {
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL,
                                 "identity: instance state missing");
  }
  nrd_identity_execute(instance, state, requests, request_count);
  return NULL;
}
