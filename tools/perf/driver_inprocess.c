/* The in-process transport: a server inside nrd_perf's own process,
 * started through libtritonserver.so's public API, with one reusable
 * TRITONSERVER_InferenceRequest per slot.
 *
 * Threads: the response and release callbacks run on core threads; the
 * second of the two completes the slot (and may re-send from there). */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driver.h"
#include "triton/core/tritonserver.h"

typedef struct ip_driver ip_driver;

typedef struct ip_slot {
  ip_driver *d;
  int index;
  TRITONSERVER_InferenceRequest *req;
  atomic_int done; /* final response + release: 2 = complete */
  bool failed; /* set by the response callback before `done` counts */
  char error[256];
} ip_slot;

struct ip_driver {
  nrd_perf_driver base; /* first member */
  const nrd_perf_opts *o;
  TRITONSERVER_Server *server;
  TRITONSERVER_ResponseAllocator *alloc;
  ip_slot *slots;
  int nslots;
  nrd_perf_done_fn done;
  void *ctx;
};

/* Moves `e`'s text into err and deletes it; returns true if there was one. */
static bool take_error(TRITONSERVER_Error *e, const char *what, char *err, size_t errlen) {
  if (!e) return false;
  snprintf(err, errlen, "%s: %s: %s", what, TRITONSERVER_ErrorCodeString(e), TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
  return true;
}

/* A core message as a new JSON object (caller owns), the message deleted. */
static json_t *message_json(TRITONSERVER_Error *e, TRITONSERVER_Message *m, const char *what, char *err,
                            size_t errlen) {
  if (take_error(e, what, err, errlen)) return NULL;
  const char *base = NULL;
  size_t size = 0;
  json_t *j = NULL;
  if (!take_error(TRITONSERVER_MessageSerializeToJson(m, &base, &size), what, err, errlen)) {
    json_error_t jerr;
    j = json_loadb(base, size, 0, &jerr);
    if (!j) snprintf(err, errlen, "%s: bad JSON from the core: %s", what, jerr.text);
  }
  TRITONSERVER_MessageDelete(m);
  return j;
}

static json_t *ip_metadata(nrd_perf_driver *base, char *err, size_t errlen) {
  ip_driver *d = (ip_driver *)base;
  TRITONSERVER_Message *m = NULL;
  TRITONSERVER_Error *e = TRITONSERVER_ServerModelMetadata(d->server, d->o->model, d->o->version, &m);
  return message_json(e, m, "model metadata", err, errlen);
}

static json_t *ip_config(nrd_perf_driver *base, char *err, size_t errlen) {
  ip_driver *d = (ip_driver *)base;
  TRITONSERVER_Message *m = NULL;
  TRITONSERVER_Error *e = TRITONSERVER_ServerModelConfig(d->server, d->o->model, d->o->version, 1, &m);
  return message_json(e, m, "model config", err, errlen);
}

static json_t *ip_statistics(nrd_perf_driver *base, char *err, size_t errlen) {
  ip_driver *d = (ip_driver *)base;
  TRITONSERVER_Message *m = NULL;
  TRITONSERVER_Error *e = TRITONSERVER_ServerModelStatistics(d->server, d->o->model, d->o->version, &m);
  return message_json(e, m, "model statistics", err, errlen);
}

static TRITONSERVER_Error *alloc_fn(TRITONSERVER_ResponseAllocator *a, const char *name, size_t size,
                                    TRITONSERVER_MemoryType mt, int64_t mt_id, void *userp, void **buffer,
                                    void **buffer_userp, TRITONSERVER_MemoryType *actual_mt, int64_t *actual_id) {
  (void)a, (void)name, (void)mt, (void)mt_id, (void)userp;
  *buffer = malloc(size ? size : 1);
  *buffer_userp = NULL;
  if (!*buffer) return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, "nrd_perf: out of memory");
  *actual_mt = TRITONSERVER_MEMORY_CPU;
  *actual_id = 0;
  return NULL;
}

