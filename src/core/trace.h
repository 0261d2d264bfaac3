/* Inference tracing. This build has no tracing: creating a trace fails with
 * UNSUPPORTED, so no TRITONSERVER_InferenceTrace object can ever exist. The
 * name functions work, and the calls a backend or client makes with a NULL
 * trace in normal (untraced) operation succeed as no-ops:
 * TRITONSERVER_InferenceTraceDelete(NULL) and
 * TRITONSERVER_InferenceTraceReportActivity(NULL, ...). */
#ifndef NRD_TRACE_H
#define NRD_TRACE_H

#include "triton/core/tritonserver.h"

/* The message every unsupported trace call returns. */
#define NRD_TRACE_UNSUPPORTED_MSG "inference tracing is not supported by this build"

#endif
