/*
 * Execution for the openvino backend (ov_model.h): the requests of one
 * Execute call become one inference, inputs joined along the batch
 * dimension; each response gets its rows of every output it asked for.
 *
 * Batching follows Triton's openvino backend: a model with max_batch_size
 * > 0 is compiled for exactly max_batch_size rows, so a batch of fewer rows
 * is refused unless ENABLE_BATCH_PADDING is YES, which pads it with zero
 * rows (the padding never reaches a response).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nereid/backend_utils.h"
#include "ov_model.h"

/* One input of the batch while it is being inferred. */
typedef struct staged {
  nrd_bu_batch_input gathered; /* the requests' bytes, or 'padded' */
  void *padded; /* owned: max_batch_size rows, the tail zero */
  nrd_ov_tensor_t *tensor; /* owned: ov_tensor_free */
} staged;

/* Sends 'err' (kept by the caller) as the final response of every request
 * still holding a response, and forgets them. */
static void fail_all(TRITONBACKEND_Response **responses, uint32_t n, TRITONSERVER_Error *err) {
  for (uint32_t i = 0; i < n; i++) {
    if (responses[i] == NULL) continue;
    TRITONSERVER_Error *e = TRITONBACKEND_ResponseSend(responses[i], TRITONSERVER_RESPONSE_COMPLETE_FINAL, err);
    if (e != NULL) nrd_bu_error_log_and_delete(e, "openvino: sending an error response");
    responses[i] = NULL;
  }
}

/* Sends 'err' (consumed) as the final response of one request. */
static void fail_one(TRITONBACKEND_Response **response, TRITONSERVER_Error *err) {
  TRITONSERVER_Error *e = TRITONBACKEND_ResponseSend(*response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, err);
  if (e != NULL) nrd_bu_error_log_and_delete(e, "openvino: sending an error response");
  TRITONSERVER_ErrorDelete(err);
  *response = NULL;
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

/* Joins input 'io' of every request and hands it to the infer request.
 * 'rows' are the batch's rows, 'pad' the zero rows to add. */
static TRITONSERVER_Error *stage_input(const ov_instance *inst, TRITONBACKEND_Request **requests, uint32_t n,
                                       const ov_io *io, int64_t rows, int64_t pad, staged *s) {
  const ov_model *m = inst->model;
  TRITONBACKEND_Input *input = NULL;
  const int64_t *shape = NULL;
  uint32_t rank = 0;
  TRITONSERVER_Error *err = TRITONBACKEND_RequestInput(requests[0], io->name, &input);
  if (err == NULL) err = TRITONBACKEND_InputProperties(input, NULL, NULL, &shape, &rank, NULL, NULL);
  if (err != NULL) return err;
  int64_t dims[64];
  if (rank > 64 || (m->max_batch_size > 0 && rank == 0)) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "openvino: input '%s' has an unsupported shape",
                             io->name);
  }
  memcpy(dims, shape, rank * sizeof *dims);
  if (m->max_batch_size > 0) dims[0] = rows;
  int64_t elements = nrd_bu_shape_elements(dims, rank);
  uint32_t size = TRITONSERVER_DataTypeByteSize(io->datatype);
  if (elements < 0) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "openvino: input '%s' has a bad shape", io->name);
  }
  uint64_t want = (uint64_t)elements * size;
  uint64_t full = want;
  if (pad > 0) {
    /* The bytes of one row come from the non-batch dimensions, so a batch
     * of zero rows is padded to full size as well. */
    int64_t row = nrd_bu_shape_elements(dims + 1, rank - 1);
    if (row < 0 || (uint64_t)row > UINT64_MAX / size / (uint64_t)(rows + pad)) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "openvino: input '%s' has a bad shape", io->name);
    }
    full = (uint64_t)row * size * (uint64_t)(rows + pad);
    s->padded = calloc(1, full > 0 ? full : 1);
    if (s->padded == NULL) return nrd_bu_error_newf(TRITONSERVER_ERROR_UNAVAILABLE, "openvino: out of memory");
  }
  err = nrd_bu_batch_input_gather(requests, n, io->name, s->padded, full, &s->gathered);
  if (err != NULL) return err;
  if (s->gathered.byte_size != want) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_UNSUPPORTED,
                             "expected %llu bytes of data in input buffer, got %llu bytes.", (unsigned long long)want,
                             (unsigned long long)s->gathered.byte_size);
  }
  /* A single request's buffer is used in place, not copied: copy it
   * ahead of the padding rows. */
  if (s->padded != NULL && s->gathered.data != s->padded && want > 0) memcpy(s->padded, s->gathered.data, want);
  if (pad > 0) dims[0] = rows + pad;
  const nrd_ov_api *api = &m->rt->api;
  nrd_ov_shape_t ovs;
  memset(&ovs, 0, sizeof ovs);
  err = ov_runtime_error(m->rt, api->ov_shape_create(rank, dims, &ovs), TRITONSERVER_ERROR_INTERNAL,
                         "setting tensor data");
  if (err != NULL) return err;
  /* OpenVINO only reads an input tensor: the request's bytes are not
   * written through this pointer. */
  void *data = s->padded != NULL ? s->padded : (void *)(uintptr_t)s->gathered.data;
  err = ov_runtime_error(m->rt, api->ov_tensor_create_from_host_ptr(ov_element_of(io->datatype), ovs, data, &s->tensor),
                         TRITONSERVER_ERROR_INTERNAL, "setting tensor data");
  api->ov_shape_free(&ovs);
  if (err == NULL) {
    err = ov_runtime_error(m->rt, api->ov_infer_request_set_tensor(inst->request, io->name, s->tensor),
                           TRITONSERVER_ERROR_INVALID_ARG, "setting tensor data");
  }
  return err;
}

