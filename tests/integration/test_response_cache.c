/* The response cache: with a local cache configured, a model whose config
 * enables it answers a repeated request from the cache without executing,
 * counts hits and misses as Triton does, keys on everything that changes
 * the answer, evicts the least recently used, serves what it cannot store,
 * caches an ensemble as a whole, and refuses bad configurations with clear
 * messages. */
#include "harness.h"

#define ADDSUB_CFG(name, cache)                                                                                        \
  "name: \"" name "\"\nbackend: \"add_sub\"\nmax_batch_size: 0\n"                                                      \
  "input [ { name: \"INPUT0\" data_type: TYPE_INT32 dims: [ 4 ] },\n"                                                  \
  "        { name: \"INPUT1\" data_type: TYPE_INT32 dims: [ 4 ] } ]\n"                                                 \
  "output [ { name: \"OUTPUT0\" data_type: TYPE_INT32 dims: [ 4 ] },\n"                                                \
  "         { name: \"OUTPUT1\" data_type: TYPE_INT32 dims: [ 4 ] } ]\n"                                               \
  "response_cache { enable: " cache " }\n"

#define IDENTITY_CFG(name, cache)                                                                                      \
  "name: \"" name "\"\nbackend: \"identity\"\nmax_batch_size: 0\n"                                                     \
  "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ -1, -1 ] } ]\n"                                             \
  "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ -1, -1 ] } ]\n"                                           \
  "response_cache { enable: " cache " }\n"

static const int32_t A[4] = {1, 2, 3, 4}, B[4] = {10, 20, 30, 40};

static TRITONSERVER_Server *cached_server(const char *repo, const char *config_json) {
  TRITONSERVER_ServerOptions *o = h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE);
  if (config_json) H_OK(TRITONSERVER_ServerOptionsSetCacheConfig(o, "local", config_json));
  return h_server_new(o);
}

/* add_sub on A and B asking for `only` (NULL: every output); the caller
 * frees the call and deletes the request. */
static h_call *addsub(TRITONSERVER_Server *s, const char *model, const char *only,
                      TRITONSERVER_InferenceRequest **req) {
  int64_t shape[1] = {4};
  TRITONSERVER_InferenceRequest *r = h_request(s, model);
  h_add_input(r, "INPUT0", TRITONSERVER_TYPE_INT32, shape, 1, A, sizeof A);
  h_add_input(r, "INPUT1", TRITONSERVER_TYPE_INT32, shape, 1, B, sizeof B);
  if (only) H_OK(TRITONSERVER_InferenceRequestAddRequestedOutput(r, only));
  *req = r;
  h_call *c = h_infer(s, r);
  char *err = h_response_error(c, 0);
  cr_assert_null(err, "%s", err);
  return c;
}

static void expect_sums(h_call *c) {
  h_output o;
  cr_assert(h_find_output(c->responses[0], "OUTPUT0", &o));
  cr_assert_eq(o.size, sizeof A);
  for (int i = 0; i < 4; i++) cr_expect_eq(((const int32_t *)o.base)[i], A[i] + B[i]);
  cr_assert(h_find_output(c->responses[0], "OUTPUT1", &o));
  for (int i = 0; i < 4; i++) cr_expect_eq(((const int32_t *)o.base)[i], A[i] - B[i]);
}

static void done(h_call *c, TRITONSERVER_InferenceRequest *r) {
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
}

/* identity on `data` (n floats) shaped `shape` (2 dims), split into
 * `pieces` buffers; returns the call (caller frees) and the request. */
static h_call *identity(TRITONSERVER_Server *s, const char *model, const float *data, size_t n, const int64_t *shape,
                        int pieces, TRITONSERVER_InferenceRequest **req) {
  TRITONSERVER_InferenceRequest *r = h_request(s, model);
  H_OK(TRITONSERVER_InferenceRequestAddInput(r, "INPUT0", TRITONSERVER_TYPE_FP32, shape, 2));
  size_t first = pieces > 1 ? n / 2 - 1 : n;
  H_OK(TRITONSERVER_InferenceRequestAppendInputData(r, "INPUT0", data, first * sizeof(float), TRITONSERVER_MEMORY_CPU,
                                                    0));
  if (first < n)
    H_OK(TRITONSERVER_InferenceRequestAppendInputData(r, "INPUT0", data + first, (n - first) * sizeof(float),
                                                      TRITONSERVER_MEMORY_CPU, 0));
  *req = r;
  h_call *c = h_infer(s, r);
  char *err = h_response_error(c, 0);
  cr_assert_null(err, "%s", err);
  return c;
}

