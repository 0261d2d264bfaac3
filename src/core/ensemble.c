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
 * Decoupled step models: each of their responses is an iteration. The
 * tensors it writes, and those written by the steps that read them, hold
 * one value per iteration (k), and such a step runs once per iteration.
 * A decoupled step that reads iterations also runs once per iteration; its
 * responses, from all its runs, are numbered in arrival order as its own
 * iterations. An ensemble whose outputs come from iterations is decoupled
 * itself: it answers iteration k as soon as every output has its value k,
 * and ends with a final flag. As in Triton, a step (and the outputs
 * together) reads the iterations of at most one decoupled step and then
 * nothing else (see plan_iterations).
 *
 * There is no thread of its own and no instance: a request starts on the
 * thread that submits it and moves on in the composing models' callbacks.
 *
 * max_inflight_requests (Triton's ensemble backpressure): each step has at
 * most that many runs in flight, across all requests of the ensemble. A
 * run holds its slot from before it is submitted until its final
 * response. A step response that would start a run of a full step waits,
 * on the thread that sent it (so a fast decoupled producer is paused),
 * until a slot frees, the request is cancelled or the model unloads.
 * Runs started by the request's arrival take their slots without waiting,
 * so a front end's thread never blocks here.
 * Locks: each context has its own; requests are sent, and answers built,
 * after letting go (values never change once stored). */
#include "ensemble.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "allocator.h"
#include "datatype.h"
#include "error.h"
#include "log.h"
#include "model.h"
#include "parameter.h"
#include "request.h"
#include "response.h"
#include "stats.h"

typedef struct ens_map {
  char *name; /* the composing model's input or output */
  uint32_t tensor; /* the ensemble tensor it reads or writes */
} ens_map;

typedef struct ens_step {
  char *model;
  int64_t version;
  ens_map *in, *out;
  uint32_t n_in, n_out;
  bool decoupled; /* its model sends any number of responses */
  int32_t src; /* -1: runs once; else the decoupled step whose iterations it runs for */
} ens_step;

typedef struct ens_sched {
  nrd_scheduler base;
  TRITONBACKEND_Model *model; /* not counted: the model owns the scheduler */
  nrd_step_resolver resolve; /* the steps' models, requests and submission */
  char **tensors;
  uint32_t n_tensors;
  int32_t *origin; /* per tensor: -1 one value, else the decoupled step it iterates with */
  uint32_t *readers; /* per tensor: the input maps that read it */
  ens_step *steps;
  uint32_t n_steps;
  bool decoupled; /* some output has one value per iteration */
  atomic_bool stopped;
  /* max_inflight_requests (0: no limit, and the rest is unused). */
  uint32_t max_inflight;
  pthread_mutex_t slots_mu;
  pthread_cond_t slots_freed;
  uint32_t *inflight; /* per step, under slots_mu */
} ens_sched;

/* A step response whose outputs are values: deleted with its last value. */
typedef struct ens_hold {
  TRITONSERVER_InferenceResponse *resp;
  uint32_t alive; /* its values not freed yet */
  struct ens_hold *prev, *next;
} ens_hold;

/* One value of an ensemble tensor; never changes once stored. A value of
 * an iteration is freed once the runs that read it are done and its
 * answer was sent (`uses` counts them down), so that a long stream of
 * responses does not pile up; other values live until the end. */
typedef struct ens_value {
  TRITONSERVER_DataType dtype;
  const int64_t *shape; /* the request's input or the response's output owns it */
  uint32_t dims;
  const nrd_buffer *bufs;
  uint32_t nbufs;
  uint64_t byte_size;
  /* The batch size of the request that made it (the ensemble request's
   * or a step's), 0 from one without batching: Triton reshapes by it
   * (reshape_dims). */
  uint64_t batch_size;
  nrd_buffer one; /* a step output's only buffer */
  ens_hold *hold; /* a step output's response; NULL for the request's inputs */
  uint32_t uses; /* an iteration's value: readers and answers still to come */
  /* No tensor: an optional ensemble input the request left out, or an
   * output the step did not produce. Steps run without it and the answer
   * leaves it out, as in Triton. */
  bool absent;
} ens_value;

/* A tensor's values: v[0] only, or one per iteration (NULL: not yet). */
typedef struct ens_values {
  ens_value **v;
  uint32_t n, cap;
} ens_values;

typedef struct ens_ctx {
  pthread_mutex_t mu;
  ens_sched *es;
  TRITONSERVER_InferenceRequest *req;
  TRITONBACKEND_ResponseFactory *factory; /* a decoupled ensemble's */
  ens_values *t; /* per tensor */
  uint32_t *sent; /* per step: runs sent */
  bool *skip; /* per step: makes nothing the request asks for (NULL: none skipped) */
  uint32_t *iters; /* per decoupled step: responses with outputs so far */
  bool *answered; /* decoupled ensemble: per iteration */
  uint32_t n_answered; /* room in answered */
  uint32_t first_open; /* every iteration below it is answered */
  struct ens_call *running; /* runs submitted and not yet done */
  ens_hold *holds; /* step responses whose outputs are values */
  uint32_t *answer_uses; /* decoupled ensemble: per tensor, the outputs it answers */
  uint32_t pending; /* callbacks still to come, +1 while starting */
  /* Decoupled ensemble: runs whose final response has not come, +1 while
   * starting. Its last answer carries the final flag when it is known to
   * be the last (as Triton's: a client that does not take empty final
   * responses still sees the end); final_sent then spares the empty one. */
  uint32_t in_flight;
  bool final_sent;
  TRITONSERVER_Error *err; /* the first failure */
  uint64_t start_ns;
} ens_ctx;

/* One run of a step; freed after both its final response and its release. */
typedef struct ens_call {
  ens_ctx *ctx;
  uint32_t step;
  uint32_t iter; /* the iteration it runs for (0 for a step that runs once) */
  atomic_int left;
  /* On ctx->running (under ctx->mu) from before it is submitted until both
   * callbacks came, so that cancelling the ensemble request reaches it. */
  TRITONSERVER_InferenceRequest *req;
  struct ens_call *prev, *next;
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
  free(es->origin);
  free(es->readers);
  free(es->inflight);
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
    if ((m->tensor = tensor_index(es, json_string_value(val) ? json_string_value(val) : "")) == UINT32_MAX) return -1;
  }
  return 0;
}

static int64_t jversion(const json_t *v) {
  if (json_is_string(v)) return strtoll(json_string_value(v), NULL, 10);
  return json_is_integer(v) ? (int64_t)json_integer_value(v) : -1;
}

