/* The repeat backend (decoupled, Triton's repeat example): one response per
 * element of IN after its DELAY, then a flags-only FINAL after WAIT; timing,
 * interleaving of concurrent requests on one instance, N = 0, bad inputs,
 * cancellation, statistics and the decoupled-only config check. */
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

#define REPEAT_IO                                                                                                      \
  "input [ { name: \"IN\" data_type: TYPE_INT32 dims: [ -1 ] },\n"                                                     \
  "        { name: \"DELAY\" data_type: TYPE_UINT32 dims: [ -1 ] },\n"                                                 \
  "        { name: \"WAIT\" data_type: TYPE_UINT32 dims: [ 1 ] } ]\n"                                                  \
  "output [ { name: \"OUT\" data_type: TYPE_INT32 dims: [ 1 ] },\n"                                                    \
  "         { name: \"IDX\" data_type: TYPE_UINT32 dims: [ 1 ] } ]\n"

#define REPEAT_CONFIG                                                                                                  \
  "name: \"rep\"\nbackend: \"repeat\"\nmax_batch_size: 0\n"                                                            \
  "model_transaction_policy { decoupled: true }\n" REPEAT_IO "instance_group [ { kind: KIND_CPU count: 1 } ]\n"

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static TRITONSERVER_Server *repeat_server(char **repo_out) {
  char *repo = h_tmpdir();
  h_model(repo, "rep", REPEAT_CONFIG, "1");
  *repo_out = repo;
  return h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE));
}

static void server_done(TRITONSERVER_Server *s, char *repo) {
  H_OK(TRITONSERVER_ServerDelete(s));
  h_rmtree(repo);
  free(repo);
}

/* ------------------------------------------------- timed calls */

#define MAX_TIMED 256

/* A call that also records when each callback arrived and a global order. */
typedef struct timed_call {
  h_call *c;
  uint64_t t0_ms;
  uint64_t at_ms[MAX_TIMED]; /* arrival of callback i, ms after t0 */
  int seq[MAX_TIMED]; /* position of callback i among all calls */
} timed_call;

static atomic_int g_seq;

/* Any thread. */
static void on_timed_response(TRITONSERVER_InferenceResponse *r, const uint32_t flags, void *userp) {
  timed_call *tc = userp;
  uint64_t at = now_ms();
  int seq = atomic_fetch_add(&g_seq, 1);
  pthread_mutex_lock(&tc->c->mu);
  size_t i = tc->c->n;
  if (i < MAX_TIMED) {
    tc->at_ms[i] = at - tc->t0_ms;
    tc->seq[i] = seq;
  }
  pthread_mutex_unlock(&tc->c->mu);
  h_on_response(r, flags, tc->c);
}

/* A repeat request; the arrays must outlive the call. */
static TRITONSERVER_InferenceRequest *repeat_request(TRITONSERVER_Server *s, const int32_t *in, const uint32_t *delay,
                                                     int64_t n_in, int64_t n_delay, const uint32_t *wait) {
  TRITONSERVER_InferenceRequest *r = h_request(s, "rep");
  int64_t shape_in[1] = {n_in}, shape_delay[1] = {n_delay}, shape_wait[1] = {1};
  h_add_input(r, "IN", TRITONSERVER_TYPE_INT32, shape_in, 1, in, (size_t)n_in * sizeof(int32_t));
  h_add_input(r, "DELAY", TRITONSERVER_TYPE_UINT32, shape_delay, 1, delay, (size_t)n_delay * sizeof(uint32_t));
  h_add_input(r, "WAIT", TRITONSERVER_TYPE_UINT32, shape_wait, 1, wait, sizeof *wait);
  return r;
}

static timed_call *timed_start(TRITONSERVER_Server *s, TRITONSERVER_InferenceRequest *r) {
  timed_call *tc = calloc(1, sizeof *tc);
  tc->c = h_call_new();
  h_bind(r, tc->c);
  H_OK(TRITONSERVER_InferenceRequestSetResponseCallback(r, h_allocator(), tc->c, on_timed_response, tc));
  tc->t0_ms = now_ms();
  H_OK(TRITONSERVER_ServerInferAsync(s, r, NULL));
  return tc;
}

static void timed_free(timed_call *tc) {
  h_call_free(tc->c);
  free(tc);
}

