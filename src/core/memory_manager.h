/* TRITONBACKEND_MemoryManager: the memory allocator backends use for scratch
 * and output buffers. One process-wide instance. CPU and CPU_PINNED memory
 * come from the C heap (this build has no CUDA, so "pinned" is ordinary
 * memory, as Triton does without a GPU); GPU memory is UNSUPPORTED. */
#ifndef NRD_MEMORY_MANAGER_H
#define NRD_MEMORY_MANAGER_H

#include "triton/core/tritonbackend.h"

/* The process-wide manager handed to backends (TRITONBACKEND_BackendMemoryManager).
 * Never NULL, never freed. Any thread. */
TRITONBACKEND_MemoryManager *nrd_memory_manager(void);

#endif