static int read_plan(ens_sched *es, const json_t *cfg) {
  const json_t *limit = json_object_get(json_object_get(cfg, "ensemble_scheduling"), "max_inflight_requests");
  if (json_is_integer(limit) && json_integer_value(limit) > 0)
    es->max_inflight = json_integer_value(limit) > UINT32_MAX ? UINT32_MAX : (uint32_t)json_integer_value(limit);
  const json_t *inputs = json_object_get(cfg, "input");
  for (size_t i = 0; i < json_array_size(inputs); i++)
    if (tensor_index(es, json_string_value(json_object_get(json_array_get(inputs, i), "name")) ?: "") == UINT32_MAX)
      return -1;
  const json_t *steps = json_object_get(json_object_get(cfg, "ensemble_scheduling"), "step");
  size_t ns = json_array_size(steps);
  es->steps = calloc(ns ? ns : 1, sizeof(*es->steps));
  es->inflight = calloc(ns ? ns : 1, sizeof(*es->inflight));
  if (!es->steps || !es->inflight) return -1;
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
  while (c->holds) {
    ens_hold *h = c->holds;
    c->holds = h->next;
    TRITONSERVER_InferenceResponseDelete(h->resp);
    free(h);
  }
  free(c->answer_uses);
  for (uint32_t i = 0; c->t && i < c->es->n_tensors; i++) {
    for (uint32_t k = 0; k < c->t[i].n; k++) free(c->t[i].v[k]);
    free(c->t[i].v);
  }
  free(c->t);
  free(c->sent);
  free(c->skip);
  free(c->iters);
  free(c->answered);
  if (c->factory) TRITONBACKEND_ResponseFactoryDelete(c->factory);
  if (c->err) TRITONSERVER_ErrorDelete(c->err);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

/* Keeps the first failure (consumed). Lock held. */
static void fail_with(ens_ctx *c, TRITONSERVER_Error *err) {
  if (!c->err)
    c->err = err;
  else
    TRITONSERVER_ErrorDelete(err);
}

static const ens_value *value_at(const ens_ctx *c, uint32_t tensor, uint32_t k) {
  const ens_values *vs = &c->t[tensor];
  if (c->es->origin[tensor] < 0) k = 0;
  return k < vs->n ? vs->v[k] : NULL;
}

/* Stores `v` (taken) as iteration k of `tensor`: 1 stored, 0 dropped (the
 * same output twice in a response, or an iteration's value nothing will
 * use; `v` freed), -1 out of memory (`v` not taken). Lock held. */
static int store(ens_ctx *c, uint32_t tensor, uint32_t k, ens_value *v) {
  if (c->es->origin[tensor] >= 0) {
    v->uses = c->es->readers[tensor] + (c->answer_uses ? c->answer_uses[tensor] : 0);
    if (!v->uses) {
      free(v);
      return 0;
    }
  }
  ens_values *vs = &c->t[tensor];
  if (k >= vs->cap) {
    uint32_t cap = vs->cap ? vs->cap : 4;
    while (cap <= k) cap *= 2;
    ens_value **n = realloc(vs->v, cap * sizeof(*n));
    if (!n) return -1;
    memset(n + vs->cap, 0, (cap - vs->cap) * sizeof(*n));
    vs->v = n;
    vs->cap = cap;
  }
  if (vs->v[k]) {
    /* The same output twice in a response: the first one stays (others may
     * be reading it outside the lock). */
    free(v);
    return 0;
  }
  vs->v[k] = v;
  if (k >= vs->n) vs->n = k + 1;
  return 1;
}

/* Stores "no tensor" as iteration k of `tensor`: 0 or 1 stored, -1 out of
 * memory. Lock held (or the context not yet shared). */
static int store_absent(ens_ctx *c, uint32_t tensor, uint32_t k) {
  ens_value *v = calloc(1, sizeof(*v));
  if (!v) return -1;
  v->absent = true;
  int kept = store(c, tensor, k, v);
  if (kept < 0) free(v);
  return kept;
}

/* One use of iteration k's value of `tensor` is over (see ens_value). A
 * response left with no value goes on *dead, to be deleted without the
 * lock. Lock held. */
static void value_used(ens_ctx *c, uint32_t tensor, uint32_t k, ens_hold **dead) {
  if (c->es->origin[tensor] < 0) return;
  ens_values *vs = &c->t[tensor];
  ens_value *v = k < vs->n ? vs->v[k] : NULL;
  if (!v || --v->uses) return;
  vs->v[k] = NULL;
  ens_hold *h = v->hold;
  free(v);
  if (!h || --h->alive) return;
  if (h->prev)
    h->prev->next = h->next;
  else
    c->holds = h->next;
  if (h->next) h->next->prev = h->prev;
  h->next = *dead;
  *dead = h;
}

static void holds_delete(ens_hold *dead) {
  while (dead) {
    ens_hold *h = dead;
    dead = h->next;
    TRITONSERVER_InferenceResponseDelete(h->resp);
    free(h);
  }
}

/* A cancelled ensemble request starts no more steps, asks the running
 * ones to stop, and is answered CANCELLED once they are done. Lock held. */
static void note_cancel(ens_ctx *c) {
  const nrd_cancel_flag *f = c->req->cancel;
  if (!f || !atomic_load(&f->set)) return;
  if (!c->err) c->err = nrd_error_new(TRITONSERVER_ERROR_CANCELLED, "Request was cancelled");
  for (ens_call *k = c->running; k; k = k->next) nrd_request_cancel(k->req); /* may be mid-submission */
}

/* Whether run `k` of step `s` has every input. */
static bool run_ready(const ens_ctx *c, uint32_t s, uint32_t k) {
  const ens_step *st = &c->es->steps[s];
  if (st->src < 0 && k > 0) return false; /* runs once */
  for (uint32_t i = 0; i < st->n_in; i++)
    if (!value_at(c, st->in[i].tensor, k)) return false;
  return true;
}

typedef struct ens_run {
  uint32_t step, iter;
} ens_run;

/* Takes the runs that can go now, counting their callbacks; returns them
 * (malloc'ed, *n of them; NULL when none or out of memory). Lock held. */
static ens_run *take_ready(ens_ctx *c, uint32_t *n) {
  *n = 0;
  note_cancel(c);
  if (c->err) return NULL;
  ens_run *runs = NULL;
  uint32_t cap = 0;
  for (uint32_t s = 0; s < c->es->n_steps; s++) {
    while (!(c->skip && c->skip[s]) && run_ready(c, s, c->sent[s])) {
      if (*n == cap) {
        cap = cap ? 2 * cap : 8;
        ens_run *r = realloc(runs, cap * sizeof(*r));
        if (!r) {
          fail_with(c, nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory"));
          return runs;
        }
        runs = r;
      }
      runs[(*n)++] = (ens_run){s, c->sent[s]++};
      c->pending += 2; /* its final response and its release */
      c->in_flight++;
    }
  }
  return runs;
}

/* Whether the request asks for the ensemble's output `name` (all of them
 * when it names none). */
static bool output_wanted(const TRITONSERVER_InferenceRequest *r, const char *name) {
  if (!r->n_outputs) return true;
  for (uint32_t k = 0; k < r->n_outputs; k++)
    if (!strcmp(r->outputs[k], name)) return true;
  return false;
}

/* The i-th output of the answer. Triton answers an ensemble's outputs in
 * the order it walks its map of them (core 70b908c ensemble_scheduler.cc:
 * an unordered_map filled in the configuration's order, which libstdc++
 * walks newest first): the configuration's outputs from the last, those
 * the request asks for. */
static const char *ensemble_output_name(const ens_ctx *c, uint32_t i) {
  const TRITONBACKEND_Model *m = c->es->model;
  for (uint32_t k = m->n_outputs; k-- > 0;)
    if (output_wanted(c->req, m->outputs[k].name) && i-- == 0) return m->outputs[k].name;
  return "";
}

static uint32_t n_outputs(const ens_ctx *c) {
  const TRITONBACKEND_Model *m = c->es->model;
  uint32_t n = 0;
  for (uint32_t k = 0; k < m->n_outputs; k++) n += output_wanted(c->req, m->outputs[k].name);
  return n;
}

static uint32_t tensor_of(const ens_sched *es, const char *name) {
  for (uint32_t k = 0; k < es->n_tensors; k++)
    if (!strcmp(es->tensors[k], name)) return k;
  return UINT32_MAX;
}

/* The values of the requested outputs at iteration k into vals[] (all
 * present: true). Lock held. */
static bool outputs_at(const ens_ctx *c, uint32_t k, const ens_value **vals) {
  for (uint32_t i = 0; i < n_outputs(c); i++) {
    uint32_t t = tensor_of(c->es, ensemble_output_name(c, i));
    if (t == UINT32_MAX || !(vals[i] = value_at(c, t, k))) return false;
  }
  return true;
}

/* Whether a shape matches configured dims (-1 on either side matches). */
static bool dims_fit(const int64_t *cfg, uint32_t ncfg, const int64_t *dims, uint32_t n) {
  if (ncfg != n) return false;
  for (uint32_t i = 0; i < n; i++)
    if (cfg[i] != -1 && dims[i] != -1 && cfg[i] != dims[i]) return false;
  return true;
}

/* The shape value `v` takes where `io` (NULL: unknown) is configured, on
 * a model that batches or not, as Triton's ReshapeTensorDims gives it: a
 * tensor made without batching gets a batch of 1 where one is expected
 * and its shape is the configured one; a batch of 1 loses it where none
 * is expected and its shape is not. `out` has room for v->dims + 1;
 * returns the count of dims. */
static uint32_t reshape_dims(const nrd_io *io, bool batching, const ens_value *v, int64_t *out) {
  bool from_batching = v->batch_size != 0;
  if (io && batching && !from_batching && dims_fit(io->dims, io->ndims, v->shape, v->dims)) {
    out[0] = 1;
    memcpy(out + 1, v->shape, v->dims * sizeof(int64_t));
    return v->dims + 1;
  }
  if (io && !batching && from_batching && v->batch_size == 1 && v->dims > 0 &&
      !dims_fit(io->dims, io->ndims, v->shape, v->dims)) {
    memcpy(out, v->shape + 1, (v->dims - 1) * sizeof(int64_t));
    return v->dims - 1;
  }
  memcpy(out, v->shape, v->dims * sizeof(int64_t));
  return v->dims;
}

/* Copies value `v` into a new output `name` of `resp` (the ensemble's
 * answer to `req`). */
static TRITONSERVER_Error *add_output(const ens_ctx *c, TRITONBACKEND_Response *resp, const char *name,
                                      const ens_value *v) {
  TRITONBACKEND_Output *out = NULL;
  int64_t shape[NRD_MAX_DIMS + 1];
  bool fits = v->dims <= NRD_MAX_DIMS;
  uint32_t dims =
      fits ? reshape_dims(nrd_model_find_output(c->es->model, name), c->req->batch_size != 0, v, shape) : v->dims;
  NRD_RETURN_IF_ERROR(TRITONBACKEND_ResponseOutput(resp, &out, name, v->dtype, fits ? shape : v->shape, dims));
  void *buf = NULL;
  TRITONSERVER_MemoryType mt = TRITONSERVER_MEMORY_CPU;
  int64_t mid = 0;
  NRD_RETURN_IF_ERROR(TRITONBACKEND_OutputBuffer(out, &buf, v->byte_size, &mt, &mid));
  if (mt != TRITONSERVER_MEMORY_CPU && mt != TRITONSERVER_MEMORY_CPU_PINNED)
    return nrd_error_new(TRITONSERVER_ERROR_UNSUPPORTED, "output '%s': only CPU memory is supported", name);
  char *dst = buf;
  for (uint32_t b = 0; b < v->nbufs; b++) {
    if (v->bufs[b].size) memcpy(dst, v->bufs[b].base, v->bufs[b].size);
    dst += v->bufs[b].size;
  }
  return NULL;
}

/* The sequence_id, sequence_start and sequence_end parameters of `req`
 * on `resp`, as Triton's ensemble sets them. */
static TRITONSERVER_Error *add_sequence_parameters(TRITONBACKEND_Response *resp,
                                                   const TRITONSERVER_InferenceRequest *req) {
  TRITONSERVER_Error *err = req->corr_id_str
                                ? TRITONBACKEND_ResponseSetStringParameter(resp, "sequence_id", req->corr_id_str)
                                : TRITONBACKEND_ResponseSetIntParameter(resp, "sequence_id", (int64_t)req->corr_id);
  if (!err)
    err = TRITONBACKEND_ResponseSetBoolParameter(resp, "sequence_start",
                                                 (req->flags & TRITONSERVER_REQUEST_FLAG_SEQUENCE_START) != 0);
  if (!err)
    err = TRITONBACKEND_ResponseSetBoolParameter(resp, "sequence_end",
                                                 (req->flags & TRITONSERVER_REQUEST_FLAG_SEQUENCE_END) != 0);
  return err;
}

/* Sends one response with the outputs `vals` (flags: 0 or FINAL); false
 * when building it failed (the response then carries the error). */
static bool answer(ens_ctx *c, const ens_value **vals, uint32_t flags) {
  TRITONBACKEND_Response *resp = NULL;
  TRITONSERVER_Error *err = c->factory ? TRITONBACKEND_ResponseNewFromFactory(&resp, c->factory)
                                       : TRITONBACKEND_ResponseNew(&resp, (TRITONBACKEND_Request *)c->req);
  if (err) {
    NRD_LOG_ERROR("ensemble '%s': cannot make a response: %s", c->es->model->name, TRITONSERVER_ErrorMessage(err));
    TRITONSERVER_ErrorDelete(err);
    return false;
  }
  bool from_step = false;
  for (uint32_t i = 0; !err && i < n_outputs(c); i++) {
    if (vals[i]->absent) {
      NRD_LOG_VERBOSE(1, "Composing models did not output tensor %s", ensemble_output_name(c, i)); /* Triton's */
      continue;
    }
    err = add_output(c, resp, ensemble_output_name(c, i), vals[i]);
    from_step |= vals[i]->hold != NULL;
  }
  /* Triton's ensemble answers an output a step made with the sequence
   * fields of the request that made it (its steps get the ensemble
   * request's). */
  if (!err && from_step) err = add_sequence_parameters(resp, c->req);
  bool ok = err == NULL;
  TRITONSERVER_Error *sent = TRITONBACKEND_ResponseSend(resp, flags, err);
  if (sent) {
    NRD_LOG_ERROR("ensemble '%s': cannot send a response: %s", c->es->model->name, TRITONSERVER_ErrorMessage(sent));
    TRITONSERVER_ErrorDelete(sent);
  }
  if (err) TRITONSERVER_ErrorDelete(err);
  return ok;
}

/* Decoupled ensemble: the iterations whose outputs all exist and that were
 * not answered yet, marked answered; *n of them (malloc'ed). Lock held. */
static uint32_t *take_answers(ens_ctx *c, uint32_t *n) {
  *n = 0;
  if (!c->factory || c->err) return NULL;
  uint32_t most = 0;
  for (uint32_t t = 0; t < c->es->n_tensors; t++)
    if (c->t[t].n > most) most = c->t[t].n;
  if (most > c->n_answered) {
    bool *a = realloc(c->answered, most * sizeof(*a));
    if (!a) return NULL;
    memset(a + c->n_answered, 0, (most - c->n_answered) * sizeof(*a));
    c->answered = a;
    c->n_answered = most;
  }
  uint32_t *ks = NULL;
  const ens_value **vals = malloc((n_outputs(c) ? n_outputs(c) : 1) * sizeof(*vals));
  while (c->first_open < most && c->answered[c->first_open]) c->first_open++;
  for (uint32_t k = c->first_open; vals && k < most; k++) {
    if (c->answered[k] || !outputs_at(c, k, vals)) continue;
    uint32_t *g = realloc(ks, (*n + 1) * sizeof(*g));
    if (!g) break;
    ks = g;
    ks[(*n)++] = k;
    c->answered[k] = true;
  }
  free(vals);
  return ks;
}

/* Sends the answers of iterations ks[] (values are stable: no lock). */
static void send_answers(ens_ctx *c, const uint32_t *ks, uint32_t n, bool final_last) {
  const ens_value **vals = n ? malloc((n_outputs(c) ? n_outputs(c) : 1) * sizeof(*vals)) : NULL;
  for (uint32_t i = 0; vals && i < n; i++) {
    pthread_mutex_lock(&c->mu);
    bool have = outputs_at(c, ks[i], vals);
    pthread_mutex_unlock(&c->mu);
    if (!have) continue;
    bool last = final_last && i + 1 == n;
    if (answer(c, vals, last ? TRITONSERVER_RESPONSE_COMPLETE_FINAL : 0) && last) c->final_sent = true;
    ens_hold *dead = NULL;
    pthread_mutex_lock(&c->mu);
    for (uint32_t o = 0; o < n_outputs(c); o++) {
      uint32_t t = tensor_of(c->es, ensemble_output_name(c, o));
      if (t != UINT32_MAX) value_used(c, t, ks[i], &dead);
    }
    pthread_mutex_unlock(&c->mu);
    holds_delete(dead);
  }
  free(vals);
}

/* Nothing is outstanding: answers the ensemble request and frees `c`.
 * The request is released last: that may let an unload free the plan. */
static void finish(ens_ctx *c) {
  ens_sched *es = c->es;
  TRITONBACKEND_Model *m = es->model;
  TRITONSERVER_InferenceRequest *req = c->req;
  uint32_t n_out = n_outputs(c);
  const ens_value **vals = calloc(n_out ? n_out : 1, sizeof(*vals));
  if (!vals && !c->err) c->err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  if (!c->err && !c->factory && !outputs_at(c, 0, vals))
    c->err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL,
                           "unexpected deadlock, at least one output is not set while no more ensemble steps can be "
                           "made");
  uint64_t end = nrd_now_ns();
  if (c->err) {
    TRITONSERVER_Error *e = nrd_error_new(TRITONSERVER_ErrorCode(c->err), "in ensemble '%s', %s", m->name,
                                          TRITONSERVER_ErrorMessage(c->err));
    /* Triton counts a failed ensemble request twice, both OTHER: once as
     * it answers the error, once as its request tracker ends. */
    nrd_fail_reason why = NRD_FAIL_OTHER;
    nrd_stats_request_fail(&m->stats, req->queue_start_ns, req->queue_start_ns, c->start_ns, end, why, -1);
    free(vals);
    if (c->factory) {
      /* A decoupled request may have had answers already: the error ends it. */
      TRITONBACKEND_Response *resp = NULL;
      TRITONSERVER_Error *ne = TRITONBACKEND_ResponseNewFromFactory(&resp, c->factory);
      if (!ne) ne = TRITONBACKEND_ResponseSend(resp, TRITONSERVER_RESPONSE_COMPLETE_FINAL, e);
      NRD_ERROR_IGNORE(ne, "ensemble: the client's final error response could not be sent");
      TRITONSERVER_ErrorDelete(e);
      nrd_stats_request_fail(&m->stats, req->queue_start_ns, req->queue_start_ns, c->start_ns, end, why, -1);
      ctx_free(c);
      nrd_request_release(req, TRITONSERVER_REQUEST_RELEASE_ALL);
    } else {
      ctx_free(c);
      nrd_request_fail(req, e, why); /* counts the failure and releases the request */
    }
    return;
  }
  bool ok = true;
  if (c->factory) {
    if (!c->final_sent)
      NRD_ERROR_IGNORE(TRITONBACKEND_ResponseFactorySendFlags(c->factory, TRITONSERVER_RESPONSE_COMPLETE_FINAL),
                       "ensemble: the final flag could not be sent");
  } else {
    ok = answer(c, vals, TRITONSERVER_RESPONSE_COMPLETE_FINAL);
  }
  free(vals);
  if (ok) {
    nrd_stats_request_success(&m->stats, req->queue_start_ns, req->queue_start_ns, c->start_ns, c->start_ns, end, end,
                              -1);
    nrd_stats_batch(&m->stats, req->batch_size ? req->batch_size : 1, c->start_ns, c->start_ns, end, end, -1);
  } else {
    nrd_stats_request_fail(&m->stats, req->queue_start_ns, req->queue_start_ns, c->start_ns, end, NRD_FAIL_OTHER, -1);
  }
  ctx_free(c);
  nrd_request_release(req, TRITONSERVER_REQUEST_RELEASE_ALL);
}

/* One awaited callback has come. */
static void done_one(ens_ctx *c) {
  pthread_mutex_lock(&c->mu);
  bool last = --c->pending == 0;
  pthread_mutex_unlock(&c->mu);
  if (last) finish(c);
}

/* Lock held. */
static void running_add(ens_ctx *c, ens_call *k) {
  k->prev = NULL;
  k->next = c->running;
  if (c->running) c->running->prev = k;
  c->running = k;
}

/* Lock held; `k` may not be on the list. */
static void running_remove(ens_ctx *c, ens_call *k) {
  if (!k->req) return;
  if (k->prev)
    k->prev->next = k->next;
  else
    c->running = k->next;
  if (k->next) k->next->prev = k->prev;
  k->prev = k->next = NULL;
  k->req = NULL;
}

/* One of a run's two callbacks (final response, release) has come. After
 * both, the run leaves the list and its request is deleted: until then a
 * cancellation reaches it, also after a decoupled model released it. */
static void call_done(ens_call *k) {
  ens_ctx *c = k->ctx;
  if (atomic_fetch_sub(&k->left, 1) == 1) {
    /* Released: the run no longer reads its input values. */
    TRITONSERVER_InferenceRequest *r = k->req;
    const ens_step *st = &c->es->steps[k->step];
    ens_hold *dead = NULL;
    pthread_mutex_lock(&c->mu);
    running_remove(c, k);
    for (uint32_t i = 0; i < st->n_in; i++) value_used(c, st->in[i].tensor, k->iter, &dead);
    pthread_mutex_unlock(&c->mu);
    if (r) TRITONSERVER_InferenceRequestDelete(r);
    holds_delete(dead);
    free(k);
  }
  done_one(c);
}

static void send_runs(ens_ctx *c, const ens_run *runs, uint32_t n, bool wait_for_slots);

/* Stores the outputs of a step's response as iteration `iter` of the
 * tensors they map to; true when it kept `resp`. Lock held. */
static bool take_outputs(ens_ctx *c, const ens_step *st, uint32_t iter, uint64_t batch_size,
                         TRITONSERVER_InferenceResponse *resp) {
  ens_hold *h = calloc(1, sizeof(*h));
  if (!h) {
    fail_with(c, nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory"));
    return false;
  }
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
      ens_value *v = malloc(sizeof(*v));
      if (v) {
        *v = (ens_value){.dtype = dt,
                         .shape = shape,
                         .dims = (uint32_t)dims,
                         .nbufs = 1,
                         .byte_size = size,
                         .batch_size = batch_size,
                         .one = {.base = base, .size = size, .mtype = mt, .mtype_id = mid},
                         .hold = h};
        v->bufs = &v->one;
      }
      int kept = v ? store(c, st->out[o].tensor, iter, v) : -1;
      if (kept < 0) {
        free(v);
        e = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
      } else {
        h->alive += (uint32_t)kept;
      }
    }
  }
  /* A step that answers once and left out an output it maps (its optional
   * input was absent): that tensor has no value for this run. */
  for (uint32_t o = 0; !e && !st->decoupled && o < st->n_out; o++)
    if (!value_at(c, st->out[o].tensor, iter) && store_absent(c, st->out[o].tensor, iter) < 0)
      e = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  if (e) fail_with(c, e);
  if (!h->alive) {
    free(h);
    return false;
  }
  h->resp = resp;
  h->next = c->holds;
  if (c->holds) c->holds->prev = h;
  c->holds = h;
  return true;
}

