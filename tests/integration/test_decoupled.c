/* Decoupled models (square), and how the core treats backends that break
 * the one-response rule of non-decoupled models (response_count) or fail
 * (failing). */
#include <jansson.h>

#include "harness.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
/* Criterion ignores LeakSanitizer's report at process exit, so tests ask
 * for a leak check themselves once everything they made is freed. */
static void expect_no_leaks(void) {
  cr_assert_eq(__lsan_do_recoverable_leak_check(), 0, "LeakSanitizer found leaks (report above)");
}
#else
static void expect_no_leaks(void) {}
#endif

#define SQ_CONFIG(count)                                                                                               \
  "name: \"sq\"\nbackend: \"square\"\nmax_batch_size: 0\n"                                                             \
  "model_transaction_policy { decoupled: true }\n"                                                                     \
  "input [ { name: \"IN\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"                                                     \
  "output [ { name: \"OUT\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"                                                   \
  "instance_group [ { kind: KIND_CPU count: " #count " } ]\n"

#define IDENT_IO                                                                                                       \
  "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n"                                                  \
  "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n"

/* A server on a fresh repository holding one model; *repo_out is freed by
 * the caller (after h_rmtree). */
static TRITONSERVER_Server *one_model_server(const char *name, const char *config, char **repo_out) {
  char *repo = h_tmpdir();
  h_model(repo, name, config, "1");
  *repo_out = repo;
  return h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE));
}

static void server_done(TRITONSERVER_Server *s, char *repo) {
  H_OK(TRITONSERVER_ServerDelete(s));
  h_rmtree(repo);
  free(repo);
}

/* A square request asking for `*n` responses; `n` must outlive the call. */
static TRITONSERVER_InferenceRequest *sq_request(TRITONSERVER_Server *s, const int32_t *n) {
  TRITONSERVER_InferenceRequest *r = h_request(s, "sq");
  int64_t shape[1] = {1};
  h_add_input(r, "IN", TRITONSERVER_TYPE_INT32, shape, 1, n, sizeof *n);
  return r;
}

/* Checks the exact decoupled sequence for square with `n`: n data responses
 * OUT == n without FINAL, then one flags-only FINAL, one release. */
static void expect_square_sequence(h_call *c, int32_t n) {
  pthread_mutex_lock(&c->mu);
  size_t got = c->n;
  int finals = c->finals, released = c->released;
  pthread_mutex_unlock(&c->mu);
  cr_assert_eq(got, (size_t)n + 1, "n=%d: expected %d callbacks, got %zu", n, n + 1, got);
  cr_assert_eq(finals, 1, "n=%d: finals %d", n, finals);
  cr_assert_eq(released, 1, "n=%d: released %d", n, released);
  for (int32_t i = 0; i < n; i++) {
    cr_assert_not_null(c->responses[i], "n=%d: response %d is flags-only", n, i);
    cr_assert_eq(c->flags[i] & TRITONSERVER_RESPONSE_COMPLETE_FINAL, 0u, "n=%d: response %d is FINAL", n, i);
    char *err = h_response_error(c, (size_t)i);
    cr_assert_null(err, "n=%d: response %d failed: %s", n, i, err);
    uint32_t count = 0;
    H_OK(TRITONSERVER_InferenceResponseOutputCount(c->responses[i], &count));
    cr_assert_eq(count, 1u);
    const char *name;
    TRITONSERVER_DataType dt;
    const int64_t *shape;
    uint64_t dims;
    const void *base;
    size_t size;
    TRITONSERVER_MemoryType mt;
    int64_t mtid;
    void *userp;
    H_OK(TRITONSERVER_InferenceResponseOutput(c->responses[i], 0, &name, &dt, &shape, &dims, &base, &size, &mt, &mtid,
                                              &userp));
    cr_assert_str_eq(name, "OUT");
    cr_assert_eq(dt, TRITONSERVER_TYPE_INT32);
    cr_assert_eq(dims, 1u);
    cr_assert_eq(shape[0], 1);
    cr_assert_eq(size, sizeof(int32_t));
    int32_t v;
    memcpy(&v, base, sizeof v);
    cr_assert_eq(v, n, "n=%d: response %d holds %d", n, i, v);
  }
  cr_assert_null(c->responses[n], "n=%d: the last callback must be flags-only", n);
  cr_assert_eq(c->flags[n], (uint32_t)TRITONSERVER_RESPONSE_COMPLETE_FINAL);
}

