/* Tensor JSON: a small validating scanner that locates `inputs[i].data`
 * arrays, a typed parser for those arrays, and a writer for output data.
 * The rest of a request goes to the arena parser (json_arena.c) after the
 * data arrays are cut out, so a million-element tensor never becomes a
 * million tree nodes. */
#include "http_json.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error_echo.h"
#include "float16.h"
#include "fmt.h"
#include "json_arena.h"
#include "json_error.h"

#define MAX_DEPTH NRD_SRV_JSON_MAX_DEPTH

/* ---- scanner ------------------------------------------------------------ */

typedef struct scan {
  const char *p;
  size_t len, pos;
  nrd_srv_http_span *spans;
  size_t n_spans;
  bool too_many;
} scan;

static void skip_ws(scan *s) {
  while (s->pos < s->len) {
    char c = s->p[s->pos];
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
    s->pos++;
  }
}

static bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

/* At '"': skips the string; start and n get the raw contents. */
static int scan_string(scan *s, size_t *start, size_t *n) {
  if (s->pos >= s->len || s->p[s->pos] != '"') return -1;
  size_t b = ++s->pos;
  while (s->pos < s->len) {
    unsigned char c = (unsigned char)s->p[s->pos];
    if (c == '"') {
      if (start) *start = b;
      if (n) *n = s->pos - b;
      s->pos++;
      return 0;
    }
    if (c < 0x20) return -1;
    if (c == '\\') {
      if (++s->pos >= s->len) return -1;
      char e = s->p[s->pos];
      if (e == 'u') {
        if (s->pos + 4 >= s->len) return -1;
        for (int i = 1; i <= 4; i++)
          if (!is_hex(s->p[s->pos + (size_t)i])) return -1;
        s->pos += 4;
      } else if (!strchr("\"\\/bfnrt", e) || e == '\0') {
        return -1;
      }
    }
    s->pos++;
  }
  return -1;
}

static int scan_number(scan *s) {
  size_t k = s->pos < s->len ? nrd_srv_json_number_len(s->p + s->pos, s->len - s->pos, NULL) : 0;
  s->pos += k;
  return k ? 0 : -1;
}

static int scan_literal(scan *s, const char *lit) {
  size_t n = strlen(lit);
  if (s->len - s->pos < n || memcmp(s->p + s->pos, lit, n) != 0) return -1;
  s->pos += n;
  return 0;
}

/* role: 0 any value; 1 the top-level object; 2 the "inputs" array; 3 one
 * input object (its "data" array is recorded as input `index`). */
static int scan_value(scan *s, int depth, int role, size_t index);

static int scan_object(scan *s, int depth, int role, size_t index) {
  s->pos++; /* '{' */
  skip_ws(s);
  if (s->pos < s->len && s->p[s->pos] == '}') {
    s->pos++;
    return 0;
  }
  for (;;) {
    size_t ks = 0, kn = 0;
    skip_ws(s);
    if (scan_string(s, &ks, &kn) != 0) return -1;
    skip_ws(s);
    if (s->pos >= s->len || s->p[s->pos] != ':') return -1;
    s->pos++;
    skip_ws(s);
    int child = 0;
    if (role == 1 && kn == 6 && memcmp(s->p + ks, "inputs", 6) == 0) child = 2;
    if (role == 3 && kn == 4 && memcmp(s->p + ks, "data", 4) == 0 && s->pos < s->len && s->p[s->pos] == '[') {
      size_t start = s->pos;
      if (scan_value(s, depth + 1, 0, 0) != 0) return -1;
      if (s->n_spans >= NRD_SRV_HTTP_MAX_DATA_SPANS) {
        s->too_many = true;
        return -1;
      }
      s->spans[s->n_spans++] = (nrd_srv_http_span){index, start, s->pos - start};
    } else if (scan_value(s, depth + 1, child, 0) != 0) {
      return -1;
    }
    skip_ws(s);
    if (s->pos >= s->len) return -1;
    if (s->p[s->pos] == ',') {
      s->pos++;
      continue;
    }
    if (s->p[s->pos] == '}') {
      s->pos++;
      return 0;
    }
    return -1;
  }
}

