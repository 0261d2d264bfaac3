/*
 * add_sub backend: OUTPUT0 = INPUT0 + INPUT1 and OUTPUT1 = INPUT0 - INPUT1,
 * element-wise, for INT32 or FP32 tensors of identical shape (the datatype
 * comes from the model configuration). Only the outputs a request asks for
 * are produced. INT32 arithmetic wraps around on overflow.
 *
 * Threads: the model state is written once in ModelInitialize and only read
 * afterwards, so instances share it without locking.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "nereid/backend_utils.h"

typedef struct add_sub_model {
  TRITONSERVER_DataType datatype; /* INT32 or FP32 */
  int64_t max_batch_size;
} add_sub_model;

static const char *const kInputs[2] = {"INPUT0", "INPUT1"};
static const char *const kOutputs[2] = {"OUTPUT0", "OUTPUT1"};

/* Maps "TYPE_INT32"/"TYPE_FP32" of a configuration tensor to a datatype. */
static TRITONSERVER_Error *config_tensor_type(const json_t *config, const char *section, const char *name,
                                              TRITONSERVER_DataType *out) {
  const json_t *tensor = nrd_bu_config_tensor(config, section, name);
  if (tensor == NULL) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "add_sub: model configuration has no %s '%s'", section,
                             name);
  }
  const char *type = json_string_value(json_object_get(tensor, "data_type"));
  if (type != NULL && strcmp(type, "TYPE_INT32") == 0) {
    *out = TRITONSERVER_TYPE_INT32;
  } else if (type != NULL && strcmp(type, "TYPE_FP32") == 0) {
    *out = TRITONSERVER_TYPE_FP32;
  } else {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             "add_sub: %s '%s': data_type must be TYPE_INT32 "
                             "or TYPE_FP32, got %s",
                             section, name, type != NULL ? type : "(none)");
  }
  return NULL;
}

static TRITONSERVER_Error *model_read(const json_t *config, add_sub_model *out) {
  TRITONSERVER_DataType types[4];
  TRITONSERVER_Error *err = NULL;
  for (int i = 0; i < 2 && err == NULL; ++i) {
    err = config_tensor_type(config, "input", kInputs[i], &types[i]);
  }
  for (int i = 0; i < 2 && err == NULL; ++i) {
    err = config_tensor_type(config, "output", kOutputs[i], &types[2 + i]);
  }
  if (err != NULL) {
    return err;
  }
  for (int i = 1; i < 4; ++i) {
    if (types[i] != types[0]) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                               "add_sub: %s '%s' has datatype %s but INPUT0 has %s; all inputs "
                               "and outputs must share one datatype",
                               i < 2 ? "input" : "output", i < 2 ? kInputs[i] : kOutputs[i - 2],
                               TRITONSERVER_DataTypeString(types[i]), TRITONSERVER_DataTypeString(types[0]));
    }
  }
  out->datatype = types[0];
  return nrd_bu_config_max_batch_size(config, &out->max_batch_size);
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_Initialize(TRITONBACKEND_Backend *backend) {
  (void)backend;
  return nrd_bu_api_version_check("add_sub");
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model *model) {
  json_t *config = NULL;
  TRITONSERVER_Error *err = nrd_bu_model_config(model, &config);
  if (err != NULL) {
    return err;
  }
  add_sub_model settings;
  err = model_read(config, &settings);
  json_decref(config);
  if (err != NULL) {
    return err;
  }
  return nrd_bu_model_state_set(model, &settings, sizeof settings, "add_sub");
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model *model) {
  return nrd_bu_model_state_free(model);
}

/* Instances share the read-only model settings (see the file comment). */
NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance *instance) {
  return nrd_bu_instance_share_model_state(instance, "add_sub");
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance *instance) {
  return TRITONBACKEND_ModelInstanceSetState(instance, NULL);
}

