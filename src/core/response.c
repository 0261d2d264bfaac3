/* Responses: deliveries, backend-side creation and sending
 * (TRITONBACKEND_Response*, ResponseFactory*, Output*), and the client-side
 * accessors (TRITONSERVER_InferenceResponse*). */
#include "response.h"

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "allocator.h"
#include "buffer_attributes.h"
#include "error.h"
#include "grow.h"
#include "exec_clock.h"
#include "log.h"
#include "model.h"
#include "model_metrics.h"
#include "request.h"
#include "trace.h"

/* ------------------------------------------------------------ deliveries */

/* TRITONSERVER_DELAY_RESPONSE_COMPLETION in µs; 0: off (one relaxed load
 * per response). */
static _Atomic uint64_t completion_delay_us;

void nrd_response_delay_init(void) {
  const char *v = getenv("TRITONSERVER_DELAY_RESPONSE_COMPLETION");
  uint64_t us = 0;
  if (v && *v) {
    char *end;
    errno = 0;
    unsigned long ms = strtoul(v, &end, 10);
    if (errno || *end != '\0' || *v == '-' || *v == '+' || ms > 3600000ul)
      NRD_LOG_WARN("TRITONSERVER_DELAY_RESPONSE_COMPLETION='%.32s' is not a whole number of ms from 0 to 3600000: "
                   "not delaying",
                   v);
    else
      us = (uint64_t)ms * 1000u;
    if (us)
      NRD_LOG_INFO("TRITONSERVER_DELAY_RESPONSE_COMPLETION=%lu: delaying each response completion by %lu ms", ms, ms);
  }
  atomic_store_explicit(&completion_delay_us, us, memory_order_relaxed);
}

