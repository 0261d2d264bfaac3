/*
 * repeat backend (decoupled, or not, as Triton's): the behaviour of Triton's
 * repeat example.
 *
 * A request carries IN = int32[N], DELAY = uint32[N] and WAIT = uint32[1].
 * For each element i, after sleeping DELAY[i] ms, the backend sends one
 * response with OUT = int32[1] holding IN[i] and IDX = uint32[1] holding i;
 * after the last element it waits WAIT ms more and ends the request with a
 * flags-only FINAL (TRITONBACKEND_ResponseFactorySendFlags). N = 0 gives only
 * the final flag (after WAIT ms). IN and DELAY of different lengths, a WAIT
 * that is not exactly one value, or wrong datatypes give one error response
 * carrying FINAL. A cancelled request stops early: the backend notices within
 * REPEAT_CANCEL_POLL_MS and sends one CANCELLED error response carrying FINAL
 * instead of the remaining responses.
 *
 * Execute returns at once: each request becomes a job (a response factory
 * and copies of IN and DELAY), its statistics are reported, it is released,
 * and only then are the jobs handed to the instance's worker thread. The
 * worker keeps every job of the instance in a list with the time its next
 * step is due and always runs the earliest, so the responses of concurrent
 * requests on one instance interleave by time. ModelInstanceFinalize lets
 * the worker finish every job (delays included) and joins it, so no response
 * is lost at unload.
 *
 * Threads: the job list and 'stopping' are guarded by the instance's mutex;
 * a job taken off the list is used by the worker alone until it is put back
 * or freed. The model sets no model state.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nereid/backend_utils.h"

/* Longest the worker sleeps without looking for cancelled requests. */
#define REPEAT_CANCEL_POLL_MS 10

typedef struct repeat_job {
  struct repeat_job *next;
  TRITONBACKEND_ResponseFactory *factory;
  int32_t *in; /* IN values, 'count' of them (NULL when 0) */
  uint32_t *delay; /* DELAY values in ms, 'count' of them */
  uint32_t count; /* N */
  uint32_t wait_ms; /* WAIT: pause between the last response and FINAL */
  uint32_t next_idx; /* next element to send; == count: the FINAL is next */
  uint64_t due_ns; /* monotonic time the next step is due */
} repeat_job;

typedef struct repeat_instance {
  pthread_mutex_t mu;
  pthread_cond_t cv; /* signalled when jobs arrive or at stop */
  repeat_job *jobs; /* guarded by mu; unordered */
  bool stopping; /* guarded by mu */
  pthread_t worker;
} repeat_instance;

/* ---------------------------------------------------------- configuration */

/* Checks that the model configuration has tensor 'name' of data type
 * 'type' (a config name such as "TYPE_UINT32"). */
static TRITONSERVER_Error *check_tensor(const json_t *config, const char *section, const char *name, const char *type) {
  const json_t *t = nrd_bu_config_tensor(config, section, name);
  if (t == NULL) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             "repeat: model configuration needs an %s named "
                             "'%s' of %s",
                             section, name, type);
  }
  const char *got = json_string_value(json_object_get(t, "data_type"));
  if (got == NULL || strcmp(got, type) != 0) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "repeat: %s '%s' must be %s, got %s", section, name, type,
                             got != NULL ? got : "(none)");
  }
  return NULL;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_Initialize(TRITONBACKEND_Backend *backend) {
  (void)backend;
  return nrd_bu_api_version_check("repeat");
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model *model) {
  json_t *config = NULL;
  TRITONSERVER_Error *err = nrd_bu_model_config(model, &config);
  if (err != NULL) {
    return err;
  }
  const char *name = NULL;
  if (TRITONBACKEND_ModelName(model, &name) != NULL || name == NULL) {
    name = "?";
  }
  /* Like Triton's repeat, any transaction policy: a model that is not
   * decoupled answers a one-element IN with one response and the final
   * flag sent apart, which the front ends merge (Triton's QA,
   * L0_decoupled NonDecoupledTest); more responses are the core's error. */
  int64_t max_batch = 0;
  if (err == NULL) {
    err = nrd_bu_config_max_batch_size(config, &max_batch);
  }
  if (err == NULL && max_batch != 0) {
    err = nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                            "repeat: model '%s' must not batch: set "
                            "max_batch_size: 0 (got %" PRId64 ")",
                            name, max_batch);
  }
  if (err == NULL) {
    err = check_tensor(config, "input", "IN", "TYPE_INT32");
  }
  if (err == NULL) {
    err = check_tensor(config, "input", "DELAY", "TYPE_UINT32");
  }
  if (err == NULL) {
    err = check_tensor(config, "input", "WAIT", "TYPE_UINT32");
  }
  if (err == NULL) {
    err = check_tensor(config, "output", "OUT", "TYPE_INT32");
  }
  if (err == NULL) {
    err = check_tensor(config, "output", "IDX", "TYPE_UINT32");
  }
  json_decref(config);
  return err;
}

