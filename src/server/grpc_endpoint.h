/* Starting and stopping nereid's gRPC endpoint as the command line asks.
 *
 * Threads: main thread only. */
#ifndef NRD_SRV_GRPC_ENDPOINT_H
#define NRD_SRV_GRPC_ENDPOINT_H

#include "cli.h"
#include "grpc_server.h"

/* Starts the gRPC endpoint on `server` unless --allow-grpc=false (then
 * *out is NULL) and prints where it listens on stdout. server, shm, log and
 * tracer (may be NULL) are borrowed and must outlive the endpoint. Returns 0, or -1 after
 * printing why to stderr, with nothing left running. */
int nrd_srv_grpc_endpoint_start(TRITONSERVER_Server *server, const nrd_srv_cli *cli, nrd_srv_shm *shm,
                                nrd_srv_log_settings *log, nrd_srv_tracer *tracer, nrd_srv_grpc **out);

/* Stops what nrd_srv_grpc_endpoint_start started, waiting up to wait_secs
 * for requests in flight; NULL is a no-op. */
bool nrd_srv_grpc_endpoint_stop(nrd_srv_grpc *g, unsigned wait_secs);

/* Begins a graceful stop without waiting (see nrd_srv_grpc_drain); NULL is
 * a no-op. Main thread. */
void nrd_srv_grpc_endpoint_drain(nrd_srv_grpc *g);

#endif