/* The test hook's sleep, on the thread completing the response. */
static void completion_delay(void) {
  uint64_t us = atomic_load_explicit(&completion_delay_us, memory_order_relaxed);
  if (us == 0) return;
  struct timespec ts = {(time_t)(us / 1000000u), (long)(us % 1000000u) * 1000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* The flag is always a delivery's cancel_flag: its last holder frees the
 * delivery's block. */
void nrd_cancel_flag_unref(nrd_cancel_flag *f) {
  if (f && atomic_fetch_sub_explicit(&f->refs, 1, memory_order_acq_rel) == 1)
    free((char *)f - offsetof(nrd_delivery, cancel_flag));
}

nrd_delivery *nrd_delivery_new(TRITONSERVER_InferenceRequest *req) {
  size_t idlen = req->id ? strlen(req->id) + 1 : 0;
  /* Not calloc, which bypasses malloc's per-thread cache. */
  nrd_delivery *d = malloc(sizeof(*d) + idlen);
  if (!d) return NULL;
  memset(d, 0, offsetof(nrd_delivery, response_inline_taken));
  atomic_init(&d->response_inline_taken, false);
  if (req->id) d->request_id = memcpy(d->request_id_buf, req->id, idlen);
  d->cancel = &d->cancel_flag;
  atomic_init(&d->cancel->refs, 1); /* the delivery's own; see nrd_delivery_unref */
  atomic_init(&d->refs, 1);
  d->model = req->model;
  nrd_model_ref(d->model);
  d->allocator = req->allocator;
  d->alloc_userp = req->alloc_userp;
  d->response_fn = req->response_fn;
  d->response_userp = req->response_userp;
  d->decoupled = req->model->decoupled;
  return d;
}

void nrd_delivery_ref(nrd_delivery *d) { atomic_fetch_add_explicit(&d->refs, 1, memory_order_relaxed); }

static TRITONSERVER_InferenceResponse *response_alloc(nrd_delivery *d) {
  TRITONSERVER_InferenceResponse *r = &d->response_inline;
  if (atomic_exchange_explicit(&d->response_inline_taken, true, memory_order_relaxed) && !(r = malloc(sizeof(*r))))
    return NULL;
  memset(r, 0, sizeof(*r));
  nrd_delivery_ref(d);
  r->delivery = d;
  r->outputs = r->outputs_inline;
  r->cap_outputs = NRD_RESPONSE_OUTPUTS_INLINE;
  if (d->allocator && d->allocator->start_fn) {
    TRITONSERVER_Error *e = d->allocator->start_fn((TRITONSERVER_ResponseAllocator *)d->allocator, d->alloc_userp);
    if (e) {
      NRD_LOG_ERROR("response allocator start callback failed: %s", TRITONSERVER_ErrorMessage(e));
      TRITONSERVER_ErrorDelete(e);
    }
  }
  return r;
}

void nrd_delivery_unref(nrd_delivery *d) {
  if (atomic_fetch_sub_explicit(&d->refs, 1, memory_order_acq_rel) != 1) return;
  if (!atomic_load(&d->final_sent)) {
    /* Nobody can send any more and the client was never told the request is
     * over: tell it now rather than let it wait forever. The error response
     * briefly brings the count back to one. */
    atomic_store(&d->refs, 1);
    nrd_delivery_send_error(d, nrd_error_new(TRITONSERVER_ERROR_INTERNAL,
                                             "model '%s' released request '%s' without sending a final response",
                                             d->model->name, d->request_id ? d->request_id : ""));
    if (atomic_fetch_sub_explicit(&d->refs, 1, memory_order_acq_rel) != 1) return;
  }
  nrd_trace_release(d->trace);
  nrd_model_unref(d->model);
  nrd_cancel_flag_unref(d->cancel); /* frees `d` unless a request still holds the flag */
}

/* Hands a finished response to the client; consumes `r` either way. */
static TRITONSERVER_Error *deliver(TRITONSERVER_InferenceResponse *r, uint32_t flags) {
  nrd_delivery *d = r->delivery;
  if (!d->decoupled) {
    /* One response per request; it is the final one whatever the flags say. */
    if (atomic_exchange(&d->final_sent, true)) {
      TRITONSERVER_InferenceResponseDelete(r);
      /* The client already has its one response; say it in the server log
       * too, since backends often only log the error we return. */
      NRD_LOG_ERROR("model '%s' is not decoupled but sent a second response for request '%s'; it was dropped",
                    d->model->name, d->request_id ? d->request_id : "");
      return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                           "model '%s' is not decoupled and already sent the response for request '%s'; "
                           "use a decoupled model to send more than one",
                           d->model->name, d->request_id ? d->request_id : "");
    }
    flags |= TRITONSERVER_RESPONSE_COMPLETE_FINAL;
    if (d->on_final) d->on_final(d, r);
  } else if (atomic_load(&d->final_sent)) {
    TRITONSERVER_InferenceResponseDelete(r);
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "a final response was already sent for request '%s' of model '%s'",
                         d->request_id ? d->request_id : "", d->model->name);
  } else if (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) {
    if (atomic_exchange(&d->final_sent, true)) {
      TRITONSERVER_InferenceResponseDelete(r);
      return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                           "a final response was already sent for request '%s' of model '%s'",
                           d->request_id ? d->request_id : "", d->model->name);
    }
  }
  if (atomic_fetch_add(&d->responses_sent, 1) == 0 && d->model->first_response_metric && !d->no_stats)
    nrd_model_metrics_first_response(d->model, d->start_ns);
  if (!r->error && nrd_trace_wants_tensors(d->trace))
    for (uint32_t i = 0; i < r->n_outputs; i++) {
      const nrd_output *o = r->outputs[i];
      nrd_trace_tensor(d->trace, TRITONSERVER_TRACE_TENSOR_BACKEND_OUTPUT, o->name, o->dtype, o->buffer, o->byte_size,
                       o->shape, o->dims_count, o->mtype, o->mtype_id);
    }
  nrd_delivery_ref(d); /* keep `d` alive across the callback, which may delete r */
  completion_delay();
  uint64_t mark = nrd_exec_callback_enter();
  if (d->response_fn)
    d->response_fn(r, flags, d->response_userp);
  else
    TRITONSERVER_InferenceResponseDelete(r);
  nrd_exec_callback_leave(mark);
  nrd_delivery_unref(d);
  return NULL;
}

