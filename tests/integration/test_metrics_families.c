/* Metric families that follow Triton's current ones: failures by reason,
 * model load time, the first-response histogram (histogram_latencies and
 * model_metrics buckets) and the CPU gauges. */
#include "harness.h"

static const char *kCancelWait = "name: \"cw\"\nbackend: \"cancel_wait\"\nmax_batch_size: 0\n"
                                 "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n"
                                 "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n"
                                 "instance_group [ { kind: KIND_CPU count: 1 } ]\n"
                                 "parameters { key: \"max_wait_ms\" value: { string_value: \"5000\" } }\n";

/* identity fails OUTPUT1 when the optional INPUT1, of variable size (no
 * zeros to answer with), is absent. */
static const char *kOpt = "name: \"opt\"\nbackend: \"identity\"\nmax_batch_size: 0\n"
                          "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 2 ] },"
                          " { name: \"INPUT1\" data_type: TYPE_FP32 dims: [ -1 ] optional: true } ]\n"
                          "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ 2 ] },"
                          " { name: \"OUTPUT1\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n";

static const char *kEnsOverOpt =
    "name: \"ens\"\nplatform: \"ensemble\"\nmax_batch_size: 0\n"
    "input [ { name: \"IN\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n"
    "output [ { name: \"OUT\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n"
    "ensemble_scheduling { step [ { model_name: \"opt\" model_version: -1\n"
    "  input_map { key: \"INPUT0\" value: \"IN\" } output_map { key: \"OUTPUT1\" value: \"OUT\" } } ] }\n";

static const char *kIdent = "name: \"ident\"\nbackend: \"identity\"\nmax_batch_size: 0\n"
                            "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n"
                            "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n";

static const char *kSquare = "name: \"sq\"\nbackend: \"square\"\nmax_batch_size: 0\n"
                             "model_transaction_policy { decoupled: true }\n"
                             "input [ { name: \"IN\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
                             "output [ { name: \"OUT\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n";

static const float g_in4[4] = {1, 2, 3, 4};
static const float g_in2[2] = {1, 2};

static void assert_has(const char *text, const char *line) {
  cr_assert(strstr(text, line), "missing: %s\nin:\n%s", line, text);
}

/* The value of the sample line that starts with `prefix` (name{labels}). */
static double sample_value(const char *text, const char *prefix) {
  char key[512];
  snprintf(key, sizeof key, "\n%s ", prefix);
  const char *at = strstr(text, key);
  cr_assert_not_null(at, "no sample %s in:\n%s", prefix, text);
  return strtod(at + strlen(key), NULL);
}

static TRITONSERVER_InferenceRequest *cw_request(TRITONSERVER_Server *s, h_call **call) {
  int64_t shape[1] = {4};
  TRITONSERVER_InferenceRequest *r = h_request(s, "cw");
  h_add_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, shape, 1, g_in4, sizeof g_in4);
  *call = h_call_new();
  h_bind(r, *call);
  return r;
}

static void infer_fp32x2(TRITONSERVER_Server *s, const char *model, const char *input) {
  int64_t shape[1] = {2};
  TRITONSERVER_InferenceRequest *r = h_request(s, model);
  h_add_input(r, input, TRITONSERVER_TYPE_FP32, shape, 1, g_in2, sizeof g_in2);
  h_call *c = h_infer(s, r);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
}

static void infer_square_on(TRITONSERVER_Server *s, const char *model, int32_t n) {
  int64_t shape[1] = {1};
  TRITONSERVER_InferenceRequest *r = h_request(s, model);
  h_add_input(r, "IN", TRITONSERVER_TYPE_INT32, shape, 1, &n, sizeof n);
  h_call *c = h_infer(s, r);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
}

/* Each way a request fails lands under its own reason; every reason has a
 * series from the start, zeros included. */
