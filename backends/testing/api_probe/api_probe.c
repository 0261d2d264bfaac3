/*
 * api_probe (test only): calls the parts of the backend API no other
 * backend of ours uses, as a backend written for Triton would, and answers
 * each request with what they returned: output PROBE, a BYTES [1] tensor
 * holding one JSON object. Tests read it to check each call's result.
 *
 * Backend-level answers are taken at TRITONBACKEND_Initialize, model-level
 * ones at ModelInitialize and instance-level ones at
 * ModelInstanceInitialize, each kept as a JSON object in that object's
 * state; Execute adds what the request, its input and its response say.
 * The model has input INPUT0 (FP32) and output PROBE (TYPE_STRING, [1]).
 *
 * Threads: states are written at initialization and only read after;
 * Execute runs on the instance's thread.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "nereid/backend_utils.h"

/* Records `err`'s message under `key` and deletes it. */
static void note_error(json_t *o, const char *key, TRITONSERVER_Error *err) {
  json_object_set_new(o, key, json_string(TRITONSERVER_ErrorMessage(err)));
  TRITONSERVER_ErrorDelete(err);
}

static const char *artifact_name(TRITONBACKEND_ArtifactType t) {
  return t == TRITONBACKEND_ARTIFACT_FILESYSTEM ? "FILESYSTEM" : "OTHER";
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_Initialize(TRITONBACKEND_Backend *backend) {
  TRITONSERVER_Error *err = nrd_bu_api_version_check("api_probe");
  if (err != NULL) {
    return err;
  }
  json_t *o = json_object();
  const char *name = NULL;
  if ((err = TRITONBACKEND_BackendName(backend, &name)) == NULL) {
    json_object_set_new(o, "backend_name", json_string(name));
  }
  TRITONBACKEND_ArtifactType type;
  const char *location = NULL;
  if (err == NULL && (err = TRITONBACKEND_BackendArtifacts(backend, &type, &location)) == NULL) {
    json_object_set_new(o, "backend_artifact_type", json_string(artifact_name(type)));
    json_object_set_new(o, "backend_location", json_string(location));
  }
  TRITONBACKEND_MemoryManager *manager = NULL;
  if (err == NULL && (err = TRITONBACKEND_BackendMemoryManager(backend, &manager)) == NULL) {
    json_object_set_new(o, "memory_manager", json_boolean(manager != NULL));
  }
  TRITONBACKEND_ExecutionPolicy before, after;
  if (err == NULL && (err = TRITONBACKEND_BackendExecutionPolicy(backend, &before)) == NULL &&
      (err = TRITONBACKEND_BackendSetExecutionPolicy(backend, TRITONBACKEND_EXECUTION_DEVICE_BLOCKING)) == NULL &&
      (err = TRITONBACKEND_BackendExecutionPolicy(backend, &after)) == NULL) {
    json_object_set_new(o, "policy_before", json_integer(before));
    json_object_set_new(o, "policy_after", json_integer(after));
  }
  TRITONSERVER_Error *bad = TRITONBACKEND_BackendSetExecutionPolicy(backend, (TRITONBACKEND_ExecutionPolicy)42);
  json_object_set_new(o, "bad_policy_refused", json_boolean(bad != NULL));
  if (bad != NULL) {
    TRITONSERVER_ErrorDelete(bad);
  }
  if (err == NULL) {
    err = TRITONBACKEND_BackendSetState(backend, o);
  }
  if (err != NULL) {
    json_decref(o);
  }
  return err;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_Finalize(TRITONBACKEND_Backend *backend) {
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_BackendState(backend, &state);
  json_decref(state);
  return err;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model *model) {
  json_t *o = json_object();
  TRITONBACKEND_ArtifactType type;
  const char *location = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelRepository(model, &type, &location);
  if (err == NULL) {
    json_object_set_new(o, "model_artifact_type", json_string(artifact_name(type)));
    json_object_set_new(o, "model_location", json_string(location));
    err = TRITONBACKEND_ModelSetState(model, o);
  }
  if (err != NULL) {
    json_decref(o);
  }
  return err;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model *model) {
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelState(model, &state);
  json_decref(state);
  return err;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance *instance) {
  json_t *o = json_object();
  TRITONSERVER_InstanceGroupKind kind;
  int32_t device = -1;
  bool passive = true;
  uint32_t profiles = 99, secondary = 99;
  TRITONSERVER_Message *policy = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelInstanceKind(instance, &kind);
  if (err == NULL) err = TRITONBACKEND_ModelInstanceDeviceId(instance, &device);
  if (err == NULL) err = TRITONBACKEND_ModelInstanceIsPassive(instance, &passive);
  if (err == NULL) {
    err = TRITONBACKEND_ModelInstanceProfileCount(instance, &profiles);
  }
  if (err == NULL) {
    err = TRITONBACKEND_ModelInstanceSecondaryDeviceCount(instance, &secondary);
  }
  if (err == NULL) err = TRITONBACKEND_ModelInstanceHostPolicy(instance, &policy);
  if (err == NULL) {
    json_object_set_new(o, "kind", json_string(TRITONSERVER_InstanceGroupKindString(kind)));
    json_object_set_new(o, "device_id", json_integer(device));
    json_object_set_new(o, "passive", json_boolean(passive));
    json_object_set_new(o, "profile_count", json_integer(profiles));
    json_object_set_new(o, "secondary_device_count", json_integer(secondary));
    json_t *p = NULL;
    err = nrd_bu_message_parse(policy, "host policy", &p);
    if (err == NULL) json_object_set_new(o, "host_policy", p);
  }
  /* Past the end: each must refuse. */
  const char *profile = NULL;
  TRITONSERVER_Error *e = TRITONBACKEND_ModelInstanceProfileName(instance, 0, &profile);
  json_object_set_new(o, "profile_0_refused", json_boolean(e != NULL));
  if (e != NULL) TRITONSERVER_ErrorDelete(e);
  const char *sd_kind = NULL;
  int64_t sd_id = 0;
  e = TRITONBACKEND_ModelInstanceSecondaryDeviceProperties(instance, 0, &sd_kind, &sd_id);
  json_object_set_new(o, "secondary_0_refused", json_boolean(e != NULL));
  if (e != NULL) TRITONSERVER_ErrorDelete(e);
  if (err == NULL) err = TRITONBACKEND_ModelInstanceSetState(instance, o);
  if (err != NULL) json_decref(o);
  return err;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance *instance) {
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelInstanceState(instance, &state);
  json_decref(state);
  return err;
}

/* What the request and its first input say. */
static void probe_request(TRITONBACKEND_Request *request, json_t *o) {
  uint32_t flags = 0;
  TRITONSERVER_Error *err = TRITONBACKEND_RequestFlags(request, &flags);
  if (err == NULL)
    json_object_set_new(o, "flags", json_integer(flags));
  else
    note_error(o, "flags_error", err);
  const char *corr = NULL;
  err = TRITONBACKEND_RequestCorrelationIdString(request, &corr);
  if (err == NULL)
    json_object_set_new(o, "correlation_id_string", json_string(corr));
  else
    note_error(o, "correlation_id_string_error", err);
  uint64_t timeout = 0;
  err = TRITONBACKEND_InferenceRequestTimeoutMicroseconds(request, &timeout);
  if (err == NULL)
    json_object_set_new(o, "timeout_us", json_integer((json_int_t)timeout));
  else
    note_error(o, "timeout_error", err);
  /* A sentinel that must come back NULL when the request is untraced. */
  TRITONSERVER_InferenceTrace *trace = (TRITONSERVER_InferenceTrace *)&flags;
  err = TRITONBACKEND_RequestTrace(request, &trace);
  if (err == NULL)
    json_object_set_new(o, "trace_is_null", json_boolean(trace == NULL));
  else
    note_error(o, "trace_error", err);
  /* Traced: a custom activity, at a timestamp the test recognizes. */
  if (err == NULL && trace != NULL) {
    err = TRITONSERVER_InferenceTraceReportActivity(trace, 4242, "API_PROBE_STEP");
    if (err != NULL) note_error(o, "report_activity_error", err);
  }
  const char *input_name = NULL;
  err = TRITONBACKEND_RequestInputName(request, 0, &input_name);
  if (err == NULL)
    json_object_set_new(o, "input_name_0", json_string(input_name));
  else
    note_error(o, "input_name_error", err);
  err = TRITONBACKEND_RequestInputName(request, 7, &input_name);
  json_object_set_new(o, "input_name_7_refused", json_boolean(err != NULL));
  if (err != NULL) TRITONSERVER_ErrorDelete(err);
  uint64_t out_size = 0;
  TRITONSERVER_MemoryType out_type = TRITONSERVER_MEMORY_GPU;
  int64_t out_id = -1;
  err = TRITONBACKEND_RequestOutputBufferProperties(request, "PROBE", &out_size, &out_type, &out_id);
  if (err == NULL) {
    json_object_set_new(o, "output_buffer_memory_type", json_string(TRITONSERVER_MemoryTypeString(out_type)));
  } else {
    note_error(o, "output_buffer_properties_error", err);
  }

  TRITONBACKEND_Input *input = NULL;
  err = TRITONBACKEND_RequestInputByIndex(request, 0, &input);
  if (err != NULL) {
    note_error(o, "input_error", err);
    return;
  }
  const char *name = NULL;
  TRITONSERVER_DataType dt;
  const int64_t *shape = NULL;
  uint32_t dims = 0, buffers = 0;
  uint64_t byte_size = 0;
  err = TRITONBACKEND_InputPropertiesForHostPolicy(input, NULL, &name, &dt, &shape, &dims, &byte_size, &buffers);
  if (err == NULL) {
    json_t *s = json_array();
    for (uint32_t i = 0; i < dims; i++) json_array_append_new(s, json_integer(shape[i]));
    json_object_set_new(o, "input",
                        json_pack("{s:s,s:s,s:o,s:I,s:i}", "name", name, "datatype", TRITONSERVER_DataTypeString(dt),
                                  "shape", s, "byte_size", (json_int_t)byte_size, "buffer_count", (int)buffers));
  } else {
    note_error(o, "input_properties_error", err);
  }
  const void *buf = NULL, *buf2 = NULL;
  uint64_t size = 0, size2 = 0;
  TRITONSERVER_MemoryType mt;
  int64_t mid;
  err = TRITONBACKEND_InputBufferForHostPolicy(input, NULL, 0, &buf, &size, &mt, &mid);
  if (err == NULL) {
    TRITONSERVER_BufferAttributes *attrs = NULL;
    err = TRITONBACKEND_InputBufferAttributes(input, 0, &buf2, &attrs);
    if (err == NULL) {
      size_t asize = 0;
      TRITONSERVER_MemoryType atype;
      err = TRITONSERVER_BufferAttributesByteSize(attrs, &asize);
      if (err == NULL) err = TRITONSERVER_BufferAttributesMemoryType(attrs, &atype);
      if (err == NULL) {
        size2 = asize;
        json_t *ib = json_pack("{s:I,s:b,s:I,s:s}", "byte_size", (json_int_t)size, "same_buffer", buf == buf2,
                               "attributes_byte_size", (json_int_t)size2, "attributes_memory_type",
                               TRITONSERVER_MemoryTypeString(atype));
        /* The CUDA IPC handle's first bytes in hex, when there is one. */
        void *h = NULL;
        if (TRITONSERVER_BufferAttributesCudaIpcHandle(attrs, &h) == NULL && h) {
          char hex[9];
          const unsigned char *hb = h;
          snprintf(hex, sizeof hex, "%02x%02x%02x%02x", hb[0], hb[1], hb[2], hb[3]);
          json_object_set_new(ib, "cuda_ipc_handle", json_string(hex));
        }
        json_object_set_new(o, "input_buffer", ib);
      }
    }
  }
  if (err != NULL) note_error(o, "input_buffer_error", err);
  /* The same input as the host policy "cpu" (the one a CPU instance has)
   * sees it: its own data when the client gave some for that policy. */
  uint64_t pbytes = 0;
  uint32_t pbufs = 0;
  err = TRITONBACKEND_InputPropertiesForHostPolicy(input, "cpu", NULL, NULL, NULL, NULL, &pbytes, &pbufs);
  if (err == NULL && pbufs > 0) err = TRITONBACKEND_InputBufferForHostPolicy(input, "cpu", 0, &buf, &size, &mt, &mid);
  if (err == NULL) {
    float first = 0;
    if (pbufs > 0 && size >= sizeof first) memcpy(&first, buf, sizeof first);
    json_object_set_new(o, "cpu_policy_input",
                        json_pack("{s:I,s:i,s:f}", "byte_size", (json_int_t)pbytes, "buffer_count", (int)pbufs, "first",
                                  (double)first));
  } else {
    note_error(o, "cpu_policy_input_error", err);
  }
}

/* Adds PROBE (o as text) to a response of `request` and sends it, with what
 * the output and the response report about themselves added first. */
static void respond(TRITONBACKEND_Request *request, json_t *o) {
  TRITONBACKEND_Response *response = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ResponseNew(&response, request);
  if (err != NULL) {
    nrd_bu_error_log_and_delete(err, "api_probe: cannot create response");
    return;
  }
  TRITONBACKEND_Output *output = NULL;
  const int64_t shape[1] = {1};
  err = TRITONBACKEND_ResponseOutput(response, &output, "PROBE", TRITONSERVER_TYPE_BYTES, shape, 1);
  const char *got_name = NULL;
  TRITONSERVER_DataType got_dt;
  const int64_t *got_shape = NULL;
  uint64_t got_dims = 0;
  if (err == NULL) {
    err = TRITONBACKEND_InferenceResponseOutput(response, 0, &got_name, &got_dt, &got_shape, &got_dims);
  }
  if (err == NULL) {
    TRITONSERVER_DataType by_name_dt;
    const int64_t *by_name_shape = NULL;
    uint64_t by_name_dims = 0;
    err = TRITONBACKEND_InferenceResponseOutputByName(response, "PROBE", &by_name_dt, &by_name_shape, &by_name_dims);
    if (err == NULL) {
      json_object_set_new(o, "response_output",
                          json_pack("{s:s,s:s,s:I,s:I,s:b}", "name", got_name, "datatype",
                                    TRITONSERVER_DataTypeString(got_dt), "dims", (json_int_t)got_dims, "dim0",
                                    (json_int_t)got_shape[0], "by_name_agrees",
                                    by_name_dt == got_dt && by_name_dims == got_dims));
    }
  }
  /* The text is final before its buffer exists, so the buffer's
   * attributes are checked here instead of reported: a byte size other
   * than the one asked for fails the response. */
  char *text = NULL;
  if (err == NULL) {
    text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    if (text == NULL) err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  }
  void *dst = NULL;
  TRITONSERVER_MemoryType mt = TRITONSERVER_MEMORY_CPU;
  int64_t mid = 0;
  uint32_t len = text ? (uint32_t)strlen(text) : 0;
  if (err == NULL) err = TRITONBACKEND_OutputBuffer(output, &dst, 4 + len, &mt, &mid);
  if (err == NULL) {
    TRITONSERVER_BufferAttributes *attrs = NULL;
    size_t asize = 0;
    err = TRITONBACKEND_OutputBufferAttributes(output, &attrs);
    if (err == NULL) err = TRITONSERVER_BufferAttributesByteSize(attrs, &asize);
    if (err == NULL && asize != 4 + (size_t)len) {
      err =
          TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "api_probe: output buffer attributes give the wrong size");
    }
  }
  if (err == NULL) {
    memcpy(dst, &len, 4);
    memcpy((char *)dst + 4, text, len);
  }
  free(text);
  nrd_bu_error_log_and_delete(TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, err),
                              "api_probe: cannot send response");
  if (err != NULL) TRITONSERVER_ErrorDelete(err);
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance *instance,
                                                                          TRITONBACKEND_Request **requests,
                                                                          const uint32_t request_count) {
  TRITONBACKEND_Model *model = NULL;
  TRITONBACKEND_Backend *backend = NULL;
  void *bstate = NULL, *mstate = NULL, *istate = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelInstanceModel(instance, &model);
  if (err == NULL) err = TRITONBACKEND_ModelBackend(model, &backend);
  if (err == NULL) err = TRITONBACKEND_BackendState(backend, &bstate);
  if (err == NULL) err = TRITONBACKEND_ModelState(model, &mstate);
  if (err == NULL) err = TRITONBACKEND_ModelInstanceState(instance, &istate);
  if (err != NULL) return err;
  for (uint32_t r = 0; r < request_count; ++r) {
    json_t *o = json_object();
    json_object_update(o, bstate);
    json_object_update(o, mstate);
    json_object_update(o, istate);
    probe_request(requests[r], o);
    respond(requests[r], o);
    json_decref(o);
    uint64_t now = nrd_bu_now_ns();
    nrd_bu_error_log_and_delete(
        TRITONBACKEND_ModelInstanceReportStatistics(instance, requests[r], true, now, now, now, now),
        "api_probe: cannot report statistics");
    nrd_bu_request_release(requests[r]);
  }
  return NULL;
}
