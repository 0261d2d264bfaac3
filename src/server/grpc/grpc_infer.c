/* ModelInfer (unary) and ModelStreamInfer (bidirectional streaming).
 *
 * A request message is unpacked once; the TRITONSERVER request points into
 * the unpacked message (raw_input_contents and same-width typed contents
 * are not copied again). The context lives until both the request release
 * callback and the final response callback ran. A unary call's response
 * is posted to the call's loop and serialized there (as DESIGN.md has
 * it), its outputs carved from the context's arena when they fit; streamed
 * responses are serialized on the thread that delivers them, so a stream's
 * many responses do not pile work onto the loop.
 *
 * Cancellation: every call keeps the list of its contexts in flight under a
 * mutex; when the stream goes away (RST_STREAM, deadline, connection lost)
 * the loop cancels each of them in the core. A context leaves the list
 * before its request is deleted, so cancel never sees a freed request. */
#include "grpc_infer.h"
#include "error_ignore.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "classify.h"
#include "fmt.h"
#include "header_forward.h"
#include "grpc_pack.h"
#include "grpc_unpack.h"
#include "grpc_service.pb-c.h"
#include "response_output.h"

typedef struct infer_ctx infer_ctx;

/* A requested output the client wants written into a shared memory region. */
typedef struct shm_out {
  const char *name; /* output name, in the unpacked request */
  const char *region; /* region name, in the unpacked request */
  uint64_t offset, byte_size;
  nrd_srv_shm_region *ref;
  void *addr;
} shm_out;

/* A requested output to be replaced by its top k classes. */
typedef struct cls_out {
  const char *name; /* output name, in the unpacked request */
  uint32_t k; /* >= 1 */
} cls_out;

/* Per-call state (both methods). */
typedef struct call_state {
  pthread_mutex_t mu;
  infer_ctx *inflight; /* guarded by mu */
  uint64_t paced_until_us; /* guarded by mu: TRITONSERVER_DELAY_GRPC_RESPONSE's last due time */
  unsigned active; /* loop only: requests whose final event has not run */
  bool client_done; /* loop only: the client half-closed (stream) */
} call_state;

/* A response posted to the loop. */
typedef struct resp_event {
  nrd_srv_grpc_event base;
  uint8_t *buf; /* framed message or NULL */
  size_t len;
  int status; /* unary errors */
  char *msg;
  bool final;
  bool streaming;
  /* The final response's reference to its context, dropped on the loop:
   * the context and its request were made there, and freeing them on the
   * thread that made them keeps malloc's per-thread caches warm. */
  infer_ctx *ctx;
  nrd_srv_trace *trace; /* the request's (lives until its final event ran); NULL: untraced */
  /* A unary call's final response, serialized and deleted on the loop:
   * its buffers are then made and freed by one thread, which keeps
   * malloc's per-thread caches warm (a buffer made on a core thread and
   * freed on the loop never comes back to the thread that made it). */
  TRITONSERVER_InferenceResponse *resp;
  bool embedded; /* lives in its context (ctx->final_ev): not freed alone */
} resp_event;

struct infer_ctx {
  nrd_srv_grpc_call *call; /* a reference */
  call_state *cs;
  Inference__ModelInferRequest *req;
  TRITONSERVER_InferenceRequest *irq;
  bool streaming;
  bool empty_final;
  atomic_int pending; /* release + final response */
  void **bufs;
  size_t n_bufs;
  /* Shared memory: inputs read in place and outputs written in place hold
   * a region reference until the context is freed (after the request was
   * released and the final response handled). Set on the loop before the
   * request is sent, read-only afterwards. */
  nrd_srv_shm_region **in_regions;
  size_t n_in_regions;
  struct shm_out *souts;
  size_t n_souts;
  cls_out *cls; /* classification outputs; set like souts */
  size_t n_cls;
  infer_ctx *prev, *next; /* in cs->inflight */
  /* The unpacked request lives in a bump arena allocated with the context
   * (one malloc for both); overflow blocks are chained in `extra`. */
  ProtobufCAllocator pa;
  uint8_t *arena;
  size_t used, cap;
  void *extra;
  /* Unary calls: outputs are carved downward from the arena's end while
   * they fit (core threads, atomically); the arena's bottom part is the
   * unpacked request, complete before the request reaches the core. */
  atomic_size_t out_top;
  nrd_srv_trace *trace; /* NULL: not traced */
  resp_event final_ev; /* unary: the final response's event, posted without a malloc */
};

static void *arena_alloc(void *data, size_t size) {
  infer_ctx *ctx = data;
  size = (size + 15) & ~(size_t)15;
  if (ctx->cap - ctx->used >= size) {
    void *p = ctx->arena + ctx->used;
    ctx->used += size;
    return p;
  }
  void **blk = malloc(sizeof(void *) * 2 + size);
  if (blk == NULL) return NULL;
  blk[0] = ctx->extra;
  ctx->extra = blk;
  return blk + 2;
}

static void arena_free(void *data, void *p) {
  (void)data;
  (void)p; /* released all at once with the context */
}

/* Room for an output at the arena's top, or NULL when it does not fit. */
static void *arena_carve(infer_ctx *ctx, size_t size) {
  if (size > ctx->cap) return NULL;
  size_t need = size ? (size + 15) & ~(size_t)15 : 16;
  size_t top = atomic_load_explicit(&ctx->out_top, memory_order_relaxed);
  do {
    if (top < ctx->used || top - ctx->used < need) return NULL;
  } while (!atomic_compare_exchange_weak_explicit(&ctx->out_top, &top, top - need, memory_order_relaxed,
                                                  memory_order_relaxed));
  return ctx->arena + top - need;
}

static TRITONSERVER_ResponseAllocator *g_allocator; /* set once by init */

/* ---- allocator ---------------------------------------------------------- */

/* userp is the request's infer_ctx. An output the request placed in shared
 * memory is handed the region's bytes, and a unary call's output that fits
 * in its arena a piece of it (buffer_userp NULL: nothing to free); any
 * other output gets a malloc'ed buffer (buffer_userp = it). */
static TRITONSERVER_Error *alloc_fn(TRITONSERVER_ResponseAllocator *a, const char *name, size_t byte_size,
                                    TRITONSERVER_MemoryType mt, int64_t mt_id, void *userp, void **buffer,
                                    void **buffer_userp, TRITONSERVER_MemoryType *amt, int64_t *amt_id) {
  (void)a;
  (void)mt;
  (void)mt_id;
  infer_ctx *ctx = userp;
  *buffer = NULL;
  *buffer_userp = NULL;
  *amt = TRITONSERVER_MEMORY_CPU;
  *amt_id = 0;
  for (size_t i = 0; ctx && i < ctx->n_souts; i++) {
    const shm_out *so = &ctx->souts[i];
    if (strcmp(so->name, name) != 0) continue;
    TRITONSERVER_Error *err = nrd_srv_shm_check_output(name, so->byte_size, byte_size);
    if (err) return err;
    *buffer = so->addr;
    nrd_srv_shm_region_memory(so->ref, amt, amt_id);
    return NULL;
  }
  if (ctx && !ctx->streaming && (*buffer = arena_carve(ctx, byte_size)) != NULL) return NULL;
  *buffer = malloc(byte_size ? byte_size : 1);
  *buffer_userp = *buffer;
  if (*buffer == NULL) return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory for an output");
  return NULL;
}