/* Takes a slot of step s for a run of c's request (max_inflight_requests).
 * With `wait`, waits for one while the step is full; without, takes it at
 * once. NULL, or the error that ended the wait: the request was cancelled
 * or the ensemble is unloading. No context lock held. */
static TRITONSERVER_Error *slot_take(ens_ctx *c, uint32_t s, bool wait) {
  ens_sched *es = c->es;
  if (!es->max_inflight) return NULL;
  const nrd_cancel_flag *f = c->req->cancel;
  TRITONSERVER_Error *err = NULL;
  pthread_mutex_lock(&es->slots_mu);
  while (wait && es->inflight[s] >= es->max_inflight) {
    if (f && atomic_load(&f->set)) {
      err = nrd_error_new(TRITONSERVER_ERROR_CANCELLED, "Request was cancelled");
      break;
    }
    if (atomic_load(&es->stopped)) {
      err = nrd_error_new(TRITONSERVER_ERROR_UNAVAILABLE, "model '%s' is unloading", es->model->name);
      break;
    }
    /* Cancellation and unloading signal nothing here: look again soon. */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 20 * 1000 * 1000;
    if (until.tv_nsec >= 1000000000L) {
      until.tv_sec++;
      until.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&es->slots_freed, &es->slots_mu, &until);
  }
  if (!err) es->inflight[s]++;
  pthread_mutex_unlock(&es->slots_mu);
  return err;
}

