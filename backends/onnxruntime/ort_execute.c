/*
 * Execute for the onnxruntime backend: requests whose inputs have the same
 * shapes (apart from the batch dimension) run together in one session Run;
 * each request gets its rows of every output it asked for, and each state
 * output becomes the sequence's next state (TRITONBACKEND_StateNew).
 *
 * Copies: fixed-size inputs of a single request go to ONNX Runtime without
 * a copy (tensors over the request's buffer); several requests are gathered
 * into one buffer. Outputs are copied once, from ONNX Runtime's tensors into
 * the buffers the front end's allocator gives.
 */
#include <stdlib.h>
#include <string.h>

#include "nereid/backend_utils.h"
#include "ort_backend.h"
#include "ort_model.h"

/* One request of an Execute call. */
typedef struct slot {
  TRITONBACKEND_Request *request;
  TRITONBACKEND_Response *response; /* NULL once answered with an error */
  int64_t rows; /* batch rows; 1 without batching */
  bool grouped; /* already ran (or failed) */
  bool ok; /* ran successfully */
} slot;

/* What one Run holds and frees. */
typedef struct run {
  size_t count; /* inputs fed */
  const char **names; /* borrowed from the session */
  OrtValue **values; /* ReleaseValue */
  nrd_bu_batch_input *data; /* gathered bytes, released after Run */
  char **strings; /* per input: NUL-terminated copies (BYTES) */
  const char ***pointers; /* per input: pointers into 'strings' */
} run;

static TRITONSERVER_Error *oom(void) {
  return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, "onnxruntime: out of memory");
}

/* Answers one request with 'err' (kept by the caller). */
static void fail_slot(slot *s, TRITONSERVER_Error *err) {
  if (s->response == NULL) return;
  nrd_bu_error_log_and_delete(TRITONBACKEND_ResponseSend(s->response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, err),
                              "onnxruntime: cannot send an error response");
  s->response = NULL;
}

static void fail_group(slot **group, size_t n, TRITONSERVER_Error *err) {
  for (size_t i = 0; i < n; i++) fail_slot(group[i], err);
  TRITONSERVER_ErrorDelete(err);
}

/* ---- checking requests ---------------------------------------------------- */

/* Reads input 'name' of a request; *found false when the request lacks it. */
static TRITONSERVER_Error *input_props(TRITONBACKEND_Request *request, const char *name, bool *found,
                                       TRITONSERVER_DataType *dt, const int64_t **shape, uint32_t *dims) {
  TRITONBACKEND_Input *input = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_RequestInput(request, name, &input);
  if (err != NULL) {
    TRITONSERVER_ErrorDelete(err);
    *found = false;
    return NULL;
  }
  *found = true;
  return TRITONBACKEND_InputProperties(input, NULL, dt, shape, dims, NULL, NULL);
}

/* Checks a request's inputs against the session and finds its rows. */
static TRITONSERVER_Error *check_request(const ort_instance *inst, slot *s) {
  const ort_session *ss = &inst->session;
  bool batched = inst->model->max_batch_size > 0;
  s->rows = batched ? -1 : 1;
  for (size_t i = 0; i < ss->input_count; i++) {
    const ort_tensor_info *info = &ss->inputs[i];
    bool found = false;
    TRITONSERVER_DataType dt;
    const int64_t *shape = NULL;
    uint32_t dims = 0;
    TRITONSERVER_Error *err = input_props(s->request, info->name, &found, &dt, &shape, &dims);
    if (err != NULL) return err;
    if (!found) continue;
    if (ort_element_type(dt) != info->type) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                               "onnxruntime: model '%s': input '%s' has datatype %s, the model "
                               "takes %s",
                               inst->model->name, info->name, TRITONSERVER_DataTypeString(dt),
                               TRITONSERVER_DataTypeString(ort_triton_type(info->type)));
    }
    if (!batched) continue;
    if (dims == 0 || shape[0] < 1) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                               "onnxruntime: model '%s': input '%s' has no "
                               "batch dimension",
                               inst->model->name, info->name);
    }
    if (s->rows >= 0 && shape[0] != s->rows) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                               "onnxruntime: model '%s': input '%s' has batch size %lld, other "
                               "inputs of the request %lld",
                               inst->model->name, info->name, (long long)shape[0], (long long)s->rows);
    }
    s->rows = shape[0];
  }
  if (s->rows < 0) s->rows = 1;
  return NULL;
}

