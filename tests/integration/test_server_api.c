/* TRITONSERVER_Server* API: liveness/readiness, server and model metadata,
 * model configuration, index, statistics, metrics (built-in and custom),
 * batch/transaction properties, model control in NONE mode, and stop. */
#include <jansson.h>

#include "harness.h"

/* ------------------------------------------------------------ helpers */

typedef struct fixture {
  char *repo;
  TRITONSERVER_Server *s;
} fixture;

static void fixture_down(fixture *f) {
  if (f->s) H_OK(TRITONSERVER_ServerDelete(f->s));
  h_rmtree(f->repo);
  free(f->repo);
}

/* "ident": unbatched FP32 [4]; execute_delay_ms 1 so compute time shows. */
static const char *kIdent = "name: \"ident\"\nbackend: \"identity\"\nmax_batch_size: 0\n"
                            "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n"
                            "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n"
                            "parameters { key: \"execute_delay_ms\" value { string_value: \"1\" } }\n";

/* "bat": batched (max 8) INT32 [-1, 2]. */
static const char *kBat = "name: \"bat\"\nbackend: \"identity\"\nmax_batch_size: 8\n"
                          "input [ { name: \"INPUT0\" data_type: TYPE_INT32 dims: [ -1, 2 ] } ]\n"
                          "output [ { name: \"OUTPUT0\" data_type: TYPE_INT32 dims: [ -1, 2 ] } ]\n";

/* "sq": the decoupled square model. */
static const char *kSquare = "name: \"sq\"\nbackend: \"square\"\nmax_batch_size: 0\n"
                             "model_transaction_policy { decoupled: true }\n"
                             "input [ { name: \"IN\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
                             "output [ { name: \"OUT\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n";

/* "opt": INPUT1 optional and of variable size, both outputs configured
 * (identity cannot answer OUTPUT1 without INPUT1: no zeros of unknown
 * size). */
static const char *kOpt = "name: \"opt\"\nbackend: \"identity\"\nmax_batch_size: 0\n"
                          "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 2 ] },"
                          " { name: \"INPUT1\" data_type: TYPE_FP32 dims: [ -1 ] optional: true } ]\n"
                          "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ 2 ] },"
                          " { name: \"OUTPUT1\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n";

static fixture setup(TRITONSERVER_ModelControlMode mode) {
  fixture f = {h_tmpdir(), NULL};
  h_model(f.repo, "opt", kOpt, "1");
  h_model(f.repo, "ident", kIdent, "1");
  h_model(f.repo, "bat", kBat, "1 2");
  h_model(f.repo, "sq", kSquare, "1");
  f.s = h_server_new(h_options(f.repo, mode));
  return f;
}

static json_t *parse(char *txt) {
  json_error_t jerr;
  json_t *j = json_loads(txt, 0, &jerr);
  cr_assert_not_null(j, "invalid JSON (%s): %s", jerr.text, txt);
  free(txt);
  return j;
}

/* `m` is passed by address: the call in the first argument fills it, and
 * argument evaluation order is unspecified. */
static json_t *msg_json(TRITONSERVER_Error *e, TRITONSERVER_Message **m) {
  H_OK(e);
  return parse(h_msg_text(*m));
}

static void expect_error(TRITONSERVER_Error *e, TRITONSERVER_Error_Code code, const char *what) {
  cr_assert_not_null(e, "%s: expected an error", what);
  cr_expect_eq(TRITONSERVER_ErrorCode(e), code, "%s: code %s (%s)", what, TRITONSERVER_ErrorCodeString(e),
               TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
}

static void infer_ident(TRITONSERVER_Server *s, int n) {
  float in[4] = {1, 2, 3, 4};
  int64_t shape[1] = {4};
  TRITONSERVER_InferenceRequest *r = h_request(s, "ident");
  h_add_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, shape, 1, in, sizeof in);
  for (int i = 0; i < n; i++) {
    h_call *c = h_infer(s, r);
    cr_assert_eq(c->n, 1);
    cr_assert_null(h_response_error(c, 0));
    h_call_free(c);
  }
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
}

static json_t *find_named(json_t *arr, const char *key, const char *val) {
  size_t i;
  json_t *e;
  json_array_foreach(arr, i, e) {
    const char *v = json_string_value(json_object_get(e, key));
    if (v && !strcmp(v, val)) return e;
  }
  return NULL;
}

static json_int_t jint(json_t *obj, const char *path1, const char *path2) {
  json_t *x = json_object_get(obj, path1);
  if (path2) x = json_object_get(x, path2);
  cr_assert(json_is_integer(x), "%s.%s is not an integer", path1, path2 ? path2 : "");
  return json_integer_value(x);
}

/* ---------------------------------------------------------------- tests */

Test(server_api, live_and_ready) {
  fixture f = setup(TRITONSERVER_MODEL_CONTROL_NONE);
  bool b = false;
  H_OK(TRITONSERVER_ServerIsLive(f.s, &b));
  cr_assert(b);
  b = false;
  H_OK(TRITONSERVER_ServerIsReady(f.s, &b));
  cr_assert(b);
  H_OK(TRITONSERVER_ServerModelIsReady(f.s, "ident", -1, &b));
  cr_assert(b);
  H_OK(TRITONSERVER_ServerModelIsReady(f.s, "ident", 1, &b));
  cr_assert(b);
  H_OK(TRITONSERVER_ServerModelIsReady(f.s, "ident", 2, &b));
  cr_assert_not(b, "version 2 of ident does not exist");
  H_OK(TRITONSERVER_ServerModelIsReady(f.s, "nope", -1, &b));
  cr_assert_not(b);
  /* Default version policy (latest 1): only version 2 of bat is served. */
  H_OK(TRITONSERVER_ServerModelIsReady(f.s, "bat", 2, &b));
  cr_assert(b);
  H_OK(TRITONSERVER_ServerModelIsReady(f.s, "bat", 1, &b));
  cr_assert_not(b);
  fixture_down(&f);
}

