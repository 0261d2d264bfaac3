/* Model instances: the execution thread and the TRITONBACKEND_ModelInstance*
 * API (identity, state, statistics reporting). */
#include "instance.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "error.h"
#include "exec_clock.h"
#include "log.h"
#include "warmup.h"
#include "message.h"
#include "model.h"
#include "rate_limiter.h"
#include "request.h"
#include "response.h"
#include "server.h"
#include "stats.h"
#include "trace.h"

/* Most executions carry few requests; bigger batches use the heap. */
#define NRD_BATCH_MAX 1024

TRITONBACKEND_ModelInstance *nrd_instance_new(TRITONBACKEND_Model *model, const char *name, const char *group_name,
                                              TRITONSERVER_InstanceGroupKind kind, int32_t device_id, bool passive) {
  TRITONBACKEND_ModelInstance *i = calloc(1, sizeof(*i));
  if (!i) return NULL;
  i->model = model;
  i->name = strdup(name);
  i->group_name = strdup(group_name);
  if (!i->name || !i->group_name) {
    free(i->name);
    free(i->group_name);
    free(i);
    return NULL;
  }
  i->kind = kind;
  i->device_id = device_id;
  i->passive = passive;
  /* Its GPU's metric series exist from now on, at 0, as Triton's reporters. */
  if (kind == TRITONSERVER_INSTANCEGROUPKIND_GPU) nrd_stats_device_add(&model->stats, device_id);
  return i;
}

TRITONSERVER_Error *nrd_instance_init(TRITONBACKEND_ModelInstance *inst) {
  TRITONBACKEND_Backend *b = inst->model->backend;
  if (b->inst_init) {
    TRITONSERVER_Error *e = b->inst_init(inst);
    if (e) return e;
  }
  inst->initialized = true;
  return NULL;
}

void nrd_instance_execute(TRITONBACKEND_ModelInstance *inst, TRITONSERVER_InferenceRequest **reqs, uint32_t n) {
  TRITONBACKEND_Model *m = inst->model;
  for (uint32_t i = 0; i < n; i++) {
    nrd_request_pending_done(reqs[i]); /* executing now, as Triton counts */
    if (reqs[i]->trace) nrd_request_trace_inputs(reqs[i], TRITONSERVER_TRACE_TENSOR_BACKEND_INPUT);
  }
  /* A backend that exports NRDBACKEND_ModelInstanceExecuteInline learns
   * that its caller waits (it may spin rather than sleep, say). */
  nrd_execute_fn execute =
      m->backend->execute_inline && nrd_exec_running_inline() ? m->backend->execute_inline : m->backend->execute;
  TRITONSERVER_Error *err = execute(inst, (TRITONBACKEND_Request **)reqs, n);
  if (!err) return;
  /* The requests are ours again: answer each with the backend's error. */
  for (uint32_t i = 0; i < n; i++)
    nrd_request_fail(reqs[i], nrd_error_new(TRITONSERVER_ErrorCode(err), "%s", TRITONSERVER_ErrorMessage(err)),
                     NRD_FAIL_BACKEND);
  TRITONSERVER_ErrorDelete(err);
}

/* Instance threads run under SCHED_BATCH unless the environment says
 * NEREID_INSTANCE_THREAD_POLICY=normal. Linux then never lets a woken
 * instance thread preempt the thread that queued its work: a front-end
 * loop goes on reading and queueing requests, and the instance thread takes
 * them a batch at a time instead of forcing a context switch per request
 * (measured: 10-20% less server CPU per small HTTP request under load).
 * Wake-up latency on an idle CPU is unchanged. Threads a backend starts
 * from Execute inherit the policy. */
static bool want_batch_policy(void) {
  const char *want = getenv("NEREID_INSTANCE_THREAD_POLICY");
  if (want && strcmp(want, "normal") == 0) return false;
  if (want && strcmp(want, "batch") != 0)
    NRD_LOG_WARN("NEREID_INSTANCE_THREAD_POLICY='%s' is neither 'batch' nor 'normal': using 'batch'", want);
  return true;
}