/* Hands output 'io' to every response that asked for it; a response that
 * cannot take it is failed alone. An error here fails them all. */
static TRITONSERVER_Error *deliver_output(const ov_instance *inst, TRITONBACKEND_Request **requests,
                                          TRITONBACKEND_Response **responses, const int64_t *rows, uint32_t n,
                                          int64_t pad, const ov_io *io) {
  const ov_model *m = inst->model;
  const nrd_ov_api *api = &m->rt->api;
  bool wanted = false;
  for (uint32_t i = 0; !wanted && i < n; i++) {
    wanted = responses[i] != NULL && output_requested(requests[i], io->name);
  }
  if (!wanted) return NULL;
  nrd_ov_tensor_t *t = NULL;
  nrd_ov_shape_t shape;
  memset(&shape, 0, sizeof shape);
  nrd_ov_element et = NRD_OV_DYNAMIC;
  void *data = NULL;
  size_t bytes = 0;
  TRITONSERVER_Error *err = ov_runtime_error(m->rt, api->ov_infer_request_get_tensor(inst->request, io->name, &t),
                                             TRITONSERVER_ERROR_INTERNAL, "getting output tensor");
  if (err == NULL) {
    nrd_ov_status st = api->ov_tensor_get_shape(t, &shape);
    if (st == NRD_OV_OK) st = api->ov_tensor_get_element_type(t, &et);
    if (st == NRD_OV_OK) st = api->ov_tensor_get_byte_size(t, &bytes);
    if (st == NRD_OV_OK) st = api->ov_tensor_data(t, &data);
    err = ov_runtime_error(m->rt, st, TRITONSERVER_ERROR_INTERNAL, "reading output tensor");
  }
  TRITONSERVER_DataType dt = ov_triton_type_of(et);
  if (err == NULL && (dt == TRITONSERVER_TYPE_INVALID || shape.rank > 64)) {
    err = nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL, "openvino: output '%s' has an unsupported type or shape",
                            io->name);
  }
  bool batched = m->max_batch_size > 0;
  if (err == NULL && batched &&
      (shape.rank == 0 || (shape.dims[0] != m->max_batch_size && shape.dims[0] != m->max_batch_size - pad))) {
    err = nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL,
                            "expected the batch size of openvino model output to be %lld, got %lld",
                            (long long)m->max_batch_size, shape.rank == 0 ? 0LL : (long long)shape.dims[0]);
  }
  if (err == NULL) {
    int64_t dims[64];
    memcpy(dims, shape.dims, (size_t)shape.rank * sizeof *dims);
    size_t row_bytes = batched ? bytes / (size_t)shape.dims[0] : bytes;
    size_t offset = 0;
    for (uint32_t i = 0; i < n; i++) {
      size_t len = batched ? row_bytes * (size_t)rows[i] : bytes;
      if (batched) dims[0] = rows[i];
      if (responses[i] != NULL && output_requested(requests[i], io->name)) {
        TRITONBACKEND_Output *out = NULL;
        void *buf = NULL;
        TRITONSERVER_MemoryType mt = TRITONSERVER_MEMORY_CPU;
        int64_t mt_id = 0;
        TRITONSERVER_Error *e =
            TRITONBACKEND_ResponseOutput(responses[i], &out, io->name, dt, dims, (uint32_t)shape.rank);
        if (e == NULL) e = TRITONBACKEND_OutputBuffer(out, &buf, len, &mt, &mt_id);
        if (e == NULL && len > 0 && mt == TRITONSERVER_MEMORY_GPU) {
          e = nrd_bu_error_newf(TRITONSERVER_ERROR_UNSUPPORTED, "openvino: output '%s': GPU buffers are not supported",
                                io->name);
        }
        if (e == NULL && len > 0) memcpy(buf, (const char *)data + offset, len);
        if (e != NULL) fail_one(&responses[i], e);
      }
      offset += batched ? len : 0;
    }
  }
  if (shape.dims != NULL) api->ov_shape_free(&shape);
  if (t != NULL) api->ov_tensor_free(t);
  return err;
}

