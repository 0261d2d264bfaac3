/* Protobuf text-format reader: a one-token-lookahead lexer and a
 * recursive-descent parser whose recursion depth is bounded by the schema's
 * nesting (lists never nest), so hostile input cannot exhaust the stack. */
#include "pbtxt.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum tok_kind { T_EOF, T_IDENT, T_NUMBER, T_STRING, T_SYMBOL } tok_kind;

typedef struct token {
  tok_kind kind;
  const char *start;
  size_t len;
  int line, col;
} token;

typedef struct parser {
  const char *p, *end;
  int line, col;
  const char *file;
  token tok; /* current lookahead */
  int have_tok;
  char *err; /* first error wins */
  /* Positions (nrd_pbtxt_parse_pos): path of the field being read, and
   * the table path -> position; pos is NULL when not wanted. */
  json_t *pos;
  int pos_failed; /* out of memory while recording: the table is dropped */
  char path[512];
  size_t plen; /* NO_PATH: too long to record */
} parser;

#define NO_PATH ((size_t)-1)

static void fail_at(parser *P, int line, int col, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void fail_at(parser *P, int line, int col, const char *fmt, ...) {
  if (P->err != NULL) return;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  size_t n = strlen(P->file) + strlen(msg) + 48;
  P->err = malloc(n);
  if (P->err != NULL) snprintf(P->err, n, "%s:%d:%d: %s", P->file, line, col, msg);
}

/* ---- positions ---- */

/* Appends a component to the current path; returns what path_pop needs. */
static size_t path_push(parser *P, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static size_t path_push(parser *P, const char *fmt, ...) {
  size_t old = P->plen;
  if (P->pos == NULL || old == NO_PATH) return old;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(P->path + old, sizeof P->path - old, fmt, ap);
  va_end(ap);
  P->plen = n < 0 || (size_t)n >= sizeof P->path - old ? NO_PATH : old + (size_t)n;
  return old;
}

static void path_pop(parser *P, size_t old) {
  P->plen = old;
  if (old != NO_PATH) P->path[old] = '\0';
}

/* Records (line, col) for the current path unless it has one already. */
static void pos_note(parser *P, int line, int col) {
  if (P->pos == NULL || P->plen == NO_PATH || json_object_get(P->pos, P->path) != NULL) return;
  json_t *v = json_integer(((json_int_t)line << 32) | (json_int_t)(uint32_t)col);
  if (json_object_set_new(P->pos, P->path, v) != 0) P->pos_failed = 1;
}

/* Map entries: the key is known only at the end, so the value's fields
 * are recorded in a table of their own under a stand-in name, then moved
 * to `outer` under the key (one entry's records each time, so many
 * entries cost linear time). */
static json_t *pos_entry_begin(parser *P) {
  json_t *outer = P->pos;
  if (outer != NULL) {
    P->pos = json_object();
    if (P->pos == NULL) {
      P->pos_failed = 1;
      P->pos = outer;
      return NULL; /* record in place: the stand-in entries are dropped below */
    }
  }
  return outer;
}

/* Moves what was recorded under the stand-in prefix `from` to `to` in
 * `outer` (replacing what is there: a later entry with the same key wins),
 * or drops it when to == NULL, and makes `outer` current again. */
static void pos_entry_end(parser *P, json_t *outer, const char *from, const char *to) {
  if (outer == NULL) {
    if (P->pos == NULL) return;
    /* No table of its own (out of memory): drop what the entry left. */
    const char *k;
    void *tmp;
    json_t *v;
    json_object_foreach_safe(P->pos, tmp, k, v) if (strchr(k, '\x01') != NULL) json_object_del(P->pos, k);
    return;
  }
  json_t *inner = P->pos;
  P->pos = outer;
  size_t nfrom = from != NULL ? strlen(from) : 0;
  const char *k;
  json_t *v;
  json_object_foreach(inner, k, v) {
    if (to == NULL || from == NULL || strncmp(k, from, nfrom) != 0) continue;
    size_t n = strlen(to) + strlen(k + nfrom) + 1;
    char *nk = malloc(n);
    if (nk == NULL || (snprintf(nk, n, "%s%s", to, k + nfrom), json_object_set(outer, nk, v)) != 0) P->pos_failed = 1;
    free(nk);
  }
  json_decref(inner);
}

int nrd_pbtxt_position(const json_t *pos, const char *path, int *line, int *col) {
  const json_t *v = json_object_get(pos, path);
  if (!json_is_integer(v)) return 0;
  json_int_t x = json_integer_value(v);
  *line = (int)(x >> 32);
  *col = (int)(uint32_t)(x & 0xffffffff);
  return 1;
}

/* ---- lexer ---- */

static void advance_char(parser *P) {
  if (*P->p == '\n') {
    P->line++;
    P->col = 1;
  } else {
    P->col++;
  }
  P->p++;
}

static int is_ident_start(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static int is_digit(int c) { return c >= '0' && c <= '9'; }
static int is_ident_char(int c) { return is_ident_start(c) || is_digit(c); }

static void skip_space(parser *P) {
  while (P->p < P->end) {
    char c = *P->p;
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f') {
      advance_char(P);
    } else if (c == '#') {
      while (P->p < P->end && *P->p != '\n') advance_char(P);
    } else {
      break;
    }
  }
}

/* Scans the next token into P->tok. Returns 0 or -1 on a lexical error. */
static int lex(parser *P) {
  skip_space(P);
  token *t = &P->tok;
  t->start = P->p;
  t->line = P->line;
  t->col = P->col;
  t->len = 0;
  if (P->p >= P->end) {
    t->kind = T_EOF;
    return 0;
  }
  unsigned char c = (unsigned char)*P->p;
  if (is_ident_start(c)) {
    t->kind = T_IDENT;
    while (P->p < P->end && is_ident_char((unsigned char)*P->p)) advance_char(P);
  } else if (is_digit(c) || (c == '.' && P->p + 1 < P->end && is_digit((unsigned char)P->p[1]))) {
    t->kind = T_NUMBER;
    char prev = 0;
    while (P->p < P->end) {
      char d = *P->p;
      int exp_sign = (d == '+' || d == '-') && (prev == 'e' || prev == 'E') &&
                     !(t->start[0] == '0' && P->p - t->start > 1 && (t->start[1] == 'x' || t->start[1] == 'X'));
      if (!is_ident_char((unsigned char)d) && d != '.' && !exp_sign) break;
      prev = d;
      advance_char(P);
    }
  } else if (c == '"' || c == '\'') {
    t->kind = T_STRING;
    advance_char(P);
    for (;;) {
      if (P->p >= P->end || *P->p == '\n') {
        fail_at(P, t->line, t->col, "unterminated string literal");
        return -1;
      }
      if (*P->p == '\\') {
        advance_char(P);
        if (P->p >= P->end || *P->p == '\n') {
          fail_at(P, t->line, t->col, "unterminated string literal");
          return -1;
        }
        advance_char(P);
        continue;
      }
      if ((unsigned char)*P->p == c) {
        advance_char(P);
        break;
      }
      advance_char(P);
    }
  } else if (c == '{' || c == '}' || c == '<' || c == '>' || c == '[' || c == ']' || c == ':' || c == ',' || c == ';' ||
             c == '-' || c == '/' || c == '.' || c == '(' || c == ')' || c == '=') {
    t->kind = T_SYMBOL;
    advance_char(P);
  } else {
    if (c >= 0x20 && c < 0x7f) {
      fail_at(P, t->line, t->col, "unexpected character '%c'", c);
    } else {
      fail_at(P, t->line, t->col, "unexpected byte 0x%02x", c);
    }
    return -1;
  }
  t->len = (size_t)(P->p - t->start);
  return 0;
}

static token *peek(parser *P) {
  if (!P->have_tok) {
    if (lex(P) != 0) return NULL;
    P->have_tok = 1;
  }
  return &P->tok;
}

static void consume(parser *P) { P->have_tok = 0; }

static int tok_is_sym(const token *t, char c) { return t->kind == T_SYMBOL && t->start[0] == c; }

static int tok_equals(const token *t, const char *s) { return t->len == strlen(s) && memcmp(t->start, s, t->len) == 0; }

static const char *describe(const token *t, char *buf, size_t n) {
  if (t->kind == T_EOF) return "end of input";
  size_t len = t->len > 40 ? 40 : t->len;
  snprintf(buf, n, "'%.*s'%s", (int)len, t->start, t->len > 40 ? "..." : "");
  return buf;
}

/* Consumes symbol c or reports "expected c". Returns 0 or -1. */
static int expect_sym(parser *P, char c, const char *what) {
  token *t = peek(P);
  if (t == NULL) return -1;
  if (!tok_is_sym(t, c)) {
    char b[64];
    fail_at(P, t->line, t->col, "expected '%c' %s, got %s", c, what, describe(t, b, sizeof b));
    return -1;
  }
  consume(P);
  return 0;
}

/* ---- strings ---- */

int nrd_pbtxt_utf8_valid(const char *s, size_t len) {
  const unsigned char *u = (const unsigned char *)s;
  size_t i = 0;
  while (i < len) {
    unsigned c = u[i];
    size_t n;
    uint32_t cp;
    if (c < 0x80) {
      i++;
      continue;
    } else if (c >= 0xc2 && c <= 0xdf) {
      n = 1;
      cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
      n = 2;
      cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      n = 3;
      cp = c & 0x07;
    } else {
      return 0;
    }
    for (size_t k = 1; k <= n; k++) {
      if (i + k >= len || (u[i + k] & 0xc0) != 0x80) return 0;
      cp = (cp << 6) | (u[i + k] & 0x3f);
    }
    if ((n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    i += n + 1;
  }
  return 1;
}

static int hex_val(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

typedef struct buf {
  char *data;
  size_t len, cap;
} buf;

static int buf_put(buf *b, char c) {
  if (b->len + 1 >= b->cap) {
    size_t ncap = b->cap ? b->cap * 2 : 64;
    char *nd = realloc(b->data, ncap);
    if (nd == NULL) return -1;
    b->data = nd;
    b->cap = ncap;
  }
  b->data[b->len++] = c;
  return 0;
}

/* Appends the UTF-8 encoding of cp. */
static int buf_put_utf8(buf *b, uint32_t cp) {
  char o[4];
  int n;
  if (cp < 0x80) {
    o[0] = (char)cp;
    n = 1;
  } else if (cp < 0x800) {
    o[0] = (char)(0xc0 | (cp >> 6));
    o[1] = (char)(0x80 | (cp & 0x3f));
    n = 2;
  } else if (cp < 0x10000) {
    o[0] = (char)(0xe0 | (cp >> 12));
    o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
    o[2] = (char)(0x80 | (cp & 0x3f));
    n = 3;
  } else {
    o[0] = (char)(0xf0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    o[3] = (char)(0x80 | (cp & 0x3f));
    n = 4;
  }
  for (int i = 0; i < n; i++)
    if (buf_put(b, o[i]) != 0) return -1;
  return 0;
}

/* Decodes the escapes of string token t (quotes included) onto b. */
static int decode_string(parser *P, const token *t, buf *b) {
  const char *s = t->start + 1, *e = t->start + t->len - 1;
  int col = t->col + 1;
  while (s < e) {
    char c = *s;
    if (c != '\\') {
      if (buf_put(b, c) != 0) goto oom;
      s++;
      col++;
      continue;
    }
    int esc_col = col;
    s++;
    col++;
    c = *s++;
    col++;
    switch (c) {
      case 'n': c = '\n'; break;
      case 't': c = '\t'; break;
      case 'r': c = '\r'; break;
      case 'a': c = '\a'; break;
      case 'b': c = '\b'; break;
      case 'f': c = '\f'; break;
      case 'v': c = '\v'; break;
      case '\\':
      case '\'':
      case '"':
      case '?': break;
      case 'x':
      case 'X': {
        int v = 0, n = 0;
        while (n < 2 && s < e && hex_val((unsigned char)*s) >= 0) {
          v = v * 16 + hex_val((unsigned char)*s);
          s++;
          col++;
          n++;
        }
        if (n == 0) {
          fail_at(P, t->line, esc_col, "invalid \\x escape: expected hex digit");
          return -1;
        }
        c = (char)v;
        break;
      }
      case 'u':
      case 'U': {
        int want = c == 'u' ? 4 : 8;
        uint32_t cp = 0;
        for (int k = 0; k < want; k++) {
          if (s >= e || hex_val((unsigned char)*s) < 0) {
            fail_at(P, t->line, esc_col, "invalid \\%c escape: expected %d hex digits", c, want);
            return -1;
          }
          cp = cp * 16 + (uint32_t)hex_val((unsigned char)*s);
          s++;
          col++;
        }
        if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
          fail_at(P, t->line, esc_col, "invalid unicode escape (code point 0x%x)", (unsigned)cp);
          return -1;
        }
        if (buf_put_utf8(b, cp) != 0) goto oom;
        continue;
      }
      default:
        if (c >= '0' && c <= '7') {
          int v = c - '0', n = 1;
          while (n < 3 && s < e && *s >= '0' && *s <= '7') {
            v = v * 8 + (*s - '0');
            s++;
            col++;
            n++;
          }
          if (v > 255) {
            fail_at(P, t->line, esc_col, "octal escape out of range");
            return -1;
          }
          c = (char)v;
          break;
        }
        if ((unsigned char)c >= 0x20 && (unsigned char)c < 0x7f) {
          fail_at(P, t->line, esc_col, "invalid escape sequence '\\%c'", c);
        } else {
          fail_at(P, t->line, esc_col, "invalid escape sequence");
        }
        return -1;
    }
    if (buf_put(b, c) != 0) goto oom;
  }
  return 0;
oom:
  fail_at(P, t->line, t->col, "out of memory");
  return -1;
}

/* Reads one or more adjacent string literals (they concatenate). */
static json_t *parse_string_value(parser *P, const char *field) {
  token *t = peek(P);
  if (t == NULL) return NULL;
  if (t->kind != T_STRING) {
    char b[64];
    fail_at(P, t->line, t->col, "expected a string for field '%s', got %s", field, describe(t, b, sizeof b));
    return NULL;
  }
  int line = t->line, col = t->col;
  buf b = {0};
  while (t != NULL && t->kind == T_STRING) {
    if (decode_string(P, t, &b) != 0) goto fail;
    consume(P);
    t = peek(P);
  }
  if (t == NULL) goto fail;
  if (memchr(b.data ? b.data : "", '\0', b.len) != NULL) {
    /* Protobuf strings may hold NUL, jansson strings may not round-trip it
     * through every consumer; reject it with a clear message. */
    fail_at(P, line, col, "string for field '%s' contains a NUL byte", field);
    goto fail;
  }
  if (!nrd_pbtxt_utf8_valid(b.data ? b.data : "", b.len)) {
    fail_at(P, line, col, "string for field '%s' is not valid UTF-8", field);
    goto fail;
  }
  json_t *v = json_stringn(b.data ? b.data : "", b.len);
  free(b.data);
  if (v == NULL) fail_at(P, line, col, "out of memory");
  return v;
fail:
  free(b.data);
  return NULL;
}

/* ---- numbers ---- */

/* Parses an integer literal (decimal, 0x hex, leading-0 octal) into *out.
 * Returns 0, -1 if the text is not an integer, -2 on overflow. */
static int parse_uint_text(const char *s, size_t len, uint64_t *out) {
  uint64_t v = 0;
  unsigned base = 10;
  size_t i = 0;
  if (len >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    i = 2;
    if (len == 2) return -1;
  } else if (len >= 2 && s[0] == '0') {
    base = 8;
    i = 1;
  }
  int overflow = 0;
  for (; i < len; i++) {
    int d = hex_val((unsigned char)s[i]);
    if (d < 0 || (unsigned)d >= base) return -1;
    if (v > (UINT64_MAX - (uint64_t)d) / base) overflow = 1;
    v = v * base + (uint64_t)d;
  }
  if (overflow) return -2;
  *out = v;
  return 0;
}

/* Parses a floating literal (optionally with f/F suffix). */
static int parse_float_text(const char *s, size_t len, double *out) {
  char tmp[128];
  if (len == 0 || len >= sizeof tmp) return -1;
  memcpy(tmp, s, len);
  tmp[len] = '\0';
  if (len > 1 && (tmp[len - 1] == 'f' || tmp[len - 1] == 'F') &&
      !(len > 2 && tmp[0] == '0' && (tmp[1] == 'x' || tmp[1] == 'X'))) {
    tmp[--len] = '\0';
  }
  uint64_t iv;
  int r = parse_uint_text(tmp, len, &iv);
  if (r == 0) {
    *out = (double)iv;
    return 0;
  }
  /* Decimal float: digits, optional '.', digits, optional exponent. */
  size_t i = 0;
  int digits = 0;
  while (i < len && is_digit((unsigned char)tmp[i])) i++, digits++;
  if (i < len && tmp[i] == '.') {
    i++;
    while (i < len && is_digit((unsigned char)tmp[i])) i++, digits++;
  }
  if (digits == 0) return -1;
  if (i < len && (tmp[i] == 'e' || tmp[i] == 'E')) {
    i++;
    if (i < len && (tmp[i] == '+' || tmp[i] == '-')) i++;
    int ed = 0;
    while (i < len && is_digit((unsigned char)tmp[i])) i++, ed++;
    if (ed == 0) return -1;
  }
  if (i != len) return -1;
  errno = 0;
  *out = strtod(tmp, NULL);
  return 0;
}

static int ident_nocase(const token *t, const char *s) {
  if (t->len != strlen(s)) return 0;
  for (size_t i = 0; i < t->len; i++) {
    int a = (unsigned char)t->start[i];
    if (a >= 'A' && a <= 'Z') a += 'a' - 'A';
    if (a != s[i]) return 0;
  }
  return 1;
}

static json_t *make_real(parser *P, const token *t, nrd_field_type ft, double v) {
  if (ft == NRD_FT_FLOAT) v = (double)(float)v;
  json_t *j;
  if (isnan(v)) {
    j = json_string("NaN");
  } else if (isinf(v)) {
    j = json_string(v > 0 ? "Infinity" : "-Infinity");
  } else {
    j = json_real(v);
  }
  if (j == NULL) fail_at(P, t->line, t->col, "out of memory");
  return j;
}

/* Parses a scalar of type ft (not string) for field fd (used in messages). */
static json_t *parse_scalar(parser *P, const nrd_field_desc *fd, nrd_field_type ft) {
  if (ft == NRD_FT_STRING) return parse_string_value(P, fd->name);
  token *t = peek(P);
  if (t == NULL) return NULL;
  int line = t->line, col = t->col;
  int neg = 0;
  char b[64];
  if (tok_is_sym(t, '-')) {
    neg = 1;
    consume(P);
    t = peek(P);
    if (t == NULL) return NULL;
  }
  switch (ft) {
    case NRD_FT_BOOL: {
      if (!neg && t->kind == T_IDENT) {
        if (tok_equals(t, "true") || tok_equals(t, "True") || tok_equals(t, "t")) {
          consume(P);
          return json_true();
        }
        if (tok_equals(t, "false") || tok_equals(t, "False") || tok_equals(t, "f")) {
          consume(P);
          return json_false();
        }
      }
      if (!neg && t->kind == T_NUMBER) {
        uint64_t v;
        if (parse_uint_text(t->start, t->len, &v) == 0 && v <= 1) {
          consume(P);
          return json_boolean(v);
        }
      }
      fail_at(P, line, col, "invalid value %s for bool field '%s' (expected true or false)", describe(t, b, sizeof b),
              fd->name);
      return NULL;
    }
    case NRD_FT_ENUM: {
      const nrd_enum_desc *e = fd->enm;
      if (!neg && t->kind == T_IDENT) {
        int i = nrd_schema_enum_index(e, t->start, t->len, 0);
        if (i < 0) {
          fail_at(P, line, col, "unknown value %s for enum %s of field '%s'", describe(t, b, sizeof b), e->name,
                  fd->name);
          return NULL;
        }
        consume(P);
        return json_string(e->names[i]);
      }
      if (t->kind == T_NUMBER) {
        uint64_t v;
        if (parse_uint_text(t->start, t->len, &v) == 0 && v <= INT32_MAX) {
          const char *name = nrd_schema_enum_name(e, neg ? -(long long)v : (long long)v);
          if (name != NULL) {
            consume(P);
            return json_string(name);
          }
        }
        fail_at(P, line, col, "unknown number %s%.*s for enum %s of field '%s'", neg ? "-" : "",
                (int)(t->len > 40 ? 40 : t->len), t->start, e->name, fd->name);
        return NULL;
      }
      fail_at(P, line, col, "expected an enum value name for field '%s', got %s", fd->name, describe(t, b, sizeof b));
      return NULL;
    }
    case NRD_FT_INT32:
    case NRD_FT_UINT32:
    case NRD_FT_INT64:
    case NRD_FT_UINT64: {
      /* protobuf's text-format sentences first (Triton's log shows them),
       * then the field. */
      if (t->kind != T_NUMBER) {
        if (t->kind == T_EOF)
          fail_at(P, line, col, "Expected integer, got end of input (%s field '%s')", nrd_schema_type_name(ft),
                  fd->name);
        else
          fail_at(P, line, col, "Expected integer, got: %.*s%s (%s field '%s')", (int)(t->len > 40 ? 40 : t->len),
                  t->start, t->len > 40 ? "..." : "", nrd_schema_type_name(ft), fd->name);
        return NULL;
      }
      if (neg && (ft == NRD_FT_UINT32 || ft == NRD_FT_UINT64)) {
        fail_at(P, line, col, "Expected integer, got: - (%s field '%s' takes no negative value)",
                nrd_schema_type_name(ft), fd->name);
        return NULL;
      }
      uint64_t v;
      int r = parse_uint_text(t->start, t->len, &v);
      if (r == -1) {
        fail_at(P, line, col, "invalid integer %s for %s field '%s'", describe(t, b, sizeof b),
                nrd_schema_type_name(ft), fd->name);
        return NULL;
      }
      uint64_t lim_pos = ft == NRD_FT_INT32    ? (uint64_t)INT32_MAX
                         : ft == NRD_FT_UINT32 ? (uint64_t)UINT32_MAX
                         : ft == NRD_FT_INT64  ? (uint64_t)INT64_MAX
                                               : UINT64_MAX;
      uint64_t lim_neg = ft == NRD_FT_INT32   ? (uint64_t)INT32_MAX + 1
                         : ft == NRD_FT_INT64 ? (uint64_t)INT64_MAX + 1
                                              : 0;
      if (r == -2 || (!neg && v > lim_pos) || (neg && v > lim_neg)) {
        fail_at(P, line, col, "Integer out of range (%.*s) (%s%.*s for %s field '%s')",
                (int)(t->len > 40 ? 40 : t->len), t->start, neg ? "-" : "", (int)(t->len > 40 ? 40 : t->len), t->start,
                nrd_schema_type_name(ft), fd->name);
        return NULL;
      }
      consume(P);
      json_int_t iv;
      if (neg) {
        iv = v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(json_int_t)v;
      } else {
        iv = (json_int_t)v; /* uint64 above INT64_MAX keeps its bit pattern */
      }
      json_t *j = json_integer(iv);
      if (j == NULL) fail_at(P, line, col, "out of memory");
      return j;
    }
    case NRD_FT_FLOAT:
    case NRD_FT_DOUBLE: {
      double v;
      if (t->kind == T_IDENT) {
        if (ident_nocase(t, "inf") || ident_nocase(t, "infinity")) {
          v = INFINITY;
        } else if (ident_nocase(t, "nan")) {
          v = NAN;
        } else {
          fail_at(P, line, col, "expected a number for %s field '%s', got %s", nrd_schema_type_name(ft), fd->name,
                  describe(t, b, sizeof b));
          return NULL;
        }
      } else if (t->kind == T_NUMBER) {
        if (parse_float_text(t->start, t->len, &v) != 0) {
          fail_at(P, line, col, "invalid number %s for %s field '%s'", describe(t, b, sizeof b),
                  nrd_schema_type_name(ft), fd->name);
          return NULL;
        }
      } else {
        fail_at(P, line, col, "expected a number for %s field '%s', got %s", nrd_schema_type_name(ft), fd->name,
                describe(t, b, sizeof b));
        return NULL;
      }
      consume(P);
      return make_real(P, t, ft, neg ? -v : v);
    }
    default: break;
  }
  fail_at(P, line, col, "internal error: unsupported field type");
  return NULL;
}

/* ---- messages ---- */

static int parse_message_body(parser *P, const nrd_msg_desc *msg, json_t *obj, char close, int open_line, int open_col);

/* Reads '{' or '<', the body and the matching close into a new object. */
static json_t *parse_message_value(parser *P, const nrd_field_desc *fd) {
  token *t = peek(P);
  if (t == NULL) return NULL;
  char close;
  if (tok_is_sym(t, '{')) {
    close = '}';
  } else if (tok_is_sym(t, '<')) {
    close = '>';
  } else {
    char b[64];
    fail_at(P, t->line, t->col, "expected '{' to start message field '%s', got %s", fd->name, describe(t, b, sizeof b));
    return NULL;
  }
  int line = t->line, col = t->col;
  consume(P);
  json_t *obj = json_object();
  if (obj == NULL) {
    fail_at(P, line, col, "out of memory");
    return NULL;
  }
  if (parse_message_body(P, fd->msg, obj, close, line, col) != 0) {
    json_decref(obj);
    return NULL;
  }
  return obj;
}

/* Renders a map key read from the text as the JSON object key. */
static char *map_key_text(parser *P, const nrd_field_desc *fd, json_t *k) {
  char tmp[32];
  const char *s;
  if (json_is_string(k)) {
    s = json_string_value(k);
  } else if (json_is_boolean(k)) {
    s = json_is_true(k) ? "true" : "false";
  } else {
    json_int_t v = json_integer_value(k);
    if (fd->key_type == NRD_FT_UINT64 || fd->key_type == NRD_FT_UINT32) {
      snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v);
    } else {
      snprintf(tmp, sizeof tmp, "%lld", (long long)v);
    }
    s = tmp;
  }
  char *r = strdup(s);
  if (r == NULL) fail_at(P, P->line, P->col, "out of memory");
  return r;
}

/* Parses one map entry `{ key: K value: V }` and stores it in map. */
static int parse_map_entry(parser *P, const nrd_field_desc *fd, json_t *map) {
  token *t = peek(P);
  if (t == NULL) return -1;
  char close;
  if (tok_is_sym(t, '{')) {
    close = '}';
  } else if (tok_is_sym(t, '<')) {
    close = '>';
  } else {
    char b[64];
    fail_at(P, t->line, t->col, "expected '{' to start an entry of map field '%s', got %s", fd->name,
            describe(t, b, sizeof b));
    return -1;
  }
  int open_line = t->line, open_col = t->col, key_line = t->line, key_col = t->col;
  consume(P);
  json_t *key = NULL, *val = NULL;
  /* The key is known at the end: the value's fields go under a stand-in. */
  json_t *outer = pos_entry_begin(P);
  size_t old = path_push(P, "[\x01]");
  for (;;) {
    t = peek(P);
    if (t == NULL) goto fail;
    if (tok_is_sym(t, close)) {
      consume(P);
      break;
    }
    if (t->kind == T_EOF) {
      fail_at(P, t->line, t->col, "unexpected end of input: entry of map field '%s' opened at %d:%d is not closed",
              fd->name, open_line, open_col);
      goto fail;
    }
    if (t->kind != T_IDENT || !(tok_equals(t, "key") || tok_equals(t, "value"))) {
      char b[64];
      fail_at(P, t->line, t->col, "expected 'key' or 'value' in entry of map field '%s', got %s", fd->name,
              describe(t, b, sizeof b));
      goto fail;
    }
    int is_key = tok_equals(t, "key");
    int fl = t->line, fc = t->col;
    if (is_key) {
      key_line = fl;
      key_col = fc;
    }
    if ((is_key && key != NULL) || (!is_key && val != NULL)) {
      fail_at(P, fl, fc, "duplicate '%s' in entry of map field '%s'", is_key ? "key" : "value", fd->name);
      goto fail;
    }
    consume(P);
    t = peek(P);
    if (t == NULL) goto fail;
    if (!is_key && fd->type == NRD_FT_MESSAGE) {
      if (tok_is_sym(t, ':')) consume(P);
      val = parse_message_value(P, fd);
      if (val == NULL) goto fail;
    } else {
      if (expect_sym(P, ':', "after field name") != 0) goto fail;
      json_t *v = parse_scalar(P, fd, is_key ? fd->key_type : fd->type);
      if (v == NULL) goto fail;
      if (is_key)
        key = v;
      else
        val = v;
    }
    t = peek(P);
    if (t == NULL) goto fail;
    if (tok_is_sym(t, ',') || tok_is_sym(t, ';')) consume(P);
  }
  if (key == NULL) {
    key = fd->key_type == NRD_FT_STRING ? json_string("")
          : fd->key_type == NRD_FT_BOOL ? json_false()
                                        : json_integer(0);
  }
  if (val == NULL) val = fd->type == NRD_FT_MESSAGE ? json_object() : json_string("");
  if (key == NULL || val == NULL) {
    fail_at(P, open_line, open_col, "out of memory");
    goto fail;
  }
  char *ks = map_key_text(P, fd, key);
  if (ks == NULL) goto fail;
  if (P->pos != NULL && P->plen != NO_PATH) {
    char from[sizeof P->path];
    snprintf(from, sizeof from, "%s", P->path);
    path_pop(P, old);
    size_t base = path_push(P, "[%s]", ks);
    if (P->plen != NO_PATH) {
      pos_entry_end(P, outer, from, P->path);
      json_object_del(P->pos, P->path);
      pos_note(P, key_line, key_col);
    } else {
      pos_entry_end(P, outer, NULL, NULL); /* the key does not fit in a path */
    }
    path_pop(P, base);
  } else {
    pos_entry_end(P, outer, NULL, NULL);
  }
  path_pop(P, old);
  int rc = json_object_set_new(map, ks, val);
  val = NULL;
  free(ks);
  json_decref(key);
  if (rc != 0) {
    fail_at(P, open_line, open_col, "out of memory");
    return -1;
  }
  return 0;
fail:
  pos_entry_end(P, outer, NULL, NULL);
  path_pop(P, old);
  json_decref(key);
  json_decref(val);
  return -1;
}

/* Parses one element of field fd (a scalar, a message or a map entry) and
 * adds it to container (array for repeated, object for maps). Its position
 * is its first token, or (fl, fc) (the field's name) for a message outside
 * a list. */
static int parse_element(parser *P, const nrd_field_desc *fd, json_t *container, int in_list, int fl, int fc) {
  if (fd->label == NRD_LABEL_MAP) return parse_map_entry(P, fd, container);
  token *t = peek(P);
  if (t == NULL) return -1;
  size_t old = path_push(P, "[%zu]", json_array_size(container));
  if (in_list || fd->type != NRD_FT_MESSAGE)
    pos_note(P, t->line, t->col);
  else
    pos_note(P, fl, fc);
  json_t *v = fd->type == NRD_FT_MESSAGE ? parse_message_value(P, fd) : parse_scalar(P, fd, fd->type);
  path_pop(P, old);
  if (v == NULL) return -1;
  if (json_array_append_new(container, v) != 0) {
    fail_at(P, P->line, P->col, "out of memory");
    return -1;
  }
  return 0;
}

/* Parses `[ e, e, ... ]` (possibly empty) for a repeated or map field. */
static int parse_list(parser *P, const nrd_field_desc *fd, json_t *container) {
  token *t = peek(P);
  int open_line = t->line, open_col = t->col;
  consume(P); /* '[' */
  t = peek(P);
  if (t == NULL) return -1;
  if (tok_is_sym(t, ']')) {
    consume(P);
    return 0;
  }
  for (;;) {
    if (parse_element(P, fd, container, 1, 0, 0) != 0) return -1;
    t = peek(P);
    if (t == NULL) return -1;
    if (tok_is_sym(t, ',')) {
      consume(P);
      continue;
    }
    if (tok_is_sym(t, ']')) {
      consume(P);
      return 0;
    }
    char b[64];
    if (t->kind == T_EOF) {
      fail_at(P, t->line, t->col, "unexpected end of input: list of field '%s' opened at %d:%d is not closed", fd->name,
              open_line, open_col);
    } else {
      fail_at(P, t->line, t->col, "expected ',' or ']' in list of field '%s', got %s", fd->name,
              describe(t, b, sizeof b));
    }
    return -1;
  }
}

static int parse_field_value(parser *P, const nrd_msg_desc *msg, json_t *obj, const nrd_field_desc *fd, int fl, int fc);

/* Parses one `name: value` / `name { ... }` / `name: [ ... ]` item. */
static int parse_field(parser *P, const nrd_msg_desc *msg, json_t *obj) {
  token *t = peek(P);
  char b[64];
  if (t->kind != T_IDENT) {
    if (tok_is_sym(t, '[')) {
      fail_at(P, t->line, t->col, "extension and Any fields are not supported in %s", msg->name);
    } else {
      fail_at(P, t->line, t->col, "expected a field name in %s, got %s", msg->name, describe(t, b, sizeof b));
    }
    return -1;
  }
  int fl = t->line, fc = t->col;
  const nrd_field_desc *fd = nrd_schema_find_field(msg, t->start, t->len, 0);
  if (fd == NULL) {
    fail_at(P, fl, fc, "unknown field '%.*s' in %s", (int)(t->len > 64 ? 64 : t->len), t->start, msg->name);
    return -1;
  }
  consume(P);
  size_t old = path_push(P, "%s%s", P->plen > 0 && P->plen != NO_PATH ? "." : "", fd->name);
  pos_note(P, fl, fc);
  int rc = parse_field_value(P, msg, obj, fd, fl, fc);
  path_pop(P, old);
  return rc;
}

/* The rest of parse_field, after the name `fd` read at (fl, fc). */
static int parse_field_value(parser *P, const nrd_msg_desc *msg, json_t *obj, const nrd_field_desc *fd, int fl,
                             int fc) {
  token *t;
  char b[64];

  json_t *existing = json_object_get(obj, fd->name);
  if (fd->label == NRD_LABEL_SINGULAR && existing != NULL) {
    fail_at(P, fl, fc, "field '%s' of %s is specified more than once", fd->name, msg->name);
    return -1;
  }
  if (fd->oneof != NULL && existing == NULL) {
    for (size_t i = 0; i < msg->nfields; i++) {
      const nrd_field_desc *o = &msg->fields[i];
      if (o != fd && o->oneof != NULL && strcmp(o->oneof, fd->oneof) == 0 && json_object_get(obj, o->name) != NULL) {
        fail_at(P, fl, fc, "field '%s' conflicts with '%s': both belong to oneof '%s' of %s", fd->name, o->name,
                fd->oneof, msg->name);
        return -1;
      }
    }
  }

  t = peek(P);
  if (t == NULL) return -1;
  int had_colon = 0;
  if (tok_is_sym(t, ':')) {
    had_colon = 1;
    consume(P);
    t = peek(P);
    if (t == NULL) return -1;
  }
  int is_msg_like = fd->type == NRD_FT_MESSAGE || fd->label == NRD_LABEL_MAP;
  if (!had_colon && !is_msg_like) {
    fail_at(P, t->line, t->col, "expected ':' after field name '%s', got %s", fd->name, describe(t, b, sizeof b));
    return -1;
  }

  if (fd->label == NRD_LABEL_SINGULAR) {
    if (tok_is_sym(t, '[')) {
      fail_at(P, t->line, t->col, "field '%s' of %s is not repeated; a list is not allowed", fd->name, msg->name);
      return -1;
    }
    json_t *v = fd->type == NRD_FT_MESSAGE ? parse_message_value(P, fd) : parse_scalar(P, fd, fd->type);
    if (v == NULL) return -1;
    if (json_object_set_new(obj, fd->name, v) != 0) {
      fail_at(P, fl, fc, "out of memory");
      return -1;
    }
    return 0;
  }

  json_t *container = existing;
  if (container == NULL) {
    container = fd->label == NRD_LABEL_MAP ? json_object() : json_array();
    if (container == NULL || json_object_set_new(obj, fd->name, container) != 0) {
      fail_at(P, fl, fc, "out of memory");
      return -1;
    }
  }
  if (tok_is_sym(t, '[')) return parse_list(P, fd, container);
  return parse_element(P, fd, container, 0, fl, fc);
}

static int parse_message_body(parser *P, const nrd_msg_desc *msg, json_t *obj, char close, int open_line,
                              int open_col) {
  for (;;) {
    token *t = peek(P);
    if (t == NULL) return -1;
    if (close != 0 && tok_is_sym(t, close)) {
      consume(P);
      return 0;
    }
    if (t->kind == T_EOF) {
      if (close == 0) return 0;
      fail_at(P, t->line, t->col, "unexpected end of input: %s opened at %d:%d is not closed (missing '%c')", msg->name,
              open_line, open_col, close);
      return -1;
    }
    if (parse_field(P, msg, obj) != 0) return -1;
    t = peek(P);
    if (t == NULL) return -1;
    if (tok_is_sym(t, ',') || tok_is_sym(t, ';')) consume(P);
  }
}

json_t *nrd_pbtxt_parse(const nrd_msg_desc *root, const char *text, size_t len, const char *filename, char **err) {
  return nrd_pbtxt_parse_pos(root, text, len, filename, NULL, err);
}

json_t *nrd_pbtxt_parse_pos(const nrd_msg_desc *root, const char *text, size_t len, const char *filename,
                            json_t **positions, char **err) {
  parser P;
  memset(&P, 0, sizeof P);
  if (positions != NULL) {
    *positions = NULL;
    P.pos = json_object();
    if (P.pos == NULL) {
      fail_at(&P, 1, 1, "out of memory");
      goto fail;
    }
  }
  P.p = text != NULL ? text : "";
  P.end = P.p + (text != NULL ? len : 0);
  P.line = 1;
  P.col = 1;
  P.file = filename != NULL ? filename : "<input>";
  if (err != NULL) *err = NULL;

  const char *nul = memchr(P.p, '\0', (size_t)(P.end - P.p));
  if (nul != NULL) {
    /* Position the error at the NUL byte. */
    parser Q = P;
    while (Q.p < nul) advance_char(&Q);
    fail_at(&P, Q.line, Q.col, "unexpected NUL byte");
    goto fail;
  }
  json_t *obj = json_object();
  if (obj == NULL) {
    fail_at(&P, 1, 1, "out of memory");
    goto fail;
  }
  if (parse_message_body(&P, root, obj, 0, 1, 1) != 0) {
    json_decref(obj);
    goto fail;
  }
  if (positions != NULL && !P.pos_failed)
    *positions = P.pos;
  else
    json_decref(P.pos);
  return obj;
fail:
  json_decref(P.pos);
  if (P.err == NULL) fail_at(&P, P.line, P.col, "parse error");
  if (err != NULL) {
    *err = P.err;
  } else {
    free(P.err);
  }
  return NULL;
}
