/* TRITONBACKEND_MemoryManager: the memory allocator backends use for scratch
 * and output buffers. One process-wide instance. CPU memory comes from
 * the C heap; with the NVIDIA driver, CPU_PINNED and GPU memory come from
 * the pools of gpu_memory.c (UNAVAILABLE when exhausted, no fallback, as
 * Triton's); without it "pinned" is ordinary heap memory and GPU memory is
 * UNSUPPORTED. */
#ifndef NRD_MEMORY_MANAGER_H
#define NRD_MEMORY_MANAGER_H

#include "triton/core/tritonbackend.h"

/* The process-wide manager handed to backends (TRITONBACKEND_BackendMemoryManager).
 * Never NULL, never freed. Any thread. */
TRITONBACKEND_MemoryManager *nrd_memory_manager(void);

#endif
