/*
 * onnxruntime backend: runs ONNX models (platform onnxruntime_onnx) on the
 * CPU with ONNX Runtime, as Triton's backend of that name does, including
 * implicit state for sequence models (sequence_batching.state): the state
 * input arrives as an ordinary request input and the state output becomes
 * the sequence's next state.
 *
 * ONNX Runtime is loaded with dlopen from the backend's directory or the
 * loader's search path (ort_runtime.h). One session per model instance.
 *
 * Threads: the backend state (the runtime) is immutable between Initialize
 * and Finalize; model state is read-only after ModelInitialize; instance
 * state belongs to the instance thread.
 */
#include <stdlib.h>

#include "nereid/backend_utils.h"
#include "ort_model.h"

static const char kName[] = "onnxruntime";

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_Initialize(TRITONBACKEND_Backend *backend) {
  TRITONSERVER_Error *err = nrd_bu_api_version_check(kName);
  if (err != NULL) return err;
  TRITONBACKEND_ArtifactType type;
  const char *dir = NULL;
  err = TRITONBACKEND_BackendArtifacts(backend, &type, &dir);
  if (err != NULL) return err;
  ort_runtime *rt = calloc(1, sizeof *rt);
  if (rt == NULL) {
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, "onnxruntime: out of memory");
  }
  err = ort_runtime_open(dir, rt);
  if (err == NULL) err = TRITONBACKEND_BackendSetState(backend, rt);
  if (err != NULL) {
    ort_runtime_close(rt);
    free(rt);
    return err;
  }
  NRD_BU_LOG(TRITONSERVER_LOG_INFO, "onnxruntime: ONNX Runtime %s from %s", rt->version, rt->path);
  return NULL;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_Finalize(TRITONBACKEND_Backend *backend) {
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_BackendState(backend, &state);
  if (err != NULL) return err;
  if (state != NULL) {
    ort_runtime_close(state);
    free(state);
  }
  return NULL;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model *model) {
  TRITONBACKEND_Backend *backend = NULL;
  void *rt = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelBackend(model, &backend);
  if (err == NULL) err = TRITONBACKEND_BackendState(backend, &rt);
  if (err != NULL) return err;
  ort_model *m = NULL;
  err = ort_model_new(model, rt, &m);
  if (err == NULL) err = TRITONBACKEND_ModelSetState(model, m);
  if (err != NULL) ort_model_free(m);
  return err;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model *model) {
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelState(model, &state);
  if (err != NULL) return err;
  ort_model_free(state);
  return TRITONBACKEND_ModelSetState(model, NULL);
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance *instance) {
  void *m = NULL;
  TRITONSERVER_Error *err = nrd_bu_instance_model_state(instance, kName, &m);
  if (err != NULL) return err;
  ort_instance *inst = NULL;
  err = ort_instance_new(instance, m, &inst);
  if (err == NULL) err = TRITONBACKEND_ModelInstanceSetState(instance, inst);
  if (err != NULL) ort_instance_free(inst);
  return err;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance *instance) {
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelInstanceState(instance, &state);
  if (err != NULL) return err;
  ort_instance_free(state);
  return TRITONBACKEND_ModelInstanceSetState(instance, NULL);
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance *instance,
                                                                          TRITONBACKEND_Request **requests,
                                                                          const uint32_t request_count) {
  void *state = NULL;
  TRITONSERVER_Error *err = nrd_bu_instance_state(instance, kName, &state);
  if (err != NULL) return err;
  ort_instance_execute(state, instance, requests, request_count);
  return NULL;
}