static void *instance_main(void *arg) {
  TRITONBACKEND_ModelInstance *inst = arg;
  nrd_scheduler *s = inst->model->sched;
  nrd_exec_thread_set(true);
  /* Before the name, by which tests find the thread. */
  if (inst->sched_batch) {
    struct sched_param sp = {.sched_priority = 0};
    int rc = pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
    if (rc) NRD_LOG_WARN("instance '%s': cannot run under SCHED_BATCH: %s", inst->name, strerror(rc));
  }
  char tname[16];
  snprintf(tname, sizeof tname, "nrd-%s", inst->name);
  pthread_setname_np(pthread_self(), tname);
  /* Timed waits (queue delays, timeouts) should end when asked, not up to
   * the default 50 us of timer slack later. */
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  /* A batch holds at most max_batch_size requests (each has >= 1 row). */
  uint32_t cap = inst->model->max_batch_size > 0 ? (uint32_t)inst->model->max_batch_size : 1;
  if (inst->warmup) {
    atomic_store(&inst->warming, true);
    TRITONSERVER_Error *e = nrd_warmup_run(inst->warmup, inst, nrd_instance_execute);
    atomic_store(&inst->warming, false);
    nrd_warmup_wait *w = inst->warmup_wait;
    pthread_mutex_lock(&w->lock);
    if (e && !w->first_err)
      w->first_err = e;
    else
      NRD_ERROR_IGNORE(e, "warmup: another instance's error is reported already");
    w->pending--;
    pthread_cond_broadcast(&w->done);
    pthread_mutex_unlock(&w->lock);
  }
  TRITONSERVER_InferenceRequest *one[1];
  TRITONSERVER_InferenceRequest **batch = malloc(cap * sizeof(*batch));
  if (!batch) batch = one, cap = 1; /* out of memory: still serve, one at a time */
  for (;;) {
    uint32_t n = s->ops->next_batch(s, inst, batch, cap);
    if (!n) break;
    /* With the rate limiter on, a batch waits here for its turn and its
     * resources, formed already, as in Triton. */
    if (inst->rl) nrd_rate_limiter_acquire(inst->model->server->limiter, inst->rl);
    nrd_instance_execute(inst, batch, n);
    if (inst->rl) nrd_rate_limiter_release(inst->model->server->limiter, inst->rl);
  }
  if (batch != one) free(batch);
  return NULL;
}

TRITONSERVER_Error *nrd_instance_start(TRITONBACKEND_ModelInstance *inst) {
  if (inst->passive) return NULL; /* passive instances are loaded but never scheduled */
  /* Read here, not in the thread: the environment may change meanwhile
   * (and pthread attributes cannot carry SCHED_BATCH). */
  inst->sched_batch = want_batch_policy();
  int rc = pthread_create(&inst->thread, NULL, instance_main, inst);
  if (rc)
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "cannot start thread for instance '%s': %s", inst->name,
                         strerror(rc));
  inst->thread_started = true;
  return NULL;
}

void nrd_instance_join(TRITONBACKEND_ModelInstance *inst) {
  if (inst->thread_started) pthread_join(inst->thread, NULL);
  inst->thread_started = false;
}

void nrd_instance_finalize_and_free(TRITONBACKEND_ModelInstance *inst) {
  TRITONBACKEND_Backend *b = inst->model->backend;
  if (inst->initialized && b->inst_fini) {
    TRITONSERVER_Error *e = b->inst_fini(inst);
    if (e) {
      NRD_LOG_ERROR("instance '%s' of model '%s' failed to finalize: %s", inst->name, inst->model->name,
                    TRITONSERVER_ErrorMessage(e));
      TRITONSERVER_ErrorDelete(e);
    }
  }
  if (inst->host_policy) TRITONSERVER_MessageDelete(inst->host_policy);
  if (inst->rl) nrd_rate_limiter_unregister(inst->model->server->limiter, inst->rl);
  for (uint32_t i = 0; i < inst->n_profiles; i++) free(inst->profiles[i]);
  free(inst->profiles);
  free(inst->name);
  free(inst->group_name);
  free(inst->host_policy_name);
  free(inst);
}