/* ------------------------------------------------------------------ jobs */

static void job_free(repeat_job *job) {
  free(job->in);
  free(job->delay);
  free(job);
}

/* Creates output 'name' (one element of 'size' bytes) on 'response' and
 * copies 'value' into it. */
static TRITONSERVER_Error *set_scalar_output(TRITONBACKEND_Response *response, const char *name,
                                             TRITONSERVER_DataType datatype, const void *value, size_t size) {
  TRITONBACKEND_Output *output = NULL;
  const int64_t shape[1] = {1};
  TRITONSERVER_Error *err = TRITONBACKEND_ResponseOutput(response, &output, name, datatype, shape, 1);
  if (err != NULL) {
    return err;
  }
  void *dst = NULL;
  TRITONSERVER_MemoryType mem = TRITONSERVER_MEMORY_CPU;
  int64_t mem_id = 0;
  err = TRITONBACKEND_OutputBuffer(output, &dst, size, &mem, &mem_id);
  if (err != NULL) {
    return err;
  }
  if (dst == NULL || (mem != TRITONSERVER_MEMORY_CPU && mem != TRITONSERVER_MEMORY_CPU_PINNED)) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_UNSUPPORTED, "repeat: output '%s': buffer is not in CPU memory", name);
  }
  memcpy(dst, value, size);
  return NULL;
}

/* Sends the response for element 'job->next_idx'. Returns false when the
 * request was ended instead (an error response carrying FINAL was sent or
 * nothing more can be sent). */
static bool job_send_element(repeat_job *job) {
  TRITONBACKEND_Response *response = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ResponseNewFromFactory(&response, job->factory);
  if (err != NULL) {
    nrd_bu_error_log_and_delete(err, "repeat: cannot create response");
    return false;
  }
  uint32_t idx = job->next_idx;
  err = set_scalar_output(response, "OUT", TRITONSERVER_TYPE_INT32, &job->in[idx], sizeof job->in[idx]);
  if (err == NULL) {
    err = set_scalar_output(response, "IDX", TRITONSERVER_TYPE_UINT32, &idx, sizeof idx);
  }
  /* A failed element ends the request with that error. */
  uint32_t flags = (err != NULL) ? TRITONSERVER_RESPONSE_COMPLETE_FINAL : 0;
  TRITONSERVER_Error *send_err = TRITONBACKEND_ResponseSend(response, flags, err);
  bool ok = (err == NULL && send_err == NULL);
  if (err != NULL) {
    TRITONSERVER_ErrorDelete(err);
  }
  nrd_bu_error_log_and_delete(send_err, "repeat: cannot send response");
  return ok;
}

