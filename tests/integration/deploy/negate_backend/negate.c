/* negate: a backend built outside Nereid's tree, against an installed
 * Nereid only (find_package(Nereid) or pkg-config nereid-backend-utils), by
 * tests/integration/test_install.py. OUTPUT0 = -INPUT0, INT32, any shape.
 * Threads: Execute runs on the instance's thread; no state is shared. */
#include <stdint.h>
#include <string.h>

#include "nereid/backend_utils.h"

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_Initialize(TRITONBACKEND_Backend *backend) {
  (void)backend;
  return nrd_bu_api_version_check("negate");
}

/* Answers one request; returns an error (the request not yet answered) or
 * NULL once a response was sent. */
static TRITONSERVER_Error *negate_one(TRITONBACKEND_Request *request) {
  nrd_bu_tensor in = {0};
  TRITONSERVER_Error *err = nrd_bu_request_input(request, "INPUT0", &in);
  if (err != NULL) return err;
  TRITONBACKEND_Response *response = NULL;
  TRITONBACKEND_Output *output = NULL;
  void *dst = NULL;
  TRITONSERVER_MemoryType mem = TRITONSERVER_MEMORY_CPU;
  int64_t mem_id = 0;
  if (in.datatype != TRITONSERVER_TYPE_INT32) {
    err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "negate: INPUT0 must be INT32");
    goto done;
  }
  if ((err = TRITONBACKEND_ResponseNew(&response, request)) != NULL) goto done;
  err = TRITONBACKEND_ResponseOutput(response, &output, "OUTPUT0", TRITONSERVER_TYPE_INT32, in.shape, in.dims_count);
  if (err == NULL) err = TRITONBACKEND_OutputBuffer(output, &dst, in.byte_size, &mem, &mem_id);
  if (err == NULL) {
    const int32_t *src = in.data;
    int32_t *out = dst;
    for (uint64_t i = 0; i < in.byte_size / sizeof(int32_t); i++) out[i] = -src[i];
  }
  TRITONSERVER_Error *send_err = TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, err);
  if (err != NULL) TRITONSERVER_ErrorDelete(err);
  err = NULL;
  nrd_bu_error_log_and_delete(send_err, "negate: cannot send response");
done:
  nrd_bu_tensor_release(&in);
  return err;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance *instance,
                                                                          TRITONBACKEND_Request **requests,
                                                                          const uint32_t request_count) {
  for (uint32_t r = 0; r < request_count; r++) {
    uint64_t start = nrd_bu_now_ns();
    TRITONSERVER_Error *err = negate_one(requests[r]);
    bool ok = err == NULL;
    if (err != NULL) {
      nrd_bu_request_respond_error(requests[r], err);
      TRITONSERVER_ErrorDelete(err);
    }
    uint64_t end = nrd_bu_now_ns();
    nrd_bu_error_log_and_delete(
        TRITONBACKEND_ModelInstanceReportStatistics(instance, requests[r], ok, start, start, end, end),
        "negate: cannot report statistics");
    nrd_bu_request_release(requests[r]);
  }
  return NULL;
}
