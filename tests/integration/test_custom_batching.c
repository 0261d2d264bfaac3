/* Custom batching hooks (TRITONBACKEND_ModelBatch*): the batch_limit test
 * backend lets a request join a batch only while the summed byte size of
 * INPUT0 stays within max_batch_volume. Checked through the model's batch
 * statistics and the hook calls the backend records; the same queue
 * without hooks (identity) forms one big batch, so these tests fail when the
 * batcher ignores the hooks.
 *
 * Arrangement: one instance with an Execute delay; a first request occupies
 * it while the others queue, so the batches formed afterwards depend only
 * on the batcher, not on timing. */
#include <inttypes.h>
#include <jansson.h>

#include "harness.h"

static const float g_vals[256];

/* A model of `backend` with INPUT0/OUTPUT0 FP32 [4] (16 bytes a row),
 * max_batch_size 8, one instance delaying each Execute by 300 ms and the
 * given extra parameters (pbtxt lines). */
static void limit_model(const char *repo, const char *name, const char *backend, const char *params) {
  char cfg[4096];
  snprintf(cfg, sizeof cfg,
           "name: \"%s\"\nbackend: \"%s\"\nmax_batch_size: 8\n"
           "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n"
           "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n"
           "instance_group [ { kind: KIND_CPU count: 1 } ]\n"
           "parameters { key: \"execute_delay_ms\" value: { string_value: \"300\" } }\n"
           "%s\n"
           "dynamic_batching { }\n",
           name, backend, params ? params : "");
  h_model(repo, name, cfg, "1");
}

static TRITONSERVER_Server *start(const char *repo) {
  return h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE));
}

/* Submits a request of `rows` rows with id `id`. */
static TRITONSERVER_InferenceRequest *submit(TRITONSERVER_Server *s, const char *model, int64_t rows, const char *id,
                                             h_call **call) {
  int64_t shape[2] = {rows, 4};
  TRITONSERVER_InferenceRequest *r = h_request(s, model);
  H_OK(TRITONSERVER_InferenceRequestSetId(r, id));
  h_add_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, shape, 2, g_vals, (size_t)rows * 4 * sizeof(float));
  *call = h_call_new();
  h_bind(r, *call);
  H_OK(TRITONSERVER_ServerInferAsync(s, r, NULL));
  return r;
}

static void expect_success(h_call *c, const char *what) {
  cr_assert(h_wait(c, 30000), "%s: no answer within 30 s", what);
  char *e = h_response_error(c, 0);
  cr_assert_null(e, "%s failed: %s", what, e ? e : "");
}

typedef struct batches {
  uint64_t size[64], count[64];
  int n;
  uint64_t rows;
} batches;

static void read_batches(TRITONSERVER_Server *s, const char *model, batches *b) {
  memset(b, 0, sizeof(*b));
  TRITONSERVER_Message *msg = NULL;
  H_OK(TRITONSERVER_ServerModelStatistics(s, model, -1, &msg));
  char *text = h_msg_text(msg);
  json_t *j = json_loads(text, 0, NULL);
  cr_assert_not_null(j, "statistics are not JSON: %s", text);
  json_t *bs = json_object_get(json_array_get(json_object_get(j, "model_stats"), 0), "batch_stats");
  size_t i;
  json_t *e;
  json_array_foreach(bs, i, e) {
    if (b->n == 64) break;
    b->size[b->n] = (uint64_t)json_integer_value(json_object_get(e, "batch_size"));
    b->count[b->n] = (uint64_t)json_integer_value(json_object_get(json_object_get(e, "compute_infer"), "count"));
    b->rows += b->size[b->n] * b->count[b->n];
    b->n++;
  }
  json_decref(j);
  free(text);
}

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Polls until `rows` rows were reported (the backend reports a batch after
 * answering it), 30 s at most by the clock. */
