/* Input tensors from model metadata: shapes (batch dimension, -1 dims from
 * --shape or 1) and contents (zero or random). */
#include "tensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BYTES_ELEMENT_LEN 16 /* characters per BYTES element */

size_t nrd_perf_datatype_size(const char *dt) {
  static const struct {
    const char *name;
    size_t size;
  } sizes[] = {{"BOOL", 1},   {"UINT8", 1}, {"INT8", 1}, {"UINT16", 2}, {"INT16", 2}, {"FP16", 2}, {"BF16", 2},
               {"UINT32", 4}, {"INT32", 4}, {"FP32", 4}, {"UINT64", 8}, {"INT64", 8}, {"FP64", 8}};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
    if (!strcmp(dt, sizes[i].name)) return sizes[i].size;
  return 0;
}

void nrd_perf_tensors_free(nrd_perf_tensors *t) {
  for (int i = 0; i < t->ninputs; i++) {
    free(t->inputs[i].name);
    free(t->inputs[i].data);
  }
  for (int i = 0; i < t->noutputs; i++) free(t->outputs[i]);
  free(t->inputs);
  free(t->outputs);
  *t = (nrd_perf_tensors){0};
}

/* xorshift32: reproducible data for a given --seed. */
static uint32_t next_rand(uint32_t *s) {
  uint32_t x = *s ? *s : 0x9e3779b9u;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  return *s = x;
}

/* Fills a fixed-size tensor. Random floats are in [0, 1); random integers
 * use every bit; BOOL is 0 or 1. */
static void fill_fixed(nrd_perf_tensor *in, size_t esize, bool random, uint32_t *seed) {
  if (!random) return; /* calloc'd */
  const char *dt = in->datatype;
  for (int64_t i = 0; i < in->elements; i++) {
    unsigned char *p = in->data + (size_t)i * esize;
    uint32_t r = next_rand(seed);
    if (!strcmp(dt, "FP32")) {
      float f = (float)(r >> 8) / 16777216.0f;
      memcpy(p, &f, 4);
    } else if (!strcmp(dt, "FP64")) {
      double d = (double)r / 4294967296.0;
      memcpy(p, &d, 8);
    } else if (!strcmp(dt, "FP16")) {
      uint16_t h = (uint16_t)(r & 0x3bff); /* exponent below 15: a value < 1 */
      memcpy(p, &h, 2);
    } else if (!strcmp(dt, "BF16")) {
      float f = (float)(r >> 8) / 16777216.0f;
      uint32_t bits;
      memcpy(&bits, &f, 4);
      uint16_t b = (uint16_t)(bits >> 16);
      memcpy(p, &b, 2);
    } else if (!strcmp(dt, "BOOL")) {
      p[0] = (unsigned char)(r & 1);
    } else {
      for (size_t k = 0; k < esize; k++) p[k] = (unsigned char)(next_rand(seed) >> 11);
    }
  }
}

/* BYTES: every element is BYTES_ELEMENT_LEN characters ('0's or random
 * letters and digits, so the JSON form is plain text). */
static bool fill_bytes(nrd_perf_tensor *in, bool random, uint32_t *seed) {
  static const char alnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  in->bytes = (size_t)in->elements * (4 + BYTES_ELEMENT_LEN);
  in->data = malloc(in->bytes ? in->bytes : 1);
  if (!in->data) return false;
  unsigned char *p = in->data;
  for (int64_t i = 0; i < in->elements; i++) {
    uint32_t len = BYTES_ELEMENT_LEN;
    memcpy(p, &len, 4); /* little-endian hosts only (x86-64, arm64) */
    p += 4;
    for (int k = 0; k < BYTES_ELEMENT_LEN; k++) *p++ = random ? (unsigned char)alnum[next_rand(seed) % 62] : '0';
  }
  return true;
}

static const nrd_perf_shape *find_shape(const nrd_perf_opts *o, const char *name) {
  for (int i = 0; i < o->nshapes; i++)
    if (strlen(name) == o->shapes[i].name_len && !strncmp(name, o->shapes[i].name, o->shapes[i].name_len))
      return &o->shapes[i];
  return NULL;
}