/* Reads the int32/uint32 scalar output `name` of response i of `c`. */
static uint32_t scalar_output(h_call *c, size_t i, const char *want, TRITONSERVER_DataType want_dt) {
  uint32_t count = 0;
  H_OK(TRITONSERVER_InferenceResponseOutputCount(c->responses[i], &count));
  for (uint32_t k = 0; k < count; k++) {
    const char *name;
    TRITONSERVER_DataType dt;
    const int64_t *shape;
    uint64_t dims;
    const void *base;
    size_t size;
    TRITONSERVER_MemoryType mt;
    int64_t mtid;
    void *userp;
    H_OK(TRITONSERVER_InferenceResponseOutput(c->responses[i], k, &name, &dt, &shape, &dims, &base, &size, &mt, &mtid,
                                              &userp));
    if (strcmp(name, want) != 0) continue;
    cr_assert_eq(dt, want_dt, "output %s of response %zu has type %d", want, i, (int)dt);
    cr_assert_eq(dims, 1u);
    cr_assert_eq(shape[0], 1);
    cr_assert_eq(size, 4u);
    uint32_t v;
    memcpy(&v, base, sizeof v);
    return v;
  }
  cr_assert_fail("response %zu has no output %s", i, want);
  return 0;
}

/* Checks the exact sequence for IN = in[0..n): n data responses (OUT, IDX)
 * without FINAL, then one flags-only FINAL and one release. */
static void expect_repeat_sequence(h_call *c, const int32_t *in, size_t n) {
  pthread_mutex_lock(&c->mu);
  size_t got = c->n;
  int finals = c->finals, released = c->released;
  pthread_mutex_unlock(&c->mu);
  cr_assert_eq(got, n + 1, "expected %zu callbacks, got %zu", n + 1, got);
  cr_assert_eq(finals, 1);
  cr_assert_eq(released, 1);
  for (size_t i = 0; i < n; i++) {
    cr_assert_not_null(c->responses[i], "response %zu is flags-only", i);
    cr_assert_eq(c->flags[i] & TRITONSERVER_RESPONSE_COMPLETE_FINAL, 0u, "response %zu is FINAL", i);
    char *err = h_response_error(c, i);
    cr_assert_null(err, "response %zu failed: %s", i, err);
    uint32_t count = 0;
    H_OK(TRITONSERVER_InferenceResponseOutputCount(c->responses[i], &count));
    cr_assert_eq(count, 2u);
    int32_t out = (int32_t)scalar_output(c, i, "OUT", TRITONSERVER_TYPE_INT32);
    uint32_t idx = scalar_output(c, i, "IDX", TRITONSERVER_TYPE_UINT32);
    cr_assert_eq(out, in[i], "response %zu: OUT %d, want %d", i, out, in[i]);
    cr_assert_eq(idx, (uint32_t)i, "response %zu: IDX %u", i, idx);
  }
  cr_assert_null(c->responses[n], "the last callback must be flags-only");
  cr_assert_eq(c->flags[n], (uint32_t)TRITONSERVER_RESPONSE_COMPLETE_FINAL);
}

/* Lets late, unexpected callbacks show up before counting. */
static void settle(void) { usleep(20 * 1000); }

/* ------------------------------------------------------------ tests */

Test(repeat, three_responses_in_order_spread_in_time) {
  char *repo;
  TRITONSERVER_Server *s = repeat_server(&repo);
  static const int32_t in[3] = {10, -20, 30};
  static const uint32_t delay[3] = {0, 100, 200};
  static const uint32_t wait = 100;
  TRITONSERVER_InferenceRequest *r = repeat_request(s, in, delay, 3, 3, &wait);
  timed_call *tc = timed_start(s, r);
  cr_assert(h_wait(tc->c, 10000), "no final response/release within 10 s");
  settle();
  expect_repeat_sequence(tc->c, in, 3);
  /* Element i is due at the sum of DELAY[0..i]: 0, 100, 300 ms; FINAL 400. */
  uint64_t *at = tc->at_ms;
  cr_assert_lt(at[0], 200u, "first response after %lu ms: responses are not streamed", (unsigned long)at[0]);
  cr_assert_geq(at[1], 95u, "second response after %lu ms, before its delay", (unsigned long)at[1]);
  cr_assert_geq(at[2], 295u, "third response after %lu ms, before its delays", (unsigned long)at[2]);
  cr_assert_geq(at[3], 395u, "final after %lu ms, before WAIT elapsed", (unsigned long)at[3]);
  cr_assert_geq(at[2] - at[0], 250u, "responses not spread in time: first %lu ms, last %lu ms", (unsigned long)at[0],
                (unsigned long)at[2]);
  timed_free(tc);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  server_done(s, repo);
  expect_no_leaks();
}

