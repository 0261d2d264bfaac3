/* Repository agents (TRITONREPOAGENT_*): the test agent
 * libtritonrepoagent_recorder.so, loaded from the repoagent directory,
 * writes down what it is told (NRD_RECORDER_AGENT_LOG); these tests check
 * the order of the lifecycle calls, a model loaded from the folder an agent
 * gives, chained agents, failures at each step, and the calls the server
 * must refuse. */
#include "harness.h"

static char *g_repo, *g_log;

static void setup(void) {
  g_repo = h_tmpdir();
  char *d = h_tmpdir();
  size_t n = strlen(d) + 16;
  g_log = malloc(n);
  snprintf(g_log, n, "%s/agent.log", d);
  free(d);
  setenv("NRD_RECORDER_AGENT_LOG", g_log, 1);
}

static void teardown(void) {
  h_rmtree(g_repo);
  free(g_repo);
  free(g_log);
}

TestSuite(repo_agent, .init = setup, .fini = teardown, .timeout = 60);

/* An identity model named `name` whose configuration lists `agents`
 * (the inside of model_repository_agents { ... }). */
static void agent_model(const char *name, const char *agents, const char *versions) {
  char cfg[4096];
  snprintf(cfg, sizeof cfg,
           "name: \"%s\"\nbackend: \"identity\"\nmax_batch_size: 0\n"
           "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n"
           "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n"
           "model_repository_agents { %s }\n",
           name, agents);
  h_model(g_repo, name, cfg, versions);
}

static TRITONSERVER_Server *server(TRITONSERVER_ModelControlMode mode, const char *agent_dir) {
  TRITONSERVER_ServerOptions *o = h_options(g_repo, mode);
  H_OK(TRITONSERVER_ServerOptionsSetRepoAgentDirectory(o, agent_dir));
  return h_server_new(o);
}

static bool ready(TRITONSERVER_Server *s, const char *m, int64_t v) {
  bool r = false;
  H_OK(TRITONSERVER_ServerModelIsReady(s, m, v, &r));
  return r;
}

/* The log so far; the caller frees it. */
static char *agent_log(void) { return h_read(g_log); }

/* True when the lines in `lines` (NULL-terminated) appear in the log in
 * this order (others may come between). */
static bool log_in_order(const char *const *lines) {
  char *l = agent_log();
  const char *at = l;
  bool ok = true;
  for (size_t i = 0; ok && lines[i]; i++) {
    char want[512];
    snprintf(want, sizeof want, "%s\n", lines[i]);
    const char *hit = strstr(at, want);
    while (hit && hit != l && hit[-1] != '\n') hit = strstr(hit + 1, want);
    if (!hit)
      ok = false;
    else
      at = hit + strlen(want);
  }
  if (!ok) fprintf(stderr, "agent log:\n%s", l);
  free(l);
  return ok;
}

static size_t log_count(const char *line) {
  char *l = agent_log();
  char want[512];
  snprintf(want, sizeof want, "%s\n", line);
  size_t n = 0;
  for (const char *p = l; (p = strstr(p, want)); p += strlen(want))
    if (p == l || p[-1] == '\n') n++;
  free(l);
  return n;
}

/* Waits (up to 10 s) until the log holds `line` as a whole line. */
static bool log_has(const char *line) {
  for (int i = 0; i < 1000; i++) {
    if (log_count(line)) return true;
    usleep(10000);
  }
  return false;
}

/* The path after "<what> <tag> " in the log; the caller frees it. */
static char *logged_path(const char *what, const char *tag) {
  char *l = agent_log();
  char key[128];
  snprintf(key, sizeof key, "%s %s ", what, tag);
  char *p = strstr(l, key);
  char *out = NULL;
  if (p) {
    p += strlen(key);
    out = strndup(p, strcspn(p, "\n"));
  }
  free(l);
  return out;
}

static void infer_identity(TRITONSERVER_Server *s, const char *model) {
  static const float in[4] = {1, 2, 3, 4};
  int64_t shape[1] = {4};
  TRITONSERVER_InferenceRequest *r = h_request(s, model);
  h_add_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, shape, 1, in, sizeof in);
  h_call *c = h_infer(s, r);
  char *err = h_response_error(c, 0);
  cr_assert_null(err, "%s", err);
  h_output o;
  cr_assert(h_find_output(c->responses[0], "OUTPUT0", &o));
  cr_assert_eq(o.size, sizeof in);
  cr_expect_eq(memcmp(o.base, in, sizeof in), 0);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
}

