/*
 * InferenceRequest.exec() on the server (py_bls.h). The request's inputs are
 * read in place from the shared memory (the stub waits, so they stay put);
 * the responses come back on core threads, whose outputs are copied into the
 * shared memory at once (growing it when they do not fit) and described for
 * the stub.
 */
#include "py_bls.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "py_ipc.h"
#include "py_wait.h"

#define ALIGN 64u

typedef struct bls_call {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  json_t *responses; /* the answers so far */
  bool final; /* the last response came */
  bool released; /* the core let go of the request */
  uint32_t done; /* 1: final, 2: released, or'ed in under mu; read by the spin */
  nrd_py_stub *stub; /* grown here when the outputs need it */
  uint8_t *base; /* the shared memory (its mapping now) */
  uint64_t size;
  uint64_t off; /* where the next output goes */
} bls_call;

static TRITONSERVER_Error *alloc_fn(TRITONSERVER_ResponseAllocator *a, const char *name, size_t size,
                                    TRITONSERVER_MemoryType mt, int64_t mtid, void *userp, void **buffer,
                                    void **buffer_userp, TRITONSERVER_MemoryType *actual_mt, int64_t *actual_mtid) {
  (void)a, (void)name, (void)mt, (void)mtid, (void)userp;
  *buffer = malloc(size ? size : 1);
  *buffer_userp = NULL;
  *actual_mt = TRITONSERVER_MEMORY_CPU;
  *actual_mtid = 0;
  return *buffer ? NULL : TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "python: out of memory for a BLS output");
}

static TRITONSERVER_Error *release_fn(TRITONSERVER_ResponseAllocator *a, void *buffer, void *buffer_userp, size_t size,
                                      TRITONSERVER_MemoryType mt, int64_t mtid) {
  (void)a, (void)buffer_userp, (void)size, (void)mt, (void)mtid;
  free(buffer);
  return NULL;
}

/* One allocator for every BLS call of the backend: made at first use,
 * deleted by nrd_py_bls_fini. */
static TRITONSERVER_ResponseAllocator *g_allocator;
static pthread_mutex_t g_allocator_mu = PTHREAD_MUTEX_INITIALIZER;

static TRITONSERVER_ResponseAllocator *allocator(void) {
  pthread_mutex_lock(&g_allocator_mu);
  if (g_allocator == NULL) {
    TRITONSERVER_Error *err = TRITONSERVER_ResponseAllocatorNew(&g_allocator, alloc_fn, release_fn, NULL);
    if (err != NULL) {
      nrd_bu_error_log_and_delete(err, "python: making the BLS response allocator");
      g_allocator = NULL;
    }
  }
  TRITONSERVER_ResponseAllocator *a = g_allocator;
  pthread_mutex_unlock(&g_allocator_mu);
  return a;
}

void nrd_py_bls_fini(void) {
  pthread_mutex_lock(&g_allocator_mu);
  if (g_allocator != NULL) {
    TRITONSERVER_Error *err = TRITONSERVER_ResponseAllocatorDelete(g_allocator);
    if (err != NULL) nrd_bu_error_log_and_delete(err, "python: deleting the BLS response allocator");
    g_allocator = NULL;
  }
  pthread_mutex_unlock(&g_allocator_mu);
}

/* The response's parameters as a JSON object (a double as a string: the
 * stub's InferenceResponse holds bool, int and str, as Triton's does), or
 * NULL when it has none. */
static json_t *response_parameters(TRITONSERVER_InferenceResponse *resp) {
  uint32_t n = 0;
  TRITONSERVER_Error *err = TRITONSERVER_InferenceResponseParameterCount(resp, &n);
  if (err != NULL) {
    TRITONSERVER_ErrorDelete(err);
    return NULL;
  }
  if (n == 0) return NULL;
  json_t *p = json_object();
  for (uint32_t i = 0; i < n; i++) {
    const char *name = NULL;
    TRITONSERVER_ParameterType type;
    const void *v = NULL;
    if ((err = TRITONSERVER_InferenceResponseParameter(resp, i, &name, &type, &v)) != NULL) {
      TRITONSERVER_ErrorDelete(err);
      continue;
    }
    json_t *jv = NULL;
    char text[64];
    switch (type) {
      case TRITONSERVER_PARAMETER_STRING: jv = json_string((const char *)v); break;
      case TRITONSERVER_PARAMETER_INT: jv = json_integer(*(const int64_t *)v); break;
      case TRITONSERVER_PARAMETER_BOOL: jv = json_boolean(*(const bool *)v); break;
      case TRITONSERVER_PARAMETER_DOUBLE:
        snprintf(text, sizeof text, "%.17g", *(const double *)v);
        jv = json_string(text);
        break;
      default: break;
    }
    if (jv != NULL) json_object_set_new(p, name, jv);
  }
  return p;
}

