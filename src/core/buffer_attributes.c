/* Buffer attributes: getters and setters over a plain struct. */
#include "buffer_attributes.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"

void nrd_buffer_attributes_init(TRITONSERVER_BufferAttributes *attr) {
  if (attr == NULL) return;
  memset(attr, 0, sizeof(*attr));
  attr->memory_type = TRITONSERVER_MEMORY_CPU;
}

static TRITONSERVER_Error *null_attr(void) {
  return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "buffer attributes must not be NULL");
}

static TRITONSERVER_Error *null_out(const char *what) {
  return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "%s must not be NULL", what);
}

TRITONSERVER_Error *TRITONSERVER_BufferAttributesNew(TRITONSERVER_BufferAttributes **buffer_attributes) {
  if (buffer_attributes == NULL) return null_out("buffer_attributes");
  *buffer_attributes = malloc(sizeof(**buffer_attributes));
  if (*buffer_attributes == NULL) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  nrd_buffer_attributes_init(*buffer_attributes);
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_BufferAttributesDelete(TRITONSERVER_BufferAttributes *buffer_attributes) {
  free(buffer_attributes);
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_BufferAttributesSetMemoryTypeId(TRITONSERVER_BufferAttributes *buffer_attributes,
                                                                 int64_t memory_type_id) {
  if (buffer_attributes == NULL) return null_attr();
  buffer_attributes->memory_type_id = memory_type_id;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_BufferAttributesSetMemoryType(TRITONSERVER_BufferAttributes *buffer_attributes,
                                                               TRITONSERVER_MemoryType memory_type) {
  if (buffer_attributes == NULL) return null_attr();
  if (memory_type != TRITONSERVER_MEMORY_CPU && memory_type != TRITONSERVER_MEMORY_CPU_PINNED &&
      memory_type != TRITONSERVER_MEMORY_GPU)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "unknown memory type %d", (int)memory_type);
  buffer_attributes->memory_type = memory_type;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_BufferAttributesSetCudaIpcHandle(TRITONSERVER_BufferAttributes *buffer_attributes,
                                                                  void *cuda_ipc_handle) {
  if (buffer_attributes == NULL) return null_attr();
  if (cuda_ipc_handle == NULL) {
    buffer_attributes->has_cuda_ipc_handle = false;
    memset(buffer_attributes->cuda_ipc_handle, 0, NRD_CUDA_IPC_HANDLE_SIZE);
    return NULL;
  }
  memcpy(buffer_attributes->cuda_ipc_handle, cuda_ipc_handle, NRD_CUDA_IPC_HANDLE_SIZE);
  buffer_attributes->has_cuda_ipc_handle = true;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_BufferAttributesSetByteSize(TRITONSERVER_BufferAttributes *buffer_attributes,
                                                             size_t byte_size) {
  if (buffer_attributes == NULL) return null_attr();
  buffer_attributes->byte_size = byte_size;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_BufferAttributesMemoryTypeId(TRITONSERVER_BufferAttributes *buffer_attributes,
                                                              int64_t *memory_type_id) {
  if (buffer_attributes == NULL) return null_attr();
  if (memory_type_id == NULL) return null_out("memory_type_id");
  *memory_type_id = buffer_attributes->memory_type_id;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_BufferAttributesMemoryType(TRITONSERVER_BufferAttributes *buffer_attributes,
                                                            TRITONSERVER_MemoryType *memory_type) {
  if (buffer_attributes == NULL) return null_attr();
  if (memory_type == NULL) return null_out("memory_type");
  *memory_type = buffer_attributes->memory_type;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_BufferAttributesCudaIpcHandle(TRITONSERVER_BufferAttributes *buffer_attributes,
                                                               void **cuda_ipc_handle) {
  if (buffer_attributes == NULL) return null_attr();
  if (cuda_ipc_handle == NULL) return null_out("cuda_ipc_handle");
  *cuda_ipc_handle = buffer_attributes->has_cuda_ipc_handle ? buffer_attributes->cuda_ipc_handle : NULL;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_BufferAttributesByteSize(TRITONSERVER_BufferAttributes *buffer_attributes,
                                                          size_t *byte_size) {
  if (buffer_attributes == NULL) return null_attr();
  if (byte_size == NULL) return null_out("byte_size");
  *byte_size = buffer_attributes->byte_size;
  return NULL;
}
