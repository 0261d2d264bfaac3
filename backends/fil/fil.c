/*
 * The fil backend: tree models (XGBoost, LightGBM, Treelite checkpoints)
 * served as Triton's FIL backend serves them on the CPU, predicted by
 * Treelite's GTIL (libtreelite.so beside the backend, opened at
 * TRITONBACKEND_Initialize). docs/fil.md.
 *
 * State: the backend holds the Treelite API table, each model its loaded
 * model (fil_model.h), each instance its buffers (fil_execute.h).
 */
#include <stdlib.h>

#include "fil_execute.h"
#include "fil_model.h"
#include "nereid/backend_utils.h"
#include "tl_api.h"

static TRITONSERVER_Error *oom(void) {
  return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, "fil: out of memory");
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_Initialize(TRITONBACKEND_Backend *backend) {
  TRITONSERVER_Error *err = nrd_bu_api_version_check("fil");
  if (err != NULL) return err;
  TRITONBACKEND_ArtifactType type;
  const char *dir = NULL;
  err = TRITONBACKEND_BackendArtifacts(backend, &type, &dir);
  if (err != NULL) return err;
  tl_api *tl = calloc(1, sizeof *tl);
  if (tl == NULL) return oom();
  err = tl_api_open(dir, tl);
  if (err == NULL) err = TRITONBACKEND_BackendSetState(backend, tl);
  if (err != NULL) {
    tl_api_close(tl);
    free(tl);
    return err;
  }
  NRD_BU_LOG(TRITONSERVER_LOG_INFO, "fil: Treelite from %s", tl->path);
  return NULL;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_Finalize(TRITONBACKEND_Backend *backend) {
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_BackendState(backend, &state);
  if (err != NULL) return err;
  if (state != NULL) {
    tl_api_close(state);
    free(state);
  }
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
  TRITONBACKEND_Backend *backend = NULL;
  void *tl = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelBackend(model, &backend);
  if (err == NULL) err = TRITONBACKEND_BackendState(backend, &tl);
  if (err != NULL) return err;
  fil_model *m = NULL;
  err = fil_model_new(model, tl, &m);
  if (err == NULL) err = TRITONBACKEND_ModelSetState(model, m);
  if (err != NULL) fil_model_free(m);
  return err;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model *model) {
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelState(model, &state);
  if (err != NULL) return err;
  fil_model_free(state);
  return TRITONBACKEND_ModelSetState(model, NULL);
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance *instance) {
  void *m = NULL;
  TRITONSERVER_Error *err = nrd_bu_instance_model_state(instance, "fil", &m);
  if (err != NULL) return err;
  TRITONSERVER_InstanceGroupKind kind;
  const char *name = NULL;
  err = TRITONBACKEND_ModelInstanceKind(instance, &kind);
  if (err == NULL) err = TRITONBACKEND_ModelInstanceName(instance, &name);
  if (err != NULL) return err;
  /* FIL on a machine without a GPU runs KIND_AUTO (and KIND_MODEL) on the
   * CPU; a KIND_GPU instance is refused rather than silently moved. */
  if (kind == TRITONSERVER_INSTANCEGROUPKIND_GPU) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_UNSUPPORTED,
                             "fil: instance '%s' is KIND_GPU; this build runs the fil backend on the CPU only "
                             "(KIND_CPU or KIND_AUTO)",
                             name);
  }
  fil_instance *inst = calloc(1, sizeof *inst);
  if (inst == NULL) return oom();
  inst->model = m;
  err = TRITONBACKEND_ModelInstanceSetState(instance, inst);
  if (err != NULL) free(inst);
  return err;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance *instance) {
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelInstanceState(instance, &state);
  if (err != NULL) return err;
  if (state != NULL) {
    fil_instance_release(state);
    free(state);
  }
  return TRITONBACKEND_ModelInstanceSetState(instance, NULL);
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance *instance,
                                                                          TRITONBACKEND_Request **requests,
                                                                          const uint32_t request_count) {
  void *state = NULL;
  TRITONSERVER_Error *err = nrd_bu_instance_state(instance, "fil", &state);
  if (err != NULL) return err;
  fil_execute(state, instance, requests, request_count);
  return NULL;
}
