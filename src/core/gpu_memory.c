/* Pinned and per-GPU memory pools, and copies (gpu_memory.h). */
#include "gpu_memory.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "gpu.h"
#include "log.h"
#include "mem_pool.h"

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool made; /* set (release) once the pools below are final */
static bool tried; /* under init_lock: the first server made its pools */
/* Written once under init_lock before `made`; read after it without a
 * lock, never changed again. */
static nrd_mem_pool *pinned;
static nrd_mem_pool *device_pool[NRD_GPU_MAX];

void nrd_gpu_memory_init(uint64_t pinned_bytes, const int *size_devices, const uint64_t *sizes, size_t n_sizes,
                         const int32_t *gpus, size_t n_gpus) {
  pthread_mutex_lock(&init_lock);
  if (tried || !nrd_gpu_driver_loaded()) goto out;
  tried = true;
  void *base = NULL;
  if (pinned_bytes && nrd_gpu_count() > 0) {
    TRITONSERVER_Error *e = nrd_gpu_host_alloc((size_t)pinned_bytes, &base);
    if (e) {
      NRD_LOG_WARN("Unable to allocate pinned system memory, pinned memory pool will not be available: %s",
                   TRITONSERVER_ErrorMessage(e));
      TRITONSERVER_ErrorDelete(e);
    } else if (!(pinned = nrd_mem_pool_new(base, pinned_bytes))) {
      nrd_gpu_host_free(base);
    } else {
      NRD_LOG_INFO("Pinned memory pool is created at '%p' with size %llu", base, (unsigned long long)pinned_bytes);
    }
  } else {
    NRD_LOG_INFO("Pinned memory pool disabled");
  }
  for (size_t i = 0; i < n_gpus; i++) {
    int id = gpus[i];
    if (id < 0 || id >= NRD_GPU_MAX) continue;
    uint64_t size = NRD_CUDA_POOL_DEFAULT;
    for (size_t k = 0; k < n_sizes; k++)
      if (size_devices[k] == id) size = sizes[k];
    if (!size) continue;
    void *d = NULL;
    TRITONSERVER_Error *e = nrd_gpu_alloc(id, (size_t)size, &d);
    if (e) {
      NRD_LOG_WARN("Failed to create the CUDA memory pool on device %d: %s", id, TRITONSERVER_ErrorMessage(e));
      TRITONSERVER_ErrorDelete(e);
      continue;
    }
    if (!(device_pool[id] = nrd_mem_pool_new(d, size))) {
      nrd_gpu_free(id, d);
      continue;
    }
    NRD_LOG_INFO("CUDA memory pool is created on device %d with size %llu", id, (unsigned long long)size);
  }
  atomic_store(&made, true);
out:
  pthread_mutex_unlock(&init_lock);
}

static nrd_mem_pool *pool_of(int64_t id) {
  return atomic_load(&made) && id >= 0 && id < NRD_GPU_MAX ? device_pool[id] : NULL;
}

static nrd_mem_pool *pinned_pool(void) { return atomic_load(&made) ? pinned : NULL; }

static bool any_device_pool(void) {
  if (!atomic_load(&made)) return false;
  for (int i = 0; i < NRD_GPU_MAX; i++)
    if (device_pool[i]) return true;
  return false;
}

static TRITONSERVER_Error *alloc_pinned(TRITONSERVER_MemoryType *type, uint64_t bytes, bool fallback, void **out) {
  const char *why = NULL;
  nrd_mem_pool *pool = pinned_pool();
  if (!pool)
    why = "failed to allocate pinned system memory: no pinned memory pool";
  else if (!(*out = nrd_mem_pool_alloc(pool, bytes)))
    why = "failed to allocate pinned system memory";
  if (!why) {
    *type = TRITONSERVER_MEMORY_CPU_PINNED;
    return NULL;
  }
  if (!fallback) return nrd_error_new(TRITONSERVER_ERROR_UNAVAILABLE, "%s", why);
  static atomic_bool warned;
  if (!atomic_exchange(&warned, true)) NRD_LOG_WARN("%s, falling back to non-pinned system memory", why);
  *out = malloc(bytes ? bytes : 1);
  if (!*out) return nrd_error_new(TRITONSERVER_ERROR_UNAVAILABLE, "failed to allocate non-pinned system memory");
  *type = TRITONSERVER_MEMORY_CPU;
  return NULL;
}

