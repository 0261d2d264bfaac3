/*
 * Execute for the pytorch backend: requests whose inputs agree in shape
 * (apart from the batch dimension, or entirely for ragged inputs) run
 * together in one forward(); each request gets its rows of every output it
 * asked for, and each state output becomes the sequence's next state.
 *
 * Copies: a single request's tensors go to libtorch without a copy (tensors
 * over the request's buffers); several requests are gathered into one
 * buffer. BYTES inputs become a List[str] (copied, as libtorch's strings
 * own their bytes). Outputs are copied once, into the buffers the front
 * end's allocator gives.
 */
#include <stdlib.h>
#include <string.h>

#include "nereid/backend_utils.h"
#include "pt_model.h"

#define BACKEND "pytorch"

/* One request of an Execute call. */
typedef struct slot {
  TRITONBACKEND_Request *request;
  TRITONBACKEND_Response *response; /* NULL once answered with an error */
  int64_t rows; /* batch rows; 1 without batching */
  uint64_t compute_start, compute_end;
} slot;

/* What one forward() holds until it is done. */
typedef struct run {
  pt_args *args;
  uint32_t inputs;
  nrd_bu_batch_input *data; /* per request input: the gathered bytes */
  uint32_t **lengths; /* per input: BYTES element lengths, or NULL */
  const char ***string_ptrs; /* per input: BYTES element pointers */
  void **batch_data; /* per model input: a batch input's values, or NULL */
  size_t batch_count;
} run;

static TRITONSERVER_Error *oom(void) {
  return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, BACKEND ": out of memory");
}

/* Answers one request with 'err' (kept by the caller). */
static void fail_slot(slot *s, TRITONSERVER_Error *err) {
  if (s->response == NULL) return;
  nrd_bu_error_log_and_delete(TRITONBACKEND_ResponseSend(s->response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, err),
                              BACKEND ": cannot send an error response");
  s->response = NULL;
}

/* Answers every request of a group with 'err', which it deletes. */
static void fail_group(slot *group, size_t n, TRITONSERVER_Error *err) {
  for (size_t i = 0; i < n; i++) fail_slot(&group[i], err);
  TRITONSERVER_ErrorDelete(err);
}

static bool output_requested(TRITONBACKEND_Request *request, const char *name) {
  uint32_t count = 0;
  TRITONSERVER_Error *err = TRITONBACKEND_RequestOutputCount(request, &count);
  if (err != NULL) {
    TRITONSERVER_ErrorDelete(err);
    return false;
  }
  for (uint32_t i = 0; i < count; i++) {
    const char *n = NULL;
    err = TRITONBACKEND_RequestOutputName(request, i, &n);
    if (err != NULL) {
      TRITONSERVER_ErrorDelete(err);
      continue;
    }
    if (strcmp(n, name) == 0) return true;
  }
  return false;
}

/* ---- grouping ------------------------------------------------------------------ */

/* The batch rows of a request: the first dimension of its first input, as
 * Triton's pytorch backend reads them. */
static TRITONSERVER_Error *request_rows(const pt_model *m, slot *s) {
  s->rows = 1;
  if (m->max_batch_size <= 0) return NULL;
  TRITONBACKEND_Input *input = NULL;
  const int64_t *shape = NULL;
  uint32_t dims = 0;
  const char *name = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_RequestInputByIndex(s->request, 0, &input);
  if (err == NULL) err = TRITONBACKEND_InputProperties(input, &name, NULL, &shape, &dims, NULL, NULL);
  if (err != NULL) return err;
  if (dims == 0 || shape[0] < 0) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, BACKEND ": model '%s': input '%s' has no batch dimension",
                             m->name, name);
  }
  s->rows = shape[0];
  return NULL;
}

/* Whether request 'b' can run in one forward() with 'a': the same inputs,
 * datatypes and shapes apart from the first dimension (ragged inputs are
 * flattened, so their shapes need not agree). */
