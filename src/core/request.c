/* Inference requests: the client-side builder API (TRITONSERVER_InferenceRequest*),
 * release and failure, and the requests the core makes itself (null
 * requests, warmup). Validation is request_validate.c; the backend-side
 * accessors (TRITONBACKEND_Request*, TRITONBACKEND_Input*) are
 * request_backend.c. */
#include "request.h"
#include "request_names.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "allocator.h"
#include "buffer_attributes.h"
#include "datatype.h"
#include "error.h"
#include "gpu.h"
#include "grow.h"
#include "exec_clock.h"
#include "log.h"
#include "model.h"
#include "response.h"
#include "state.h"
#include "stats.h"
#include "trace.h"

/* ------------------------------------------------------------------ inputs */

/* Points the pointers that used the input's inline room (see nrd_input.inl)
 * at its room again after the entry moved. */
static void input_moved(nrd_input *in) {
  if (in->inl & NRD_INL_NAME) in->name = in->name_inline;
  if (in->inl & NRD_INL_SHAPE) in->shape = in->shape_inline;
  if (in->inl & NRD_INL_BUFS) in->bufs = &in->buf_inline;
  if (in->raw_prefixed) in->bufs[0].base = &in->raw_len; /* the prefix lives in the input */
}

static void policies_free(nrd_input *in) {
  for (uint32_t i = 0; i < in->n_policies; i++) {
    free(in->policies[i].policy);
    free(in->policies[i].bufs);
  }
  free(in->policies);
  in->policies = NULL;
  in->n_policies = 0;
}

static void client_ipc_free(nrd_input *in) {
  free(in->client_ipc);
  in->client_ipc = NULL;
  in->n_client_ipc = 0;
}

static void input_free(nrd_input *in) {
  policies_free(in);
  client_ipc_free(in);
  free(in->backend_shape);
  if (!(in->inl & NRD_INL_SHAPE)) free(in->shape);
  if (!(in->inl & NRD_INL_NAME)) free(in->name);
  if (!(in->inl & NRD_INL_BUFS)) free(in->bufs);
  free(in->attrs);
}

/* ------------------------------------------------------- name indexes */

/* Whether the request has an input named `name`: below NRD_NAME_INDEX_MIN
 * inputs the plain scan (the usual case costs nothing more); from there
 * through the name index (request_names.c). */
static inline bool input_exists(TRITONSERVER_InferenceRequest *r, const char *name) {
  if (r->n_inputs >= NRD_NAME_INDEX_MIN) return nrd_request_names_has_input(r, name);
  for (uint32_t i = 0; i < r->n_inputs; i++)
    if (!strcmp(r->inputs[i].name, name)) return true;
  return false;
}

/* The same for requested outputs. */
static inline bool output_requested(TRITONSERVER_InferenceRequest *r, const char *name) {
  if (r->n_outputs >= NRD_NAME_INDEX_MIN) return nrd_request_names_has_output(r, name);
  for (uint32_t i = 0; i < r->n_outputs; i++)
    if (!strcmp(r->outputs[i], name)) return true;
  return false;
}

/* Makes room for one more input; the entries may move. */
static bool inputs_grow(TRITONSERVER_InferenceRequest *r) {
  uint32_t cap = r->cap_inputs * 2;
  nrd_input *ni = nrd_grow(r->inputs, r->inputs_inline, r->n_inputs, cap, sizeof(*ni));
  if (!ni) return false;
  r->inputs = ni;
  r->cap_inputs = cap;
  for (uint32_t i = 0; i < r->n_inputs; i++) input_moved(&ni[i]);
  return true;
}

static TRITONSERVER_Error *input_add(TRITONSERVER_InferenceRequest *r, const char *name, TRITONSERVER_DataType dt,
                                     const int64_t *shape, uint64_t dims, bool raw, nrd_input **out) {
  NRD_ARG_CHECK(r && name, "inference request and input name must not be NULL");
  if (input_exists(r, name))
    return nrd_request_error(r, TRITONSERVER_ERROR_INVALID_ARG, "input '%s' already exists in request", name);
  if (dims > 64)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "input '%s' has %" PRIu64 " dimensions; at most 64 are supported", name, dims);
  if (dims && !shape) return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "input '%s' shape must not be NULL", name);
  if (r->n_inputs == r->cap_inputs && !inputs_grow(r))
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory adding input");
  nrd_input *in = &r->inputs[r->n_inputs];
  memset(in, 0, sizeof(*in));
  size_t nlen = strlen(name) + 1;
  if (nlen <= sizeof in->name_inline) {
    in->name = memcpy(in->name_inline, name, nlen);
    in->inl |= NRD_INL_NAME;
  } else if (!(in->name = strdup(name))) {
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory adding input");
  }
  if (dims <= NRD_DIMS_INLINE) {
    in->shape = in->shape_inline;
    in->inl |= NRD_INL_SHAPE;
  } else if (!(in->shape = malloc(dims * sizeof(int64_t)))) {
    input_free(in);
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory adding input");
  }
  if (dims) memcpy(in->shape, shape, dims * sizeof(int64_t));
  in->dims_count = (uint32_t)dims;
  in->backend_dims_count = in->dims_count;
  in->bufs = &in->buf_inline;
  in->capbufs = 1;
  in->inl |= NRD_INL_BUFS;
  in->dtype = dt;
  in->is_raw = raw;
  nrd_name_index_added(r->in_index, in->name, r->n_inputs);
  r->n_inputs++;
  if (out) *out = in;
  return NULL;
}

