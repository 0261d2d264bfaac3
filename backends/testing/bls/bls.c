/* Test-only "bls" backend: inside Execute it runs another model through the
 * in-process API (TRITONSERVER_ServerInferAsync), waits for its answer and
 * returns that model's OUTPUT0 as its own OUTPUT0. The target model is the
 * model parameter `target`. It proves a backend may call back into the
 * server from an instance thread without deadlock. Each response carries
 * the BOOL parameter `target_ran_here`: whether the target's response
 * came on the thread running this Execute (the core ran it inline), and
 * `executed_inline`: whether the core called Nereid's
 * NRDBACKEND_ModelInstanceExecuteInline (an inline execution of this
 * model) rather than Execute. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "nereid/backend_utils.h"
#include "triton/core/tritonbackend.h"

#define EXPORT TRITONBACKEND_ISPEC

typedef struct bls_model {
  char *target;
  TRITONSERVER_ResponseAllocator *allocator;
} bls_model;

/* One nested call: the instance thread waits on it until the target's final
 * response arrives on whatever thread the target uses. */
typedef struct nested {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  TRITONSERVER_InferenceResponse *response;
  bool final, released;
  pthread_t caller; /* the thread running Execute */
  bool here; /* the final response came on it */
} nested;

static TRITONSERVER_Error *alloc_fn(TRITONSERVER_ResponseAllocator *a, const char *name, size_t size,
                                    TRITONSERVER_MemoryType mt, int64_t mt_id, void *userp, void **buffer,
                                    void **buffer_userp, TRITONSERVER_MemoryType *actual_mt, int64_t *actual_id) {
  (void)a, (void)name, (void)mt, (void)mt_id, (void)userp;
  *buffer = malloc(size ? size : 1);
  *buffer_userp = NULL;
  *actual_mt = TRITONSERVER_MEMORY_CPU;
  *actual_id = 0;
  return *buffer ? NULL : TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "bls: out of memory");
}

static TRITONSERVER_Error *release_fn(TRITONSERVER_ResponseAllocator *a, void *buffer, void *buffer_userp, size_t size,
                                      TRITONSERVER_MemoryType mt, int64_t mt_id) {
  (void)a, (void)buffer_userp, (void)size, (void)mt, (void)mt_id;
  free(buffer);
  return NULL;
}

static void on_response(TRITONSERVER_InferenceResponse *r, const uint32_t flags, void *userp) {
  nested *n = userp;
  pthread_mutex_lock(&n->mu);
  if (r) {
    if (n->response) TRITONSERVER_InferenceResponseDelete(n->response);
    n->response = r;
  }
  if (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) {
    n->final = true;
    n->here = pthread_equal(pthread_self(), n->caller);
  }
  pthread_cond_broadcast(&n->cv);
  pthread_mutex_unlock(&n->mu);
}

static void on_release(TRITONSERVER_InferenceRequest *r, const uint32_t flags, void *userp) {
  (void)r, (void)flags;
  nested *n = userp;
  pthread_mutex_lock(&n->mu);
  n->released = true;
  pthread_cond_broadcast(&n->cv);
  pthread_mutex_unlock(&n->mu);
}

EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model *model) {
  json_t *config = NULL;
  TRITONSERVER_Error *err = nrd_bu_model_config(model, &config);
  if (err) return err;
  const char *target = nrd_bu_config_parameter(config, "target");
  if (!target) {
    json_decref(config);
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "bls: model parameter 'target' is required");
  }
  bls_model *m = calloc(1, sizeof(*m));
  if (m) m->target = strdup(target);
  json_decref(config);
  if (!m || !m->target) {
    free(m);
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "bls: out of memory");
  }
  err = TRITONSERVER_ResponseAllocatorNew(&m->allocator, alloc_fn, release_fn, NULL);
  if (err) {
    free(m->target);
    free(m);
    return err;
  }
  return TRITONBACKEND_ModelSetState(model, m);
}

EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model *model) {
  void *state = NULL;
  TRITONBACKEND_ModelState(model, &state);
  bls_model *m = state;
  if (m) {
    TRITONSERVER_ResponseAllocatorDelete(m->allocator);
    free(m->target);
    free(m);
  }
  return NULL;
}