static TRITONSERVER_Error *release_fn(TRITONSERVER_ResponseAllocator *a, void *buffer, void *buffer_userp,
                                      size_t byte_size, TRITONSERVER_MemoryType mt, int64_t mt_id) {
  (void)a;
  (void)buffer;
  (void)byte_size;
  (void)mt;
  (void)mt_id;
  free(buffer_userp); /* NULL for shared memory */
  return NULL;
}

/* Where alloc_fn will put an output: in its shared memory region's memory
 * (GPU for a CUDA region) when the request bound it to one, else CPU. */
static TRITONSERVER_Error *query_fn(TRITONSERVER_ResponseAllocator *a, void *userp, const char *name,
                                    size_t *byte_size, TRITONSERVER_MemoryType *mt, int64_t *mt_id) {
  const infer_ctx *ctx = userp;
  for (size_t i = 0; ctx && name && i < ctx->n_souts; i++) {
    if (strcmp(ctx->souts[i].name, name) != 0) continue;
    nrd_srv_shm_region_memory(ctx->souts[i].ref, mt, mt_id);
    return NULL;
  }
  return nrd_srv_output_query_cpu(a, userp, name, byte_size, mt, mt_id);
}

TRITONSERVER_Error *nrd_srv_grpc_infer_init(void) {
  if (g_allocator) return NULL;
  TRITONSERVER_Error *err = TRITONSERVER_ResponseAllocatorNew(&g_allocator, alloc_fn, release_fn, NULL);
  if (err == NULL) err = TRITONSERVER_ResponseAllocatorSetQueryFunction(g_allocator, query_fn);
  return err;
}

void nrd_srv_grpc_infer_fini(void) {
  if (g_allocator) {
    NRD_SRV_IGNORE(TRITONSERVER_ResponseAllocatorDelete(g_allocator), "deleting the response allocator");
    g_allocator = NULL;
  }
}

/* ---- call state ------------------------------------------------------------ */

static void call_state_free(void *p) {
  call_state *cs = p;
  pthread_mutex_destroy(&cs->mu);
  free(cs);
}

static call_state *get_state(nrd_srv_grpc_call *call) {
  call_state *cs = nrd_srv_grpc_call_state(call);
  if (cs) return cs;
  cs = malloc(sizeof *cs); /* not calloc, which skips malloc's per-thread cache */
  if (cs == NULL) return NULL;
  memset(cs, 0, sizeof *cs);
  pthread_mutex_init(&cs->mu, NULL);
  nrd_srv_grpc_call_set_state(call, cs, call_state_free);
  return cs;
}

static void on_cancel(nrd_srv_grpc_call *call) {
  call_state *cs = nrd_srv_grpc_call_state(call);
  if (cs == NULL) return;
  pthread_mutex_lock(&cs->mu);
  for (infer_ctx *c = cs->inflight; c; c = c->next) {
    NRD_SRV_IGNORE(TRITONSERVER_InferenceRequestCancel(c->irq), "cancelling a request the core may have finished");
  }
  pthread_mutex_unlock(&cs->mu);
}

/* ---- context ------------------------------------------------------------------ */

static void ctx_free(infer_ctx *ctx) {
  if (ctx->cs) {
    pthread_mutex_lock(&ctx->cs->mu);
    if (ctx->prev)
      ctx->prev->next = ctx->next;
    else
      ctx->cs->inflight = ctx->next;
    if (ctx->next) ctx->next->prev = ctx->prev;
    pthread_mutex_unlock(&ctx->cs->mu);
  }
  if (ctx->irq) {
    NRD_SRV_IGNORE(TRITONSERVER_InferenceRequestDelete(ctx->irq), "deleting a request");
  }
  for (size_t i = 0; i < ctx->n_bufs; i++) free(ctx->bufs[i]);
  free(ctx->bufs);
  for (size_t i = 0; i < ctx->n_in_regions; i++) nrd_srv_shm_release(ctx->in_regions[i]);
  for (size_t i = 0; i < ctx->n_souts; i++) nrd_srv_shm_release(ctx->souts[i].ref);
  for (void **blk = ctx->extra; blk;) {
    void **next = blk[0];
    free(blk);
    blk = next;
  }
  nrd_srv_trace_done(ctx->trace);
  nrd_srv_grpc_call_unref(ctx->call);
  free(ctx);
}

static void ctx_put(infer_ctx *ctx) {
  if (atomic_fetch_sub_explicit(&ctx->pending, 1, memory_order_acq_rel) == 1) ctx_free(ctx);
}

static void *ctx_buf(infer_ctx *ctx, size_t size) {
  void **nb = realloc(ctx->bufs, (ctx->n_bufs + 1) * sizeof *nb);
  if (nb == NULL) return NULL;
  ctx->bufs = nb;
  void *p = malloc(size ? size : 1);
  if (p == NULL) return NULL;
  ctx->bufs[ctx->n_bufs++] = p;
  return p;
}

/* ---- responses (core threads) ------------------------------------------------ */

static void event_fill(infer_ctx *ctx, resp_event *ev, TRITONSERVER_InferenceResponse *resp);

static void resp_event_run(nrd_srv_grpc_event *base, bool open) {
  resp_event *ev = (resp_event *)base;
  nrd_srv_grpc_call *call = base->call;
  if (ev->resp) {
    if (open) {
      event_fill(ev->ctx, ev, ev->resp);
    } else {
      NRD_SRV_IGNORE(TRITONSERVER_InferenceResponseDelete(ev->resp), "deleting a response");
    }
    ev->resp = NULL;
  }
  if (open) {
    if (ev->streaming) {
      if (ev->buf) {
        nrd_srv_trace_mark(ev->trace, "GRPC_SEND_START", 0);
        nrd_srv_grpc_call_send_framed(call, ev->buf, ev->len);
        nrd_srv_trace_mark(ev->trace, "GRPC_SEND_END", 0);
        ev->buf = NULL;
      }
    } else if (ev->buf) {
      nrd_srv_trace_mark(ev->trace, "GRPC_SEND_START", 0);
      nrd_srv_grpc_call_send_framed(call, ev->buf, ev->len);
      ev->buf = NULL;
      nrd_srv_grpc_call_finish(call, NRD_GRPC_OK, NULL);
      nrd_srv_trace_mark(ev->trace, "GRPC_SEND_END", 0);
    } else if (ev->msg) {
      nrd_srv_grpc_call_finish(call, ev->status, ev->msg);
    } else if (ev->final) {
      nrd_srv_grpc_call_finish(call, NRD_GRPC_INTERNAL, "the model sent no response");
    }
  }
  if (ev->final) {
    call_state *cs = nrd_srv_grpc_call_state(call);
    if (cs && cs->active > 0) cs->active--;
    if (open && ev->streaming && cs && cs->active == 0 && cs->client_done)
      nrd_srv_grpc_call_finish(call, NRD_GRPC_OK, NULL);
  }
  free(ev->buf);
  free(ev->msg);
  infer_ctx *ctx = ev->ctx;
  if (!ev->embedded) free(ev);
  if (ctx) ctx_put(ctx); /* last: an embedded event goes with it */
}

