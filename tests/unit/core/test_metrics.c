/* Unit tests for metrics.c: values, kinds, labels, exact Prometheus text. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"

static void expect_code(TRITONSERVER_Error *e, TRITONSERVER_Error_Code code) {
  cr_assert_not_null(e);
  cr_assert_eq(TRITONSERVER_ErrorCode(e), code, "got %s: %s", TRITONSERVER_ErrorCodeString(e),
               TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
}

static char *render(void) {
  char *out;
  size_t len;
  cr_assert_null(nrd_metrics_render(&out, &len));
  cr_assert_eq(strlen(out), len);
  return out;
}

static TRITONSERVER_Metric *metric_with(TRITONSERVER_MetricFamily *f, const char *k1, const char *v1, const char *k2,
                                        const char *v2) {
  const TRITONSERVER_Parameter *labels[2];
  uint64_t n = 0;
  if (k1) labels[n++] = TRITONSERVER_ParameterNew(k1, TRITONSERVER_PARAMETER_STRING, v1);
  if (k2) labels[n++] = TRITONSERVER_ParameterNew(k2, TRITONSERVER_PARAMETER_STRING, v2);
  TRITONSERVER_Metric *m = NULL;
  cr_assert_null(TRITONSERVER_MetricNew(&m, f, labels, n));
  for (uint64_t i = 0; i < n; i++) TRITONSERVER_ParameterDelete((TRITONSERVER_Parameter *)labels[i]);
  return m;
}

Test(metrics, counter_and_gauge_values_and_text) {
  TRITONSERVER_MetricFamily *cf, *gf;
  cr_assert_null(
      TRITONSERVER_MetricFamilyNew(&cf, TRITONSERVER_METRIC_KIND_COUNTER, "app_requests_total", "Requests seen"));
  cr_assert_null(
      TRITONSERVER_MetricFamilyNew(&gf, TRITONSERVER_METRIC_KIND_GAUGE, "app_temperature", "Temp \"C\"\nline2 \\ end"));
  TRITONSERVER_Metric *c = metric_with(cf, "model", "m1", "version", "1");
  TRITONSERVER_Metric *g = metric_with(gf, NULL, NULL, NULL, NULL);
  double v = -1;
  cr_assert_null(TRITONSERVER_MetricValue(c, &v));
  cr_assert_eq(v, 0.0);
  cr_assert_null(TRITONSERVER_MetricIncrement(c, 2));
  cr_assert_null(TRITONSERVER_MetricIncrement(c, 0.5));
  cr_assert_null(TRITONSERVER_MetricValue(c, &v));
  cr_assert_eq(v, 2.5);
  expect_code(TRITONSERVER_MetricIncrement(c, -1), TRITONSERVER_ERROR_INVALID_ARG);
  expect_code(TRITONSERVER_MetricSet(c, 1), TRITONSERVER_ERROR_UNSUPPORTED);
  expect_code(TRITONSERVER_MetricObserve(c, 1), TRITONSERVER_ERROR_UNSUPPORTED);
  cr_assert_null(TRITONSERVER_MetricSet(g, 10));
  cr_assert_null(TRITONSERVER_MetricIncrement(g, -2.75));
  cr_assert_null(TRITONSERVER_MetricValue(g, &v));
  cr_assert_eq(v, 7.25);
  expect_code(TRITONSERVER_MetricObserve(g, 1), TRITONSERVER_ERROR_UNSUPPORTED);
  TRITONSERVER_MetricKind kind;
  cr_assert_null(TRITONSERVER_GetMetricKind(g, &kind));
  cr_assert_eq(kind, TRITONSERVER_METRIC_KIND_GAUGE);
  cr_assert_null(TRITONSERVER_GetMetricFamilyKind(cf, &kind));
  cr_assert_eq(kind, TRITONSERVER_METRIC_KIND_COUNTER);

  char *text = render();
  cr_assert_str_eq(text, "# HELP app_requests_total Requests seen\n"
                         "# TYPE app_requests_total counter\n"
                         "app_requests_total{model=\"m1\",version=\"1\"} 2.5\n"
                         "# HELP app_temperature Temp \"C\"\\nline2 \\\\ end\n"
                         "# TYPE app_temperature gauge\n"
                         "app_temperature 7.25\n");
  free(text);
  cr_assert_null(TRITONSERVER_MetricDelete(c));
  cr_assert_null(TRITONSERVER_MetricDelete(g));
  cr_assert_null(TRITONSERVER_MetricFamilyDelete(cf));
  cr_assert_null(TRITONSERVER_MetricFamilyDelete(gf));
  text = render();
  cr_assert_str_eq(text, "");
  free(text);
}

Test(metrics, labels_sorted_and_escaped_and_shared) {
  TRITONSERVER_MetricFamily *f;
  cr_assert_null(TRITONSERVER_MetricFamilyNew(&f, TRITONSERVER_METRIC_KIND_GAUGE, "g", ""));
  TRITONSERVER_Metric *a = metric_with(f, "zeta", "q\"uo\\te\nnl", "alpha", "1");
  TRITONSERVER_Metric *b = metric_with(f, "alpha", "1", "zeta", "q\"uo\\te\nnl"); /* same series */
  TRITONSERVER_Metric *c = metric_with(f, "alpha", "2", NULL, NULL);
  cr_assert_null(TRITONSERVER_MetricSet(a, 3));
  double v;
  TRITONSERVER_MetricValue(b, &v);
  cr_assert_eq(v, 3.0);
  char *text = render();
  cr_assert_str_eq(text, "# TYPE g gauge\n"
                         "g{alpha=\"1\",zeta=\"q\\\"uo\\\\te\\nnl\"} 3\n"
                         "g{alpha=\"2\"} 0\n");
  free(text);
  cr_assert_null(TRITONSERVER_MetricDelete(a));
  TRITONSERVER_MetricValue(b, &v); /* series survives while b lives */
  cr_assert_eq(v, 3.0);
  cr_assert_null(TRITONSERVER_MetricDelete(b));
  cr_assert_null(TRITONSERVER_MetricDelete(c));
  cr_assert_null(TRITONSERVER_MetricFamilyDelete(f));
}