static void expect_load_error(TRITONSERVER_Server *s, const char *model, const char *part) {
  TRITONSERVER_Error *e = TRITONSERVER_ServerLoadModel(s, model);
  cr_assert_not_null(e, "loading '%s' should fail", model);
  cr_expect(strstr(TRITONSERVER_ErrorMessage(e), part), "'%s' not in: %s", part, TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
}

Test(repo_agent, a_model_that_loads_and_unloads_tells_the_agent_each_step) {
  agent_model("ident", "agents [ { name: \"recorder\" parameters { key: \"tag\" value: \"a\" } } ]", "1");
  TRITONSERVER_Server *s = server(TRITONSERVER_MODEL_CONTROL_EXPLICIT, NRD_TEST_AGENT_DIR);
  H_OK(TRITONSERVER_ServerLoadModel(s, "ident"));
  cr_assert(ready(s, "ident", 1));
  infer_identity(s, "ident");
  char where[4096];
  snprintf(where, sizeof where, "location a %s/ident", g_repo);
  const char *const loaded[] = {
      "Initialize", "ModelInitialize ident a", "LOAD ident a", where, "params a 1", "LOAD_COMPLETE ident a", NULL};
  cr_expect(log_in_order(loaded));
  /* What the server must refuse once the load is over. */
  const char *const refused[] = {"refused a update Invalid argument", "refused a parameter Invalid argument",
                                 "refused a config_v2 Unsupported", "refused a acquire_remote Invalid argument", NULL};
  cr_expect(log_in_order(refused));
  H_OK(TRITONSERVER_ServerUnloadModel(s, "ident"));
  cr_assert(log_has("Finalize"), "the agent is finalized once no model uses it");
  const char *const unloaded[] = {"LOAD_COMPLETE ident a", "UNLOAD ident a", "UNLOAD_COMPLETE ident a",
                                  "ModelFinalize a",       "Finalize",       NULL};
  cr_expect(log_in_order(unloaded));
  cr_expect_eq(log_count("LOAD_FAIL ident a"), 0);
  H_OK(TRITONSERVER_ServerDelete(s));
}

Test(repo_agent, the_model_loads_from_the_folder_the_agent_gives) {
  agent_model("ident",
              "agents [ { name: \"recorder\" parameters [ { key: \"tag\" value: \"a\" },"
              " { key: \"new_version\" value: \"7\" } ] } ]",
              "1");
  TRITONSERVER_Server *s = server(TRITONSERVER_MODEL_CONTROL_EXPLICIT, NRD_TEST_AGENT_DIR);
  H_OK(TRITONSERVER_ServerLoadModel(s, "ident"));
  cr_expect(ready(s, "ident", 7), "version 7 exists only where the agent put the model");
  cr_expect(!ready(s, "ident", 1));
  infer_identity(s, "ident");
  char *acquired = logged_path("acquired", "a");
  cr_assert_not_null(acquired);
  struct stat st;
  cr_expect_eq(stat(acquired, &st), 0, "the folder stays while the model is loaded");
  H_OK(TRITONSERVER_ServerDelete(s));
  cr_expect(log_has("ModelFinalize a"));
  cr_expect_neq(stat(acquired, &st), 0, "the acquired folder %s is deleted with the agent model", acquired);
  free(acquired);
}

Test(repo_agent, chained_agents_see_where_the_previous_one_left_the_model) {
  agent_model("ident",
              "agents [ { name: \"recorder\" parameters [ { key: \"tag\" value: \"a\" },"
              " { key: \"new_version\" value: \"7\" } ] },"
              " { name: \"recorder\" parameters [ { key: \"tag\" value: \"b\" } ] } ]",
              "1");
  TRITONSERVER_Server *s = server(TRITONSERVER_MODEL_CONTROL_EXPLICIT, NRD_TEST_AGENT_DIR);
  H_OK(TRITONSERVER_ServerLoadModel(s, "ident"));
  cr_expect(ready(s, "ident", 7));
  char *acquired = logged_path("acquired", "a"), *b_at = logged_path("location", "b");
  cr_assert(acquired && b_at);
  cr_expect_str_eq(b_at, acquired);
  free(acquired);
  free(b_at);
  /* LOAD and UNLOAD go first to last, the completions last to first. */
  H_OK(TRITONSERVER_ServerUnloadModel(s, "ident"));
  cr_assert(log_has("Finalize"));
  const char *const order[] = {"Initialize",
                               "LOAD ident a",
                               "LOAD ident b",
                               "LOAD_COMPLETE ident b",
                               "LOAD_COMPLETE ident a",
                               "UNLOAD ident a",
                               "UNLOAD ident b",
                               "UNLOAD_COMPLETE ident b",
                               "UNLOAD_COMPLETE ident a",
                               "Finalize",
                               NULL};
  cr_expect(log_in_order(order));
  cr_expect_eq(log_count("Initialize"), 1, "one library, initialized once for both entries");
  H_OK(TRITONSERVER_ServerDelete(s));
}

Test(repo_agent, an_agent_that_fails_load_fails_the_model) {
  agent_model("ident",
              "agents [ { name: \"recorder\" parameters [ { key: \"tag\" value: \"a\" } ] },"
              " { name: \"recorder\" parameters [ { key: \"tag\" value: \"b\" },"
              " { key: \"fail\" value: \"LOAD\" } ] } ]",
              "1");
  TRITONSERVER_Server *s = server(TRITONSERVER_MODEL_CONTROL_EXPLICIT, NRD_TEST_AGENT_DIR);
  expect_load_error(s, "ident", "repo agent 'recorder' failed to load model 'ident': the recorder was asked to fail");
  cr_expect(!ready(s, "ident", -1));
  const char *const order[] = {"LOAD ident a",    "LOAD ident b",    "LOAD_FAIL ident b", "LOAD_FAIL ident a",
                               "ModelFinalize a", "ModelFinalize b", "Finalize",          NULL};
  cr_expect(log_in_order(order));
  cr_expect_eq(log_count("LOAD_COMPLETE ident a"), 0);
  /* The model's index entry says why. */
  TRITONSERVER_Message *m = NULL;
  H_OK(TRITONSERVER_ServerModelIndex(s, 0, &m));
  char *idx = h_msg_text(m);
  cr_expect(strstr(idx, "asked to fail"), "%s", idx);
  free(idx);
  H_OK(TRITONSERVER_ServerDelete(s));
}

Test(repo_agent, a_failing_model_initialize_fails_the_load_and_is_still_finalized) {
  agent_model("ident", "agents [ { name: \"recorder\" parameters [ { key: \"fail\" value: \"MODEL_INIT\" } ] } ]", "1");
  TRITONSERVER_Server *s = server(TRITONSERVER_MODEL_CONTROL_EXPLICIT, NRD_TEST_AGENT_DIR);
  expect_load_error(s, "ident", "repo agent 'recorder' failed to initialize model 'ident'");
  cr_expect_eq(log_count("LOAD ident -"), 0, "no action after a failed ModelInitialize");
  const char *const order[] = {"ModelInitialize ident -", "ModelFinalize -", "Finalize", NULL};
  cr_expect(log_in_order(order));
  H_OK(TRITONSERVER_ServerDelete(s));
}

Test(repo_agent, a_location_without_the_model_fails_the_load) {
  agent_model("ident",
              "agents [ { name: \"recorder\" parameters [ { key: \"update_to\" value: \"/nonexistent/x\" } ] } ]", "1");
  TRITONSERVER_Server *s = server(TRITONSERVER_MODEL_CONTROL_EXPLICIT, NRD_TEST_AGENT_DIR);
  expect_load_error(s, "ident", "/nonexistent/x");
  const char *const order[] = {"LOAD ident -", "LOAD_FAIL ident -", "ModelFinalize -", NULL};
  cr_expect(log_in_order(order));
  H_OK(TRITONSERVER_ServerDelete(s));
}

Test(repo_agent, missing_and_badly_named_agents_are_errors_that_say_where) {
  agent_model("nosuch", "agents [ { name: \"nosuch\" } ]", "1");
  agent_model("escape", "agents [ { name: \"..\" } ]", "1");
  agent_model("wrongdir", "agents [ { name: \"recorder\" } ]", "1");
  TRITONSERVER_Server *s = server(TRITONSERVER_MODEL_CONTROL_EXPLICIT, NRD_TEST_AGENT_DIR);
  char want[4096];
  snprintf(want, sizeof want, "unable to find 'libtritonrepoagent_nosuch.so' for repo agent 'nosuch', searched: %s",
           NRD_TEST_AGENT_DIR);
  expect_load_error(s, "nosuch", want);
  expect_load_error(s, "escape", "invalid repository agent name '..'");
  H_OK(TRITONSERVER_ServerDelete(s));
  s = server(TRITONSERVER_MODEL_CONTROL_EXPLICIT, "/nonexistent/agents");
  expect_load_error(s, "wrongdir", "searched: /nonexistent/agents");
  H_OK(TRITONSERVER_ServerDelete(s));
  cr_expect_eq(log_count("Initialize"), 0);
}

Test(repo_agent, a_reload_completes_the_new_chain_before_the_old_one_unloads) {
  agent_model("ident", "agents [ { name: \"recorder\" parameters { key: \"tag\" value: \"first\" } } ]", "1");
  TRITONSERVER_Server *s = server(TRITONSERVER_MODEL_CONTROL_EXPLICIT, NRD_TEST_AGENT_DIR);
  H_OK(TRITONSERVER_ServerLoadModel(s, "ident"));
  agent_model("ident", "agents [ { name: \"recorder\" parameters { key: \"tag\" value: \"second\" } } ]", "1");
  H_OK(TRITONSERVER_ServerLoadModel(s, "ident"));
  cr_expect(ready(s, "ident", 1));
  const char *const order[] = {"LOAD_COMPLETE ident first",
                               "LOAD ident second",
                               "LOAD_COMPLETE ident second",
                               "UNLOAD ident first",
                               "UNLOAD_COMPLETE ident first",
                               "ModelFinalize first",
                               NULL};
  cr_expect(log_in_order(order));
  cr_expect_eq(log_count("Finalize"), 0, "the agent stays while the new load uses it");
  H_OK(TRITONSERVER_ServerDelete(s));
  const char *const end[] = {"UNLOAD ident second", "UNLOAD_COMPLETE ident second", "ModelFinalize second", "Finalize",
                             NULL};
  cr_expect(log_in_order(end));
}

/* Polling compares the repository's folder, not the one the agent made:
 * an unchanged model is not loaded again. */
Test(repo_agent, polling_watches_the_repository_folder) {
  agent_model("ident",
              "agents [ { name: \"recorder\" parameters [ { key: \"tag\" value: \"a\" },"
              " { key: \"new_version\" value: \"7\" } ] } ]",
              "1");
  TRITONSERVER_Server *s = server(TRITONSERVER_MODEL_CONTROL_POLL, NRD_TEST_AGENT_DIR);
  cr_assert(ready(s, "ident", 7));
  H_OK(TRITONSERVER_ServerPollModelRepository(s));
  H_OK(TRITONSERVER_ServerPollModelRepository(s));
  cr_expect_eq(log_count("LOAD ident a"), 1);
  H_OK(TRITONSERVER_ServerDelete(s));
}

/* The backend is told the folder the agent gave: TRITONBACKEND_ModelRepository
 * (read by the api_probe test backend at ModelInitialize, sent back in
 * its PROBE output) names the acquired folder, not the repository's. */
Test(repo_agent, the_backend_sees_the_agents_folder) {
  h_model(g_repo, "probe",
          "name: \"probe\"\nbackend: \"api_probe\"\nmax_batch_size: 0\n"
          "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n"
          "output [ { name: \"PROBE\" data_type: TYPE_STRING dims: [ 1 ] } ]\n"
          "model_repository_agents { agents [ { name: \"recorder\" parameters [ { key: \"tag\" value: \"p\" },"
          " { key: \"new_version\" value: \"3\" } ] } ] }\n",
          "1");
  TRITONSERVER_ServerOptions *o = h_options(g_repo, TRITONSERVER_MODEL_CONTROL_EXPLICIT);
  H_OK(TRITONSERVER_ServerOptionsSetRepoAgentDirectory(o, NRD_TEST_AGENT_DIR));
  H_OK(TRITONSERVER_ServerOptionsSetBackendDirectory(o, NRD_TEST_BACKEND_DIR));
  TRITONSERVER_Server *s = h_server_new(o);
  H_OK(TRITONSERVER_ServerLoadModel(s, "probe"));
  cr_assert(ready(s, "probe", 3));
  static const float in[2] = {1, 2};
  int64_t shape[1] = {2};
  TRITONSERVER_InferenceRequest *r = h_request(s, "probe");
  h_add_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, shape, 1, in, sizeof in);
  h_call *c = h_infer(s, r);
  char *err = h_response_error(c, 0);
  cr_assert_null(err, "%s", err);
  h_output out;
  cr_assert(h_find_output(c->responses[0], "PROBE", &out));
  cr_assert_gt(out.size, 4);
  json_t *j = json_loadb((const char *)out.base + 4, out.size - 4, 0, NULL);
  cr_assert_not_null(j);
  char *acquired = logged_path("acquired", "p");
  cr_assert_not_null(acquired);
  const char *seen = json_string_value(json_object_get(j, "model_location"));
  cr_expect(seen && !strcmp(seen, acquired), "backend saw '%s', agent gave '%s'", seen ? seen : "(none)", acquired);
  free(acquired);
  json_decref(j);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  H_OK(TRITONSERVER_ServerDelete(s));
}