/* Whether two requests can run together: the same inputs present, with the
 * same shapes apart from the batch dimension (any shapes for a ragged
 * input). */
static bool same_shapes(const ort_instance *inst, TRITONBACKEND_Request *a, TRITONBACKEND_Request *b) {
  const ort_session *ss = &inst->session;
  for (size_t i = 0; i < ss->input_count; i++) {
    bool fa = false, fb = false;
    TRITONSERVER_DataType da, db;
    const int64_t *sa = NULL, *sb = NULL;
    uint32_t na = 0, nb = 0;
    TRITONSERVER_Error *ea = input_props(a, ss->inputs[i].name, &fa, &da, &sa, &na);
    TRITONSERVER_Error *eb = input_props(b, ss->inputs[i].name, &fb, &db, &sb, &nb);
    bool same = ea == NULL && eb == NULL && fa == fb && na == nb;
    TRITONSERVER_ErrorDelete(ea);
    TRITONSERVER_ErrorDelete(eb);
    if (!same) return false;
    if (!fa || ort_model_input_ragged(inst->model, ss->inputs[i].name)) continue; /* ragged: any shapes */
    for (uint32_t d = 1; d < na; d++) {
      if (sa[d] != sb[d]) return false;
    }
    if (na > 0 && inst->model->max_batch_size == 0 && sa[0] != sb[0]) {
      return false;
    }
  }
  return true;
}

/* ---- inputs --------------------------------------------------------------- */

/* Splits Triton's BYTES encoding (4-byte little-endian length, then the
 * bytes, per element) into NUL-terminated strings for FillStringTensor. */
static TRITONSERVER_Error *split_strings(const char *model, const char *name, const uint8_t *data, uint64_t size,
                                         int64_t elements, char **block, const char ***pointers) {
  char *b = malloc(size + (size_t)elements + 1);
  const char **p = calloc(elements > 0 ? (size_t)elements : 1, sizeof *p);
  if (b == NULL || p == NULL) {
    free(b);
    free(p);
    return oom();
  }
  uint64_t at = 0, out = 0;
  int64_t n = 0;
  while (at < size) {
    uint32_t len = 0;
    if (size - at < 4 || n == elements) break;
    memcpy(&len, data + at, 4);
    at += 4;
    if (size - at < len) {
      at = size + 1;
      break;
    }
    p[n++] = b + out;
    memcpy(b + out, data + at, len);
    out += len;
    b[out++] = '\0';
    at += len;
  }
  if (at != size || n != elements) {
    free(b);
    free(p);
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             "onnxruntime: model '%s': input '%s': BYTES data does not hold "
                             "exactly %lld length-prefixed elements",
                             model, name, (long long)elements);
  }
  *block = b;
  *pointers = p;
  return NULL;
}

static void run_free(const ort_runtime *rt, run *r, size_t inputs) {
  for (size_t i = 0; i < inputs; i++) {
    if (r->values != NULL && r->values[i] != NULL) {
      rt->api->ReleaseValue(r->values[i]);
    }
    if (r->data != NULL) nrd_bu_batch_input_release(&r->data[i]);
    if (r->strings != NULL) free(r->strings[i]);
    if (r->pointers != NULL) free((void *)r->pointers[i]);
  }
  free(r->names);
  free(r->values);
  free(r->data);
  free(r->strings);
  free(r->pointers);
  memset(r, 0, sizeof *r);
}

