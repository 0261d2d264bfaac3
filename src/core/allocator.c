/* Response allocators: a record of the client's callbacks. */
#include "allocator.h"

#include <stdlib.h>

#include "error.h"

TRITONSERVER_Error *TRITONSERVER_ResponseAllocatorNew(TRITONSERVER_ResponseAllocator **allocator,
                                                      TRITONSERVER_ResponseAllocatorAllocFn_t alloc_fn,
                                                      TRITONSERVER_ResponseAllocatorReleaseFn_t release_fn,
                                                      TRITONSERVER_ResponseAllocatorStartFn_t start_fn) {
  if (allocator == NULL) return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "allocator must not be NULL");
  TRITONSERVER_ResponseAllocator *a = calloc(1, sizeof(*a));
  if (a == NULL) {
    *allocator = NULL;
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  }
  a->alloc_fn = alloc_fn;
  a->release_fn = release_fn;
  a->start_fn = start_fn;
  *allocator = a;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_ResponseAllocatorSetBufferAttributesFunction(
    TRITONSERVER_ResponseAllocator *allocator,
    TRITONSERVER_ResponseAllocatorBufferAttributesFn_t buffer_attributes_fn) {
  if (allocator == NULL) return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "allocator must not be NULL");
  allocator->buffer_attributes_fn = buffer_attributes_fn;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_ResponseAllocatorSetQueryFunction(TRITONSERVER_ResponseAllocator *allocator,
                                                                   TRITONSERVER_ResponseAllocatorQueryFn_t query_fn) {
  if (allocator == NULL) return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "allocator must not be NULL");
  allocator->query_fn = query_fn;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_ResponseAllocatorDelete(TRITONSERVER_ResponseAllocator *allocator) {
  free(allocator);
  return NULL;
}
