/* POST /v2/models/{m}[/versions/{v}]/infer: builds a core request from the
 * JSON header and the binary tail (inputs point into the received body),
 * runs it, and encodes the response (JSON data or the binary extension,
 * output buffers sent without another copy).
 *
 * Threads: the handler runs on the loop thread that owns the connection;
 * the release and completion callbacks run on core threads and count
 * down. The last of them encodes and sends the reply itself when the loop
 * sleeps and lets it (answer_here), or posts it back to the loop. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "classify.h"
#include "error_ignore.h"
#include "http_internal.h"
#include "http_json.h"
#include "json_error.h"
#include "fmt.h"
#include "header_forward.h"
#include "log_settings.h"
#include "response_output.h"

const char *nrd_srv_http_framed_header_size(const nrd_srv_http *h, const nrd_srv_http_req *req, bool *bad) {
  *bad = false;
  if (!h->binary_mime) return NULL;
  const char *type = nrd_srv_http_header_get(req, "Content-Type");
  const char *at = type ? strstr(type, h->binary_mime) : NULL;
  if (!at) return NULL;
  *bad = at != type;
  return at + strlen(h->binary_mime);
}

#define BLOCK_HEADER 64 /* output blocks: header, then the data (16-byte aligned, 64 from BLOCK_ALIGN_MIN) */
#define BLOCK_ALIGN_MIN ((size_t)4096) /* from this size on, data is 64-byte aligned */

/* One output buffer, shared by the core's response (until the allocator's
 * release) and, when its bytes are sent by reference, by the reply (until
 * they are written): the last of the two frees it. */
typedef struct out_block {
  atomic_int refs;
  size_t size; /* bytes after the header */
  nrd_srv_http *home; /* cache to return a large block to; NULL: free it */
} out_block;

/* Large blocks are kept for reuse: for multi-megabyte tensors the page
 * faults and zeroing of a fresh mapping cost more than the copies. */
#define BLOCK_CACHE_MIN ((size_t)1 << 20)

static out_block *block_get(nrd_srv_http *h, size_t size) {
  if (h && size >= BLOCK_CACHE_MIN) {
    pthread_mutex_lock(&h->blocks_mu);
    out_block *best = NULL;
    int at = -1;
    for (int i = 0; i < NRD_SRV_HTTP_BLOCK_SLOTS; i++) {
      out_block *b = h->blocks[i];
      /* Fits, and wastes at most half of itself. */
      if (b && b->size >= size && b->size / 2 <= size && (!best || b->size < best->size)) {
        best = b;
        at = i;
      }
    }
    if (best) h->blocks[at] = NULL;
    pthread_mutex_unlock(&h->blocks_mu);
    if (best) {
      atomic_init(&best->refs, 1);
      return best;
    }
  }
  void *p = NULL;
  if (size > SIZE_MAX - BLOCK_HEADER) return NULL;
  /* Small outputs take malloc's 16-byte alignment (what a backend gets
   * from Triton's front ends too): posix_memalign skips malloc's
   * per-thread cache, about 800 instructions a call. Larger ones start
   * on a cache line. */
  if (size < BLOCK_ALIGN_MIN)
    p = malloc(BLOCK_HEADER + size);
  else if (posix_memalign(&p, 64, BLOCK_HEADER + size) != 0)
    p = NULL;
  if (p == NULL) return NULL;
  out_block *b = p;
  atomic_init(&b->refs, 1);
  b->size = size;
  b->home = size >= BLOCK_CACHE_MIN ? h : NULL;
  return b;
}

static void block_unref(out_block *b) {
  if (atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) != 1) return;
  nrd_srv_http *h = b->home;
  if (h) {
    pthread_mutex_lock(&h->blocks_mu);
    for (int i = 0; i < NRD_SRV_HTTP_BLOCK_SLOTS && b; i++) {
      if (h->blocks[i] == NULL) {
        h->blocks[i] = b;
        b = NULL;
      } else if (h->blocks[i]->size < b->size) {
        /* Keep the larger blocks: they serve more sizes. */
        out_block *small = h->blocks[i];
        h->blocks[i] = b;
        b = small;
      }
    }
    pthread_mutex_unlock(&h->blocks_mu);
  }
  free(b);
}

void nrd_srv_http_blocks_free(nrd_srv_http *h) {
  for (int i = 0; i < NRD_SRV_HTTP_BLOCK_SLOTS; i++) {
    free(h->blocks[i]);
    h->blocks[i] = NULL;
  }
}

typedef struct req_output {
  char *name;
  int binary; /* -1: the request's default */
  uint32_t class_count; /* > 0: classification extension */
  /* Shared memory output (shm != NULL): written in place at shm_addr. */
  nrd_srv_shm_region *shm;
  char *shm_name;
  void *shm_addr;
  uint64_t shm_offset, shm_size;
} req_output;

typedef struct infer_ctx {
  nrd_srv_http_pending pending; /* first member */
  nrd_srv_http_loop *loop;
  nrd_srv_http_task task; /* posts encode_and_send back to the loop */
  pthread_mutex_t mu; /* guards ireq against cancel vs release */
  TRITONSERVER_InferenceRequest *ireq;
  TRITONSERVER_InferenceResponse *resp;
  atomic_int remaining; /* release + final response */
  bool released; /* under mu: the core handed ireq back */
  void **bufs; /* input data parsed from JSON */
  size_t n_bufs;
  req_output *outs;
  size_t n_outs;
  bool binary_default;
  nrd_srv_shm_region **regions; /* shared memory inputs held */
  size_t n_regions;
  nrd_srv_trace *trace; /* NULL: not traced */
} infer_ctx;

/* ---- allocator ------------------------------------------------------------ */

static TRITONSERVER_Error *alloc_fn(TRITONSERVER_ResponseAllocator *allocator, const char *tensor_name,
                                    size_t byte_size, TRITONSERVER_MemoryType memory_type, int64_t memory_type_id,
                                    void *userp, void **buffer, void **buffer_userp,
                                    TRITONSERVER_MemoryType *actual_memory_type, int64_t *actual_memory_type_id) {
  (void)allocator;
  (void)memory_type;
  (void)memory_type_id;
  *actual_memory_type = TRITONSERVER_MEMORY_CPU;
  *actual_memory_type_id = 0;
  /* userp: the infer_ctx of an /infer request, NULL for /generate. */
  const infer_ctx *c = userp;
  for (size_t i = 0; c && i < c->n_outs; i++) {
    const req_output *ro = &c->outs[i];
    if (ro->shm == NULL || strcmp(ro->name, tensor_name) != 0) continue;
    TRITONSERVER_Error *err = nrd_srv_shm_check_output(tensor_name, ro->shm_size, byte_size);
    if (err) return err;
    *buffer = ro->shm_addr;
    *buffer_userp = NULL; /* nothing to free */
    nrd_srv_shm_region_memory(ro->shm, actual_memory_type, actual_memory_type_id);
    return NULL;
  }
  out_block *b = block_get(c ? c->loop->http : NULL, byte_size);
  if (b == NULL) {
    char msg[200];
    snprintf(msg, sizeof msg, "cannot allocate %zu bytes for output '%s'", byte_size, tensor_name);
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, msg);
  }
  *buffer = (char *)b + BLOCK_HEADER;
  *buffer_userp = b;
  return NULL;
}

