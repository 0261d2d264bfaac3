/*
 * echo_params (test only): answers like identity and gives each response
 * every parameter of its request, under the same name and of the same type
 * (string, int, bool or double), so tests can check that request
 * parameters reach the backend and that response parameters reach the
 * client.
 *
 * Threads: no model state; each request is handled on the instance thread.
 */
#include "../../identity/identity_core.h"
#include "nereid/backend_utils.h"

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_Initialize(TRITONBACKEND_Backend *backend) {
  (void)backend;
  return nrd_bu_api_version_check("echo_params");
}

/* Request parameter `index` copied onto `response`. */
static TRITONSERVER_Error *copy_parameter(TRITONBACKEND_Request *request, uint32_t index,
                                          TRITONBACKEND_Response *response) {
  const char *key = NULL;
  TRITONSERVER_ParameterType type;
  const void *v = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_RequestParameter(request, index, &key, &type, &v);
  if (err != NULL) {
    return err;
  }
  switch (type) {
    case TRITONSERVER_PARAMETER_STRING: return TRITONBACKEND_ResponseSetStringParameter(response, key, v);
    case TRITONSERVER_PARAMETER_INT: return TRITONBACKEND_ResponseSetIntParameter(response, key, *(const int64_t *)v);
    case TRITONSERVER_PARAMETER_BOOL: return TRITONBACKEND_ResponseSetBoolParameter(response, key, *(const bool *)v);
    case TRITONSERVER_PARAMETER_DOUBLE:
      return TRITONBACKEND_ResponseSetDoubleParameter(response, key, *(const double *)v);
    default: return NULL; /* bytes parameters have no response counterpart */
  }
}

static void respond(TRITONBACKEND_Request *request) {
  TRITONBACKEND_Response *response = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ResponseNew(&response, request);
  if (err != NULL) {
    nrd_bu_error_log_and_delete(err, "echo_params: cannot create response");
    return;
  }
  uint32_t count = 0;
  err = TRITONBACKEND_RequestParameterCount(request, &count);
  for (uint32_t i = 0; err == NULL && i < count; ++i) {
    err = copy_parameter(request, i, response);
  }
  if (err == NULL) {
    err = nrd_identity_fill(response, request);
  }
  nrd_bu_error_log_and_delete(TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, err),
                              "echo_params: cannot send response");
  if (err != NULL) {
    TRITONSERVER_ErrorDelete(err);
  }
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance *instance,
                                                                          TRITONBACKEND_Request **requests,
                                                                          const uint32_t request_count) {
  uint64_t start = nrd_bu_now_ns();
  for (uint32_t r = 0; r < request_count; ++r) {
    respond(requests[r]);
    uint64_t now = nrd_bu_now_ns();
    nrd_bu_error_log_and_delete(
        TRITONBACKEND_ModelInstanceReportStatistics(instance, requests[r], true, start, start, now, now),
        "echo_params: cannot report statistics");
    nrd_bu_request_release(requests[r]);
  }
  return NULL;
}
