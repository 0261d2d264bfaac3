/* Model configuration: JSON input, rendering, normalization and validation.
 * The text-format reader lives in pbtxt.c; all walking is schema-driven. */
#include "model_config.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_config_schema.h"
#include "pbtxt.h"

static char *fmt_alloc(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static char *fmt_alloc(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) return NULL;
  char *s = malloc((size_t)n + 1);
  if (s == NULL) return NULL;
  va_start(ap, fmt);
  vsnprintf(s, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return s;
}

json_t *nrd_model_config_parse(const char *text, size_t len, const char *filename, char **err) {
  return nrd_pbtxt_parse(nrd_schema_model_config(), text, len, filename, err);
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
  return fmt_alloc("%s: %s", p->len ? p->buf : "(root)", msg);
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
    *out = neg ? fmt_alloc("-%llu", (unsigned long long)mag) : fmt_alloc("%llu", (unsigned long long)mag);
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
    *err = fmt_alloc("JSON:%d:%d: %s", jerror.line, jerror.column, jerror.text);
    free(dummy);
    return NULL;
  }
  json_t *out = NULL;
  if (!json_is_object(in)) {
    *err = fmt_alloc("(root): expected a JSON object for ModelConfig");
  } else {
    jpath p = {{0}, 0};
    out = convert_message(nrd_schema_model_config(), in, &p, err);
  }
  json_decref(in);
  if (out == NULL && *err == NULL) *err = fmt_alloc("out of memory");
  if (err == &dummy) free(dummy);
  return out;
}

/* ======================================================================
 * Rendering
 * ====================================================================== */

typedef struct sbuf {
  char *data;
  size_t len, cap;
  int oom;
} sbuf;

static void sb_putn(sbuf *b, const char *s, size_t n) {
  if (b->oom) return;
  if (b->len + n + 1 > b->cap) {
    size_t ncap = b->cap ? b->cap : 1024;
    while (ncap < b->len + n + 1) ncap *= 2;
    char *nd = realloc(b->data, ncap);
    if (nd == NULL) {
      b->oom = 1;
      return;
    }
    b->data = nd;
    b->cap = ncap;
  }
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
}

static void sb_puts(sbuf *b, const char *s) { sb_putn(b, s, strlen(s)); }

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sb_printf(sbuf *b, const char *fmt, ...) {
  char tmp[64];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n > 0) sb_putn(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* JSON string escaping as a rapidjson writer does: only '"', '\\' and
 * control characters; UTF-8 passes through. */
static void sb_json_string(sbuf *b, const char *s, size_t n) {
  sb_putn(b, "\"", 1);
  size_t run = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    const char *esc = NULL;
    char u[8];
    if (c == '"')
      esc = "\\\"";
    else if (c == '\\')
      esc = "\\\\";
    else if (c == '\n')
      esc = "\\n";
    else if (c == '\t')
      esc = "\\t";
    else if (c == '\r')
      esc = "\\r";
    else if (c == '\b')
      esc = "\\b";
    else if (c == '\f')
      esc = "\\f";
    else if (c < 0x20) {
      snprintf(u, sizeof u, "\\u%04X", c);
      esc = u;
    }
    if (esc != NULL) {
      sb_putn(b, s + i - run, run);
      run = 0;
      sb_puts(b, esc);
    } else {
      run++;
    }
  }
  sb_putn(b, s + n - run, run);
  sb_putn(b, "\"", 1);
}

/* Shortest decimal that reads back as the same float/double. */
static void sb_real(sbuf *b, nrd_field_type t, double v) {
  char tmp[40];
  if (v == 0.0 && signbit(v)) {
    sb_puts(b, "-0.0"); /* keeps the sign through JSON readers */
    return;
  }
  int maxp = t == NRD_FT_FLOAT ? 9 : 17;
  for (int prec = 1; prec <= maxp; prec++) {
    snprintf(tmp, sizeof tmp, "%.*g", prec, v);
    if (t == NRD_FT_FLOAT ? strtof(tmp, NULL) == (float)v : strtod(tmp, NULL) == v) break;
  }
  sb_puts(b, tmp);
}

static const char *enum_default(const nrd_enum_desc *e) {
  const char *n = nrd_schema_enum_name(e, 0);
  return n != NULL ? n : e->names[0];
}

static void render_message(sbuf *b, const nrd_msg_desc *msg, const json_t *obj);

/* Renders one scalar (or message) value v of type t; v may be NULL or of the
 * wrong JSON type, in which case the type's default is printed. */
static void render_value(sbuf *b, const nrd_field_desc *fd, nrd_field_type t, const json_t *v) {
  switch (t) {
    case NRD_FT_STRING:
      if (json_is_string(v)) {
        sb_json_string(b, json_string_value(v), json_string_length(v));
      } else {
        sb_puts(b, "\"\"");
      }
      return;
    case NRD_FT_BOOL: sb_puts(b, json_is_true(v) ? "true" : "false"); return;
    case NRD_FT_INT32:
    case NRD_FT_INT64:
    case NRD_FT_UINT32:
    case NRD_FT_UINT64: {
      json_int_t i = json_is_integer(v) ? json_integer_value(v) : 0;
      int quote = (t == NRD_FT_INT64 || t == NRD_FT_UINT64) && !(fd->flags & NRD_FIELD_JSON_NUMBER);
      if (quote) sb_putn(b, "\"", 1);
      if (t == NRD_FT_UINT64 || t == NRD_FT_UINT32) {
        sb_printf(b, "%llu", (unsigned long long)(t == NRD_FT_UINT32 ? (uint32_t)i : (uint64_t)i));
      } else {
        sb_printf(b, "%lld", (long long)(t == NRD_FT_INT32 ? (int32_t)i : i));
      }
      if (quote) sb_putn(b, "\"", 1);
      return;
    }
    case NRD_FT_FLOAT:
    case NRD_FT_DOUBLE:
      if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (strcmp(s, "NaN") == 0 || strcmp(s, "Infinity") == 0 || strcmp(s, "-Infinity") == 0) {
          sb_json_string(b, s, strlen(s));
          return;
        }
      }
      sb_real(b, t, json_is_number(v) ? json_number_value(v) : 0.0);
      return;
    case NRD_FT_ENUM: {
      const char *name = NULL;
      if (json_is_string(v) && nrd_schema_enum_number(fd->enm, json_string_value(v)) >= 0) {
        name = json_string_value(v);
      } else if (json_is_integer(v)) {
        name = nrd_schema_enum_name(fd->enm, json_integer_value(v));
      }
      if (name == NULL) name = enum_default(fd->enm);
      sb_json_string(b, name, strlen(name));
      return;
    }
    case NRD_FT_MESSAGE: render_message(b, fd->msg, json_is_object(v) ? v : NULL); return;
  }
}