static TRITONSERVER_Error *release_fn(TRITONSERVER_ResponseAllocator *allocator, void *buffer, void *buffer_userp,
                                      size_t byte_size, TRITONSERVER_MemoryType memory_type, int64_t memory_type_id) {
  (void)allocator;
  (void)buffer;
  (void)byte_size;
  (void)memory_type;
  (void)memory_type_id;
  if (buffer_userp) block_unref(buffer_userp);
  return NULL;
}

/* Where alloc_fn will put an output: in its shared memory region's memory
 * (GPU for a CUDA region) when the request bound it to one, else CPU. */
static TRITONSERVER_Error *query_fn(TRITONSERVER_ResponseAllocator *allocator, void *userp, const char *tensor_name,
                                    size_t *byte_size, TRITONSERVER_MemoryType *memory_type,
                                    int64_t *memory_type_id) {
  const infer_ctx *c = userp;
  for (size_t i = 0; c && tensor_name && i < c->n_outs; i++) {
    if (c->outs[i].shm == NULL || strcmp(c->outs[i].name, tensor_name) != 0) continue;
    nrd_srv_shm_region_memory(c->outs[i].shm, memory_type, memory_type_id);
    return NULL;
  }
  return nrd_srv_output_query_cpu(allocator, userp, tensor_name, byte_size, memory_type, memory_type_id);
}

TRITONSERVER_Error *nrd_srv_http_allocator_new(TRITONSERVER_ResponseAllocator **out) {
  TRITONSERVER_Error *err = TRITONSERVER_ResponseAllocatorNew(out, alloc_fn, release_fn, NULL);
  if (err == NULL) err = TRITONSERVER_ResponseAllocatorSetQueryFunction(*out, query_fn);
  return err;
}

static void free_block_ref(void *block) { block_unref(block); }

/* ---- context -------------------------------------------------------------- */

