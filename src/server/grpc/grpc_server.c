/* The gRPC transport: listening socket, epoll loops, HTTP/2 sessions
 * (nghttp2), gRPC message framing, trailers, posting completions back to
 * the owning loop. RPC semantics live in grpc_rpc.c and grpc_infer.c.
 *
 * Threads: one listening socket is registered (EPOLLEXCLUSIVE) in every
 * loop; a connection belongs to the loop that accepted it and its nghttp2
 * session is only touched there. Core threads reach a call only through
 * nrd_srv_grpc_call_post, which queues an event in the loop's inbox
 * (inbox.h). A call is reference counted: the transport holds one reference
 * while the stream is open, handlers hold more while the core works. */
#include "grpc_server.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "acceptor.h"
#include "block_cache.h"
#include "compress.h"
#include "fmt.h"
#include "grpc_call.h"
#include "grpc_rpc.h"
#include "grpc_values.h"
#include "header_forward.h"
#include "listener.h"

enum { KIND_LISTENER = 1, KIND_WAKE = 2, KIND_CONN = 3 };

/* Message encodings (grpc-encoding) we can decode. */
enum { ENC_IDENTITY = 0, ENC_GZIP, ENC_DEFLATE, ENC_UNKNOWN };
#define ACCEPT_ENCODING "identity,deflate,gzip"
/* nghttp2 copies a header's name and value unless told they outlive the
 * frame: string literals do. */
#define NV_LITERAL (NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE)
/* Encodings a client accepts for responses (grpc-accept-encoding). */

/* Backpressure. Above CONN_OUT_HIGH bytes of output waiting for a client,
 * the connection is throttled until it drains below CONN_OUT_LOW: received
 * DATA is no longer acknowledged (no WINDOW_UPDATE, so HTTP/2 flow control
 * stops the client) and buffered stream messages are not started. Frames
 * are still read, so WINDOW_UPDATE and PING from the client get through.
 * A single call whose unsent output exceeds CALL_OUT_MAX (the backend keeps
 * producing for a client that does not read) is cancelled in the core and
 * ends with RESOURCE_EXHAUSTED. */
#define CONN_OUT_HIGH (16u << 20)
#define CONN_OUT_LOW (4u << 20)
#define CALL_OUT_MAX (64u << 20)

typedef struct chunk {
  struct chunk *next;
  uint8_t *data;
  size_t len, off;
} chunk;

typedef struct loop loop;
typedef struct conn conn;

struct nrd_srv_grpc {
  TRITONSERVER_Server *server;
  nrd_srv_grpc_options opts;
  int listen_fd;
  int port;
  loop *loops;
  unsigned n_loops;
  atomic_long live_calls;
  atomic_bool stopping; /* drain: GOAWAY, calls already open run to their end */
  atomic_bool aborting; /* the drain's time is up: close what is left */
  nrd_srv_header_forward *header_forward; /* --grpc-header-forward-pattern; NULL: none */
  nrd_srv_tls *tls; /* --grpc-use-ssl; NULL: cleartext */
};

struct loop {
  nrd_srv_grpc *g;
  int kind_listener; /* epoll tags: the address of these ints */
  int kind_wake;
  int epfd;
  pthread_t thread;
  bool started;
  nrd_srv_inbox inbox; /* events from core threads */
  bool has_inbox;
  nrd_srv_acceptor acceptor; /* loop only: the shared listener */
  conn *conns; /* loop only */
  conn *dirty; /* loop only */
  conn *graveyard; /* loop only: closed, freed after the event batch */
  conn *lingering; /* loop only: ended, reading what the client still sends */
  bool closing; /* loop only: saw stopping */
  bool aborted; /* loop only: saw aborting */
  nrd_srv_block_cache blocks; /* nghttp2's allocator; loop only */
};

struct conn {
  int kind; /* KIND_CONN, first member: epoll tag */
  loop *lp;
  int fd;
  nghttp2_session *sess;
  /* TLS session (NULL: cleartext). Until tls_ready, the handshake owns the
   * socket: nothing is read into or written from the HTTP/2 session. */
  nrd_srv_tls_conn *tls;
  bool tls_ready;
  bool tls_read_wants_out; /* a read stopped until the socket is writable */
  conn *prev, *next;
  conn *dirty_next;
  bool is_dirty;
  bool closed; /* socket and session gone; on the graveyard */
  conn *grave_next;
  bool want_out; /* EPOLLOUT registered */
  bool throttled;
  uint64_t last_activity_us; /* last bytes read */
  uint64_t accepted_us; /* handshake deadline and connection age count from here */
  uint64_t aged_us; /* when GOAWAY went for max_connection_age; 0: not yet */
  bool greeted; /* the client's preface and first SETTINGS arrived */
  uint64_t ping_sent_us; /* keepalive ping outstanding since, or 0 */
  /* Ping policy (see nrd_srv_grpc_options). Reset when we send data. */
  uint64_t last_ping_recv_us; /* when the client's last PING came, or 0: none since data */
  unsigned ping_strikes;
  unsigned pings_without_data; /* keepalive pings we sent since data */
  bool close_after_flush; /* GOAWAY queued: close once it is written */
  /* Ended gracefully: our side is shut (FIN sent after the last frame), the
   * session and calls are gone, and what the client still sends is read
   * and dropped until it closes or this time passes; then the socket is
   * closed. Closing at once with the client's bytes unread would make the
   * kernel send RST, and the client's kernel may then drop the frames we
   * sent last (responses, trailers, GOAWAY) before the client reads them.
   * 0: not lingering. */
  uint64_t linger_until_us;
  conn *linger_next;
  uint8_t *wbuf;
  size_t wlen, woff, wcap;
  size_t out_bytes; /* queued in calls, not yet given to nghttp2 */
  nrd_srv_grpc_call *calls; /* open streams */
  /* The call of the stream whose frames came last (a request's headers
   * and data come one after another): spares nghttp2's stream lookup for
   * each header and chunk. Cleared when that call leaves the connection. */
  int32_t last_id;
  nrd_srv_grpc_call *last_call;
};

struct nrd_srv_grpc_call {
  atomic_int refs;
  nrd_srv_grpc *g;
  loop *lp;
  conn *c; /* NULL once the stream closed (loop only) */
  nrd_srv_grpc_call *prev, *next;
  int32_t id;
  const nrd_srv_grpc_method *m;
  bool unknown_method, bad_content_type;
  unsigned hdrs; /* HDR_* seen among the request headers */
  int encoding; /* ENC_* from grpc-encoding */
  char enc_name[48]; /* grpc-encoding as sent (truncated), for errors */
  unsigned accept; /* ACCEPT_* from grpc-accept-encoding */
  /* Response encoding (ENC_IDENTITY, ENC_GZIP or ENC_DEFLATE): chosen on
   * the loop when the request headers are complete, before any message is
   * delivered; read-only afterwards, so core threads may read it. */
  int resp_encoding;
  uint8_t *in;
  size_t in_len, in_cap;
  chunk *out_head, *out_tail;
  size_t out_pending; /* bytes in out_head..out_tail not yet handed to nghttp2 */
  size_t unconsumed; /* received bytes not yet acknowledged (throttled) */
  bool headers_sent, deferred, done, closed, ignoring_input, had_message;
  bool ended; /* the frame that ends the stream is with nghttp2 */
  int status;
  char *status_msg; /* percent-encoded, owned */
  uint64_t deadline_us;
  /* Trace clock: the message being received began at read_start_ns and
   * was complete at read_end_ns; kept only while tracing is active. */
  uint64_t read_start_ns, read_end_ns;
  unsigned restrict_ok; /* bit per nrd_srv_api: its restriction header came with the right value */
  char traceparent[64]; /* W3C trace context, kept while tracing is active ("" when none) */
  char **forwarded; /* --grpc-header-forward-pattern: name, value, name, value, ... (owned) */
  size_t n_forwarded; /* pairs */
  void *state;
  void (*state_free)(void *);
};

/* ---- small helpers ------------------------------------------------------ */

static uint64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void srv_log(TRITONSERVER_LogLevel level, const char *msg) {
  TRITONSERVER_Error *e = TRITONSERVER_LogMessage(level, __FILE__, __LINE__, msg);
  if (e) TRITONSERVER_ErrorDelete(e);
}

/* ---- calls --------------------------------------------------------------- */

TRITONSERVER_Server *nrd_srv_grpc_call_server(const nrd_srv_grpc_call *call) { return call->g->server; }

nrd_srv_shm *nrd_srv_grpc_call_shm(const nrd_srv_grpc_call *call) { return call->g->opts.shm; }

bool nrd_srv_grpc_call_draining(const nrd_srv_grpc_call *call) { return call->lp->closing; }