static void wait_batches(TRITONSERVER_Server *s, const char *model, uint64_t rows, batches *b) {
  for (uint64_t until = now_ms() + 30000; now_ms() < until;) {
    read_batches(s, model, b);
    if (b->rows >= rows) return;
    usleep(10 * 1000);
  }
  cr_assert_fail("batch statistics of '%s' show %" PRIu64 " rows, expected %" PRIu64, model, b->rows, rows);
}

static uint64_t executions_of(const batches *b, uint64_t size) {
  for (int i = 0; i < b->n; i++)
    if (b->size[i] == size) return b->count[i];
  return 0;
}

static uint64_t largest(const batches *b) {
  uint64_t m = 0;
  for (int i = 0; i < b->n; i++)
    if (b->count[i] && b->size[i] > m) m = b->size[i];
  return m;
}

/* `b` less what `base` had already counted, size by size. */
static void batches_minus(batches *b, const batches *base) {
  for (int i = 0; i < b->n; i++)
    for (int k = 0; k < base->n; k++)
      if (base->size[k] == b->size[i]) {
        b->count[i] -= base->count[k];
        b->rows -= base->size[k] * base->count[k];
      }
}

/* One blocker, then `n` one-row requests queued behind it; waits for every
 * answer and the statistics of 1 + n rows; `b` holds this round's batches.
 * That the blocker was executing (not queued with the others) when they
 * were sent is proven, not assumed after a sleep: Execute sleeps 300 ms,
 * so an answer in hand less than 300 ms after they were sent means it
 * began before. Unproven (a loaded machine ran the instance late), the
 * round runs again with a longer head start, up to 8 times. */
static void run_queue(TRITONSERVER_Server *s, const char *model, int n, batches *b) {
  TRITONSERVER_InferenceRequest *r[16];
  h_call *c[16];
  bool proven = false;
  for (int attempt = 0; attempt < 8 && !proven; attempt++) {
    batches base;
    read_batches(s, model, &base);
    r[0] = submit(s, model, 1, "blocker", &c[0]);
    usleep((useconds_t)(attempt < 2 ? 100 : 200) * 1000); /* head start for the blocker */
    uint64_t others_sent = now_ms();
    for (int i = 1; i <= n; i++) {
      char id[16];
      snprintf(id, sizeof id, "r%d", i);
      r[i] = submit(s, model, 1, id, &c[i]);
    }
    expect_success(c[0], "blocker");
    proven = now_ms() < others_sent + 300;
    for (int i = 1; i <= n; i++) expect_success(c[i], "request");
    wait_batches(s, model, base.rows + (uint64_t)n + 1, b);
    batches_minus(b, &base);
    for (int i = 0; i <= n; i++) {
      h_call_free(c[i]);
      H_OK(TRITONSERVER_InferenceRequestDelete(r[i]));
    }
  }
  cr_assert(proven, "in 8 rounds the blocker never began executing before the others were sent");
}

static int count_lines(const char *text, const char *line) {
  int n = 0;
  size_t len = strlen(line);
  for (const char *p = text; p && *p;) {
    const char *end = strchr(p, '\n');
    size_t l = end ? (size_t)(end - p) : strlen(p);
    if (l == len && !strncmp(p, line, len)) n++;
    p = end ? end + 1 : NULL;
  }
  return n;
}

static const char *last_line(const char *text, char *buf, size_t cap) {
  size_t len = strlen(text);
  while (len && text[len - 1] == '\n') len--;
  size_t start = len;
  while (start && text[start - 1] != '\n') start--;
  snprintf(buf, cap, "%.*s", (int)(len - start), text + start);
  return buf;
}

/* ------------------------------------------------------------ tests */

/* Without hooks the six queued requests form one batch: the control that
 * shows the hooked tests below measure the hooks. */