Test(repeat, zero_elements_gives_only_the_final) {
  char *repo;
  TRITONSERVER_Server *s = repeat_server(&repo);
  static const int32_t in[1] = {0};
  static const uint32_t delay[1] = {0};
  static const uint32_t wait = 0;
  TRITONSERVER_InferenceRequest *r = repeat_request(s, in, delay, 0, 0, &wait);
  h_call *c = h_infer(s, r);
  settle();
  expect_repeat_sequence(c, in, 0);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  server_done(s, repo);
  expect_no_leaks();
}

/* Expects one callback: an INVALID_ARG error response carrying FINAL whose
 * message contains `what`. */
static void expect_one_error(h_call *c, const char *what) {
  settle();
  pthread_mutex_lock(&c->mu);
  size_t got = c->n;
  int finals = c->finals, released = c->released;
  pthread_mutex_unlock(&c->mu);
  cr_assert_eq(got, 1u, "expected one error response, got %zu callbacks", got);
  cr_assert_eq(finals, 1);
  cr_assert_eq(released, 1);
  cr_assert_not_null(c->responses[0], "the error must be a real response");
  cr_assert(c->flags[0] & TRITONSERVER_RESPONSE_COMPLETE_FINAL);
  TRITONSERVER_Error *e = TRITONSERVER_InferenceResponseError(c->responses[0]);
  cr_assert_not_null(e, "the response must carry an error");
  cr_assert_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_INVALID_ARG, "code %s: %s",
               TRITONSERVER_ErrorCodeString(e), TRITONSERVER_ErrorMessage(e));
  cr_assert(strstr(TRITONSERVER_ErrorMessage(e), what), "message '%s' lacks '%s'", TRITONSERVER_ErrorMessage(e), what);
  TRITONSERVER_ErrorDelete(e);
}

Test(repeat, mismatched_lengths_give_an_error) {
  char *repo;
  TRITONSERVER_Server *s = repeat_server(&repo);
  static const int32_t in[3] = {1, 2, 3};
  static const uint32_t delay[2] = {0, 0};
  static const uint32_t wait = 0;
  TRITONSERVER_InferenceRequest *r = repeat_request(s, in, delay, 3, 2, &wait);
  h_call *c = h_infer(s, r);
  expect_one_error(c, "same number of elements");
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  /* The model still serves good requests afterwards. */
  static const uint32_t delay3[3] = {0, 0, 0};
  r = repeat_request(s, in, delay3, 3, 3, &wait);
  c = h_infer(s, r);
  settle();
  expect_repeat_sequence(c, in, 3);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  server_done(s, repo);
  expect_no_leaks();
}

Test(repeat, wrong_datatype_gives_an_error) {
  char *repo;
  TRITONSERVER_Server *s = repeat_server(&repo);
  static const int32_t in[2] = {1, 2};
  static const int32_t delay[2] = {0, 0};
  static const uint32_t wait = 0;
  TRITONSERVER_InferenceRequest *r = h_request(s, "rep");
  int64_t shape2[1] = {2}, shape1[1] = {1};
  h_add_input(r, "IN", TRITONSERVER_TYPE_INT32, shape2, 1, in, sizeof in);
  h_add_input(r, "DELAY", TRITONSERVER_TYPE_INT32, shape2, 1, delay, sizeof delay);
  h_add_input(r, "WAIT", TRITONSERVER_TYPE_UINT32, shape1, 1, &wait, sizeof wait);
  h_call *c = h_call_new();
  h_bind(r, c);
  TRITONSERVER_Error *e = TRITONSERVER_ServerInferAsync(s, r, NULL);
  if (e != NULL) {
    /* The core may reject the datatype against the config before the
     * backend sees it: that is an error too. */
    cr_assert_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_INVALID_ARG, "%s", TRITONSERVER_ErrorMessage(e));
    TRITONSERVER_ErrorDelete(e);
  } else {
    cr_assert(h_wait(c, 10000), "no final response/release within 10 s");
    expect_one_error(c, "DELAY");
  }
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  server_done(s, repo);
  expect_no_leaks();
}

