/* The per-model metrics a model's own configuration shapes: the
 * first-response histogram (nv_inference_first_response_histogram_ms) of
 * --metrics-config histogram_latencies=true, whose buckets
 * model_metrics.metric_control may replace.
 *
 * The histogram lives in the process-wide custom-metrics registry
 * (metrics.h), so it renders with the backends' own families. */
#ifndef NRD_MODEL_METRICS_H
#define NRD_MODEL_METRICS_H

#include <stdint.h>

#include "triton/core/tritonbackend.h"

#define NRD_FIRST_RESPONSE_FAMILY "nv_inference_first_response_histogram_ms"

/* Creates m's histogram when the server has histogram_latencies on (no-op
 * otherwise). Needs m's final configuration. INVALID_ARG naming the field
 * and config.pbtxt when the buckets given are not finite and strictly
 * increasing. Loader thread, before the model serves. */
TRITONSERVER_Error *nrd_model_metrics_create(TRITONBACKEND_Model *m);

/* Drops m's histogram (no-op when it has none). When the model is freed. */
void nrd_model_metrics_delete(TRITONBACKEND_Model *m);

/* Observes a request's first response, `start_ns` being when the core took
 * the request (nrd_now_ns clock). Any thread; a no-op without a histogram. */
void nrd_model_metrics_first_response(TRITONBACKEND_Model *m, uint64_t start_ns);

#endif