/* Builds the input tensors of a group (rows 'total'). */
static TRITONSERVER_Error *make_inputs(const ort_instance *inst, slot **group, size_t n, int64_t total, run *r) {
  const ort_runtime *rt = inst->model->rt;
  const ort_session *ss = &inst->session;
  size_t cap = ss->input_count > 0 ? ss->input_count : 1;
  r->names = calloc(cap, sizeof *r->names);
  r->values = calloc(cap, sizeof *r->values);
  r->data = calloc(cap, sizeof *r->data);
  r->strings = calloc(cap, sizeof *r->strings);
  r->pointers = calloc(cap, sizeof *r->pointers);
  if (r->names == NULL || r->values == NULL || r->data == NULL || r->strings == NULL || r->pointers == NULL) {
    return oom();
  }
  TRITONBACKEND_Request **requests = calloc(n, sizeof *requests);
  if (requests == NULL) return oom();
  for (size_t i = 0; i < n; i++) requests[i] = group[i]->request;
  TRITONSERVER_Error *err = NULL;
  for (size_t i = 0; i < ss->input_count && err == NULL; i++) {
    const ort_tensor_info *info = &ss->inputs[i];
    const ort_batch_input *bi = ort_model_batch_input(inst->model, info->name);
    if (bi != NULL) {
      /* Made here from the source input's shapes (Triton's collector). */
      int64_t bshape[2];
      uint32_t brank = 0;
      void *bdata = NULL;
      size_t bbytes = 0;
      err = nrd_bu_batch_input_make(requests, (uint32_t)n, bi->kind, bi->datatype, bi->source, bshape, &brank, &bdata,
                                    &bbytes);
      if (err != NULL) break;
      size_t k = r->count++;
      r->names[k] = info->name;
      r->data[k] = (nrd_bu_batch_input){bdata, bbytes, bdata};
      err = ort_runtime_error(
          rt, rt->api->CreateTensorWithDataAsOrtValue(rt->cpu, bdata, bbytes, bshape, brank, info->type, &r->values[k]),
          "cannot create a batch input tensor");
      continue;
    }
    bool found = false;
    TRITONSERVER_DataType dt;
    const int64_t *shape0 = NULL;
    uint32_t dims = 0;
    err = input_props(requests[0], info->name, &found, &dt, &shape0, &dims);
    if (err != NULL || !found) continue;
    int64_t shape[64];
    if (dims > 64) {
      err = nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                              "onnxruntime: input '%s' has too many "
                              "dimensions",
                              info->name);
      break;
    }
    memcpy(shape, shape0, dims * sizeof(int64_t));
    if (inst->model->max_batch_size > 0) shape[0] = total;
    if (ort_model_input_ragged(inst->model, info->name)) {
      /* Every request's elements, one after another: [-1]. */
      shape[0] = 0;
      for (size_t q = 0; q < n && err == NULL; q++) {
        const int64_t *sq = NULL;
        uint32_t dq = 0;
        bool fq = false;
        err = input_props(requests[q], info->name, &fq, &dt, &sq, &dq);
        if (err == NULL) shape[0] += nrd_bu_shape_elements(sq, dq);
      }
      if (err != NULL) break;
      dims = 1;
    }
    /* A configured [1] may stand for a scalar of the model. */
    uint32_t rank = info->rank == 0 && dims == 1 && shape[0] == 1 ? 0 : dims;
    int64_t elements = nrd_bu_shape_elements(shape, dims);
    size_t k = r->count++;
    r->names[k] = info->name;
    err = nrd_bu_batch_input_gather(requests, (uint32_t)n, info->name, NULL, 0, &r->data[k]);
    if (err != NULL) break;
    if (info->type == ONNX_TENSOR_ELEMENT_DATA_TYPE_STRING) {
      err = split_strings(inst->model->name, info->name, r->data[k].data, r->data[k].byte_size, elements,
                          &r->strings[k], &r->pointers[k]);
      if (err == NULL) {
        err = ort_runtime_error(rt,
                                rt->api->CreateTensorAsOrtValue(rt->allocator, shape, rank, info->type, &r->values[k]),
                                "cannot create a string tensor");
      }
      if (err == NULL) {
        err = ort_runtime_error(rt, rt->api->FillStringTensor(r->values[k], r->pointers[k], (size_t)elements),
                                "cannot fill a string tensor");
      }
      continue;
    }
    uint64_t want = (uint64_t)elements * TRITONSERVER_DataTypeByteSize(dt);
    if (elements < 0 || r->data[k].byte_size != want) {
      err = nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                              "onnxruntime: model '%s': input '%s' holds %llu bytes, its shape "
                              "needs %llu",
                              inst->model->name, info->name, (unsigned long long)r->data[k].byte_size,
                              (unsigned long long)want);
      break;
    }
    static char empty;
    void *p = r->data[k].data != NULL ? (void *)r->data[k].data : &empty;
    err = ort_runtime_error(
        rt, rt->api->CreateTensorWithDataAsOrtValue(rt->cpu, p, (size_t)want, shape, rank, info->type, &r->values[k]),
        "cannot create an input tensor");
  }
  free(requests);
  return err;
}

