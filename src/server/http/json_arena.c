/* Read-only JSON documents in a bump arena (see json_arena.h). jsmn
 * (Debian's libjsmn-dev, header-only) splits the text into tokens; a walk
 * over the tokens checks what jsmn leaves unchecked (the separators
 * between tokens, literals, number grammar and range, escapes, UTF-8) and
 * builds the tree with jansson's rules. */
#include "json_arena.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#define JSMN_STATIC /* jsmn's functions are private to this file */
#define JSMN_PARENT_LINKS /* closing a container is O(1), not a scan back */
#include <jsmn.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#define REDZONE 16 /* between allocations, so overruns are caught in tests */
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#define REDZONE 0
#endif

#define FIRST_BYTES (64 * 1024) /* an inference header needs a few KB */
#define ALIGN 16
#define MAX_DEPTH 128

/* A block of arena memory; the first is kept across resets, later ones
 * (documents that outgrow it) are freed by the reset. */
typedef struct chunk {
  struct chunk *next;
  size_t cap, used;
  _Alignas(ALIGN) char data[];
} chunk;

struct nrd_srv_json_arena {
  chunk *first; /* made at the first parse */
  chunk *cur; /* the block allocations come from */
  size_t used; /* bytes handed out since the reset */
};

nrd_srv_json_arena *nrd_srv_json_arena_new(void) { return calloc(1, sizeof(nrd_srv_json_arena)); }

void nrd_srv_json_arena_reset(nrd_srv_json_arena *a) {
  if (a == NULL) return;
  chunk *c = a->first ? a->first->next : NULL;
  while (c) {
    chunk *next = c->next;
    free(c);
    c = next;
  }
  if (a->first) {
    a->first->next = NULL;
    POISON(a->first->data, a->first->used);
    a->first->used = 0;
  }
  a->cur = a->first;
  a->used = 0;
}

void nrd_srv_json_arena_free(nrd_srv_json_arena *a) {
  if (a == NULL) return;
  nrd_srv_json_arena_reset(a);
  free(a->first);
  free(a);
}

size_t nrd_srv_json_arena_used(const nrd_srv_json_arena *a) { return a ? a->used : 0; }

/* n bytes of arena memory, or NULL when out of memory. */
static void *take(nrd_srv_json_arena *a, size_t n) {
  n = (n + ALIGN - 1) & ~(size_t)(ALIGN - 1);
  chunk *c = a->cur;
  if (c == NULL || c->cap - c->used < n + REDZONE) {
    size_t cap = c == NULL ? FIRST_BYTES : (n + REDZONE > FIRST_BYTES ? n + REDZONE : FIRST_BYTES);
    chunk *fresh = malloc(sizeof(chunk) + cap);
    if (fresh == NULL) return NULL;
    fresh->next = NULL;
    fresh->cap = cap;
    fresh->used = 0;
    POISON(fresh->data, cap);
    if (c == NULL)
      a->first = fresh;
    else
      c->next = fresh;
    a->cur = c = fresh;
  }
  void *p = c->data + c->used;
  c->used += n + REDZONE;
  a->used += n + REDZONE;
  UNPOISON(p, n);
  return p;
}

typedef struct key_at {
  const nrd_srv_json_member *m;
  size_t at;
} key_at;

static int by_key_then_place(const void *x, const void *y) {
  const key_at *p = x, *q = y;
  size_t n = p->m->key_len < q->m->key_len ? p->m->key_len : q->m->key_len;
  int c = memcmp(p->m->key, q->m->key, n);
  if (c) return c;
  if (p->m->key_len != q->m->key_len) return p->m->key_len < q->m->key_len ? -1 : 1;
  return p->at < q->at ? -1 : (p->at > q->at);
}

static bool same_key(const nrd_srv_json_member *x, const nrd_srv_json_member *y) {
  return x->key_len == y->key_len && memcmp(x->key, y->key, x->key_len) == 0;
}

/* Marks in drop[] every member that a later one with the same key
 * replaces. Returns false when out of memory. */
static bool find_repeats(const nrd_srv_json_member *m, size_t n, bool *drop) {
  if (n < 2) return true;
  if (n <= 32) { /* the usual case: a few keys */
    for (size_t i = 0; i < n; i++)
      for (size_t j = i + 1; j < n && !drop[i]; j++) drop[i] = same_key(&m[i], &m[j]);
    return true;
  }
  key_at *order = malloc(n * sizeof *order);
  if (order == NULL) return false;
  for (size_t i = 0; i < n; i++) order[i] = (key_at){&m[i], i};
  qsort(order, n, sizeof *order, by_key_then_place);
  for (size_t i = 0; i + 1 < n; i++) drop[order[i].at] = same_key(order[i].m, order[i + 1].m);
  free(order);
  return true;
}

