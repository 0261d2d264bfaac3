/* Model configuration: rendering the JSON TRITONBACKEND_ModelConfig
 * returns, the way Triton's ModelConfigToJson (version 1) does. */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_config.h"
#include "model_config_schema.h"

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
