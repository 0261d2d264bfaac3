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
 * Threads: model state is immutable after ModelInitialize; record lines are
 * single appends, safe from any thread.
 */
#include <stdlib.h>
#include <string.h>

#include "../../identity/identity_core.h"
#include "../common/record.h"
#include "nereid/backend_utils.h"

typedef struct recorder_model {
  nrd_identity_model identity;
  char *record_file; /* may be NULL: record nothing */
} recorder_model;

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_Initialize(
    TRITONBACKEND_Backend *backend) {
  TRITONSERVER_Error *err = nrd_bu_api_version_check("recorder");
  if (err != NULL) {
    return err;
  }
  return nrd_record_backend_init(backend, "Initialize");
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_Finalize(
    TRITONBACKEND_Backend *backend) {
  return nrd_record_backend_fini(backend, "Finalize");
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_GetBackendAttribute(
    TRITONBACKEND_Backend *backend,
    TRITONBACKEND_BackendAttribute *backend_attributes) {
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
    nrd_record_line(nrd_bu_backend_setting(config, "record_file"),
                    "GetBackendAttribute");
    json_decref(config);
  }
  return TRITONBACKEND_BackendAttributeAddPreferredInstanceGroup(
      backend_attributes, TRITONSERVER_INSTANCEGROUPKIND_CPU, 2, NULL, 0);
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInitialize(
    TRITONBACKEND_Model *model) {
  uint64_t version = 0;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelVersion(model, &version);
  if (err != NULL) {
    return err;
  }
  json_t *config = NULL;
  err = nrd_bu_model_config(model, &config);
  if (err != NULL) {
    return err;
  }
  recorder_model *m = calloc(1, sizeof *m);
  if (m == NULL) {
    json_decref(config);
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE,
                                 "recorder: out of memory");
  }
  m->record_file = nrd_record_model_file(model, config);
  nrd_record_line(m->record_file, "ModelInitialize %s v%llu",
                  nrd_record_model_name(model), (unsigned long long)version);
  err = nrd_identity_model_read(config, "recorder", &m->identity);
  json_decref(config);
  if (err == NULL) {
    err = TRITONBACKEND_ModelSetState(model, m);
  }
  if (err != NULL) {
    free(m->record_file);
    free(m);
  }
  return err;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelFinalize(
    TRITONBACKEND_Model *model) {
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelState(model, &state);
  if (err != NULL) {
    return err;
  }
  recorder_model *m = state;
  if (m != NULL) {
    nrd_record_line(m->record_file, "ModelFinalize %s",
                    nrd_record_model_name(model));
    free(m->record_file);
    free(m);
  }
  return TRITONBACKEND_ModelSetState(model, NULL);
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceInitialize(
    TRITONBACKEND_ModelInstance *instance) {
  TRITONBACKEND_Model *model = NULL;
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelInstanceModel(instance, &model);
  if (err == NULL) {
    err = TRITONBACKEND_ModelState(model, &state);
  }
  if (err == NULL && state == NULL) {
    err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL,
                                "recorder: model state missing");
  }
  if (err != NULL) {
    return err;
  }
  recorder_model *m = state;
  nrd_record_line(m->record_file, "ModelInstanceInitialize %s",
                  nrd_record_instance_name(instance));
  return TRITONBACKEND_ModelInstanceSetState(instance, m);
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceFinalize(
    TRITONBACKEND_ModelInstance *instance) {
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelInstanceState(instance, &state);
  if (err != NULL) {
    return err;
  }
  recorder_model *m = state;
  if (m != NULL) {
    nrd_record_line(m->record_file, "ModelInstanceFinalize %s",
                    nrd_record_instance_name(instance));
  }
  return TRITONBACKEND_ModelInstanceSetState(instance, NULL);
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance *instance, TRITONBACKEND_Request **requests,
    const uint32_t request_count) {
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelInstanceState(instance, &state);
  if (err != NULL) {
    return err;
  }
  if (state == NULL) {
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL,
                                 "recorder: instance state missing");
  }
  recorder_model *m = state;
  nrd_record_line(m->record_file, "ModelInstanceExecute %s %u",
                  nrd_record_instance_name(instance), request_count);
  nrd_identity_execute(instance, &m->identity, requests, request_count);
  return NULL;
}
