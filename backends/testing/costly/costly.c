/*
 * costly (test and benchmark only): answers like identity (OUTPUT<n> is a
 * copy of INPUT<n>), but every Execute call costs a fixed time plus a time
 * per batch row, the cost model of a real batched network:
 *
 *   cost = exec_us + row_us * rows     (rows: sum of the requests' batch
 *                                       dimensions; 1 per request when
 *                                       max_batch_size is 0)
 *
 * Model parameters (string_value, decimal):
 *   exec_us    fixed cost of one Execute call in µs (default 0)
 *   row_us     cost of one batch row in µs (default 0)
 *   cost_mode  "sleep" (default) or "spin"
 *
 * cost_mode sleep: the instance thread sleeps until ~200 µs before the end
 * of the cost and busy-waits for the rest. A timed sleep alone wakes late by
 * tens of µs (timer slack, scheduling), which would blur the cost; a busy
 * wait alone would burn one of the machine's two cores for the whole cost,
 * and the load generator running on the same machine would lose it. The
 * benchmark's ideal figure (max_batch_size rows every exec_us +
 * row_us * max_batch_size µs) assumes that the backend's time is device
 * time, not CPU time the client needs, so sleeping models it better.
 * cost_mode spin: the whole cost is a busy wait (a CPU-bound backend).
 *
 * Per-request and batch statistics are reported before the requests are
 * released, with the cost as the compute-infer phase.
 *
 * Built a second time as costly_relay, which also exports Nereid's
 * NRDBACKEND_InlineExecutionMaxUs (100 ms), for the scheduler's tests.
 *
 * Threads: the model state is written once in ModelInitialize and only read
 * afterwards, so instances share it without locking.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../identity/identity_core.h"
#include "nereid/backend_utils.h"

#define BACKEND "costly"
/* In sleep mode, the part of the cost that is busy-waited. */
#define SPIN_TAIL_NS 200000u
/* Upper bound of each parameter: one minute. */
#define MAX_US 60000000

typedef struct costly_model {
  int64_t max_batch_size;
  int64_t exec_us;
  int64_t row_us;
  bool spin; /* cost_mode spin */
} costly_model;

static TRITONSERVER_Error *read_settings(const json_t *config, costly_model *out) {
  costly_model m = {0, 0, 0, false};
  TRITONSERVER_Error *err = nrd_bu_config_max_batch_size(config, &m.max_batch_size);
  if (err == NULL) {
    err = nrd_bu_config_parameter_int(config, "exec_us", 0, 0, MAX_US, &m.exec_us);
  }
  if (err == NULL) {
    err = nrd_bu_config_parameter_int(config, "row_us", 0, 0, MAX_US, &m.row_us);
  }
  if (err == NULL) {
    const char *mode = nrd_bu_config_parameter(config, "cost_mode");
    if (mode == NULL || strcmp(mode, "sleep") == 0) {
      m.spin = false;
    } else if (strcmp(mode, "spin") == 0) {
      m.spin = true;
    } else {
      err = nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                              "parameter 'cost_mode' must be \"sleep\" or "
                              "\"spin\", not \"%.64s\"",
                              mode);
    }
  }
  if (err != NULL) {
    TRITONSERVER_Error *named =
        nrd_bu_error_newf(TRITONSERVER_ErrorCode(err), BACKEND ": %s", TRITONSERVER_ErrorMessage(err));
    TRITONSERVER_ErrorDelete(err);
    return named;
  }
  *out = m;
  return NULL;
}

/* Sleeps until the monotonic time 'deadline_ns' (absolute, so signals and
 * early wake-ups never lengthen the total). */
static void sleep_until(uint64_t deadline_ns) {
  struct timespec ts = {.tv_sec = (time_t)(deadline_ns / 1000000000u), .tv_nsec = (long)(deadline_ns % 1000000000u)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
  }
}

