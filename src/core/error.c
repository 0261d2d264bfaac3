/* TRITONSERVER_Error: code + owned message, with a static sentinel for the
 * out-of-memory case so that reporting a failure can itself never fail. */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char oom_text[] = "out of memory";
static struct TRITONSERVER_Error oom_error = {TRITONSERVER_ERROR_INTERNAL, oom_text};

bool nrd_error_is_oom(const TRITONSERVER_Error *err) { return err == &oom_error; }

static TRITONSERVER_Error *error_alloc(TRITONSERVER_Error_Code code, char *msg) {
  if (msg == NULL) return &oom_error;
  TRITONSERVER_Error *err = malloc(sizeof(*err));
  if (err == NULL) {
    free(msg);
    return &oom_error;
  }
  err->code = code;
  err->msg = msg;
  return err;
}

TRITONSERVER_Error *nrd_error_new(TRITONSERVER_Error_Code code, const char *fmt, ...) {
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *msg = NULL;
  if (n >= 0) {
    msg = malloc((size_t)n + 1);
    if (msg != NULL) vsnprintf(msg, (size_t)n + 1, fmt, ap2);
  }
  va_end(ap2);
  return error_alloc(code, msg);
}

TRITONSERVER_Error *TRITONSERVER_ErrorNew(TRITONSERVER_Error_Code code, const char *msg) {
  return error_alloc(code, strdup(msg != NULL ? msg : ""));
}

void TRITONSERVER_ErrorDelete(TRITONSERVER_Error *error) {
  if (error == NULL || error == &oom_error) return;
  free(error->msg);
  free(error);
}

TRITONSERVER_Error_Code TRITONSERVER_ErrorCode(TRITONSERVER_Error *error) {
  return error != NULL ? error->code : TRITONSERVER_ERROR_UNKNOWN;
}

const char *TRITONSERVER_ErrorCodeString(TRITONSERVER_Error *error) {
  if (error == NULL) return "OK";
  switch (error->code) {
    case TRITONSERVER_ERROR_UNKNOWN: return "Unknown";
    case TRITONSERVER_ERROR_INTERNAL: return "Internal";
    case TRITONSERVER_ERROR_NOT_FOUND: return "Not found";
    case TRITONSERVER_ERROR_INVALID_ARG: return "Invalid argument";
    case TRITONSERVER_ERROR_UNAVAILABLE: return "Unavailable";
    case TRITONSERVER_ERROR_UNSUPPORTED: return "Unsupported";
    case TRITONSERVER_ERROR_ALREADY_EXISTS: return "Already exists";
    case TRITONSERVER_ERROR_CANCELLED: return "Cancelled";
  }
  return "<invalid code>";
}

const char *TRITONSERVER_ErrorMessage(TRITONSERVER_Error *error) { return error != NULL ? error->msg : ""; }