static bool compatible(const pt_model *m, TRITONBACKEND_Request *a, TRITONBACKEND_Request *b) {
  uint32_t na = 0, nb = 0;
  TRITONSERVER_Error *ea = TRITONBACKEND_RequestInputCount(a, &na);
  TRITONSERVER_Error *eb = TRITONBACKEND_RequestInputCount(b, &nb);
  bool same = ea == NULL && eb == NULL && na == nb;
  TRITONSERVER_ErrorDelete(ea);
  TRITONSERVER_ErrorDelete(eb);
  for (uint32_t k = 0; same && k < na; k++) {
    TRITONBACKEND_Input *ia = NULL, *ib = NULL;
    const char *name = NULL;
    TRITONSERVER_DataType da, db;
    const int64_t *sa = NULL, *sb = NULL;
    uint32_t da_n = 0, db_n = 0;
    ea = TRITONBACKEND_RequestInputByIndex(a, k, &ia);
    if (ea == NULL) ea = TRITONBACKEND_InputProperties(ia, &name, &da, &sa, &da_n, NULL, NULL);
    eb = ea == NULL ? TRITONBACKEND_RequestInput(b, name, &ib) : NULL;
    if (ea == NULL && eb == NULL) eb = TRITONBACKEND_InputProperties(ib, NULL, &db, &sb, &db_n, NULL, NULL);
    same = ea == NULL && eb == NULL && da == db;
    TRITONSERVER_ErrorDelete(ea);
    TRITONSERVER_ErrorDelete(eb);
    const pt_io *io = same ? pt_model_input(m, name) : NULL;
    if (!same || (io != NULL && io->ragged)) continue;
    same = da_n == db_n;
    for (uint32_t d = 1; same && d < da_n; d++) same = sa[d] == sb[d];
  }
  return same;
}

/* ---- inputs ---------------------------------------------------------------------- */

/* Splits Triton's BYTES encoding (4-byte little-endian length, then the
 * bytes, per element) into pointers and lengths over 'data'. */
static TRITONSERVER_Error *split_strings(const char *model, const char *name, const char *data, uint64_t size,
                                         int64_t elements, const char ***ptrs, uint32_t **lens) {
  *ptrs = calloc(elements > 0 ? (size_t)elements : 1, sizeof **ptrs);
  *lens = calloc(elements > 0 ? (size_t)elements : 1, sizeof **lens);
  if (*ptrs == NULL || *lens == NULL) return oom();
  uint64_t at = 0;
  int64_t n = 0;
  while (at < size && n < elements) {
    uint32_t len = 0;
    if (size - at < 4) break;
    memcpy(&len, data + at, 4);
    at += 4;
    if (size - at < len) {
      at = size + 1;
      break;
    }
    (*ptrs)[n] = data + at;
    (*lens)[n++] = len;
    at += len;
  }
  if (at != size || n != elements) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             BACKEND ": model '%s': input '%s': BYTES data does not hold exactly %lld "
                                     "length-prefixed elements",
                             model, name, (long long)elements);
  }
  return NULL;
}

static void run_free(run *r) {
  pt_args_free(r->args);
  for (uint32_t k = 0; k < r->inputs; k++) {
    if (r->data != NULL) nrd_bu_batch_input_release(&r->data[k]);
    if (r->lengths != NULL) free(r->lengths[k]);
    if (r->string_ptrs != NULL) free((void *)r->string_ptrs[k]);
  }
  for (size_t k = 0; k < r->batch_count; k++) free(r->batch_data[k]);
  free(r->batch_data);
  free(r->data);
  free(r->lengths);
  free(r->string_ptrs);
  memset(r, 0, sizeof *r);
}