Test(server_api, server_metadata) {
  fixture f = setup(TRITONSERVER_MODEL_CONTROL_NONE);
  TRITONSERVER_Message *m = NULL;
  json_t *j = msg_json(TRITONSERVER_ServerMetadata(f.s, &m), &m);
  cr_assert(json_is_string(json_object_get(j, "name")));
  cr_assert(json_is_string(json_object_get(j, "version")));
  cr_assert(strlen(json_string_value(json_object_get(j, "version"))) > 0);
  json_t *ext = json_object_get(j, "extensions");
  cr_assert(json_is_array(ext));
  cr_assert_gt(json_array_size(ext), 0);
  bool has_stats = false, has_trace = false;
  size_t i;
  json_t *e;
  json_array_foreach(ext, i, e) {
    cr_assert(json_is_string(e));
    if (!strcmp(json_string_value(e), "statistics")) has_stats = true;
    if (!strcmp(json_string_value(e), "trace")) has_trace = true;
  }
  cr_expect(has_stats, "extensions lack 'statistics'");
  cr_expect(has_trace, "extensions lack 'trace' (Nereid implements the trace extension)");
  json_decref(j);
  fixture_down(&f);
}

Test(server_api, server_id_in_metadata) {
  fixture f = {h_tmpdir(), NULL};
  h_model(f.repo, "ident", kIdent, "1");
  TRITONSERVER_ServerOptions *o = h_options(f.repo, TRITONSERVER_MODEL_CONTROL_NONE);
  H_OK(TRITONSERVER_ServerOptionsSetServerId(o, "nereid-test-id"));
  f.s = h_server_new(o);
  TRITONSERVER_Message *m = NULL;
  json_t *j = msg_json(TRITONSERVER_ServerMetadata(f.s, &m), &m);
  cr_assert_str_eq(json_string_value(json_object_get(j, "name")), "nereid-test-id");
  json_decref(j);
  fixture_down(&f);
}

Test(server_api, model_metadata) {
  fixture f = setup(TRITONSERVER_MODEL_CONTROL_NONE);
  TRITONSERVER_Message *m = NULL;
  json_t *j = msg_json(TRITONSERVER_ServerModelMetadata(f.s, "bat", -1, &m), &m);
  cr_assert_str_eq(json_string_value(json_object_get(j, "name")), "bat");
  json_t *vers = json_object_get(j, "versions");
  cr_assert(json_is_array(vers));
  cr_assert_eq(json_array_size(vers), 1);
  cr_assert_str_eq(json_string_value(json_array_get(vers, 0)), "2");
  cr_assert_str_eq(json_string_value(json_object_get(j, "platform")), "identity");
  json_t *in = json_array_get(json_object_get(j, "inputs"), 0);
  cr_assert_str_eq(json_string_value(json_object_get(in, "name")), "INPUT0");
  cr_assert_str_eq(json_string_value(json_object_get(in, "datatype")), "INT32");
  json_t *shape = json_object_get(in, "shape");
  cr_assert_eq(json_array_size(shape), 3);
  cr_assert_eq(json_integer_value(json_array_get(shape, 0)), -1); /* batch */
  cr_assert_eq(json_integer_value(json_array_get(shape, 1)), -1);
  cr_assert_eq(json_integer_value(json_array_get(shape, 2)), 2);
  json_t *out = json_array_get(json_object_get(j, "outputs"), 0);
  cr_assert_str_eq(json_string_value(json_object_get(out, "name")), "OUTPUT0");
  cr_assert_str_eq(json_string_value(json_object_get(out, "datatype")), "INT32");
  cr_assert_eq(json_array_size(json_object_get(out, "shape")), 3);
  json_decref(j);

  j = msg_json(TRITONSERVER_ServerModelMetadata(f.s, "ident", 1, &m), &m);
  in = json_array_get(json_object_get(j, "inputs"), 0);
  cr_assert_str_eq(json_string_value(json_object_get(in, "datatype")), "FP32");
  shape = json_object_get(in, "shape");
  cr_assert_eq(json_array_size(shape), 1, "no batch dim for an unbatched model");
  cr_assert_eq(json_integer_value(json_array_get(shape, 0)), 4);
  json_decref(j);

  expect_error(TRITONSERVER_ServerModelMetadata(f.s, "nope", -1, &m), TRITONSERVER_ERROR_NOT_FOUND,
               "metadata of unknown model");
  expect_error(TRITONSERVER_ServerModelMetadata(f.s, "bat", 1, &m), TRITONSERVER_ERROR_NOT_FOUND,
               "metadata of an unserved version");
  fixture_down(&f);
}

Test(server_api, model_config) {
  fixture f = setup(TRITONSERVER_MODEL_CONTROL_NONE);
  TRITONSERVER_Message *m = NULL;
  json_t *j = msg_json(TRITONSERVER_ServerModelConfig(f.s, "bat", -1, 1, &m), &m);
  cr_assert_str_eq(json_string_value(json_object_get(j, "name")), "bat");
  cr_assert_str_eq(json_string_value(json_object_get(j, "backend")), "identity");
  cr_assert_eq(json_integer_value(json_object_get(j, "max_batch_size")), 8);
  json_t *in = json_array_get(json_object_get(j, "input"), 0);
  cr_assert_str_eq(json_string_value(json_object_get(in, "data_type")), "TYPE_INT32");
  json_decref(j);
  expect_error(TRITONSERVER_ServerModelConfig(f.s, "bat", -1, 2, &m), TRITONSERVER_ERROR_UNSUPPORTED,
               "config version 2");
  m = NULL;
  TRITONSERVER_Error *e = TRITONSERVER_ServerModelConfig(f.s, "nope", -1, 1, &m);
  cr_assert_not_null(e);
  TRITONSERVER_ErrorDelete(e);
  fixture_down(&f);
}

