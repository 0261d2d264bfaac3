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

/* The routes of a Vertex AI prediction endpoint (--allow-vertex-ai; see
 * http_vertex.c). */
typedef struct nrd_srv_vertex_routes {
  const char *predict_route; /* AIP_PREDICT_ROUTE: inference on default_model, or a redirect */
  const char *health_route;  /* AIP_HEALTH_ROUTE: the server's readiness */
  const char *default_model; /* the model the predict route serves */
} nrd_srv_vertex_routes;

/* A SageMaker endpoint (--allow-sagemaker; see http_sagemaker.c): what
 * /ping and /invocations serve, and the multi-model table of /models
 * (sagemaker_mme.h). */
typedef enum { NRD_SRV_SAGEMAKER_INFER, NRD_SRV_SAGEMAKER_GENERATE, NRD_SRV_SAGEMAKER_GENERATE_STREAM } nrd_srv_sagemaker_kind;

typedef struct nrd_srv_sagemaker_options {
  const char *model;           /* SAGEMAKER_TRITON_DEFAULT_MODEL_NAME */
  bool ping_live;              /* SAGEMAKER_TRITON_PING_MODE=live: /ping is liveness, else readiness */
  nrd_srv_sagemaker_kind kind; /* SAGEMAKER_TRITON_INFERENCE_TYPE */
  /* Given to nrd_srv_http_start, which frees it with mme_free when the
   * endpoint is freed, or at once when it cannot start. */
  struct nrd_srv_sagemaker_mme *mme;
  void (*mme_free)(struct nrd_srv_sagemaker_mme *);
} nrd_srv_sagemaker_options;

typedef struct nrd_srv_http_options {
  const char *address;       /* e.g. "0.0.0.0" */
  int port;                  /* 0: pick a free port */
  bool reuse_port;           /* bind with SO_REUSEPORT (--reuse-http-port) */
  int threads;               /* event-loop threads, >= 1 */
  size_t max_input_size;     /* largest request body accepted, bytes */
  int metrics_only;          /* 1: serve only GET /metrics (the metrics port) */
  int client_timeout_secs;   /* idle, slow head, stalled body or unread reply: closed; 0: the default */
  /* Shared with the gRPC front end; borrowed, they must outlive the front
   * end. NULL only with metrics_only. */
  nrd_srv_shm *shm;          /* system shared memory regions */
  nrd_srv_log_settings *log; /* /v2/logging */
  nrd_srv_tracer *tracer;    /* tracing (may be NULL) */
  const nrd_srv_restrictions *restricted; /* --http-restricted-api (may be NULL: all open) */
  const char *header_forward; /* --http-header-forward-pattern (NULL: none); compiled at start */
  /* Non-NULL: serve Vertex AI's routes instead of KServe's (copied at start). */
  const nrd_srv_vertex_routes *vertex;
  /* Non-NULL: serve SageMaker's routes instead (copied at start). */
  const nrd_srv_sagemaker_options *sagemaker;
} nrd_srv_http_options;

/* Binds and starts serving `server` (borrowed: it must outlive the front
 * end). On success *out is the caller's to stop with nrd_srv_http_stop. On
 * failure returns the error (caller owns it) and *out is NULL. Main thread. */
TRITONSERVER_Error *nrd_srv_http_start(TRITONSERVER_Server *server,
                                       const nrd_srv_http_options *opts, nrd_srv_http **out);

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
