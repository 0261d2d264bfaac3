/* Unit tests for the gRPC loops' block cache (src/server/net/block_cache.c):
 * reuse within a size class, the depth limit, alignment, calloc and
 * realloc across classes and past the largest one. Leaks show under ASan. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "block_cache.h"

Test(block_cache, reuses_a_freed_block_of_the_same_class) {
  nrd_srv_block_cache bc;
  nrd_srv_block_cache_init(&bc);
  void *a = nrd_srv_block_malloc(40, &bc);
  cr_assert_not_null(a);
  nrd_srv_block_free(a, &bc);
  void *b = nrd_srv_block_malloc(48, &bc); /* same class as 40 */
  cr_assert_eq(b, a, "the freed block comes back");
  void *c = nrd_srv_block_malloc(200, &bc); /* another class: a new block */
  cr_assert_neq(c, a);
  nrd_srv_block_free(b, &bc);
  nrd_srv_block_free(c, &bc);
  nrd_srv_block_free(NULL, &bc);
  nrd_srv_block_cache_destroy(&bc);
}

Test(block_cache, keeps_at_most_depth_blocks_per_class) {
  nrd_srv_block_cache bc;
  nrd_srv_block_cache_init(&bc);
  enum { N = NRD_SRV_BLOCK_CACHE_DEPTH + 10 };
  void *p[N];
  for (int i = 0; i < N; i++) {
    p[i] = nrd_srv_block_malloc(100, &bc);
    cr_assert_not_null(p[i]);
    cr_assert_eq((uintptr_t)p[i] % 16, 0, "16-byte aligned");
  }
  for (int i = 0; i < N; i++) nrd_srv_block_free(p[i], &bc);
  unsigned kept = 0;
  for (int k = 0; k < NRD_SRV_BLOCK_CACHE_CLASSES; k++) kept += bc.n_free[k];
  cr_assert_eq(kept, NRD_SRV_BLOCK_CACHE_DEPTH, "the rest went back to malloc");
  nrd_srv_block_cache_destroy(&bc);
  for (int k = 0; k < NRD_SRV_BLOCK_CACHE_CLASSES; k++) cr_assert_eq(bc.n_free[k], 0);
}

Test(block_cache, calloc_zeroes_a_reused_block) {
  nrd_srv_block_cache bc;
  nrd_srv_block_cache_init(&bc);
  unsigned char *a = nrd_srv_block_malloc(64, &bc);
  memset(a, 0xab, 64);
  nrd_srv_block_free(a, &bc);
  unsigned char *b = nrd_srv_block_calloc(8, 8, &bc);
  cr_assert_eq(b, a);
  for (int i = 0; i < 64; i++) cr_assert_eq(b[i], 0);
  cr_assert_null(nrd_srv_block_calloc(SIZE_MAX / 2, 4, &bc), "n * size overflows");
  nrd_srv_block_free(b, &bc);
  nrd_srv_block_cache_destroy(&bc);
}

Test(block_cache, realloc_keeps_the_bytes_across_classes_and_past_the_largest) {
  nrd_srv_block_cache bc;
  nrd_srv_block_cache_init(&bc);
  unsigned char *p = nrd_srv_block_realloc(NULL, 10, &bc);
  for (int i = 0; i < 10; i++) p[i] = (unsigned char)i;
  unsigned char *same = nrd_srv_block_realloc(p, 30, &bc);
  cr_assert_eq(same, p, "growing within the class stays in place");
  size_t sizes[] = {100, 300, NRD_SRV_BLOCK_CACHE_MAX_SIZE, NRD_SRV_BLOCK_CACHE_MAX_SIZE + 1, 5000, 70000, 20};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    p = nrd_srv_block_realloc(p, sizes[s], &bc);
    cr_assert_not_null(p);
    cr_assert_eq((uintptr_t)p % 16, 0);
    for (int i = 0; i < 10; i++) cr_assert_eq(p[i], i, "size %zu byte %d", sizes[s], i);
    memset(p + 10, 0x5a, sizes[s] - 10); /* the whole block is usable (ASan checks) */
  }
  nrd_srv_block_free(p, &bc);
  void *big = nrd_srv_block_malloc(1 << 20, &bc);
  cr_assert_not_null(big);
  nrd_srv_block_free(big, &bc); /* large blocks are never kept */
  for (int k = 0; k < NRD_SRV_BLOCK_CACHE_CLASSES; k++) cr_assert_leq(bc.n_free[k], 2);
  nrd_srv_block_cache_destroy(&bc);
}

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>

Test(block_cache, a_kept_block_is_poisoned_until_handed_out_again) {
  nrd_srv_block_cache bc;
  nrd_srv_block_cache_init(&bc);
  char *a = nrd_srv_block_malloc(32, &bc);
  nrd_srv_block_free(a, &bc);
  cr_assert(__asan_address_is_poisoned(a), "use after free still trips ASan");
  char *b = nrd_srv_block_malloc(32, &bc);
  cr_assert_eq(b, a);
  cr_assert_not(__asan_address_is_poisoned(b));
  nrd_srv_block_free(b, &bc);
  nrd_srv_block_cache_destroy(&bc);
}
#endif