/* Ends a cancelled request with a CANCELLED error response carrying FINAL. */
static void job_send_cancelled(repeat_job *job) {
  TRITONBACKEND_Response *response = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ResponseNewFromFactory(&response, job->factory);
  if (err != NULL) {
    nrd_bu_error_log_and_delete(err, "repeat: cannot create response");
    return;
  }
  TRITONSERVER_Error *cancel = nrd_bu_error_newf(TRITONSERVER_ERROR_CANCELLED,
                                                 "repeat: request cancelled after %" PRIu32 " of %" PRIu32 " responses",
                                                 job->next_idx, job->count);
  nrd_bu_error_log_and_delete(TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, cancel),
                              "repeat: cannot send response");
  TRITONSERVER_ErrorDelete(cancel);
}

static bool job_cancelled(const repeat_job *job) {
  bool cancelled = false;
  TRITONSERVER_Error *err = TRITONBACKEND_ResponseFactoryIsCancelled(job->factory, &cancelled);
  if (err != NULL) {
    TRITONSERVER_ErrorDelete(err);
    return false;
  }
  return cancelled;
}

/* Runs the step of 'job' that is due. Returns true when the job goes on
 * (its due time was advanced), false when it is over: the request was ended
 * and the factory deleted; the caller frees the job. Worker thread only. */
static bool job_step(repeat_job *job, bool cancelled) {
  bool more = true;
  if (cancelled) {
    job_send_cancelled(job);
    more = false;
  } else if (job->next_idx < job->count) {
    if (job_send_element(job)) {
      job->next_idx++;
      uint64_t pause_ms = (job->next_idx < job->count) ? job->delay[job->next_idx] : job->wait_ms;
      job->due_ns = nrd_bu_now_ns() + pause_ms * 1000000u;
      return true;
    }
    more = false; /* already ended with an error, or cannot send */
  } else {
    nrd_bu_error_log_and_delete(
        TRITONBACKEND_ResponseFactorySendFlags(job->factory, TRITONSERVER_RESPONSE_COMPLETE_FINAL),
        "repeat: cannot send final flag");
    more = false;
  }
  nrd_bu_error_log_and_delete(TRITONBACKEND_ResponseFactoryDelete(job->factory),
                              "repeat: cannot delete response factory");
  job->factory = NULL;
  return more;
}

/* ---------------------------------------------------------------- worker */

static struct timespec monotonic_at(uint64_t ns) {
  struct timespec ts;
  ts.tv_sec = (time_t)(ns / 1000000000u);
  ts.tv_nsec = (long)(ns % 1000000000u);
  return ts;
}

/* Takes the job to run next off the list: a cancelled job at once, else the
 * one due earliest once its time has come. Waits (at most
 * REPEAT_CANCEL_POLL_MS at a time, so cancellations are seen) while nothing
 * is ready. Returns NULL when stopping and the list is empty. Called with
 * s->mu held; returns with it held. */
static repeat_job *take_next(repeat_instance *s, bool *cancelled) {
  for (;;) {
    if (s->jobs == NULL) {
      if (s->stopping) {
        return NULL;
      }
      pthread_cond_wait(&s->cv, &s->mu);
      continue;
    }
    repeat_job **pick = NULL;
    for (repeat_job **p = &s->jobs; *p != NULL; p = &(*p)->next) {
      if (job_cancelled(*p)) {
        pick = p;
        *cancelled = true;
        break;
      }
      if (pick == NULL || (*p)->due_ns < (*pick)->due_ns) {
        pick = p;
      }
    }
    uint64_t now = nrd_bu_now_ns();
    if (*cancelled || (*pick)->due_ns <= now) {
      repeat_job *job = *pick;
      *pick = job->next;
      job->next = NULL;
      return job;
    }
    uint64_t until = (*pick)->due_ns;
    uint64_t poll = now + (uint64_t)REPEAT_CANCEL_POLL_MS * 1000000u;
    struct timespec ts = monotonic_at(until < poll ? until : poll);
    int rc = pthread_cond_timedwait(&s->cv, &s->mu, &ts);
    (void)rc; /* ETIMEDOUT or a wake-up: look again either way */
  }
}