nrd_srv_log_settings *nrd_srv_grpc_call_log(const nrd_srv_grpc_call *call) { return call->g->opts.log; }

nrd_srv_tracer *nrd_srv_grpc_call_tracer(const nrd_srv_grpc_call *call) { return call->g->opts.tracer; }

size_t nrd_srv_grpc_call_forwarded(const nrd_srv_grpc_call *call, char *const **pairs) {
  *pairs = call->forwarded;
  return call->n_forwarded;
}

void nrd_srv_grpc_call_read_times(const nrd_srv_grpc_call *call, uint64_t *start_ns, uint64_t *end_ns) {
  *start_ns = call->read_start_ns;
  *end_ns = call->read_start_ns ? call->read_end_ns : 0;
}

uint64_t nrd_srv_grpc_call_deadline_us(const nrd_srv_grpc_call *call) { return call->deadline_us; }

const char *nrd_srv_grpc_call_traceparent(const nrd_srv_grpc_call *call) {
  return call->traceparent[0] ? call->traceparent : NULL;
}

void nrd_srv_grpc_call_set_state(nrd_srv_grpc_call *call, void *state, void (*free_fn)(void *)) {
  call->state = state;
  call->state_free = free_fn;
}

void *nrd_srv_grpc_call_state(const nrd_srv_grpc_call *call) { return call->state; }

void nrd_srv_grpc_call_ref(nrd_srv_grpc_call *call) { atomic_fetch_add_explicit(&call->refs, 1, memory_order_relaxed); }

static void free_chunks(chunk *c) {
  while (c) {
    chunk *n = c->next;
    free(c->data);
    free(c);
    c = n;
  }
}

void nrd_srv_grpc_call_unref(nrd_srv_grpc_call *call) {
  if (atomic_fetch_sub_explicit(&call->refs, 1, memory_order_acq_rel) != 1) return;
  if (call->state_free) call->state_free(call->state);
  free_chunks(call->out_head);
  free(call->in);
  free(call->status_msg);
  for (size_t i = 0; i < 2 * call->n_forwarded; i++) free(call->forwarded[i]);
  free(call->forwarded);
  nrd_srv_grpc *g = call->g;
  free(call);
  atomic_fetch_sub_explicit(&g->live_calls, 1, memory_order_release);
}

void nrd_srv_grpc_call_post(nrd_srv_grpc_event *ev) { nrd_srv_inbox_post(&ev->call->lp->inbox, &ev->link); }

static void conn_mark_dirty(conn *c) {
  if (c->is_dirty || c->closed || c->linger_until_us) return;
  c->is_dirty = true;
  c->dirty_next = c->lp->dirty;
  c->lp->dirty = c;
}

static ssize_t data_read_cb(nghttp2_session *sess, int32_t id, uint8_t *buf, size_t length, uint32_t *flags,
                            nghttp2_data_source *src, void *user) {
  (void)sess;
  (void)id;
  (void)user;
  nrd_srv_grpc_call *call = src->ptr;
  size_t n = 0;
  while (n < length && call->out_head) {
    chunk *ch = call->out_head;
    size_t take = ch->len - ch->off;
    if (take > length - n) take = length - n;
    memcpy(buf + n, ch->data + ch->off, take);
    ch->off += take;
    n += take;
    if (ch->off == ch->len) {
      call->out_head = ch->next;
      if (call->out_head == NULL) call->out_tail = NULL;
      free(ch->data);
      free(ch);
    }
  }
  call->out_pending -= n < call->out_pending ? n : call->out_pending;
  if (call->c) call->c->out_bytes -= n < call->c->out_bytes ? n : call->c->out_bytes;
  if (call->out_head == NULL && call->done) {
    *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
    char code[24];
    size_t code_len = nrd_srv_fmt_i64(code, call->status);
    bool ok = call->status == 0; /* the usual trailer: a literal, not copied */
    nghttp2_nv tr[2] = {{(uint8_t *)"grpc-status", (uint8_t *)(ok ? "0" : code), 11, code_len,
                         ok ? NV_LITERAL : NGHTTP2_NV_FLAG_NO_COPY_NAME},
                        {(uint8_t *)"grpc-message", (uint8_t *)(call->status_msg ? call->status_msg : ""), 12,
                         call->status_msg ? strlen(call->status_msg) : 0, NGHTTP2_NV_FLAG_NO_COPY_NAME}};
    int rv = nghttp2_submit_trailer(sess, call->id, tr, call->status_msg ? 2 : 1);
    if (rv != 0) return NGHTTP2_ERR_CALLBACK_FAILURE;
    call->ended = true;
    return (ssize_t)n;
  }
  if (n == 0) {
    call->deferred = true;
    return NGHTTP2_ERR_DEFERRED;
  }
  return (ssize_t)n;
}

static void call_submit_headers(nrd_srv_grpc_call *call) {
  const char *enc = call->resp_encoding == ENC_GZIP ? "gzip" : "deflate";
  nghttp2_nv hdrs[4] = {
      {(uint8_t *)":status", (uint8_t *)"200", 7, 3, NV_LITERAL},
      {(uint8_t *)"content-type", (uint8_t *)"application/grpc", 12, 16, NV_LITERAL},
      {(uint8_t *)"grpc-accept-encoding", (uint8_t *)ACCEPT_ENCODING, 20, sizeof ACCEPT_ENCODING - 1, NV_LITERAL},
      {(uint8_t *)"grpc-encoding", (uint8_t *)enc, 13, strlen(enc), NV_LITERAL}};
  size_t n_hdrs = call->resp_encoding != ENC_IDENTITY ? 4 : 3;
  nghttp2_data_provider prd;
  prd.source.ptr = call;
  prd.read_callback = data_read_cb;
  if (nghttp2_submit_response(call->c->sess, call->id, hdrs, n_hdrs, &prd) == 0)
    call->headers_sent = true;
  else
    nghttp2_submit_rst_stream(call->c->sess, NGHTTP2_FLAG_NONE, call->id, NGHTTP2_INTERNAL_ERROR);
}

static void call_kick(nrd_srv_grpc_call *call) {
  if (call->c == NULL) return;
  if (!call->headers_sent) {
    call_submit_headers(call);
  } else if (call->deferred) {
    call->deferred = false;
    nghttp2_session_resume_data(call->c->sess, call->id);
  }
  conn_mark_dirty(call->c);
}

/* Ends the call for a transport-level reason (bad message, deadline, a
 * client that does not read): finishes it with status, ignores the rest of
 * its input, and cancels in the core whatever it had started, since no
 * response can reach the client any more. Loop thread. */
static void call_abort(nrd_srv_grpc_call *call, int status, const char *message) {
  bool was_done = call->done;
  nrd_srv_grpc_call_finish(call, status, message);
  call->ignoring_input = true;
  if (!was_done && call->m && call->m->on_cancel) call->m->on_cancel(call);
}

/* Frees queued output nghttp2 has not started on (a partly sent first chunk
 * stays, so the message framing on the wire remains intact). */
static void call_drop_unsent(nrd_srv_grpc_call *call) {
  chunk **pp = &call->out_head;
  if (*pp && (*pp)->off > 0) pp = &(*pp)->next;
  chunk *drop = *pp;
  *pp = NULL;
  call->out_tail = NULL;
  for (chunk *x = call->out_head; x; x = x->next) call->out_tail = x;
  size_t n = 0;
  for (chunk *x = drop; x; x = x->next) n += x->len - x->off;
  free_chunks(drop);
  call->out_pending -= n < call->out_pending ? n : call->out_pending;
  if (call->c) call->c->out_bytes -= n < call->c->out_bytes ? n : call->c->out_bytes;
}

void nrd_srv_grpc_call_send_framed(nrd_srv_grpc_call *call, uint8_t *buf, size_t len) {
  if (call->c == NULL || call->done || buf == NULL) {
    free(buf);
    return;
  }
  chunk *ch = malloc(sizeof *ch);
  if (ch == NULL) {
    free(buf);
    nrd_srv_grpc_call_finish(call, NRD_GRPC_RESOURCE_EXHAUSTED, "out of memory");
    return;
  }
  ch->next = NULL;
  ch->data = buf;
  ch->len = len;
  ch->off = 0;
  if (call->out_tail)
    call->out_tail->next = ch;
  else
    call->out_head = ch;
  call->out_tail = ch;
  call->c->out_bytes += len;
  call->out_pending += len;
  if (call->out_pending > CALL_OUT_MAX) {
    call_drop_unsent(call);
    char msg[160];
    snprintf(msg, sizeof msg, "the client is not reading responses (more than %u bytes waiting); call cancelled",
             CALL_OUT_MAX);
    call_abort(call, NRD_GRPC_RESOURCE_EXHAUSTED, msg);
    return;
  }
  call_kick(call);
}