/* Sets forward()'s argument for input 'k' of the group's requests. */
static TRITONSERVER_Error *make_input(const pt_instance *inst, TRITONBACKEND_Request **reqs, size_t n,
                                      int64_t total_rows, uint32_t k, run *r) {
  const pt_model *m = inst->model;
  TRITONBACKEND_Input *input = NULL;
  const char *name = NULL;
  TRITONSERVER_DataType dt;
  const int64_t *shape = NULL;
  uint32_t dims = 0;
  TRITONSERVER_Error *err = TRITONBACKEND_RequestInputByIndex(reqs[0], k, &input);
  if (err == NULL) err = TRITONBACKEND_InputProperties(input, &name, &dt, &shape, &dims, NULL, NULL);
  if (err != NULL) return err;
  const pt_io *io = pt_model_input(m, name);
  if (io == NULL) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, BACKEND ": model '%s' has no input '%s'", m->name, name);
  }
  int slot_index = inst->arg_index[io - m->inputs];
  /* Elements of the whole batch, per request summed. */
  int64_t elements = 0;
  for (size_t i = 0; i < n; i++) {
    TRITONBACKEND_Input *in = NULL;
    const int64_t *s = NULL;
    uint32_t d = 0;
    err = TRITONBACKEND_RequestInput(reqs[i], name, &in);
    if (err == NULL) err = TRITONBACKEND_InputProperties(in, NULL, NULL, &s, &d, NULL, NULL);
    if (err != NULL) return err;
    int64_t e = nrd_bu_shape_elements(s, d);
    if (e < 0) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, BACKEND ": model '%s': input '%s' has a bad shape",
                               m->name, name);
    }
    elements += e;
  }
  err = nrd_bu_batch_input_gather(reqs, (uint32_t)n, name, NULL, 0, &r->data[k]);
  if (err != NULL) return err;
  const nrd_bu_batch_input *bi = &r->data[k];
  if (dt == TRITONSERVER_TYPE_BYTES) {
    err = split_strings(m->name, name, bi->data, bi->byte_size, elements, &r->string_ptrs[k], &r->lengths[k]);
    if (err == NULL) {
      err = pt_args_set_strings(r->args, (size_t)slot_index, name, r->string_ptrs[k], r->lengths[k], (size_t)elements);
    }
    return err;
  }
  int64_t batch_shape[64];
  uint32_t batch_dims = dims;
  if (io->ragged) {
    batch_shape[0] = elements;
    batch_dims = 1;
  } else {
    if (dims > 64) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, BACKEND ": model '%s': input '%s' has %u dimensions",
                               m->name, name, dims);
    }
    memcpy(batch_shape, shape, dims * sizeof *shape);
    if (m->max_batch_size > 0 && dims > 0) batch_shape[0] = total_rows;
  }
  uint64_t want = (uint64_t)elements * TRITONSERVER_DataTypeByteSize(dt);
  if (bi->byte_size != want) {
    char buf[128];
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             BACKEND ": model '%s': input '%s' holds %llu bytes, its shape %s of %s needs %llu",
                             m->name, name, (unsigned long long)bi->byte_size,
                             nrd_bu_shape_string(shape, dims, buf, sizeof buf), TRITONSERVER_DataTypeString(dt),
                             (unsigned long long)want);
  }
  return pt_args_set_tensor(r->args, (size_t)slot_index, name, bi->data, dt, batch_shape, batch_dims);
}

/* Sets forward()'s argument for batch input 'k' of the model, made from
 * its source input's shapes as Triton's collector makes it. */
static TRITONSERVER_Error *make_batch_input(const pt_instance *inst, TRITONBACKEND_Request **reqs, size_t n, size_t k,
                                            run *r) {
  const pt_io *io = &inst->model->inputs[k];
  int64_t shape[2];
  uint32_t dims = 0;
  size_t bytes = 0;
  TRITONSERVER_Error *err = nrd_bu_batch_input_make(reqs, (uint32_t)n, io->batch_kind, io->datatype, io->source, shape,
                                                    &dims, &r->batch_data[k], &bytes);
  if (err != NULL) return err;
  return pt_args_set_tensor(r->args, (size_t)inst->arg_index[k], io->name, r->batch_data[k], io->datatype, shape, dims);
}

/* ---- outputs --------------------------------------------------------------------- */

/* Writes an output's bytes for one request into 'dst'. */
typedef void (*fill_fn)(void *dst, const void *ctx);

/* Allocates output 'name' of a response (when 'output') and the request's
 * next state (when 'state'), fills both with 'fill' and returns the error
 * that answers this request only. */
