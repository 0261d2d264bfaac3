/* Identity behaviour: copy INPUT<s> to OUTPUT<s>. This is the latency
 * benchmark path, so per request it does no JSON work and no allocation
 * beyond what the server needs for the response itself. */
#include "identity_core.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "nereid/backend_utils.h"

#define OUTPUT_PREFIX "OUTPUT"
#define INPUT_PREFIX "INPUT"
#define NAME_MAX_LEN 256

TRITONSERVER_Error *nrd_identity_model_read(const json_t *config, const char *backend, nrd_identity_model *out) {
  nrd_identity_model m = {0, 0};
  TRITONSERVER_Error *err = nrd_bu_config_max_batch_size(config, &m.max_batch_size);
  if (err == NULL) {
    err = nrd_bu_config_parameter_int(config, "execute_delay_ms", 0, 0, 600000, &m.execute_delay_ms);
  }
  if (err != NULL) {
    TRITONSERVER_Error *named =
        nrd_bu_error_newf(TRITONSERVER_ErrorCode(err), "%s: %s", backend, TRITONSERVER_ErrorMessage(err));
    TRITONSERVER_ErrorDelete(err);
    return named;
  }
  *out = m;
  return NULL;
}

/* Adds output 'out_name' to 'response' as a copy of 'input'. */
static TRITONSERVER_Error *copy_tensor(TRITONBACKEND_Response *response, const char *out_name,
                                       TRITONBACKEND_Input *input) {
  const char *in_name = NULL;
  TRITONSERVER_DataType datatype = TRITONSERVER_TYPE_INVALID;
  const int64_t *shape = NULL;
  uint32_t dims = 0, buffer_count = 0;
  uint64_t byte_size = 0;
  TRITONSERVER_Error *err =
      TRITONBACKEND_InputProperties(input, &in_name, &datatype, &shape, &dims, &byte_size, &buffer_count);
  if (err != NULL) {
    return err;
  }
  TRITONBACKEND_Output *output = NULL;
  err = TRITONBACKEND_ResponseOutput(response, &output, out_name, datatype, shape, dims);
  if (err != NULL) {
    return err;
  }
  void *dst = NULL;
  TRITONSERVER_MemoryType mem = TRITONSERVER_MEMORY_CPU;
  int64_t mem_id = 0;
  err = TRITONBACKEND_OutputBuffer(output, &dst, byte_size, &mem, &mem_id);
  if (err != NULL) {
    return err;
  }
  if (byte_size > 0 && dst == NULL) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL, "identity: output '%s': the allocator gave no buffer",
                             out_name);
  }
  uint64_t offset = 0;
  for (uint32_t b = 0; b < buffer_count; ++b) {
    const void *src = NULL;
    uint64_t size = 0;
    TRITONSERVER_MemoryType src_mem = TRITONSERVER_MEMORY_CPU;
    int64_t src_id = 0;
    err = TRITONBACKEND_InputBuffer(input, b, &src, &size, &src_mem, &src_id);
    if (err != NULL) {
      return err;
    }
    if (size == 0) {
      continue;
    }
    if (src == NULL) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "identity: input '%s': buffer %u has no data", in_name,
                               b);
    }
    if (size > byte_size - offset) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL,
                               "identity: input '%s': buffers hold more than "
                               "the %" PRIu64 " bytes announced",
                               in_name, byte_size);
    }
    /* Any memory type on either side (a GPU one through the driver). */
    err = nrd_bu_copy((char *)dst + offset, mem, mem_id, src, src_mem, src_id, (size_t)size);
    if (err != NULL) {
      return err;
    }
    offset += size;
  }
  if (offset != byte_size) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL,
                             "identity: input '%s': buffers hold %" PRIu64 " bytes, the input announces %" PRIu64,
                             in_name, offset, byte_size);
  }
  return NULL;
}

/* Writes prefix + suffix into dst (cap bytes); returns the length or -1 when
 * it does not fit. A plain copy: this runs for every request. */