static int scan_array(scan *s, int depth, int role) {
  s->pos++; /* '[' */
  skip_ws(s);
  if (s->pos < s->len && s->p[s->pos] == ']') {
    s->pos++;
    return 0;
  }
  for (size_t i = 0;; i++) {
    skip_ws(s);
    if (scan_value(s, depth + 1, role == 2 ? 3 : 0, i) != 0) return -1;
    skip_ws(s);
    if (s->pos >= s->len) return -1;
    if (s->p[s->pos] == ',') {
      s->pos++;
      continue;
    }
    if (s->p[s->pos] == ']') {
      s->pos++;
      return 0;
    }
    return -1;
  }
}

static int scan_value(scan *s, int depth, int role, size_t index) {
  if (depth > MAX_DEPTH) return -1;
  skip_ws(s);
  if (s->pos >= s->len) return -1;
  switch (s->p[s->pos]) {
    case '{': return scan_object(s, depth, role == 3 || role == 1 ? role : 0, index);
    case '[': return scan_array(s, depth, role);
    case '"': return scan_string(s, NULL, NULL);
    case 't': return scan_literal(s, "true");
    case 'f': return scan_literal(s, "false");
    case 'n': return scan_literal(s, "null");
    default: return scan_number(s);
  }
}

int nrd_srv_http_json_cut_data(const char *json, size_t len, nrd_srv_http_span *spans, size_t *n_spans, char **stripped,
                               size_t *stripped_len, char *err, size_t errlen) {
  *stripped = NULL;
  *n_spans = 0;
  scan s = {json, len, 0, spans, 0, false};
  skip_ws(&s);
  int rc = scan_value(&s, 0, 1, 0);
  if (rc == 0) {
    skip_ws(&s);
    if (s.pos != s.len) rc = -1;
  }
  if (rc != 0) {
    if (s.too_many)
      nrd_srv_fmt_err(err, errlen, "too many inputs with JSON 'data' (at most %d)", NRD_SRV_HTTP_MAX_DATA_SPANS);
    else if (nrd_srv_json_error(json, len, err, errlen) != 0)
      nrd_srv_fmt_err(err, errlen, "failed to parse the request JSON buffer: invalid JSON near byte %zu", s.pos);
    return -1;
  }
  size_t cut = 0;
  for (size_t i = 0; i < s.n_spans; i++) cut += spans[i].len - 1;
  size_t out_len = len - cut;
  char *out = malloc(out_len + 1);
  if (out == NULL) {
    nrd_srv_fmt_err(err, errlen, "out of memory");
    return -1;
  }
  size_t w = 0, r = 0;
  for (size_t i = 0; i < s.n_spans; i++) {
    memcpy(out + w, json + r, spans[i].start - r);
    w += spans[i].start - r;
    out[w++] = '0';
    r = spans[i].start + spans[i].len;
  }
  memcpy(out + w, json + r, len - r);
  w += len - r;
  out[w] = '\0';
  *stripped = out;
  *stripped_len = w;
  *n_spans = s.n_spans;
  return 0;
}

/* ---- typed parsing of a data array --------------------------------------- */

typedef struct dparse {
  const char *p;
  size_t len, pos;
  TRITONSERVER_DataType dt;
  size_t elem; /* element byte size; 0 for BYTES */
  uint64_t count, seen;
  unsigned char *out;
  size_t out_size, out_cap;
  const char *name;
  char *err;
  size_t errlen;
  bool triton; /* the error is one of Triton's TritonJson or shape errors */
} dparse;

/* Triton's error for an element of the wrong kind (server ace2c5b9f
 * http_server.cc ReadDataFromJsonHelper and JsonBytesArrayByteSize: the
 * TritonJson accessor of the input's datatype). */
static int dp_kind(dparse *d) {
  const char *what;
  switch (d->dt) {
    case TRITONSERVER_TYPE_BYTES:
      nrd_srv_fmt_err(d->err, d->errlen,
                      "Unable to parse JSON bytes array: attempt to access JSON non-string as string (input '%s')",
                      d->name);
      d->triton = true;
      return -1;
    case TRITONSERVER_TYPE_BOOL: what = "attempt to access JSON non-boolean as boolean"; break;
    case TRITONSERVER_TYPE_UINT8:
    case TRITONSERVER_TYPE_UINT16:
    case TRITONSERVER_TYPE_UINT32:
    case TRITONSERVER_TYPE_UINT64: what = "attempt to access JSON non-unsigned-integer as unsigned-integer"; break;
    case TRITONSERVER_TYPE_INT8:
    case TRITONSERVER_TYPE_INT16:
    case TRITONSERVER_TYPE_INT32:
    case TRITONSERVER_TYPE_INT64: what = "attempt to access JSON non-signed-integer as signed-integer"; break;
    default: what = "attempt to access JSON non-number as double"; break;
  }
  nrd_srv_fmt_err(d->err, d->errlen, "Unable to parse 'data': %s (input '%s')", what, d->name);
  d->triton = true;
  return -1;
}

