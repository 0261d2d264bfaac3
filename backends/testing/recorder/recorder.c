/*
 * recorder (test only): records every backend API call, in order, into a
 * record file (see testing/common/record.h), and answers requests like
 * identity. Its TRITONBACKEND_GetBackendAttribute asks for a CPU instance
 * group of count 2 so tests can check the server applies backend
 * attributes.
 *
 * Lines: Initialize | GetBackendAttribute | ModelInitialize <model> v<ver> |
 * ModelInstanceInitialize <instance> | ModelInstanceExecute <instance> <n> |
 * ModelInstanceFinalize <instance> | ModelFinalize <model> | Finalize
 *
 * The model lifecycle is the one of testing/common/record_model.h.
 *
 * Threads: model state is immutable after ModelInitialize; record lines are
 * single appends, safe from any thread.
 */
#include <stdlib.h>

#include "../common/record.h"
#include "../common/record_model.h"
#include "nereid/backend_utils.h"

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_Initialize(TRITONBACKEND_Backend *backend) {
  TRITONSERVER_Error *err = nrd_bu_api_version_check("recorder");
  if (err != NULL) {
    return err;
  }
  return nrd_record_backend_init(backend, "Initialize");
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_Finalize(TRITONBACKEND_Backend *backend) {
  return nrd_record_backend_fini(backend, "Finalize");
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *
TRITONBACKEND_GetBackendAttribute(TRITONBACKEND_Backend *backend, TRITONBACKEND_BackendAttribute *backend_attributes) {
  const char *path = nrd_record_backend_file(backend);
  if (path != NULL) {
    nrd_record_line(path, "GetBackendAttribute");
  } else {
    /* Called before Initialize stored the path: read it directly. */
    json_t *config = NULL;
    TRITONSERVER_Error *err = nrd_bu_backend_config(backend, &config);
    if (err != NULL) {
      return err;
    }
    nrd_record_line(nrd_bu_backend_setting(config, "record_file"), "GetBackendAttribute");
    json_decref(config);
  }
  return TRITONBACKEND_BackendAttributeAddPreferredInstanceGroup(backend_attributes, TRITONSERVER_INSTANCEGROUPKIND_CPU,
                                                                 2, NULL, 0);
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model *model) {
  json_t *config = NULL;
  TRITONSERVER_Error *err = nrd_bu_model_config(model, &config);
  if (err != NULL) {
    return err;
  }
  nrd_record_model m;
  err = nrd_record_model_init(model, config, "recorder", &m);
  json_decref(config);
  if (err != NULL) {
    return err;
  }
  err = nrd_bu_model_state_set(model, &m, sizeof m, "recorder");
  if (err != NULL) {
    free(m.record_file);
  }
  return err;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model *model) {
  return nrd_record_model_finalize(model);
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance *instance) {
  void *state = NULL;
  TRITONSERVER_Error *err = nrd_record_instance_init(instance, "recorder", &state);
  if (err != NULL) {
    return err;
  }
  return TRITONBACKEND_ModelInstanceSetState(instance, state);
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance *instance) {
  return nrd_record_instance_finalize(instance);
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance *instance,
                                                                          TRITONBACKEND_Request **requests,
                                                                          const uint32_t request_count) {
  void *state = NULL;
  TRITONSERVER_Error *err = nrd_record_execute(instance, "recorder", request_count, &state);
  if (err != NULL) {
    return err;
  }
  const nrd_record_model *m = state;
  nrd_identity_execute(instance, &m->identity, requests, request_count);
  return NULL;
}