Test(metrics, histogram_text_and_errors) {
  TRITONSERVER_MetricFamily *f;
  cr_assert_null(TRITONSERVER_MetricFamilyNew(&f, TRITONSERVER_METRIC_KIND_HISTOGRAM, "lat_us", "Latency"));
  TRITONSERVER_Metric *m = NULL;
  expect_code(TRITONSERVER_MetricNew(&m, f, NULL, 0), TRITONSERVER_ERROR_INVALID_ARG);
  TRITONSERVER_MetricArgs *args;
  cr_assert_null(TRITONSERVER_MetricArgsNew(&args));
  expect_code(TRITONSERVER_MetricNewWithArgs(&m, f, NULL, 0, args), TRITONSERVER_ERROR_INVALID_ARG);
  const double bad[] = {1, 1};
  cr_assert_null(TRITONSERVER_MetricArgsSetHistogram(args, bad, 2));
  expect_code(TRITONSERVER_MetricNewWithArgs(&m, f, NULL, 0, args), TRITONSERVER_ERROR_INVALID_ARG);
  const double buckets[] = {0.5, 10, 100};
  cr_assert_null(TRITONSERVER_MetricArgsSetHistogram(args, buckets, 3));
  const TRITONSERVER_Parameter *lbl[1] = {TRITONSERVER_ParameterNew("model", TRITONSERVER_PARAMETER_STRING, "m")};
  cr_assert_null(TRITONSERVER_MetricNewWithArgs(&m, f, lbl, 1, args));
  TRITONSERVER_ParameterDelete((TRITONSERVER_Parameter *)lbl[0]);
  cr_assert_null(TRITONSERVER_MetricArgsDelete(args));
  cr_assert_null(TRITONSERVER_MetricObserve(m, 0.25));
  cr_assert_null(TRITONSERVER_MetricObserve(m, 10));
  cr_assert_null(TRITONSERVER_MetricObserve(m, 50));
  cr_assert_null(TRITONSERVER_MetricObserve(m, 1000));
  double v;
  expect_code(TRITONSERVER_MetricValue(m, &v), TRITONSERVER_ERROR_UNSUPPORTED);
  expect_code(TRITONSERVER_MetricIncrement(m, 1), TRITONSERVER_ERROR_UNSUPPORTED);
  expect_code(TRITONSERVER_MetricSet(m, 1), TRITONSERVER_ERROR_UNSUPPORTED);
  char *text = render();
  cr_assert_str_eq(text, "# HELP lat_us Latency\n"
                         "# TYPE lat_us histogram\n"
                         "lat_us_count{model=\"m\"} 4\n"
                         "lat_us_sum{model=\"m\"} 1060.25\n"
                         "lat_us_bucket{model=\"m\",le=\"0.5\"} 1\n"
                         "lat_us_bucket{model=\"m\",le=\"10\"} 2\n"
                         "lat_us_bucket{model=\"m\",le=\"100\"} 3\n"
                         "lat_us_bucket{model=\"m\",le=\"+Inf\"} 4\n");
  free(text);
  cr_assert_null(TRITONSERVER_MetricDelete(m));
  cr_assert_null(TRITONSERVER_MetricFamilyDelete(f));
}