/* ---- outputs -------------------------------------------------------------- */

/* An output tensor of a Run, readable row by row. */
typedef struct result {
  const char *name;
  TRITONSERVER_DataType dt;
  int64_t dims[64];
  size_t rank;
  int64_t elements;
  const uint8_t *data; /* fixed-size types */
  char *content; /* strings: all bytes, malloc'ed */
  size_t *offsets; /* strings: start of each element, malloc'ed */
  size_t content_size;
} result;

static TRITONSERVER_Error *read_result(const ort_runtime *rt, const char *model, const char *name, OrtValue *value,
                                       result *out) {
  const OrtApi *api = rt->api;
  OrtTensorTypeAndShapeInfo *ts = NULL;
  ONNXTensorElementDataType et = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  size_t count = 0;
  out->name = name;
  TRITONSERVER_Error *err = ort_runtime_error(rt, api->GetTensorTypeAndShape(value, &ts), "cannot read an output");
  if (err != NULL) return err;
  err = ort_runtime_error(rt, api->GetTensorElementType(ts, &et), "cannot read an output type");
  if (err == NULL) {
    err = ort_runtime_error(rt, api->GetDimensionsCount(ts, &out->rank), "cannot read an output rank");
  }
  if (err == NULL && out->rank > 64) {
    err = nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL,
                            "onnxruntime: model '%s': output '%s' has too "
                            "many dimensions",
                            model, name);
  }
  if (err == NULL) {
    err = ort_runtime_error(rt, api->GetDimensions(ts, out->dims, out->rank), "cannot read output dimensions");
  }
  if (err == NULL) {
    err = ort_runtime_error(rt, api->GetTensorShapeElementCount(ts, &count), "cannot count output elements");
  }
  api->ReleaseTensorTypeAndShapeInfo(ts);
  if (err != NULL) return err;
  out->elements = (int64_t)count;
  out->dt = ort_triton_type(et);
  if (out->dt == TRITONSERVER_TYPE_INVALID) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_UNSUPPORTED,
                             "onnxruntime: model '%s': output '%s' has an "
                             "element type Triton has no datatype for",
                             model, name);
  }
  if (out->dt != TRITONSERVER_TYPE_BYTES) {
    void *p = NULL;
    err = ort_runtime_error(rt, api->GetTensorMutableData(value, &p), "cannot read output data");
    out->data = p;
    return err;
  }
  err = ort_runtime_error(rt, api->GetStringTensorDataLength(value, &out->content_size),
                          "cannot read string output length");
  if (err != NULL) return err;
  out->content = malloc(out->content_size + 1);
  out->offsets = calloc(count + 1, sizeof(size_t));
  if (out->content == NULL || out->offsets == NULL) return oom();
  err = ort_runtime_error(rt, api->GetStringTensorContent(value, out->content, out->content_size, out->offsets, count),
                          "cannot read string output");
  out->offsets[count] = out->content_size;
  return err;
}

/* Byte size of elements [from, to) of a result in Triton's encoding. */
static uint64_t slice_bytes(const result *res, int64_t from, int64_t to) {
  if (res->dt != TRITONSERVER_TYPE_BYTES) {
    return (uint64_t)(to - from) * TRITONSERVER_DataTypeByteSize(res->dt);
  }
  uint64_t n = 0;
  for (int64_t e = from; e < to; e++) {
    n += 4 + (res->offsets[e + 1] - res->offsets[e]);
  }
  return n;
}

