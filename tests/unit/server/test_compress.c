/* Unit tests for the front ends' shared zlib code (src/server/common/compress.c). */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "compress.h"

static size_t pack(int wb, const void *in, size_t len, uint8_t **out) {
  nrd_srv_compress_piece piece = {in, len};
  size_t n = 0;
  cr_assert_eq(nrd_srv_compress(wb, 6, &piece, 1, 0, out, &n), 0);
  return n;
}

Test(compress, round_trip_in_both_formats_reports_trailing_bytes) {
  char text[5000];
  for (size_t i = 0; i < sizeof text; i++) text[i] = (char)('a' + i % 7);
  for (int f = 0; f < 2; f++) {
    int wb = nrd_srv_compress_window_bits(f ? "gzip" : "deflate");
    uint8_t *z;
    size_t zn = pack(wb, text, sizeof text, &z);
    uint8_t *withtail = malloc(zn + 3);
    memcpy(withtail, z, zn);
    memcpy(withtail + zn, "xyz", 3);
    uint8_t *out;
    size_t out_len, rest;
    const char *why;
    cr_assert_eq(nrd_srv_decompress(wb, withtail, zn + 3, sizeof text, &out, &out_len, &rest, &why),
                 NRD_SRV_INFLATE_OK);
    cr_assert_eq(out_len, sizeof text);
    cr_assert(memcmp(out, text, sizeof text) == 0);
    cr_assert_eq(rest, 3, "bytes after the stream are reported");
    free(out);
    free(withtail);
    free(z);
  }
}

Test(compress, bombs_truncation_and_garbage_are_refused) {
  size_t big = 4 * 1024 * 1024;
  char *zeros = calloc(1, big);
  uint8_t *z;
  int wb = nrd_srv_compress_window_bits("gzip");
  size_t zn = pack(wb, zeros, big, &z);
  uint8_t *out = (uint8_t *)"not touched";
  size_t out_len, rest;
  const char *why;
  cr_assert_eq(nrd_srv_decompress(wb, z, zn, big - 1, &out, &out_len, &rest, &why), NRD_SRV_INFLATE_TOO_LARGE);
  cr_assert_null(out);
  cr_assert_eq(nrd_srv_decompress(wb, z, zn, big, &out, &out_len, &rest, &why), NRD_SRV_INFLATE_OK,
               "exactly max bytes is allowed");
  cr_assert_eq(out_len, big);
  free(out);
  cr_assert_eq(nrd_srv_decompress(wb, z, zn / 2, big, &out, &out_len, &rest, &why), NRD_SRV_INFLATE_TRUNCATED);
  cr_assert_null(out);
  const char junk[] = "\x1f\x8bnot gzip at all";
  cr_assert_eq(nrd_srv_decompress(wb, junk, sizeof junk - 1, big, &out, &out_len, &rest, &why),
               NRD_SRV_INFLATE_CORRUPT);
  cr_assert_not_null(why);
  cr_assert_eq(nrd_srv_decompress(wb, "", 0, big, &out, &out_len, &rest, &why), NRD_SRV_INFLATE_TRUNCATED);
  free(z);
  free(zeros);
}