/* One inference over requests[0..n): every request answered, none released. */
static bool run(ov_instance *inst, TRITONBACKEND_Request **requests, TRITONBACKEND_Response **responses, uint32_t n,
                int64_t *total_out, uint64_t *compute_start, uint64_t *compute_end) {
  const ov_model *m = inst->model;
  const nrd_ov_api *api = &m->rt->api;
  int64_t *rows = calloc(n, sizeof *rows);
  staged *st = calloc(m->input_count > 0 ? m->input_count : 1, sizeof *st);
  TRITONSERVER_Error *err =
      rows == NULL || st == NULL ? nrd_bu_error_newf(TRITONSERVER_ERROR_UNAVAILABLE, "openvino: out of memory") : NULL;
  int64_t total = 0;
  for (uint32_t i = 0; err == NULL && i < n; i++) {
    rows[i] = 1;
    if (m->max_batch_size > 0) {
      TRITONBACKEND_Input *input = NULL;
      const int64_t *shape = NULL;
      uint32_t rank = 0;
      err = TRITONBACKEND_RequestInputByIndex(requests[i], 0, &input);
      if (err == NULL) err = TRITONBACKEND_InputProperties(input, NULL, NULL, &shape, &rank, NULL, NULL);
      if (err == NULL) rows[i] = rank > 0 ? shape[0] : 0;
    }
    total += rows[i];
  }
  int64_t pad = 0;
  if (err == NULL && m->max_batch_size > 0) {
    if (total > m->max_batch_size) {
      err = nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL, "batch size %lld for '%s', max allowed is %lld",
                              (long long)total, m->name, (long long)m->max_batch_size);
    } else if (total != m->max_batch_size && !m->batch_padding) {
      err = nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL,
                              "expected requests with batch size '%lld', got '%lld'... this error can be avoided by "
                              "setting 'ENABLE_BATCH_PADDING' parameter in model configuration to 'YES' at a "
                              "performance cost.",
                              (long long)m->max_batch_size, (long long)total);
    } else {
      pad = m->max_batch_size - total;
    }
  }
  for (size_t i = 0; err == NULL && i < m->input_count; i++) {
    err = stage_input(inst, requests, n, &m->inputs[i], total, pad, &st[i]);
  }
  *compute_start = nrd_bu_now_ns();
  if (err == NULL) {
    err = ov_runtime_error(m->rt, api->ov_infer_request_infer(inst->request), TRITONSERVER_ERROR_INTERNAL,
                           "running inference");
  }
  *compute_end = nrd_bu_now_ns();
  for (size_t i = 0; err == NULL && i < m->output_count; i++) {
    err = deliver_output(inst, requests, responses, rows, n, pad, &m->outputs[i]);
  }
  for (size_t i = 0; st != NULL && i < m->input_count; i++) {
    if (st[i].tensor != NULL) api->ov_tensor_free(st[i].tensor);
    nrd_bu_batch_input_release(&st[i].gathered);
    free(st[i].padded);
  }
  free(st);
  free(rows);
  *total_out = total;
  if (err != NULL) {
    fail_all(responses, n, err);
    TRITONSERVER_ErrorDelete(err);
    return false;
  }
  return true;
}