void nrd_delivery_send_error(nrd_delivery *d, TRITONSERVER_Error *err) {
  if (atomic_load(&d->final_sent)) {
    TRITONSERVER_ErrorDelete(err);
    return;
  }
  TRITONSERVER_InferenceResponse *r = response_alloc(d);
  if (!r) {
    NRD_LOG_ERROR("out of memory answering request of model '%s' with: %s", d->model->name,
                  TRITONSERVER_ErrorMessage(err));
    TRITONSERVER_ErrorDelete(err);
    return;
  }
  r->error = err;
  NRD_ERROR_IGNORE(deliver(r, TRITONSERVER_RESPONSE_COMPLETE_FINAL), "error response after the final one was sent");
}

/* ------------------------------------------------------ response factory */

TRITONSERVER_Error *TRITONBACKEND_ResponseFactoryNew(TRITONBACKEND_ResponseFactory **factory,
                                                     TRITONBACKEND_Request *request) {
  NRD_ARG_CHECK(factory && request, "factory and request must not be NULL");
  TRITONSERVER_InferenceRequest *req = (TRITONSERVER_InferenceRequest *)request;
  if (!req->delivery)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "cannot create a response factory for a request the core does not own");
  TRITONBACKEND_ResponseFactory *f = malloc(sizeof(*f));
  if (!f) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  nrd_delivery_ref(req->delivery);
  f->delivery = req->delivery;
  *factory = f;
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ResponseFactoryDelete(TRITONBACKEND_ResponseFactory *factory) {
  if (!factory) return NULL;
  nrd_delivery_unref(factory->delivery);
  free(factory);
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ResponseFactorySendFlags(TRITONBACKEND_ResponseFactory *factory,
                                                           const uint32_t send_flags) {
  NRD_ARG_CHECK(factory, "factory must not be NULL");
  nrd_delivery *d = factory->delivery;
  if (send_flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) {
    if (atomic_exchange(&d->final_sent, true))
      return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                           "a final response was already sent for request '%s' of model '%s'",
                           d->request_id ? d->request_id : "", d->model->name);
  }
  if (d->response_fn) {
    completion_delay();
    uint64_t mark = nrd_exec_callback_enter();
    d->response_fn(NULL, send_flags, d->response_userp);
    nrd_exec_callback_leave(mark);
  }
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ResponseFactoryIsCancelled(TRITONBACKEND_ResponseFactory *factory,
                                                             bool *is_cancelled) {
  NRD_ARG_CHECK(factory && is_cancelled, "factory and result must not be NULL");
  *is_cancelled = atomic_load(&factory->delivery->cancel->set);
  return NULL;
}

/* -------------------------------------------------------- backend: response */

TRITONSERVER_Error *TRITONBACKEND_ResponseNew(TRITONBACKEND_Response **response, TRITONBACKEND_Request *request) {
  NRD_ARG_CHECK(response && request, "response and request must not be NULL");
  TRITONSERVER_InferenceRequest *req = (TRITONSERVER_InferenceRequest *)request;
  if (!req->delivery)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "cannot create a response for a request the core does not own");
  TRITONSERVER_InferenceResponse *r = response_alloc(req->delivery);
  if (!r) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  *response = (TRITONBACKEND_Response *)r;
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ResponseNewFromFactory(TRITONBACKEND_Response **response,
                                                         TRITONBACKEND_ResponseFactory *factory) {
  NRD_ARG_CHECK(response && factory, "response and factory must not be NULL");
  TRITONSERVER_InferenceResponse *r = response_alloc(factory->delivery);
  if (!r) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  *response = (TRITONBACKEND_Response *)r;
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ResponseDelete(TRITONBACKEND_Response *response) {
  return TRITONSERVER_InferenceResponseDelete((TRITONSERVER_InferenceResponse *)response);
}

#define RESP(x) ((TRITONSERVER_InferenceResponse *)(x))

TRITONSERVER_Error *TRITONBACKEND_ResponseSetStringParameter(TRITONBACKEND_Response *response, const char *name,
                                                             const char *value) {
  NRD_ARG_CHECK(response && name && value, "response, name and value must not be NULL");
  return nrd_param_list_add_string(&RESP(response)->params, name, value);
}

TRITONSERVER_Error *TRITONBACKEND_ResponseSetIntParameter(TRITONBACKEND_Response *response, const char *name,
                                                          const int64_t value) {
  NRD_ARG_CHECK(response && name, "response and name must not be NULL");
  return nrd_param_list_add_int(&RESP(response)->params, name, value);
}

TRITONSERVER_Error *TRITONBACKEND_ResponseSetBoolParameter(TRITONBACKEND_Response *response, const char *name,
                                                           const bool value) {
  NRD_ARG_CHECK(response && name, "response and name must not be NULL");
  return nrd_param_list_add_bool(&RESP(response)->params, name, value);
}

TRITONSERVER_Error *TRITONBACKEND_ResponseSetDoubleParameter(TRITONBACKEND_Response *response, const char *name,
                                                             const double value) {
  NRD_ARG_CHECK(response && name, "response and name must not be NULL");
  return nrd_param_list_add_double(&RESP(response)->params, name, value);
}

/*
 * Triton's output reshape: a backend describes an output in the model's
 * shape (the configuration's reshape.shape, after the batch dimension); the
 * client gets the configuration's dims, each -1 of dims taking, in order,
 * the value the backend gave at a -1 of reshape.shape. Returns 'shape'
 * itself when no reshape applies (or the backend's rank is not the
 * reshape's), else 'buf' (at least NRD_MAX_DIMS entries) holding the new
 * shape.
 */
static const int64_t *reshape_output(const TRITONBACKEND_Model *m, const char *name, const int64_t *shape,
                                     uint32_t *dims_count, int64_t *buf) {
  const nrd_io *io = nrd_model_find_output(m, name);
  uint32_t batch = m->max_batch_size > 0 ? 1 : 0;
  if (!io || !io->reshape || *dims_count != io->nreshape + batch || io->ndims + batch > NRD_MAX_DIMS) return shape;
  uint32_t o = 0, from = batch;
  if (batch) buf[o++] = shape[0];
  for (uint32_t i = 0; i < io->ndims; i++) {
    int64_t d = io->dims[i];
    if (d < 0) {
      while (from < *dims_count && io->reshape[from - batch] >= 0) from++;
      d = from < *dims_count ? shape[from++] : -1;
    }
    buf[o++] = d;
  }
  *dims_count = o;
  return buf;
}

TRITONSERVER_Error *TRITONBACKEND_ResponseOutput(TRITONBACKEND_Response *response, TRITONBACKEND_Output **output,
                                                 const char *name, const TRITONSERVER_DataType datatype,
                                                 const int64_t *shape, const uint32_t dims_count) {
  NRD_ARG_CHECK(response && output && name, "response, output and name must not be NULL");
  NRD_ARG_CHECK(shape || !dims_count, "output shape must not be NULL");
  const TRITONBACKEND_Model *m = RESP(response)->delivery->model;
  if (!m || !m->output_reshape) return nrd_response_output_new(response, output, name, datatype, shape, dims_count);
  int64_t buf[NRD_MAX_DIMS];
  uint32_t n = dims_count;
  const int64_t *client = reshape_output(m, name, shape, &n, buf);
  return nrd_response_output_new(response, output, name, datatype, client, n);
}

TRITONSERVER_Error *nrd_response_output_new(TRITONBACKEND_Response *response, TRITONBACKEND_Output **output,
                                            const char *name, TRITONSERVER_DataType datatype, const int64_t *shape,
                                            uint32_t dims_count) {
  TRITONSERVER_InferenceResponse *r = RESP(response);
  for (uint32_t i = 0; i < r->n_outputs; i++)
    if (!strcmp(r->outputs[i]->name, name))
      return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "output '%s' already exists in response", name);
  if (r->n_outputs == r->cap_outputs) {
    uint32_t cap = r->cap_outputs * 2;
    nrd_output **no = nrd_grow(r->outputs, r->outputs_inline, r->n_outputs, cap, sizeof(*no));
    if (!no) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    r->outputs = no;
    r->cap_outputs = cap;
  }
  size_t nlen = strlen(name) + 1;
  nrd_output *o;
  if (!r->output_inline_used && nlen <= NRD_OUTPUT_NAME_INLINE && dims_count <= NRD_OUTPUT_DIMS_INLINE) {
    o = &r->output_inline;
    memset(o, 0, sizeof(*o));
    o->shape = r->output_inline_shape;
    o->name = r->output_inline_name;
    r->output_inline_used = true;
  } else {
    /* One allocation holds the output, its shape and its name. */
    o = calloc(1, sizeof(*o) + dims_count * sizeof(int64_t) + nlen);
    if (!o) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    o->shape = (int64_t *)(o + 1);
    o->name = (char *)(o->shape + dims_count);
  }
  if (dims_count) memcpy(o->shape, shape, dims_count * sizeof(int64_t));
  memcpy(o->name, name, nlen);
  o->dims_count = dims_count;
  o->dtype = datatype;
  o->delivery = r->delivery;
  r->outputs[r->n_outputs++] = o;
  *output = (TRITONBACKEND_Output *)o;
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ResponseSend(TRITONBACKEND_Response *response, const uint32_t send_flags,
                                               TRITONSERVER_Error *error) {
  NRD_ARG_CHECK(response, "response must not be NULL");
  TRITONSERVER_InferenceResponse *r = RESP(response);
  if (error) {
    /* The backend keeps its error; the response carries a copy. */
    r->error = nrd_error_new(TRITONSERVER_ErrorCode(error), "%s", TRITONSERVER_ErrorMessage(error));
  }
  return deliver(r, send_flags);
}

/* ------------------------------------------------------- backend: outputs */

TRITONSERVER_Error *TRITONBACKEND_OutputBuffer(TRITONBACKEND_Output *output, void **buffer,
                                               const uint64_t buffer_byte_size, TRITONSERVER_MemoryType *memory_type,
                                               int64_t *memory_type_id) {
  NRD_ARG_CHECK(output && buffer && memory_type && memory_type_id, "arguments must not be NULL");
  nrd_output *o = (nrd_output *)output;
  if (o->allocated)
    return nrd_error_new(TRITONSERVER_ERROR_ALREADY_EXISTS, "a buffer was already allocated for output '%s'", o->name);
  nrd_delivery *d = o->delivery;
  if (!d->allocator || !d->allocator->alloc_fn)
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL,
                         "no response allocator was set on the request: cannot allocate output '%s'", o->name);
  void *buf = NULL, *userp = NULL;
  TRITONSERVER_MemoryType mt = *memory_type;
  int64_t id = *memory_type_id;
  TRITONSERVER_Error *e =
      d->allocator->alloc_fn((TRITONSERVER_ResponseAllocator *)d->allocator, o->name, (size_t)buffer_byte_size,
                             *memory_type, *memory_type_id, d->alloc_userp, &buf, &userp, &mt, &id);
  if (e) return e;
  if (!buf && buffer_byte_size)
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "response allocator gave no buffer for output '%s' (%llu bytes)",
                         o->name, (unsigned long long)buffer_byte_size);
  o->buffer = buf;
  o->buffer_userp = userp;
  o->byte_size = (size_t)buffer_byte_size;
  o->mtype = mt;
  o->mtype_id = id;
  o->allocated = true;
  *buffer = buf;
  *memory_type = mt;
  *memory_type_id = id;
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_OutputBufferAttributes(TRITONBACKEND_Output *output,
                                                         TRITONSERVER_BufferAttributes **buffer_attributes) {
  NRD_ARG_CHECK(output && buffer_attributes, "output and attributes must not be NULL");
  nrd_output *o = (nrd_output *)output;
  if (!o->allocated)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "output '%s' has no buffer yet: call TRITONBACKEND_OutputBuffer first", o->name);
  if (!o->attrs) {
    o->attrs = malloc(sizeof(*o->attrs));
    if (!o->attrs) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    nrd_buffer_attributes_init(o->attrs);
    o->attrs->byte_size = o->byte_size;
    o->attrs->memory_type = o->mtype;
    o->attrs->memory_type_id = o->mtype_id;
    nrd_delivery *d = o->delivery;
    if (d->allocator && d->allocator->buffer_attributes_fn) {
      TRITONSERVER_Error *e = d->allocator->buffer_attributes_fn((TRITONSERVER_ResponseAllocator *)d->allocator,
                                                                 o->name, o->attrs, d->alloc_userp, o->buffer_userp);
      if (e) return e;
    }
  }
  *buffer_attributes = o->attrs;
  return NULL;
}