static TRITONSERVER_Error *release_fn(TRITONSERVER_ResponseAllocator *a, void *buffer, void *buffer_userp, size_t size,
                                      TRITONSERVER_MemoryType mt, int64_t mt_id) {
  (void)a, (void)buffer_userp, (void)size, (void)mt, (void)mt_id;
  free(buffer);
  return NULL;
}

static void complete(ip_slot *s) { s->d->done(s->d->ctx, s->index, s->failed ? s->error : NULL); }

/* Core thread. */
static void on_response(TRITONSERVER_InferenceResponse *r, const uint32_t flags, void *userp) {
  ip_slot *s = userp;
  if (r) {
    TRITONSERVER_Error *e = TRITONSERVER_InferenceResponseError(r);
    if (e && !s->failed) {
      s->failed = true;
      take_error(e, "response", s->error, sizeof s->error);
    } else if (e) {
      TRITONSERVER_ErrorDelete(e);
    }
    TRITONSERVER_InferenceResponseDelete(r);
  }
  if (!(flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL)) return;
  if (atomic_fetch_add_explicit(&s->done, 1, memory_order_acq_rel) == 1) complete(s);
}

/* Core thread. */
static void on_release(TRITONSERVER_InferenceRequest *req, const uint32_t flags, void *userp) {
  (void)req, (void)flags;
  ip_slot *s = userp;
  if (atomic_fetch_add_explicit(&s->done, 1, memory_order_acq_rel) == 1) complete(s);
}

static bool ip_prepare(nrd_perf_driver *base, const nrd_perf_tensors *t, int nslots, nrd_perf_done_fn done, void *ctx,
                       char *err, size_t errlen) {
  ip_driver *d = (ip_driver *)base;
  d->done = done, d->ctx = ctx;
  d->slots = calloc((size_t)nslots, sizeof *d->slots);
  if (!d->slots) {
    snprintf(err, errlen, "out of memory");
    return false;
  }
  d->nslots = nslots;
  for (int i = 0; i < nslots; i++) {
    ip_slot *s = &d->slots[i];
    s->d = d, s->index = i;
    if (take_error(TRITONSERVER_InferenceRequestNew(&s->req, d->server, d->o->model, d->o->version),
                   "InferenceRequestNew", err, errlen))
      return false;
    for (int k = 0; k < t->ninputs; k++) {
      const nrd_perf_tensor *in = &t->inputs[k];
      TRITONSERVER_DataType dt = TRITONSERVER_StringToDataType(in->datatype);
      if (take_error(TRITONSERVER_InferenceRequestAddInput(s->req, in->name, dt, in->shape, (uint64_t)in->ndims),
                     "InferenceRequestAddInput", err, errlen) ||
          take_error(TRITONSERVER_InferenceRequestAppendInputData(s->req, in->name, in->data, in->bytes,
                                                                  TRITONSERVER_MEMORY_CPU, 0),
                     "InferenceRequestAppendInputData", err, errlen))
        return false;
    }
    for (int k = 0; k < t->noutputs; k++)
      if (take_error(TRITONSERVER_InferenceRequestAddRequestedOutput(s->req, t->outputs[k]),
                     "InferenceRequestAddRequestedOutput", err, errlen))
        return false;
    if (take_error(TRITONSERVER_InferenceRequestSetReleaseCallback(s->req, on_release, s),
                   "InferenceRequestSetReleaseCallback", err, errlen) ||
        take_error(TRITONSERVER_InferenceRequestSetResponseCallback(s->req, d->alloc, s, on_response, s),
                   "InferenceRequestSetResponseCallback", err, errlen))
      return false;
  }
  return true;
}

