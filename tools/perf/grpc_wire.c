/* gRPC client wire: nghttp2 session per connection, one call at a time,
 * gRPC framing, optional TLS on OpenSSL. See grpc_wire.h for the contract. */
#include "grpc_wire.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>
#include <protobuf-c/protobuf-c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http_wire.h"

#define WINDOW (16 << 20) /* our receive window, stream and connection */
#define UNARY_TIMEOUT_MS 30000 /* one-shot RPCs */
#define HANDSHAKE_TIMEOUT_S 30 /* each read or write of the TLS handshake */
static const unsigned char ALPN_H2[] = {2, 'h', '2'};

/* ---- TLS ---- */

struct nrd_perf_grpc_tls {
  SSL_CTX *ctx;
};

/* The flags whose files the context reads, for the messages. */
#define FLAG_ROOT "--ssl-grpc-root-certifications-file"
#define FLAG_KEY "--ssl-grpc-private-key-file"
#define FLAG_CHAIN "--ssl-grpc-certificate-chain-file"

/* OpenSSL's reason for the oldest error queued on this thread, or
 * `fallback`; empties the queue. */
static const char *take_reason(const char *fallback) {
  unsigned long e = ERR_peek_error();
  const char *r = e ? ERR_reason_error_string(e) : NULL;
  ERR_clear_error();
  return r ? r : fallback;
}

/* "FLAG 'path': what (OpenSSL: reason)" into err, for a file OpenSSL
 * could not use. */
static void file_error(char *err, size_t errlen, const char *flag, const char *path, const char *what) {
  snprintf(err, errlen, "%s '%s': %s (OpenSSL: %s)", flag, path, what, take_reason("no reason given"));
}

/* A readable file at `path`, or false with "FLAG 'path': why" in err. */
static bool readable(const char *flag, const char *path, char *err, size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, errlen, "%s '%s': %s", flag, path, strerror(errno));
    return false;
  }
  fclose(f);
  return true;
}

nrd_perf_grpc_tls *nrd_perf_grpc_tls_new(const char *root, const char *key, const char *chain, char *err,
                                         size_t errlen) {
  if ((root && !readable(FLAG_ROOT, root, err, errlen)) || (chain && !readable(FLAG_CHAIN, chain, err, errlen)) ||
      (key && !readable(FLAG_KEY, key, err, errlen)))
    return NULL;
  if (!key != !chain) {
    snprintf(err, errlen, "%s and %s go together", FLAG_KEY, FLAG_CHAIN);
    return NULL;
  }
  ERR_clear_error();
  nrd_perf_grpc_tls *t = calloc(1, sizeof *t);
  if (!t || !(t->ctx = SSL_CTX_new(TLS_client_method()))) {
    snprintf(err, errlen, "cannot create a TLS context: %s", take_reason("out of memory"));
    goto fail;
  }
  SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER, NULL);
  if (!SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION) ||
      SSL_CTX_set_alpn_protos(t->ctx, ALPN_H2, sizeof ALPN_H2) != 0) { /* 0 is success here */
    snprintf(err, errlen, "cannot set up TLS 1.2+ with ALPN h2: %s", take_reason("unknown error"));
    goto fail;
  }
  if (root && !SSL_CTX_load_verify_locations(t->ctx, root, NULL)) {
    file_error(err, errlen, FLAG_ROOT, root, "cannot read CA certificates");
    goto fail;
  }
  if (!root && !SSL_CTX_set_default_verify_paths(t->ctx)) {
    snprintf(err, errlen, "cannot read OpenSSL's default CA certificates: %s", take_reason("no reason given"));
    goto fail;
  }
  if (chain && !SSL_CTX_use_certificate_chain_file(t->ctx, chain)) {
    file_error(err, errlen, FLAG_CHAIN, chain, "cannot read a PEM certificate chain");
    goto fail;
  }
  if (key) {
    /* OpenSSL checks the key against the certificate as it loads it */
    bool loaded = SSL_CTX_use_PrivateKey_file(t->ctx, key, SSL_FILETYPE_PEM) == 1;
    if (!loaded && ERR_GET_REASON(ERR_peek_last_error()) != X509_R_KEY_VALUES_MISMATCH) {
      file_error(err, errlen, FLAG_KEY, key, "cannot read a PEM private key");
      goto fail;
    }
    if (!loaded || !SSL_CTX_check_private_key(t->ctx)) {
      ERR_clear_error();
      snprintf(err, errlen, "%s '%s' does not match %s '%s'", FLAG_KEY, key, FLAG_CHAIN, chain);
      goto fail;
    }
  }
  return t;