Test(metrics_families, failures_are_counted_by_reason) {
  char *repo = h_tmpdir();
  h_model(repo, "cw", kCancelWait, "1");
  h_model(repo, "opt", kOpt, "1");
  h_model(repo, "ens", kEnsOverOpt, "1");
  TRITONSERVER_Server *s = h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE));
  char *t = h_metrics_text(s);
  assert_has(t, "nv_inference_request_failure{model=\"cw\",reason=\"REJECTED\",version=\"1\"} 0\n");
  assert_has(t, "nv_inference_request_failure{model=\"cw\",reason=\"CANCELED\",version=\"1\"} 0\n");
  assert_has(t, "nv_inference_request_failure{model=\"cw\",reason=\"BACKEND\",version=\"1\"} 0\n");
  assert_has(t, "nv_inference_request_failure{model=\"cw\",reason=\"OTHER\",version=\"1\"} 0\n");
  free(t);

  /* r1 holds the one instance; r2 times out in the queue (REJECTED), r3 is
   * cancelled in the queue (CANCELED); r1, cancelled inside the backend,
   * is failed by the backend (BACKEND). */
  h_call *c1, *c2, *c3;
  TRITONSERVER_InferenceRequest *r1 = cw_request(s, &c1), *r2 = cw_request(s, &c2), *r3 = cw_request(s, &c3);
  H_OK(TRITONSERVER_InferenceRequestSetTimeoutMicroseconds(r2, 10 * 1000));
  H_OK(TRITONSERVER_ServerInferAsync(s, r1, NULL));
  usleep(20 * 1000);
  H_OK(TRITONSERVER_ServerInferAsync(s, r2, NULL));
  H_OK(TRITONSERVER_ServerInferAsync(s, r3, NULL));
  H_OK(TRITONSERVER_InferenceRequestCancel(r3));
  usleep(40 * 1000);
  H_OK(TRITONSERVER_InferenceRequestCancel(r1));
  cr_assert(h_wait(c1, 3000) && h_wait(c2, 3000) && h_wait(c3, 3000), "a request was never answered");
  h_call_free(c1);
  h_call_free(c2);
  h_call_free(c3);
  H_OK(TRITONSERVER_InferenceRequestDelete(r1));
  H_OK(TRITONSERVER_InferenceRequestDelete(r2));
  H_OK(TRITONSERVER_InferenceRequestDelete(r3));

  /* The step fails in its backend; the ensemble counts it as OTHER, twice
   * as Triton does (once answering, once as its request tracker ends). */
  infer_fp32x2(s, "ens", "IN");

  t = h_metrics_text(s);
  assert_has(t, "nv_inference_request_failure{model=\"cw\",reason=\"REJECTED\",version=\"1\"} 1\n");
  assert_has(t, "nv_inference_request_failure{model=\"cw\",reason=\"CANCELED\",version=\"1\"} 1\n");
  assert_has(t, "nv_inference_request_failure{model=\"cw\",reason=\"BACKEND\",version=\"1\"} 1\n");
  assert_has(t, "nv_inference_request_failure{model=\"cw\",reason=\"OTHER\",version=\"1\"} 0\n");
  assert_has(t, "nv_inference_request_failure{model=\"opt\",reason=\"BACKEND\",version=\"1\"} 1\n");
  assert_has(t, "nv_inference_request_failure{model=\"ens\",reason=\"OTHER\",version=\"1\"} 2\n");
  assert_has(t, "nv_inference_request_failure{model=\"ens\",reason=\"BACKEND\",version=\"1\"} 0\n");
  free(t);
  /* The statistics API still gives the total. */
  cr_assert_eq(h_stat_count(s, "cw", "fail"), 3);
  H_OK(TRITONSERVER_ServerDelete(s));
  h_rmtree(repo);
  free(repo);
}

static void infer_square(TRITONSERVER_Server *s, int32_t n) { infer_square_on(s, "sq", n); }

/* nv_model_load_duration_secs: one gauge per loaded version, a plausible
 * number of seconds, kept when counter_latencies=false drops the duration
 * counters. */