static bool ip_send(nrd_perf_driver *base, int slot, char *err, size_t errlen) {
  ip_driver *d = (ip_driver *)base;
  ip_slot *s = &d->slots[slot];
  s->failed = false;
  atomic_store_explicit(&s->done, 0, memory_order_relaxed);
  return !take_error(TRITONSERVER_ServerInferAsync(d->server, s->req, NULL), "ServerInferAsync", err, errlen);
}

static void ip_destroy(nrd_perf_driver *base) {
  ip_driver *d = (ip_driver *)base;
  for (int i = 0; i < d->nslots; i++)
    if (d->slots[i].req) TRITONSERVER_InferenceRequestDelete(d->slots[i].req);
  free(d->slots);
  if (d->alloc) TRITONSERVER_ResponseAllocatorDelete(d->alloc);
  if (d->server) {
    TRITONSERVER_Error *e = TRITONSERVER_ServerStop(d->server);
    if (e) TRITONSERVER_ErrorDelete(e);
    e = TRITONSERVER_ServerDelete(d->server);
    if (e) TRITONSERVER_ErrorDelete(e);
  }
  free(d);
}

static const nrd_perf_driver_ops ip_ops = {ip_metadata, ip_config, ip_statistics, ip_prepare, ip_send, ip_destroy};

/* Waits up to 60 s for the model to be ready. */
static bool wait_model_ready(ip_driver *d, char *err, size_t errlen) {
  for (int i = 0; i < 60000; i++) {
    bool ready = false;
    if (take_error(TRITONSERVER_ServerModelIsReady(d->server, d->o->model, d->o->version, &ready), "ServerModelIsReady",
                   err, errlen))
      return false;
    if (ready) return true;
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  snprintf(err, errlen, "model '%s' is not ready after 60 s", d->o->model);
  return false;
}

nrd_perf_driver *nrd_perf_driver_inprocess_new(const nrd_perf_opts *o, char *err, size_t errlen) {
  ip_driver *d = calloc(1, sizeof *d);
  if (!d) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  d->base.ops = &ip_ops;
  d->o = o;
  TRITONSERVER_ServerOptions *so = NULL;
  if (take_error(TRITONSERVER_ServerOptionsNew(&so), "ServerOptionsNew", err, errlen)) goto fail;
  bool ok = !take_error(TRITONSERVER_ServerOptionsSetModelRepositoryPath(so, o->repository), "--model-repository", err,
                        errlen) &&
            !take_error(TRITONSERVER_ServerOptionsSetModelControlMode(so, TRITONSERVER_MODEL_CONTROL_EXPLICIT),
                        "ServerOptionsSetModelControlMode", err, errlen) &&
            !take_error(TRITONSERVER_ServerOptionsSetStartupModel(so, o->model), "ServerOptionsSetStartupModel", err,
                        errlen) &&
            !take_error(TRITONSERVER_ServerOptionsSetLogInfo(so, o->verbose), "ServerOptionsSetLogInfo", err, errlen) &&
            !take_error(TRITONSERVER_ServerOptionsSetLogWarn(so, o->verbose), "ServerOptionsSetLogWarn", err, errlen) &&
            !take_error(TRITONSERVER_ServerOptionsSetExitTimeout(so, 5), "ServerOptionsSetExitTimeout", err, errlen);
  if (ok && o->backend_dir)
    ok = !take_error(TRITONSERVER_ServerOptionsSetBackendDirectory(so, o->backend_dir), "--backend-directory", err,
                     errlen);
  if (ok) ok = !take_error(TRITONSERVER_ServerNew(&d->server, so), "starting the server", err, errlen);
  TRITONSERVER_ServerOptionsDelete(so);
  if (!ok || !wait_model_ready(d, err, errlen)) goto fail;
  if (take_error(TRITONSERVER_ResponseAllocatorNew(&d->alloc, alloc_fn, release_fn, NULL), "ResponseAllocatorNew", err,
                 errlen))
    goto fail;
  return &d->base;
fail:
  ip_destroy(&d->base);
  return NULL;
}