static void set_param(Inference__ModelInferResponse__ParametersEntry *e, Inference__InferParameter *v,
                      const char *key) {
  inference__model_infer_response__parameters_entry__init(e);
  inference__infer_parameter__init(v);
  e->key = (char *)key;
  e->value = v;
}

static uint32_t class_count(const infer_ctx *ctx, const char *name) {
  for (size_t i = 0; i < ctx->n_cls; i++)
    if (strcmp(ctx->cls[i].name, name) == 0) return ctx->cls[i].k;
  return 0;
}

/* Serializes a successful response (resp may be NULL: empty final).
 * Returns the framed message, or NULL: then *errp is the reason (caller
 * owns it) or NULL when memory ran out. */
static uint8_t *build_response(infer_ctx *ctx, TRITONSERVER_InferenceResponse *resp, bool final, size_t *len,
                               TRITONSERVER_Error **errp) {
  *errp = NULL;
  Inference__ModelInferResponse r = INFERENCE__MODEL_INFER_RESPONSE__INIT;
  char version[24] = "";
  const char *model_name = ctx->req->model_name;
  int64_t model_version = -1;
  uint32_t n_out = 0, n_par = 0;
  if (resp) {
    NRD_SRV_IGNORE(TRITONSERVER_InferenceResponseModel(resp, &model_name, &model_version),
                   "a response without its model name");
    TRITONSERVER_Error *e = TRITONSERVER_InferenceResponseOutputCount(resp, &n_out);
    if (e) {
      TRITONSERVER_ErrorDelete(e);
      n_out = 0;
    }
    e = TRITONSERVER_InferenceResponseParameterCount(resp, &n_par);
    if (e) {
      TRITONSERVER_ErrorDelete(e);
      n_par = 0;
    }
  }
  if (model_version >= 0)
    version[nrd_srv_fmt_i64(version, model_version)] = '\0';
  else if (ctx->req->model_version)
    snprintf(version, sizeof version, "%s", ctx->req->model_version);
  r.model_name = (char *)(model_name ? model_name : "");
  r.model_version = version;
  r.id = ctx->req->id;

  size_t n_params = n_par + (ctx->streaming ? 1 : 0);
  /* Small responses (the common case) use the stack; larger ones the heap. */
  enum { SMALL = 8 };
  Inference__ModelInferResponse__InferOutputTensor outs_s[SMALL], *outp_s[SMALL];
  ProtobufCBinaryData raw_s[SMALL];
  Inference__ModelInferResponse__ParametersEntry pe_s[SMALL], *pep_s[SMALL];
  Inference__InferParameter pv_s[SMALL];
  bool big_out = n_out > SMALL, big_par = n_params > SMALL;
  Inference__ModelInferResponse__InferOutputTensor *outs = big_out ? calloc(n_out, sizeof *outs) : outs_s;
  Inference__ModelInferResponse__InferOutputTensor **outp = big_out ? calloc(n_out, sizeof *outp) : outp_s;
  ProtobufCBinaryData *raw = big_out ? calloc(n_out, sizeof *raw) : raw_s;
  Inference__ModelInferResponse__ParametersEntry *pe = big_par ? calloc(n_params, sizeof *pe) : pe_s;
  Inference__ModelInferResponse__ParametersEntry **pep = big_par ? calloc(n_params, sizeof *pep) : pep_s;
  Inference__InferParameter *pv = big_par ? calloc(n_params, sizeof *pv) : pv_s;
  /* Classified outputs: their BYTES tensors, freed once packed. */
  nrd_srv_classes *classes = ctx->n_cls > 0 && n_out > 0 ? calloc(n_out, sizeof *classes) : NULL;
  uint8_t *buf = NULL;
  if (!outs || !outp || !raw || !pe || !pep || !pv) goto done;
  if (ctx->n_cls > 0 && n_out > 0 && classes == NULL) goto done;
  for (uint32_t i = 0; i < n_out; i++) {
    nrd_srv_output o;
    TRITONSERVER_Error *e = nrd_srv_output_get(resp, i, &o);
    if (e) {
      TRITONSERVER_ErrorDelete(e);
      goto done;
    }
    inference__model_infer_response__infer_output_tensor__init(&outs[i]);
    outs[i].name = (char *)o.name;
    outs[i].datatype = (char *)TRITONSERVER_DataTypeString(o.datatype);
    outs[i].n_shape = (size_t)o.dims;
    outs[i].shape = (int64_t *)o.shape;
    outp[i] = &outs[i];
    raw[i].len = o.byte_size;
    raw[i].data = (uint8_t *)o.base;
    uint32_t k = ctx->n_cls > 0 ? class_count(ctx, o.name) : 0;
    if (k > 0) {
      e = nrd_srv_classify(nrd_srv_grpc_call_server(ctx->call), resp, i, k, &classes[i]);
      if (e) {
        *errp = e;
        goto done;
      }
      outs[i].datatype = (char *)TRITONSERVER_DataTypeString(TRITONSERVER_TYPE_BYTES);
      outs[i].n_shape = (size_t)classes[i].dims;
      outs[i].shape = classes[i].shape;
      raw[i].len = classes[i].size;
      raw[i].data = (uint8_t *)classes[i].data;
    }
    const shm_out *so = NULL;
    for (size_t k = 0; k < ctx->n_souts && so == NULL; k++)
      if (strcmp(ctx->souts[k].name, o.name) == 0) so = &ctx->souts[k];
    if (so) {
      /* Written to shared memory: an empty raw_output_contents entry keeps
       * entries aligned with outputs, and the output carries no parameters
       * (Triton's layout; the client knows where it asked for it). */
      raw[i].len = 0;
      raw[i].data = NULL;
    }
  }
  r.n_outputs = n_out;
  r.outputs = outp;
  r.n_raw_output_contents = n_out;
  r.raw_output_contents = raw;
  size_t np = 0;
  for (uint32_t i = 0; i < n_par; i++) {
    const char *name;
    TRITONSERVER_ParameterType type;
    const void *v;
    TRITONSERVER_Error *e = TRITONSERVER_InferenceResponseParameter(resp, i, &name, &type, &v);
    if (e) {
      TRITONSERVER_ErrorDelete(e);
      continue;
    }
    set_param(&pe[np], &pv[np], name);
    switch (type) {
      case TRITONSERVER_PARAMETER_STRING:
        pv[np].parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM;
        pv[np].string_param = (char *)v;
        break;
      case TRITONSERVER_PARAMETER_INT:
        pv[np].parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM;
        pv[np].int64_param = *(const int64_t *)v;
        break;
      case TRITONSERVER_PARAMETER_BOOL:
        pv[np].parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM;
        pv[np].bool_param = *(const bool *)v;
        break;
      case TRITONSERVER_PARAMETER_DOUBLE:
        pv[np].parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_DOUBLE_PARAM;
        pv[np].double_param = *(const double *)v;
        break;
      default: continue;
    }
    pep[np] = &pe[np];
    np++;
  }
  if (ctx->streaming) {
    set_param(&pe[np], &pv[np], "triton_final_response");
    pv[np].parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM;
    pv[np].bool_param = final;
    pep[np] = &pe[np];
    np++;
  }
  r.n_parameters = np;
  r.parameters = pep;
  buf = nrd_srv_grpc_pack_infer_response(&r, ctx->streaming, NULL, len);
done:
  if (classes)
    for (uint32_t i = 0; i < n_out; i++) free(classes[i].data);
  free(classes);
  if (big_out) {
    free(outs);
    free(outp);
    free(raw);
  }
  if (big_par) {
    free(pe);
    free(pep);
    free(pv);
  }
  return buf;
}