static TRITONSERVER_Error *deliver(slot *s, const char *name, TRITONSERVER_DataType dt, const int64_t *shape,
                                   uint32_t dims, uint64_t bytes, bool output, bool state, fill_fn fill,
                                   const void *ctx) {
  TRITONSERVER_Error *err = NULL;
  if (output && s->response != NULL) {
    TRITONBACKEND_Output *out = NULL;
    void *buf = NULL;
    TRITONSERVER_MemoryType mt = TRITONSERVER_MEMORY_CPU;
    int64_t id = 0;
    err = TRITONBACKEND_ResponseOutput(s->response, &out, name, dt, shape, dims);
    if (err == NULL) err = TRITONBACKEND_OutputBuffer(out, &buf, bytes, &mt, &id);
    if (err == NULL && bytes > 0 && mt == TRITONSERVER_MEMORY_GPU) {
      err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNSUPPORTED, BACKEND ": GPU output buffers are not supported");
    }
    if (err != NULL) return err;
    if (bytes > 0) fill(buf, ctx);
  }
  if (state) {
    TRITONBACKEND_State *st = NULL;
    void *buf = NULL;
    TRITONSERVER_MemoryType mt = TRITONSERVER_MEMORY_CPU;
    int64_t id = 0;
    err = TRITONBACKEND_StateNew(&st, s->request, name, dt, shape, dims);
    if (err == NULL) err = TRITONBACKEND_StateBuffer(st, &buf, bytes, &mt, &id);
    if (err == NULL && bytes > 0) fill(buf, ctx);
    if (err == NULL) err = TRITONBACKEND_StateUpdate(st);
  }
  return err;
}

typedef struct bytes_ctx {
  const char *src;
  uint64_t size;
} bytes_ctx;

static void fill_bytes(void *dst, const void *ctx) {
  const bytes_ctx *c = ctx;
  memcpy(dst, c->src, c->size);
}

typedef struct strings_ctx {
  const pt_result *res;
  size_t index;
  int64_t from, to;
} strings_ctx;

static uint64_t strings_size(const strings_ctx *c) {
  uint64_t size = 0;
  for (int64_t e = c->from; e < c->to; e++) {
    const char *p = NULL;
    size_t len = 0;
    pt_result_string(c->res, c->index, (size_t)e, &p, &len);
    size += 4 + len;
  }
  return size;
}

static void fill_strings(void *dst, const void *ctx) {
  const strings_ctx *c = ctx;
  char *at = dst;
  for (int64_t e = c->from; e < c->to; e++) {
    const char *p = NULL;
    size_t len = 0;
    pt_result_string(c->res, c->index, (size_t)e, &p, &len);
    uint32_t l = (uint32_t)len;
    memcpy(at, &l, 4);
    memcpy(at + 4, p, len);
    at += 4 + len;
  }
}

/* A batch output (BATCH_SCATTER_WITH_INPUT_SHAPE): each request gets the
 * next elements of the flat output, as many as its source input has, in
 * that input's shape. */
static TRITONSERVER_Error *scatter_with_input_shape(slot *group, size_t n, const pt_io *io, const pt_output *po) {
  uint64_t size = TRITONSERVER_DataTypeByteSize(po->datatype), offset = 0;
  for (size_t i = 0; i < n; i++) {
    slot *s = &group[i];
    TRITONBACKEND_Input *in = NULL;
    const int64_t *shape = NULL;
    uint32_t dims = 0;
    TRITONSERVER_Error *err = TRITONBACKEND_RequestInput(s->request, io->source, &in);
    if (err == NULL) err = TRITONBACKEND_InputProperties(in, NULL, NULL, &shape, &dims, NULL, NULL);
    if (err != NULL) return err;
    int64_t e = nrd_bu_shape_elements(shape, dims);
    uint64_t bytes = e < 0 ? UINT64_MAX : (uint64_t)e * size;
    if (bytes > po->byte_size - offset) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                               BACKEND ": output '%s' holds %llu bytes, fewer than the batch's inputs '%s' ask",
                               io->name, (unsigned long long)po->byte_size, io->source);
    }
    bool out = io->is_output && s->response != NULL && output_requested(s->request, io->name);
    bytes_ctx c = {(const char *)po->data + offset, bytes};
    offset += bytes;
    if (!out) continue;
    err = deliver(s, io->name, po->datatype, shape, dims, bytes, true, false, fill_bytes, &c);
    if (err != NULL) {
      fail_slot(s, err);
      TRITONSERVER_ErrorDelete(err);
    }
  }
  return NULL;
}

/* Hands every request of a group its part of configured output 'io'. An
 * error that concerns the model (not one request) is returned, for the
 * whole group. */