Test(server_api, model_index) {
  fixture f = {h_tmpdir(), NULL};
  h_model(f.repo, "ident", kIdent, "1");
  h_model(f.repo, "bat", kBat, "1 2");
  f.s = h_server_new(h_options(f.repo, TRITONSERVER_MODEL_CONTROL_EXPLICIT));
  H_OK(TRITONSERVER_ServerLoadModel(f.s, "ident"));
  TRITONSERVER_Message *m = NULL;
  json_t *all = msg_json(TRITONSERVER_ServerModelIndex(f.s, 0, &m), &m);
  cr_assert(json_is_array(all));
  json_t *ident = find_named(all, "name", "ident");
  cr_assert_not_null(ident);
  cr_assert_str_eq(json_string_value(json_object_get(ident, "state")), "READY");
  cr_assert_str_eq(json_string_value(json_object_get(ident, "version")), "1");
  cr_assert_not_null(find_named(all, "name", "bat"), "unloaded models on disk are listed");
  json_decref(all);
  json_t *ready = msg_json(TRITONSERVER_ServerModelIndex(f.s, TRITONSERVER_INDEX_FLAG_READY, &m), &m);
  cr_assert_eq(json_array_size(ready), 1);
  cr_assert_not_null(find_named(ready, "name", "ident"));
  cr_assert_null(find_named(ready, "name", "bat"));
  json_decref(ready);
  /* After unloading, ident is listed as UNAVAILABLE and no longer ready. */
  H_OK(TRITONSERVER_ServerUnloadModel(f.s, "ident"));
  all = msg_json(TRITONSERVER_ServerModelIndex(f.s, 0, &m), &m);
  ident = find_named(all, "name", "ident");
  cr_assert_not_null(ident);
  cr_expect_str_eq(json_string_value(json_object_get(ident, "state")), "UNAVAILABLE");
  json_decref(all);
  ready = msg_json(TRITONSERVER_ServerModelIndex(f.s, TRITONSERVER_INDEX_FLAG_READY, &m), &m);
  cr_assert_eq(json_array_size(ready), 0);
  json_decref(ready);
  fixture_down(&f);
}

Test(server_api, model_statistics) {
  fixture f = setup(TRITONSERVER_MODEL_CONTROL_NONE);
  TRITONSERVER_Message *m = NULL;
  /* Before any request: zeros. */
  json_t *j = msg_json(TRITONSERVER_ServerModelStatistics(f.s, "ident", -1, &m), &m);
  json_t *st = json_array_get(json_object_get(j, "model_stats"), 0);
  cr_assert_eq(jint(st, "inference_count", NULL), 0);
  cr_assert_eq(jint(st, "last_inference", NULL), 0);
  json_decref(j);

  enum { N = 5 };
  infer_ident(f.s, N);
  j = msg_json(TRITONSERVER_ServerModelStatistics(f.s, "ident", 1, &m), &m);
  json_t *arr = json_object_get(j, "model_stats");
  cr_assert_eq(json_array_size(arr), 1);
  st = json_array_get(arr, 0);
  cr_assert_str_eq(json_string_value(json_object_get(st, "name")), "ident");
  cr_assert_str_eq(json_string_value(json_object_get(st, "version")), "1");
  cr_assert_gt(jint(st, "last_inference", NULL), 0);
  cr_assert_eq(jint(st, "inference_count", NULL), N);
  cr_assert_eq(jint(st, "execution_count", NULL), N);
  json_t *inf = json_object_get(st, "inference_stats");
  cr_assert_eq(jint(inf, "success", "count"), N);
  cr_assert_gt(jint(inf, "success", "ns"), 0);
  cr_assert_eq(jint(inf, "fail", "count"), 0);
  cr_assert_eq(jint(inf, "queue", "count"), N);
  cr_assert_gt(jint(inf, "queue", "ns"), 0);
  cr_assert_eq(jint(inf, "compute_infer", "count"), N);
  cr_assert_geq(jint(inf, "compute_infer", "ns"), (json_int_t)N * 1000000, "execute_delay_ms 1 per request");
  json_t *bs = json_object_get(st, "batch_stats");
  cr_assert_eq(json_array_size(bs), 1);
  json_t *b1 = json_array_get(bs, 0);
  cr_assert_eq(jint(b1, "batch_size", NULL), 1);
  cr_assert_eq(jint(b1, "compute_infer", "count"), N);
  json_decref(j);

  /* All models when the name is empty. */
  j = msg_json(TRITONSERVER_ServerModelStatistics(f.s, "", -1, &m), &m);
  arr = json_object_get(j, "model_stats");
  cr_assert_not_null(find_named(arr, "name", "ident"));
  cr_assert_not_null(find_named(arr, "name", "bat"));
  json_decref(j);

  m = NULL;
  TRITONSERVER_Error *e = TRITONSERVER_ServerModelStatistics(f.s, "nope", -1, &m);
  cr_assert_not_null(e, "statistics of an unknown model must fail");
  TRITONSERVER_ErrorDelete(e);
  e = TRITONSERVER_ServerModelStatistics(f.s, "ident", 7, &m);
  cr_assert_not_null(e, "statistics of an unknown version must fail");
  TRITONSERVER_ErrorDelete(e);
  fixture_down(&f);
}

Test(server_api, batched_statistics) {
  fixture f = setup(TRITONSERVER_MODEL_CONTROL_NONE);
  int32_t in[3 * 2 * 2] = {0};
  int64_t shape[3] = {3, 2, 2};
  TRITONSERVER_InferenceRequest *r = h_request(f.s, "bat");
  h_add_input(r, "INPUT0", TRITONSERVER_TYPE_INT32, shape, 3, in, sizeof in);
  for (int i = 0; i < 4; i++) {
    h_call *c = h_infer(f.s, r);
    cr_assert_null(h_response_error(c, 0));
    h_call_free(c);
  }
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  TRITONSERVER_Message *m = NULL;
  json_t *j = msg_json(TRITONSERVER_ServerModelStatistics(f.s, "bat", -1, &m), &m);
  json_t *st = json_array_get(json_object_get(j, "model_stats"), 0);
  cr_assert_eq(jint(st, "inference_count", NULL), 12, "inference_count counts batch rows");
  cr_assert_eq(jint(st, "execution_count", NULL), 4);
  cr_assert_eq(jint(json_object_get(st, "inference_stats"), "success", "count"), 4);
  json_t *bs = json_object_get(st, "batch_stats");
  cr_assert_eq(json_array_size(bs), 1);
  cr_assert_eq(jint(json_array_get(bs, 0), "batch_size", NULL), 3);
  cr_assert_eq(jint(json_array_get(bs, 0), "compute_infer", "count"), 4);
  json_decref(j);
  fixture_down(&f);
}

