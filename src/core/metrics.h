/* Custom metrics (TRITONSERVER_MetricFamily / Metric / MetricArgs) in a
 * process-wide registry, rendered in the Prometheus text format.
 *
 * Families are shared by name: creating a family whose name exists with the
 * same kind and description returns a new handle to the same series (as
 * Triton's Prometheus registry does); a different kind or description is
 * INVALID_ARG. Metrics with the same label set in a family share one series.
 * A series disappears when its last metric is deleted; families without
 * series are not rendered.
 *
 * Threads: every function is safe from any thread; one registry mutex guards
 * all state (custom metrics are not on the request hot path). */
#ifndef NRD_METRICS_H
#define NRD_METRICS_H

#include <stddef.h>

#include "triton/core/tritonserver.h"

/* Renders every custom family with at least one series:
 *   # HELP <name> <description>       (only when the description is non-empty)
 *   # TYPE <name> counter|gauge|histogram
 *   <name>{k="v",...} <value>         (labels sorted by name)
 * Histograms render, per series, <name>_count, <name>_sum, then cumulative
 * <name>_bucket{...,le="<bound>"} lines ending with le="+Inf". Values use up
 * to 16 significant digits ("+Inf", "-Inf", "NaN" for non-finite values).
 * Families appear in creation order, series in creation order.
 * On success *out is a malloc'd NUL-terminated string the caller frees and
 * *len its length (0 and "" when there is nothing to render). On failure
 * *out is NULL. Any thread. */
TRITONSERVER_Error *nrd_metrics_render(char **out, size_t *len);

/* The index of the first histogram bound that is not finite or not above
 * the one before it; `n` when all are good. Any thread. */
size_t nrd_metrics_bad_bound(const double *bounds, size_t n);

#endif