uint8_t *nrd_srv_grpc_call_compress(const nrd_srv_grpc_call *call, uint8_t *framed, size_t *len) {
  if (call->resp_encoding == ENC_IDENTITY || framed == NULL || *len < 5 || framed[0] != 0) return framed;
  nrd_srv_compress_piece body = {framed + 5, *len - 5};
  uint8_t *out = NULL;
  size_t n = 0;
  int wb = call->resp_encoding == ENC_GZIP ? 15 + 16 : 15;
  int level = nrd_srv_compress_zlib_level(call->g->opts.response_compression);
  if (nrd_srv_compress(wb, level, &body, 1, 5, &out, &n) != 0) return framed;
  if (n >= body.len) { /* no gain: sent as it is, flag 0 */
    free(out);
    return framed;
  }
  out[0] = 1;
  out[1] = (uint8_t)(n >> 24);
  out[2] = (uint8_t)(n >> 16);
  out[3] = (uint8_t)(n >> 8);
  out[4] = (uint8_t)n;
  free(framed);
  *len = 5 + n;
  return out;
}

void nrd_srv_grpc_call_send(nrd_srv_grpc_call *call, const ProtobufCMessage *msg) {
  if (call->c == NULL || call->done) return;
  size_t len = 0;
  uint8_t *buf = nrd_srv_grpc_frame(msg, &len);
  if (buf == NULL) {
    nrd_srv_grpc_call_finish(call, NRD_GRPC_RESOURCE_EXHAUSTED, "out of memory");
    return;
  }
  nrd_srv_grpc_call_send_framed(call, buf, len);
}

void nrd_srv_grpc_call_finish(nrd_srv_grpc_call *call, int status, const char *message) {
  if (call->c == NULL || call->done) return;
  call->done = true;
  call->status = status;
  call->status_msg = message && message[0] ? nrd_srv_grpc_percent_encode(message) : NULL;
  if (!call->headers_sent && call->out_head == NULL) {
    /* Trailers-Only response: one HEADERS frame ending the stream. */
    char code[24];
    size_t code_len = nrd_srv_fmt_i64(code, status);
    nghttp2_nv hdrs[5] = {{(uint8_t *)":status", (uint8_t *)"200", 7, 3, NGHTTP2_NV_FLAG_NONE},
                          {(uint8_t *)"content-type", (uint8_t *)"application/grpc", 12, 16, NGHTTP2_NV_FLAG_NONE},
                          {(uint8_t *)"grpc-accept-encoding", (uint8_t *)ACCEPT_ENCODING, 20,
                           sizeof ACCEPT_ENCODING - 1, NGHTTP2_NV_FLAG_NONE},
                          {(uint8_t *)"grpc-status", (uint8_t *)code, 11, code_len, NGHTTP2_NV_FLAG_NONE},
                          {(uint8_t *)"grpc-message", (uint8_t *)(call->status_msg ? call->status_msg : ""), 12,
                           call->status_msg ? strlen(call->status_msg) : 0, NGHTTP2_NV_FLAG_NONE}};
    call->headers_sent = true;
    call->ended = true;
    nghttp2_submit_response(call->c->sess, call->id, hdrs, call->status_msg ? 5 : 4, NULL);
    conn_mark_dirty(call->c);
    return;
  }
  call_kick(call);
}

void nrd_srv_grpc_call_reply(nrd_srv_grpc_call *call, const ProtobufCMessage *msg) {
  nrd_srv_grpc_call_send(call, msg);
  nrd_srv_grpc_call_finish(call, NRD_GRPC_OK, NULL);
}

void nrd_srv_grpc_call_fail(nrd_srv_grpc_call *call, TRITONSERVER_Error *err) {
  nrd_srv_grpc_call_finish(call, nrd_srv_grpc_status_from_code(TRITONSERVER_ErrorCode(err)),
                           TRITONSERVER_ErrorMessage(err));
  TRITONSERVER_ErrorDelete(err);
}

/* The stream is gone (closed, reset, connection lost): detach, tell the
 * handler if the call had not finished, drop the transport's reference. */
static void call_detach(nrd_srv_grpc_call *call) {
  conn *c = call->c;
  if (c == NULL) return;
  if (c->last_call == call) {
    c->last_call = NULL;
    c->last_id = 0;
  }
  if (call->prev)
    call->prev->next = call->next;
  else
    c->calls = call->next;
  if (call->next) call->next->prev = call->prev;
  c->out_bytes -= call->out_pending < c->out_bytes ? call->out_pending : c->out_bytes;
  if (call->unconsumed) nghttp2_session_consume_connection(c->sess, call->unconsumed);
  call->unconsumed = 0;
  bool was_done = call->done;
  call->c = NULL;
  call->closed = true;
  if (!was_done && call->m && call->m->on_cancel) call->m->on_cancel(call);
  nrd_srv_grpc_call_unref(call);
}

/* ---- receiving ----------------------------------------------------------- */

/* Inflates a gzip or zlib ("deflate") message into a malloc'ed buffer of at
 * most `max` bytes. Returns 0 with *out (caller frees) and *out_len, or a
 * gRPC status with msg filled (nothing to free). */
static int inflate_message(int enc, const uint8_t *in, size_t len, uint32_t max, uint8_t **out, size_t *out_len,
                           char *msg, size_t msglen) {
  const char *algo = enc == ENC_GZIP ? "gzip" : "deflate";
  size_t rest = 0;
  const char *why = NULL;
  nrd_srv_inflate_result r =
      nrd_srv_decompress(nrd_srv_compress_window_bits(algo), in, len, max, out, out_len, &rest, &why);
  if (r == NRD_SRV_INFLATE_OK && rest == 0) return NRD_GRPC_OK;
  if (r == NRD_SRV_INFLATE_OK) { /* bytes after the stream: not one message */
    free(*out);
    *out = NULL;
    *out_len = 0;
    why = "trailing data";
  }
  if (r == NRD_SRV_INFLATE_NO_MEMORY) {
    snprintf(msg, msglen, "out of memory decompressing a %s message", algo);
    return NRD_GRPC_RESOURCE_EXHAUSTED;
  }
  if (r == NRD_SRV_INFLATE_TOO_LARGE) {
    snprintf(msg, msglen, "Received message larger than max when decompressed (more than %u bytes)", max);
    return NRD_GRPC_RESOURCE_EXHAUSTED;
  }
  snprintf(msg, msglen, "failed to decompress a %s message: %s", algo, why ? why : "truncated or corrupt data");
  return NRD_GRPC_INTERNAL;
}