Test(server_api, failed_request_statistics) {
  fixture f = setup(TRITONSERVER_MODEL_CONTROL_NONE);
  /* All outputs are requested by default, but optional INPUT1 is absent:
   * identity fails the response for OUTPUT1. */
  float in[2] = {1, 2};
  int64_t shape[1] = {2};
  TRITONSERVER_InferenceRequest *r = h_request(f.s, "opt");
  h_add_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, shape, 1, in, sizeof in);
  h_call *c = h_infer(f.s, r);
  cr_assert_eq(c->n, 1);
  char *err = h_response_error(c, 0);
  cr_assert_not_null(err, "identity should fail OUTPUT1 without INPUT1");
  free(err);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  TRITONSERVER_Message *m = NULL;
  json_t *j = msg_json(TRITONSERVER_ServerModelStatistics(f.s, "opt", -1, &m), &m);
  json_t *inf = json_object_get(json_array_get(json_object_get(j, "model_stats"), 0), "inference_stats");
  cr_assert_eq(jint(inf, "fail", "count"), 1);
  cr_assert_eq(jint(inf, "success", "count"), 0);
  json_decref(j);
  char *t = h_metrics_text(f.s);
  cr_assert(strstr(t, "nv_inference_request_failure{model=\"opt\",reason=\"BACKEND\",version=\"1\"} 1\n"), "%s", t);
  cr_assert(strstr(t, "nv_inference_request_success{model=\"opt\",version=\"1\"} 0\n"), "%s", t);
  free(t);
  fixture_down(&f);
}

Test(server_api, prometheus_metrics) {
  fixture f = setup(TRITONSERVER_MODEL_CONTROL_NONE);
  enum { N = 3 };
  infer_ident(f.s, N);
  char *t = h_metrics_text(f.s);
  cr_assert(strstr(t, "nv_inference_request_success{model=\"ident\",version=\"1\"} 3\n"), "%s", t);
  cr_assert(strstr(t, "nv_inference_count{model=\"ident\",version=\"1\"} 3\n"), "%s", t);
  cr_assert(strstr(t, "nv_inference_exec_count{model=\"ident\",version=\"1\"} 3\n"), "%s", t);
  cr_assert(strstr(t, "nv_inference_request_success{model=\"bat\",version=\"2\"} 0\n"), "%s", t);
  cr_assert(strstr(t, "# TYPE nv_inference_count counter"), "%s", t);
  free(t);

  TRITONSERVER_Metrics *mx = NULL;
  H_OK(TRITONSERVER_ServerMetrics(f.s, &mx));
  const char *base;
  size_t len;
  expect_error(TRITONSERVER_MetricsFormatted(mx, (TRITONSERVER_MetricFormat)7, &base, &len),
               TRITONSERVER_ERROR_INVALID_ARG, "unknown metrics format");
  H_OK(TRITONSERVER_MetricsDelete(mx));
  fixture_down(&f);
}

Test(server_api, custom_metrics_in_output) {
  fixture f = setup(TRITONSERVER_MODEL_CONTROL_NONE);
  TRITONSERVER_MetricFamily *fam = NULL;
  H_OK(TRITONSERVER_MetricFamilyNew(&fam, TRITONSERVER_METRIC_KIND_COUNTER, "nrd_test_things_total",
                                    "Things counted by the test"));
  TRITONSERVER_Parameter *lbl = TRITONSERVER_ParameterNew("kind", TRITONSERVER_PARAMETER_STRING, "widget");
  cr_assert_not_null(lbl);
  const TRITONSERVER_Parameter *labels[1] = {lbl};
  TRITONSERVER_Metric *met = NULL;
  H_OK(TRITONSERVER_MetricNew(&met, fam, labels, 1));
  TRITONSERVER_ParameterDelete(lbl);
  H_OK(TRITONSERVER_MetricIncrement(met, 5));
  H_OK(TRITONSERVER_MetricIncrement(met, 2));
  double v = 0;
  H_OK(TRITONSERVER_MetricValue(met, &v));
  cr_assert_float_eq(v, 7.0, 1e-9);
  expect_error(TRITONSERVER_MetricIncrement(met, -1), TRITONSERVER_ERROR_INVALID_ARG, "negative counter step");
  expect_error(TRITONSERVER_MetricSet(met, 1), TRITONSERVER_ERROR_UNSUPPORTED, "Set on a counter");

  TRITONSERVER_MetricFamily *gfam = NULL;
  H_OK(TRITONSERVER_MetricFamilyNew(&gfam, TRITONSERVER_METRIC_KIND_GAUGE, "nrd_test_level", "A level"));
  TRITONSERVER_Metric *g = NULL;
  H_OK(TRITONSERVER_MetricNew(&g, gfam, NULL, 0));
  H_OK(TRITONSERVER_MetricSet(g, 2.5));

  char *t = h_metrics_text(f.s);
  cr_assert(strstr(t, "# TYPE nrd_test_things_total counter\n"), "%s", t);
  cr_assert(strstr(t, "nrd_test_things_total{kind=\"widget\"} 7\n"), "%s", t);
  cr_assert(strstr(t, "# TYPE nrd_test_level gauge\n"), "%s", t);
  cr_assert(strstr(t, "nrd_test_level 2.5\n"), "%s", t);
  /* Built-in families are still there. */
  cr_assert(strstr(t, "nv_inference_count{model=\"ident\",version=\"1\"} 0\n"), "%s", t);
  free(t);

  /* A family cannot go while it has metrics. */
  TRITONSERVER_Error *e = TRITONSERVER_MetricFamilyDelete(fam);
  cr_assert_not_null(e);
  TRITONSERVER_ErrorDelete(e);
  H_OK(TRITONSERVER_MetricDelete(met));
  H_OK(TRITONSERVER_MetricFamilyDelete(fam));
  H_OK(TRITONSERVER_MetricDelete(g));
  H_OK(TRITONSERVER_MetricFamilyDelete(gfam));
  t = h_metrics_text(f.s);
  cr_assert_null(strstr(t, "nrd_test_things_total"), "deleted family still rendered");
  free(t);
  fixture_down(&f);
}

