/*
 * autocomplete (test only): completes the model configuration when the
 * server allows it (TRITONBACKEND_ModelAutoCompleteConfig), then answers
 * like identity. Completion fills in, only where missing or empty:
 *   input  [{ name: INPUT0, data_type: TYPE_FP32, dims: [4] }]
 *   output [{ name: OUTPUT0, data_type: TYPE_FP32, dims: [4] }]
 *   max_batch_size 8 (when absent or 0)
 * and hands the result to TRITONBACKEND_ModelSetConfig (version 1). The
 * settings used for execution are read back from the server afterwards.
 *
 * Threads: the model state is immutable after ModelInitialize.
 */
#include <stdlib.h>
#include <string.h>

#include "../../identity/identity_core.h"
#include "nereid/backend_utils.h"

/* Builds [{name, data_type: TYPE_FP32, dims: [4]}]; NULL if out of memory. */
static json_t *tensor_list(const char *name) {
  return json_pack("[{s:s, s:s, s:[i]}]", "name", name, "data_type", "TYPE_FP32", "dims", 4);
}

/* Fills 'key' with 'value' when missing or an empty array. Steals 'value'.
 * Returns 1 when it changed the configuration, 0 when not, -1 on error. */
static int fill_list(json_t *config, const char *key, json_t *value) {
  json_t *current = json_object_get(config, key);
  if (json_is_array(current) && json_array_size(current) > 0) {
    json_decref(value);
    return 0;
  }
  if (value == NULL || json_object_set_new(config, key, value) != 0) {
    return -1;
  }
  return 1;
}

static TRITONSERVER_Error *complete(TRITONBACKEND_Model *model) {
  json_t *config = NULL;
  TRITONSERVER_Error *err = nrd_bu_model_config(model, &config);
  if (err != NULL) {
    return err;
  }
  int in = fill_list(config, "input", tensor_list("INPUT0"));
  int out = fill_list(config, "output", tensor_list("OUTPUT0"));
  int64_t mbs = 0;
  err = nrd_bu_config_max_batch_size(config, &mbs);
  if (err != NULL) {
    json_decref(config);
    return err;
  }
  int batch = 0;
  if (mbs == 0) {
    batch = json_object_set_new(config, "max_batch_size", json_integer(8)) == 0 ? 1 : -1;
  }
  if (in < 0 || out < 0 || batch < 0) {
    json_decref(config);
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, "autocomplete: out of memory");
  }
  if (in + out + batch == 0) {
    json_decref(config);
    return NULL;
  }
  char *text = json_dumps(config, JSON_COMPACT);
  json_decref(config);
  if (text == NULL) {
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, "autocomplete: out of memory");
  }
  TRITONSERVER_Message *message = NULL;
  err = TRITONSERVER_MessageNewFromSerializedJson(&message, text, strlen(text));
  free(text);
  if (err != NULL) {
    return err;
  }
  /* The server does not take the message: delete it either way. */
  err = TRITONBACKEND_ModelSetConfig(model, 1, message);
  nrd_bu_error_log_and_delete(TRITONSERVER_MessageDelete(message), "autocomplete: cannot delete message");
  return err;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_Initialize(TRITONBACKEND_Backend *backend) {
  (void)backend;
  return nrd_bu_api_version_check("autocomplete");
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model *model) {
  bool auto_complete = false;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelAutoCompleteConfig(model, &auto_complete);
  if (err == NULL && auto_complete) {
    err = complete(model);
  }
  if (err != NULL) {
    return err;
  }
  json_t *config = NULL;
  err = nrd_bu_model_config(model, &config);
  if (err != NULL) {
    return err;
  }
  nrd_identity_model settings;
  err = nrd_identity_model_read(config, "autocomplete", &settings);
  json_decref(config);
  if (err != NULL) {
    return err;
  }
  return nrd_bu_model_state_set(model, &settings, sizeof settings, "autocomplete");
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model *model) {
  return nrd_bu_model_state_free(model);
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance *instance,
                                                                          TRITONBACKEND_Request **requests,
                                                                          const uint32_t request_count) {
  void *state = NULL;
  TRITONSERVER_Error *err = nrd_bu_instance_model_state(instance, "autocomplete", &state);
  if (err != NULL) {
    return err;
  }
  nrd_identity_execute(instance, state, requests, request_count);
  return NULL;
}
