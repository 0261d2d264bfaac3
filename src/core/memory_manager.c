/* Backend memory manager: the heap for CPU memory, the pools of
 * gpu_memory.c for pinned and GPU memory when the NVIDIA driver is there
 * (without it, pinned memory is the heap and GPU memory UNSUPPORTED). */
#include "memory_manager.h"

#include <stdlib.h>

#include "error.h"
#include "gpu.h"
#include "gpu_memory.h"

struct TRITONBACKEND_MemoryManager {
  int unused; /* the manager keeps no state: the heap does the bookkeeping */
};

static struct TRITONBACKEND_MemoryManager the_manager;

TRITONBACKEND_MemoryManager *nrd_memory_manager(void) { return &the_manager; }

TRITONSERVER_Error *TRITONBACKEND_MemoryManagerAllocate(TRITONBACKEND_MemoryManager *manager, void **buffer,
                                                        const TRITONSERVER_MemoryType memory_type,
                                                        const int64_t memory_type_id, const uint64_t byte_size) {
  if (manager == NULL || buffer == NULL)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "memory manager and buffer must not be NULL");
  *buffer = NULL;
  bool driver = nrd_gpu_driver_loaded();
  switch (memory_type) {
    case TRITONSERVER_MEMORY_CPU: break;
    case TRITONSERVER_MEMORY_CPU_PINNED:
      if (!driver) break;
      /* From the pool only, as Triton's backend memory manager. */
      return nrd_gpu_memory_alloc(&(TRITONSERVER_MemoryType){TRITONSERVER_MEMORY_CPU_PINNED}, 0, byte_size, false,
                                  buffer);
    case TRITONSERVER_MEMORY_GPU:
      if (driver)
        return nrd_gpu_memory_alloc(&(TRITONSERVER_MemoryType){TRITONSERVER_MEMORY_GPU}, memory_type_id, byte_size,
                                    false, buffer);
      return nrd_error_new(TRITONSERVER_ERROR_UNSUPPORTED,
                           "GPU memory (device %lld) is not available: this build has no GPU "
                           "support",
                           (long long)memory_type_id);
    default: return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "unknown memory type %d", (int)memory_type);
  }
#if SIZE_MAX < UINT64_MAX
  if (byte_size > SIZE_MAX)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "cannot allocate %llu bytes", (unsigned long long)byte_size);
#endif
  /* A zero-byte request still yields a unique, freeable pointer. */
  void *p = malloc(byte_size != 0 ? (size_t)byte_size : 1);
  if (p == NULL)
    return nrd_error_new(TRITONSERVER_ERROR_UNAVAILABLE, "failed to allocate %llu bytes of %s memory",
                         (unsigned long long)byte_size, memory_type == TRITONSERVER_MEMORY_CPU ? "CPU" : "CPU_PINNED");
  *buffer = p;
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_MemoryManagerFree(TRITONBACKEND_MemoryManager *manager, void *buffer,
                                                    const TRITONSERVER_MemoryType memory_type,
                                                    const int64_t memory_type_id) {
  if (manager == NULL) return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "memory manager must not be NULL");
  bool driver = nrd_gpu_driver_loaded();
  switch (memory_type) {
    case TRITONSERVER_MEMORY_CPU: free(buffer); return NULL;
    case TRITONSERVER_MEMORY_CPU_PINNED:
      if (!driver) {
        free(buffer);
        return NULL;
      }
      return nrd_gpu_memory_free(memory_type, memory_type_id, buffer);
    case TRITONSERVER_MEMORY_GPU:
      if (driver) return nrd_gpu_memory_free(memory_type, memory_type_id, buffer);
      return nrd_error_new(TRITONSERVER_ERROR_UNSUPPORTED,
                           "GPU memory (device %lld) is not available: this build has no GPU "
                           "support",
                           (long long)memory_type_id);
  }
  return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "unknown memory type %d", (int)memory_type);
}
