/* Unit tests for mem_pool.c, gpu_memory.c and the backend memory manager
 * over the stand-in driver (tests/gpu_stub): pools, Triton's fallbacks
 * and errors, no driver allocation after the pools exist, copies. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "gpu.h"
#include "gpu_memory.h"
#include "mem_pool.h"
#include "memory_manager.h"

typedef void (*counts_fn)(unsigned long long out[4]);

__attribute__((constructor)) static void use_fake_driver(void) {
  setenv("NEREID_CUDA_LIBRARY", NRD_FAKE_CUDA, 1);
  setenv("NEREID_NVML_LIBRARY", NRD_FAKE_CUDA, 1);
  setenv("NRD_FAKE_CUDA_DEVICES", "2", 1);
  setenv("NRD_FAKE_CUDA_CC", "8.0", 1);
  unsetenv("CUDA_VISIBLE_DEVICES");
}

/* Pools as a server would make them: 1 MiB pinned, 1 MiB on GPU 0, none
 * on GPU 1 (size 0). Idempotent, as nrd_gpu_memory_init is. */
static void pools(void) {
  const int devs[2] = {0, 1};
  const uint64_t sizes[2] = {1 << 20, 0};
  const int32_t gpus[2] = {0, 1};
  nrd_gpu_memory_init(1 << 20, devs, sizes, 2, gpus, 2);
}

Test(mem_pool, first_fit_split_and_merge) {
  static char region[4096];
  nrd_mem_pool *p = nrd_mem_pool_new(region, sizeof region);
  cr_assert_not_null(p);
  void *a = nrd_mem_pool_alloc(p, 1000), *b = nrd_mem_pool_alloc(p, 1), *c = nrd_mem_pool_alloc(p, 2048);
  cr_assert_eq(a, region);
  cr_assert_eq(b, region + 1024); /* 256-byte blocks */
  cr_assert_eq(c, region + 1280);
  cr_assert_eq(nrd_mem_pool_used(p), 1024 + 256 + 2048);
  cr_assert_null(nrd_mem_pool_alloc(p, 1024)); /* 768 left */
  cr_assert(nrd_mem_pool_free(p, b));
  cr_assert_not(nrd_mem_pool_free(p, b)); /* twice */
  cr_assert_not(nrd_mem_pool_free(p, region + 8)); /* not a block start */
  cr_assert_not(nrd_mem_pool_free(p, region + sizeof region)); /* outside */
  cr_assert(nrd_mem_pool_free(p, a));
  cr_assert_eq(nrd_mem_pool_alloc(p, 1280), region); /* a and b merged */
  cr_assert(nrd_mem_pool_free(p, region));
  cr_assert(nrd_mem_pool_free(p, c));
  cr_assert_eq(nrd_mem_pool_used(p), 0);
  cr_assert_eq(nrd_mem_pool_alloc(p, 4096), region); /* all merged back */
  nrd_mem_pool_delete(p);
  nrd_mem_pool_delete(NULL);
}

Test(gpu_memory, manager_allocates_from_the_pools_without_the_driver) {
  pools();
  void *dso = NULL;
  counts_fn counts = NULL;
  /* The stand-in's counters tell how often the driver was asked. */
  dso = dlopen(NRD_FAKE_CUDA, RTLD_NOW | RTLD_NOLOAD);
  cr_assert_not_null(dso);
  *(void **)&counts = dlsym(dso, "nrd_fake_cuda_counts");
  unsigned long long before[4], after[4];
  counts(before);
  TRITONBACKEND_MemoryManager *mm = nrd_memory_manager();
  for (int i = 0; i < 100; i++) {
    void *g = NULL, *h = NULL;
    cr_assert_null(TRITONBACKEND_MemoryManagerAllocate(mm, &g, TRITONSERVER_MEMORY_GPU, 0, 4096));
    cr_assert_null(TRITONBACKEND_MemoryManagerAllocate(mm, &h, TRITONSERVER_MEMORY_CPU_PINNED, 0, 4096));
    cr_assert_null(nrd_copy(g, TRITONSERVER_MEMORY_GPU, 0, "abc", TRITONSERVER_MEMORY_CPU, 0, 4));
    cr_assert_null(nrd_copy(h, TRITONSERVER_MEMORY_CPU_PINNED, 0, g, TRITONSERVER_MEMORY_GPU, 0, 4));
    cr_assert_str_eq(h, "abc");
    cr_assert_null(TRITONBACKEND_MemoryManagerFree(mm, g, TRITONSERVER_MEMORY_GPU, 0));
    cr_assert_null(TRITONBACKEND_MemoryManagerFree(mm, h, TRITONSERVER_MEMORY_CPU_PINNED, 0));
  }
  counts(after);
  cr_assert_eq(after[0], before[0], "cuMemAlloc was called on the request path");
  cr_assert_eq(after[1], before[1], "cuMemHostAlloc was called on the request path");
  cr_assert_eq(after[2] - before[2], 200); /* the copies went through the driver */
  cr_assert_eq(nrd_gpu_memory_pinned_total(), 1 << 20);
  cr_assert_eq(nrd_gpu_memory_pinned_used(), 0);
  cr_assert_eq(nrd_gpu_memory_pool_total(0), 1 << 20);
  cr_assert_eq(nrd_gpu_memory_pool_total(1), 0);
}

