/* Unit tests for buffer_attributes.c and allocator.c. */
#include <criterion/criterion.h>
#include <string.h>

#include "allocator.h"
#include "buffer_attributes.h"

Test(buffer_attributes, defaults_and_setters) {
  TRITONSERVER_BufferAttributes *a = NULL;
  cr_assert_null(TRITONSERVER_BufferAttributesNew(&a));
  int64_t id = -1;
  TRITONSERVER_MemoryType mt = TRITONSERVER_MEMORY_GPU;
  size_t size = 99;
  void *handle = (void *)0x1;
  cr_assert_null(TRITONSERVER_BufferAttributesMemoryTypeId(a, &id));
  cr_assert_null(TRITONSERVER_BufferAttributesMemoryType(a, &mt));
  cr_assert_null(TRITONSERVER_BufferAttributesByteSize(a, &size));
  cr_assert_null(TRITONSERVER_BufferAttributesCudaIpcHandle(a, &handle));
  cr_assert_eq(id, 0);
  cr_assert_eq(mt, TRITONSERVER_MEMORY_CPU);
  cr_assert_eq(size, 0);
  cr_assert_null(handle);

  unsigned char ipc[NRD_CUDA_IPC_HANDLE_SIZE];
  memset(ipc, 0xab, sizeof(ipc));
  cr_assert_null(TRITONSERVER_BufferAttributesSetMemoryTypeId(a, 3));
  cr_assert_null(TRITONSERVER_BufferAttributesSetMemoryType(a, TRITONSERVER_MEMORY_CPU_PINNED));
  cr_assert_null(TRITONSERVER_BufferAttributesSetByteSize(a, 4096));
  cr_assert_null(TRITONSERVER_BufferAttributesSetCudaIpcHandle(a, ipc));
  memset(ipc, 0, sizeof(ipc)); /* the handle was copied */
  TRITONSERVER_BufferAttributesMemoryTypeId(a, &id);
  TRITONSERVER_BufferAttributesMemoryType(a, &mt);
  TRITONSERVER_BufferAttributesByteSize(a, &size);
  TRITONSERVER_BufferAttributesCudaIpcHandle(a, &handle);
  cr_assert_eq(id, 3);
  cr_assert_eq(mt, TRITONSERVER_MEMORY_CPU_PINNED);
  cr_assert_eq(size, 4096);
  cr_assert_not_null(handle);
  cr_assert_eq(((unsigned char *)handle)[0], 0xab);
  cr_assert_eq(((unsigned char *)handle)[NRD_CUDA_IPC_HANDLE_SIZE - 1], 0xab);
  cr_assert_null(TRITONSERVER_BufferAttributesSetCudaIpcHandle(a, NULL));
  TRITONSERVER_BufferAttributesCudaIpcHandle(a, &handle);
  cr_assert_null(handle);
  cr_assert_null(TRITONSERVER_BufferAttributesDelete(a));
}

Test(buffer_attributes, bad_arguments) {
  TRITONSERVER_Error *e = TRITONSERVER_BufferAttributesNew(NULL);
  cr_assert_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_INVALID_ARG);
  TRITONSERVER_ErrorDelete(e);
  e = TRITONSERVER_BufferAttributesSetByteSize(NULL, 1);
  cr_assert_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_INVALID_ARG);
  TRITONSERVER_ErrorDelete(e);
  TRITONSERVER_BufferAttributes *a;
  TRITONSERVER_BufferAttributesNew(&a);
  e = TRITONSERVER_BufferAttributesSetMemoryType(a, (TRITONSERVER_MemoryType)42);
  cr_assert_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_INVALID_ARG);
  TRITONSERVER_ErrorDelete(e);
  e = TRITONSERVER_BufferAttributesByteSize(a, NULL);
  cr_assert_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_INVALID_ARG);
  TRITONSERVER_ErrorDelete(e);
  TRITONSERVER_BufferAttributesDelete(a);
  cr_assert_null(TRITONSERVER_BufferAttributesDelete(NULL));
}

