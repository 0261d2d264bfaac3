/*
 * Model and instance state: the malloc'ed-settings pattern most backends use
 * (ModelInitialize stores a copy, instances borrow it, ModelFinalize frees
 * it), written once.
 */
#include <stdlib.h>
#include <string.h>

#include "nereid/backend_utils.h"

TRITONSERVER_Error *nrd_bu_model_state_set(TRITONBACKEND_Model *model, const void *settings, size_t size,
                                           const char *backend) {
  void *state = malloc(size > 0 ? size : 1);
  if (state == NULL) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_UNAVAILABLE, "%s: out of memory", backend);
  }
  memcpy(state, settings, size);
  TRITONSERVER_Error *err = TRITONBACKEND_ModelSetState(model, state);
  if (err != NULL) {
    free(state);
  }
  return err;
}

TRITONSERVER_Error *nrd_bu_model_state_free(TRITONBACKEND_Model *model) {
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelState(model, &state);
  if (err != NULL) {
    return err;
  }
  free(state);
  return TRITONBACKEND_ModelSetState(model, NULL);
}

TRITONSERVER_Error *nrd_bu_instance_model_state(TRITONBACKEND_ModelInstance *instance, const char *backend,
                                                void **state) {
  TRITONBACKEND_Model *model = NULL;
  void *s = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelInstanceModel(instance, &model);
  if (err == NULL) {
    err = TRITONBACKEND_ModelState(model, &s);
  }
  if (err == NULL && s == NULL) {
    err = nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL, "%s: model state missing", backend);
  }
  if (err == NULL) {
    *state = s;
  }
  return err;
}

TRITONSERVER_Error *nrd_bu_instance_share_model_state(TRITONBACKEND_ModelInstance *instance, const char *backend) {
  void *state = NULL;
  TRITONSERVER_Error *err = nrd_bu_instance_model_state(instance, backend, &state);
  if (err != NULL) {
    return err;
  }
  return TRITONBACKEND_ModelInstanceSetState(instance, state);
}

TRITONSERVER_Error *nrd_bu_instance_state(TRITONBACKEND_ModelInstance *instance, const char *backend, void **state) {
  void *s = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelInstanceState(instance, &s);
  if (err != NULL) {
    return err;
  }
  if (s == NULL) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL, "%s: instance state missing", backend);
  }
  *state = s;
  return NULL;
}
