/*
 * The fil backend's Execute (fil_execute.h).
 *
 * Copies: one request held in one aligned buffer goes to GTIL without a
 * copy; several (or a misaligned one) are gathered into the instance's
 * buffer. A float32 model whose
 * output needs no post-processing writes straight into the batch output;
 * each request's rows are then copied once into the buffer its front end
 * allocated.
 */
#include "fil_execute.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nereid/backend_utils.h"

static const char kInput[] = "input__0";
static const char kOutput[] = "output__0";

/* One request of an Execute call. */
typedef struct slot {
  TRITONBACKEND_Request *request;
  TRITONBACKEND_Response *response; /* NULL once answered with an error */
  uint64_t rows;
  bool rank1; /* a single row given as [features] (models without batching) */
} slot;

static TRITONSERVER_Error *oom(void) {
  return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, "fil: out of memory");
}

static void *scratch(fil_scratch *s, size_t bytes) {
  if (bytes == 0) bytes = 1;
  if (s->cap < bytes) {
    void *p = realloc(s->data, bytes);
    if (p == NULL) return NULL;
    s->data = p;
    s->cap = bytes;
  }
  return s->data;
}

void fil_instance_release(fil_instance *inst) {
  free(inst->input.data);
  free(inst->widened.data);
  free(inst->gtil.data);
  free(inst->output.data);
  memset(inst, 0, sizeof *inst);
}

/* Answers a slot with 'err' (kept by the caller). */
static void fail_slot(slot *s, TRITONSERVER_Error *err) {
  if (s->response == NULL) return;
  nrd_bu_error_log_and_delete(TRITONBACKEND_ResponseSend(s->response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, err),
                              "fil: cannot send an error response");
  s->response = NULL;
}

/* Finds a request's rows; errors name the model, the input and the shape. */
static TRITONSERVER_Error *check_request(const fil_model *m, slot *s) {
  TRITONBACKEND_Input *input = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_RequestInput(s->request, kInput, &input);
  if (err != NULL) {
    TRITONSERVER_ErrorDelete(err);
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "fil: model '%s': the request has no input '%s'", m->name,
                             kInput);
  }
  TRITONSERVER_DataType dt;
  const int64_t *shape = NULL;
  uint32_t dims = 0;
  uint64_t bytes = 0;
  err = TRITONBACKEND_InputProperties(input, NULL, &dt, &shape, &dims, &bytes, NULL);
  if (err != NULL) return err;
  if (dt != TRITONSERVER_TYPE_FP32) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             "fil: model '%s': input '%s' is %s; the FIL backend takes FP32 only", m->name, kInput,
                             TRITONSERVER_DataTypeString(dt));
  }
  char text[96];
  int64_t rows = -1, cols = -1;
  if (dims == 2) {
    rows = shape[0];
    cols = shape[1];
  } else if (dims == 1 && m->max_batch_size == 0) {
    rows = 1;
    cols = shape[0];
    s->rank1 = true;
  }
  if (rows < 0 || cols != m->num_feature) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             "fil: model '%s': input '%s' has shape %s; the model takes [ rows, %lld ]", m->name,
                             kInput, nrd_bu_shape_string(shape, dims, text, sizeof text), (long long)m->num_feature);
  }
  if (rows > 0 && (uint64_t)rows > UINT64_MAX / 4 / (uint64_t)cols) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "fil: model '%s': input '%s': %lld rows are too many",
                             m->name, kInput, (long long)rows);
  }
  if (bytes != (uint64_t)rows * (uint64_t)cols * sizeof(float)) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             "fil: model '%s': input '%s' has %llu bytes but shape %s needs %llu", m->name, kInput,
                             (unsigned long long)bytes, nrd_bu_shape_string(shape, dims, text, sizeof text),
                             (unsigned long long)((uint64_t)rows * (uint64_t)cols * sizeof(float)));
  }
  s->rows = (uint64_t)rows;
  return NULL;
}

/* FIL's post-processing of GTIL's values ('g' per row, float or double)
 * into output__0 ('m->out_per_row' floats per row). */
