/* Triton's test hook TRITONSERVER_DELAY_RESPONSE_COMPLETION through the
 * in-process API: read when a server is created, it holds every response
 * completion (and every flags-only send) N ms on the thread completing it,
 * before the client's callback. The gRPC front end's side of it is in
 * test_grpc_delays.py. Timing checks are lower bounds a working hook cannot
 * miss, and "not held" checks leave seconds of slack. */
#include "harness.h"

static const char *ident_config = "name: \"ident\"\nbackend: \"identity\"\nmax_batch_size: 0\n"
                                  "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n"
                                  "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n";

static const char *square_config = "name: \"sq\"\nbackend: \"square\"\nmax_batch_size: 0\n"
                                   "model_transaction_policy { decoupled: true }\n"
                                   "input [ { name: \"IN\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
                                   "output [ { name: \"OUT\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n";

/* A server on a new repository holding ident and sq, made with the hook
 * set to `value` (NULL: unset); the variable is unset again afterwards. */
static TRITONSERVER_Server *server_with(const char *value, char **repo) {
  *repo = h_tmpdir();
  h_model(*repo, "ident", ident_config, "1");
  h_model(*repo, "sq", square_config, "1");
  if (value) setenv("TRITONSERVER_DELAY_RESPONSE_COMPLETION", value, 1);
  TRITONSERVER_Server *s = h_server_new(h_options(*repo, TRITONSERVER_MODEL_CONTROL_NONE));
  unsetenv("TRITONSERVER_DELAY_RESPONSE_COMPLETION");
  return s;
}

static void server_done(TRITONSERVER_Server *s, char *repo) {
  H_OK(TRITONSERVER_ServerStop(s));
  H_OK(TRITONSERVER_ServerDelete(s));
  h_rmtree(repo);
  free(repo);
}

/* Seconds one ident inference takes, from submit to final response. */
static double ident_seconds(TRITONSERVER_Server *s) {
  float in[2] = {1, 2};
  int64_t shape[1] = {2};
  TRITONSERVER_InferenceRequest *r = h_request(s, "ident");
  h_add_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, shape, 1, in, sizeof in);
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  h_call *c = h_infer(s, r);
  double dt = h_seconds_since(&t0);
  cr_expect_eq(c->n, 1u);
  cr_expect_null(h_response_error(c, 0));
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  return dt;
}

Test(response_delay, holds_each_response_completion, .timeout = 120) {
  char *repo;
  TRITONSERVER_Server *s = server_with("400", &repo);
  double dt = ident_seconds(s);
  cr_expect_geq(dt, 0.4, "the response came after %.3f s", dt);

  /* Decoupled: n = 2 responses, then the final flag, one after another on
   * the backend's thread, each held. */
  int32_t n = 2;
  int64_t shape[1] = {1};
  TRITONSERVER_InferenceRequest *r = h_request(s, "sq");
  h_add_input(r, "IN", TRITONSERVER_TYPE_INT32, shape, 1, &n, sizeof n);
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  h_call *c = h_infer(s, r);
  dt = h_seconds_since(&t0);
  cr_expect_geq(c->n, 2u);
  cr_expect_geq(dt, 0.4 * (double)c->n, "%zu completions in %.3f s", (size_t)c->n, dt);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  server_done(s, repo);
}

Test(response_delay, read_per_server_and_bad_values_ignored, .timeout = 120) {
  char *repo;
  TRITONSERVER_Server *s = server_with("2000", &repo);
  cr_expect_geq(ident_seconds(s), 2.0);
  server_done(s, repo);
  /* The next server, made with the variable unset, is not held. */
  s = server_with(NULL, &repo);
  cr_expect_lt(ident_seconds(s), 1.5);
  server_done(s, repo);
  /* Not a whole number of ms: ignored (warned), not held. */
  const char *bad[] = {"abc", "-5", "1e3", "3600001"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    s = server_with(bad[i], &repo);
    cr_expect_lt(ident_seconds(s), 1.5, "value '%s'", bad[i]);
    server_done(s, repo);
  }
}