static void slice_copy(const result *res, int64_t from, int64_t to, uint8_t *dst) {
  if (res->dt != TRITONSERVER_TYPE_BYTES) {
    size_t es = TRITONSERVER_DataTypeByteSize(res->dt);
    memcpy(dst, res->data + (size_t)from * es, (size_t)(to - from) * es);
    return;
  }
  for (int64_t e = from; e < to; e++) {
    uint32_t len = (uint32_t)(res->offsets[e + 1] - res->offsets[e]);
    memcpy(dst, &len, 4);
    memcpy(dst + 4, res->content + res->offsets[e], len);
    dst += 4 + len;
  }
}

/* Writes rows [from, to) of 'res' ('bytes' long) into 'buf' of memory
 * type 'mt' on device 'id': directly in host memory; through a host block
 * and the driver's copy in GPU memory (a client's CUDA shared memory
 * region), as ONNX Runtime's results are in host memory. */
static TRITONSERVER_Error *place(const result *res, int64_t from, int64_t to, uint64_t bytes, void *buf,
                                 TRITONSERVER_MemoryType mt, int64_t id) {
  if (mt != TRITONSERVER_MEMORY_GPU) {
    slice_copy(res, from, to, buf);
    return NULL;
  }
  uint8_t *host = malloc((size_t)bytes);
  if (host == NULL) return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, "onnxruntime: out of memory");
  slice_copy(res, from, to, host);
  TRITONSERVER_Error *err = nrd_bu_copy(buf, mt, id, host, TRITONSERVER_MEMORY_CPU, 0, (size_t)bytes);
  free(host);
  return err;
}

/* Gives one request its rows [from, to) of 'res' as an output, a state or
 * both. */
static TRITONSERVER_Error *deliver(slot *s, const result *res, bool output, bool state, const int64_t *shape,
                                   size_t rank, int64_t from, int64_t to) {
  uint64_t bytes = slice_bytes(res, from, to);
  TRITONSERVER_Error *err = NULL;
  if (output && s->response != NULL) {
    TRITONBACKEND_Output *out = NULL;
    void *buf = NULL;
    TRITONSERVER_MemoryType mt = TRITONSERVER_MEMORY_CPU;
    int64_t id = 0;
    err = TRITONBACKEND_ResponseOutput(s->response, &out, res->name, res->dt, shape, (uint32_t)rank);
    if (err == NULL) {
      err = TRITONBACKEND_OutputBuffer(out, &buf, bytes, &mt, &id);
    }
    if (err != NULL) return err;
    if (bytes > 0) err = place(res, from, to, bytes, buf, mt, id);
    if (err != NULL) return err;
  }
  if (state) {
    TRITONBACKEND_State *st = NULL;
    void *buf = NULL;
    TRITONSERVER_MemoryType mt = TRITONSERVER_MEMORY_CPU;
    int64_t id = 0;
    err = TRITONBACKEND_StateNew(&st, s->request, res->name, res->dt, shape, (uint32_t)rank);
    if (err == NULL) {
      err = TRITONBACKEND_StateBuffer(st, &buf, bytes, &mt, &id);
    }
    if (err == NULL && bytes > 0) err = place(res, from, to, bytes, buf, mt, id);
    if (err == NULL) err = TRITONBACKEND_StateUpdate(st);
  }
  return err;
}

/* A batch output (BATCH_SCATTER_WITH_INPUT_SHAPE): each request gets the
 * next elements of the flat output, as many as its source input has, in
 * that input's shape, as Triton's backend output responder gives them. */
