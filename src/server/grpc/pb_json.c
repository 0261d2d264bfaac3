/* JSON -> protobuf-c message, one field at a time from the descriptor. */
#include "pb_json.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Deeper than any message of ours nests; the JSON comes from the core. */
#define DEPTH_MAX 32

typedef struct filler {
  nrd_srv_pb_alloc_fn alloc;
  void *ctx;
} filler;

static int fill_message(const filler *fl, ProtobufCMessage *msg, const json_t *j, int depth);

static size_t element_size(ProtobufCType type) {
  switch (type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_ENUM:
    case PROTOBUF_C_TYPE_FLOAT: return 4;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE: return 8;
    case PROTOBUF_C_TYPE_BOOL: return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_STRING: return sizeof(char *);
    case PROTOBUF_C_TYPE_BYTES: return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_MESSAGE: return sizeof(ProtobufCMessage *);
  }
  return 0;
}

/* Integers come as JSON integers, as decimal strings (proto3 JSON writes
 * 64-bit values so) or as integral reals. */
static bool as_i64(const json_t *v, int64_t *out) {
  if (json_is_integer(v)) {
    *out = json_integer_value(v);
    return true;
  }
  if (json_is_string(v)) {
    const char *s = json_string_value(v);
    char *end = NULL;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (end == s || *end != '\0' || errno) return false;
    *out = x;
    return true;
  }
  if (json_is_real(v)) {
    double d = json_real_value(v);
    if (d != trunc(d) || fabs(d) >= 9.2e18) return false;
    *out = (int64_t)d;
    return true;
  }
  return false;
}

static bool as_u64(const json_t *v, uint64_t *out) {
  if (json_is_string(v)) {
    const char *s = json_string_value(v);
    char *end = NULL;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (end == s || *end != '\0' || errno || strchr(s, '-')) return false;
    *out = x;
    return true;
  }
  int64_t x;
  if (!as_i64(v, &x) || x < 0) return false;
  *out = (uint64_t)x;
  return true;
}

static bool as_f64(const json_t *v, double *out) {
  if (json_is_number(v)) {
    *out = json_number_value(v);
    return true;
  }
  const char *s = json_string_value(v);
  if (s == NULL) return false;
  if (strcmp(s, "NaN") == 0)
    *out = NAN;
  else if (strcmp(s, "Infinity") == 0)
    *out = INFINITY;
  else if (strcmp(s, "-Infinity") == 0)
    *out = -INFINITY;
  else
    return false;
  return true;
}

/* One value of `f`'s type from `v` into `dst`: 1 when set, 0 when `v` does
 * not fit the type (skipped), -1 when memory ran out. */
static int fill_value(const filler *fl, const ProtobufCFieldDescriptor *f, const json_t *v, void *dst, int depth) {
  int64_t i;
  uint64_t u;
  double d;
  switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
      if (!as_i64(v, &i) || i < INT32_MIN || i > INT32_MAX) return 0;
      *(int32_t *)dst = (int32_t)i;
      return 1;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
      if (!as_u64(v, &u) || u > UINT32_MAX) return 0;
      *(uint32_t *)dst = (uint32_t)u;
      return 1;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
      if (!as_i64(v, &i)) return 0;
      *(int64_t *)dst = i;
      return 1;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
      if (!as_u64(v, &u)) return 0;
      *(uint64_t *)dst = u;
      return 1;
    case PROTOBUF_C_TYPE_FLOAT:
      if (!as_f64(v, &d)) return 0;
      *(float *)dst = (float)d;
      return 1;
    case PROTOBUF_C_TYPE_DOUBLE:
      if (!as_f64(v, &d)) return 0;
      *(double *)dst = d;
      return 1;
    case PROTOBUF_C_TYPE_BOOL:
      if (!json_is_boolean(v)) return 0;
      *(protobuf_c_boolean *)dst = json_is_true(v);
      return 1;
    case PROTOBUF_C_TYPE_ENUM: {
      if (json_is_string(v)) {
        const ProtobufCEnumValue *ev =
            protobuf_c_enum_descriptor_get_value_by_name(f->descriptor, json_string_value(v));
        if (ev == NULL) return 0;
        *(int32_t *)dst = ev->value;
        return 1;
      }
      if (!as_i64(v, &i) || i < INT32_MIN || i > INT32_MAX) return 0;
      *(int32_t *)dst = (int32_t)i;
      return 1;
    }
    case PROTOBUF_C_TYPE_STRING:
      if (!json_is_string(v)) return 0;
      *(const char **)dst = json_string_value(v);
      return 1;
    case PROTOBUF_C_TYPE_BYTES: return 0;
    case PROTOBUF_C_TYPE_MESSAGE: {
      if (!json_is_object(v) || depth >= DEPTH_MAX) return 0;
      const ProtobufCMessageDescriptor *md = f->descriptor;
      ProtobufCMessage *m = fl->alloc(fl->ctx, md->sizeof_message);
      if (m == NULL) return -1;
      protobuf_c_message_init(md, m);
      if (fill_message(fl, m, v, depth + 1) != 0) return -1;
      *(ProtobufCMessage **)dst = m;
      return 1;
    }
  }
  return 0;
}