Test(response_cache, a_repeated_request_is_answered_without_executing) {
  char *repo = h_tmpdir();
  h_model(repo, "addsub", ADDSUB_CFG("addsub", "true"), "1");
  TRITONSERVER_Server *s = cached_server(repo, "{\"size\": 1048576}");
  TRITONSERVER_InferenceRequest *r1, *r2;
  h_call *c1 = addsub(s, "addsub", NULL, &r1);
  h_call *c2 = addsub(s, "addsub", NULL, &r2);
  expect_sums(c1);
  expect_sums(c2);
  cr_expect_eq(c2->finals, 1);
  cr_expect_eq(c2->released, 1);
  const char *id = NULL;
  cr_expect_eq(h_stat_count(s, "addsub", "execution_count"), 1);
  cr_expect_eq(h_stat_count(s, "addsub", "inference_count"), 1);
  cr_expect_eq(h_stat_count(s, "addsub", "success"), 2);
  cr_expect_eq(h_stat_count(s, "addsub", "queue"), 2);
  cr_expect_eq(h_stat_count(s, "addsub", "cache_hit"), 1);
  cr_expect_eq(h_stat_count(s, "addsub", "cache_miss"), 1);
  cr_expect_eq(h_stat_count(s, "addsub", "compute_infer"), 1);
  /* The answer names the model, as an executed one does. */
  const char *mname = NULL;
  int64_t mver = 0;
  H_OK(TRITONSERVER_InferenceResponseModel(c2->responses[0], &mname, &mver));
  cr_expect_str_eq(mname, "addsub");
  cr_expect_eq(mver, 1);
  H_OK(TRITONSERVER_InferenceResponseId(c2->responses[0], &id));
  done(c1, r1);
  done(c2, r2);
  char *m = h_metrics_text(s);
  cr_expect(strstr(m, "nv_cache_num_hits_per_model{model=\"addsub\",version=\"1\"} 1\n"), "%s", m);
  cr_expect(strstr(m, "nv_cache_num_misses_per_model{model=\"addsub\",version=\"1\"} 1\n"), "%s", m);
  cr_expect(strstr(m, "nv_cache_num_entries 1\n"), "%s", m);
  cr_expect(strstr(m, "nv_cache_num_lookups 2\n"), "%s", m);
  free(m);
  TRITONSERVER_ServerDelete(s);
  h_rmtree(repo);
  free(repo);
}

Test(response_cache, anything_that_changes_the_answer_misses) {
  char *repo = h_tmpdir();
  h_model(repo, "addsub", ADDSUB_CFG("addsub", "true"), "1");
  h_model(repo, "idc", IDENTITY_CFG("idc", "true"), "1");
  TRITONSERVER_Server *s = cached_server(repo, "{\"size\": \"1048576\"}");
  /* Other requested outputs: the second asks for OUTPUT1 and must get it. */
  TRITONSERVER_InferenceRequest *r1, *r2;
  h_call *c1 = addsub(s, "addsub", "OUTPUT0", &r1);
  h_call *c2 = addsub(s, "addsub", "OUTPUT1", &r2);
  h_output o;
  cr_expect(h_find_output(c1->responses[0], "OUTPUT0", &o));
  cr_expect(h_find_output(c2->responses[0], "OUTPUT1", &o));
  cr_expect_not(h_find_output(c2->responses[0], "OUTPUT0", &o));
  cr_expect_eq(h_stat_count(s, "addsub", "cache_hit"), 0);
  done(c1, r1);
  done(c2, r2);
  /* The same bytes in another shape, and other bytes: misses. The same
   * bytes split into two buffers: a hit. */
  float x[6] = {1, 2, 3, 4, 5, 6}, y[6] = {1, 2, 3, 4, 5, 7};
  int64_t s23[2] = {2, 3}, s32[2] = {3, 2};
  TRITONSERVER_InferenceRequest *q[4];
  h_call *k[4];
  k[0] = identity(s, "idc", x, 6, s23, 1, &q[0]);
  k[1] = identity(s, "idc", x, 6, s32, 1, &q[1]);
  k[2] = identity(s, "idc", y, 6, s23, 1, &q[2]);
  cr_expect_eq(h_stat_count(s, "idc", "cache_hit"), 0);
  k[3] = identity(s, "idc", x, 6, s23, 2, &q[3]);
  cr_expect_eq(h_stat_count(s, "idc", "cache_hit"), 1);
  cr_expect_eq(h_stat_count(s, "idc", "execution_count"), 3);
  cr_assert(h_find_output(k[1]->responses[0], "OUTPUT0", &o));
  cr_expect(o.dims == 2 && o.shape[0] == 3 && o.shape[1] == 2);
  cr_assert(h_find_output(k[3]->responses[0], "OUTPUT0", &o));
  cr_expect(o.dims == 2 && o.shape[0] == 2 && o.shape[1] == 3);
  cr_assert_eq(o.size, sizeof x);
  cr_expect(!memcmp(o.base, x, sizeof x));
  for (int i = 0; i < 4; i++) done(k[i], q[i]);
  TRITONSERVER_ServerDelete(s);
  h_rmtree(repo);
  free(repo);
}