static void ctx_free(infer_ctx *c) {
  if (c->ireq) TRITONSERVER_InferenceRequestDelete(c->ireq);
  if (c->resp) TRITONSERVER_InferenceResponseDelete(c->resp);
  for (size_t i = 0; i < c->n_bufs; i++) free(c->bufs[i]);
  free(c->bufs);
  for (size_t i = 0; i < c->n_outs; i++) {
    free(c->outs[i].name);
    free(c->outs[i].shm_name);
    nrd_srv_shm_release(c->outs[i].shm);
  }
  free(c->outs);
  for (size_t i = 0; i < c->n_regions; i++) nrd_srv_shm_release(c->regions[i]);
  free(c->regions);
  nrd_srv_trace_done(c->trace);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

static void on_disconnect(nrd_srv_http_pending *p) {
  infer_ctx *c = (infer_ctx *)p;
  pthread_mutex_lock(&c->mu);
  if (c->ireq && !c->released) {
    NRD_SRV_IGNORE(TRITONSERVER_InferenceRequestCancel(c->ireq), "cancelling a request the core may have finished");
  }
  pthread_mutex_unlock(&c->mu);
}

static void encode_and_send(void *arg);
static bool answer_here(infer_ctx *c);

static void count_down(infer_ctx *c) {
  if (atomic_fetch_sub(&c->remaining, 1) != 1) return;
  if (answer_here(c)) return;
  c->task.fn = encode_and_send;
  c->task.arg = c;
  c->task.heap = false;
  nrd_srv_http_post_task(c->loop, &c->task);
}

static void on_release(TRITONSERVER_InferenceRequest *request, const uint32_t flags, void *userp) {
  (void)flags;
  infer_ctx *c = userp;
  (void)request;
  pthread_mutex_lock(&c->mu);
  c->released = true;
  pthread_mutex_unlock(&c->mu);
  count_down(c);
}

static void on_response(TRITONSERVER_InferenceResponse *response, const uint32_t flags, void *userp) {
  infer_ctx *c = userp;
  if (response) {
    if (c->resp) TRITONSERVER_InferenceResponseDelete(c->resp);
    c->resp = response;
    nrd_srv_trace_mark(c->trace, "INFER_RESPONSE_COMPLETE", 0);
  }
  if (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) count_down(c);
}

/* ---- response encoding ------------------------------------------------------ */

static int add_str(nrd_srv_http_text *t, const char *s) { return nrd_srv_http_text_add(t, s, strlen(s)); }

static int add_param_value(nrd_srv_http_text *t, TRITONSERVER_ParameterType type, const void *v) {
  char num[40];
  switch (type) {
    case TRITONSERVER_PARAMETER_STRING: return nrd_srv_http_text_quoted(t, v, strlen(v));
    case TRITONSERVER_PARAMETER_INT:
      snprintf(num, sizeof num, "%lld", (long long)*(const int64_t *)v);
      return add_str(t, num);
    case TRITONSERVER_PARAMETER_BOOL: return add_str(t, *(const bool *)v ? "true" : "false");
    case TRITONSERVER_PARAMETER_DOUBLE: snprintf(num, sizeof num, "%.17g", *(const double *)v); return add_str(t, num);
    default: return add_str(t, "null");
  }
}

static const req_output *find_output(const infer_ctx *c, const char *name) {
  for (size_t i = 0; i < c->n_outs; i++)
    if (strcmp(c->outs[i].name, name) == 0) return &c->outs[i];
  return NULL;
}

/* As Triton: binary_data_output only sets the outputs the request does not
 * name; one named without binary_data is JSON (server r25.07
 * http_server.cc CheckBinaryOutputData, checked by its qa/L0_http). */
static bool output_binary(const infer_ctx *c, const char *name) {
  const req_output *ro = find_output(c, name);
  if (ro) return ro->binary > 0;
  return c->binary_default;
}

/* Triton's verbose line for a failed inference (server r25.07,
 * http_server.cc): "[request id: <id>] Infer failed: <message>", the id
 * "<id_unknown>" when the request has none. Costs a level check when
 * verbose logging is off. */
static void log_infer_failed(TRITONSERVER_InferenceRequest *ireq, TRITONSERVER_InferenceResponse *resp,
                             const char *msg) {
  if (!TRITONSERVER_LogIsEnabled(TRITONSERVER_LOG_VERBOSE)) return;
  const char *id = NULL;
  TRITONSERVER_Error *err = NULL;
  if (resp)
    err = TRITONSERVER_InferenceResponseId(resp, &id);
  else if (ireq)
    err = TRITONSERVER_InferenceRequestId(ireq, &id);
  if (err) {
    TRITONSERVER_ErrorDelete(err);
    id = NULL;
  }
  nrd_srv_logf(TRITONSERVER_LOG_VERBOSE, __FILE__, __LINE__, "[request id: %s] Infer failed: %s",
               id && *id ? id : "<id_unknown>", msg);
}

/* Logs as above, then answers with `err` (deleted). */
static void reply_infer_failed(nrd_srv_http_req *req, TRITONSERVER_InferenceRequest *ireq,
                               TRITONSERVER_InferenceResponse *resp, TRITONSERVER_Error *err) {
  log_infer_failed(ireq, resp, TRITONSERVER_ErrorMessage(err));
  nrd_srv_http_reply_tserr(req, err);
}

/* Builds the reply to req from c's response. Returns true when the reply is
 * ready to send: the caller sends it after deleting the response, because
 * output blocks handed to the reply are freed as soon as they are written.
 * Returns false when req was already answered (an error). */
static bool build_reply(infer_ctx *c, nrd_srv_http_req *req) {
  TRITONSERVER_InferenceResponse *resp = c->resp;
  if (resp == NULL) {
    nrd_srv_http_reply_error(req, 500, "the inference produced no response");
    return false;
  }
  TRITONSERVER_Error *rerr = TRITONSERVER_InferenceResponseError(resp);
  if (rerr) {
    reply_infer_failed(req, NULL, resp, rerr); /* deletes our copy */
    return false;
  }
  nrd_srv_http_text t = {0};
  const char *model = "";
  int64_t version = 0;
  const char *id = "";
  uint32_t n_params = 0, n_out = 0;
  TRITONSERVER_Error *err = TRITONSERVER_InferenceResponseModel(resp, &model, &version);
  if (!err) err = TRITONSERVER_InferenceResponseId(resp, &id);
  if (!err) err = TRITONSERVER_InferenceResponseParameterCount(resp, &n_params);
  if (!err) err = TRITONSERVER_InferenceResponseOutputCount(resp, &n_out);
  if (err) {
    nrd_srv_http_reply_tserr(req, err);
    return false;
  }
  char num[64];
  int bad = NRD_SRV_HTTP_TEXT_LIT(&t, "{\"model_name\":");
  bad |= nrd_srv_http_text_quoted(&t, model, strlen(model));
  bad |= NRD_SRV_HTTP_TEXT_LIT(&t, ",\"model_version\":\"");
  bad |= nrd_srv_http_text_i64(&t, version);
  bad |= NRD_SRV_HTTP_TEXT_LIT(&t, "\"");
  if (id && *id) {
    bad |= NRD_SRV_HTTP_TEXT_LIT(&t, ",\"id\":");
    bad |= nrd_srv_http_text_quoted(&t, id, strlen(id));
  }
  if (n_params > 0) {
    bad |= NRD_SRV_HTTP_TEXT_LIT(&t, ",\"parameters\":{");
    for (uint32_t i = 0; i < n_params && !err; i++) {
      const char *name;
      TRITONSERVER_ParameterType type;
      const void *v;
      err = TRITONSERVER_InferenceResponseParameter(resp, i, &name, &type, &v);
      if (err) break;
      if (i) bad |= NRD_SRV_HTTP_TEXT_LIT(&t, ",");
      bad |= nrd_srv_http_text_quoted(&t, name, strlen(name));
      bad |= NRD_SRV_HTTP_TEXT_LIT(&t, ":");
      bad |= add_param_value(&t, type, v);
    }
    bad |= NRD_SRV_HTTP_TEXT_LIT(&t, "}");
  }
  bad |= NRD_SRV_HTTP_TEXT_LIT(&t, ",\"outputs\":[");
  /* Binary tails in output order: (block, data, size). */
  struct tail {
    out_block *block;
    const void *data;
    size_t size;
  } tails_small[4], *tails = n_out <= 4 ? tails_small : calloc(n_out, sizeof *tails);
  size_t n_tails = 0, tail_bytes = 0;
  /* Classification results, freed once the reply is built. */
  char *extra_small[4], **extra = n_out <= 4 ? extra_small : calloc(n_out, sizeof *extra);
  size_t n_extra = 0;
  if (tails == NULL || extra == NULL) bad = 1;
  for (uint32_t i = 0; i < n_out && !err && !bad; i++) {
    nrd_srv_output o;
    err = nrd_srv_output_get(resp, i, &o);
    if (err) break;
    const req_output *ro = find_output(c, o.name);
    nrd_srv_classes cls;
    if (ro && ro->class_count > 0 && ro->shm == NULL) {
      err = nrd_srv_classify(c->loop->http->server, resp, i, ro->class_count, &cls);
      if (err) break;
      if (n_extra == n_out) {
        free(cls.data);
        bad = 1;
        break;
      }
      extra[n_extra++] = cls.data;
      o.datatype = TRITONSERVER_TYPE_BYTES;
      o.shape = cls.shape;
      o.dims = cls.dims;
      o.base = cls.data;
      o.byte_size = cls.size;
      o.userp = NULL; /* not an allocator block: copied if sent binary */
    }
    if (i) bad |= NRD_SRV_HTTP_TEXT_LIT(&t, ",");
    bad |= NRD_SRV_HTTP_TEXT_LIT(&t, "{\"name\":");
    bad |= nrd_srv_http_text_quoted(&t, o.name, strlen(o.name));
    bad |= NRD_SRV_HTTP_TEXT_LIT(&t, ",\"datatype\":\"");
    bad |= add_str(&t, TRITONSERVER_DataTypeString(o.datatype));
    bad |= NRD_SRV_HTTP_TEXT_LIT(&t, "\",\"shape\":[");
    for (uint64_t d = 0; d < o.dims; d++) {
      if (d) bad |= NRD_SRV_HTTP_TEXT_LIT(&t, ",");
      bad |= nrd_srv_http_text_i64(&t, o.shape[d]);
    }
    bad |= NRD_SRV_HTTP_TEXT_LIT(&t, "]");
    if (ro && ro->shm) {
      /* Written to shared memory: name, datatype and shape only, as Triton
       * answers (perf_analyzer's client reads any output "parameters" as
       * binary data and fails without "binary_data_size"). */
      bad |= NRD_SRV_HTTP_TEXT_LIT(&t, "}");
    } else if (output_binary(c, o.name)) {
      bad |= NRD_SRV_HTTP_TEXT_LIT(&t, ",\"parameters\":{\"binary_data_size\":");
      bad |= nrd_srv_http_text_i64(&t, (int64_t)o.byte_size);
      bad |= NRD_SRV_HTTP_TEXT_LIT(&t, "}}");
      tails[n_tails++] = (struct tail){o.userp, o.base, o.byte_size};
      tail_bytes += o.byte_size;
    } else {
      bad |= NRD_SRV_HTTP_TEXT_LIT(&t, ",\"data\":");
      if (nrd_srv_http_json_write_data(&t, o.datatype, o.base, o.byte_size) != 0) {
        err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "cannot encode output data as JSON");
        break;
      }
      bad |= NRD_SRV_HTTP_TEXT_LIT(&t, "}");
    }
  }
  bad |= NRD_SRV_HTTP_TEXT_LIT(&t, "]}");
  if (err || bad) {
    for (size_t k = 0; k < n_extra; k++) free(extra[k]);
    if (extra != extra_small) free(extra);
    if (tails != tails_small) free(tails);
    free(t.buf);
    if (err)
      nrd_srv_http_reply_tserr(req, err);
    else
      nrd_srv_http_reply_error(req, 500, "out of memory encoding the response");
    return false;
  }
  bool may_compress = nrd_srv_http_header_known(req, NRD_SRV_H_ACCEPT_ENCODING) != NULL;
  size_t json_len = t.len;
  int fail = nrd_srv_http_add_body_ref(req, t.buf, t.len, free, t.buf);
  const nrd_srv_http *h = c->loop->http;
  if (n_tails > 0 && h->endpoint && h->endpoint->reply_framed) {
    /* The JSON header's size in the content type (SageMaker). */
    char type[128];
    snprintf(type, sizeof type, "%s%zu", h->binary_mime, json_len);
    fail |= nrd_srv_http_add_header(req, "Content-Type", type);
  } else if (n_tails > 0) {
    num[nrd_srv_fmt_u64(num, json_len)] = '\0';
    fail |= nrd_srv_http_add_header(req, "Inference-Header-Content-Length", num);
    fail |= nrd_srv_http_add_header(req, "Content-Type", "application/octet-stream");
  }
  if (n_tails > 0) {
    for (size_t i = 0; i < n_tails && !fail; i++) {
      if (tails[i].size == 0) continue;
      out_block *b = tails[i].block;
      /* A reply that will be compressed is re-encoded anyway: copy. */
      if (b && !may_compress) {
        atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
        fail |= nrd_srv_http_add_body_ref(req, tails[i].data, tails[i].size, free_block_ref, b);
      } else {
        fail |= nrd_srv_http_add_body(req, tails[i].data, tails[i].size);
      }
    }
  } else {
    fail |= nrd_srv_http_add_header(req, "Content-Type", "application/json");
  }
  (void)tail_bytes;
  for (size_t k = 0; k < n_extra; k++) free(extra[k]);
  if (extra != extra_small) free(extra);
  if (tails != tails_small) free(tails);
  if (fail) {
    nrd_srv_http_clear_body(req);
    nrd_srv_http_reply_error(req, 500, "out of memory encoding the response");
    return false;
  }
  nrd_srv_http_encode_reply(req);
  return true;
}

