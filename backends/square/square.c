/*
 * square backend (decoupled): for a request with input IN = int32[1] holding
 * n, sends n responses each with output OUT = int32[1] holding n, then a
 * flags-only FINAL. n = 0 gives only the flags-only FINAL.
 *
 * Execute returns at once: each request is turned into a response factory
 * and a job, the request is released, and a per-instance worker thread sends
 * the responses. ModelInstanceFinalize lets the worker finish every queued
 * job and joins it, so no response is lost at unload.
 *
 * Model parameters, as Triton's square backend reads them (all optional,
 * unsigned decimal strings): CUSTOM_INFER_DELAY_NS and CUSTOM_OUTPUT_DELAY_NS
 * (sleeps before and while making each response), CUSTOM_CANCEL_DELAY_NS
 * (the sleep once a cancellation is seen), CUSTOM_FAIL_COUNT and
 * CUSTOM_EMPTY_COUNT (of n responses, the last E are empty, sending nothing,
 * and the F before them fail with "simulated failure"). A cancelled request
 * stops at the next response and ends with the final flag only.
 *
 * Every response is reported to the core's per-response statistics
 * (TRITONBACKEND_ModelInstanceReportResponseStatistics), as Triton's square
 * does: successes, failures, empties and the cancellation, not the final flag.
 *
 * Threads: the job queue is guarded by the instance's mutex; the worker is
 * the only thread using a job's factory once it is queued.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nereid/backend_utils.h"

/* The model's CUSTOM_* parameters (see the top); read once per model. */
typedef struct square_params {
  int64_t infer_delay_ns, output_delay_ns, cancel_delay_ns, fail_count, empty_count;
} square_params;

typedef struct square_job {
  struct square_job *next;
  TRITONBACKEND_ResponseFactory *factory;
  TRITONBACKEND_ModelInstance *instance; /* for response statistics */
  int32_t n;
  square_params params;
} square_job;

typedef struct square_instance {
  square_params params;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  square_job *head, *tail; /* guarded by mu */
  bool stopping; /* guarded by mu */
  pthread_t worker;
} square_instance;

/* Checks that the model configuration has tensor 'name' of TYPE_INT32. */
static TRITONSERVER_Error *check_tensor(const json_t *config, const char *section, const char *name) {
  const json_t *t = nrd_bu_config_tensor(config, section, name);
  if (t == NULL) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             "square: model configuration needs an %s named "
                             "'%s'",
                             section, name);
  }
  const char *type = json_string_value(json_object_get(t, "data_type"));
  if (type == NULL || strcmp(type, "TYPE_INT32") != 0) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "square: %s '%s' must be TYPE_INT32, got %s", section,
                             name, type != NULL ? type : "(none)");
  }
  return NULL;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_Initialize(TRITONBACKEND_Backend *backend) {
  (void)backend;
  return nrd_bu_api_version_check("square");
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model *model) {
  json_t *config = NULL;
  TRITONSERVER_Error *err = nrd_bu_model_config(model, &config);
  if (err != NULL) {
    return err;
  }
  if (!nrd_bu_config_decoupled(config)) {
    const char *name = NULL;
    if (TRITONBACKEND_ModelName(model, &name) != NULL || name == NULL) {
      name = "?";
    }
    err = nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                            "square: model '%s' must be decoupled: set "
                            "model_transaction_policy { decoupled: true } in "
                            "its config.pbtxt",
                            name);
  }
  if (err == NULL) {
    err = check_tensor(config, "input", "IN");
  }
  if (err == NULL) {
    err = check_tensor(config, "output", "OUT");
  }
  square_params *p = NULL;
  if (err == NULL && (p = calloc(1, sizeof *p)) == NULL) {
    err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, "square: out of memory");
  }
  static const char *const keys[] = {"CUSTOM_INFER_DELAY_NS", "CUSTOM_OUTPUT_DELAY_NS", "CUSTOM_CANCEL_DELAY_NS",
                                     "CUSTOM_FAIL_COUNT", "CUSTOM_EMPTY_COUNT"};
  int64_t *fields[] = {p ? &p->infer_delay_ns : NULL, p ? &p->output_delay_ns : NULL,
                       p ? &p->cancel_delay_ns : NULL, p ? &p->fail_count : NULL, p ? &p->empty_count : NULL};
  for (size_t i = 0; err == NULL && i < sizeof keys / sizeof keys[0]; i++) {
    err = nrd_bu_config_parameter_int(config, keys[i], 0, 0, INT64_MAX, fields[i]);
  }
  if (err == NULL) {
    err = TRITONBACKEND_ModelSetState(model, p);
  }
  if (err != NULL) {
    free(p);
  }
  json_decref(config);
  return err;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model *model) {
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelState(model, &state);
  free(state);
  return err;
}