static void slot_give(ens_sched *es, uint32_t s) {
  if (!es->max_inflight) return;
  pthread_mutex_lock(&es->slots_mu);
  es->inflight[s]--;
  pthread_cond_signal(&es->slots_freed);
  pthread_mutex_unlock(&es->slots_mu);
}

static void on_step_response(TRITONSERVER_InferenceResponse *resp, const uint32_t flags, void *userp) {
  ens_call *k = userp;
  ens_ctx *c = k->ctx;
  const ens_step *st = &c->es->steps[k->step];
  ens_run *next = NULL;
  uint32_t n_next = 0, n_ans = 0, *ans = NULL;
  bool final = flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL;
  pthread_mutex_lock(&c->mu);
  if (resp) {
    TRITONSERVER_Error *rerr = TRITONSERVER_InferenceResponseError(resp);
    uint32_t count = 0;
    TRITONSERVER_Error *ce = rerr ? NULL : TRITONSERVER_InferenceResponseOutputCount(resp, &count);
    NRD_ERROR_IGNORE(ce, "ensemble: a step's response without outputs");
    bool kept = false;
    if (rerr)
      fail_with(c, rerr);
    else if ((count || !st->decoupled) && !c->err) /* a decoupled step's response is its next iteration */
      kept = take_outputs(c, st, st->decoupled ? c->iters[k->step]++ : k->iter, k->req->batch_size, resp);
    if (!kept) TRITONSERVER_InferenceResponseDelete(resp);
  }
  if (final) c->in_flight--;
  if (resp || final) {
    next = take_ready(c, &n_next);
    ans = take_answers(c, &n_ans);
  }
  /* Nothing runs any more and nothing can start: these are the last answers. */
  bool last = c->factory && final && !c->in_flight && !n_next && !c->err;
  pthread_mutex_unlock(&c->mu);
  if (n_ans) send_answers(c, ans, n_ans, last);
  free(ans);
  /* The run is done with its slot before any run it enables waits for one
   * (a step may feed itself through another). */
  if (final) slot_give(c->es, k->step);
  if (n_next) send_runs(c, next, n_next, true);
  free(next);
  if (final) call_done(k);
}

