/*
 * fail_backend_init (test only): TRITONBACKEND_Initialize always fails, so
 * every model using this backend must fail to load with that message. The
 * other entry points exist only so the library passes the server's symbol
 * checks and the failure is really the one of Initialize.
 */
#include "nereid/backend_utils.h"

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_Initialize(TRITONBACKEND_Backend *backend) {
  (void)backend;
  return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "fail_backend_init: refusing to initialize");
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance *instance,
                                                                          TRITONBACKEND_Request **requests,
                                                                          const uint32_t request_count) {
  nrd_bu_requests_fail(instance, requests, request_count,
                       TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "fail_backend_init: must never execute"));
  return NULL;
}