static void sleep_ns(int64_t ns) {
  struct timespec t = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
  while (ns > 0 && nanosleep(&t, &t) != 0) {
  }
}

/* One response's timings for the core's per-response statistics; an
 * output_start of 0 marks a response without outputs. `error` stays the
 * caller's. */
static void report_response(const square_job *job, uint64_t start, uint64_t output_start, uint64_t end,
                            TRITONSERVER_Error *error) {
  TRITONBACKEND_ModelInstanceResponseStatistics *rs = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelInstanceResponseStatisticsNew(&rs);
  if (err == NULL) {
    err = TRITONBACKEND_ModelInstanceResponseStatisticsSetModelInstance(rs, job->instance);
  }
  if (err == NULL) {
    err = TRITONBACKEND_ModelInstanceResponseStatisticsSetResponseFactory(rs, job->factory);
  }
  if (err == NULL) {
    err = TRITONBACKEND_ModelInstanceResponseStatisticsSetResponseStart(rs, start);
  }
  if (err == NULL) {
    err = TRITONBACKEND_ModelInstanceResponseStatisticsSetComputeOutputStart(rs, output_start);
  }
  if (err == NULL) {
    err = TRITONBACKEND_ModelInstanceResponseStatisticsSetResponseEnd(rs, end);
  }
  if (err == NULL) {
    err = TRITONBACKEND_ModelInstanceResponseStatisticsSetError(rs, error);
  }
  if (err == NULL) {
    err = TRITONBACKEND_ModelInstanceReportResponseStatistics(rs);
  }
  if (rs != NULL) {
    nrd_bu_error_log_and_delete(TRITONBACKEND_ModelInstanceResponseStatisticsDelete(rs),
                                "square: cannot delete response statistics");
  }
  nrd_bu_error_log_and_delete(err, "square: cannot report response statistics");
}

/* Makes response i's output OUT = n; NULL or why not (the response stays
 * the caller's either way). */
static TRITONSERVER_Error *fill_output(TRITONBACKEND_Response *response, int32_t n) {
  TRITONBACKEND_Output *output = NULL;
  const int64_t shape[1] = {1};
  TRITONSERVER_Error *err = TRITONBACKEND_ResponseOutput(response, &output, "OUT", TRITONSERVER_TYPE_INT32, shape, 1);
  void *dst = NULL;
  TRITONSERVER_MemoryType mem = TRITONSERVER_MEMORY_CPU;
  int64_t mem_id = 0;
  if (err == NULL) {
    err = TRITONBACKEND_OutputBuffer(output, &dst, sizeof(int32_t), &mem, &mem_id);
  }
  if (err == NULL && (dst == NULL || (mem != TRITONSERVER_MEMORY_CPU && mem != TRITONSERVER_MEMORY_CPU_PINNED))) {
    err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNSUPPORTED, "square: output 'OUT': buffer is not in CPU memory");
  }
  if (err == NULL) {
    memcpy(dst, &n, sizeof n);
  }
  return err;
}

/* Sends the responses of one job and the final flag; frees the factory.
 * Response i of n succeeds, fails or is empty as the parameters say. */
