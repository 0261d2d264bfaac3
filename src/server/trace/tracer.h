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
#include "triton/core/tritonserver.h"

typedef struct nrd_srv_tracer nrd_srv_tracer;
typedef struct nrd_srv_trace nrd_srv_trace;

/* The command line's settings. `level` is a TRITONSERVER_InferenceTraceLevel
 * mask (0: off). */
typedef struct nrd_srv_trace_config {
  unsigned level;
  int64_t rate;          /* trace one request in `rate`; default 1000 */
  int64_t count;         /* traces left to take; -1: no limit */
  int64_t log_frequency; /* write an indexed file every N traces; 0: at the end */
  const char *file;      /* NULL or "": none (triton mode cannot trace) */
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

/* A handle when this request of `model` is to be traced (NULL otherwise,
 * also when `t` is NULL). Cheap when tracing is off. `traceparent` is the
 * request's W3C traceparent header (NULL: none): in opentelemetry mode a
 * valid one makes the request traced whatever the rate and count, as a
 * child of the client's span. */
nrd_srv_trace *nrd_srv_tracer_sample(nrd_srv_tracer *t, const char *model, const char *traceparent);

/* Whether some setting might trace a request now (a relaxed read): front
 * ends take receive times only then. False for NULL. Any thread. */
bool nrd_srv_tracer_active(const nrd_srv_tracer *t);

/* The clock of trace timestamps (CLOCK_MONOTONIC, ns). Any thread. */
uint64_t nrd_srv_trace_now_ns(void);

/* The core trace to pass to TRITONSERVER_ServerInferAsync, once; the core
 * gives it back through its release callback whatever InferAsync returns.
 * NULL for a NULL handle. */
TRITONSERVER_InferenceTrace *nrd_srv_trace_core(nrd_srv_trace *h);

/* Adds a front-end mark (`name` is a static string) at `ns` (monotonic
 * clock); the current time when ns is 0. No-op for a NULL handle and at
 * a level without TIMESTAMPS. */
void nrd_srv_trace_mark(nrd_srv_trace *h, const char *name, uint64_t ns);

/* The front end is finished with the handle (reply sent or given up);
 * NULL is a no-op. Exactly once per handle. */
void nrd_srv_trace_done(nrd_srv_trace *h);

/* The trace extension. `model` NULL or "" means the global settings.
 * get: *out is {"trace_level":[...],"trace_rate":"N",...} (caller frees).
 * update: applies `body` (a JSON object: string values, trace_level an
 * array, null resets a value) after checking all of it; on error nothing
 * changes. Errors carry Triton's codes and messages; a NULL tracer (a
 * front end started without one) answers UNAVAILABLE, as Triton built
 * without tracing. */
TRITONSERVER_Error *nrd_srv_tracer_get(nrd_srv_tracer *t, const char *model, json_t **out);
TRITONSERVER_Error *nrd_srv_tracer_update(nrd_srv_tracer *t, const char *model, const json_t *body, json_t **out);

#endif