static void call_deliver_messages(nrd_srv_grpc_call *call, bool at_end) {
  size_t off = 0;
  uint32_t max = call->g->opts.max_message_size;
  while (call->c && !call->done && call->in_len - off >= 5) {
    const uint8_t *p = call->in + off;
    uint32_t len = (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | p[4];
    if (len > max) {
      char msg[128];
      snprintf(msg, sizeof msg, "Received message larger than max (%u vs. %u)", len, max);
      call_abort(call, NRD_GRPC_RESOURCE_EXHAUSTED, msg);
      off = call->in_len;
      break;
    }
    if (p[0] > 1 || (p[0] == 1 && call->encoding != ENC_GZIP && call->encoding != ENC_DEFLATE)) {
      char msg[160];
      int st = NRD_GRPC_INTERNAL;
      if (p[0] > 1)
        snprintf(msg, sizeof msg, "invalid gRPC message flags 0x%02x", p[0]);
      else if (call->encoding == ENC_UNKNOWN) {
        snprintf(msg, sizeof msg, "grpc-encoding '%s' is not supported (supported: %s)", call->enc_name,
                 ACCEPT_ENCODING);
        st = NRD_GRPC_UNIMPLEMENTED;
      } else
        snprintf(msg, sizeof msg, "compressed message flag set without a grpc-encoding");
      call_abort(call, st, msg);
      off = call->in_len;
      break;
    }
    if (call->in_len - off - 5 < len) break;
    if (!at_end && call->c->throttled) break;
    if (!call->m->streaming) {
      if (call->had_message) {
        call_abort(call, NRD_GRPC_UNIMPLEMENTED, "unary method received more than one request message");
        off = call->in_len;
        break;
      }
      if (!at_end) break; /* unary: deliver when the client half-closed */
    }
    call->had_message = true;
    off += 5 + len;
    if (call->read_start_ns) call->read_end_ns = nrd_srv_trace_now_ns();
    if (p[0] == 1) {
      uint8_t *plain = NULL;
      size_t plain_len = 0;
      char msg[200];
      int st = inflate_message(call->encoding, p + 5, len, max, &plain, &plain_len, msg, sizeof msg);
      if (st != NRD_GRPC_OK) {
        call_abort(call, st, msg);
        off = call->in_len;
        break;
      }
      call->m->on_message(call, plain, plain_len);
      free(plain);
    } else {
      call->m->on_message(call, p + 5, len);
    }
    /* The next message's bytes, if any, are already here. */
    call->read_start_ns = 0;
    if (call->in_len > off && nrd_srv_tracer_active(call->g->opts.tracer)) call->read_start_ns = nrd_srv_trace_now_ns();
  }
  if (off > 0 && call->in) {
    memmove(call->in, call->in + off, call->in_len - off);
    call->in_len -= off;
  }
}

static void call_remote_end(nrd_srv_grpc_call *call) {
  if (call->done || call->c == NULL) return;
  if (call->unknown_method || call->m == NULL) return;
  call_deliver_messages(call, true);
  if (call->done || call->c == NULL) return;
  if (call->in_len != 0) {
    call_abort(call, NRD_GRPC_INTERNAL, "incomplete gRPC message at end of stream");
    return;
  }
  if (!call->m->streaming && !call->had_message) {
    nrd_srv_grpc_call_finish(call, NRD_GRPC_INTERNAL, "no request message received");
    return;
  }
  if (call->m->on_end) call->m->on_end(call);
}

/* The response encoding, as gRPC picks one for a compression level: of
 * the encodings the client accepts, ranked gzip then deflate, low takes
 * the first, medium the middle one and high the last. Loop, once the
 * request headers are complete. */
static void call_choose_encoding(nrd_srv_grpc_call *call) {
  nrd_srv_compress_level level = call->g->opts.response_compression;
  call->resp_encoding = ENC_IDENTITY;
  if (level == NRD_SRV_COMPRESS_NONE || call->m == NULL || !call->m->compress_responses) return;
  int ranked[2], n = 0;
  if (call->accept & NRD_SRV_GRPC_ACCEPT_GZIP) ranked[n++] = ENC_GZIP;
  if (call->accept & NRD_SRV_GRPC_ACCEPT_DEFLATE) ranked[n++] = ENC_DEFLATE;
  if (n == 0) return;
  call->resp_encoding = level == NRD_SRV_COMPRESS_LOW      ? ranked[0]
                        : level == NRD_SRV_COMPRESS_MEDIUM ? ranked[n / 2]
                                                           : ranked[n - 1];
}

/* The call on stream `id` of c, or NULL. */
static nrd_srv_grpc_call *stream_call(conn *c, int32_t id) {
  if (id != 0 && id == c->last_id) return c->last_call;
  nrd_srv_grpc_call *call = nghttp2_session_get_stream_user_data(c->sess, id);
  if (call) {
    c->last_id = id;
    c->last_call = call;
  }
  return call;
}

static int on_begin_headers(nghttp2_session *sess, const nghttp2_frame *frame, void *user) {
  conn *c = user;
  if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
  nrd_srv_grpc_call *call = calloc(1, sizeof *call);
  if (call == NULL) {
    nghttp2_submit_rst_stream(sess, NGHTTP2_FLAG_NONE, frame->hd.stream_id, NGHTTP2_INTERNAL_ERROR);
    return 0;
  }
  atomic_init(&call->refs, 1);
  call->g = c->lp->g;
  call->lp = c->lp;
  call->c = c;
  call->id = frame->hd.stream_id;
  call->next = c->calls;
  if (c->calls) c->calls->prev = call;
  c->calls = call;
  atomic_fetch_add_explicit(&call->g->live_calls, 1, memory_order_relaxed);
  nghttp2_session_set_stream_user_data(sess, call->id, call);
  c->last_id = call->id;
  c->last_call = call;
  return 0;
}

/* What on_header saw of the headers gRPC requires of a request. */
enum {
  HDR_METHOD = 1u << 0, /* :method, any value */
  HDR_POST = 1u << 1, /* :method POST */
  HDR_TE = 1u << 2,
  HDR_TRAILERS = 1u << 3, /* te: trailers */
  HDR_SCHEME = 1u << 4,
  HDR_SCHEME_OK = 1u << 5, /* :scheme http or https */
  HDR_PATH = 1u << 6,
  HDR_AUTHORITY = 1u << 7 /* :authority, or host as its older name */
};

static bool header_is(const uint8_t *v, size_t len, const char *want) {
  return len == strlen(want) && memcmp(v, want, len) == 0;
}

/* Why a request's headers are not a gRPC call, in the words and order of
 * gRPC's own server (status UNKNOWN), or NULL when they are. Loop, once
 * the request headers are complete. */
static const char *call_check_headers(const nrd_srv_grpc_call *call) {
  unsigned h = call->hdrs;
  if (!(h & HDR_METHOD)) return "Missing :method header";
  if (!(h & HDR_POST)) return "Bad method header";
  if (!(h & HDR_TE)) return "Missing :te header";
  if (!(h & HDR_TRAILERS)) return "Bad :te header";
  if (!(h & HDR_SCHEME)) return "Missing :scheme header";
  if (!(h & HDR_SCHEME_OK)) return "Bad :scheme header";
  if (!(h & HDR_PATH)) return "Missing :path header";
  if (!(h & HDR_AUTHORITY)) return "Missing :authority header";
  return NULL;
}

/* --grpc-header-forward-pattern: keeps a matching header for the call's
 * inference requests. Out of memory: the header is dropped (logged). */
static void keep_forwarded(nrd_srv_grpc_call *call, const uint8_t *name, size_t namelen, const uint8_t *value,
                           size_t valuelen) {
  char **grown = realloc(call->forwarded, 2 * (call->n_forwarded + 1) * sizeof(*grown));
  char *n = strndup((const char *)name, namelen), *v = strndup((const char *)value, valuelen);
  if (grown) call->forwarded = grown;
  if (!grown || !n || !v) {
    free(n);
    free(v);
    srv_log(TRITONSERVER_LOG_ERROR, "gRPC: out of memory keeping a forwarded header");
    return;
  }
  call->forwarded[2 * call->n_forwarded] = n;
  call->forwarded[2 * call->n_forwarded + 1] = v;
  call->n_forwarded++;
}

/* --grpc-restricted-protocol: notes the groups whose header this is, when
 * it carries their value. */
static void note_restriction_header(nrd_srv_grpc_call *call, const uint8_t *name, size_t namelen, const uint8_t *value,
                                    size_t valuelen) {
  const nrd_srv_restrictions *r = call->g->opts.restricted;
  for (int api = 0; r && api < NRD_SRV_API_COUNT; api++) {
    const nrd_srv_restriction *x = &r->by_api[api];
    if (x->header && strlen(x->header) == namelen && memcmp(x->header, name, namelen) == 0 &&
        strlen(x->value) == valuelen && memcmp(x->value, value, valuelen) == 0)
      call->restrict_ok |= 1u << api;
  }
}

/* The header the call's group needs when the call did not bring it (with
 * its value); NULL when it may go on. */
static const char *call_missing_restriction(const nrd_srv_grpc_call *call) {
  const char *header = nrd_srv_restriction_header(call->g->opts.restricted, call->m->api);
  return header && !(call->restrict_ok & (1u << call->m->api)) ? header : NULL;
}

static int on_header(nghttp2_session *sess, const nghttp2_frame *frame, const uint8_t *name, size_t namelen,
                     const uint8_t *value, size_t valuelen, uint8_t flags, void *user) {
  (void)flags;
  (void)sess;
  if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
  nrd_srv_grpc_call *call = stream_call(user, frame->hd.stream_id);
  if (call == NULL) return 0;
  if (namelen == 5 && memcmp(name, ":path", 5) == 0) {
    call->m = nrd_srv_grpc_method_find((const char *)value, valuelen);
    call->unknown_method = call->m == NULL;
    call->hdrs |= HDR_PATH;
  } else if (namelen == 7 && memcmp(name, ":method", 7) == 0) {
    call->hdrs = (call->hdrs & ~HDR_POST) | HDR_METHOD | (header_is(value, valuelen, "POST") ? HDR_POST : 0);
  } else if (namelen == 2 && memcmp(name, "te", 2) == 0) {
    call->hdrs = (call->hdrs & ~HDR_TRAILERS) | HDR_TE | (header_is(value, valuelen, "trailers") ? HDR_TRAILERS : 0);
  } else if (namelen == 7 && memcmp(name, ":scheme", 7) == 0) {
    bool ok = header_is(value, valuelen, "http") || header_is(value, valuelen, "https");
    call->hdrs = (call->hdrs & ~HDR_SCHEME_OK) | HDR_SCHEME | (ok ? HDR_SCHEME_OK : 0);
  } else if ((namelen == 10 && memcmp(name, ":authority", 10) == 0) || (namelen == 4 && memcmp(name, "host", 4) == 0)) {
    call->hdrs |= HDR_AUTHORITY;
  } else if (namelen == 12 && memcmp(name, "content-type", 12) == 0) {
    call->bad_content_type = !(valuelen >= 16 && memcmp(value, "application/grpc", 16) == 0);
  } else if (namelen == 13 && memcmp(name, "grpc-encoding", 13) == 0) {
    if (valuelen == 8 && memcmp(value, "identity", 8) == 0)
      call->encoding = ENC_IDENTITY;
    else if (valuelen == 4 && memcmp(value, "gzip", 4) == 0)
      call->encoding = ENC_GZIP;
    else if (valuelen == 7 && memcmp(value, "deflate", 7) == 0)
      call->encoding = ENC_DEFLATE;
    else
      call->encoding = ENC_UNKNOWN;
    size_t n = valuelen < sizeof call->enc_name - 1 ? valuelen : sizeof call->enc_name - 1;
    for (size_t i = 0; i < n; i++) call->enc_name[i] = value[i] >= 0x20 && value[i] < 0x7f ? (char)value[i] : '?';
    call->enc_name[n] = '\0';
  } else if (namelen == 20 && memcmp(name, "grpc-accept-encoding", 20) == 0) {
    call->accept |= nrd_srv_grpc_accept_mask(value, valuelen);
  } else if (namelen == 12 && memcmp(name, "grpc-timeout", 12) == 0) {
    uint64_t t = nrd_srv_grpc_timeout_us(value, valuelen);
    if (t) call->deadline_us = now_us() + t;
  } else if (namelen > 21 && memcmp(name, "triton-grpc-protocol-", 21) == 0) {
    note_restriction_header(call, name, namelen, value, valuelen);
  } else if (namelen == 11 && memcmp(name, "traceparent", 11) == 0 && valuelen < sizeof call->traceparent &&
             nrd_srv_tracer_active(call->g->opts.tracer)) {
    memcpy(call->traceparent, value, valuelen);
    call->traceparent[valuelen] = '\0';
  }
  if (call->g->header_forward && name[0] != ':' &&
      nrd_srv_header_forward_matches(call->g->header_forward, (const char *)name, namelen))
    keep_forwarded(call, name, namelen, value, valuelen);
  return 0;
}

/* A client PING (nghttp2 answers it): as gRPC polices pings, one that
 * comes sooner than the allowed interval after the previous one, with no
 * data sent by us in between, is a strike; past max_ping_strikes the
 * connection gets GOAWAY ENHANCE_YOUR_CALM "too_many_pings" and closes. With
 * no call open and keepalive_permit_without_calls off, the allowed interval
 * is two hours. */
static void conn_police_ping(conn *c) {
  const nrd_srv_grpc_options *o = &c->lp->g->opts;
  uint64_t now = now_us();
  uint64_t interval_us = (uint64_t)o->min_recv_ping_interval_ms * 1000u;
  if (c->calls == NULL && !o->keepalive_permit_without_calls && interval_us < 7200000000u) interval_us = 7200000000u;
  bool strike = c->last_ping_recv_us != 0 && now - c->last_ping_recv_us < interval_us;
  c->last_ping_recv_us = now;
  if (!strike || c->close_after_flush) return;
  c->ping_strikes++;
  if (o->max_ping_strikes == 0 || c->ping_strikes <= o->max_ping_strikes) return;
  static const char debug[] = "too_many_pings";
  nghttp2_submit_goaway(c->sess, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(c->sess),
                        NGHTTP2_ENHANCE_YOUR_CALM, (const uint8_t *)debug, sizeof debug - 1);
  c->close_after_flush = true;
  srv_log(TRITONSERVER_LOG_WARN, "gRPC: closing a connection that sent too many pings (GOAWAY "
                                 "ENHANCE_YOUR_CALM)");
}

/* Sending data or headers resets the ping accounting, as in gRPC. */
static int on_frame_send(nghttp2_session *sess, const nghttp2_frame *frame, void *user) {
  (void)sess;
  conn *c = user;
  if (frame->hd.type == NGHTTP2_DATA || frame->hd.type == NGHTTP2_HEADERS) {
    c->last_ping_recv_us = 0;
    c->ping_strikes = 0;
    c->pings_without_data = 0;
  }
  return 0;
}

static int on_frame_recv(nghttp2_session *sess, const nghttp2_frame *frame, void *user) {
  (void)sess;
  conn *c = user;
  if (frame->hd.type == NGHTTP2_SETTINGS) c->greeted = true; /* nghttp2 checked the preface */
  if (frame->hd.type == NGHTTP2_PING && (frame->hd.flags & NGHTTP2_FLAG_ACK)) c->ping_sent_us = 0;
  if (frame->hd.type == NGHTTP2_PING && !(frame->hd.flags & NGHTTP2_FLAG_ACK)) conn_police_ping(c);
  nrd_srv_grpc_call *call = stream_call(c, frame->hd.stream_id);
  if (call == NULL) return 0;
  if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
    call_choose_encoding(call);
    const char *bad_header = call_check_headers(call);
    if (bad_header) {
      call_abort(call, NRD_GRPC_UNKNOWN, bad_header);
    } else if (call->bad_content_type) {
      call_abort(call, NRD_GRPC_UNKNOWN, "content-type must be application/grpc");
    } else if (call->unknown_method || call->m == NULL) {
      call_abort(call, NRD_GRPC_UNIMPLEMENTED, "unknown method");
    } else if (call_missing_restriction(call)) {
      char msg[300];
      snprintf(msg, sizeof msg, "This protocol is restricted, expecting header '%.200s'",
               call_missing_restriction(call));
      call_abort(call, NRD_GRPC_UNAVAILABLE, msg);
    }
  }
  if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
      (frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
    call_remote_end(call);
  return 0;
}

static int on_data_chunk(nghttp2_session *sess, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
                         void *user) {
  (void)flags;
  conn *c = user;
  nrd_srv_grpc_call *call = stream_call(c, id);
  if (call == NULL || call->ignoring_input || call->done || call->m == NULL || !c->throttled) {
    nghttp2_session_consume(sess, id, len);
  } else {
    call->unconsumed += len;
  }
  if (call == NULL || call->ignoring_input || call->done || call->m == NULL) return 0;
  if (call->in_len + len > call->in_cap) {
    size_t cap = call->in_cap ? call->in_cap : 1024;
    while (cap < call->in_len + len) cap *= 2;
    uint8_t *n = realloc(call->in, cap);
    if (n == NULL) {
      call_abort(call, NRD_GRPC_RESOURCE_EXHAUSTED, "out of memory");
      return 0;
    }
    call->in = n;
    call->in_cap = cap;
  }
  if (call->in_len == 0 && call->read_start_ns == 0 && nrd_srv_tracer_active(call->g->opts.tracer))
    call->read_start_ns = nrd_srv_trace_now_ns();
  memcpy(call->in + call->in_len, data, len);
  call->in_len += len;
  /* Check the size prefix early so an oversized message is never buffered
   * whole; streaming methods get each message as soon as it is complete. */
  if (call->in_len >= 5) call_deliver_messages(call, false);
  return 0;
}

static int on_stream_close(nghttp2_session *sess, int32_t id, uint32_t error_code, void *user) {
  (void)error_code;
  (void)user;
  nrd_srv_grpc_call *call = nghttp2_session_get_stream_user_data(sess, id);
  if (call == NULL) return 0;
  nghttp2_session_set_stream_user_data(sess, id, NULL);
  call_detach(call);
  return 0;
}

/* ---- connections ----------------------------------------------------------- */

static void linger_end(conn *c);

/* Closes the socket and the session at once; the memory waits on the
 * graveyard until the loop's batch is over, so an event or dirty-list
 * entry already collected for c still finds it (marked closed). */
static void conn_close(conn *c) {
  if (c->closed) return;
  if (c->linger_until_us) {
    linger_end(c);
    return;
  }
  loop *lp = c->lp;
  while (c->calls) call_detach(c->calls);
  c->closed = true;
  c->grave_next = lp->graveyard;
  lp->graveyard = c;
  if (c->prev)
    c->prev->next = c->next;
  else
    lp->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  epoll_ctl(lp->epfd, EPOLL_CTL_DEL, c->fd, NULL);
  nrd_srv_tls_conn_free(c->tls);
  c->tls = NULL;
  close(c->fd);
  /* Streams still in the session get no close callback from session_del;
   * they were detached above. */
  nghttp2_session_del(c->sess);
  c->sess = NULL;
  free(c->wbuf);
  c->wbuf = NULL;
}

/* How long an ended connection reads what its client still sends. */
#define LINGER_US 1000000u

/* Ends c gracefully once everything queued for it is written: the calls
 * and the session go (as conn_close does), our side of the socket is shut
 * and c waits on lp->lingering (see linger_until_us). TLS connections
 * close at once (a TLS close_notify would be needed first). */
static void conn_linger(conn *c) {
  if (c->closed || c->linger_until_us) return;
  if (c->tls) {
    conn_close(c);
    return;
  }
  loop *lp = c->lp;
  while (c->calls) call_detach(c->calls);
  if (c->prev)
    c->prev->next = c->next;
  else
    lp->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  c->prev = c->next = NULL;
  nghttp2_session_del(c->sess);
  c->sess = NULL;
  free(c->wbuf);
  c->wbuf = NULL;
  c->wlen = c->woff = c->wcap = 0;
  shutdown(c->fd, SHUT_WR);
  c->linger_until_us = now_us() + LINGER_US;
  c->linger_next = lp->lingering;
  lp->lingering = c;
}

/* Closes a lingering connection's socket; its memory goes to the graveyard. */
static void linger_end(conn *c) {
  loop *lp = c->lp;
  for (conn **p = &lp->lingering; *p; p = &(*p)->linger_next) {
    if (*p == c) {
      *p = c->linger_next;
      break;
    }
  }
  c->linger_until_us = 0;
  c->closed = true;
  c->grave_next = lp->graveyard;
  lp->graveyard = c;
  epoll_ctl(lp->epfd, EPOLL_CTL_DEL, c->fd, NULL);
  close(c->fd);
}

/* Drops what the client of a lingering connection sent; closes it at the
 * client's end of stream or on an error. */
static void linger_read(conn *c) {
  uint8_t buf[16384];
  for (int i = 0; i < 16; i++) {
    ssize_t n = read(c->fd, buf, sizeof buf);
    if (n > 0) continue;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    break;
  }
  linger_end(c);
}

/* Closes the lingering connections whose time is over (all with `all`). */
static void linger_sweep(loop *lp, uint64_t now, bool all) {
  for (conn *c = lp->lingering, *next; c; c = next) {
    next = c->linger_next;
    if (all || now >= c->linger_until_us) linger_end(c);
  }
}

/* After the batch: nothing refers to closed connections any more (the
 * dirty list was emptied first). */
static void loop_bury(loop *lp) {
  while (lp->graveyard) {
    conn *c = lp->graveyard;
    lp->graveyard = c->grave_next;
    free(c);
  }
}

/* Enters or leaves the throttled state; leaving acknowledges the data held
 * back and starts the stream messages that waited. Returns true if it
 * queued frames. */
static bool conn_update_throttle(conn *c) {
  bool t = c->out_bytes > CONN_OUT_HIGH || (c->throttled && c->out_bytes > CONN_OUT_LOW);
  if (t == c->throttled) return false;
  c->throttled = t;
  if (t) return false;
  for (nrd_srv_grpc_call *call = c->calls; call;) {
    nrd_srv_grpc_call *next = call->next; /* delivery may finish the call, not detach it */
    if (call->unconsumed) {
      nghttp2_session_consume(c->sess, call->id, call->unconsumed);
      call->unconsumed = 0;
    }
    if (call->m && call->m->streaming && !call->done && call->in_len >= 5) call_deliver_messages(call, false);
    call = next;
  }
  return true;
}

static void conn_update_events(conn *c, bool want_out) {
  if (want_out == c->want_out) return;
  c->want_out = want_out;
  struct epoll_event ev = {.events = EPOLLIN | (want_out ? (uint32_t)EPOLLOUT : 0u), .data.ptr = c};
  epoll_ctl(c->lp->epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

/* Writes what nghttp2 has to send. Returns false if the connection closed. */
static bool conn_flush(conn *c) {
  if (c->tls && !c->tls_ready) return true; /* the handshake flushes when it is done */
  conn_update_throttle(c);
  for (;;) {
    while (c->woff < c->wlen) {
      bool want_out = true;
      ssize_t w = c->tls ? nrd_srv_tls_write(c->tls, c->wbuf + c->woff, c->wlen - c->woff, &want_out)
                         : write(c->fd, c->wbuf + c->woff, c->wlen - c->woff);
      if (w < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
          /* TLS may need the peer's bytes first: the next read retries. */
          conn_update_events(c, want_out || c->tls_read_wants_out);
          return true;
        }
        conn_close(c);
        return false;
      }
      c->woff += (size_t)w;
    }
    c->woff = c->wlen = 0;
    /* Gather frames into one write. */
    while (c->wlen < (256u << 10)) {
      const uint8_t *data = NULL;
      ssize_t n = nghttp2_session_mem_send(c->sess, &data);
      if (n < 0) {
        conn_close(c);
        return false;
      }
      if (n == 0) break;
      if (c->wlen + (size_t)n > c->wcap) {
        size_t cap = c->wcap ? c->wcap : 16384;
        while (cap < c->wlen + (size_t)n) cap *= 2;
        uint8_t *nb = realloc(c->wbuf, cap);
        if (nb == NULL) {
          conn_close(c);
          return false;
        }
        c->wbuf = nb;
        c->wcap = cap;
      }
      memcpy(c->wbuf + c->wlen, data, (size_t)n);
      c->wlen += (size_t)n;
    }
    if (c->wlen == 0) {
      if (conn_update_throttle(c)) continue; /* WINDOW_UPDATEs to send */
      break;
    }
  }
  conn_update_events(c, c->tls_read_wants_out);
  if (c->close_after_flush || (!nghttp2_session_want_read(c->sess) && !nghttp2_session_want_write(c->sess))) {
    conn_linger(c); /* everything is written */
    return false;
  }
  return true;
}

static void conn_read(conn *c) {
  uint8_t buf[65536];
  if (c->tls_read_wants_out) {
    c->tls_read_wants_out = false;
    conn_update_events(c, false); /* conn_flush asks again if it has bytes waiting */
  }
  /* At most 16 reads, so one busy connection cannot starve the loop's
   * others; but bytes TLS already took off the socket are read now, since
   * epoll would not announce them again. */
  for (int i = 0; i < 16 || (c->tls && nrd_srv_tls_pending(c->tls)); i++) {
    bool want_out = false;
    ssize_t n = c->tls ? nrd_srv_tls_read(c->tls, buf, sizeof buf, &want_out) : read(c->fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        if (want_out) {
          c->tls_read_wants_out = true;
          conn_update_events(c, true);
        }
        break;
      }
      conn_close(c);
      return;
    }
    if (n == 0) {
      conn_close(c);
      return;
    }
    c->last_activity_us = now_us();
    ssize_t rv = nghttp2_session_mem_recv(c->sess, buf, (size_t)n);
    if (rv < 0) {
      /* Protocol error: nghttp2 queued GOAWAY; try to send it, then close. */
      if (conn_flush(c)) conn_close(c);
      return;
    }
    if (c->close_after_flush) {
      /* GOAWAY queued: discard what the client already sent, so closing
       * the socket does not reset the connection before it reads GOAWAY. */
      while (read(c->fd, buf, sizeof buf) > 0) {
      }
      break;
    }
    /* A short read emptied the socket; TLS returns one record at a time. */
    if (!c->tls && (size_t)n < sizeof buf) break;
  }
  conn_mark_dirty(c);
}

static void conn_new(loop *lp, int fd) {
  conn *c = calloc(1, sizeof *c);
  if (c == NULL) {
    close(fd);
    return;
  }
  c->kind = KIND_CONN;
  c->lp = lp;
  c->fd = fd;
  c->last_activity_us = c->accepted_us = now_us();
  if (lp->g->tls && (c->tls = nrd_srv_tls_conn_new(lp->g->tls, fd)) == NULL) {
    free(c);
    close(fd);
    return;
  }
  nghttp2_session_callbacks *cbs = NULL;
  if (nghttp2_session_callbacks_new(&cbs) != 0) {
    free(c);
    close(fd);
    return;
  }
  nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
  nghttp2_session_callbacks_set_on_frame_send_callback(cbs, on_frame_send);
  nghttp2_option *opt = NULL;
  int rv = nghttp2_option_new(&opt);
  if (rv == 0) {
    /* We acknowledge received data ourselves (backpressure, see above). */
    nghttp2_option_set_no_auto_window_update(opt, 1);
    /* The request headers are checked as gRPC checks them (on_header,
     * call_check_headers), not by nghttp2's HTTP rules: gRPC's own
     * statuses, and 9% fewer instructions per small call. */
    nghttp2_option_set_no_http_messaging(opt, 1);
    nghttp2_mem mem = {&lp->blocks, nrd_srv_block_malloc, nrd_srv_block_free, nrd_srv_block_calloc,
                       nrd_srv_block_realloc};
    rv = nghttp2_session_server_new3(&c->sess, cbs, c, opt, &mem);
    nghttp2_option_del(opt);
  }
  nghttp2_session_callbacks_del(cbs);
  if (rv != 0) {
    nrd_srv_tls_conn_free(c->tls);
    free(c);
    close(fd);
    return;
  }
  nghttp2_settings_entry iv[4] = {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 1000},
                                  {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1u << 20},
                                  {NGHTTP2_SETTINGS_MAX_FRAME_SIZE, 1u << 16},
                                  {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1}};
  nghttp2_submit_settings(c->sess, NGHTTP2_FLAG_NONE, iv, 4);
  nghttp2_session_set_local_window_size(c->sess, NGHTTP2_FLAG_NONE, 0, 16 << 20);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
  if (epoll_ctl(lp->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
    nghttp2_session_del(c->sess);
    nrd_srv_tls_conn_free(c->tls);
    free(c);
    close(fd);
    return;
  }
  c->next = lp->conns;
  if (lp->conns) lp->conns->prev = c;
  lp->conns = c;
  conn_mark_dirty(c);
}

/* Moves the TLS handshake on when the socket is ready. Once it is done,
 * our SETTINGS go out and whatever the client sent after its handshake is
 * read. A failed handshake closes the connection (logged verbosely: port
 * scanners and clients without TLS are not the server's errors). */
static void conn_tls_handshake(conn *c) {
  bool want_out = false;
  char why[256];
  int r = nrd_srv_tls_handshake(c->tls, &want_out, why, sizeof why);
  if (r < 0) {
    char msg[320];
    snprintf(msg, sizeof msg, "gRPC: TLS handshake failed: %s", why);
    srv_log(TRITONSERVER_LOG_VERBOSE, msg);
    conn_close(c);
    return;
  }
  if (r == 0) {
    conn_update_events(c, want_out);
    return;
  }
  c->tls_ready = true;
  conn_update_events(c, false);
  conn_read(c);
  if (!c->closed) conn_mark_dirty(c);
}

/* ---- loops ----------------------------------------------------------------- */

static void loop_run_events(loop *lp) {
  nrd_srv_inbox_item *it = nrd_srv_inbox_take(&lp->inbox);
  while (it) {
    nrd_srv_grpc_event *ev = (nrd_srv_grpc_event *)it;
    it = it->next;
    nrd_srv_grpc_call *call = ev->call;
    ev->run(ev, call->c != NULL);
    nrd_srv_grpc_call_unref(call);
  }
}

/* Keepalive: after keepalive_time of silence from the client send a PING
 * (only while a call is open unless keepalive_permit_without_calls, and at
 * most max_pings_without_data of them between data frames we send); close
 * the connection if it is not acknowledged within keepalive_timeout. */
static void loop_check_keepalive(loop *lp, uint64_t now) {
  const nrd_srv_grpc_options *o = &lp->g->opts;
  if (o->keepalive_time_ms == 0) return;
  for (conn *c = lp->conns; c;) {
    conn *next = c->next;
    if (c->ping_sent_us && now - c->ping_sent_us > (uint64_t)o->keepalive_timeout_ms * 1000u) {
      conn_close(c);
    } else if (!c->ping_sent_us && now - c->last_activity_us > (uint64_t)o->keepalive_time_ms * 1000u &&
               (c->calls || o->keepalive_permit_without_calls) &&
               (o->max_pings_without_data == 0 || c->pings_without_data < o->max_pings_without_data)) {
      if (nghttp2_submit_ping(c->sess, NGHTTP2_FLAG_NONE, NULL) == 0) {
        c->ping_sent_us = now;
        c->pings_without_data++;
        conn_mark_dirty(c);
      }
    }
    c = next;
  }
}

/* A connection that has not sent its preface and SETTINGS within the
 * handshake timeout is closed, as gRPC's server does: a client that only
 * opens connections cannot hold descriptors for ever. */
static void loop_check_handshakes(loop *lp, uint64_t now) {
  uint64_t limit = (uint64_t)lp->g->opts.handshake_timeout_secs * 1000000u;
  for (conn *c = lp->conns, *next; c; c = next) {
    next = c->next;
    if (!c->greeted && now - c->accepted_us > limit) conn_close(c);
  }
}

/* Whether every call of c has handed its last frame to nghttp2. */
static bool conn_calls_ended(const conn *c) {
  for (const nrd_srv_grpc_call *call = c->calls; call; call = call->next)
    if (!call->ended) return false;
  return true;
}

static void conn_end(conn *c);

/* max_connection_age: GOAWAY once a connection is that old (the client's
 * open calls go on, new ones go to a new connection), close it when its
 * calls have ended, or when the grace is over, ending what is left. */
static void loop_check_age(loop *lp, uint64_t now) {
  const nrd_srv_grpc_options *o = &lp->g->opts;
  if (o->max_connection_age_ms == 0) return;
  for (conn *c = lp->conns, *next; c; c = next) {
    next = c->next;
    if (!c->aged_us) {
      if (now - c->accepted_us < (uint64_t)o->max_connection_age_ms * 1000u) continue;
      c->aged_us = now;
      nghttp2_submit_goaway(c->sess, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(c->sess),
                            NGHTTP2_NO_ERROR, NULL, 0);
      conn_mark_dirty(c);
    }
    if (o->max_connection_age_grace_ms && now - c->aged_us >= (uint64_t)o->max_connection_age_grace_ms * 1000u) {
      conn_end(c); /* cancels what is still in the core */
    } else if (conn_calls_ended(c) && !c->close_after_flush) {
      c->close_after_flush = true;
      conn_mark_dirty(c);
    }
  }
}

static void loop_check_deadlines(loop *lp, uint64_t now) {
  for (conn *c = lp->conns; c; c = c->next) {
    for (nrd_srv_grpc_call *call = c->calls; call; call = call->next) {
      if (call->deadline_us && !call->done && now >= call->deadline_us) {
        call_abort(call, NRD_GRPC_DEADLINE_EXCEEDED, "Deadline Exceeded");
      }
    }
  }
}

/* Writes what it can of c's output, then closes it (lingering when all
 * of it was written). */
static void conn_end(conn *c) {
  nghttp2_session_terminate_session(c->sess, NGHTTP2_NO_ERROR);
  if (conn_flush(c)) conn_close(c); /* false: closed or lingering already */
}

/* The loop's last act: lets the lingering connections see their clients
 * close (LINGER_US at most), then closes what is left. New connections
 * are refused meanwhile. */
static void loop_linger_out(loop *lp) {
  struct epoll_event evs[64];
  while (lp->lingering) {
    uint64_t now = now_us();
    linger_sweep(lp, now, false);
    if (!lp->lingering) break;
    int n = epoll_wait(lp->epfd, evs, 64, 20);
    for (int i = 0; i < n; i++) {
      void *tag = evs[i].data.ptr;
      if (tag == &lp->kind_listener) {
        for (int fd; (fd = nrd_srv_acceptor_next(&lp->acceptor)) >= 0;) close(fd);
      } else if (tag != &lp->kind_wake) {
        conn *c = tag;
        if (c->linger_until_us) linger_read(c);
      }
    }
    nrd_srv_inbox_awake(&lp->inbox);
    loop_run_events(lp); /* events of calls already gone: dropped */
  }
}

/* Shutdown, graceful part. A streaming call with nothing left in the core
 * and no part of a message waiting ends with UNAVAILABLE (a message its
 * client sends before that gets an error response: see grpc_infer.c), and
 * a connection whose calls have all handed their last frame to nghttp2
 * closes once its output is written. Unary calls run to their end. */
static void loop_drain(loop *lp) {
  for (conn *c = lp->conns; c; c = c->next) {
    bool open = false;
    for (nrd_srv_grpc_call *call = c->calls; call; call = call->next) {
      if (!call->done && call->m && call->m->streaming && call->in_len == 0 && atomic_load(&call->refs) == 1)
        nrd_srv_grpc_call_finish(call, NRD_GRPC_UNAVAILABLE, "Server is stopping");
      if (!call->ended) open = true;
    }
    if (!open && !c->close_after_flush) {
      c->close_after_flush = true;
      conn_mark_dirty(c);
    }
  }
}

static void *loop_main(void *arg) {
  loop *lp = arg;
  nrd_srv_grpc *g = lp->g;
  struct epoll_event evs[64];
  uint64_t next_sweep = now_us() + 100000;
  for (;;) {
    if (atomic_load(&g->stopping) && !lp->closing) {
      lp->closing = true;
      for (conn *c = lp->conns; c; c = c->next) {
        /* Streams the client opened so far go on; it must not open more. */
        nghttp2_submit_goaway(c->sess, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(c->sess),
                              NGHTTP2_NO_ERROR, NULL, 0);
        conn_mark_dirty(c);
      }
      /* Messages sent before the signal may still wait in the sockets:
       * read them before the first loop_drain, which would otherwise end
       * their streams as idle and drop them unseen. */
      for (conn *c = lp->conns, *next; c; c = next) {
        next = c->next;
        if (!c->tls || c->tls_ready) conn_read(c);
      }
    }
    if (lp->closing && !lp->aborted && atomic_load(&g->aborting)) {
      lp->aborted = true;
      while (lp->conns) conn_end(lp->conns); /* cancels what is in the core */
    }
    if (lp->closing) {
      loop_run_events(lp);
      if (atomic_load(&g->live_calls) == 0) {
        while (lp->conns) conn_end(lp->conns); /* no calls left: only their last bytes */
        loop_linger_out(lp);
        break;
      }
      loop_drain(lp);
    }
    bool idle = nrd_srv_inbox_idle(&lp->inbox);
    int n = epoll_wait(lp->epfd, evs, 64, nrd_srv_acceptor_timeout(&lp->acceptor, idle ? 100 : 0));
    nrd_srv_inbox_awake(&lp->inbox); /* events run below; posts meanwhile need no wake-up */
    nrd_srv_acceptor_tick(&lp->acceptor);
    for (int i = 0; i < n; i++) {
      void *tag = evs[i].data.ptr;
      if (tag == &lp->kind_listener) {
        for (int k = 0; k < 64; k++) {
          int fd = nrd_srv_acceptor_next(&lp->acceptor);
          if (fd < 0) break;
          if (lp->closing)
            close(fd); /* shutting down: refused at once, not left waiting */
          else
            conn_new(lp, fd);
        }
      } else if (tag == &lp->kind_wake) {
        /* the inbox: loop_run_events below */
      } else {
        conn *c = tag;
        if (c->linger_until_us) {
          linger_read(c);
        } else if (c->closed) {
          /* closed earlier in this batch */
        } else if (c->tls && !c->tls_ready) {
          conn_tls_handshake(c);
        } else if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR) || c->tls_read_wants_out) {
          conn_read(c);
        } else if (evs[i].events & EPOLLOUT) {
          conn_mark_dirty(c);
        }
      }
    }
    loop_run_events(lp);
    uint64_t now = now_us();
    if (now >= next_sweep) {
      loop_check_deadlines(lp, now);
      loop_check_keepalive(lp, now);
      loop_check_handshakes(lp, now);
      loop_check_age(lp, now);
      linger_sweep(lp, now, false);
      next_sweep = now + 100000;
    }
    while (lp->dirty) {
      conn *c = lp->dirty;
      lp->dirty = c->dirty_next;
      c->is_dirty = false;
      if (!c->closed && !c->linger_until_us) conn_flush(c);
    }
    loop_bury(lp);
  }
  lp->dirty = NULL; /* only closed connections can be left on it */
  loop_bury(lp);
  return NULL;
}

