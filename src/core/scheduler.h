/* The scheduler interface: how requests reach model instances.
 *
 * A model owns one scheduler. Front ends (through InferAsync) push requests;
 * each instance thread pulls the next batch. The default scheduler here hands
 * out one request per execution; the dynamic and sequence batchers implement
 * the same operations. */
#ifndef NRD_SCHEDULER_H
#define NRD_SCHEDULER_H

#include <stdbool.h>
#include <stdint.h>

#include "triton/core/tritonbackend.h"

typedef struct nrd_scheduler nrd_scheduler;

typedef struct nrd_scheduler_ops {
  /* Queues `req`; on success the scheduler owns it. On error (queue full,
   * stopping) nothing is kept and the caller still owns `req`. Any thread. */
  TRITONSERVER_Error *(*enqueue)(nrd_scheduler *s, TRITONSERVER_InferenceRequest *req);
  /* Blocks until requests are available for `inst`, stores at most `max` of
   * them in `out` and returns how many; returns 0 once the scheduler is
   * stopped and drained. Instance thread only. */
  uint32_t (*next_batch)(nrd_scheduler *s, TRITONBACKEND_ModelInstance *inst, TRITONSERVER_InferenceRequest **out,
                         uint32_t max);
  /* Stops accepting work; queued requests are still handed out, then
   * next_batch returns 0. Any thread, once. */
  void (*stop)(nrd_scheduler *s);
  /* Frees the scheduler; the queue must be empty (after stop + drain). */
  void (*destroy)(nrd_scheduler *s);
  /* Optional (NULL: not told): `req`, which ran at least once, is being
   * released for good, by its backend or the core. Any thread; the
   * request is still intact. */
  void (*released)(nrd_scheduler *s, TRITONSERVER_InferenceRequest *req);
} nrd_scheduler_ops;

struct nrd_scheduler {
  const nrd_scheduler_ops *ops;
};

/* One instance a scheduler may hand requests to, as the model describes it. */
typedef struct nrd_exec_instance {
  TRITONBACKEND_ModelInstance *inst;
  bool passive; /* has no thread and never runs: gets no work */
  bool rate_limited; /* under the rate limiter: never lent to a caller */
} nrd_exec_instance;

/* What a scheduler runs requests on, given by the model to the scheduler's
 * constructor, so that no scheduler reaches into instances or the model's
 * instance list. The constructor copies what it keeps; the instances
 * outlive the scheduler. */
typedef struct nrd_executor {
  /* Runs one batch through the backend's Execute on the calling thread and
   * answers the requests itself when Execute fails (nrd_instance_execute).
   * Never two calls for one instance at a time. */
  void (*execute)(TRITONBACKEND_ModelInstance *inst, TRITONSERVER_InferenceRequest **reqs, uint32_t n);
  const nrd_exec_instance *instances;
  uint32_t n_instances;
} nrd_executor;

/* Creates the default scheduler: a FIFO of single requests feeding idle
 * instances of `ex`, running a request on the caller's thread when that is
 * cheaper (docs/core.md, "Inline execution"). `model` (not counted) names
 * the model in errors. Returns NULL on out-of-memory. Loader thread. */
nrd_scheduler *nrd_default_scheduler_new(TRITONBACKEND_Model *model, const nrd_executor *ex);

/* Triton's test hook TRITONSERVER_DELAY_SCHEDULER=N: a model's scheduler
 * holds every request until N are queued, then runs as usual (once per
 * scheduler). Returns N, 0 when unset or not a positive count (warned).
 * Read when a scheduler is made; any thread. */
uint32_t nrd_scheduler_delay_count(const char *model_name);

#endif