static void postprocess(const fil_model *m, const void *gtil, float *out, uint64_t rows) {
  uint64_t g = m->gtil_per_row;
  const float *gf = gtil;
  const double *gd = gtil;
  const fil_params *p = &m->params;
  for (uint64_t r = 0; r < rows; r++) {
    if (g == 1 && p->predict_proba) {
      float v = m->output_f64 ? (float)gd[r] : gf[r];
      out[2 * r] = 1.0f - v;
      out[2 * r + 1] = v;
    } else if (g == 1 && p->output_class) {
      float v = m->output_f64 ? (float)gd[r] : gf[r];
      out[r] = v > p->threshold ? 1.0f : 0.0f;
    } else if (p->output_class && !p->predict_proba) {
      uint64_t best = 0;
      for (uint64_t c = 1; c < g; c++) {
        double vc = m->output_f64 ? gd[r * g + c] : gf[r * g + c];
        double vb = m->output_f64 ? gd[r * g + best] : gf[r * g + best];
        if (vc > vb) best = c;
      }
      out[r] = (float)best;
    } else {
      for (uint64_t c = 0; c < g; c++) out[r * g + c] = m->output_f64 ? (float)gd[r * g + c] : gf[r * g + c];
    }
  }
}

static bool needs_postprocess(const fil_model *m) {
  return m->output_f64 || m->out_per_row != m->gtil_per_row || (m->params.output_class && !m->params.predict_proba);
}

/* Predicts 'total' gathered rows into the instance's output buffer. */
static TRITONSERVER_Error *predict(fil_instance *inst, const float *rows_in, uint64_t total, float **out) {
  const fil_model *m = inst->model;
  const tl_api *tl = m->tl;
  uint64_t values = total * (uint64_t)m->num_feature;
  float *result = scratch(&inst->output, total * m->out_per_row * sizeof(float));
  if (result == NULL) return oom();
  const void *input = rows_in;
  if (m->input_f64) {
    double *wide = scratch(&inst->widened, values * sizeof(double));
    if (wide == NULL) return oom();
    for (uint64_t i = 0; i < values; i++) wide[i] = rows_in[i];
    input = wide;
  }
  void *target = result;
  bool post = needs_postprocess(m);
  if (post) {
    target = scratch(&inst->gtil, total * m->gtil_per_row * (m->output_f64 ? sizeof(double) : sizeof(float)));
    if (target == NULL) return oom();
  }
  TreeliteGTILConfigHandle config = fil_model_config(m, total);
  if (tl->GTILPredict(m->handle, input, m->input_f64 ? "float64" : "float32", total, target, config) != 0) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL, "fil: model '%s': Treelite's prediction failed: %s", m->name,
                             tl_api_error(tl));
  }
  if (post) postprocess(m, target, result, total);
  *out = result;
  return NULL;
}