Test(metrics_families, load_duration_gauge) {
  char *repo = h_tmpdir();
  h_model(repo, "ident", kIdent, "1 2");
  TRITONSERVER_ServerOptions *o = h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE);
  H_OK(TRITONSERVER_ServerOptionsSetMetricsConfig(o, "", "counter_latencies", "false"));
  TRITONSERVER_Server *s = h_server_new(o);
  char *t = h_metrics_text(s);
  assert_has(t, "# TYPE nv_model_load_duration_secs gauge\n");
  double v = sample_value(t, "nv_model_load_duration_secs{model=\"ident\",version=\"2\"}");
  cr_assert(v > 0 && v < 60, "load took %g s?", v);
  cr_assert_null(strstr(t, "nv_inference_request_duration_us"), "counter_latencies=false keeps a counter:\n%s", t);
  free(t);
  H_OK(TRITONSERVER_ServerDelete(s));
  h_rmtree(repo);
  free(repo);
}

/* histogram_latencies=true: each decoupled model (only those, as in
 * Triton) gets a first-response histogram with Triton's default bounds, or
 * the ones its model_metrics gives; a request counts once, at its first
 * response, and a request with no response (square n = 0) not at all. */
Test(metrics_families, first_response_histogram) {
  char *repo = h_tmpdir();
  h_model(repo, "ident", kIdent, "1");
  h_model(repo, "sq", kSquare, "1");
  char custom[2048];
  snprintf(custom, sizeof custom,
           "%s"
           "model_metrics { metric_control [\n"
           "  { metric_identifier { family: \"nv_some_other_family\" } histogram_options { buckets: [ 1 ] } },\n"
           "  { metric_identifier { family: \"nv_inference_first_response_histogram_ms\" }\n"
           "    histogram_options { buckets: [ -1, 0, 1e6 ] } } ] }\n",
           "name: \"custom\"\nbackend: \"square\"\nmax_batch_size: 0\n"
           "model_transaction_policy { decoupled: true }\n"
           "input [ { name: \"IN\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
           "output [ { name: \"OUT\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n");
  h_model(repo, "custom", custom, "1");
  TRITONSERVER_ServerOptions *o = h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE);
  H_OK(TRITONSERVER_ServerOptionsSetMetricsConfig(o, "", "histogram_latencies", "true"));
  TRITONSERVER_Server *s = h_server_new(o);
  for (int i = 0; i < 3; i++) infer_fp32x2(s, "ident", "INPUT0");
  for (int i = 0; i < 3; i++) infer_square(s, 2);
  infer_square_on(s, "custom", 1);
  infer_square(s, 0);
  char *t = h_metrics_text(s);
  const char *f = "nv_inference_first_response_histogram_ms";
  assert_has(t, "# TYPE nv_inference_first_response_histogram_ms histogram\n");
  char line[256];
  snprintf(line, sizeof line, "%s_count{model=\"sq\",version=\"1\"} 3\n", f);
  assert_has(t, line);
  snprintf(line, sizeof line, "%s_count{model=\"ident\"", f);
  cr_assert_null(strstr(t, line), "a model that is not decoupled has no first-response histogram:\n%s", t);
  static const char *const defaults[] = {"100", "500", "2000", "5000", "+Inf"};
  for (int i = 0; i < 5; i++) {
    snprintf(line, sizeof line, "%s_bucket{model=\"sq\",version=\"1\",le=\"%s\"} ", f, defaults[i]);
    assert_has(t, line);
  }
  snprintf(line, sizeof line, "%s_bucket{model=\"sq\",version=\"1\",le=\"+Inf\"} 3\n", f);
  assert_has(t, line);
  snprintf(line, sizeof line, "%s_bucket{model=\"custom\",version=\"1\",le=\"0\"} 0\n", f);
  assert_has(t, line);
  snprintf(line, sizeof line, "%s_bucket{model=\"custom\",version=\"1\",le=\"1000000\"} 1\n", f);
  assert_has(t, line);
  snprintf(line, sizeof line, "%s_bucket{model=\"custom\",version=\"1\",le=\"100\"}", f);
  cr_assert_null(strstr(t, line), "model_metrics buckets replace the defaults:\n%s", t);
  snprintf(line, sizeof line, "%s_sum{model=\"sq\",version=\"1\"}", f);
  double sum = sample_value(t, line);
  cr_assert(sum > 0 && sum < 30000, "three first responses took %g ms?", sum);
  free(t);
  H_OK(TRITONSERVER_ServerDelete(s));
  h_rmtree(repo);
  free(repo);
}