static int64_t json_int(json_t *v) {
  if (json_is_integer(v)) return (int64_t)json_integer_value(v);
  if (json_is_string(v)) return strtoll(json_string_value(v), NULL, 10);
  return 0;
}

/* Builds input `in` from one metadata entry. */
static bool build_input(nrd_perf_tensor *in, json_t *meta, const nrd_perf_tensors *t, const nrd_perf_opts *o,
                        uint32_t *seed, char *err, size_t errlen) {
  const char *name = json_string_value(json_object_get(meta, "name"));
  const char *dt = json_string_value(json_object_get(meta, "datatype"));
  json_t *shape = json_object_get(meta, "shape");
  if (!name || !dt || !json_is_array(shape)) {
    snprintf(err, errlen, "model metadata: an input lacks name, datatype or shape");
    return false;
  }
  in->name = strdup(name);
  if (!in->name) return false;
  snprintf(in->datatype, sizeof in->datatype, "%s", dt);
  size_t esize = nrd_perf_datatype_size(dt);
  bool is_bytes = !strcmp(dt, "BYTES");
  if (!esize && !is_bytes) {
    snprintf(err, errlen, "input '%s': datatype %s is not supported", name, dt);
    return false;
  }
  size_t n = json_array_size(shape);
  size_t skip = t->max_batch_size > 0 ? 1 : 0; /* metadata shows the batch dimension as -1 */
  if (n < skip || n - skip > NRD_PERF_MAX_DIMS) {
    snprintf(err, errlen, "input '%s': unexpected shape rank %zu", name, n);
    return false;
  }
  const nrd_perf_shape *over = find_shape(o, name);
  if (over && (size_t)over->ndims != n - skip) {
    snprintf(err, errlen, "--shape %s: %d dims given, the model's input has %zu (batch dimension excluded)", name,
             over->ndims, n - skip);
    return false;
  }
  in->ndims = 0;
  if (skip) in->shape[in->ndims++] = o->batch;
  for (size_t k = skip; k < n; k++) {
    int64_t d = json_int(json_array_get(shape, k));
    int64_t want = over ? over->dims[k - skip] : d;
    if (d >= 0 && want != d) {
      snprintf(err, errlen, "--shape %s: dim %zu is fixed at %lld by the model", name, k - skip, (long long)d);
      return false;
    }
    in->shape[in->ndims++] = want < 0 ? 1 : want;
  }
  in->elements = 1;
  for (int k = 0; k < in->ndims; k++) in->elements *= in->shape[k];
  if (is_bytes) return fill_bytes(in, o->data == NRD_PERF_DATA_RANDOM, seed);
  in->bytes = (size_t)in->elements * esize;
  in->data = calloc(1, in->bytes ? in->bytes : 1);
  if (!in->data) return false;
  fill_fixed(in, esize, o->data == NRD_PERF_DATA_RANDOM, seed);
  return true;
}

