/* Model configuration input: the text format (through pbtxt.c) and
 * protobuf-style JSON, both checked against the schema. Rendering,
 * normalization and validation live in model_config_render.c,
 * model_config_normalize.c and model_config_validate*.c. */
#include "model_config.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_config_int.h"
#include "model_config_schema.h"
#include "pbtxt.h"

json_t *nrd_model_config_parse(const char *text, size_t len, const char *filename, char **err) {
  json_t *at = NULL;
  json_t *cfg = nrd_pbtxt_parse_pos(nrd_schema_model_config(), text, len, filename, &at, err);
  if (cfg != NULL && at != NULL) {
    /* Positions are a help for messages: without memory for them the
     * configuration is still good. */
    json_t *pos = json_object();
    if (pos == NULL || json_object_set_new(pos, "file", json_string(filename != NULL ? filename : "<input>")) != 0) {
      json_decref(pos);
      json_decref(at);
    } else if (json_object_set_new(pos, "at", at) == 0) { /* takes `at`, even when it fails */
      json_object_set_new(cfg, NRD_MODEL_CONFIG_POSITIONS, pos);
    } else {
      json_decref(pos);
    }
  } else {
    json_decref(at);
  }
  return cfg;
}

/* Steps *a and *b along one component of a position path ("name",
 * "[2]" or "[key]") starting at *p; advances *p. Returns 0, or -1 when the
 * path does not lead the same way in both. */
static int path_step(const char **p, const json_t **a, const json_t **b) {
  const char *s = *p;
  char comp[256];
  size_t n;
  int bracket = *s == '[';
  if (bracket) {
    const char *e = strchr(s, ']');
    if (e == NULL) return -1;
    n = (size_t)(e - s - 1);
    if (n >= sizeof comp) return -1;
    memcpy(comp, s + 1, n);
    *p = e + 1;
  } else {
    n = strcspn(s, ".[");
    if (n == 0 || n >= sizeof comp) return -1;
    memcpy(comp, s, n);
    *p = s + n;
  }
  comp[n] = '\0';
  if (**p == '.') (*p)++;
  if (bracket && json_is_array(*a) && json_is_array(*b)) {
    char *end = NULL;
    unsigned long i = strtoul(comp, &end, 10);
    if (end == comp || *end != '\0') return -1;
    *a = json_array_get(*a, i);
    *b = json_array_get(*b, i);
  } else if (json_is_object(*a) && json_is_object(*b)) {
    *a = json_object_get(*a, comp);
    *b = json_object_get(*b, comp);
  } else {
    return -1;
  }
  if (*a == NULL || *b == NULL) return -1;
  if (json_is_object(*a) && json_is_object(*b)) {
    const json_t *na = json_object_get(*a, "name"), *nb = json_object_get(*b, "name");
    if ((na != NULL || nb != NULL) && (na == NULL || nb == NULL || !json_equal((json_t *)na, (json_t *)nb))) return -1;
  }
  return 0;
}

/* Whether `path` leads to the same thing in a and b (see
 * nrd_model_config_carry_positions). */
static int same_place(const json_t *a, const json_t *b, const char *path) {
  while (*path != '\0')
    if (path_step(&path, &a, &b) != 0) return 0;
  if (json_is_object(a) || json_is_array(a)) return json_typeof(a) == json_typeof(b);
  return json_equal((json_t *)a, (json_t *)b);
}

void nrd_model_config_carry_positions(json_t *to, const json_t *from) {
  const json_t *pos = json_object_get(from, NRD_MODEL_CONFIG_POSITIONS);
  const json_t *file = json_object_get(pos, "file");
  if (!json_is_object(to) || !json_is_string(file)) return;
  json_t *keep = json_object(), *at = json_object();
  if (keep == NULL || at == NULL || json_object_set(keep, "file", (json_t *)file) != 0) {
    json_decref(keep);
    json_decref(at);
    return;
  }
  if (json_object_set_new(keep, "at", at) != 0) { /* takes `at`, even when it fails */
    json_decref(keep);
    return;
  }
  const char *k;
  json_t *v;
  json_object_foreach(json_object_get(pos, "at"), k, v) {
    if (same_place(from, to, k)) json_object_set(at, k, v);
  }
  json_object_set_new(to, NRD_MODEL_CONFIG_POSITIONS, keep);
}

