/* Internals shared by the http_*.c files: the front end, its event loops,
 * requests waiting on other threads, and reply helpers.
 *
 * Threads: a loop's connections and requests are touched by that loop's
 * thread, and by a thread that claimed one (nrd_srv_http_pending_claim)
 * while it holds the connection's lock; otherwise posting a task is the
 * one way other threads reach them. */
#ifndef NRD_SRV_HTTP_INTERNAL_H
#define NRD_SRV_HTTP_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <jansson.h>

#include "acceptor.h"
#include "header_forward.h"
#include "http_server.h"
#include "inbox.h"
#include "json_arena.h"
#include "log_settings.h"
#include "shm_registry.h"
#include "trace_hook.h"
#include "triton/core/tritonserver.h"

typedef struct nrd_srv_http_loop nrd_srv_http_loop;
typedef struct nrd_srv_http_conn nrd_srv_http_conn;
typedef struct nrd_srv_http_pending nrd_srv_http_pending;

typedef enum nrd_srv_http_method {
  NRD_SRV_HTTP_GET,
  NRD_SRV_HTTP_HEAD,
  NRD_SRV_HTTP_POST,
  NRD_SRV_HTTP_PUT,
  NRD_SRV_HTTP_DELETE,
  NRD_SRV_HTTP_OTHER /* any other token: routes answer 405 */
} nrd_srv_http_method;

/* Large output blocks kept for reuse per front end. */
#define NRD_SRV_HTTP_BLOCK_SLOTS 4

/* Most request headers kept; a request with more gets 431. */
#define NRD_SRV_HTTP_MAX_HEADERS 64
_Static_assert(NRD_SRV_HTTP_MAX_HEADERS < 255, "header indexes are kept in uint8_t");

typedef struct nrd_srv_http_header {
  const char *name, *value; /* NUL-terminated, inside the connection's buffer */
} nrd_srv_http_header;

/* Headers the server itself reads on every request, found once while the
 * head is parsed (the first of each; Content-Length is also counted). */
typedef enum nrd_srv_http_known {
  NRD_SRV_H_CONNECTION,
  NRD_SRV_H_TRANSFER_ENCODING,
  NRD_SRV_H_CONTENT_LENGTH,
  NRD_SRV_H_EXPECT,
  NRD_SRV_H_CONTENT_ENCODING,
  NRD_SRV_H_ACCEPT_ENCODING,
  NRD_SRV_H_INFERENCE_HEADER_CONTENT_LENGTH,
  NRD_SRV_H_KNOWN /* how many */
} nrd_srv_http_known;

/* One piece of an output body: `data` stays valid until release(arg) runs
 * (release NULL: nothing to do), which happens once it is written or the
 * connection is gone. */
typedef struct nrd_srv_http_seg {
  const char *data;
  size_t len;
  void (*release)(void *arg);
  void *arg;
} nrd_srv_http_seg;

/* One HTTP request and the reply being built for it. A connection handles
 * one request at a time (pipelined ones wait in its buffer), so the request
 * lives inside its connection. The input fields point into the
 * connection's receive buffer, which does not move until the request is
 * answered: inference inputs may point into the body (zero copy). */
typedef struct nrd_srv_http_req {
  nrd_srv_http_conn *conn;
  nrd_srv_http_method method;
  const char *path; /* raw path, query cut off */
  const char *query; /* "" when none */
  bool http10; /* HTTP/1.0: no chunked replies */
  bool keep_alive;
  uint8_t known[NRD_SRV_H_KNOWN]; /* index in headers + 1; 0: absent (indexes survive a rebase) */
  unsigned n_content_length; /* Content-Length headers seen */
  nrd_srv_http_header headers[NRD_SRV_HTTP_MAX_HEADERS];
  size_t n_headers;
  char *body; /* the body (chunked encoding already removed) */
  size_t body_len;
  char *body_owned; /* a decoded replacement body, freed with the request */
  /* Reply under construction; small replies need no allocation. */
  char *out_headers; /* extra header lines "Name: value\r\n": inline or malloc'ed */
  size_t out_headers_len, out_headers_cap;
  nrd_srv_http_seg *segs; /* segs_inline or malloc'ed */
  size_t n_segs, cap_segs;
  char out_headers_inline[192];
  nrd_srv_http_seg segs_inline[4];
  size_t out_len;
  bool answered;
  nrd_srv_http_pending *pending;
  /* When the request's first byte came and when its body was complete
   * (trace clock); 0 unless tracing was active as it arrived. */
  uint64_t recv_start_ns, recv_end_ns;
} nrd_srv_http_req;