bool nrd_perf_tensors_build(nrd_perf_tensors *t, json_t *metadata, json_t *config, const nrd_perf_opts *o, char *err,
                            size_t errlen) {
  *t = (nrd_perf_tensors){0};
  snprintf(err, errlen, "out of memory");
  t->max_batch_size = config ? json_int(json_object_get(config, "max_batch_size")) : 0;
  if (t->max_batch_size == 0 && o->batch > 1) {
    snprintf(err, errlen, "-b %lld: model '%s' does not support batching (max_batch_size 0)", (long long)o->batch,
             o->model);
    return false;
  }
  if (t->max_batch_size > 0 && o->batch > t->max_batch_size) {
    snprintf(err, errlen, "-b %lld: larger than the model's max_batch_size %lld", (long long)o->batch,
             (long long)t->max_batch_size);
    return false;
  }
  for (int i = 0; i < o->nshapes; i++) {
    bool found = false;
    json_t *v;
    size_t k;
    json_array_foreach(json_object_get(metadata, "inputs"), k, v) {
      const char *nm = json_string_value(json_object_get(v, "name"));
      if (nm && strlen(nm) == o->shapes[i].name_len && !strncmp(nm, o->shapes[i].name, o->shapes[i].name_len))
        found = true;
    }
    if (!found) {
      snprintf(err, errlen, "--shape: model '%s' has no input named '%.*s'", o->model, (int)o->shapes[i].name_len,
               o->shapes[i].name);
      return false;
    }
  }
  json_t *ins = json_object_get(metadata, "inputs");
  json_t *outs = json_object_get(metadata, "outputs");
  size_t nin = json_array_size(ins), nout = json_array_size(outs);
  if (nin == 0) {
    snprintf(err, errlen, "model '%s': the metadata lists no inputs", o->model);
    return false;
  }
  t->inputs = calloc(nin, sizeof *t->inputs);
  t->outputs = calloc(nout ? nout : 1, sizeof *t->outputs);
  if (!t->inputs || !t->outputs) goto fail;
  uint32_t seed = o->seed;
  for (size_t i = 0; i < nin; i++) {
    t->ninputs++;
    if (!build_input(&t->inputs[i], json_array_get(ins, i), t, o, &seed, err, errlen)) goto fail;
  }
  for (size_t i = 0; i < nout; i++) {
    const char *nm = json_string_value(json_object_get(json_array_get(outs, i), "name"));
    if (!nm || !(t->outputs[i] = strdup(nm))) goto fail;
    t->noutputs++;
  }
  return true;
fail:
  nrd_perf_tensors_free(t);
  return false;
}

bool nrd_perf_tensor_json_data(const nrd_perf_tensor *in, json_t **out) {
  const char *dt = in->datatype;
  if (!strcmp(dt, "FP16") || !strcmp(dt, "BF16")) return false;
  json_t *a = json_array();
  if (!a) return false;
  const unsigned char *p = in->data;
  size_t esize = nrd_perf_datatype_size(dt);
  for (int64_t i = 0; i < in->elements; i++) {
    json_t *v = NULL;
    if (!strcmp(dt, "BYTES")) {
      uint32_t len;
      memcpy(&len, p, 4);
      v = json_stringn((const char *)p + 4, len);
      p += 4 + len;
      json_array_append_new(a, v);
      continue;
    }
    if (!strcmp(dt, "FP32")) {
      float f;
      memcpy(&f, p, 4);
      v = json_real(f);
    } else if (!strcmp(dt, "FP64")) {
      double d;
      memcpy(&d, p, 8);
      v = json_real(d);
    } else if (!strcmp(dt, "BOOL")) {
      v = json_boolean(p[0]);
    } else if (!strcmp(dt, "INT8"))
      v = json_integer((int8_t)p[0]);
    else if (!strcmp(dt, "UINT8"))
      v = json_integer(p[0]);
    else if (!strcmp(dt, "INT16")) {
      int16_t x;
      memcpy(&x, p, 2);
      v = json_integer(x);
    } else if (!strcmp(dt, "UINT16")) {
      uint16_t x;
      memcpy(&x, p, 2);
      v = json_integer(x);
    } else if (!strcmp(dt, "INT32")) {
      int32_t x;
      memcpy(&x, p, 4);
      v = json_integer(x);
    } else if (!strcmp(dt, "UINT32")) {
      uint32_t x;
      memcpy(&x, p, 4);
      v = json_integer(x);
    } else if (!strcmp(dt, "INT64")) {
      int64_t x;
      memcpy(&x, p, 8);
      v = json_integer(x);
    } else if (!strcmp(dt, "UINT64")) {
      uint64_t x;
      memcpy(&x, p, 8);
      v = json_integer((json_int_t)(x >> 1)); /* JSON integers here are signed 64-bit */
    }
    p += esize;
    if (!v || json_array_append_new(a, v)) {
      json_decref(a);
      return false;
    }
  }
  *out = a;
  return true;
}