Test(server_api, batch_and_transaction_properties) {
  fixture f = setup(TRITONSERVER_MODEL_CONTROL_NONE);
  uint32_t flags = 99;
  void *voidp = (void *)1;
  H_OK(TRITONSERVER_ServerModelBatchProperties(f.s, "bat", -1, &flags, &voidp));
  cr_assert_eq(flags, TRITONSERVER_BATCH_FIRST_DIM);
  cr_assert_null(voidp);
  H_OK(TRITONSERVER_ServerModelBatchProperties(f.s, "ident", -1, &flags, &voidp));
  cr_assert_eq(flags, TRITONSERVER_BATCH_UNKNOWN);
  H_OK(TRITONSERVER_ServerModelTransactionProperties(f.s, "ident", -1, &flags, &voidp));
  cr_assert_eq(flags, TRITONSERVER_TXN_ONE_TO_ONE);
  H_OK(TRITONSERVER_ServerModelTransactionProperties(f.s, "sq", -1, &flags, &voidp));
  cr_assert_eq(flags, TRITONSERVER_TXN_DECOUPLED);
  TRITONSERVER_Error *e = TRITONSERVER_ServerModelBatchProperties(f.s, "nope", -1, &flags, &voidp);
  cr_assert_not_null(e);
  TRITONSERVER_ErrorDelete(e);
  e = TRITONSERVER_ServerModelTransactionProperties(f.s, "nope", -1, &flags, &voidp);
  cr_assert_not_null(e);
  TRITONSERVER_ErrorDelete(e);
  fixture_down(&f);
}

Test(server_api, model_control_rejected_in_none_mode) {
  fixture f = setup(TRITONSERVER_MODEL_CONTROL_NONE);
  expect_error(TRITONSERVER_ServerLoadModel(f.s, "ident"), TRITONSERVER_ERROR_UNAVAILABLE, "LoadModel");
  expect_error(TRITONSERVER_ServerUnloadModel(f.s, "ident"), TRITONSERVER_ERROR_UNAVAILABLE, "UnloadModel");
  bool ready = false;
  H_OK(TRITONSERVER_ServerModelIsReady(f.s, "ident", -1, &ready));
  cr_assert(ready, "a rejected unload must leave the model serving");
  infer_ident(f.s, 1);
  fixture_down(&f);
}

Test(server_api, stop_then_requests_unavailable) {
  fixture f = setup(TRITONSERVER_MODEL_CONTROL_NONE);
  float in[4] = {1, 2, 3, 4};
  int64_t shape[1] = {4};
  TRITONSERVER_InferenceRequest *r = h_request(f.s, "ident");
  h_add_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, shape, 1, in, sizeof in);
  H_OK(TRITONSERVER_ServerStop(f.s));
  bool b = true;
  H_OK(TRITONSERVER_ServerIsLive(f.s, &b));
  cr_assert_not(b);
  b = true;
  H_OK(TRITONSERVER_ServerIsReady(f.s, &b));
  cr_assert_not(b);
  H_OK(TRITONSERVER_ServerModelIsReady(f.s, "ident", -1, &b));
  cr_assert_not(b);
  h_call *c = h_call_new();
  h_bind(r, c);
  expect_error(TRITONSERVER_ServerInferAsync(f.s, r, NULL), TRITONSERVER_ERROR_UNAVAILABLE, "InferAsync after stop");
  usleep(10000);
  cr_assert_eq(c->n, 0);
  cr_assert_eq(c->released, 0);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  TRITONSERVER_InferenceRequest *r2 = NULL;
  expect_error(TRITONSERVER_InferenceRequestNew(&r2, f.s, "ident", -1), TRITONSERVER_ERROR_UNAVAILABLE,
               "RequestNew after stop");
  /* Stop twice is harmless. */
  H_OK(TRITONSERVER_ServerStop(f.s));
  fixture_down(&f);
}

/* The data of output 0 of a call's first response (borrowed from it). */
static const void *first_output(h_call *c, uint64_t *size) {
  const char *name;
  TRITONSERVER_DataType dt;
  const int64_t *shape;
  uint64_t dims;
  const void *base;
  TRITONSERVER_MemoryType mt;
  int64_t id;
  void *userp;
  H_OK(TRITONSERVER_InferenceResponseOutput(c->responses[0], 0, &name, &dt, &shape, &dims, &base, size, &mt, &id,
                                            &userp));
  return base;
}

/* A backend asking where an output will go: an allocator without a query
 * function cannot say (UNAVAILABLE, as in Triton); one with a query function
 * answers through it. api_probe reports what the call returned. */
static TRITONSERVER_Error *query_pinned(TRITONSERVER_ResponseAllocator *a, void *userp, const char *name,
                                        size_t *byte_size, TRITONSERVER_MemoryType *mt, int64_t *id) {
  (void)a;
  (void)userp;
  (void)byte_size;
  cr_assert_str_eq(name, "PROBE");
  *mt = TRITONSERVER_MEMORY_CPU_PINNED;
  *id = 0;
  return NULL;
}

/* `cpu` (n values, may be NULL): data given for the host policy "cpu" too. */
static json_t *probe_once(TRITONSERVER_Server *s, TRITONSERVER_ResponseAllocator *alloc, const float *cpu, size_t n) {
  float in[2] = {1, 2};
  int64_t shape[1] = {2};
  TRITONSERVER_InferenceRequest *r = h_request(s, "probe");
  h_add_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, shape, 1, in, sizeof in);
  if (cpu)
    H_OK(TRITONSERVER_InferenceRequestAppendInputDataWithHostPolicy(r, "INPUT0", cpu, n * sizeof(float),
                                                                    TRITONSERVER_MEMORY_CPU, 0, "cpu"));
  h_call *c = h_call_new();
  h_bind(r, c);
  H_OK(TRITONSERVER_InferenceRequestSetResponseCallback(r, alloc, c, h_on_response, c));
  H_OK(TRITONSERVER_ServerInferAsync(s, r, NULL));
  cr_assert(h_wait(c, 10000));
  cr_assert_null(h_response_error(c, 0));
  uint64_t size;
  const void *base = first_output(c, &size);
  uint32_t len;
  memcpy(&len, base, 4);
  json_error_t jerr;
  json_t *j = json_loadb((const char *)base + 4, len, 0, &jerr);
  cr_assert_not_null(j, "%s", jerr.text);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  return j;
}

