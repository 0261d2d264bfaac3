/* The ensemble scheduler (ensemble.h, docs/ensemble.md).
 *
 * A plan is read once from the configuration: every ensemble tensor gets an
 * index, and each step maps its model's inputs and outputs to indexes. A
 * request gets a context holding each tensor once it exists: the request's
 * own inputs (its buffers, untouched until it is released), then the
 * outputs of the steps' responses (kept alive until the ensemble answers).
 * A step is sent, through the public in-process API, as soon as all its
 * inputs exist; its inputs point at the tensors (no copy). When nothing is
 * outstanding any more the ensemble answers with its outputs, copied once
 * into the client's buffers, or with the first error, and is released.
 *
 * There is no thread of its own and no instance: a request starts on the
 * thread that submits it and moves on in the composing models' callbacks.
 * Locks: each context has its own; requests are sent after letting go. */
#include "ensemble.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "allocator.h"
#include "datatype.h"
#include "error.h"
#include "log.h"
#include "model.h"
#include "parameter.h"
#include "request.h"
#include "response.h"
#include "server.h"
#include "stats.h"

typedef struct ens_map {
  char *name;      /* the composing model's input or output */
  uint32_t tensor; /* the ensemble tensor it reads or writes */
} ens_map;

typedef struct ens_step {
  char *model;
  int64_t version;
  ens_map *in, *out;
  uint32_t n_in, n_out;
} ens_step;

typedef struct ens_sched {
  nrd_scheduler base;
  TRITONBACKEND_Model *model; /* not counted: the model owns the scheduler */
  char **tensors;
  uint32_t n_tensors;
  ens_step *steps;
  uint32_t n_steps;
  atomic_bool stopped;
} ens_sched;

/* One ensemble tensor of a request, once it exists. */
typedef struct ens_tensor {
  bool ready;
  TRITONSERVER_DataType dtype;
  const int64_t *shape; /* the request's input or the response's output owns it */
  uint32_t dims;
  const nrd_buffer *bufs;
  uint32_t nbufs;
  uint64_t byte_size;
  nrd_buffer one; /* a step output's only buffer */
} ens_tensor;

enum { STEP_WAITING, STEP_SENT, STEP_DONE };

typedef struct ens_ctx {
  pthread_mutex_t mu;
  ens_sched *es;
  TRITONSERVER_InferenceRequest *req;
  ens_tensor *t;
  uint8_t *state;                    /* STEP_* per step */
  TRITONSERVER_InferenceRequest **running; /* per step: its request until released */
  TRITONSERVER_InferenceResponse **held; /* step responses whose outputs are tensors */
  uint32_t n_held, cap_held;
  uint32_t pending;                  /* callbacks still to come, +1 while starting */
  TRITONSERVER_Error *err;           /* the first failure */
  uint64_t start_ns;
} ens_ctx;

/* One step's request; freed after both its final response and its release. */
typedef struct ens_call {
  ens_ctx *ctx;
  uint32_t step;
  atomic_int left;
} ens_call;

/* ---------------------------------------------------------------- plan */

static void plan_free(ens_sched *es) {
  for (uint32_t i = 0; i < es->n_tensors; i++) free(es->tensors[i]);
  free(es->tensors);
  for (uint32_t s = 0; s < es->n_steps; s++) {
    ens_step *st = &es->steps[s];
    free(st->model);
    for (uint32_t k = 0; k < st->n_in; k++) free(st->in[k].name);
    for (uint32_t k = 0; k < st->n_out; k++) free(st->out[k].name);
    free(st->in);
    free(st->out);
  }
  free(es->steps);
}

/* The index of tensor `name`, added when new; UINT32_MAX on out-of-memory. */
static uint32_t tensor_index(ens_sched *es, const char *name) {
  for (uint32_t i = 0; i < es->n_tensors; i++)
    if (!strcmp(es->tensors[i], name)) return i;
  char **n = realloc(es->tensors, (es->n_tensors + 1) * sizeof(*n));
  if (!n) return UINT32_MAX;
  es->tensors = n;
  if (!(n[es->n_tensors] = strdup(name))) return UINT32_MAX;
  return es->n_tensors++;
}

