/* Starting and stopping nereid's HTTP endpoints (the HTTP/REST API, the
 * metrics endpoint and the Vertex AI endpoint) as the command line asks.
 *
 * Threads: main thread only. */
#ifndef NRD_SRV_HTTP_ENDPOINTS_H
#define NRD_SRV_HTTP_ENDPOINTS_H

#include "cli.h"
#include "http_server.h"

typedef struct nrd_srv_http_endpoints {
  nrd_srv_http *api; /* NULL with --allow-http=false */
  nrd_srv_http *metrics; /* NULL with --allow-metrics=false */
  nrd_srv_http *vertex; /* NULL unless --allow-vertex-ai */
  nrd_srv_http *sagemaker; /* NULL unless --allow-sagemaker */
} nrd_srv_http_endpoints;

/* Starts the endpoints `cli` enables on `server` and prints where each
 * listens on stdout. server, shm, log and tracer (may be NULL) are
 * borrowed and must outlive the endpoints. Returns 0, or -1 after printing why to stderr, with nothing
 * left running. Main thread. */
int nrd_srv_http_endpoints_start(TRITONSERVER_Server *server, const nrd_srv_cli *cli, nrd_srv_shm *shm,
                                 nrd_srv_log_settings *log, nrd_srv_tracer *tracer, nrd_srv_http_endpoints *ep);

/* Stops what nrd_srv_http_endpoints_start started, waiting up to
 * wait_secs for requests in flight; safe on a zeroed struct. Main thread. */
/* False when an endpoint still had work in the core (see nrd_srv_http_stop). */
bool nrd_srv_http_endpoints_stop(nrd_srv_http_endpoints *ep, unsigned wait_secs);

/* Begins a graceful stop of every endpoint without waiting (see
 * nrd_srv_http_drain); safe on a zeroed struct. Main thread. */
void nrd_srv_http_endpoints_drain(nrd_srv_http_endpoints *ep);

#endif
