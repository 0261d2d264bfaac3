/*
 * accumulate (test only): a running INT32 sum per sequence, to drive the
 * sequence batcher.
 *
 * Each request's INPUT holds one INT32 value (shape [1], or [1, 1] when the
 * model batches). OUTPUT (same shape) is the sequence's sum after adding it:
 *  - With implicit state (the request has an input "INPUT_STATE"): the sum
 *    is INPUT_STATE + INPUT, and it becomes the sequence's next state
 *    through TRITONBACKEND_StateNew("OUTPUT_STATE") / StateBuffer /
 *    StateUpdate (StateBufferAttributes is checked on the way: refused
 *    before the buffer, then agreeing with it; a failure fails the request).
 *    A BYTES state holds the sum as the length of its first element (an
 *    empty string is 0): the next state is one string of `sum` bytes.
 *  - Without: the backend keeps the sums itself, keyed by the CORRID
 *    control input (else the request's integer correlation id); a non-zero
 *    START control resets the sum, a non-zero END control forgets it.
 * When the configuration declares an output "CONTROLS" (FP32, 5 values),
 * it reports the START, END, READY and CORRID control inputs as received
 * (-1 when absent; CORRID as its length when a string) and the number of
 * requests in the execution. An output "INDEX" (INT32 [1]), when declared,
 * is the request's index in the execution; an output "NULLS" (INT32 [1])
 * the number of requests in the execution that look like Triton's null
 * requests (sequence batch padding): READY present and false, START, END
 * and CORRID false or 0 where present, flags and correlation id 0, no
 * requested output, INPUT 0, and INPUT_STATE present when INPUT_STATE is
 * in the execution's other requests. A null request's own response
 * cannot carry outputs (the core refuses to allocate them, as Triton's
 * does) and goes nowhere.
 * Model parameter "execute_delay_ms" sleeps that long in every Execute so a
 * test can queue requests behind a running one; "respond_in_reverse" (1)
 * answers an execution's requests last to first (for preserve_ordering);
 * "same_buffer" (1) expects TRITONBACKEND_StateBuffer to lend the input
 * state's own buffer (use_same_buffer_for_input_output), failing the
 * request otherwise, and then does not call TRITONBACKEND_StateUpdate.
 *
 * Threads: the sums table has its own lock (instances run concurrently);
 * everything else is immutable after ModelInitialize.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "nereid/backend_utils.h"

#define ACC_MAX_SEQUENCES 256

typedef struct acc_model {
  int64_t delay_ms, reverse, same_buffer;
  bool controls_output, index_output, nulls_output;
  pthread_mutex_t mu;
  uint64_t ids[ACC_MAX_SEQUENCES]; /* 0 = free entry */
  int32_t sums[ACC_MAX_SEQUENCES];
} acc_model;

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_Initialize(TRITONBACKEND_Backend *backend) {
  (void)backend;
  return nrd_bu_api_version_check("accumulate");
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model *model) {
  json_t *config = NULL;
  TRITONSERVER_Error *err = nrd_bu_model_config(model, &config);
  if (err != NULL) return err;
  acc_model *m = calloc(1, sizeof(*m));
  if (m == NULL) {
    json_decref(config);
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, "accumulate: out of memory");
  }
  err = nrd_bu_config_parameter_int(config, "execute_delay_ms", 0, 0, 60000, &m->delay_ms);
  if (err == NULL) err = nrd_bu_config_parameter_int(config, "respond_in_reverse", 0, 0, 1, &m->reverse);
  if (err == NULL) err = nrd_bu_config_parameter_int(config, "same_buffer", 0, 0, 1, &m->same_buffer);
  m->controls_output = nrd_bu_config_tensor(config, "output", "CONTROLS") != NULL;
  m->index_output = nrd_bu_config_tensor(config, "output", "INDEX") != NULL;
  m->nulls_output = nrd_bu_config_tensor(config, "output", "NULLS") != NULL;
  json_decref(config);
  if (err == NULL) err = TRITONBACKEND_ModelSetState(model, m);
  if (err != NULL) {
    free(m);
    return err;
  }
  pthread_mutex_init(&m->mu, NULL);
  return NULL;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model *model) {
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelState(model, &state);
  if (err != NULL) return err;
  acc_model *m = state;
  if (m != NULL) {
    pthread_mutex_destroy(&m->mu);
    free(m);
  }
  return NULL;
}

