/* Shutdown and unload: ServerDelete/ServerStop with and without requests in
 * flight, explicit unload while requests are queued or streaming, repeated
 * load/unload cycles. */
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

#define IDENT_IO                                                                                                       \
  "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n"                                                  \
  "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n"

#define SLOW_IDENT_CONFIG                                                                                              \
  "name: \"slow\"\nbackend: \"identity\"\nmax_batch_size: 0\n" IDENT_IO                                                \
  "instance_group [ { kind: KIND_CPU count: 1 } ]\n"                                                                   \
  "parameters { key: \"execute_delay_ms\" value: { string_value: \"50\" } }\n"

static const float g_in[4] = {1, 2, 3, 4};

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static TRITONSERVER_InferenceRequest *ident_request(TRITONSERVER_Server *s, const char *model, h_call **call) {
  int64_t shape[1] = {4};
  TRITONSERVER_InferenceRequest *r = h_request(s, model);
  h_add_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, shape, 1, g_in, sizeof g_in);
  *call = h_call_new();
  h_bind(r, *call);
  return r;
}

/* Snapshot of a call's counters, taken under its lock. */
static void counts(h_call *c, size_t *n, int *finals, int *released) {
  pthread_mutex_lock(&c->mu);
  *n = c->n;
  *finals = c->finals;
  *released = c->released;
  pthread_mutex_unlock(&c->mu);
}

/* A completed identity call: one successful final response echoing g_in. */
static void expect_identity_ok(h_call *c, int i) {
  size_t n;
  int finals, released;
  counts(c, &n, &finals, &released);
  cr_assert_eq(n, 1u, "request %d: %zu responses", i, n);
  cr_assert_eq(finals, 1, "request %d: %d finals", i, finals);
  cr_assert_eq(released, 1, "request %d: released %d times", i, released);
  char *err = h_response_error(c, 0);
  cr_assert_null(err, "request %d failed: %s", i, err);
  const void *base;
  size_t size;
  H_OK(
      TRITONSERVER_InferenceResponseOutput(c->responses[0], 0, NULL, NULL, NULL, NULL, &base, &size, NULL, NULL, NULL));
  cr_assert_eq(size, sizeof g_in);
  cr_assert_eq(memcmp(base, g_in, sizeof g_in), 0);
}

/* Splits `text` into lines (modifies it); returns the count. */
static size_t split_lines(char *text, char **lines, size_t max) {
  size_t n = 0;
  for (char *tok = strtok(text, "\n"); tok && n < max; tok = strtok(NULL, "\n")) lines[n++] = tok;
  return n;
}

Test(shutdown, delete_idle_is_quick_and_finalizes) {
  char *repo = h_tmpdir();
  char *tmp = h_tmpdir();
  char record[4096];
  snprintf(record, sizeof record, "%s/record.txt", tmp);
  h_model(repo, "rec", "name: \"rec\"\nbackend: \"recorder\"\nmax_batch_size: 0\n" IDENT_IO, "1");
  TRITONSERVER_ServerOptions *o = h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE);
  H_OK(TRITONSERVER_ServerOptionsSetBackendConfig(o, "recorder", "record_file", record));
  TRITONSERVER_Server *s = h_server_new(o);
  bool ready = false;
  H_OK(TRITONSERVER_ServerModelIsReady(s, "rec", -1, &ready));
  cr_assert(ready);
  h_call *c;
  TRITONSERVER_InferenceRequest *r = ident_request(s, "rec", &c);
  H_OK(TRITONSERVER_ServerInferAsync(s, r, NULL));
  cr_assert(h_wait(c, 5000));
  expect_identity_ok(c, 0);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));

  uint64_t t0 = now_ms();
  H_OK(TRITONSERVER_ServerDelete(s));
  uint64_t took = now_ms() - t0;
  cr_assert_lt(took, 1000u, "ServerDelete with nothing in flight took %llu ms", (unsigned long long)took);

  char *text = h_read(record);
  char *lines[256];
  size_t n = split_lines(text, lines, 256);
  cr_assert_geq(n, 5u, "record file too short: %zu lines", n);
  cr_assert_str_eq(lines[n - 1], "Finalize", "last line: %s", lines[n - 1]);
  cr_assert_str_eq(lines[n - 2], "ModelFinalize rec", "line before last: %s", lines[n - 2]);
  /* Every initialized instance is finalized, before ModelFinalize. */
  size_t inits = 0, finis = 0, first_fini = n;
  for (size_t i = 0; i < n; i++) {
    if (!strncmp(lines[i], "ModelInstanceInitialize ", 24)) inits++;
    if (!strncmp(lines[i], "ModelInstanceFinalize ", 22)) {
      finis++;
      if (first_fini == n) first_fini = i;
    }
  }
  cr_assert_geq(inits, 1u);
  cr_assert_eq(finis, inits, "%zu instances initialized, %zu finalized", inits, finis);
  for (size_t i = first_fini; i < n - 2; i++)
    cr_assert(!strncmp(lines[i], "ModelInstanceFinalize ", 22), "unexpected line among finalizers: %s", lines[i]);
  free(text);
  h_rmtree(tmp);
  h_rmtree(repo);
  free(tmp);
  free(repo);
  expect_no_leaks();
}

