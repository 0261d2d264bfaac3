/* First-response histogram of a model; see model_metrics.h. */
#include "model_metrics.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "error.h"
#include "log.h"
#include "metrics.h"
#include "model.h"
#include "server.h"
#include "stats.h"

/* Triton's default bounds, in milliseconds. */
static const double default_bounds[] = {100, 500, 2000, 5000};

/* The bounds model_metrics gives for the histogram, or the defaults: *out
 * points at default_bounds or at *owned (malloc'd, the caller frees it). */
static TRITONSERVER_Error *bounds_for(const TRITONBACKEND_Model *m, const double **out, double **owned, size_t *n) {
  const json_t *controls = json_object_get(json_object_get(m->config, "model_metrics"), "metric_control");
  const json_t *chosen = NULL;
  size_t chosen_at = 0;
  for (size_t i = 0; i < json_array_size(controls); i++) {
    const json_t *c = json_array_get(controls, i);
    const char *family = json_string_value(json_object_get(json_object_get(c, "metric_identifier"), "family"));
    if (family && !strcmp(family, NRD_FIRST_RESPONSE_FAMILY)) {
      chosen = c; /* the last one wins, as in Triton */
      chosen_at = i;
    } else {
      NRD_LOG_WARN("model '%s': metric family '%s' in model_metrics.metric_control[%zu].metric_identifier is not "
                   "one the core lets a configuration change; ignored",
                   m->name, family ? family : "", i);
    }
  }
  *owned = NULL;
  if (!chosen) {
    *out = default_bounds;
    *n = sizeof default_bounds / sizeof default_bounds[0];
    return NULL;
  }
  const json_t *buckets = json_object_get(json_object_get(chosen, "histogram_options"), "buckets");
  *n = json_array_size(buckets);
  *out = NULL;
  if (!*n) return NULL;
  double *b = malloc(*n * sizeof(double));
  if (!b) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  for (size_t i = 0; i < *n; i++) b[i] = json_number_value(json_array_get(buckets, i));
  size_t bad = nrd_metrics_bad_bound(b, *n);
  if (bad < *n) {
    TRITONSERVER_Error *e = nrd_error_new(
        TRITONSERVER_ERROR_INVALID_ARG,
        "%s/config.pbtxt: model '%s': model_metrics.metric_control[%zu].histogram_options.buckets[%zu] is %g; "
        "bucket bounds must be finite and strictly increasing",
        m->model_dir, m->name, chosen_at, bad, b[bad]);
    free(b);
    return e;
  }
  *out = *owned = b;
  return NULL;
}

TRITONSERVER_Error *nrd_model_metrics_create(TRITONBACKEND_Model *m) {
  if (!m->server->histogram_latencies || m->first_response_metric) return NULL;
  const double *bounds = NULL;
  double *owned = NULL;
  size_t n = 0;
  NRD_RETURN_IF_ERROR(bounds_for(m, &bounds, &owned, &n)); /* checked for every model */
  if (!m->decoupled) {
    /* As in Triton, only a decoupled model has a first-response histogram
     * (for the others it would repeat the request duration). */
    free(owned);
    return NULL;
  }
  char version[32];
  snprintf(version, sizeof version, "%" PRId64, m->version);
  TRITONSERVER_Parameter *labels[2] = {TRITONSERVER_ParameterNew("model", TRITONSERVER_PARAMETER_STRING, m->name),
                                       TRITONSERVER_ParameterNew("version", TRITONSERVER_PARAMETER_STRING, version)};
  TRITONSERVER_MetricArgs *args = NULL;
  TRITONSERVER_Error *err = NULL;
  if (!labels[0] || !labels[1]) err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  if (!err) err = TRITONSERVER_MetricArgsNew(&args);
  if (!err) err = TRITONSERVER_MetricArgsSetHistogram(args, bounds, n);
  if (!err)
    err = TRITONSERVER_MetricFamilyNew(&m->first_response_family, TRITONSERVER_METRIC_KIND_HISTOGRAM,
                                       NRD_FIRST_RESPONSE_FAMILY,
                                       "Duration from request to first response in milliseconds");
  if (!err)
    err = TRITONSERVER_MetricNewWithArgs(&m->first_response_metric, m->first_response_family,
                                         (const TRITONSERVER_Parameter **)labels, 2, args);
  if (err) nrd_model_metrics_delete(m);
  TRITONSERVER_ErrorDelete(TRITONSERVER_MetricArgsDelete(args));
  TRITONSERVER_ParameterDelete(labels[0]);
  TRITONSERVER_ParameterDelete(labels[1]);
  free(owned);
  return err;
}

void nrd_model_metrics_delete(TRITONBACKEND_Model *m) {
  if (m->first_response_metric) TRITONSERVER_ErrorDelete(TRITONSERVER_MetricDelete(m->first_response_metric));
  if (m->first_response_family) TRITONSERVER_ErrorDelete(TRITONSERVER_MetricFamilyDelete(m->first_response_family));
  m->first_response_metric = NULL;
  m->first_response_family = NULL;
}

void nrd_model_metrics_first_response(TRITONBACKEND_Model *m, uint64_t start_ns) {
  if (!m->first_response_metric) return;
  uint64_t now = nrd_now_ns();
  double ms = now > start_ns ? (double)(now - start_ns) / 1e6 : 0;
  TRITONSERVER_ErrorDelete(TRITONSERVER_MetricObserve(m->first_response_metric, ms));
}
