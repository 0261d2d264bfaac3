/* Bump arenas for jansson documents (see json_arena.h).
 *
 * All arenas live in one region reserved at the first nrd_srv_json_arena_new
 * (address space only: pages become resident when touched), so the free
 * hook recognises arena memory by its address whatever thread frees it. */
#include "json_arena.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

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

static void *hook_malloc(size_t n) {
  nrd_srv_json_arena *a = filling;
  if (a != NULL) {
    size_t start = (a->used + ALIGN - 1) & ~(size_t)(ALIGN - 1);
    if (n <= SLOT_BYTES && start + n + REDZONE <= SLOT_BYTES) {
      a->used = start + n + REDZONE;
      UNPOISON(a->base + start, n);
      return a->base + start;
    }
  }
  return malloc(n); /* no arena, or it is full: the free hook tells them apart */
}

static void hook_free(void *p) {
  if (!in_region(p)) free(p);
}

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

json_t *nrd_srv_json_arena_loadb(nrd_srv_json_arena *a, const char *buf, size_t len, size_t flags,
                                 json_error_t *err) {
  filling = a;
  json_t *doc = json_loadb(buf, len, flags, err);
  filling = NULL;
  if (doc == NULL) nrd_srv_json_arena_drop(a, NULL); /* jansson freed the pieces */
  return doc;
}

void nrd_srv_json_arena_drop(nrd_srv_json_arena *a, json_t *doc) {
  json_decref(doc);
  if (a == NULL) return;
  POISON(a->base, a->used);
  a->used = 0;
}

size_t nrd_srv_json_arena_used(const nrd_srv_json_arena *a) { return a ? a->used : 0; }