static int join_name(char *dst, size_t cap, const char *prefix, size_t plen, const char *suffix) {
  size_t slen = strlen(suffix);
  if (plen + slen + 1 > cap) return -1;
  memcpy(dst, prefix, plen);
  memcpy(dst + plen, suffix, slen + 1);
  return (int)(plen + slen);
}

/* No output was named: answer every INPUT<s> with OUTPUT<s>. */
static TRITONSERVER_Error *fill_all(TRITONBACKEND_Response *response, TRITONBACKEND_Request *request) {
  uint32_t count = 0;
  TRITONSERVER_Error *err = TRITONBACKEND_RequestInputCount(request, &count);
  for (uint32_t i = 0; err == NULL && i < count; ++i) {
    TRITONBACKEND_Input *input = NULL;
    const char *name = NULL;
    err = TRITONBACKEND_RequestInputByIndex(request, i, &input);
    if (err == NULL) {
      err = TRITONBACKEND_InputProperties(input, &name, NULL, NULL, NULL, NULL, NULL);
    }
    if (err != NULL || name == NULL || strncmp(name, INPUT_PREFIX, sizeof INPUT_PREFIX - 1) != 0) {
      continue;
    }
    char out_name[NAME_MAX_LEN];
    int n =
        join_name(out_name, sizeof out_name, OUTPUT_PREFIX, sizeof OUTPUT_PREFIX - 1, name + sizeof INPUT_PREFIX - 1);
    if (n < 0) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "identity: input name '%.64s...' is too long", name);
    }
    err = copy_tensor(response, out_name, input);
  }
  return err;
}

/* Output `out_name` as zeros when `in_name` is an optional input the
 * request left out, as Triton's identity backend answers it: the
 * configured datatype and dims, after the request's batch size when the
 * model batches. false (and nothing added) when the input is not optional
 * or `instance` is NULL. */
static bool zeros_for_optional(TRITONBACKEND_ModelInstance *instance, TRITONBACKEND_Response *response,
                               TRITONBACKEND_Request *request, const char *in_name, const char *out_name,
                               TRITONSERVER_Error **err) {
  TRITONBACKEND_Model *model = NULL;
  json_t *config = NULL;
  *err = NULL;
  if (instance == NULL) return false;
  *err = TRITONBACKEND_ModelInstanceModel(instance, &model);
  if (*err == NULL) *err = nrd_bu_model_config(model, &config);
  if (*err != NULL) return true;
  const json_t *in = nrd_bu_config_tensor(config, "input", in_name);
  if (in == NULL || !json_is_true(json_object_get(in, "optional"))) {
    json_decref(config);
    return false;
  }
  const char *type = json_string_value(json_object_get(in, "data_type"));
  TRITONSERVER_DataType dt = type != NULL && strncmp(type, "TYPE_", 5) == 0 ? TRITONSERVER_StringToDataType(type + 5)
                                                                            : TRITONSERVER_TYPE_INVALID;
  if (type != NULL && strcmp(type, "TYPE_STRING") == 0) dt = TRITONSERVER_TYPE_BYTES;
  int64_t max_batch = 0;
  *err = nrd_bu_config_max_batch_size(config, &max_batch);
  int64_t shape[65];
  uint32_t dims = 0;
  if (*err == NULL && max_batch > 0) shape[dims++] = (int64_t)nrd_bu_request_batch_size(request, NULL);
  const json_t *cfg_dims = json_object_get(in, "dims");
  for (size_t i = 0; *err == NULL && i < json_array_size(cfg_dims) && dims < 65; i++) {
    *err = nrd_bu_json_int(json_array_get(cfg_dims, i), "dims", &shape[dims]);
    if (*err == NULL && shape[dims] < 0) {
      *err = nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                               "identity: requested output '%s' of the optional input '%s' it left out has a "
                               "variable dimension in the configuration: no zeros to answer with",
                               out_name, in_name);
    }
    dims++;
  }
  if (*err == NULL && (dt == TRITONSERVER_TYPE_INVALID || dt == TRITONSERVER_TYPE_BYTES)) {
    *err = nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             "identity: optional input '%s' has data_type %s: no zeros of that type", in_name,
                             type != NULL ? type : "(none)");
  }
  json_decref(config);
  if (*err != NULL) return true;
  uint64_t bytes = (uint64_t)nrd_bu_shape_elements(shape, dims) * TRITONSERVER_DataTypeByteSize(dt);
  TRITONBACKEND_Output *out = NULL;
  void *buf = NULL;
  TRITONSERVER_MemoryType mt = TRITONSERVER_MEMORY_CPU;
  int64_t mid = 0;
  *err = TRITONBACKEND_ResponseOutput(response, &out, out_name, dt, shape, dims);
  if (*err == NULL) *err = TRITONBACKEND_OutputBuffer(out, &buf, bytes, &mt, &mid);
  if (*err == NULL && bytes > 0) {
    void *zeros = calloc(1, (size_t)bytes);
    *err = zeros == NULL ? nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL, "identity: out of memory")
                         : nrd_bu_copy(buf, mt, mid, zeros, TRITONSERVER_MEMORY_CPU, 0, (size_t)bytes);
    free(zeros);
  }
  return true;
}