/* Gathers the good slots' rows, predicts them and answers each. */
static void run(fil_instance *inst, slot *slots, uint32_t count, uint64_t total, TRITONBACKEND_Request **good,
                uint32_t ngood, uint64_t *compute_start, uint64_t *compute_end) {
  const fil_model *m = inst->model;
  uint64_t bytes = total * (uint64_t)m->num_feature * sizeof(float);
  nrd_bu_batch_input in;
  memset(&in, 0, sizeof in);
  TRITONSERVER_Error *err = NULL;
  void *buffer = NULL;
  if (ngood > 1) {
    buffer = scratch(&inst->input, bytes);
    if (buffer == NULL) err = oom();
  }
  if (err == NULL) err = nrd_bu_batch_input_gather(good, ngood, kInput, buffer, buffer != NULL ? bytes : 0, &in);
  /* Tensors in an HTTP body may start at any byte: GTIL reads floats, so
   * misaligned rows are copied into the (aligned) instance buffer first. */
  const float *rows_in = in.data;
  if (err == NULL && ((uintptr_t)in.data % _Alignof(float)) != 0) {
    void *aligned = in.data == inst->input.data ? NULL : scratch(&inst->input, bytes);
    if (aligned == NULL) {
      err = oom();
    } else {
      memcpy(aligned, in.data, bytes);
      rows_in = aligned;
    }
  }
  *compute_start = nrd_bu_now_ns();
  float *out = NULL;
  if (err == NULL && total > 0) err = predict(inst, rows_in, total, &out);
  *compute_end = nrd_bu_now_ns();
  nrd_bu_batch_input_release(&in);
  uint64_t at = 0;
  for (uint32_t i = 0; i < count; i++) {
    slot *s = &slots[i];
    if (s->response == NULL) continue;
    if (err != NULL) {
      fail_slot(s, err);
      continue;
    }
    /* Rank 1 (one row, no batching): output__0 is [ values ]; otherwise
     * [ rows, values ]. */
    int64_t shape[2] = {(int64_t)s->rows, (int64_t)m->out_per_row};
    uint64_t nrows = s->rows;
    const int64_t *sh = shape;
    uint32_t dims = 2;
    if (s->rank1) {
      sh = &shape[1];
      dims = 1;
      nrows = m->out_per_row;
    }
    static const float kNone = 0.0f;
    const float *rows_out = out != NULL ? out + at * m->out_per_row : &kNone;
    TRITONSERVER_Error *serr = nrd_bu_batch_output_scatter(&s->response, 1, kOutput, TRITONSERVER_TYPE_FP32, sh, dims,
                                                           &nrows, rows_out, s->rows * m->out_per_row * sizeof(float));
    if (serr != NULL) {
      fail_slot(s, serr);
      TRITONSERVER_ErrorDelete(serr);
    }
    at += s->rows;
  }
  TRITONSERVER_ErrorDelete(err);
}

void fil_execute(fil_instance *inst, TRITONBACKEND_ModelInstance *instance, TRITONBACKEND_Request **requests,
                 uint32_t count) {
  uint64_t exec_start = nrd_bu_now_ns();
  slot local[8];
  TRITONBACKEND_Request *local_good[8];
  slot *slots = count <= 8 ? local : calloc(count, sizeof *slots);
  TRITONBACKEND_Request **good = count <= 8 ? local_good : calloc(count, sizeof *good);
  if (slots == NULL || good == NULL) {
    if (slots != local) free(slots);
    if (good != local_good) free(good);
    nrd_bu_requests_fail(instance, requests, count, oom());
    return;
  }
  memset(slots, 0, count * sizeof *slots);
  uint64_t total = 0;
  uint32_t ngood = 0;
  for (uint32_t i = 0; i < count; i++) {
    slot *s = &slots[i];
    s->request = requests[i];
    TRITONSERVER_Error *err = TRITONBACKEND_ResponseNew(&s->response, s->request);
    if (err != NULL) {
      nrd_bu_error_log_and_delete(err, "fil: cannot create a response");
      s->response = NULL;
      continue;
    }
    err = check_request(inst->model, s);
    if (err != NULL) {
      fail_slot(s, err);
      TRITONSERVER_ErrorDelete(err);
      continue;
    }
    good[ngood++] = s->request;
    total += s->rows;
  }
  uint64_t compute_start = nrd_bu_now_ns(), compute_end = compute_start;
  if (ngood > 0) run(inst, slots, count, total, good, ngood, &compute_start, &compute_end);
  uint64_t exec_end = nrd_bu_now_ns();
  for (uint32_t i = 0; i < count; i++) {
    slot *s = &slots[i];
    bool ok = s->response != NULL;
    if (ok) {
      nrd_bu_error_log_and_delete(TRITONBACKEND_ResponseSend(s->response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, NULL),
                                  "fil: cannot send a response");
    }
    nrd_bu_error_log_and_delete(TRITONBACKEND_ModelInstanceReportStatistics(instance, s->request, ok, exec_start,
                                                                            compute_start, compute_end, exec_end),
                                "fil: cannot report statistics");
  }
  if (ngood > 0) {
    nrd_bu_error_log_and_delete(TRITONBACKEND_ModelInstanceReportBatchStatistics(instance, total, exec_start,
                                                                                 compute_start, compute_end, exec_end),
                                "fil: cannot report batch statistics");
  }
  for (uint32_t i = 0; i < count; i++) nrd_bu_request_release(requests[i]);
  if (slots != local) free(slots);
  if (good != local_good) free(good);
}
