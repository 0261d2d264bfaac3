/* The backend's view of a request: the TRITONBACKEND_Request* API
 * (identity, inputs and their buffers per host policy, requested outputs,
 * release). The builder API is request.c, validation request_validate.c. */
#include "request.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "allocator.h"
#include "buffer_attributes.h"
#include "datatype.h"
#include "error.h"
#include "gpu.h"
#include "log.h"
#include "model.h"
#include "response.h"
#include "stats.h"
#include "trace.h"

_Static_assert(sizeof(((nrd_client_ipc *)0)->handle) == NRD_CUDA_IPC_HANDLE_SIZE, "client IPC handle size");

#define REQ(x) ((TRITONSERVER_InferenceRequest *)(x))

TRITONSERVER_Error *TRITONBACKEND_RequestId(TRITONBACKEND_Request *request, const char **id) {
  return TRITONSERVER_InferenceRequestId(REQ(request), id);
}

TRITONSERVER_Error *TRITONBACKEND_RequestCorrelationId(TRITONBACKEND_Request *request, uint64_t *id) {
  return TRITONSERVER_InferenceRequestCorrelationId(REQ(request), id);
}

TRITONSERVER_Error *TRITONBACKEND_RequestCorrelationIdString(TRITONBACKEND_Request *request, const char **id) {
  return TRITONSERVER_InferenceRequestCorrelationIdString(REQ(request), id);
}

TRITONSERVER_Error *TRITONBACKEND_RequestFlags(TRITONBACKEND_Request *request, uint32_t *flags) {
  return TRITONSERVER_InferenceRequestFlags(REQ(request), flags);
}

TRITONSERVER_Error *TRITONBACKEND_RequestIsCancelled(TRITONBACKEND_Request *request, bool *is_cancelled) {
  return TRITONSERVER_InferenceRequestIsCancelled(REQ(request), is_cancelled);
}