/* Runs the target on `in` and copies its OUTPUT0 into `out_resp`. */
static TRITONSERVER_Error *run_nested(TRITONSERVER_Server *server, bls_model *m, const nrd_bu_tensor *in,
                                      TRITONBACKEND_Response *out_resp) {
  nested n = {.response = NULL, .caller = pthread_self()};
  pthread_mutex_init(&n.mu, NULL);
  pthread_cond_init(&n.cv, NULL);
  TRITONSERVER_InferenceRequest *req = NULL;
  TRITONSERVER_Error *err = TRITONSERVER_InferenceRequestNew(&req, server, m->target, -1);
  if (!err) err = TRITONSERVER_InferenceRequestAddInput(req, "INPUT0", in->datatype, in->shape, in->dims_count);
  if (!err)
    err = TRITONSERVER_InferenceRequestAppendInputData(req, "INPUT0", in->data, in->byte_size, TRITONSERVER_MEMORY_CPU,
                                                       0);
  if (!err) err = TRITONSERVER_InferenceRequestSetReleaseCallback(req, on_release, &n);
  if (!err) err = TRITONSERVER_InferenceRequestSetResponseCallback(req, m->allocator, NULL, on_response, &n);
  if (!err) err = TRITONSERVER_ServerInferAsync(server, req, NULL);
  if (!err) {
    pthread_mutex_lock(&n.mu);
    while (!n.final || !n.released) pthread_cond_wait(&n.cv, &n.mu);
    pthread_mutex_unlock(&n.mu);
    err = n.response ? TRITONSERVER_InferenceResponseError(n.response)
                     : TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "bls: target sent no response");
  }
  if (!err) {
    const char *name;
    TRITONSERVER_DataType dt;
    const int64_t *shape;
    uint64_t dims;
    const void *base;
    size_t size;
    TRITONSERVER_MemoryType mt;
    int64_t mt_id;
    void *userp;
    err = TRITONSERVER_InferenceResponseOutput(n.response, 0, &name, &dt, &shape, &dims, &base, &size, &mt, &mt_id,
                                               &userp);
    TRITONBACKEND_Output *out = NULL;
    if (!err) err = TRITONBACKEND_ResponseOutput(out_resp, &out, "OUTPUT0", dt, shape, (uint32_t)dims);
    void *dst = NULL;
    TRITONSERVER_MemoryType dmt = TRITONSERVER_MEMORY_CPU;
    int64_t did = 0;
    if (!err) err = TRITONBACKEND_OutputBuffer(out, &dst, size, &dmt, &did);
    if (!err && size) memcpy(dst, base, size);
    if (!err) err = TRITONBACKEND_ResponseSetBoolParameter(out_resp, "target_ran_here", n.here);
  }
  if (n.response) TRITONSERVER_InferenceResponseDelete(n.response);
  if (req) TRITONSERVER_InferenceRequestDelete(req);
  pthread_mutex_destroy(&n.mu);
  pthread_cond_destroy(&n.cv);
  return err;
}

/* Both entry points: 'inline_exec' says which one the core called. */
static TRITONSERVER_Error *execute(TRITONBACKEND_ModelInstance *instance, TRITONBACKEND_Request **requests,
                                   const uint32_t request_count, bool inline_exec) {
  TRITONBACKEND_Model *model = NULL;
  TRITONSERVER_Server *server = NULL;
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelInstanceModel(instance, &model);
  if (!err) err = TRITONBACKEND_ModelServer(model, &server);
  if (!err) err = TRITONBACKEND_ModelState(model, &state);
  if (err) return err;
  for (uint32_t i = 0; i < request_count; i++) {
    TRITONBACKEND_Response *resp = NULL;
    err = TRITONBACKEND_ResponseNew(&resp, requests[i]);
    if (err) {
      nrd_bu_error_log_and_delete(err, "bls: creating a response");
      nrd_bu_request_release(requests[i]);
      continue;
    }
    nrd_bu_tensor in = {0};
    err = nrd_bu_request_input(requests[i], "INPUT0", &in);
    if (!err) err = run_nested(server, state, &in, resp);
    if (!err) err = TRITONBACKEND_ResponseSetBoolParameter(resp, "executed_inline", inline_exec);
    nrd_bu_tensor_release(&in);
    TRITONSERVER_Error *send = TRITONBACKEND_ResponseSend(resp, TRITONSERVER_RESPONSE_COMPLETE_FINAL, err);
    if (err) TRITONSERVER_ErrorDelete(err);
    if (send) nrd_bu_error_log_and_delete(send, "bls: sending a response");
    nrd_bu_request_release(requests[i]);
  }
  return NULL;
}

EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance *instance,
                                                              TRITONBACKEND_Request **requests,
                                                              const uint32_t request_count) {
  return execute(instance, requests, request_count, false);
}

/* Nereid's extension: the core calls this one for an inline execution. */
EXPORT TRITONSERVER_Error *NRDBACKEND_ModelInstanceExecuteInline(TRITONBACKEND_ModelInstance *instance,
                                                                 TRITONBACKEND_Request **requests,
                                                                 const uint32_t request_count) {
  return execute(instance, requests, request_count, true);
}