Test(metrics, args_not_allowed_for_counter) {
  TRITONSERVER_MetricFamily *f;
  cr_assert_null(TRITONSERVER_MetricFamilyNew(&f, TRITONSERVER_METRIC_KIND_COUNTER, "c", "d"));
  TRITONSERVER_MetricArgs *args;
  TRITONSERVER_MetricArgsNew(&args);
  const double b[] = {1};
  TRITONSERVER_MetricArgsSetHistogram(args, b, 1);
  TRITONSERVER_Metric *m;
  expect_code(TRITONSERVER_MetricNewWithArgs(&m, f, NULL, 0, args), TRITONSERVER_ERROR_INVALID_ARG);
  TRITONSERVER_MetricArgsDelete(args);
  TRITONSERVER_MetricFamilyDelete(f);
}

Test(metrics, delete_family_with_live_metrics_fails) {
  TRITONSERVER_MetricFamily *f;
  cr_assert_null(TRITONSERVER_MetricFamilyNew(&f, TRITONSERVER_METRIC_KIND_COUNTER, "c_total", "d"));
  TRITONSERVER_Metric *m = metric_with(f, NULL, NULL, NULL, NULL);
  expect_code(TRITONSERVER_MetricFamilyDelete(f), TRITONSERVER_ERROR_INTERNAL);
  cr_assert_null(TRITONSERVER_MetricIncrement(m, 1)); /* family intact */
  cr_assert_null(TRITONSERVER_MetricDelete(m));
  cr_assert_null(TRITONSERVER_MetricFamilyDelete(f));
}

Test(metrics, invalid_family_arguments) {
  TRITONSERVER_MetricFamily *f = NULL;
  expect_code(TRITONSERVER_MetricFamilyNew(&f, (TRITONSERVER_MetricKind)7, "x", "d"), TRITONSERVER_ERROR_INVALID_ARG);
  expect_code(TRITONSERVER_MetricFamilyNew(&f, TRITONSERVER_METRIC_KIND_GAUGE, "9bad", "d"),
              TRITONSERVER_ERROR_INVALID_ARG);
  expect_code(TRITONSERVER_MetricFamilyNew(&f, TRITONSERVER_METRIC_KIND_GAUGE, "has space", "d"),
              TRITONSERVER_ERROR_INVALID_ARG);
  expect_code(TRITONSERVER_MetricFamilyNew(&f, TRITONSERVER_METRIC_KIND_GAUGE, NULL, "d"),
              TRITONSERVER_ERROR_INVALID_ARG);
  expect_code(TRITONSERVER_MetricFamilyNew(&f, TRITONSERVER_METRIC_KIND_GAUGE, "ok", NULL),
              TRITONSERVER_ERROR_INVALID_ARG);
  expect_code(TRITONSERVER_MetricFamilyNew(NULL, TRITONSERVER_METRIC_KIND_GAUGE, "ok", "d"),
              TRITONSERVER_ERROR_INVALID_ARG);
  cr_assert_null(f);
}

Test(metrics, same_name_shares_or_conflicts) {
  TRITONSERVER_MetricFamily *f1, *f2, *f3;
  cr_assert_null(TRITONSERVER_MetricFamilyNew(&f1, TRITONSERVER_METRIC_KIND_COUNTER, "shared", "d"));
  cr_assert_null(TRITONSERVER_MetricFamilyNew(&f2, TRITONSERVER_METRIC_KIND_COUNTER, "shared", "d"));
  expect_code(TRITONSERVER_MetricFamilyNew(&f3, TRITONSERVER_METRIC_KIND_GAUGE, "shared", "d"),
              TRITONSERVER_ERROR_INVALID_ARG);
  expect_code(TRITONSERVER_MetricFamilyNew(&f3, TRITONSERVER_METRIC_KIND_COUNTER, "shared", "other"),
              TRITONSERVER_ERROR_INVALID_ARG);
  TRITONSERVER_Metric *a = metric_with(f1, "k", "v", NULL, NULL);
  TRITONSERVER_Metric *b = metric_with(f2, "k", "v", NULL, NULL);
  TRITONSERVER_MetricIncrement(a, 1);
  TRITONSERVER_MetricIncrement(b, 1);
  double v;
  TRITONSERVER_MetricValue(a, &v);
  cr_assert_eq(v, 2.0);
  expect_code(TRITONSERVER_MetricFamilyDelete(f2), TRITONSERVER_ERROR_INTERNAL);
  TRITONSERVER_MetricDelete(b);
  cr_assert_null(TRITONSERVER_MetricFamilyDelete(f2));
  TRITONSERVER_MetricValue(a, &v);
  cr_assert_eq(v, 2.0);
  TRITONSERVER_MetricDelete(a);
  cr_assert_null(TRITONSERVER_MetricFamilyDelete(f1));
}