/* ---- walking jsmn's tokens ------------------------------------------------ */

#define STACK_TOKENS 256 /* an inference header has a few dozen */
#define NONE SIZE_MAX

/* One parse: jsmn's tokens (in text order) and how far the walk is. */
typedef struct walker {
  nrd_srv_json_arena *a;
  const char *s; /* the text */
  size_t len;
  const jsmntok_t *tok;
  size_t ntok, next; /* tokens, and the next one to read */
  size_t pos; /* the text is checked up to here */
  const char *why; /* why the walk stopped */
  size_t at; /* and at which byte */
} walker;

static bool fail_at(walker *w, const char *why, size_t at) {
  w->why = why;
  w->at = at;
  return false;
}

static size_t skip_blanks(const walker *w, size_t p) {
  if (p < w->len && (unsigned char)w->s[p] > ' ') return p; /* the usual case */
  for (; p < w->len; p++) {
    char c = w->s[p];
    if (c > ' ' || (c != ' ' && c != '\n' && c != '\r' && c != '\t')) break;
  }
  return p;
}

/* A token's whole text: a string's quotes included. */
static size_t tok_begin(const jsmntok_t *t) { return (size_t)t->start - (t->type == JSMN_STRING); }
static size_t tok_finish(const jsmntok_t *t) { return (size_t)t->end + (t->type == JSMN_STRING); }

/* Where the next token begins, or NONE when there is none before `limit`
 * (the closing bracket of the container being read). */
static size_t next_begin(const walker *w, size_t limit) {
  if (w->next >= w->ntok) return NONE;
  size_t b = tok_begin(&w->tok[w->next]);
  return b < limit ? b : NONE;
}

/* The text from w->pos to `to` (where the next token begins) must be
 * blanks, `sep` unless it is 0, blanks. jsmn ignores what stands between
 * tokens, so this is where a missing or stray ',' or ':' is found. */
static bool between(walker *w, size_t to, char sep, const char *no_sep, const char *after_sep) {
  size_t p = skip_blanks(w, w->pos);
  if (sep) {
    if (p >= w->len || w->s[p] != sep) return fail_at(w, no_sep, p);
    p = skip_blanks(w, p + 1);
  }
  if (p != to) return fail_at(w, sep ? after_sep : no_sep, p);
  w->pos = to;
  return true;
}

/* Blanks up to the container's closing bracket at `close`. */
static bool closing(walker *w, size_t close, const char *expected, const char *after_comma) {
  size_t p = skip_blanks(w, w->pos);
  if (p == close) {
    w->pos = close + 1;
    return true;
  }
  if (p < w->len && w->s[p] == ',') return fail_at(w, after_comma, skip_blanks(w, p + 1));
  return fail_at(w, expected, p);
}

static int hex4(const unsigned char *p) {
  int v = 0;
  for (int i = 0; i < 4; i++) {
    int c = p[i], d = c >= '0' && c <= '9'   ? c - '0'
                      : c >= 'a' && c <= 'f' ? c - 'a' + 10
                      : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                             : -1;
    if (d < 0) return -1;
    v = v << 4 | d;
  }
  return v;
}

/* Bytes of the well-formed UTF-8 sequence at p (avail bytes there), or 0:
 * jansson's rules (no overlong forms, no surrogates, nothing past U+10FFFF). */
