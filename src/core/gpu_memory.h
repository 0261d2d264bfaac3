/* Triton's memory pools over the GPU layer (gpu.h): one pool of pinned
 * host memory and one pool of device memory per GPU, made once per
 * process by the first server (Triton's PinnedMemoryManager and
 * CudaMemoryManager are process-wide too) and kept until exit, so no
 * cudaMalloc happens on the request path. Also the copy between any two
 * memory types. Every function: any thread. */
#ifndef NRD_GPU_MEMORY_H
#define NRD_GPU_MEMORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "triton/core/tritonserver.h"

#define NRD_CUDA_POOL_DEFAULT ((uint64_t)64 << 20)

/* Makes the pools when the NVIDIA driver is there and they do not exist
 * yet: `pinned_bytes` of pinned memory, and for each of the `n_gpus` GPUs
 * in `gpus` the size `sizes` gives it (pairs of device and bytes, n_sizes
 * of them; NRD_CUDA_POOL_DEFAULT for a device not named; 0: no pool). A
 * pool the driver cannot give is logged and left out. */
void nrd_gpu_memory_init(uint64_t pinned_bytes, const int *size_devices, const uint64_t *sizes, size_t n_sizes,
                         const int32_t *gpus, size_t n_gpus);

/* A buffer of `bytes` of *type (GPU on device `id`, or CPU_PINNED).
 * GPU comes from that device's pool; with `fallback` a GPU request the
 * pool cannot serve takes pinned memory, and a pinned one the pool cannot
 * serve takes the heap, *type saying which (Triton's AllocatedMemory
 * order). Without `fallback` an exhausted pool is an UNAVAILABLE error
 * with Triton's sentence. Free with nrd_gpu_memory_free and the type
 * returned. On error *out is NULL. */
TRITONSERVER_Error *nrd_gpu_memory_alloc(TRITONSERVER_MemoryType *type, int64_t id, uint64_t bytes, bool fallback,
                                         void **out);

/* Returns a buffer nrd_gpu_memory_alloc gave. INVALID_ARG when `p` did
 * not come from the pool of that type and device. NULL is fine. */
TRITONSERVER_Error *nrd_gpu_memory_free(TRITONSERVER_MemoryType type, int64_t id, void *p);

/* The pinned pool's size and bytes in use (0 and 0 without one). */
uint64_t nrd_gpu_memory_pinned_total(void);
uint64_t nrd_gpu_memory_pinned_used(void);

/* GPU `id`'s pool size and use (0 and 0 without one). */
uint64_t nrd_gpu_memory_pool_total(int id);
uint64_t nrd_gpu_memory_pool_used(int id);

/* Copies `bytes` from (src, src_type, src_id) to (dst, dst_type, dst_id):
 * memcpy between host types, the driver otherwise. */
TRITONSERVER_Error *nrd_copy(void *dst, TRITONSERVER_MemoryType dst_type, int64_t dst_id, const void *src,
                             TRITONSERVER_MemoryType src_type, int64_t src_id, size_t bytes);

#endif