/* A request answered later, from work on another thread: embed this in the
 * work's context. When the client goes away first, on_disconnect (may be
 * NULL) runs on the loop thread and nrd_srv_http_pending_finish returns
 * NULL; the connection's memory stays until then. */
struct nrd_srv_http_pending {
  nrd_srv_http_req *req;
  bool gone; /* the client went away */
  void (*on_disconnect)(struct nrd_srv_http_pending *); /* may be NULL */
};

/* Work posted to a loop from another thread: embed it (no allocation on
 * the request path) or let nrd_srv_http_post allocate one. */
typedef struct nrd_srv_http_task {
  nrd_srv_inbox_item link; /* first: the inbox hands back this address */
  void (*fn)(void *arg);
  void *arg;
  bool heap; /* allocated by nrd_srv_http_post: freed after fn runs */
} nrd_srv_http_task;

struct nrd_srv_http_loop {
  struct nrd_srv_http *http;
  int epfd;
  int tag_listener, tag_wake; /* epoll tags: the addresses of these ints */
  pthread_t thread;
  bool started;
  atomic_bool stop;
  nrd_srv_inbox inbox; /* tasks from other threads */
  bool has_inbox; /* inbox initialised */
  nrd_srv_acceptor acceptor; /* loop thread only: the shared listener */
  nrd_srv_http_conn *conns; /* loop thread only: open connections */
  nrd_srv_http_conn *resume; /* loop thread only: answered, more input to parse */
  _Atomic time_t now; /* monotonic seconds: set by the loop thread, read by claimers too */
  nrd_srv_json_memo headers; /* loop thread only: the last inference header's document */
  atomic_bool draining; /* saw http->draining: set by the loop thread, read by claimers too */
};

struct nrd_srv_http {
  TRITONSERVER_Server *server;
  TRITONSERVER_ResponseAllocator *allocator;
  size_t max_input; /* --http-max-input-size: the largest input's data, as Triton checks it */
  size_t max_body; /* the largest body read (nrd_srv_http_body_limit) */
  int client_timeout_secs; /* see nrd_srv_http_options */
  bool metrics_only;
  /* Another kind of endpoint's routes (nrd_srv_http_options); NULL:
   * KServe's. The context is owned. */
  const nrd_srv_http_endpoint_ops *endpoint;
  void *endpoint_ctx;
  /* endpoint->binary_mime, or NULL. */
  const char *binary_mime;
  int port;
  int fd;
  nrd_srv_http_loop *loops;
  int n_loops;
  atomic_long in_flight; /* pending requests, all loops */
  atomic_long open_conns; /* connections, all loops */
  atomic_bool draining; /* shutting down: no new connections, no keep-alive */
  nrd_srv_shm *shm; /* borrowed from nereid: system shared memory */
  nrd_srv_log_settings *log; /* borrowed from nereid: /v2/logging */
  nrd_srv_tracer *tracer; /* borrowed from nereid: tracing; NULL: none */
  const nrd_srv_restrictions *restricted; /* borrowed: --http-restricted-api; NULL: all open */
  nrd_srv_header_forward *header_forward; /* owned: --http-header-forward-pattern; NULL: none */
  /* Large output blocks kept for reuse (http_infer.c); any thread. */
  pthread_mutex_t blocks_mu;
  struct out_block *blocks[NRD_SRV_HTTP_BLOCK_SLOTS];
};

