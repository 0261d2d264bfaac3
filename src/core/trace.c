/* Inference traces (trace.h): the object behind TRITONSERVER_InferenceTrace
 * and the core's reports into it. */
#include "trace.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "error.h"

struct TRITONSERVER_InferenceTrace {
  TRITONSERVER_InferenceTraceLevel level;
  uint64_t id, parent_id;
  TRITONSERVER_InferenceTraceActivityFn_t activity_fn;
  TRITONSERVER_InferenceTraceTensorActivityFn_t tensor_fn;
  TRITONSERVER_InferenceTraceReleaseFn_t release_fn;
  void *userp;
  char *model_name; /* set when the trace enters the core */
  int64_t model_version;
  char *request_id;
  char *context;
};

/* Ids are unique in the process and start at 1 (0 means "no parent"). */
static atomic_uint_fast64_t next_trace_id = 1;

const char *TRITONSERVER_InferenceTraceLevelString(TRITONSERVER_InferenceTraceLevel level) {
  switch (level) {
    case TRITONSERVER_TRACE_LEVEL_DISABLED: return "DISABLED";
    case TRITONSERVER_TRACE_LEVEL_MIN: return "MIN";
    case TRITONSERVER_TRACE_LEVEL_MAX: return "MAX";
    case TRITONSERVER_TRACE_LEVEL_TIMESTAMPS: return "TIMESTAMPS";
    case TRITONSERVER_TRACE_LEVEL_TENSORS: return "TENSORS";
  }
  return "<unknown>";
}

const char *TRITONSERVER_InferenceTraceActivityString(TRITONSERVER_InferenceTraceActivity activity) {
  switch (activity) {
    case TRITONSERVER_TRACE_REQUEST_START: return "REQUEST_START";
    case TRITONSERVER_TRACE_QUEUE_START: return "QUEUE_START";
    case TRITONSERVER_TRACE_COMPUTE_START: return "COMPUTE_START";
    case TRITONSERVER_TRACE_COMPUTE_INPUT_END: return "COMPUTE_INPUT_END";
    case TRITONSERVER_TRACE_COMPUTE_OUTPUT_START: return "COMPUTE_OUTPUT_START";
    case TRITONSERVER_TRACE_COMPUTE_END: return "COMPUTE_END";
    case TRITONSERVER_TRACE_REQUEST_END: return "REQUEST_END";
    case TRITONSERVER_TRACE_TENSOR_QUEUE_INPUT: return "TENSOR_QUEUE_INPUT";
    case TRITONSERVER_TRACE_TENSOR_BACKEND_INPUT: return "TENSOR_BACKEND_INPUT";
    case TRITONSERVER_TRACE_TENSOR_BACKEND_OUTPUT: return "TENSOR_BACKEND_OUTPUT";
    case TRITONSERVER_TRACE_CUSTOM_ACTIVITY: return "CUSTOM_ACTIVITY";
  }
  return "<unknown>";
}

static TRITONSERVER_Error *trace_new(TRITONSERVER_InferenceTrace **trace, TRITONSERVER_InferenceTraceLevel level,
                                     uint64_t parent_id, TRITONSERVER_InferenceTraceActivityFn_t activity_fn,
                                     TRITONSERVER_InferenceTraceTensorActivityFn_t tensor_fn,
                                     TRITONSERVER_InferenceTraceReleaseFn_t release_fn, void *userp) {
  if (trace == NULL) return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "trace must not be NULL");
  *trace = NULL;
  TRITONSERVER_InferenceTrace *t = calloc(1, sizeof(*t));
  if (t == NULL) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  t->level = level;
  t->id = atomic_fetch_add(&next_trace_id, 1);
  t->parent_id = parent_id;
  t->activity_fn = activity_fn;
  t->tensor_fn = tensor_fn;
  t->release_fn = release_fn;
  t->userp = userp;
  *trace = t;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_InferenceTraceNew(TRITONSERVER_InferenceTrace **trace,
                                                   TRITONSERVER_InferenceTraceLevel level, uint64_t parent_id,
                                                   TRITONSERVER_InferenceTraceActivityFn_t activity_fn,
                                                   TRITONSERVER_InferenceTraceReleaseFn_t release_fn,
                                                   void *trace_userp) {
  return trace_new(trace, level, parent_id, activity_fn, NULL, release_fn, trace_userp);
}

TRITONSERVER_Error *
TRITONSERVER_InferenceTraceTensorNew(TRITONSERVER_InferenceTrace **trace, TRITONSERVER_InferenceTraceLevel level,
                                     uint64_t parent_id, TRITONSERVER_InferenceTraceActivityFn_t activity_fn,
                                     TRITONSERVER_InferenceTraceTensorActivityFn_t tensor_activity_fn,
                                     TRITONSERVER_InferenceTraceReleaseFn_t release_fn, void *trace_userp) {
  return trace_new(trace, level, parent_id, activity_fn, tensor_activity_fn, release_fn, trace_userp);
}

