/* The classification extension (classify.h): top-k of a numeric output
 * tensor as "value:index[:label]" strings, shared by HTTP and gRPC. */
#include "classify.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "float16.h"
#include "response_output.h"

/* How the elements of a datatype compare and print. */
typedef enum { KIND_FLOAT, KIND_SIGNED, KIND_UNSIGNED } kind;

typedef struct scored {
  union {
    double f;
    int64_t i;
    uint64_t u;
  } v;
  size_t idx;
} scored;

/* Element i of a numeric tensor, widened. */
static scored element(TRITONSERVER_DataType dt, const unsigned char *p, size_t i) {
  scored s;
  s.idx = 0;
  switch (dt) {
#define CASE(T, ctype, field)                                                                                          \
  case T: {                                                                                                            \
    ctype x;                                                                                                           \
    memcpy(&x, p + i * sizeof x, sizeof x);                                                                            \
    s.v.field = x;                                                                                                     \
    return s;                                                                                                          \
  }
    CASE(TRITONSERVER_TYPE_UINT8, uint8_t, u)
    CASE(TRITONSERVER_TYPE_UINT16, uint16_t, u)
    CASE(TRITONSERVER_TYPE_UINT32, uint32_t, u)
    CASE(TRITONSERVER_TYPE_UINT64, uint64_t, u)
    CASE(TRITONSERVER_TYPE_INT8, int8_t, i)
    CASE(TRITONSERVER_TYPE_INT16, int16_t, i)
    CASE(TRITONSERVER_TYPE_INT32, int32_t, i)
    CASE(TRITONSERVER_TYPE_INT64, int64_t, i)
    CASE(TRITONSERVER_TYPE_FP32, float, f)
    CASE(TRITONSERVER_TYPE_FP64, double, f)
#undef CASE
    case TRITONSERVER_TYPE_FP16: {
      uint16_t h;
      memcpy(&h, p + i * 2, 2);
      s.v.f = nrd_srv_half_to_float(h);
      return s;
    }
    case TRITONSERVER_TYPE_BF16: {
      uint16_t h;
      memcpy(&h, p + i * 2, 2);
      s.v.f = nrd_srv_bf16_to_float(h);
      return s;
    }
    default: s.v.u = 0; return s;
  }
}

static kind kind_of(TRITONSERVER_DataType dt) {
  switch (dt) {
    case TRITONSERVER_TYPE_UINT8:
    case TRITONSERVER_TYPE_UINT16:
    case TRITONSERVER_TYPE_UINT32:
    case TRITONSERVER_TYPE_UINT64: return KIND_UNSIGNED;
    case TRITONSERVER_TYPE_INT8:
    case TRITONSERVER_TYPE_INT16:
    case TRITONSERVER_TYPE_INT32:
    case TRITONSERVER_TYPE_INT64: return KIND_SIGNED;
    default: return KIND_FLOAT;
  }
}

/* Descending value, then ascending index. NaN sorts after every number so
 * the order stays total. */
static int by_idx(const scored *x, const scored *y) { return x->idx < y->idx ? -1 : x->idx > y->idx; }

static int by_float(const void *a, const void *b) {
  const scored *x = a, *y = b;
  bool xn = isnan(x->v.f), yn = isnan(y->v.f);
  if (xn != yn) return xn ? 1 : -1;
  if (!xn && x->v.f != y->v.f) return x->v.f > y->v.f ? -1 : 1;
  return by_idx(x, y);
}

static int by_signed(const void *a, const void *b) {
  const scored *x = a, *y = b;
  if (x->v.i != y->v.i) return x->v.i > y->v.i ? -1 : 1;
  return by_idx(x, y);
}

static int by_unsigned(const void *a, const void *b) {
  const scored *x = a, *y = b;
  if (x->v.u != y->v.u) return x->v.u > y->v.u ? -1 : 1;
  return by_idx(x, y);
}

/* The result buffer under construction. */
typedef struct strbuf {
  char *p;
  size_t len, cap;
} strbuf;

/* Appends one BYTES element made of `a` and `b` (b may be NULL). */
static bool append_element(strbuf *s, const char *a, const char *b) {
  size_t la = strlen(a), lb = b ? strlen(b) : 0, n = la + (b ? 1 + lb : 0);
  if (n > UINT32_MAX) return false;
  if (s->cap - s->len < 4 + n) {
    size_t ncap = s->cap * 2 > s->len + 4 + n ? s->cap * 2 : s->len + 4 + n;
    char *g = realloc(s->p, ncap);
    if (g == NULL) return false;
    s->p = g;
    s->cap = ncap;
  }
  unsigned char *d = (unsigned char *)s->p + s->len;
  d[0] = (unsigned char)n;
  d[1] = (unsigned char)(n >> 8);
  d[2] = (unsigned char)(n >> 16);
  d[3] = (unsigned char)(n >> 24);
  memcpy(d + 4, a, la);
  if (b) {
    d[4 + la] = ':';
    memcpy(d + 5 + la, b, lb);
  }
  s->len += 4 + n;
  return true;
}