static void on_step_release(TRITONSERVER_InferenceRequest *r, const uint32_t flags, void *userp) {
  (void)r, (void)flags;
  call_done(userp); /* deletes the request */
}

static TRITONSERVER_Error *copy_params(TRITONSERVER_InferenceRequest *to, const TRITONSERVER_InferenceRequest *from) {
  for (size_t i = 0; i < from->params.count; i++) {
    const nrd_param *p = &from->params.items[i];
    switch (p->type) {
      case TRITONSERVER_PARAMETER_STRING:
        NRD_RETURN_IF_ERROR(nrd_param_list_add_string(&to->params, p->name, p->v.s));
        break;
      case TRITONSERVER_PARAMETER_INT: NRD_RETURN_IF_ERROR(nrd_param_list_add_int(&to->params, p->name, p->v.i)); break;
      case TRITONSERVER_PARAMETER_BOOL:
        NRD_RETURN_IF_ERROR(nrd_param_list_add_bool(&to->params, p->name, p->v.b));
        break;
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

/* Builds and submits run `iter` of step `s`. */
static TRITONSERVER_Error *send_run(ens_ctx *c, uint32_t s, uint32_t iter, ens_call *k) {
  const ens_step *st = &c->es->steps[s];
  const TRITONSERVER_InferenceRequest *req = c->req;
  TRITONSERVER_InferenceRequest *r = NULL;
  const nrd_step_resolver *rs = &c->es->resolve;
  NRD_RETURN_IF_ERROR(rs->request_new(rs->ctx, &r, c->es->model->ns, st->model, st->version));
  TRITONSERVER_Error *err = NULL;
  if (r->model->decoupled != st->decoupled)
    err = nrd_error_new(TRITONSERVER_ERROR_UNAVAILABLE,
                        "step model '%s' was reloaded with another transaction "
                        "policy",
                        st->model);
  if (!err && req->id) err = TRITONSERVER_InferenceRequestSetId(r, req->id);
  if (!err && req->corr_id_str)
    err = TRITONSERVER_InferenceRequestSetCorrelationIdString(r, req->corr_id_str);
  else if (!err)
    err = TRITONSERVER_InferenceRequestSetCorrelationId(r, req->corr_id);
  if (!err) err = TRITONSERVER_InferenceRequestSetFlags(r, req->flags);
  if (!err) err = TRITONSERVER_InferenceRequestSetPriorityUInt64(r, req->priority);
  if (!err) err = TRITONSERVER_InferenceRequestSetTimeoutMicroseconds(r, req->timeout_us);
  if (!err) err = copy_params(r, req);
  for (uint32_t i = 0; !err && i < st->n_in; i++) {
    pthread_mutex_lock(&c->mu);
    const ens_value *v = value_at(c, st->in[i].tensor, iter);
    pthread_mutex_unlock(&c->mu);
    if (v->absent) continue; /* sent without it, as Triton does */
    int64_t shape[NRD_MAX_DIMS + 1];
    bool fits = v->dims <= NRD_MAX_DIMS;
    uint32_t dims =
        fits ? reshape_dims(nrd_model_find_input(r->model, st->in[i].name), r->model->max_batch_size > 0, v, shape)
             : v->dims;
    err = TRITONSERVER_InferenceRequestAddInput(r, st->in[i].name, v->dtype, fits ? shape : v->shape, dims);
    for (uint32_t b = 0; !err && b < v->nbufs; b++)
      err = TRITONSERVER_InferenceRequestAppendInputData(r, st->in[i].name, v->bufs[b].base, v->bufs[b].size,
                                                         v->bufs[b].mtype, v->bufs[b].mtype_id);
  }
  for (uint32_t o = 0; !err && o < st->n_out; o++)
    err = TRITONSERVER_InferenceRequestAddRequestedOutput(r, st->out[o].name);
  if (!err) err = TRITONSERVER_InferenceRequestSetReleaseCallback(r, on_step_release, k);
  if (!err) err = TRITONSERVER_InferenceRequestSetResponseCallback(r, &ens_allocator, NULL, on_step_response, k);
  if (err) {
    TRITONSERVER_InferenceRequestDelete(r);
    return err;
  }
  /* Listed before it can be released, so that cancellation reaches it. */
  pthread_mutex_lock(&c->mu);
  k->req = r;
  running_add(c, k);
  pthread_mutex_unlock(&c->mu);
  /* A traced ensemble request gives each step a child trace. */
  TRITONSERVER_InferenceTrace *child = NULL;
  if (req->trace) err = TRITONSERVER_InferenceTraceSpawnChildTrace(req->trace, &child);
  if (!err) err = rs->infer(rs->ctx, r, child); /* takes `child` either way */
  if (err) {
    pthread_mutex_lock(&c->mu);
    running_remove(c, k);
    pthread_mutex_unlock(&c->mu);
    TRITONSERVER_InferenceRequestDelete(r); /* no callback will come */
  }
  return err;
}

/* Submits runs[]; wait_for_slots: may wait for room in a full step (see
 * max_inflight_requests at the top). */
static void send_runs(ens_ctx *c, const ens_run *runs, uint32_t n, bool wait_for_slots) {
  for (uint32_t i = 0; i < n; i++) {
    ens_call *k = malloc(sizeof(*k));
    TRITONSERVER_Error *err = k ? NULL : nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    bool slot = false;
    if (k) {
      k->ctx = c;
      k->step = runs[i].step;
      k->iter = runs[i].iter;
      k->req = NULL;
      k->prev = k->next = NULL;
      atomic_init(&k->left, 2);
      err = slot_take(c, runs[i].step, wait_for_slots);
      slot = err == NULL;
      if (!err) err = send_run(c, runs[i].step, runs[i].iter, k);
    }
    if (!err) continue;
    if (slot) slot_give(c->es, runs[i].step);
    free(k);
    pthread_mutex_lock(&c->mu);
    fail_with(c, err);
    note_cancel(c); /* a wait ended by cancellation stops the steps still running */
    c->pending -= 1; /* of the two it counted, done_one takes the other */
    c->in_flight--; /* no final response will come */
    pthread_mutex_unlock(&c->mu);
    done_one(c);
  }
}

/* ----------------------------------------------------------- scheduler */

/* Triton prunes an ensemble to the steps the request's outputs need: a
 * step runs when one of its outputs is asked for or feeds a step that
 * runs. Leaves c->skip NULL when every step runs; -1 when out of memory. */
static int plan_skips(ens_ctx *c) {
  const ens_sched *es = c->es;
  if (!c->req->n_outputs || !es->n_steps) return 0;
  bool *need = calloc(es->n_tensors ? es->n_tensors : 1, sizeof(*need));
  bool *runs = calloc(es->n_steps, sizeof(*runs));
  if (!need || !runs) {
    free(need);
    free(runs);
    return -1;
  }
  for (uint32_t i = 0; i < n_outputs(c); i++) {
    uint32_t t = tensor_of(es, ensemble_output_name(c, i));
    if (t != UINT32_MAX) need[t] = true;
  }
  for (bool grew = true; grew;) {
    grew = false;
    for (uint32_t s = 0; s < es->n_steps; s++) {
      const ens_step *st = &es->steps[s];
      for (uint32_t o = 0; !runs[s] && o < st->n_out; o++) runs[s] = need[st->out[o].tensor];
      if (!runs[s]) continue;
      for (uint32_t i = 0; i < st->n_in; i++)
        if (!need[st->in[i].tensor]) need[st->in[i].tensor] = grew = true;
    }
  }
  free(need);
  bool all = true;
  for (uint32_t s = 0; s < es->n_steps; s++) {
    all = all && runs[s];
    runs[s] = !runs[s]; /* now: skip */
  }
  if (all) free(runs);
  c->skip = all ? NULL : runs;
  return 0;
}

static TRITONSERVER_Error *ens_enqueue(nrd_scheduler *sched, TRITONSERVER_InferenceRequest *req) {
  ens_sched *es = (ens_sched *)sched;
  if (atomic_load(&es->stopped))
    return nrd_error_new(TRITONSERVER_ERROR_UNAVAILABLE, "model '%s' is unloading and takes no new requests",
                         es->model->name);
  /* The ensemble itself never waits in a queue: Triton's gauge shows 0
   * for it (its composing models count their own requests). */
  nrd_request_pending_done(req);
  ens_ctx *c = calloc(1, sizeof(*c));
  uint32_t ns = es->n_steps ? es->n_steps : 1;
  if (c) {
    c->es = es;
    c->t = calloc(es->n_tensors ? es->n_tensors : 1, sizeof(*c->t));
    c->sent = calloc(ns, sizeof(*c->sent));
    c->iters = calloc(ns, sizeof(*c->iters));
    pthread_mutex_init(&c->mu, NULL);
  }
  TRITONSERVER_Error *err = NULL;
  if (!c || !c->t || !c->sent || !c->iters)
    err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory starting ensemble '%s'", es->model->name);
  else if (es->decoupled)
    err = TRITONBACKEND_ResponseFactoryNew(&c->factory, (TRITONBACKEND_Request *)req);
  if (c) {
    c->req = req;
    c->start_ns = nrd_now_ns(); /* its execution starts now (0 made the durations the machine's uptime) */
  }
  if (!err && plan_skips(c) < 0)
    err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory starting ensemble '%s'", es->model->name);
  if (!err && es->decoupled) {
    /* Each answer of an iteration is one use of its values. */
    if (!(c->answer_uses = calloc(es->n_tensors ? es->n_tensors : 1, sizeof(*c->answer_uses))))
      err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory starting ensemble '%s'", es->model->name);
    for (uint32_t i = 0; !err && i < n_outputs(c); i++) {
      uint32_t t = tensor_of(es, ensemble_output_name(c, i));
      if (t != UINT32_MAX) c->answer_uses[t]++;
    }
  }
  /* The request's inputs are the first values (the request was validated
   * against the ensemble's inputs). */
  for (uint32_t i = 0; !err && i < req->n_inputs; i++) {
    const nrd_input *in = &req->inputs[i];
    uint32_t t = tensor_of(es, in->name);
    if (t == UINT32_MAX) continue;
    ens_value *v = malloc(sizeof(*v));
    if (v) /* As the ensemble's reshape leaves it, as a model's backend sees it. */
      *v = (ens_value){.dtype = in->dtype,
                       .shape = in->backend_shape ? in->backend_shape : in->shape,
                       .dims = in->backend_shape ? in->backend_dims_count : in->dims_count,
                       .bufs = in->bufs,
                       .nbufs = in->nbufs,
                       .byte_size = in->byte_size,
                       .batch_size = req->batch_size};
    if (!v || store(c, t, 0, v) < 0) {
      free(v);
      err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory starting ensemble '%s'", es->model->name);
    }
  }
  /* Optional ensemble inputs the request left out: steps run without them. */
  for (uint32_t i = 0; !err && i < es->model->n_inputs; i++) {
    const nrd_io *io = &es->model->inputs[i];
    if (!io->optional) continue;
    uint32_t t = tensor_of(es, io->name);
    if (t == UINT32_MAX || value_at(c, t, 0)) continue;
    if (store_absent(c, t, 0) < 0)
      err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory starting ensemble '%s'", es->model->name);
  }
  if (err) {
    if (c) {
      c->req = NULL;
      ctx_free(c);
    }
    return err;
  }
  /* From here on the request is answered through finish(). */
  pthread_mutex_lock(&c->mu);
  c->pending = 1;
  c->in_flight = 1;
  uint32_t n = 0;
  ens_run *first = take_ready(c, &n);
  pthread_mutex_unlock(&c->mu);
  send_runs(c, first, n, false);
  free(first);
  pthread_mutex_lock(&c->mu);
  c->in_flight--;
  pthread_mutex_unlock(&c->mu);
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
  pthread_cond_destroy(&es->slots_freed);
  pthread_mutex_destroy(&es->slots_mu);
  free(es);
}

static const nrd_scheduler_ops ens_ops = {ens_enqueue, ens_next_batch, ens_stop, ens_destroy, NULL};

/* What is known of an ensemble tensor's data type while the steps are
 * checked: the type and the model it was learnt from. */
/* What an ensemble tensor is known to be, and from which model: the first
 * model config that names it sets it, the others must agree. */
typedef struct ens_known {
  TRITONSERVER_DataType dtype; /* INVALID: not known yet */
  const char *from;
  const int64_t *dims; /* the config's (a model's dims; the ensemble's reshape when it has one) */
  uint32_t ndims;
  bool batching;
} ens_known;

static uint32_t tensor_of(const ens_sched *es, const char *name);

static const nrd_io *find_io(const nrd_io *ios, uint32_t n, const char *name) {
  for (uint32_t i = 0; i < n; i++)
    if (!strcmp(ios[i].name, name)) return &ios[i];
  return NULL;
}

/* Same length, and each dimension equal or -1 in either (checked when
 * the request runs). With a batch dimension in front when `*_batch`. */
static bool dims_match(const int64_t *a, uint32_t na, bool a_batch, const int64_t *b, uint32_t nb, bool b_batch) {
  if (na + a_batch != nb + b_batch) return false;
  for (uint32_t i = 0; i < na + a_batch; i++) {
    int64_t x = a_batch ? (i ? a[i - 1] : -1) : a[i];
    int64_t y = b_batch ? (i ? b[i - 1] : -1) : b[i];
    if (x != y && x != -1 && y != -1) return false;
  }
  return true;
}

/* "[-1,4]": a tensor's full shape (batch dimension included) for errors. */
static void full_dims_text(char *out, size_t n, const ens_known *k) {
  size_t at = (size_t)snprintf(out, n, "[%s", k->batching ? "-1" : "");
  for (uint32_t i = 0; i < k->ndims && at < n; i++)
    at += (size_t)snprintf(out + at, n - at, "%s%" PRId64, (i || k->batching) ? "," : "", k->dims[i]);
  if (at < n) snprintf(out + at, n - at, "]");
}

/* Notes what `now` says of `tensor`, or checks it against what was noted
 * first, as Triton does: same data type, and shapes that match either
 * without or with their batch dimensions (so a non-batching model's
 * [-1,4] meets a batching model's [4]). */
static TRITONSERVER_Error *agree(const TRITONBACKEND_Model *e, const ens_sched *es, ens_known *k, uint32_t tensor,
                                 const ens_known *now) {
  ens_known *t = &k[tensor];
  if (t->dtype == TRITONSERVER_TYPE_INVALID) {
    *t = *now;
    return NULL;
  }
  if (t->dtype != now->dtype)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "in ensemble %s, ensemble tensor %s: inconsistent data type: %s is inferred from model %s "
                         "while %s is inferred from model %s",
                         e->name, es->tensors[tensor], nrd_datatype_config_name(t->dtype), t->from,
                         nrd_datatype_config_name(now->dtype), now->from);
  if (dims_match(t->dims, t->ndims, false, now->dims, now->ndims, false) ||
      dims_match(t->dims, t->ndims, t->batching, now->dims, now->ndims, now->batching))
    return NULL;
  char was[256], is[256];
  full_dims_text(was, sizeof was, t);
  full_dims_text(is, sizeof is, now);
  return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                       "in ensemble %s, ensemble tensor %s: inconsistent shape: %s is inferred from model %s while "
                       "%s is inferred from model %s",
                       e->name, es->tensors[tensor], was, t->from, is, now->from);
}

static ens_known known_of(const nrd_io *io, const TRITONBACKEND_Model *m, bool use_reshape) {
  bool reshaped = use_reshape && io->reshape;
  return (ens_known){io->dtype, m->name, reshaped ? io->reshape : io->dims, reshaped ? io->nreshape : io->ndims,
                     m->max_batch_size > 0};
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
    ens_known now = known_of(io, cm, false);
    NRD_RETURN_IF_ERROR(agree(e, es, k, st->in[i].tensor, &now));
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
    ens_known now = known_of(io, cm, false);
    NRD_RETURN_IF_ERROR(agree(e, es, k, st->out[o].tensor, &now));
  }
  return NULL;
}

