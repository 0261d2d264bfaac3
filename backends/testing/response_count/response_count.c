/*
 * response_count (test only): a backend meant for NON-decoupled models that
 * breaks the one-response-per-request rule on purpose, so tests can check
 * the server's error. Model parameter 'responses' (0..16, default 1) is how
 * many identity-style responses each request gets; the last one carries the
 * FINAL flag. With 0 the request is released without any response.
 *
 * Threads: the model state is immutable after ModelInitialize.
 */
#include "../../identity/identity_core.h"
#include "nereid/backend_utils.h"

typedef struct response_count_model {
  nrd_identity_model identity;
  int64_t responses;
} response_count_model;

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_Initialize(TRITONBACKEND_Backend *backend) {
  (void)backend;
  return nrd_bu_api_version_check("response_count");
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model *model) {
  json_t *config = NULL;
  TRITONSERVER_Error *err = nrd_bu_model_config(model, &config);
  if (err != NULL) {
    return err;
  }
  response_count_model settings;
  err = nrd_identity_model_read(config, "response_count", &settings.identity);
  if (err == NULL) {
    err = nrd_bu_config_parameter_int(config, "responses", 1, 0, 16, &settings.responses);
  }
  json_decref(config);
  if (err != NULL) {
    return err;
  }
  return nrd_bu_model_state_set(model, &settings, sizeof settings, "response_count");
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model *model) {
  return nrd_bu_model_state_free(model);
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance *instance,
                                                                          TRITONBACKEND_Request **requests,
                                                                          const uint32_t request_count) {
  void *state = NULL;
  TRITONSERVER_Error *err = nrd_bu_instance_model_state(instance, "response_count", &state);
  if (err != NULL) {
    return err;
  }
  const response_count_model *m = state;
  uint64_t exec_start = nrd_bu_now_ns();
  for (uint32_t r = 0; r < request_count; ++r) {
    if (requests[r] == NULL) {
      continue;
    }
    bool ok = true;
    for (int64_t k = 0; k < m->responses; ++k) {
      uint32_t flags = (k + 1 == m->responses) ? TRITONSERVER_RESPONSE_COMPLETE_FINAL : 0;
      ok = nrd_identity_respond(requests[r], flags) && ok;
    }
    uint64_t now = nrd_bu_now_ns();
    nrd_bu_error_log_and_delete(
        TRITONBACKEND_ModelInstanceReportStatistics(instance, requests[r], ok, exec_start, exec_start, now, now),
        "response_count: cannot report statistics");
    nrd_bu_request_release(requests[r]);
  }
  uint64_t exec_end = nrd_bu_now_ns();
  if (request_count > 0) {
    nrd_bu_error_log_and_delete(TRITONBACKEND_ModelInstanceReportBatchStatistics(instance, request_count, exec_start,
                                                                                 exec_start, exec_end, exec_end),
                                "response_count: cannot report batch statistics");
  }
  return NULL;
}