/* One response as the stub reads it; its outputs copied into the shared
 * memory. Caller holds c->mu. */
static json_t *describe_response(bls_call *c, TRITONSERVER_InferenceResponse *resp) {
  TRITONSERVER_Error *err = TRITONSERVER_InferenceResponseError(resp);
  if (err != NULL) {
    json_t *e = json_pack("{s:s}", "error", TRITONSERVER_ErrorMessage(err));
    TRITONSERVER_ErrorDelete(err);
    return e;
  }
  uint32_t n = 0;
  if ((err = TRITONSERVER_InferenceResponseOutputCount(resp, &n)) != NULL) {
    json_t *e = json_pack("{s:s}", "error", TRITONSERVER_ErrorMessage(err));
    TRITONSERVER_ErrorDelete(err);
    return e;
  }
  json_t *outs = json_array();
  for (uint32_t i = 0; i < n; i++) {
    const char *name = NULL;
    TRITONSERVER_DataType dt;
    const int64_t *shape = NULL;
    uint64_t dims = 0;
    const void *base = NULL;
    size_t size = 0;
    TRITONSERVER_MemoryType mt;
    int64_t mtid;
    void *userp;
    err = TRITONSERVER_InferenceResponseOutput(resp, i, &name, &dt, &shape, &dims, &base, &size, &mt, &mtid, &userp);
    uint64_t at = (c->off + ALIGN - 1) & ~(uint64_t)(ALIGN - 1);
    if (err == NULL && at + size > c->size) {
      /* The stub and the instance thread both wait for this call: the
       * region may grow (the BLS inputs keep their old mapping). */
      char *why = nrd_py_stub_grow(c->stub, at + size);
      if (why != NULL) {
        err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, why);
        free(why);
      } else {
        c->base = c->stub->base;
        c->size = c->stub->size;
      }
    }
    if (err != NULL) {
      json_decref(outs);
      json_t *e = json_pack("{s:s}", "error", TRITONSERVER_ErrorMessage(err));
      TRITONSERVER_ErrorDelete(err);
      return e;
    }
    if (size) memcpy(c->base + at, base, size);
    c->off = at + size;
    json_t *shp = json_array();
    for (uint64_t d = 0; d < dims; d++) json_array_append_new(shp, json_integer(shape[d]));
    json_array_append_new(outs,
                          json_pack("{s:s, s:s, s:o, s:I, s:I}", "name", name, "dtype", TRITONSERVER_DataTypeString(dt),
                                    "shape", shp, "off", (json_int_t)at, "size", (json_int_t)size));
  }
  json_t *out = json_pack("{s:o}", "outputs", outs);
  json_t *params = response_parameters(resp);
  if (params != NULL) json_object_set_new(out, "parameters", params);
  return out;
}

static void on_response(TRITONSERVER_InferenceResponse *resp, const uint32_t flags, void *userp) {
  bls_call *c = userp;
  pthread_mutex_lock(&c->mu);
  if (resp != NULL) {
    json_array_append_new(c->responses, describe_response(c, resp));
    TRITONSERVER_Error *err = TRITONSERVER_InferenceResponseDelete(resp);
    if (err != NULL) nrd_bu_error_log_and_delete(err, "python: deleting a BLS response");
  } else if (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) {
    /* The final flag alone: Triton's ResponseIterator yields it as a
     * response without outputs (the published bls_decoupled example
     * skips it by len(output_tensors()) == 0). */
    json_array_append_new(c->responses, json_pack("{s:[]}", "outputs"));
  }
  if (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) {
    c->final = true;
    __atomic_or_fetch(&c->done, 1, __ATOMIC_RELEASE);
  }
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
}

static void on_release(TRITONSERVER_InferenceRequest *req, const uint32_t flags, void *userp) {
  bls_call *c = userp;
  if (!(flags & TRITONSERVER_REQUEST_RELEASE_ALL)) return;
  TRITONSERVER_Error *err = TRITONSERVER_InferenceRequestDelete(req);
  if (err != NULL) nrd_bu_error_log_and_delete(err, "python: deleting a BLS request");
  pthread_mutex_lock(&c->mu);
  c->released = true;
  __atomic_or_fetch(&c->done, 2, __ATOMIC_RELEASE);
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
}