Test(shutdown, stop_waits_for_in_flight) {
  char *repo = h_tmpdir();
  h_model(repo, "slow", SLOW_IDENT_CONFIG, "1");
  TRITONSERVER_Server *s = h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE));
  enum { N = 4 };
  TRITONSERVER_InferenceRequest *reqs[N];
  h_call *calls[N];
  for (int i = 0; i < N; i++) {
    reqs[i] = ident_request(s, "slow", &calls[i]);
    H_OK(TRITONSERVER_ServerInferAsync(s, reqs[i], NULL));
  }
  /* Made before Stop (afterwards RequestNew itself is refused). */
  h_call *late;
  TRITONSERVER_InferenceRequest *lr = ident_request(s, "slow", &late);
  usleep(10 * 1000);
  uint64_t t0 = now_ms();
  H_OK(TRITONSERVER_ServerStop(s));
  uint64_t took = now_ms() - t0;
  /* Checked right away: Stop may only return once every request is done. */
  for (int i = 0; i < N; i++) expect_identity_ok(calls[i], i);
  cr_assert_lt(took, 5000u, "Stop took %llu ms", (unsigned long long)took);
  /* A stopped server takes no new requests, and says so without callbacks. */
  TRITONSERVER_InferenceRequest *nr = NULL;
  TRITONSERVER_Error *e = TRITONSERVER_InferenceRequestNew(&nr, s, "slow", -1);
  cr_assert_not_null(e, "RequestNew after Stop must fail");
  TRITONSERVER_ErrorDelete(e);
  e = TRITONSERVER_ServerInferAsync(s, lr, NULL);
  cr_assert_not_null(e, "InferAsync after Stop must fail");
  TRITONSERVER_ErrorDelete(e);
  usleep(10 * 1000);
  cr_assert_eq(late->n, 0u);
  cr_assert_eq(late->released, 0);
  h_call_free(late);
  H_OK(TRITONSERVER_InferenceRequestDelete(lr));
  H_OK(TRITONSERVER_ServerDelete(s));
  for (int i = 0; i < N; i++) {
    h_call_free(calls[i]);
    H_OK(TRITONSERVER_InferenceRequestDelete(reqs[i]));
  }
  h_rmtree(repo);
  free(repo);
  expect_no_leaks();
}

/* A request the backend holds longer than the exit timeout: Stop gives up
 * waiting after about the timeout; the request still ends with a final
 * response and a release no later than ServerDelete. */
/* Disabled until Stop honours the exit timeout: nrd_model_unload (model_load.c)
 * joins the instance threads before its timed drain, so Stop blocks for as
 * long as Execute does. Enable with the fix. */
