/* zlib compression shared by the front ends: HTTP replies with
 * Content-Encoding gzip/deflate and gRPC messages with grpc-encoding
 * gzip/deflate. "deflate" is the zlib format (RFC 1950), as both protocols
 * use it.
 *
 * Threads: any thread; nothing here keeps state between calls. */
#ifndef NRD_SRV_COMPRESS_H
#define NRD_SRV_COMPRESS_H

#include <stddef.h>
#include <stdint.h>

/* How hard to compress, as tritonserver's
 * --grpc-infer-response-compression-level names it. */
typedef enum nrd_srv_compress_level {
  NRD_SRV_COMPRESS_NONE = 0,
  NRD_SRV_COMPRESS_LOW,
  NRD_SRV_COMPRESS_MEDIUM,
  NRD_SRV_COMPRESS_HIGH
} nrd_srv_compress_level;

/* The zlib level for a level other than NONE: 1 (fastest), 6 (zlib's
 * default) or 9 (smallest). Any thread. */
int nrd_srv_compress_zlib_level(nrd_srv_compress_level level);

/* zlib windowBits for an encoding name: 31 for gzip (and x-gzip), 15 for
 * deflate, 0 for anything else (case-insensitive). Any thread. */
int nrd_srv_compress_window_bits(const char *encoding);

/* One piece of the input (borrowed for the call). */
typedef struct nrd_srv_compress_piece {
  const void *data;
  size_t len;
} nrd_srv_compress_piece;

/* Compresses the concatenation of in[0..n) with `window_bits` (as above)
 * at zlib `level` (1..9, or -1 for zlib's default) into one malloc'ed
 * buffer that starts with `headroom` bytes left for the caller (a prefix
 * such as gRPC's 5-byte message header). Returns 0 with *out (the caller
 * frees it) and *out_len (compressed bytes, headroom not included), or -1
 * (out of memory or a zlib error) with nothing allocated. The pieces are
 * only read. Any thread. */
int nrd_srv_compress(int window_bits, int level, const nrd_srv_compress_piece *in, size_t n, size_t headroom,
                     uint8_t **out, size_t *out_len);

/* How a decompression ended. */
typedef enum nrd_srv_inflate_result {
  NRD_SRV_INFLATE_OK,
  NRD_SRV_INFLATE_TOO_LARGE, /* more than `max` bytes would come out */
  NRD_SRV_INFLATE_NO_MEMORY,
  NRD_SRV_INFLATE_CORRUPT, /* zlib refused the data (*why may say how) */
  NRD_SRV_INFLATE_TRUNCATED /* the input ended inside the stream */
} nrd_srv_inflate_result;

/* Decompresses in[0..len) (gzip or zlib format, `window_bits` as above)
 * into one malloc'ed buffer of at most `max` bytes; allocation grows with
 * the output, so a small bomb never makes it allocate more than max + 1.
 * On OK, *out (the caller frees it) and *out_len hold the data and *rest
 * the input bytes left after the end of the stream (callers decide whether
 * that is an error). Otherwise nothing is allocated and *why is zlib's
 * static message or NULL. Any thread. */
nrd_srv_inflate_result nrd_srv_decompress(int window_bits, const void *in, size_t len, size_t max, uint8_t **out,
                                          size_t *out_len, size_t *rest, const char **why);

#endif