/* True when `err` is NULL; otherwise deletes it. */
static bool ok(TRITONSERVER_Error *err) {
  if (err == NULL) return true;
  TRITONSERVER_ErrorDelete(err);
  return false;
}

/* The first element of input `name` as a double; false when absent. A
 * BYTES element reads as its length. */
static bool read_scalar(TRITONBACKEND_Request *request, const char *name, double *out) {
  TRITONBACKEND_Input *input = NULL;
  if (!ok(TRITONBACKEND_RequestInput(request, name, &input))) return false; /* absent */
  TRITONSERVER_DataType dt;
  uint64_t size = 0;
  uint32_t nbufs = 0;
  if (!ok(TRITONBACKEND_InputProperties(input, NULL, &dt, NULL, NULL, &size, &nbufs)) || nbufs == 0) return false;
  const void *base = NULL;
  uint64_t bsize = 0;
  TRITONSERVER_MemoryType mt = TRITONSERVER_MEMORY_CPU;
  int64_t mid = 0;
  if (!ok(TRITONBACKEND_InputBuffer(input, 0, &base, &bsize, &mt, &mid))) return false;
  union {
    int32_t i32;
    uint32_t u32;
    int64_t i64;
    uint64_t u64;
    float f32;
    unsigned char b[8];
  } v;
  memset(&v, 0, sizeof v);
  memcpy(v.b, base, bsize < 8 ? bsize : 8);
  switch (dt) {
    case TRITONSERVER_TYPE_INT32: *out = v.i32; break;
    case TRITONSERVER_TYPE_UINT32: *out = v.u32; break;
    case TRITONSERVER_TYPE_INT64: *out = (double)v.i64; break;
    case TRITONSERVER_TYPE_UINT64: *out = (double)v.u64; break;
    case TRITONSERVER_TYPE_FP32: *out = v.f32; break;
    case TRITONSERVER_TYPE_BOOL: *out = v.b[0]; break;
    case TRITONSERVER_TYPE_BYTES: *out = v.u32; break; /* the element's length prefix */
    default: return false;
  }
  return true;
}

/* The backend's own running sum for `id`; reset on START, dropped on END. */
static int32_t table_add(acc_model *m, uint64_t id, bool start, bool end, int32_t add) {
  pthread_mutex_lock(&m->mu);
  int slot = -1, free_slot = -1;
  for (int i = 0; i < ACC_MAX_SEQUENCES; i++) {
    if (m->ids[i] == id && id != 0) slot = i;
    if (m->ids[i] == 0 && free_slot < 0) free_slot = i;
  }
  int32_t sum = add;
  if (slot >= 0 && !start) sum = m->sums[slot] + add;
  if (slot < 0) slot = free_slot;
  if (slot >= 0) {
    m->ids[slot] = end ? 0 : id;
    m->sums[slot] = sum;
  }
  pthread_mutex_unlock(&m->mu);
  return sum;
}