static int read_maps(ens_sched *es, const json_t *map, ens_map **out, uint32_t *n) {
  size_t count = json_object_size(map);
  *out = calloc(count ? count : 1, sizeof(**out));
  if (!*out) return -1;
  const char *key;
  json_t *val;
  json_object_foreach((json_t *)map, key, val) {
    ens_map *m = &(*out)[*n];
    if (!(m->name = strdup(key))) return -1;
    (*n)++;
    if ((m->tensor = tensor_index(es, json_string_value(val) ? json_string_value(val) : "")) == UINT32_MAX)
      return -1;
  }
  return 0;
}

static int64_t jversion(const json_t *v) {
  if (json_is_string(v)) return strtoll(json_string_value(v), NULL, 10);
  return json_is_integer(v) ? (int64_t)json_integer_value(v) : -1;
}

static int read_plan(ens_sched *es, const json_t *cfg) {
  const json_t *inputs = json_object_get(cfg, "input");
  for (size_t i = 0; i < json_array_size(inputs); i++)
    if (tensor_index(es, json_string_value(json_object_get(json_array_get(inputs, i), "name")) ?: "") == UINT32_MAX)
      return -1;
  const json_t *steps = json_object_get(json_object_get(cfg, "ensemble_scheduling"), "step");
  size_t ns = json_array_size(steps);
  es->steps = calloc(ns ? ns : 1, sizeof(*es->steps));
  if (!es->steps) return -1;
  for (size_t s = 0; s < ns; s++) {
    const json_t *j = json_array_get(steps, s);
    ens_step *st = &es->steps[es->n_steps++];
    const json_t *ver = json_object_get(j, "model_version");
    st->version = ver ? jversion(ver) : -1;
    if (st->version == 0) st->version = -1;
    if (!(st->model = strdup(json_string_value(json_object_get(j, "model_name")) ?: ""))) return -1;
    if (read_maps(es, json_object_get(j, "input_map"), &st->in, &st->n_in) != 0 ||
        read_maps(es, json_object_get(j, "output_map"), &st->out, &st->n_out) != 0)
      return -1;
  }
  return 0;
}

/* ------------------------------------------------------- intermediates */

/* Step outputs live in plain memory until the ensemble answers. */
static TRITONSERVER_Error *ens_alloc(TRITONSERVER_ResponseAllocator *allocator, const char *tensor_name,
                                     size_t byte_size, TRITONSERVER_MemoryType memory_type, int64_t memory_type_id,
                                     void *userp, void **buffer, void **buffer_userp,
                                     TRITONSERVER_MemoryType *actual_memory_type, int64_t *actual_memory_type_id) {
  (void)allocator, (void)memory_type, (void)memory_type_id, (void)userp;
  *buffer_userp = NULL;
  *actual_memory_type = TRITONSERVER_MEMORY_CPU;
  *actual_memory_type_id = 0;
  *buffer = malloc(byte_size ? byte_size : 1);
  if (!*buffer) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory for output '%s'", tensor_name);
  return NULL;
}

static TRITONSERVER_Error *ens_free(TRITONSERVER_ResponseAllocator *allocator, void *buffer, void *buffer_userp,
                                    size_t byte_size, TRITONSERVER_MemoryType memory_type, int64_t memory_type_id) {
  (void)allocator, (void)buffer_userp, (void)byte_size, (void)memory_type, (void)memory_type_id;
  free(buffer);
  return NULL;
}

static struct TRITONSERVER_ResponseAllocator ens_allocator = {.alloc_fn = ens_alloc, .release_fn = ens_free};

/* ------------------------------------------------------------- context */

