/* The rate limiter (--rate-limit=execution_count): a model instance runs a
 * batch only while it holds the resources its instance group's
 * `rate_limiter` asks for, taken from pools shared by the whole server, and
 * instances take turns by priority. See docs/rate-limiter.md. */
#ifndef NRD_RATE_LIMITER_H
#define NRD_RATE_LIMITER_H

#include <stddef.h>

#include <jansson.h>

#include "server_options.h"
#include "triton/core/tritonserver.h"

typedef struct nrd_rate_limiter nrd_rate_limiter;
typedef struct nrd_rl_client nrd_rl_client;

/* A limiter for `mode` with the resources given on the command line
 * (copied). *out is NULL in mode OFF: nothing is limited. The caller frees
 * it with nrd_rate_limiter_free once no client is left. Any thread. */
TRITONSERVER_Error *nrd_rate_limiter_new(TRITONSERVER_RateLimitMode mode, const nrd_rate_limit_resource *res, size_t n,
                                         nrd_rate_limiter **out);
void nrd_rate_limiter_free(nrd_rate_limiter *rl);

/* Registers an instance of `model` on `device` that needs what `cfg` (its
 * group's rate_limiter object, may be NULL) says. Refuses, with Triton's
 * messages, a resource both global and per device, and needs larger than
 * the counts given on the command line. *out is the instance's handle,
 * freed by nrd_rate_limiter_unregister. Loader thread. */
TRITONSERVER_Error *nrd_rate_limiter_register(nrd_rate_limiter *rl, const char *model, const json_t *cfg, int device,
                                              nrd_rl_client **out);
void nrd_rate_limiter_unregister(nrd_rate_limiter *rl, nrd_rl_client *c);

/* Blocks until `c` may run a batch (its turn and its resources), takes the
 * resources; release gives them back after the batch. The instance's own
 * thread, in pairs. */
void nrd_rate_limiter_acquire(nrd_rate_limiter *rl, nrd_rl_client *c);
void nrd_rate_limiter_release(nrd_rate_limiter *rl, nrd_rl_client *c);

#endif