/* Bad bounds fail the load with the field named; without
 * histogram_latencies the family does not appear at all. */
Test(metrics_families, histogram_bounds_are_checked_and_off_by_default) {
  char *repo = h_tmpdir();
  h_model(repo, "ident", kIdent, "1");
  h_model(repo, "bad",
          "name: \"bad\"\nbackend: \"identity\"\nmax_batch_size: 0\n"
          "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n"
          "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n"
          "model_metrics { metric_control [ { metric_identifier { family: "
          "\"nv_inference_first_response_histogram_ms\" }\n"
          "  histogram_options { buckets: [ 5, 2 ] } } ] }\n",
          "1");
  TRITONSERVER_ServerOptions *o = h_options(repo, TRITONSERVER_MODEL_CONTROL_EXPLICIT);
  H_OK(TRITONSERVER_ServerOptionsSetMetricsConfig(o, "", "histogram_latencies", "true"));
  TRITONSERVER_Server *s = h_server_new(o);
  TRITONSERVER_Error *e = TRITONSERVER_ServerLoadModel(s, "bad");
  cr_assert_not_null(e, "unsorted buckets must fail the load");
  cr_assert_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_INVALID_ARG, "%s", TRITONSERVER_ErrorMessage(e));
  const char *msg = TRITONSERVER_ErrorMessage(e);
  cr_assert(strstr(msg, "model_metrics.metric_control[0].histogram_options.buckets[1]") &&
                strstr(msg, "config.pbtxt") && strstr(msg, "strictly increasing"),
            "%s", msg);
  TRITONSERVER_ErrorDelete(e);
  H_OK(TRITONSERVER_ServerDelete(s));

  /* The same model loads when histograms are off; nothing is rendered. */
  s = h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE));
  infer_fp32x2(s, "ident", "INPUT0");
  char *t = h_metrics_text(s);
  cr_assert_null(strstr(t, "nv_inference_first_response_histogram_ms"), "%s", t);
  free(t);
  H_OK(TRITONSERVER_ServerDelete(s));
  h_rmtree(repo);
  free(repo);
}

/* The CPU gauges: present by default with sane values; a value holds for
 * the metrics interval; off with SetCpuMetrics(false) or SetMetrics(false). */
Test(metrics_families, cpu_gauges) {
  char *repo = h_tmpdir();
  h_model(repo, "ident", kIdent, "1");

  TRITONSERVER_ServerOptions *o = h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE);
  H_OK(TRITONSERVER_ServerOptionsSetMetricsInterval(o, 1));
  TRITONSERVER_Server *s = h_server_new(o);
  usleep(5 * 1000);
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  volatile unsigned long spin = 0;
  while (h_seconds_since(&t0) < 0.15) spin++; /* busy: some jiffies must show */
  char *t = h_metrics_text(s);
  assert_has(t, "# TYPE nv_cpu_utilization gauge\n");
  double util = sample_value(t, "nv_cpu_utilization");
  cr_assert(util > 0 && util <= 1, "utilization %g after 150 ms of spinning", util);
  double total = sample_value(t, "nv_cpu_memory_total_bytes"), used = sample_value(t, "nv_cpu_memory_used_bytes");
  cr_assert(total > 0 && used > 0 && used <= total, "total %g used %g", total, used);
  free(t);
  H_OK(TRITONSERVER_ServerDelete(s));

  /* An hour-long interval: the first value (0) holds however busy we are. */
  o = h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE);
  H_OK(TRITONSERVER_ServerOptionsSetMetricsInterval(o, 3600 * 1000));
  s = h_server_new(o);
  clock_gettime(CLOCK_MONOTONIC, &t0);
  while (h_seconds_since(&t0) < 0.05) spin++;
  t = h_metrics_text(s);
  assert_has(t, "\nnv_cpu_utilization 0\n");
  free(t);
  H_OK(TRITONSERVER_ServerDelete(s));

  o = h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE);
  H_OK(TRITONSERVER_ServerOptionsSetCpuMetrics(o, false));
  s = h_server_new(o);
  t = h_metrics_text(s);
  cr_assert_null(strstr(t, "nv_cpu_"), "%s", t);
  cr_assert(strstr(t, "nv_inference_request_success"), "the model families stay");
  free(t);
  H_OK(TRITONSERVER_ServerDelete(s));

  o = h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE);
  H_OK(TRITONSERVER_ServerOptionsSetMetrics(o, false));
  s = h_server_new(o);
  t = h_metrics_text(s);
  cr_assert_null(strstr(t, "nv_cpu_"), "%s", t);
  free(t);
  H_OK(TRITONSERVER_ServerDelete(s));
  h_rmtree(repo);
  free(repo);
}