/* Spends 'cost_ns' from 'start_ns' as described at the top of the file. */
static void spend(uint64_t start_ns, uint64_t cost_ns, bool spin) {
  uint64_t deadline = start_ns + cost_ns;
  if (!spin && cost_ns > SPIN_TAIL_NS) {
    sleep_until(deadline - SPIN_TAIL_NS);
  }
  while (nrd_bu_now_ns() < deadline) {
  }
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_Initialize(TRITONBACKEND_Backend *backend) {
  (void)backend;
  return nrd_bu_api_version_check(BACKEND);
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model *model) {
  json_t *config = NULL;
  TRITONSERVER_Error *err = nrd_bu_model_config(model, &config);
  if (err != NULL) {
    return err;
  }
  costly_model settings;
  err = read_settings(config, &settings);
  json_decref(config);
  if (err != NULL) {
    return err;
  }
  return nrd_bu_model_state_set(model, &settings, sizeof settings, BACKEND);
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model *model) {
  return nrd_bu_model_state_free(model);
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance *instance) {
  return nrd_bu_instance_share_model_state(instance, BACKEND);
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance *instance) {
  /* The state is the model's (borrowed): only forget it. */
  return TRITONBACKEND_ModelInstanceSetState(instance, NULL);
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance *instance,
                                                                          TRITONBACKEND_Request **requests,
                                                                          const uint32_t request_count) {
  void *state = NULL;
  TRITONSERVER_Error *err = nrd_bu_instance_state(instance, BACKEND, &state);
  if (err != NULL) {
    /* Nothing was touched: the server keeps the requests and answers them. */
    return err;
  }
  const costly_model *m = state;
  uint64_t exec_start = nrd_bu_now_ns();

  uint64_t rows = 0;
  for (uint32_t i = 0; i < request_count; ++i) {
    if (requests[i] != NULL) {
      rows += m->max_batch_size > 0 ? nrd_bu_request_batch_size(requests[i], NULL) : 1;
    }
  }
  uint64_t cost_ns = ((uint64_t)m->exec_us + (uint64_t)m->row_us * rows) * 1000u;
  uint64_t compute_start = nrd_bu_now_ns();
  spend(compute_start, cost_ns, m->spin);
  uint64_t compute_end = nrd_bu_now_ns();

  /* Success of each request, kept until the end timestamp is known. */
  bool small[64];
  bool *ok = request_count > 64 ? malloc(request_count * sizeof *ok) : small;
  for (uint32_t i = 0; i < request_count; ++i) {
    if (requests[i] == NULL) {
      continue;
    }
    bool success = nrd_identity_respond(requests[i], TRITONSERVER_RESPONSE_COMPLETE_FINAL);
    if (ok != NULL) {
      ok[i] = success;
    } else {
      /* No memory for the flags: report and release this one now. */
      nrd_bu_error_log_and_delete(TRITONBACKEND_ModelInstanceReportStatistics(instance, requests[i], success,
                                                                              exec_start, compute_start, compute_end,
                                                                              nrd_bu_now_ns()),
                                  BACKEND ": cannot report statistics");
      nrd_bu_request_release(requests[i]);
    }
  }
  uint64_t exec_end = nrd_bu_now_ns();

  /* Batch statistics first: once the last request is released its client
   * may read the model's statistics and must find this batch counted. (When
   * the flags could not be allocated, the requests are already released.) */
  if (rows > 0) {
    nrd_bu_error_log_and_delete(TRITONBACKEND_ModelInstanceReportBatchStatistics(instance, rows, exec_start,
                                                                                 compute_start, compute_end, exec_end),
                                BACKEND ": cannot report batch statistics");
  }
  if (ok != NULL) {
    for (uint32_t i = 0; i < request_count; ++i) {
      if (requests[i] == NULL) {
        continue;
      }
      nrd_bu_error_log_and_delete(TRITONBACKEND_ModelInstanceReportStatistics(instance, requests[i], ok[i], exec_start,
                                                                              compute_start, compute_end, exec_end),
                                  BACKEND ": cannot report statistics");
      nrd_bu_request_release(requests[i]);
    }
    if (ok != small) {
      free(ok);
    }
  }
  return NULL;
}

#ifdef NRD_COSTLY_INLINE_MAX_US
/* costly_relay: Nereid's inline-execution hint (docs/core.md). Any thread. */
NRD_BACKEND_EXPORT uint32_t NRDBACKEND_InlineExecutionMaxUs(void) { return NRD_COSTLY_INLINE_MAX_US; }
#endif