Test(server_api, output_buffer_properties_come_from_the_allocator) {
  char *repo = h_tmpdir();
  h_model(repo, "probe",
          "name: \"probe\"\nbackend: \"api_probe\"\nmax_batch_size: 0\n"
          "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n"
          "output [ { name: \"PROBE\" data_type: TYPE_STRING dims: [ 1 ] } ]\n",
          "1");
  char lib[4200];
  snprintf(lib, sizeof lib, "%s/probe/libtriton_api_probe.so", repo);
  cr_assert_eq(symlink(NRD_TEST_BACKEND_DIR "/api_probe/libtriton_api_probe.so", lib), 0);
  TRITONSERVER_Server *s = h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE));
  json_t *j = probe_once(s, h_allocator(), NULL, 0);
  const char *err = json_string_value(json_object_get(j, "output_buffer_properties_error"));
  cr_assert(err && strstr(err, "output properties are not available"), "%s", err ? err : "(none)");
  json_decref(j);
  TRITONSERVER_ResponseAllocator *with_query = NULL;
  H_OK(TRITONSERVER_ResponseAllocatorNew(&with_query, h_alloc, h_release_buf, NULL));
  H_OK(TRITONSERVER_ResponseAllocatorSetQueryFunction(with_query, query_pinned));
  j = probe_once(s, with_query, NULL, 0);
  cr_assert_str_eq(json_string_value(json_object_get(j, "output_buffer_memory_type")), "CPU_PINNED");
  /* No data for the host policy: a backend asking for it gets the input's own. */
  json_t *cpu = json_object_get(j, "cpu_policy_input");
  cr_assert(json_integer_value(json_object_get(cpu, "byte_size")) == 8 &&
            json_real_value(json_object_get(cpu, "first")) == 1.0);
  json_decref(j);
  /* With data for it: that data, kept apart from the input's own. */
  const float mine[3] = {7, 8, 9};
  j = probe_once(s, with_query, mine, 3);
  cpu = json_object_get(j, "cpu_policy_input");
  cr_assert(json_integer_value(json_object_get(cpu, "byte_size")) == 12 &&
                json_integer_value(json_object_get(cpu, "buffer_count")) == 1 &&
                json_real_value(json_object_get(cpu, "first")) == 7.0,
            "%s", json_dumps(j, 0));
  cr_assert_eq(json_integer_value(json_object_get(json_object_get(j, "input"), "byte_size")), 8);
  json_decref(j);
  H_OK(TRITONSERVER_ServerDelete(s));
  H_OK(TRITONSERVER_ResponseAllocatorDelete(with_query));
  h_rmtree(repo);
  free(repo);
}

/* --host-policy settings reach the instances whose policy they name: by
 * default "cpu", or the instance group's host_policy. */
Test(server_api, host_policy_settings_reach_the_backend) {
  char *repo = h_tmpdir();
  static const char *const names[] = {"probe", "probe2"};
  for (int i = 0; i < 2; i++) {
    char cfg[512], lib[4200];
    snprintf(cfg, sizeof cfg,
             "name: \"%s\"\nbackend: \"api_probe\"\nmax_batch_size: 0\n"
             "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n"
             "output [ { name: \"PROBE\" data_type: TYPE_STRING dims: [ 1 ] } ]\n"
             "instance_group [ { kind: KIND_CPU count: 1 %s } ]\n",
             names[i], i ? "host_policy: \"pinned\"" : "");
    h_model(repo, names[i], cfg, "1");
    snprintf(lib, sizeof lib, "%s/%s/libtriton_api_probe.so", repo, names[i]);
    cr_assert_eq(symlink(NRD_TEST_BACKEND_DIR "/api_probe/libtriton_api_probe.so", lib), 0);
  }
  TRITONSERVER_ServerOptions *o = h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE);
  H_OK(TRITONSERVER_ServerOptionsSetHostPolicy(o, "cpu", "numa-node", "0"));
  H_OK(TRITONSERVER_ServerOptionsSetHostPolicy(o, "pinned", "cpu-cores", "0-1"));
  H_OK(TRITONSERVER_ServerOptionsSetHostPolicy(o, "pinned", "numa-node", "1"));
  TRITONSERVER_Server *s = h_server_new(o);
  json_t *j = probe_once(s, h_allocator(), NULL, 0);
  char *text = json_dumps(json_object_get(j, "host_policy"), JSON_SORT_KEYS | JSON_COMPACT);
  cr_expect_str_eq(text, "{\"cpu\":{\"numa-node\":\"0\"}}");
  free(text);
  json_decref(j);
  TRITONSERVER_InferenceRequest *r = h_request(s, "probe2");
  float in[1] = {1};
  int64_t shape[1] = {1};
  h_add_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, shape, 1, in, sizeof in);
  h_call *c = h_infer(s, r);
  cr_assert_null(h_response_error(c, 0));
  uint64_t size;
  const void *base = first_output(c, &size);
  uint32_t len;
  memcpy(&len, base, 4);
  j = json_loadb((const char *)base + 4, len, 0, NULL);
  text = json_dumps(json_object_get(j, "host_policy"), JSON_SORT_KEYS | JSON_COMPACT);
  cr_expect_str_eq(text, "{\"pinned\":{\"cpu-cores\":\"0-1\",\"numa-node\":\"1\"}}");
  free(text);
  json_decref(j);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  H_OK(TRITONSERVER_ServerDelete(s));
  h_rmtree(repo);
  free(repo);
}

/* Waits up to 2 s for a trace release callback to have run. */
static void wait_released(pthread_mutex_t *mu, const int *released) {
  for (int i = 0; i < 200; i++) {
    pthread_mutex_lock(mu);
    int done = *released;
    pthread_mutex_unlock(mu);
    if (done) return;
    usleep(10000);
  }
}

/* In-process tracing: a trace given to InferAsync reports the core's
 * activities in order, the backend's custom activity with its name in the
 * context, and comes back once through the release callback; a refused
 * request gives its trace back too. */
typedef struct trace_log {
  pthread_mutex_t mu;
  TRITONSERVER_InferenceTraceActivity acts[32];
  uint64_t ns[32];
  int n, released;
  char custom[64];
  char model[64];
  /* At the TENSORS level: activity, tensor name and the data's floats. */
  TRITONSERVER_InferenceTraceActivity tensor_acts[8];
  char names[8][16];
  float data[8][4];
  uint64_t dims[8];
  int n_tensors;
} trace_log;