/* The request's parameters ("parameters": a JSON object as text). */
static TRITONSERVER_Error *set_parameters(TRITONSERVER_InferenceRequest *r, const char *text) {
  json_t *params = text ? json_loads(text, 0, NULL) : NULL;
  TRITONSERVER_Error *err = NULL;
  const char *key;
  json_t *v;
  json_object_foreach(params, key, v) {
    if (json_is_string(v))
      err = TRITONSERVER_InferenceRequestSetStringParameter(r, key, json_string_value(v));
    else if (json_is_integer(v))
      err = TRITONSERVER_InferenceRequestSetIntParameter(r, key, json_integer_value(v));
    else if (json_is_boolean(v))
      err = TRITONSERVER_InferenceRequestSetBoolParameter(r, key, json_is_true(v));
    else if (json_is_real(v))
      err = TRITONSERVER_InferenceRequestSetDoubleParameter(r, key, json_real_value(v));
    if (err != NULL) break;
  }
  json_decref(params);
  return err;
}

/* Builds the request from the message; inputs point into the shared memory. */
static TRITONSERVER_Error *build(nrd_py_instance *st, const json_t *msg, bls_call *c,
                                 TRITONSERVER_ResponseAllocator *alloc, TRITONSERVER_InferenceRequest **out) {
  *out = NULL;
  TRITONSERVER_Server *server = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelServer(st->model->model, &server);
  if (err != NULL) return err;
  const char *model = json_string_value(json_object_get(msg, "model"));
  if (model == NULL) return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "python: bad BLS request from the stub");
  int64_t version = json_integer_value(json_object_get(msg, "version"));
  /* Triton's checks before the request is made, in its order: the model
   * is ready, and a decoupled one is called with exec(decoupled=True). */
  bool ready = false;
  if ((err = TRITONSERVER_ServerModelIsReady(server, model, version, &ready)) != NULL) return err;
  if (!ready)
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL,
                             "Failed for execute the inference request. Model '%s' is not ready.", model);
  uint32_t txn = 0;
  if ((err = TRITONSERVER_ServerModelTransactionProperties(server, model, version, &txn, NULL)) != NULL) return err;
  if ((txn & TRITONSERVER_TXN_DECOUPLED) && !json_is_true(json_object_get(msg, "decoupled")))
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL,
                             "Model %s is using the decoupled. The current BLS request call doesn't support models "
                             "using the decoupled transaction policy. Please use 'decoupled=True' argument to the "
                             "'exec' or 'async_exec' calls for decoupled models.'",
                             model);
  TRITONSERVER_InferenceRequest *r = NULL;
  if ((err = TRITONSERVER_InferenceRequestNew(&r, server, model, version))) return err;
  const json_t *corr = json_object_get(msg, "correlation_id");
  const char *id = json_string_value(json_object_get(msg, "id"));
  if (id != NULL && id[0]) err = TRITONSERVER_InferenceRequestSetId(r, id);
  if (err == NULL && json_is_string(corr))
    err = TRITONSERVER_InferenceRequestSetCorrelationIdString(r, json_string_value(corr));
  else if (err == NULL && json_integer_value(corr) != 0)
    err = TRITONSERVER_InferenceRequestSetCorrelationId(r, (uint64_t)json_integer_value(corr));
  if (err == NULL)
    err = TRITONSERVER_InferenceRequestSetFlags(r, (uint32_t)json_integer_value(json_object_get(msg, "flags")));
  if (err == NULL && json_integer_value(json_object_get(msg, "timeout")) > 0)
    err = TRITONSERVER_InferenceRequestSetTimeoutMicroseconds(
        r, (uint64_t)json_integer_value(json_object_get(msg, "timeout")));
  if (err == NULL) err = set_parameters(r, json_string_value(json_object_get(msg, "parameters")));
  size_t k;
  const json_t *in;
  json_array_foreach(json_object_get(msg, "inputs"), k, in) {
    if (err != NULL) break;
    const char *name = json_string_value(json_object_get(in, "name"));
    const json_t *shp = json_object_get(in, "shape");
    int64_t shape[64];
    size_t dims = json_array_size(shp);
    uint64_t off = (uint64_t)json_integer_value(json_object_get(in, "off"));
    uint64_t size = (uint64_t)json_integer_value(json_object_get(in, "size"));
    if (name == NULL || dims > 64 || off < NRD_PY_DATA_OFFSET || off + size > c->size) {
      err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "python: bad BLS input from the stub");
      break;
    }
    for (size_t d = 0; d < dims; d++) shape[d] = json_integer_value(json_array_get(shp, d));
    TRITONSERVER_DataType dt = TRITONSERVER_StringToDataType(json_string_value(json_object_get(in, "dtype")));
    err = TRITONSERVER_InferenceRequestAddInput(r, name, dt, shape, dims);
    if (err == NULL)
      err = TRITONSERVER_InferenceRequestAppendInputData(r, name, c->base + off, size, TRITONSERVER_MEMORY_CPU, 0);
  }
  const json_t *o;
  json_array_foreach(json_object_get(msg, "outputs"), k, o) {
    if (err != NULL) break;
    if (json_is_string(o)) err = TRITONSERVER_InferenceRequestAddRequestedOutput(r, json_string_value(o));
  }
  if (err == NULL) err = TRITONSERVER_InferenceRequestSetReleaseCallback(r, on_release, c);
  if (err == NULL) err = TRITONSERVER_InferenceRequestSetResponseCallback(r, alloc, NULL, on_response, c);
  if (err != NULL) {
    TRITONSERVER_Error *e2 = TRITONSERVER_InferenceRequestDelete(r);
    if (e2 != NULL) TRITONSERVER_ErrorDelete(e2);
    return err;
  }
  *out = r;
  return NULL;
}