/* An ensemble output without labels of its own takes those of the step
 * output it comes from, as Triton completes an ensemble's label provider
 * at load, so that classification through the ensemble names classes. */
static TRITONSERVER_Error *take_labels(TRITONBACKEND_Model *e, const ens_sched *es, const ens_step *st,
                                       const TRITONBACKEND_Model *cm) {
  for (uint32_t o = 0; o < st->n_out; o++) {
    nrd_io *out = NULL;
    for (uint32_t k = 0; k < e->n_outputs && !out; k++)
      if (!strcmp(e->outputs[k].name, es->tensors[st->out[o].tensor])) out = &e->outputs[k];
    const nrd_io *from = find_io(cm->outputs, cm->n_outputs, st->out[o].name);
    if (!out || out->n_labels || !from || !from->n_labels) continue;
    out->labels = calloc(from->n_labels, sizeof(char *));
    if (!out->labels) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    for (; out->n_labels < from->n_labels; out->n_labels++)
      if (!(out->labels[out->n_labels] = strdup(from->labels[out->n_labels])))
        return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  }
  return NULL;
}

/* Which tensors iterate with which decoupled step (see the top), and so
 * which steps run once per iteration; whether the ensemble is decoupled.
 * Refuses what Triton refuses (its ensemble_utils.cc, r25.07): every step,
 * and the ensemble's outputs taken together, must read tensors of one
 * origin, where the ensemble's inputs are one origin and each decoupled
 * step starts another. So a step may not read both an ensemble input and
 * an iteration, and the outputs may not come from two decoupled steps. */
