/* A fixed region carved into blocks, first fit, neighbours merged on free:
 * the allocator behind the pinned and per-GPU memory pools (gpu_memory.c).
 * It never touches the region (it may be device memory); the bookkeeping
 * lives on the heap. Blocks are aligned to 256 bytes, as cudaMalloc's. A
 * pool's functions may be called from any thread (one lock per pool). */
#ifndef NRD_MEM_POOL_H
#define NRD_MEM_POOL_H

#include <stdbool.h>
#include <stdint.h>

typedef struct nrd_mem_pool nrd_mem_pool;

/* A pool over [base, base + size). NULL on out of memory. The region stays
 * the caller's: nrd_mem_pool_delete does not release it. */
nrd_mem_pool *nrd_mem_pool_new(void *base, uint64_t size);

/* Deletes the bookkeeping (blocks still out are forgotten). NULL is fine. */
void nrd_mem_pool_delete(nrd_mem_pool *pool);

/* A block of at least `bytes` (0 counts as 1), or NULL when no free block
 * is large enough. */
void *nrd_mem_pool_alloc(nrd_mem_pool *pool, uint64_t bytes);

/* Returns block `p` to the pool: false (and nothing changes) when `p` is
 * not the start of a block in use. */
bool nrd_mem_pool_free(nrd_mem_pool *pool, void *p);

/* Whether `p` lies inside the pool's region. */
bool nrd_mem_pool_owns(const nrd_mem_pool *pool, const void *p);

uint64_t nrd_mem_pool_size(const nrd_mem_pool *pool);
uint64_t nrd_mem_pool_used(nrd_mem_pool *pool);
void *nrd_mem_pool_base(const nrd_mem_pool *pool);

#endif