/* Frees the output blocks kept for reuse. Only once no inference is in
 * flight (http_infer.c). */
void nrd_srv_http_blocks_free(nrd_srv_http *h);

/* ---- connections (http_conn.c) ------------------------------------------- */

/* Takes an accepted socket (non-blocking) onto `loop`; closes it when it
 * cannot. Loop thread. */
void nrd_srv_http_conn_open(nrd_srv_http_loop *loop, int fd);

/* Handles epoll `events` for c. Loop thread. */
void nrd_srv_http_conn_io(nrd_srv_http_conn *c, uint32_t events);

/* Parses and dispatches what answered connections still hold in their
 * buffers (pipelined requests). Loop thread, between event batches. */
void nrd_srv_http_conn_resume_all(nrd_srv_http_loop *loop);

/* Ends connections whose client is too slow, `secs` being the limit: idle
 * between requests, or not reading a queued reply (closed); a request head
 * not complete `secs` after its first byte, or a body with no new byte for
 * `secs` (408, then closed). A request with the core is not timed out
 * while its client keeps reading. Loop thread. */
void nrd_srv_http_conn_expire(nrd_srv_http_loop *loop, time_t secs);

/* Closes every connection of the loop and frees those with no pending
 * request. Loop thread, or after the loop thread has exited. */
void nrd_srv_http_conn_close_all(nrd_srv_http_loop *loop);

/* Shutdown: closes the connections that wait for a request with nothing
 * received of it, in the socket or read (once their last reply is
 * written); the others close
 * after their current reply (loop->draining turns keep-alive off). Loop
 * thread, once loop->draining. */
void nrd_srv_http_conn_close_idle(nrd_srv_http_loop *loop);

/* ---- requests and replies (http_conn.c) ------------------------------------ */

/* The value of a header the parser looks for (see nrd_srv_http_known),
 * or NULL. */
static inline const char *nrd_srv_http_header_known(const nrd_srv_http_req *req, nrd_srv_http_known h) {
  return req->known[h] ? req->headers[req->known[h] - 1].value : NULL;
}

/* The value of the first header named `name` (any case), or NULL. Valid
 * until req is answered. */
const char *nrd_srv_http_header_get(const nrd_srv_http_req *req, const char *name);

/* The request body; never NULL ("" when empty). Valid until req is answered. */
const char *nrd_srv_http_body(const nrd_srv_http_req *req, size_t *len);

/* Replaces the body with `buf` (malloc'ed, len bytes), which req now owns
 * and frees once answered. */
void nrd_srv_http_set_body(nrd_srv_http_req *req, char *buf, size_t len);

/* Adds a reply header (both copied). Returns 0 or -1 (out of memory). */
int nrd_srv_http_add_header(nrd_srv_http_req *req, const char *name, const char *value);

/* Appends len bytes (copied) to the reply body. Returns 0 or -1. */
int nrd_srv_http_add_body(nrd_srv_http_req *req, const void *data, size_t len);

/* Appends data to the reply body by reference: release(arg) runs once it
 * has been written or dropped; on failure (-1) it has already run. */
int nrd_srv_http_add_body_ref(nrd_srv_http_req *req, const void *data, size_t len, void (*release)(void *arg),
                              void *arg);

/* Drops the reply body and headers built so far (releasing references). */
void nrd_srv_http_clear_body(nrd_srv_http_req *req);

/* Sends the reply with `status` and the body built so far; req is answered
 * and must not be touched again. Loop thread. */
void nrd_srv_http_send(nrd_srv_http_req *req, int status);

/* Starts a streamed reply (chunked transfer): headers now, then chunks.
 * Loop thread. */
void nrd_srv_http_send_start(nrd_srv_http_req *req, int status);

/* Sends one chunk (copied) of a streamed reply. Loop thread. */
void nrd_srv_http_send_chunk(nrd_srv_http_req *req, const void *data, size_t len);