/* Triton's error, word for word (its qa/L0_http compares the whole body),
 * when the elements are more or fewer than the shape holds: r25.07
 * http_server.cc ReadDataFromJson (2.7x answers fewer with "Failed to
 * parse 'data' field: shape does not match true shape"). */
static int dp_shape(dparse *d) {
  nrd_srv_fmt_err(d->err, d->errlen, "%s", "Unable to parse 'data': Shape does not match true shape of 'data' field");
  d->triton = true;
  return -1;
}

static int dp_fail(dparse *d, const char *what) {
  nrd_srv_fmt_err(d->err, d->errlen, "unable to parse 'data' of input '%s': %s (datatype %s, near byte %zu)", d->name,
                  what, TRITONSERVER_DataTypeString(d->dt), d->pos);
  return -1;
}

static int dp_reserve(dparse *d, size_t more) {
  if (d->out_cap - d->out_size >= more) return 0;
  size_t cap = d->out_cap ? d->out_cap : 256;
  while (cap - d->out_size < more) cap *= 2;
  unsigned char *g = realloc(d->out, cap);
  if (g == NULL) return -1;
  d->out = g;
  d->out_cap = cap;
  return 0;
}

static void dp_ws(dparse *d) {
  while (d->pos < d->len) {
    char c = d->p[d->pos];
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
    d->pos++;
  }
}