Test(shutdown, stop_with_stuck_request_honours_exit_timeout) {
  char *repo = h_tmpdir();
  h_model(repo, "cw",
          "name: \"cw\"\nbackend: \"cancel_wait\"\nmax_batch_size: 0\n" IDENT_IO
          "instance_group [ { kind: KIND_CPU count: 1 } ]\n"
          "parameters { key: \"max_wait_ms\" value: { string_value: \"3000\" } }\n",
          "1");
  TRITONSERVER_ServerOptions *o = h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE);
  H_OK(TRITONSERVER_ServerOptionsSetExitTimeout(o, 1));
  TRITONSERVER_Server *s = h_server_new(o);
  h_call *c;
  TRITONSERVER_InferenceRequest *r = ident_request(s, "cw", &c);
  H_OK(TRITONSERVER_ServerInferAsync(s, r, NULL));
  usleep(20 * 1000);
  uint64_t t0 = now_ms();
  TRITONSERVER_Error *e = TRITONSERVER_ServerStop(s);
  uint64_t took = now_ms() - t0;
  if (e) TRITONSERVER_ErrorDelete(e); /* Triton reports the expired timeout as an error; either is fine */
  cr_assert_geq(took, 800u, "Stop returned after %llu ms, before the exit timeout", (unsigned long long)took);
  cr_assert_lt(took, 2500u, "Stop took %llu ms with a 1 s exit timeout (backend holds the request 3 s)",
               (unsigned long long)took);
  H_OK(TRITONSERVER_ServerDelete(s));
  cr_assert(h_wait(c, 5000), "the stuck request never got its final response");
  size_t n;
  int finals, released;
  counts(c, &n, &finals, &released);
  cr_assert_eq(n, 1u);
  cr_assert_eq(finals, 1);
  cr_assert_eq(released, 1);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  h_rmtree(repo);
  free(repo);
  expect_no_leaks();
}

/* Same, but the backend gives up within the timeout: Stop returns as soon
 * as the request is done, and the request was answered before Stop returned. */
Test(shutdown, stop_waits_for_request_shorter_than_timeout) {
  char *repo = h_tmpdir();
  h_model(repo, "cw",
          "name: \"cw\"\nbackend: \"cancel_wait\"\nmax_batch_size: 0\n" IDENT_IO
          "instance_group [ { kind: KIND_CPU count: 1 } ]\n"
          "parameters { key: \"max_wait_ms\" value: { string_value: \"200\" } }\n",
          "1");
  TRITONSERVER_ServerOptions *o = h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE);
  H_OK(TRITONSERVER_ServerOptionsSetExitTimeout(o, 2));
  TRITONSERVER_Server *s = h_server_new(o);
  h_call *c;
  TRITONSERVER_InferenceRequest *r = ident_request(s, "cw", &c);
  H_OK(TRITONSERVER_ServerInferAsync(s, r, NULL));
  usleep(20 * 1000);
  uint64_t t0 = now_ms();
  TRITONSERVER_Error *e = TRITONSERVER_ServerStop(s);
  uint64_t took = now_ms() - t0;
  cr_assert_null(e, "Stop failed: %s", e ? TRITONSERVER_ErrorMessage(e) : "");
  size_t n;
  int finals, released;
  counts(c, &n, &finals, &released);
  cr_assert_eq(n, 1u, "request not answered before Stop returned");
  cr_assert_eq(finals, 1);
  cr_assert_eq(released, 1);
  cr_assert_lt(took, 1500u, "Stop took %llu ms", (unsigned long long)took);
  char *err = h_response_error(c, 0);
  cr_assert_not_null(err);
  cr_assert(strstr(err, "max_wait_ms"), "%s", err);
  free(err);
  H_OK(TRITONSERVER_ServerDelete(s));
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  h_rmtree(repo);
  free(repo);
  expect_no_leaks();
}