TRITONSERVER_Error *nrd_srv_classify(TRITONSERVER_Server *server, TRITONSERVER_InferenceResponse *resp, uint32_t index,
                                     uint32_t k, nrd_srv_classes *out) {
  memset(out, 0, sizeof *out);
  nrd_srv_output o;
  TRITONSERVER_Error *err = nrd_srv_output_get(resp, index, &o);
  if (err) return err;
  size_t esz = (size_t)TRITONSERVER_DataTypeByteSize(o.datatype);
  char msg[400];
  if (o.datatype == TRITONSERVER_TYPE_BYTES || o.datatype == TRITONSERVER_TYPE_BOOL || esz == 0) {
    snprintf(msg, sizeof msg, "class result not available for output due to unsupported type '%s'",
             TRITONSERVER_DataTypeString(o.datatype));
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, msg);
  }

  /* Triton's bound on what it will classify (server 3ef606248): past it
   * the result strings alone would take hundreds of MiB. */
  if (o.byte_size / esz > NRD_SRV_CLASSIFY_MAX_ELEMENTS)
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "classification output tensor too large");

  /* The batch, as Triton decides it: the model's first dimension. */
  const char *model;
  int64_t version;
  uint32_t batch_flags = 0;
  err = TRITONSERVER_InferenceResponseModel(resp, &model, &version);
  if (err == NULL) err = TRITONSERVER_ServerModelBatchProperties(server, model, version, &batch_flags, NULL);
  if (err) return err;
  bool batched = o.dims > 0 && (batch_flags & TRITONSERVER_BATCH_FIRST_DIM);
  size_t rows = 1, per = 1, limit = o.byte_size / esz;
  for (uint64_t d = 0; d < o.dims; d++) {
    size_t n = o.shape[d] > 0 ? (size_t)o.shape[d] : 0;
    if (batched && d == 0)
      rows = n;
    else if (n != 0 && per > limit / n)
      per = limit + 1; /* more than the data holds */
    else
      per *= n;
  }
  if ((rows != 0 && per > limit / rows) || rows * per * esz != o.byte_size) {
    snprintf(msg, sizeof msg, "output '%.200s' has %zu bytes, which does not match its shape", o.name, o.byte_size);
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, msg);
  }
  size_t kk = k < per ? k : per;

  kind kd = kind_of(o.datatype);
  int (*cmp)(const void *, const void *) = kd == KIND_FLOAT ? by_float : kd == KIND_SIGNED ? by_signed : by_unsigned;
  scored *s = malloc((per ? per : 1) * sizeof *s);
  size_t cap = rows * kk < 65536 ? rows * kk * 24 + 16 : (size_t)1 << 20; /* grows as needed */
  strbuf sb = {malloc(cap), 0, cap};
  if (s == NULL || sb.p == NULL) goto oom;
  for (size_t r = 0; r < rows; r++) {
    for (size_t i = 0; i < per; i++) {
      s[i] = element(o.datatype, o.base, r * per + i);
      s[i].idx = i;
    }
    qsort(s, per, sizeof *s, cmp);
    for (size_t j = 0; j < kk; j++) {
      const char *label = NULL;
      err = TRITONSERVER_InferenceResponseOutputClassificationLabel(resp, index, s[j].idx, &label);
      if (err) {
        free(s);
        free(sb.p);
        return err;
      }
      char num[400]; /* "%f" of the largest double is 317 characters */
      int n;
      if (kd == KIND_FLOAT)
        n = snprintf(num, sizeof num, "%f", s[j].v.f);
      else if (kd == KIND_SIGNED)
        n = snprintf(num, sizeof num, "%lld", (long long)s[j].v.i);
      else
        n = snprintf(num, sizeof num, "%llu", (unsigned long long)s[j].v.u);
      snprintf(num + n, sizeof num - (size_t)n, ":%zu", s[j].idx);
      if (!append_element(&sb, num, label)) goto oom;
    }
  }
  free(s);
  out->data = sb.p;
  out->size = sb.len;
  if (batched) {
    out->shape[0] = (int64_t)rows;
    out->shape[1] = (int64_t)kk;
    out->dims = 2;
  } else {
    out->shape[0] = (int64_t)kk;
    out->dims = 1;
  }
  return NULL;
oom:
  free(s);
  free(sb.p);
  return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory classifying an output");
}
