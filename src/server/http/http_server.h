/* The HTTP/REST front end (KServe v2 with Triton's extensions) and the
 * Prometheus metrics endpoint, served by our own HTTP/1.1 layer on epoll (http_conn.c).
 *
 * Threads: nrd_srv_http_start/stop run on the main thread. The front end
 * owns a fixed set of event-loop threads; inference completions arrive on
 * core threads and are posted back to the loop that owns the connection. */
#ifndef NRD_SRV_HTTP_SERVER_H
#define NRD_SRV_HTTP_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "log_settings.h"
#include "shm_registry.h"
#include "restrict.h"
#include "trace_hook.h"
#include <stdbool.h>

#include "triton/core/tritonserver.h"

typedef struct nrd_srv_http nrd_srv_http;

/* Where and how one endpoint listens. */
/* Seconds a client may be slow (see client_timeout_secs). */
#define NRD_SRV_HTTP_CLIENT_TIMEOUT_DEFAULT 120

typedef struct nrd_srv_http_loop nrd_srv_http_loop;
typedef struct nrd_srv_http_req nrd_srv_http_req;

/* An endpoint that serves other routes than KServe's (http/cloud/: Vertex
 * AI, SageMaker), as a table the front end calls through: the front end
 * never names the clouds, and a new kind of endpoint is one more table. */
typedef struct nrd_srv_http_endpoint_ops {
  const char *name; /* in logs, e.g. "Vertex AI" */
  /* Binary tensor data framed by a Content-Type of "<binary_mime>N" (N:
   * the JSON header's size) on requests; NULL: KServe's framing. */
  const char *binary_mime;
  bool reply_framed; /* replies are framed the same way (else KServe's headers) */
  /* Answers one request (now or later); ctx is the endpoint's. Loop thread. */
  void (*route)(nrd_srv_http_loop *loop, nrd_srv_http_req *req, void *ctx);
  /* Frees ctx once the loops have stopped; NULL: nothing to free. */
  void (*free)(void *ctx);
} nrd_srv_http_endpoint_ops;

typedef struct nrd_srv_http_options {
  const char *address; /* e.g. "0.0.0.0" */
  int port; /* 0: pick a free port */
  bool reuse_port; /* bind with SO_REUSEPORT (--reuse-http-port) */
  int threads; /* event-loop threads, >= 1 */
  size_t max_input_size; /* largest request body accepted, bytes */
  int metrics_only; /* 1: serve only GET /metrics (the metrics port) */
  int client_timeout_secs; /* idle, slow head, stalled body or unread reply: closed; 0: the default */
  /* Shared with the gRPC front end; borrowed, they must outlive the front
   * end. NULL only with metrics_only. */
  nrd_srv_shm *shm; /* system shared memory regions */
  nrd_srv_log_settings *log; /* /v2/logging */
  nrd_srv_tracer *tracer; /* tracing (may be NULL) */
  const nrd_srv_restrictions *restricted; /* --http-restricted-api (may be NULL: all open) */
  const char *header_forward; /* --http-header-forward-pattern (NULL: none); compiled at start */
  /* Non-NULL: serve this endpoint's routes instead of KServe's. The front
   * end owns endpoint_ctx from the call on: endpoint->free frees it with
   * the front end, or at once when it cannot start. */
  const nrd_srv_http_endpoint_ops *endpoint;
  void *endpoint_ctx;
} nrd_srv_http_options;

/* Binds and starts serving `server` (borrowed: it must outlive the front
 * end). On success *out is the caller's to stop with nrd_srv_http_stop. On
 * failure returns the error (caller owns it) and *out is NULL. Main thread. */
TRITONSERVER_Error *nrd_srv_http_start(TRITONSERVER_Server *server, const nrd_srv_http_options *opts,
                                       nrd_srv_http **out);

/* The port actually bound (useful when 0 was asked). Any thread. */
int nrd_srv_http_port(const nrd_srv_http *http);

/* Graceful stop: stops accepting, answers the requests already received
 * (their replies say Connection: close) and closes every connection once
 * it has no request left, waiting up to `wait_secs` for that; then stops
 * the loops and frees everything. NULL is a no-op. Main thread. */
/* Returns false when work was still in the core after the wait: the front
 * end was left running (not freed) and the server must not be deleted. */
bool nrd_srv_http_stop(nrd_srv_http *http, unsigned wait_secs);

/* Begins the graceful part of nrd_srv_http_stop without waiting, so that
 * several front ends drain at once; stop must still be called. NULL is a
 * no-op. Main thread. */
void nrd_srv_http_drain(nrd_srv_http *http);

#endif