static void ctx_free(ens_ctx *c) {
  for (uint32_t i = 0; i < c->n_held; i++) TRITONSERVER_InferenceResponseDelete(c->held[i]);
  free(c->held);
  free(c->t);
  free(c->state);
  free(c->running);
  if (c->err) TRITONSERVER_ErrorDelete(c->err);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

/* Keeps the first failure (consumed). Lock held. */
static void fail_with(ens_ctx *c, TRITONSERVER_Error *err) {
  if (!c->err) c->err = err;
  else TRITONSERVER_ErrorDelete(err);
}

/* A cancelled ensemble request starts no more steps, asks the running
 * ones to stop, and is answered CANCELLED once they are done. Lock held. */
static void note_cancel(ens_ctx *c) {
  const nrd_cancel_flag *f = c->req->cancel;
  if (!f || !atomic_load(&f->set)) return;
  if (!c->err) c->err = nrd_error_new(TRITONSERVER_ERROR_CANCELLED, "Request was cancelled");
  for (uint32_t s = 0; s < c->es->n_steps; s++)
    if (c->running[s]) {
      TRITONSERVER_Error *e = TRITONSERVER_InferenceRequestCancel(c->running[s]);
      if (e) TRITONSERVER_ErrorDelete(e);
    }
}

static bool step_ready(const ens_ctx *c, uint32_t s) {
  const ens_step *st = &c->es->steps[s];
  if (c->state[s] != STEP_WAITING) return false;
  for (uint32_t k = 0; k < st->n_in; k++)
    if (!c->t[st->in[k].tensor].ready) return false;
  return true;
}

/* Marks the steps that can go now as sent and counts their callbacks;
 * returns how many were put in `out` (room for every step). Lock held. */
static uint32_t take_ready(ens_ctx *c, uint32_t *out) {
  uint32_t n = 0;
  note_cancel(c);
  if (c->err) return 0;
  for (uint32_t s = 0; s < c->es->n_steps; s++)
    if (step_ready(c, s)) {
      c->state[s] = STEP_SENT;
      c->pending += 2; /* its final response and its release */
      out[n++] = s;
    }
  return n;
}

static const char *ensemble_output_name(const ens_ctx *c, uint32_t i) {
  const TRITONSERVER_InferenceRequest *r = c->req;
  return r->n_outputs ? r->outputs[i] : c->es->model->outputs[i].name;
}

/* Copies tensor `t` into a new output `name` of `resp`. */
static TRITONSERVER_Error *add_output(TRITONBACKEND_Response *resp, const char *name, const ens_tensor *t) {
  TRITONBACKEND_Output *out = NULL;
  NRD_RETURN_IF_ERROR(TRITONBACKEND_ResponseOutput(resp, &out, name, t->dtype, t->shape, t->dims));
  void *buf = NULL;
  TRITONSERVER_MemoryType mt = TRITONSERVER_MEMORY_CPU;
  int64_t mid = 0;
  NRD_RETURN_IF_ERROR(TRITONBACKEND_OutputBuffer(out, &buf, t->byte_size, &mt, &mid));
  if (mt != TRITONSERVER_MEMORY_CPU && mt != TRITONSERVER_MEMORY_CPU_PINNED)
    return nrd_error_new(TRITONSERVER_ERROR_UNSUPPORTED, "output '%s': only CPU memory is supported", name);
  char *dst = buf;
  for (uint32_t b = 0; b < t->nbufs; b++) {
    if (t->bufs[b].size) memcpy(dst, t->bufs[b].base, t->bufs[b].size);
    dst += t->bufs[b].size;
  }
  return NULL;
}

/* Nothing is outstanding: answers the ensemble request and frees `c`. */
static void finish(ens_ctx *c) {
  ens_sched *es = c->es;
  TRITONBACKEND_Model *m = es->model;
  TRITONSERVER_InferenceRequest *req = c->req;
  uint32_t n_out = req->n_outputs ? req->n_outputs : m->n_outputs;
  const ens_tensor **outs = calloc(n_out ? n_out : 1, sizeof(*outs));
  if (!outs && !c->err) c->err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  for (uint32_t i = 0; !c->err && i < n_out; i++) {
    const char *name = ensemble_output_name(c, i);
    for (uint32_t k = 0; k < es->n_tensors && !outs[i]; k++)
      if (!strcmp(es->tensors[k], name) && c->t[k].ready) outs[i] = &c->t[k];
    if (!outs[i])
      c->err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL,
                             "unexpected deadlock, at least one output is not set while no more ensemble steps "
                             "can be made");
  }
  uint64_t end = nrd_now_ns();
  if (c->err) {
    TRITONSERVER_Error *e = nrd_error_new(TRITONSERVER_ErrorCode(c->err), "in ensemble '%s', %s", m->name,
                                          TRITONSERVER_ErrorMessage(c->err));
    free(outs);
    nrd_request_fail(req, e); /* counts the failure and releases the request */
    ctx_free(c);
    return;
  }
  TRITONBACKEND_Response *resp = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ResponseNew(&resp, (TRITONBACKEND_Request *)req);
  if (err) {
    free(outs);
    nrd_request_fail(req, err);
    ctx_free(c);
    return;
  }
  for (uint32_t i = 0; !err && i < n_out; i++) err = add_output(resp, ensemble_output_name(c, i), outs[i]);
  free(outs);
  bool ok = err == NULL;
  TRITONSERVER_Error *sent = TRITONBACKEND_ResponseSend(resp, TRITONSERVER_RESPONSE_COMPLETE_FINAL, err);
  if (sent) {
    NRD_LOG_ERROR("ensemble '%s': cannot send a response: %s", m->name, TRITONSERVER_ErrorMessage(sent));
    TRITONSERVER_ErrorDelete(sent);
  }
  if (err) TRITONSERVER_ErrorDelete(err);
  if (ok) {
    nrd_stats_request_success(&m->stats, req->queue_start_ns, req->queue_start_ns, c->start_ns, c->start_ns, end, end);
    nrd_stats_batch(&m->stats, req->batch_size ? req->batch_size : 1, c->start_ns, c->start_ns, end, end);
  } else {
    nrd_stats_request_fail(&m->stats, req->queue_start_ns, req->queue_start_ns, c->start_ns, end);
  }
  nrd_request_release(req, TRITONSERVER_REQUEST_RELEASE_ALL);
  ctx_free(c);
}