static TRITONSERVER_Error *fill_requested(TRITONBACKEND_ModelInstance *instance, TRITONBACKEND_Response *response,
                                          TRITONBACKEND_Request *request, uint32_t out_count) {
  for (uint32_t i = 0; i < out_count; ++i) {
    const char *out_name = NULL;
    TRITONSERVER_Error *err = TRITONBACKEND_RequestOutputName(request, i, &out_name);
    if (err != NULL) {
      return err;
    }
    if (strncmp(out_name, OUTPUT_PREFIX, sizeof OUTPUT_PREFIX - 1) != 0) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                               "identity: requested output '%s' is not named "
                               "OUTPUT<n>, so it has no matching input",
                               out_name);
    }
    char in_name[NAME_MAX_LEN];
    int n =
        join_name(in_name, sizeof in_name, INPUT_PREFIX, sizeof INPUT_PREFIX - 1, out_name + sizeof OUTPUT_PREFIX - 1);
    if (n < 0) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "identity: output name '%.64s...' is too long",
                               out_name);
    }
    TRITONBACKEND_Input *input = NULL;
    err = TRITONBACKEND_RequestInput(request, in_name, &input);
    if (err != NULL || input == NULL) {
      if (err != NULL) {
        TRITONSERVER_ErrorDelete(err);
      }
      if (zeros_for_optional(instance, response, request, in_name, out_name, &err)) {
        if (err != NULL) return err;
        continue;
      }
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                               "identity: requested output '%s' has no "
                               "matching input '%s'",
                               out_name, in_name);
    }
    err = copy_tensor(response, out_name, input);
    if (err != NULL) {
      return err;
    }
  }
  return NULL;
}

/* nrd_identity_fill, answering optional inputs left out with zeros when
 * `instance` (may be NULL) says which inputs are optional. */
static TRITONSERVER_Error *fill_for(TRITONBACKEND_ModelInstance *instance, TRITONBACKEND_Response *response,
                                    TRITONBACKEND_Request *request) {
  uint32_t out_count = 0;
  TRITONSERVER_Error *err = TRITONBACKEND_RequestOutputCount(request, &out_count);
  if (err == NULL) {
    err = (out_count == 0) ? fill_all(response, request) : fill_requested(instance, response, request, out_count);
  }
  return err;
}

TRITONSERVER_Error *nrd_identity_fill(TRITONBACKEND_Response *response, TRITONBACKEND_Request *request) {
  return fill_for(NULL, response, request);
}

static bool respond_for(TRITONBACKEND_ModelInstance *instance, TRITONBACKEND_Request *request, uint32_t send_flags) {
  TRITONBACKEND_Response *response = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ResponseNew(&response, request);
  if (err != NULL) {
    nrd_bu_error_log_and_delete(err, "identity: cannot create response");
    return false;
  }
  err = fill_for(instance, response, request);
  /* The error is sent as the response's outcome; the caller keeps it. */
  TRITONSERVER_Error *send_err = TRITONBACKEND_ResponseSend(response, send_flags, err);
  bool ok = (err == NULL && send_err == NULL);
  if (err != NULL) {
    TRITONSERVER_ErrorDelete(err);
  }
  nrd_bu_error_log_and_delete(send_err, "identity: cannot send response");
  return ok;
}