fail:
  nrd_perf_grpc_tls_free(t);
  return NULL;
}

void nrd_perf_grpc_tls_free(nrd_perf_grpc_tls *t) {
  if (!t) return;
  SSL_CTX_free(t->ctx);
  free(t);
}

/* Why an SSL call on c failed with SSL_get_error `e`, into buf: OpenSSL's
 * reason, and the certificate check's verdict when it failed. Empties
 * the thread's error queue; keeps errno. */
static void tls_describe(const nrd_perf_grpc_conn *c, int e, char *buf, size_t len) {
  int saved = errno;
  const char *fallback = "TLS error";
  switch (e) {
    case SSL_ERROR_ZERO_RETURN: fallback = "the server closed the TLS session"; break;
    case SSL_ERROR_SYSCALL: fallback = saved ? strerror(saved) : "the server closed the connection"; break;
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE: fallback = "no answer in time"; break; /* the handshake's socket timeouts */
  }
  int n = snprintf(buf, len, "%s", take_reason(fallback));
  long v = SSL_get_verify_result(c->ssl);
  if (v != X509_V_OK && n >= 0 && (size_t)n < len)
    snprintf(buf + n, len - (size_t)n, " (%s)", X509_verify_cert_error_string(v));
  errno = saved;
}

/* Marks c failed by TLS error `e`: c->tls_error says why, errno is the
 * socket's error or EPROTO. */
static void tls_fail(nrd_perf_grpc_conn *c, int e) {
  int saved = errno;
  tls_describe(c, e, c->tls_error, sizeof c->tls_error);
  c->failed = true;
  errno = e == SSL_ERROR_SYSCALL && saved ? saved : EPROTO;
}

/* After an SSL call wanted the socket (SSL_ERROR_WANT_READ or _WRITE in
 * `e`), waits until it is ready: true to retry. Any other `e` fails c. */
static bool tls_wait(nrd_perf_grpc_conn *c, int e) {
  if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
    tls_fail(c, e);
    return false;
  }
  struct pollfd p = {.fd = c->fd, .events = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT};
  while (poll(&p, 1, -1) < 0) {
    if (errno != EINTR) {
      c->failed = true;
      return false;
    }
  }
  return true;
}

/* TLS on c's connected socket to `host`: SNI and the name check (or the
 * address check for an IP literal), a blocking handshake with each step
 * bounded by HANDSHAKE_TIMEOUT_S, ALPN h2 required; then the socket turns
 * non-blocking (its timeouts no longer matter). */
static bool tls_start(nrd_perf_grpc_conn *c, const nrd_perf_grpc_tls *tls, const char *host, char *err, size_t errlen) {
  ERR_clear_error();
  c->ssl = SSL_new(tls->ctx);
  if (!c->ssl || !SSL_set_fd(c->ssl, c->fd)) {
    snprintf(err, errlen, "cannot create a TLS session: %s", take_reason("out of memory"));
    return false;
  }
  unsigned char addr[16];
  bool literal = inet_pton(AF_INET, host, addr) == 1 || inet_pton(AF_INET6, host, addr) == 1;
  bool named = literal ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl), host) == 1
                       : SSL_set_tlsext_host_name(c->ssl, host) == 1 && SSL_set1_host(c->ssl, host) == 1;
  if (!named) {
    snprintf(err, errlen, "TLS: cannot check the server's certificate against '%s': %s", host, take_reason("bad name"));
    return false;
  }
  struct timeval tv = {.tv_sec = HANDSHAKE_TIMEOUT_S};
  setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  int r = SSL_connect(c->ssl);
  if (r != 1) {
    char why[256];
    tls_describe(c, SSL_get_error(c->ssl, r), why, sizeof why);
    snprintf(err, errlen, "TLS handshake with %s failed: %s", c->authority, why);
    return false;
  }
  const unsigned char *proto = NULL;
  unsigned plen = 0;
  SSL_get0_alpn_selected(c->ssl, &proto, &plen);
  if (plen != 2 || memcmp(proto, "h2", 2)) {
    snprintf(err, errlen, "TLS handshake with %s: the server did not select HTTP/2 (ALPN h2)", c->authority);
    return false;
  }
  int fl = fcntl(c->fd, F_GETFL);
  if (fl < 0 || fcntl(c->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
    snprintf(err, errlen, "fcntl: %s", strerror(errno));
    return false;
  }
  return true;
}