/* ------------------------------------------------------ client: response */

TRITONSERVER_Error *TRITONSERVER_InferenceResponseDelete(TRITONSERVER_InferenceResponse *r) {
  if (!r) return NULL;
  nrd_delivery *d = r->delivery;
  for (uint32_t i = 0; i < r->n_outputs; i++) {
    nrd_output *o = r->outputs[i];
    if (o->allocated && d->allocator && d->allocator->release_fn) {
      TRITONSERVER_Error *e = d->allocator->release_fn((TRITONSERVER_ResponseAllocator *)d->allocator, o->buffer,
                                                       o->buffer_userp, o->byte_size, o->mtype, o->mtype_id);
      if (e) {
        NRD_LOG_ERROR("response allocator failed to release output '%s': %s", o->name, TRITONSERVER_ErrorMessage(e));
        TRITONSERVER_ErrorDelete(e);
      }
    }
    free(o->attrs);
    if (o != &r->output_inline) free(o);
  }
  if (r->outputs != r->outputs_inline) free(r->outputs);
  nrd_param_list_free(&r->params);
  if (r->error) TRITONSERVER_ErrorDelete(r->error);
  if (r != &d->response_inline) free(r);
  nrd_delivery_unref(d); /* may free `d` and so an inline `r` */
  return NULL;
}