/* Encodes and writes the reply, with the trace's send marks. */
static void reply(infer_ctx *c, nrd_srv_http_req *req) {
  nrd_srv_trace_mark(c->trace, "HTTP_SEND_START", 0);
  if (build_reply(c, req)) nrd_srv_http_send(req, 200);
  nrd_srv_trace_mark(c->trace, "HTTP_SEND_END", 0);
}

static void encode_and_send(void *arg) {
  infer_ctx *c = arg;
  nrd_srv_http_req *req = nrd_srv_http_pending_finish(c->loop, &c->pending);
  if (req) reply(c, req);
  ctx_free(c);
}

/* On the core's thread, when the loop sleeps: the reply is written from
 * here, saving the loop a wake-up (nrd_srv_http_pending_claim). False:
 * the loop must do it. */
static bool answer_here(infer_ctx *c) {
  nrd_srv_http_req *req = nrd_srv_http_pending_claim(&c->pending);
  if (req == NULL) return false;
  nrd_srv_http_conn *conn = req->conn;
  nrd_srv_http *h = c->loop->http;
  reply(c, req);
  nrd_srv_http_conn_unclaim(conn);
  ctx_free(c);
  nrd_srv_http_pending_done(h); /* last: the front end may go once nothing is in flight */
  return true;
}

/* ---- request parsing ---------------------------------------------------------- */

typedef struct parse {
  infer_ctx *c;
  const nrd_srv_http_req *req;
  TRITONSERVER_InferenceRequest *ireq;
  const char *model;
  int64_t version;
  const char *body;
  size_t header_len, body_len, cursor; /* cursor: bytes of the tail used */
  const char *header;
  nrd_srv_http_span spans[NRD_SRV_HTTP_MAX_DATA_SPANS];
  size_t n_spans;
  char msg[512];
  int status; /* the reply's status when parsing fails: 400 unless set */
} parse;

#define FAIL(...)                                                                                                      \
  do {                                                                                                                 \
    snprintf(ps->msg, sizeof ps->msg, __VA_ARGS__);                                                                    \
    return -1;                                                                                                         \
  } while (0)

/* Triton's words for a JSON field of the wrong kind (its TritonJson errors,
 * code INTERNAL, so HTTP 500; server ace2c5b9f http_server.cc
 * RETURN_MSG_IF_ERR): "Unable to parse '<field>': attempt to access ...". */
#define NRD_JSON_MISSING "attempt to access non-existing object member"
#define NRD_JSON_NOT_ARRAY "attempt to access JSON non-array as array"
#define NRD_JSON_NOT_STRING "attempt to access JSON non-string as string"
#define NRD_JSON_NOT_UINT "attempt to access JSON non-unsigned-integer as unsigned-integer"
#define NRD_JSON_NOT_BOOL "attempt to access JSON non-boolean as boolean"
#define JFAIL(...)                                                                                                     \
  do {                                                                                                                 \
    ps->status = 500;                                                                                                  \
    FAIL(__VA_ARGS__);                                                                                                 \
  } while (0)

/* The TritonJson error for reading `v` (NULL: absent member `key`) as a
 * string / an array. */
static int fail_string(parse *ps, const char *field, const nrd_srv_json *v, const char *key) {
  if (v == NULL) JFAIL("Unable to parse '%s': " NRD_JSON_MISSING " '%s'", field, key);
  JFAIL("Unable to parse '%s': " NRD_JSON_NOT_STRING, field);
}
static int fail_array(parse *ps, const char *field, const nrd_srv_json *v, const char *key) {
  if (v == NULL) JFAIL("Unable to parse '%s': " NRD_JSON_MISSING " '%s'", field, key);
  JFAIL("Unable to parse '%s': " NRD_JSON_NOT_ARRAY, field);
}

/* Adds a core error's message to ps->msg and deletes it; returns -1. */
/* A core or registry error answers with its code's status, as Triton's
 * front end maps every error (an unknown region is NOT_FOUND: 404). */
static int core_fail(parse *ps, TRITONSERVER_Error *err) {
  snprintf(ps->msg, sizeof ps->msg, "%s", TRITONSERVER_ErrorMessage(err));
  ps->status = nrd_srv_http_status(err);
  TRITONSERVER_ErrorDelete(err);
  return -1;
}

static int push_buf(infer_ctx *c, void *b) {
  void **g = realloc(c->bufs, (c->n_bufs + 1) * sizeof *g);
  if (g == NULL) return -1;
  g[c->n_bufs++] = b;
  c->bufs = g;
  return 0;
}

/* Appends `size` bytes of the binary tail to input `name`, zero copy. */
static int append_binary(parse *ps, const char *name, size_t size) {
  size_t avail = ps->body_len - ps->header_len - ps->cursor;
  if (size > avail)
    FAIL("unexpected size for input '%s', expecting %zu additional bytes for model '%s'", name, size - avail,
         ps->model);
  if (size == 0) {
    TRITONSERVER_Error *err =
        TRITONSERVER_InferenceRequestAppendInputData(ps->ireq, name, NULL, 0, TRITONSERVER_MEMORY_CPU, 0);
    return err ? core_fail(ps, err) : 0;
  }
  TRITONSERVER_Error *err = TRITONSERVER_InferenceRequestAppendInputData(
      ps->ireq, name, ps->body + ps->header_len + ps->cursor, size, TRITONSERVER_MEMORY_CPU, 0);
  int rc = err ? core_fail(ps, err) : 0;
  ps->cursor += size;
  return rc;
}

/* The shared memory parameters of one input or output. */
typedef struct nrd_srv_http_shm_ref {
  const char *region;
  uint64_t offset, byte_size;
} nrd_srv_http_shm_ref;

/* Reads shared_memory_region/_offset/_byte_size from params. Returns 1
 * when they are given (ref filled), 0 when not, -1 on a bad combination. */
