/* gRPC on the client side, the few pieces nrd_perf needs: one HTTP/2
 * connection (nghttp2; cleartext with prior knowledge, or TLS with ALPN h2
 * on OpenSSL) carrying one call at a time, gRPC message framing both ways,
 * and a blocking unary call for the one-shot RPCs (metadata, config,
 * statistics).
 *
 * A connection's call is either unary (the request is the whole body) or
 * streaming (the body stays open; each write adds one framed message).
 * Responses are collected per call: complete messages are handed out in
 * order, and grpc-status / grpc-message are recorded when the trailers (or
 * a trailers-only response) arrive.
 *
 * Threads: a connection is not locked; its owner serializes every call on
 * it (the driver holds the slot's mutex). nrd_perf_grpc_unary is
 * self-contained and may run on any thread. A TLS context is built and
 * freed on one thread; in between any thread may open connections with it.
 * TLS writes may raise SIGPIPE: the process ignores it (main does). */
#ifndef NRD_PERF_GRPC_WIRE_H
#define NRD_PERF_GRPC_WIRE_H

#include <nghttp2/nghttp2.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ssl_st; /* OpenSSL's SSL */

/* The TLS settings every connection of a run shares: an OpenSSL SSL_CTX
 * (TLS 1.2 or later, ALPN h2, the server's certificate verified). Opaque. */
typedef struct nrd_perf_grpc_tls nrd_perf_grpc_tls;

typedef struct nrd_perf_grpc_conn {
  int fd; /* -1: not connected */
  struct ssl_st *ssl; /* the TLS session (owned); NULL: cleartext */
  nghttp2_session *sess;
  char authority[300];
  /* the current call; stream_id 0 = none */
  int32_t stream_id;
  const uint8_t *tx; /* body bytes to send (not owned) */
  size_t tx_len, tx_off;
  bool tx_eof; /* end the body after tx */
  uint8_t *rx; /* DATA received on the call, framing included (owned) */
  size_t rx_off, rx_len, rx_cap;
  int http_status; /* :status, 0 until the headers arrive */
  int grpc_status; /* -1 until trailers arrive */
  char grpc_message[256];
  bool closed; /* the call's stream has closed */
  uint32_t rst_code; /* HTTP/2 error code of the close */
  bool failed; /* the connection is unusable (nghttp2, socket or TLS error) */
  char tls_error[160]; /* OpenSSL's reason when TLS failed the connection, else "" */
} nrd_perf_grpc_conn;

/* Builds the TLS settings from PEM files: `root` holds the CA(s) the
 * server's certificate must chain to (NULL: OpenSSL's default verify
 * paths); `key` and `chain` are the client's private key and certificate
 * chain for mutual TLS (both, or both NULL). The paths are only read
 * here. Returns a context the caller frees with nrd_perf_grpc_tls_free, or
 * NULL with one line in err naming the flag and the file at fault.
 * Threads: any one thread, before the context is shared; once built it is
 * read-only and any thread may open connections with it. */
nrd_perf_grpc_tls *nrd_perf_grpc_tls_new(const char *root, const char *key, const char *chain, char *err,
                                         size_t errlen);

/* Frees the context (NULL is fine). Every connection opened with it must
 * be closed already. Threads: one thread, when no other uses it. */
void nrd_perf_grpc_tls_free(nrd_perf_grpc_tls *t);

/* Connects to host:port, over TLS when `tls` is not NULL (blocking
 * handshake that checks the server's certificate against host, then the
 * socket turns non-blocking), and sends the HTTP/2 preface and SETTINGS.
 * `tls` is borrowed and must outlive the connection. On false err says
 * why and the connection is closed (nrd_perf_grpc_conn_close is still
 * safe). `c` must not move while open (it is nghttp2's user data).
 * Threads: the connection's owner (any thread; may block on the handshake). */
bool nrd_perf_grpc_conn_open(nrd_perf_grpc_conn *c, const nrd_perf_grpc_tls *tls, const char *host, const char *port,
                             char *err, size_t errlen);

/* Closes the socket (after a TLS close_notify when the session is sound)
 * and frees everything, the TLS session included; safe on a closed
 * connection. */
void nrd_perf_grpc_conn_close(nrd_perf_grpc_conn *c);

/* Starts a call on `path` (e.g. "/inference.GRPCInferenceService" "/ModelInfer")
 * whose body begins with body[0..len) (already framed, not copied: it must
 * stay valid until sent, i.e. until the response). `end`: the body is
 * complete (unary); otherwise more may follow with conn_write. Queues only;
 * call conn_flush to send. False when nghttp2 refuses. */
bool nrd_perf_grpc_conn_start(nrd_perf_grpc_conn *c, const char *path, const uint8_t *body, size_t len, bool end);

/* Streaming: queues body[0..len) (same lifetime rule as conn_start) after
 * the previous bytes, which must have been sent already. */
bool nrd_perf_grpc_conn_write(nrd_perf_grpc_conn *c, const uint8_t *body, size_t len);

/* Writes everything nghttp2 has to send (blocking writes; over TLS it
 * waits with poll while the socket is full). False (errno set, c->failed,
 * c->tls_error for a TLS error) on an error. */
bool nrd_perf_grpc_conn_flush(nrd_perf_grpc_conn *c);

/* Feeds received bytes to the session (callbacks update the call's
 * state). False (c->failed) on a protocol error. */
bool nrd_perf_grpc_conn_feed(nrd_perf_grpc_conn *c, const uint8_t *data, size_t len);

/* Reads what the socket has without blocking (over TLS: until OpenSSL
 * wants more bytes from the socket, so nothing is left buffered) and
 * feeds it. Returns 1 when bytes were read, 0 when none were available, -1
 * on EOF or an error (c->failed set; c->tls_error for a TLS error). */
int nrd_perf_grpc_conn_read(nrd_perf_grpc_conn *c);

/* Pops the call's next complete response message: true with *msg and *len
 * (valid until the next feed/read or reset). A compressed message counts
 * as a protocol error (c->failed). */
bool nrd_perf_grpc_conn_next_message(nrd_perf_grpc_conn *c, const uint8_t **msg, size_t *len);

/* Forgets the current call (after its stream closed) so another can start. */
void nrd_perf_grpc_conn_reset_call(nrd_perf_grpc_conn *c);

/* Writes the call's failure, if any, into err: returns true when the
 * closed call succeeded (HTTP 200, grpc-status 0). */
bool nrd_perf_grpc_conn_call_ok(const nrd_perf_grpc_conn *c, char *err, size_t errlen);

/* A 5-byte-prefixed gRPC message holding `msg` (a protobuf-c message), in
 * a new malloc'd buffer (caller frees) of *len bytes; NULL when out of
 * memory. */
uint8_t *nrd_perf_grpc_frame(const void *msg, size_t *len);

/* One unary call on a fresh connection (TLS when `tls` is not NULL,
 * borrowed), blocking. On success *out is the response message (unframed,
 * malloc'd, caller frees) of *outlen bytes. On false err says why and
 * *out is NULL. `req` is a protobuf-c message. Threads: any thread. */
bool nrd_perf_grpc_unary(const nrd_perf_grpc_tls *tls, const char *host, const char *port, const char *method,
                         const void *req, uint8_t **out, size_t *outlen, char *err, size_t errlen);

#endif
