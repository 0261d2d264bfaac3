/* Fuzz target: one gRPC call to nereid's gRPC port, on a fresh HTTP/2
 * connection that this file frames by hand (prior knowledge, no HPACK
 * Huffman), so the fuzzer's bytes reach our handlers rather than dying in
 * nghttp2's frame checks.
 *
 * Input layout:
 *   byte 0     method (an index into `paths`, modulo its length)
 *   byte 1     flags (below)
 *   byte 2     n, then n bytes: the grpc-timeout value (none when n is 0)
 *   the rest   the request messages, separated by "NRD|"
 * Flags: bit 0 sends grpc-encoding, bits 1-2 pick it (gzip, deflate,
 * identity, snappy); bit 3 compresses each message with that encoding and
 * sets the compressed flag; bit 4 sends the bytes without gRPC framing;
 * bit 5 leaves the stream open (no END_STREAM); bit 6 cancels the call
 * (RST_STREAM) once everything is sent.
 *
 * The call's frames are read until it ends (END_STREAM, RST_STREAM,
 * GOAWAY, or the server closing), for at most 2 s, or, when the client
 * left the stream open or cancelled it, until the server is quiet for
 * 50 ms. Then the connection is closed: a decoupled model may still be
 * answering, which the server must cancel cleanly. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "wire.h"

#define SVC "/inference.GRPCInferenceService/"
static const char *const paths[] = {SVC "ModelInfer",
                                    SVC "ModelStreamInfer",
                                    SVC "ServerLive",
                                    SVC "ServerReady",
                                    SVC "ModelReady",
                                    SVC "ServerMetadata",
                                    SVC "ModelMetadata",
                                    SVC "ModelConfig",
                                    SVC "ModelStatistics",
                                    SVC "RepositoryIndex",
                                    SVC "RepositoryModelLoad",
                                    SVC "RepositoryModelUnload",
                                    SVC "SystemSharedMemoryStatus",
                                    SVC "SystemSharedMemoryRegister",
                                    SVC "SystemSharedMemoryUnregister",
                                    SVC "CudaSharedMemoryStatus",
                                    SVC "CudaSharedMemoryRegister",
                                    SVC "CudaSharedMemoryUnregister",
                                    SVC "TraceSetting",
                                    SVC "LogSettings",
                                    "/grpc.health.v1.Health/Check",
                                    SVC "NoSuchMethod"};
static const char *const encodings[] = {"gzip", "deflate", "identity", "snappy"};

/* A growable output buffer; allocation failure aborts (a harness bug). */
typedef struct {
  uint8_t *p;
  size_t len, cap;
} out;

static void put(out *o, const void *data, size_t n) {
  if (n == 0) return;
  if (o->len + n > o->cap) {
    o->cap = (o->len + n) * 2 + 256;
    o->p = realloc(o->p, o->cap);
    if (o->p == NULL) abort();
  }
  memcpy(o->p + o->len, data, n);
  o->len += n;
}

static void put_byte(out *o, uint8_t b) { put(o, &b, 1); }

static void frame(out *o, uint8_t type, uint8_t flags, uint32_t stream, const void *payload, size_t n) {
  uint8_t h[9] = {(uint8_t)(n >> 16),      (uint8_t)(n >> 8),      (uint8_t)n,     type, flags, (uint8_t)(stream >> 24),
                  (uint8_t)(stream >> 16), (uint8_t)(stream >> 8), (uint8_t)stream};
  put(o, h, 9);
  put(o, payload, n);
}

/* HPACK string literal, not Huffman coded; lengths up to 126. */
static void hstr(out *o, const char *s, size_t n) {
  put_byte(o, (uint8_t)n);
  put(o, s, n);
}

/* Literal header with incremental indexing and a new name. */
static void hfield(out *o, const char *name, const char *value, size_t vlen) {
  put_byte(o, 0x40);
  hstr(o, name, strlen(name));
  hstr(o, value, vlen);
}

/* The message compressed as gzip (wbits 31) or zlib (15) into o. */
static void squeeze(out *o, const uint8_t *msg, size_t n, int wbits) {
  z_stream z = {0};
  if (deflateInit2(&z, 6, Z_DEFLATED, wbits, 8, Z_DEFAULT_STRATEGY) != Z_OK) abort();
  uLong bound = deflateBound(&z, (uLong)n);
  uint8_t *buf = malloc(bound ? bound : 1);
  if (buf == NULL) abort();
  z.next_in = (Bytef *)msg;
  z.avail_in = (uInt)n;
  z.next_out = buf;
  z.avail_out = (uInt)bound;
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) abort();
  put(o, buf, bound - z.avail_out);
  deflateEnd(&z);
  free(buf);
}

/* Appends one gRPC message (5-byte prefix + body) to body. */
static void message(out *body, const uint8_t *msg, size_t n, int compress_wbits) {
  out m = {0};
  if (compress_wbits)
    squeeze(&m, msg, n, compress_wbits);
  else
    put(&m, msg, n);
  uint8_t prefix[5] = {compress_wbits ? 1 : 0, (uint8_t)(m.len >> 24), (uint8_t)(m.len >> 16), (uint8_t)(m.len >> 8),
                       (uint8_t)m.len};
  put(body, prefix, 5);
  if (m.len) put(body, m.p, m.len);
  free(m.p);
}

