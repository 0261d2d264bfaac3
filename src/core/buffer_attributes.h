/* TRITONSERVER_BufferAttributes: where an output buffer lives (memory type and
 * id), its size and, for GPU memory, a CUDA IPC handle. Plain data with no
 * locking: one thread at a time (the allocator callback that fills it). */
#ifndef NRD_BUFFER_ATTRIBUTES_H
#define NRD_BUFFER_ATTRIBUTES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "triton/core/tritonserver.h"

/* Size of a cudaIpcMemHandle_t; the handle is copied by value as Triton does. */
#define NRD_CUDA_IPC_HANDLE_SIZE 64

struct TRITONSERVER_BufferAttributes {
  int64_t memory_type_id;
  TRITONSERVER_MemoryType memory_type;
  size_t byte_size;
  bool has_cuda_ipc_handle;
  unsigned char cuda_ipc_handle[NRD_CUDA_IPC_HANDLE_SIZE];
};

/* Sets the defaults (CPU, id 0, size 0, no IPC handle) on caller-owned
 * storage, e.g. one on the stack. Any thread. */
void nrd_buffer_attributes_init(TRITONSERVER_BufferAttributes *attr);

#endif