TRITONSERVER_Error *TRITONBACKEND_RequestParameterCount(TRITONBACKEND_Request *request, uint32_t *count) {
  NRD_ARG_CHECK(request && count, "request and count must not be NULL");
  *count = (uint32_t)REQ(request)->params.count;
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_RequestParameter(TRITONBACKEND_Request *request, const uint32_t index,
                                                   const char **key, TRITONSERVER_ParameterType *type,
                                                   const void **vvalue) {
  NRD_ARG_CHECK(request && key && type && vvalue, "arguments must not be NULL");
  const nrd_param_list *pl = &REQ(request)->params;
  if (index >= pl->count)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "parameter index %u is out of range (request has %zu parameters)", index, pl->count);
  nrd_param *p = &pl->items[index];
  *key = p->name;
  *type = p->type;
  switch (p->type) {
    case TRITONSERVER_PARAMETER_STRING: *vvalue = p->v.s; break;
    case TRITONSERVER_PARAMETER_INT: *vvalue = &p->v.i; break;
    case TRITONSERVER_PARAMETER_BOOL: *vvalue = &p->v.b; break;
    case TRITONSERVER_PARAMETER_DOUBLE: *vvalue = &p->v.d; break;
    default: *vvalue = p->v.bytes.p; break;
  }
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_RequestInputCount(TRITONBACKEND_Request *request, uint32_t *count) {
  NRD_ARG_CHECK(request && count, "request and count must not be NULL");
  *count = REQ(request)->n_inputs;
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_RequestInputName(TRITONBACKEND_Request *request, const uint32_t index,
                                                   const char **input_name) {
  NRD_ARG_CHECK(request && input_name, "request and name must not be NULL");
  TRITONSERVER_InferenceRequest *r = REQ(request);
  if (index >= r->n_inputs)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "input index %u is out of range (request has %u inputs)",
                         index, r->n_inputs);
  *input_name = r->inputs[index].name;
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_RequestInput(TRITONBACKEND_Request *request, const char *name,
                                               TRITONBACKEND_Input **input) {
  NRD_ARG_CHECK(request && name && input, "request, name and input must not be NULL");
  nrd_input *in = nrd_request_find_input(REQ(request), name);
  if (!in) return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "unknown request input name '%s'", name);
  *input = (TRITONBACKEND_Input *)in;
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_RequestInputByIndex(TRITONBACKEND_Request *request, const uint32_t index,
                                                      TRITONBACKEND_Input **input) {
  NRD_ARG_CHECK(request && input, "request and input must not be NULL");
  TRITONSERVER_InferenceRequest *r = REQ(request);
  if (index >= r->n_inputs)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "input index %u is out of range (request has %u inputs)",
                         index, r->n_inputs);
  *input = (TRITONBACKEND_Input *)&r->inputs[index];
  return NULL;
}

/* When the client named no outputs, every configured output is requested. */
TRITONSERVER_Error *TRITONBACKEND_RequestOutputCount(TRITONBACKEND_Request *request, uint32_t *count) {
  NRD_ARG_CHECK(request && count, "request and count must not be NULL");
  TRITONSERVER_InferenceRequest *r = REQ(request);
  *count = r->n_outputs || r->is_null ? r->n_outputs : r->model->n_outputs;
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_RequestOutputName(TRITONBACKEND_Request *request, const uint32_t index,
                                                    const char **output_name) {
  NRD_ARG_CHECK(request && output_name, "request and name must not be NULL");
  TRITONSERVER_InferenceRequest *r = REQ(request);
  uint32_t n = r->n_outputs || r->is_null ? r->n_outputs : r->model->n_outputs;
  if (index >= n)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "requested output index %u is out of range (%u outputs)",
                         index, n);
  *output_name = r->n_outputs ? r->outputs[index] : r->model->outputs[index].name;
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_RequestOutputBufferProperties(TRITONBACKEND_Request *request, const char *name,
                                                                size_t *byte_size, TRITONSERVER_MemoryType *memory_type,
                                                                int64_t *memory_type_id) {
  NRD_ARG_CHECK(request && name, "request and name must not be NULL");
  TRITONSERVER_InferenceRequest *r = REQ(request);
  /* As in Triton: only an allocator with a query function can answer. */
  if (!r->allocator || !r->allocator->query_fn)
    return nrd_error_new(TRITONSERVER_ERROR_UNAVAILABLE,
                         "request for model '%s': output properties are not available (the response "
                         "allocator has no query function)",
                         r->model ? r->model->name : "");
  TRITONSERVER_MemoryType mt = memory_type ? *memory_type : TRITONSERVER_MEMORY_CPU;
  int64_t id = memory_type_id ? *memory_type_id : 0;
  size_t bs = byte_size ? *byte_size : 0;
  NRD_RETURN_IF_ERROR(r->allocator->query_fn((TRITONSERVER_ResponseAllocator *)r->allocator, r->alloc_userp, name,
                                             byte_size ? &bs : NULL, &mt, &id));
  if (byte_size) *byte_size = bs;
  if (memory_type) *memory_type = mt;
  if (memory_type_id) *memory_type_id = id;
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_RequestRelease(TRITONBACKEND_Request *request, uint32_t release_flags) {
  NRD_ARG_CHECK(request, "request must not be NULL");
  TRITONSERVER_InferenceRequest *r = REQ(request);
  if (!r->in_flight) return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "request was already released");
  if (release_flags & TRITONSERVER_REQUEST_RELEASE_RESCHEDULE) {
    /* The backend wants this request executed again (iterative scheduling). */
    r->no_nested_inline = true; /* not inside the Execute releasing it */
    TRITONSERVER_Error *err = nrd_model_reschedule(r->model, r);
    if (!err) return NULL;
    nrd_request_fail(r, err, NRD_FAIL_REJECTED); /* the scheduler refused it */
    return NULL;
  }
  nrd_request_release(r, release_flags);
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_RequestTrace(TRITONBACKEND_Request *request, TRITONSERVER_InferenceTrace **trace) {
  NRD_ARG_CHECK(request && trace, "request and trace must not be NULL");
  *trace = REQ(request)->trace;
  return NULL;
}

/* ---------------------------------------------------- backend: inputs */

TRITONSERVER_Error *TRITONBACKEND_InputProperties(TRITONBACKEND_Input *input, const char **name,
                                                  TRITONSERVER_DataType *datatype, const int64_t **shape,
                                                  uint32_t *dims_count, uint64_t *byte_size, uint32_t *buffer_count) {
  NRD_ARG_CHECK(input, "input must not be NULL");
  const nrd_input *in = (const nrd_input *)input;
  if (name) *name = in->name;
  if (datatype) *datatype = in->dtype;
  if (shape) *shape = in->backend_shape ? in->backend_shape : in->shape;
  if (dims_count) *dims_count = in->backend_dims_count;
  if (byte_size) *byte_size = in->byte_size;
  if (buffer_count) *buffer_count = in->nbufs;
  return NULL;
}

/* The data given for `policy`, or NULL: then the input's own data serves. */
static const nrd_policy_data *policy_data(const nrd_input *in, const char *policy) {
  for (uint32_t i = 0; policy && i < in->n_policies; i++)
    if (!strcmp(in->policies[i].policy, policy)) return &in->policies[i];
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_InputPropertiesForHostPolicy(TRITONBACKEND_Input *input, const char *host_policy_name,
                                                               const char **name, TRITONSERVER_DataType *datatype,
                                                               const int64_t **shape, uint32_t *dims_count,
                                                               uint64_t *byte_size, uint32_t *buffer_count) {
  NRD_RETURN_IF_ERROR(TRITONBACKEND_InputProperties(input, name, datatype, shape, dims_count, byte_size, buffer_count));
  const nrd_policy_data *pd = policy_data((const nrd_input *)input, host_policy_name);
  if (pd) {
    if (byte_size) *byte_size = pd->byte_size;
    if (buffer_count) *buffer_count = pd->nbufs;
  }
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_InputBuffer(TRITONBACKEND_Input *input, const uint32_t index, const void **buffer,
                                              uint64_t *buffer_byte_size, TRITONSERVER_MemoryType *memory_type,
                                              int64_t *memory_type_id) {
  NRD_ARG_CHECK(input && buffer && buffer_byte_size, "input, buffer and size must not be NULL");
  const nrd_input *in = (const nrd_input *)input;
  if (index >= in->nbufs)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "buffer index %u is out of range for input '%s' (%u buffers)",
                         index, in->name, in->nbufs);
  const nrd_buffer *b = &in->bufs[index];
  *buffer = b->base;
  *buffer_byte_size = b->size;
  if (memory_type) *memory_type = b->mtype;
  if (memory_type_id) *memory_type_id = b->mtype_id;
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_InputBufferForHostPolicy(TRITONBACKEND_Input *input, const char *host_policy_name,
                                                           const uint32_t index, const void **buffer,
                                                           uint64_t *buffer_byte_size,
                                                           TRITONSERVER_MemoryType *memory_type,
                                                           int64_t *memory_type_id) {
  NRD_ARG_CHECK(input && buffer && buffer_byte_size, "input, buffer and size must not be NULL");
  const nrd_input *in = (const nrd_input *)input;
  const nrd_policy_data *pd = policy_data(in, host_policy_name);
  if (!pd) return TRITONBACKEND_InputBuffer(input, index, buffer, buffer_byte_size, memory_type, memory_type_id);
  if (index >= pd->nbufs)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "buffer index %u is out of range for input '%s' with host policy '%s' (%u buffers)", index,
                         in->name, host_policy_name, pd->nbufs);
  const nrd_buffer *b = &pd->bufs[index];
  *buffer = b->base;
  *buffer_byte_size = b->size;
  if (memory_type) *memory_type = b->mtype;
  if (memory_type_id) *memory_type_id = b->mtype_id;
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_InputBufferAttributes(TRITONBACKEND_Input *input, const uint32_t index,
                                                        const void **buffer,
                                                        TRITONSERVER_BufferAttributes **buffer_attributes) {
  NRD_ARG_CHECK(input && buffer && buffer_attributes, "arguments must not be NULL");
  nrd_input *in = (nrd_input *)input;
  if (index >= in->nbufs)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "buffer index %u is out of range for input '%s' (%u buffers)",
                         index, in->name, in->nbufs);
  if (!in->attrs) {
    /* Made on first use; they live as long as the input. */
    in->attrs = calloc(in->nbufs, sizeof(*in->attrs));
    if (!in->attrs) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    in->n_attrs = in->nbufs;
  }
  if (index >= in->n_attrs)
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "input '%s' changed after attributes were read", in->name);
  struct TRITONSERVER_BufferAttributes *a = &in->attrs[index];
  const nrd_buffer *b = &in->bufs[index];
  nrd_buffer_attributes_init(a);
  a->byte_size = b->size;
  a->memory_type = b->mtype;
  a->memory_type_id = b->mtype_id;
  /* GPU data: the client's CUDA IPC handle when it gave one with the
   * buffer (as Triton hands it on), else that of its allocation when the
   * driver gives one (it does for the start of an allocation). */
  const nrd_client_ipc *given = NULL;
  for (uint32_t i = 0; i < in->n_client_ipc && !given; i++)
    if (in->client_ipc[i].index == index) given = &in->client_ipc[i];
  char handle[NRD_GPU_IPC_HANDLE_SIZE];
  if (given) {
    memcpy(a->cuda_ipc_handle, given->handle, NRD_CUDA_IPC_HANDLE_SIZE);
    a->has_cuda_ipc_handle = true;
  } else if (b->mtype == TRITONSERVER_MEMORY_GPU && b->mtype_id >= 0 && b->mtype_id <= INT32_MAX) {
    TRITONSERVER_Error *e = nrd_gpu_ipc_handle((int)b->mtype_id, (void *)b->base, handle);
    if (!e) {
      memcpy(a->cuda_ipc_handle, handle, NRD_CUDA_IPC_HANDLE_SIZE);
      a->has_cuda_ipc_handle = true;
    }
    TRITONSERVER_ErrorDelete(e);
  }
  *buffer = b->base;
  *buffer_attributes = a;
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_InferenceRequestTimeoutMicroseconds(TRITONBACKEND_Request *request,
                                                                      uint64_t *timeout) {
  return TRITONSERVER_InferenceRequestTimeoutMicroseconds(REQ(request), timeout);
}