/* ------------------------------------------------------------ public API */

TRITONSERVER_Error *TRITONBACKEND_ModelInstanceName(TRITONBACKEND_ModelInstance *instance, const char **name) {
  NRD_ARG_CHECK(instance && name, "instance and name must not be NULL");
  *name = instance->name;
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ModelInstanceKind(TRITONBACKEND_ModelInstance *instance,
                                                    TRITONSERVER_InstanceGroupKind *kind) {
  NRD_ARG_CHECK(instance && kind, "instance and kind must not be NULL");
  *kind = instance->kind;
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ModelInstanceDeviceId(TRITONBACKEND_ModelInstance *instance, int32_t *device_id) {
  NRD_ARG_CHECK(instance && device_id, "instance and device id must not be NULL");
  *device_id = instance->device_id;
  return NULL;
}

/* The message is owned by the instance and lives as long as it: its policy
 * name with the settings --host-policy gave that name (string values). */
TRITONSERVER_Error *TRITONBACKEND_ModelInstanceHostPolicy(TRITONBACKEND_ModelInstance *instance,
                                                          TRITONSERVER_Message **host_policy) {
  NRD_ARG_CHECK(instance && host_policy, "instance and host policy must not be NULL");
  if (!instance->host_policy) {
    const char *name = instance->host_policy_name ? instance->host_policy_name : "cpu";
    json_t *settings = json_object_get(instance->model->server->host_policies, name);
    instance->host_policy =
        nrd_message_from_json(settings ? json_pack("{s:O}", name, settings) : json_pack("{s:{}}", name));
    if (!instance->host_policy) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  }
  *host_policy = instance->host_policy;
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ModelInstanceIsPassive(TRITONBACKEND_ModelInstance *instance, bool *is_passive) {
  NRD_ARG_CHECK(instance && is_passive, "instance and result must not be NULL");
  *is_passive = instance->passive;
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ModelInstanceProfileCount(TRITONBACKEND_ModelInstance *instance, uint32_t *count) {
  NRD_ARG_CHECK(instance && count, "instance and count must not be NULL");
  *count = instance->n_profiles;
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ModelInstanceProfileName(TRITONBACKEND_ModelInstance *instance, const uint32_t index,
                                                           const char **profile_name) {
  NRD_ARG_CHECK(instance && profile_name, "instance and name must not be NULL");
  if (index >= instance->n_profiles)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "profile index %u is out of range (%u profiles)", index,
                         instance->n_profiles);
  *profile_name = instance->profiles[index];
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ModelInstanceSecondaryDeviceCount(TRITONBACKEND_ModelInstance *instance,
                                                                    uint32_t *count) {
  NRD_ARG_CHECK(instance && count, "instance and count must not be NULL");
  *count = 0; /* secondary devices only exist on GPU builds */
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ModelInstanceSecondaryDeviceProperties(TRITONBACKEND_ModelInstance *instance,
                                                                         uint32_t index, const char **kind,
                                                                         int64_t *id) {
  (void)kind;
  (void)id;
  NRD_ARG_CHECK(instance, "instance must not be NULL");
  return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                       "secondary device index %u is out of range (instance '%s' has none)", index, instance->name);
}

TRITONSERVER_Error *TRITONBACKEND_ModelInstanceModel(TRITONBACKEND_ModelInstance *instance,
                                                     TRITONBACKEND_Model **model) {
  NRD_ARG_CHECK(instance && model, "instance and model must not be NULL");
  *model = instance->model;
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ModelInstanceState(TRITONBACKEND_ModelInstance *instance, void **state) {
  NRD_ARG_CHECK(instance && state, "instance and state must not be NULL");
  *state = instance->state;
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ModelInstanceSetState(TRITONBACKEND_ModelInstance *instance, void *state) {
  NRD_ARG_CHECK(instance, "instance must not be NULL");
  instance->state = state;
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ModelInstanceReportMemoryUsage(TRITONBACKEND_ModelInstance *instance,
                                                                 TRITONSERVER_BufferAttributes **usage,
                                                                 uint32_t usage_size) {
  NRD_ARG_CHECK(instance, "instance must not be NULL");
  return nrd_stats_memory_report(&instance->model->stats, instance, usage, usage_size);
}

/* The device whose gpu_uuid series count what `instance` reports: its GPU
 * for KIND_GPU, none (-1) otherwise, as Triton's instance reporters. */
static int32_t metric_device(const TRITONBACKEND_ModelInstance *instance) {
  return instance->kind == TRITONSERVER_INSTANCEGROUPKIND_GPU ? instance->device_id : -1;
}

TRITONSERVER_Error *TRITONBACKEND_ModelInstanceReportStatistics(TRITONBACKEND_ModelInstance *instance,
                                                                TRITONBACKEND_Request *request, const bool success,
                                                                const uint64_t exec_start_ns,
                                                                const uint64_t compute_start_ns,
                                                                const uint64_t compute_end_ns,
                                                                const uint64_t exec_end_ns) {
  NRD_ARG_CHECK(instance && request, "instance and request must not be NULL");
  TRITONSERVER_InferenceRequest *r = (TRITONSERVER_InferenceRequest *)request;
  if (r->no_stats) return NULL; /* padding or warmup: Triton counts none of it */
  if (r->trace) {
    /* Triton's compute activities are the backend's execution bounds. */
    nrd_trace_report(r->trace, TRITONSERVER_TRACE_COMPUTE_START, exec_start_ns);
    nrd_trace_report(r->trace, TRITONSERVER_TRACE_COMPUTE_INPUT_END, compute_start_ns);
    nrd_trace_report(r->trace, TRITONSERVER_TRACE_COMPUTE_OUTPUT_START, compute_end_ns);
    nrd_trace_report(r->trace, TRITONSERVER_TRACE_COMPUTE_END, exec_end_ns);
  }
  nrd_model_stats *s = &instance->model->stats;
  int32_t gpu = metric_device(instance);
  if (success)
    nrd_stats_request_success(s, r->queue_start_ns, r->queue_start_ns, exec_start_ns, compute_start_ns, compute_end_ns,
                              exec_end_ns, gpu);
  else
    nrd_stats_request_fail(s, r->queue_start_ns, r->queue_start_ns, exec_start_ns, exec_end_ns, NRD_FAIL_BACKEND, gpu);
  return NULL;
}

TRITONSERVER_Error *
TRITONBACKEND_ModelInstanceReportBatchStatistics(TRITONBACKEND_ModelInstance *instance, const uint64_t batch_size,
                                                 const uint64_t exec_start_ns, const uint64_t compute_start_ns,
                                                 const uint64_t compute_end_ns, const uint64_t exec_end_ns) {
  NRD_ARG_CHECK(instance, "instance must not be NULL");
  if (atomic_load(&instance->warming)) return NULL; /* warmup runs are not counted */
  nrd_stats_batch(&instance->model->stats, batch_size, exec_start_ns, compute_start_ns, compute_end_ns, exec_end_ns,
                  metric_device(instance));
  return NULL;
}

/* ------------------------------------------- decoupled response statistics */

struct TRITONBACKEND_ModelInstanceResponseStatistics {
  TRITONBACKEND_ModelInstance *instance;
  TRITONBACKEND_ResponseFactory *factory;
  uint64_t response_start, compute_output_start, response_end;
  TRITONSERVER_Error *error; /* borrowed from the backend */
};

TRITONSERVER_Error *
TRITONBACKEND_ModelInstanceResponseStatisticsNew(TRITONBACKEND_ModelInstanceResponseStatistics **response_statistics) {
  NRD_ARG_CHECK(response_statistics, "argument must not be NULL");
  *response_statistics = calloc(1, sizeof(**response_statistics));
  if (!*response_statistics) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ModelInstanceResponseStatisticsDelete(
    TRITONBACKEND_ModelInstanceResponseStatistics *response_statistics) {
  free(response_statistics);
  return NULL;
}

TRITONSERVER_Error *
TRITONBACKEND_ModelInstanceResponseStatisticsSetModelInstance(TRITONBACKEND_ModelInstanceResponseStatistics *rs,
                                                              TRITONBACKEND_ModelInstance *model_instance) {
  NRD_ARG_CHECK(rs, "response statistics must not be NULL");
  rs->instance = model_instance;
  return NULL;
}

TRITONSERVER_Error *
TRITONBACKEND_ModelInstanceResponseStatisticsSetResponseFactory(TRITONBACKEND_ModelInstanceResponseStatistics *rs,
                                                                TRITONBACKEND_ResponseFactory *response_factory) {
  NRD_ARG_CHECK(rs, "response statistics must not be NULL");
  rs->factory = response_factory;
  return NULL;
}

TRITONSERVER_Error *
TRITONBACKEND_ModelInstanceResponseStatisticsSetResponseStart(TRITONBACKEND_ModelInstanceResponseStatistics *rs,
                                                              uint64_t response_start) {
  NRD_ARG_CHECK(rs, "response statistics must not be NULL");
  rs->response_start = response_start;
  return NULL;
}

TRITONSERVER_Error *
TRITONBACKEND_ModelInstanceResponseStatisticsSetComputeOutputStart(TRITONBACKEND_ModelInstanceResponseStatistics *rs,
                                                                   uint64_t compute_output_start) {
  NRD_ARG_CHECK(rs, "response statistics must not be NULL");
  rs->compute_output_start = compute_output_start;
  return NULL;
}

TRITONSERVER_Error *
TRITONBACKEND_ModelInstanceResponseStatisticsSetResponseEnd(TRITONBACKEND_ModelInstanceResponseStatistics *rs,
                                                            uint64_t response_end) {
  NRD_ARG_CHECK(rs, "response statistics must not be NULL");
  rs->response_end = response_end;
  return NULL;
}

TRITONSERVER_Error *
TRITONBACKEND_ModelInstanceResponseStatisticsSetError(TRITONBACKEND_ModelInstanceResponseStatistics *rs,
                                                      TRITONSERVER_Error *error) {
  NRD_ARG_CHECK(rs, "response statistics must not be NULL");
  rs->error = error;
  return NULL;
}

TRITONSERVER_Error *
TRITONBACKEND_ModelInstanceReportResponseStatistics(const TRITONBACKEND_ModelInstanceResponseStatistics *rs) {
  NRD_ARG_CHECK(rs && rs->instance && rs->factory, "response statistics need a model instance and a response factory");
  nrd_delivery *d = rs->factory->delivery;
  if (d->no_stats) return NULL;
  /* Triton's order: the index is taken, then the timestamps are checked. */
  unsigned idx = atomic_fetch_add(&d->responses_reported, 1);
  nrd_response_kind kind = NRD_RESPONSE_FAIL;
  if (!rs->error)
    kind = rs->compute_output_start > 0 ? NRD_RESPONSE_SUCCESS : NRD_RESPONSE_EMPTY;
  else if (TRITONSERVER_ErrorCode(rs->error) == TRITONSERVER_ERROR_CANCELLED)
    kind = NRD_RESPONSE_CANCEL;
  bool with_output = rs->compute_output_start > 0 && (kind == NRD_RESPONSE_SUCCESS || kind == NRD_RESPONSE_FAIL);
  if (with_output && rs->response_start > rs->compute_output_start)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "Response start cannot happen after compute output start");
  if (with_output && rs->compute_output_start > rs->response_end)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "Compute output start cannot happen after response end");
  if (!with_output && rs->response_start > rs->response_end)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "Response start cannot happen after response end");
  nrd_stats_response(&rs->instance->model->stats, idx, rs->response_start, rs->compute_output_start, rs->response_end,
                     kind);
  return NULL;
}
