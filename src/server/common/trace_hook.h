/* What the HTTP and gRPC front ends see of request tracing: a tracer and a
 * per-request handle, both reached through function tables. trace/tracer.c
 * makes the real ones and main.c hands the tracer to the front ends, so
 * the front ends call downward only and never link the tracer (the bare
 * transport benches run with none). Every function here accepts NULL for
 * "no tracer" or "not traced".
 *
 * Threads: as the functions behind the tables: any thread. */
#ifndef NRD_SRV_TRACE_HOOK_H
#define NRD_SRV_TRACE_HOOK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <jansson.h>

#include "triton/core/tritonserver.h"

typedef struct nrd_srv_tracer nrd_srv_tracer;
typedef struct nrd_srv_trace nrd_srv_trace;

/* The tracer's table; see the wrappers below for each contract. */
typedef struct nrd_srv_tracer_ops {
  nrd_srv_trace *(*sample)(nrd_srv_tracer *t, const char *model, const char *traceparent);
  TRITONSERVER_Error *(*get)(nrd_srv_tracer *t, const char *model, json_t **out);
  TRITONSERVER_Error *(*update)(nrd_srv_tracer *t, const char *model, const json_t *body, json_t **out);
} nrd_srv_tracer_ops;

/* A handle's table. */
typedef struct nrd_srv_trace_ops {
  TRITONSERVER_InferenceTrace *(*core)(nrd_srv_trace *h);
  void (*mark)(nrd_srv_trace *h, const char *name, uint64_t ns);
  void (*done)(nrd_srv_trace *h);
} nrd_srv_trace_ops;

/* The first member of every tracer. `active` is kept by the tracer: some
 * setting might trace a request now. */
struct nrd_srv_tracer {
  const nrd_srv_tracer_ops *ops;
  atomic_bool active;
};

/* The first member of every handle. */
struct nrd_srv_trace {
  const nrd_srv_trace_ops *ops;
};

/* A handle when this request of `model` is to be traced (NULL otherwise,
 * also when `t` is NULL). Cheap when tracing is off. `traceparent` is the
 * request's W3C traceparent header (NULL: none): in opentelemetry mode a
 * valid one makes the request traced whatever the rate and count, as a
 * child of the client's span. */
static inline nrd_srv_trace *nrd_srv_tracer_sample(nrd_srv_tracer *t, const char *model, const char *traceparent) {
  return t ? t->ops->sample(t, model, traceparent) : NULL;
}

/* Whether some setting might trace a request now (a relaxed read): front
 * ends take receive times only then. False for NULL. */
static inline bool nrd_srv_tracer_active(const nrd_srv_tracer *t) {
  return t && atomic_load_explicit(&t->active, memory_order_relaxed);
}

/* The clock of trace timestamps (CLOCK_MONOTONIC, ns). */
static inline uint64_t nrd_srv_trace_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The core trace to pass to TRITONSERVER_ServerInferAsync, once; the core
 * gives it back through its release callback whatever InferAsync returns.
 * NULL for a NULL handle. */
static inline TRITONSERVER_InferenceTrace *nrd_srv_trace_core(nrd_srv_trace *h) { return h ? h->ops->core(h) : NULL; }

/* Adds a front-end mark (`name` is a static string) at `ns` (monotonic
 * clock); the current time when ns is 0. No-op for a NULL handle and at
 * a level without TIMESTAMPS. */
static inline void nrd_srv_trace_mark(nrd_srv_trace *h, const char *name, uint64_t ns) {
  if (h) h->ops->mark(h, name, ns);
}

/* The front end is finished with the handle (reply sent or given up);
 * NULL is a no-op. Exactly once per handle. */
static inline void nrd_srv_trace_done(nrd_srv_trace *h) {
  if (h) h->ops->done(h);
}

/* The trace extension. `model` NULL or "" means the global settings.
 * get: *out is {"trace_level":[...],"trace_rate":"N",...} (caller frees).
 * update: applies `body` (a JSON object: string values, trace_level an
 * array, null resets a value) after checking all of it; on error nothing
 * changes and *out is NULL. Errors carry Triton's codes and messages; a
 * NULL tracer (a front end started without one) answers UNAVAILABLE, as
 * Triton built without tracing. */
static inline TRITONSERVER_Error *nrd_srv_tracer_get(nrd_srv_tracer *t, const char *model, json_t **out) {
  *out = NULL;
  if (!t) return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, "the server does not support trace");
  return t->ops->get(t, model, out);
}
static inline TRITONSERVER_Error *nrd_srv_tracer_update(nrd_srv_tracer *t, const char *model, const json_t *body,
                                                        json_t **out) {
  *out = NULL;
  if (!t) return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, "the server does not support trace");
  return t->ops->update(t, model, body, out);
}

#endif
