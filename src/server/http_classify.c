/* The classification extension: an output requested with
 * "parameters": {"classification": k} is replaced by its top k classes,
 * a BYTES tensor of "value:index" or "value:index:label" strings (labels
 * from the model's label file through the public API). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_internal.h"

static float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
  if (exp == 0 && man == 0) {
    bits = sign;
  } else if (exp == 0) {
    exp = 127 - 15 + 1;
    while (!(man & 0x400)) {
      man <<= 1;
      exp--;
    }
    bits = sign | (exp << 23) | ((man & 0x3ff) << 13);
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

/* Element i of a numeric tensor as a double; *is_float says how to print. */
static double element(TRITONSERVER_DataType dt, const void *base, size_t i, int *kind) {
  const unsigned char *p = base;
  *kind = 0; /* 0 float, 1 signed, 2 unsigned */
  switch (dt) {
#define CASE(T, ctype, k)        \
  case T: {                      \
    ctype v;                     \
    memcpy(&v, p + i * sizeof v, sizeof v); \
    *kind = k;                   \
    return (double)v;            \
  }
    CASE(TRITONSERVER_TYPE_UINT8, uint8_t, 2)
    CASE(TRITONSERVER_TYPE_UINT16, uint16_t, 2)
    CASE(TRITONSERVER_TYPE_UINT32, uint32_t, 2)
    CASE(TRITONSERVER_TYPE_UINT64, uint64_t, 2)
    CASE(TRITONSERVER_TYPE_INT8, int8_t, 1)
    CASE(TRITONSERVER_TYPE_INT16, int16_t, 1)
    CASE(TRITONSERVER_TYPE_INT32, int32_t, 1)
    CASE(TRITONSERVER_TYPE_INT64, int64_t, 1)
    CASE(TRITONSERVER_TYPE_FP32, float, 0)
    CASE(TRITONSERVER_TYPE_FP64, double, 0)
#undef CASE
    case TRITONSERVER_TYPE_FP16: {
      uint16_t h;
      memcpy(&h, p + i * 2, 2);
      return half_to_float(h);
    }
    case TRITONSERVER_TYPE_BF16: {
      uint16_t h;
      memcpy(&h, p + i * 2, 2);
      uint32_t bits = (uint32_t)h << 16;
      float f;
      memcpy(&f, &bits, sizeof f);
      return f;
    }
    default: return 0;
  }
}

typedef struct scored {
  double v;
  size_t idx;
} scored;

static int by_score(const void *a, const void *b) {
  const scored *x = a, *y = b;
  if (x->v != y->v) return x->v > y->v ? -1 : 1;
  return x->idx < y->idx ? -1 : x->idx > y->idx;
}

int nrd_srv_http_classify(TRITONSERVER_InferenceResponse *resp, uint32_t index, TRITONSERVER_DataType dt,
                          const int64_t *shape, uint64_t dims, const void *base, size_t size, uint32_t k,
                          char **out, size_t *out_size, int64_t out_shape[2], uint64_t *out_dims,
                          char *msg, size_t msglen) {
  *out = NULL;
  *out_size = 0;
  size_t esz = (size_t)TRITONSERVER_DataTypeByteSize(dt);
  if (dt == TRITONSERVER_TYPE_BYTES || dt == TRITONSERVER_TYPE_BOOL || esz == 0) {
    snprintf(msg, msglen, "class result not available for output due to unsupported type '%s'",
             TRITONSERVER_DataTypeString(dt));
    return -1;
  }
  size_t count = size / esz;
  size_t rows = 1;
  if (dims >= 2 && shape[0] > 0 && count % (size_t)shape[0] == 0) rows = (size_t)shape[0];
  size_t per = rows ? count / rows : 0;
  size_t kk = k < per ? k : per;
  scored *s = malloc((per ? per : 1) * sizeof *s);
  size_t cap = rows * kk * 64 + 16, len = 0;
  char *buf = malloc(cap);
  if (s == NULL || buf == NULL) goto oom;
  for (size_t r = 0; r < rows; r++) {
    int kind = 0;
    for (size_t i = 0; i < per; i++) s[i] = (scored){element(dt, base, r * per + i, &kind), i};
    qsort(s, per, sizeof *s, by_score);
    for (size_t j = 0; j < kk; j++) {
      const char *label = NULL;
      TRITONSERVER_Error *err =
          TRITONSERVER_InferenceResponseOutputClassificationLabel(resp, index, s[j].idx, &label);
      if (err) {
        snprintf(msg, msglen, "%s", TRITONSERVER_ErrorMessage(err));
        TRITONSERVER_ErrorDelete(err);
        free(s);
        free(buf);
        return -1;
      }
      char num[64];
      if (kind == 0) snprintf(num, sizeof num, "%f", s[j].v);
      else if (kind == 1) snprintf(num, sizeof num, "%lld", (long long)s[j].v);
      else snprintf(num, sizeof num, "%llu", (unsigned long long)s[j].v);
      size_t llen = label ? strlen(label) : 0;
      size_t need = strlen(num) + 24 + (label ? llen + 1 : 0);
      if (len + 4 + need > cap) {
        size_t ncap = (cap + need + 4) * 2;
        char *g = realloc(buf, ncap);
        if (g == NULL) goto oom;
        buf = g;
        cap = ncap;
      }
      int n = label ? snprintf(buf + len + 4, cap - len - 4, "%s:%zu:%s", num, s[j].idx, label)
                    : snprintf(buf + len + 4, cap - len - 4, "%s:%zu", num, s[j].idx);
      uint32_t n32 = (uint32_t)n;
      memcpy(buf + len, &n32, 4); /* little-endian hosts only, as the rest */
      len += 4 + (size_t)n;
    }
  }
  free(s);
  *out = buf;
  *out_size = len;
  if (rows > 1 || dims >= 2) {
    out_shape[0] = (int64_t)rows;
    out_shape[1] = (int64_t)kk;
    *out_dims = 2;
  } else {
    out_shape[0] = (int64_t)kk;
    *out_dims = 1;
  }
  return 0;
oom:
  free(s);
  free(buf);
  snprintf(msg, msglen, "out of memory classifying output");
  return -1;
}
