/* The scheduler interface: how requests reach model instances.
 *
 * A model owns one scheduler. Front ends (through InferAsync) push requests;
 * each instance thread pulls the next batch. The default scheduler here hands
 * out one request per execution; the dynamic and sequence batchers implement
 * the same operations. */
#ifndef NRD_SCHEDULER_H
#define NRD_SCHEDULER_H

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
  uint32_t (*next_batch)(nrd_scheduler *s, TRITONBACKEND_ModelInstance *inst,
                         TRITONSERVER_InferenceRequest **out, uint32_t max);
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

/* Creates the default scheduler: a FIFO of single requests feeding idle
 * instances. Returns NULL on out-of-memory. */
nrd_scheduler *nrd_default_scheduler_new(TRITONBACKEND_Model *model);

#endif
