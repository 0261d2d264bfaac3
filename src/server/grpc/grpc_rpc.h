/* The table of gRPC methods Nereid serves: GRPCInferenceService and
 * grpc.health.v1.Health. The non-inference RPCs are implemented in
 * grpc_rpc.c; inference in grpc_infer.c. */
#ifndef NRD_SRV_GRPC_RPC_H
#define NRD_SRV_GRPC_RPC_H

#include <stddef.h>

#include "grpc_call.h"

/* The method for an HTTP/2 :path (not NUL-terminated, len bytes), or NULL
 * if unknown. The returned entry is static. Any thread. */
const nrd_srv_grpc_method *nrd_srv_grpc_method_find(const char *path, size_t len);

#endif