Test(shutdown, unload_with_queued_requests) {
  char *repo = h_tmpdir();
  h_model(repo, "slow", SLOW_IDENT_CONFIG, "1");
  TRITONSERVER_Server *s = h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_EXPLICIT));
  H_OK(TRITONSERVER_ServerLoadModel(s, "slow"));
  enum { N = 4 };
  TRITONSERVER_InferenceRequest *reqs[N];
  h_call *calls[N];
  for (int i = 0; i < N; i++) {
    reqs[i] = ident_request(s, "slow", &calls[i]);
    H_OK(TRITONSERVER_ServerInferAsync(s, reqs[i], NULL));
  }
  /* Made before the unload, submitted after it. */
  h_call *late;
  TRITONSERVER_InferenceRequest *lr = ident_request(s, "slow", &late);
  usleep(10 * 1000);
  H_OK(TRITONSERVER_ServerUnloadModel(s, "slow"));
  bool ready = true;
  H_OK(TRITONSERVER_ServerModelIsReady(s, "slow", -1, &ready));
  cr_assert(!ready, "model still ready after the unload call");
  TRITONSERVER_Error *e = TRITONSERVER_ServerInferAsync(s, lr, NULL);
  cr_assert_not_null(e, "a request submitted after the unload call must be rejected");
  TRITONSERVER_ErrorDelete(e);
  /* A brand-new request is rejected too, at creation or at submission. */
  TRITONSERVER_InferenceRequest *nr = NULL;
  e = TRITONSERVER_InferenceRequestNew(&nr, s, "slow", -1);
  if (!e) {
    int64_t shape[1] = {4};
    h_add_input(nr, "INPUT0", TRITONSERVER_TYPE_FP32, shape, 1, g_in, sizeof g_in);
    h_bind(nr, late);
    e = TRITONSERVER_ServerInferAsync(s, nr, NULL);
    cr_assert_not_null(e, "a new request after the unload call must be rejected");
    H_OK(TRITONSERVER_InferenceRequestDelete(nr));
  }
  TRITONSERVER_ErrorDelete(e);
  for (int i = 0; i < N; i++) cr_assert(h_wait(calls[i], 5000), "queued request %d never completed", i);
  for (int i = 0; i < N; i++) expect_identity_ok(calls[i], i);
  usleep(10 * 1000);
  cr_assert_eq(late->n, 0u, "a rejected request got a response");
  cr_assert_eq(late->released, 0, "a rejected request was released through its callback");
  H_OK(TRITONSERVER_ServerDelete(s));
  for (int i = 0; i < N; i++) {
    h_call_free(calls[i]);
    H_OK(TRITONSERVER_InferenceRequestDelete(reqs[i]));
  }
  h_call_free(late);
  H_OK(TRITONSERVER_InferenceRequestDelete(lr));
  h_rmtree(repo);
  free(repo);
  expect_no_leaks();
}

/* A decoupled stream in flight during unload: every response arrives, and
 * the unload (awaited by ServerDelete) ends after the stream did. */
static atomic_int g_slow_stream;

static void on_response_slow(TRITONSERVER_InferenceResponse *r, const uint32_t flags, void *userp) {
  if (atomic_load(&g_slow_stream)) usleep(1000);
  h_on_response(r, flags, userp);
}