static void trace_activity(TRITONSERVER_InferenceTrace *t, TRITONSERVER_InferenceTraceActivity a, uint64_t ns,
                           void *userp) {
  trace_log *l = userp;
  pthread_mutex_lock(&l->mu);
  if (l->n < 32) {
    l->acts[l->n] = a;
    l->ns[l->n] = ns;
    l->n++;
  }
  if (a == TRITONSERVER_TRACE_CUSTOM_ACTIVITY) {
    const char *ctx = NULL;
    H_OK(TRITONSERVER_InferenceTraceContext(t, &ctx));
    json_t *j = json_loads(ctx, 0, NULL);
    snprintf(l->custom, sizeof l->custom, "%s", json_string_value(json_object_get(j, "4242")) ?: "");
    json_decref(j);
  }
  if (a == TRITONSERVER_TRACE_REQUEST_START) {
    const char *m = NULL;
    H_OK(TRITONSERVER_InferenceTraceModelName(t, &m));
    snprintf(l->model, sizeof l->model, "%s", m);
  }
  pthread_mutex_unlock(&l->mu);
}

static void trace_released(TRITONSERVER_InferenceTrace *t, void *userp) {
  trace_log *l = userp;
  pthread_mutex_lock(&l->mu);
  l->released++;
  pthread_mutex_unlock(&l->mu);
  H_OK(TRITONSERVER_InferenceTraceDelete(t));
}

Test(server_api, a_trace_follows_its_request) {
  char *repo = h_tmpdir();
  h_model(repo, "probe",
          "name: \"probe\"\nbackend: \"api_probe\"\nmax_batch_size: 0\n"
          "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n"
          "output [ { name: \"PROBE\" data_type: TYPE_STRING dims: [ 1 ] } ]\n",
          "1");
  char lib[4200];
  snprintf(lib, sizeof lib, "%s/probe/libtriton_api_probe.so", repo);
  cr_assert_eq(symlink(NRD_TEST_BACKEND_DIR "/api_probe/libtriton_api_probe.so", lib), 0);
  TRITONSERVER_Server *s = h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE));
  trace_log l = {.mu = PTHREAD_MUTEX_INITIALIZER};
  TRITONSERVER_InferenceTrace *t = NULL;
  H_OK(TRITONSERVER_InferenceTraceNew(&t, TRITONSERVER_TRACE_LEVEL_TIMESTAMPS, 0, trace_activity, trace_released, &l));
  float in[2] = {1, 2};
  int64_t shape[1] = {2};
  TRITONSERVER_InferenceRequest *r = h_request(s, "probe");
  h_add_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, shape, 1, in, sizeof in);
  h_call *c = h_call_new();
  h_bind(r, c);
  H_OK(TRITONSERVER_ServerInferAsync(s, r, t));
  cr_assert(h_wait(c, 10000));
  uint64_t size;
  const void *base = first_output(c, &size);
  uint32_t len;
  memcpy(&len, base, 4);
  json_t *j = json_loadb((const char *)base + 4, len, 0, NULL);
  cr_expect(json_is_false(json_object_get(j, "trace_is_null")), "the backend must see the trace");
  json_decref(j);
  /* The response shares the trace: it comes back once the response is gone
   * and the request released, whichever is last. */
  pthread_mutex_lock(&l.mu);
  cr_expect_eq(l.released, 0);
  pthread_mutex_unlock(&l.mu);
  h_call_free(c);
  wait_released(&l.mu, &l.released);
  static const TRITONSERVER_InferenceTraceActivity want[] = {
      TRITONSERVER_TRACE_REQUEST_START, TRITONSERVER_TRACE_QUEUE_START,       TRITONSERVER_TRACE_CUSTOM_ACTIVITY,
      TRITONSERVER_TRACE_COMPUTE_START, TRITONSERVER_TRACE_COMPUTE_INPUT_END, TRITONSERVER_TRACE_COMPUTE_OUTPUT_START,
      TRITONSERVER_TRACE_COMPUTE_END,   TRITONSERVER_TRACE_REQUEST_END};
  cr_assert_eq(l.n, 8, "%d activities", l.n);
  for (int i = 0; i < 8; i++) cr_expect_eq(l.acts[i], want[i], "activity %d: %d", i, (int)l.acts[i]);
  cr_expect_eq(l.ns[2], 4242);
  cr_expect(l.ns[0] <= l.ns[1] && l.ns[1] <= l.ns[3] && l.ns[6] <= l.ns[7]);
  cr_expect_str_eq(l.custom, "API_PROBE_STEP");
  cr_expect_str_eq(l.model, "probe");
  cr_expect_eq(l.released, 1);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  /* Refused (no inputs): the trace still comes back, and only once. */
  H_OK(TRITONSERVER_InferenceTraceNew(&t, TRITONSERVER_TRACE_LEVEL_TIMESTAMPS, 0, trace_activity, trace_released, &l));
  r = h_request(s, "probe");
  c = h_call_new();
  h_bind(r, c);
  TRITONSERVER_Error *e = TRITONSERVER_ServerInferAsync(s, r, t);
  cr_assert_not_null(e);
  TRITONSERVER_ErrorDelete(e);
  cr_expect_eq(l.released, 2);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  H_OK(TRITONSERVER_ServerDelete(s));
  h_rmtree(repo);
  free(repo);
}

static void tensor_seen(TRITONSERVER_InferenceTrace *t, TRITONSERVER_InferenceTraceActivity a, const char *name,
                        TRITONSERVER_DataType dt, const void *base, size_t byte_size, const int64_t *shape,
                        uint64_t dims, TRITONSERVER_MemoryType mt, int64_t mt_id, void *userp) {
  (void)t, (void)shape, (void)mt_id;
  trace_log *l = userp;
  pthread_mutex_lock(&l->mu);
  if (l->n_tensors < 8 && dt == TRITONSERVER_TYPE_FP32 && byte_size == 16 && mt == TRITONSERVER_MEMORY_CPU) {
    l->tensor_acts[l->n_tensors] = a;
    snprintf(l->names[l->n_tensors], sizeof l->names[0], "%s", name);
    memcpy(l->data[l->n_tensors], base, 16);
    l->dims[l->n_tensors] = dims;
    l->n_tensors++;
  }
  pthread_mutex_unlock(&l->mu);
}

