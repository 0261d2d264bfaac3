/* Response cache plugins (TRITONCACHE_*): the test plugin
 * libtritoncache_memory.so, loaded from the cache directory, stores and
 * returns what the server gives it; a repeated request is answered from it;
 * a plugin that fails to initialize, is missing, returns bytes that are not
 * a response, or never calls TRITONCACHE_Copy is handled cleanly. */
#include "harness.h"

#define ADDSUB_CACHED                                                                                                  \
  "name: \"addsub\"\nbackend: \"add_sub\"\nmax_batch_size: 0\n"                                                        \
  "input [ { name: \"INPUT0\" data_type: TYPE_INT32 dims: [ 4 ] },\n"                                                  \
  "        { name: \"INPUT1\" data_type: TYPE_INT32 dims: [ 4 ] } ]\n"                                                 \
  "output [ { name: \"OUTPUT0\" data_type: TYPE_INT32 dims: [ 4 ] },\n"                                                \
  "         { name: \"OUTPUT1\" data_type: TYPE_INT32 dims: [ 4 ] } ]\n"                                               \
  "response_cache { enable: true }\n"

static const int32_t A[4] = {1, 2, 3, 4}, B[4] = {10, 20, 30, 40};

static TRITONSERVER_ServerOptions *plugin_options(const char *repo, const char *dir, const char *name,
                                                  const char *config) {
  TRITONSERVER_ServerOptions *o = h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE);
  H_OK(TRITONSERVER_ServerOptionsSetCacheDirectory(o, dir));
  H_OK(TRITONSERVER_ServerOptionsSetCacheConfig(o, name, config));
  return o;
}

/* add_sub on A and B; checks both outputs. */
static void addsub_checked(TRITONSERVER_Server *s) {
  int64_t shape[1] = {4};
  TRITONSERVER_InferenceRequest *r = h_request(s, "addsub");
  h_add_input(r, "INPUT0", TRITONSERVER_TYPE_INT32, shape, 1, A, sizeof A);
  h_add_input(r, "INPUT1", TRITONSERVER_TYPE_INT32, shape, 1, B, sizeof B);
  h_call *c = h_infer(s, r);
  char *err = h_response_error(c, 0);
  cr_assert_null(err, "%s", err);
  h_output o;
  cr_assert(h_find_output(c->responses[0], "OUTPUT0", &o));
  cr_assert_eq(o.size, sizeof A);
  for (int i = 0; i < 4; i++) cr_expect_eq(((const int32_t *)o.base)[i], A[i] + B[i]);
  cr_assert(h_find_output(c->responses[0], "OUTPUT1", &o));
  for (int i = 0; i < 4; i++) cr_expect_eq(((const int32_t *)o.base)[i], A[i] - B[i]);
  const int64_t *dims = NULL;
  uint64_t n_dims = 0;
  const char *name = NULL;
  TRITONSERVER_DataType dt;
  const void *base;
  size_t size;
  TRITONSERVER_MemoryType mt;
  int64_t mt_id;
  void *userp;
  H_OK(TRITONSERVER_InferenceResponseOutput(c->responses[0], 0, &name, &dt, &dims, &n_dims, &base, &size, &mt, &mt_id,
                                            &userp));
  cr_expect_eq(dt, TRITONSERVER_TYPE_INT32);
  cr_expect_eq(n_dims, 1);
  cr_expect_eq(dims[0], 4);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
}

Test(cache_plugin, a_repeated_request_is_answered_by_the_plugin) {
  char *repo = h_tmpdir();
  h_model(repo, "addsub", ADDSUB_CACHED, "1");
  TRITONSERVER_Server *s = h_server_new(plugin_options(repo, NRD_TEST_CACHE_DIR, "memory", "{}"));
  for (int i = 0; i < 3; i++) addsub_checked(s);
  cr_expect_eq(h_stat_count(s, "addsub", "execution_count"), 1, "one execution, then the cache");
  cr_expect_eq(h_stat_count(s, "addsub", "cache_hit"), 2);
  cr_expect_eq(h_stat_count(s, "addsub", "cache_miss"), 1);
  cr_expect_eq(h_stat_count(s, "addsub", "success"), 3);
  char *m = h_metrics_text(s);
  cr_expect(strstr(m, "nv_cache_num_hits_per_model{model=\"addsub\",version=\"1\"} 2\n"), "%s", m);
  cr_expect_null(strstr(m, "nv_cache_num_entries"), "a plugin's own gauges are its business:\n%s", m);
  free(m);
  H_OK(TRITONSERVER_ServerDelete(s));
  h_rmtree(repo);
  free(repo);
}