/* A streamed error: error_message plus the request's identity. */
static uint8_t *build_stream_error(infer_ctx *ctx, const char *msg, size_t *len) {
  Inference__ModelInferResponse r = INFERENCE__MODEL_INFER_RESPONSE__INIT;
  r.model_name = ctx->req->model_name;
  r.model_version = ctx->req->model_version;
  r.id = ctx->req->id;
  return nrd_srv_grpc_pack_infer_response(&r, 1, msg, len);
}

/* Serializes resp into ev (the framed message, or the status a unary call
 * ends with) and deletes it; resp NULL: a flags-only final, sent as an
 * empty response when a stream asked for one. */
static void event_fill(infer_ctx *ctx, resp_event *ev, TRITONSERVER_InferenceResponse *resp) {
  if (resp) {
    TRITONSERVER_Error *rerr = TRITONSERVER_InferenceResponseError(resp);
    if (rerr) {
      if (ctx->streaming) {
        ev->buf = build_stream_error(ctx, TRITONSERVER_ErrorMessage(rerr), &ev->len);
      } else {
        ev->status = nrd_srv_grpc_status_from_code(TRITONSERVER_ErrorCode(rerr));
        ev->msg = strdup(TRITONSERVER_ErrorMessage(rerr));
      }
      /* The core hands out a copy the caller owns (as Triton does). */
      TRITONSERVER_ErrorDelete(rerr);
    } else {
      TRITONSERVER_Error *berr = NULL;
      ev->buf = build_response(ctx, resp, ev->final, &ev->len, &berr);
      if (ev->buf == NULL) {
        const char *m = berr ? TRITONSERVER_ErrorMessage(berr) : "cannot serialize the response";
        if (ctx->streaming) {
          ev->buf = build_stream_error(ctx, m, &ev->len);
        } else {
          ev->status = berr ? nrd_srv_grpc_status_from_code(TRITONSERVER_ErrorCode(berr)) : NRD_GRPC_INTERNAL;
          ev->msg = strdup(m);
        }
      }
      if (berr) TRITONSERVER_ErrorDelete(berr);
    }
    NRD_SRV_IGNORE(TRITONSERVER_InferenceResponseDelete(resp), "deleting a response");
  } else if (ev->final && ctx->streaming && ctx->empty_final) {
    TRITONSERVER_Error *berr = NULL;
    ev->buf = build_response(ctx, NULL, true, &ev->len, &berr);
    NRD_SRV_IGNORE(berr, "building an empty final response"); /* none without outputs */
  }
  if (ev->buf) ev->buf = nrd_srv_grpc_call_compress(ctx->call, ev->buf, &ev->len);
}

/* Triton's test hook TRITONSERVER_DELAY_GRPC_ENQUEUE: the thread that
 * delivered a response for a cancelled call sleeps before handing the call
 * back, as Triton's does before it re-queues the call's state. */