/* A TLS write failed on a socket the server reset or closed. A server
 * that refuses the session after the handshake (TLS 1.3: our client
 * certificate, or its absence) sends an alert first, which may still be
 * waiting unread: its reason beats "Connection reset by peer". */
static void tls_take_alert(nrd_perf_grpc_conn *c) {
  int saved = errno;
  uint8_t buf[512];
  size_t n;
  ERR_clear_error();
  int r = SSL_read_ex(c->ssl, buf, sizeof buf, &n);
  unsigned long e = r == 1 ? 0 : ERR_peek_error();
  const char *why = e && SSL_get_error(c->ssl, r) == SSL_ERROR_SSL ? ERR_reason_error_string(e) : NULL;
  if (why && strstr(why, "alert")) snprintf(c->tls_error, sizeof c->tls_error, "%s", why);
  ERR_clear_error();
  errno = saved;
}

/* Writes all of buf on c's TLS session, waiting while the socket is full:
 * as blocking as the cleartext send. A retried SSL_write gets the same
 * arguments, as OpenSSL requires. */
static bool tls_write_all(nrd_perf_grpc_conn *c, const uint8_t *buf, size_t len) {
  while (len) {
    size_t n = 0;
    ERR_clear_error();
    int r = SSL_write_ex(c->ssl, buf, len, &n);
    if (r == 1) {
      buf += n, len -= n;
    } else if (!tls_wait(c, SSL_get_error(c->ssl, r))) {
      if (errno == ECONNRESET || errno == EPIPE) tls_take_alert(c);
      return false;
    }
  }
  return true;
}

/* conn_read over TLS: SSL_read until it wants more from the socket. */
static int tls_read(nrd_perf_grpc_conn *c) {
  uint8_t buf[16384];
  int got = 0;
  for (;;) {
    size_t n = 0;
    ERR_clear_error();
    int r = SSL_read_ex(c->ssl, buf, sizeof buf, &n);
    if (r == 1) {
      got = 1;
      if (!nrd_perf_grpc_conn_feed(c, buf, n)) return -1;
      continue;
    }
    int e = SSL_get_error(c->ssl, r);
    if (e == SSL_ERROR_WANT_READ) return got;
    if (!tls_wait(c, e)) return -1; /* waits out SSL_ERROR_WANT_WRITE, fails on the rest */
  }
}

/* ---- nghttp2 callbacks ---- */

static ssize_t body_read(nghttp2_session *sess, int32_t id, uint8_t *buf, size_t length, uint32_t *flags,
                         nghttp2_data_source *src, void *user) {
  (void)sess, (void)id, (void)src;
  nrd_perf_grpc_conn *c = user;
  size_t left = c->tx_len - c->tx_off;
  size_t n = left < length ? left : length;
  if (n) memcpy(buf, c->tx + c->tx_off, n);
  c->tx_off += n;
  if (c->tx_off == c->tx_len && c->tx_eof)
    *flags |= NGHTTP2_DATA_FLAG_EOF;
  else if (n == 0)
    return NGHTTP2_ERR_DEFERRED;
  return (ssize_t)n;
}