static void render_message(sbuf *b, const nrd_msg_desc *msg, const json_t *obj) {
  sb_putn(b, "{", 1);
  int first = 1;
  for (size_t i = 0; i < msg->nfields; i++) {
    const nrd_field_desc *fd = &msg->fields[i];
    const json_t *v = obj != NULL ? json_object_get(obj, fd->name) : NULL;
    if (fd->label == NRD_LABEL_SINGULAR && (fd->type == NRD_FT_MESSAGE || fd->oneof != NULL) &&
        (v == NULL || json_is_null(v))) {
      continue; /* unset message or oneof member: protobuf omits it */
    }
    if (!first) sb_putn(b, ",", 1);
    first = 0;
    sb_json_string(b, fd->name, strlen(fd->name));
    sb_putn(b, ":", 1);
    if (fd->label == NRD_LABEL_REPEATED) {
      sb_putn(b, "[", 1);
      for (size_t k = 0; json_is_array(v) && k < json_array_size(v); k++) {
        if (k) sb_putn(b, ",", 1);
        render_value(b, fd, fd->type, json_array_get(v, k));
      }
      sb_putn(b, "]", 1);
    } else if (fd->label == NRD_LABEL_MAP) {
      sb_putn(b, "{", 1);
      if (json_is_object(v)) {
        int mfirst = 1;
        const char *k;
        json_t *mv;
        json_object_foreach((json_t *)v, k, mv) {
          if (!mfirst) sb_putn(b, ",", 1);
          mfirst = 0;
          sb_json_string(b, k, strlen(k));
          sb_putn(b, ":", 1);
          render_value(b, fd, fd->type, mv);
        }
      }
      sb_putn(b, "}", 1);
    } else {
      render_value(b, fd, fd->type, v);
    }
  }
  sb_putn(b, "}", 1);
}

char *nrd_model_config_render(const json_t *cfg) {
  sbuf b = {NULL, 0, 0, 0};
  render_message(&b, nrd_schema_model_config(), json_is_object(cfg) ? cfg : NULL);
  if (b.oom) {
    free(b.data);
    return NULL;
  }
  return b.data;
}

/* ======================================================================
 * Accessors shared by normalization and validation
 * ====================================================================== */

static const char *get_str(const json_t *o, const char *k) {
  const json_t *v = json_object_get(o, k);
  return json_is_string(v) ? json_string_value(v) : "";
}

static long long get_int(const json_t *o, const char *k) {
  const json_t *v = json_object_get(o, k);
  return json_is_integer(v) ? (long long)json_integer_value(v) : 0;
}

static uint64_t get_uint(const json_t *o, const char *k) { return (uint64_t)get_int(o, k); }

static double get_real(const json_t *o, const char *k) {
  const json_t *v = json_object_get(o, k);
  if (json_is_number(v)) return json_number_value(v);
  if (json_is_string(v)) {
    const char *s = json_string_value(v);
    if (strcmp(s, "Infinity") == 0) return INFINITY;
    if (strcmp(s, "-Infinity") == 0) return -INFINITY;
    if (strcmp(s, "NaN") == 0) return NAN;
  }
  return 0.0;
}

static int get_bool(const json_t *o, const char *k) { return json_is_true(json_object_get(o, k)); }

static const json_t *get_obj(const json_t *o, const char *k) {
  const json_t *v = json_object_get(o, k);
  return json_is_object(v) ? v : NULL;
}

static size_t arr_size(const json_t *o, const char *k) {
  const json_t *v = json_object_get(o, k);
  return json_is_array(v) ? json_array_size(v) : 0;
}

static const json_t *arr_get(const json_t *o, const char *k, size_t i) {
  return json_array_get(json_object_get(o, k), i);
}

static size_t map_size(const json_t *o, const char *k) {
  const json_t *v = json_object_get(o, k);
  return json_is_object(v) ? json_object_size(v) : 0;
}

/* Gets (creating when absent) the object member k of o; NULL on OOM or if
 * the member exists with another type. */
static json_t *need_obj(json_t *o, const char *k) {
  json_t *v = json_object_get(o, k);
  if (v != NULL) return json_is_object(v) ? v : NULL;
  v = json_object();
  if (v == NULL || json_object_set_new(o, k, v) != 0) return NULL;
  return v;
}

static json_t *need_arr(json_t *o, const char *k) {
  json_t *v = json_object_get(o, k);
  if (v != NULL) return json_is_array(v) ? v : NULL;
  v = json_array();
  if (v == NULL || json_object_set_new(o, k, v) != 0) return NULL;
  return v;
}

static int set_str(json_t *o, const char *k, const char *s) { return json_object_set_new(o, k, json_string(s)); }

/* ======================================================================
 * Normalization
 * ====================================================================== */

/* Fills platform/backend/default_model_filename from each other for the
 * frameworks Triton knows, without looking at the model directory. */