TRITONSERVER_Error *TRITONSERVER_InferenceTraceReportActivity(TRITONSERVER_InferenceTrace *trace, uint64_t timestamp,
                                                              const char *activity_name) {
  /* Untraced requests carry a NULL trace; reporting on one is a no-op. */
  if (trace == NULL) return NULL;
  if (activity_name == NULL) return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "activity name must not be NULL");
  /* As Triton: the name goes into the context, a JSON object keyed by the
   * timestamp, where the activity callback can look it up. */
  json_t *ctx = trace->context ? json_loads(trace->context, 0, NULL) : NULL;
  if (!json_is_object(ctx)) {
    json_decref(ctx);
    ctx = json_object();
  }
  char key[24];
  snprintf(key, sizeof key, "%" PRIu64, timestamp);
  char *text = NULL;
  if (ctx && json_object_set_new(ctx, key, json_string(activity_name)) == 0) text = json_dumps(ctx, JSON_COMPACT);
  json_decref(ctx);
  if (text == NULL) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  free(trace->context);
  trace->context = text;
  nrd_trace_report(trace, TRITONSERVER_TRACE_CUSTOM_ACTIVITY, timestamp);
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_InferenceTraceDelete(TRITONSERVER_InferenceTrace *trace) {
  if (trace == NULL) return NULL;
  free(trace->model_name);
  free(trace->request_id);
  free(trace->context);
  free(trace);
  return NULL;
}

#define TRACE_ARGS(t, out)                                                                                             \
  if ((t) == NULL || (out) == NULL)                                                                                    \
  return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "trace and result must not be NULL")

TRITONSERVER_Error *TRITONSERVER_InferenceTraceId(TRITONSERVER_InferenceTrace *trace, uint64_t *id) {
  TRACE_ARGS(trace, id);
  *id = trace->id;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_InferenceTraceParentId(TRITONSERVER_InferenceTrace *trace, uint64_t *parent_id) {
  TRACE_ARGS(trace, parent_id);
  *parent_id = trace->parent_id;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_InferenceTraceModelName(TRITONSERVER_InferenceTrace *trace, const char **model_name) {
  TRACE_ARGS(trace, model_name);
  *model_name = trace->model_name ? trace->model_name : "";
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_InferenceTraceModelVersion(TRITONSERVER_InferenceTrace *trace,
                                                            int64_t *model_version) {
  TRACE_ARGS(trace, model_version);
  *model_version = trace->model_version;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_InferenceTraceRequestId(TRITONSERVER_InferenceTrace *trace, const char **request_id) {
  TRACE_ARGS(trace, request_id);
  *request_id = trace->request_id ? trace->request_id : "";
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_InferenceTraceSpawnChildTrace(TRITONSERVER_InferenceTrace *trace,
                                                               TRITONSERVER_InferenceTrace **child_trace) {
  TRACE_ARGS(trace, child_trace);
  return trace_new(child_trace, trace->level, trace->id, trace->activity_fn, trace->tensor_fn, trace->release_fn,
                   trace->userp);
}

TRITONSERVER_Error *TRITONSERVER_InferenceTraceSetContext(TRITONSERVER_InferenceTrace *trace,
                                                          const char *trace_context) {
  TRACE_ARGS(trace, trace_context);
  char *c = strdup(trace_context);
  if (c == NULL) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  free(trace->context);
  trace->context = c;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_InferenceTraceContext(TRITONSERVER_InferenceTrace *trace, const char **trace_context) {
  TRACE_ARGS(trace, trace_context);
  *trace_context = trace->context;
  return NULL;
}

/* ------------------------------------------------------------ the core's side */

TRITONSERVER_Error *nrd_trace_attach(TRITONSERVER_InferenceTrace *t, const char *model, int64_t version,
                                     const char *request_id) {
  char *m = strdup(model), *r = strdup(request_id ? request_id : "");
  if (m == NULL || r == NULL) {
    free(m);
    free(r);
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  }
  free(t->model_name);
  free(t->request_id);
  t->model_name = m;
  t->request_id = r;
  t->model_version = version;
  return NULL;
}

void nrd_trace_report(TRITONSERVER_InferenceTrace *t, TRITONSERVER_InferenceTraceActivity activity, uint64_t ns) {
  if (t && t->activity_fn &&
      (t->level & (TRITONSERVER_TRACE_LEVEL_TIMESTAMPS | TRITONSERVER_TRACE_LEVEL_MIN | TRITONSERVER_TRACE_LEVEL_MAX)))
    t->activity_fn(t, activity, ns, t->userp);
}

bool nrd_trace_wants_tensors(const TRITONSERVER_InferenceTrace *t) {
  return t && t->tensor_fn && (t->level & TRITONSERVER_TRACE_LEVEL_TENSORS);
}

void nrd_trace_tensor(TRITONSERVER_InferenceTrace *t, TRITONSERVER_InferenceTraceActivity activity, const char *name,
                      TRITONSERVER_DataType dtype, const void *base, size_t byte_size, const int64_t *shape,
                      uint64_t dims, TRITONSERVER_MemoryType mtype, int64_t mtype_id) {
  t->tensor_fn(t, activity, name, dtype, base, byte_size, shape, dims, mtype, mtype_id, t->userp);
}

void nrd_trace_release(TRITONSERVER_InferenceTrace *t) {
  if (t && t->release_fn) t->release_fn(t, t->userp);
}