/* One group of requests run together: responses, inference, statistics. */
static void execute_group(ov_instance *inst, TRITONBACKEND_ModelInstance *instance, TRITONBACKEND_Request **requests,
                          uint32_t n) {
  uint64_t exec_start = nrd_bu_now_ns();
  TRITONBACKEND_Response **responses = calloc(n, sizeof *responses);
  if (responses == NULL) {
    nrd_bu_requests_fail(instance, requests, n,
                         nrd_bu_error_newf(TRITONSERVER_ERROR_UNAVAILABLE, "openvino: out of memory"));
    return;
  }
  for (uint32_t i = 0; i < n; i++) {
    TRITONSERVER_Error *e = TRITONBACKEND_ResponseNew(&responses[i], requests[i]);
    if (e != NULL) {
      responses[i] = NULL;
      nrd_bu_error_log_and_delete(e, "openvino: creating a response");
    }
  }
  int64_t total = 0;
  uint64_t compute_start = exec_start, compute_end = exec_start;
  bool ok = run(inst, requests, responses, n, &total, &compute_start, &compute_end);
  for (uint32_t i = 0; i < n; i++) {
    if (responses[i] == NULL) continue;
    TRITONSERVER_Error *e = TRITONBACKEND_ResponseSend(responses[i], TRITONSERVER_RESPONSE_COMPLETE_FINAL, NULL);
    if (e != NULL) nrd_bu_error_log_and_delete(e, "openvino: sending a response");
  }
  uint64_t exec_end = nrd_bu_now_ns();
  for (uint32_t i = 0; i < n; i++) {
    TRITONSERVER_Error *e = TRITONBACKEND_ModelInstanceReportStatistics(
        instance, requests[i], ok && responses[i] != NULL, exec_start, compute_start, compute_end, exec_end);
    if (e != NULL) nrd_bu_error_log_and_delete(e, "openvino: reporting statistics");
    nrd_bu_request_release(requests[i]);
  }
  if (ok) {
    TRITONSERVER_Error *e = TRITONBACKEND_ModelInstanceReportBatchStatistics(instance, (uint64_t)total, exec_start,
                                                                             compute_start, compute_end, exec_end);
    if (e != NULL) nrd_bu_error_log_and_delete(e, "openvino: reporting batch statistics");
  }
  free(responses);
}

void ov_instance_execute(ov_instance *inst, TRITONBACKEND_ModelInstance *instance, TRITONBACKEND_Request **requests,
                         uint32_t count) {
  if (inst->model->max_batch_size > 0) {
    execute_group(inst, instance, requests, count);
    return;
  }
  /* Without batching each request is its own inference. */
  for (uint32_t i = 0; i < count; i++) execute_group(inst, instance, &requests[i], 1);
}
