/*
 * no_execute (test only): a backend library without the required
 * TRITONBACKEND_ModelInstanceExecute. The server must reject it when loading
 * it, naming the missing function.
 */
#include "nereid/backend_utils.h"

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_Initialize(TRITONBACKEND_Backend *backend) {
  (void)backend;
  return NULL;
}
