/* Bump arenas for jansson documents, parsed by yajl (see json_arena.h).
 *
 * All arenas live in one region reserved at the first nrd_srv_json_arena_new
 * (address space only: pages become resident when touched), so the free
 * hook recognises arena memory by its address whatever thread frees it. */
#include "json_arena.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

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

#define SLOT_BYTES (64 * 1024)
#define SLOTS 64
#define ALIGN 16

struct nrd_srv_json_arena {
  char *base;
  size_t used;
  int slot;
  bool spilled; /* part of the live document came from malloc */
};

static pthread_mutex_t region_mu = PTHREAD_MUTEX_INITIALIZER;
static char *region;                /* SLOTS * SLOT_BYTES, set once */
static _Atomic(uintptr_t) region_lo; /* region's bounds for the free hook */
static uint64_t slots_used;         /* bit i: slot i taken; under region_mu */

/* The arena a parse on this thread is filling, or NULL. */
static __thread nrd_srv_json_arena *filling;

static bool in_region(const void *p) {
  uintptr_t lo = atomic_load_explicit(&region_lo, memory_order_relaxed);
  uintptr_t u = (uintptr_t)p;
  return lo != 0 && u >= lo && u < lo + (uintptr_t)SLOTS * SLOT_BYTES;
}

/* n bytes from the arena being filled on this thread, or NULL (no arena,
 * or no room left). */
static void *arena_take(size_t n) {
  nrd_srv_json_arena *a = filling;
  if (a == NULL) return NULL;
  size_t start = (a->used + ALIGN - 1) & ~(size_t)(ALIGN - 1);
  if (n > SLOT_BYTES || start + n + REDZONE > SLOT_BYTES) return NULL;
  a->used = start + n + REDZONE;
  UNPOISON(a->base + start, n);
  return a->base + start;
}

/* The free hooks tell arena memory from malloc's by its address. */
static void *hook_malloc(size_t n) {
  void *p = arena_take(n);
  if (p) return p;
  if (filling) filling->spilled = true;
  return malloc(n);
}

static void hook_free(void *p) {
  if (!in_region(p)) free(p);
}

/* yajl's own memory (its handle, lexer and buffers) comes from the arena
 * too; yajl grows buffers with realloc, so arena blocks carry their size. */
static void *yajl_hook_malloc(void *ctx, size_t n) {
  (void)ctx;
  size_t *p = n <= SLOT_BYTES ? arena_take(n + ALIGN) : NULL;
  if (p == NULL) return malloc(n);
  p[0] = n;
  return (char *)p + ALIGN;
}

static void yajl_hook_free(void *ctx, void *p) {
  (void)ctx;
  if (!in_region(p)) free(p);
}

static void *yajl_hook_realloc(void *ctx, void *p, size_t n) {
  if (p == NULL) return yajl_hook_malloc(ctx, n);
  if (!in_region(p)) return realloc(p, n);
  size_t old = *(size_t *)((char *)p - ALIGN);
  void *q = yajl_hook_malloc(ctx, n);
  if (q) memcpy(q, p, old < n ? old : n);
  return q;
}

static yajl_alloc_funcs yajl_hooks = {yajl_hook_malloc, yajl_hook_realloc, yajl_hook_free, NULL};

void nrd_srv_json_arena_setup(void) { json_set_alloc_funcs(hook_malloc, hook_free); }