static int on_header(nghttp2_session *sess, const nghttp2_frame *frame, const uint8_t *name, size_t namelen,
                     const uint8_t *value, size_t valuelen, uint8_t flags, void *user) {
  (void)sess, (void)flags;
  nrd_perf_grpc_conn *c = user;
  if (frame->hd.type != NGHTTP2_HEADERS || frame->hd.stream_id != c->stream_id) return 0;
  if (namelen == 7 && !memcmp(name, ":status", 7)) {
    c->http_status = atoi((const char *)value);
  } else if (namelen == 11 && !memcmp(name, "grpc-status", 11)) {
    c->grpc_status = atoi((const char *)value);
  } else if (namelen == 12 && !memcmp(name, "grpc-message", 12)) {
    /* percent-decode into grpc_message */
    size_t o = 0;
    for (size_t i = 0; i < valuelen && o + 1 < sizeof c->grpc_message; i++) {
      char ch = (char)value[i];
      if (ch == '%' && i + 2 < valuelen) {
        char hex[3] = {(char)value[i + 1], (char)value[i + 2], 0};
        ch = (char)strtol(hex, NULL, 16);
        i += 2;
      }
      c->grpc_message[o++] = ch;
    }
    c->grpc_message[o] = 0;
  }
  return 0;
}

static int on_data_chunk(nghttp2_session *sess, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
                         void *user) {
  (void)sess, (void)flags;
  nrd_perf_grpc_conn *c = user;
  if (id != c->stream_id) return 0;
  if (c->rx_off && c->rx_off == c->rx_len) c->rx_off = c->rx_len = 0;
  if (c->rx_len + len > c->rx_cap) {
    if (c->rx_off) { /* compact first */
      memmove(c->rx, c->rx + c->rx_off, c->rx_len - c->rx_off);
      c->rx_len -= c->rx_off;
      c->rx_off = 0;
    }
    size_t cap = c->rx_cap ? c->rx_cap : 4096;
    while (cap < c->rx_len + len) cap *= 2;
    if (cap != c->rx_cap) {
      uint8_t *p = realloc(c->rx, cap);
      if (!p) return NGHTTP2_ERR_CALLBACK_FAILURE;
      c->rx = p, c->rx_cap = cap;
    }
  }
  memcpy(c->rx + c->rx_len, data, len);
  c->rx_len += len;
  return 0;
}

static int on_stream_close(nghttp2_session *sess, int32_t id, uint32_t code, void *user) {
  (void)sess;
  nrd_perf_grpc_conn *c = user;
  if (id == c->stream_id) {
    c->closed = true;
    c->rst_code = code;
  }
  return 0;
}

/* ---- connection ---- */

bool nrd_perf_grpc_conn_open(nrd_perf_grpc_conn *c, const nrd_perf_grpc_tls *tls, const char *host, const char *port,
                             char *err, size_t errlen) {
  *c = (nrd_perf_grpc_conn){.fd = -1, .grpc_status = -1};
  snprintf(c->authority, sizeof c->authority, "%s:%s", host, port);
  c->fd = nrd_perf_http_connect(host, port, err, errlen);
  if (c->fd < 0) return false;
  if (tls && !tls_start(c, tls, host, err, errlen)) {
    c->failed = true; /* no close_notify on a session that never started */
    nrd_perf_grpc_conn_close(c);
    return false;
  }
  nghttp2_session_callbacks *cbs = NULL;
  if (nghttp2_session_callbacks_new(&cbs)) goto oom;
  nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
  int rv = nghttp2_session_client_new(&c->sess, cbs, c);
  nghttp2_session_callbacks_del(cbs);
  if (rv) goto oom;
  nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0}, {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, WINDOW}};
  if (nghttp2_submit_settings(c->sess, NGHTTP2_FLAG_NONE, iv, 2) ||
      nghttp2_session_set_local_window_size(c->sess, NGHTTP2_FLAG_NONE, 0, WINDOW))
    goto oom;
  if (!nrd_perf_grpc_conn_flush(c)) {
    snprintf(err, errlen, "sending the HTTP/2 preface to %s: %s", c->authority,
             c->tls_error[0] ? c->tls_error : strerror(errno));
    nrd_perf_grpc_conn_close(c);
    return false;
  }
  return true;
oom:
  snprintf(err, errlen, "cannot create an HTTP/2 session (out of memory)");
  nrd_perf_grpc_conn_close(c);
  return false;
}

