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

int nrd_srv_http_decode_body(nrd_srv_http_req *req, size_t limit, char *msg, size_t msglen) {
  const char *enc = nrd_srv_http_header_known(req, NRD_SRV_H_CONTENT_ENCODING);
  if (enc == NULL || *enc == '\0' || strcasecmp(enc, "identity") == 0) return 0;
  int wb = nrd_srv_compress_window_bits(enc);
  if (wb == 0) {
    nrd_srv_http_add_header(req, "Accept-Encoding", "gzip, deflate");
    snprintf(msg, msglen, "unsupported Content-Encoding '%.60s' (supported: gzip, deflate, identity)", enc);
    return 415;
  }
  size_t in_len = 0;
  const char *src = nrd_srv_http_body(req, &in_len);
  uint8_t *out = NULL;
  size_t total = 0, rest = 0;
  const char *why = NULL;
  switch (nrd_srv_decompress(wb, src, in_len, limit, &out, &total, &rest, &why)) {
    case NRD_SRV_INFLATE_OK: break; /* bytes after the end of the stream are ignored */
    case NRD_SRV_INFLATE_TOO_LARGE:
      /* Triton's sentence (server cd0e3a676). */
      snprintf(msg, msglen,
               "Decompressed data size exceeds the maximum allowed value of %zu bytes. Use "
               "--http-max-input-size to increase the limit.",
               limit);
      return 400;
    case NRD_SRV_INFLATE_NO_MEMORY: snprintf(msg, msglen, "out of memory decompressing the request body"); return 500;
    case NRD_SRV_INFLATE_TRUNCATED: snprintf(msg, msglen, "the request body is truncated %s data", enc); return 400;
    case NRD_SRV_INFLATE_CORRUPT:
      snprintf(msg, msglen, "the request body is not valid %s data%s%s", enc, why ? ": " : "", why ? why : "");
      return 400;
  }
  nrd_srv_http_set_body(req, (char *)out, total);
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
  const char *accept = nrd_srv_http_header_known(req, NRD_SRV_H_ACCEPT_ENCODING);
  int wb = accept ? accepted(accept) : 0;
  if (wb == 0) return;
  /* The body's pieces are compressed without joining them first. */
  enum { INLINE = 8 };
  nrd_srv_compress_piece in_s[INLINE];
  nrd_srv_compress_piece *in = req->n_segs > INLINE ? malloc(req->n_segs * sizeof *in) : in_s;
  if (in == NULL) return;
  for (size_t i = 0; i < req->n_segs; i++) in[i] = (nrd_srv_compress_piece){req->segs[i].data, req->segs[i].len};
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
