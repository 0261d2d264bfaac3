/* One output of a TRITONSERVER_InferenceResponse in one struct, for the
 * reply builders of both front ends (HTTP, generate, gRPC, classification)
 * instead of nine locals each. */
#ifndef NRD_SRV_RESPONSE_OUTPUT_H
#define NRD_SRV_RESPONSE_OUTPUT_H

#include <stddef.h>
#include <stdint.h>

#include "triton/core/tritonserver.h"

/* What TRITONSERVER_InferenceResponseOutput reports. Every pointer is
 * borrowed from the response and valid until the response is deleted. */
typedef struct nrd_srv_output {
  const char *name;
  TRITONSERVER_DataType datatype;
  const int64_t *shape;
  uint64_t dims;
  const void *base;
  size_t byte_size;
  TRITONSERVER_MemoryType memory_type;
  int64_t memory_type_id;
  void *userp; /* the allocator's buffer_userp */
} nrd_srv_output;

/* Fills *out with output index of resp; the error (caller deletes) as
 * TRITONSERVER_InferenceResponseOutput gives it. Thread-safe as that is. */
static inline TRITONSERVER_Error *nrd_srv_output_get(TRITONSERVER_InferenceResponse *resp, uint32_t index,
                                                     nrd_srv_output *out) {
  return TRITONSERVER_InferenceResponseOutput(resp, index, &out->name, &out->datatype, &out->shape, &out->dims,
                                              &out->base, &out->byte_size, &out->memory_type, &out->memory_type_id,
                                              &out->userp);
}

/* The front ends' response allocators' query function: every output goes
 * to CPU memory (system shared memory is CPU memory too), which is what
 * Triton's front ends answer a backend asking through
 * TRITONBACKEND_RequestOutputBufferProperties. Any thread. */
static inline TRITONSERVER_Error *nrd_srv_output_query_cpu(TRITONSERVER_ResponseAllocator *allocator, void *userp,
                                                           const char *tensor_name, size_t *byte_size,
                                                           TRITONSERVER_MemoryType *memory_type,
                                                           int64_t *memory_type_id) {
  (void)allocator;
  (void)userp;
  (void)tensor_name;
  (void)byte_size;
  *memory_type = TRITONSERVER_MEMORY_CPU;
  *memory_type_id = 0;
  return NULL;
}

#endif