Test(shutdown, unload_during_decoupled_stream) {
  char *repo = h_tmpdir();
  h_model(repo, "sq",
          "name: \"sq\"\nbackend: \"square\"\nmax_batch_size: 0\n"
          "model_transaction_policy { decoupled: true }\n"
          "input [ { name: \"IN\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
          "output [ { name: \"OUT\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
          "instance_group [ { kind: KIND_CPU count: 1 } ]\n",
          "1");
  TRITONSERVER_Server *s = h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_EXPLICIT));
  H_OK(TRITONSERVER_ServerLoadModel(s, "sq"));
  const int32_t n = 150;
  int64_t shape[1] = {1};
  TRITONSERVER_InferenceRequest *r = h_request(s, "sq");
  h_add_input(r, "IN", TRITONSERVER_TYPE_INT32, shape, 1, &n, sizeof n);
  h_call *c = h_call_new();
  h_bind(r, c);
  H_OK(TRITONSERVER_InferenceRequestSetResponseCallback(r, h_allocator(), c, on_response_slow, c));
  atomic_store(&g_slow_stream, 1);
  H_OK(TRITONSERVER_ServerInferAsync(s, r, NULL));
  uint64_t t0 = now_ms();
  size_t got;
  int finals, released;
  do {
    usleep(1000);
    counts(c, &got, &finals, &released);
  } while (got < 3 && now_ms() - t0 < 5000);
  cr_assert_geq(got, 3u, "square did not start streaming");
  H_OK(TRITONSERVER_ServerUnloadModel(s, "sq"));
  counts(c, &got, &finals, &released);
  cr_assert_eq(finals, 0, "stream finished before the unload call; test not meaningful");
  H_OK(TRITONSERVER_ServerDelete(s)); /* waits for the background unload */
  counts(c, &got, &finals, &released);
  cr_assert_eq(got, (size_t)n + 1, "%zu of %d responses + final arrived before the unload ended", got, n);
  cr_assert_eq(finals, 1);
  cr_assert_eq(released, 1);
  for (int32_t i = 0; i < n; i++) {
    cr_assert_not_null(c->responses[i]);
    cr_assert_null(h_response_error(c, (size_t)i));
  }
  cr_assert_null(c->responses[n]);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  h_rmtree(repo);
  free(repo);
  expect_no_leaks();
}

Test(shutdown, load_unload_cycles) {
  char *repo = h_tmpdir();
  h_model(repo, "ident", "name: \"ident\"\nbackend: \"identity\"\nmax_batch_size: 0\n" IDENT_IO, "1");
  TRITONSERVER_Server *s = h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_EXPLICIT));
  for (int cycle = 0; cycle < 20; cycle++) {
    H_OK(TRITONSERVER_ServerLoadModel(s, "ident"));
    bool ready = false;
    H_OK(TRITONSERVER_ServerModelIsReady(s, "ident", -1, &ready));
    cr_assert(ready, "cycle %d: not ready after load", cycle);
    for (int k = 0; k < 2; k++) {
      h_call *c;
      TRITONSERVER_InferenceRequest *r = ident_request(s, "ident", &c);
      H_OK(TRITONSERVER_ServerInferAsync(s, r, NULL));
      cr_assert(h_wait(c, 5000), "cycle %d: no answer", cycle);
      expect_identity_ok(c, cycle);
      h_call_free(c);
      H_OK(TRITONSERVER_InferenceRequestDelete(r));
    }
    H_OK(TRITONSERVER_ServerUnloadModel(s, "ident"));
    H_OK(TRITONSERVER_ServerModelIsReady(s, "ident", -1, &ready));
    cr_assert(!ready, "cycle %d: still ready after unload", cycle);
  }
  H_OK(TRITONSERVER_ServerDelete(s));
  h_rmtree(repo);
  free(repo);
  expect_no_leaks();
}

/* ServerDelete without a prior Stop drains in-flight requests too. */
Test(shutdown, delete_drains_in_flight) {
  char *repo = h_tmpdir();
  h_model(repo, "slow", SLOW_IDENT_CONFIG, "1");
  TRITONSERVER_Server *s = h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE));
  enum { N = 3 };
  TRITONSERVER_InferenceRequest *reqs[N];
  h_call *calls[N];
  for (int i = 0; i < N; i++) {
    reqs[i] = ident_request(s, "slow", &calls[i]);
    H_OK(TRITONSERVER_ServerInferAsync(s, reqs[i], NULL));
  }
  usleep(10 * 1000);
  H_OK(TRITONSERVER_ServerDelete(s));
  for (int i = 0; i < N; i++) {
    expect_identity_ok(calls[i], i);
    h_call_free(calls[i]);
    H_OK(TRITONSERVER_InferenceRequestDelete(reqs[i]));
  }
  h_rmtree(repo);
  free(repo);
  expect_no_leaks();
}