/* Checks one input against the model's datatype and INPUT0's shape. */
static TRITONSERVER_Error *check_input(const add_sub_model *m, const nrd_bu_tensor *t, const nrd_bu_tensor *first) {
  if (t->datatype != m->datatype) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "add_sub: input '%s' has datatype %s, expected %s",
                             t->name, TRITONSERVER_DataTypeString(t->datatype),
                             TRITONSERVER_DataTypeString(m->datatype));
  }
  int64_t elements = nrd_bu_shape_elements(t->shape, t->dims_count);
  if (elements < 0 || (uint64_t)elements > UINT64_MAX / 4 || (uint64_t)elements * 4 != t->byte_size) {
    char shape[128];
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             "add_sub: input '%s' has %" PRIu64 " bytes of data, which does not "
                             "match its shape %s",
                             t->name, t->byte_size, nrd_bu_shape_string(t->shape, t->dims_count, shape, sizeof shape));
  }
  if (first != NULL && (t->dims_count != first->dims_count ||
                        (t->dims_count > 0 && memcmp(t->shape, first->shape, t->dims_count * sizeof *t->shape) != 0))) {
    char s0[128], s1[128];
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             "add_sub: input '%s' has shape %s, which differs from input '%s' "
                             "shape %s",
                             t->name, nrd_bu_shape_string(t->shape, t->dims_count, s1, sizeof s1), first->name,
                             nrd_bu_shape_string(first->shape, first->dims_count, s0, sizeof s0));
  }
  return NULL;
}

/* Computes output 'which' (0: sum, 1: difference) into 'dst'. */
static void compute(TRITONSERVER_DataType type, int which, const void *a, const void *b, void *dst, size_t n) {
  if (type == TRITONSERVER_TYPE_INT32) {
    /* Go through uint32 so overflow wraps instead of being undefined; the
     * memcpy loads keep unaligned request buffers safe. */
    for (size_t i = 0; i < n; ++i) {
      uint32_t x, y, r;
      memcpy(&x, (const char *)a + 4 * i, 4);
      memcpy(&y, (const char *)b + 4 * i, 4);
      r = which == 0 ? x + y : x - y;
      memcpy((char *)dst + 4 * i, &r, 4);
    }
  } else {
    for (size_t i = 0; i < n; ++i) {
      float x, y, r;
      memcpy(&x, (const char *)a + 4 * i, 4);
      memcpy(&y, (const char *)b + 4 * i, 4);
      r = which == 0 ? x + y : x - y;
      memcpy((char *)dst + 4 * i, &r, 4);
    }
  }
}

static TRITONSERVER_Error *add_output(TRITONBACKEND_Response *response, const add_sub_model *m, int which,
                                      const nrd_bu_tensor *in) {
  TRITONBACKEND_Output *output = NULL;
  TRITONSERVER_Error *err =
      TRITONBACKEND_ResponseOutput(response, &output, kOutputs[which], m->datatype, in[0].shape, in[0].dims_count);
  if (err != NULL) {
    return err;
  }
  void *dst = NULL;
  TRITONSERVER_MemoryType mem = TRITONSERVER_MEMORY_CPU;
  int64_t mem_id = 0;
  err = TRITONBACKEND_OutputBuffer(output, &dst, in[0].byte_size, &mem, &mem_id);
  if (err != NULL) {
    return err;
  }
  if (in[0].byte_size == 0) {
    return NULL;
  }
  if (dst == NULL || (mem != TRITONSERVER_MEMORY_CPU && mem != TRITONSERVER_MEMORY_CPU_PINNED)) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_UNSUPPORTED,
                             "add_sub: output '%s': buffer is not in CPU "
                             "memory",
                             kOutputs[which]);
  }
  compute(m->datatype, which, in[0].data, in[1].data, dst, (size_t)(in[0].byte_size / 4));
  return NULL;
}

