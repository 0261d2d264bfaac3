/* Internals of the gRPC transport, shared by its three files:
 * grpc_server.c (event loops, connections, start and stop), grpc_call.c
 * (a call's side of grpc_call.h: replies, trailers, references) and
 * grpc_stream.c (receiving: the nghttp2 callbacks that turn a stream's
 * headers and data into calls and messages). Handlers see none of this;
 * they use grpc_call.h.
 *
 * Threads: a connection, its nghttp2 session and its calls belong to the
 * loop that accepted it; everything here is loop-thread only unless it
 * says otherwise (see grpc_server.c). */
#ifndef NRD_SRV_GRPC_INTERNAL_H
#define NRD_SRV_GRPC_INTERNAL_H

#include <nghttp2/nghttp2.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "acceptor.h"
#include "block_cache.h"
#include "grpc_call.h"
#include "grpc_server.h"
#include "header_forward.h"
#include "inbox.h"

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
  /* Events posted with a due time (nrd_srv_grpc_call_post_at) until it
   * comes, by due time: their links, chained; loop only. */
  nrd_srv_inbox_item *timers;
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
  atomic_bool cancelled; /* ended before it finished (nrd_srv_grpc_call_cancelled) */
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

static inline uint64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Queues c for a flush at the end of the loop's batch. Loop thread. */
static inline void conn_mark_dirty(conn *c) {
  if (c->is_dirty || c->closed || c->linger_until_us) return;
  c->is_dirty = true;
  c->dirty_next = c->lp->dirty;
  c->lp->dirty = c;
}

/* grpc_call.c. Loop thread. */

/* Ends the call for a transport-level reason (bad message, deadline, a
 * client that does not read): finishes it with status, ignores the rest of
 * its input, and cancels in the core whatever it had started. */
void nrd_srv_grpc_call_abort(nrd_srv_grpc_call *call, int status, const char *message);

/* The stream is gone (closed, reset, connection lost): detaches the call
 * from its connection, tells the handler if the call had not finished and
 * drops the transport's reference (the call may be freed). */
void nrd_srv_grpc_call_detach(nrd_srv_grpc_call *call);

/* grpc_stream.c. Loop thread. */

/* Hands the complete messages buffered for the call to its handler (unary:
 * only `at_end`, once the client half-closed); stops while the connection
 * is throttled unless `at_end`. */
void nrd_srv_grpc_call_deliver(nrd_srv_grpc_call *call, bool at_end);

/* Sets the session callbacks that receive requests (headers, data, frames,
 * stream close; the session's user data is the conn). Any thread. */
void nrd_srv_grpc_stream_callbacks(nghttp2_session_callbacks *cbs);

#endif