static int autofill_backend(json_t *cfg, const char *model_name, char **err) {
  const char *platform = get_str(cfg, "platform");
  const char *backend = get_str(cfg, "backend");
  const char *dmf = get_str(cfg, "default_model_filename");
  int rc = 0;

  if (strcmp(platform, "tensorflow_savedmodel") == 0 || strcmp(platform, "tensorflow_graphdef") == 0) {
    int saved = strcmp(platform, "tensorflow_savedmodel") == 0;
    if (*backend == '\0') rc |= set_str(cfg, "backend", "tensorflow");
    if (*dmf == '\0') rc |= set_str(cfg, "default_model_filename", saved ? "model.savedmodel" : "model.graphdef");
    goto done;
  }
  if (*backend == '\0' && *platform == '\0' && strcmp(backend, "tensorflow") != 0) {
    if (strcmp(dmf, "model.savedmodel") == 0 || strcmp(dmf, "model.graphdef") == 0) {
      int saved = strcmp(dmf, "model.savedmodel") == 0;
      rc |= set_str(cfg, "platform", saved ? "tensorflow_savedmodel" : "tensorflow_graphdef");
      rc |= set_str(cfg, "backend", "tensorflow");
      goto done;
    }
  }
  if (*backend == '\0') {
    if (strcmp(platform, "tensorrt_plan") == 0 || strcmp(dmf, "model.plan") == 0) {
      rc |= set_str(cfg, "backend", "tensorrt");
    } else if (strcmp(platform, "onnxruntime_onnx") == 0 || strcmp(dmf, "model.onnx") == 0) {
      rc |= set_str(cfg, "backend", "onnxruntime");
    } else if (strcmp(dmf, "model.xml") == 0) {
      rc |= set_str(cfg, "backend", "openvino");
    } else if (strcmp(platform, "pytorch_libtorch") == 0 || strcmp(dmf, "model.pt") == 0) {
      rc |= set_str(cfg, "backend", "pytorch");
    } else if (strcmp(dmf, "model.py") == 0) {
      rc |= set_str(cfg, "backend", "python");
    } else if (*platform == '\0' && *dmf == '\0') {
      /* Custom backend named by the model: "<anything>.<backend>". */
      const char *dot = model_name != NULL ? strchr(model_name, '.') : NULL;
      if (dot == NULL) {
        *err = fmt_alloc("Invalid model name: Could not determine backend for model '%s' "
                         "with no backend in model configuration. Expected model name of "
                         "the form 'model.<backend_name>'.",
                         model_name != NULL ? model_name : get_str(cfg, "name"));
        return -1;
      }
      char *fname = fmt_alloc("model.%s", dot + 1);
      if (fname == NULL) goto oom;
      rc |= set_str(cfg, "backend", dot + 1);
      rc |= set_str(cfg, "default_model_filename", fname);
      free(fname);
      goto done;
    }
    if (rc != 0) goto oom;
    backend = get_str(cfg, "backend");
    platform = get_str(cfg, "platform");
    dmf = get_str(cfg, "default_model_filename");
  }
  if (strcmp(backend, "tensorrt") == 0) {
    if (*platform == '\0') rc |= set_str(cfg, "platform", "tensorrt_plan");
    if (*dmf == '\0') rc |= set_str(cfg, "default_model_filename", "model.plan");
  } else if (strcmp(backend, "onnxruntime") == 0) {
    if (*platform == '\0') rc |= set_str(cfg, "platform", "onnxruntime_onnx");
    if (*dmf == '\0') rc |= set_str(cfg, "default_model_filename", "model.onnx");
  } else if (strcmp(backend, "openvino") == 0) {
    if (*dmf == '\0') rc |= set_str(cfg, "default_model_filename", "model.xml");
  } else if (strcmp(backend, "pytorch") == 0) {
    if (*platform == '\0') {
      rc |= set_str(cfg, "platform", "pytorch_libtorch");
      if (*dmf == '\0') rc |= set_str(cfg, "default_model_filename", "model.pt");
    }
  } else if (strcmp(backend, "python") == 0) {
    if (*dmf == '\0') rc |= set_str(cfg, "default_model_filename", "model.py");
  }
done:
  if (rc != 0) goto oom;
  return 0;
oom:
  *err = fmt_alloc("out of memory");
  return -1;
}

static int default_preferred(json_t *sched, long long max_batch_size) {
  if (sched == NULL || arr_size(sched, "preferred_batch_size") != 0 || max_batch_size <= 0) return 0;
  json_t *a = need_arr(sched, "preferred_batch_size");
  if (a == NULL) return -1;
  return json_array_append_new(a, json_integer(max_batch_size));
}

static int normalize_instance_groups(json_t *cfg, int has_gpu) {
  const char *name = get_str(cfg, "name");
  json_t *groups = need_arr(cfg, "instance_group");
  if (groups == NULL) return -1;
  if (json_array_size(groups) == 0) {
    json_t *g = json_object();
    if (g == NULL || json_array_append_new(groups, g) != 0 || set_str(g, "name", name) != 0) return -1;
  }
  const char *backend = get_str(cfg, "backend");
  int two_cpu = strcmp(backend, "tensorflow") == 0 || strcmp(backend, "onnxruntime") == 0;
  for (size_t i = 0; i < json_array_size(groups); i++) {
    json_t *g = json_array_get(groups, i);
    if (!json_is_object(g)) continue;
    if (*get_str(g, "name") == '\0') {
      char *n = fmt_alloc("%s_%zu", name, i);
      if (n == NULL) return -1;
      int rc = set_str(g, "name", n);
      free(n);
      if (rc != 0) return -1;
    }
    const char *kind = get_str(g, "kind");
    if (*kind == '\0' || strcmp(kind, "KIND_AUTO") == 0) {
      /* Without a GPU list every AUTO group lands on the CPU; with GPUs,
       * the listed ids are assumed present. */
      if (set_str(g, "kind", has_gpu ? "KIND_GPU" : "KIND_CPU") != 0) return -1;
    }
    if (get_int(g, "count") < 1) {
      int cpu = strcmp(get_str(g, "kind"), "KIND_CPU") == 0;
      if (json_object_set_new(g, "count", json_integer(cpu && two_cpu ? 2 : 1)) != 0) return -1;
    }
  }
  return 0;
}

int nrd_model_config_normalize(json_t *cfg, const char *model_name, int has_gpu, char **err) {
  char *dummy = NULL;
  if (err == NULL) err = &dummy;
  *err = NULL;
  if (!json_is_object(cfg)) {
    *err = fmt_alloc("model configuration must be a JSON object");
    goto fail;
  }
  const char *name = get_str(cfg, "name");
  /* Triton reports an ensemble without its scheduling before a directory
   * that does not match the name. */
  if (strcmp(get_str(cfg, "platform"), NRD_ENSEMBLE_PLATFORM) == 0 && *get_str(cfg, "backend") == '\0' &&
      get_obj(cfg, "ensemble_scheduling") == NULL) {
    *err = fmt_alloc("ensemble scheduling must be set for ensemble %s whose platform is ensemble", *name ? name
                                                                                                   : model_name
                                                                                                       ? model_name
                                                                                                       : "");
    goto fail;
  }
  if (*name == '\0') {
    if (model_name != NULL && set_str(cfg, "name", model_name) != 0) goto oom;
  } else if (model_name != NULL && strcmp(name, model_name) != 0) {
    *err = fmt_alloc("unexpected directory name '%s' for model '%s', directory name must "
                     "equal model name",
                     model_name, name);
    goto fail;
  }
  if (autofill_backend(cfg, model_name, err) != 0) goto fail;

  if (get_obj(cfg, "version_policy") == NULL) {
    json_t *vp = need_obj(cfg, "version_policy");
    json_t *latest = vp != NULL ? need_obj(vp, "latest") : NULL;
    if (latest == NULL || json_object_set_new(latest, "num_versions", json_integer(1)) != 0) goto oom;
  }
  long long mbs = get_int(cfg, "max_batch_size");
  json_t *db = (json_t *)get_obj(cfg, "dynamic_batching");
  if (default_preferred(db, mbs) != 0) goto oom;
  json_t *sb = (json_t *)get_obj(cfg, "sequence_batching");
  if (sb != NULL) {
    if (get_uint(sb, "max_sequence_idle_microseconds") == 0 &&
        json_object_set_new(sb, "max_sequence_idle_microseconds", json_integer(NRD_SEQUENCE_IDLE_DEFAULT_US)) != 0)
      goto oom;
    if (default_preferred((json_t *)get_obj(sb, "oldest"), mbs) != 0) goto oom;
  }
  if (get_obj(cfg, "ensemble_scheduling") == NULL) {
    json_t *opt = need_obj(cfg, "optimization");
    if (opt == NULL) goto oom;
    const char *pins[2] = {"input_pinned_memory", "output_pinned_memory"};
    for (int i = 0; i < 2; i++) {
      if (get_obj(opt, pins[i]) == NULL) {
        json_t *p = need_obj(opt, pins[i]);
        if (p == NULL || json_object_set_new(p, "enable", json_true()) != 0) goto oom;
      }
    }
    if (normalize_instance_groups(cfg, has_gpu) != 0) goto oom;
  }
  return 0;
oom:
  free(*err);
  *err = fmt_alloc("out of memory while normalizing the model configuration");
fail:
  if (err == &dummy) free(dummy);
  return -1;
}