/* Lets late, unexpected callbacks show up before counting. */
static void settle(void) { usleep(20 * 1000); }

Test(decoupled, square_counts) {
  char *repo;
  TRITONSERVER_Server *s = one_model_server("sq", SQ_CONFIG(1), &repo);
  const int32_t ns[] = {1, 5, 100, 0};
  for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
    int32_t n = ns[k];
    TRITONSERVER_InferenceRequest *r = sq_request(s, &n);
    h_call *c = h_infer(s, r);
    settle();
    expect_square_sequence(c, n);
    h_call_free(c);
    H_OK(TRITONSERVER_InferenceRequestDelete(r));
  }
  server_done(s, repo);
  expect_no_leaks();
}

/* ---------------------------------------------- callback thread check */

static pthread_t g_test_thread;
static atomic_int g_on_test_thread;
static atomic_int g_callbacks;

static void on_response_thread_check(TRITONSERVER_InferenceResponse *r, const uint32_t flags, void *userp) {
  if (pthread_equal(pthread_self(), g_test_thread)) atomic_fetch_add(&g_on_test_thread, 1);
  atomic_fetch_add(&g_callbacks, 1);
  h_on_response(r, flags, userp);
}

Test(decoupled, responses_come_from_another_thread) {
  char *repo;
  TRITONSERVER_Server *s = one_model_server("sq", SQ_CONFIG(1), &repo);
  g_test_thread = pthread_self();
  atomic_store(&g_on_test_thread, 0);
  atomic_store(&g_callbacks, 0);
  int32_t n = 3;
  TRITONSERVER_InferenceRequest *r = sq_request(s, &n);
  h_call *c = h_call_new();
  h_bind(r, c);
  H_OK(TRITONSERVER_InferenceRequestSetResponseCallback(r, h_allocator(), c, on_response_thread_check, c));
  H_OK(TRITONSERVER_ServerInferAsync(s, r, NULL));
  cr_assert(h_wait(c, 10000), "no final response/release within 10 s");
  settle();
  expect_square_sequence(c, n);
  cr_assert_eq(atomic_load(&g_callbacks), 4);
  cr_assert_eq(atomic_load(&g_on_test_thread), 0, "a response callback ran on the caller's thread");
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  server_done(s, repo);
  expect_no_leaks();
}

#define N_CONCURRENT 32

Test(decoupled, concurrent_requests_two_instances) {
  char *repo;
  TRITONSERVER_Server *s = one_model_server("sq", SQ_CONFIG(2), &repo);
  int32_t ns[N_CONCURRENT];
  TRITONSERVER_InferenceRequest *reqs[N_CONCURRENT];
  h_call *calls[N_CONCURRENT];
  for (int i = 0; i < N_CONCURRENT; i++) {
    ns[i] = (i * 7) % 41; /* 0..40, includes 0 */
    reqs[i] = sq_request(s, &ns[i]);
    calls[i] = h_call_new();
    h_bind(reqs[i], calls[i]);
  }
  for (int i = 0; i < N_CONCURRENT; i++) H_OK(TRITONSERVER_ServerInferAsync(s, reqs[i], NULL));
  for (int i = 0; i < N_CONCURRENT; i++) cr_assert(h_wait(calls[i], 20000), "request %d did not complete", i);
  settle();
  for (int i = 0; i < N_CONCURRENT; i++) {
    expect_square_sequence(calls[i], ns[i]);
    h_call_free(calls[i]);
    H_OK(TRITONSERVER_InferenceRequestDelete(reqs[i]));
  }
  server_done(s, repo);
  expect_no_leaks();
}

Test(decoupled, transaction_properties) {
  char *repo = h_tmpdir();
  h_model(repo, "sq", SQ_CONFIG(1), "1");
  h_model(repo, "ident", "name: \"ident\"\nbackend: \"identity\"\nmax_batch_size: 0\n" IDENT_IO, "1");
  TRITONSERVER_Server *s = h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE));
  uint32_t flags = 0;
  void *voidp = NULL;
  H_OK(TRITONSERVER_ServerModelTransactionProperties(s, "sq", -1, &flags, &voidp));
  cr_assert(flags & TRITONSERVER_TXN_DECOUPLED, "square model flags 0x%x lack DECOUPLED", flags);
  cr_assert_eq(flags & TRITONSERVER_TXN_ONE_TO_ONE, 0u);
  flags = 0;
  H_OK(TRITONSERVER_ServerModelTransactionProperties(s, "ident", -1, &flags, &voidp));
  cr_assert(flags & TRITONSERVER_TXN_ONE_TO_ONE, "identity model flags 0x%x lack ONE_TO_ONE", flags);
  cr_assert_eq(flags & TRITONSERVER_TXN_DECOUPLED, 0u);
  server_done(s, repo);
  expect_no_leaks();
}