Test(response_cache, the_least_recently_used_answer_is_evicted) {
  char *repo = h_tmpdir();
  h_model(repo, "idc", IDENTITY_CFG("idc", "true"), "1");
  /* An entry holds 4000 bytes of data and some bookkeeping: room for two. */
  TRITONSERVER_Server *s = cached_server(repo, "{\"size\": 10000}");
  static float a[1000], b[1000], c[1000];
  for (int i = 0; i < 1000; i++) a[i] = (float)i, b[i] = (float)-i, c[i] = (float)(2 * i);
  b[0] = 0.5f;
  int64_t shape[2] = {1, 1000};
  const float *order[] = {a, b, a, c, a, b};
  const int hits_after[] = {0, 0, 1, 1, 2, 2}; /* b was evicted by c, a was not */
  for (int i = 0; i < 6; i++) {
    TRITONSERVER_InferenceRequest *r;
    h_call *k = identity(s, "idc", order[i], 1000, shape, 1, &r);
    cr_expect_eq(h_stat_count(s, "idc", "cache_hit"), hits_after[i], "after request %d", i);
    done(k, r);
  }
  char *m = h_metrics_text(s);
  cr_expect(strstr(m, "nv_cache_num_evictions 2\n"), "%s", m); /* b by c, then c by b */
  cr_expect(strstr(m, "nv_cache_num_entries 2\n"), "%s", m);
  free(m);
  TRITONSERVER_ServerDelete(s);
  h_rmtree(repo);
  free(repo);
}

Test(response_cache, an_answer_larger_than_the_cache_is_served_not_stored) {
  char *repo = h_tmpdir();
  h_model(repo, "addsub", ADDSUB_CFG("addsub", "true"), "1");
  TRITONSERVER_Server *s = cached_server(repo, "{\"size\": \"64\"}");
  for (int i = 0; i < 2; i++) {
    TRITONSERVER_InferenceRequest *r;
    h_call *c = addsub(s, "addsub", NULL, &r);
    expect_sums(c);
    done(c, r);
  }
  cr_expect_eq(h_stat_count(s, "addsub", "execution_count"), 2);
  cr_expect_eq(h_stat_count(s, "addsub", "cache_hit"), 0);
  cr_expect_eq(h_stat_count(s, "addsub", "cache_miss"), 2);
  TRITONSERVER_ServerDelete(s);
  h_rmtree(repo);
  free(repo);
}

