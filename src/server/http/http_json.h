/* Tensor JSON for the HTTP front end: finding the `data` arrays of an
 * inference request without building a DOM for them, parsing them straight
 * into typed tensor buffers, and writing output tensors as JSON arrays.
 *
 * Threads: every function is pure (no shared state) and may run on any
 * thread; the HTTP front end calls them on its event-loop threads. */
#ifndef NRD_SRV_HTTP_JSON_H
#define NRD_SRV_HTTP_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "triton/core/tritonserver.h"

/* Most inputs of one request whose `data` array is cut out. */
#define NRD_SRV_HTTP_MAX_DATA_SPANS 64

/* The byte range of one `inputs[index].data` array in a request header. */
typedef struct nrd_srv_http_span {
  size_t index; /* position of the input in "inputs" */
  size_t start; /* offset of '[' */
  size_t len; /* through the matching ']' */
} nrd_srv_http_span;

/* Growable output text; owned by its user, freed with free(buf). */
typedef struct nrd_srv_http_text {
  char *buf;
  size_t len, cap;
} nrd_srv_http_text;

/* Scans the JSON text [json, json+len) (a request header). Each
 * `inputs[i].data` that is an array is recorded in spans (at most
 * NRD_SRV_HTTP_MAX_DATA_SPANS) and *stripped gets a malloc'ed copy of the
 * text with those arrays replaced by `0` (caller frees), ready for a DOM
 * parser. Returns 0, or -1 with a message in err for text that is not
 * well-formed JSON or has too many inputs (*stripped NULL). */
int nrd_srv_http_json_cut_data(const char *json, size_t len, nrd_srv_http_span *spans, size_t *n_spans, char **stripped,
                               size_t *stripped_len, char *err, size_t errlen);

/* Parses a `data` array [p, p+len) (nested arrays are flattened) holding
 * `count` elements of `dt` into a malloc'ed buffer *out of *out_size bytes
 * (caller frees; BYTES elements are 4-byte little-endian length + bytes).
 * Never allocates more than the text can justify. BYTES elements are not
 * counted (the core checks them against the shape). Returns 0, or -1 with
 * a message naming `name` in err and *out NULL; -2 for the errors Triton
 * answers with status 500 (an element of the wrong kind, a count that is
 * not the shape's). */
int nrd_srv_http_json_parse_data(const char *p, size_t len, TRITONSERVER_DataType dt, uint64_t count, const char *name,
                                 void **out, size_t *out_size, char *err, size_t errlen);

/* Appends `[v0,v1,...]` for a tensor of dt held in [base, base+size) to t.
 * Returns 0, -1 when memory runs out or BYTES framing is malformed. */
int nrd_srv_http_json_write_data(nrd_srv_http_text *t, TRITONSERVER_DataType dt, const void *base, size_t size);

/* Appends s[0..n) as a quoted, escaped JSON string. Returns 0 or -1 (OOM). */
int nrd_srv_http_text_quoted(nrd_srv_http_text *t, const char *s, size_t n);

/* Appends an error message as a quoted JSON string: its first
 * NRD_SRV_ERROR_ECHO_MAX bytes and "..." when it is longer (error_echo.h).
 * Returns 0 or -1 (OOM). Any thread. */
int nrd_srv_http_text_error(nrd_srv_http_text *t, const char *msg);

/* Makes room for `more` bytes past t->len. Returns 0 or -1 (OOM). */
int nrd_srv_http_text_reserve(nrd_srv_http_text *t, size_t more);

/* Appends n raw bytes. Returns 0 or -1 (OOM). Inline: replies are built
 * from many short pieces. */
static inline int nrd_srv_http_text_add(nrd_srv_http_text *t, const char *s, size_t n) {
  if (t->cap - t->len < n && nrd_srv_http_text_reserve(t, n) != 0) return -1;
  memcpy(t->buf + t->len, s, n);
  t->len += n;
  return 0;
}

/* Appends a string literal (its length known at compile time). */
#define NRD_SRV_HTTP_TEXT_LIT(t, lit) nrd_srv_http_text_add((t), (lit), sizeof(lit) - 1)

/* Appends v in decimal. Returns 0 or -1 (OOM). */
int nrd_srv_http_text_i64(nrd_srv_http_text *t, int64_t v);

#endif
