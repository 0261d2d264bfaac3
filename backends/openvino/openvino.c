/*
 * openvino backend: runs OpenVINO IR models (model.xml + model.bin) and the
 * other formats OpenVINO reads (ONNX with default_model_filename
 * "model.onnx") on the CPU, as Triton's openvino backend does, through
 * OpenVINO's C API (docs/openvino.md).
 *
 * OpenVINO is loaded with dlopen from the backend's directory or the
 * loader's search path (ov_runtime.h). One core and compiled model per
 * model, one infer request per instance (ov_model.h).
 *
 * Threads: the backend state (the runtime) is immutable between Initialize
 * and Finalize; model state is read-only after ModelInitialize; instance
 * state belongs to the instance thread.
 */
#include <stdlib.h>

#include "nereid/backend_utils.h"
#include "ov_model.h"
#include "ov_runtime.h"

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_Initialize(TRITONBACKEND_Backend *backend) {
  TRITONSERVER_Error *err = nrd_bu_api_version_check("openvino");
  if (err != NULL) return err;
  TRITONBACKEND_ArtifactType type;
  const char *dir = NULL;
  err = TRITONBACKEND_BackendArtifacts(backend, &type, &dir);
  if (err != NULL) return err;
  ov_runtime *rt = calloc(1, sizeof *rt);
  if (rt == NULL) return nrd_bu_error_newf(TRITONSERVER_ERROR_UNAVAILABLE, "openvino: out of memory");
  err = ov_runtime_open(dir, rt);
  if (err == NULL) err = TRITONBACKEND_BackendSetState(backend, rt);
  if (err != NULL) {
    ov_runtime_close(rt);
    free(rt);
    return err;
  }
  NRD_BU_LOG(TRITONSERVER_LOG_INFO, "openvino: OpenVINO %s from %s", rt->version, rt->path);
  return NULL;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_Finalize(TRITONBACKEND_Backend *backend) {
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_BackendState(backend, &state);
  if (err != NULL) return err;
  if (state != NULL) {
    ov_runtime_close(state);
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
  ov_model *m = NULL;
  err = ov_model_new(model, rt, &m);
  if (err == NULL) err = TRITONBACKEND_ModelSetState(model, m);
  if (err != NULL) ov_model_free(m);
  return err;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model *model) {
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelState(model, &state);
  if (err != NULL) return err;
  ov_model_free(state);
  return TRITONBACKEND_ModelSetState(model, NULL);
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance *instance) {
  void *m = NULL;
  TRITONSERVER_Error *err = nrd_bu_instance_model_state(instance, "openvino", &m);
  if (err != NULL) return err;
  ov_instance *inst = NULL;
  err = ov_instance_new(instance, m, &inst);
  if (err == NULL) err = TRITONBACKEND_ModelInstanceSetState(instance, inst);
  if (err != NULL) ov_instance_free(inst);
  return err;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance *instance) {
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelInstanceState(instance, &state);
  if (err != NULL) return err;
  ov_instance_free(state);
  return TRITONBACKEND_ModelInstanceSetState(instance, NULL);
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance *instance,
                                                                          TRITONBACKEND_Request **requests,
                                                                          const uint32_t request_count) {
  void *state = NULL;
  TRITONSERVER_Error *err = nrd_bu_instance_state(instance, "openvino", &state);
  if (err != NULL) return err;
  ov_instance_execute(state, instance, requests, request_count);
  return NULL;
}
