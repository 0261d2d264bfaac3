/* Short-lived JSON documents on the request path (inference headers).
 *
 * jsmn (Debian's header-only tokenizer) splits the text; a walk over its
 * tokens checks the rest of the grammar and builds a small read-only tree
 * in a bump arena that one call resets. Objects and arrays are vectors,
 * so reading a member is a scan of a few keys (no hashing) and dropping a
 * document frees nothing piece by piece. (A jansson document cost 4,100
 * more instructions per small HTTP request than the tree; yajl's events
 * feeding the tree cost about 8,000 more than jsmn's tokens; callgrind.)
 *
 * Values keep jansson's rules, which the rest of the server follows for
 * JSON: every int64 (INT64_MIN too) is an integer, a number with '.', 'e'
 * or 'E' is a real, integers and reals out of range are refused, strings
 * are valid UTF-8 without NUL (and so are NUL-terminated C strings), the
 * last of repeated object keys wins, nesting stops at 128 levels. */
#ifndef NRD_SRV_JSON_ARENA_H
#define NRD_SRV_JSON_ARENA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct nrd_srv_json_arena nrd_srv_json_arena;

typedef enum nrd_srv_json_type {
  NRD_SRV_JSON_NULL,
  NRD_SRV_JSON_FALSE,
  NRD_SRV_JSON_TRUE,
  NRD_SRV_JSON_INT,
  NRD_SRV_JSON_REAL,
  NRD_SRV_JSON_STRING,
  NRD_SRV_JSON_ARRAY,
  NRD_SRV_JSON_OBJECT,
} nrd_srv_json_type;

typedef struct nrd_srv_json nrd_srv_json;
typedef struct nrd_srv_json_member nrd_srv_json_member;

/* One value. n: a string's bytes (a NUL follows them), an array's items,
 * an object's members (no two with the same key, in document order). */
struct nrd_srv_json {
  nrd_srv_json_type type;
  size_t n;
  union {
    int64_t i;
    double d;
    const char *s;
    const nrd_srv_json *items;
    const nrd_srv_json_member *members;
  } u;
};

struct nrd_srv_json_member {
  const char *key; /* NUL-terminated, key_len bytes */
  size_t key_len;
  nrd_srv_json value;
};

/* A new, empty arena (its memory is taken at the first parse), or NULL
 * when out of memory. Free with nrd_srv_json_arena_free. Any thread. */
nrd_srv_json_arena *nrd_srv_json_arena_new(void);

/* Frees the arena and any document in it. NULL is ignored. */
void nrd_srv_json_arena_free(nrd_srv_json_arena *a);

/* Parses len bytes of JSON text (any value at the top) into `a`, after
 * dropping what `a` held. Returns the document, valid until the next
 * parse, reset or free of `a`; or NULL with a NUL-terminated reason ending
 * in "at byte N" in err (errlen > 0). One thread at a time per arena. */
const nrd_srv_json *nrd_srv_json_parse(nrd_srv_json_arena *a, const char *buf, size_t len, char *err, size_t errlen);

/* Bytes of the JSON number at p (n bytes there), or 0 when what stands
 * there is not one by JSON's grammar ("01", "1.", "1e", "-", ".5", "+1").
 * *real (when not NULL) tells whether it has a fraction or an exponent.
 * Stops at the first byte the number cannot take; the caller checks what
 * follows. Pure, any thread. */
size_t nrd_srv_json_number_len(const char *p, size_t n, bool *real);

/* Drops the arena's document and keeps its first block for reuse. */
void nrd_srv_json_arena_reset(nrd_srv_json_arena *a);

/* The last text parsed and its document, kept so that the next parse of
 * the very same bytes costs one comparison: a client sends the same
 * inference header again and again. Zero-initialize; free with
 * nrd_srv_json_memo_free. One thread at a time. */
typedef struct nrd_srv_json_memo {
  nrd_srv_json_arena *arena; /* the document (made at the first parse) */
  char *text; /* a copy of the text it was parsed from */
  size_t len, cap;
  const nrd_srv_json *root; /* NULL: nothing kept */
} nrd_srv_json_memo;