static size_t utf8_seq(const unsigned char *p, size_t avail) {
  unsigned c = p[0];
  size_t k;
  uint32_t v;
  if (c < 0xC2) return 0;
  if (c < 0xE0)
    k = 2, v = c & 0x1F;
  else if (c < 0xF0)
    k = 3, v = c & 0x0F;
  else if (c < 0xF5)
    k = 4, v = c & 0x07;
  else
    return 0;
  if (avail < k) return 0;
  for (size_t i = 1; i < k; i++) {
    if ((p[i] & 0xC0) != 0x80) return 0;
    v = v << 6 | (p[i] & 0x3F);
  }
  if ((k == 3 && v < 0x800) || (k == 4 && v < 0x10000) || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
  return k;
}

static size_t put_utf8(char *d, uint32_t v) {
  if (v < 0x80) return d[0] = (char)v, 1;
  if (v < 0x800) return d[0] = (char)(0xC0 | v >> 6), d[1] = (char)(0x80 | (v & 0x3F)), 2;
  if (v < 0x10000) {
    d[0] = (char)(0xE0 | v >> 12), d[1] = (char)(0x80 | (v >> 6 & 0x3F)), d[2] = (char)(0x80 | (v & 0x3F));
    return 3;
  }
  d[0] = (char)(0xF0 | v >> 18), d[1] = (char)(0x80 | (v >> 12 & 0x3F));
  d[2] = (char)(0x80 | (v >> 6 & 0x3F)), d[3] = (char)(0x80 | (v & 0x3F));
  return 4;
}

static bool plain_byte(unsigned char c) { return c >= 0x20 && c < 0x80 && c != '\\'; }

/* How many bytes at p (len of them, avail readable) need no decoding:
 * printable ASCII, no backslash. Eight at a time where the text allows
 * the read; a byte past len only ever reads text, never past it. */
static size_t plain_prefix(const unsigned char *p, size_t len, size_t avail) {
  size_t i = 0;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  const uint64_t ones = 0x0101010101010101u, highs = ones * 0x80;
  while (i < len && i + 8 <= avail) {
    uint64_t x;
    memcpy(&x, p + i, 8);
    /* a byte's high bit: it is >= 0x80, below 0x20, or a backslash (the
     * lowest such byte is always flagged; borrows only run upwards) */
    uint64_t hits = ((x - ones * 0x20) | ((x ^ ones * '\\') - ones) | x) & highs;
    if (len - i < 8) hits &= (UINT64_C(1) << (8 * (len - i))) - 1;
    if (hits) break;
    i = len - i < 8 ? len : i + 8;
  }
#else
  (void)avail;
#endif
  while (i < len && plain_byte(p[i])) i++;
  return i;
}

/* The string token t (between its quotes), unescaped into the arena and
 * NUL-terminated. A decoded string is never longer than its text. */
static bool decode_string(walker *w, const jsmntok_t *t, const char **out, size_t *out_len, const char *nul_why) {
  const unsigned char *p = (const unsigned char *)w->s + t->start;
  size_t len = (size_t)(t->end - t->start), o = 0;
  char *d = take(w->a, len + 1);
  if (d == NULL) return fail_at(w, "out of memory", (size_t)t->start);
  size_t i = plain_prefix(p, len, w->len - (size_t)t->start); /* most strings: all of it */
  memcpy(d, p, i);
  o = i;
  while (i < len) {
    unsigned char c = p[i];
    size_t at = (size_t)t->start + i;
    if (c >= 0x20 && c < 0x80 && c != '\\') {
      d[o++] = (char)c;
      i++;
    } else if (c >= 0x80) {
      size_t k = utf8_seq(p + i, len - i);
      if (k == 0) return fail_at(w, "invalid UTF-8 in a string", at);
      memcpy(d + o, p + i, k);
      o += k;
      i += k;
    } else if (c < 0x20) {
      return fail_at(w, "control character in a string", at);
    } else { /* a backslash: jsmn saw a known escape letter follow it */
      char e = i + 1 < len ? (char)p[i + 1] : 0, plain;
      switch (e) {
        case '"':
        case '\\':
        case '/': plain = e; break;
        case 'b': plain = '\b'; break;
        case 'f': plain = '\f'; break;
        case 'n': plain = '\n'; break;
        case 'r': plain = '\r'; break;
        case 't': plain = '\t'; break;
        case 'u': plain = 0; break;
        default: return fail_at(w, "invalid escape in a string", at);
      }
      if (plain) {
        d[o++] = plain;
        i += 2;
        continue;
      }
      int v = i + 6 <= len ? hex4(p + i + 2) : -1;
      if (v < 0) return fail_at(w, "invalid \\u escape in a string", at);
      i += 6;
      if (v >= 0xDC00 && v <= 0xDFFF) return fail_at(w, "invalid Unicode: a lone low surrogate", at);
      if (v >= 0xD800 && v <= 0xDBFF) {
        int lo = i + 6 <= len && p[i] == '\\' && p[i + 1] == 'u' ? hex4(p + i + 2) : -1;
        if (lo < 0xDC00 || lo > 0xDFFF) return fail_at(w, "invalid Unicode: a lone high surrogate", at);
        v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
        i += 6;
      }
      if (v == 0) return fail_at(w, nul_why, at);
      o += put_utf8(d + o, (uint32_t)v);
    }
  }
  d[o] = '\0';
  *out = d;
  *out_len = o;
  return true;
}

/* A number as jansson reads one: an integer unless it has '.', 'e' or
 * 'E'; every int64 (INT64_MIN too); reals in the C locale; anything out
 * of range is refused, not clamped. */
size_t nrd_srv_json_number_len(const char *p, size_t n, bool *real) {
  size_t i = n > 0 && p[0] == '-', d;
  bool frac_or_exp = false;
  for (d = i; i < n && p[i] >= '0' && p[i] <= '9'; i++) {
  }
  if (i == d || (p[d] == '0' && i - d > 1)) return 0;
  if (i < n && p[i] == '.') {
    frac_or_exp = true;
    for (d = ++i; i < n && p[i] >= '0' && p[i] <= '9'; i++) {
    }
    if (i == d) return 0;
  }
  if (i < n && (p[i] == 'e' || p[i] == 'E')) {
    frac_or_exp = true;
    if (++i < n && (p[i] == '+' || p[i] == '-')) i++;
    for (d = i; i < n && p[i] >= '0' && p[i] <= '9'; i++) {
    }
    if (i == d) return 0;
  }
  if (real) *real = frac_or_exp;
  return i;
}

static bool number(walker *w, const char *p, size_t n, size_t at, nrd_srv_json *out) {
  bool real = false;
  if (nrd_srv_json_number_len(p, n, &real) != n) return fail_at(w, "invalid number or literal", at);
  bool neg = p[0] == '-', big = false;
  uint64_t m = 0;
  for (size_t i = neg; !real && i < n; i++) { /* an integer: digits only */
    unsigned digit = (unsigned)(p[i] - '0');
    if (m > (UINT64_MAX - digit) / 10)
      big = true;
    else
      m = m * 10 + digit;
  }
  if (!real) {
    uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    if (big || m > limit) return fail_at(w, neg ? "too big negative integer" : "too big integer", at);
    out->type = NRD_SRV_JSON_INT;
    out->u.i = !neg ? (int64_t)m : m == limit ? INT64_MIN : -(int64_t)m;
    return true;
  }
  char small[64];
  char *text = n < sizeof small ? small : take(w->a, n + 1);
  if (text == NULL) return fail_at(w, "out of memory", at);
  memcpy(text, p, n);
  text[n] = '\0';
  errno = 0;
  out->type = NRD_SRV_JSON_REAL;
  out->u.d = strtod(text, NULL);
  if (errno == ERANGE && (out->u.d > 1.0 || out->u.d < -1.0)) return fail_at(w, "real number overflow", at);
  return true;
}

static bool literal(walker *w, const jsmntok_t *t, nrd_srv_json *out) {
  const char *p = w->s + t->start;
  size_t n = (size_t)(t->end - t->start);
  if (n == 4 && memcmp(p, "true", 4) == 0)
    out->type = NRD_SRV_JSON_TRUE;
  else if (n == 5 && memcmp(p, "false", 5) == 0)
    out->type = NRD_SRV_JSON_FALSE;
  else if (n == 4 && memcmp(p, "null", 4) == 0)
    out->type = NRD_SRV_JSON_NULL;
  else
    return number(w, p, n, (size_t)t->start, out);
  return true;
}

static bool walk(walker *w, nrd_srv_json *out, int depth);

/* Keeps the last of members with the same key, in place. Returns how many
 * are left, or NONE when out of memory. */
static size_t drop_repeats(nrd_srv_json_member *m, size_t n) {
  bool drop_small[32];
  bool *drop = n <= 32 ? drop_small : calloc(n, sizeof *drop);
  if (drop == NULL) return NONE;
  if (n <= 32) memset(drop_small, 0, n * sizeof *drop);
  bool ok = find_repeats(m, n, drop);
  size_t kept = 0;
  for (size_t i = 0; ok && i < n; i++)
    if (!drop[i]) m[kept++] = m[i];
  if (drop != drop_small) free(drop);
  return ok ? kept : NONE;
}

/* Children are the tokens that begin before the closing bracket; jsmn's
 * count of them (t->size) is exact for well-formed text and only sizes
 * the vector here. */
static bool walk_array(walker *w, const jsmntok_t *t, nrd_srv_json *out, int depth) {
  size_t close = (size_t)t->end - 1, cap = (size_t)t->size, n = 0;
  nrd_srv_json *items = cap ? take(w->a, cap * sizeof *items) : NULL;
  if (cap && items == NULL) return fail_at(w, "out of memory", (size_t)t->start);
  w->pos = (size_t)t->start + 1;
  for (size_t at; (at = next_begin(w, close)) != NONE; n++) {
    if (!between(w, at, n ? ',' : 0, n ? "expected ',' or ']'" : "expected a value or ']'", "expected a value"))
      return false;
    if (n == cap) return fail_at(w, "invalid JSON", at);
    if (!walk(w, &items[n], depth + 1)) return false;
  }
  if (!closing(w, close, n ? "expected ',' or ']'" : "expected a value or ']'", "expected a value")) return false;
  *out = (nrd_srv_json){.type = NRD_SRV_JSON_ARRAY, .n = n, .u.items = items};
  return true;
}

static bool walk_object(walker *w, const jsmntok_t *t, nrd_srv_json *out, int depth) {
  size_t close = (size_t)t->end - 1, cap = (size_t)t->size, n = 0;
  nrd_srv_json_member *members = cap ? take(w->a, cap * sizeof *members) : NULL;
  if (cap && members == NULL) return fail_at(w, "out of memory", (size_t)t->start);
  w->pos = (size_t)t->start + 1;
  for (size_t at; (at = next_begin(w, close)) != NONE; n++) {
    if (!between(w, at, n ? ',' : 0, n ? "expected ',' or '}'" : "expected a string key or '}'",
                 "expected a string key"))
      return false;
    const jsmntok_t *k = &w->tok[w->next];
    if (k->type != JSMN_STRING) return fail_at(w, "expected a string key", at);
    if (n == cap) return fail_at(w, "invalid JSON", at);
    nrd_srv_json_member *m = &members[n];
    if (!decode_string(w, k, &m->key, &m->key_len, "\\u0000 is not allowed in an object key")) return false;
    w->next++;
    w->pos = tok_finish(k);
    size_t value_at = next_begin(w, close);
    if (value_at == NONE) {
      size_t p = skip_blanks(w, w->pos);
      if (p < w->len && w->s[p] == ':') return fail_at(w, "expected a value", skip_blanks(w, p + 1));
      return fail_at(w, "expected ':'", p);
    }
    if (!between(w, value_at, ':', "expected ':'", "expected a value")) return false;
    if (!walk(w, &m->value, depth + 1)) return false;
  }
  if (!closing(w, close, n ? "expected ',' or '}'" : "expected a string key or '}'", "expected a string key"))
    return false;
  size_t kept = n > 1 ? drop_repeats(members, n) : n;
  if (kept == NONE) return fail_at(w, "out of memory", (size_t)t->start);
  *out = (nrd_srv_json){.type = NRD_SRV_JSON_OBJECT, .n = kept, .u.members = members};
  return true;
}

/* Reads the next token and everything under it into *out. depth: the
 * containers around it. */
static bool walk(walker *w, nrd_srv_json *out, int depth) {
  const jsmntok_t *t = &w->tok[w->next++];
  switch (t->type) {
    case JSMN_ARRAY:
    case JSMN_OBJECT:
      if (depth == MAX_DEPTH) return fail_at(w, "nested too deeply", (size_t)t->start);
      return t->type == JSMN_ARRAY ? walk_array(w, t, out, depth) : walk_object(w, t, out, depth);
    case JSMN_STRING:
      out->type = NRD_SRV_JSON_STRING;
      if (!decode_string(w, t, &out->u.s, &out->n, "\\u0000 is not allowed in a string")) return false;
      w->pos = tok_finish(t);
      return true;
    case JSMN_PRIMITIVE:
      if (!literal(w, t, out)) return false;
      w->pos = (size_t)t->end;
      return true;
    default: return fail_at(w, "invalid JSON", (size_t)t->start);
  }
}

/* Containers open at the token jsmn is filling (for a quick refusal of
 * deep nesting before the token vector grows for it). */
static int open_depth(const jsmntok_t *tok, int i) {
  int d = 0;
  for (; i >= 0; i = tok[i].parent) d += tok[i].type == JSMN_ARRAY || tok[i].type == JSMN_OBJECT;
  return d;
}

/* jsmn's tokens for the whole text in *tok (local, or a malloc'ed vector
 * the caller frees), their count in *n; or false with why/at set. */
static bool tokenize(walker *w, jsmntok_t *local, jsmntok_t **tok, size_t *n) {
  jsmn_parser p;
  jsmn_init(&p);
  unsigned cap = STACK_TOKENS;
  *tok = local;
  int r;
  while ((r = jsmn_parse(&p, w->s, w->len, *tok, cap)) == JSMN_ERROR_NOMEM) {
    if (open_depth(*tok, p.toksuper) > MAX_DEPTH) return fail_at(w, "nested too deeply", p.pos);
    /* doubling: a text has at most one token per byte, so the vector
     * never exceeds twice what the text needs */
    jsmntok_t *more = cap <= UINT_MAX / 2 ? malloc((size_t)cap * 2 * sizeof **tok) : NULL;
    if (more == NULL) return fail_at(w, "out of memory", p.pos);
    memcpy(more, *tok, (size_t)cap * sizeof **tok); /* all of them are in use */
    if (*tok != local) free(*tok);
    *tok = more;
    cap *= 2;
  }
  if (r >= 0) {
    *n = p.toknext;
    return true;
  }
  /* jsmn stops at a NUL byte as if the text ended there. */
  size_t at = p.pos;
  if (r == JSMN_ERROR_PART && at < w->len && w->s[at] == '"') return fail_at(w, "unterminated string", at);
  if (r == JSMN_ERROR_PART && at >= w->len) return fail_at(w, "premature end of the text", at);
  if (r == JSMN_ERROR_INVAL && at < w->len && w->s[at] == '"') return fail_at(w, "invalid escape in a string", at);
  return fail_at(w, "invalid JSON", at);
}

static void set_error(char *err, size_t errlen, const char *why, size_t at) {
  if (errlen) snprintf(err, errlen, "%s at byte %zu", why, at);
}

const nrd_srv_json *nrd_srv_json_parse(nrd_srv_json_arena *a, const char *buf, size_t len, char *err, size_t errlen) {
  nrd_srv_json_arena_reset(a);
  if (len >= INT_MAX) { /* jsmn keeps offsets in int */
    set_error(err, errlen, "JSON text too long", 0);
    return NULL;
  }
  walker w = {.a = a, .s = buf, .len = len};
  jsmntok_t local[STACK_TOKENS], *tok = local;
  nrd_srv_json *root = NULL;
  if (tokenize(&w, local, &tok, &w.ntok)) {
    w.tok = tok;
    size_t first = skip_blanks(&w, 0);
    if (w.ntok == 0) {
      fail_at(&w, first == len ? "empty document" : "expected a value", first);
    } else if ((root = take(a, sizeof *root)) == NULL) {
      fail_at(&w, "out of memory", 0);
    } else if (between(&w, tok_begin(&tok[0]), 0, "expected a value", NULL) && walk(&w, root, 0)) {
      size_t end = skip_blanks(&w, w.pos);
      if (end != len) fail_at(&w, "trailing characters after the document", end);
    }
  }
  if (tok != local) free(tok);
  if (w.why == NULL) return root;
  set_error(err, errlen, w.why, w.at);
  nrd_srv_json_arena_reset(a);
  return NULL;
}

/* ---- the last document, kept ---------------------------------------------- */

const nrd_srv_json *nrd_srv_json_memo_parse(nrd_srv_json_memo *m, const char *buf, size_t len, char *err,
                                            size_t errlen) {
  if (m->root && len == m->len && memcmp(buf, m->text, len) == 0) return m->root;
  m->root = NULL;
  m->len = 0;
  if (m->arena == NULL && (m->arena = nrd_srv_json_arena_new()) == NULL) {
    set_error(err, errlen, "out of memory", 0);
    return NULL;
  }
  const nrd_srv_json *root = nrd_srv_json_parse(m->arena, buf, len, err, errlen);
  if (root == NULL || len > NRD_SRV_JSON_MEMO_MAX) return root; /* valid until the next parse all the same */
  if (len > m->cap) {
    char *t = realloc(m->text, len);
    if (t == NULL) return root; /* not kept, still parsed */
    m->text = t;
    m->cap = len;
  }
  memcpy(m->text, buf, len);
  m->len = len;
  m->root = root;
  return root;
}

void nrd_srv_json_memo_free(nrd_srv_json_memo *m) {
  nrd_srv_json_arena_free(m->arena);
  free(m->text);
  *m = (nrd_srv_json_memo){0};
}