static void hold_thread(uint64_t us) {
  struct timespec ts = {(time_t)(us / 1000000u), (long)(us % 1000000u) * 1000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* Triton's test hook TRITONSERVER_DELAY_GRPC_RESPONSE: when a stream's
 * next event may run, `us` after the later of now and the one before it
 * (Triton sleeps that long before each write to a stream). Any thread. */
static uint64_t stream_pace(infer_ctx *ctx, uint64_t us) {
  uint64_t now = nrd_srv_grpc_now_us();
  pthread_mutex_lock(&ctx->cs->mu);
  uint64_t due = (ctx->cs->paced_until_us > now ? ctx->cs->paced_until_us : now) + us;
  ctx->cs->paced_until_us = due;
  pthread_mutex_unlock(&ctx->cs->mu);
  return due;
}

static void on_response(TRITONSERVER_InferenceResponse *resp, const uint32_t flags, void *userp) {
  infer_ctx *ctx = userp;
  bool final = (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) != 0;
  const nrd_srv_grpc_delays *delays = nrd_srv_grpc_call_delays(ctx->call);
  if (delays->enqueue_us && final && !ctx->streaming && nrd_srv_grpc_call_cancelled(ctx->call))
    hold_thread(delays->enqueue_us);
  /* A unary call has one final response: its event lives in the context. */
  resp_event *ev = final && !ctx->streaming ? &ctx->final_ev : calloc(1, sizeof *ev);
  if (ev == NULL) {
    /* Nothing can be posted; the call fails when its stream closes. */
    if (resp) TRITONSERVER_InferenceResponseDelete(resp);
    if (final) ctx_put(ctx);
    return;
  }
  ev->embedded = ev == &ctx->final_ev;
  ev->final = final;
  ev->streaming = ctx->streaming;
  ev->trace = ctx->trace;
  if (resp) nrd_srv_trace_mark(ctx->trace, "INFER_RESPONSE_COMPLETE", 0);
  /* Streamed responses are serialized (and compressed) here, on the core
   * thread, so one stream's many responses do not queue work on the loop;
   * a unary call's final response is serialized on the loop (see resp). */
  if (ev->embedded)
    ev->resp = resp;
  else
    event_fill(ctx, ev, resp);
  nrd_srv_grpc_call_ref(ctx->call);
  ev->base.call = ctx->call;
  ev->base.run = resp_event_run;
  if (final) ev->ctx = ctx;
  if (ctx->streaming && delays->response_us)
    nrd_srv_grpc_call_post_at(&ev->base, stream_pace(ctx, delays->response_us));
  else
    nrd_srv_grpc_call_post(&ev->base);
}

static void on_release(TRITONSERVER_InferenceRequest *irq, const uint32_t flags, void *userp) {
  (void)irq;
  if (flags & TRITONSERVER_REQUEST_RELEASE_ALL) ctx_put(userp);
}

/* ---- building the request (loop) --------------------------------------------- */

/* A new error with a printf-style message (cut at 511 bytes); the caller
 * owns it. */
static TRITONSERVER_Error *errf(TRITONSERVER_Error_Code code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static TRITONSERVER_Error *errf(TRITONSERVER_Error_Code code, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return TRITONSERVER_ErrorNew(code, msg);
}

static TRITONSERVER_Error *parse_version(const char *s, int64_t *v) {
  *v = -1;
  if (s == NULL || s[0] == '\0') return NULL;
  char *end = NULL;
  errno = 0;
  long long x = strtoll(s, &end, 10);
  if (errno || *end != '\0' || x < 0)
    return errf(TRITONSERVER_ERROR_INVALID_ARG, "failed to parse model version '%s'", s);
  *v = x;
  return NULL;
}

/* Typed contents -> the tensor's binary layout. */
static TRITONSERVER_Error *typed_input(infer_ctx *ctx, const Inference__ModelInferRequest__InferInputTensor *in,
                                       TRITONSERVER_DataType dt, const void **data, size_t *size) {
  const Inference__InferTensorContents *c = in->contents;
  switch (dt) {
    case TRITONSERVER_TYPE_BOOL: {
      uint8_t *b = ctx_buf(ctx, c->n_bool_contents);
      if (b == NULL) goto oom;
      for (size_t i = 0; i < c->n_bool_contents; i++) b[i] = c->bool_contents[i] ? 1 : 0;
      *data = b;
      *size = c->n_bool_contents;
      return NULL;
    }
    case TRITONSERVER_TYPE_INT8:
    case TRITONSERVER_TYPE_INT16: {
      size_t w = dt == TRITONSERVER_TYPE_INT8 ? 1 : 2;
      uint8_t *b = ctx_buf(ctx, c->n_int_contents * w);
      if (b == NULL) goto oom;
      for (size_t i = 0; i < c->n_int_contents; i++) {
        if (w == 1)
          ((int8_t *)b)[i] = (int8_t)c->int_contents[i];
        else
          ((int16_t *)b)[i] = (int16_t)c->int_contents[i];
      }
      *data = b;
      *size = c->n_int_contents * w;
      return NULL;
    }
    case TRITONSERVER_TYPE_UINT8:
    case TRITONSERVER_TYPE_UINT16: {
      size_t w = dt == TRITONSERVER_TYPE_UINT8 ? 1 : 2;
      uint8_t *b = ctx_buf(ctx, c->n_uint_contents * w);
      if (b == NULL) goto oom;
      for (size_t i = 0; i < c->n_uint_contents; i++) {
        if (w == 1)
          b[i] = (uint8_t)c->uint_contents[i];
        else
          ((uint16_t *)b)[i] = (uint16_t)c->uint_contents[i];
      }
      *data = b;
      *size = c->n_uint_contents * w;
      return NULL;
    }
    case TRITONSERVER_TYPE_INT32:
      *data = c->int_contents;
      *size = c->n_int_contents * 4;
      return NULL;
    case TRITONSERVER_TYPE_UINT32:
      *data = c->uint_contents;
      *size = c->n_uint_contents * 4;
      return NULL;
    case TRITONSERVER_TYPE_INT64:
      *data = c->int64_contents;
      *size = c->n_int64_contents * 8;
      return NULL;
    case TRITONSERVER_TYPE_UINT64:
      *data = c->uint64_contents;
      *size = c->n_uint64_contents * 8;
      return NULL;
    case TRITONSERVER_TYPE_FP32:
      *data = c->fp32_contents;
      *size = c->n_fp32_contents * 4;
      return NULL;
    case TRITONSERVER_TYPE_FP64:
      *data = c->fp64_contents;
      *size = c->n_fp64_contents * 8;
      return NULL;
    case TRITONSERVER_TYPE_BYTES: {
      size_t total = 0;
      for (size_t i = 0; i < c->n_bytes_contents; i++) total += 4 + c->bytes_contents[i].len;
      uint8_t *b = ctx_buf(ctx, total);
      if (b == NULL) goto oom;
      size_t off = 0;
      for (size_t i = 0; i < c->n_bytes_contents; i++) {
        uint32_t l = (uint32_t)c->bytes_contents[i].len;
        b[off] = (uint8_t)l;
        b[off + 1] = (uint8_t)(l >> 8);
        b[off + 2] = (uint8_t)(l >> 16);
        b[off + 3] = (uint8_t)(l >> 24);
        if (l) memcpy(b + off + 4, c->bytes_contents[i].data, l);
        off += 4 + l;
      }
      *data = b;
      *size = total;
      return NULL;
    }
    default:
      return errf(TRITONSERVER_ERROR_INVALID_ARG, "input '%s': datatype %s must be sent in raw_input_contents",
                  in->name, in->datatype);
  }
oom:
  return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory");
}

/* The shared memory parameters of one tensor. */
typedef struct shm_ref {
  bool used;
  const char *region;
  uint64_t offset, byte_size;
} shm_ref;

static TRITONSERVER_Error *param_u64(const Inference__InferParameter *p, const char *what, const char *tensor,
                                     const char *key, uint64_t *out) {
  int c = p ? (int)p->parameter_choice_case : 0;
  if (c == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM && p->int64_param >= 0) {
    *out = (uint64_t)p->int64_param;
    return NULL;
  }
  if (c == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_UINT64_PARAM) {
    *out = p->uint64_param;
    return NULL;
  }
  char msg[400];
  snprintf(msg, sizeof msg, "%s '%.100s': '%s' must be a non-negative int64_param", what, tensor, key);
  return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, msg);
}

/* Reads shared_memory_region / _byte_size / _offset (any of them may be
 * NULL when absent) of input or output `tensor`. */
static TRITONSERVER_Error *parse_shm(const char *what, const char *tensor, const Inference__InferParameter *region,
                                     const Inference__InferParameter *size, const Inference__InferParameter *offset,
                                     shm_ref *out) {
  memset(out, 0, sizeof *out);
  char msg[400];
  if (region == NULL && size == NULL && offset == NULL) return NULL;
  if (region == NULL) {
    snprintf(msg, sizeof msg, "%s '%.100s': '%s' given without 'shared_memory_region'", what, tensor,
             size ? "shared_memory_byte_size" : "shared_memory_offset");
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, msg);
  }
  if (region->parameter_choice_case != INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM) {
    snprintf(msg, sizeof msg, "%s '%.100s': 'shared_memory_region' must be a string_param", what, tensor);
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, msg);
  }
  if (size == NULL) {
    snprintf(msg, sizeof msg, "%s '%.100s': 'shared_memory_byte_size' must be given with 'shared_memory_region'", what,
             tensor);
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, msg);
  }
  TRITONSERVER_Error *err = param_u64(size, what, tensor, "shared_memory_byte_size", &out->byte_size);
  if (err == NULL && offset) err = param_u64(offset, what, tensor, "shared_memory_offset", &out->offset);
  if (err) return err;
  out->used = true;
  out->region = region->string_param;
  return NULL;
}

/* The shared-memory parameters of one tensor: region, byte size, offset. */
typedef struct shm_params {
  const Inference__InferParameter *region, *byte_size, *offset;
} shm_params;

/* Files parameter key = v into p if it is one of the shared-memory three
 * (inputs and outputs carry them in different entry types). */
