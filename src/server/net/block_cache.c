/* Size-classed free lists for one thread (see block_cache.h). */
#include "block_cache.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

/* Every block starts with a 16-byte header (keeping the caller's bytes
 * 16-byte aligned) whose first byte is its class, or LARGE. */
#define HEADER 16
#define LARGE 0xff
#define SMALLEST 64 /* class k holds SMALLEST << k bytes, header included */

_Static_assert((SMALLEST << (NRD_SRV_BLOCK_CACHE_CLASSES - 1)) - HEADER == NRD_SRV_BLOCK_CACHE_MAX_SIZE,
               "NRD_SRV_BLOCK_CACHE_MAX_SIZE names the largest class");

static size_t class_bytes(unsigned k) { return (size_t)SMALLEST << k; }

static unsigned class_of(size_t size) {
  for (unsigned k = 0; k < NRD_SRV_BLOCK_CACHE_CLASSES; k++)
    if (size <= class_bytes(k) - HEADER) return k;
  return LARGE;
}

/* The caller's usable bytes in block p, SIZE_MAX for a large one. */
static size_t usable(const void *p) {
  unsigned k = ((const uint8_t *)p - HEADER)[0];
  return k == LARGE ? SIZE_MAX : class_bytes(k) - HEADER;
}

void nrd_srv_block_cache_init(nrd_srv_block_cache *bc) { memset(bc, 0, sizeof *bc); }

void nrd_srv_block_cache_destroy(nrd_srv_block_cache *bc) {
  for (unsigned k = 0; k < NRD_SRV_BLOCK_CACHE_CLASSES; k++) {
    while (bc->n_free[k] > 0) {
      uint8_t *b = bc->free_blocks[k][--bc->n_free[k]];
      UNPOISON(b, class_bytes(k));
      free(b);
    }
  }
}

void *nrd_srv_block_malloc(size_t size, void *cache) {
  nrd_srv_block_cache *bc = cache;
  unsigned k = class_of(size);
  uint8_t *b;
  if (k != LARGE && bc->n_free[k] > 0) {
    b = bc->free_blocks[k][--bc->n_free[k]];
    UNPOISON(b, class_bytes(k));
  } else {
    if (k == LARGE && size > SIZE_MAX - HEADER) return NULL;
    b = malloc(k == LARGE ? size + HEADER : class_bytes(k));
    if (b == NULL) return NULL;
  }
  b[0] = (uint8_t)k;
  return b + HEADER;
}

void nrd_srv_block_free(void *p, void *cache) {
  if (p == NULL) return;
  nrd_srv_block_cache *bc = cache;
  uint8_t *b = (uint8_t *)p - HEADER;
  unsigned k = b[0];
  if (k == LARGE || bc->n_free[k] == NRD_SRV_BLOCK_CACHE_DEPTH) {
    free(b);
    return;
  }
  bc->free_blocks[k][bc->n_free[k]++] = b;
  POISON(b, class_bytes(k)); /* ASan still sees use after free */
}

void *nrd_srv_block_calloc(size_t n, size_t size, void *cache) {
  if (size != 0 && n > SIZE_MAX / size) return NULL;
  void *p = nrd_srv_block_malloc(n * size, cache);
  if (p) memset(p, 0, n * size);
  return p;
}

void *nrd_srv_block_realloc(void *p, size_t size, void *cache) {
  if (p == NULL) return nrd_srv_block_malloc(size, cache);
  size_t have = usable(p);
  if (have == SIZE_MAX) { /* large stays large: libc moves it */
    if (size > SIZE_MAX - HEADER) return NULL;
    uint8_t *b = realloc((uint8_t *)p - HEADER, size + HEADER);
    return b ? b + HEADER : NULL;
  }
  if (size <= have) return p;
  void *q = nrd_srv_block_malloc(size, cache);
  if (q == NULL) return NULL;
  memcpy(q, p, have);
  nrd_srv_block_free(p, cache);
  return q;
}