Test(buffer_attributes, init_on_stack) {
  TRITONSERVER_BufferAttributes a;
  memset(&a, 0x5a, sizeof(a));
  nrd_buffer_attributes_init(&a);
  cr_assert_eq(a.memory_type, TRITONSERVER_MEMORY_CPU);
  cr_assert_eq(a.memory_type_id, 0);
  cr_assert_eq(a.byte_size, 0);
  cr_assert_not(a.has_cuda_ipc_handle);
}

static TRITONSERVER_Error *alloc_fn(TRITONSERVER_ResponseAllocator *a, const char *name, size_t size,
                                    TRITONSERVER_MemoryType mt, int64_t id, void *userp, void **buffer,
                                    void **buffer_userp, TRITONSERVER_MemoryType *amt, int64_t *aid) {
  (void)a, (void)name, (void)size, (void)mt, (void)id, (void)userp, (void)buffer, (void)buffer_userp, (void)amt,
      (void)aid;
  return NULL;
}
static TRITONSERVER_Error *release_fn(TRITONSERVER_ResponseAllocator *a, void *buffer, void *buffer_userp, size_t size,
                                      TRITONSERVER_MemoryType mt, int64_t id) {
  (void)a, (void)buffer, (void)buffer_userp, (void)size, (void)mt, (void)id;
  return NULL;
}
static TRITONSERVER_Error *start_fn(TRITONSERVER_ResponseAllocator *a, void *userp) {
  (void)a, (void)userp;
  return NULL;
}
static TRITONSERVER_Error *query_fn(TRITONSERVER_ResponseAllocator *a, void *userp, const char *name, size_t *size,
                                    TRITONSERVER_MemoryType *mt, int64_t *id) {
  (void)a, (void)userp, (void)name, (void)size, (void)mt, (void)id;
  return NULL;
}
static TRITONSERVER_Error *attr_fn(TRITONSERVER_ResponseAllocator *a, const char *name,
                                   TRITONSERVER_BufferAttributes *attr, void *userp, void *buffer_userp) {
  (void)a, (void)name, (void)attr, (void)userp, (void)buffer_userp;
  return NULL;
}

Test(allocator, new_and_setters) {
  TRITONSERVER_ResponseAllocator *a = NULL;
  cr_assert_null(TRITONSERVER_ResponseAllocatorNew(&a, alloc_fn, release_fn, start_fn));
  cr_assert_eq(a->alloc_fn, alloc_fn);
  cr_assert_eq(a->release_fn, release_fn);
  cr_assert_eq(a->start_fn, start_fn);
  cr_assert_null(a->query_fn);
  cr_assert_null(a->buffer_attributes_fn);
  cr_assert_null(TRITONSERVER_ResponseAllocatorSetQueryFunction(a, query_fn));
  cr_assert_null(TRITONSERVER_ResponseAllocatorSetBufferAttributesFunction(a, attr_fn));
  cr_assert_eq(a->query_fn, query_fn);
  cr_assert_eq(a->buffer_attributes_fn, attr_fn);
  cr_assert_null(TRITONSERVER_ResponseAllocatorDelete(a));
}

Test(allocator, optional_start_and_bad_arguments) {
  TRITONSERVER_ResponseAllocator *a = NULL;
  cr_assert_null(TRITONSERVER_ResponseAllocatorNew(&a, alloc_fn, release_fn, NULL));
  cr_assert_null(a->start_fn);
  TRITONSERVER_ResponseAllocatorDelete(a);
  TRITONSERVER_Error *e = TRITONSERVER_ResponseAllocatorNew(NULL, alloc_fn, release_fn, NULL);
  cr_assert_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_INVALID_ARG);
  TRITONSERVER_ErrorDelete(e);
  e = TRITONSERVER_ResponseAllocatorSetQueryFunction(NULL, query_fn);
  cr_assert_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_INVALID_ARG);
  TRITONSERVER_ErrorDelete(e);
  e = TRITONSERVER_ResponseAllocatorSetBufferAttributesFunction(NULL, attr_fn);
  cr_assert_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_INVALID_ARG);
  TRITONSERVER_ErrorDelete(e);
  cr_assert_null(TRITONSERVER_ResponseAllocatorDelete(NULL));
}
