/* TRITONSERVER_InferenceTrace* without a tracing implementation. */
#include "trace.h"

#include "error.h"

static TRITONSERVER_Error *unsupported(void)
{
  return nrd_error_new(TRITONSERVER_ERROR_UNSUPPORTED, NRD_TRACE_UNSUPPORTED_MSG);
}

const char *TRITONSERVER_InferenceTraceLevelString(TRITONSERVER_InferenceTraceLevel level)
{
  switch (level) {
    case TRITONSERVER_TRACE_LEVEL_DISABLED: return "DISABLED";
    case TRITONSERVER_TRACE_LEVEL_MIN: return "MIN";
    case TRITONSERVER_TRACE_LEVEL_MAX: return "MAX";
    case TRITONSERVER_TRACE_LEVEL_TIMESTAMPS: return "TIMESTAMPS";
    case TRITONSERVER_TRACE_LEVEL_TENSORS: return "TENSORS";
  }
  return "<unknown>";
}

const char *TRITONSERVER_InferenceTraceActivityString(TRITONSERVER_InferenceTraceActivity activity)
{
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

TRITONSERVER_Error *TRITONSERVER_InferenceTraceNew(
    TRITONSERVER_InferenceTrace **trace, TRITONSERVER_InferenceTraceLevel level, uint64_t parent_id,
    TRITONSERVER_InferenceTraceActivityFn_t activity_fn,
    TRITONSERVER_InferenceTraceReleaseFn_t release_fn, void *trace_userp)
{
  (void)level, (void)parent_id, (void)activity_fn, (void)release_fn, (void)trace_userp;
  if (trace != NULL) *trace = NULL;
  return unsupported();
}

TRITONSERVER_Error *TRITONSERVER_InferenceTraceTensorNew(
    TRITONSERVER_InferenceTrace **trace, TRITONSERVER_InferenceTraceLevel level, uint64_t parent_id,
    TRITONSERVER_InferenceTraceActivityFn_t activity_fn,
    TRITONSERVER_InferenceTraceTensorActivityFn_t tensor_activity_fn,
    TRITONSERVER_InferenceTraceReleaseFn_t release_fn, void *trace_userp)
{
  (void)level, (void)parent_id, (void)activity_fn, (void)tensor_activity_fn, (void)release_fn,
      (void)trace_userp;
  if (trace != NULL) *trace = NULL;
  return unsupported();
}

TRITONSERVER_Error *TRITONSERVER_InferenceTraceReportActivity(TRITONSERVER_InferenceTrace *trace,
                                                              uint64_t timestamp,
                                                              const char *activity_name)
{
  (void)timestamp, (void)activity_name;
  /* Untraced requests carry a NULL trace; reporting on one is a no-op. */
  return trace == NULL ? NULL : unsupported();
}

TRITONSERVER_Error *TRITONSERVER_InferenceTraceDelete(TRITONSERVER_InferenceTrace *trace)
{
  return trace == NULL ? NULL : unsupported();
}

TRITONSERVER_Error *TRITONSERVER_InferenceTraceId(TRITONSERVER_InferenceTrace *trace, uint64_t *id)
{
  (void)trace, (void)id;
  return unsupported();
}

TRITONSERVER_Error *TRITONSERVER_InferenceTraceParentId(TRITONSERVER_InferenceTrace *trace,
                                                        uint64_t *parent_id)
{
  (void)trace, (void)parent_id;
  return unsupported();
}

TRITONSERVER_Error *TRITONSERVER_InferenceTraceModelName(TRITONSERVER_InferenceTrace *trace,
                                                         const char **model_name)
{
  (void)trace, (void)model_name;
  return unsupported();
}

TRITONSERVER_Error *TRITONSERVER_InferenceTraceModelVersion(TRITONSERVER_InferenceTrace *trace,
                                                            int64_t *model_version)
{
  (void)trace, (void)model_version;
  return unsupported();
}

TRITONSERVER_Error *TRITONSERVER_InferenceTraceRequestId(TRITONSERVER_InferenceTrace *trace,
                                                         const char **request_id)
{
  (void)trace, (void)request_id;
  return unsupported();
}

TRITONSERVER_Error *TRITONSERVER_InferenceTraceSpawnChildTrace(TRITONSERVER_InferenceTrace *trace,
                                                               TRITONSERVER_InferenceTrace **child_trace)
{
  (void)trace;
  if (child_trace != NULL) *child_trace = NULL;
  return unsupported();
}

TRITONSERVER_Error *TRITONSERVER_InferenceTraceSetContext(TRITONSERVER_InferenceTrace *trace,
                                                          const char *trace_context)
{
  (void)trace, (void)trace_context;
  return unsupported();
}

TRITONSERVER_Error *TRITONSERVER_InferenceTraceContext(TRITONSERVER_InferenceTrace *trace,
                                                       const char **trace_context)
{
  (void)trace, (void)trace_context;
  return unsupported();
}
