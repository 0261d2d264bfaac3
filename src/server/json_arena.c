/* Read-only JSON documents in a bump arena, parsed by yajl (see
 * json_arena.h). */
#include "json_arena.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <yajl/yajl_parse.h>

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

/* yajl events push values on a stack; a closing container takes its
 * values off it into one vector. */
typedef struct builder {
  nrd_srv_json_arena *a;
  nrd_srv_json *root;
  nrd_srv_json_member *stack; /* values of the open containers, in order */
  size_t top, cap;
  nrd_srv_json_member stack_inline[64];
  struct {
    size_t start;     /* its first value on the stack */
    bool object;
    const char *key;  /* its own key in the parent object, or NULL */
    size_t key_len;
  } open[MAX_DEPTH];
  int depth;
  const char *key; /* the pending key of the innermost object */
  size_t key_len;
  const char *why; /* our own reason for stopping, or NULL: yajl's */
} builder;

struct nrd_srv_json_arena {
  chunk *first; /* made at the first parse */
  chunk *cur;   /* the block allocations come from */
  size_t used;  /* bytes handed out since the reset */
  builder b;    /* the parse under way (one at a time) */
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
    if (c == NULL) a->first = fresh;
    else c->next = fresh;
    a->cur = c = fresh;
  }
  void *p = c->data + c->used;
  c->used += n + REDZONE;
  a->used += n + REDZONE;
  UNPOISON(p, n);
  return p;
}

/* yajl's own memory (handle, lexer, buffers) comes from the arena too and
 * goes with the reset; realloc needs each block's size, kept before it. */
static void *yajl_take(void *ctx, size_t n) {
  size_t *p = n <= SIZE_MAX - ALIGN ? take(ctx, n + ALIGN) : NULL;
  if (p == NULL) return NULL;
  p[0] = n;
  return (char *)p + ALIGN;
}

static void yajl_leave(void *ctx, void *p) {
  (void)ctx;
  (void)p;
}

static void *yajl_grow(void *ctx, void *p, size_t n) {
  if (p == NULL) return yajl_take(ctx, n);
  size_t old = *(size_t *)((char *)p - ALIGN);
  if (n <= old) return p;
  void *q = yajl_take(ctx, n);
  if (q) memcpy(q, p, old);
  return q;
}

/* ---- building ------------------------------------------------------------- */


static int fail(builder *b, const char *why) {
  b->why = why;
  return 0;
}

static const char *copy_text(builder *b, const unsigned char *s, size_t len) {
  char *t = len < SIZE_MAX ? take(b->a, len + 1) : NULL;
  if (t == NULL) return NULL;
  memcpy(t, s, len);
  t[len] = '\0';
  return t;
}

/* Puts a finished value where the document is. */
static int add(builder *b, nrd_srv_json v, const char *key, size_t key_len) {
  if (b->depth == 0) {
    b->root = take(b->a, sizeof *b->root);
    if (b->root == NULL) return fail(b, "out of memory");
    *b->root = v;
    return 1;
  }
  if (b->top == b->cap) {
    size_t cap = b->cap * 2;
    nrd_srv_json_member *s = malloc(cap * sizeof *s);
    if (s == NULL) return fail(b, "out of memory");
    memcpy(s, b->stack, b->top * sizeof *s);
    if (b->stack != b->stack_inline) free(b->stack);
    b->stack = s;
    b->cap = cap;
  }
  b->stack[b->top++] = (nrd_srv_json_member){key, key_len, v};
  return 1;
}

static int add_here(builder *b, nrd_srv_json v) {
  bool in_object = b->depth > 0 && b->open[b->depth - 1].object;
  return add(b, v, in_object ? b->key : NULL, in_object ? b->key_len : 0);
}

static int on_null(void *ctx) { return add_here(ctx, (nrd_srv_json){.type = NRD_SRV_JSON_NULL}); }

static int on_boolean(void *ctx, int v) {
  return add_here(ctx, (nrd_srv_json){.type = v ? NRD_SRV_JSON_TRUE : NRD_SRV_JSON_FALSE});
}

/* Numbers arrive as text so that their range is jansson's: every int64
 * (yajl's own integers stop short of INT64_MIN), reals as strtod reads
 * them in the C locale. */
static int on_number(void *ctx, const char *text, size_t len) {
  builder *b = ctx;
  char small[64];
  char *s = len < sizeof small ? small : malloc(len + 1);
  if (s == NULL) return fail(b, "out of memory");
  memcpy(s, text, len);
  s[len] = '\0';
  nrd_srv_json v = {.type = NRD_SRV_JSON_INT};
  errno = 0;
  if (strpbrk(s, ".eE") != NULL) {
    v.type = NRD_SRV_JSON_REAL;
    v.u.d = strtod(s, NULL);
    if (errno == ERANGE && (v.u.d > 1.0 || v.u.d < -1.0)) b->why = "real number overflow";
  } else {
    long long i = strtoll(s, NULL, 10);
    if (errno == ERANGE) b->why = i < 0 ? "too big negative integer" : "too big integer";
    v.u.i = i;
  }
  if (s != small) free(s);
  return b->why ? 0 : add_here(b, v);
}