static void *worker_main(void *arg) {
  repeat_instance *s = arg;
  pthread_mutex_lock(&s->mu);
  for (;;) {
    bool cancelled = false;
    repeat_job *job = take_next(s, &cancelled);
    if (job == NULL) {
      break; /* stopping and every job is done */
    }
    pthread_mutex_unlock(&s->mu);
    bool more = job_step(job, cancelled);
    pthread_mutex_lock(&s->mu);
    if (more) {
      job->next = s->jobs;
      s->jobs = job;
    } else {
      job_free(job);
    }
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

/* Tells the worker to stop, waits until it has finished every job, then
 * frees 's'. Thread: the instance's initialize/finalize caller. */
static void instance_stop(repeat_instance *s) {
  pthread_mutex_lock(&s->mu);
  s->stopping = true;
  pthread_cond_signal(&s->cv);
  pthread_mutex_unlock(&s->mu);
  pthread_join(s->worker, NULL);
  pthread_cond_destroy(&s->cv);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance *instance) {
  repeat_instance *s = calloc(1, sizeof *s);
  if (s == NULL) {
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, "repeat: out of memory");
  }
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC); /* as nrd_bu_now_ns */
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, &attr);
  pthread_condattr_destroy(&attr);
  int rc = pthread_create(&s->worker, NULL, worker_main, s);
  if (rc != 0) {
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
    return nrd_bu_error_newf(TRITONSERVER_ERROR_UNAVAILABLE, "repeat: cannot start worker thread (error %d)", rc);
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
  repeat_instance *s = state;
  if (s == NULL) {
    return NULL;
  }
  instance_stop(s);
  return TRITONBACKEND_ModelInstanceSetState(instance, NULL);
}

/* -------------------------------------------------------------- requests */

/* Reads input 'name' of 'request' into 'out', checking its datatype; the
 * error names the input. On failure 'out' holds nothing to release. */
static TRITONSERVER_Error *read_input(TRITONBACKEND_Request *request, const char *name, TRITONSERVER_DataType datatype,
                                      nrd_bu_tensor *out) {
  TRITONSERVER_Error *err = nrd_bu_request_input(request, name, out);
  if (err != NULL) {
    TRITONSERVER_Error *named =
        nrd_bu_error_newf(TRITONSERVER_ErrorCode(err), "repeat: %s", TRITONSERVER_ErrorMessage(err));
    TRITONSERVER_ErrorDelete(err);
    return named;
  }
  if (out->datatype != datatype) {
    err = nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "repeat: input '%s' must be %s, got %s", name,
                            TRITONSERVER_DataTypeString(datatype), TRITONSERVER_DataTypeString(out->datatype));
    nrd_bu_tensor_release(out);
  }
  return err;
}

/* Builds a job from IN, DELAY and WAIT of 'request' (without its factory).
 * On failure '*job_out' is NULL. */