static void job_run(square_job *job) {
  TRITONBACKEND_ResponseFactory *factory = job->factory;
  const square_params *p = &job->params;
  for (int32_t i = 0; i < job->n; ++i) {
    uint64_t start = nrd_bu_now_ns();
    bool cancelled = false;
    nrd_bu_error_log_and_delete(TRITONBACKEND_ResponseFactoryIsCancelled(factory, &cancelled),
                                "square: cannot read cancellation");
    sleep_ns(cancelled ? p->cancel_delay_ns : p->infer_delay_ns);
    bool empty = (int64_t)i + p->empty_count >= job->n;
    bool fail = !empty && (int64_t)i + p->fail_count + p->empty_count >= job->n;
    uint64_t output_start = 0;
    TRITONBACKEND_Response *response = NULL;
    TRITONSERVER_Error *error = NULL;
    if (!cancelled && !empty) {
      output_start = nrd_bu_now_ns();
      error = TRITONBACKEND_ResponseNewFromFactory(&response, factory);
      if (error == NULL) {
        error = fill_output(response, job->n);
      }
      sleep_ns(p->output_delay_ns);
    }
    uint64_t end = nrd_bu_now_ns();
    if (error == NULL && cancelled) {
      error = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_CANCELLED, "cancelled");
    } else if (error == NULL && fail) {
      error = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNKNOWN, "simulated failure");
    }
    if (response != NULL) {
      nrd_bu_error_log_and_delete(TRITONBACKEND_ResponseSend(response, 0, error), "square: cannot send response");
    }
    report_response(job, start, output_start, end, error);
    if (error != NULL) {
      TRITONSERVER_ErrorDelete(error);
    }
    if (cancelled) {
      break;
    }
  }
  nrd_bu_error_log_and_delete(TRITONBACKEND_ResponseFactorySendFlags(factory, TRITONSERVER_RESPONSE_COMPLETE_FINAL),
                              "square: cannot send final flag");
  nrd_bu_error_log_and_delete(TRITONBACKEND_ResponseFactoryDelete(factory), "square: cannot delete response factory");
}

static void *worker_main(void *arg) {
  square_instance *s = arg;
  for (;;) {
    pthread_mutex_lock(&s->mu);
    while (s->head == NULL && !s->stopping) {
      pthread_cond_wait(&s->cv, &s->mu);
    }
    square_job *job = s->head;
    if (job != NULL) {
      s->head = job->next;
      if (s->head == NULL) {
        s->tail = NULL;
      }
    }
    pthread_mutex_unlock(&s->mu);
    if (job == NULL) {
      return NULL; /* stopping and the queue is drained */
    }
    job_run(job);
    free(job);
  }
}

/* Tells the worker to stop, waits until it has run every queued job, then
 * frees 's'. Thread: the instance's initialize/finalize caller. */
static void instance_stop(square_instance *s) {
  pthread_mutex_lock(&s->mu);
  s->stopping = true;
  pthread_cond_signal(&s->cv);
  pthread_mutex_unlock(&s->mu);
  pthread_join(s->worker, NULL); /* the worker drains the queue first */
  pthread_cond_destroy(&s->cv);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance *instance) {
  square_instance *s = calloc(1, sizeof *s);
  if (s == NULL) {
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, "square: out of memory");
  }
  TRITONBACKEND_Model *model = NULL;
  void *params = NULL;
  TRITONSERVER_Error *perr = TRITONBACKEND_ModelInstanceModel(instance, &model);
  if (perr == NULL) {
    perr = TRITONBACKEND_ModelState(model, &params);
  }
  if (perr != NULL || params == NULL) {
    free(s);
    return perr != NULL ? perr : TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "square: model has no state");
  }
  s->params = *(const square_params *)params;
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  int rc = pthread_create(&s->worker, NULL, worker_main, s);
  if (rc != 0) {
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
    return nrd_bu_error_newf(TRITONSERVER_ERROR_UNAVAILABLE, "square: cannot start worker thread (error %d)", rc);
  }
  TRITONSERVER_Error *err = TRITONBACKEND_ModelInstanceSetState(instance, s);
  if (err != NULL) {
    instance_stop(s);
  }
  return err;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance *instance) {
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelInstanceState(instance, &state);
  if (err != NULL) {
    return err;
  }
  square_instance *s = state;
  if (s == NULL) {
    return NULL;
  }
  instance_stop(s);
  return TRITONBACKEND_ModelInstanceSetState(instance, NULL);
}