static int on_string(void *ctx, const unsigned char *s, size_t len) {
  builder *b = ctx;
  if (memchr(s, '\0', len)) return fail(b, "\\u0000 is not allowed in a string"); /* as jansson */
  const char *t = copy_text(b, s, len); /* yajl checked the UTF-8 */
  if (t == NULL) return fail(b, "out of memory");
  return add_here(b, (nrd_srv_json){.type = NRD_SRV_JSON_STRING, .n = len, .u.s = t});
}

static int on_map_key(void *ctx, const unsigned char *k, size_t len) {
  builder *b = ctx;
  if (memchr(k, '\0', len)) return fail(b, "\\u0000 is not allowed in an object key");
  if ((b->key = copy_text(b, k, len)) == NULL) return fail(b, "out of memory");
  b->key_len = len;
  return 1;
}

static int open_container(builder *b, bool object) {
  if (b->depth == MAX_DEPTH) return fail(b, "nested too deeply");
  bool in_object = b->depth > 0 && b->open[b->depth - 1].object;
  b->open[b->depth].start = b->top;
  b->open[b->depth].object = object;
  b->open[b->depth].key = in_object ? b->key : NULL;
  b->open[b->depth].key_len = in_object ? b->key_len : 0;
  b->depth++;
  return 1;
}

static int on_start_map(void *ctx) { return open_container(ctx, true); }
static int on_start_array(void *ctx) { return open_container(ctx, false); }

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

static int on_end(void *ctx) {
  builder *b = ctx;
  b->depth--;
  size_t start = b->open[b->depth].start, n = b->top - start;
  const nrd_srv_json_member *m = b->stack + start;
  nrd_srv_json v = {.type = b->open[b->depth].object ? NRD_SRV_JSON_OBJECT : NRD_SRV_JSON_ARRAY};
  if (v.type == NRD_SRV_JSON_ARRAY) {
    nrd_srv_json *items = n ? take(b->a, n * sizeof *items) : NULL;
    if (n && items == NULL) return fail(b, "out of memory");
    for (size_t i = 0; i < n; i++) items[i] = m[i].value;
    v.n = n;
    v.u.items = items;
  } else {
    bool drop_small[32];
    bool *drop = n <= 32 ? drop_small : calloc(n, sizeof *drop);
    if (n <= 32) memset(drop_small, 0, n * sizeof *drop);
    nrd_srv_json_member *members = n ? take(b->a, n * sizeof *members) : NULL;
    if (drop == NULL || (n && members == NULL) || !find_repeats(m, n, drop)) {
      if (drop != drop_small) free(drop);
      return fail(b, "out of memory");
    }
    for (size_t i = 0; i < n; i++)
      if (!drop[i]) members[v.n++] = m[i];
    if (drop != drop_small) free(drop);
    v.u.members = members;
  }
  b->top = start;
  return add(b, v, b->open[b->depth].key, b->open[b->depth].key_len);
}

static const yajl_callbacks events = {
    .yajl_null = on_null,
    .yajl_boolean = on_boolean,
    .yajl_number = on_number,
    .yajl_string = on_string,
    .yajl_start_map = on_start_map,
    .yajl_map_key = on_map_key,
    .yajl_end_map = on_end,
    .yajl_start_array = on_start_array,
    .yajl_end_array = on_end,
};

static void set_error(char *err, size_t errlen, const char *why, size_t at) {
  if (errlen) snprintf(err, errlen, "%s at byte %zu", why, at);
}

const nrd_srv_json *nrd_srv_json_parse(nrd_srv_json_arena *a, const char *buf, size_t len, char *err,
                                       size_t errlen) {
  nrd_srv_json_arena_reset(a);
  builder *b = &a->b;
  b->a = a;
  b->root = NULL;
  b->stack = b->stack_inline;
  b->top = 0;
  b->cap = sizeof b->stack_inline / sizeof b->stack_inline[0];
  b->depth = 0;
  b->key = NULL;
  b->key_len = 0;
  b->why = NULL;
  yajl_alloc_funcs funcs = {yajl_take, yajl_grow, yajl_leave, a};
  yajl_handle h = yajl_alloc(&events, &funcs, b);
  yajl_status st = h ? yajl_parse(h, (const unsigned char *)buf, len) : yajl_status_error;
  if (h && st == yajl_status_ok) st = yajl_complete_parse(h);
  const nrd_srv_json *root = b->root;
  if (h == NULL) {
    set_error(err, errlen, "out of memory", 0);
  } else if (st != yajl_status_ok || root == NULL) {
    size_t at = yajl_get_bytes_consumed(h);
    if (b->why) {
      set_error(err, errlen, b->why, at);
    } else {
      unsigned char *msg = yajl_get_error(h, 0, (const unsigned char *)buf, len);
      char text[160];
      snprintf(text, sizeof text, "%s", msg ? (const char *)msg : "invalid JSON");
      size_t n = strlen(text);
      while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == ' ')) text[--n] = '\0';
      set_error(err, errlen, text, at);
    }
    root = NULL;
  }
  if (b->stack != b->stack_inline) free(b->stack);
  if (root == NULL) nrd_srv_json_arena_reset(a);
  return root;
}