/* ======================================================================
 * Validation
 * ====================================================================== */

typedef struct vctx {
  const char *file;
  const char *name; /* model name */
  char *err;
  char detail[256]; /* det()'s buffer */
  int early; /* before the backend's auto-complete: see validate_early */
} vctx;

/* Formats our detail (field, value) into v->detail and returns it. */
static const char *det(vctx *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static const char *det(vctx *v, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(v->detail, sizeof v->detail, fmt, ap);
  va_end(ap);
  return v->detail;
}

static int verr(vctx *v, const char *detail, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Records the error: Triton's sentence (`fmt`) whole, then ours in
 * parentheses: the file and `detail` (NULL: none). Returns -1. */
static int verr(vctx *v, const char *detail, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  int has_detail = detail != NULL && *detail != '\0';
  if (v->file != NULL && has_detail)
    v->err = fmt_alloc("%s (%s: %s)", msg, v->file, detail);
  else if (v->file != NULL)
    v->err = fmt_alloc("%s (%s)", msg, v->file);
  else if (has_detail)
    v->err = fmt_alloc("%s (%s)", msg, detail);
  else
    v->err = fmt_alloc("%s", msg);
  return -1;
}

static int backend_type(const char *backend) {
  static const char *const known[] = {"tensorflow", "tensorrt", "onnxruntime", "pytorch"};
  for (int i = 0; i < 4; i++)
    if (strcmp(backend, known[i]) == 0) return i + 1;
  return 0;
}

static int platform_type(const char *platform) {
  if (strcmp(platform, "tensorflow_graphdef") == 0 || strcmp(platform, "tensorflow_savedmodel") == 0) return 1;
  if (strcmp(platform, "tensorrt_plan") == 0) return 2;
  if (strcmp(platform, "onnxruntime_onnx") == 0) return 3;
  if (strcmp(platform, "pytorch_libtorch") == 0) return 4;
  return 0;
}

/* Product of dims (WILDCARD -1 makes the count -1). */
static long long element_count(const json_t *dims) {
  long long n = 1;
  for (size_t i = 0; i < json_array_size(dims); i++) {
    long long d = (long long)json_integer_value(json_array_get(dims, i));
    if (d == -1) return -1;
    if (d != 0 && n > LLONG_MAX / d) return LLONG_MAX;
    n *= d;
  }
  return n;
}

/* Fills counts[] with the element counts of the segments between -1 dims. */
static size_t segment_counts(const json_t *dims, long long *counts, size_t max) {
  size_t n = 0;
  long long cur = 1;
  for (size_t i = 0; i < json_array_size(dims); i++) {
    long long d = (long long)json_integer_value(json_array_get(dims, i));
    if (d == -1) {
      if (n < max) counts[n] = cur;
      n++;
      cur = 1;
    } else {
      cur = (d != 0 && cur > LLONG_MAX / d) ? LLONG_MAX : cur * d;
    }
  }
  if (n < max) counts[n] = cur;
  return n + 1;
}

static int validate_io(vctx *v, const json_t *io, int is_input, long long mbs, const char *platform) {
  const char *kind = is_input ? "input" : "output";
  const char *ioname = get_str(io, "name");
  if (*ioname == '\0') return verr(v, NULL, "model %s must specify 'name' for %s", kind, v->name);
  const char *dt = get_str(io, "data_type");
  if (!v->early && (*dt == '\0' || strcmp(dt, "TYPE_INVALID") == 0))
    return verr(v, NULL, "model %s '%s' must specify 'data_type' for %s", kind, ioname, v->name);
  const json_t *dims = json_object_get(io, "dims");
  if (!v->early && json_array_size(dims) == 0)
    return verr(v, NULL, "model %s '%s' must specify 'dims' for %s", kind, ioname, v->name);
  const json_t *reshape = get_obj(io, "reshape");
  const json_t *shape = reshape != NULL ? json_object_get(reshape, "shape") : NULL;
  if (reshape != NULL && json_array_size(shape) == 0 && mbs == 0)
    return verr(v, NULL,
                "model %s '%s' cannot have empty reshape for non-batching model as "
                "scalar tensors are not supported for %s",
                kind, ioname, v->name);
  for (size_t i = 0; i < json_array_size(dims); i++) {
    long long d = (long long)json_integer_value(json_array_get(dims, i));
    if (d < 1 && d != -1)
      return verr(v, det(v, "field '%s.dims', got %lld", kind, d),
                  "model %s '%s' dimension must be integer >= 1, or -1 to indicate a "
                  "variable-size dimension for %s",
                  kind, ioname, v->name);
  }
  if (reshape != NULL) {
    for (size_t i = 0; i < json_array_size(shape); i++) {
      long long d = (long long)json_integer_value(json_array_get(shape, i));
      if (d < 1 && d != -1)
        return verr(v, det(v, "field '%s.reshape.shape', got %lld", kind, d),
                    "model %s '%s' reshape dimensions must be integer >= 1, or -1 to "
                    "indicate a variable-size dimension for %s",
                    kind, ioname, v->name);
    }
    long long dn = element_count(dims);
    long long rn = json_array_size(shape) == 0 ? 0 : element_count(shape);
    if (dn != rn && (rn != 0 || dn != 1))
      return verr(v, NULL, "model %s '%s' has different size for dims and reshape for %s", kind, ioname, v->name);
    if (dn == -1) {
      long long a[64], b[64];
      size_t na = segment_counts(dims, a, 64), nb = segment_counts(shape, b, 64);
      if (na != nb)
        return verr(v, NULL,
                    "model %s '%s' has different number of variable-size dimensions for "
                    "dims and reshape for %s",
                    kind, ioname, v->name);
      for (size_t i = 0; i < na && i < 64; i++)
        if (a[i] != b[i])
          return verr(v, NULL, "model %s '%s' has different size for dims and reshape for %s", kind, ioname, v->name);
    }
  }
  if (is_input) {
    const char *fmt = get_str(io, "format");
    if ((strcmp(fmt, "FORMAT_NHWC") == 0 || strcmp(fmt, "FORMAT_NCHW") == 0) && json_array_size(dims) != 3)
      return verr(v, det(v, "input '%s', field 'format', %zu dims", ioname, json_array_size(dims)),
                  "model input NHWC/NCHW require 3 dims for %s", v->name);
  }
  int trt = strcmp(platform, "tensorrt_plan") == 0;
  if (!trt && get_bool(io, "is_shape_tensor"))
    return verr(v, det(v, "%s '%s', field 'is_shape_tensor'", kind, ioname),
                "shape tensors are only supported for TensorRT platform for %s", v->name);
  if (get_bool(io, "is_non_linear_format_io")) {
    if (!trt)
      return verr(v, det(v, "%s '%s', field 'is_non_linear_format_io'", kind, ioname),
                  "Non-linear IO format is only supported for the TensorRT platform for %s", v->name);
    if (json_array_size(dims) != 3)
      return verr(v, det(v, "%s '%s', field 'dims'", kind, ioname), "Non-linear IO format %s requires 3 dims for %s",
                  kind, v->name);
  }
  return 0;
}

static int has_name(const json_t *cfg, const char *arr, const char *name) {
  for (size_t i = 0; i < arr_size(cfg, arr); i++)
    if (strcmp(get_str(arr_get(cfg, arr, i), "name"), name) == 0) return 1;
  return 0;
}

static int validate_ios(vctx *v, const json_t *cfg) {
  long long mbs = get_int(cfg, "max_batch_size");
  const char *platform = get_str(cfg, "platform");
  const char *arrs[2] = {"input", "output"};
  for (int k = 0; k < 2; k++) {
    for (size_t i = 0; i < arr_size(cfg, arrs[k]); i++) {
      const json_t *io = arr_get(cfg, arrs[k], i);
      if (validate_io(v, io, k == 0, mbs, platform) != 0) return -1;
      for (size_t j = 0; j < i; j++) {
        if (strcmp(get_str(arr_get(cfg, arrs[k], j), "name"), get_str(io, "name")) == 0)
          return verr(v, det(v, "field '%s[%zu].name'", arrs[k], i), "%s name '%s' is specified more than once for %s",
                      arrs[k], get_str(io, "name"), v->name);
      }
    }
  }
  for (size_t i = 0; i < arr_size(cfg, "batch_input"); i++) {
    const json_t *bi = arr_get(cfg, "batch_input", i);
    size_t ns = arr_size(bi, "source_input");
    const char *kind = get_str(bi, "kind");
    if (*kind == '\0') kind = "BATCH_ELEMENT_COUNT";
    if (ns != 1)
      return verr(v, det(v, "field 'batch_input[%zu].source_input'", i),
                  "batch input kind '%s' expects 1 source input, got %zu for %s", kind, ns, v->name);
    const char *dt = get_str(bi, "data_type");
    if (strcmp(dt, "TYPE_INT32") != 0 && strcmp(dt, "TYPE_FP32") != 0)
      return verr(v, det(v, "field 'batch_input[%zu].data_type', got '%s'", i, dt),
                  "batch input data type must be TYPE_INT32 or TYPE_FP32 for %s", v->name);
    const char *src = json_string_value(arr_get(bi, "source_input", 0));
    if (src == NULL || !has_name(cfg, "input", src))
      return verr(v, det(v, "field 'batch_input[%zu].source_input'", i), "unknown source input name '%s' for %s",
                  src ? src : "", v->name);
  }
  for (size_t i = 0; i < arr_size(cfg, "batch_output"); i++) {
    const json_t *bo = arr_get(cfg, "batch_output", i);
    size_t ns = arr_size(bo, "source_input");
    if (ns != 1)
      return verr(v, det(v, "field 'batch_output[%zu].source_input'", i),
                  "batch output kind 'BATCH_SCATTER_WITH_INPUT_SHAPE' expects 1 source "
                  "input, got %zu for %s",
                  ns, v->name);
    const char *src = json_string_value(arr_get(bo, "source_input", 0));
    if (src == NULL || !has_name(cfg, "input", src))
      return verr(v, det(v, "field 'batch_output[%zu].source_input'", i), "unknown source input name '%s' for %s",
                  src ? src : "", v->name);
    for (size_t t = 0; t < arr_size(bo, "target_name"); t++) {
      const char *tn = json_string_value(arr_get(bo, "target_name", t));
      if (tn == NULL || !has_name(cfg, "output", tn))
        return verr(v, det(v, "field 'batch_output[%zu].target_name'", i), "unknown target output name '%s' for %s",
                    tn ? tn : "", v->name);
      for (size_t u = 0; u < t; u++)
        if (strcmp(tn, json_string_value(arr_get(bo, "target_name", u))) == 0)
          return verr(v, det(v, "field 'batch_output[%zu].target_name'", i),
                      "target output name '%s' can only be specified once for %s", tn, v->name);
    }
  }
  return 0;
}

/* Checks one sequence-batching control kind (Triton's boolean controls need
 * exactly one of the *_false_true lists with 2 entries; CORRID needs none). */
static int validate_control(vctx *v, const json_t *sb, const char *kind, int typed) {
  int seen = 0;
  size_t nci = arr_size(sb, "control_input");
  for (size_t i = 0; i < nci; i++) {
    const json_t *ci = arr_get(sb, "control_input", i);
    const char *cname = get_str(ci, "name");
    if (*cname == '\0')
      return verr(v, det(v, "field 'sequence_batching.control_input[%zu].name'", i),
                  "sequence batching control tensor must have a name for %s", v->name);
    for (size_t j = 0; j < i; j++)
      if (strcmp(get_str(arr_get(sb, "control_input", j), "name"), cname) == 0)
        return verr(v, NULL,
                    "sequence batching control tensor '%s' is specified for multiple "
                    "control kinds for %s",
                    cname, v->name);
    for (size_t c = 0; c < arr_size(ci, "control"); c++) {
      const json_t *ctl = arr_get(ci, "control", c);
      const char *ck = get_str(ctl, "kind");
      if (*ck == '\0') ck = "CONTROL_SEQUENCE_START";
      if (strcmp(ck, kind) != 0) continue;
      if (seen) return verr(v, NULL, "sequence batching specifies multiple %s tensors for %s", kind, v->name);
      seen = 1;
      size_t ni = arr_size(ctl, "int32_false_true"), nf = arr_size(ctl, "fp32_false_true"),
             nb = arr_size(ctl, "bool_false_true");
      if (typed) {
        if (ni || nf || nb)
          return verr(v, NULL,
                      "sequence batching must not specify either 'int32_false_true', "
                      "'fp32_false_true' or 'bool_false_true' for %s for %s",
                      kind, v->name);
        const char *dt = get_str(ctl, "data_type");
        if (strcmp(dt, "TYPE_UINT64") != 0 && strcmp(dt, "TYPE_INT64") != 0 && strcmp(dt, "TYPE_UINT32") != 0 &&
            strcmp(dt, "TYPE_INT32") != 0 && strcmp(dt, "TYPE_STRING") != 0)
          return verr(v, NULL,
                      "unexpected data type for control %s for %s. Allowed data types are "
                      "TYPE_UINT64, TYPE_INT64, TYPE_UINT32, TYPE_INT32 and TYPE_STRING",
                      kind, v->name);
        continue;
      }
      int lists = (ni != 0) + (nf != 0) + (nb != 0);
      if (lists == 0)
        return verr(v, NULL,
                    "sequence batching must specify either 'int32_false_true', "
                    "'fp32_false_true' or 'bool_false_true' for %s for %s",
                    kind, v->name);
      if (lists > 1)
        return verr(v, NULL,
                    "sequence batching specifies more than one from 'int32_false_true', "
                    "'fp32_false_true' and 'bool_false_true' for %s for %s",
                    kind, v->name);
      const char *which = ni ? "int32_false_true" : nf ? "fp32_false_true" : "bool_false_true";
      if ((ni ? ni : nf ? nf : nb) != 2)
        return verr(v, NULL,
                    "sequence batching control '%s' must have exactly 2 entries for %s "
                    "for %s",
                    which, kind, v->name);
    }
  }
  return 0;
}

static int validate_sequence(vctx *v, const json_t *cfg, const json_t *sb) {
  const json_t *rc = get_obj(cfg, "response_cache");
  if (rc != NULL && get_bool(rc, "enable"))
    return verr(v, NULL,
                "Response Cache does not currently support model %s with sequence "
                "batching scheduler. Please disable the response cache.",
                v->name);
  if (validate_control(v, sb, "CONTROL_SEQUENCE_START", 0) != 0 ||
      validate_control(v, sb, "CONTROL_SEQUENCE_END", 0) != 0 ||
      validate_control(v, sb, "CONTROL_SEQUENCE_READY", 0) != 0 ||
      validate_control(v, sb, "CONTROL_SEQUENCE_CORRID", 1) != 0)
    return -1;
  long long mbs = get_int(cfg, "max_batch_size");
  const json_t *oldest = get_obj(sb, "oldest");
  for (size_t i = 0; oldest != NULL && i < arr_size(oldest, "preferred_batch_size"); i++) {
    long long s = (long long)json_integer_value(arr_get(oldest, "preferred_batch_size", i));
    if (s <= 0)
      return verr(v, det(v, "field 'sequence_batching.oldest.preferred_batch_size', got %lld", s),
                  "sequence batching preferred batch size must be positive for %s", v->name);
    if (s > mbs && !(v->early && mbs == 0))
      return verr(
          v, det(v, "field 'sequence_batching.oldest.preferred_batch_size', got %lld, max_batch_size %lld", s, mbs),
          "sequence batching preferred batch size must be <= max batch size for %s", v->name);
  }
  const json_t *direct = get_obj(sb, "direct");
  if (direct != NULL) {
    double u = get_real(direct, "minimum_slot_utilization");
    if (u < 0.0 || u > 1.0)
      return verr(v, det(v, "field 'sequence_batching.direct.minimum_slot_utilization', got %g", u),
                  "sequence batching minimum slot utilization must be in range (0.0, 1.0] for %s", v->name);
  }
  return 0;
}

static int validate_dynamic(vctx *v, const json_t *cfg, const json_t *db) {
  long long mbs = get_int(cfg, "max_batch_size");
  for (size_t i = 0; i < arr_size(db, "preferred_batch_size"); i++) {
    long long s = (long long)json_integer_value(arr_get(db, "preferred_batch_size", i));
    if (s <= 0)
      return verr(v, det(v, "field 'dynamic_batching.preferred_batch_size', got %lld", s),
                  "dynamic batching preferred size must be positive for %s", v->name);
    if (s > mbs && !(v->early && mbs == 0))
      return verr(v, det(v, "field 'dynamic_batching.preferred_batch_size', got %lld, max_batch_size %lld", s, mbs),
                  "dynamic batching preferred size must be <= max batch size for %s", v->name);
  }
  uint64_t levels = get_uint(db, "priority_levels");
  const json_t *pqp = get_obj(db, "priority_queue_policy");
  if (levels != 0) {
    uint64_t def = get_uint(db, "default_priority_level");
    if (def == 0 || def > levels)
      return verr(v, det(v, "field 'dynamic_batching.default_priority_level', got %llu", (unsigned long long)def),
                  "default priority level must be in range [1, %llu] for %s", (unsigned long long)levels, v->name);
    const char *k;
    json_t *pol;
    json_object_foreach((json_t *)pqp, k, pol) {
      uint64_t lvl = strtoull(k, NULL, 10);
      if (lvl == 0 || lvl > levels)
        return verr(v, det(v, "field 'dynamic_batching.priority_queue_policy', key %s", k),
                    "priority queue policy must have priority level in range [1, %llu] for %s",
                    (unsigned long long)levels, v->name);
    }
  }
  if (get_bool(db, "preserve_ordering")) {
    if (levels > 1)
      return verr(v, NULL,
                  "Only one priority level is allowed when 'preserve_ordering' is true "
                  "for %s",
                  v->name);
    const json_t *dq = get_obj(db, "default_queue_policy");
    if (dq != NULL && get_uint(dq, "default_timeout_microseconds") != 0 &&
        strcmp(get_str(dq, "timeout_action"), "DELAY") == 0)
      return verr(v, NULL,
                  "Queue policy can not have DELAY as timeout action when "
                  "'preserve_ordering' is true for %s",
                  v->name);
    const char *k;
    json_t *pol;
    json_object_foreach((json_t *)pqp, k, pol) {
      if (get_uint(pol, "default_timeout_microseconds") != 0 && strcmp(get_str(pol, "timeout_action"), "DELAY") == 0)
        return verr(v, NULL,
                    "Queue policy can not have DELAY as timeout action when "
                    "'preserve_ordering' is true for %s",
                    v->name);
    }
  }
  return 0;
}

/* ---- ensemble data flow ---- */

typedef struct tensor_node {
  const char *name;
  int is_output; /* produced by some step */
  int ready;
  int consumed; /* feeds some step */
  int seen; /* visited by not_connected */
} tensor_node;

static tensor_node *tensor_find(tensor_node *t, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(t[i].name, name) == 0) return &t[i];
  return NULL;
}

/* The step of `es` whose output_map writes tensor `name`, or NULL. */
static const json_t *producer_of(const json_t *es, const char *name) {
  for (size_t s = 0; s < arr_size(es, "step"); s++) {
    const char *k;
    json_t *val;
    json_object_foreach(json_object_get(arr_get(es, "step", s), "output_map"), k, val) {
      if (json_string_value(val) && strcmp(json_string_value(val), name) == 0) return arr_get(es, "step", s);
    }
  }
  return NULL;
}

/* For an output that is not written: follows, from it, the first input not
 * ready of the step that writes each tensor (each tensor once, as cycles
 * may exist) and returns the last one reached, or NULL when that is the
 * output itself (Triton's "depending tensor ... is not connected"). */
static const char *not_connected(const json_t *es, tensor_node *t, size_t n, const char *output) {
  const char *cur = output, *last = NULL;
  for (;;) {
    const json_t *st = producer_of(es, cur);
    const char *next = NULL;
    const char *k;
    json_t *val;
    json_object_foreach(json_object_get(st, "input_map"), k, val) {
      tensor_node *node = tensor_find(t, n, json_string_value(val) ? json_string_value(val) : "");
      if (node != NULL && !node->ready && !node->seen) {
        node->seen = 1;
        next = node->name;
        break;
      }
    }
    if (next == NULL) break;
    last = next;
    cur = next;
  }
  return last != NULL && strcmp(last, output) != 0 ? last : NULL;
}

static int validate_ensemble(vctx *v, const json_t *cfg) {
  const json_t *es = get_obj(cfg, "ensemble_scheduling");
  if (strcmp(get_str(cfg, "platform"), NRD_ENSEMBLE_PLATFORM) != 0)
    return verr(v, NULL,
                "ensemble scheduling cannot be set for model '%s' whose platform is not "
                "ensemble",
                v->name);
  if (arr_size(cfg, "instance_group") != 0)
    return verr(v, NULL, "instance group should not be specified for ensemble '%s'", v->name);
  if (get_obj(cfg, "optimization") != NULL)
    return verr(v, NULL, "optimization should not be specified for ensemble '%s'", v->name);
  if (arr_size(cfg, "model_warmup") != 0)
    return verr(v, NULL, "model_warmup can not be specified for ensemble '%s'", v->name);
  size_t nsteps = arr_size(es, "step");
  if (nsteps == 0) return verr(v, NULL, "must specify 'step' for ensemble '%s'", v->name);

  size_t cap = 0;
  for (size_t s = 0; s < nsteps; s++) {
    const json_t *st = arr_get(es, "step", s);
    cap += map_size(st, "input_map") + map_size(st, "output_map");
  }
  cap += arr_size(cfg, "input") + arr_size(cfg, "output");
  tensor_node *t = calloc(cap ? cap : 1, sizeof *t);
  if (t == NULL) return verr(v, NULL, "out of memory");
  size_t n = 0;
  int rc = -1;
  const char *k;
  json_t *val;
  for (size_t s = 0; s < nsteps; s++) {
    const json_t *st = arr_get(es, "step", s);
    if (*get_str(st, "model_name") == '\0') {
      verr(v, NULL, "must specify 'model_name' in step %zu of ensemble '%s'", s, v->name);
      goto out;
    }
    if (map_size(st, "input_map") == 0) {
      verr(v, NULL, "must specify 'input_map' in step %zu of ensemble '%s'", s, v->name);
      goto out;
    }
    if (map_size(st, "output_map") == 0) {
      verr(v, NULL, "must specify 'output_map' in step %zu of ensemble '%s'", s, v->name);
      goto out;
    }
    json_object_foreach(json_object_get(st, "output_map"), k, val) {
      const char *tn = json_string_value(val) ? json_string_value(val) : "";
      tensor_node *node = tensor_find(t, n, tn);
      if (node != NULL && node->is_output) {
        verr(v, NULL,
             "ensemble tensor '%s' can appear in an output map only once for ensemble "
             "'%s' step %zu",
             tn, v->name, s);
        goto out;
      }
      if (node == NULL) {
        node = &t[n++];
        node->name = tn;
      }
      node->is_output = 1;
    }
    json_object_foreach(json_object_get(st, "input_map"), k, val) {
      const char *tn = json_string_value(val) ? json_string_value(val) : "";
      tensor_node *node = tensor_find(t, n, tn);
      if (node == NULL) {
        node = &t[n++];
        node->name = tn;
      }
      node->consumed = 1;
    }
  }
  for (size_t i = 0; i < arr_size(cfg, "input"); i++) {
    const char *in = get_str(arr_get(cfg, "input", i), "name");
    tensor_node *node = tensor_find(t, n, in);
    if (node == NULL) {
      verr(v, NULL, "ensemble input '%s' for ensemble %s' is not used", in, v->name);
      goto out;
    }
    node->ready = 1;
  }
  /* Fixed point: a step's outputs become ready once all its inputs are. */
  for (int changed = 1; changed;) {
    changed = 0;
    for (size_t s = 0; s < nsteps; s++) {
      const json_t *st = arr_get(es, "step", s);
      int all = 1;
      json_object_foreach(json_object_get(st, "input_map"), k, val) {
        tensor_node *node = tensor_find(t, n, json_string_value(val) ? json_string_value(val) : "");
        if (node == NULL || !node->ready) all = 0;
      }
      if (!all) continue;
      json_object_foreach(json_object_get(st, "output_map"), k, val) {
        tensor_node *node = tensor_find(t, n, json_string_value(val) ? json_string_value(val) : "");
        if (node != NULL && !node->ready) {
          node->ready = 1;
          changed = 1;
        }
      }
    }
  }
  for (size_t i = 0; i < arr_size(cfg, "output"); i++) {
    const char *on = get_str(arr_get(cfg, "output", i), "name");
    tensor_node *node = tensor_find(t, n, on);
    if (node == NULL) {
      verr(v, NULL, "ensemble output '%s' for ensemble %s' is not used", on, v->name);
      goto out;
    }
    if (!node->ready) {
      const char *dep = not_connected(es, t, n, on);
      if (dep != NULL)
        verr(v, det(v, "field 'ensemble_scheduling.step'"),
             "output '%s' for ensemble '%s' is not written: at least one "
             "of its depending tensors, '%s', is not connected",
             on, v->name, dep);
      else
        verr(v, det(v, "field 'ensemble_scheduling.step'"), "output '%s' for ensemble '%s' is not written", on,
             v->name);
      goto out;
    }
  }
  for (size_t i = 0; i < n; i++) {
    if (has_name(cfg, "output", t[i].name)) continue;
    if (!t[i].ready || !t[i].consumed) {
      verr(v, NULL, "ensemble tensor '%s' is unused in ensemble '%s'", t[i].name, v->name);
      goto out;
    }
  }
  rc = 0;
out:
  free(t);
  return rc;
}

static int validate_instance_groups(vctx *v, const json_t *cfg, int has_gpu) {
  size_t ng = arr_size(cfg, "instance_group");
  if (ng == 0) return verr(v, NULL, "must specify one or more 'instance group's for %s", v->name);
  const char *platform = get_str(cfg, "platform");
  for (size_t i = 0; i < ng; i++) {
    const json_t *g = arr_get(cfg, "instance_group", i);
    const char *gname = get_str(g, "name");
    const char *kind = get_str(g, "kind");
    if (*kind == '\0') kind = "KIND_AUTO";
    size_t ngpus = arr_size(g, "gpus");
    if (strcmp(kind, "KIND_MODEL") == 0) {
      if (ngpus > 0)
        return verr(v, det(v, "field 'instance_group[%zu].gpus'", i),
                    "instance group %s of model %s has kind KIND_MODEL but specifies one "
                    "or more GPUs",
                    gname, v->name);
    } else if (strcmp(kind, "KIND_GPU") == 0) {
      if (!has_gpu)
        return verr(v, det(v, "field 'instance_group[%zu].kind'", i),
                    "instance group %s of model %s has kind KIND_GPU but server does not "
                    "support GPUs",
                    gname, v->name);
    } else if (strcmp(kind, "KIND_CPU") == 0) {
      if (ngpus > 0)
        return verr(v, det(v, "field 'instance_group[%zu].gpus'", i),
                    "instance group %s of model %s has kind KIND_CPU but specifies one or "
                    "more GPUs",
                    gname, v->name);
    } else {
      return verr(v, det(v, "field 'instance_group[%zu].kind'; normalize the configuration first", i),
                  "instance group %s of model %s has unexpected kind KIND_AUTO", gname, v->name);
    }
    if (get_int(g, "count") < 1)
      return verr(v, det(v, "field 'instance_group[%zu].count', got %lld", i, (long long)get_int(g, "count")),
                  "instance group %s of model %s must have 'count' >= 1", gname, v->name);
    size_t np = arr_size(g, "profile");
    if (np > 0 && strcmp(platform, "tensorrt_plan") != 0)
      return verr(v, NULL,
                  "instance group %s of model %s and platform %s specifies profile field "
                  "which is only supported for TensorRT models",
                  gname, v->name, platform);
    for (size_t p = 0; p < np; p++) {
      const char *prof = json_string_value(arr_get(g, "profile", p));
      char *end = NULL;
      long pv = prof != NULL ? strtol(prof, &end, 10) : -1;
      if (prof == NULL || *prof == '\0' || end == prof || pv < 0)
        return verr(v, NULL,
                    "instance group %s of model %s and platform %s specifies invalid "
                    "profile %s. The field should contain the string representation of a "
                    "non-negative integer.",
                    gname, v->name, platform, prof ? prof : "");
    }
  }
  return 0;
}

static int validate_metrics(vctx *v, const json_t *mm) {
  for (size_t i = 0; i < arr_size(mm, "metric_control"); i++) {
    const json_t *mc = arr_get(mm, "metric_control", i);
    const json_t *id = get_obj(mc, "metric_identifier");
    if (id == NULL) return verr(v, NULL, "metric control must specify 'metric_identifier'");
    if (*get_str(id, "family") == '\0') return verr(v, NULL, "metric identifier must specify non-empty 'family'");
    const json_t *h = get_obj(mc, "histogram_options");
    if (h == NULL) return verr(v, NULL, "metric control must specify 'histogram_options'");
    if (arr_size(h, "buckets") == 0) return verr(v, NULL, "histogram options must specify non-empty 'buckets'");
  }
  return 0;
}

static int validate_all(vctx *v, const json_t *cfg, int has_gpu) {
  if (*v->name == '\0') return verr(v, NULL, "model configuration must specify 'name'");
  const char *platform = get_str(cfg, "platform");
  const char *backend = get_str(cfg, "backend");
  int is_ensemble_platform = strcmp(platform, NRD_ENSEMBLE_PLATFORM) == 0;
  if (*backend == '\0') {
    if (!is_ensemble_platform)
      return verr(v, "field 'backend' is empty", "unexpected platform type '%s' for %s", platform, v->name);
  } else if (is_ensemble_platform) {
    return verr(v, NULL, "Ensemble model '%s' must have platform type '%s' and empty backend type", v->name, platform);
  }
  int bt = backend_type(backend);
  if (bt != 0 && bt != platform_type(platform))
    return verr(v, NULL, "unexpected 'platform' and 'backend' pair, got:%s, %s", platform, backend);
  if (get_int(cfg, "max_batch_size") < 0)
    return verr(v, det(v, "field 'max_batch_size', got %lld", (long long)get_int(cfg, "max_batch_size")),
                "'max_batch_size' must be non-negative value for %s", v->name);
  if (get_obj(cfg, "version_policy") == NULL) return verr(v, NULL, "must specify 'version policy' for %s", v->name);
  const json_t *db = get_obj(cfg, "dynamic_batching");
  if (db != NULL && validate_dynamic(v, cfg, db) != 0) return -1;
  const json_t *sb = get_obj(cfg, "sequence_batching");
  if (sb != NULL && validate_sequence(v, cfg, sb) != 0) return -1;
  if (get_obj(cfg, "ensemble_scheduling") != NULL) {
    if (validate_ensemble(v, cfg) != 0) return -1;
  } else if (is_ensemble_platform) {
    return verr(v, NULL, "ensemble scheduling must be set for ensemble %s whose platform is ensemble", v->name);
  }
  const json_t *tp = get_obj(cfg, "model_transaction_policy");
  const json_t *rc = get_obj(cfg, "response_cache");
  if (tp != NULL && get_bool(tp, "decoupled") && rc != NULL && get_bool(rc, "enable"))
    return verr(v, NULL,
                "Response Cache does not currently support model %s with 'decoupled' "
                "transaction policy. Please disable the response cache.",
                v->name);
  const json_t *mm = get_obj(cfg, "model_metrics");
  if (mm != NULL && validate_metrics(v, mm) != 0) return -1;
  if (get_obj(cfg, "ensemble_scheduling") == NULL && validate_instance_groups(v, cfg, has_gpu) != 0) return -1;
  return validate_ios(v, cfg);
}

static int validate(const json_t *cfg, const char *filename, int has_gpu, int early, char **err) {
  vctx v = {.file = filename, .name = "", .early = early};
  if (!json_is_object(cfg)) {
    verr(&v, NULL, "model configuration must be a JSON object");
  } else {
    v.name = get_str(cfg, "name");
    if (validate_all(&v, cfg, has_gpu) == 0) return 0;
  }
  if (v.err == NULL) v.err = fmt_alloc("out of memory");
  if (err != NULL) {
    *err = v.err;
  } else {
    free(v.err);
  }
  return -1;
}

int nrd_model_config_validate(const json_t *cfg, const char *filename, int has_gpu, char **err) {
  return validate(cfg, filename, has_gpu, 0, err);
}

int nrd_model_config_validate_early(const json_t *cfg, const char *filename, int has_gpu, char **err) {
  return validate(cfg, filename, has_gpu, 1, err);
}