/* One awaited callback has come. */
static void done_one(ens_ctx *c) {
  pthread_mutex_lock(&c->mu);
  bool last = --c->pending == 0;
  pthread_mutex_unlock(&c->mu);
  if (last) finish(c);
}

static void call_done(ens_call *k) {
  ens_ctx *c = k->ctx;
  if (atomic_fetch_sub(&k->left, 1) == 1) free(k);
  done_one(c);
}

static void send_steps(ens_ctx *c, const uint32_t *steps, uint32_t n);

/* Room for one more held response. Lock held. */
static bool hold_room(ens_ctx *c) {
  if (c->n_held < c->cap_held) return true;
  uint32_t cap = c->cap_held ? 2 * c->cap_held : 4;
  TRITONSERVER_InferenceResponse **n = realloc(c->held, cap * sizeof(*n));
  if (!n) return false;
  c->held = n;
  c->cap_held = cap;
  return true;
}

static void on_step_response(TRITONSERVER_InferenceResponse *resp, const uint32_t flags, void *userp) {
  ens_call *k = userp;
  ens_ctx *c = k->ctx;
  const ens_step *st = &c->es->steps[k->step];
  uint32_t *next = NULL;
  uint32_t n_next = 0;
  pthread_mutex_lock(&c->mu);
  if (resp) {
    TRITONSERVER_Error *rerr = TRITONSERVER_InferenceResponseError(resp);
    bool keep = false;
    if (rerr) {
      fail_with(c, rerr);
    } else if (!hold_room(c)) {
      fail_with(c, nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory"));
    } else {
      uint32_t count = 0;
      TRITONSERVER_Error *e = TRITONSERVER_InferenceResponseOutputCount(resp, &count);
      for (uint32_t i = 0; !e && i < count; i++) {
        const char *name;
        TRITONSERVER_DataType dt;
        const int64_t *shape;
        uint64_t dims;
        const void *base;
        size_t size;
        TRITONSERVER_MemoryType mt;
        int64_t mid;
        void *up;
        e = TRITONSERVER_InferenceResponseOutput(resp, i, &name, &dt, &shape, &dims, &base, &size, &mt, &mid, &up);
        for (uint32_t o = 0; !e && o < st->n_out; o++) {
          if (strcmp(st->out[o].name, name)) continue;
          ens_tensor *t = &c->t[st->out[o].tensor];
          t->ready = true;
          t->dtype = dt;
          t->shape = shape;
          t->dims = (uint32_t)dims;
          t->one = (nrd_buffer){.base = base, .size = size, .mtype = mt, .mtype_id = mid};
          t->bufs = &t->one;
          t->nbufs = 1;
          t->byte_size = size;
          keep = true;
        }
      }
      if (e) fail_with(c, e);
      if (keep) c->held[c->n_held++] = resp;
    }
    if (!keep) TRITONSERVER_InferenceResponseDelete(resp);
  }
  if (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) {
    c->state[k->step] = STEP_DONE;
    next = malloc(c->es->n_steps * sizeof(*next));
    if (next) n_next = take_ready(c, next);
    else fail_with(c, nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory"));
  }
  pthread_mutex_unlock(&c->mu);
  if (n_next) send_steps(c, next, n_next);
  free(next);
  if (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) call_done(k);
}

static void on_step_release(TRITONSERVER_InferenceRequest *r, const uint32_t flags, void *userp) {
  (void)flags;
  ens_call *k = userp;
  pthread_mutex_lock(&k->ctx->mu);
  k->ctx->running[k->step] = NULL;
  pthread_mutex_unlock(&k->ctx->mu);
  TRITONSERVER_InferenceRequestDelete(r);
  call_done(k);
}

static TRITONSERVER_Error *copy_params(TRITONSERVER_InferenceRequest *to, const TRITONSERVER_InferenceRequest *from) {
  for (size_t i = 0; i < from->params.count; i++) {
    const nrd_param *p = &from->params.items[i];
    switch (p->type) {
      case TRITONSERVER_PARAMETER_STRING: NRD_RETURN_IF_ERROR(nrd_param_list_add_string(&to->params, p->name, p->v.s)); break;
      case TRITONSERVER_PARAMETER_INT: NRD_RETURN_IF_ERROR(nrd_param_list_add_int(&to->params, p->name, p->v.i)); break;
      case TRITONSERVER_PARAMETER_BOOL: NRD_RETURN_IF_ERROR(nrd_param_list_add_bool(&to->params, p->name, p->v.b)); break;
      case TRITONSERVER_PARAMETER_DOUBLE:
        NRD_RETURN_IF_ERROR(nrd_param_list_add_double(&to->params, p->name, p->v.d));
        break;
      case TRITONSERVER_PARAMETER_BYTES:
        NRD_RETURN_IF_ERROR(nrd_param_list_add_bytes(&to->params, p->name, p->v.bytes.p, p->v.bytes.n));
        break;
    }
  }
  return NULL;
}

/* Builds and submits step `s`'s request. */
static TRITONSERVER_Error *send_step(ens_ctx *c, uint32_t s, ens_call *k) {
  const ens_step *st = &c->es->steps[s];
  const TRITONSERVER_InferenceRequest *req = c->req;
  TRITONSERVER_InferenceRequest *r = NULL;
  NRD_RETURN_IF_ERROR(TRITONSERVER_InferenceRequestNew(&r, req->server, st->model, st->version));
  TRITONSERVER_Error *err = NULL;
  if (r->model->decoupled)
    err = nrd_error_new(TRITONSERVER_ERROR_UNSUPPORTED, "step model '%s' is decoupled, which ensembles here do not "
                        "support", st->model);
  if (!err && req->id) err = TRITONSERVER_InferenceRequestSetId(r, req->id);
  if (!err && req->corr_id_str) err = TRITONSERVER_InferenceRequestSetCorrelationIdString(r, req->corr_id_str);
  else if (!err) err = TRITONSERVER_InferenceRequestSetCorrelationId(r, req->corr_id);
  if (!err) err = TRITONSERVER_InferenceRequestSetFlags(r, req->flags);
  if (!err) err = TRITONSERVER_InferenceRequestSetPriorityUInt64(r, req->priority);
  if (!err) err = TRITONSERVER_InferenceRequestSetTimeoutMicroseconds(r, req->timeout_us);
  if (!err) err = copy_params(r, req);
  for (uint32_t i = 0; !err && i < st->n_in; i++) {
    const ens_tensor *t = &c->t[st->in[i].tensor];
    err = TRITONSERVER_InferenceRequestAddInput(r, st->in[i].name, t->dtype, t->shape, t->dims);
    for (uint32_t b = 0; !err && b < t->nbufs; b++)
      err = TRITONSERVER_InferenceRequestAppendInputData(r, st->in[i].name, t->bufs[b].base, t->bufs[b].size,
                                                         t->bufs[b].mtype, t->bufs[b].mtype_id);
  }
  for (uint32_t o = 0; !err && o < st->n_out; o++) err = TRITONSERVER_InferenceRequestAddRequestedOutput(r, st->out[o].name);
  if (!err) err = TRITONSERVER_InferenceRequestSetReleaseCallback(r, on_step_release, k);
  if (!err) err = TRITONSERVER_InferenceRequestSetResponseCallback(r, &ens_allocator, NULL, on_step_response, k);
  if (err) {
    TRITONSERVER_InferenceRequestDelete(r);
    return err;
  }
  pthread_mutex_lock(&c->mu);
  c->running[s] = r; /* before it can be released */
  pthread_mutex_unlock(&c->mu);
  err = TRITONSERVER_ServerInferAsync(req->server, r, NULL);
  if (err) {
    pthread_mutex_lock(&c->mu);
    c->running[s] = NULL;
    pthread_mutex_unlock(&c->mu);
    TRITONSERVER_InferenceRequestDelete(r); /* no callback will come */
  }
  return err;
}

static void send_steps(ens_ctx *c, const uint32_t *steps, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    ens_call *k = malloc(sizeof(*k));
    TRITONSERVER_Error *err = k ? NULL : nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    if (k) {
      k->ctx = c;
      k->step = steps[i];
      atomic_init(&k->left, 2);
      err = send_step(c, steps[i], k);
    }
    if (!err) continue;
    free(k);
    pthread_mutex_lock(&c->mu);
    fail_with(c, err);
    c->state[steps[i]] = STEP_DONE;
    c->pending -= 1; /* of the two it counted, done_one takes the other */
    pthread_mutex_unlock(&c->mu);
    done_one(c);
  }
}

/* ----------------------------------------------------------- scheduler */

static TRITONSERVER_Error *ens_enqueue(nrd_scheduler *sched, TRITONSERVER_InferenceRequest *req) {
  ens_sched *es = (ens_sched *)sched;
  if (atomic_load(&es->stopped))
    return nrd_error_new(TRITONSERVER_ERROR_UNAVAILABLE, "model '%s' is unloading and takes no new requests",
                         es->model->name);
  ens_ctx *c = calloc(1, sizeof(*c));
  uint32_t *first = malloc((es->n_steps ? es->n_steps : 1) * sizeof(*first));
  if (c) {
    c->t = calloc(es->n_tensors ? es->n_tensors : 1, sizeof(*c->t));
    c->state = calloc(es->n_steps ? es->n_steps : 1, 1);
    c->running = calloc(es->n_steps ? es->n_steps : 1, sizeof(*c->running));
  }
  if (!c || !first || !c->t || !c->state || !c->running) {
    if (c) {
      free(c->t);
      free(c->state);
      free(c->running);
    }
    free(c);
    free(first);
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory starting ensemble '%s'", es->model->name);
  }
  pthread_mutex_init(&c->mu, NULL);
  c->es = es;
  c->req = req;
  c->start_ns = nrd_now_ns();
  /* The request's inputs are the first tensors (the request was validated
   * against the ensemble's inputs). */
  for (uint32_t i = 0; i < req->n_inputs; i++) {
    const nrd_input *in = &req->inputs[i];
    for (uint32_t k = 0; k < es->n_tensors; k++) {
      if (strcmp(es->tensors[k], in->name)) continue;
      c->t[k] = (ens_tensor){.ready = true, .dtype = in->dtype, .shape = in->shape, .dims = in->dims_count,
                             .bufs = in->bufs, .nbufs = in->nbufs, .byte_size = in->byte_size};
    }
  }
  /* From here on the request is answered through finish(). */
  pthread_mutex_lock(&c->mu);
  c->pending = 1;
  uint32_t n = take_ready(c, first);
  pthread_mutex_unlock(&c->mu);
  send_steps(c, first, n);
  free(first);
  done_one(c);
  return NULL;
}

static uint32_t ens_next_batch(nrd_scheduler *s, TRITONBACKEND_ModelInstance *inst, TRITONSERVER_InferenceRequest **out,
                               uint32_t max) {
  (void)s, (void)inst, (void)out, (void)max;
  return 0; /* an ensemble has no instances */
}

static void ens_stop(nrd_scheduler *s) { atomic_store(&((ens_sched *)s)->stopped, true); }

static void ens_destroy(nrd_scheduler *s) {
  ens_sched *es = (ens_sched *)s;
  plan_free(es);
  free(es);
}

static const nrd_scheduler_ops ens_ops = {ens_enqueue, ens_next_batch, ens_stop, ens_destroy};

/* What is known of an ensemble tensor's data type while the steps are
 * checked: the type and the model it was learnt from. */
typedef struct ens_known {
  TRITONSERVER_DataType dtype; /* INVALID: not known yet */
  const char *from;
} ens_known;

static const nrd_io *find_io(const nrd_io *ios, uint32_t n, const char *name) {
  for (uint32_t i = 0; i < n; i++)
    if (!strcmp(ios[i].name, name)) return &ios[i];
  return NULL;
}

static TRITONSERVER_Error *agree(const TRITONBACKEND_Model *e, const ens_sched *es, ens_known *k, uint32_t tensor,
                                 TRITONSERVER_DataType dtype, const char *from) {
  ens_known *t = &k[tensor];
  if (t->dtype == TRITONSERVER_TYPE_INVALID) {
    t->dtype = dtype;
    t->from = from;
    return NULL;
  }
  if (t->dtype == dtype) return NULL;
  return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                       "in ensemble %s, ensemble tensor %s: inconsistent data type: %s is inferred from model %s "
                       "while %s is inferred from model %s",
                       e->name, es->tensors[tensor], nrd_datatype_config_name(t->dtype), t->from,
                       nrd_datatype_config_name(dtype), from);
}