static TRITONSERVER_Error *plan_iterations(const TRITONBACKEND_Model *e, ens_sched *es) {
  enum { UNKNOWN = -2, ONCE = -1 };
  es->origin = malloc((es->n_tensors ? es->n_tensors : 1) * sizeof(*es->origin));
  es->readers = calloc(es->n_tensors ? es->n_tensors : 1, sizeof(*es->readers));
  bool *settled = calloc(es->n_steps ? es->n_steps : 1, sizeof(*settled));
  TRITONSERVER_Error *err = NULL;
  if (!es->origin || !es->readers || !settled) {
    free(settled);
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  }
  for (uint32_t s = 0; s < es->n_steps; s++)
    for (uint32_t i = 0; i < es->steps[s].n_in; i++) es->readers[es->steps[s].in[i].tensor]++;
  for (uint32_t t = 0; t < es->n_tensors; t++) es->origin[t] = UNKNOWN;
  for (uint32_t i = 0; i < e->n_inputs; i++) {
    uint32_t t = tensor_of(es, e->inputs[i].name);
    if (t != UINT32_MAX) es->origin[t] = ONCE;
  }
  /* A step settles once all it reads has; the graph has no cycle
   * (configuration check), so n rounds settle every reachable step. */
  for (uint32_t round = 0; !err && round < es->n_steps; round++) {
    for (uint32_t s = 0; !err && s < es->n_steps; s++) {
      ens_step *st = &es->steps[s];
      bool ready = !settled[s];
      for (uint32_t i = 0; ready && i < st->n_in; i++) ready = es->origin[st->in[i].tensor] != UNKNOWN;
      if (!ready) continue;
      int32_t src = st->n_in ? es->origin[st->in[0].tensor] : ONCE;
      for (uint32_t i = 1; !err && i < st->n_in; i++)
        if (es->origin[st->in[i].tensor] != src)
          err = nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                              "in ensemble %s, step of model '%s' receives inputs originated from different "
                              "decoupled models",
                              e->name, st->model);
      st->src = src; /* a decoupled step too runs once per response it reads */
      for (uint32_t o = 0; o < st->n_out; o++) es->origin[st->out[o].tensor] = st->decoupled ? (int32_t)s : src;
      settled[s] = true;
    }
  }
  free(settled);
  /* The outputs meet as the inputs of one more step, named after the ensemble. */
  int32_t out_src = UNKNOWN;
  for (uint32_t i = 0; !err && i < e->n_outputs; i++) {
    uint32_t t = tensor_of(es, e->outputs[i].name);
    if (t == UINT32_MAX || es->origin[t] == UNKNOWN) continue;
    if (out_src != UNKNOWN && es->origin[t] != out_src)
      err = nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                          "in ensemble %s, step of model '%s' receives inputs originated from different decoupled "
                          "models",
                          e->name, e->name);
    out_src = es->origin[t];
  }
  for (uint32_t t = 0; t < es->n_tensors; t++)
    if (es->origin[t] == UNKNOWN) es->origin[t] = ONCE; /* read by nothing that runs */
  es->decoupled = out_src >= 0;
  return err;
}