static int parse_shm_params(parse *ps, const nrd_srv_json *params, const char *what, const char *name,
                            nrd_srv_http_shm_ref *ref) {
  if (!nrd_srv_json_is_object(params)) return 0;
  const nrd_srv_json *region = nrd_srv_json_get(params, "shared_memory_region");
  const nrd_srv_json *size = nrd_srv_json_get(params, "shared_memory_byte_size");
  const nrd_srv_json *off = nrd_srv_json_get(params, "shared_memory_offset");
  if (region == NULL && size == NULL) {
    if (off) FAIL("%s '%s': 'shared_memory_offset' given without 'shared_memory_region'", what, name);
    return 0;
  }
  if (region == NULL || size == NULL)
    FAIL("%s '%s': 'shared_memory_region' and 'shared_memory_byte_size' must be given together", what, name);
  if (!nrd_srv_json_is_string(region)) FAIL("Unable to parse 'shared_memory_region' of %s '%s'", what, name);
  if (!nrd_srv_json_is_int(size) || nrd_srv_json_int(size) < 0)
    FAIL("Unable to parse 'shared_memory_byte_size' of %s '%s'", what, name);
  if (off && (!nrd_srv_json_is_int(off) || nrd_srv_json_int(off) < 0))
    FAIL("Unable to parse 'shared_memory_offset' of %s '%s'", what, name);
  ref->region = nrd_srv_json_str(region);
  ref->byte_size = (uint64_t)nrd_srv_json_int(size);
  ref->offset = off ? (uint64_t)nrd_srv_json_int(off) : 0;
  return 1;
}

/* Input data read in place from a registered region (zero copy). */
static int append_shm(parse *ps, const char *name, const nrd_srv_http_shm_ref *ref) {
  infer_ctx *c = ps->c;
  nrd_srv_shm_region **g = realloc(c->regions, (c->n_regions + 1) * sizeof *g);
  if (g == NULL) FAIL("out of memory");
  c->regions = g;
  void *addr = NULL;
  TRITONSERVER_Error *err =
      nrd_srv_shm_acquire(c->loop->http->shm, ref->region, ref->offset, ref->byte_size, &g[c->n_regions], &addr);
  if (err) return core_fail(ps, err);
  c->n_regions++;
  TRITONSERVER_MemoryType mt;
  int64_t mt_id;
  nrd_srv_shm_region_memory(g[c->n_regions - 1], &mt, &mt_id); /* GPU for a CUDA region */
  err = TRITONSERVER_InferenceRequestAppendInputData(ps->ireq, name, addr, (size_t)ref->byte_size, mt, mt_id);
  return err ? core_fail(ps, err) : 0;
}

/* Inference-Header-Content-Length: 0: the whole body is the data of the
 * model's only input, whose name, datatype and shape the core deduces from
 * the configuration (a BYTES input: the body is its one element); every
 * output is returned in binary. */
static int parse_raw(parse *ps) {
  static const char kRawName[] = "raw_input";
  size_t limit = ps->c->loop->http->max_input;
  if (ps->body_len > limit)
    FAIL("Raw input has a byte_size (%zu bytes) that exceeds the maximum allowed value of %zu bytes. Use "
         "--http-max-input-size to increase the limit.",
         ps->body_len, limit);
  TRITONSERVER_Error *err = TRITONSERVER_InferenceRequestAddRawInput(ps->ireq, kRawName);
  if (err) return core_fail(ps, err);
  ps->header_len = 0;
  ps->c->binary_default = true;
  return append_binary(ps, kRawName, ps->body_len);
}

static const nrd_srv_http_span *find_span(const parse *ps, size_t index) {
  for (size_t i = 0; i < ps->n_spans; i++)
    if (ps->spans[i].index == index) return &ps->spans[i];
  return NULL;
}

/* Triton's rule for an input's content (server ace2c5b9f http_server.cc
 * ValidateInputContentType): exactly one of 'data', 'binary_data_size' and
 * 'shared_memory_region', checked before anything else of the input. */
static int check_content(parse *ps, const nrd_srv_json *in, size_t index) {
  const nrd_srv_json *params = nrd_srv_json_is_object(in) ? nrd_srv_json_get(in, "parameters") : NULL;
  bool data = find_span(ps, index) != NULL || (nrd_srv_json_is_object(in) && nrd_srv_json_get(in, "data") != NULL);
  bool binary = nrd_srv_json_is_object(params) && nrd_srv_json_get(params, "binary_data_size") != NULL;
  bool shm = nrd_srv_json_is_object(params) && nrd_srv_json_get(params, "shared_memory_region") != NULL;
  if ((int)data + (int)binary + (int)shm == 1) return 0;
  FAIL("Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', "
       "'shared_memory_region' in 'parameters'. But%s%s%s%s",
       data || binary || shm ? " set" : " no field is set", data ? " 'data'" : "", binary ? " 'binary_data_size'" : "",
       shm ? " 'shared_memory_region'" : "");
}

