/* First-fit pool over a fixed region (mem_pool.h). Blocks form one list
 * in address order covering the whole region; a pool has few blocks out at
 * a time (one per in-flight tensor), so a walk is cheap and keeps no
 * hidden cost on free. */
#include "mem_pool.h"

#include <pthread.h>
#include <stdlib.h>

#define ALIGN 256u

typedef struct block {
  uint64_t off, size;
  bool used;
  struct block *next;
} block;

struct nrd_mem_pool {
  pthread_mutex_t lock;
  char *base;
  uint64_t size, used;
  block *head; /* address order; NULL only for a zero-sized pool */
};

nrd_mem_pool *nrd_mem_pool_new(void *base, uint64_t size) {
  nrd_mem_pool *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->base = base;
  p->size = size;
  if (size) {
    p->head = calloc(1, sizeof *p->head);
    if (!p->head) {
      free(p);
      return NULL;
    }
    p->head->size = size;
  }
  pthread_mutex_init(&p->lock, NULL);
  return p;
}

void nrd_mem_pool_delete(nrd_mem_pool *pool) {
  if (!pool) return;
  for (block *b = pool->head, *n; b; b = n) {
    n = b->next;
    free(b);
  }
  pthread_mutex_destroy(&pool->lock);
  free(pool);
}

void *nrd_mem_pool_alloc(nrd_mem_pool *pool, uint64_t bytes) {
  if (bytes > UINT64_MAX - ALIGN) return NULL;
  uint64_t want = (bytes ? bytes + ALIGN - 1 : ALIGN) / ALIGN * ALIGN;
  void *out = NULL;
  pthread_mutex_lock(&pool->lock);
  for (block *b = pool->head; b; b = b->next) {
    if (b->used || b->size < want) continue;
    if (b->size > want) {
      block *rest = malloc(sizeof *rest);
      if (!rest) break; /* out of heap: report the pool as full */
      *rest = (block){b->off + want, b->size - want, false, b->next};
      b->next = rest;
      b->size = want;
    }
    b->used = true;
    pool->used += b->size;
    out = pool->base + b->off;
    break;
  }
  pthread_mutex_unlock(&pool->lock);
  return out;
}

bool nrd_mem_pool_free(nrd_mem_pool *pool, void *p) {
  if (!nrd_mem_pool_owns(pool, p)) return false;
  uint64_t off = (uint64_t)((char *)p - pool->base);
  bool ok = false;
  pthread_mutex_lock(&pool->lock);
  for (block *prev = NULL, *b = pool->head; b; prev = b, b = b->next) {
    if (b->off != off) continue;
    if (!b->used) break;
    b->used = false;
    pool->used -= b->size;
    if (b->next && !b->next->used) { /* merge the free block after */
      block *n = b->next;
      b->size += n->size;
      b->next = n->next;
      free(n);
    }
    if (prev && !prev->used) { /* and into the free block before */
      prev->size += b->size;
      prev->next = b->next;
      free(b);
    }
    ok = true;
    break;
  }
  pthread_mutex_unlock(&pool->lock);
  return ok;
}

bool nrd_mem_pool_owns(const nrd_mem_pool *pool, const void *p) {
  return pool && (const char *)p >= pool->base && (const char *)p < pool->base + pool->size;
}

uint64_t nrd_mem_pool_size(const nrd_mem_pool *pool) { return pool ? pool->size : 0; }

uint64_t nrd_mem_pool_used(nrd_mem_pool *pool) {
  if (!pool) return 0;
  pthread_mutex_lock(&pool->lock);
  uint64_t u = pool->used;
  pthread_mutex_unlock(&pool->lock);
  return u;
}

void *nrd_mem_pool_base(const nrd_mem_pool *pool) { return pool ? pool->base : NULL; }