Test(custom_batching, control_without_hooks_one_batch) {
  char *repo = h_tmpdir();
  limit_model(repo, "plain", "identity", NULL);
  TRITONSERVER_Server *s = start(repo);
  batches b;
  run_queue(s, "plain", 6, &b);
  cr_assert_eq(largest(&b), 6, "identity batched %" PRIu64 " rows at most, expected 6", largest(&b));
  H_OK(TRITONSERVER_ServerDelete(s));
  h_rmtree(repo);
  free(repo);
}

/* 32 bytes a batch, 16 bytes a request: batches of 2; every hook call is
 * balanced and the batcher lives exactly as long as the model. */
Test(custom_batching, volume_limit_splits_batches) {
  char *repo = h_tmpdir();
  char record[4200], params[4600];
  snprintf(record, sizeof record, "%s/record.txt", repo);
  snprintf(params, sizeof params,
           "parameters { key: \"max_batch_volume\" value: { string_value: \"32\" } }\n"
           "parameters { key: \"record_file\" value: { string_value: \"%s\" } }",
           record);
  limit_model(repo, "limited", "batch_limit", params);
  TRITONSERVER_Server *s = start(repo);
  batches b;
  run_queue(s, "limited", 6, &b);
  cr_assert_eq(largest(&b), 2, "largest batch %" PRIu64 " rows, the hooks allow 2", largest(&b));
  cr_assert_eq(executions_of(&b, 2), 3, "%" PRIu64 " batches of 2, expected 3", executions_of(&b, 2));
  H_OK(TRITONSERVER_ServerDelete(s));

  char *text = h_read(record);
  char last[128];
  cr_assert(!strncmp(text, "BatcherInitialize\n", 18), "record starts: %.60s", text);
  cr_assert_str_eq(last_line(text, last, sizeof last), "BatcherFinalize");
  cr_assert_eq(count_lines(text, "BatcherInitialize"), 1);
  cr_assert_eq(count_lines(text, "BatcherFinalize"), 1);
  int inits = count_lines(text, "BatchInitialize"), finis = count_lines(text, "BatchFinalize");
  cr_assert_geq(inits, 4, "%d batches formed", inits);
  cr_assert_eq(inits, finis, "%d BatchInitialize, %d BatchFinalize", inits, finis);
  /* The third request of the first batch was asked and refused. */
  cr_assert_geq(count_lines(text, "Include r3 0"), 1, "r3 never refused:\n%s", text);
  free(text);
  h_rmtree(repo);
  free(repo);
}

/* A request larger than the limit on its own is refused even as the first
 * of a batch; it still runs, alone. */
Test(custom_batching, oversized_request_runs_alone) {
  char *repo = h_tmpdir();
  limit_model(repo, "limited", "batch_limit",
              "parameters { key: \"max_batch_volume\" value: { string_value: \"32\" } }");
  TRITONSERVER_Server *s = start(repo);
  h_call *c;
  TRITONSERVER_InferenceRequest *r = submit(s, "limited", 4, "big", &c);
  expect_success(c, "oversized request");
  batches b;
  wait_batches(s, "limited", 4, &b);
  cr_assert_eq(executions_of(&b, 4), 1);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  H_OK(TRITONSERVER_ServerDelete(s));
  h_rmtree(repo);
  free(repo);
}

/* An include error is logged and counts as "not included" (Triton's
 * rule): every request still succeeds, each in a batch of its own. */
Test(custom_batching, include_error_ends_batch) {
  char *repo = h_tmpdir();
  limit_model(repo, "limited", "batch_limit", "parameters { key: \"fail_at\" value: { string_value: \"include\" } }");
  TRITONSERVER_Server *s = start(repo);
  batches b;
  run_queue(s, "limited", 4, &b);
  cr_assert_eq(largest(&b), 1, "largest batch %" PRIu64 ", expected 1", largest(&b));
  cr_assert_eq(executions_of(&b, 1), 5);
  H_OK(TRITONSERVER_ServerDelete(s));
  h_rmtree(repo);
  free(repo);
}