/* Commits `sum` as the sequence's next OUTPUT_STATE (same_buffer: see the top). */
static TRITONSERVER_Error *update_state(TRITONBACKEND_Request *request, const int64_t *shape, uint32_t dims,
                                        int32_t sum, bool same_buffer, bool bytes) {
  if (bytes && (sum < 0 || sum > 65536))
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "accumulate: a BYTES state holds sums 0 to 65536");
  uint64_t size = bytes ? 4u + (uint64_t)sum : sizeof sum;
  TRITONBACKEND_State *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_StateNew(
      &state, request, "OUTPUT_STATE", bytes ? TRITONSERVER_TYPE_BYTES : TRITONSERVER_TYPE_INT32, shape, dims);
  if (err != NULL) return err;
  /* The state's buffer attributes exist only once it has a buffer. */
  TRITONSERVER_BufferAttributes *attrs = NULL;
  err = TRITONBACKEND_StateBufferAttributes(state, &attrs);
  if (err == NULL)
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL,
                                 "accumulate: state buffer attributes before the buffer existed");
  TRITONSERVER_ErrorDelete(err);
  void *buf = NULL;
  TRITONSERVER_MemoryType mt = TRITONSERVER_MEMORY_CPU;
  int64_t mid = 0;
  err = TRITONBACKEND_StateBuffer(state, &buf, size, &mt, &mid);
  if (err != NULL) return err;
  size_t byte_size = 0;
  TRITONSERVER_MemoryType attr_mt = TRITONSERVER_MEMORY_GPU;
  err = TRITONBACKEND_StateBufferAttributes(state, &attrs);
  if (err == NULL) err = TRITONSERVER_BufferAttributesByteSize(attrs, &byte_size);
  if (err == NULL) err = TRITONSERVER_BufferAttributesMemoryType(attrs, &attr_mt);
  if (err != NULL) return err;
  if (byte_size != size || attr_mt != mt)
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL,
                                 "accumulate: state buffer attributes disagree with the buffer");
  if (same_buffer) {
    TRITONBACKEND_Input *input = NULL;
    const void *in_base = NULL;
    uint64_t in_size = 0;
    err = TRITONBACKEND_RequestInput(request, "INPUT_STATE", &input);
    if (err == NULL) err = TRITONBACKEND_InputBuffer(input, 0, &in_base, &in_size, &attr_mt, &mid);
    if (err != NULL) return err;
    if (in_base != buf)
      return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL,
                                   "accumulate: the state buffer is not the input state's own");
    memcpy(buf, &sum, sizeof sum);
    return NULL; /* no StateUpdate: the write is the update */
  }
  if (bytes) {
    uint32_t len = (uint32_t)sum;
    memcpy(buf, &len, 4);
    memset((char *)buf + 4, 'x', len);
  } else {
    memcpy(buf, &sum, sizeof sum);
  }
  return TRITONBACKEND_StateUpdate(state);
}

static TRITONSERVER_Error *add_output(TRITONBACKEND_Response *response, const char *name, TRITONSERVER_DataType dt,
                                      const int64_t *shape, uint32_t dims, const void *data, size_t size) {
  TRITONBACKEND_Output *out = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ResponseOutput(response, &out, name, dt, shape, dims);
  if (err != NULL) return err;
  void *buf = NULL;
  TRITONSERVER_MemoryType mt = TRITONSERVER_MEMORY_CPU;
  int64_t mid = 0;
  err = TRITONBACKEND_OutputBuffer(out, &buf, size, &mt, &mid);
  if (err != NULL) return err;
  memcpy(buf, data, size);
  return NULL;
}

/* Whether `request` looks like a null request (see the top). */
static bool looks_null(TRITONBACKEND_Request *request, bool with_state) {
  double ready = -1, v = 0;
  uint32_t flags = 1, outputs = 1;
  uint64_t id = 1;
  if (!read_scalar(request, "READY", &ready) || ready != 0) return false;
  static const char *const zero[] = {"START", "END", "CORRID", "INPUT"};
  for (size_t i = 0; i < sizeof zero / sizeof zero[0]; i++)
    if (read_scalar(request, zero[i], &v) && v != 0) return false;
  if (!ok(TRITONBACKEND_RequestFlags(request, &flags)) || flags != 0) return false;
  if (!ok(TRITONBACKEND_RequestCorrelationId(request, &id)) || id != 0) return false;
  if (!ok(TRITONBACKEND_RequestOutputCount(request, &outputs)) || outputs != 0) return false;
  return !with_state || read_scalar(request, "INPUT_STATE", &v);
}

