/* Request tracing as tritonserver's trace modes do it, shared by the HTTP
 * and gRPC front ends: settings (global and per model, from --trace-config
 * and Triton's trace extension), sampling, and either the JSON trace file
 * ("triton" mode) or OpenTelemetry spans ("opentelemetry" mode, exported
 * by otel_exporter.c). See docs/tracing.md.
 *
 * A front end asks nrd_srv_tracer_sample for each inference; a sampled
 * request gets a handle whose core trace goes to
 * TRITONSERVER_ServerInferAsync, and the front end adds its own marks
 * (INFER_RESPONSE_COMPLETE, HTTP_SEND_START, ...) and says when it is done.
 * Once the front end and every core trace of the request (an ensemble's
 * steps have their own) are done, the request's trace objects join the
 * file's pending traces, written every log_frequency traces (indexed files
 * <file>.0, <file>.1, ...) or at the end.
 *
 * Threads: every function may be called from any thread, except
 * nrd_srv_tracer_free. */
#ifndef NRD_SRV_TRACER_H
#define NRD_SRV_TRACER_H

#include <stdint.h>

#include <jansson.h>

#include "otel_exporter.h"
#include "trace_hook.h"
#include "triton/core/tritonserver.h"

/* The command line's settings. `level` is a TRITONSERVER_InferenceTraceLevel
 * mask (0: off). */
typedef struct nrd_srv_trace_config {
  unsigned level;
  int64_t rate; /* trace one request in `rate`; default 1000 */
  int64_t count; /* traces left to take; -1: no limit */
  int64_t log_frequency; /* write an indexed file every N traces; 0: at the end */
  const char *file; /* NULL or "": none (triton mode cannot trace) */
  /* mode=opentelemetry: where spans go (read by nrd_srv_tracer_new); NULL:
   * triton mode, traces go to `file`. */
  const nrd_srv_otel_config *otel;
} nrd_srv_trace_config;

/* A tracer with `cfg` (copied); `server` is borrowed, for model checks.
 * NULL with a one-line message in err when the OpenTelemetry settings are
 * wrong or memory runs out. Free with nrd_srv_tracer_free. */
nrd_srv_tracer *nrd_srv_tracer_new(TRITONSERVER_Server *server, const nrd_srv_trace_config *cfg, char *err,
                                   size_t errlen);

/* Writes what is pending (the file, or a last export of the spans) and
 * frees. Call once the front ends and the server have stopped (no trace
 * can still be in flight); NULL is a no-op. */
void nrd_srv_tracer_free(nrd_srv_tracer *t);

/* The sampling, marks and trace extension calls are the inline wrappers
 * of trace_hook.h, which every tracer made here answers. */

#endif
