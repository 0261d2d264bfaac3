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
#include <jansson.h>

#include "http_server.h"
#include "log_settings.h"
#include "shm_registry.h"
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
  nrd_srv_shm *shm;          /* borrowed from nereid: system shared memory */
  nrd_srv_log_settings *log; /* borrowed from nereid: /v2/logging */
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

/* Parses the body of req as a JSON object into *out (caller decrefs); an
 * empty body gives *out NULL and 0. On a bad body answers req (400) and
 * returns -1. Loop thread. */
int nrd_srv_http_body_json(struct evhttp_request *req, json_t **out);

/* Routes one request (http_routes.c). Loop thread. */
void nrd_srv_http_route(nrd_srv_http_loop *loop, struct evhttp_request *req);

/* Handles POST .../infer for model/version (-1: policy) (http_infer.c).
 * Loop thread; req is answered now or later. */
void nrd_srv_http_infer(nrd_srv_http_loop *loop, struct evhttp_request *req, const char *model,
                        int64_t version);

/* GET/POST /v2/logging (http_logging.c). Loop thread; req is answered. */
void nrd_srv_http_logging(nrd_srv_http *h, struct evhttp_request *req);

/* GET/POST /v2[/models/{m}]/trace/setting: tracing is not supported, so
 * this answers 503 as Triton built without tracing does (http_logging.c).
 * Loop thread; req is answered. */
void nrd_srv_http_trace(struct evhttp_request *req);

/* /v2/systemsharedmemory/... and /v2/cudasharedmemory/... with `rest` the
 * path after that prefix (http_shm.c). Loop thread; req is answered. */
void nrd_srv_http_shm_route(nrd_srv_http *h, struct evhttp_request *req, const char *rest, bool cuda);

/* POST .../generate and .../generate_stream (http_generate.c). Loop
 * thread; req is answered now or later. */
void nrd_srv_http_generate(nrd_srv_http_loop *loop, struct evhttp_request *req, const char *model,
                           int64_t version, bool stream);

/* Content-Encoding of a request (http_compress.c). If req's body is
 * gzip/deflate encoded, replaces its input buffer contents with the
 * decoded bytes (at most `limit`). Returns 0 (also for identity), or an
 * HTTP status (413, 415, 400) with a message in msg. Loop thread. */
int nrd_srv_http_decode_body(struct evhttp_request *req, size_t limit, char *msg, size_t msglen);

/* Compresses req's output buffer in place as the request's Accept-Encoding
 * asks (gzip or deflate) and sets Content-Encoding; leaves it as is when
 * no supported encoding is accepted or compression fails. Loop thread,
 * just before the reply is sent. */
void nrd_srv_http_encode_reply(struct evhttp_request *req);

/* The classification extension (http_classify.c): the top `k` classes of
 * output `index` of resp (numeric `dt`, [base, base+size), `shape` with
 * `dims` dimensions; with 2 or more dimensions the first is the batch and
 * each batch row is classified on its own). *out gets a malloc'ed BYTES
 * tensor (4-byte length + "value:index[:label]" per element; caller
 * frees) of *out_size bytes and shape out_shape[0..*out_dims). Returns 0,
 * or -1 with msg. Any thread. */
int nrd_srv_http_classify(TRITONSERVER_InferenceResponse *resp, uint32_t index, TRITONSERVER_DataType dt,
                          const int64_t *shape, uint64_t dims, const void *base, size_t size, uint32_t k,
                          char **out, size_t *out_size, int64_t out_shape[2], uint64_t *out_dims,
                          char *msg, size_t msglen);

/* Creates the response allocator every inference of the front end uses
 * (http_infer.c). Caller owns *out. Main thread. */
TRITONSERVER_Error *nrd_srv_http_allocator_new(TRITONSERVER_ResponseAllocator **out);

#endif