static void scatter_with_input_shape(const ort_instance *inst, slot **group, size_t n, const result *res,
                                     const char *source) {
  int64_t at = 0;
  for (size_t i = 0; i < n; i++) {
    slot *s = group[i];
    bool found = false;
    TRITONSERVER_DataType dt;
    const int64_t *shape = NULL;
    uint32_t dims = 0;
    TRITONSERVER_Error *err = input_props(s->request, source, &found, &dt, &shape, &dims);
    int64_t e = err == NULL && found ? nrd_bu_shape_elements(shape, dims) : -1;
    if (err == NULL && (e < 0 || e > res->elements - at)) {
      err = nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                              "onnxruntime: model '%s': batch output '%s' holds %lld elements, fewer than the "
                              "batch's inputs '%s' ask",
                              inst->model->name, res->name, (long long)res->elements, source);
    }
    if (err == NULL && s->response != NULL && ort_output_requested(s->request, res->name)) {
      err = deliver(s, res, true, false, shape, dims, at, at + e);
    }
    if (err != NULL) {
      fail_slot(s, err);
      TRITONSERVER_ErrorDelete(err);
    }
    if (e > 0) at += e; /* its elements are passed over either way */
  }
}

/* Hands every request of a group its part of output 'o'. */
static void scatter(const ort_instance *inst, slot **group, size_t n, int64_t total, const result *res, bool is_state) {
  const char *source = ort_model_batch_output_source(inst->model, res->name);
  if (source != NULL && !is_state) {
    scatter_with_input_shape(inst, group, n, res, source);
    return;
  }
  bool batched = inst->model->max_batch_size > 0;
  if (batched && (res->rank == 0 || res->dims[0] != total)) {
    TRITONSERVER_Error *err = nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL,
                                                "onnxruntime: model '%s': output '%s' has %lld rows for a batch of "
                                                "%lld",
                                                inst->model->name, res->name,
                                                res->rank == 0 ? 0LL : (long long)res->dims[0], (long long)total);
    fail_group(group, n, err);
    return;
  }
  int64_t per_row = total > 0 && batched ? res->elements / total : res->elements;
  int64_t row = 0;
  for (size_t i = 0; i < n; i++) {
    slot *s = group[i];
    int64_t rows = batched ? s->rows : 1;
    int64_t shape[64];
    size_t rank = res->rank;
    memcpy(shape, res->dims, rank * sizeof(int64_t));
    if (batched) shape[0] = rows;
    /* A scalar of the model is configured as dims [1]. */
    if (rank == 0) shape[rank++] = 1;
    bool out = s->response != NULL && ort_output_requested(s->request, res->name);
    int64_t from = batched ? row * per_row : 0;
    int64_t to = batched ? (row + rows) * per_row : res->elements;
    TRITONSERVER_Error *err = NULL;
    if (out || is_state) {
      err = deliver(s, res, out, is_state, shape, rank, from, to);
    }
    if (err != NULL) {
      fail_slot(s, err);
      TRITONSERVER_ErrorDelete(err);
    }
    row += rows;
  }
}

/* ---- one Run -------------------------------------------------------------- */