static TRITONSERVER_Error *scatter(const pt_model *m, slot *group, size_t n, int64_t total, const pt_result *res,
                                   const pt_io *io) {
  bool batched = m->max_batch_size > 0;
  size_t count = pt_result_count(res);
  if (io->index < 0 || (size_t)io->index >= count) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             "The output %s in the model configuration refers to an output index which doesn't "
                             "exist. This model has %zu outputs",
                             io->name, count);
  }
  pt_output po;
  pt_result_output(res, (size_t)io->index, &po);
  if (po.is_strings != (io->datatype == TRITONSERVER_TYPE_BYTES) || (!po.is_strings && po.datatype != io->datatype)) {
    return nrd_bu_error_newf(
        TRITONSERVER_ERROR_INVALID_ARG, "configuration expects datatype TYPE_%s for output '%s', model provides %s%s%s",
        io->datatype == TRITONSERVER_TYPE_BYTES ? "STRING" : TRITONSERVER_DataTypeString(io->datatype), io->name,
        po.is_strings ? "List[str]" : "TYPE_",
        po.is_strings                              ? ""
        : po.datatype == TRITONSERVER_TYPE_INVALID ? po.torch_type
                                                   : TRITONSERVER_DataTypeString(po.datatype),
        po.datatype == TRITONSERVER_TYPE_INVALID && !po.is_strings ? " (no Triton datatype)" : "");
  }
  int64_t length = po.is_strings ? (int64_t)po.string_count : (po.dims_count > 0 ? po.shape[0] : 0);
  if (!po.is_strings && po.dims_count == 0) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "output '%s' is a scalar which is not supported.",
                             io->name);
  }
  if (po.dims_count > 64) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, BACKEND ": model '%s': output '%s' has %u dimensions",
                             m->name, io->name, po.dims_count);
  }
  if (io->source != NULL && !po.is_strings) return scatter_with_input_shape(group, n, io, &po);
  if (batched && length != total) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             BACKEND ": model '%s': output '%s' has %lld rows (its first dimension) for a batch of "
                                     "%lld",
                             m->name, io->name, (long long)length, (long long)total);
  }
  uint64_t row_bytes = !po.is_strings && length > 0 ? po.byte_size / (uint64_t)length : 0;
  int64_t row = 0;
  for (size_t i = 0; i < n; i++) {
    slot *s = &group[i];
    int64_t rows = batched ? s->rows : length;
    bool out = io->is_output && s->response != NULL && output_requested(s->request, io->name);
    int64_t from = batched ? row : 0;
    row += rows;
    if (!out && !io->requested_always) continue;
    TRITONSERVER_Error *err;
    if (po.is_strings) {
      int64_t shape[1] = {rows};
      strings_ctx c = {res, (size_t)io->index, from, from + rows};
      err = deliver(s, io->name, TRITONSERVER_TYPE_BYTES, shape, 1, strings_size(&c), out, io->requested_always,
                    fill_strings, &c);
    } else {
      int64_t shape[64];
      uint32_t dims = po.dims_count;
      memcpy(shape, po.shape, dims * sizeof *shape);
      shape[0] = rows;
      bytes_ctx c = {(const char *)po.data + (uint64_t)from * row_bytes, (uint64_t)rows * row_bytes};
      err = deliver(s, io->name, po.datatype, shape, dims, c.size, out, io->requested_always, fill_bytes, &c);
    }
    if (err != NULL) {
      fail_slot(s, err);
      TRITONSERVER_ErrorDelete(err);
    }
  }
  return NULL;
}

/* ---- one forward() ------------------------------------------------------------------ */