/* The caller owns the returned copy (NULL when the response succeeded). */
TRITONSERVER_Error *TRITONSERVER_InferenceResponseError(TRITONSERVER_InferenceResponse *r) {
  if (!r) return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "response must not be NULL");
  if (!r->error) return NULL;
  return nrd_error_new(TRITONSERVER_ErrorCode(r->error), "%s", TRITONSERVER_ErrorMessage(r->error));
}

TRITONSERVER_Error *TRITONSERVER_InferenceResponseModel(TRITONSERVER_InferenceResponse *r, const char **model_name,
                                                        int64_t *model_version) {
  NRD_ARG_CHECK(r && model_name && model_version, "arguments must not be NULL");
  *model_name = r->delivery->model->name;
  *model_version = r->delivery->model->version;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_InferenceResponseId(TRITONSERVER_InferenceResponse *r, const char **request_id) {
  NRD_ARG_CHECK(r && request_id, "arguments must not be NULL");
  *request_id = r->delivery->request_id ? r->delivery->request_id : "";
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_InferenceResponseParameterCount(TRITONSERVER_InferenceResponse *r, uint32_t *count) {
  NRD_ARG_CHECK(r && count, "arguments must not be NULL");
  *count = (uint32_t)r->params.count;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_InferenceResponseParameter(TRITONSERVER_InferenceResponse *r, const uint32_t index,
                                                            const char **name, TRITONSERVER_ParameterType *type,
                                                            const void **vvalue) {
  NRD_ARG_CHECK(r && name && type && vvalue, "arguments must not be NULL");
  if (index >= r->params.count)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "parameter index %u is out of range (response has %zu parameters)", index, r->params.count);
  nrd_param *p = &r->params.items[index];
  *name = p->name;
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

TRITONSERVER_Error *TRITONSERVER_InferenceResponseOutputCount(TRITONSERVER_InferenceResponse *r, uint32_t *count) {
  NRD_ARG_CHECK(r && count, "arguments must not be NULL");
  *count = r->n_outputs;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_InferenceResponseOutput(TRITONSERVER_InferenceResponse *r, const uint32_t index,
                                                         const char **name, TRITONSERVER_DataType *datatype,
                                                         const int64_t **shape, uint64_t *dim_count, const void **base,
                                                         size_t *byte_size, TRITONSERVER_MemoryType *memory_type,
                                                         int64_t *memory_type_id, void **userp) {
  NRD_ARG_CHECK(r, "response must not be NULL");
  if (index >= r->n_outputs)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "output index %u is out of range (response has %u outputs)",
                         index, r->n_outputs);
  const nrd_output *o = r->outputs[index];
  if (name) *name = o->name;
  if (datatype) *datatype = o->dtype;
  if (shape) *shape = o->shape;
  if (dim_count) *dim_count = o->dims_count;
  if (base) *base = o->buffer;
  if (byte_size) *byte_size = o->byte_size;
  if (memory_type) *memory_type = o->mtype;
  if (memory_type_id) *memory_type_id = o->mtype_id;
  if (userp) *userp = o->buffer_userp;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_InferenceResponseOutputClassificationLabel(TRITONSERVER_InferenceResponse *r,
                                                                            const uint32_t index,
                                                                            const size_t class_index,
                                                                            const char **label) {
  NRD_ARG_CHECK(r && label, "arguments must not be NULL");
  if (index >= r->n_outputs)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "output index %u is out of range (response has %u outputs)",
                         index, r->n_outputs);
  *label = nrd_model_output_label(r->delivery->model, r->outputs[index]->name, class_index);
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_InferenceResponseOutput(TRITONBACKEND_Response *response, const uint32_t index,
                                                          const char **name, TRITONSERVER_DataType *datatype,
                                                          const int64_t **shape, uint64_t *dim_count) {
  return TRITONSERVER_InferenceResponseOutput(RESP(response), index, name, datatype, shape, dim_count, NULL, NULL, NULL,
                                              NULL, NULL);
}

TRITONSERVER_Error *TRITONBACKEND_InferenceResponseOutputByName(TRITONBACKEND_Response *response, const char *name,
                                                                TRITONSERVER_DataType *datatype, const int64_t **shape,
                                                                uint64_t *dim_count) {
  NRD_ARG_CHECK(response && name, "response and name must not be NULL");
  TRITONSERVER_InferenceResponse *r = RESP(response);
  for (uint32_t i = 0; i < r->n_outputs; i++) {
    const nrd_output *o = r->outputs[i];
    if (strcmp(o->name, name)) continue;
    if (datatype) *datatype = o->dtype;
    if (shape) *shape = o->shape;
    if (dim_count) *dim_count = o->dims_count;
    return NULL;
  }
  return nrd_error_new(TRITONSERVER_ERROR_NOT_FOUND, "response has no output named '%s'", name);
}