bool nrd_identity_respond(TRITONBACKEND_Request *request, uint32_t send_flags) {
  return respond_for(NULL, request, send_flags);
}

/* ------------------------------------------------ the batched path */

/* Most tensors the batched path handles; a wider request goes one by one. */
#define BATCH_MAX_TENSORS 16

/* What every request of a batch must share for the batched path: the same
 * INPUT<s> -> OUTPUT<s> pairs, in the same order, each of a fixed-size
 * datatype and the same shape beyond the batch dimension. */
typedef struct batch_plan {
  uint32_t n;
  char in[BATCH_MAX_TENSORS][NAME_MAX_LEN];
  char out[BATCH_MAX_TENSORS][NAME_MAX_LEN];
  TRITONSERVER_DataType dtype[BATCH_MAX_TENSORS];
  const int64_t *shape[BATCH_MAX_TENSORS]; /* request 0's, borrowed */
  uint32_t dims[BATCH_MAX_TENSORS];
} batch_plan;

/* Input 'name' of 'request': datatype and shape, false when missing. */
static bool input_shape(TRITONBACKEND_Request *request, const char *name, TRITONSERVER_DataType *dtype,
                        const int64_t **shape, uint32_t *dims) {
  TRITONBACKEND_Input *input = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_RequestInput(request, name, &input);
  if (err == NULL) {
    err = TRITONBACKEND_InputProperties(input, NULL, dtype, shape, dims, NULL, NULL);
  }
  if (err != NULL) {
    TRITONSERVER_ErrorDelete(err);
    return false;
  }
  return true;
}

/* The pairs request 0 asks for (its requested outputs, or every INPUT<s>
 * when it names none). False when the batched path cannot serve it. */
static bool plan_first(TRITONBACKEND_Request *request, batch_plan *p) {
  uint32_t outs = 0, ins = 0;
  TRITONSERVER_Error *err = TRITONBACKEND_RequestOutputCount(request, &outs);
  if (err == NULL) err = TRITONBACKEND_RequestInputCount(request, &ins);
  if (err != NULL) {
    TRITONSERVER_ErrorDelete(err);
    return false;
  }
  p->n = 0;
  uint32_t total = outs > 0 ? outs : ins;
  for (uint32_t i = 0; i < total; ++i) {
    const char *name = NULL;
    if (outs > 0) {
      err = TRITONBACKEND_RequestOutputName(request, i, &name);
    } else {
      TRITONBACKEND_Input *input = NULL;
      err = TRITONBACKEND_RequestInputByIndex(request, i, &input);
      if (err == NULL) {
        err = TRITONBACKEND_InputProperties(input, &name, NULL, NULL, NULL, NULL, NULL);
      }
    }
    if (err != NULL) {
      TRITONSERVER_ErrorDelete(err);
      return false;
    }
    const char *prefix = outs > 0 ? OUTPUT_PREFIX : INPUT_PREFIX;
    size_t plen = strlen(prefix);
    if (strncmp(name, prefix, plen) != 0) {
      if (outs > 0) return false; /* the per-request path explains why */
      continue; /* not an INPUT<s>: not echoed */
    }
    if (p->n == BATCH_MAX_TENSORS) return false;
    uint32_t k = p->n;
    char *in = p->in[k], *out = p->out[k];
    if (join_name(in, NAME_MAX_LEN, INPUT_PREFIX, sizeof INPUT_PREFIX - 1, name + plen) < 0 ||
        join_name(out, NAME_MAX_LEN, OUTPUT_PREFIX, sizeof OUTPUT_PREFIX - 1, name + plen) < 0) {
      return false;
    }
    if (!input_shape(request, in, &p->dtype[k], &p->shape[k], &p->dims[k]) || p->dtype[k] == TRITONSERVER_TYPE_BYTES ||
        p->dims[k] == 0 || p->shape[k][0] < 0) {
      return false;
    }
    p->n++;
  }
  return p->n > 0;
}

