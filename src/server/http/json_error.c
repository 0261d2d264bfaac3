/* Why a body is not JSON, as Triton says it (json_error.h).
 *
 * A validating reader that stops where RapidJSON's default reader (the one
 * behind Triton's TritonJson) stops, with the same error: the same grammar
 * (no comments, no trailing commas, no NaN), the same offsets (after what
 * it has consumed, or at the backslash of a bad escape, or at the start of
 * a number too big for a double). Encoding is not checked, as RapidJSON
 * does not check it by default. */
#include "json_error.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum {
  E_NONE,
  E_EMPTY,
  E_NOT_SINGULAR,
  E_VALUE,
  E_MISS_NAME,
  E_MISS_COLON,
  E_MISS_COMMA_CURLY,
  E_MISS_COMMA_SQUARE,
  E_BAD_HEX,
  E_BAD_SURROGATE,
  E_BAD_ESCAPE,
  E_MISS_QUOTE,
  E_BAD_ENCODING,
  E_TOO_BIG,
  E_MISS_FRACTION,
  E_MISS_EXPONENT,
  E_DEPTH,
} json_err;

/* RapidJSON's English texts (GetParseError_En). */
static const char *const kText[] = {
    [E_EMPTY] = "The document is empty.",
    [E_NOT_SINGULAR] = "The document root must not be followed by other values.",
    [E_VALUE] = "Invalid value.",
    [E_MISS_NAME] = "Missing a name for object member.",
    [E_MISS_COLON] = "Missing a colon after a name of object member.",
    [E_MISS_COMMA_CURLY] = "Missing a comma or '}' after an object member.",
    [E_MISS_COMMA_SQUARE] = "Missing a comma or ']' after an array element.",
    [E_BAD_HEX] = "Incorrect hex digit after \\u escape in string.",
    [E_BAD_SURROGATE] = "The surrogate pair in string is invalid.",
    [E_BAD_ESCAPE] = "Invalid escape character in string.",
    [E_MISS_QUOTE] = "Missing a closing quotation mark in string.",
    [E_BAD_ENCODING] = "Invalid encoding in string.",
    [E_TOO_BIG] = "Number too big to be stored in double.",
    [E_MISS_FRACTION] = "Miss fraction part in number.",
    [E_MISS_EXPONENT] = "Miss exponent in number.",
};

typedef struct reader {
  const char *b;
  size_t len, pos;
  json_err err;
  size_t at;
} reader;

/* The next byte, or 0 at the end (a NUL ends the text, as for RapidJSON). */
static char peek(const reader *r) { return r->pos < r->len ? r->b[r->pos] : '\0'; }

static bool fail(reader *r, json_err e, size_t at) {
  r->err = e;
  r->at = at;
  return false;
}

static bool consume(reader *r, char c) {
  if (peek(r) != c || c == '\0') return false;
  r->pos++;
  return true;
}

static void skip_ws(reader *r) {
  for (char c = peek(r); c == ' ' || c == '\n' || c == '\r' || c == '\t'; c = peek(r)) r->pos++;
}

static bool value(reader *r, int depth);

static bool literal(reader *r, const char *rest) {
  r->pos++; /* the first letter, already seen */
  for (; *rest; rest++)
    if (!consume(r, *rest)) return fail(r, E_VALUE, r->pos);
  return true;
}

static int hex4(reader *r) {
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    char c = peek(r);
    int d = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : -1;
    if (d < 0) return -1;
    v = v << 4 | (unsigned)d;
    r->pos++;
  }
  return (int)v;
}