/* protobuf-c makes map<K, V> a repeated message with fields key and value. */
static bool is_map_entry(const ProtobufCFieldDescriptor *f) {
  if (f->type != PROTOBUF_C_TYPE_MESSAGE) return false;
  const ProtobufCMessageDescriptor *md = f->descriptor;
  return md->n_fields == 2 && strcmp(md->fields[0].name, "key") == 0 && strcmp(md->fields[1].name, "value") == 0;
}

/* A JSON object as map entries: one entry message per member. */
static int fill_map(const filler *fl, const ProtobufCFieldDescriptor *f, const json_t *obj, void **array, size_t *count,
                    int depth) {
  const ProtobufCMessageDescriptor *md = f->descriptor;
  size_t n = json_object_size(obj);
  if (n == 0 || depth >= DEPTH_MAX) return 0;
  ProtobufCMessage **entries = fl->alloc(fl->ctx, n * sizeof *entries);
  if (entries == NULL) return -1;
  size_t k = 0;
  const char *key;
  json_t *val;
  json_object_foreach((json_t *)obj, key, val) {
    ProtobufCMessage *e = fl->alloc(fl->ctx, md->sizeof_message);
    if (e == NULL) return -1;
    protobuf_c_message_init(md, e);
    const ProtobufCFieldDescriptor *kf = &md->fields[0], *vf = &md->fields[1];
    int rc;
    if (kf->type == PROTOBUF_C_TYPE_STRING) {
      *(const char **)((char *)e + kf->offset) = key;
      rc = 1;
    } else {
      /* Integer and bool keys are written as strings in JSON. */
      json_t *kv = strcmp(key, "true") == 0 ? json_true() : strcmp(key, "false") == 0 ? json_false() : json_string(key);
      if (kv == NULL) return -1;
      rc = fill_value(fl, kf, kv, (char *)e + kf->offset, depth + 1);
      json_decref(kv);
    }
    if (rc == 1) rc = fill_value(fl, vf, val, (char *)e + vf->offset, depth + 1);
    if (rc < 0) return -1;
    if (rc == 1) entries[k++] = e;
  }
  *array = entries;
  *count = k;
  return 0;
}

static int fill_field(const filler *fl, ProtobufCMessage *msg, const ProtobufCFieldDescriptor *f, const json_t *v,
                      int depth) {
  char *base = (char *)msg;
  if (f->label == PROTOBUF_C_LABEL_REPEATED) {
    void **array = (void **)(base + f->offset);
    size_t *count = (size_t *)(base + f->quantifier_offset);
    if (json_is_object(v) && is_map_entry(f)) return fill_map(fl, f, v, array, count, depth);
    size_t n = json_array_size(v), size = element_size(f->type);
    if (n == 0) return 0;
    char *items = fl->alloc(fl->ctx, n * size);
    if (items == NULL) return -1;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
      int rc = fill_value(fl, f, json_array_get(v, i), items + k * size, depth);
      if (rc < 0) return -1;
      k += (size_t)rc;
    }
    *array = items;
    *count = k;
    return 0;
  }
  int rc = fill_value(fl, f, v, base + f->offset, depth);
  if (rc < 0) return -1;
  if (rc == 0) return 0;
  if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
    *(uint32_t *)(base + f->quantifier_offset) = f->id;
  } else if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->type != PROTOBUF_C_TYPE_STRING &&
             f->type != PROTOBUF_C_TYPE_MESSAGE) {
    *(protobuf_c_boolean *)(base + f->quantifier_offset) = 1;
  }
  return 0;
}

static int fill_message(const filler *fl, ProtobufCMessage *msg, const json_t *j, int depth) {
  const ProtobufCMessageDescriptor *d = msg->descriptor;
  for (unsigned i = 0; i < d->n_fields; i++) {
    const json_t *v = json_object_get(j, d->fields[i].name);
    if (v == NULL || json_is_null(v)) continue;
    if (fill_field(fl, msg, &d->fields[i], v, depth) != 0) return -1;
  }
  return 0;
}

int nrd_srv_pb_from_json(ProtobufCMessage *msg, const json_t *j, nrd_srv_pb_alloc_fn alloc, void *ctx) {
  if (!json_is_object(j)) return 0;
  filler fl = {alloc, ctx};
  return fill_message(&fl, msg, j, 0);
}