Test(gpu_memory, exhausted_pools_fail_with_tritons_sentences) {
  pools();
  TRITONBACKEND_MemoryManager *mm = nrd_memory_manager();
  void *p = (void *)1;
  TRITONSERVER_Error *e = TRITONBACKEND_MemoryManagerAllocate(mm, &p, TRITONSERVER_MEMORY_GPU, 0, 2 << 20);
  cr_assert_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_UNAVAILABLE);
  cr_assert_str_eq(TRITONSERVER_ErrorMessage(e),
                   "Failed to allocate CUDA memory with byte size 2097152 on GPU 0: CNMEM_STATUS_OUT_OF_MEMORY");
  cr_assert_null(p);
  TRITONSERVER_ErrorDelete(e);
  e = TRITONBACKEND_MemoryManagerAllocate(mm, &p, TRITONSERVER_MEMORY_GPU, 1, 16); /* GPU 1 has no pool */
  cr_assert_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_UNAVAILABLE);
  TRITONSERVER_ErrorDelete(e);
  e = TRITONBACKEND_MemoryManagerAllocate(mm, &p, TRITONSERVER_MEMORY_CPU_PINNED, 0, 2 << 20);
  cr_assert_str_eq(TRITONSERVER_ErrorMessage(e), "failed to allocate pinned system memory");
  TRITONSERVER_ErrorDelete(e);
  /* A buffer the pool did not give. */
  char local[16];
  e = TRITONBACKEND_MemoryManagerFree(mm, local, TRITONSERVER_MEMORY_GPU, 0);
  cr_assert_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_INVALID_ARG);
  TRITONSERVER_ErrorDelete(e);
  cr_assert_null(TRITONBACKEND_MemoryManagerFree(mm, NULL, TRITONSERVER_MEMORY_GPU, 0));
}

Test(gpu_memory, fallback_goes_gpu_then_pinned_then_heap) {
  pools();
  TRITONSERVER_MemoryType t = TRITONSERVER_MEMORY_GPU;
  void *p = NULL;
  cr_assert_null(nrd_gpu_memory_alloc(&t, 0, 2 << 20, true, &p)); /* pool too small: pinned is too, heap */
  cr_assert_eq(t, TRITONSERVER_MEMORY_CPU);
  memset(p, 0, 2 << 20);
  cr_assert_null(nrd_gpu_memory_free(t, 0, p));
  t = TRITONSERVER_MEMORY_GPU;
  cr_assert_null(nrd_gpu_memory_alloc(&t, 1, 4096, true, &p)); /* no pool on GPU 1: pinned */
  cr_assert_eq(t, TRITONSERVER_MEMORY_CPU_PINNED);
  cr_assert_null(nrd_gpu_memory_free(t, 0, p));
  t = TRITONSERVER_MEMORY_GPU;
  cr_assert_null(nrd_gpu_memory_alloc(&t, 0, 4096, true, &p));
  cr_assert_eq(t, TRITONSERVER_MEMORY_GPU);
  cr_assert_null(nrd_gpu_memory_free(t, 0, p));
}