static void run_group(pt_instance *inst, slot *group, size_t n) {
  const pt_model *m = inst->model;
  int64_t total = 0;
  for (size_t i = 0; i < n; i++) total += group[i].rows;
  run r;
  memset(&r, 0, sizeof r);
  TRITONBACKEND_Request **reqs = calloc(n, sizeof *reqs);
  TRITONSERVER_Error *err = reqs == NULL ? oom() : TRITONBACKEND_RequestInputCount(group[0].request, &r.inputs);
  for (size_t i = 0; reqs != NULL && i < n; i++) reqs[i] = group[i].request;
  if (err == NULL) {
    r.args = pt_args_new(inst->arg_count, inst->dict);
    r.data = calloc(r.inputs + 1, sizeof *r.data);
    r.lengths = calloc(r.inputs + 1, sizeof *r.lengths);
    r.string_ptrs = calloc(r.inputs + 1, sizeof *r.string_ptrs);
    if (r.args == NULL || r.data == NULL || r.lengths == NULL || r.string_ptrs == NULL) err = oom();
  }
  for (uint32_t k = 0; err == NULL && k < r.inputs; k++) err = make_input(inst, reqs, n, total, k, &r);
  if (err == NULL) {
    r.batch_data = calloc(m->input_count + 1, sizeof *r.batch_data);
    if (r.batch_data == NULL)
      err = oom();
    else
      r.batch_count = m->input_count;
  }
  for (size_t k = 0; err == NULL && k < m->input_count; k++) {
    if (m->inputs[k].batch_input) err = make_batch_input(inst, reqs, n, k, &r);
  }
  free(reqs);
  pt_result *res = NULL;
  uint64_t compute_start = nrd_bu_now_ns();
  if (err == NULL) err = pt_module_forward(inst->module, r.args, &m->options, &res);
  uint64_t compute_end = nrd_bu_now_ns();
  for (size_t i = 0; i < n; i++) {
    group[i].compute_start = compute_start;
    group[i].compute_end = compute_end;
  }
  for (size_t o = 0; err == NULL && o < m->output_count; o++) {
    bool wanted = m->outputs[o].requested_always;
    for (size_t i = 0; !wanted && i < n; i++) {
      wanted = group[i].response != NULL && output_requested(group[i].request, m->outputs[o].name);
    }
    if (wanted) err = scatter(m, group, n, total, res, &m->outputs[o]);
  }
  pt_result_free(res);
  run_free(&r);
  if (err != NULL) fail_group(group, n, err);
}

void pt_instance_execute(pt_instance *inst, TRITONBACKEND_ModelInstance *instance, TRITONBACKEND_Request **requests,
                         uint32_t count) {
  const pt_model *m = inst->model;
  uint64_t exec_start = nrd_bu_now_ns();
  slot *slots = calloc(count > 0 ? count : 1, sizeof *slots);
  if (slots == NULL) {
    nrd_bu_requests_fail(instance, requests, count, oom());
    return;
  }
  for (uint32_t i = 0; i < count; i++) {
    slots[i].request = requests[i];
    TRITONSERVER_Error *err = TRITONBACKEND_ResponseNew(&slots[i].response, requests[i]);
    if (err != NULL) {
      nrd_bu_error_log_and_delete(err, BACKEND ": cannot create a response");
      slots[i].response = NULL;
      continue;
    }
    err = request_rows(m, &slots[i]);
    if (err != NULL) {
      fail_slot(&slots[i], err);
      TRITONSERVER_ErrorDelete(err);
    }
  }
  /* Runs of consecutive requests that can share one forward(). */
  uint32_t i = 0;
  while (i < count) {
    if (slots[i].response == NULL) {
      i++;
      continue;
    }
    uint32_t j = i + 1;
    while (m->max_batch_size > 0 && j < count && slots[j].response != NULL &&
           compatible(m, slots[i].request, slots[j].request)) {
      j++;
    }
    run_group(inst, &slots[i], j - i);
    uint64_t rows = 0;
    bool any = false;
    for (uint32_t k = i; k < j; k++) {
      rows += (uint64_t)slots[k].rows;
      any = any || slots[k].response != NULL;
    }
    if (any) {
      nrd_bu_error_log_and_delete(
          TRITONBACKEND_ModelInstanceReportBatchStatistics(instance, rows, exec_start, slots[i].compute_start,
                                                           slots[i].compute_end, nrd_bu_now_ns()),
          BACKEND ": cannot report batch statistics");
    }
    i = j;
  }
  uint64_t exec_end = nrd_bu_now_ns();
  for (uint32_t k = 0; k < count; k++) {
    slot *s = &slots[k];
    bool ok = s->response != NULL;
    if (ok) {
      nrd_bu_error_log_and_delete(TRITONBACKEND_ResponseSend(s->response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, NULL),
                                  BACKEND ": cannot send a response");
    }
    uint64_t cs = s->compute_start != 0 ? s->compute_start : exec_start;
    uint64_t ce = s->compute_end != 0 ? s->compute_end : cs;
    nrd_bu_error_log_and_delete(
        TRITONBACKEND_ModelInstanceReportStatistics(instance, s->request, ok, exec_start, cs, ce, exec_end),
        BACKEND ": cannot report statistics");
    nrd_bu_request_release(s->request);
  }
  free(slots);
}
