/* Pool allocation of GPU and pinned buffers (TRITONBACKEND_MemoryManager
 * after the pools exist) against the driver's own cuMemAlloc/cuMemFree and
 * cuMemHostAlloc/cuMemFreeHost, measured in the same run: allocations per
 * second and the ratio. Needs the NVIDIA driver (or the stand-in through
 * NEREID_CUDA_LIBRARY, whose figures mean nothing); without one it says so
 * and exits 0. Prints figures, never judges them. --quick: fewer rounds. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "gpu.h"
#include "gpu_memory.h"
#include "memory_manager.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

typedef int (*pair_fn)(size_t bytes);

static int pool_gpu(size_t bytes) {
  void *p = NULL;
  TRITONBACKEND_MemoryManager *mm = nrd_memory_manager();
  TRITONSERVER_Error *e = TRITONBACKEND_MemoryManagerAllocate(mm, &p, TRITONSERVER_MEMORY_GPU, 0, bytes);
  if (!e) e = TRITONBACKEND_MemoryManagerFree(mm, p, TRITONSERVER_MEMORY_GPU, 0);
  if (e) TRITONSERVER_ErrorDelete(e);
  return e ? -1 : 0;
}

static int pool_pinned(size_t bytes) {
  void *p = NULL;
  TRITONBACKEND_MemoryManager *mm = nrd_memory_manager();
  TRITONSERVER_Error *e = TRITONBACKEND_MemoryManagerAllocate(mm, &p, TRITONSERVER_MEMORY_CPU_PINNED, 0, bytes);
  if (!e) e = TRITONBACKEND_MemoryManagerFree(mm, p, TRITONSERVER_MEMORY_CPU_PINNED, 0);
  if (e) TRITONSERVER_ErrorDelete(e);
  return e ? -1 : 0;
}

static int driver_gpu(size_t bytes) {
  void *p = NULL;
  TRITONSERVER_Error *e = nrd_gpu_alloc(0, bytes, &p);
  if (e) {
    TRITONSERVER_ErrorDelete(e);
    return -1;
  }
  nrd_gpu_free(0, p);
  return 0;
}

static int driver_pinned(size_t bytes) {
  void *p = NULL;
  TRITONSERVER_Error *e = nrd_gpu_host_alloc(bytes, &p);
  if (e) {
    TRITONSERVER_ErrorDelete(e);
    return -1;
  }
  nrd_gpu_host_free(p);
  return 0;
}

/* Allocation/free pairs per second over `n` pairs; -1 on failure. */
static double rate(pair_fn f, size_t bytes, int n) {
  if (f(bytes) != 0) return -1; /* warm-up */
  double t0 = now_s();
  for (int i = 0; i < n; i++)
    if (f(bytes) != 0) return -1;
  return n / (now_s() - t0);
}

int main(int argc, char **argv) {
  int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
  if (nrd_gpu_count() == 0) {
    printf("gpu_pool_bench: no CUDA device (no NVIDIA driver or none found): nothing to measure\n");
    return 0;
  }
  const int devs[1] = {0};
  const uint64_t sizes[1] = {(uint64_t)256 << 20};
  const int32_t gpus[1] = {0};
  nrd_gpu_memory_init((uint64_t)64 << 20, devs, sizes, 1, gpus, 1);
  const nrd_gpu_device *d = nrd_gpu_device_get(0);
  printf("gpu_pool_bench on GPU 0: %s (the machine may be shared: figures vary)\n", d->name);
  const size_t kb[3] = {4 << 10, 1 << 20, 16 << 20};
  for (int k = 0; k < 3; k++) {
    int n_pool = quick ? 2000 : 200000, n_drv = quick ? 50 : 2000;
    double pg = rate(pool_gpu, kb[k], n_pool), dg = rate(driver_gpu, kb[k], n_drv);
    double pp = rate(pool_pinned, kb[k], n_pool), dp = rate(driver_pinned, kb[k], quick ? 20 : 500);
    printf("%8zu bytes  GPU: pool %12.0f allocs/s, cuMemAlloc %10.0f allocs/s, ratio %8.1f\n", kb[k], pg, dg,
           dg > 0 ? pg / dg : 0);
    printf("%8zu bytes  pinned: pool %9.0f allocs/s, cuMemHostAlloc %7.0f allocs/s, ratio %8.1f\n", kb[k], pp, dp,
           dp > 0 ? pp / dp : 0);
  }
  return 0;
}