/* Fills 'response' for 'request'; the returned error becomes its outcome. */
static TRITONSERVER_Error *respond(const add_sub_model *m, TRITONBACKEND_Request *request,
                                   TRITONBACKEND_Response *response) {
  nrd_bu_tensor in[2];
  memset(in, 0, sizeof in);
  TRITONSERVER_Error *err = NULL;
  for (int i = 0; i < 2 && err == NULL; ++i) {
    err = nrd_bu_request_input(request, kInputs[i], &in[i]);
    if (err != NULL) {
      TRITONSERVER_Error *named =
          nrd_bu_error_newf(TRITONSERVER_ErrorCode(err), "add_sub: %s", TRITONSERVER_ErrorMessage(err));
      TRITONSERVER_ErrorDelete(err);
      err = named;
    } else {
      err = check_input(m, &in[i], i == 0 ? NULL : &in[0]);
    }
  }
  uint32_t out_count = 0;
  if (err == NULL) {
    err = TRITONBACKEND_RequestOutputCount(request, &out_count);
  }
  if (err == NULL && out_count == 0) {
    for (int w = 0; w < 2 && err == NULL; ++w) {
      err = add_output(response, m, w, in);
    }
  }
  for (uint32_t i = 0; err == NULL && i < out_count; ++i) {
    const char *name = NULL;
    err = TRITONBACKEND_RequestOutputName(request, i, &name);
    if (err != NULL) {
      break;
    }
    int which = (strcmp(name, kOutputs[0]) == 0) ? 0 : (strcmp(name, kOutputs[1]) == 0) ? 1 : -1;
    if (which < 0) {
      err = nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                              "add_sub: unknown requested output '%s' "
                              "(expected OUTPUT0 or OUTPUT1)",
                              name);
    } else {
      err = add_output(response, m, which, in);
    }
  }
  nrd_bu_tensor_release(&in[0]);
  nrd_bu_tensor_release(&in[1]);
  return err;
}

/* ------------------------------------------------ the batched path */

/* What every request of a batch shares for the batched path. */
typedef struct batch_plan {
  int outs[2]; /* kOutputs indexes, in the order the requests ask */
  int n_outs;
  const int64_t *shape; /* request 0's INPUT0 shape, borrowed */
  uint32_t dims;
} batch_plan;

/* The outputs 'request' asks for, in order (both when it names none). */
static bool requested(TRITONBACKEND_Request *request, int outs[2], int *n) {
  uint32_t count = 0;
  TRITONSERVER_Error *err = TRITONBACKEND_RequestOutputCount(request, &count);
  if (err != NULL || count > 2) {
    TRITONSERVER_ErrorDelete(err);
    return false;
  }
  if (count == 0) {
    outs[0] = 0;
    outs[1] = 1;
    *n = 2;
    return true;
  }
  for (uint32_t i = 0; i < count; ++i) {
    const char *name = NULL;
    err = TRITONBACKEND_RequestOutputName(request, i, &name);
    if (err != NULL) {
      TRITONSERVER_ErrorDelete(err);
      return false;
    }
    outs[i] = strcmp(name, kOutputs[0]) == 0 ? 0 : strcmp(name, kOutputs[1]) == 0 ? 1 : -1;
    if (outs[i] < 0) return false;
  }
  *n = (int)count;
  return true;
}

/* Whether 'request' fits the plan (request 0 makes it): both inputs of the
 * model's datatype, one shape matching the data size, the batch's shape
 * beyond the first dimension, the same outputs. Stores its rows. */
