/* Errors, logging, time, API version check and batch-wide responses. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "nereid/backend_utils.h"

TRITONSERVER_Error *nrd_bu_error_newf(TRITONSERVER_Error_Code code, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (n < 0) {
    return TRITONSERVER_ErrorNew(code, "(unformattable error message)");
  }
  return TRITONSERVER_ErrorNew(code, msg);
}

void nrd_bu_logf(TRITONSERVER_LogLevel level, const char *file, int line, const char *fmt, ...) {
  if (!TRITONSERVER_LogIsEnabled(level)) {
    return;
  }
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (n < 0) {
    return;
  }
  TRITONSERVER_Error *err = TRITONSERVER_LogMessage(level, file, line, msg);
  if (err != NULL) {
    TRITONSERVER_ErrorDelete(err);
  }
}

void nrd_bu_error_log_and_delete(TRITONSERVER_Error *err, const char *what) {
  if (err == NULL) {
    return;
  }
  nrd_bu_logf(TRITONSERVER_LOG_ERROR, __FILE__, __LINE__, "%s: %s", what, TRITONSERVER_ErrorMessage(err));
  TRITONSERVER_ErrorDelete(err);
}

uint64_t nrd_bu_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void nrd_bu_sleep_ms(uint64_t ms) {
  struct timespec req = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L};
  struct timespec rem;
  while (nanosleep(&req, &rem) != 0 && errno == EINTR) {
    req = rem;
  }
}

TRITONSERVER_Error *nrd_bu_api_version_check(const char *backend_name) {
  uint32_t major = 0, minor = 0;
  TRITONSERVER_Error *err = TRITONBACKEND_ApiVersion(&major, &minor);
  if (err != NULL) {
    return err;
  }
  if (major != TRITONBACKEND_API_VERSION_MAJOR || minor < TRITONBACKEND_API_VERSION_MINOR) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_UNSUPPORTED,
                             "backend '%s' needs backend API %d.%d or a later minor version; the "
                             "server provides %u.%u",
                             backend_name, TRITONBACKEND_API_VERSION_MAJOR, TRITONBACKEND_API_VERSION_MINOR, major,
                             minor);
  }
  return NULL;
}

bool nrd_bu_request_respond_error(TRITONBACKEND_Request *request, TRITONSERVER_Error *err) {
  TRITONBACKEND_Response *response = NULL;
  TRITONSERVER_Error *e = TRITONBACKEND_ResponseNew(&response, request);
  if (e != NULL) {
    nrd_bu_error_log_and_delete(e, "cannot create error response");
    return false;
  }
  e = TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, err);
  if (e != NULL) {
    nrd_bu_error_log_and_delete(e, "cannot send error response");
    return false;
  }
  return true;
}

void nrd_bu_request_release(TRITONBACKEND_Request *request) {
  nrd_bu_error_log_and_delete(TRITONBACKEND_RequestRelease(request, TRITONSERVER_REQUEST_RELEASE_ALL),
                              "cannot release request");
}

void nrd_bu_requests_fail(TRITONBACKEND_ModelInstance *instance, TRITONBACKEND_Request **requests, uint32_t count,
                          TRITONSERVER_Error *err) {
  for (uint32_t i = 0; i < count; ++i) {
    if (requests[i] == NULL) {
      continue;
    }
    nrd_bu_request_respond_error(requests[i], err);
    if (instance != NULL) {
      nrd_bu_error_log_and_delete(TRITONBACKEND_ModelInstanceReportStatistics(instance, requests[i], false, 0, 0, 0, 0),
                                  "cannot report statistics");
    }
    nrd_bu_request_release(requests[i]);
  }
  if (err != NULL) {
    TRITONSERVER_ErrorDelete(err);
  }
}