static void run_group(ort_instance *inst, TRITONBACKEND_ModelInstance *instance, slot **group, size_t n,
                      uint64_t exec_start) {
  const ort_runtime *rt = inst->model->rt;
  const ort_session *ss = &inst->session;
  int64_t total = 0;
  for (size_t i = 0; i < n; i++) total += group[i]->rows;
  run r;
  memset(&r, 0, sizeof r);
  size_t outs = 0;
  const char **out_names = calloc(ss->output_count + 1, sizeof *out_names);
  size_t *out_index = calloc(ss->output_count + 1, sizeof *out_index);
  OrtValue **out_values = calloc(ss->output_count + 1, sizeof *out_values);
  TRITONSERVER_Error *err =
      out_names == NULL || out_index == NULL || out_values == NULL ? oom() : make_inputs(inst, group, n, total, &r);
  for (size_t o = 0; err == NULL && o < ss->output_count; o++) {
    bool wanted = inst->output_is_state[o];
    for (size_t i = 0; !wanted && i < n; i++) {
      wanted = ort_output_requested(group[i]->request, ss->outputs[o].name);
    }
    if (wanted) {
      out_index[outs] = o;
      out_names[outs++] = ss->outputs[o].name;
    }
  }
  uint64_t compute_start = nrd_bu_now_ns();
  if (err == NULL && outs > 0) {
    err = ort_runtime_error(rt,
                            rt->api->Run(ss->session, ss->run_options, r.names, (const OrtValue *const *)r.values,
                                         r.count, out_names, outs, out_values),
                            "Run failed");
  }
  uint64_t compute_end = nrd_bu_now_ns();
  run_free(rt, &r, ss->input_count);
  if (err != NULL) {
    fail_group(group, n, err);
  }
  for (size_t k = 0; k < outs; k++) {
    if (out_values[k] == NULL) continue;
    if (err == NULL) {
      result res;
      memset(&res, 0, sizeof res);
      TRITONSERVER_Error *rerr = read_result(rt, inst->model->name, out_names[k], out_values[k], &res);
      if (rerr != NULL) {
        fail_group(group, n, rerr);
      } else {
        scatter(inst, group, n, total, &res, inst->output_is_state[out_index[k]]);
      }
      free(res.content);
      free(res.offsets);
    }
    rt->api->ReleaseValue(out_values[k]);
  }
  free(out_names);
  free(out_index);
  free(out_values);
  uint64_t exec_end = nrd_bu_now_ns();
  for (size_t i = 0; i < n; i++) {
    slot *s = group[i];
    s->ok = s->response != NULL;
    if (s->response != NULL) {
      nrd_bu_error_log_and_delete(TRITONBACKEND_ResponseSend(s->response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, NULL),
                                  "onnxruntime: cannot send a response");
      s->response = NULL;
    }
    nrd_bu_error_log_and_delete(TRITONBACKEND_ModelInstanceReportStatistics(instance, s->request, s->ok, exec_start,
                                                                            compute_start, compute_end, exec_end),
                                "onnxruntime: cannot report statistics");
  }
  nrd_bu_error_log_and_delete(TRITONBACKEND_ModelInstanceReportBatchStatistics(instance, (uint64_t)total, exec_start,
                                                                               compute_start, compute_end, exec_end),
                              "onnxruntime: cannot report batch statistics");
}

void ort_instance_execute(void *instance_state, TRITONBACKEND_ModelInstance *instance, TRITONBACKEND_Request **requests,
                          uint32_t count) {
  ort_instance *inst = instance_state;
  uint64_t exec_start = nrd_bu_now_ns();
  slot *slots = calloc(count > 0 ? count : 1, sizeof *slots);
  slot **group = calloc(count > 0 ? count : 1, sizeof *group);
  if (slots == NULL || group == NULL) {
    free(slots);
    free(group);
    nrd_bu_requests_fail(instance, requests, count, oom());
    return;
  }
  for (uint32_t i = 0; i < count; i++) {
    slot *s = &slots[i];
    s->request = requests[i];
    TRITONSERVER_Error *err = TRITONBACKEND_ResponseNew(&s->response, s->request);
    if (err != NULL) {
      nrd_bu_error_log_and_delete(err, "onnxruntime: cannot create a response");
      s->response = NULL;
      s->grouped = true;
      continue;
    }
    err = check_request(inst, s);
    if (err != NULL) {
      fail_slot(s, err);
      TRITONSERVER_ErrorDelete(err);
      s->grouped = true;
      uint64_t now = nrd_bu_now_ns();
      nrd_bu_error_log_and_delete(
          TRITONBACKEND_ModelInstanceReportStatistics(instance, s->request, false, exec_start, now, now, now),
          "onnxruntime: cannot report statistics");
    }
  }
  /* Without batching every request runs alone; with it, requests of equal
   * shapes run together, in arrival order. */
  bool batched = inst->model->max_batch_size > 0;
  for (uint32_t i = 0; i < count; i++) {
    if (slots[i].grouped) continue;
    size_t n = 0;
    group[n++] = &slots[i];
    slots[i].grouped = true;
    for (uint32_t j = i + 1; batched && j < count; j++) {
      if (!slots[j].grouped && same_shapes(inst, slots[i].request, slots[j].request)) {
        group[n++] = &slots[j];
        slots[j].grouped = true;
      }
    }
    run_group(inst, instance, group, n, exec_start);
  }
  for (uint32_t i = 0; i < count; i++) nrd_bu_request_release(requests[i]);
  free(slots);
  free(group);
}
