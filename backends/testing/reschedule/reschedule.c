/* Test-only "reschedule" backend: releases every request with
 * TRITONSERVER_REQUEST_RELEASE_RESCHEDULE until it has seen that request
 * `passes` times (model parameter, default 3), then answers like identity.
 * Each pass is one execution, so statistics count `passes` executions per
 * request. Requests are told apart by their id, which tests set. With
 * model parameter `check_start` = 1 each pass reads the INT32 control
 * input START, which must be 1 on the first pass only (an iterative
 * sequence); otherwise the request is answered with an error saying so. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../../identity/identity_core.h"
#include "nereid/backend_utils.h"
#include "triton/core/tritonbackend.h"

#define EXPORT TRITONBACKEND_ISPEC
#define MAX_TRACKED 256

typedef struct seen {
  char id[64];
  int count;
} seen;

typedef struct resched_model {
  int64_t passes;
  int64_t check_start;
  pthread_mutex_t mu;
  seen table[MAX_TRACKED];
} resched_model;

EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model *model) {
  json_t *config = NULL;
  TRITONSERVER_Error *err = nrd_bu_model_config(model, &config);
  if (err) return err;
  resched_model *m = calloc(1, sizeof(*m));
  if (!m) err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "reschedule: out of memory");
  if (!err) err = nrd_bu_config_parameter_int(config, "passes", 3, 1, 100, &m->passes);
  if (!err) err = nrd_bu_config_parameter_int(config, "check_start", 0, 0, 1, &m->check_start);
  json_decref(config);
  if (!err) {
    pthread_mutex_init(&m->mu, NULL);
    err = TRITONBACKEND_ModelSetState(model, m);
  }
  if (err) free(m);
  return err;
}

EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model *model) {
  void *state = NULL;
  TRITONBACKEND_ModelState(model, &state);
  resched_model *m = state;
  if (m) pthread_mutex_destroy(&m->mu);
  free(m);
  return NULL;
}

/* How many times this request id was executed, counting this one. */
static int bump(resched_model *m, const char *id) {
  int n = 0;
  pthread_mutex_lock(&m->mu);
  seen *slot = NULL;
  for (int i = 0; i < MAX_TRACKED && !slot; i++)
    if (!strcmp(m->table[i].id, id) || !m->table[i].id[0]) slot = &m->table[i];
  if (slot) {
    if (!slot->id[0]) strncpy(slot->id, id, sizeof slot->id - 1);
    n = ++slot->count;
  }
  pthread_mutex_unlock(&m->mu);
  return n;
}

EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance *instance,
                                                              TRITONBACKEND_Request **requests,
                                                              const uint32_t request_count) {
  TRITONBACKEND_Model *model = NULL;
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelInstanceModel(instance, &model);
  if (!err) err = TRITONBACKEND_ModelState(model, &state);
  if (err) return err;
  resched_model *m = state;
  /* Report the execution first: the last pass answers the client, which may
   * read the statistics as soon as its response arrives. */
  uint64_t now = nrd_bu_now_ns();
  TRITONBACKEND_ModelInstanceReportBatchStatistics(instance, request_count, now, now, now, now);
  for (uint32_t i = 0; i < request_count; i++) {
    const char *id = "";
    TRITONBACKEND_RequestId(requests[i], &id);
    int pass = bump(m, id);
    if (m->check_start) {
      nrd_bu_tensor t = {0};
      TRITONSERVER_Error *e = nrd_bu_request_input(requests[i], "START", &t);
      int32_t start = -1;
      if (!e && t.byte_size >= sizeof start) memcpy(&start, t.data, sizeof start);
      nrd_bu_tensor_release(&t);
      if (!e && start != (pass == 1))
        e = nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL, "reschedule: START was %d on pass %d", (int)start, pass);
      if (e) {
        nrd_bu_request_respond_error(requests[i], e);
        TRITONSERVER_ErrorDelete(e);
        nrd_bu_request_release(requests[i]);
        continue;
      }
    }
    if (pass < m->passes) {
      TRITONSERVER_Error *e = TRITONBACKEND_RequestRelease(requests[i], TRITONSERVER_REQUEST_RELEASE_RESCHEDULE);
      if (e) nrd_bu_error_log_and_delete(e, "reschedule: releasing for another pass");
    } else {
      nrd_identity_respond(requests[i], TRITONSERVER_RESPONSE_COMPLETE_FINAL);
      nrd_bu_request_release(requests[i]);
    }
  }
  return NULL;
}
