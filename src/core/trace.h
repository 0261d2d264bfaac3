/* Inference traces: TRITONSERVER_InferenceTrace and what the core reports
 * into one. A client creates a trace and hands it to
 * TRITONSERVER_ServerInferAsync with its request; the core then reports
 * REQUEST_START and QUEUE_START, the compute activities when the backend
 * reports the request's statistics, and REQUEST_END when the request is
 * released, after which the trace goes back to the client through its
 * release callback (also when InferAsync fails, as in Triton). An ensemble
 * gives each step a child trace. A backend's TRITONSERVER_InferenceTraceReportActivity
 * is a CUSTOM_ACTIVITY whose name the context holds, keyed by the timestamp
 * in decimal (as Triton keeps it). Activities
 * reach the callback only at the TIMESTAMPS level (TENSORS alone reports
 * none: tensors are not traced). */
#ifndef NRD_TRACE_H
#define NRD_TRACE_H

#include "triton/core/tritonserver.h"

/* Notes the model and request a trace follows (copied). Any thread, before
 * the trace is in flight. */
TRITONSERVER_Error *nrd_trace_attach(TRITONSERVER_InferenceTrace *t, const char *model, int64_t version,
                                     const char *request_id);

/* Reports `activity` at `ns` to the trace's activity callback when its
 * level asks for timestamps; NULL `t` is a no-op. The thread the activity
 * happens on; one at a time per trace (a request is in one place). */
void nrd_trace_report(TRITONSERVER_InferenceTrace *t, TRITONSERVER_InferenceTraceActivity activity, uint64_t ns);

/* Hands a finished trace back through its release callback (which owns it
 * from then on); NULL is a no-op. */
void nrd_trace_release(TRITONSERVER_InferenceTrace *t);

#endif