static TRITONSERVER_Error *job_from_request(TRITONBACKEND_Request *request, repeat_job **job_out) {
  *job_out = NULL;
  nrd_bu_tensor in = {0}, delay = {0}, wait = {0};
  repeat_job *job = NULL;
  TRITONSERVER_Error *err = read_input(request, "IN", TRITONSERVER_TYPE_INT32, &in);
  if (err == NULL) {
    err = read_input(request, "DELAY", TRITONSERVER_TYPE_UINT32, &delay);
  }
  if (err == NULL) {
    err = read_input(request, "WAIT", TRITONSERVER_TYPE_UINT32, &wait);
  }
  uint64_t n = in.byte_size / sizeof(int32_t);
  if (err == NULL && delay.byte_size / sizeof(uint32_t) != n) {
    err = nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                            "repeat: inputs 'IN' and 'DELAY' must have the "
                            "same number of elements, got %" PRIu64 " and %" PRIu64,
                            n, delay.byte_size / sizeof(uint32_t));
  }
  if (err == NULL && wait.byte_size != sizeof(uint32_t)) {
    err = nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                            "repeat: input 'WAIT' must hold exactly one "
                            "UINT32 value, got %" PRIu64 " bytes",
                            wait.byte_size);
  }
  if (err == NULL && n > UINT32_MAX) {
    err = nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                            "repeat: input 'IN' has too many elements "
                            "(%" PRIu64 ")",
                            n);
  }
  if (err == NULL) {
    job = calloc(1, sizeof *job);
    if (job != NULL && n > 0) {
      job->in = malloc(n * sizeof(int32_t));
      job->delay = malloc(n * sizeof(uint32_t));
    }
    if (job == NULL || (n > 0 && (job->in == NULL || job->delay == NULL))) {
      err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, "repeat: out of memory");
    }
  }
  if (err == NULL) {
    job->count = (uint32_t)n;
    if (n > 0) {
      memcpy(job->in, in.data, n * sizeof(int32_t));
      memcpy(job->delay, delay.data, n * sizeof(uint32_t));
    }
    memcpy(&job->wait_ms, wait.data, sizeof job->wait_ms);
    *job_out = job;
  } else if (job != NULL) {
    job_free(job);
  }
  nrd_bu_tensor_release(&in);
  nrd_bu_tensor_release(&delay);
  nrd_bu_tensor_release(&wait);
  return err;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance *instance,
                                                                          TRITONBACKEND_Request **requests,
                                                                          const uint32_t request_count) {
  void *state = NULL;
  TRITONSERVER_Error *err = nrd_bu_instance_state(instance, "repeat", &state);
  if (err != NULL) {
    return err;
  }
  repeat_instance *s = state;
  uint64_t exec_start = nrd_bu_now_ns();
  uint32_t accepted = 0;
  repeat_job *batch = NULL;
  for (uint32_t r = 0; r < request_count; ++r) {
    TRITONBACKEND_Request *request = requests[r];
    if (request == NULL) {
      continue;
    }
    uint64_t start = nrd_bu_now_ns();
    repeat_job *job = NULL;
    err = job_from_request(request, &job);
    if (err == NULL) {
      err = TRITONBACKEND_ResponseFactoryNew(&job->factory, request);
    }
    uint64_t end = nrd_bu_now_ns();
    /* Statistics need the request, and come before any response. */
    nrd_bu_error_log_and_delete(
        TRITONBACKEND_ModelInstanceReportStatistics(instance, request, err == NULL, start, start, end, end),
        "repeat: cannot report statistics");
    if (err != NULL) {
      if (job != NULL) {
        job_free(job);
      }
      nrd_bu_request_respond_error(request, err);
      TRITONSERVER_ErrorDelete(err);
      nrd_bu_request_release(request);
      continue;
    }
    nrd_bu_request_release(request);
    ++accepted;
    job->next = batch;
    batch = job;
  }
  uint64_t exec_end = nrd_bu_now_ns();
  if (accepted > 0) {
    nrd_bu_error_log_and_delete(TRITONBACKEND_ModelInstanceReportBatchStatistics(instance, accepted, exec_start,
                                                                                 exec_start, exec_end, exec_end),
                                "repeat: cannot report batch statistics");
    /* Hand the jobs to the worker only now, so every statistic of this
     * execution is recorded before any response can reach a client. The
     * first delay of each request counts from here. */
    uint64_t now = nrd_bu_now_ns();
    pthread_mutex_lock(&s->mu);
    while (batch != NULL) {
      repeat_job *job = batch;
      batch = job->next;
      uint64_t pause_ms = job->count > 0 ? job->delay[0] : job->wait_ms;
      job->due_ns = now + pause_ms * 1000000u;
      job->next = s->jobs;
      s->jobs = job;
    }
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
  }
  return NULL;
}
