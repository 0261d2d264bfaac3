/* Recorded model lifecycle shared by the recorder and failing backends. */
#include "record_model.h"

#include <stdlib.h>

#include "record.h"

TRITONSERVER_Error *nrd_record_model_init(TRITONBACKEND_Model *model, const json_t *config, const char *backend,
                                          nrd_record_model *out) {
  uint64_t version = 0;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelVersion(model, &version);
  if (err != NULL) {
    return err;
  }
  char *record_file = nrd_record_model_file(model, config);
  /* Recorded before the settings are checked, so a failed load shows too. */
  nrd_record_line(record_file, "ModelInitialize %s v%llu", nrd_record_model_name(model), (unsigned long long)version);
  err = nrd_identity_model_read(config, backend, &out->identity);
  if (err != NULL) {
    free(record_file);
    return err;
  }
  out->record_file = record_file;
  return NULL;
}

TRITONSERVER_Error *nrd_record_model_finalize(TRITONBACKEND_Model *model) {
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelState(model, &state);
  if (err != NULL) {
    return err;
  }
  nrd_record_model *m = state;
  if (m != NULL) {
    nrd_record_line(m->record_file, "ModelFinalize %s", nrd_record_model_name(model));
    free(m->record_file);
    free(m);
  }
  return TRITONBACKEND_ModelSetState(model, NULL);
}

TRITONSERVER_Error *nrd_record_instance_init(TRITONBACKEND_ModelInstance *instance, const char *backend, void **state) {
  TRITONSERVER_Error *err = nrd_bu_instance_model_state(instance, backend, state);
  if (err != NULL) {
    return err;
  }
  const nrd_record_model *m = *state;
  nrd_record_line(m->record_file, "ModelInstanceInitialize %s", nrd_record_instance_name(instance));
  return NULL;
}

TRITONSERVER_Error *nrd_record_instance_finalize(TRITONBACKEND_ModelInstance *instance) {
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelInstanceState(instance, &state);
  if (err != NULL) {
    return err;
  }
  const nrd_record_model *m = state;
  if (m != NULL) {
    nrd_record_line(m->record_file, "ModelInstanceFinalize %s", nrd_record_instance_name(instance));
  }
  return TRITONBACKEND_ModelInstanceSetState(instance, NULL);
}

TRITONSERVER_Error *nrd_record_execute(TRITONBACKEND_ModelInstance *instance, const char *backend,
                                       uint32_t request_count, void **state) {
  TRITONSERVER_Error *err = nrd_bu_instance_state(instance, backend, state);
  if (err != NULL) {
    return err;
  }
  const nrd_record_model *m = *state;
  nrd_record_line(m->record_file, "ModelInstanceExecute %s %u", nrd_record_instance_name(instance), request_count);
  return NULL;
}