static void shm_param(shm_params *p, const char *key, const Inference__InferParameter *v) {
  if (strcmp(key, "shared_memory_region") == 0)
    p->region = v;
  else if (strcmp(key, "shared_memory_byte_size") == 0)
    p->byte_size = v;
  else if (strcmp(key, "shared_memory_offset") == 0)
    p->offset = v;
}

static TRITONSERVER_Error *input_shm(const Inference__ModelInferRequest__InferInputTensor *in, shm_ref *out) {
  shm_params p = {NULL, NULL, NULL};
  for (size_t i = 0; i < in->n_parameters; i++) shm_param(&p, in->parameters[i]->key, in->parameters[i]->value);
  return parse_shm("input", in->name, p.region, p.byte_size, p.offset, out);
}

static TRITONSERVER_Error *output_shm(const Inference__ModelInferRequest__InferRequestedOutputTensor *t, shm_ref *out) {
  shm_params p = {NULL, NULL, NULL};
  for (size_t i = 0; i < t->n_parameters; i++) shm_param(&p, t->parameters[i]->key, t->parameters[i]->value);
  return parse_shm("output", t->name, p.region, p.byte_size, p.offset, out);
}

/* The "classification" parameter of a requested output: *k = 0 when
 * absent, else the class count (int64_param >= 1, as Triton requires;
 * counts past UINT32_MAX mean "every class"). */
static TRITONSERVER_Error *output_class(const Inference__ModelInferRequest__InferRequestedOutputTensor *t,
                                        uint32_t *k) {
  *k = 0;
  const Inference__InferParameter *p = NULL;
  for (size_t i = 0; i < t->n_parameters; i++)
    if (strcmp(t->parameters[i]->key, "classification") == 0) p = t->parameters[i]->value;
  if (p == NULL) return NULL;
  char msg[400];
  if (p->parameter_choice_case != INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM) {
    snprintf(msg, sizeof msg,
             "invalid value type for 'classification' parameter of output '%.100s', expected "
             "int64_param",
             t->name);
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, msg);
  }
  if (p->int64_param <= 0) {
    snprintf(msg, sizeof msg,
             "invalid value for 'classification' parameter of output '%.100s', expected >= 1 (got "
             "%lld)",
             t->name, (long long)p->int64_param);
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, msg);
  }
  *k = p->int64_param > UINT32_MAX ? UINT32_MAX : (uint32_t)p->int64_param;
  return NULL;
}

/* Inputs: raw_input_contents holds one entry per input NOT in shared
 * memory, in order (as tritonclient sends them); shared memory inputs are
 * read in place from the mapping. Requested outputs in shared memory get
 * their region looked up (and held) now, for the allocator. */
static TRITONSERVER_Error *add_inputs(infer_ctx *ctx, nrd_srv_shm *shm) {
  Inference__ModelInferRequest *req = ctx->req;
  shm_ref *refs = arena_alloc(ctx, (req->n_inputs ? req->n_inputs : 1) * sizeof *refs);
  if (refs == NULL) return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  size_t n_shm = 0;
  const char *first_shm = NULL;
  for (size_t i = 0; i < req->n_inputs; i++) {
    TRITONSERVER_Error *err = input_shm(req->inputs[i], &refs[i]);
    if (err) return err;
    if (refs[i].used) {
      if (req->inputs[i]->contents)
        return errf(TRITONSERVER_ERROR_INVALID_ARG,
                    "unexpected 'content' provided when using shared memory for input tensor '%s' for model "
                    "'%s' (give either its 'contents' or its shared memory parameters)",
                    req->inputs[i]->name, req->model_name);
      if (first_shm == NULL) first_shm = req->inputs[i]->name;
      n_shm++;
    }
  }
  size_t n_plain = req->n_inputs - n_shm;
  bool raw = req->n_raw_input_contents > 0;
  if (raw && req->n_raw_input_contents != n_plain) {
    if (n_shm > 0 && req->n_raw_input_contents == req->n_inputs)
      return errf(TRITONSERVER_ERROR_INVALID_ARG,
                  "input '%s' uses shared memory and must not also have raw_input_contents", first_shm);
    return errf(TRITONSERVER_ERROR_INVALID_ARG,
                "expected one raw_input_contents entry per input not in shared memory, got %zu "
                "for %zu inputs",
                req->n_raw_input_contents, n_plain);
  }
  if (n_shm > 0) {
    ctx->in_regions = arena_alloc(ctx, n_shm * sizeof *ctx->in_regions);
    if (ctx->in_regions == NULL) return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  }
  size_t raw_index = 0;
  for (size_t i = 0; i < req->n_inputs; i++) {
    const Inference__ModelInferRequest__InferInputTensor *in = req->inputs[i];
    TRITONSERVER_DataType dt = TRITONSERVER_StringToDataType(in->datatype);
    if (dt == TRITONSERVER_TYPE_INVALID)
      return errf(TRITONSERVER_ERROR_INVALID_ARG, "input '%s' has an invalid datatype '%s'", in->name, in->datatype);
    TRITONSERVER_Error *err = TRITONSERVER_InferenceRequestAddInput(ctx->irq, in->name, dt, in->shape, in->n_shape);
    if (err) return err;
    const void *data = NULL;
    size_t size = 0;
    TRITONSERVER_MemoryType mt = TRITONSERVER_MEMORY_CPU;
    int64_t mt_id = 0;
    if (refs[i].used) {
      void *addr = NULL;
      err = nrd_srv_shm_acquire(shm, refs[i].region, refs[i].offset, refs[i].byte_size,
                                &ctx->in_regions[ctx->n_in_regions], &addr);
      if (err) return err;
      nrd_srv_shm_region_memory(ctx->in_regions[ctx->n_in_regions], &mt, &mt_id); /* GPU: a CUDA region */
      ctx->n_in_regions++;
      data = addr;
      size = (size_t)refs[i].byte_size;
    } else if (raw) {
      if (in->contents)
        return errf(TRITONSERVER_ERROR_INVALID_ARG,
                    "contents field must not be specified when using raw_input_contents for '%s' for model '%s'",
                    in->name, req->model_name);
      data = req->raw_input_contents[raw_index].data;
      size = req->raw_input_contents[raw_index].len;
      raw_index++;
    } else if (in->contents) {
      err = typed_input(ctx, in, dt, &data, &size);
      if (err) return err;
    } else {
      return errf(TRITONSERVER_ERROR_INVALID_ARG,
                  "unable to find data for input tensor '%s' for model '%s' in request.", in->name, req->model_name);
    }
    err = TRITONSERVER_InferenceRequestAppendInputData(ctx->irq, in->name, data ? data : "", size, mt, mt_id);
    if (err) return err;
  }
  for (size_t i = 0; i < req->n_outputs; i++) {
    shm_ref ref;
    uint32_t k = 0;
    TRITONSERVER_Error *err = output_class(req->outputs[i], &k);
    if (err == NULL) err = output_shm(req->outputs[i], &ref);
    if (err == NULL && k > 0 && ref.used)
      err = errf(TRITONSERVER_ERROR_INVALID_ARG,
                 "output '%s' can't set both 'shared_memory_region' and 'classification'", req->outputs[i]->name);
    if (err == NULL && k > 0) {
      if (ctx->cls == NULL) {
        ctx->cls = arena_alloc(ctx, req->n_outputs * sizeof *ctx->cls);
        if (ctx->cls == NULL) return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory");
      }
      ctx->cls[ctx->n_cls++] = (cls_out){req->outputs[i]->name, k};
    }
    if (err == NULL && ref.used) {
      if (ctx->souts == NULL) {
        ctx->souts = arena_alloc(ctx, req->n_outputs * sizeof *ctx->souts);
        if (ctx->souts == NULL) return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory");
      }
      shm_out *so = &ctx->souts[ctx->n_souts];
      memset(so, 0, sizeof *so);
      err = nrd_srv_shm_acquire(shm, ref.region, ref.offset, ref.byte_size, &so->ref, &so->addr);
      if (err == NULL) {
        so->name = req->outputs[i]->name;
        so->region = ref.region;
        so->offset = ref.offset;
        so->byte_size = ref.byte_size;
        ctx->n_souts++;
      }
    }
    if (err == NULL) err = TRITONSERVER_InferenceRequestAddRequestedOutput(ctx->irq, req->outputs[i]->name);
    if (err) return err;
  }
  return NULL;
}