/* Polls until the gauge of `model` reads `want`; false after 5 s. */
static bool pending_reaches(TRITONSERVER_Server *s, const char *model, long want) {
  return h_pending_reaches(s, model, want, 5000);
}

/* nv_inference_pending_request_count counts requests queued and not yet
 * executing, as Triton does, and is 0 for an ensemble itself. cw holds
 * its one instance until cancelled, so the states are stable. */
Test(metrics_families, pending_counts_queued_requests_only, .timeout = 60) {
  char *repo = h_tmpdir();
  h_model(repo, "cw", kCancelWait, "1");
  h_model(repo, "ens_cw",
          "name: \"ens_cw\"\nplatform: \"ensemble\"\nmax_batch_size: 0\n"
          "input [ { name: \"IN\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n"
          "output [ { name: \"OUT\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n"
          "ensemble_scheduling { step [ { model_name: \"cw\" model_version: -1\n"
          "  input_map { key: \"INPUT0\" value: \"IN\" } output_map { key: \"OUTPUT0\" value: \"OUT\" } } ] }\n",
          "1");
  TRITONSERVER_Server *s = h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE));
  h_call *c1, *c2;
  TRITONSERVER_InferenceRequest *r1 = cw_request(s, &c1), *r2 = cw_request(s, &c2);
  H_OK(TRITONSERVER_ServerInferAsync(s, r1, NULL));
  H_OK(TRITONSERVER_ServerInferAsync(s, r2, NULL));
  /* r1 executes (held), r2 waits: one pending, never both. */
  cr_assert(pending_reaches(s, "cw", 1), "cw shows %ld pending with one executing and one queued",
            h_pending_count(s, "cw"));
  /* An ensemble request that waits for cw: cw counts it, the ensemble 0. */
  int64_t shape[1] = {4};
  TRITONSERVER_InferenceRequest *re = h_request(s, "ens_cw");
  h_add_input(re, "IN", TRITONSERVER_TYPE_FP32, shape, 1, g_in4, sizeof g_in4);
  h_call *ce = h_submit(s, re);
  cr_assert(pending_reaches(s, "cw", 2), "cw shows %ld pending", h_pending_count(s, "cw"));
  cr_expect_eq(h_pending_count(s, "ens_cw"), 0, "an ensemble itself never has pending requests");
  H_OK(TRITONSERVER_InferenceRequestCancel(r1));
  H_OK(TRITONSERVER_InferenceRequestCancel(r2));
  H_OK(TRITONSERVER_InferenceRequestCancel(re));
  cr_assert(h_wait(c1, 10000) && h_wait(c2, 10000) && h_wait(ce, 10000), "a request was never answered");
  cr_expect(pending_reaches(s, "cw", 0));
  cr_expect_eq(h_pending_count(s, "ens_cw"), 0);
  h_call_free(c1);
  h_call_free(c2);
  h_call_free(ce);
  H_OK(TRITONSERVER_InferenceRequestDelete(r1));
  H_OK(TRITONSERVER_InferenceRequestDelete(r2));
  H_OK(TRITONSERVER_InferenceRequestDelete(re));
  H_OK(TRITONSERVER_ServerDelete(s));
  h_rmtree(repo);
  free(repo);
}