void nrd_perf_grpc_conn_close(nrd_perf_grpc_conn *c) {
  if (c->sess) nghttp2_session_del(c->sess);
  if (c->ssl) {
    if (!c->failed && SSL_is_init_finished(c->ssl)) SSL_shutdown(c->ssl); /* close_notify, not waited for */
    SSL_free(c->ssl);
    ERR_clear_error();
  }
  if (c->fd >= 0) close(c->fd);
  free(c->rx);
  c->sess = NULL, c->ssl = NULL, c->fd = -1, c->rx = NULL;
  c->rx_cap = c->rx_len = c->rx_off = 0;
  c->stream_id = 0;
}

void nrd_perf_grpc_conn_reset_call(nrd_perf_grpc_conn *c) {
  c->stream_id = 0;
  c->tx = NULL, c->tx_len = c->tx_off = 0, c->tx_eof = false;
  c->rx_off = c->rx_len = 0;
  c->http_status = 0, c->grpc_status = -1, c->grpc_message[0] = 0;
  c->closed = false, c->rst_code = 0;
}

#define NV(n, v)                                                                                                       \
  { (uint8_t *)(n), (uint8_t *)(v), strlen(n), strlen(v), NGHTTP2_NV_FLAG_NONE }

bool nrd_perf_grpc_conn_start(nrd_perf_grpc_conn *c, const char *path, const uint8_t *body, size_t len, bool end) {
  nrd_perf_grpc_conn_reset_call(c);
  c->tx = body, c->tx_len = len, c->tx_eof = end;
  nghttp2_nv hdrs[] = {NV(":method", "POST"),          NV(":scheme", c->ssl ? "https" : "http"), NV(":path", path),
                       NV(":authority", c->authority), NV("content-type", "application/grpc"),   NV("te", "trailers")};
  nghttp2_data_provider prd = {.read_callback = body_read};
  int32_t id = nghttp2_submit_request(c->sess, NULL, hdrs, sizeof hdrs / sizeof hdrs[0], &prd, NULL);
  if (id < 0) {
    c->failed = true;
    return false;
  }
  c->stream_id = id;
  return true;
}

bool nrd_perf_grpc_conn_write(nrd_perf_grpc_conn *c, const uint8_t *body, size_t len) {
  c->tx = body, c->tx_len = len, c->tx_off = 0;
  c->rx_off = c->rx_len = 0;
  int rv = nghttp2_session_resume_data(c->sess, c->stream_id);
  return rv == 0 || rv == NGHTTP2_ERR_INVALID_ARGUMENT; /* not deferred: already scheduled */
}

bool nrd_perf_grpc_conn_flush(nrd_perf_grpc_conn *c) {
  for (;;) {
    const uint8_t *data;
    ssize_t n = nghttp2_session_mem_send(c->sess, &data);
    if (n < 0) {
      errno = EPROTO;
      c->failed = true;
      return false;
    }
    if (n == 0) return true;
    if (c->ssl ? !tls_write_all(c, data, (size_t)n) : !nrd_perf_http_write_all(c->fd, (const char *)data, (size_t)n)) {
      c->failed = true;
      return false;
    }
  }
}

bool nrd_perf_grpc_conn_feed(nrd_perf_grpc_conn *c, const uint8_t *data, size_t len) {
  ssize_t rv = nghttp2_session_mem_recv(c->sess, data, len);
  if (rv < 0 || (size_t)rv != len) {
    c->failed = true;
    return false;
  }
  return true;
}

