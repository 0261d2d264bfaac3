/* Internals shared by the http_*.c files: the front end, its event loops,
 * requests waiting on other threads, and reply helpers.
 *
 * Threads: a loop's fields and its pending list are touched only by that
 * loop's thread; `nrd_srv_http_post` is the one way other threads reach it. */
#ifndef NRD_SRV_HTTP_INTERNAL_H
#define NRD_SRV_HTTP_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include <event2/event.h>
#include <event2/http.h>

#include "http_server.h"
#include "triton/core/tritonserver.h"

typedef struct nrd_srv_http_loop nrd_srv_http_loop;

/* An HTTP request answered later, from work on another thread. Embedded in
 * the work's own context. `req` becomes NULL when evhttp freed the request
 * (nothing to answer); when the client went away, the front end keeps and
 * frees the request itself. */
typedef struct nrd_srv_http_pending {
  struct nrd_srv_http_pending *prev, *next;
  struct evhttp_request *req;
  struct evhttp_connection *conn;
  bool detached;                                      /* req is ours to free */
  void (*on_disconnect)(struct nrd_srv_http_pending *); /* may be NULL */
} nrd_srv_http_pending;

struct nrd_srv_http_loop {
  struct nrd_srv_http *http;
  struct event_base *base;
  struct evhttp *evh;
  pthread_t thread;
  bool started;
  nrd_srv_http_pending *pending; /* requests of this loop waiting on work */
};

struct nrd_srv_http {
  TRITONSERVER_Server *server;
  TRITONSERVER_ResponseAllocator *allocator;
  size_t max_input;
  bool metrics_only;
  int port;
  int fd;
  nrd_srv_http_loop *loops;
  int n_loops;
  atomic_long in_flight; /* pending requests, all loops */
};

/* Registers `p` for `req` on `loop` (the loop thread that received req).
 * From then on req is answered only through nrd_srv_http_pending_finish. */
void nrd_srv_http_pending_add(nrd_srv_http_loop *loop, nrd_srv_http_pending *p,
                              struct evhttp_request *req);

/* Unregisters p and returns the request to answer, or NULL when there is
 * nobody to answer (the request is then already freed). Loop thread. */
struct evhttp_request *nrd_srv_http_pending_finish(nrd_srv_http_loop *loop,
                                                   nrd_srv_http_pending *p);

/* Runs fn(arg) on the loop's thread soon. Any thread. Returns 0, or -1 if
 * the event could not be queued (fn will not run). */
int nrd_srv_http_post(nrd_srv_http_loop *loop, void (*fn)(void *arg), void *arg);

/* HTTP status for a core error, as Triton maps them. Any thread. */
int nrd_srv_http_status(TRITONSERVER_Error *err);

/* Sends `body` (len bytes, copied) with Content-Type application/json.
 * Loop thread; req is answered and no longer the caller's. */
void nrd_srv_http_reply_json(struct evhttp_request *req, int status, const char *body, size_t len);

/* Sends {"error": msg} with `status`. Loop thread; req is answered. */
void nrd_srv_http_reply_error(struct evhttp_request *req, int status, const char *msg);

/* Sends err as {"error": message} with its mapped status and deletes err.
 * Loop thread; req is answered. */
void nrd_srv_http_reply_tserr(struct evhttp_request *req, TRITONSERVER_Error *err);

/* Sends status with an empty body. Loop thread; req is answered. */
void nrd_srv_http_reply_empty(struct evhttp_request *req, int status);

/* Routes one request (http_routes.c). Loop thread. */
void nrd_srv_http_route(nrd_srv_http_loop *loop, struct evhttp_request *req);

/* Handles POST .../infer for model/version (-1: policy) (http_infer.c).
 * Loop thread; req is answered now or later. */
void nrd_srv_http_infer(nrd_srv_http_loop *loop, struct evhttp_request *req, const char *model,
                        int64_t version);

/* Creates the response allocator every inference of the front end uses
 * (http_infer.c). Caller owns *out. Main thread. */
TRITONSERVER_Error *nrd_srv_http_allocator_new(TRITONSERVER_ResponseAllocator **out);

#endif