/* ModelBatchInitialize failing leaves no batch state: the error is only
 * logged, include still runs (here: no limit), and ModelBatchFinalize is
 * not called for a NULL state, as in Triton. */
Test(custom_batching, batch_init_error_is_logged_only) {
  char *repo = h_tmpdir();
  char record[4200], params[4600];
  snprintf(record, sizeof record, "%s/record.txt", repo);
  snprintf(params, sizeof params,
           "parameters { key: \"max_batch_volume\" value: { string_value: \"32\" } }\n"
           "parameters { key: \"fail_at\" value: { string_value: \"batch_init\" } }\n"
           "parameters { key: \"record_file\" value: { string_value: \"%s\" } }",
           record);
  limit_model(repo, "limited", "batch_limit", params);
  TRITONSERVER_Server *s = start(repo);
  batches b;
  run_queue(s, "limited", 6, &b);
  cr_assert_eq(largest(&b), 6);
  H_OK(TRITONSERVER_ServerDelete(s));
  char *text = h_read(record);
  cr_assert_geq(count_lines(text, "BatchInitialize"), 2);
  cr_assert_eq(count_lines(text, "BatchFinalize"), 0, "finalize called on no state:\n%s", text);
  cr_assert_eq(count_lines(text, "BatcherFinalize"), 1);
  free(text);
  h_rmtree(repo);
  free(repo);
}

static TRITONSERVER_Error *load_explicit(const char *repo, const char *model, TRITONSERVER_Server **out) {
  *out = h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_EXPLICIT));
  return TRITONSERVER_ServerLoadModel(*out, model);
}

/* ModelBatcherInitialize failing fails the load with the backend's error. */
Test(custom_batching, batcher_init_error_fails_load) {
  char *repo = h_tmpdir();
  limit_model(repo, "limited", "batch_limit",
              "parameters { key: \"fail_at\" value: { string_value: \"batcher_init\" } }");
  TRITONSERVER_Server *s;
  TRITONSERVER_Error *e = load_explicit(repo, "limited", &s);
  cr_assert_not_null(e, "load succeeded");
  cr_assert_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_INVALID_ARG, "%s", TRITONSERVER_ErrorMessage(e));
  cr_assert(strstr(TRITONSERVER_ErrorMessage(e), "batcher initialization failed as asked"), "%s",
            TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
  H_OK(TRITONSERVER_ServerDelete(s));
  h_rmtree(repo);
  free(repo);
}

/* Triton's other way to give hooks: a batchstrategy.so next to the model,
 * here batch_limit's library under an identity model. */
Test(custom_batching, strategy_library_in_model_folder) {
  char *repo = h_tmpdir();
  limit_model(repo, "plain", "identity", "parameters { key: \"max_batch_volume\" value: { string_value: \"32\" } }");
  char lib[4200];
  snprintf(lib, sizeof lib, "%s/plain/batchstrategy.so", repo);
  cr_assert_eq(symlink(NRD_TEST_BACKEND_DIR "/batch_limit/libtriton_batch_limit.so", lib), 0);
  TRITONSERVER_Server *s = start(repo);
  batches b;
  run_queue(s, "plain", 6, &b);
  cr_assert_eq(largest(&b), 2, "largest batch %" PRIu64 ", the strategy allows 2", largest(&b));
  H_OK(TRITONSERVER_ServerDelete(s));
  h_rmtree(repo);
  free(repo);
}

/* TRITON_BATCH_STRATEGY_PATH naming a missing file in the model folder
 * fails the load. */