Test(repeat, concurrent_requests_on_one_instance_interleave) {
  char *repo;
  TRITONSERVER_Server *s = repeat_server(&repo);
  /* Due times: A at 0, 200, 400 ms; B at 100, 300, 500 ms. */
  static const int32_t in_a[3] = {1, 2, 3}, in_b[3] = {7, 8, 9};
  static const uint32_t delay_a[3] = {0, 200, 200}, delay_b[3] = {100, 200, 200};
  static const uint32_t wait = 0;
  atomic_store(&g_seq, 0);
  TRITONSERVER_InferenceRequest *ra = repeat_request(s, in_a, delay_a, 3, 3, &wait);
  TRITONSERVER_InferenceRequest *rb = repeat_request(s, in_b, delay_b, 3, 3, &wait);
  timed_call *a = timed_start(s, ra);
  timed_call *b = timed_start(s, rb);
  cr_assert(h_wait(a->c, 10000), "A did not complete");
  cr_assert(h_wait(b->c, 10000), "B did not complete");
  settle();
  expect_repeat_sequence(a->c, in_a, 3);
  expect_repeat_sequence(b->c, in_b, 3);
  /* Neither request waits for the other: their responses alternate. */
  for (int i = 0; i < 3; i++) {
    cr_assert_lt(a->seq[i], b->seq[i], "A[%d] (#%d) after B[%d] (#%d)", i, a->seq[i], i, b->seq[i]);
    if (i + 1 < 3) {
      cr_assert_lt(b->seq[i], a->seq[i + 1], "B[%d] (#%d) after A[%d] (#%d)", i, b->seq[i], i + 1, a->seq[i + 1]);
    }
  }
  cr_assert_lt(b->at_ms[0], 350u, "B's first response after %lu ms: it waited for A", (unsigned long)b->at_ms[0]);
  timed_free(a);
  timed_free(b);
  H_OK(TRITONSERVER_InferenceRequestDelete(ra));
  H_OK(TRITONSERVER_InferenceRequestDelete(rb));
  server_done(s, repo);
  expect_no_leaks();
}

Test(repeat, cancellation_stops_early) {
  char *repo;
  TRITONSERVER_Server *s = repeat_server(&repo);
  enum { N = 100 };
  static int32_t in[N];
  static uint32_t delay[N];
  for (int i = 0; i < N; i++) {
    in[i] = i * 3;
    delay[i] = 50; /* 5 s in all */
  }
  static const uint32_t wait = 0;
  TRITONSERVER_InferenceRequest *r = repeat_request(s, in, delay, N, N, &wait);
  timed_call *tc = timed_start(s, r);
  uint64_t t0 = now_ms();
  for (;;) {
    pthread_mutex_lock(&tc->c->mu);
    size_t n = tc->c->n;
    pthread_mutex_unlock(&tc->c->mu);
    if (n >= 2 || now_ms() - t0 > 5000) break;
    usleep(1000);
  }
  H_OK(TRITONSERVER_InferenceRequestCancel(r));
  uint64_t t_cancel = now_ms();
  cr_assert(h_wait(tc->c, 10000), "cancelled request did not end");
  uint64_t took = now_ms() - t_cancel;
  settle();
  h_call *c = tc->c;
  size_t got = c->n;
  cr_assert_geq(got, 3u, "expected at least two responses and the end, got %zu", got);
  cr_assert_lt(got, (size_t)N + 1, "the request was not stopped early (%zu callbacks)", got);
  cr_assert_lt(took, 1000u, "the end came %lu ms after Cancel", (unsigned long)took);
  cr_assert_eq(c->finals, 1);
  cr_assert_eq(c->released, 1);
  for (size_t i = 0; i + 1 < got; i++) {
    cr_assert_eq(c->flags[i] & TRITONSERVER_RESPONSE_COMPLETE_FINAL, 0u, "response %zu is final", i);
    char *err = h_response_error(c, i);
    cr_assert_null(err, "response %zu failed: %s", i, err);
    cr_assert_eq((int32_t)scalar_output(c, i, "OUT", TRITONSERVER_TYPE_INT32), in[i]);
  }
  cr_assert(c->flags[got - 1] & TRITONSERVER_RESPONSE_COMPLETE_FINAL, "the last callback must be final");
  cr_assert_not_null(c->responses[got - 1], "the end of a cancelled request is an error response");
  TRITONSERVER_Error *e = TRITONSERVER_InferenceResponseError(c->responses[got - 1]);
  cr_assert_not_null(e, "the last response must carry the cancellation");
  cr_assert_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_CANCELLED);
  TRITONSERVER_ErrorDelete(e);
  timed_free(tc);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  server_done(s, repo);
  expect_no_leaks();
}

/* Unloading (server shutdown) while a request is still sending: every
 * response is still delivered, then the instance is joined. */