Test(response_cache, it_takes_both_the_server_and_the_model) {
  char *repo = h_tmpdir();
  h_model(repo, "on", ADDSUB_CFG("on", "true"), "1");
  h_model(repo, "off", ADDSUB_CFG("off", "false"), "1");
  /* No cache on the server (the deprecated byte size 0 means none). */
  TRITONSERVER_ServerOptions *o = h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE);
  H_OK(TRITONSERVER_ServerOptionsSetResponseCacheByteSize(o, 0));
  TRITONSERVER_Server *s = h_server_new(o);
  for (int i = 0; i < 2; i++) {
    TRITONSERVER_InferenceRequest *r;
    h_call *c = addsub(s, "on", NULL, &r);
    done(c, r);
  }
  cr_expect_eq(h_stat_count(s, "on", "execution_count"), 2);
  cr_expect_eq(h_stat_count(s, "on", "cache_miss"), 0);
  char *m = h_metrics_text(s);
  cr_expect_null(strstr(m, "nv_cache_num_entries"), "%s", m);
  free(m);
  TRITONSERVER_ServerDelete(s);
  /* A cache on the server (the deprecated byte size), a model without it. */
  o = h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE);
  H_OK(TRITONSERVER_ServerOptionsSetResponseCacheByteSize(o, 4096));
  s = h_server_new(o);
  for (int i = 0; i < 2; i++) {
    TRITONSERVER_InferenceRequest *r;
    h_call *c = addsub(s, "off", NULL, &r);
    done(c, r);
    c = addsub(s, "on", NULL, &r);
    done(c, r);
  }
  cr_expect_eq(h_stat_count(s, "off", "execution_count"), 2);
  cr_expect_eq(h_stat_count(s, "off", "cache_miss"), 0);
  cr_expect_eq(h_stat_count(s, "on", "execution_count"), 1);
  m = h_metrics_text(s);
  cr_expect(strstr(m, "nv_cache_num_hits_per_model{model=\"on\""), "%s", m);
  cr_expect_null(strstr(m, "nv_cache_num_hits_per_model{model=\"off\""), "%s", m);
  free(m);
  TRITONSERVER_ServerDelete(s);
  h_rmtree(repo);
  free(repo);
}

Test(response_cache, bad_cache_configurations_are_refused) {
  char *repo = h_tmpdir();
  h_model(repo, "addsub", ADDSUB_CFG("addsub", "true"), "1");
  static const struct {
    const char *name, *json, *want;
  } cases[] = {
      {"redis", "{\"size\": 100}",
       "unable to load cache 'redis' from '/opt/tritonserver/caches/redis/libtritoncache_redis.so'"},
      {"local", "{}", "Failed to initialize LocalCache: config didn't contain a valid 'size' field."},
      {"local", "{\"size\": \"12x\"}", "'size' must be a number of bytes, got '12x'"},
      {"local", "{\"size\": -5}", "'size' config must be a string or uint type"},
      {"local", "{\"size\": 0}", "'size' must be at least 1 byte"},
      {"local", "size=100", "the config is not a JSON object"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    TRITONSERVER_ServerOptions *o = h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE);
    H_OK(TRITONSERVER_ServerOptionsSetCacheConfig(o, cases[i].name, cases[i].json));
    TRITONSERVER_Server *s = NULL;
    TRITONSERVER_Error *err = TRITONSERVER_ServerNew(&s, o);
    cr_assert_not_null(err, "case %zu was accepted", i);
    cr_expect(strstr(TRITONSERVER_ErrorMessage(err), cases[i].want), "case %zu: %s", i, TRITONSERVER_ErrorMessage(err));
    cr_expect_null(s);
    TRITONSERVER_ErrorDelete(err);
    TRITONSERVER_ServerOptionsDelete(o);
  }
  TRITONSERVER_ServerOptions *o = h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE);
  H_OK(TRITONSERVER_ServerOptionsSetCacheConfig(o, "local", "{\"size\": 100}"));
  H_OK(TRITONSERVER_ServerOptionsSetCacheConfig(o, "other", "{\"size\": 100}"));
  TRITONSERVER_Server *s = NULL;
  TRITONSERVER_Error *err = TRITONSERVER_ServerNew(&s, o);
  cr_assert_not_null(err);
  cr_expect(strstr(TRITONSERVER_ErrorMessage(err), "only a single cache is currently supported"), "%s",
            TRITONSERVER_ErrorMessage(err));
  TRITONSERVER_ErrorDelete(err);
  TRITONSERVER_ServerOptionsDelete(o);
  h_rmtree(repo);
  free(repo);
}