Test(metrics, bad_labels) {
  TRITONSERVER_MetricFamily *f;
  cr_assert_null(TRITONSERVER_MetricFamilyNew(&f, TRITONSERVER_METRIC_KIND_GAUGE, "g2", "d"));
  TRITONSERVER_Metric *m = NULL;
  int64_t i = 1;
  const TRITONSERVER_Parameter *lbl[1] = {TRITONSERVER_ParameterNew("n", TRITONSERVER_PARAMETER_INT, &i)};
  expect_code(TRITONSERVER_MetricNew(&m, f, lbl, 1), TRITONSERVER_ERROR_INVALID_ARG);
  TRITONSERVER_ParameterDelete((TRITONSERVER_Parameter *)lbl[0]);
  lbl[0] = TRITONSERVER_ParameterNew("__reserved", TRITONSERVER_PARAMETER_STRING, "x");
  expect_code(TRITONSERVER_MetricNew(&m, f, lbl, 1), TRITONSERVER_ERROR_INVALID_ARG);
  TRITONSERVER_ParameterDelete((TRITONSERVER_Parameter *)lbl[0]);
  expect_code(TRITONSERVER_MetricNew(&m, f, NULL, 2), TRITONSERVER_ERROR_INVALID_ARG);
  lbl[0] = NULL;
  expect_code(TRITONSERVER_MetricNew(&m, f, lbl, 1), TRITONSERVER_ERROR_INVALID_ARG);
  expect_code(TRITONSERVER_MetricNew(&m, NULL, NULL, 0), TRITONSERVER_ERROR_INVALID_ARG);
  cr_assert_null(m);
  cr_assert_null(TRITONSERVER_MetricFamilyDelete(f));
}

Test(metrics, special_values_render) {
  TRITONSERVER_MetricFamily *f;
  cr_assert_null(TRITONSERVER_MetricFamilyNew(&f, TRITONSERVER_METRIC_KIND_GAUGE, "sv", "d"));
  TRITONSERVER_Metric *a = metric_with(f, "k", "a", NULL, NULL);
  TRITONSERVER_Metric *b = metric_with(f, "k", "b", NULL, NULL);
  TRITONSERVER_Metric *c = metric_with(f, "k", "c", NULL, NULL);
  TRITONSERVER_MetricSet(a, 1.0 / 0.0);
  TRITONSERVER_MetricSet(b, 0.1);
  TRITONSERVER_MetricSet(c, 1e20);
  char *text = render();
  cr_assert_str_eq(text, "# HELP sv d\n# TYPE sv gauge\n"
                         "sv{k=\"a\"} +Inf\nsv{k=\"b\"} 0.1\nsv{k=\"c\"} 1e+20\n");
  free(text);
  TRITONSERVER_MetricDelete(a);
  TRITONSERVER_MetricDelete(b);
  TRITONSERVER_MetricDelete(c);
  TRITONSERVER_MetricFamilyDelete(f);
}

static void *bump(void *arg) {
  for (int i = 0; i < 10000; i++) TRITONSERVER_MetricIncrement(arg, 1);
  return NULL;
}

Test(metrics, concurrent_increments) {
  TRITONSERVER_MetricFamily *f;
  cr_assert_null(TRITONSERVER_MetricFamilyNew(&f, TRITONSERVER_METRIC_KIND_COUNTER, "conc", "d"));
  TRITONSERVER_Metric *m = metric_with(f, NULL, NULL, NULL, NULL);
  pthread_t th[4];
  for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, bump, m);
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  double v;
  TRITONSERVER_MetricValue(m, &v);
  cr_assert_eq(v, 40000.0);
  TRITONSERVER_MetricDelete(m);
  TRITONSERVER_MetricFamilyDelete(f);
}
