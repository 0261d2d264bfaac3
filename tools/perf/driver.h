/* The transport nrd_perf drives: the in-process API, HTTP or gRPC behind
 * one small table of functions, so the load and measurement code does not
 * know which one it talks to.
 *
 * Threads: metadata/config/statistics/prepare/destroy run on the main
 * thread. `send` may be called from any thread (the pacer, or the thread
 * that delivers a completion), but never twice for the same slot before
 * that slot's completion. The completion callback runs on a transport
 * thread (a core thread in process, the HTTP or gRPC event-loop thread) and may
 * call `send` again from there. */
#ifndef NRD_PERF_DRIVER_H
#define NRD_PERF_DRIVER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "options.h"
#include "tensors.h"

/* Completion of slot `slot`'s request. `error` is NULL on success, else a
 * message valid only during the call. */
typedef void (*nrd_perf_done_fn)(void *ctx, int slot, const char *error);

typedef struct nrd_perf_driver nrd_perf_driver;

typedef struct nrd_perf_driver_ops {
  /* New JSON objects owned by the caller, or NULL with a message in err.
   * metadata: v2 model metadata; config: the model configuration;
   * statistics: {"model_stats": [...]} of the model. */
  json_t *(*metadata)(nrd_perf_driver *d, char *err, size_t errlen);
  json_t *(*config)(nrd_perf_driver *d, char *err, size_t errlen);
  json_t *(*statistics)(nrd_perf_driver *d, char *err, size_t errlen);
  /* Builds `nslots` reusable requests of tensors `t` (which must outlive
   * the driver). Completions go to done(ctx, ...). */
  bool (*prepare)(nrd_perf_driver *d, const nrd_perf_tensors *t, int nslots, nrd_perf_done_fn done, void *ctx,
                  char *err, size_t errlen);
  /* Starts slot's request. On false nothing is in flight and done() is not
   * called; err says why. */
  bool (*send)(nrd_perf_driver *d, int slot, char *err, size_t errlen);
  /* Frees everything; nothing may be in flight. */
  void (*destroy)(nrd_perf_driver *d);
} nrd_perf_driver_ops;

struct nrd_perf_driver {
  const nrd_perf_driver_ops *ops;
};

/* Constructors: NULL with a message in err on failure. The options must
 * outlive the driver. inprocess starts a server on o->repository and loads
 * o->model; http and grpc connect lazily (the first RPC fails when the
 * server does not answer). */
nrd_perf_driver *nrd_perf_driver_inprocess_new(const nrd_perf_opts *o, char *err, size_t errlen);
nrd_perf_driver *nrd_perf_driver_http_new(const nrd_perf_opts *o, char *err, size_t errlen);
nrd_perf_driver *nrd_perf_driver_grpc_new(const nrd_perf_opts *o, char *err, size_t errlen);

#endif
