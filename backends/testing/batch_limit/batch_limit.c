/* Test-only "batch_limit" backend: answers like identity and exports the
 * five custom batching hooks. A request joins the batch being formed only
 * while the summed byte size of one input over the batch stays within a
 * limit (the "volume batching" idea of Triton's custom batching example).
 *
 * Model parameters:
 *   max_batch_volume  byte limit of the batch (default 1024)
 *   volume_input      input whose byte size counts (default INPUT0)
 *   fail_at           "batcher_init": ModelBatcherInitialize fails;
 *                     "batch_init": ModelBatchInitialize fails (no state);
 *                     "include": ModelBatchIncludeRequest fails
 *   record_file       appends one line per hook call: "BatcherInitialize",
 *                     "BatcherFinalize", "BatchInitialize", "Include <id> <0|1>",
 *                     "BatchFinalize"
 *   execute_delay_ms  as in identity
 *
 * The library may also be used as another model's batchstrategy.so: the
 * hooks read the parameters of whatever model they are given.
 *
 * Threads: the batcher is read-only after ModelBatcherInitialize; the
 * per-batch state is only touched by the core's batcher, one batch at a
 * time. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../../identity/identity_core.h"
#include "../common/record.h"
#include "nereid/backend_utils.h"

#define EXPORT TRITONBACKEND_ISPEC

/* What ModelBatcherInitialize creates: the model's settings. */
typedef struct limit_batcher {
  uint64_t max_volume;
  char input[128];
  bool fail_batch_init, fail_include;
  char *record_file; /* NULL: record nothing */
} limit_batcher;

/* One batch being formed. */
typedef struct limit_batch {
  const limit_batcher *b;
  uint64_t volume;
} limit_batch;

EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelBatcherInitialize(TRITONBACKEND_Batcher **batcher,
                                                                TRITONBACKEND_Model *model) {
  json_t *config = NULL;
  TRITONSERVER_Error *err = nrd_bu_model_config(model, &config);
  if (err) return err;
  limit_batcher *b = calloc(1, sizeof(*b));
  int64_t volume = 0;
  if (!b) err = nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL, "batch_limit: out of memory");
  if (!err) err = nrd_bu_config_parameter_int(config, "max_batch_volume", 1024, 0, INT64_MAX, &volume);
  if (!err) {
    const char *fail = nrd_bu_config_parameter(config, "fail_at");
    const char *input = nrd_bu_config_parameter(config, "volume_input");
    snprintf(b->input, sizeof b->input, "%s", input ? input : "INPUT0");
    b->max_volume = (uint64_t)volume;
    b->fail_batch_init = fail && !strcmp(fail, "batch_init");
    b->fail_include = fail && !strcmp(fail, "include");
    /* Only the model parameter: as a strategy library for another backend,
     * this library must not read that backend's state. */
    const char *record = nrd_bu_config_parameter(config, "record_file");
    b->record_file = record && *record ? strdup(record) : NULL;
    if (fail && !strcmp(fail, "batcher_init"))
      err = nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "batch_limit: batcher initialization failed as asked");
  }
  json_decref(config);
  if (err) {
    if (b) free(b->record_file);
    free(b);
    return err;
  }
  nrd_record_line(b->record_file, "BatcherInitialize");
  *batcher = (TRITONBACKEND_Batcher *)b;
  return NULL;
}

EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelBatcherFinalize(TRITONBACKEND_Batcher *batcher) {
  limit_batcher *b = (limit_batcher *)batcher;
  if (!b) return NULL;
  nrd_record_line(b->record_file, "BatcherFinalize");
  free(b->record_file);
  free(b);
  return NULL;
}

EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelBatchInitialize(const TRITONBACKEND_Batcher *batcher, void **userp) {
  const limit_batcher *b = (const limit_batcher *)batcher;
  nrd_record_line(b->record_file, "BatchInitialize");
  if (b->fail_batch_init)
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL, "batch_limit: batch initialization failed as asked");
  limit_batch *batch = calloc(1, sizeof(*batch));
  if (!batch) return nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL, "batch_limit: out of memory");
  batch->b = b;
  *userp = batch;
  return NULL;
}

EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelBatchIncludeRequest(TRITONBACKEND_Request *request, void *userp,
                                                                  bool *should_include) {
  limit_batch *batch = userp;
  if (!batch) {
    /* ModelBatchInitialize failed: no limit to apply. */
    *should_include = true;
    return NULL;
  }
  const limit_batcher *b = batch->b;
  const char *id = "";
  TRITONSERVER_Error *err = TRITONBACKEND_RequestId(request, &id);
  if (err) return err;
  if (b->fail_include) {
    nrd_record_line(b->record_file, "Include %s error", id);
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL, "batch_limit: include failed as asked");
  }
  TRITONBACKEND_Input *input = NULL;
  uint64_t bytes = 0;
  err = TRITONBACKEND_RequestInput(request, b->input, &input);
  if (!err) err = TRITONBACKEND_InputProperties(input, NULL, NULL, NULL, NULL, &bytes, NULL);
  if (err) return err;
  *should_include = batch->volume + bytes <= b->max_volume;
  if (*should_include) batch->volume += bytes;
  nrd_record_line(b->record_file, "Include %s %d", id, *should_include ? 1 : 0);
  return NULL;
}

EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelBatchFinalize(void *userp) {
  limit_batch *batch = userp;
  nrd_record_line(batch->b->record_file, "BatchFinalize");
  free(batch);
  return NULL;
}

/* ---------------------------------------------------- identity model */

EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model *model) {
  json_t *config = NULL;
  TRITONSERVER_Error *err = nrd_bu_model_config(model, &config);
  if (err) return err;
  nrd_identity_model settings;
  err = nrd_identity_model_read(config, "batch_limit", &settings);
  json_decref(config);
  if (err) return err;
  return nrd_bu_model_state_set(model, &settings, sizeof settings, "batch_limit");
}

EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model *model) {
  return nrd_bu_model_state_free(model);
}

EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance *instance,
                                                              TRITONBACKEND_Request **requests, const uint32_t count) {
  void *state = NULL;
  TRITONSERVER_Error *err = nrd_bu_instance_model_state(instance, "batch_limit", &state);
  if (err) return err;
  nrd_identity_execute(instance, state, requests, count);
  return NULL;
}