/* An ensemble's durations are spans of its own execution: never more
 * than the time the test ran (they were the machine's uptime). */
Test(metrics_families, ensemble_durations_are_spans_of_its_execution, .timeout = 60) {
  char *repo = h_tmpdir();
  h_model(repo, "ident", kIdent, "1");
  h_model(repo, "ens_ok",
          "name: \"ens_ok\"\nplatform: \"ensemble\"\nmax_batch_size: 0\n"
          "input [ { name: \"IN\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n"
          "output [ { name: \"OUT\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n"
          "ensemble_scheduling { step [ { model_name: \"ident\" model_version: -1\n"
          "  input_map { key: \"INPUT0\" value: \"IN\" } output_map { key: \"OUTPUT0\" value: \"OUT\" } } ] }\n",
          "1");
  TRITONSERVER_Server *s = h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE));
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < 3; i++) infer_fp32x2(s, "ens_ok", "IN");
  double elapsed_us = h_seconds_since(&t0) * 1e6;
  char *t = h_metrics_text(s);
  static const char *const fams[] = {"nv_inference_request_duration_us", "nv_inference_queue_duration_us",
                                     "nv_inference_compute_input_duration_us", "nv_inference_compute_infer_duration_us",
                                     "nv_inference_compute_output_duration_us"};
  for (size_t i = 0; i < sizeof fams / sizeof fams[0]; i++) {
    char key[256];
    snprintf(key, sizeof key, "%s{model=\"ens_ok\",version=\"1\"}", fams[i]);
    double v = sample_value(t, key);
    cr_expect(v >= 0 && v <= elapsed_us, "%s is %g us after %g us of requests", fams[i], v, elapsed_us);
  }
  free(t);
  H_OK(TRITONSERVER_ServerDelete(s));
  h_rmtree(repo);
  free(repo);
}

/* The count of `what` ("compute_infer", "fail", ...) in response index
 * `idx` of `model`'s response_stats. */
static json_int_t response_stat(TRITONSERVER_Server *s, const char *model, const char *idx, const char *what) {
  TRITONSERVER_Message *msg = NULL;
  H_OK(TRITONSERVER_ServerModelStatistics(s, model, -1, &msg));
  char *text = h_msg_text(msg);
  json_t *j = json_loads(text, 0, NULL);
  cr_assert_not_null(j, "%s", text);
  json_t *ms = json_array_get(json_object_get(j, "model_stats"), 0);
  json_t *r = json_object_get(json_object_get(ms, "response_stats"), idx);
  json_int_t v = json_integer_value(json_object_get(json_object_get(r, what), "count"));
  json_decref(j);
  free(text);
  return v;
}

/* square reports a response's statistics just after sending it: polls
 * until the count reaches `want` (5 s at most) and returns the last one. */
static json_int_t response_stat_reaches(TRITONSERVER_Server *s, const char *model, const char *idx, const char *what,
                                        json_int_t want) {
  json_int_t v = 0;
  for (int i = 0; i < 500 && (v = response_stat(s, model, idx, what)) < want; i++) usleep(10 * 1000);
  return v;
}

static TRITONSERVER_Error *refuse_alloc(TRITONSERVER_ResponseAllocator *a, const char *name, size_t size,
                                        TRITONSERVER_MemoryType mt, int64_t mid, void *userp, void **buf,
                                        void **buf_userp, TRITONSERVER_MemoryType *amt, int64_t *amid) {
  (void)a, (void)name, (void)size, (void)mt, (void)mid, (void)userp, (void)buf, (void)buf_userp, (void)amt, (void)amid;
  return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, "test: no memory for outputs");
}