static int parse_input(parse *ps, const nrd_srv_json *in, size_t index) {
  if (check_content(ps, in, index) != 0) return -1;
  const nrd_srv_json *jname = nrd_srv_json_is_object(in) ? nrd_srv_json_get(in, "name") : NULL;
  if (!nrd_srv_json_is_string(jname)) return fail_string(ps, "name", jname, "name");
  const char *name = nrd_srv_json_str(jname);
  const nrd_srv_json *jdt = nrd_srv_json_get(in, "datatype");
  if (!nrd_srv_json_is_string(jdt)) return fail_string(ps, "datatype", jdt, "datatype");
  TRITONSERVER_DataType dt = TRITONSERVER_StringToDataType(nrd_srv_json_str(jdt));
  const nrd_srv_json *jshape = nrd_srv_json_get(in, "shape");
  if (!nrd_srv_json_is_array(jshape)) return fail_array(ps, "shape", jshape, "shape");
  size_t dims = nrd_srv_json_size(jshape);
  for (size_t d = 0; d < dims; d++) {
    const nrd_srv_json *v = nrd_srv_json_at(jshape, d);
    if (!nrd_srv_json_is_int(v) || nrd_srv_json_int(v) < 0)
      JFAIL("Unable to parse 'shape': " NRD_JSON_NOT_UINT " (input '%s', dimension %zu)", name, d);
  }
  /* Triton finds this out when it reads the data (ReadDataFromJson). */
  if (dt == TRITONSERVER_TYPE_INVALID) FAIL("invalid datatype for input %s", name);
  if (dims > 64) FAIL("input '%s' has too many dimensions (%zu)", name, dims);
  int64_t shape[64];
  /* Elements as Triton counts them (server ace2c5b9f common.cc
   * GetElementCount): none for an empty shape or a dimension of 0. */
  uint64_t count = dims ? 1 : 0;
  bool overflow = false;
  for (size_t d = 0; d < dims; d++) {
    shape[d] = nrd_srv_json_int(nrd_srv_json_at(jshape, d));
    if (shape[d] == 0)
      count = 0;
    else if (count > (uint64_t)INT64_MAX / (uint64_t)shape[d])
      overflow = true;
    else
      count *= (uint64_t)shape[d];
  }
  if (count == 0) overflow = false;
  TRITONSERVER_Error *err = TRITONSERVER_InferenceRequestAddInput(ps->ireq, name, dt, shape, dims);
  if (err) return core_fail(ps, err);

  const nrd_srv_json *params = nrd_srv_json_get(in, "parameters");
  const nrd_srv_json *bsize = nrd_srv_json_is_object(params) ? nrd_srv_json_get(params, "binary_data_size") : NULL;
  bool has_data = find_span(ps, index) != NULL || nrd_srv_json_get(in, "data") != NULL;
  nrd_srv_http_shm_ref shm;
  int use_shm = parse_shm_params(ps, params, "input", name, &shm);
  if (use_shm < 0) return -1;
  if (use_shm) {
    if (has_data || bsize) FAIL("input '%s' has shared memory parameters and also data", name);
    return append_shm(ps, name, &shm);
  }
  if (bsize) {
    if (!nrd_srv_json_is_int(bsize) || nrd_srv_json_int(bsize) < 0)
      JFAIL("Unable to parse 'binary_data_size': " NRD_JSON_NOT_UINT " (input '%s')", name);
    if (has_data) FAIL("input '%s' has both 'data' and 'binary_data_size'", name);
    return append_binary(ps, name, (size_t)nrd_srv_json_int(bsize));
  }
  const nrd_srv_http_span *span = find_span(ps, index);
  /* Triton appends no data for a shape of no elements, whatever 'data'
   * holds (server ace2c5b9f ParseJsonTritonIO). */
  if (count == 0) {
    err = TRITONSERVER_InferenceRequestAppendInputData(ps->ireq, name, NULL, 0, TRITONSERVER_MEMORY_CPU, 0);
    return err ? core_fail(ps, err) : 0;
  }
  if (span == NULL) {
    if (nrd_srv_json_get(in, "data")) JFAIL("Unable to parse 'data': " NRD_JSON_NOT_ARRAY " (input '%s')", name);
    FAIL("input '%s' has neither 'data' nor 'binary_data_size'", name);
  }
  if (overflow) {
    char text[64 * 22 + 3];
    size_t o = 0;
    text[o++] = '[';
    for (size_t d = 0; d < dims; d++)
      o += (size_t)snprintf(text + o, sizeof text - o, d ? ",%lld" : "%lld", (long long)shape[d]);
    snprintf(text + o, sizeof text - o, "]");
    FAIL("invalid shape for input '%s': shape %.300s causes total element count to exceed maximum size of %lld", name,
         text, (long long)INT64_MAX);
  }
  size_t esize = dt == TRITONSERVER_TYPE_BYTES ? 0 : TRITONSERVER_DataTypeByteSize(dt);
  if (esize > 1 && count > (uint64_t)INT64_MAX / esize)
    FAIL("byte size overflow for input '%s': element count (%llu) * data type size (%zu) exceeds maximum allowed size "
         "(%lld)",
         name, (unsigned long long)count, esize, (long long)INT64_MAX);
  if (esize && count * esize > ps->c->loop->http->max_input)
    FAIL("JSON input '%s' has a byte_size (%llu bytes) that exceeds the maximum allowed value of %llu bytes. Use "
         "--http-max-input-size to increase the limit.",
         name, (unsigned long long)(count * esize), (unsigned long long)ps->c->loop->http->max_input);
  void *buf = NULL;
  size_t size = 0;
  int rc = nrd_srv_http_json_parse_data(ps->header + span->start, span->len, dt, count, name, &buf, &size, ps->msg,
                                        sizeof ps->msg);
  if (rc != 0) {
    /* Text RapidJSON would refuse (a bad escape in a string) gets
     * Triton's parse error; its TritonJson and shape errors are 500 too. */
    if (rc == -2)
      ps->status = 500;
    else if (nrd_srv_json_error(ps->header, ps->header_len, ps->msg, sizeof ps->msg) == 0)
      ps->status = nrd_srv_json_error_status(ps->msg);
    return -1;
  }
  if (push_buf(ps->c, buf) != 0) {
    free(buf);
    FAIL("out of memory");
  }
  err = TRITONSERVER_InferenceRequestAppendInputData(ps->ireq, name, buf, size, TRITONSERVER_MEMORY_CPU, 0);
  return err ? core_fail(ps, err) : 0;
}

static int parse_outputs(parse *ps, const nrd_srv_json *outs) {
  if (outs == NULL) return 0;
  if (!nrd_srv_json_is_array(outs)) JFAIL("Unable to parse 'outputs': " NRD_JSON_NOT_ARRAY);
  size_t n = nrd_srv_json_size(outs);
  if (n == 0) return 0;
  /* malloc and memset, not calloc: glibc's calloc skips the per-thread
   * cache, and these are made once per request. */
  ps->c->outs = n <= SIZE_MAX / sizeof *ps->c->outs ? malloc(n * sizeof *ps->c->outs) : NULL;
  if (ps->c->outs == NULL) FAIL("out of memory");
  memset(ps->c->outs, 0, n * sizeof *ps->c->outs);
  for (size_t i = 0; i < n; i++) {
    const nrd_srv_json *o = nrd_srv_json_at(outs, i);
    const nrd_srv_json *jname = nrd_srv_json_is_object(o) ? nrd_srv_json_get(o, "name") : NULL;
    if (!nrd_srv_json_is_string(jname)) return fail_string(ps, "name", jname, "name");
    const char *name = nrd_srv_json_str(jname);
    req_output *ro = &ps->c->outs[ps->c->n_outs];
    ro->binary = -1;
    if ((ro->name = strdup(name)) == NULL) FAIL("out of memory");
    ps->c->n_outs++;
    const nrd_srv_json *params = nrd_srv_json_get(o, "parameters");
    /* Triton looks its keys up in an object only: other 'parameters' set none. */
    if (!nrd_srv_json_is_object(params)) params = NULL;
    const nrd_srv_json *b = params ? nrd_srv_json_get(params, "binary_data") : NULL;
    if (b) {
      if (!nrd_srv_json_is_bool(b)) JFAIL("Unable to parse 'binary_data': " NRD_JSON_NOT_BOOL " (output '%s')", name);
      ro->binary = nrd_srv_json_is_true(b);
    }
    const nrd_srv_json *cls = params ? nrd_srv_json_get(params, "classification") : NULL;
    if (cls) {
      if (!nrd_srv_json_is_int(cls) || nrd_srv_json_int(cls) < 0)
        JFAIL("Unable to set 'classification': " NRD_JSON_NOT_UINT " (output '%s')", name);
      if (nrd_srv_json_int(cls) > UINT32_MAX)
        FAIL("Unable to set 'classification': output '%s' asks for more than 4294967295 classes", name);
      ro->class_count = (uint32_t)nrd_srv_json_int(cls);
    }
    nrd_srv_http_shm_ref shm;
    int use_shm = parse_shm_params(ps, params, "output", name, &shm);
    if (use_shm < 0) return -1;
    if (use_shm && ro->class_count > 0)
      FAIL("output '%s' can't set both 'shared_memory_region' and 'classification'", name);
    if (use_shm) {
      TRITONSERVER_Error *serr =
          nrd_srv_shm_acquire(ps->c->loop->http->shm, shm.region, shm.offset, shm.byte_size, &ro->shm, &ro->shm_addr);
      if (serr) return core_fail(ps, serr);
      if ((ro->shm_name = strdup(shm.region)) == NULL) FAIL("out of memory");
      ro->shm_offset = shm.offset;
      ro->shm_size = shm.byte_size;
    }
    TRITONSERVER_Error *err = TRITONSERVER_InferenceRequestAddRequestedOutput(ps->ireq, name);
    if (err) return core_fail(ps, err);
  }
  return 0;
}