static TRITONSERVER_Error *not_in_flight(const TRITONSERVER_InferenceRequest *r) {
  if (r->in_flight)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "inference request cannot be modified while it is in flight");
  return NULL;
}

/* --------------------------------------------------------------- outputs */

/* A copy of a requested output's name: in a free inline slot of the request
 * when the name fits (see NRD_NAME_INLINE), else on the heap. */
static char *output_name_new(TRITONSERVER_InferenceRequest *r, const char *name) {
  size_t n = strlen(name) + 1;
  if (n <= NRD_NAME_INLINE)
    for (unsigned k = 0; k < NRD_REQUEST_OUTPUTS_INLINE; k++)
      if (!(r->output_names_used & 1u << k)) {
        r->output_names_used |= (uint8_t)(1u << k);
        return memcpy(r->output_names_inline[k], name, n);
      }
  return strdup(name);
}

static void output_name_free(TRITONSERVER_InferenceRequest *r, char *name) {
  for (unsigned k = 0; k < NRD_REQUEST_OUTPUTS_INLINE; k++)
    if (name == r->output_names_inline[k]) {
      r->output_names_used &= (uint8_t) ~(1u << k);
      return;
    }
  free(name);
}

/* ----------------------------------------------------- request: lifecycle */

TRITONSERVER_Error *nrd_request_new_for(TRITONSERVER_InferenceRequest **inference_request, TRITONSERVER_Server *server,
                                        TRITONBACKEND_Model *m, int64_t model_version) {
  /* Not calloc, which bypasses malloc's per-thread cache; the inline room
   * is set up as it is used. */
  TRITONSERVER_InferenceRequest *r = malloc(sizeof(*r));
  if (!r) {
    nrd_model_unref(m);
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory creating request");
  }
  memset(r, 0, offsetof(TRITONSERVER_InferenceRequest, inputs_inline));
  r->server = server;
  r->model = m;
  r->requested_version = model_version;
  r->inputs = r->inputs_inline;
  r->cap_inputs = NRD_REQUEST_INPUTS_INLINE;
  r->outputs = r->outputs_inline;
  r->cap_outputs = NRD_REQUEST_OUTPUTS_INLINE;
  *inference_request = r;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_InferenceRequestDelete(TRITONSERVER_InferenceRequest *r) {
  if (!r) return NULL;
  if (r->in_flight)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "cannot delete an inference request that is still in flight");
  for (uint32_t i = 0; i < r->n_inputs; i++) input_free(&r->inputs[i]);
  if (r->inputs != r->inputs_inline) free(r->inputs);
  for (uint32_t i = 0; i < r->n_outputs; i++) output_name_free(r, r->outputs[i]);
  if (r->outputs != r->outputs_inline) free(r->outputs);
  nrd_name_index_drop(&r->in_index);
  nrd_name_index_drop(&r->out_index);
  nrd_param_list_free(&r->params);
  if (r->id != r->id_inline) free(r->id);
  free(r->corr_id_str);
  nrd_model_unref(r->model);
  nrd_cancel_flag_unref(r->cancel);
  free(r);
  return NULL;
}

/* ------------------------------------------------- request: simple fields */

