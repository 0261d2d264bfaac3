/* The API versions this library implements: TRITONSERVER 1.34 and
 * TRITONBACKEND 1.19. Backends compare the major number for equality and the
 * minor number as a minimum, so these must never be lower than the headers
 * the shipped backends were built against. */
#include "triton/core/tritonbackend.h"

#include "error.h"

/* The headers carry the versions; the library reports exactly those. */
#define NRD_SERVER_API_MAJOR TRITONSERVER_API_VERSION_MAJOR
#define NRD_SERVER_API_MINOR TRITONSERVER_API_VERSION_MINOR
#define NRD_BACKEND_API_MAJOR TRITONBACKEND_API_VERSION_MAJOR
#define NRD_BACKEND_API_MINOR TRITONBACKEND_API_VERSION_MINOR

TRITONSERVER_Error *TRITONSERVER_ApiVersion(uint32_t *major, uint32_t *minor) {
  if (major == NULL || minor == NULL)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "major and minor must not be NULL");
  *major = NRD_SERVER_API_MAJOR;
  *minor = NRD_SERVER_API_MINOR;
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ApiVersion(uint32_t *major, uint32_t *minor) {
  if (major == NULL || minor == NULL)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "major and minor must not be NULL");
  *major = NRD_BACKEND_API_MAJOR;
  *minor = NRD_BACKEND_API_MINOR;
  return NULL;
}