static TRITONSERVER_Error *refuse_release(TRITONSERVER_ResponseAllocator *a, void *buf, void *buf_userp, size_t size,
                                          TRITONSERVER_MemoryType mt, int64_t mid) {
  (void)a, (void)buf, (void)buf_userp, (void)size, (void)mt, (void)mid;
  return NULL;
}

/* response_stats count empty and failed responses with their compute
 * infer (and compute output when outputs were being made), as Triton's
 * statistics do. sq_fe (Triton's square parameters) sends of n responses
 * a failed one and an empty one last; with an allocator that refuses
 * memory, square's first response fails. The final flag is no response. */
Test(metrics_families, response_stats_count_empty_and_failed_responses, .timeout = 60) {
  char *repo = h_tmpdir();
  h_model(repo, "sq", kSquare, "1");
  h_model(repo, "sq_fe",
          "name: \"sq_fe\"\nbackend: \"square\"\nmax_batch_size: 0\n"
          "model_transaction_policy { decoupled: true }\n"
          "input [ { name: \"IN\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
          "output [ { name: \"OUT\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
          "parameters [ { key: \"CUSTOM_FAIL_COUNT\" value: { string_value: \"1\" } },\n"
          "             { key: \"CUSTOM_EMPTY_COUNT\" value: { string_value: \"1\" } } ]\n",
          "1");
  TRITONSERVER_Server *s = h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE));
  infer_square(s, 2); /* indexes 0, 1 succeed; the final flag is not counted */
  cr_expect_eq(response_stat(s, "sq", "0", "success"), 1);
  cr_expect_eq(response_stat(s, "sq", "0", "compute_infer"), 1);
  cr_expect_eq(response_stat_reaches(s, "sq", "1", "success", 1), 1);
  cr_expect_eq(response_stat(s, "sq", "2", "empty_response"), 0, "the final flag got statistics");
  infer_square_on(s, "sq_fe", 3); /* 0 succeeds, 1 fails, 2 is empty */
  cr_expect_eq(response_stat_reaches(s, "sq_fe", "2", "empty_response", 1), 1);
  cr_expect_eq(response_stat(s, "sq_fe", "2", "compute_infer"), 1, "an empty response counts its compute infer");
  cr_expect_eq(response_stat(s, "sq_fe", "2", "compute_output"), 0);
  cr_expect_eq(response_stat(s, "sq_fe", "1", "fail"), 1);
  cr_expect_eq(response_stat(s, "sq_fe", "1", "compute_output"), 1, "the failed response made its output");
  cr_expect_eq(response_stat(s, "sq_fe", "0", "success"), 1);

  TRITONSERVER_ResponseAllocator *refuse = NULL;
  H_OK(TRITONSERVER_ResponseAllocatorNew(&refuse, refuse_alloc, refuse_release, NULL));
  int32_t n = 1;
  int64_t shape[1] = {1};
  TRITONSERVER_InferenceRequest *r = h_request(s, "sq");
  h_add_input(r, "IN", TRITONSERVER_TYPE_INT32, shape, 1, &n, sizeof n);
  h_call *c = h_call_new();
  H_OK(TRITONSERVER_InferenceRequestSetReleaseCallback(r, h_on_release, c));
  H_OK(TRITONSERVER_InferenceRequestSetResponseCallback(r, refuse, c, h_on_response, c));
  H_OK(TRITONSERVER_ServerInferAsync(s, r, NULL));
  cr_assert(h_wait(c, 10000), "no answer");
  cr_expect_eq(response_stat_reaches(s, "sq", "0", "fail", 1), 1);
  cr_expect_eq(response_stat(s, "sq", "0", "compute_infer"), 2, "a failed response counts its compute infer");
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  H_OK(TRITONSERVER_ResponseAllocatorDelete(refuse));
  H_OK(TRITONSERVER_ServerDelete(s));
  h_rmtree(repo);
  free(repo);
}