nrd_srv_json_arena *nrd_srv_json_arena_new(void) {
  nrd_srv_json_arena *a = calloc(1, sizeof *a);
  if (a == NULL) return NULL;
  pthread_mutex_lock(&region_mu);
  if (region == NULL) {
    void *r = mmap(NULL, (size_t)SLOTS * SLOT_BYTES, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (r != MAP_FAILED) {
      region = r;
      POISON(region, (size_t)SLOTS * SLOT_BYTES);
      atomic_store_explicit(&region_lo, (uintptr_t)r, memory_order_relaxed);
    }
  }
  int slot = -1;
  for (int i = 0; region != NULL && i < SLOTS; i++) {
    if (!(slots_used & (UINT64_C(1) << i))) {
      slots_used |= UINT64_C(1) << i;
      slot = i;
      break;
    }
  }
  pthread_mutex_unlock(&region_mu);
  if (slot < 0) {
    free(a);
    return NULL;
  }
  a->slot = slot;
  a->base = region + (size_t)slot * SLOT_BYTES;
  return a;
}

void nrd_srv_json_arena_free(nrd_srv_json_arena *a) {
  if (a == NULL) return;
  /* Hand the pages back so an idle server stays small. */
  madvise(a->base, SLOT_BYTES, MADV_DONTNEED);
  POISON(a->base, SLOT_BYTES);
  pthread_mutex_lock(&region_mu);
  slots_used &= ~(UINT64_C(1) << a->slot);
  pthread_mutex_unlock(&region_mu);
  free(a);
}

/* ---- parsing: yajl events build the jansson document ------------------------ */

#define MAX_DEPTH 128

typedef struct builder {
  json_t *root;
  json_t *open[MAX_DEPTH]; /* containers being filled, borrowed from their parents */
  int depth;
  char key_inline[128];
  char *key; /* the pending object key: key_inline or malloc'ed */
  size_t key_len;
  const char *why; /* our own reason for stopping, or NULL: yajl's */
} builder;

/* Attaches v (a new reference, consumed) where the document is. */
static int attach(builder *b, json_t *v) {
  if (v == NULL) {
    b->why = "out of memory";
    return 0;
  }
  if (b->depth == 0) {
    b->root = v;
    return 1;
  }
  json_t *top = b->open[b->depth - 1];
  int rc = json_is_object(top) ? json_object_setn_new_nocheck(top, b->key, b->key_len, v)
                               : json_array_append_new(top, v);
  if (rc != 0) b->why = "out of memory";
  return rc == 0;
}

static int open_container(builder *b, json_t *v) {
  if (b->depth == MAX_DEPTH) {
    json_decref(v);
    b->why = "nested too deeply";
    return 0;
  }
  if (!attach(b, v)) return 0;
  b->open[b->depth++] = v;
  return 1;
}

static int on_null(void *ctx) { return attach(ctx, json_null()); }
static int on_boolean(void *ctx, int v) { return attach(ctx, json_boolean(v)); }
/* Numbers arrive as text so that their range is jansson's: every int64
 * (yajl's own integers stop short of INT64_MIN), reals as strtod reads
 * them in the C locale. */
static int on_number(void *ctx, const char *text, size_t len) {
  builder *b = ctx;
  char small[64];
  char *s = len < sizeof small ? small : malloc(len + 1);
  if (s == NULL) {
    b->why = "out of memory";
    return 0;
  }
  memcpy(s, text, len);
  s[len] = '\0';
  bool real = strpbrk(s, ".eE") != NULL;
  char *end = NULL;
  errno = 0;
  json_t *v = NULL;
  if (real) {
    double d = strtod(s, &end);
    if (errno == ERANGE && (d > 1.0 || d < -1.0)) b->why = "real number overflow";
    else v = json_real(d);
  } else {
    long long i = strtoll(s, &end, 10);
    if (errno == ERANGE) b->why = i < 0 ? "too big negative integer" : "too big integer";
    else v = json_integer((json_int_t)i);
  }
  if (s != small) free(s);
  return b->why ? 0 : attach(b, v);
}

static int on_string(void *ctx, const unsigned char *s, size_t len) {
  builder *b = ctx;
  if (memchr(s, '\0', len)) { /* as jansson: no NUL inside strings */
    b->why = "\\u0000 is not allowed in a string";
    return 0;
  }
  return attach(b, json_stringn_nocheck((const char *)s, len)); /* yajl checked the UTF-8 */
}

static int on_map_key(void *ctx, const unsigned char *k, size_t len) {
  builder *b = ctx;
  if (memchr(k, '\0', len)) {
    b->why = "\\u0000 is not allowed in an object key";
    return 0;
  }
  if (b->key != b->key_inline) free(b->key);
  b->key = len < sizeof b->key_inline ? b->key_inline : malloc(len + 1);
  if (b->key == NULL) {
    b->key = b->key_inline;
    b->why = "out of memory";
    return 0;
  }
  memcpy(b->key, k, len);
  b->key[len] = '\0';
  b->key_len = len;
  return 1;
}

static int on_start_map(void *ctx) { return open_container(ctx, json_object()); }
static int on_start_array(void *ctx) { return open_container(ctx, json_array()); }

static int on_end(void *ctx) {
  builder *b = ctx;
  b->depth--;
  return 1;
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

static void set_error(json_error_t *err, const char *why, size_t at) {
  if (err == NULL) return;
  memset(err, 0, sizeof *err);
  snprintf(err->text, sizeof err->text, "%s at byte %zu", why, at);
  err->position = (int)(at > INT32_MAX ? INT32_MAX : at);
}

json_t *nrd_srv_json_arena_loadb(nrd_srv_json_arena *a, const char *buf, size_t len,
                                 json_error_t *err) {
  builder b = {0};
  b.key = b.key_inline;
  if (a) a->spilled = false;
  filling = a;
  yajl_handle h = yajl_alloc(&events, &yajl_hooks, &b);
  if (h == NULL) {
    filling = NULL;
    set_error(err, "out of memory", 0);
    return NULL;
  }
  yajl_status st = yajl_parse(h, (const unsigned char *)buf, len);
  if (st == yajl_status_ok) st = yajl_complete_parse(h);
  filling = NULL;
  if (b.key != b.key_inline) free(b.key);
  if (st != yajl_status_ok || b.root == NULL) {
    size_t at = yajl_get_bytes_consumed(h);
    if (b.why) {
      set_error(err, b.why, at);
    } else {
      unsigned char *msg = yajl_get_error(h, 0, (const unsigned char *)buf, len);
      char text[JSON_ERROR_TEXT_LENGTH];
      snprintf(text, sizeof text, "%s", msg ? (const char *)msg : "invalid JSON");
      size_t n = strlen(text);
      while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == ' ')) text[--n] = '\0';
      if (msg) yajl_free_error(h, msg);
      set_error(err, text, at);
    }
    yajl_free(h);
    nrd_srv_json_arena_drop(a, b.root);
    return NULL;
  }
  yajl_free(h);
  return b.root;
}

void nrd_srv_json_arena_drop(nrd_srv_json_arena *a, json_t *doc) {
  /* A document wholly inside the arena goes with the reset; walking it to
   * free nothing would cost as much as a quarter of the parse. */
  if (a == NULL || a->spilled) json_decref(doc);
  if (a == NULL) return;
  POISON(a->base, a->used);
  a->used = 0;
}

size_t nrd_srv_json_arena_used(const nrd_srv_json_arena *a) { return a ? a->used : 0; }