static bool plan_fits(const add_sub_model *m, TRITONBACKEND_Request *request, batch_plan *p, bool first,
                      uint64_t *rows) {
  const int64_t *shape0 = NULL;
  uint32_t dims0 = 0;
  for (int i = 0; i < 2; ++i) {
    TRITONBACKEND_Input *input = NULL;
    TRITONSERVER_DataType dtype = TRITONSERVER_TYPE_INVALID;
    const int64_t *shape = NULL;
    uint32_t dims = 0;
    uint64_t bytes = 0;
    TRITONSERVER_Error *err = TRITONBACKEND_RequestInput(request, kInputs[i], &input);
    if (err == NULL) {
      err = TRITONBACKEND_InputProperties(input, NULL, &dtype, &shape, &dims, &bytes, NULL);
    }
    if (err != NULL) {
      TRITONSERVER_ErrorDelete(err);
      return false;
    }
    int64_t elements = nrd_bu_shape_elements(shape, dims);
    if (dtype != m->datatype || dims == 0 || elements < 0 || (uint64_t)elements > UINT64_MAX / 4 ||
        (uint64_t)elements * 4 != bytes) {
      return false;
    }
    if (i == 0) {
      shape0 = shape;
      dims0 = dims;
    } else if (dims != dims0 || memcmp(shape, shape0, dims * sizeof *shape) != 0) {
      return false;
    }
  }
  int outs[2], n = 0;
  if (!requested(request, outs, &n)) return false;
  if (first) {
    p->shape = shape0;
    p->dims = dims0;
    p->n_outs = n;
    memcpy(p->outs, outs, sizeof outs);
  } else if (dims0 != p->dims || (dims0 > 1 && memcmp(shape0 + 1, p->shape + 1, (dims0 - 1) * sizeof *shape0) != 0) ||
             n != p->n_outs || memcmp(outs, p->outs, (size_t)n * sizeof *outs) != 0) {
    return false;
  }
  *rows = (uint64_t)shape0[0];
  return true;
}

/* Runs the whole batch in one pass with the backend_utils batch helpers:
 * both inputs gathered once (zero copy for a single request), one
 * computation over all rows, each output scattered back. Sets ok[i].
 * Returns false, having sent nothing, when the batch does not fit; the
 * caller then answers request by request (with the precise errors). */
