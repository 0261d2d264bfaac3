/* Inference traces: TRITONSERVER_InferenceTrace and what the core reports
 * into one. A client creates a trace and hands it to
 * TRITONSERVER_ServerInferAsync with its request; the core then reports
 * REQUEST_START and QUEUE_START, the compute activities when the backend
 * reports the request's statistics, and REQUEST_END when the request is
 * released, after which the trace goes back to the client through its
 * release callback (also when InferAsync fails, as in Triton). An ensemble
 * gives each step a child trace. A backend's TRITONSERVER_InferenceTraceReportActivity
 * is a CUSTOM_ACTIVITY whose name the context holds, keyed by the timestamp
 * in decimal (as Triton keeps it). Activities reach the activity callback
 * at the TIMESTAMPS level; at the TENSORS level the tensor callback gets
 * the request's inputs as it is queued (TENSOR_QUEUE_INPUT) and handed to
 * the backend (TENSOR_BACKEND_INPUT), and each response's outputs as it is
 * sent (TENSOR_BACKEND_OUTPUT). A traced request's delivery keeps the trace
 * until its last response is deleted, so the release callback comes after
 * the request's release once a response is still held (as in Triton, where
 * responses share the trace). */
#ifndef NRD_TRACE_H
#define NRD_TRACE_H

#include <stdbool.h>

#include "triton/core/tritonserver.h"

/* Notes the model and request a trace follows (copied). Any thread, before
 * the trace is in flight. */
TRITONSERVER_Error *nrd_trace_attach(TRITONSERVER_InferenceTrace *t, const char *model, int64_t version,
                                     const char *request_id);

/* Reports `activity` at `ns` to the trace's activity callback when its
 * level asks for timestamps; NULL `t` is a no-op. The thread the activity
 * happens on; one at a time per trace (a request is in one place). */
void nrd_trace_report(TRITONSERVER_InferenceTrace *t, TRITONSERVER_InferenceTraceActivity activity, uint64_t ns);

/* Whether `t` (may be NULL) asks for tensors: the TENSORS level and a
 * tensor callback. Any thread. */
bool nrd_trace_wants_tensors(const TRITONSERVER_InferenceTrace *t);

/* Reports one tensor to the tensor callback; the data is borrowed for the
 * call. Call only when nrd_trace_wants_tensors(t). The thread the tensor
 * is seen on. */
void nrd_trace_tensor(TRITONSERVER_InferenceTrace *t, TRITONSERVER_InferenceTraceActivity activity, const char *name,
                      TRITONSERVER_DataType dtype, const void *base, size_t byte_size, const int64_t *shape,
                      uint64_t dims, TRITONSERVER_MemoryType mtype, int64_t mtype_id);

/* Hands a finished trace back through its release callback (which owns it
 * from then on); NULL is a no-op. */
void nrd_trace_release(TRITONSERVER_InferenceTrace *t);

#endif
