/* gRPC client wire: nghttp2 session per connection, one call at a time,
 * gRPC framing. See grpc_wire.h for the contract. */
#include "grpc_wire.h"

#include <errno.h>
#include <poll.h>
#include <protobuf-c/protobuf-c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http_wire.h"

#define WINDOW (16 << 20)      /* our receive window, stream and connection */
#define UNARY_TIMEOUT_MS 30000 /* one-shot RPCs */

/* ---- nghttp2 callbacks ---- */

static ssize_t body_read(nghttp2_session *sess, int32_t id, uint8_t *buf, size_t length, uint32_t *flags,
                         nghttp2_data_source *src, void *user) {
  (void)sess, (void)id, (void)src;
  nrd_perf_grpc_conn *c = user;
  size_t left = c->tx_len - c->tx_off;
  size_t n = left < length ? left : length;
  if (n) memcpy(buf, c->tx + c->tx_off, n);
  c->tx_off += n;
  if (c->tx_off == c->tx_len && c->tx_eof) *flags |= NGHTTP2_DATA_FLAG_EOF;
  else if (n == 0) return NGHTTP2_ERR_DEFERRED;
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

bool nrd_perf_grpc_conn_open(nrd_perf_grpc_conn *c, const char *host, const char *port, char *err, size_t errlen) {
  *c = (nrd_perf_grpc_conn){.fd = -1, .grpc_status = -1};
  snprintf(c->authority, sizeof c->authority, "%s:%s", host, port);
  c->fd = nrd_perf_http_connect(host, port, err, errlen);
  if (c->fd < 0) return false;
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
    snprintf(err, errlen, "sending the HTTP/2 preface to %s: %s", c->authority, strerror(errno));
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
  if (c->fd >= 0) close(c->fd);
  free(c->rx);
  c->sess = NULL, c->fd = -1, c->rx = NULL;
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

#define NV(n, v) {(uint8_t *)(n), (uint8_t *)(v), strlen(n), strlen(v), NGHTTP2_NV_FLAG_NONE}

bool nrd_perf_grpc_conn_start(nrd_perf_grpc_conn *c, const char *path, const uint8_t *body, size_t len, bool end) {
  nrd_perf_grpc_conn_reset_call(c);
  c->tx = body, c->tx_len = len, c->tx_eof = end;
  nghttp2_nv hdrs[] = {NV(":method", "POST"),
                       NV(":scheme", "http"),
                       NV(":path", path),
                       NV(":authority", c->authority),
                       NV("content-type", "application/grpc"),
                       NV("te", "trailers")};
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
    if (!nrd_perf_http_write_all(c->fd, (const char *)data, (size_t)n)) {
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

bool nrd_perf_grpc_unary(const char *host, const char *port, const char *method, const void *req, uint8_t **out,
                         size_t *outlen, char *err, size_t errlen) {
  *out = NULL;
  nrd_perf_grpc_conn c;
  size_t blen = 0;
  uint8_t *body = nrd_perf_grpc_frame(req, &blen);
  bool ok = false;
  if (!body) {
    snprintf(err, errlen, "out of memory");
    return false;
  }
  if (!nrd_perf_grpc_conn_open(&c, host, port, err, errlen)) goto done;
  if (!nrd_perf_grpc_conn_start(&c, method, body, blen, true) || !nrd_perf_grpc_conn_flush(&c)) {
    snprintf(err, errlen, "%s: cannot send the request to %s:%s", method, host, port);
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
      snprintf(err, errlen, "%s: the connection to %s:%s failed", method, host, port);
      goto done;
    }
    if (!nrd_perf_grpc_conn_flush(&c) && !c.closed) {
      snprintf(err, errlen, "%s: writing to %s:%s: %s", method, host, port, strerror(errno));
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