/* Reads n from input IN; the error names the input. */
static TRITONSERVER_Error *read_n(TRITONBACKEND_Request *request, int32_t *n) {
  nrd_bu_tensor in;
  TRITONSERVER_Error *err = nrd_bu_request_input(request, "IN", &in);
  if (err != NULL) {
    TRITONSERVER_Error *named =
        nrd_bu_error_newf(TRITONSERVER_ErrorCode(err), "square: %s", TRITONSERVER_ErrorMessage(err));
    TRITONSERVER_ErrorDelete(err);
    return named;
  }
  if (in.datatype != TRITONSERVER_TYPE_INT32) {
    err = nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "square: input 'IN' must be INT32, got %s",
                            TRITONSERVER_DataTypeString(in.datatype));
  } else if (in.byte_size != sizeof(int32_t)) {
    err = nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                            "square: input 'IN' must hold exactly one INT32 "
                            "value, got %" PRIu64 " bytes",
                            in.byte_size);
  } else {
    memcpy(n, in.data, sizeof *n);
    if (*n < 0) {
      err = nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "square: input 'IN' must be >= 0, got %" PRId32, *n);
    }
  }
  nrd_bu_tensor_release(&in);
  return err;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance *instance,
                                                                          TRITONBACKEND_Request **requests,
                                                                          const uint32_t request_count) {
  void *state = NULL;
  TRITONSERVER_Error *err = nrd_bu_instance_state(instance, "square", &state);
  if (err != NULL) {
    return err;
  }
  square_instance *s = state;
  uint64_t exec_start = nrd_bu_now_ns();
  uint32_t accepted = 0;
  square_job *batch_head = NULL, *batch_tail = NULL;
  for (uint32_t r = 0; r < request_count; ++r) {
    TRITONBACKEND_Request *request = requests[r];
    if (request == NULL) {
      continue;
    }
    uint64_t start = nrd_bu_now_ns();
    square_job *job = NULL;
    int32_t n = 0;
    err = read_n(request, &n);
    if (err == NULL) {
      job = calloc(1, sizeof *job);
      if (job == NULL) {
        err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, "square: out of memory");
      }
    }
    if (err == NULL) {
      job->n = n;
      job->instance = instance;
      job->params = s->params;
      err = TRITONBACKEND_ResponseFactoryNew(&job->factory, request);
    }
    uint64_t end = nrd_bu_now_ns();
    if (err != NULL) {
      free(job);
      nrd_bu_request_respond_error(request, err);
      TRITONSERVER_ErrorDelete(err);
      nrd_bu_error_log_and_delete(
          TRITONBACKEND_ModelInstanceReportStatistics(instance, request, false, start, start, end, end),
          "square: cannot report statistics");
      nrd_bu_request_release(request);
      continue;
    }
    /* Statistics need the request, so report before releasing it. */
    nrd_bu_error_log_and_delete(
        TRITONBACKEND_ModelInstanceReportStatistics(instance, request, true, start, start, end, end),
        "square: cannot report statistics");
    nrd_bu_request_release(request);
    ++accepted;
    if (batch_tail != NULL) {
      batch_tail->next = job;
    } else {
      batch_head = job;
    }
    batch_tail = job;
  }
  uint64_t exec_end = nrd_bu_now_ns();
  if (accepted > 0) {
    nrd_bu_error_log_and_delete(TRITONBACKEND_ModelInstanceReportBatchStatistics(instance, accepted, exec_start,
                                                                                 exec_start, exec_end, exec_end),
                                "square: cannot report batch statistics");
    /* Hand the jobs to the worker only now, so every statistic of this
     * execution is recorded before any response can reach a client. */
    pthread_mutex_lock(&s->mu);
    if (s->tail != NULL) {
      s->tail->next = batch_head;
    } else {
      s->head = batch_head;
    }
    s->tail = batch_tail;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
  }
  return NULL;
}