Test(repeat, shutdown_finishes_pending_requests) {
  char *repo;
  TRITONSERVER_Server *s = repeat_server(&repo);
  static const int32_t in[4] = {4, 3, 2, 1};
  static const uint32_t delay[4] = {0, 50, 50, 50};
  static const uint32_t wait = 50;
  TRITONSERVER_InferenceRequest *r = repeat_request(s, in, delay, 4, 4, &wait);
  timed_call *tc = timed_start(s, r);
  H_OK(TRITONSERVER_ServerDelete(s));
  cr_assert(h_wait(tc->c, 10000), "request did not complete");
  expect_repeat_sequence(tc->c, in, 4);
  timed_free(tc);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  h_rmtree(repo);
  free(repo);
  expect_no_leaks();
}

static json_int_t stat_int(json_t *o, const char *a, const char *b, const char *c) {
  json_t *v = json_object_get(o, a);
  if (b) v = json_object_get(v, b);
  if (c) v = json_object_get(v, c);
  cr_assert(json_is_integer(v), "statistic %s.%s.%s missing", a, b ? b : "", c ? c : "");
  return json_integer_value(v);
}

static json_t *model_stats(TRITONSERVER_Server *s) {
  TRITONSERVER_Message *m = NULL;
  H_OK(TRITONSERVER_ServerModelStatistics(s, "rep", -1, &m));
  char *text = h_msg_text(m);
  json_error_t je;
  json_t *root = json_loads(text, 0, &je);
  cr_assert_not_null(root, "statistics are not JSON: %s", text);
  free(text);
  json_t *one = json_incref(json_array_get(json_object_get(root, "model_stats"), 0));
  json_decref(root);
  cr_assert_not_null(one);
  return one;
}

/* Statistics are recorded before the first response reaches the client. */
Test(repeat, statistics_before_first_response) {
  char *repo;
  TRITONSERVER_Server *s = repeat_server(&repo);
  static const int32_t in[2] = {5, 6};
  static const uint32_t delay[2] = {0, 300};
  static const uint32_t wait = 0;
  TRITONSERVER_InferenceRequest *r = repeat_request(s, in, delay, 2, 2, &wait);
  timed_call *tc = timed_start(s, r);
  for (uint64_t t0 = now_ms(); now_ms() - t0 < 5000;) {
    pthread_mutex_lock(&tc->c->mu);
    size_t n = tc->c->n;
    pthread_mutex_unlock(&tc->c->mu);
    if (n >= 1) break;
    usleep(1000);
  }
  json_t *st = model_stats(s);
  cr_assert_eq(stat_int(st, "inference_count", NULL, NULL), 1);
  cr_assert_eq(stat_int(st, "execution_count", NULL, NULL), 1);
  cr_assert_eq(stat_int(st, "inference_stats", "success", "count"), 1);
  json_decref(st);
  cr_assert(h_wait(tc->c, 10000), "request did not complete");
  expect_repeat_sequence(tc->c, in, 2);
  timed_free(tc);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  server_done(s, repo);
  expect_no_leaks();
}

/* Triton's repeat takes any transaction policy, and its QA (L0_decoupled,
 * NonDecoupledTest) serves a one-element IN from a model that is not
 * decoupled: one response, then the final flag sent apart. */
Test(repeat, non_decoupled_config_answers_one_element) {
  char *repo = h_tmpdir();
  h_model(repo, "rep",
          "name: \"rep\"\nbackend: \"repeat\"\nmax_batch_size: 0\n" REPEAT_IO
          "instance_group [ { kind: KIND_CPU count: 1 } ]\n",
          "1");
  TRITONSERVER_Server *s = h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE));
  const int32_t in[1] = {7};
  const uint32_t delay[1] = {0}, wait = 0;
  TRITONSERVER_InferenceRequest *r = repeat_request(s, in, delay, 1, 1, &wait);
  h_call *c = h_infer(s, r);
  size_t got = 0;
  for (size_t i = 0; i < c->n; i++)
    if (c->responses[i]) {
      TRITONSERVER_Error *e = TRITONSERVER_InferenceResponseError(c->responses[i]);
      cr_expect_null(e, "%s", e ? TRITONSERVER_ErrorMessage(e) : "");
      if (e) TRITONSERVER_ErrorDelete(e);
      got++;
    }
  cr_expect_eq(got, 1, "%zu responses", got);
  cr_expect_eq(c->finals, 1);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  server_done(s, repo);
  expect_no_leaks();
}