/* ---- start / stop ------------------------------------------------------------- */

static void grpc_free(nrd_srv_grpc *g) {
  nrd_srv_header_forward_free(g->header_forward);
  nrd_srv_tls_free(g->tls);
  free(g);
}

static void loops_free(nrd_srv_grpc *g) {
  for (unsigned i = 0; i < g->n_loops; i++) {
    loop *lp = &g->loops[i];
    if (lp->has_inbox) nrd_srv_inbox_destroy(&lp->inbox);
    if (lp->epfd >= 0) close(lp->epfd);
    nrd_srv_block_cache_destroy(&lp->blocks); /* its sessions are gone */
  }
  free(g->loops);
}

TRITONSERVER_Error *nrd_srv_grpc_start(TRITONSERVER_Server *server, const nrd_srv_grpc_options *opts,
                                       nrd_srv_grpc **out) {
  *out = NULL;
  if (opts->threads < 1 || opts->threads > 256)
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "gRPC thread count must be between 1 and 256");
  nrd_srv_grpc *g = calloc(1, sizeof *g);
  if (g == NULL) return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  g->server = server;
  g->opts = *opts;
  if (g->opts.handshake_timeout_secs == 0) g->opts.handshake_timeout_secs = NRD_SRV_GRPC_HANDSHAKE_TIMEOUT_DEFAULT;
  atomic_init(&g->live_calls, 0);
  atomic_init(&g->stopping, false);
  atomic_init(&g->aborting, false);
  char msg[512];
  if (opts->header_forward &&
      !(g->header_forward = nrd_srv_header_forward_new(opts->header_forward, false, msg, sizeof msg))) {
    grpc_free(g);
    char full[600];
    snprintf(full, sizeof full, "--grpc-header-forward-pattern: %s", msg);
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, full);
  }
  if (opts->tls && (g->tls = nrd_srv_tls_new(opts->tls, msg, sizeof msg)) == NULL) {
    grpc_free(g);
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, msg);
  }
  int rc = nrd_srv_listen(opts->address, opts->port, opts->reuse_port, &g->listen_fd, &g->port, msg, sizeof msg);
  if (rc != 0) {
    grpc_free(g);
    return TRITONSERVER_ErrorNew(rc == -1 ? TRITONSERVER_ERROR_INVALID_ARG : TRITONSERVER_ERROR_UNAVAILABLE, msg);
  }
  TRITONSERVER_Error *err = NULL;
  g->loops = calloc(opts->threads, sizeof *g->loops);
  if (g->loops == NULL) {
    close(g->listen_fd);
    grpc_free(g);
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  }
  g->n_loops = opts->threads;
  for (unsigned i = 0; i < g->n_loops; i++) g->loops[i].epfd = -1; /* loops_free after a break */
  for (unsigned i = 0; i < g->n_loops; i++) {
    loop *lp = &g->loops[i];
    lp->g = g;
    lp->kind_listener = KIND_LISTENER;
    lp->kind_wake = KIND_WAKE;
    lp->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (lp->epfd >= 0 && nrd_srv_inbox_init(&lp->inbox, lp->epfd, &lp->kind_wake) == 0) lp->has_inbox = true;
    if (!lp->has_inbox ||
        nrd_srv_acceptor_init(&lp->acceptor, g->listen_fd, lp->epfd, &lp->kind_listener, "gRPC") != 0) {
      err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "cannot create the gRPC event loop (epoll/eventfd)");
      break;
    }
  }
  for (unsigned i = 0; err == NULL && i < g->n_loops; i++) {
    if (pthread_create(&g->loops[i].thread, NULL, loop_main, &g->loops[i]) != 0)
      err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "cannot start a gRPC loop thread");
    else
      g->loops[i].started = true;
  }
  if (err) {
    atomic_store(&g->stopping, true);
    for (unsigned i = 0; i < g->n_loops; i++) {
      if (!g->loops[i].started) continue;
      nrd_srv_inbox_wake(&g->loops[i].inbox);
      pthread_join(g->loops[i].thread, NULL);
    }
    loops_free(g);
    close(g->listen_fd);
    grpc_free(g);
    return err;
  }
  *out = g;
  return NULL;
}