/* Whether 'request' fits the plan; stores its rows. */
static bool plan_fits(TRITONBACKEND_Request *request, const batch_plan *p, uint64_t *rows) {
  uint32_t outs = 0;
  TRITONSERVER_Error *err = TRITONBACKEND_RequestOutputCount(request, &outs);
  if (err != NULL) {
    TRITONSERVER_ErrorDelete(err);
    return false;
  }
  if (outs > 0) {
    if (outs != p->n) return false;
    for (uint32_t i = 0; i < outs; ++i) {
      const char *name = NULL;
      err = TRITONBACKEND_RequestOutputName(request, i, &name);
      if (err != NULL) {
        TRITONSERVER_ErrorDelete(err);
        return false;
      }
      if (strcmp(name, p->out[i]) != 0) return false;
    }
  }
  for (uint32_t k = 0; k < p->n; ++k) {
    TRITONSERVER_DataType dtype;
    const int64_t *shape = NULL;
    uint32_t dims = 0;
    if (!input_shape(request, p->in[k], &dtype, &shape, &dims) || dtype != p->dtype[k] || dims != p->dims[k] ||
        shape[0] < 0 || (dims > 1 && memcmp(shape + 1, p->shape[k] + 1, (dims - 1) * sizeof *shape) != 0)) {
      return false;
    }
    if (k == 0) {
      *rows = (uint64_t)shape[0];
    } else if ((uint64_t)shape[0] != *rows) {
      return false;
    }
  }
  return true;
}

/* Runs the batch in one pass with the backend_utils batch helpers: each
 * input gathered once for the whole batch, each output scattered back.
 * Sets ok[i] per request. Returns false, having sent nothing, when the
 * batch does not fit (mixed inputs or outputs, BYTES, ...): the caller then
 * answers request by request. Every request must be non-NULL. */
static bool execute_batched(TRITONBACKEND_Request **requests, uint32_t count, bool *ok) {
  batch_plan *plan = malloc(sizeof *plan);
  uint64_t *rows = calloc(count, sizeof *rows);
  TRITONBACKEND_Response **responses = calloc(count, sizeof *responses);
  bool fits = plan != NULL && rows != NULL && responses != NULL && plan_first(requests[0], plan);
  for (uint32_t i = 0; fits && i < count; ++i) {
    fits = plan_fits(requests[i], plan, &rows[i]);
  }
  uint32_t made = 0;
  for (; fits && made < count; ++made) {
    TRITONSERVER_Error *err = TRITONBACKEND_ResponseNew(&responses[made], requests[made]);
    if (err != NULL) {
      TRITONSERVER_ErrorDelete(err);
      fits = false;
      break;
    }
  }
  if (!fits) {
    for (uint32_t i = 0; i < made; ++i) {
      nrd_bu_error_log_and_delete(TRITONBACKEND_ResponseDelete(responses[i]), "identity: cannot delete a response");
    }
    free(plan);
    free(rows);
    free(responses);
    return false;
  }
  for (uint32_t k = 0; k < plan->n; ++k) {
    nrd_bu_batch_input in;
    TRITONSERVER_Error *err = nrd_bu_batch_input_gather(requests, count, plan->in[k], NULL, 0, &in);
    if (err == NULL) {
      err = nrd_bu_batch_output_scatter(responses, count, plan->out[k], plan->dtype[k], plan->shape[k], plan->dims[k],
                                        rows, in.data, in.byte_size);
      nrd_bu_batch_input_release(&in);
    }
    if (err != NULL) {
      /* The batch itself failed: every response still open gets it. */
      for (uint32_t i = 0; i < count; ++i) {
        if (responses[i] == NULL) continue;
        nrd_bu_error_log_and_delete(TRITONBACKEND_ResponseSend(responses[i], TRITONSERVER_RESPONSE_COMPLETE_FINAL, err),
                                    "identity: cannot send response");
        responses[i] = NULL;
      }
      TRITONSERVER_ErrorDelete(err);
      break;
    }
  }
  for (uint32_t i = 0; i < count; ++i) {
    ok[i] = false;
    if (responses[i] == NULL) continue;
    TRITONSERVER_Error *err = TRITONBACKEND_ResponseSend(responses[i], TRITONSERVER_RESPONSE_COMPLETE_FINAL, NULL);
    ok[i] = (err == NULL);
    nrd_bu_error_log_and_delete(err, "identity: cannot send response");
  }
  free(plan);
  free(rows);
  free(responses);
  return true;
}