Test(response_cache, an_ensemble_is_cached_as_a_whole) {
  char *repo = h_tmpdir();
  h_model(repo, "addsub", ADDSUB_CFG("addsub", "false"), "1");
  h_model(
      repo, "ens",
      "name: \"ens\"\nplatform: \"ensemble\"\nmax_batch_size: 0\n"
      "input [ { name: \"X\" data_type: TYPE_INT32 dims: [ 4 ] }, { name: \"Y\" data_type: TYPE_INT32 dims: [ 4 ] } ]\n"
      "output [ { name: \"S\" data_type: TYPE_INT32 dims: [ 4 ] } ]\n"
      "response_cache { enable: true }\n"
      "ensemble_scheduling { step [ { model_name: \"addsub\" model_version: -1\n"
      "  input_map { key: \"INPUT0\" value: \"X\" } input_map { key: \"INPUT1\" value: \"Y\" }\n"
      "  output_map { key: \"OUTPUT0\" value: \"S\" } } ] }\n",
      "1");
  TRITONSERVER_Server *s = cached_server(repo, "{\"size\": 65536}");
  int64_t shape[1] = {4};
  for (int i = 0; i < 2; i++) {
    TRITONSERVER_InferenceRequest *r = h_request(s, "ens");
    h_add_input(r, "X", TRITONSERVER_TYPE_INT32, shape, 1, A, sizeof A);
    h_add_input(r, "Y", TRITONSERVER_TYPE_INT32, shape, 1, B, sizeof B);
    h_call *c = h_infer(s, r);
    char *err = h_response_error(c, 0);
    cr_assert_null(err, "%s", err);
    h_output o;
    cr_assert(h_find_output(c->responses[0], "S", &o));
    for (int k = 0; k < 4; k++) cr_expect_eq(((const int32_t *)o.base)[k], A[k] + B[k]);
    done(c, r);
  }
  cr_expect_eq(h_stat_count(s, "addsub", "success"), 1);
  cr_expect_eq(h_stat_count(s, "ens", "success"), 2);
  cr_expect_eq(h_stat_count(s, "ens", "cache_hit"), 1);
  TRITONSERVER_ServerDelete(s);
  h_rmtree(repo);
  free(repo);
}

Test(response_cache, a_decoupled_ensemble_cannot_enable_it) {
  char *repo = h_tmpdir();
  h_model(repo, "sq",
          "name: \"sq\"\nbackend: \"square\"\nmax_batch_size: 0\n"
          "model_transaction_policy { decoupled: true }\n"
          "input [ { name: \"IN\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
          "output [ { name: \"OUT\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n",
          "1");
  h_model(repo, "ens",
          "name: \"ens\"\nplatform: \"ensemble\"\nmax_batch_size: 0\n"
          "input [ { name: \"X\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
          "output [ { name: \"Y\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
          "response_cache { enable: true }\n"
          "ensemble_scheduling { step [ { model_name: \"sq\" model_version: -1\n"
          "  input_map { key: \"IN\" value: \"X\" } output_map { key: \"OUT\" value: \"Y\" } } ] }\n",
          "1");
  TRITONSERVER_ServerOptions *o = h_options(repo, TRITONSERVER_MODEL_CONTROL_EXPLICIT);
  H_OK(TRITONSERVER_ServerOptionsSetCacheConfig(o, "local", "{\"size\": 65536}"));
  TRITONSERVER_Server *s = h_server_new(o);
  TRITONSERVER_Error *err = TRITONSERVER_ServerLoadModel(s, "ens");
  cr_assert_not_null(err);
  cr_expect(strstr(TRITONSERVER_ErrorMessage(err), "Response Cache does not currently support model ens with "
                                                   "'decoupled' transaction policy"),
            "%s", TRITONSERVER_ErrorMessage(err));
  TRITONSERVER_ErrorDelete(err);
  TRITONSERVER_ServerDelete(s);
  h_rmtree(repo);
  free(repo);
}

/* An allocator that refuses once `refuse` is set. */
static atomic_bool refuse;
static TRITONSERVER_Error *picky_alloc(TRITONSERVER_ResponseAllocator *a, const char *name, size_t size,
                                       TRITONSERVER_MemoryType mt, int64_t mt_id, void *userp, void **buffer,
                                       void **buffer_userp, TRITONSERVER_MemoryType *actual_mt, int64_t *actual_id) {
  if (atomic_load(&refuse)) return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, "no room for outputs");
  return h_alloc(a, name, size, mt, mt_id, userp, buffer, buffer_userp, actual_mt, actual_id);
}

