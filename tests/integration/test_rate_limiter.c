/* The rate limiter: with --rate-limit=execution_count, instances that need
 * the same resource take turns (two models that would run at once run one
 * after the other); a resource given too small, or both global and per
 * device, fails the load with Triton's messages; off, nothing waits. */
#include "harness.h"

/* identity on FP32 [-1], Execute taking 300 ms, its instance needing `rl`
 * (the inside of rate_limiter { }, may be ""). */
static void slow_model(const char *repo, const char *name, const char *rl) {
  char cfg[2048];
  snprintf(cfg, sizeof cfg,
           "name: \"%s\"\nbackend: \"identity\"\nmax_batch_size: 0\n"
           "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n"
           "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n"
           "instance_group [ { kind: KIND_CPU count: 1 rate_limiter { %s } } ]\n"
           "parameters { key: \"execute_delay_ms\" value: { string_value: \"300\" } }\n",
           name, rl);
  h_model(repo, name, cfg, "1");
}

/* Sends one request to each of `a` and `b` at once; seconds until both
 * answered. */
static double both(TRITONSERVER_Server *s, const char *a, const char *b) {
  const char *names[2] = {a, b};
  TRITONSERVER_InferenceRequest *r[2];
  h_call *c[2];
  float x = 1;
  int64_t shape[1] = {1};
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < 2; i++) {
    r[i] = h_request(s, names[i]);
    h_add_input(r[i], "INPUT0", TRITONSERVER_TYPE_FP32, shape, 1, &x, sizeof x);
    c[i] = h_submit(s, r[i]);
  }
  for (int i = 0; i < 2; i++) {
    cr_assert(h_wait(c[i], 10000));
    char *err = h_response_error(c[i], 0);
    cr_assert_null(err, "%s", err);
  }
  double secs = h_seconds_since(&t0);
  for (int i = 0; i < 2; i++) {
    h_call_free(c[i]);
    H_OK(TRITONSERVER_InferenceRequestDelete(r[i]));
  }
  return secs;
}

static TRITONSERVER_Server *limited_server(const char *repo, TRITONSERVER_RateLimitMode mode, const char *resource,
                                           size_t count) {
  TRITONSERVER_ServerOptions *o = h_options(repo, TRITONSERVER_MODEL_CONTROL_EXPLICIT);
  H_OK(TRITONSERVER_ServerOptionsSetRateLimiterMode(o, mode));
  if (resource) H_OK(TRITONSERVER_ServerOptionsAddRateLimiterResource(o, resource, count, -1));
  return h_server_new(o);
}

Test(rate_limiter, instances_sharing_a_resource_take_turns, .timeout = 60) {
  char *repo = h_tmpdir();
  slow_model(repo, "a", "resources [ { name: \"R\" count: 1 } ]");
  slow_model(repo, "b", "resources [ { name: \"R\" count: 1 } ] priority: 2");
  slow_model(repo, "free", "");
  /* No count given: R is as large as the largest need (1), so a and b
   * cannot run together; a model needing nothing is not held back. */
  TRITONSERVER_Server *s = limited_server(repo, TRITONSERVER_RATE_LIMIT_EXEC_COUNT, NULL, 0);
  H_OK(TRITONSERVER_ServerLoadModel(s, "a"));
  H_OK(TRITONSERVER_ServerLoadModel(s, "b"));
  H_OK(TRITONSERVER_ServerLoadModel(s, "free"));
  double t = both(s, "a", "b");
  cr_expect_geq(t, 0.58, "a and b ran together (%.3f s)", t);
  t = both(s, "a", "free");
  cr_expect_lt(t, 0.55, "a model needing no resource waited (%.3f s)", t);
  H_OK(TRITONSERVER_ServerDelete(s));
  /* Given as 2 on the command line: they run together. */
  s = limited_server(repo, TRITONSERVER_RATE_LIMIT_EXEC_COUNT, "R", 2);
  H_OK(TRITONSERVER_ServerLoadModel(s, "a"));
  H_OK(TRITONSERVER_ServerLoadModel(s, "b"));
  t = both(s, "a", "b");
  cr_expect_lt(t, 0.55, "a and b took turns with R at 2 (%.3f s)", t);
  H_OK(TRITONSERVER_ServerDelete(s));
  /* Off (the default): resources are not looked at. */
  s = limited_server(repo, TRITONSERVER_RATE_LIMIT_OFF, NULL, 0);
  H_OK(TRITONSERVER_ServerLoadModel(s, "a"));
  H_OK(TRITONSERVER_ServerLoadModel(s, "b"));
  t = both(s, "a", "b");
  cr_expect_lt(t, 0.55, "a and b took turns with the limiter off (%.3f s)", t);
  H_OK(TRITONSERVER_ServerDelete(s));
  h_rmtree(repo);
  free(repo);
}

