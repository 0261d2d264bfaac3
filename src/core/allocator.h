/* TRITONSERVER_ResponseAllocator: the client's callbacks for output buffers.
 * An allocator is immutable after its setters run, so the response code may
 * call through it from any thread; the client guarantees it outlives every
 * response that uses it. */
#ifndef NRD_ALLOCATOR_H
#define NRD_ALLOCATOR_H

#include "triton/core/tritonserver.h"

struct TRITONSERVER_ResponseAllocator {
  TRITONSERVER_ResponseAllocatorAllocFn_t alloc_fn; /* may be NULL: allocation then fails */
  TRITONSERVER_ResponseAllocatorReleaseFn_t release_fn; /* may be NULL: nothing to call */
  TRITONSERVER_ResponseAllocatorStartFn_t start_fn; /* optional */
  TRITONSERVER_ResponseAllocatorQueryFn_t query_fn; /* optional */
  TRITONSERVER_ResponseAllocatorBufferAttributesFn_t buffer_attributes_fn; /* optional */
};

#endif
