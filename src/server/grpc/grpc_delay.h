/* Triton's test-only delay hooks for the gRPC front end: environment
 * variables that hold parts of a call's life so that tests of client
 * timeouts and cancellation windows can hit those windows on purpose.
 * Read once when the front end starts; all zero (no cost beyond a test of
 * a zero field) when unset. What each one holds, and how it differs from
 * Triton (which sleeps on a handler thread; Nereid holds only the call):
 * docs/grpc.md, "Triton's test hooks". */
#ifndef NRD_SRV_GRPC_DELAY_H
#define NRD_SRV_GRPC_DELAY_H

#include <stdint.h>

typedef struct nrd_srv_grpc_delays {
  /* TRITONSERVER_SERVER_DELAY_GRPC_RESPONSE_SEC (whole seconds): every
   * non-inference RPC is handled this long after its request arrived. */
  uint64_t common_us;
  /* TRITONSERVER_DELAY_GRPC_PROCESS (ms): a ModelInfer request reaches the
   * core this long after it arrived; cancelled meanwhile, it never does. */
  uint64_t process_us;
  /* TRITONSERVER_DELAY_GRPC_RESPONSE (ms): each message a ModelStreamInfer
   * stream gets is written this long after it was ready and after the one
   * before it was written. */
  uint64_t response_us;
  /* TRITONSERVER_DELAY_GRPC_NOTIFICATION (ms): the inference handlers learn
   * that a call ended early (client cancel, deadline, reset) this long
   * later, and only then cancel its requests in the core. */
  uint64_t notification_us;
  /* TRITONSERVER_DELAY_GRPC_ENQUEUE (ms): a ModelInfer response that
   * completes for a call already cancelled holds the thread that delivered
   * it this long before handing the call back to its loop. */
  uint64_t enqueue_us;
} nrd_srv_grpc_delays;

/* Fills d from the environment. A value that is not a whole number in
 * range (0 to 3,600 s, or 3,600,000 ms) is ignored with a warning naming
 * the variable; each hook that is set is logged once. Main thread, before
 * the front end starts (getenv). */
void nrd_srv_grpc_delays_from_env(nrd_srv_grpc_delays *d);

#endif
