/* Small blocks freed by one thread, kept for that thread to reuse: the
 * allocator a gRPC loop gives nghttp2, whose sessions make and free about
 * eight blocks of at most 240 bytes per call. Going through malloc for
 * each cost about 3% of a small ModelInfer's instructions.
 *
 * Blocks of up to NRD_SRV_BLOCK_CACHE_MAX_SIZE bytes come in four size
 * classes, and at most NRD_SRV_BLOCK_CACHE_DEPTH freed blocks of each class
 * are kept; larger blocks and the rest go to malloc and free. Blocks are
 * 16-byte aligned, as malloc's are.
 *
 * Threads: a cache and the blocks it hands out belong to one thread at a
 * time (a loop's sessions all run on the loop); no locking. */
#ifndef NRD_SRV_BLOCK_CACHE_H
#define NRD_SRV_BLOCK_CACHE_H

#include <stddef.h>

#define NRD_SRV_BLOCK_CACHE_CLASSES 4
#define NRD_SRV_BLOCK_CACHE_MAX_SIZE 496 /* the largest class, less the header */
#define NRD_SRV_BLOCK_CACHE_DEPTH 128

typedef struct nrd_srv_block_cache {
  void *free_blocks[NRD_SRV_BLOCK_CACHE_CLASSES][NRD_SRV_BLOCK_CACHE_DEPTH];
  unsigned n_free[NRD_SRV_BLOCK_CACHE_CLASSES];
} nrd_srv_block_cache;

/* An empty cache (zeroing it is the same). */
void nrd_srv_block_cache_init(nrd_srv_block_cache *bc);

/* Frees the blocks kept for reuse. Blocks still handed out must already
 * have come back (free them first). */
void nrd_srv_block_cache_destroy(nrd_srv_block_cache *bc);

/* malloc, free, calloc and realloc with the cache as their last argument,
 * in the shape nghttp2_mem wants. A block from these must be released with
 * nrd_srv_block_free (or grown with nrd_srv_block_realloc) on the same
 * cache, never with free. NULL when memory runs out. */
void *nrd_srv_block_malloc(size_t size, void *bc);
void nrd_srv_block_free(void *p, void *bc);
void *nrd_srv_block_calloc(size_t n, size_t size, void *bc);
void *nrd_srv_block_realloc(void *p, size_t size, void *bc);

#endif