/* Checks step `st` against its model's configuration as Triton does:
 * batch size, mapped names, unmapped required inputs, data types. */
static TRITONSERVER_Error *check_step(const TRITONBACKEND_Model *e, const ens_sched *es, const ens_step *st,
                                      const TRITONBACKEND_Model *cm, ens_known *k) {
  if (cm->max_batch_size != 0 && cm->max_batch_size < e->max_batch_size)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "ensemble %s allows maximum batch size %d, but it contains model %s which only allows "
                         "maximum batch size to be %d",
                         e->name, (int)e->max_batch_size, cm->name, (int)cm->max_batch_size);
  for (uint32_t i = 0; i < st->n_in; i++) {
    const nrd_io *io = find_io(cm->inputs, cm->n_inputs, st->in[i].name);
    if (!io)
      return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                           "in ensemble %s, ensemble tensor %s is mapping to non-existing input %s in model %s",
                           e->name, es->tensors[st->in[i].tensor], st->in[i].name, cm->name);
    NRD_RETURN_IF_ERROR(agree(e, es, k, st->in[i].tensor, io->dtype, cm->name));
  }
  for (uint32_t i = 0; i < cm->n_inputs; i++) {
    bool mapped = false;
    for (uint32_t m = 0; m < st->n_in && !mapped; m++) mapped = !strcmp(st->in[m].name, cm->inputs[i].name);
    if (!mapped && !cm->inputs[i].optional)
      return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                           "in ensemble %s, input %s in model %s is not mapped to any ensemble tensors", e->name,
                           cm->inputs[i].name, cm->name);
  }
  for (uint32_t o = 0; o < st->n_out; o++) {
    const nrd_io *io = find_io(cm->outputs, cm->n_outputs, st->out[o].name);
    if (!io)
      return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                           "in ensemble %s, ensemble tensor %s is mapped from non-existing output %s in model %s",
                           e->name, es->tensors[st->out[o].tensor], st->out[o].name, cm->name);
    NRD_RETURN_IF_ERROR(agree(e, es, k, st->out[o].tensor, io->dtype, cm->name));
  }
  return NULL;
}

