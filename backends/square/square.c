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
 * Every response, the flags-only FINAL included, is reported to the core's
 * per-response statistics (TRITONBACKEND_ModelInstanceReportResponseStatistics),
 * as Triton's decoupled backends do.
 *
 * Threads: the job queue is guarded by the instance's mutex; the worker is
 * the only thread using a job's factory once it is queued.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "nereid/backend_utils.h"

typedef struct square_job {
  struct square_job *next;
  TRITONBACKEND_ResponseFactory *factory;
  TRITONBACKEND_ModelInstance *instance; /* for response statistics */
  int32_t n;
} square_job;

typedef struct square_instance {
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
  json_decref(config);
  return err;
}

/* One response's timings for the core's per-response statistics; an
 * output_start of 0 marks a response without outputs (the flags-only
 * FINAL). `error` stays the caller's. */
static void report_response(const square_job *job, uint64_t start, uint64_t output_start, TRITONSERVER_Error *error) {
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
    err = TRITONBACKEND_ModelInstanceResponseStatisticsSetResponseEnd(rs, nrd_bu_now_ns());
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

/* Sends the responses of one job and the final flag; frees the factory. */
static void job_run(square_job *job) {
  TRITONBACKEND_ResponseFactory *factory = job->factory;
  for (int32_t i = 0; i < job->n; ++i) {
    uint64_t start = nrd_bu_now_ns();
    bool cancelled = false;
    TRITONSERVER_Error *err = TRITONBACKEND_ResponseFactoryIsCancelled(factory, &cancelled);
    if (err != NULL) {
      TRITONSERVER_ErrorDelete(err);
      cancelled = false;
    }
    TRITONBACKEND_Response *response = NULL;
    err = TRITONBACKEND_ResponseNewFromFactory(&response, factory);
    if (err != NULL) {
      nrd_bu_error_log_and_delete(err, "square: cannot create response");
      break;
    }
    if (cancelled) {
      /* Stop early; the error response ends the request. */
      TRITONSERVER_Error *cancel = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_CANCELLED, "square: request cancelled");
      nrd_bu_error_log_and_delete(TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, cancel),
                                  "square: cannot send response");
      TRITONSERVER_ErrorDelete(cancel);
      nrd_bu_error_log_and_delete(TRITONBACKEND_ResponseFactoryDelete(factory),
                                  "square: cannot delete response factory");
      return;
    }
    uint64_t output_start = nrd_bu_now_ns();
    TRITONBACKEND_Output *output = NULL;
    const int64_t shape[1] = {1};
    err = TRITONBACKEND_ResponseOutput(response, &output, "OUT", TRITONSERVER_TYPE_INT32, shape, 1);
    void *dst = NULL;
    TRITONSERVER_MemoryType mem = TRITONSERVER_MEMORY_CPU;
    int64_t mem_id = 0;
    if (err == NULL) {
      err = TRITONBACKEND_OutputBuffer(output, &dst, sizeof(int32_t), &mem, &mem_id);
    }
    if (err == NULL && (dst == NULL || (mem != TRITONSERVER_MEMORY_CPU && mem != TRITONSERVER_MEMORY_CPU_PINNED))) {
      err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNSUPPORTED, "square: output 'OUT': buffer is not in CPU "
                                                                  "memory");
    }
    if (err == NULL) {
      memcpy(dst, &job->n, sizeof job->n);
    }
    TRITONSERVER_Error *send_err = TRITONBACKEND_ResponseSend(response, 0, err);
    bool failed = (err != NULL || send_err != NULL);
    report_response(job, start, output_start, err);
    if (err != NULL) {
      TRITONSERVER_ErrorDelete(err);
    }
    nrd_bu_error_log_and_delete(send_err, "square: cannot send response");
    if (failed) {
      break; /* the final flag below still ends the request */
    }
  }
  uint64_t final_start = nrd_bu_now_ns();
  nrd_bu_error_log_and_delete(TRITONBACKEND_ResponseFactorySendFlags(factory, TRITONSERVER_RESPONSE_COMPLETE_FINAL),
                              "square: cannot send final flag");
  report_response(job, final_start, 0, NULL);
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