static int by_name(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

TRITONSERVER_Error *nrd_ensemble_scheduler_new(TRITONBACKEND_Model *model, const nrd_step_resolver *steps,
                                               nrd_scheduler **out, bool *decoupled) {
  if (!steps || !steps->get_model || !steps->request_new || !steps->infer)
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "ensemble '%s' has no step resolver", model->name);
  ens_sched *es = calloc(1, sizeof(*es));
  if (!es) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory creating ensemble '%s'", model->name);
  es->base.ops = &ens_ops;
  es->model = model;
  es->resolve = *steps;
  atomic_init(&es->stopped, false);
  pthread_mutex_init(&es->slots_mu, NULL);
  pthread_cond_init(&es->slots_freed, NULL);
  if (read_plan(es, model->config) != 0) {
    plan_free(es);
    pthread_cond_destroy(&es->slots_freed);
    pthread_mutex_destroy(&es->slots_mu);
    free(es);
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory creating ensemble '%s'", model->name);
  }
  if (es->max_inflight)
    NRD_LOG_INFO("Ensemble model '%s' configured with max_inflight_requests: %u", model->name,
                 es->max_inflight); /* Triton's line */
  /* Every composing model must be there now, as Triton requires, and
   * agree with the ensemble on the tensors it reads and writes. */
  char missing[1024] = "";
  size_t used = 0;
  const char **absent = calloc(es->n_steps ? es->n_steps : 1, sizeof(*absent)); /* steps' models not there */
  uint32_t n_absent = 0;
  TRITONSERVER_Error *err = NULL;
  ens_known *known = calloc(es->n_tensors ? es->n_tensors : 1, sizeof(*known));
  /* `known` points into the step models' configs: they are held until the end. */
  TRITONBACKEND_Model **held = calloc(es->n_steps ? es->n_steps : 1, sizeof(*held));
  if (!known || !held || !absent)
    err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory creating ensemble '%s'", model->name);
  for (uint32_t i = 0; !err && i < model->n_inputs; i++) {
    uint32_t t = tensor_of(es, model->inputs[i].name);
    if (t != UINT32_MAX) known[t] = known_of(&model->inputs[i], model, true);
  }
  for (uint32_t i = 0; !err && i < model->n_outputs; i++) {
    uint32_t t = tensor_of(es, model->outputs[i].name);
    if (t != UINT32_MAX) known[t] = known_of(&model->outputs[i], model, true);
  }
  for (uint32_t s = 0; s < es->n_steps && !err; s++) {
    TRITONBACKEND_Model *cm = NULL;
    TRITONSERVER_Error *e = steps->get_model(steps->ctx, model->ns, es->steps[s].model, es->steps[s].version, &cm);
    if (e) {
      TRITONSERVER_ErrorDelete(e);
      e = NULL;
      /* Loaded, but not in the version the step asks for: Triton says so. */
      TRITONBACKEND_Model *any = NULL;
      if (es->steps[s].version > 0 &&
          (e = steps->get_model(steps->ctx, model->ns, es->steps[s].model, -1, &any)) == NULL) {
        nrd_model_unref(any);
        err = nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                            "ensemble '%s' depends on '%s' whose required version %" PRId64 " is not loaded "
                            "(step %u, field 'model_version')",
                            model->name, es->steps[s].model, es->steps[s].version, s);
        continue;
      }
      if (e) TRITONSERVER_ErrorDelete(e);
      if (absent) absent[n_absent++] = es->steps[s].model;
      continue;
    }
    es->steps[s].decoupled = cm->decoupled;
    held[s] = cm;
    err = check_step(model, es, &es->steps[s], cm, known);
    if (!err) err = take_labels(model, es, &es->steps[s], cm);
  }
  for (uint32_t s = 0; held && s < es->n_steps; s++)
    if (held[s]) nrd_model_unref(held[s]);
  free(held);
  free(known);
  if (!err && n_absent) {
    /* Sorted, each name once, as Triton's set of missing names prints. */
    qsort(absent, n_absent, sizeof *absent, by_name);
    for (uint32_t i = 0; i < n_absent; i++)
      if ((i == 0 || strcmp(absent[i], absent[i - 1])) && used < sizeof missing)
        used += (size_t)snprintf(missing + used, sizeof missing - used, "%s%s", used ? ", " : "", absent[i]);
    err = nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                        "ensemble %s contains models that are not available or ambiguous: %s", model->name, missing);
  }
  free(absent);
  if (!err) err = plan_iterations(model, es);
  if (err) {
    plan_free(es);
    pthread_cond_destroy(&es->slots_freed);
    pthread_mutex_destroy(&es->slots_mu);
    free(es);
    return err;
  }
  *decoupled = es->decoupled;
  *out = &es->base;
  return NULL;
}