void nrd_identity_execute(TRITONBACKEND_ModelInstance *instance, const nrd_identity_model *model,
                          TRITONBACKEND_Request **requests, uint32_t count) {
  uint64_t exec_start = nrd_bu_now_ns();
  uint64_t compute_start = exec_start;
  if (model->execute_delay_ms > 0) {
    /* Tests wait for this line (--log-verbose=1) to know their request is
     * in Execute, instead of sleeping a guess. */
    NRD_BU_LOG(TRITONSERVER_LOG_VERBOSE, "identity: Execute of %" PRIu32 " requests sleeps %" PRId64 " ms", count,
               model->execute_delay_ms);
    nrd_bu_sleep_ms((uint64_t)model->execute_delay_ms);
  }
  uint64_t compute_end = nrd_bu_now_ns();

  /* Success of each request, kept until the end timestamp is known. */
  bool small[64];
  bool *ok = small;
  if (count > 64) {
    ok = malloc(count * sizeof *ok);
  }

  uint64_t total_batch = 0;
  bool batching = model->max_batch_size > 0;
  /* A batching model whose requests all look alike runs in one pass; a
   * lone request is copied straight from its input to its output, which
   * skips the batch's planning, gather and scatter. */
  bool all_present = count > 1;
  for (uint32_t i = 0; i < count; ++i) {
    all_present = all_present && requests[i] != NULL;
  }
  bool batched = batching && ok != NULL && all_present && execute_batched(requests, count, ok);
  for (uint32_t i = 0; i < count; ++i) {
    TRITONBACKEND_Request *request = requests[i];
    if (request == NULL) {
      continue;
    }
    total_batch += batching ? nrd_bu_request_batch_size(request, NULL) : 1;
    if (batched) {
      continue;
    }
    bool success = respond_for(instance, request, TRITONSERVER_RESPONSE_COMPLETE_FINAL);
    if (ok != NULL) {
      ok[i] = success;
    } else {
      /* No memory for the flags: report now with what we have. */
      uint64_t now = nrd_bu_now_ns();
      nrd_bu_error_log_and_delete(TRITONBACKEND_ModelInstanceReportStatistics(instance, request, success, exec_start,
                                                                              compute_start, compute_end, now),
                                  "identity: cannot report statistics");
      nrd_bu_request_release(request);
    }
  }
  uint64_t exec_end = nrd_bu_now_ns();

  /* Batch statistics first: once the last request is released its client
   * may read the model's statistics and must find this batch counted. */
  bool flags_kept = ok != NULL;
  if (flags_kept && total_batch > 0) {
    nrd_bu_error_log_and_delete(TRITONBACKEND_ModelInstanceReportBatchStatistics(instance, total_batch, exec_start,
                                                                                 compute_start, compute_end, exec_end),
                                "identity: cannot report batch statistics");
  }
  if (ok != NULL) {
    for (uint32_t i = 0; i < count; ++i) {
      if (requests[i] == NULL) {
        continue;
      }
      nrd_bu_error_log_and_delete(TRITONBACKEND_ModelInstanceReportStatistics(instance, requests[i], ok[i], exec_start,
                                                                              compute_start, compute_end, exec_end),
                                  "identity: cannot report statistics");
      nrd_bu_request_release(requests[i]);
    }
    if (ok != small) {
      free(ok);
    }
  }
  if (!flags_kept && total_batch > 0) {
    nrd_bu_error_log_and_delete(TRITONBACKEND_ModelInstanceReportBatchStatistics(instance, total_batch, exec_start,
                                                                                 compute_start, compute_end, exec_end),
                                "identity: cannot report batch statistics");
  }
}