TRITONSERVER_Error *nrd_ensemble_scheduler_new(TRITONBACKEND_Model *model, nrd_scheduler **out) {
  ens_sched *es = calloc(1, sizeof(*es));
  if (!es) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory creating ensemble '%s'", model->name);
  es->base.ops = &ens_ops;
  es->model = model;
  atomic_init(&es->stopped, false);
  if (read_plan(es, model->config) != 0) {
    plan_free(es);
    free(es);
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory creating ensemble '%s'", model->name);
  }
  /* Every composing model must be there now, as Triton requires, and
   * agree with the ensemble on the tensors it reads and writes. */
  char missing[1024] = "";
  size_t used = 0;
  TRITONSERVER_Error *err = NULL;
  ens_known *known = calloc(es->n_tensors ? es->n_tensors : 1, sizeof(*known));
  if (!known) err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory creating ensemble '%s'", model->name);
  for (uint32_t i = 0; !err && i < model->n_inputs; i++)
    for (uint32_t k = 0; k < es->n_tensors; k++)
      if (!strcmp(es->tensors[k], model->inputs[i].name)) known[k] = (ens_known){model->inputs[i].dtype, model->name};
  for (uint32_t i = 0; !err && i < model->n_outputs; i++)
    for (uint32_t k = 0; k < es->n_tensors; k++)
      if (!strcmp(es->tensors[k], model->outputs[i].name))
        known[k] = (ens_known){model->outputs[i].dtype, model->name};
  for (uint32_t s = 0; s < es->n_steps && !err; s++) {
    TRITONBACKEND_Model *cm = NULL;
    TRITONSERVER_Error *e = nrd_server_get_model(model->server, es->steps[s].model, es->steps[s].version, &cm);
    if (e) {
      TRITONSERVER_ErrorDelete(e);
      if (used < sizeof missing)
        used += (size_t)snprintf(missing + used, sizeof missing - used, "%s%s", used ? ", " : "", es->steps[s].model);
      continue;
    }
    if (cm->decoupled)
      err = nrd_error_new(TRITONSERVER_ERROR_UNSUPPORTED,
                          "ensemble '%s': step model '%s' is decoupled, which ensembles here do not support",
                          model->name, cm->name);
    if (!err) err = check_step(model, es, &es->steps[s], cm, known);
    nrd_model_unref(cm);
  }
  free(known);
  if (!err && used)
    err = nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                        "ensemble %s contains models that are not available or ambiguous: %s", model->name, missing);
  if (err) {
    plan_free(es);
    free(es);
    return err;
  }
  *out = &es->base;
  return NULL;
}
