/* ModelInfer and ModelStreamInfer: turning ModelInferRequest messages into
 * TRITONSERVER inference requests and responses back into messages.
 *
 * Threads: handlers run on the call's loop thread; response and release
 * callbacks run on core/backend threads, serialize there, and post the
 * bytes to the loop. */
#ifndef NRD_SRV_GRPC_INFER_H
#define NRD_SRV_GRPC_INFER_H

#include "grpc_call.h"

/* Creates the process-wide response allocator used by every gRPC request.
 * Returns an error (caller owns it) if it cannot. Main thread, before the
 * loops start. */
TRITONSERVER_Error *nrd_srv_grpc_infer_init(void);

/* Deletes the allocator; only once no request is in flight. Main thread. */
void nrd_srv_grpc_infer_fini(void);

/* The method entries (see grpc_call.h for when each callback runs). */
extern const nrd_srv_grpc_method nrd_srv_grpc_model_infer_method;
extern const nrd_srv_grpc_method nrd_srv_grpc_model_stream_infer_method;

#endif