TRITONSERVER_Error *nrd_gpu_memory_alloc(TRITONSERVER_MemoryType *type, int64_t id, uint64_t bytes, bool fallback,
                                         void **out) {
  *out = NULL;
  if (*type == TRITONSERVER_MEMORY_CPU_PINNED) return alloc_pinned(type, bytes, fallback, out);
  if (*type != TRITONSERVER_MEMORY_GPU)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "memory type %d is not pooled", (int)*type);
  nrd_mem_pool *p = pool_of(id);
  TRITONSERVER_Error *why = NULL;
  if (!atomic_load(&made))
    why = nrd_error_new(TRITONSERVER_ERROR_UNAVAILABLE, "CudaMemoryManager has not been created");
  else if (!any_device_pool())
    why = nrd_error_new(TRITONSERVER_ERROR_UNAVAILABLE, "CudaMemoryManager has no preallocated CUDA memory");
  else if (!p || !(*out = nrd_mem_pool_alloc(p, bytes)))
    why = nrd_error_new(TRITONSERVER_ERROR_UNAVAILABLE,
                        "Failed to allocate CUDA memory with byte size %llu on GPU %lld: %s", (unsigned long long)bytes,
                        (long long)id, p ? "CNMEM_STATUS_OUT_OF_MEMORY" : "CNMEM_STATUS_INVALID_ARGUMENT");
  if (!why) return NULL;
  if (!fallback) return why;
  static atomic_bool warned;
  if (!atomic_exchange(&warned, true))
    NRD_LOG_WARN("%s, falling back to pinned system memory", TRITONSERVER_ErrorMessage(why));
  TRITONSERVER_ErrorDelete(why);
  *type = TRITONSERVER_MEMORY_CPU_PINNED;
  return alloc_pinned(type, bytes, true, out);
}

TRITONSERVER_Error *nrd_gpu_memory_free(TRITONSERVER_MemoryType type, int64_t id, void *p) {
  if (!p) return NULL;
  if (type == TRITONSERVER_MEMORY_CPU) {
    free(p);
    return NULL;
  }
  nrd_mem_pool *pool = type == TRITONSERVER_MEMORY_CPU_PINNED ? pinned_pool()
                       : type == TRITONSERVER_MEMORY_GPU      ? pool_of(id)
                                                              : NULL;
  if (!pool || !nrd_mem_pool_free(pool, p))
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "failed to free %s memory at %p: not allocated from %s",
                         type == TRITONSERVER_MEMORY_GPU ? "GPU" : "pinned", p,
                         type == TRITONSERVER_MEMORY_GPU ? "this GPU's pool" : "the pinned memory pool");
  return NULL;
}

uint64_t nrd_gpu_memory_pinned_total(void) { return nrd_mem_pool_size(pinned_pool()); }
uint64_t nrd_gpu_memory_pinned_used(void) { return nrd_mem_pool_used(pinned_pool()); }
uint64_t nrd_gpu_memory_pool_total(int id) { return nrd_mem_pool_size(pool_of(id)); }
uint64_t nrd_gpu_memory_pool_used(int id) { return nrd_mem_pool_used(pool_of(id)); }

static bool on_host(TRITONSERVER_MemoryType t) { return t != TRITONSERVER_MEMORY_GPU; }

TRITONSERVER_Error *nrd_copy(void *dst, TRITONSERVER_MemoryType dst_type, int64_t dst_id, const void *src,
                             TRITONSERVER_MemoryType src_type, int64_t src_id, size_t bytes) {
  if (bytes == 0) return NULL;
  if (on_host(dst_type) && on_host(src_type)) {
    memcpy(dst, src, bytes);
    return NULL;
  }
  /* The device that runs the copy: the source's when it is on a GPU. */
  int64_t dev = src_type == TRITONSERVER_MEMORY_GPU ? src_id : dst_id;
  return nrd_gpu_copy(dst, src, bytes, (int)dev);
}