/* Decodes one JSON string (at '"') as a BYTES element. */
static int dp_string(dparse *d) {
  if (d->dt != TRITONSERVER_TYPE_BYTES) return dp_kind(d);
  d->pos++;
  size_t lenpos = d->out_size;
  if (dp_reserve(d, 4) != 0) return dp_fail(d, "out of memory");
  d->out_size += 4;
  for (;;) {
    if (d->pos >= d->len) return dp_fail(d, "unterminated string");
    unsigned char c = (unsigned char)d->p[d->pos];
    if (c == '"') {
      d->pos++;
      break;
    }
    if (c < 0x20) return dp_fail(d, "control character in string");
    unsigned char buf[4];
    size_t n = 1;
    buf[0] = c;
    if (c == '\\') {
      if (d->pos + 1 >= d->len) return dp_fail(d, "bad escape");
      char e = d->p[++d->pos];
      switch (e) {
        case '"': buf[0] = '"'; break;
        case '\\': buf[0] = '\\'; break;
        case '/': buf[0] = '/'; break;
        case 'b': buf[0] = '\b'; break;
        case 'f': buf[0] = '\f'; break;
        case 'n': buf[0] = '\n'; break;
        case 'r': buf[0] = '\r'; break;
        case 't': buf[0] = '\t'; break;
        case 'u': {
          uint32_t cp = 0;
          for (int k = 0; k < 2; k++) {
            if (d->pos + 4 >= d->len) return dp_fail(d, "bad \\u escape");
            uint32_t v = 0;
            for (int i = 1; i <= 4; i++) {
              char h = d->p[d->pos + (size_t)i];
              if (!is_hex(h)) return dp_fail(d, "bad \\u escape");
              v = v * 16 + (uint32_t)(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
            }
            d->pos += 4;
            if (k == 0) {
              cp = v;
              if (cp < 0xd800 || cp > 0xdbff) break;
              if (d->pos + 2 >= d->len || d->p[d->pos + 1] != '\\' || d->p[d->pos + 2] != 'u')
                return dp_fail(d, "unpaired surrogate in \\u escape");
              d->pos += 2;
            } else {
              if (v < 0xdc00 || v > 0xdfff) return dp_fail(d, "unpaired surrogate in \\u escape");
              cp = 0x10000 + ((cp - 0xd800) << 10) + (v - 0xdc00);
            }
          }
          if (cp < 0x80) {
            buf[0] = (unsigned char)cp;
          } else if (cp < 0x800) {
            buf[0] = (unsigned char)(0xc0 | (cp >> 6));
            buf[1] = (unsigned char)(0x80 | (cp & 0x3f));
            n = 2;
          } else if (cp < 0x10000) {
            buf[0] = (unsigned char)(0xe0 | (cp >> 12));
            buf[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
            buf[2] = (unsigned char)(0x80 | (cp & 0x3f));
            n = 3;
          } else {
            buf[0] = (unsigned char)(0xf0 | (cp >> 18));
            buf[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
            buf[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
            buf[3] = (unsigned char)(0x80 | (cp & 0x3f));
            n = 4;
          }
          break;
        }
        default: return dp_fail(d, "bad escape");
      }
    }
    if (dp_reserve(d, n) != 0) return dp_fail(d, "out of memory");
    memcpy(d->out + d->out_size, buf, n);
    d->out_size += n;
    d->pos++;
  }
  size_t slen = d->out_size - lenpos - 4;
  if (slen > UINT32_MAX) return dp_fail(d, "string too long");
  uint32_t l32 = (uint32_t)slen;
  unsigned char le[4] = {(unsigned char)l32, (unsigned char)(l32 >> 8), (unsigned char)(l32 >> 16),
                         (unsigned char)(l32 >> 24)};
  memcpy(d->out + lenpos, le, 4);
  return 0;
}

static int dp_store_int(dparse *d, bool neg, uint64_t mag) {
  unsigned char *o = d->out + d->out_size;
  int64_t sv = neg ? (mag == (uint64_t)1 << 63 ? INT64_MIN : -(int64_t)mag) : (int64_t)mag;
  if (neg && mag > ((uint64_t)1 << 63)) return dp_kind(d); /* a double to RapidJSON */
  switch (d->dt) {
    case TRITONSERVER_TYPE_UINT8:
    case TRITONSERVER_TYPE_UINT16:
    case TRITONSERVER_TYPE_UINT32:
    case TRITONSERVER_TYPE_UINT64: {
      if (neg && mag != 0) return dp_kind(d);
      uint64_t max = d->elem == 8 ? UINT64_MAX : ((uint64_t)1 << (8 * d->elem)) - 1;
      if (mag > max) return dp_fail(d, "integer out of range");
      if (d->elem == 1) {
        uint8_t v = (uint8_t)mag;
        memcpy(o, &v, 1);
      } else if (d->elem == 2) {
        uint16_t v = (uint16_t)mag;
        memcpy(o, &v, 2);
      } else if (d->elem == 4) {
        uint32_t v = (uint32_t)mag;
        memcpy(o, &v, 4);
      } else
        memcpy(o, &mag, 8);
      return 0;
    }
    case TRITONSERVER_TYPE_INT8:
    case TRITONSERVER_TYPE_INT16:
    case TRITONSERVER_TYPE_INT32:
    case TRITONSERVER_TYPE_INT64: {
      if (!neg && mag > (uint64_t)INT64_MAX) return dp_kind(d); /* only an unsigned integer to RapidJSON */
      if (d->elem < 8) {
        int64_t lim = (int64_t)1 << (8 * d->elem - 1);
        if (sv < -lim || sv >= lim) return dp_fail(d, "integer out of range");
      }
      if (d->elem == 1) {
        int8_t v = (int8_t)sv;
        memcpy(o, &v, 1);
      } else if (d->elem == 2) {
        int16_t v = (int16_t)sv;
        memcpy(o, &v, 2);
      } else if (d->elem == 4) {
        int32_t v = (int32_t)sv;
        memcpy(o, &v, 4);
      } else
        memcpy(o, &sv, 8);
      return 0;
    }
    default: return dp_fail(d, "internal: not an integer type");
  }
}

static int dp_number(dparse *d) {
  scan s = {d->p, d->len, d->pos, NULL, 0, false};
  size_t b = d->pos;
  if (scan_number(&s) != 0) return dp_fail(d, "not a valid JSON value");
  size_t n = s.pos - b;
  d->pos = s.pos;
  bool integral = true;
  for (size_t i = 0; i < n; i++) {
    char c = d->p[b + i];
    if (c == '.' || c == 'e' || c == 'E') integral = false;
  }
  if (d->dt == TRITONSERVER_TYPE_BYTES || d->dt == TRITONSERVER_TYPE_BOOL) return dp_kind(d);
  unsigned char *o = d->out + d->out_size;
  if (d->dt == TRITONSERVER_TYPE_FP32 || d->dt == TRITONSERVER_TYPE_FP64 || d->dt == TRITONSERVER_TYPE_FP16 ||
      d->dt == TRITONSERVER_TYPE_BF16) {
    char tmp[80];
    if (n >= sizeof tmp) return dp_fail(d, "number too long");
    memcpy(tmp, d->p + b, n);
    tmp[n] = '\0';
    double v = strtod(tmp, NULL);
    if (d->dt == TRITONSERVER_TYPE_FP64) {
      memcpy(o, &v, 8);
    } else if (d->dt == TRITONSERVER_TYPE_FP32) {
      float f = (float)v;
      memcpy(o, &f, 4);
    } else {
      uint16_t h = d->dt == TRITONSERVER_TYPE_FP16 ? nrd_srv_float_to_half((float)v) : nrd_srv_float_to_bf16((float)v);
      memcpy(o, &h, 2);
    }
    return 0;
  }
  if (!integral) return dp_kind(d);
  bool neg = d->p[b] == '-';
  uint64_t mag = 0;
  for (size_t i = neg ? 1 : 0; i < n; i++) {
    unsigned dgt = (unsigned)(d->p[b + i] - '0');
    if (mag > (UINT64_MAX - dgt) / 10) return dp_kind(d); /* a double to RapidJSON */
    mag = mag * 10 + dgt;
  }
  return dp_store_int(d, neg, mag);
}

static int dp_value(dparse *d, int depth) {
  if (depth > MAX_DEPTH) return dp_fail(d, "arrays nested too deeply");
  dp_ws(d);
  if (d->pos >= d->len) return dp_fail(d, "unexpected end");
  char c = d->p[d->pos];
  if (c == '[') {
    d->pos++;
    dp_ws(d);
    if (d->pos < d->len && d->p[d->pos] == ']') {
      d->pos++;
      return 0;
    }
    for (;;) {
      if (dp_value(d, depth + 1) != 0) return -1;
      dp_ws(d);
      if (d->pos >= d->len) return dp_fail(d, "unexpected end");
      if (d->p[d->pos] == ',') {
        d->pos++;
        continue;
      }
      if (d->p[d->pos] == ']') {
        d->pos++;
        return 0;
      }
      return dp_fail(d, "expected ',' or ']'");
    }
  }
  /* BYTES elements are counted by the core, as in Triton. */
  if (d->elem && d->seen >= d->count) return dp_shape(d);
  d->seen++;
  if (d->elem && dp_reserve(d, d->elem) != 0) return dp_fail(d, "out of memory");
  if (c == '"') return dp_string(d);
  if (c == 't' || c == 'f') {
    if (d->dt != TRITONSERVER_TYPE_BOOL) return dp_kind(d);
    bool v = c == 't';
    const char *lit = v ? "true" : "false";
    size_t n = strlen(lit);
    if (d->len - d->pos < n || memcmp(d->p + d->pos, lit, n) != 0) return dp_fail(d, "not a valid JSON value");
    d->pos += n;
    d->out[d->out_size] = v ? 1 : 0;
    d->out_size += 1;
    return 0;
  }
  if (c == 'n') return dp_kind(d);
  if (d->elem) {
    if (dp_number(d) != 0) return -1;
    d->out_size += d->elem;
    return 0;
  }
  return dp_number(d);
}

int nrd_srv_http_json_parse_data(const char *p, size_t len, TRITONSERVER_DataType dt, uint64_t count, const char *name,
                                 void **out, size_t *out_size, char *err, size_t errlen) {
  *out = NULL;
  *out_size = 0;
  dparse d = {.p = p, .len = len, .dt = dt, .count = count, .name = name, .err = err, .errlen = errlen};
  d.elem = dt == TRITONSERVER_TYPE_BYTES ? 0 : TRITONSERVER_DataTypeByteSize(dt);
  if (dt == TRITONSERVER_TYPE_INVALID || (dt != TRITONSERVER_TYPE_BYTES && d.elem == 0)) {
    nrd_srv_fmt_err(err, errlen, "input '%s' has an invalid datatype", name);
    return -1;
  }
  /* Every element takes at least one character of text (two for a
   * string): the buffer starts at what the text can hold and grows as
   * elements come, so a shape claiming more never allocates more. */
  uint64_t fit = count < len ? count : len;
  if (d.elem) {
    d.out_cap = (size_t)fit * d.elem;
    d.out = malloc(d.out_cap ? d.out_cap : 1);
  } else {
    d.out_cap = (size_t)fit * 4 + 64;
    d.out = malloc(d.out_cap);
  }
  if (d.out == NULL) {
    nrd_srv_fmt_err(err, errlen, "out of memory parsing input '%s'", name);
    return -1;
  }
  if (dp_value(&d, 0) != 0) goto fail;
  dp_ws(&d);
  if (d.pos != d.len) {
    dp_fail(&d, "trailing characters");
    goto fail;
  }
  if (d.elem && d.seen != count) {
    dp_shape(&d);
    goto fail;
  }
  *out = d.out;
  *out_size = d.out_size;
  return 0;
fail:
  free(d.out);
  return d.triton ? -2 : -1;
}

/* ---- writing ------------------------------------------------------------- */

int nrd_srv_http_text_reserve(nrd_srv_http_text *t, size_t more) {
  if (t->cap - t->len >= more) return 0;
  size_t cap = t->cap ? t->cap : 512;
  while (cap - t->len < more) {
    if (cap > SIZE_MAX / 2) return -1;
    cap *= 2;
  }
  char *g = realloc(t->buf, cap);
  if (g == NULL) return -1;
  t->buf = g;
  t->cap = cap;
  return 0;
}

int nrd_srv_http_text_quoted(nrd_srv_http_text *t, const char *s, size_t n) {
  if (n > SIZE_MAX / 6 - 2 || nrd_srv_http_text_reserve(t, n * 6 + 2) != 0) return -1;
  char *o = t->buf + t->len;
  *o++ = '"';
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') {
      *o++ = '\\';
      *o++ = (char)c;
    } else if (c < 0x20) {
      static const char hex[] = "0123456789abcdef";
      *o++ = '\\';
      if (c == '\n')
        *o++ = 'n';
      else if (c == '\t')
        *o++ = 't';
      else if (c == '\r')
        *o++ = 'r';
      else {
        *o++ = 'u';
        *o++ = '0';
        *o++ = '0';
        *o++ = hex[c >> 4];
        *o++ = hex[c & 15];
      }
    } else {
      *o++ = (char)c;
    }
  }
  *o++ = '"';
  t->len = (size_t)(o - t->buf);
  return 0;
}

int nrd_srv_http_text_error(nrd_srv_http_text *t, const char *msg) {
  size_t len = strlen(msg), n = nrd_srv_error_echo_len(msg, len, NRD_SRV_ERROR_ECHO_MAX);
  if (n == len) return nrd_srv_http_text_quoted(t, msg, len);
  /* Cut: the quoted start, then the mark inside the quotes. */
  if (nrd_srv_http_text_quoted(t, msg, n) != 0) return -1;
  t->len--; /* the closing quote */
  return nrd_srv_http_text_add(t, NRD_SRV_ERROR_ECHO_CUT "\"", sizeof NRD_SRV_ERROR_ECHO_CUT);
}

int nrd_srv_http_text_i64(nrd_srv_http_text *t, int64_t v) {
  char buf[24];
  return nrd_srv_http_text_add(t, buf, nrd_srv_fmt_i64(buf, v));
}

static size_t fmt_double(char *o, double v, int digits) {
  if (isnan(v)) {
    memcpy(o, "NaN", 3);
    return 3;
  }
  if (isinf(v)) {
    if (v < 0) {
      memcpy(o, "-Infinity", 9);
      return 9;
    }
    memcpy(o, "Infinity", 8);
    return 8;
  }
  if (v == 0 && signbit(v)) { /* keeps its sign, as -0 would not parse back as a double */
    memcpy(o, "-0.0", 4);
    return 4;
  }
  /* Whole numbers print as integers; the range test comes first because
   * converting a double outside int64's range is undefined. */
  if (fabs(v) < 1e15 && v == (double)(int64_t)v) return nrd_srv_fmt_i64(o, (int64_t)v);
  int n = snprintf(o, 32, "%.*g", digits, v);
  return n > 0 ? (size_t)n : 0;
}

int nrd_srv_http_json_write_data(nrd_srv_http_text *t, TRITONSERVER_DataType dt, const void *base, size_t size) {
  const unsigned char *b = base;
  if (nrd_srv_http_text_add(t, "[", 1) != 0) return -1;
  if (dt == TRITONSERVER_TYPE_BYTES) {
    size_t pos = 0;
    bool first = true;
    while (pos < size) {
      if (size - pos < 4) return -1;
      uint32_t l =
          (uint32_t)b[pos] | ((uint32_t)b[pos + 1] << 8) | ((uint32_t)b[pos + 2] << 16) | ((uint32_t)b[pos + 3] << 24);
      pos += 4;
      if (l > size - pos) return -1;
      if (!first && nrd_srv_http_text_add(t, ",", 1) != 0) return -1;
      first = false;
      if (nrd_srv_http_text_quoted(t, (const char *)b + pos, l) != 0) return -1;
      pos += l;
    }
    return nrd_srv_http_text_add(t, "]", 1);
  }
  size_t elem = TRITONSERVER_DataTypeByteSize(dt);
  if (elem == 0) return -1;
  size_t n = size / elem;
  for (size_t i = 0; i < n; i++) {
    if (nrd_srv_http_text_reserve(t, 40) != 0) return -1;
    char *o = t->buf + t->len;
    if (i) *o++ = ',';
    const unsigned char *e = b + i * elem;
    switch (dt) {
      case TRITONSERVER_TYPE_BOOL: {
        if (*e) {
          memcpy(o, "true", 4);
          o += 4;
        } else {
          memcpy(o, "false", 5);
          o += 5;
        }
        break;
      }
      case TRITONSERVER_TYPE_UINT8: o += nrd_srv_fmt_u64(o, *e); break;
      case TRITONSERVER_TYPE_UINT16: {
        uint16_t v;
        memcpy(&v, e, 2);
        o += nrd_srv_fmt_u64(o, v);
        break;
      }
      case TRITONSERVER_TYPE_UINT32: {
        uint32_t v;
        memcpy(&v, e, 4);
        o += nrd_srv_fmt_u64(o, v);
        break;
      }
      case TRITONSERVER_TYPE_UINT64: {
        uint64_t v;
        memcpy(&v, e, 8);
        o += nrd_srv_fmt_u64(o, v);
        break;
      }
      case TRITONSERVER_TYPE_INT8: {
        int8_t v;
        memcpy(&v, e, 1);
        o += nrd_srv_fmt_i64(o, v);
        break;
      }
      case TRITONSERVER_TYPE_INT16: {
        int16_t v;
        memcpy(&v, e, 2);
        o += nrd_srv_fmt_i64(o, v);
        break;
      }
      case TRITONSERVER_TYPE_INT32: {
        int32_t v;
        memcpy(&v, e, 4);
        o += nrd_srv_fmt_i64(o, v);
        break;
      }
      case TRITONSERVER_TYPE_INT64: {
        int64_t v;
        memcpy(&v, e, 8);
        o += nrd_srv_fmt_i64(o, v);
        break;
      }
      case TRITONSERVER_TYPE_FP16: {
        uint16_t h;
        memcpy(&h, e, 2);
        o += fmt_double(o, nrd_srv_half_to_float(h), 9);
        break;
      }
      case TRITONSERVER_TYPE_BF16: {
        uint16_t h;
        memcpy(&h, e, 2);
        o += fmt_double(o, nrd_srv_bf16_to_float(h), 9);
        break;
      }
      case TRITONSERVER_TYPE_FP32: {
        float v;
        memcpy(&v, e, 4);
        o += fmt_double(o, v, 9);
        break;
      }
      case TRITONSERVER_TYPE_FP64: {
        double v;
        memcpy(&v, e, 8);
        o += fmt_double(o, v, 17);
        break;
      }
      default: return -1;
    }
    t->len = (size_t)(o - t->buf);
  }
  return nrd_srv_http_text_add(t, "]", 1);
}