static int parse_parameters(parse *ps, const nrd_srv_json *params) {
  if (params == NULL) return 0;
  if (!nrd_srv_json_is_object(params)) JFAIL("failed to get request params.: attempt to get members for non-object");
  uint32_t flags = 0;
  TRITONSERVER_Error *err = NULL;
  for (size_t i = 0; i < params->n; i++) {
    const char *key = params->u.members[i].key;
    const nrd_srv_json *v = &params->u.members[i].value;
    if (strcmp(key, "sequence_id") == 0) {
      if (nrd_srv_json_is_int(v) && nrd_srv_json_int(v) >= 0)
        err = TRITONSERVER_InferenceRequestSetCorrelationId(ps->ireq, (uint64_t)nrd_srv_json_int(v));
      else if (nrd_srv_json_is_string(v))
        err = TRITONSERVER_InferenceRequestSetCorrelationIdString(ps->ireq, nrd_srv_json_str(v));
      else
        JFAIL("Unable to parse 'sequence_id': " NRD_JSON_NOT_STRING);
    } else if (strcmp(key, "sequence_start") == 0 || strcmp(key, "sequence_end") == 0) {
      if (!nrd_srv_json_is_bool(v)) JFAIL("Unable to parse '%s': " NRD_JSON_NOT_BOOL, key);
      if (nrd_srv_json_is_true(v))
        flags |= key[9] == 's' ? TRITONSERVER_REQUEST_FLAG_SEQUENCE_START : TRITONSERVER_REQUEST_FLAG_SEQUENCE_END;
    } else if (strcmp(key, "priority") == 0) {
      if (!nrd_srv_json_is_int(v) || nrd_srv_json_int(v) < 0) JFAIL("Unable to parse 'priority': " NRD_JSON_NOT_UINT);
      err = TRITONSERVER_InferenceRequestSetPriorityUInt64(ps->ireq, (uint64_t)nrd_srv_json_int(v));
    } else if (strcmp(key, "timeout") == 0) {
      if (!nrd_srv_json_is_int(v) || nrd_srv_json_int(v) < 0) JFAIL("Unable to parse 'timeout': " NRD_JSON_NOT_UINT);
      err = TRITONSERVER_InferenceRequestSetTimeoutMicroseconds(ps->ireq, (uint64_t)nrd_srv_json_int(v));
    } else if (strcmp(key, "binary_data_output") == 0) {
      if (!nrd_srv_json_is_bool(v)) JFAIL("Unable to parse 'binary_data_output': " NRD_JSON_NOT_BOOL);
      ps->c->binary_default = nrd_srv_json_is_true(v);
    } else if (strncmp(key, "triton_", 7) == 0) {
      /* Triton keeps the prefix for itself; over HTTP no such key is let
       * through (69987b7b0). */
      FAIL("parameter keys starting with 'triton_' are reserved for Triton usage and should not be specified.");
    } else if (nrd_srv_json_is_string(v)) {
      err = TRITONSERVER_InferenceRequestSetStringParameter(ps->ireq, key, nrd_srv_json_str(v));
    } else if (nrd_srv_json_is_int(v)) {
      err = TRITONSERVER_InferenceRequestSetIntParameter(ps->ireq, key, nrd_srv_json_int(v));
    } else if (nrd_srv_json_is_bool(v)) {
      err = TRITONSERVER_InferenceRequestSetBoolParameter(ps->ireq, key, nrd_srv_json_is_true(v));
    } else if (nrd_srv_json_is_real(v)) {
      err = TRITONSERVER_InferenceRequestSetDoubleParameter(ps->ireq, key, nrd_srv_json_real(v));
    } else {
      FAIL("parameter '%s' has invalid type. It should be either 'int', 'bool', or 'string'.", key);
    }
    if (err) return core_fail(ps, err);
  }
  if (flags && (err = TRITONSERVER_InferenceRequestSetFlags(ps->ireq, flags))) return core_fail(ps, err);
  return 0;
}

/* Whether needle (nlen > anchor) occurs in h. The search jumps between the
 * places of needle[anchor], so that should be a character rare in
 * inference headers: this is several times quicker than memmem there. */
static bool contains(const char *h, size_t n, const char *needle, size_t nlen, size_t anchor) {
  if (n < nlen) return false;
  const char *p = h + anchor, *end = h + (n - nlen) + anchor + 1;
  while (p < end) {
    const char *q = memchr(p, needle[anchor], (size_t)(end - p));
    if (q == NULL) return false;
    if (memcmp(q - anchor, needle, nlen) == 0) return true;
    p = q + 1;
  }
  return false;
}