int nrd_srv_grpc_port(const nrd_srv_grpc *g) { return g->port; }

void nrd_srv_grpc_drain(nrd_srv_grpc *g) {
  if (g == NULL) return;
  atomic_store(&g->stopping, true);
  for (unsigned i = 0; i < g->n_loops; i++) nrd_srv_inbox_wake(&g->loops[i].inbox);
}

bool nrd_srv_grpc_stop(nrd_srv_grpc *g, unsigned wait_secs) {
  if (g == NULL) return true;
  nrd_srv_grpc_drain(g);
  uint64_t until = now_us() + (uint64_t)wait_secs * 1000000u;
  while (atomic_load(&g->live_calls) > 0 && now_us() < until) usleep(10000);
  if (atomic_load(&g->live_calls) > 0) {
    /* Time is up: close what is left, cancelling its requests in the core,
     * and give the core a moment to hand them back. */
    atomic_store(&g->aborting, true);
    for (unsigned i = 0; i < g->n_loops; i++) nrd_srv_inbox_wake(&g->loops[i].inbox);
    uint64_t grace = now_us() + 2000000u;
    while (atomic_load(&g->live_calls) > 0 && now_us() < grace) usleep(10000);
  }
  if (atomic_load(&g->live_calls) > 0) {
    /* The core still holds requests: leave the loops running (they own the
     * calls) rather than free memory a core thread may still post to. */
    srv_log(TRITONSERVER_LOG_WARN, "gRPC front end: requests still in the core at shutdown; not waiting longer");
    /* Nobody will join them now: they end on their own, or with the process. */
    for (unsigned i = 0; i < g->n_loops; i++) pthread_detach(g->loops[i].thread);
    return false;
  }
  for (unsigned i = 0; i < g->n_loops; i++) pthread_join(g->loops[i].thread, NULL);
  loops_free(g);
  close(g->listen_fd);
  grpc_free(g);
  return true;
}
