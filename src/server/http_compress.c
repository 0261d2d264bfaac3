/* gzip/deflate as Triton supports them: a request body with
 * Content-Encoding gzip or deflate is decoded before it is parsed; an
 * inference reply is compressed when Accept-Encoding asks for gzip or
 * deflate. "deflate" is the zlib format (RFC 1950), as zlib's deflate(). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <zlib.h>

#include "compress.h"
#include "http_internal.h"

#define CHUNK (256 * 1024)

int nrd_srv_http_decode_body(nrd_srv_http_req *req, size_t limit, char *msg, size_t msglen) {
  const char *enc = nrd_srv_http_header_get(req, "Content-Encoding");
  if (enc == NULL || *enc == '\0' || strcasecmp(enc, "identity") == 0) return 0;
  int wb = nrd_srv_compress_window_bits(enc);
  if (wb == 0) {
    nrd_srv_http_add_header(req, "Accept-Encoding", "gzip, deflate");
    snprintf(msg, msglen, "unsupported Content-Encoding '%.60s' (supported: gzip, deflate, identity)", enc);
    return 415;
  }
  size_t in_len = 0;
  const char *src = nrd_srv_http_body(req, &in_len);
  z_stream z;
  memset(&z, 0, sizeof z);
  if (inflateInit2(&z, wb) != Z_OK) {
    snprintf(msg, msglen, "cannot start decompressing the request body");
    return 400;
  }
  char *out = NULL;
  size_t cap = 0, total = 0;
  int status = 0, rc = Z_OK;
  z.next_in = (Bytef *)src;
  z.avail_in = (uInt)in_len; /* bodies are far below 4 GB (max input size) */
  while (rc != Z_STREAM_END) {
    if (total == cap) {
      size_t ncap = cap ? cap * 2 : (in_len * 4 > CHUNK ? in_len * 4 : CHUNK);
      if (ncap > limit + 1) ncap = limit + 1; /* one byte past the limit tells us it is over */
      char *n = ncap > cap ? realloc(out, ncap) : NULL;
      if (n == NULL) {
        status = ncap > cap ? 500 : 413;
        if (status == 500) snprintf(msg, msglen, "out of memory decompressing the request body");
        else snprintf(msg, msglen, "decompressed request body is larger than the limit of %zu bytes", limit);
        break;
      }
      out = n;
      cap = ncap;
    }
    size_t room = cap - total;
    if (room > CHUNK) room = CHUNK;
    z.next_out = (Bytef *)out + total;
    z.avail_out = (uInt)room;
    rc = inflate(&z, Z_NO_FLUSH);
    size_t produced = room - z.avail_out;
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
  if (status != 0) {
    free(out);
    return status;
  }
  nrd_srv_http_set_body(req, out, total);
  return 0;
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

void nrd_srv_http_encode_reply(nrd_srv_http_req *req) {
  const char *accept = nrd_srv_http_header_get(req, "Accept-Encoding");
  int wb = accept ? accepted(accept) : 0;
  if (wb == 0) return;
  /* The body's pieces are compressed without joining them first. */
  enum { INLINE = 8 };
  nrd_srv_compress_piece in_s[INLINE];
  nrd_srv_compress_piece *in = req->n_segs > INLINE ? malloc(req->n_segs * sizeof *in) : in_s;
  if (in == NULL) return;
  for (size_t i = 0; i < req->n_segs; i++)
    in[i] = (nrd_srv_compress_piece){req->segs[i].data, req->segs[i].len};
  uint8_t *out = NULL;
  size_t produced = 0;
  int rc = nrd_srv_compress(wb, Z_DEFAULT_COMPRESSION, in, req->n_segs, 0, &out, &produced);
  if (in != in_s) free(in);
  if (rc != 0) return;
  /* Replace the body with the compressed bytes. */
  for (size_t i = 0; i < req->n_segs; i++)
    if (req->segs[i].release) req->segs[i].release(req->segs[i].arg);
  req->n_segs = 0;
  req->out_len = 0;
  if (nrd_srv_http_add_body_ref(req, (const char *)out, produced, free, out) == 0)
    nrd_srv_http_add_header(req, "Content-Encoding", wb == 15 ? "deflate" : "gzip");
}
