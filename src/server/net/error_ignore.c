/* Errors the server drops on purpose (error_ignore.h). */
#include "error_ignore.h"

#include <stdio.h>

void nrd_srv_error_ignore(TRITONSERVER_Error *err, const char *file, int line, const char *why) {
  if (!err) return;
  if (TRITONSERVER_LogIsEnabled(TRITONSERVER_LOG_VERBOSE)) {
    char msg[640];
    snprintf(msg, sizeof msg, "%s (ignored): %s", why, TRITONSERVER_ErrorMessage(err));
    TRITONSERVER_Error *e = TRITONSERVER_LogMessage(TRITONSERVER_LOG_VERBOSE, file, line, msg);
    if (e) TRITONSERVER_ErrorDelete(e); /* a line that cannot be logged: nothing more to do */
  }
  TRITONSERVER_ErrorDelete(err);
}