/* The request's parameters, with Triton's sentences for values of the
 * wrong type (server ace2c5b9f grpc/infer_handler.cc
 * SetInferenceRequestMetadata). */
static TRITONSERVER_Error *apply_parameters(infer_ctx *ctx) {
  Inference__ModelInferRequest *req = ctx->req;
  uint32_t flags = 0;
  TRITONSERVER_Error *err = NULL;
  for (size_t i = 0; i < req->n_parameters && err == NULL; i++) {
    const char *key = req->parameters[i]->key;
    const Inference__InferParameter *p = req->parameters[i]->value;
    if (p == NULL) continue;
    int c = p->parameter_choice_case;
    if (strcmp(key, "sequence_id") == 0) {
      if (c == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM)
        err = TRITONSERVER_InferenceRequestSetCorrelationId(ctx->irq, (uint64_t)p->int64_param);
      else if (c == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_UINT64_PARAM)
        err = TRITONSERVER_InferenceRequestSetCorrelationId(ctx->irq, p->uint64_param);
      else if (c == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM)
        err = TRITONSERVER_InferenceRequestSetCorrelationIdString(ctx->irq, p->string_param);
      else
        err = errf(TRITONSERVER_ERROR_INVALID_ARG,
                   "invalid value type for 'sequence_id' parameter, expected int64_param or string_param.");
    } else if (strcmp(key, "sequence_start") == 0 || strcmp(key, "sequence_end") == 0) {
      if (c != INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM)
        err = errf(TRITONSERVER_ERROR_INVALID_ARG, "invalid value type for '%s' parameter, expected bool_param.", key);
      else if (p->bool_param)
        flags |= key[9] == 's' ? TRITONSERVER_REQUEST_FLAG_SEQUENCE_START : TRITONSERVER_REQUEST_FLAG_SEQUENCE_END;
    } else if (strcmp(key, "priority") == 0) {
      if (c == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM && p->int64_param >= 0)
        err = TRITONSERVER_InferenceRequestSetPriorityUInt64(ctx->irq, (uint64_t)p->int64_param);
      else if (c == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_UINT64_PARAM)
        err = TRITONSERVER_InferenceRequestSetPriorityUInt64(ctx->irq, p->uint64_param);
      else if (c == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM)
        err = errf(TRITONSERVER_ERROR_INVALID_ARG, "invalid value for 'priority', expected value >= 0.");
      else
        err = errf(TRITONSERVER_ERROR_INVALID_ARG,
                   "invalid value type for 'priority' parameter, expected int64_param or uint64_param.");
    } else if (strcmp(key, "timeout") == 0) {
      if (c == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM && p->int64_param >= 0)
        err = TRITONSERVER_InferenceRequestSetTimeoutMicroseconds(ctx->irq, (uint64_t)p->int64_param);
      else if (c == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM) /* ours: Triton reads it as unsigned */
        err = errf(TRITONSERVER_ERROR_INVALID_ARG, "invalid value for 'timeout', expected value >= 0.");
      else
        err = errf(TRITONSERVER_ERROR_INVALID_ARG, "invalid value type for 'timeout' parameter, expected int64_param.");
    } else if (strcmp(key, "triton_enable_empty_final_response") == 0) {
      if (c != INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM)
        err = errf(TRITONSERVER_ERROR_INVALID_ARG, "invalid value type for '%s' parameter, expected bool_param.", key);
      else
        ctx->empty_final = p->bool_param;
    } else if (strncmp(key, "triton_", 7) == 0) {
      /* Triton keeps the prefix for itself, over gRPC. */
      err = errf(TRITONSERVER_ERROR_INVALID_ARG,
                 "parameter keys starting with 'triton_' are reserved for Triton usage. Only the following "
                 "keys starting with 'triton_' are allowed: %s (got '%.200s')",
                 "triton_enable_empty_final_response", key);
    } else {
      switch (c) {
        case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM:
          err = TRITONSERVER_InferenceRequestSetBoolParameter(ctx->irq, key, p->bool_param);
          break;
        case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM:
          err = TRITONSERVER_InferenceRequestSetIntParameter(ctx->irq, key, p->int64_param);
          break;
        case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM:
          err = TRITONSERVER_InferenceRequestSetStringParameter(ctx->irq, key, p->string_param);
          break;
        case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_DOUBLE_PARAM:
          err = TRITONSERVER_InferenceRequestSetDoubleParameter(ctx->irq, key, p->double_param);
          break;
        default: /* uint64_param, or none */
          err = errf(TRITONSERVER_ERROR_INVALID_ARG,
                     "invalid value type for '%s' parameter, expected int64_param, bool_param, or string_param. "
                     "(got %s)",
                     key, c == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_UINT64_PARAM ? "uint64_param" : "no value");
          break;
      }
    }
  }
  if (err == NULL && flags) err = TRITONSERVER_InferenceRequestSetFlags(ctx->irq, flags);
  return err;
}

/* Reports a request that never reached the core: unary calls finish with
 * the error; streams carry it as error_message and stay open. */
static void reject(nrd_srv_grpc_call *call, infer_ctx *ctx, bool streaming, const Inference__ModelInferRequest *req,
                   TRITONSERVER_Error *err) {
  if (!streaming) {
    nrd_srv_grpc_call_fail(call, err);
    return;
  }
  Inference__ModelInferResponse r = INFERENCE__MODEL_INFER_RESPONSE__INIT;
  if (req) {
    r.model_name = req->model_name;
    r.model_version = req->model_version;
    r.id = req->id;
  }
  Inference__ModelStreamInferResponse s = INFERENCE__MODEL_STREAM_INFER_RESPONSE__INIT;
  s.error_message = (char *)TRITONSERVER_ErrorMessage(err);
  s.infer_response = &r;
  nrd_srv_grpc_call_send(call, &s.base);
  TRITONSERVER_ErrorDelete(err);
  (void)ctx;
}

