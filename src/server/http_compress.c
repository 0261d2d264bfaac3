/* gzip/deflate as Triton supports them: a request body with
 * Content-Encoding gzip or deflate is decoded before it is parsed; an
 * inference reply is compressed when Accept-Encoding asks for gzip or
 * deflate. "deflate" is the zlib format (RFC 1950), as zlib's deflate(). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <zlib.h>

#include "http_internal.h"

#define CHUNK (256 * 1024)

/* windowBits for zlib: 15 (zlib wrapper) or 15 + 16 (gzip wrapper). */
static int window_bits(const char *enc) {
  if (strcasecmp(enc, "gzip") == 0 || strcasecmp(enc, "x-gzip") == 0) return 15 + 16;
  if (strcasecmp(enc, "deflate") == 0) return 15;
  return 0;
}

int nrd_srv_http_decode_body(struct evhttp_request *req, size_t limit, char *msg, size_t msglen) {
  const char *enc = evhttp_find_header(evhttp_request_get_input_headers(req), "Content-Encoding");
  if (enc == NULL || *enc == '\0' || strcasecmp(enc, "identity") == 0) return 0;
  int wb = window_bits(enc);
  if (wb == 0) {
    evhttp_add_header(evhttp_request_get_output_headers(req), "Accept-Encoding", "gzip, deflate");
    snprintf(msg, msglen, "unsupported Content-Encoding '%.60s' (supported: gzip, deflate, identity)", enc);
    return 415;
  }
  struct evbuffer *in = evhttp_request_get_input_buffer(req);
  size_t in_len = evbuffer_get_length(in);
  unsigned char *src = in_len ? evbuffer_pullup(in, -1) : NULL;
  z_stream z;
  memset(&z, 0, sizeof z);
  if (inflateInit2(&z, wb) != Z_OK) {
    snprintf(msg, msglen, "cannot start decompressing the request body");
    return 400;
  }
  struct evbuffer *out = evbuffer_new();
  int status = 0, rc = Z_OK;
  size_t total = 0;
  z.next_in = src;
  z.avail_in = (uInt)in_len; /* bodies are far below 4 GB (max input size) */
  while (out && rc != Z_STREAM_END) {
    struct evbuffer_iovec v;
    if (evbuffer_reserve_space(out, CHUNK, &v, 1) < 1) {
      status = 500;
      snprintf(msg, msglen, "out of memory decompressing the request body");
      break;
    }
    z.next_out = v.iov_base;
    z.avail_out = (uInt)(v.iov_len < CHUNK ? v.iov_len : CHUNK);
    size_t avail = z.avail_out;
    rc = inflate(&z, Z_NO_FLUSH);
    size_t produced = avail - z.avail_out;
    v.iov_len = produced;
    evbuffer_commit_space(out, &v, 1);
    total += produced;
    if (total > limit) {
      status = 413;
      snprintf(msg, msglen, "decompressed request body is larger than the limit of %zu bytes", limit);
      break;
    }
    if (rc == Z_STREAM_END) break;
    if (rc != Z_OK && !(rc == Z_BUF_ERROR && z.avail_in > 0)) {
      status = 400;
      snprintf(msg, msglen, "the request body is not valid %s data%s%s", enc, z.msg ? ": " : "",
               z.msg ? z.msg : "");
      break;
    }
    if (produced == 0 && z.avail_in == 0) {
      status = 400;
      snprintf(msg, msglen, "the request body is truncated %s data", enc);
      break;
    }
  }
  inflateEnd(&z);
  if (out == NULL) {
    snprintf(msg, msglen, "out of memory decompressing the request body");
    return 500;
  }
  if (status == 0) {
    evbuffer_drain(in, in_len);
    evbuffer_add_buffer(in, out);
  }
  evbuffer_free(out);
  return status;
}

/* The first of gzip/deflate that Accept-Encoding allows (q > 0), or 0. */
static int accepted(const char *accept) {
  const char *p = accept;
  while (*p) {
    while (*p == ' ' || *p == ',') p++;
    const char *tok = p;
    while (*p && *p != ',' && *p != ';' && *p != ' ') p++;
    size_t n = (size_t)(p - tok);
    bool zero_q = false;
    while (*p && *p != ',') {
      if (*p == 'q' && p[1] == '=') zero_q = strtod(p + 2, NULL) <= 0.0;
      p++;
    }
    if (zero_q) continue;
    if (n == 4 && strncasecmp(tok, "gzip", 4) == 0) return 15 + 16;
    if (n == 7 && strncasecmp(tok, "deflate", 7) == 0) return 15;
  }
  return 0;
}

void nrd_srv_http_encode_reply(struct evhttp_request *req) {
  const char *accept = evhttp_find_header(evhttp_request_get_input_headers(req), "Accept-Encoding");
  int wb = accept ? accepted(accept) : 0;
  if (wb == 0) return;
  struct evbuffer *body = evhttp_request_get_output_buffer(req);
  size_t len = evbuffer_get_length(body);
  z_stream z;
  memset(&z, 0, sizeof z);
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, wb, 8, Z_DEFAULT_STRATEGY) != Z_OK) return;
  struct evbuffer *out = evbuffer_new();
  bool ok = out != NULL;
  /* Walk the body's chunks without making it contiguous. */
  int n = ok ? evbuffer_peek(body, -1, NULL, NULL, 0) : 0;
  struct evbuffer_iovec *vs = n > 0 ? malloc((size_t)n * sizeof *vs) : NULL;
  if (n > 0 && vs == NULL) ok = false;
  if (ok && n > 0) evbuffer_peek(body, -1, NULL, vs, n);
  for (int i = 0; ok && i <= n; i++) {
    int flush = i == n ? Z_FINISH : Z_NO_FLUSH;
    z.next_in = i < n ? vs[i].iov_base : NULL;
    z.avail_in = i < n ? (uInt)vs[i].iov_len : 0;
    int rc;
    do {
      struct evbuffer_iovec v;
      if (evbuffer_reserve_space(out, CHUNK, &v, 1) < 1) {
        ok = false;
        break;
      }
      z.next_out = v.iov_base;
      z.avail_out = (uInt)(v.iov_len < CHUNK ? v.iov_len : CHUNK);
      size_t avail = z.avail_out;
      rc = deflate(&z, flush);
      v.iov_len = avail - z.avail_out;
      evbuffer_commit_space(out, &v, 1);
      if (rc == Z_STREAM_ERROR) ok = false;
    } while (ok && (z.avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END)));
  }
  deflateEnd(&z);
  free(vs);
  if (ok) {
    evbuffer_drain(body, len);
    evbuffer_add_buffer(body, out);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Encoding",
                      wb == 15 ? "deflate" : "gzip");
  }
  if (out) evbuffer_free(out);
}