/* Reads frames until the call on stream 1 ends. A call the client ended
 * gets up to 2 s to finish; one it left open or cancelled ends when the
 * server has been quiet for 50 ms. Lists the frames on stderr when
 * NRD_FUZZ_SHOW is set (for checking new seeds). */
static void read_until_done(int fd, bool client_ended) {
  bool show = getenv("NRD_FUZZ_SHOW") != NULL;
  static uint8_t buf[1 << 16];
  out in = {0};
  for (int waited = 0; waited < 2000;) {
    long n = nrd_fuzz_recv(fd, buf, sizeof buf, client_ended ? 100 : 50);
    if (n == -1) {
      if (!client_ended) break;
      waited += 100;
      continue;
    }
    if (n <= 0) break;
    put(&in, buf, (size_t)n);
    size_t at = 0;
    bool done = false;
    while (!done && in.len - at >= 9) {
      size_t len = (size_t)in.p[at] << 16 | (size_t)in.p[at + 1] << 8 | in.p[at + 2];
      if (in.len - at - 9 < len) break;
      uint8_t type = in.p[at + 3], flags = in.p[at + 4];
      uint32_t stream =
          ((uint32_t)in.p[at + 5] << 24 | (uint32_t)in.p[at + 6] << 16 | (uint32_t)in.p[at + 7] << 8 | in.p[at + 8]) &
          0x7fffffffu;
      if (show) fprintf(stderr, "frame type %u flags %u stream %u length %zu\n", type, flags, (unsigned)stream, len);
      if (type == 7 || (stream == 1 && (type == 3 || ((type == 0 || type == 1) && (flags & 1))))) done = true;
      at += 9 + len;
    }
    if (done) break;
    memmove(in.p, in.p + at, in.len - at);
    in.len -= at;
  }
  free(in.p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 3) return 0;
  const char *path = paths[data[0] % (sizeof paths / sizeof paths[0])];
  uint8_t flags = data[1];
  size_t tlen = data[2] < 40 ? data[2] : 40;
  if (size < 3 + tlen) return 0;
  const char *timeout = (const char *)data + 3;
  const uint8_t *rest = data + 3 + tlen;
  size_t rest_len = size - 3 - tlen;
  const char *enc = encodings[(flags >> 1) & 3];
  int wbits = 0;
  if ((flags & 1) && (flags & 8)) wbits = strcmp(enc, "gzip") == 0 ? 31 : 15;

  out o = {0};
  put(&o, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24);
  static const uint8_t settings[] = {0, 4, 0x40, 0, 0, 0}; /* INITIAL_WINDOW_SIZE 2^30 */
  frame(&o, 4, 0, 0, settings, sizeof settings);
  static const uint8_t window[] = {0x3f, 0xff, 0, 0}; /* connection window +2^30-65536 */
  frame(&o, 8, 0, 0, window, sizeof window);

  out h = {0};
  put_byte(&h, 0x83); /* :method POST */
  put_byte(&h, 0x86); /* :scheme http */
  put_byte(&h, 0x44); /* :path, literal value */
  hstr(&h, path, strlen(path));
  put_byte(&h, 0x41); /* :authority */
  hstr(&h, "localhost", 9);
  put_byte(&h, 0x5f); /* content-type */
  hstr(&h, "application/grpc", 16);
  hfield(&h, "te", "trailers", 8);
  if (tlen) hfield(&h, "grpc-timeout", timeout, tlen);
  if (flags & 1) hfield(&h, "grpc-encoding", enc, strlen(enc));
  frame(&o, 1, 4, 1, h.p, h.len); /* HEADERS, END_HEADERS */
  free(h.p);

  out body = {0};
  if (flags & 16) {
    put(&body, rest, rest_len);
  } else {
    const uint8_t *p = rest, *end = rest + rest_len;
    for (;;) {
      const uint8_t *sep = (size_t)(end - p) >= 4 ? memmem(p, (size_t)(end - p), "NRD|", 4) : NULL;
      message(&body, p, (size_t)((sep ? sep : end) - p), wbits);
      if (sep == NULL) break;
      p = sep + 4;
    }
  }
  bool end_stream = !(flags & 32);
  size_t at = 0;
  do {
    size_t n = body.len - at < 16384 ? body.len - at : 16384;
    bool last = at + n == body.len;
    frame(&o, 0, last && end_stream ? 1 : 0, 1, body.p ? body.p + at : (const uint8_t *)"", n);
    at += n;
  } while (at < body.len);
  free(body.p);
  if (flags & 64) {
    static const uint8_t cancel[] = {0, 0, 0, 8}; /* CANCEL */
    frame(&o, 3, 0, 1, cancel, sizeof cancel);
  }

  int fd = nrd_fuzz_connect(nrd_fuzz_grpc_port);
  if (fd < 0) {
    fprintf(stderr, "fuzz: cannot connect to the gRPC port\n");
    abort();
  }
  if (nrd_fuzz_send(fd, o.p, o.len, 4096) == 0) read_until_done(fd, end_stream && !(flags & 64));
  close(fd);
  free(o.p);
  return 0;
}