/* Reply bytes of req's connection not yet written to the socket (0 once
 * it is closed). Loop thread. */
size_t nrd_srv_http_unsent(const nrd_srv_http_req *req);

/* Ends a streamed reply; req is answered. Loop thread. */
void nrd_srv_http_send_end(nrd_srv_http_req *req);

/* ---- pending requests (http_conn.c) and posting (http_server.c) ---------- */

/* Registers p for req (received on `loop`). From then on req is answered
 * only through nrd_srv_http_pending_finish. Loop thread. */
void nrd_srv_http_pending_add(nrd_srv_http_loop *loop, nrd_srv_http_pending *p, nrd_srv_http_req *req);

/* The request p waits for, or NULL when its client has gone. Loop thread. */
nrd_srv_http_req *nrd_srv_http_pending_req(nrd_srv_http_pending *p);

/* Unregisters p and returns the request to answer, or NULL when the client
 * has gone (its connection is then freed). Loop thread. */
nrd_srv_http_req *nrd_srv_http_pending_finish(nrd_srv_http_loop *loop, nrd_srv_http_pending *p);

/* Answering on the completing thread. A completion that would otherwise
 * wake a sleeping loop (several microseconds of kernel time on a VM) can
 * write its reply itself: claim takes p's connection from the loop,
 * locked, when the loop is asleep and not using it, the client is still
 * there and nothing waits in the inbox. The caller then builds the reply
 * and sends it with the usual reply API, calls unclaim, frees its own
 * work, and calls pending_done last (the front end may be freed once
 * nothing is in flight). NULL: post to the loop as usual (p is untouched).
 * Any thread but the loop's; the connection stays the loop's otherwise. */
nrd_srv_http_req *nrd_srv_http_pending_claim(nrd_srv_http_pending *p);
void nrd_srv_http_conn_unclaim(nrd_srv_http_conn *c);
void nrd_srv_http_pending_done(nrd_srv_http *h);

/* Queues t (the caller's memory, untouched until t->fn runs) to run on the
 * loop's thread. Any thread; never fails. */
void nrd_srv_http_post_task(nrd_srv_http_loop *loop, nrd_srv_http_task *t);

/* Runs fn(arg) on the loop's thread soon. Any thread. Returns 0, or -1 if
 * memory ran out (fn will not run). */
int nrd_srv_http_post(nrd_srv_http_loop *loop, void (*fn)(void *arg), void *arg);

/* HTTP status for a core error, as Triton maps them. Any thread. */
int nrd_srv_http_status(TRITONSERVER_Error *err);

/* Sends `body` (len bytes, copied) with Content-Type application/json.
 * Loop thread; req is answered and no longer the caller's. */
void nrd_srv_http_reply_json(nrd_srv_http_req *req, int status, const char *body, size_t len);

/* Sends {"error": msg} with `status`. Loop thread; req is answered. */
void nrd_srv_http_reply_error(nrd_srv_http_req *req, int status, const char *msg);

/* Sends err as {"error": message} with its mapped status and deletes err.
 * Loop thread; req is answered. */
void nrd_srv_http_reply_tserr(nrd_srv_http_req *req, TRITONSERVER_Error *err);

/* Sends status with an empty body. Loop thread; req is answered. */
void nrd_srv_http_reply_empty(nrd_srv_http_req *req, int status);

/* --http-restricted-api: true, with req answered 403 as Triton does, when
 * it lacks the header (and value) the API group `api` needs. Loop thread. */
bool nrd_srv_http_refused(const nrd_srv_http *h, nrd_srv_http_req *req, nrd_srv_api api);

/* Parses the body of req as a JSON object into *out (caller decrefs); an
 * empty body, or valid JSON that is not an object, gives *out NULL and 0.
 * On a bad body answers req (500 with Triton's parser sentence, 400 for
 * nesting past 100 or duplicate keys) and returns -1. Loop thread
 * (http_body.c). */
