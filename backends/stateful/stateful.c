/*
 * stateful backend: serves model repositories written for Triton's Stateful
 * Backend (backend: "stateful", parameters state_pairs, ...) on ONNX
 * Runtime's CPU execution provider. The backend keeps the state tensors of
 * every active sequence in per-instance buffers and feeds them back into
 * the model, so clients never send state (docs/stateful.md).
 *
 * ONNX Runtime is loaded with dlopen (backends/common_ort, shared with the
 * onnxruntime backend). One session per model instance.
 *
 * Threads: the backend state (the runtime) is immutable between Initialize
 * and Finalize; model state is read-only after ModelInitialize; instance
 * state (session, state buffers, sequence slots) belongs to the instance
 * thread.
 */
#include <jansson.h>
#include <stdlib.h>

#include "nereid/backend_utils.h"
#include "stateful.h"

static const char kName[] = "stateful";

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_Initialize(TRITONBACKEND_Backend *backend) {
  TRITONSERVER_Error *err = nrd_bu_api_version_check(kName);
  if (err != NULL) return err;
  TRITONBACKEND_ArtifactType type;
  const char *dir = NULL;
  err = TRITONBACKEND_BackendArtifacts(backend, &type, &dir);
  if (err != NULL) return err;
  ort_runtime *rt = calloc(1, sizeof *rt);
  if (rt == NULL) {
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, "stateful: out of memory");
  }
  /* --backend-config=stateful,ort-logging-level=N (0 verbose .. 4 fatal),
   * default 2 (warning), as the original backend reads it. */
  long level = ORT_LOGGING_LEVEL_WARNING;
  json_t *bconfig = NULL;
  err = nrd_bu_backend_config(backend, &bconfig);
  const char *text = err == NULL ? nrd_bu_backend_setting(bconfig, "ort-logging-level") : NULL;
  if (err == NULL && text != NULL) {
    char *end = NULL;
    level = strtol(text, &end, 10);
    if (end == text || *end != '\0' || level < 0 || level > 4) {
      err = nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                              "stateful: backend setting ort-logging-level: "
                              "'%s' is not a level from 0 (verbose) to 4 "
                              "(fatal)",
                              text);
    }
  }
  json_decref(bconfig);
  if (err != NULL) {
    free(rt);
    return err;
  }
  err = ort_runtime_open_logging(dir, (OrtLoggingLevel)level, rt);
  if (err == NULL) err = TRITONBACKEND_BackendSetState(backend, rt);
  if (err != NULL) {
    ort_runtime_close(rt);
    free(rt);
    return err;
  }
  NRD_BU_LOG(TRITONSERVER_LOG_INFO, "stateful: ONNX Runtime %s from %s, ort-logging-level %ld", rt->version, rt->path,
             level);
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
  sf_model *m = NULL;
  err = sf_model_new(model, rt, &m);
  if (err == NULL) err = TRITONBACKEND_ModelSetState(model, m);
  if (err != NULL) sf_model_free(m);
  return err;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model *model) {
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelState(model, &state);
  if (err != NULL) return err;
  sf_model_free(state);
  return TRITONBACKEND_ModelSetState(model, NULL);
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance *instance) {
  void *m = NULL;
  TRITONSERVER_Error *err = nrd_bu_instance_model_state(instance, kName, &m);
  if (err != NULL) return err;
  sf_instance *inst = NULL;
  err = sf_instance_new(instance, m, &inst);
  if (err == NULL) err = TRITONBACKEND_ModelInstanceSetState(instance, inst);
  if (err != NULL) sf_instance_free(inst);
  return err;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance *instance) {
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelInstanceState(instance, &state);
  if (err != NULL) return err;
  sf_instance_free(state);
  return TRITONBACKEND_ModelInstanceSetState(instance, NULL);
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance *instance,
                                                                          TRITONBACKEND_Request **requests,
                                                                          const uint32_t request_count) {
  void *state = NULL;
  TRITONSERVER_Error *err = nrd_bu_instance_state(instance, kName, &state);
  if (err != NULL) return err;
  sf_instance_execute(state, instance, requests, request_count);
  return NULL;
}
