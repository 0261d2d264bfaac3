/* zlib compression shared by the HTTP and gRPC front ends (compress.h). */
#include "compress.h"

#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <zlib.h>

int nrd_srv_compress_window_bits(const char *encoding) {
  if (strcasecmp(encoding, "gzip") == 0 || strcasecmp(encoding, "x-gzip") == 0) return 15 + 16;
  if (strcasecmp(encoding, "deflate") == 0) return 15;
  return 0;
}

int nrd_srv_compress_zlib_level(nrd_srv_compress_level level) {
  switch (level) {
    case NRD_SRV_COMPRESS_LOW: return 1;
    case NRD_SRV_COMPRESS_HIGH: return 9;
    default: return 6;
  }
}

/* zlib counts in uInt: larger buffers are fed and filled in slices. */
#define SLICE ((size_t)1 << 30)

/* Makes room in the output when zlib filled it: grows the buffer when it
 * is full. Returns false when memory runs out. */
static bool out_room(z_stream *z, uint8_t **buf, size_t *cap) {
  if (z->avail_out > 0) return true;
  size_t used = (size_t)(z->next_out - *buf);
  if (used == *cap) {
    size_t ncap = *cap * 2;
    uint8_t *g = ncap > *cap ? realloc(*buf, ncap) : NULL;
    if (g == NULL) return false;
    *buf = g;
    *cap = ncap;
  }
  z->next_out = *buf + used;
  z->avail_out = (uInt)(*cap - used < SLICE ? *cap - used : SLICE);
  return true;
}

int nrd_srv_compress(int window_bits, int level, const nrd_srv_compress_piece *in, size_t n,
                     size_t headroom, uint8_t **out, size_t *out_len) {
  *out = NULL;
  *out_len = 0;
  z_stream z;
  memset(&z, 0, sizeof z);
  if (deflateInit2(&z, level, Z_DEFLATED, window_bits, 8, Z_DEFAULT_STRATEGY) != Z_OK) return -1;
  size_t total = 0;
  for (size_t i = 0; i < n; i++) total += in[i].len;
  /* Usually enough at once: what deflateBound allows for one pass. */
  size_t bound = total < SLICE ? (size_t)deflateBound(&z, (uLong)total) : total + total / 8;
  size_t cap = headroom + bound + 64;
  uint8_t *buf = malloc(cap);
  bool ok = buf != NULL;
  if (ok) {
    z.next_out = buf + headroom;
    z.avail_out = (uInt)(cap - headroom < SLICE ? cap - headroom : SLICE);
  }
  for (size_t i = 0; ok && i < n; i++) {
    const uint8_t *p = in[i].data;
    size_t left = in[i].len;
    while (ok && left > 0) {
      size_t take = left < SLICE ? left : SLICE;
      z.next_in = (Bytef *)p;
      z.avail_in = (uInt)take;
      while (ok && z.avail_in > 0) {
        ok = out_room(&z, &buf, &cap);
        if (ok && deflate(&z, Z_NO_FLUSH) == Z_STREAM_ERROR) ok = false;
      }
      p += take;
      left -= take;
    }
  }
  int rc = Z_OK;
  while (ok && rc != Z_STREAM_END) {
    ok = out_room(&z, &buf, &cap);
    if (!ok) break;
    rc = deflate(&z, Z_FINISH);
    if (rc != Z_OK && rc != Z_STREAM_END && !(rc == Z_BUF_ERROR && z.avail_out == 0)) ok = false;
  }
  size_t produced = ok ? (size_t)(z.next_out - buf) - headroom : 0;
  deflateEnd(&z);
  if (!ok) {
    free(buf);
    return -1;
  }
  *out = buf;
  *out_len = produced;
  return 0;
}
