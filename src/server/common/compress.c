/* zlib compression shared by the HTTP and gRPC front ends (compress.h). */
#include "compress.h"

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
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

int nrd_srv_compress(int window_bits, int level, const nrd_srv_compress_piece *in, size_t n, size_t headroom,
                     uint8_t **out, size_t *out_len) {
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

nrd_srv_inflate_result nrd_srv_decompress(int window_bits, const void *in, size_t len, size_t max, uint8_t **out,
                                          size_t *out_len, size_t *rest, const char **why) {
  *out = NULL;
  *out_len = 0;
  *rest = 0;
  *why = NULL;
  z_stream z;
  memset(&z, 0, sizeof z);
  if (inflateInit2(&z, window_bits) != Z_OK) return NRD_SRV_INFLATE_NO_MEMORY;
  const size_t most = max == SIZE_MAX ? SIZE_MAX : max + 1; /* one past max tells it is over */
  size_t cap = len > (SIZE_MAX - 64) / 4 ? SIZE_MAX : len * 4 + 64;
  if (cap > most) cap = most;
  uint8_t *buf = malloc(cap ? cap : 1);
  const uint8_t *src = in;
  size_t left = len, total = 0;
  nrd_srv_inflate_result res = buf ? NRD_SRV_INFLATE_OK : NRD_SRV_INFLATE_NO_MEMORY;
  while (res == NRD_SRV_INFLATE_OK) {
    if (z.avail_in == 0 && left > 0) { /* zlib counts in uInt */
      uInt n = left > UINT_MAX ? UINT_MAX : (uInt)left;
      z.next_in = (Bytef *)src;
      z.avail_in = n;
      src += n;
      left -= n;
    }
    if (total == cap) {
      if (cap > max) {
        res = NRD_SRV_INFLATE_TOO_LARGE;
        break;
      }
      size_t ncap = cap > most / 2 ? most : cap * 2;
      uint8_t *nb = realloc(buf, ncap);
      if (nb == NULL) {
        res = NRD_SRV_INFLATE_NO_MEMORY;
        break;
      }
      buf = nb;
      cap = ncap;
    }
    size_t room = cap - total > UINT_MAX ? UINT_MAX : cap - total;
    z.next_out = buf + total;
    z.avail_out = (uInt)room;
    int rc = inflate(&z, Z_NO_FLUSH);
    size_t produced = room - z.avail_out;
    total += produced;
    if (total > max) {
      res = NRD_SRV_INFLATE_TOO_LARGE;
    } else if (rc == Z_STREAM_END) {
      break;
    } else if (rc == Z_OK || rc == Z_BUF_ERROR) {
      if (produced == 0 && z.avail_in == 0 && left == 0) res = NRD_SRV_INFLATE_TRUNCATED;
    } else {
      res = rc == Z_MEM_ERROR ? NRD_SRV_INFLATE_NO_MEMORY : NRD_SRV_INFLATE_CORRUPT;
      *why = z.msg; /* zlib's messages are string literals */
    }
  }
  if (res == NRD_SRV_INFLATE_OK) {
    *out = buf;
    *out_len = total;
    *rest = z.avail_in + left;
  } else {
    free(buf);
  }
  inflateEnd(&z);
  return res;
}