TRITONSERVER_Error *TRITONSERVER_InferenceRequestId(TRITONSERVER_InferenceRequest *r, const char **id) {
  NRD_ARG_CHECK(r && id, "request and id must not be NULL");
  *id = r->id ? r->id : "";
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_InferenceRequestSetId(TRITONSERVER_InferenceRequest *r, const char *id) {
  NRD_ARG_CHECK(r && id, "request and id must not be NULL");
  NRD_RETURN_IF_ERROR(not_in_flight(r));
  /* `id` may be the current id itself, so the old one goes last. */
  char *old = r->id;
  size_t n = strlen(id) + 1;
  if (n <= sizeof r->id_inline) {
    r->id = memmove(r->id_inline, id, n);
  } else {
    char *c = malloc(n);
    if (!c) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    r->id = memcpy(c, id, n);
  }
  if (old != r->id_inline) free(old);
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_InferenceRequestFlags(TRITONSERVER_InferenceRequest *r, uint32_t *flags) {
  NRD_ARG_CHECK(r && flags, "request and flags must not be NULL");
  *flags = r->flags;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_InferenceRequestSetFlags(TRITONSERVER_InferenceRequest *r, uint32_t flags) {
  NRD_ARG_CHECK(r, "request must not be NULL");
  NRD_RETURN_IF_ERROR(not_in_flight(r));
  r->flags = flags;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_InferenceRequestCorrelationId(TRITONSERVER_InferenceRequest *r, uint64_t *id) {
  NRD_ARG_CHECK(r && id, "request and correlation id must not be NULL");
  if (r->corr_id_str)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "correlation id of this request is a string; use CorrelationIdString");
  *id = r->corr_id;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_InferenceRequestCorrelationIdString(TRITONSERVER_InferenceRequest *r,
                                                                     const char **id) {
  NRD_ARG_CHECK(r && id, "request and correlation id must not be NULL");
  if (!r->corr_id_str)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "correlation id of this request is an integer; use CorrelationId");
  *id = r->corr_id_str;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_InferenceRequestSetCorrelationId(TRITONSERVER_InferenceRequest *r, uint64_t id) {
  NRD_ARG_CHECK(r, "request must not be NULL");
  NRD_RETURN_IF_ERROR(not_in_flight(r));
  free(r->corr_id_str);
  r->corr_id_str = NULL;
  r->corr_id = id;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_InferenceRequestSetCorrelationIdString(TRITONSERVER_InferenceRequest *r,
                                                                        const char *id) {
  NRD_ARG_CHECK(r && id, "request and correlation id must not be NULL");
  NRD_RETURN_IF_ERROR(not_in_flight(r));
  if (strlen(id) > 128)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "string correlation id is longer than 128 characters");
  char *c = strdup(id);
  if (!c) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  free(r->corr_id_str);
  r->corr_id_str = c;
  r->corr_id = 0;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_InferenceRequestPriority(TRITONSERVER_InferenceRequest *r, uint32_t *p) {
  NRD_ARG_CHECK(r && p, "request and priority must not be NULL");
  *p = (uint32_t)r->priority;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_InferenceRequestPriorityUInt64(TRITONSERVER_InferenceRequest *r, uint64_t *p) {
  NRD_ARG_CHECK(r && p, "request and priority must not be NULL");
  *p = r->priority;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_InferenceRequestSetPriority(TRITONSERVER_InferenceRequest *r, uint32_t p) {
  NRD_ARG_CHECK(r, "request must not be NULL");
  NRD_RETURN_IF_ERROR(not_in_flight(r));
  r->priority = p;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_InferenceRequestSetPriorityUInt64(TRITONSERVER_InferenceRequest *r, uint64_t p) {
  NRD_ARG_CHECK(r, "request must not be NULL");
  NRD_RETURN_IF_ERROR(not_in_flight(r));
  r->priority = p;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_InferenceRequestTimeoutMicroseconds(TRITONSERVER_InferenceRequest *r, uint64_t *t) {
  NRD_ARG_CHECK(r && t, "request and timeout must not be NULL");
  *t = r->timeout_us;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_InferenceRequestSetTimeoutMicroseconds(TRITONSERVER_InferenceRequest *r, uint64_t t) {
  NRD_ARG_CHECK(r, "request must not be NULL");
  NRD_RETURN_IF_ERROR(not_in_flight(r));
  r->timeout_us = t;
  return NULL;
}

/* ------------------------------------------------------- request: inputs */

TRITONSERVER_Error *TRITONSERVER_InferenceRequestAddInput(TRITONSERVER_InferenceRequest *r, const char *name,
                                                          const TRITONSERVER_DataType datatype, const int64_t *shape,
                                                          uint64_t dim_count) {
  NRD_ARG_CHECK(r, "request must not be NULL");
  NRD_RETURN_IF_ERROR(not_in_flight(r));
  return input_add(r, name, datatype, shape, dim_count, false, NULL);
}

TRITONSERVER_Error *TRITONSERVER_InferenceRequestAddRawInput(TRITONSERVER_InferenceRequest *r, const char *name) {
  NRD_ARG_CHECK(r, "request must not be NULL");
  NRD_RETURN_IF_ERROR(not_in_flight(r));
  return input_add(r, name, TRITONSERVER_TYPE_INVALID, NULL, 0, true, NULL);
}

TRITONSERVER_Error *TRITONSERVER_InferenceRequestRemoveInput(TRITONSERVER_InferenceRequest *r, const char *name) {
  NRD_ARG_CHECK(r && name, "request and input name must not be NULL");
  NRD_RETURN_IF_ERROR(not_in_flight(r));
  nrd_input *in = nrd_request_find_input(r, name);
  if (!in) return nrd_request_error(r, TRITONSERVER_ERROR_INVALID_ARG, "input '%s' does not exist in request", name);
  input_free(in);
  uint32_t idx = (uint32_t)(in - r->inputs);
  memmove(in, in + 1, (r->n_inputs - idx - 1) * sizeof(*in));
  r->n_inputs--;
  nrd_name_index_drop(&r->in_index);
  for (uint32_t i = idx; i < r->n_inputs; i++) input_moved(&r->inputs[i]);
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_InferenceRequestRemoveAllInputs(TRITONSERVER_InferenceRequest *r) {
  NRD_ARG_CHECK(r, "request must not be NULL");
  NRD_RETURN_IF_ERROR(not_in_flight(r));
  for (uint32_t i = 0; i < r->n_inputs; i++) input_free(&r->inputs[i]);
  r->n_inputs = 0;
  nrd_name_index_drop(&r->in_index);
  return NULL;
}

/* GPU data needs the NVIDIA driver and a device of that id. */
static TRITONSERVER_Error *check_gpu_data(const char *name, TRITONSERVER_MemoryType mt, int64_t id) {
  if (mt != TRITONSERVER_MEMORY_GPU) return NULL;
  if (!nrd_gpu_driver_loaded())
    return nrd_error_new(TRITONSERVER_ERROR_UNSUPPORTED,
                         "input '%s': GPU memory is not supported by this server (no GPU)", name);
  if (id < 0 || id > INT32_MAX || !nrd_gpu_device_get((int)id))
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "input '%s': GPU %lld is not available", name, (long long)id);
  return NULL;
}

static TRITONSERVER_Error *append_data(TRITONSERVER_InferenceRequest *r, const char *name, const void *base,
                                       size_t size, TRITONSERVER_MemoryType mt, int64_t mt_id) {
  NRD_ARG_CHECK(r && name, "request and input name must not be NULL");
  NRD_RETURN_IF_ERROR(not_in_flight(r));
  nrd_input *in = nrd_request_find_input(r, name);
  if (!in) return nrd_request_error(r, TRITONSERVER_ERROR_INVALID_ARG, "input '%s' does not exist in request", name);
  if (!base && size) return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "input '%s' data pointer is NULL", name);
  NRD_RETURN_IF_ERROR(check_gpu_data(name, mt, mt_id));
  if (!nrd_input_bufs_reserve(in))
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory appending input data");
  in->bufs[in->nbufs++] = (nrd_buffer){base, size, mt, mt_id};
  free(in->attrs);
  in->attrs = NULL;
  in->n_attrs = 0;
  in->byte_size += size;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_InferenceRequestAppendInputData(TRITONSERVER_InferenceRequest *r, const char *name,
                                                                 const void *base, size_t byte_size,
                                                                 TRITONSERVER_MemoryType memory_type,
                                                                 int64_t memory_type_id) {
  return append_data(r, name, base, byte_size, memory_type, memory_type_id);
}

TRITONSERVER_Error *TRITONSERVER_InferenceRequestAppendInputDataWithHostPolicy(
    TRITONSERVER_InferenceRequest *r, const char *name, const void *base, size_t byte_size,
    TRITONSERVER_MemoryType memory_type, int64_t memory_type_id, const char *host_policy_name) {
  NRD_ARG_CHECK(r && name && host_policy_name, "request, input name and host policy name must not be NULL");
  NRD_RETURN_IF_ERROR(not_in_flight(r));
  nrd_input *in = nrd_request_find_input(r, name);
  if (!in) return nrd_request_error(r, TRITONSERVER_ERROR_INVALID_ARG, "input '%s' does not exist in request", name);
  if (!base && byte_size) return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "input '%s' data pointer is NULL", name);
  NRD_RETURN_IF_ERROR(check_gpu_data(name, memory_type, memory_type_id));
  /* Kept apart from the input's own data, as Triton keeps it: only a
   * backend asking for this host policy reads it. */
  nrd_policy_data *pd = NULL;
  for (uint32_t i = 0; i < in->n_policies && !pd; i++)
    if (!strcmp(in->policies[i].policy, host_policy_name)) pd = &in->policies[i];
  if (!pd) {
    nrd_policy_data *n = realloc(in->policies, (in->n_policies + 1) * sizeof(*n));
    if (!n) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory appending input data");
    in->policies = n;
    pd = &n[in->n_policies];
    *pd = (nrd_policy_data){.policy = strdup(host_policy_name)};
    if (!pd->policy) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory appending input data");
    in->n_policies++;
  }
  nrd_buffer *nb = realloc(pd->bufs, (pd->nbufs + 1) * sizeof(*nb));
  if (!nb) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory appending input data");
  pd->bufs = nb;
  nb[pd->nbufs++] = (nrd_buffer){base, byte_size, memory_type, memory_type_id};
  pd->byte_size += byte_size;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_InferenceRequestAppendInputDataWithBufferAttributes(
    TRITONSERVER_InferenceRequest *r, const char *name, const void *base, TRITONSERVER_BufferAttributes *attrs) {
  NRD_ARG_CHECK(attrs, "buffer attributes must not be NULL");
  size_t size = 0;
  TRITONSERVER_MemoryType mt = TRITONSERVER_MEMORY_CPU;
  int64_t id = 0;
  NRD_RETURN_IF_ERROR(TRITONSERVER_BufferAttributesByteSize(attrs, &size));
  NRD_RETURN_IF_ERROR(TRITONSERVER_BufferAttributesMemoryType(attrs, &mt));
  NRD_RETURN_IF_ERROR(TRITONSERVER_BufferAttributesMemoryTypeId(attrs, &id));
  NRD_RETURN_IF_ERROR(append_data(r, name, base, size, mt, id));
  if (!attrs->has_cuda_ipc_handle) return NULL;
  /* Kept for the backend (TRITONBACKEND_InputBufferAttributes). */
  nrd_input *in = nrd_request_find_input(r, name);
  nrd_client_ipc *n = realloc(in->client_ipc, (in->n_client_ipc + 1) * sizeof(*n));
  if (!n) {
    in->nbufs--; /* as if never appended */
    in->byte_size -= size;
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory appending input data");
  }
  in->client_ipc = n;
  n[in->n_client_ipc].index = in->nbufs - 1;
  memcpy(n[in->n_client_ipc].handle, attrs->cuda_ipc_handle, sizeof n->handle);
  in->n_client_ipc++;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_InferenceRequestRemoveAllInputData(TRITONSERVER_InferenceRequest *r,
                                                                    const char *name) {
  NRD_ARG_CHECK(r && name, "request and input name must not be NULL");
  NRD_RETURN_IF_ERROR(not_in_flight(r));
  nrd_input *in = nrd_request_find_input(r, name);
  if (!in) return nrd_request_error(r, TRITONSERVER_ERROR_INVALID_ARG, "input '%s' does not exist in request", name);
  in->nbufs = 0;
  in->byte_size = 0;
  policies_free(in);
  client_ipc_free(in);
  free(in->attrs);
  in->attrs = NULL;
  in->n_attrs = 0;
  return NULL;
}

/* ---------------------------------------------- request: requested outputs */

TRITONSERVER_Error *TRITONSERVER_InferenceRequestAddRequestedOutput(TRITONSERVER_InferenceRequest *r,
                                                                    const char *name) {
  NRD_ARG_CHECK(r && name, "request and output name must not be NULL");
  NRD_RETURN_IF_ERROR(not_in_flight(r));
  /* Refused, with Triton's sentence and request prefix, as Triton 26.x
   * does (core e93e4a9, a security fix); r25.07 and the 2.51 oracle took
   * the repeat as no change (docs/differences.md). */
  if (output_requested(r, name))
    return nrd_request_error(r, TRITONSERVER_ERROR_INVALID_ARG, "output '%s' already exists in request", name);
  if (r->n_outputs == r->cap_outputs) {
    uint32_t cap = r->cap_outputs * 2;
    char **no = nrd_grow(r->outputs, r->outputs_inline, r->n_outputs, cap, sizeof(*no));
    if (!no) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    r->outputs = no;
    r->cap_outputs = cap;
  }
  char *c = output_name_new(r, name);
  if (!c) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  nrd_name_index_added(r->out_index, c, r->n_outputs);
  r->outputs[r->n_outputs++] = c;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_InferenceRequestRemoveRequestedOutput(TRITONSERVER_InferenceRequest *r,
                                                                       const char *name) {
  NRD_ARG_CHECK(r && name, "request and output name must not be NULL");
  NRD_RETURN_IF_ERROR(not_in_flight(r));
  for (uint32_t i = 0; i < r->n_outputs; i++) {
    if (!strcmp(r->outputs[i], name)) {
      output_name_free(r, r->outputs[i]);
      memmove(&r->outputs[i], &r->outputs[i + 1], (r->n_outputs - i - 1) * sizeof(char *));
      r->n_outputs--;
      nrd_name_index_drop(&r->out_index);
      return NULL;
    }
  }
  return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "output '%s' is not requested", name);
}

TRITONSERVER_Error *TRITONSERVER_InferenceRequestRemoveAllRequestedOutputs(TRITONSERVER_InferenceRequest *r) {
  NRD_ARG_CHECK(r, "request must not be NULL");
  NRD_RETURN_IF_ERROR(not_in_flight(r));
  for (uint32_t i = 0; i < r->n_outputs; i++) output_name_free(r, r->outputs[i]);
  r->n_outputs = 0;
  nrd_name_index_drop(&r->out_index);
  return NULL;
}

/* --------------------------------------------- request: callbacks, cancel */

TRITONSERVER_Error *TRITONSERVER_InferenceRequestSetReleaseCallback(TRITONSERVER_InferenceRequest *r,
                                                                    TRITONSERVER_InferenceRequestReleaseFn_t fn,
                                                                    void *userp) {
  NRD_ARG_CHECK(r, "request must not be NULL");
  NRD_RETURN_IF_ERROR(not_in_flight(r));
  r->release_fn = fn;
  r->release_userp = userp;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_InferenceRequestSetResponseCallback(TRITONSERVER_InferenceRequest *r,
                                                                     TRITONSERVER_ResponseAllocator *allocator,
                                                                     void *alloc_userp,
                                                                     TRITONSERVER_InferenceResponseCompleteFn_t fn,
                                                                     void *userp) {
  NRD_ARG_CHECK(r, "request must not be NULL");
  NRD_RETURN_IF_ERROR(not_in_flight(r));
  r->allocator = allocator;
  r->alloc_userp = alloc_userp;
  r->response_fn = fn;
  r->response_userp = userp;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_InferenceRequestCancel(TRITONSERVER_InferenceRequest *r) {
  NRD_ARG_CHECK(r, "request must not be NULL");
  nrd_cancel_flag *f = atomic_load(&r->cancel);
  if (f) atomic_store(&f->set, true);
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_InferenceRequestIsCancelled(TRITONSERVER_InferenceRequest *r, bool *c) {
  NRD_ARG_CHECK(r && c, "request and result must not be NULL");
  nrd_cancel_flag *f = atomic_load(&r->cancel);
  *c = f && atomic_load(&f->set);
  return NULL;
}

/* Both sides store, then look at the other's store (seq_cst): at least one
 * of them sees the other, so a cancel racing the first submission is not
 * lost. A later submission of a reused request starts uncancelled. */
void nrd_request_adopt_cancel(TRITONSERVER_InferenceRequest *r, nrd_cancel_flag *f) {
  atomic_fetch_add(&f->refs, 1);
  nrd_cancel_flag *old = atomic_exchange(&r->cancel, f);
  if (old) {
    nrd_cancel_flag_unref(old);
    atomic_store(&r->cancel_asked, false);
  } else if (atomic_load(&r->cancel_asked)) {
    atomic_store(&f->set, true);
  }
}

void nrd_request_cancel(TRITONSERVER_InferenceRequest *r) {
  atomic_store(&r->cancel_asked, true);
  nrd_cancel_flag *f = atomic_load(&r->cancel);
  if (f) atomic_store(&f->set, true);
}

/* ------------------------------------------------- request: parameters */

TRITONSERVER_Error *TRITONSERVER_InferenceRequestSetStringParameter(TRITONSERVER_InferenceRequest *r, const char *key,
                                                                    const char *value) {
  NRD_ARG_CHECK(r && key && value, "request, key and value must not be NULL");
  NRD_RETURN_IF_ERROR(not_in_flight(r));
  return nrd_param_list_add_string(&r->params, key, value);
}

TRITONSERVER_Error *TRITONSERVER_InferenceRequestSetIntParameter(TRITONSERVER_InferenceRequest *r, const char *key,
                                                                 const int64_t value) {
  NRD_ARG_CHECK(r && key, "request and key must not be NULL");
  NRD_RETURN_IF_ERROR(not_in_flight(r));
  return nrd_param_list_add_int(&r->params, key, value);
}

TRITONSERVER_Error *TRITONSERVER_InferenceRequestSetBoolParameter(TRITONSERVER_InferenceRequest *r, const char *key,
                                                                  const bool value) {
  NRD_ARG_CHECK(r && key, "request and key must not be NULL");
  NRD_RETURN_IF_ERROR(not_in_flight(r));
  return nrd_param_list_add_bool(&r->params, key, value);
}

TRITONSERVER_Error *TRITONSERVER_InferenceRequestSetDoubleParameter(TRITONSERVER_InferenceRequest *r, const char *key,
                                                                    const double value) {
  NRD_ARG_CHECK(r && key, "request and key must not be NULL");
  NRD_RETURN_IF_ERROR(not_in_flight(r));
  return nrd_param_list_add_double(&r->params, key, value);
}

/* ------------------------------------------------------ release / fail */

TRITONSERVER_Error *nrd_request_add_core_input(TRITONSERVER_InferenceRequest *r, const char *name,
                                               TRITONSERVER_DataType dtype, const int64_t *shape, uint32_t dims,
                                               const void *data, uint64_t size) {
  nrd_input *in = NULL;
  NRD_RETURN_IF_ERROR(input_add(r, name, dtype, shape, dims, false, &in));
  in->bufs[0] = (nrd_buffer){.base = data, .size = (size_t)size, .mtype = TRITONSERVER_MEMORY_CPU, .mtype_id = 0};
  in->nbufs = 1;
  in->byte_size = size;
  r->n_core_inputs++;
  return NULL;
}

void nrd_request_detach_core(TRITONSERVER_InferenceRequest *r) {
  if (r->n_core_inputs > 0) nrd_name_index_drop(&r->in_index);
  for (; r->n_core_inputs > 0 && r->n_inputs > 0; r->n_core_inputs--) input_free(&r->inputs[--r->n_inputs]);
  r->n_core_inputs = 0;
  if (r->seq) r->seq->free(r->seq);
  r->seq = NULL;
}

/* ------------------------------------------------------ null requests */

static TRITONSERVER_Error *null_alloc(TRITONSERVER_ResponseAllocator *allocator, const char *tensor_name,
                                      size_t byte_size, TRITONSERVER_MemoryType memory_type, int64_t memory_type_id,
                                      void *userp, void **buffer, void **buffer_userp,
                                      TRITONSERVER_MemoryType *actual_memory_type, int64_t *actual_memory_type_id) {
  (void)allocator, (void)byte_size, (void)memory_type, (void)memory_type_id, (void)userp;
  *buffer = NULL;
  *buffer_userp = NULL;
  *actual_memory_type = TRITONSERVER_MEMORY_CPU;
  *actual_memory_type_id = 0;
  return nrd_error_new(TRITONSERVER_ERROR_INTERNAL,
                       "output '%s' of a null request (sequence batch padding): no output is requested",
                       tensor_name ? tensor_name : "");
}

static const struct TRITONSERVER_ResponseAllocator null_allocator = {.alloc_fn = null_alloc};

static void null_response(TRITONSERVER_InferenceResponse *response, const uint32_t flags, void *userp) {
  (void)flags, (void)userp;
  if (response) TRITONSERVER_InferenceResponseDelete(response);
}

/* userp: the zeroed data the inputs point at. */
static void null_release(TRITONSERVER_InferenceRequest *r, const uint32_t flags, void *userp) {
  (void)flags;
  free(userp);
  TRITONSERVER_InferenceRequestDelete(r);
}

TRITONSERVER_InferenceRequest *nrd_request_new_internal(TRITONSERVER_Server *server, TRITONBACKEND_Model *m) {
  TRITONSERVER_InferenceRequest *r = malloc(sizeof(*r));
  if (!r) return NULL;
  memset(r, 0, offsetof(TRITONSERVER_InferenceRequest, inputs_inline));
  r->server = server;
  r->model = m;
  nrd_model_ref(m);
  r->requested_version = m->version;
  r->inputs = r->inputs_inline;
  r->cap_inputs = NRD_REQUEST_INPUTS_INLINE;
  r->outputs = r->outputs_inline;
  r->cap_outputs = NRD_REQUEST_OUTPUTS_INLINE;
  r->no_stats = true;
  return r;
}

/* Puts a core-made request in flight with a delivery that records no
 * statistics. */
static bool begin_unscheduled(TRITONSERVER_InferenceRequest *r) {
  nrd_delivery *d = nrd_delivery_new(r);
  if (!d) return false;
  d->no_stats = true;
  r->delivery = d;
  nrd_request_adopt_cancel(r, d->cancel);
  r->queue_start_ns = nrd_now_ns();
  r->in_flight = true;
  nrd_model_inflight_add(r->model);
  return true;
}

TRITONSERVER_Error *nrd_request_begin_internal(TRITONSERVER_InferenceRequest *r) {
  NRD_RETURN_IF_ERROR(nrd_request_validate(r));
  if (!begin_unscheduled(r)) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  return NULL;
}

TRITONSERVER_InferenceRequest *nrd_request_new_null(const TRITONSERVER_InferenceRequest *from) {
  TRITONSERVER_InferenceRequest *r = nrd_request_new_internal(from->server, from->model);
  if (!r) return NULL;
  r->requested_version = from->requested_version;
  r->is_null = true;
  r->batch_size = from->batch_size;
  /* One zeroed buffer under every input, as large as the largest: BYTES
   * elements then read as empty strings. */
  uint32_t n_client = from->n_inputs - from->n_core_inputs;
  uint64_t most = 1;
  for (uint32_t i = 0; i < n_client; i++)
    if (from->inputs[i].byte_size > most) most = from->inputs[i].byte_size;
  void *zeros = calloc(1, (size_t)most);
  bool ok = zeros != NULL;
  for (uint32_t i = 0; ok && i < n_client; i++) {
    const nrd_input *f = &from->inputs[i];
    nrd_input *in = NULL;
    TRITONSERVER_Error *err = input_add(r, f->name, f->dtype, f->shape, f->dims_count, f->is_raw, &in);
    if (err) {
      TRITONSERVER_ErrorDelete(err);
      ok = false;
      break;
    }
    if (f->backend_shape) {
      in->backend_shape = malloc(f->backend_dims_count * sizeof(int64_t));
      if (!in->backend_shape) {
        ok = false;
        break;
      }
      memcpy(in->backend_shape, f->backend_shape, f->backend_dims_count * sizeof(int64_t));
    }
    in->backend_dims_count = f->backend_dims_count;
    in->bufs[0] = (nrd_buffer){.base = zeros, .size = (size_t)f->byte_size, .mtype = TRITONSERVER_MEMORY_CPU};
    in->nbufs = f->byte_size ? 1 : 0;
    in->byte_size = f->byte_size;
  }
  r->allocator = &null_allocator;
  r->response_fn = null_response;
  r->release_fn = null_release;
  r->release_userp = zeros;
  if (!ok || !begin_unscheduled(r)) {
    free(zeros);
    TRITONSERVER_InferenceRequestDelete(r);
    return NULL;
  }
  return r;
}

void nrd_request_pending_done(TRITONSERVER_InferenceRequest *r) {
  if (!r->pending) return;
  r->pending = false;
  nrd_stats_pending_add(&r->model->stats, -1);
}

void nrd_request_release(TRITONSERVER_InferenceRequest *r, uint32_t flags) {
  TRITONBACKEND_Model *m = r->model;
  /* First, while the model (and its sequence batcher) surely still lives.
   * Only sequence requests that ran carry `seq`. */
  if (r->seq && !r->is_null) nrd_model_request_released(m, r);
  if (r->seq || r->n_core_inputs) nrd_request_detach_core(r);
  nrd_delivery *d = r->delivery;
  r->delivery = NULL;
  r->in_flight = false;
  nrd_request_pending_done(r);
  if (r->trace) {
    TRITONSERVER_InferenceTrace *t = r->trace;
    r->trace = NULL;
    nrd_trace_report(t, TRITONSERVER_TRACE_REQUEST_END, nrd_now_ns());
    if (!d || d->trace != t) nrd_trace_release(t); /* else the delivery hands it back */
  }
  if (d) nrd_delivery_unref(d);
  nrd_model_inflight_done(m);
  if (r->release_fn) {
    uint64_t mark = nrd_exec_callback_enter();
    r->release_fn(r, flags | TRITONSERVER_REQUEST_RELEASE_ALL, r->release_userp);
    nrd_exec_callback_leave(mark);
  }
}

void nrd_request_trace_inputs(TRITONSERVER_InferenceRequest *r, TRITONSERVER_InferenceTraceActivity activity) {
  if (!nrd_trace_wants_tensors(r->trace)) return;
  for (uint32_t i = 0; i + r->n_core_inputs < r->n_inputs; i++) {
    const nrd_input *in = &r->inputs[i];
    const void *base = in->nbufs ? in->bufs[0].base : NULL;
    TRITONSERVER_MemoryType mt = in->nbufs ? in->bufs[0].mtype : TRITONSERVER_MEMORY_CPU;
    int64_t mt_id = in->nbufs ? in->bufs[0].mtype_id : 0;
    char *joined = NULL;
    if (in->nbufs > 1) {
      bool host = true;
      for (uint32_t b = 0; b < in->nbufs; b++) host = host && in->bufs[b].mtype != TRITONSERVER_MEMORY_GPU;
      if (!host || !(joined = malloc(in->byte_size ? in->byte_size : 1))) continue; /* not worth failing for */
      size_t at = 0;
      for (uint32_t b = 0; b < in->nbufs; b++) {
        if (in->bufs[b].size) memcpy(joined + at, in->bufs[b].base, in->bufs[b].size);
        at += in->bufs[b].size;
      }
      base = joined;
      mt = TRITONSERVER_MEMORY_CPU;
      mt_id = 0;
    }
    nrd_trace_tensor(r->trace, activity, in->name, in->dtype, base, in->byte_size, in->shape, in->dims_count, mt,
                     mt_id);
    free(joined);
  }
}

void nrd_request_fail(TRITONSERVER_InferenceRequest *r, TRITONSERVER_Error *err, nrd_fail_reason reason) {
  uint64_t now = nrd_now_ns();
  if (!r->no_stats) nrd_stats_request_fail(&r->model->stats, r->queue_start_ns, r->queue_start_ns, 0, now, reason, -1);
  if (r->delivery)
    nrd_delivery_send_error(r->delivery, err);
  else
    TRITONSERVER_ErrorDelete(err);
  nrd_request_release(r, TRITONSERVER_REQUEST_RELEASE_ALL);
}