int nrd_perf_grpc_conn_read(nrd_perf_grpc_conn *c) {
  if (c->ssl) return tls_read(c);
  uint8_t buf[16384];
  int got = 0;
  for (;;) {
    ssize_t n = recv(c->fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      got = 1;
      if (!nrd_perf_grpc_conn_feed(c, buf, (size_t)n)) return -1;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return got;
    c->failed = true;
    return -1;
  }
}

bool nrd_perf_grpc_conn_next_message(nrd_perf_grpc_conn *c, const uint8_t **msg, size_t *len) {
  size_t avail = c->rx_len - c->rx_off;
  if (avail < 5) return false;
  const uint8_t *p = c->rx + c->rx_off;
  size_t n = (size_t)p[1] << 24 | (size_t)p[2] << 16 | (size_t)p[3] << 8 | p[4];
  if (avail < 5 + n) return false;
  if (p[0] != 0) {
    c->failed = true;
    return false;
  }
  *msg = p + 5, *len = n;
  c->rx_off += 5 + n;
  return true;
}

bool nrd_perf_grpc_conn_call_ok(const nrd_perf_grpc_conn *c, char *err, size_t errlen) {
  if (c->http_status != 200) {
    snprintf(err, errlen, "HTTP/2 status %d from %s", c->http_status, c->authority);
    return false;
  }
  if (c->grpc_status < 0) {
    snprintf(err, errlen, "the call ended without grpc-status (HTTP/2 error code %u)", c->rst_code);
    return false;
  }
  if (c->grpc_status != 0) {
    snprintf(err, errlen, "gRPC status %d: %s", c->grpc_status, c->grpc_message);
    return false;
  }
  return true;
}

uint8_t *nrd_perf_grpc_frame(const void *msg, size_t *len) {
  size_t n = protobuf_c_message_get_packed_size(msg);
  uint8_t *b = malloc(5 + n);
  if (!b) return NULL;
  b[0] = 0;
  b[1] = (uint8_t)(n >> 24), b[2] = (uint8_t)(n >> 16), b[3] = (uint8_t)(n >> 8), b[4] = (uint8_t)n;
  protobuf_c_message_pack(msg, b + 5);
  *len = 5 + n;
  return b;
}

bool nrd_perf_grpc_unary(const nrd_perf_grpc_tls *tls, const char *host, const char *port, const char *method,
                         const void *req, uint8_t **out, size_t *outlen, char *err, size_t errlen) {
  *out = NULL;
  nrd_perf_grpc_conn c;
  size_t blen = 0;
  uint8_t *body = nrd_perf_grpc_frame(req, &blen);
  bool ok = false;
  if (!body) {
    snprintf(err, errlen, "out of memory");
    return false;
  }
  if (!nrd_perf_grpc_conn_open(&c, tls, host, port, err, errlen)) goto done;
  if (!nrd_perf_grpc_conn_start(&c, method, body, blen, true) || !nrd_perf_grpc_conn_flush(&c)) {
    snprintf(err, errlen, "%s: cannot send the request to %s:%s%s%s", method, host, port, c.tls_error[0] ? ": " : "",
             c.tls_error);
    goto done;
  }
  while (!c.closed) {
    struct pollfd pfd = {.fd = c.fd, .events = POLLIN};
    int pr = poll(&pfd, 1, UNARY_TIMEOUT_MS);
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) {
      snprintf(err, errlen, "%s: no answer from %s:%s", method, host, port);
      goto done;
    }
    if (nrd_perf_grpc_conn_read(&c) < 0 && !c.closed) {
      snprintf(err, errlen, "%s: the connection to %s:%s failed%s%s", method, host, port, c.tls_error[0] ? ": " : "",
               c.tls_error);
      goto done;
    }
    if (!nrd_perf_grpc_conn_flush(&c) && !c.closed) {
      snprintf(err, errlen, "%s: writing to %s:%s: %s", method, host, port,
               c.tls_error[0] ? c.tls_error : strerror(errno));
      goto done;
    }
  }
  char why[400];
  if (!nrd_perf_grpc_conn_call_ok(&c, why, sizeof why)) {
    snprintf(err, errlen, "%s: %s", method, why);
    goto done;
  }
  const uint8_t *m;
  size_t mlen;
  if (!nrd_perf_grpc_conn_next_message(&c, &m, &mlen)) {
    snprintf(err, errlen, "%s: no response message", method);
    goto done;
  }
  *out = malloc(mlen ? mlen : 1);
  if (!*out) {
    snprintf(err, errlen, "out of memory");
    goto done;
  }
  memcpy(*out, m, mlen);
  *outlen = mlen;
  ok = true;
done:
  nrd_perf_grpc_conn_close(&c);
  free(body);
  return ok;
}