/* ------------------------------------ non-decoupled rule breakers */

#define RC_CONFIG(responses)                                                                                           \
  "name: \"rc\"\nbackend: \"response_count\"\nmax_batch_size: 0\n" IDENT_IO                                            \
  "parameters { key: \"responses\" value: { string_value: \"" #responses "\" } }\n"

static h_call *ident_infer(TRITONSERVER_Server *s, const char *model, TRITONSERVER_InferenceRequest **out) {
  static const float in[4] = {1, 2, 3, 4};
  int64_t shape[1] = {4};
  TRITONSERVER_InferenceRequest *r = h_request(s, model);
  h_add_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, shape, 1, in, sizeof in);
  *out = r;
  return h_infer(s, r);
}

Test(decoupled, non_decoupled_zero_responses_gets_core_error) {
  char *repo;
  TRITONSERVER_Server *s = one_model_server("rc", RC_CONFIG(0), &repo);
  TRITONSERVER_InferenceRequest *r;
  h_call *c = ident_infer(s, "rc", &r);
  settle();
  cr_assert_eq(c->n, 1u, "expected exactly one response, got %zu", c->n);
  cr_assert_eq(c->finals, 1);
  cr_assert_eq(c->released, 1);
  cr_assert_not_null(c->responses[0], "the core's answer must be a real (error) response");
  cr_assert(c->flags[0] & TRITONSERVER_RESPONSE_COMPLETE_FINAL);
  TRITONSERVER_Error *e = TRITONSERVER_InferenceResponseError(c->responses[0]);
  cr_assert_not_null(e, "the response must carry an error");
  cr_assert_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_INTERNAL);
  cr_assert(strstr(TRITONSERVER_ErrorMessage(e), "without sending"), "message: %s", TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  server_done(s, repo);
  expect_no_leaks();
}

Test(decoupled, non_decoupled_two_responses_client_sees_one) {
  char *repo;
  TRITONSERVER_Server *s = one_model_server("rc", RC_CONFIG(2), &repo);
  for (int round = 0; round < 3; round++) {
    TRITONSERVER_InferenceRequest *r;
    h_call *c = ident_infer(s, "rc", &r);
    settle();
    cr_assert_eq(c->n, 1u, "expected exactly one response, got %zu", c->n);
    cr_assert_eq(c->finals, 1);
    cr_assert_eq(c->released, 1);
    cr_assert_not_null(c->responses[0]);
    cr_assert(c->flags[0] & TRITONSERVER_RESPONSE_COMPLETE_FINAL, "the first response must be final");
    char *err = h_response_error(c, 0);
    cr_assert_null(err, "first response failed: %s", err);
    uint32_t count = 0;
    H_OK(TRITONSERVER_InferenceResponseOutputCount(c->responses[0], &count));
    cr_assert_eq(count, 1u);
    h_call_free(c);
    H_OK(TRITONSERVER_InferenceRequestDelete(r));
  }
  server_done(s, repo);
  expect_no_leaks();
}

/* ------------------------------------------------------ failing backend */

#define FAIL_CONFIG(stage)                                                                                             \
  "name: \"fail\"\nbackend: \"failing\"\nmax_batch_size: 0\n" IDENT_IO                                                 \
  "instance_group [ { kind: KIND_CPU count: 2 } ]\n"                                                                   \
  "parameters { key: \"fail_at\" value: { string_value: \"" stage "\" } }\n"