/* Parses the whole request into ps->ireq. Returns 0 or -1 with ps->msg. */
static int parse_request(parse *ps) {
  const char *hlen = nrd_srv_http_header_known(ps->req, NRD_SRV_H_INFERENCE_HEADER_CONTENT_LENGTH);
  bool bad_type = false;
  const nrd_srv_http *h = ps->c->loop->http;
  const char *framed_len = nrd_srv_http_framed_header_size(h, ps->req, &bad_type);
  if (bad_type)
    FAIL("expect MIME type for binary data starts with '%s', got: %.200s", h->binary_mime,
         nrd_srv_http_header_get(ps->req, "Content-Type"));
  if (framed_len) hlen = framed_len;
  ps->header_len = ps->body_len;
  if (hlen) {
    /* Read as Triton reads it, with std::stoi (server 2d64d2deb,
     * 10f2a691a): leading blanks, a sign, digits, anything after ignored;
     * no digits, or a value outside int32, has its own sentence. */
    const char *what = framed_len ? "inference header size" : "Inference-Header-Content-Length";
    long long v = 0;
    size_t nd = 0;
    errno = 0;
    /* The usual value, a few plain digits, without strtoll's locale and
     * sign handling (about 140 instructions a request); the rest below. */
    while (nd < 9 && hlen[nd] >= '0' && hlen[nd] <= '9') v = v * 10 + (hlen[nd++] - '0');
    if (nd == 0 || hlen[nd] != '\0') {
      char *end = NULL;
      v = strtoll(hlen, &end, 10);
      if (end == hlen) FAIL("Unable to parse %s, got: %.40s", what, hlen);
    }
    if (errno == ERANGE || v < INT32_MIN || v > INT32_MAX) {
      if (framed_len) FAIL("Unable to parse inference header size, value is out of range, got: %.40s", hlen);
      FAIL("Unable to parse Inference-Header-Content-Length, value is out of range [ %d, %d ], got: %.40s", INT32_MIN,
           INT32_MAX, hlen);
    }
    if (v < 0 || (unsigned long long)v > ps->body_len)
      FAIL("inference header size should be in range (0, %zu), got: %.40s", ps->body_len, hlen);
    ps->header_len = (size_t)v;
  }
  /* No JSON header (an empty body too): the body is the raw input. */
  if (ps->header_len == 0) return parse_raw(ps);
  ps->header = ps->body;
  char *stripped = NULL;
  size_t stripped_len = 0;
  /* Without the key "data" anywhere (binary requests) there is nothing to
   * cut out, so the text goes to the parser as it is. */
  bool has_data = contains(ps->header, ps->header_len, "\"data\"", 6, 1);
  if (has_data && nrd_srv_http_json_cut_data(ps->header, ps->header_len, ps->spans, &ps->n_spans, &stripped,
                                             &stripped_len, ps->msg, sizeof ps->msg) != 0)
    return -1;
  char jerr[200];
  /* A header is usually the same bytes as this client's last one (with
   * "data" arrays cut out, whatever their values): its document is kept
   * per loop and reused. Nothing may keep a pointer into the document
   * past this function. */
  const nrd_srv_json *root = nrd_srv_json_memo_parse(&ps->c->loop->headers, has_data ? stripped : ps->header,
                                                     has_data ? stripped_len : ps->header_len, jerr, sizeof jerr);
  free(stripped);
  if (root == NULL) {
    /* Triton's words where RapidJSON would refuse the text too (its parse
     * errors are INTERNAL: 500); ours otherwise. */
    if (nrd_srv_json_error(ps->header, ps->header_len, ps->msg, sizeof ps->msg) == 0) {
      ps->status = nrd_srv_json_error_status(ps->msg);
      return -1;
    }
    FAIL("failed to parse the request JSON buffer: %s", jerr);
  }
  if (!nrd_srv_json_is_object(root)) {
    if (nrd_srv_json_error(ps->header, ps->header_len, ps->msg, sizeof ps->msg) == 0) { /* too deep */
      ps->status = nrd_srv_json_error_status(ps->msg);
      return -1;
    }
    /* Triton looks up 'id' and 'parameters' (absent in a non-object), then
     * 'inputs'. */
    return fail_array(ps, "inputs", NULL, "inputs");
  }
  const nrd_srv_json *id = nrd_srv_json_get(root, "id");
  if (id) {
    if (!nrd_srv_json_is_string(id)) JFAIL("Unable to parse 'id': " NRD_JSON_NOT_STRING);
    TRITONSERVER_Error *err = TRITONSERVER_InferenceRequestSetId(ps->ireq, nrd_srv_json_str(id));
    if (err) {
      core_fail(ps, err);
      return -1;
    }
  }
  if (parse_parameters(ps, nrd_srv_json_get(root, "parameters")) != 0) return -1;
  const nrd_srv_json *inputs = nrd_srv_json_get(root, "inputs");
  if (!nrd_srv_json_is_array(inputs)) return fail_array(ps, "inputs", inputs, "inputs");
  for (size_t i = 0; i < nrd_srv_json_size(inputs); i++)
    if (parse_input(ps, nrd_srv_json_at(inputs, i), i) != 0) return -1;
  if (ps->header_len + ps->cursor != ps->body_len) FAIL("unexpected additional input data for model '%s'", ps->model);
  return parse_outputs(ps, nrd_srv_json_get(root, "outputs")) != 0 ? -1 : 0;
}

TRITONSERVER_Error *nrd_srv_http_forward_headers(const nrd_srv_http *h, const nrd_srv_http_req *req,
                                                 TRITONSERVER_InferenceRequest *ireq) {
  if (!h->header_forward) return NULL;
  for (size_t i = 0; i < req->n_headers; i++) {
    const nrd_srv_http_header *hd = &req->headers[i];
    size_t len = strlen(hd->name);
    if (!nrd_srv_header_forward_matches(h->header_forward, hd->name, len)) continue;
    if (nrd_srv_header_forward_reserved(hd->name, len)) {
      /* Triton 26.x (69987b7b0): a reserved name never becomes a parameter. */
      char msg[400];
      snprintf(msg, sizeof msg, NRD_SRV_HEADER_RESERVED_FMT, (int)(len > 200 ? 200 : len), hd->name);
      return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, msg);
    }
    TRITONSERVER_Error *err = TRITONSERVER_InferenceRequestSetStringParameter(ireq, hd->name, hd->value);
    if (err) return err;
  }
  return NULL;
}

void nrd_srv_http_infer(nrd_srv_http_loop *loop, nrd_srv_http_req *req, const char *model, int64_t version) {
  nrd_srv_http *h = loop->http;
  uint32_t txn = 0;
  TRITONSERVER_Error *err = TRITONSERVER_ServerModelTransactionProperties(h->server, model, version, &txn, NULL);
  if (err) return nrd_srv_http_reply_tserr(req, err);
  if (txn & TRITONSERVER_TXN_DECOUPLED)
    return nrd_srv_http_reply_error(req, 501,
                                    "HTTP end point doesn't support models with decoupled transaction policy");
  char dmsg[200];
  int dstatus = nrd_srv_http_decode_body(req, h->max_input, dmsg, sizeof dmsg);
  if (dstatus) return nrd_srv_http_reply_error(req, dstatus, dmsg);

  infer_ctx *c = calloc(1, sizeof *c);
  if (c == NULL) return nrd_srv_http_reply_error(req, 500, "out of memory");
  c->loop = loop;
  pthread_mutex_init(&c->mu, NULL);
  atomic_init(&c->remaining, 2);
  c->pending.on_disconnect = on_disconnect;
  err = TRITONSERVER_InferenceRequestNew(&c->ireq, h->server, model, version);
  if (err) {
    c->ireq = NULL;
    ctx_free(c);
    return reply_infer_failed(req, NULL, NULL, err);
  }
  parse ps = {.c = c, .ireq = c->ireq, .model = model, .version = version, .req = req};
  ps.body = nrd_srv_http_body(req, &ps.body_len);
  ps.msg[0] = '\0';
  if (parse_request(&ps) != 0) {
    log_infer_failed(c->ireq, NULL, ps.msg);
    ctx_free(c);
    return nrd_srv_http_reply_error(req, ps.status ? ps.status : 400, ps.msg);
  }
  if ((err = nrd_srv_http_forward_headers(h, req, c->ireq))) {
    log_infer_failed(c->ireq, NULL, TRITONSERVER_ErrorMessage(err));
    ctx_free(c);
    return nrd_srv_http_reply_tserr(req, err);
  }
  if ((err = TRITONSERVER_InferenceRequestSetReleaseCallback(c->ireq, on_release, c)) ||
      (err = TRITONSERVER_InferenceRequestSetResponseCallback(c->ireq, h->allocator, c, on_response, c))) {
    ctx_free(c);
    return nrd_srv_http_reply_tserr(req, err);
  }
  nrd_srv_http_pending_add(loop, &c->pending, req);
  TRITONSERVER_InferenceRequest *ireq = c->ireq;
  c->trace = nrd_srv_tracer_sample(
      h->tracer, model, nrd_srv_tracer_active(h->tracer) ? nrd_srv_http_header_get(req, "traceparent") : NULL);
  if (c->trace && req->recv_start_ns) {
    nrd_srv_trace_mark(c->trace, "HTTP_RECV_START", req->recv_start_ns);
    nrd_srv_trace_mark(c->trace, "HTTP_RECV_END", req->recv_end_ns);
  }
  err = TRITONSERVER_ServerInferAsync(h->server, ireq, nrd_srv_trace_core(c->trace));
  if (err) {
    /* No callback will fire: the request is still ours. */
    nrd_srv_http_req *r = nrd_srv_http_pending_finish(loop, &c->pending);
    log_infer_failed(ireq, NULL, TRITONSERVER_ErrorMessage(err));
    ctx_free(c);
    if (r)
      nrd_srv_http_reply_tserr(r, err);
    else
      TRITONSERVER_ErrorDelete(err);
  }
}