json_t *nrd_py_bls_run(nrd_py_instance *st, const json_t *msg) {
  TRITONSERVER_ResponseAllocator *alloc = allocator();
  if (alloc == NULL) return json_pack("{s:s}", "error", "python: no BLS response allocator");
  bls_call c = {.responses = json_array(),
                .stub = &st->stub,
                .base = st->stub.base,
                .size = st->stub.size,
                .off = (uint64_t)json_integer_value(json_object_get(msg, "out_off"))};
  if (c.off < NRD_PY_DATA_OFFSET || c.off > c.size) c.off = c.size; /* nothing fits: outputs are refused */
  pthread_mutex_init(&c.mu, NULL);
  pthread_cond_init(&c.cv, NULL);
  TRITONSERVER_InferenceRequest *r = NULL;
  TRITONSERVER_Error *err = build(st, msg, &c, alloc, &r);
  if (err == NULL) {
    TRITONSERVER_Server *server = NULL;
    err = TRITONBACKEND_ModelServer(st->model->model, &server);
    if (err == NULL) err = TRITONSERVER_ServerInferAsync(server, r, NULL);
    if (err != NULL) {
      /* Not in flight: the core calls neither callback. */
      TRITONSERVER_Error *e2 = TRITONSERVER_InferenceRequestDelete(r);
      if (e2 != NULL) TRITONSERVER_ErrorDelete(e2);
    } else {
      /* A fast model answers within a spin (py_wait.h); the callbacks'
       * last touch of 'c' is the mutex, so taking it after the spin also
       * waits for them to leave before 'c' goes. */
      uint64_t t0 = nrd_py_now_ns();
      if (st->caller_waits) nrd_py_spin_all(&st->bls_waiter, &c.done, 3, t0);
      pthread_mutex_lock(&c.mu);
      while (!c.final || !c.released) pthread_cond_wait(&c.cv, &c.mu);
      pthread_mutex_unlock(&c.mu);
      nrd_py_waited(&st->bls_waiter, nrd_py_now_ns() - t0);
    }
  }
  json_t *answer;
  if (err != NULL) {
    /* A request that never ran: Triton's sentence around the reason
     * (python_backend request_executor.cc, r25.07). */
    const char *model = json_string_value(json_object_get(msg, "model"));
    answer = json_pack("{s:s+++}", "error", "Model ", model ? model : "", " - Error when running inference: ",
                       TRITONSERVER_ErrorMessage(err));
    TRITONSERVER_ErrorDelete(err);
    json_decref(c.responses);
  } else {
    answer = json_pack("{s:o}", "responses", c.responses);
  }
  pthread_cond_destroy(&c.cv);
  pthread_mutex_destroy(&c.mu);
  return answer;
}