json_t *nrd_model_config_without_positions(const json_t *cfg) {
  json_t *c = json_is_object(cfg) ? json_copy((json_t *)cfg) : NULL;
  if (c != NULL) json_object_del(c, NRD_MODEL_CONFIG_POSITIONS);
  return c;
}

/* ======================================================================
 * JSON input
 * ====================================================================== */

typedef struct jpath {
  char buf[512];
  size_t len;
} jpath;

static size_t jpath_push_key(jpath *p, const char *key) {
  size_t old = p->len;
  int n = snprintf(p->buf + p->len, sizeof p->buf - p->len, "%s%s", p->len ? "." : "", key);
  if (n > 0) p->len = p->len + (size_t)n < sizeof p->buf ? p->len + (size_t)n : sizeof p->buf - 1;
  return old;
}

static size_t jpath_push_index(jpath *p, size_t i) {
  size_t old = p->len;
  int n = snprintf(p->buf + p->len, sizeof p->buf - p->len, "[%zu]", i);
  if (n > 0) p->len = p->len + (size_t)n < sizeof p->buf ? p->len + (size_t)n : sizeof p->buf - 1;
  return old;
}

static void jpath_pop(jpath *p, size_t old) {
  p->len = old;
  p->buf[old] = '\0';
}

static char *jerr(const jpath *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static char *jerr(const jpath *p, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return nrd_mc_strdupf("%s: %s", p->len ? p->buf : "(root)", msg);
}

/* Parses an optional '-' and decimal digits. Returns 0, -1 not an integer,
 * -2 overflow of 64 bits. */
static int parse_dec(const char *s, int *neg, uint64_t *out) {
  *neg = 0;
  if (*s == '-') {
    *neg = 1;
    s++;
  }
  if (*s == '\0') return -1;
  uint64_t v = 0;
  for (; *s; s++) {
    if (*s < '0' || *s > '9') return -1;
    unsigned d = (unsigned)(*s - '0');
    if (v > (UINT64_MAX - d) / 10) return -2;
    v = v * 10 + d;
  }
  *out = v;
  return 0;
}

/* Range-checks (neg, mag) for integer type t and builds the JSON integer. */
static json_t *int_in_range(nrd_field_type t, int neg, uint64_t mag) {
  uint64_t lim_pos = t == NRD_FT_INT32    ? (uint64_t)INT32_MAX
                     : t == NRD_FT_UINT32 ? (uint64_t)UINT32_MAX
                     : t == NRD_FT_INT64  ? (uint64_t)INT64_MAX
                                          : UINT64_MAX;
  uint64_t lim_neg = t == NRD_FT_INT32 ? (uint64_t)INT32_MAX + 1 : t == NRD_FT_INT64 ? (uint64_t)INT64_MAX + 1 : 0;
  if (neg ? mag > lim_neg : mag > lim_pos) return NULL;
  if (neg && mag == 0) return json_integer(0);
  json_int_t v = neg ? (mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(json_int_t)mag) : (json_int_t)mag;
  return json_integer(v);
}

static json_t *real_value(nrd_field_type t, double v) {
  if (t == NRD_FT_FLOAT && isfinite(v)) v = (double)(float)v;
  if (isnan(v)) return json_string("NaN");
  if (isinf(v)) return json_string(v > 0 ? "Infinity" : "-Infinity");
  return json_real(v);
}

static json_t *convert_message(const nrd_msg_desc *msg, json_t *in, jpath *p, char **err);

/* Converts one scalar JSON value of type t. */
static json_t *convert_scalar(const nrd_field_desc *fd, nrd_field_type t, json_t *in, jpath *p, char **err) {
  switch (t) {
    case NRD_FT_STRING: {
      if (!json_is_string(in)) goto wrong;
      size_t n = json_string_length(in);
      if (memchr(json_string_value(in), '\0', n) != NULL) {
        *err = jerr(p, "string contains a NUL byte");
        return NULL;
      }
      return json_stringn(json_string_value(in), n);
    }
    case NRD_FT_BOOL:
      if (!json_is_boolean(in)) goto wrong;
      return json_boolean(json_is_true(in));
    case NRD_FT_INT32:
    case NRD_FT_UINT32:
    case NRD_FT_INT64:
    case NRD_FT_UINT64: {
      int neg;
      uint64_t mag;
      if (json_is_integer(in)) {
        json_int_t v = json_integer_value(in);
        neg = v < 0;
        mag = neg ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
      } else if (json_is_real(in)) {
        double d = json_real_value(in);
        if (d != floor(d) || fabs(d) >= 18446744073709551616.0) {
          *err = jerr(p, "expected an integer for %s field '%s'", nrd_schema_type_name(t), fd->name);
          return NULL;
        }
        neg = d < 0;
        mag = (uint64_t)fabs(d);
      } else if (json_is_string(in)) {
        int r = parse_dec(json_string_value(in), &neg, &mag);
        if (r == -1) {
          *err = jerr(p, "invalid integer string '%.40s' for %s field '%s'", json_string_value(in),
                      nrd_schema_type_name(t), fd->name);
          return NULL;
        }
        if (r == -2) goto range;
      } else {
        goto wrong;
      }
      json_t *j = int_in_range(t, neg, mag);
      if (j == NULL) goto range;
      return j;
    range:
      *err = jerr(p, "integer out of range for %s field '%s'", nrd_schema_type_name(t), fd->name);
      return NULL;
    }
    case NRD_FT_FLOAT:
    case NRD_FT_DOUBLE: {
      if (json_is_number(in)) return real_value(t, json_number_value(in));
      if (json_is_string(in)) {
        const char *s = json_string_value(in);
        if (strcmp(s, "NaN") == 0) return json_string("NaN");
        if (strcmp(s, "Infinity") == 0) return json_string("Infinity");
        if (strcmp(s, "-Infinity") == 0) return json_string("-Infinity");
        char *end = NULL;
        errno = 0;
        double d = strtod(s, &end);
        if (*s != '\0' && end != NULL && *end == '\0' && isfinite(d)) return real_value(t, d);
        *err = jerr(p, "invalid number string '%.40s' for %s field '%s'", s, nrd_schema_type_name(t), fd->name);
        return NULL;
      }
      goto wrong;
    }
    case NRD_FT_ENUM: {
      const nrd_enum_desc *e = fd->enm;
      if (json_is_string(in)) {
        const char *s = json_string_value(in);
        int i = nrd_schema_enum_index(e, s, strlen(s), 1);
        if (i < 0) {
          *err = jerr(p, "unknown value '%.60s' for enum %s of field '%s'", s, e->name, fd->name);
          return NULL;
        }
        return json_string(e->names[i]);
      }
      if (json_is_integer(in)) {
        const char *name = nrd_schema_enum_name(e, json_integer_value(in));
        if (name == NULL) {
          *err = jerr(p, "unknown number %lld for enum %s of field '%s'", (long long)json_integer_value(in), e->name,
                      fd->name);
          return NULL;
        }
        return json_string(name);
      }
      goto wrong;
    }
    case NRD_FT_MESSAGE:
      if (!json_is_object(in)) goto wrong;
      return convert_message(fd->msg, in, p, err);
  }
wrong:
  *err = jerr(p, "expected %s for field '%s'", t == NRD_FT_MESSAGE ? "an object" : nrd_schema_type_name(t), fd->name);
  return NULL;
}

/* Normalizes a JSON map key for key type t into *out (malloc'd). */
static int convert_map_key(const nrd_field_desc *fd, const char *key, jpath *p, char **out, char **err) {
  if (fd->key_type == NRD_FT_STRING) {
    *out = strdup(key);
  } else if (fd->key_type == NRD_FT_BOOL) {
    if (strcmp(key, "true") != 0 && strcmp(key, "false") != 0) {
      *err = jerr(p, "invalid bool map key '%.40s' for field '%s'", key, fd->name);
      return -1;
    }
    *out = strdup(key);
  } else {
    int neg;
    uint64_t mag;
    json_t *j = NULL;
    if (parse_dec(key, &neg, &mag) == 0) j = int_in_range(fd->key_type, neg, mag);
    if (j == NULL) {
      *err = jerr(p, "invalid %s map key '%.40s' for field '%s'", nrd_schema_type_name(fd->key_type), key, fd->name);
      return -1;
    }
    json_decref(j);
    *out = neg ? nrd_mc_strdupf("-%llu", (unsigned long long)mag) : nrd_mc_strdupf("%llu", (unsigned long long)mag);
  }
  if (*out == NULL) {
    *err = jerr(p, "out of memory");
    return -1;
  }
  return 0;
}

static json_t *convert_field(const nrd_field_desc *fd, json_t *in, jpath *p, char **err) {
  if (fd->label == NRD_LABEL_SINGULAR) return convert_scalar(fd, fd->type, in, p, err);
  if (fd->label == NRD_LABEL_REPEATED) {
    if (!json_is_array(in)) {
      *err = jerr(p, "expected an array for repeated field '%s'", fd->name);
      return NULL;
    }
    json_t *out = json_array();
    if (out == NULL) goto oom;
    for (size_t i = 0; i < json_array_size(in); i++) {
      size_t old = jpath_push_index(p, i);
      json_t *v = convert_scalar(fd, fd->type, json_array_get(in, i), p, err);
      jpath_pop(p, old);
      if (v == NULL || json_array_append_new(out, v) != 0) {
        json_decref(out);
        if (*err == NULL) goto oom;
        return NULL;
      }
    }
    return out;
  }
  if (!json_is_object(in)) {
    *err = jerr(p, "expected an object for map field '%s'", fd->name);
    return NULL;
  }
  json_t *out = json_object();
  if (out == NULL) goto oom;
  const char *k;
  json_t *v;
  json_object_foreach(in, k, v) {
    size_t old = jpath_push_key(p, k);
    char *nk = NULL;
    json_t *nv = NULL;
    if (convert_map_key(fd, k, p, &nk, err) == 0) {
      nv = json_is_null(v) ? (fd->type == NRD_FT_MESSAGE ? json_object() : json_string(""))
                           : convert_scalar(fd, fd->type, v, p, err);
    }
    jpath_pop(p, old);
    if (nv == NULL || json_object_set_new(out, nk, nv) != 0) {
      free(nk);
      json_decref(out);
      if (*err == NULL) goto oom;
      return NULL;
    }
    free(nk);
  }
  return out;
oom:
  *err = jerr(p, "out of memory");
  return NULL;
}

static json_t *convert_message(const nrd_msg_desc *msg, json_t *in, jpath *p, char **err) {
  json_t *out = json_object();
  if (out == NULL) {
    *err = jerr(p, "out of memory");
    return NULL;
  }
  const char *k;
  json_t *v;
  json_object_foreach(in, k, v) {
    size_t old = jpath_push_key(p, k);
    const nrd_field_desc *fd = nrd_schema_find_field(msg, k, strlen(k), 1);
    if (fd == NULL) {
      *err = jerr(p, "unknown field '%.64s' in %s", k, msg->name);
      goto fail;
    }
    if (json_object_get(out, fd->name) != NULL) {
      *err = jerr(p, "field '%s' of %s is specified more than once", fd->name, msg->name);
      goto fail;
    }
    if (json_is_null(v)) {
      jpath_pop(p, old);
      continue;
    }
    if (fd->oneof != NULL) {
      for (size_t i = 0; i < msg->nfields; i++) {
        const nrd_field_desc *o = &msg->fields[i];
        if (o != fd && o->oneof != NULL && strcmp(o->oneof, fd->oneof) == 0 && json_object_get(out, o->name) != NULL) {
          *err = jerr(p, "field '%s' conflicts with '%s': both belong to oneof '%s' of %s", fd->name, o->name,
                      fd->oneof, msg->name);
          goto fail;
        }
      }
    }
    json_t *nv = convert_field(fd, v, p, err);
    if (nv == NULL) {
      if (*err == NULL) *err = jerr(p, "out of memory");
      goto fail;
    }
    if (json_object_set_new(out, fd->name, nv) != 0) {
      *err = jerr(p, "out of memory");
      goto fail;
    }
    jpath_pop(p, old);
  }
  return out;
fail:
  json_decref(out);
  return NULL;
}

json_t *nrd_model_config_from_json(const char *json, size_t len, char **err) {
  char *dummy = NULL;
  if (err == NULL) err = &dummy;
  *err = NULL;
  json_error_t jerror;
  json_t *in = json_loadb(json != NULL ? json : "", json != NULL ? len : 0, JSON_REJECT_DUPLICATES, &jerror);
  if (in == NULL) {
    *err = nrd_mc_strdupf("JSON:%d:%d: %s", jerror.line, jerror.column, jerror.text);
    free(dummy);
    return NULL;
  }
  json_t *out = NULL;
  if (!json_is_object(in)) {
    *err = nrd_mc_strdupf("(root): expected a JSON object for ModelConfig");
  } else {
    jpath p = {{0}, 0};
    out = convert_message(nrd_schema_model_config(), in, &p, err);
  }
  json_decref(in);
  if (out == NULL && *err == NULL) *err = nrd_mc_strdupf("out of memory");
  if (err == &dummy) free(dummy);
  return out;
}