static char *load_error(TRITONSERVER_Server *s, const char *name) {
  TRITONSERVER_Error *e = TRITONSERVER_ServerLoadModel(s, name);
  cr_assert_not_null(e, "%s loaded", name);
  char *msg = strdup(TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
  return msg;
}

Test(rate_limiter, loads_that_cannot_be_scheduled_fail, .timeout = 60) {
  char *repo = h_tmpdir();
  slow_model(repo, "needs3", "resources [ { name: \"r\" count: 3 } ]");
  slow_model(repo, "mixed", "resources [ { name: \"r\" count: 1 }, { name: \"r\" global: true count: 1 } ]");
  slow_model(repo, "other", "resources [ { name: \"s\" count: 1 } ]");
  TRITONSERVER_Server *s = limited_server(repo, TRITONSERVER_RATE_LIMIT_EXEC_COUNT, "r", 2);
  char *m = load_error(s, "needs3");
  cr_expect(strstr(m, "Resource count for \"r\" is limited to 2 which will prevent scheduling of one or more model "
                      "instances, the minimum required count is 3"),
            "%s", m);
  free(m);
  m = load_error(s, "mixed");
  cr_expect(strstr(m, "Resource \"r\" is present as both global and device-specific resource in the model "
                      "configuration."),
            "%s", m);
  free(m);
  /* Global in one model, per device in another: the second is refused. */
  slow_model(repo, "global_r", "resources [ { name: \"r\" global: true count: 1 } ]");
  slow_model(repo, "device_r", "resources [ { name: \"r\" count: 1 } ]");
  H_OK(TRITONSERVER_ServerLoadModel(s, "global_r"));
  m = load_error(s, "device_r");
  cr_expect(strstr(m, "Resource \"r\" is present as both global and device-specific resource in the model "
                      "configuration."),
            "%s", m);
  free(m);
  H_OK(TRITONSERVER_ServerUnloadModel(s, "global_r"));
  /* Once resources are given, one that is not is not available. */
  m = load_error(s, "other");
  cr_expect(strstr(m, "Resource count for \"s\" is limited to 0"), "%s", m);
  free(m);
  H_OK(TRITONSERVER_ServerDelete(s));
  h_rmtree(repo);
  free(repo);
}

/* identity on FP32 [-1], Execute taking `ms`, one instance needing one R. */
static void quick_model(const char *repo, const char *name, int priority, int ms) {
  char cfg[2048];
  snprintf(cfg, sizeof cfg,
           "name: \"%s\"\nbackend: \"identity\"\nmax_batch_size: 0\n"
           "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n"
           "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n"
           "instance_group [ { kind: KIND_CPU count: 1 rate_limiter { resources [ { name: \"R\" count: 1 } ] "
           "priority: %d } } ]\n"
           "parameters { key: \"execute_delay_ms\" value: { string_value: \"%d\" } }\n",
           name, priority, ms);
  h_model(repo, name, cfg, "1");
}

/* Triton's cross-model prioritization: two models that cannot run together,
 * both always with work queued, at priorities 1 and 2: the first gets
 * about twice the executions (Triton's QA asks for a ratio above 1.8). */
Test(rate_limiter, priorities_weight_turns_across_models, .timeout = 120) {
  char *repo = h_tmpdir();
  quick_model(repo, "p1", 1, 10);
  quick_model(repo, "p2", 2, 10);
  TRITONSERVER_Server *s = limited_server(repo, TRITONSERVER_RATE_LIMIT_EXEC_COUNT, NULL, 0);
  H_OK(TRITONSERVER_ServerLoadModel(s, "p1"));
  H_OK(TRITONSERVER_ServerLoadModel(s, "p2"));
  enum { PER_MODEL = 120 };
  const char *names[2] = {"p1", "p2"};
  TRITONSERVER_InferenceRequest *r[2][PER_MODEL];
  h_call *c[2][PER_MODEL];
  float x = 1;
  int64_t shape[1] = {1};
  for (int i = 0; i < PER_MODEL; i++)
    for (int k = 0; k < 2; k++) {
      r[k][i] = h_request(s, names[k]);
      h_add_input(r[k][i], "INPUT0", TRITONSERVER_TYPE_FP32, shape, 1, &x, sizeof x);
      c[k][i] = h_submit(s, r[k][i]);
    }
  /* Counted while both still have work queued: p1 stops at 90 of 120. */
  json_int_t n1 = 0, n2 = 0;
  for (int spins = 0; (n1 = h_stat_count(s, "p1", "success")) < 90; spins++) {
    cr_assert_lt(spins, 60000, "p1 ran %lld of 120 requests in 60 s", (long long)n1);
    usleep(1000);
  }
  n2 = h_stat_count(s, "p2", "success");
  cr_assert_gt(n2, 0, "p2 never ran");
  double ratio = (double)n1 / (double)n2;
  cr_expect_gt(ratio, 1.8, "p1 ran %lld, p2 %lld times: ratio %.2f, expected close to 2", (long long)n1, (long long)n2,
               ratio);
  cr_expect_lt(ratio, 2.6, "p1 ran %lld, p2 %lld times: ratio %.2f, expected close to 2", (long long)n1, (long long)n2,
               ratio);
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < PER_MODEL; i++) {
      cr_assert(h_wait(c[k][i], 60000));
      h_call_free(c[k][i]);
      H_OK(TRITONSERVER_InferenceRequestDelete(r[k][i]));
    }
  H_OK(TRITONSERVER_ServerDelete(s));
  h_rmtree(repo);
  free(repo);
}