static bool execute_batched(const add_sub_model *m, TRITONBACKEND_Request **requests, uint32_t count, bool *ok) {
  batch_plan plan;
  uint64_t *rows = calloc(count, sizeof *rows);
  TRITONBACKEND_Response **responses = calloc(count, sizeof *responses);
  bool fits = rows != NULL && responses != NULL;
  for (uint32_t i = 0; fits && i < count; ++i) {
    fits = requests[i] != NULL && plan_fits(m, requests[i], &plan, i == 0, &rows[i]);
  }
  nrd_bu_batch_input in[2];
  memset(in, 0, sizeof in);
  TRITONSERVER_Error *err = NULL;
  for (int i = 0; fits && i < 2; ++i) {
    err = nrd_bu_batch_input_gather(requests, count, kInputs[i], NULL, 0, &in[i]);
    if (err != NULL) {
      /* Answered request by request instead, which explains it. */
      TRITONSERVER_ErrorDelete(err);
      err = NULL;
      fits = false;
    }
  }
  void *result = NULL;
  if (fits) {
    result = malloc(in[0].byte_size > 0 ? (size_t)in[0].byte_size : 1);
    fits = result != NULL;
  }
  uint32_t made = 0;
  for (; fits && made < count; ++made) {
    err = TRITONBACKEND_ResponseNew(&responses[made], requests[made]);
    if (err != NULL) {
      TRITONSERVER_ErrorDelete(err);
      err = NULL;
      fits = false;
      break;
    }
  }
  if (fits) {
    for (int k = 0; k < plan.n_outs && err == NULL; ++k) {
      int which = plan.outs[k];
      compute(m->datatype, which, in[0].data, in[1].data, result, (size_t)(in[0].byte_size / 4));
      err = nrd_bu_batch_output_scatter(responses, count, kOutputs[which], m->datatype, plan.shape, plan.dims, rows,
                                        result, in[0].byte_size);
    }
    for (uint32_t i = 0; i < count; ++i) {
      ok[i] = false;
      if (responses[i] == NULL) continue;
      /* A batch-wide error (err) becomes every open response's outcome. */
      TRITONSERVER_Error *send_err =
          TRITONBACKEND_ResponseSend(responses[i], TRITONSERVER_RESPONSE_COMPLETE_FINAL, err);
      ok[i] = (err == NULL && send_err == NULL);
      nrd_bu_error_log_and_delete(send_err, "add_sub: cannot send response");
    }
    if (err != NULL) TRITONSERVER_ErrorDelete(err);
  } else {
    for (uint32_t i = 0; i < made; ++i) {
      nrd_bu_error_log_and_delete(TRITONBACKEND_ResponseDelete(responses[i]), "add_sub: cannot delete a response");
    }
  }
  nrd_bu_batch_input_release(&in[0]);
  nrd_bu_batch_input_release(&in[1]);
  free(result);
  free(rows);
  free(responses);
  return fits;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance *instance,
                                                                          TRITONBACKEND_Request **requests,
                                                                          const uint32_t request_count) {
  void *state = NULL;
  TRITONSERVER_Error *err = nrd_bu_instance_state(instance, "add_sub", &state);
  if (err != NULL) {
    return err;
  }
  const add_sub_model *m = state;
  uint64_t exec_start = nrd_bu_now_ns();
  uint64_t total_batch = 0;
  /* A batching model whose requests all look alike runs in one pass. */
  bool small[64];
  bool *ok = request_count <= 64 ? small : malloc(request_count * sizeof *ok);
  if (m->max_batch_size > 0 && request_count > 0 && ok != NULL && execute_batched(m, requests, request_count, ok)) {
    uint64_t end = nrd_bu_now_ns();
    for (uint32_t r = 0; r < request_count; ++r) {
      total_batch += nrd_bu_request_batch_size(requests[r], kInputs[0]);
    }
    /* Batch statistics before any release: a released client may read
     * them at once. */
    nrd_bu_error_log_and_delete(
        TRITONBACKEND_ModelInstanceReportBatchStatistics(instance, total_batch, exec_start, exec_start, end, end),
        "add_sub: cannot report batch statistics");
    for (uint32_t r = 0; r < request_count; ++r) {
      nrd_bu_error_log_and_delete(
          TRITONBACKEND_ModelInstanceReportStatistics(instance, requests[r], ok[r], exec_start, exec_start, end, end),
          "add_sub: cannot report statistics");
      nrd_bu_request_release(requests[r]);
    }
    if (ok != small) free(ok);
    return NULL;
  }
  if (ok != small) free(ok);
  for (uint32_t r = 0; r < request_count; ++r) {
    TRITONBACKEND_Request *request = requests[r];
    if (request == NULL) {
      continue;
    }
    uint64_t start = nrd_bu_now_ns();
    total_batch += m->max_batch_size > 0 ? nrd_bu_request_batch_size(request, kInputs[0]) : 1;
    TRITONBACKEND_Response *response = NULL;
    bool success = false;
    err = TRITONBACKEND_ResponseNew(&response, request);
    if (err != NULL) {
      nrd_bu_error_log_and_delete(err, "add_sub: cannot create response");
    } else {
      err = respond(m, request, response);
      success = (err == NULL);
      TRITONSERVER_Error *send_err = TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, err);
      if (err != NULL) {
        TRITONSERVER_ErrorDelete(err);
      }
      if (send_err != NULL) {
        success = false;
        nrd_bu_error_log_and_delete(send_err, "add_sub: cannot send response");
      }
    }
    uint64_t end = nrd_bu_now_ns();
    nrd_bu_error_log_and_delete(
        TRITONBACKEND_ModelInstanceReportStatistics(instance, request, success, start, start, end, end),
        "add_sub: cannot report statistics");
  }
  uint64_t exec_end = nrd_bu_now_ns();
  if (total_batch > 0) {
    nrd_bu_error_log_and_delete(TRITONBACKEND_ModelInstanceReportBatchStatistics(instance, total_batch, exec_start,
                                                                                 exec_start, exec_end, exec_end),
                                "add_sub: cannot report batch statistics");
  }
  /* Released last, so a client that waits for the release sees every
   * statistic of this execution. */
  for (uint32_t r = 0; r < request_count; ++r) {
    if (requests[r] != NULL) {
      nrd_bu_request_release(requests[r]);
    }
  }
  return NULL;
}
