/*
 * The pytorch backend's TRITONBACKEND_* entry points: TorchScript models
 * (model.pt) served on libtorch, as Triton's pytorch backend serves them
 * (docs/pytorch.md). The work is in pt_model.c (setup), pt_execute.c
 * (Execute) and pt_torch.cpp (the only C++: libtorch behind pt_torch.h).
 */
#include "nereid/backend_utils.h"
#include "pt_model.h"
#include "pt_torch.h"

#define BACKEND "pytorch"

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_Initialize(TRITONBACKEND_Backend *backend) {
  (void)backend;
  TRITONSERVER_Error *err = nrd_bu_api_version_check(BACKEND);
  if (err != NULL) return err;
  NRD_BU_LOG(TRITONSERVER_LOG_INFO, BACKEND ": libtorch %s (CPU)", pt_version());
  return NULL;
}

/* This build runs on the CPU only: a model without instance groups gets a
 * CPU group (Triton's default count for the backend, 1) even where the core
 * finds GPUs, where KIND_AUTO would become KIND_GPU (docs/gpu.md). */
NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_GetBackendAttribute(TRITONBACKEND_Backend *backend,
                                                                       TRITONBACKEND_BackendAttribute *attributes) {
  (void)backend;
  return TRITONBACKEND_BackendAttributeAddPreferredInstanceGroup(attributes, TRITONSERVER_INSTANCEGROUPKIND_CPU, 1,
                                                                 NULL, 0);
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model *model) {
  /* A TorchScript file does not say what its tensors are: like Triton's
   * backend, this one completes nothing and says so. */
  bool complete = false;
  const char *name = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelAutoCompleteConfig(model, &complete);
  if (err == NULL) err = TRITONBACKEND_ModelName(model, &name);
  if (err != NULL) return err;
  if (complete) {
    NRD_BU_LOG(TRITONSERVER_LOG_WARN,
               "skipping model configuration auto-complete for '%s': not supported for pytorch backend", name);
  }
  pt_model *m = NULL;
  err = pt_model_new(model, &m);
  if (err == NULL) err = TRITONBACKEND_ModelSetState(model, m);
  if (err != NULL) pt_model_free(m);
  return err;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model *model) {
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelState(model, &state);
  if (err != NULL) return err;
  pt_model_free(state);
  return TRITONBACKEND_ModelSetState(model, NULL);
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance *instance) {
  void *m = NULL;
  TRITONSERVER_Error *err = nrd_bu_instance_model_state(instance, BACKEND, &m);
  if (err != NULL) return err;
  pt_instance *inst = NULL;
  err = pt_instance_new(instance, m, &inst);
  if (err == NULL) err = TRITONBACKEND_ModelInstanceSetState(instance, inst);
  if (err != NULL) pt_instance_free(inst);
  return err;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance *instance) {
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelInstanceState(instance, &state);
  if (err != NULL) return err;
  pt_instance_free(state);
  return TRITONBACKEND_ModelInstanceSetState(instance, NULL);
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance *instance,
                                                                          TRITONBACKEND_Request **requests,
                                                                          const uint32_t request_count) {
  void *state = NULL;
  TRITONSERVER_Error *err = nrd_bu_instance_state(instance, BACKEND, &state);
  if (err != NULL) return err;
  pt_instance_execute(state, instance, requests, request_count);
  return NULL;
}