Test(response_cache, a_hit_whose_allocation_fails_fails_cleanly) {
  char *repo = h_tmpdir();
  h_model(repo, "addsub", ADDSUB_CFG("addsub", "true"), "1");
  TRITONSERVER_Server *s = cached_server(repo, "{\"size\": 65536}");
  TRITONSERVER_ResponseAllocator *picky = NULL;
  H_OK(TRITONSERVER_ResponseAllocatorNew(&picky, picky_alloc, h_release_buf, NULL));
  int64_t shape[1] = {4};
  for (int i = 0; i < 2; i++) {
    atomic_store(&refuse, i == 1);
    TRITONSERVER_InferenceRequest *r = h_request(s, "addsub");
    h_add_input(r, "INPUT0", TRITONSERVER_TYPE_INT32, shape, 1, A, sizeof A);
    h_add_input(r, "INPUT1", TRITONSERVER_TYPE_INT32, shape, 1, B, sizeof B);
    h_call *c = h_call_new();
    H_OK(TRITONSERVER_InferenceRequestSetReleaseCallback(r, h_on_release, c));
    H_OK(TRITONSERVER_InferenceRequestSetResponseCallback(r, picky, c, h_on_response, c));
    H_OK(TRITONSERVER_ServerInferAsync(s, r, NULL));
    cr_assert(h_wait(c, 10000));
    char *err = h_response_error(c, 0);
    if (i == 0) {
      cr_expect_null(err, "%s", err);
    } else {
      cr_assert_not_null(err);
      cr_expect(strstr(err, "no room for outputs"), "%s", err);
    }
    free(err);
    cr_expect_eq(c->released, 1);
    done(c, r);
  }
  cr_expect_eq(h_stat_count(s, "addsub", "fail"), 1);
  cr_expect_eq(h_stat_count(s, "addsub", "execution_count"), 1);
  H_OK(TRITONSERVER_ResponseAllocatorDelete(picky));
  TRITONSERVER_ServerDelete(s);
  h_rmtree(repo);
  free(repo);
}

/* A model behind the dynamic batcher caches too: the lookup comes before
 * the queue (a hit is never batched); a miss is batched and stored. With a batch dimension the key covers the full shape, so a
 * request of two rows does not hit one of one. */
Test(response_cache, a_dynamically_batched_model_is_cached) {
  char *repo = h_tmpdir();
  h_model(repo, "batched",
          "name: \"batched\"\nbackend: \"identity\"\nmax_batch_size: 8\n"
          "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 3 ] } ]\n"
          "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ 3 ] } ]\n"
          "dynamic_batching { max_queue_delay_microseconds: 100000 }\n"
          "response_cache { enable: true }\n",
          "1");
  TRITONSERVER_Server *s = cached_server(repo, "{\"size\": 1048576}");
  static const float rows[6] = {1, 2, 3, 4, 5, 6};
  const int64_t one[2] = {1, 3}, two[2] = {2, 3};
  for (int i = 0; i < 3; i++) {
    TRITONSERVER_InferenceRequest *r;
    h_call *c = identity(s, "batched", rows, 3, one, 1, &r);
    h_output o;
    cr_assert(h_find_output(c->responses[0], "OUTPUT0", &o));
    cr_assert_eq(o.size, 3 * sizeof(float));
    cr_expect_eq(memcmp(o.base, rows, o.size), 0);
    done(c, r);
  }
  TRITONSERVER_InferenceRequest *r;
  h_call *c = identity(s, "batched", rows, 6, two, 1, &r);
  done(c, r);
  cr_expect_eq(h_stat_count(s, "batched", "cache_hit"), 2);
  cr_expect_eq(h_stat_count(s, "batched", "cache_miss"), 2, "two rows are another key");
  cr_expect_eq(h_stat_count(s, "batched", "execution_count"), 2);
  cr_expect_eq(h_stat_count(s, "batched", "success"), 4);
  TRITONSERVER_ServerDelete(s);
  h_rmtree(repo);
  free(repo);
}