int nrd_srv_http_body_json(nrd_srv_http_req *req, json_t **out);

/* Routes one request (http_routes.c). Loop thread. */
void nrd_srv_http_route(nrd_srv_http_loop *loop, nrd_srv_http_req *req);

/* The KServe v2 routes alone, for req->path as it is now (http_routes.c). */
void nrd_srv_http_route_api(nrd_srv_http_loop *loop, nrd_srv_http_req *req);

/* GET /metrics (http_routes.c). */
void nrd_srv_http_metrics(nrd_srv_http *h, nrd_srv_http_req *req);

/* On an endpoint with a binary_mime (Vertex AI, SageMaker), the inference
 * header's length from a Content-Type of "<binary_mime>N": N as text, or
 * NULL when the type is another one. *bad is set when the type names the
 * binary type anywhere but at its start (http_infer.c). */
const char *nrd_srv_http_framed_header_size(const nrd_srv_http *h, const nrd_srv_http_req *req, bool *bad);

/* Handles POST .../infer for model/version (-1: policy) (http_infer.c).
 * Loop thread; req is answered now or later. */
void nrd_srv_http_infer(nrd_srv_http_loop *loop, nrd_srv_http_req *req, const char *model, int64_t version);

/* --http-header-forward-pattern: sets each header of `req` whose name
 * matches as a string parameter of `ireq` (http_infer.c). NULL or the
 * core's error (a parameter name it keeps). Loop thread. */
TRITONSERVER_Error *nrd_srv_http_forward_headers(const nrd_srv_http *h, const nrd_srv_http_req *req,
                                                 TRITONSERVER_InferenceRequest *ireq);

/* GET/POST /v2/logging (http_logging.c). Loop thread; req is answered. */
void nrd_srv_http_logging(nrd_srv_http *h, nrd_srv_http_req *req);

/* GET/POST /v2/trace/setting (model NULL) and
 * /v2/models/{model}/trace/setting: the trace extension (trace_hook.h). */
void nrd_srv_http_trace(nrd_srv_http *h, nrd_srv_http_req *req, const char *model);

/* Decodes base64 (padding optional, whitespace skipped) into a malloc'ed
 * buffer the caller frees. Returns 0, or -1 on a bad character or no
 * memory (nothing to free). Any thread. */
int nrd_srv_http_b64_decode(const char *s, size_t n, unsigned char **out, size_t *out_len);

/* /v2/systemsharedmemory/... and /v2/cudasharedmemory/... with `rest` the
 * path after that prefix (http_shm.c). Loop thread; req is answered. */
void nrd_srv_http_shm_route(nrd_srv_http *h, nrd_srv_http_req *req, const char *rest, bool cuda);

/* POST .../generate and .../generate_stream (http_generate.c). Loop
 * thread; req is answered now or later. */
void nrd_srv_http_generate(nrd_srv_http_loop *loop, nrd_srv_http_req *req, const char *model, int64_t version,
                           bool stream);

/* Content-Encoding of a request (http_compress.c). If req's body is
 * gzip/deflate encoded, replaces it with the decoded bytes (at most
 * `limit`). Returns 0 (also for identity), or an
 * HTTP status (413, 415, 400) with a message in msg. Loop thread. */
int nrd_srv_http_decode_body(nrd_srv_http_req *req, size_t limit, char *msg, size_t msglen);

/* Compresses req's reply body in place as the request's Accept-Encoding
 * asks (gzip or deflate) and sets Content-Encoding; leaves it as is when
 * no supported encoding is accepted or compression fails. Loop thread,
 * just before the reply is sent. */
void nrd_srv_http_encode_reply(nrd_srv_http_req *req);

/* Creates the response allocator every inference of the front end uses
 * (http_infer.c). Caller owns *out. Main thread. */
TRITONSERVER_Error *nrd_srv_http_allocator_new(TRITONSERVER_ResponseAllocator **out);

#endif
