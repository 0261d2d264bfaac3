/* Error values: the object behind TRITONSERVER_Error.
 *
 * An error is a heap object owned by whoever receives it; it is released with
 * TRITONSERVER_ErrorDelete. When memory runs out while building an error, a
 * single static sentinel (code INTERNAL, message "out of memory") is returned
 * instead, so callers never see NULL for a failure; ErrorDelete recognises
 * the sentinel and leaves it alone. */
#ifndef NRD_ERROR_H
#define NRD_ERROR_H

#include "triton/core/tritonserver.h"

struct TRITONSERVER_Error {
  TRITONSERVER_Error_Code code;
  char *msg; /* NUL-terminated, owned by the error */
};

/* Builds an error with a printf-style message. Never returns NULL: on
 * allocation failure it returns the out-of-memory sentinel. The caller owns
 * the result and releases it with TRITONSERVER_ErrorDelete. Any thread. */
TRITONSERVER_Error *nrd_error_new(TRITONSERVER_Error_Code code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* True when `err` is the static out-of-memory sentinel (which must never be
 * freed or modified). Any thread. */
bool nrd_error_is_oom(const TRITONSERVER_Error *err);

/* Evaluates `expr` (a TRITONSERVER_Error * expression) once and returns the
 * error from the enclosing function when it is non-NULL. One of the
 * project's two control-flow macros; use it only where no cleanup is
 * pending. */
#define NRD_RETURN_IF_ERROR(expr)                                                                                      \
  do {                                                                                                                 \
    TRITONSERVER_Error *nrd_err__ = (expr);                                                                            \
    if (nrd_err__ != NULL) return nrd_err__;                                                                           \
  } while (0)

/* Returns INVALID_ARG with the message `what` from the enclosing function
 * when `cond` is false: the argument checks at the public entry points,
 * before anything needs cleaning up. */
#define NRD_ARG_CHECK(cond, what)                                                                                      \
  do {                                                                                                                 \
    if (!(cond)) return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "%s", what);                                     \
  } while (0)

#endif