Test(custom_batching, strategy_path_not_found) {
  char *repo = h_tmpdir();
  char params[4400];
  snprintf(params, sizeof params,
           "parameters { key: \"TRITON_BATCH_STRATEGY_PATH\" value: { string_value: \"%s/plain/b.so\" } }", repo);
  limit_model(repo, "plain", "identity", params);
  TRITONSERVER_Server *s;
  TRITONSERVER_Error *e = load_explicit(repo, "plain", &s);
  cr_assert_not_null(e, "load succeeded");
  /* Triton wraps the backend's NOT_FOUND in the load's INVALID_ARG. */
  cr_assert_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_INVALID_ARG, "%s", TRITONSERVER_ErrorMessage(e));
  cr_assert(strstr(TRITONSERVER_ErrorMessage(e), "UNAVAILABLE state: Not found: Batching library path not found: "),
            "%s", TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
  H_OK(TRITONSERVER_ServerDelete(s));
  h_rmtree(repo);
  free(repo);
}

/* TRITON_BATCH_STRATEGY_PATH outside the model folder (a path, "..", a
 * link) is refused before anything is opened, as Triton (core dcb315d). */
Test(custom_batching, strategy_path_outside_the_model_is_refused) {
  char *repo = h_tmpdir();
  char link[4200];
  snprintf(link, sizeof link, "%s/plain/linked.so", repo);
  const char *paths[] = {NRD_TEST_BACKEND_DIR "/batch_limit/libtriton_batch_limit.so", "/nonexistent/b.so",
                         "%s/plain/../b.so", "%s/plain/linked.so"};
  for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
    char path[4400], params[4600];
    snprintf(path, sizeof path, paths[i], repo);
    snprintf(params, sizeof params,
             "parameters { key: \"TRITON_BATCH_STRATEGY_PATH\" value: { string_value: \"%s\" } }", path);
    limit_model(repo, "plain", "identity", params);
    if (i == 3) cr_assert_eq(symlink(NRD_TEST_BACKEND_DIR "/batch_limit/libtriton_batch_limit.so", link), 0);
    TRITONSERVER_Server *s;
    TRITONSERVER_Error *e = load_explicit(repo, "plain", &s);
    cr_assert_not_null(e, "load of %s succeeded", path);
    cr_assert_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_INVALID_ARG, "%s", TRITONSERVER_ErrorMessage(e));
    cr_assert(strstr(TRITONSERVER_ErrorMessage(e), "Batching library path escapes model repository."), "%s",
              TRITONSERVER_ErrorMessage(e));
    TRITONSERVER_ErrorDelete(e);
    H_OK(TRITONSERVER_ServerDelete(s));
  }
  h_rmtree(repo);
  free(repo);
}

/* A copy of file `from` at `to`. */
static void copy_binary(const char *from, const char *to) {
  FILE *in = fopen(from, "rb");
  cr_assert_not_null(in, "open %s", from);
  FILE *out = fopen(to, "wb");
  cr_assert_not_null(out, "write %s", to);
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, in)) > 0) cr_assert_eq(fwrite(buf, 1, n, out), n);
  fclose(in);
  cr_assert_eq(fclose(out), 0);
}

/* TRITON_BATCH_STRATEGY_PATH naming a library (in the model folder, as
 * Triton requires) applies its hooks. */
Test(custom_batching, strategy_path_parameter) {
  char *repo = h_tmpdir();
  char lib[4200], params[4600];
  snprintf(lib, sizeof lib, "%s/plain/strategy.so", repo);
  snprintf(params, sizeof params,
           "parameters { key: \"max_batch_volume\" value: { string_value: \"32\" } }\n"
           "parameters { key: \"TRITON_BATCH_STRATEGY_PATH\" value: { string_value: \"%s\" } }",
           lib);
  limit_model(repo, "plain", "identity", params);
  copy_binary(NRD_TEST_BACKEND_DIR "/batch_limit/libtriton_batch_limit.so", lib);
  TRITONSERVER_Server *s = start(repo);
  batches b;
  run_queue(s, "plain", 4, &b);
  cr_assert_eq(largest(&b), 2, "largest batch %" PRIu64 ", the strategy allows 2", largest(&b));
  H_OK(TRITONSERVER_ServerDelete(s));
  h_rmtree(repo);
  free(repo);
}
