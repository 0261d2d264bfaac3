/* Backend memory manager over malloc/free. */
#include "memory_manager.h"

#include <stdlib.h>

#include "error.h"

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
  switch (memory_type) {
    case TRITONSERVER_MEMORY_CPU:
    case TRITONSERVER_MEMORY_CPU_PINNED: break;
    case TRITONSERVER_MEMORY_GPU:
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
  switch (memory_type) {
    case TRITONSERVER_MEMORY_CPU:
    case TRITONSERVER_MEMORY_CPU_PINNED: free(buffer); return NULL;
    case TRITONSERVER_MEMORY_GPU:
      return nrd_error_new(TRITONSERVER_ERROR_UNSUPPORTED,
                           "GPU memory (device %lld) is not available: this build has no GPU "
                           "support",
                           (long long)memory_type_id);
  }
  return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "unknown memory type %d", (int)memory_type);
}
