/*
 * cancel_wait (test only): Execute holds every request of the batch,
 * polling TRITONBACKEND_RequestIsCancelled every millisecond, and answers
 * each one with a CANCELLED error response "request cancelled" once it is
 * cancelled. Requests still not cancelled after model parameter max_wait_ms
 * (default 10000) get an UNAVAILABLE error instead, so a broken
 * cancellation path shows up as a test failure rather than a hang.
 *
 * Threads: the model state is immutable after ModelInitialize.
 */
#include <stdlib.h>
#include <string.h>

#include "nereid/backend_utils.h"

typedef struct cancel_wait_model {
  int64_t max_wait_ms;
} cancel_wait_model;

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_Initialize(TRITONBACKEND_Backend *backend) {
  (void)backend;
  return nrd_bu_api_version_check("cancel_wait");
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model *model) {
  json_t *config = NULL;
  TRITONSERVER_Error *err = nrd_bu_model_config(model, &config);
  if (err != NULL) {
    return err;
  }
  cancel_wait_model settings;
  err = nrd_bu_config_parameter_int(config, "max_wait_ms", 10000, 0, 3600000, &settings.max_wait_ms);
  json_decref(config);
  if (err != NULL) {
    return err;
  }
  return nrd_bu_model_state_set(model, &settings, sizeof settings, "cancel_wait");
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model *model) {
  return nrd_bu_model_state_free(model);
}

/* Answers one request with 'code'/'msg', reports failure, releases it. */
static void finish(TRITONBACKEND_ModelInstance *instance, TRITONBACKEND_Request *request, TRITONSERVER_Error_Code code,
                   const char *msg) {
  TRITONSERVER_Error *err = TRITONSERVER_ErrorNew(code, msg);
  nrd_bu_request_respond_error(request, err);
  TRITONSERVER_ErrorDelete(err);
  nrd_bu_error_log_and_delete(TRITONBACKEND_ModelInstanceReportStatistics(instance, request, false, 0, 0, 0, 0),
                              "cancel_wait: cannot report statistics");
  nrd_bu_request_release(request);
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance *instance,
                                                                          TRITONBACKEND_Request **requests,
                                                                          const uint32_t request_count) {
  void *state = NULL;
  TRITONSERVER_Error *err = nrd_bu_instance_model_state(instance, "cancel_wait", &state);
  if (err != NULL) {
    return err;
  }
  const cancel_wait_model *m = state;
  if (request_count == 0) {
    return NULL;
  }
  /* Our own copy of the pending set: the server keeps the array. */
  TRITONBACKEND_Request **pending = malloc(request_count * sizeof *pending);
  if (pending == NULL) {
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, "cancel_wait: out of memory");
  }
  memcpy(pending, requests, request_count * sizeof *pending);
  uint32_t left = 0;
  for (uint32_t i = 0; i < request_count; ++i) {
    left += pending[i] != NULL;
  }
  /* Tests wait for this line to know the requests are held here. */
  NRD_BU_LOG(TRITONSERVER_LOG_VERBOSE, "cancel_wait: holding %u requests until cancelled", left);

  uint64_t deadline = nrd_bu_now_ns() + (uint64_t)m->max_wait_ms * UINT64_C(1000000);
  while (left > 0) {
    for (uint32_t i = 0; i < request_count; ++i) {
      if (pending[i] == NULL) {
        continue;
      }
      bool cancelled = false;
      err = TRITONBACKEND_RequestIsCancelled(pending[i], &cancelled);
      if (err != NULL) {
        nrd_bu_error_log_and_delete(err, "cancel_wait: cannot query request");
        cancelled = false;
      }
      if (cancelled) {
        finish(instance, pending[i], TRITONSERVER_ERROR_CANCELLED, "request cancelled");
        pending[i] = NULL;
        --left;
      }
    }
    if (left == 0) {
      break;
    }
    if (nrd_bu_now_ns() >= deadline) {
      for (uint32_t i = 0; i < request_count; ++i) {
        if (pending[i] != NULL) {
          finish(instance, pending[i], TRITONSERVER_ERROR_UNAVAILABLE,
                 "cancel_wait: request was not cancelled before "
                 "max_wait_ms ran out");
          pending[i] = NULL;
        }
      }
      break;
    }
    nrd_bu_sleep_ms(1);
  }
  free(pending);
  return NULL;
}