/* At the TENSORS level the trace sees the inputs as queued and as handed
 * to the backend (an input given in two pieces arrives joined) and the
 * outputs as sent; no timestamps without TIMESTAMPS. */
Test(server_api, a_tensors_trace_sees_inputs_and_outputs) {
  fixture f = setup(TRITONSERVER_MODEL_CONTROL_NONE);
  trace_log l = {.mu = PTHREAD_MUTEX_INITIALIZER};
  TRITONSERVER_InferenceTrace *t = NULL;
  H_OK(TRITONSERVER_InferenceTraceTensorNew(&t, TRITONSERVER_TRACE_LEVEL_TENSORS, 0, trace_activity, tensor_seen,
                                            trace_released, &l));
  float in[4] = {1.5f, 2.5f, 3.5f, 4.5f};
  int64_t shape[1] = {4};
  TRITONSERVER_InferenceRequest *r = h_request(f.s, "ident");
  H_OK(TRITONSERVER_InferenceRequestAddInput(r, "INPUT0", TRITONSERVER_TYPE_FP32, shape, 1));
  H_OK(TRITONSERVER_InferenceRequestAppendInputData(r, "INPUT0", in, 8, TRITONSERVER_MEMORY_CPU, 0));
  H_OK(TRITONSERVER_InferenceRequestAppendInputData(r, "INPUT0", in + 2, 8, TRITONSERVER_MEMORY_CPU, 0));
  h_call *c = h_call_new();
  h_bind(r, c);
  H_OK(TRITONSERVER_ServerInferAsync(f.s, r, t));
  cr_assert(h_wait(c, 10000));
  h_call_free(c);
  wait_released(&l.mu, &l.released);
  cr_assert_eq(l.released, 1);
  cr_assert_eq(l.n_tensors, 3, "%d tensors", l.n_tensors);
  static const TRITONSERVER_InferenceTraceActivity want[] = {TRITONSERVER_TRACE_TENSOR_QUEUE_INPUT,
                                                             TRITONSERVER_TRACE_TENSOR_BACKEND_INPUT,
                                                             TRITONSERVER_TRACE_TENSOR_BACKEND_OUTPUT};
  for (int i = 0; i < 3; i++) {
    cr_expect_eq(l.tensor_acts[i], want[i], "tensor %d: %d", i, (int)l.tensor_acts[i]);
    cr_expect_str_eq(l.names[i], i < 2 ? "INPUT0" : "OUTPUT0");
    cr_expect_eq(l.dims[i], 1);
    cr_expect(memcmp(l.data[i], in, sizeof in) == 0, "tensor %d: data", i);
  }
  cr_expect_eq(l.n, 0, "no timestamps without TIMESTAMPS");
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  fixture_down(&f);
}

/* The request getters read back what was set; data appended for a host
 * policy stays apart from the input's own data (which a request still
 * needs, as in Triton); the exit timeout can be changed on a running
 * server. */
Test(server_api, request_getters_host_policy_data_and_exit_timeout) {
  fixture f = setup(TRITONSERVER_MODEL_CONTROL_NONE);
  TRITONSERVER_InferenceRequest *r = h_request(f.s, "ident");
  uint32_t flags = 99, p32 = 99;
  uint64_t p64 = 99;
  H_OK(TRITONSERVER_InferenceRequestFlags(r, &flags));
  H_OK(TRITONSERVER_InferenceRequestPriority(r, &p32));
  H_OK(TRITONSERVER_InferenceRequestPriorityUInt64(r, &p64));
  cr_assert_eq(flags, 0);
  cr_assert_eq(p32, 0);
  cr_assert_eq(p64, 0);
  H_OK(TRITONSERVER_InferenceRequestSetFlags(r, TRITONSERVER_REQUEST_FLAG_SEQUENCE_END));
  H_OK(TRITONSERVER_InferenceRequestSetPriorityUInt64(r, 7));
  H_OK(TRITONSERVER_InferenceRequestFlags(r, &flags));
  H_OK(TRITONSERVER_InferenceRequestPriority(r, &p32));
  H_OK(TRITONSERVER_InferenceRequestPriorityUInt64(r, &p64));
  cr_assert_eq(flags, TRITONSERVER_REQUEST_FLAG_SEQUENCE_END);
  cr_assert_eq(p32, 7);
  cr_assert_eq(p64, 7);
  H_OK(TRITONSERVER_InferenceRequestSetFlags(r, 0));
  H_OK(TRITONSERVER_InferenceRequestSetPriority(r, 0));
  expect_error(TRITONSERVER_InferenceRequestFlags(r, NULL), TRITONSERVER_ERROR_INVALID_ARG, "NULL flags");

  float in[4] = {1, 2, 3, 4};
  int64_t shape[1] = {4};
  float other[6] = {9, 9, 9, 9, 9, 9};
  H_OK(TRITONSERVER_InferenceRequestAddInput(r, "INPUT0", TRITONSERVER_TYPE_FP32, shape, 1));
  H_OK(TRITONSERVER_InferenceRequestAppendInputDataWithHostPolicy(r, "INPUT0", other, sizeof other,
                                                                  TRITONSERVER_MEMORY_CPU, 0, "cpu"));
  /* Host-policy data alone is not the input's data. */
  h_call *c = h_call_new();
  h_bind(r, c);
  TRITONSERVER_Error *e = TRITONSERVER_ServerInferAsync(f.s, r, NULL);
  cr_assert_not_null(e, "a request with host-policy data only was accepted");
  cr_expect_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_INVALID_ARG, "%s", TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestAppendInputData(r, "INPUT0", in, sizeof in, TRITONSERVER_MEMORY_CPU, 0));
  c = h_infer(f.s, r);
  cr_assert_null(h_response_error(c, 0));
  uint64_t size;
  const void *base = first_output(c, &size);
  cr_assert_eq(size, sizeof in);
  cr_assert_eq(memcmp(base, in, sizeof in), 0);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));

  H_OK(TRITONSERVER_ServerSetExitTimeout(f.s, 3));
  expect_error(TRITONSERVER_ServerSetExitTimeout(NULL, 3), TRITONSERVER_ERROR_INVALID_ARG, "NULL server");
  fixture_down(&f);
}