static TRITONSERVER_Error *run_one(acc_model *m, TRITONBACKEND_Request *request, uint32_t batch, uint32_t index,
                                   int32_t nulls, TRITONBACKEND_Response *response) {
  TRITONBACKEND_Input *input = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_RequestInput(request, "INPUT", &input);
  if (err != NULL) return err;
  const int64_t *shape = NULL;
  uint32_t dims = 0;
  err = TRITONBACKEND_InputProperties(input, NULL, NULL, &shape, &dims, NULL, NULL);
  if (err != NULL) return err;
  double in = 0, start = -1, end = -1, ready = -1, corrid = -1, st = 0;
  read_scalar(request, "INPUT", &in);
  read_scalar(request, "START", &start);
  read_scalar(request, "END", &end);
  read_scalar(request, "READY", &ready);
  read_scalar(request, "CORRID", &corrid);
  int32_t sum;
  if (read_scalar(request, "INPUT_STATE", &st)) {
    sum = (int32_t)st + (int32_t)in;
    TRITONBACKEND_Input *state_in = NULL;
    TRITONSERVER_DataType state_dt = TRITONSERVER_TYPE_INT32;
    if (ok(TRITONBACKEND_RequestInput(request, "INPUT_STATE", &state_in)))
      ok(TRITONBACKEND_InputProperties(state_in, NULL, &state_dt, NULL, NULL, NULL, NULL));
    err = update_state(request, shape, dims, sum, m->same_buffer != 0, state_dt == TRITONSERVER_TYPE_BYTES);
    if (err != NULL) return err;
  } else {
    uint64_t id = corrid > 0 ? (uint64_t)corrid : 0;
    if (id == 0 && !ok(TRITONBACKEND_RequestCorrelationId(request, &id))) id = 0;
    sum = table_add(m, id, start > 0, end > 0, (int32_t)in);
  }
  err = add_output(response, "OUTPUT", TRITONSERVER_TYPE_INT32, shape, dims, &sum, sizeof sum);
  if (err == NULL && m->controls_output) {
    float c[5] = {(float)start, (float)end, (float)ready, (float)corrid, (float)batch};
    int64_t cshape[2] = {1, 5};
    bool batched = dims > 1;
    err = add_output(response, "CONTROLS", TRITONSERVER_TYPE_FP32, batched ? cshape : cshape + 1, batched ? 2 : 1, c,
                     sizeof c);
  }
  int32_t idx = (int32_t)index;
  if (err == NULL && m->index_output)
    err = add_output(response, "INDEX", TRITONSERVER_TYPE_INT32, shape, dims, &idx, sizeof idx);
  if (err == NULL && m->nulls_output)
    err = add_output(response, "NULLS", TRITONSERVER_TYPE_INT32, shape, dims, &nulls, sizeof nulls);
  return err;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance *instance,
                                                                          TRITONBACKEND_Request **requests,
                                                                          const uint32_t request_count) {
  TRITONBACKEND_Model *model = NULL;
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelInstanceModel(instance, &model);
  if (err == NULL) err = TRITONBACKEND_ModelState(model, &state);
  if (err != NULL) return err;
  acc_model *m = state;
  if (m->delay_ms > 0) nrd_bu_sleep_ms((uint32_t)m->delay_ms);
  int32_t nulls = 0;
  if (m->nulls_output) {
    double st = 0;
    bool with_state = false;
    for (uint32_t i = 0; i < request_count; i++) with_state |= read_scalar(requests[i], "INPUT_STATE", &st);
    for (uint32_t i = 0; i < request_count; i++) nulls += looks_null(requests[i], with_state);
  }
  for (uint32_t k = 0; k < request_count; k++) {
    uint32_t i = m->reverse ? request_count - 1 - k : k;
    uint64_t t0 = nrd_bu_now_ns();
    bool success = false;
    TRITONBACKEND_Response *response = NULL;
    err = TRITONBACKEND_ResponseNew(&response, requests[i]);
    if (err != NULL) {
      nrd_bu_error_log_and_delete(err, "accumulate: cannot create a response");
    } else {
      TRITONSERVER_Error *run = run_one(m, requests[i], request_count, i, nulls, response);
      success = run == NULL;
      nrd_bu_error_log_and_delete(TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, run),
                                  "accumulate: cannot send a response");
      if (run != NULL) TRITONSERVER_ErrorDelete(run);
    }
    uint64_t t1 = nrd_bu_now_ns();
    nrd_bu_error_log_and_delete(
        TRITONBACKEND_ModelInstanceReportStatistics(instance, requests[i], success, t0, t0, t1, t1),
        "accumulate: cannot report statistics");
    nrd_bu_request_release(requests[i]);
  }
  return NULL;
}