/* Ends the call with an error before its work is done (a bad message, no
 * memory): what a stream still has in the core is cancelled, since no
 * response can reach the client after the status. Loop thread. */
static void fail_call(nrd_srv_grpc_call *call, int status, const char *message) {
  nrd_srv_grpc_call_finish(call, status, message);
  on_cancel(call);
}

static void start_infer(nrd_srv_grpc_call *call, const uint8_t *msg, size_t len, bool streaming) {
  TRITONSERVER_Server *server = nrd_srv_grpc_call_server(call);
  call_state *cs = get_state(call);
  if (cs == NULL) {
    fail_call(call, NRD_GRPC_RESOURCE_EXHAUSTED, "out of memory");
    return;
  }
  size_t ctx_size = (sizeof(infer_ctx) + 15) & ~(size_t)15;
  size_t cap = 2 * len + 512;
  infer_ctx *ctx = malloc(ctx_size + cap);
  if (ctx == NULL) {
    fail_call(call, NRD_GRPC_RESOURCE_EXHAUSTED, "out of memory");
    return;
  }
  memset(ctx, 0, sizeof *ctx);
  ctx->arena = (uint8_t *)ctx + ctx_size;
  ctx->cap = cap;
  atomic_init(&ctx->out_top, cap & ~(size_t)15);
  ctx->pa.alloc = arena_alloc;
  ctx->pa.free = arena_free;
  ctx->pa.allocator_data = ctx;
  nrd_srv_grpc_call_ref(call);
  ctx->call = call;
  bool fallback = false;
  Inference__ModelInferRequest *req = nrd_srv_grpc_unpack_infer_request(&ctx->pa, msg, len, &fallback);
  if (req == NULL && !fallback) {
    fail_call(call, NRD_GRPC_RESOURCE_EXHAUSTED, "out of memory");
    ctx_free(ctx);
    return;
  }
  /* Typed contents and whatever else the fast decoder leaves: protobuf-c,
   * which also tells malformed bytes apart. */
  if (req == NULL) req = inference__model_infer_request__unpack(&ctx->pa, len, msg);
  if (req == NULL) {
    fail_call(call, NRD_GRPC_INVALID_ARGUMENT, "failed to parse the ModelInferRequest message (malformed protobuf)");
    ctx_free(ctx);
    return;
  }
  ctx->req = req;
  ctx->streaming = streaming;
  atomic_init(&ctx->pending, 2);

  int64_t version = -1;
  TRITONSERVER_Error *err = parse_version(req->model_version, &version);
  if (err == NULL && streaming && nrd_srv_grpc_call_draining(call))
    err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, "Server is stopping");
  if (err == NULL && !streaming) {
    uint32_t txn = 0;
    void *vp = NULL;
    err = TRITONSERVER_ServerModelTransactionProperties(server, req->model_name, version, &txn, &vp);
    if (err == NULL && (txn & TRITONSERVER_TXN_DECOUPLED))
      err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNSUPPORTED,
                                  "ModelInfer RPC doesn't support models with decoupled transaction policy");
  }
  if (err == NULL) err = TRITONSERVER_InferenceRequestNew(&ctx->irq, server, req->model_name, version);
  if (err == NULL && req->id && req->id[0]) err = TRITONSERVER_InferenceRequestSetId(ctx->irq, req->id);
  if (err == NULL) err = apply_parameters(ctx);
  char *const *fwd = NULL;
  size_t n_fwd = nrd_srv_grpc_call_forwarded(call, &fwd);
  for (size_t i = 0; err == NULL && i < n_fwd; i++) {
    size_t klen = strlen(fwd[2 * i]);
    if (nrd_srv_header_forward_reserved(fwd[2 * i], klen)) /* Triton 26.x, 69987b7b0 */
      err = errf(TRITONSERVER_ERROR_INVALID_ARG, NRD_SRV_HEADER_RESERVED_FMT, (int)(klen > 200 ? 200 : klen),
                 fwd[2 * i]);
    else
      err = TRITONSERVER_InferenceRequestSetStringParameter(ctx->irq, fwd[2 * i], fwd[2 * i + 1]);
  }
  if (err == NULL) err = add_inputs(ctx, nrd_srv_grpc_call_shm(call));
  if (err == NULL) err = TRITONSERVER_InferenceRequestSetReleaseCallback(ctx->irq, on_release, ctx);
  if (err == NULL) err = TRITONSERVER_InferenceRequestSetResponseCallback(ctx->irq, g_allocator, ctx, on_response, ctx);
  if (err == NULL) {
    /* Listed before it is sent so a cancel can never miss it. */
    pthread_mutex_lock(&cs->mu);
    ctx->cs = cs;
    ctx->next = cs->inflight;
    if (cs->inflight) cs->inflight->prev = ctx;
    cs->inflight = ctx;
    pthread_mutex_unlock(&cs->mu);
    cs->active++;
    ctx->trace =
        nrd_srv_tracer_sample(nrd_srv_grpc_call_tracer(call), req->model_name, nrd_srv_grpc_call_traceparent(call));
    uint64_t read_start, read_end;
    nrd_srv_grpc_call_read_times(call, &read_start, &read_end);
    if (ctx->trace && read_start) {
      nrd_srv_trace_mark(ctx->trace, "GRPC_WAITREAD_START", read_start);
      nrd_srv_trace_mark(ctx->trace, "GRPC_WAITREAD_END", read_end);
    }
    err = TRITONSERVER_ServerInferAsync(server, ctx->irq, nrd_srv_trace_core(ctx->trace));
    if (err) cs->active--;
  }
  if (err) {
    reject(call, ctx, streaming, req, err);
    ctx_free(ctx);
  }
}

/* ---- method entries ------------------------------------------------------------ */

static void infer_message(nrd_srv_grpc_call *call, const uint8_t *msg, size_t len) {
  start_infer(call, msg, len, false);
}

static void stream_message(nrd_srv_grpc_call *call, const uint8_t *msg, size_t len) {
  start_infer(call, msg, len, true);
}

static void stream_end(nrd_srv_grpc_call *call) {
  call_state *cs = get_state(call);
  if (cs == NULL) {
    nrd_srv_grpc_call_finish(call, NRD_GRPC_RESOURCE_EXHAUSTED, "out of memory");
    return;
  }
  cs->client_done = true;
  if (cs->active == 0) nrd_srv_grpc_call_finish(call, NRD_GRPC_OK, NULL);
}

const nrd_srv_grpc_method nrd_srv_grpc_model_infer_method = {
    .path = "/inference.GRPCInferenceService/ModelInfer",
    .on_message = infer_message,
    .on_cancel = on_cancel,
    .compress_responses = true,
    .api = NRD_SRV_API_INFERENCE,
};

const nrd_srv_grpc_method nrd_srv_grpc_model_stream_infer_method = {
    .path = "/inference.GRPCInferenceService/ModelStreamInfer",
    .streaming = true,
    .on_message = stream_message,
    .on_end = stream_end,
    .on_cancel = on_cancel,
    .compress_responses = true,
    .api = NRD_SRV_API_INFERENCE,
};