/* As nrd_srv_json_parse; texts of at most NRD_SRV_JSON_MEMO_MAX bytes
 * that parse are kept. The document is valid until the next parse or
 * free of m, and must not be changed. */
#define NRD_SRV_JSON_MEMO_MAX (16 * 1024)
const nrd_srv_json *nrd_srv_json_memo_parse(nrd_srv_json_memo *m, const char *buf, size_t len, char *err,
                                            size_t errlen);

/* Frees what m keeps; m is empty afterwards. */
void nrd_srv_json_memo_free(nrd_srv_json_memo *m);

/* Bytes of the arena in use now (0 after a reset). */
size_t nrd_srv_json_arena_used(const nrd_srv_json_arena *a);

/* ---- reading: every function takes NULL and any type ---------------------- */

static inline bool nrd_srv_json_is(const nrd_srv_json *v, nrd_srv_json_type t) { return v && v->type == t; }
static inline bool nrd_srv_json_is_string(const nrd_srv_json *v) { return nrd_srv_json_is(v, NRD_SRV_JSON_STRING); }
static inline bool nrd_srv_json_is_int(const nrd_srv_json *v) { return nrd_srv_json_is(v, NRD_SRV_JSON_INT); }
static inline bool nrd_srv_json_is_real(const nrd_srv_json *v) { return nrd_srv_json_is(v, NRD_SRV_JSON_REAL); }
static inline bool nrd_srv_json_is_true(const nrd_srv_json *v) { return nrd_srv_json_is(v, NRD_SRV_JSON_TRUE); }
static inline bool nrd_srv_json_is_array(const nrd_srv_json *v) { return nrd_srv_json_is(v, NRD_SRV_JSON_ARRAY); }
static inline bool nrd_srv_json_is_object(const nrd_srv_json *v) { return nrd_srv_json_is(v, NRD_SRV_JSON_OBJECT); }
static inline bool nrd_srv_json_is_bool(const nrd_srv_json *v) {
  return v && (v->type == NRD_SRV_JSON_TRUE || v->type == NRD_SRV_JSON_FALSE);
}

/* The string, or NULL when v is not one. */
static inline const char *nrd_srv_json_str(const nrd_srv_json *v) {
  return nrd_srv_json_is(v, NRD_SRV_JSON_STRING) ? v->u.s : NULL;
}

/* The integer, or 0 when v is not one. */
static inline int64_t nrd_srv_json_int(const nrd_srv_json *v) {
  return nrd_srv_json_is(v, NRD_SRV_JSON_INT) ? v->u.i : 0;
}

/* The real, or 0 when v is not one (integers are not reals). */
static inline double nrd_srv_json_real(const nrd_srv_json *v) {
  return nrd_srv_json_is(v, NRD_SRV_JSON_REAL) ? v->u.d : 0;
}

/* Items of an array, members of an object, 0 for anything else. */
static inline size_t nrd_srv_json_size(const nrd_srv_json *v) {
  return v && (v->type == NRD_SRV_JSON_ARRAY || v->type == NRD_SRV_JSON_OBJECT) ? v->n : 0;
}

/* Item i of an array, or NULL. */
static inline const nrd_srv_json *nrd_srv_json_at(const nrd_srv_json *v, size_t i) {
  return nrd_srv_json_is(v, NRD_SRV_JSON_ARRAY) && i < v->n ? &v->u.items[i] : NULL;
}

/* Member `key` of an object, or NULL. */
static inline const nrd_srv_json *nrd_srv_json_get(const nrd_srv_json *v, const char *key) {
  if (!nrd_srv_json_is(v, NRD_SRV_JSON_OBJECT)) return NULL;
  size_t len = strlen(key);
  for (size_t i = 0; i < v->n; i++) {
    const nrd_srv_json_member *m = &v->u.members[i];
    if (m->key_len == len && memcmp(m->key, key, len) == 0) return &m->value;
  }
  return NULL;
}

#endif
