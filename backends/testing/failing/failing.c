/*
 * failing (test only): fails on purpose at the stage named by model
 * parameter fail_at, otherwise answers like identity:
 *
 *   model_init        ModelInitialize returns an error
 *   instance_init     ModelInstanceInitialize returns an error; with
 *                     parameter fail_instance = N only the N-th instance
 *                     initialized for the model (0-based) fails
 *   execute           ModelInstanceExecute returns an error WITHOUT
 *                     releasing the requests (the server must answer them)
 *   execute_response  every request gets an error response, then is
 *                     released
 *
 * With parameter fail_once_marker = PATH, model_init fails only while PATH
 * does not exist, and creates it when failing (so a retried load succeeds).
 *
 * Messages read "failing backend: failed in <Stage> as asked". Calls are
 * recorded like the recorder backend when a record file is configured
 * (testing/common/record_model.h).
 *
 * Threads: the model state is immutable after ModelInitialize except the
 * instance counter, which is atomic (instances may initialize in parallel).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/record.h"
#include "../common/record_model.h"
#include "nereid/backend_utils.h"

typedef enum fail_stage {
  FAIL_NONE,
  FAIL_MODEL_INIT,
  FAIL_INSTANCE_INIT,
  FAIL_EXECUTE,
  FAIL_EXECUTE_RESPONSE
} fail_stage;

typedef struct failing_model {
  nrd_record_model base; /* first, as record_model.h requires */
  fail_stage stage;
  int64_t fail_instance; /* -1: every instance */
  atomic_int_fast64_t instances_seen;
} failing_model;

static TRITONSERVER_Error *stage_parse(const char *text, fail_stage *out) {
  static const struct {
    const char *name;
    fail_stage stage;
  } kStages[] = {{"model_init", FAIL_MODEL_INIT},
                 {"instance_init", FAIL_INSTANCE_INIT},
                 {"execute", FAIL_EXECUTE},
                 {"execute_response", FAIL_EXECUTE_RESPONSE}};
  if (text == NULL || text[0] == '\0') {
    *out = FAIL_NONE;
    return NULL;
  }
  for (size_t i = 0; i < sizeof kStages / sizeof kStages[0]; ++i) {
    if (strcmp(text, kStages[i].name) == 0) {
      *out = kStages[i].stage;
      return NULL;
    }
  }
  return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                           "failing backend: model parameter 'fail_at' is "
                           "\"%s\"; expected model_init, instance_init, "
                           "execute or execute_response",
                           text);
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_Initialize(TRITONBACKEND_Backend *backend) {
  TRITONSERVER_Error *err = nrd_bu_api_version_check("failing");
  if (err != NULL) {
    return err;
  }
  return nrd_record_backend_init(backend, "Initialize");
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_Finalize(TRITONBACKEND_Backend *backend) {
  return nrd_record_backend_fini(backend, "Finalize");
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model *model) {
  json_t *config = NULL;
  TRITONSERVER_Error *err = nrd_bu_model_config(model, &config);
  if (err != NULL) {
    return err;
  }
  /* Not nrd_bu_model_state_set: the atomic counter is not copied around. */
  failing_model *m = calloc(1, sizeof *m);
  if (m == NULL) {
    json_decref(config);
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, "failing backend: out of memory");
  }
  atomic_init(&m->instances_seen, 0);
  err = nrd_record_model_init(model, config, "failing backend", &m->base);
  if (err == NULL) {
    err = stage_parse(nrd_bu_config_parameter(config, "fail_at"), &m->stage);
  }
  if (err == NULL) {
    err = nrd_bu_config_parameter_int(config, "fail_instance", -1, -1, INT64_MAX, &m->fail_instance);
  }
  const char *marker = nrd_bu_config_parameter(config, "fail_once_marker");
  bool spare = false;
  if (err == NULL && marker != NULL && marker[0] != '\0') {
    FILE *f = fopen(marker, "r");
    spare = f != NULL;
    if (f == NULL) f = fopen(marker, "w");
    if (f != NULL) fclose(f);
  }
  json_decref(config);
  if (err == NULL && m->stage == FAIL_MODEL_INIT && !spare) {
    err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "failing backend: failed in ModelInitialize as asked");
  }
  if (err == NULL) {
    err = TRITONBACKEND_ModelSetState(model, m);
  }
  if (err != NULL) {
    /* The server does not call ModelFinalize after a failed initialize. */
    free(m->base.record_file);
    free(m);
  }
  return err;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model *model) {
  return nrd_record_model_finalize(model);
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance *instance) {
  void *state = NULL;
  TRITONSERVER_Error *err = nrd_record_instance_init(instance, "failing backend", &state);
  if (err != NULL) {
    return err;
  }
  failing_model *m = state;
  int64_t index = atomic_fetch_add(&m->instances_seen, 1);
  if (m->stage == FAIL_INSTANCE_INIT && (m->fail_instance < 0 || m->fail_instance == index)) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL,
                             "failing backend: failed in "
                             "ModelInstanceInitialize as asked (instance %s, "
                             "number %lld)",
                             nrd_record_instance_name(instance), (long long)index);
  }
  return TRITONBACKEND_ModelInstanceSetState(instance, m);
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance *instance) {
  return nrd_record_instance_finalize(instance);
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance *instance,
                                                                          TRITONBACKEND_Request **requests,
                                                                          const uint32_t request_count) {
  void *state = NULL;
  TRITONSERVER_Error *err = nrd_record_execute(instance, "failing backend", request_count, &state);
  if (err != NULL) {
    return err;
  }
  const failing_model *m = state;
  switch (m->stage) {
    case FAIL_EXECUTE:
      /* Requests stay owned by the server, which must answer them. */
      return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL,
                                   "failing backend: failed in ModelInstanceExecute as asked");
    case FAIL_EXECUTE_RESPONSE:
      nrd_bu_requests_fail(instance, requests, request_count,
                           TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL,
                                                 "failing backend: failed in "
                                                 "ModelInstanceExecute response as asked"));
      return NULL;
    default: nrd_identity_execute(instance, &m->base.identity, requests, request_count); return NULL;
  }
}