static bool string(reader *r) {
  r->pos++; /* the opening quote */
  for (;;) {
    char c = peek(r);
    if (c == '\\') {
      size_t escape = r->pos;
      r->pos++;
      char e = peek(r);
      if (e && strchr("\"\\/bfnrt", e)) {
        r->pos++;
      } else if (e == 'u') {
        r->pos++;
        int cp = hex4(r);
        if (cp < 0) return fail(r, E_BAD_HEX, escape);
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          if (!consume(r, '\\') || !consume(r, 'u')) return fail(r, E_BAD_SURROGATE, escape);
          int lo = hex4(r);
          if (lo < 0) return fail(r, E_BAD_HEX, escape);
          if (lo < 0xDC00 || lo > 0xDFFF) return fail(r, E_BAD_SURROGATE, escape);
        }
      } else {
        return fail(r, E_BAD_ESCAPE, escape);
      }
    } else if (c == '"') {
      r->pos++;
      return true;
    } else if ((unsigned char)c < 0x20) {
      return fail(r, c == '\0' ? E_MISS_QUOTE : E_BAD_ENCODING, r->pos);
    } else {
      r->pos++;
    }
  }
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static bool number(reader *r) {
  size_t start = r->pos;
  consume(r, '-');
  if (consume(r, '0')) {
    /* a leading zero stands alone */
  } else if (is_digit(peek(r))) {
    while (is_digit(peek(r))) r->pos++;
  } else {
    return fail(r, E_VALUE, r->pos);
  }
  if (consume(r, '.')) {
    if (!is_digit(peek(r))) return fail(r, E_MISS_FRACTION, r->pos);
    while (is_digit(peek(r))) r->pos++;
  }
  if (consume(r, 'e') || consume(r, 'E')) {
    if (!consume(r, '+')) consume(r, '-');
    if (!is_digit(peek(r))) return fail(r, E_MISS_EXPONENT, r->pos);
    while (is_digit(peek(r))) r->pos++;
  }
  size_t n = r->pos - start;
  char small[64];
  char *text = n < sizeof small ? small : malloc(n + 1);
  if (text) {
    memcpy(text, r->b + start, n);
    text[n] = '\0';
    double d = strtod(text, NULL);
    if (text != small) free(text);
    if (isinf(d)) return fail(r, E_TOO_BIG, start);
  }
  return true;
}

static bool object(reader *r, int depth) {
  r->pos++;
  skip_ws(r);
  if (consume(r, '}')) return true;
  for (;;) {
    if (peek(r) != '"') return fail(r, E_MISS_NAME, r->pos);
    if (!string(r)) return false;
    skip_ws(r);
    if (!consume(r, ':')) return fail(r, E_MISS_COLON, r->pos);
    skip_ws(r);
    if (!value(r, depth + 1)) return false;
    skip_ws(r);
    if (consume(r, ',')) {
      skip_ws(r);
    } else if (consume(r, '}')) {
      return true;
    } else {
      return fail(r, E_MISS_COMMA_CURLY, r->pos);
    }
  }
}

static bool array(reader *r, int depth) {
  r->pos++;
  skip_ws(r);
  if (consume(r, ']')) return true;
  for (;;) {
    if (!value(r, depth + 1)) return false;
    skip_ws(r);
    if (consume(r, ',')) {
      skip_ws(r);
    } else if (consume(r, ']')) {
      return true;
    } else {
      return fail(r, E_MISS_COMMA_SQUARE, r->pos);
    }
  }
}

/* `depth`: the containers this value is inside. */
static bool value(reader *r, int depth) {
  switch (peek(r)) {
    case 'n': return literal(r, "ull");
    case 't': return literal(r, "rue");
    case 'f': return literal(r, "alse");
    case '"': return string(r);
    case '{':
    case '[':
      if (depth >= NRD_SRV_JSON_MAX_DEPTH) return fail(r, E_DEPTH, r->pos);
      return peek(r) == '{' ? object(r, depth) : array(r, depth);
    default: return number(r);
  }
}

int nrd_srv_json_error(const char *buf, size_t len, char *out, size_t outlen) {
  reader r = {buf, len, 0, E_NONE, 0};
  skip_ws(&r);
  if (peek(&r) == '\0') {
    fail(&r, E_EMPTY, r.pos);
  } else if (value(&r, 0)) {
    skip_ws(&r);
    if (peek(&r) != '\0') fail(&r, E_NOT_SINGULAR, r.pos);
  }
  if (r.err == E_NONE) return -1;
  if (outlen == 0) return 0;
  if (r.err == E_DEPTH)
    snprintf(out, outlen, "JSON nesting depth exceeds maximum allowed limit (%d)", NRD_SRV_JSON_MAX_DEPTH);
  else
    snprintf(out, outlen, "failed to parse the request JSON buffer: %s at %zu", kText[r.err], r.at);
  return 0;
}

int nrd_srv_json_error_status(const char *msg) {
  return strncmp(msg, "JSON nesting depth", 18) == 0 ? 400 : 500;
}
