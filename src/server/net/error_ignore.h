/* Errors the server drops on purpose, so that none is dropped without a
 * word: the reason and the error's message go to the verbose log (level
 * 1), with the caller's file and line. For errors that change nothing for
 * anyone: the request is answered another way, the object is gone already,
 * an unknown readiness counts as "not ready".
 *
 * Not for TRITONSERVER_LogMessage's own errors: a line that could not be
 * logged cannot be logged either (those are deleted where they happen). */
#ifndef NRD_SRV_ERROR_IGNORE_H
#define NRD_SRV_ERROR_IGNORE_H

#include "triton/core/tritonserver.h"

/* Logs and deletes `err`; NULL does nothing. Takes ownership of `err`.
 * Any thread. */
void nrd_srv_error_ignore(TRITONSERVER_Error *err, const char *file, int line, const char *why);
#define NRD_SRV_IGNORE(err, why) nrd_srv_error_ignore((err), __FILE__, __LINE__, (why))

#endif