static void expect_failures(const char *config, const char *message) {
  char *repo;
  TRITONSERVER_Server *s = one_model_server("fail", config, &repo);
  enum { N = 6 };
  static const float in[4] = {1, 2, 3, 4};
  int64_t shape[1] = {4};
  TRITONSERVER_InferenceRequest *reqs[N];
  h_call *calls[N];
  for (int i = 0; i < N; i++) {
    reqs[i] = h_request(s, "fail");
    h_add_input(reqs[i], "INPUT0", TRITONSERVER_TYPE_FP32, shape, 1, in, sizeof in);
    calls[i] = h_call_new();
    h_bind(reqs[i], calls[i]);
    H_OK(TRITONSERVER_ServerInferAsync(s, reqs[i], NULL));
  }
  for (int i = 0; i < N; i++) cr_assert(h_wait(calls[i], 10000), "request %d did not complete", i);
  settle();
  for (int i = 0; i < N; i++) {
    h_call *c = calls[i];
    cr_assert_eq(c->n, 1u, "request %d: %zu responses", i, c->n);
    cr_assert_eq(c->finals, 1);
    cr_assert_eq(c->released, 1, "request %d released %d times", i, c->released);
    char *err = h_response_error(c, 0);
    cr_assert_not_null(err, "request %d: expected an error response", i);
    cr_assert(strstr(err, message), "request %d: error '%s' lacks '%s'", i, err, message);
    cr_assert(!strncmp(err, "Internal", 8) || !strncmp(err, "INTERNAL", 8), "request %d: %s", i, err);
    free(err);
    h_call_free(c);
    H_OK(TRITONSERVER_InferenceRequestDelete(reqs[i]));
  }
  server_done(s, repo);
}

Test(decoupled, failing_execute_answers_every_request) {
  expect_failures(FAIL_CONFIG("execute"), "failing backend: failed in ModelInstanceExecute as asked");
  expect_no_leaks();
}

Test(decoupled, failing_execute_response_answers_every_request) {
  expect_failures(FAIL_CONFIG("execute_response"), "failing backend: failed in ModelInstanceExecute response as asked");
  expect_no_leaks();
}

/* ------------------------------------------------------------ statistics */

static json_t *model_stats(TRITONSERVER_Server *s, const char *model) {
  TRITONSERVER_Message *m = NULL;
  H_OK(TRITONSERVER_ServerModelStatistics(s, model, -1, &m));
  char *text = h_msg_text(m);
  json_error_t je;
  json_t *root = json_loads(text, 0, &je);
  cr_assert_not_null(root, "statistics are not JSON: %s", text);
  free(text);
  json_t *arr = json_object_get(root, "model_stats");
  cr_assert_eq(json_array_size(arr), 1u);
  json_t *one = json_incref(json_array_get(arr, 0));
  json_decref(root);
  return one;
}

static json_int_t jget(json_t *o, const char *a, const char *b, const char *c) {
  json_t *v = json_object_get(o, a);
  if (b) v = json_object_get(v, b);
  if (c) v = json_object_get(v, c);
  cr_assert(json_is_integer(v), "statistic %s.%s.%s missing", a, b ? b : "", c ? c : "");
  return json_integer_value(v);
}

Test(decoupled, statistics_after_decoupled_requests) {
  char *repo;
  TRITONSERVER_Server *s = one_model_server("sq", SQ_CONFIG(1), &repo);
  json_t *before = model_stats(s, "sq");
  cr_assert_eq(jget(before, "inference_count", NULL, NULL), 0);
  cr_assert_eq(jget(before, "execution_count", NULL, NULL), 0);
  json_decref(before);
  const int32_t ns[] = {2, 0, 3, 1};
  for (size_t k = 0; k < 4; k++) {
    int32_t n = ns[k];
    TRITONSERVER_InferenceRequest *r = sq_request(s, &n);
    h_call *c = h_infer(s, r);
    expect_square_sequence(c, n);
    h_call_free(c);
    H_OK(TRITONSERVER_InferenceRequestDelete(r));
  }
  json_t *st = model_stats(s, "sq");
  cr_assert_str_eq(json_string_value(json_object_get(st, "name")), "sq");
  /* square reports one successful request per Execute and a batch of 1. */
  cr_assert_eq(jget(st, "inference_count", NULL, NULL), 4);
  cr_assert_eq(jget(st, "execution_count", NULL, NULL), 4);
  cr_assert_eq(jget(st, "inference_stats", "success", "count"), 4);
  cr_assert_eq(jget(st, "inference_stats", "fail", "count"), 0);
  cr_assert(jget(st, "last_inference", NULL, NULL) > 0);
  json_decref(st);
  server_done(s, repo);
  expect_no_leaks();
}