/* A plugin that adds its buffer but never calls TRITONCACHE_Copy still
 * answers: the server copies while the entry is alive. */
Test(cache_plugin, a_plugin_that_does_not_copy_still_answers) {
  char *repo = h_tmpdir();
  h_model(repo, "addsub", ADDSUB_CACHED, "1");
  TRITONSERVER_Server *s = h_server_new(plugin_options(repo, NRD_TEST_CACHE_DIR, "memory", "{\"no_copy\":\"true\"}"));
  for (int i = 0; i < 2; i++) addsub_checked(s);
  cr_expect_eq(h_stat_count(s, "addsub", "cache_hit"), 1);
  H_OK(TRITONSERVER_ServerDelete(s));
  h_rmtree(repo);
  free(repo);
}

/* Bytes that are no response (a store shared with something else) are a
 * miss: the model answers, correctly, every time. */
Test(cache_plugin, bytes_that_are_not_a_response_are_a_miss) {
  char *repo = h_tmpdir();
  h_model(repo, "addsub", ADDSUB_CACHED, "1");
  static const char *const configs[] = {"{\"corrupt\":\"true\"}", "{\"truncate\":\"true\"}"};
  for (int k = 0; k < 2; k++) {
    TRITONSERVER_ServerOptions *o = plugin_options(repo, NRD_TEST_CACHE_DIR, "memory", configs[k]);
    H_OK(TRITONSERVER_ServerOptionsSetLogError(o, false)); /* each lookup logs the bad bytes */
    TRITONSERVER_Server *s = h_server_new(o);
    for (int i = 0; i < 3; i++) addsub_checked(s);
    cr_expect_eq(h_stat_count(s, "addsub", "cache_hit"), 0, "%s", configs[k]);
    cr_expect_eq(h_stat_count(s, "addsub", "execution_count"), 3, "%s", configs[k]);
    H_OK(TRITONSERVER_ServerDelete(s));
  }
  h_rmtree(repo);
  free(repo);
}

static void expect_start_failure(const char *repo, const char *dir, const char *name, const char *config,
                                 const char *want1, const char *want2) {
  TRITONSERVER_ServerOptions *o = plugin_options(repo, dir, name, config);
  TRITONSERVER_Server *s = NULL;
  TRITONSERVER_Error *err = TRITONSERVER_ServerNew(&s, o);
  TRITONSERVER_ServerOptionsDelete(o);
  cr_assert_not_null(err, "cache '%s' (%s) was accepted", name, config);
  const char *msg = TRITONSERVER_ErrorMessage(err);
  cr_expect(strstr(msg, want1) && (!want2 || strstr(msg, want2)), "%s", msg);
  cr_expect_null(s);
  TRITONSERVER_ErrorDelete(err);
}

Test(cache_plugin, plugins_that_cannot_start_stop_the_server_with_the_reason) {
  char *repo = h_tmpdir();
  h_model(repo, "addsub", ADDSUB_CACHED, "1");
  expect_start_failure(repo, NRD_TEST_CACHE_DIR, "memory", "{\"fail_init\":\"true\"}",
                       "cache 'memory' failed to initialize", "memory cache: asked to fail");
  expect_start_failure(repo, NRD_TEST_CACHE_DIR, "memory", "not json", "cache 'memory' failed to initialize",
                       "not a JSON object");
  expect_start_failure(repo, NRD_TEST_CACHE_DIR, "nosuch", "{}", "unable to load cache 'nosuch' from '",
                       "/nosuch/libtritoncache_nosuch.so");
  expect_start_failure(repo, NRD_TEST_CACHE_DIR, "../memory", "{}", "invalid cache name '../memory'", NULL);
  /* A library that is not a cache: the first missing symbol is named. */
  char *dir = h_tmpdir();
  char *sub = NULL, *link_path = NULL;
  cr_assert(asprintf(&sub, "%s/fake", dir) > 0 && asprintf(&link_path, "%s/libtritoncache_fake.so", sub) > 0);
  h_mkdirs(sub, 1);
  cr_assert_eq(symlink(NRD_BACKEND_DIR "/identity/libtriton_identity.so", link_path), 0);
  free(sub);
  free(link_path);
  expect_start_failure(repo, dir, "fake", "{}", "does not define TRITONCACHE_CacheInitialize", NULL);
  h_rmtree(dir);
  free(dir);
  h_rmtree(repo);
  free(repo);
}
