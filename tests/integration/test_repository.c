/* Model repository behaviour: backend search order and `runtime`, version
 * policies, control modes (none, explicit, poll), auto-complete, load
 * parameters (config and file overrides), several repositories. */
#include "harness.h"

#include <sys/stat.h>
#include <utime.h>

static char *g_repo, *g_log;

static void setup(void) {
  g_repo = h_tmpdir();
  char *d = h_tmpdir();
  if (asprintf(&g_log, "%s/server.log", d) < 0) cr_assert_fail("asprintf");
  free(d);
}

static void teardown(void) {
  h_rmtree(g_repo);
  free(g_repo);
  free(g_log);
}

TestSuite(repo, .init = setup, .fini = teardown, .timeout = 60);

static const char *IO = "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n"
                        "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n";

static void model(const char *name, const char *backend, const char *extra, const char *versions) {
  char cfg[4096];
  snprintf(cfg, sizeof cfg, "name: \"%s\"\nbackend: \"%s\"\n%s%s", name, backend, IO, extra ? extra : "");
  h_model(g_repo, name, cfg, versions);
}

static TRITONSERVER_ServerOptions *logged_options(TRITONSERVER_ModelControlMode mode) {
  TRITONSERVER_ServerOptions *o = h_options(g_repo, mode);
  H_OK(TRITONSERVER_ServerOptionsSetLogFile(o, g_log));
  H_OK(TRITONSERVER_ServerOptionsSetLogInfo(o, true));
  return o;
}

static void copy_file(const char *from, const char *to) {
  char *data = NULL;
  size_t len = 0;
  FILE *f = fopen(from, "rb");
  cr_assert_not_null(f, "open %s", from);
  FILE *m = open_memstream(&data, &len);
  int c;
  while ((c = fgetc(f)) != EOF) fputc(c, m);
  fclose(f);
  fclose(m);
  h_mkdirs(to, 0);
  FILE *o = fopen(to, "wb");
  cr_assert_not_null(o, "write %s", to);
  fwrite(data, 1, len, o);
  fclose(o);
  free(data);
}

static bool ready(TRITONSERVER_Server *s, const char *m, int64_t v) {
  bool r = false;
  H_OK(TRITONSERVER_ServerModelIsReady(s, m, v, &r));
  return r;
}

static char *config_of(TRITONSERVER_Server *s, const char *m) {
  TRITONSERVER_Message *msg = NULL;
  H_OK(TRITONSERVER_ServerModelConfig(s, m, -1, 1, &msg));
  return h_msg_text(msg);
}

/* ------------------------------------------------------ search order */

Test(repo, library_in_version_folder_wins) {
  model("m", "identity", NULL, "1");
  char to[4096];
  snprintf(to, sizeof to, "%s/m/1/libtriton_identity.so", g_repo);
  copy_file(NRD_BACKEND_DIR "/identity/libtriton_identity.so", to);
  snprintf(to, sizeof to, "%s/m/libtriton_identity.so", g_repo);
  copy_file(NRD_BACKEND_DIR "/identity/libtriton_identity.so", to);
  TRITONSERVER_Server *s = h_server_new(logged_options(TRITONSERVER_MODEL_CONTROL_NONE));
  cr_assert(ready(s, "m", 1));
  H_OK(TRITONSERVER_ServerDelete(s));
  char *log = h_read(g_log);
  snprintf(to, sizeof to, "from %s/m/1/libtriton_identity.so", g_repo);
  cr_assert(strstr(log, to), "log: %s", log);
  free(log);
}

Test(repo, library_in_model_folder_before_backend_dir) {
  model("m", "identity", NULL, "1");
  char to[4096];
  snprintf(to, sizeof to, "%s/m/libtriton_identity.so", g_repo);
  copy_file(NRD_BACKEND_DIR "/identity/libtriton_identity.so", to);
  TRITONSERVER_Server *s = h_server_new(logged_options(TRITONSERVER_MODEL_CONTROL_NONE));
  cr_assert(ready(s, "m", 1));
  H_OK(TRITONSERVER_ServerDelete(s));
  char *log = h_read(g_log);
  snprintf(to, sizeof to, "from %s/m/libtriton_identity.so", g_repo);
  cr_assert(strstr(log, to), "log: %s", log);
  free(log);
}

Test(repo, library_from_backend_directory) {
  model("m", "identity", NULL, "1");
  TRITONSERVER_Server *s = h_server_new(logged_options(TRITONSERVER_MODEL_CONTROL_NONE));
  cr_assert(ready(s, "m", 1));
  H_OK(TRITONSERVER_ServerDelete(s));
  char *log = h_read(g_log);
  cr_assert(strstr(log, "/identity/libtriton_identity.so"), "log: %s", log);
  free(log);
}

Test(repo, runtime_names_the_library) {
  model("m", "custom", "runtime: \"libmine.so\"\n", "1");
  char to[4096];
  snprintf(to, sizeof to, "%s/m/libmine.so", g_repo);
  copy_file(NRD_BACKEND_DIR "/identity/libtriton_identity.so", to);
  TRITONSERVER_Server *s = h_server_new(logged_options(TRITONSERVER_MODEL_CONTROL_NONE));
  cr_assert(ready(s, "m", 1));
  H_OK(TRITONSERVER_ServerDelete(s));
  char *log = h_read(g_log);
  cr_assert(strstr(log, "libmine.so"), "log: %s", log);
  free(log);
}

Test(repo, runtime_must_be_a_file_name) {
  model("m", "custom", "runtime: \"../evil.so\"\n", "1");
  TRITONSERVER_Server *s = h_server_new(h_options(g_repo, TRITONSERVER_MODEL_CONTROL_EXPLICIT));
  TRITONSERVER_Error *e = TRITONSERVER_ServerLoadModel(s, "m");
  cr_assert_not_null(e);
  cr_assert(strstr(TRITONSERVER_ErrorMessage(e), "runtime"), "%s", TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
  H_OK(TRITONSERVER_ServerDelete(s));
}

/* A backend no folder has: Triton's sentence and code first, then where
 * we looked. */
Test(repo, unknown_backend_fails_with_tritons_sentence) {
  model("m", "no_such_backend", NULL, "1");
  TRITONSERVER_Server *s = h_server_new(h_options(g_repo, TRITONSERVER_MODEL_CONTROL_EXPLICIT));
  TRITONSERVER_Error *e = TRITONSERVER_ServerLoadModel(s, "m");
  cr_assert_not_null(e);
  const char *want = "unable to find backend library for backend 'no_such_backend', try specifying runtime on the "
                     "model configuration.";
  cr_assert(strstr(TRITONSERVER_ErrorMessage(e), want), "%s", TRITONSERVER_ErrorMessage(e));
  cr_assert(strstr(TRITONSERVER_ErrorMessage(e), "libtriton_no_such_backend.so"), "%s", TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
  H_OK(TRITONSERVER_ServerDelete(s));
}

/* Triton's repository manager (core r25.07, LoadModel and OnLoadComplete):
 * INVALID_ARG whatever the backend said, "load failed for model '<m>': "
 * then "version <v> is at UNAVAILABLE state: <code>: <reason>;" for each
 * failed version, then a newline; the index keeps "<code>: <reason>". */
Test(repo, a_failed_load_says_it_as_triton_does) {
  model("m", "failing",
        "version_policy: { all {} }\nparameters [ { key: \"fail_at\" value: { string_value: \"model_init\" } } ]\n",
        "1 2");
  TRITONSERVER_Server *s = h_server_new(h_options(g_repo, TRITONSERVER_MODEL_CONTROL_EXPLICIT));
  TRITONSERVER_Error *e = TRITONSERVER_ServerLoadModel(s, "m");
  cr_assert_not_null(e);
  const char *msg = TRITONSERVER_ErrorMessage(e);
  cr_expect_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_INVALID_ARG, "%s", TRITONSERVER_ErrorCodeString(e));
  cr_expect(strncmp(msg, "load failed for model 'm': version ", 35) == 0, "%s", msg);
  cr_expect(strstr(msg, "version 1 is at UNAVAILABLE state: ") && strstr(msg, "version 2 is at UNAVAILABLE state: "),
            "%s", msg);
  size_t n = strlen(msg);
  cr_expect(n > 2 && msg[n - 2] == ';' && msg[n - 1] == '\n', "%s", msg);
  TRITONSERVER_ErrorDelete(e);
  TRITONSERVER_Message *index = NULL;
  H_OK(TRITONSERVER_ServerModelIndex(s, 0, &index));
  char *text = h_msg_text(index);
  cr_expect(strstr(text, "\"reason\":\"Internal: ") || strstr(text, "\"reason\":\"Invalid argument: "), "%s", text);
  free(text);
  H_OK(TRITONSERVER_ServerDelete(s));
}

/* ------------------------------------------------------ version policy */

Test(repo, default_policy_loads_latest_version) {
  model("m", "identity", NULL, "1 2 10");
  TRITONSERVER_Server *s = h_server_new(h_options(g_repo, TRITONSERVER_MODEL_CONTROL_NONE));
  cr_assert(ready(s, "m", 10));
  cr_assert(!ready(s, "m", 2));
  cr_assert(!ready(s, "m", 1));
  cr_assert(ready(s, "m", -1));
  H_OK(TRITONSERVER_ServerDelete(s));
}

Test(repo, latest_n_all_and_specific) {
  model("latest2", "identity", "version_policy: { latest: { num_versions: 2 } }\n", "1 2 3");
  model("all", "identity", "version_policy: { all: {} }\n", "1 2 3");
  model("spec", "identity", "version_policy: { specific: { versions: [ 1, 3 ] } }\n", "1 2 3");
  /* Non-numeric folders are ignored. */
  h_model(g_repo, "all", NULL, "notaversion");
  TRITONSERVER_Server *s = h_server_new(h_options(g_repo, TRITONSERVER_MODEL_CONTROL_NONE));
  cr_assert(!ready(s, "latest2", 1) && ready(s, "latest2", 2) && ready(s, "latest2", 3));
  cr_assert(ready(s, "all", 1) && ready(s, "all", 2) && ready(s, "all", 3));
  cr_assert(ready(s, "spec", 1) && !ready(s, "spec", 2) && ready(s, "spec", 3));
  /* Metadata lists every ready version. */
  TRITONSERVER_Message *m = NULL;
  H_OK(TRITONSERVER_ServerModelMetadata(s, "all", -1, &m));
  char *meta = h_msg_text(m);
  cr_assert(strstr(meta, "\"versions\":[\"3\",\"2\",\"1\"]") || strstr(meta, "\"versions\":[\"1\",\"2\",\"3\"]"), "%s",
            meta);
  free(meta);
  H_OK(TRITONSERVER_ServerDelete(s));
}

Test(repo, specific_version_missing_fails_load) {
  model("spec", "identity", "version_policy: { specific: { versions: [ 4 ] } }\n", "1");
  TRITONSERVER_Server *s = h_server_new(h_options(g_repo, TRITONSERVER_MODEL_CONTROL_EXPLICIT));
  TRITONSERVER_Error *e = TRITONSERVER_ServerLoadModel(s, "spec");
  cr_assert_not_null(e);
  cr_assert(strstr(TRITONSERVER_ErrorMessage(e), "version 4"), "%s", TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
  H_OK(TRITONSERVER_ServerDelete(s));
}

Test(repo, no_version_folder_fails_load) {
  h_write(g_repo, "m/config.pbtxt", "backend: \"identity\"\n");
  TRITONSERVER_Server *s = h_server_new(h_options(g_repo, TRITONSERVER_MODEL_CONTROL_EXPLICIT));
  TRITONSERVER_Error *e = TRITONSERVER_ServerLoadModel(s, "m");
  cr_assert_not_null(e);
  cr_assert(strstr(TRITONSERVER_ErrorMessage(e), "version"), "%s", TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
  H_OK(TRITONSERVER_ServerDelete(s));
}

/* ------------------------------------------------------ control modes */

Test(repo, none_mode_loads_all_and_refuses_control) {
  model("a", "identity", NULL, "1");
  model("b", "identity", NULL, "1");
  TRITONSERVER_Server *s = h_server_new(h_options(g_repo, TRITONSERVER_MODEL_CONTROL_NONE));
  cr_assert(ready(s, "a", -1) && ready(s, "b", -1));
  TRITONSERVER_Error *e = TRITONSERVER_ServerLoadModel(s, "a");
  cr_assert_not_null(e);
  cr_assert_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_UNAVAILABLE);
  TRITONSERVER_ErrorDelete(e);
  e = TRITONSERVER_ServerUnloadModel(s, "a");
  cr_assert_not_null(e);
  TRITONSERVER_ErrorDelete(e);
  e = TRITONSERVER_ServerPollModelRepository(s);
  cr_assert_not_null(e);
  TRITONSERVER_ErrorDelete(e);
  bool r = false;
  H_OK(TRITONSERVER_ServerIsReady(s, &r));
  cr_assert(r);
  H_OK(TRITONSERVER_ServerDelete(s));
}

Test(repo, none_mode_with_a_broken_model_returns_server_and_error) {
  model("good", "identity", NULL, "1");
  h_model(g_repo, "broken", "name: \"broken\"\nbackend: \"identity\"\nmax_batch_size: oops\n", "1");
  TRITONSERVER_ServerOptions *o = h_options(g_repo, TRITONSERVER_MODEL_CONTROL_NONE);
  TRITONSERVER_Server *s = NULL;
  TRITONSERVER_Error *e = TRITONSERVER_ServerNew(&s, o);
  TRITONSERVER_ServerOptionsDelete(o);
  cr_assert_not_null(e);
  TRITONSERVER_ErrorDelete(e);
  cr_assert_not_null(s, "Triton returns the server too, so the good models can keep serving");
  cr_assert(ready(s, "good", -1));
  TRITONSERVER_Message *m = NULL;
  H_OK(TRITONSERVER_ServerModelIndex(s, 0, &m));
  char *idx = h_msg_text(m);
  cr_assert(strstr(idx, "broken/config.pbtxt:3:"), "reason names file and line: %s", idx);
  free(idx);
  bool r = true;
  H_OK(TRITONSERVER_ServerIsReady(s, &r));
  cr_assert(!r, "strict readiness: a failed model makes the server not ready");
  H_OK(TRITONSERVER_ServerDelete(s));
}

Test(repo, explicit_mode_startup_models) {
  model("a", "identity", NULL, "1");
  model("b", "identity", NULL, "1");
  TRITONSERVER_ServerOptions *o = h_options(g_repo, TRITONSERVER_MODEL_CONTROL_EXPLICIT);
  H_OK(TRITONSERVER_ServerOptionsSetStartupModel(o, "b"));
  TRITONSERVER_Server *s = h_server_new(o);
  cr_assert(!ready(s, "a", -1) && ready(s, "b", -1));
  /* The index lists models on disk that were never loaded, by name only. */
  TRITONSERVER_Message *m = NULL;
  H_OK(TRITONSERVER_ServerModelIndex(s, 0, &m));
  char *idx = h_msg_text(m);
  cr_assert(strstr(idx, "{\"name\":\"a\"}"), "%s", idx);
  free(idx);
  H_OK(TRITONSERVER_ServerModelIndex(s, TRITONSERVER_INDEX_FLAG_READY, &m));
  idx = h_msg_text(m);
  cr_assert(!strstr(idx, "\"a\"") && strstr(idx, "\"b\""), "%s", idx);
  free(idx);
  H_OK(TRITONSERVER_ServerLoadModel(s, "a"));
  cr_assert(ready(s, "a", -1));
  H_OK(TRITONSERVER_ServerUnloadModel(s, "b"));
  cr_assert(!ready(s, "b", -1));
  H_OK(TRITONSERVER_ServerUnloadModel(s, "never_loaded"));
  TRITONSERVER_Error *e = TRITONSERVER_ServerLoadModel(s, "missing");
  cr_assert_not_null(e);
  TRITONSERVER_ErrorDelete(e);
  H_OK(TRITONSERVER_ServerDelete(s));
}

Test(repo, explicit_mode_star_loads_everything) {
  model("a", "identity", NULL, "1");
  model("b", "identity", NULL, "1");
  TRITONSERVER_ServerOptions *o = h_options(g_repo, TRITONSERVER_MODEL_CONTROL_EXPLICIT);
  H_OK(TRITONSERVER_ServerOptionsSetStartupModel(o, "*"));
  TRITONSERVER_Server *s = h_server_new(o);
  cr_assert(ready(s, "a", -1) && ready(s, "b", -1));
  H_OK(TRITONSERVER_ServerDelete(s));
}

/* Moves every mtime under the model back so the next write counts as new. */
static void touch_later(const char *rel) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", g_repo, rel);
  struct utimbuf t = {time(NULL) + 100, time(NULL) + 100};
  utime(path, &t);
}

Test(repo, poll_mode_adds_changes_and_removes) {
  model("a", "identity", NULL, "1");
  TRITONSERVER_Server *s = h_server_new(h_options(g_repo, TRITONSERVER_MODEL_CONTROL_POLL));
  cr_assert(ready(s, "a", -1));
  /* New model. */
  model("b", "identity", NULL, "1");
  H_OK(TRITONSERVER_ServerPollModelRepository(s));
  cr_assert(ready(s, "b", -1));
  /* Changed config reloads. */
  model("a", "identity", "parameters { key: \"execute_delay_ms\" value: { string_value: \"0\" } }\n", "1");
  touch_later("a/config.pbtxt");
  H_OK(TRITONSERVER_ServerPollModelRepository(s));
  char *cfg = config_of(s, "a");
  cr_assert(strstr(cfg, "execute_delay_ms"), "reloaded config: %s", cfg);
  free(cfg);
  /* New version folder: latest policy switches to it. */
  h_model(g_repo, "b", NULL, "2");
  touch_later("b/2");
  H_OK(TRITONSERVER_ServerPollModelRepository(s));
  cr_assert(ready(s, "b", 2) && !ready(s, "b", 1));
  /* Removed model unloads. */
  char path[4096];
  snprintf(path, sizeof path, "%s/a", g_repo);
  h_rmtree(path);
  H_OK(TRITONSERVER_ServerPollModelRepository(s));
  cr_assert(!ready(s, "a", -1));
  cr_assert(ready(s, "b", -1));
  TRITONSERVER_Error *e = TRITONSERVER_ServerLoadModel(s, "b");
  cr_assert_not_null(e, "explicit load is refused in poll mode");
  TRITONSERVER_ErrorDelete(e);
  H_OK(TRITONSERVER_ServerDelete(s));
}

/* A client keeps sending while the model is reloaded: nothing is dropped. */

/* Shared by the senders of a test and its main thread: `epoch` moves
 * every time the main thread has loaded the models again, and a refused
 * sender waits for it to move instead of spinning on refusals (four
 * spinning senders took most of two loaded cores from the loads they
 * were waiting for). */
typedef struct send_gate {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  unsigned epoch;
  bool stop;
} send_gate;

typedef struct load_loop {
  TRITONSERVER_Server *s;
  const char *model; /* "m" when NULL */
  bool batched; /* the model batches: the input gets a batch dimension of 1 */
  bool refusals_ok; /* the model may be unloaded: a refused request is no failure */
  send_gate *gate; /* NULL: retry a refused request at once */
  atomic_bool stop;
  atomic_int ok, failed, refused;
} load_loop;

/* Waits, refused, until the models are loaded again or the test stops. */
static void gate_wait(send_gate *g, unsigned seen) {
  pthread_mutex_lock(&g->mu);
  while (g->epoch == seen && !g->stop) pthread_cond_wait(&g->cv, &g->mu);
  pthread_mutex_unlock(&g->mu);
}

static void gate_move(send_gate *g, bool stop) {
  pthread_mutex_lock(&g->mu);
  g->epoch++;
  g->stop = g->stop || stop;
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->mu);
}

static void refused_once(load_loop *l, unsigned epoch) {
  if (l->refusals_ok)
    atomic_fetch_add(&l->refused, 1);
  else
    atomic_fetch_add(&l->failed, 1);
  if (l->gate) gate_wait(l->gate, epoch);
}

static void *sender(void *arg) {
  load_loop *l = arg;
  float in[4] = {1, 2, 3, 4};
  int64_t shape[2] = {1, 4};
  const char *model = l->model ? l->model : "m";
  while (!atomic_load(&l->stop)) {
    unsigned epoch = 0;
    if (l->gate) {
      pthread_mutex_lock(&l->gate->mu);
      epoch = l->gate->epoch;
      pthread_mutex_unlock(&l->gate->mu);
    }
    TRITONSERVER_InferenceRequest *r = NULL;
    TRITONSERVER_Error *e = TRITONSERVER_InferenceRequestNew(&r, l->s, model, -1);
    if (e) {
      TRITONSERVER_ErrorDelete(e);
      refused_once(l, epoch);
      continue;
    }
    if (l->batched)
      h_add_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, shape, 2, in, sizeof in);
    else
      h_add_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, shape + 1, 1, in, sizeof in);
    h_call *c = h_call_new();
    h_bind(r, c);
    e = TRITONSERVER_ServerInferAsync(l->s, r, NULL);
    if (e) {
      /* Raced with the swap or the unload: refused before entering. */
      TRITONSERVER_ErrorDelete(e);
      h_call_free(c);
      TRITONSERVER_InferenceRequestDelete(r);
      refused_once(l, epoch);
      continue;
    }
    cr_assert(h_wait(c, 60000), "an accepted request had no final response within 60 s");
    char *err = h_response_error(c, 0);
    if (err)
      atomic_fetch_add(&l->failed, 1), free(err);
    else
      atomic_fetch_add(&l->ok, 1);
    h_call_free(c);
    TRITONSERVER_InferenceRequestDelete(r);
  }
  return NULL;
}

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Polls until every one of the `n` senders' counter (`ok` or `refused`)
 * is at least `at_least[i]`, for up to 60 s; false on the deadline. The
 * deadline is generous: on two cores shared with a soak, one request
 * round trip of this ASan build took over a second. */
static bool senders_reach(load_loop *l, int n, bool refusals, const int *at_least) {
  uint64_t until = now_ms() + 60000;
  for (;;) {
    int behind = 0;
    for (int i = 0; i < n; i++)
      if (atomic_load(refusals ? &l[i].refused : &l[i].ok) < at_least[i]) behind++;
    if (!behind) return true;
    if (now_ms() > until) return false;
    usleep(500);
  }
}

Test(repo, reload_keeps_serving) {
  model("m", "identity", "parameters { key: \"execute_delay_ms\" value: { string_value: \"1\" } }\n", "1");
  TRITONSERVER_Server *s = h_server_new(h_options(g_repo, TRITONSERVER_MODEL_CONTROL_EXPLICIT));
  H_OK(TRITONSERVER_ServerLoadModel(s, "m"));
  load_loop l = {.s = s};
  pthread_t t;
  pthread_create(&t, NULL, sender, &l);
  /* Each reload happens with requests going: a few answered before it. */
  for (int i = 0; i < 5; i++) {
    int want = atomic_load(&l.ok) + 3;
    cr_assert(senders_reach(&l, 1, false, &want), "no request answered within 60 s");
    H_OK(TRITONSERVER_ServerLoadModel(s, "m"));
  }
  int want = atomic_load(&l.ok) + 3;
  cr_assert(senders_reach(&l, 1, false, &want), "no request answered within 60 s after the last reload");
  atomic_store(&l.stop, true);
  pthread_join(t, NULL);
  cr_assert_gt(atomic_load(&l.ok), 10);
  cr_assert_eq(atomic_load(&l.failed), 0, "%d requests failed during reloads", atomic_load(&l.failed));
  H_OK(TRITONSERVER_ServerDelete(s));
}

/* An unload may tear a model's scheduler down only after every
 * ServerInferAsync that saw the model ready has left the scheduler's
 * enqueue: a request can be batched, executed and released, letting the
 * model drain, while its sender is still in the enqueue waking an
 * instance thread after the unlock. Two senders per model run against the
 * dynamic batcher and the default scheduler while both models are unloaded
 * and loaded again. The TSan build reported the dynamic batcher's wake-up
 * racing with its destruction here before the fix; every accepted request
 * must succeed.
 *
 * Each round waits for events, not for time: every sender has been
 * refused by the unloaded models (so each was sending across the unload),
 * and every sender has had two requests answered by the models loaded
 * again (so the next unload meets senders in full flow). A refused sender
 * waits for the next load rather than spinning. */
Test(repo, unload_waits_for_senders_inside_enqueue) {
  model("dyn", "identity",
        "max_batch_size: 8\ninstance_group [ { kind: KIND_CPU count: 2 } ]\n"
        "dynamic_batching { max_queue_delay_microseconds: 100 }\n",
        "1");
  model("plain", "identity", "instance_group [ { kind: KIND_CPU count: 2 } ]\n", "1");
  TRITONSERVER_Server *s = h_server_new(h_options(g_repo, TRITONSERVER_MODEL_CONTROL_EXPLICIT));
  const char *names[2] = {"dyn", "plain"};
  send_gate gate = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
  load_loop l[4];
  pthread_t t[4];
  for (int i = 0; i < 4; i++) {
    l[i] = (load_loop){.s = s, .model = names[i % 2], .batched = i % 2 == 0, .refusals_ok = true, .gate = &gate};
    H_OK(TRITONSERVER_ServerLoadModel(s, names[i % 2]));
  }
  for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, sender, &l[i]);
  int want[4];
  for (int i = 0; i < 4; i++) want[i] = 2;
  cr_assert(senders_reach(l, 4, false, want), "the senders had no answers within 60 s");
  for (int round = 0; round < 40; round++) {
    for (int i = 0; i < 4; i++) want[i] = atomic_load(&l[i].refused) + 1;
    for (int k = 0; k < 2; k++) H_OK(TRITONSERVER_ServerUnloadModel(s, names[k]));
    cr_assert(senders_reach(l, 4, true, want), "round %d: a sender was not refused within 60 s of the unload", round);
    for (int i = 0; i < 4; i++) want[i] = atomic_load(&l[i].ok) + 2;
    for (int k = 0; k < 2; k++) H_OK(TRITONSERVER_ServerLoadModel(s, names[k]));
    gate_move(&gate, false);
    cr_assert(senders_reach(l, 4, false, want), "round %d: a sender had no answers within 60 s of the load", round);
  }
  for (int i = 0; i < 4; i++) atomic_store(&l[i].stop, true);
  gate_move(&gate, true);
  int ok = 0, refused = 0;
  for (int i = 0; i < 4; i++) {
    pthread_join(t[i], NULL);
    int failed = atomic_load(&l[i].failed);
    cr_expect_eq(failed, 0, "sender %d (%s): %d accepted requests failed", i, names[i % 2], failed);
    ok += atomic_load(&l[i].ok);
    refused += atomic_load(&l[i].refused);
  }
  cr_expect_geq(refused, 4 * 40, "only %d refusals in 40 unloads of 4 senders", refused);
  cr_expect_gt(ok, 100, "only %d requests succeeded (%d refused)", ok, refused);
  H_OK(TRITONSERVER_ServerDelete(s));
}

/* ------------------------------------------------------ auto-complete */

Test(repo, backend_completes_a_sparse_config) {
  h_model(g_repo, "ac", "backend: \"autocomplete\"\n", "1");
  TRITONSERVER_ServerOptions *o = h_options(g_repo, TRITONSERVER_MODEL_CONTROL_NONE);
  H_OK(TRITONSERVER_ServerOptionsSetStrictModelConfig(o, false));
  TRITONSERVER_Server *s = h_server_new(o);
  char *cfg = config_of(s, "ac");
  cr_assert(strstr(cfg, "\"INPUT0\"") && strstr(cfg, "\"max_batch_size\":8"), "%s", cfg);
  free(cfg);
  H_OK(TRITONSERVER_ServerDelete(s));
}

Test(repo, strict_config_disables_auto_complete) {
  h_model(g_repo, "ac", "backend: \"autocomplete\"\n", "1");
  TRITONSERVER_ServerOptions *o = h_options(g_repo, TRITONSERVER_MODEL_CONTROL_NONE);
  H_OK(TRITONSERVER_ServerOptionsSetStrictModelConfig(o, true));
  TRITONSERVER_Server *s = NULL;
  TRITONSERVER_Error *e = TRITONSERVER_ServerNew(&s, o);
  TRITONSERVER_ServerOptionsDelete(o);
  if (e) TRITONSERVER_ErrorDelete(e);
  cr_assert_not_null(s);
  if (ready(s, "ac", -1)) {
    char *cfg = config_of(s, "ac");
    cr_assert_null(strstr(cfg, "\"INPUT0\""), "backend completed despite strict config: %s", cfg);
    free(cfg);
  }
  H_OK(TRITONSERVER_ServerDelete(s));
}

Test(repo, missing_config_needs_auto_complete) {
  h_model(g_repo, "noconf", NULL, "1");
  TRITONSERVER_ServerOptions *o = h_options(g_repo, TRITONSERVER_MODEL_CONTROL_EXPLICIT);
  H_OK(TRITONSERVER_ServerOptionsSetStrictModelConfig(o, true));
  TRITONSERVER_Server *s = h_server_new(o);
  TRITONSERVER_Error *e = TRITONSERVER_ServerLoadModel(s, "noconf");
  cr_assert_not_null(e);
  cr_assert(strstr(TRITONSERVER_ErrorMessage(e), "auto-complete is disabled"), "%s", TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
  H_OK(TRITONSERVER_ServerDelete(s));
}

/* ------------------------------------------------------ load parameters */

Test(repo, config_override_replaces_the_file) {
  model("m", "identity", NULL, "1");
  TRITONSERVER_Server *s = h_server_new(h_options(g_repo, TRITONSERVER_MODEL_CONTROL_EXPLICIT));
  const char *json = "{\"backend\":\"identity\",\"max_batch_size\":4,"
                     "\"input\":[{\"name\":\"INPUT0\",\"data_type\":\"TYPE_INT32\",\"dims\":[2]}],"
                     "\"output\":[{\"name\":\"OUTPUT0\",\"data_type\":\"TYPE_INT32\",\"dims\":[2]}]}";
  TRITONSERVER_Parameter *p = TRITONSERVER_ParameterNew("config", TRITONSERVER_PARAMETER_STRING, json);
  const TRITONSERVER_Parameter *params[1] = {p};
  H_OK(TRITONSERVER_ServerLoadModelWithParameters(s, "m", params, 1));
  TRITONSERVER_ParameterDelete(p);
  char *cfg = config_of(s, "m");
  cr_assert(strstr(cfg, "TYPE_INT32") && strstr(cfg, "\"max_batch_size\":4"), "%s", cfg);
  free(cfg);
  /* A broken override is an error naming the field; the old model stays. */
  p = TRITONSERVER_ParameterNew("config", TRITONSERVER_PARAMETER_STRING, "{\"max_batch_sise\": 1}");
  params[0] = p;
  TRITONSERVER_Error *e = TRITONSERVER_ServerLoadModelWithParameters(s, "m", params, 1);
  TRITONSERVER_ParameterDelete(p);
  cr_assert_not_null(e);
  cr_assert(strstr(TRITONSERVER_ErrorMessage(e), "max_batch_sise"), "%s", TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
  cr_assert(ready(s, "m", -1));
  /* Unknown parameter names are refused. */
  p = TRITONSERVER_ParameterNew("colour", TRITONSERVER_PARAMETER_STRING, "red");
  params[0] = p;
  e = TRITONSERVER_ServerLoadModelWithParameters(s, "m", params, 1);
  TRITONSERVER_ParameterDelete(p);
  cr_assert_not_null(e);
  TRITONSERVER_ErrorDelete(e);
  H_OK(TRITONSERVER_ServerDelete(s));
}

Test(repo, file_overrides_make_a_model) {
  TRITONSERVER_Server *s = h_server_new(h_options(g_repo, TRITONSERVER_MODEL_CONTROL_EXPLICIT));
  const char *json = "{\"backend\":\"identity\","
                     "\"input\":[{\"name\":\"INPUT0\",\"data_type\":\"TYPE_FP32\",\"dims\":[4]}],"
                     "\"output\":[{\"name\":\"OUTPUT0\",\"data_type\":\"TYPE_FP32\",\"dims\":[4]}]}";
  const char blob[] = "weights";
  TRITONSERVER_Parameter *pc = TRITONSERVER_ParameterNew("config", TRITONSERVER_PARAMETER_STRING, json);
  TRITONSERVER_Parameter *pf = TRITONSERVER_ParameterBytesNew("file:1/model.bin", blob, sizeof blob);
  const TRITONSERVER_Parameter *params[2] = {pc, pf};
  H_OK(TRITONSERVER_ServerLoadModelWithParameters(s, "virtual", params, 2));
  cr_assert(ready(s, "virtual", 1));
  /* Files without a config are refused; paths may not escape the model. */
  TRITONSERVER_Error *e = TRITONSERVER_ServerLoadModelWithParameters(s, "virtual", params + 1, 1);
  cr_assert_not_null(e);
  TRITONSERVER_ErrorDelete(e);
  TRITONSERVER_ParameterDelete(pf);
  pf = TRITONSERVER_ParameterBytesNew("file:../../etc/x", blob, sizeof blob);
  params[1] = pf;
  e = TRITONSERVER_ServerLoadModelWithParameters(s, "virtual", params, 2);
  cr_assert_not_null(e);
  TRITONSERVER_ErrorDelete(e);
  TRITONSERVER_ParameterDelete(pc);
  TRITONSERVER_ParameterDelete(pf);
  H_OK(TRITONSERVER_ServerDelete(s));
}

/* ------------------------------------------------------ several repositories */

Test(repo, several_repositories_and_duplicates) {
  char *second = h_tmpdir();
  model("a", "identity", NULL, "1");
  char cfg[1024];
  snprintf(cfg, sizeof cfg, "backend: \"identity\"\n%s", IO);
  h_model(second, "b", cfg, "1");
  h_model(second, "a", cfg, "1"); /* same name in both */
  TRITONSERVER_ServerOptions *o = h_options(g_repo, TRITONSERVER_MODEL_CONTROL_EXPLICIT);
  H_OK(TRITONSERVER_ServerOptionsSetModelRepositoryPath(o, second));
  TRITONSERVER_Server *s = h_server_new(o);
  H_OK(TRITONSERVER_ServerLoadModel(s, "b"));
  TRITONSERVER_Error *e = TRITONSERVER_ServerLoadModel(s, "a");
  cr_assert_not_null(e);
  cr_assert(strstr(TRITONSERVER_ErrorMessage(e), "more than one repository"), "%s", TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
  H_OK(TRITONSERVER_ServerDelete(s));
  h_rmtree(second);
  free(second);
}

Test(repo, missing_repository_fails_server_new) {
  TRITONSERVER_ServerOptions *o = h_options("/nonexistent/nereid/repo", TRITONSERVER_MODEL_CONTROL_NONE);
  TRITONSERVER_Server *s = NULL;
  TRITONSERVER_Error *e = TRITONSERVER_ServerNew(&s, o);
  TRITONSERVER_ServerOptionsDelete(o);
  cr_assert_not_null(e);
  cr_assert(strstr(TRITONSERVER_ErrorMessage(e), "/nonexistent/nereid/repo"), "%s", TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
  cr_assert_null(s);
}

static void expect_code(TRITONSERVER_Error *e, TRITONSERVER_Error_Code code, const char *text) {
  cr_assert_not_null(e, "expected an error containing '%s'", text);
  cr_assert_eq(TRITONSERVER_ErrorCode(e), code, "%s: %s", TRITONSERVER_ErrorCodeString(e),
               TRITONSERVER_ErrorMessage(e));
  cr_assert(strstr(TRITONSERVER_ErrorMessage(e), text), "%s", TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
}

/* Repositories added and removed at run time, with folders given model
 * names of their own, as Triton's in-process API does it. */
Test(repo, register_and_unregister_repositories) {
  model("a", "identity", NULL, "1");
  char *extra = h_tmpdir();
  /* Folder "m_dir" holds a model whose configuration calls it "x": mapped
   * to "renamed", it takes that name. Folder "plain" keeps its own. */
  h_model(extra, "m_dir",
          "name: \"x\"\nbackend: \"identity\"\n"
          "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n"
          "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n",
          "1");
  h_model(extra, "plain",
          "name: \"plain\"\nbackend: \"identity\"\n"
          "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n"
          "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n",
          "1");
  TRITONSERVER_Server *s = h_server_new(h_options(g_repo, TRITONSERVER_MODEL_CONTROL_EXPLICIT));
  expect_code(TRITONSERVER_ServerLoadModel(s, "plain"), TRITONSERVER_ERROR_INTERNAL, "plain");

  TRITONSERVER_Parameter *map = TRITONSERVER_ParameterNew("m_dir", TRITONSERVER_PARAMETER_STRING, "renamed");
  const TRITONSERVER_Parameter *maps[1] = {map};
  H_OK(TRITONSERVER_ServerRegisterModelRepository(s, extra, maps, 1));
  expect_code(TRITONSERVER_ServerRegisterModelRepository(s, extra, NULL, 0), TRITONSERVER_ERROR_ALREADY_EXISTS,
              "has already been registered");
  char *other = h_tmpdir();
  expect_code(TRITONSERVER_ServerRegisterModelRepository(s, other, maps, 1), TRITONSERVER_ERROR_ALREADY_EXISTS,
              "conflicting mapping for 'renamed'");
  TRITONSERVER_Parameter *twice[2] = {TRITONSERVER_ParameterNew("p", TRITONSERVER_PARAMETER_STRING, "same"),
                                      TRITONSERVER_ParameterNew("q", TRITONSERVER_PARAMETER_STRING, "same")};
  expect_code(TRITONSERVER_ServerRegisterModelRepository(s, other, (const TRITONSERVER_Parameter **)twice, 2),
              TRITONSERVER_ERROR_INVALID_ARG, "conflicting mapping for 'same'");
  int64_t one = 1;
  TRITONSERVER_Parameter *not_string = TRITONSERVER_ParameterNew("p", TRITONSERVER_PARAMETER_INT, &one);
  const TRITONSERVER_Parameter *bad[1] = {not_string};
  expect_code(TRITONSERVER_ServerRegisterModelRepository(s, other, bad, 1), TRITONSERVER_ERROR_INVALID_ARG,
              "must be a string");
  expect_code(TRITONSERVER_ServerRegisterModelRepository(s, "/no/such/repository", NULL, 0),
              TRITONSERVER_ERROR_INVALID_ARG, "repository not found");

  /* The mapped folder answers to its mapped name only; the other folder to its own. */
  TRITONSERVER_Message *m = NULL;
  H_OK(TRITONSERVER_ServerModelIndex(s, 0, &m));
  char *idx = h_msg_text(m);
  cr_assert(strstr(idx, "\"renamed\"") && strstr(idx, "\"plain\"") && !strstr(idx, "m_dir"), "%s", idx);
  free(idx);
  H_OK(TRITONSERVER_ServerLoadModel(s, "renamed"));
  H_OK(TRITONSERVER_ServerLoadModel(s, "plain"));
  cr_assert(ready(s, "renamed", 1) && ready(s, "plain", 1));
  expect_code(TRITONSERVER_ServerLoadModel(s, "m_dir"), TRITONSERVER_ERROR_INTERNAL, "m_dir");
  H_OK(TRITONSERVER_ServerModelConfig(s, "renamed", -1, 1, &m));
  idx = h_msg_text(m);
  cr_assert(strstr(idx, "\"name\":\"renamed\""), "%s", idx);
  free(idx);

  /* Unregistered: loaded models stay; the folders are no longer found. */
  H_OK(TRITONSERVER_ServerUnregisterModelRepository(s, extra));
  expect_code(TRITONSERVER_ServerUnregisterModelRepository(s, extra), TRITONSERVER_ERROR_INVALID_ARG,
              "repository not found");
  cr_assert(ready(s, "renamed", 1));
  H_OK(TRITONSERVER_ServerUnloadModel(s, "plain"));
  expect_code(TRITONSERVER_ServerLoadModel(s, "plain"), TRITONSERVER_ERROR_INTERNAL, "plain");
  /* The repository given at startup can go too, and come back. */
  H_OK(TRITONSERVER_ServerUnregisterModelRepository(s, g_repo));
  H_OK(TRITONSERVER_ServerRegisterModelRepository(s, g_repo, NULL, 0));
  H_OK(TRITONSERVER_ServerLoadModel(s, "a"));
  H_OK(TRITONSERVER_ServerDelete(s));

  /* Other control modes refuse, as Triton does. */
  s = h_server_new(h_options(g_repo, TRITONSERVER_MODEL_CONTROL_NONE));
  expect_code(TRITONSERVER_ServerRegisterModelRepository(s, extra, NULL, 0), TRITONSERVER_ERROR_UNSUPPORTED,
              "EXPLICIT");
  expect_code(TRITONSERVER_ServerUnregisterModelRepository(s, g_repo), TRITONSERVER_ERROR_UNSUPPORTED, "EXPLICIT");
  H_OK(TRITONSERVER_ServerDelete(s));
  TRITONSERVER_ParameterDelete(map);
  TRITONSERVER_ParameterDelete(twice[0]);
  TRITONSERVER_ParameterDelete(twice[1]);
  TRITONSERVER_ParameterDelete(not_string);
  h_rmtree(extra);
  h_rmtree(other);
  free(extra);
  free(other);
}

/* ------------------------------------------------ model namespacing */

/* An ensemble `name` of one identity step on `step`, FP32 [n]. */
static void ns_ensemble(const char *repo, const char *name, const char *step, int n) {
  char cfg[1024];
  snprintf(cfg, sizeof cfg,
           "name: \"%s\"\nplatform: \"ensemble\"\n"
           "input [ { name: \"IN\" data_type: TYPE_FP32 dims: [ %d ] } ]\n"
           "output [ { name: \"OUT\" data_type: TYPE_FP32 dims: [ %d ] } ]\n"
           "ensemble_scheduling { step [ { model_name: \"%s\" model_version: -1\n"
           "  input_map { key: \"INPUT0\" value: \"IN\" } output_map { key: \"OUTPUT0\" value: \"OUT\" } } ] }\n",
           name, n, n, step);
  h_model(repo, name, cfg, "1");
}

/* An identity model `name` of FP32 [n]. */
static void ns_identity(const char *repo, const char *name, int n) {
  char cfg[1024];
  snprintf(cfg, sizeof cfg,
           "name: \"%s\"\nbackend: \"identity\"\n"
           "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ %d ] } ]\n"
           "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ %d ] } ]\n",
           name, n, n);
  h_model(repo, name, cfg, "1");
}

/* Runs ensemble `name` on n floats; true when OUT came back equal. */
static bool ns_echo(TRITONSERVER_Server *s, const char *name, int n) {
  float in[4] = {1.5f, -2, 3, 8};
  int64_t shape[1] = {n};
  TRITONSERVER_InferenceRequest *r = h_request(s, name);
  h_add_input(r, "IN", TRITONSERVER_TYPE_FP32, shape, 1, in, (size_t)n * sizeof(float));
  h_call *c = h_infer(s, r);
  char *err = h_response_error(c, 0);
  h_output out;
  bool ok = !err && h_find_output(c->responses[0], "OUT", &out) && out.size == (size_t)n * sizeof(float) &&
            !memcmp(out.base, in, out.size);
  cr_expect(ok, "%s: %s", name, err ? err : "wrong output");
  free(err);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  return ok;
}

/* How many rows of the index name `name` with state READY. */
static int ns_ready_rows(TRITONSERVER_Server *s, const char *name) {
  TRITONSERVER_Message *m = NULL;
  H_OK(TRITONSERVER_ServerModelIndex(s, 0, &m));
  char *text = h_msg_text(m);
  json_t *idx = json_loads(text, 0, NULL);
  int rows = 0;
  for (size_t i = 0; i < json_array_size(idx); i++) {
    const json_t *row = json_array_get(idx, i);
    rows += !strcmp(json_string_value(json_object_get(row, "name")) ?: "", name) &&
            !strcmp(json_string_value(json_object_get(row, "state")) ?: "", "READY");
  }
  json_decref(idx);
  free(text);
  return rows;
}

/* A server with namespacing on the suite's repository and `second`, in `mode`. */
static TRITONSERVER_Server *two_repo_server(const char *second, TRITONSERVER_ModelControlMode mode, bool load_all) {
  TRITONSERVER_ServerOptions *o = logged_options(mode);
  H_OK(TRITONSERVER_ServerOptionsSetModelRepositoryPath(o, second));
  if (load_all) H_OK(TRITONSERVER_ServerOptionsSetStartupModel(o, "*"));
  H_OK(TRITONSERVER_ServerOptionsSetModelNamespacing(o, true));
  return h_server_new(o);
}

/* --model-namespacing: one name in two repositories gives two models; a
 * name alone is ambiguous, an ensemble finds its own repository's model
 * first, then a model loaded in one namespace only; unload and load act
 * on every namespace. */
Test(repo, namespacing_keeps_one_name_per_repository) {
  char *second = h_tmpdir();
  ns_identity(g_repo, "m", 4);
  ns_ensemble(g_repo, "ens", "m", 4); /* needs A's m: B's has 2 elements */
  ns_ensemble(g_repo, "ens_solo", "solo", 4); /* solo is only in B */
  ns_identity(second, "m", 2);
  ns_ensemble(second, "ens_b", "m", 2);
  ns_identity(second, "solo", 4);
  TRITONSERVER_Server *s = two_repo_server(second, TRITONSERVER_MODEL_CONTROL_EXPLICIT, true);

  cr_expect_eq(ns_ready_rows(s, "m"), 2);
  TRITONSERVER_Message *msg = NULL;
  expect_code(TRITONSERVER_ServerModelMetadata(s, "m", -1, &msg), TRITONSERVER_ERROR_INVALID_ARG,
              "model namespace must be provided");
  expect_code(TRITONSERVER_ServerModelStatistics(s, "m", -1, &msg), TRITONSERVER_ERROR_INVALID_ARG,
              "There are 2 identifiers of model 'm'");
  TRITONSERVER_InferenceRequest *r = NULL;
  expect_code(TRITONSERVER_InferenceRequestNew(&r, s, "m", -1), TRITONSERVER_ERROR_INVALID_ARG, "ambiguity");
  bool ready = true;
  H_OK(TRITONSERVER_ServerModelIsReady(s, "m", -1, &ready));
  cr_expect_not(ready);
  ns_echo(s, "ens", 4);
  ns_echo(s, "ens_b", 2);
  ns_echo(s, "ens_solo", 4);
  H_OK(TRITONSERVER_ServerModelIsReady(s, "solo", -1, &ready));
  cr_expect(ready, "a name in one namespace only is found by name");
  /* Every namespace's m counted its ensemble's call. */
  H_OK(TRITONSERVER_ServerModelStatistics(s, "", -1, &msg));
  char *text = h_msg_text(msg);
  json_t *all = json_loads(text, 0, NULL);
  int m_rows = 0;
  json_t *stats = json_object_get(all, "model_stats");
  for (size_t i = 0; i < json_array_size(stats); i++) {
    const json_t *row = json_array_get(stats, i);
    if (strcmp(json_string_value(json_object_get(row, "name")) ?: "", "m")) continue;
    m_rows++;
    cr_expect_eq(json_integer_value(json_object_get(row, "inference_count")), 1);
  }
  cr_expect_eq(m_rows, 2);
  json_decref(all);
  free(text);

  /* Unloading m unloads both, and the ensembles that use them. */
  H_OK(TRITONSERVER_ServerUnloadModel(s, "m"));
  H_OK(TRITONSERVER_ServerModelIsReady(s, "ens", -1, &ready));
  for (int i = 0; i < 500 && (ns_ready_rows(s, "m") || ns_ready_rows(s, "ens_b")); i++) usleep(10000);
  cr_expect_eq(ns_ready_rows(s, "m"), 0);
  cr_expect_eq(ns_ready_rows(s, "ens_b"), 0);
  expect_code(TRITONSERVER_ServerModelMetadata(s, "m", -1, &msg), TRITONSERVER_ERROR_NOT_FOUND, "unknown model");
  /* Loading an ensemble brings its steps in every namespace back. */
  H_OK(TRITONSERVER_ServerLoadModel(s, "ens_b"));
  cr_expect_eq(ns_ready_rows(s, "m"), 2);
  ns_echo(s, "ens_b", 2);
  H_OK(TRITONSERVER_ServerLoadModel(s, "ens"));
  ns_echo(s, "ens", 4);
  H_OK(TRITONSERVER_ServerDelete(s));
  h_rmtree(second);
  free(second);
}

/* Polling with namespacing: a second repository's folder of a loaded name
 * is a new model; removing one repository's folder unloads that one only. */
Test(repo, namespacing_poll_adds_and_removes_per_repository) {
  char *second = h_tmpdir();
  ns_identity(g_repo, "m", 4);
  ns_ensemble(g_repo, "ens", "m", 4);
  TRITONSERVER_Server *s = two_repo_server(second, TRITONSERVER_MODEL_CONTROL_POLL, false);
  cr_assert(ready(s, "m", -1));
  ns_identity(second, "m", 2);
  ns_ensemble(second, "ens_b", "m", 2);
  H_OK(TRITONSERVER_ServerPollModelRepository(s));
  cr_expect_eq(ns_ready_rows(s, "m"), 2);
  ns_echo(s, "ens_b", 2);
  ns_echo(s, "ens", 4);
  char path[4096];
  snprintf(path, sizeof path, "%s/m", second);
  h_rmtree(path);
  H_OK(TRITONSERVER_ServerPollModelRepository(s));
  cr_expect_eq(ns_ready_rows(s, "m"), 1);
  cr_expect(ready(s, "m", -1), "the first repository's m is the only one again");
  ns_echo(s, "ens", 4);
  H_OK(TRITONSERVER_ServerDelete(s));
  h_rmtree(second);
  free(second);
}

/* ------------------------------------------------------ paths (issue 53) */

/* Names that climb out of the repository are refused through the C API
 * with Triton's sentences (core 66f09f8, 50830ba), before any path is made
 * from them; nothing is loaded or listed. */
Test(repo, load_by_a_name_that_leaves_the_repository_is_refused) {
  char *repo = NULL;
  if (asprintf(&repo, "%s/repo", g_repo) < 0) cr_assert_fail("asprintf");
  char cfg[4096];
  snprintf(cfg, sizeof cfg, "backend: \"identity\"\n%s", IO);
  h_model(g_repo, "outside", cfg, "1");
  h_model(repo, "inside", cfg, "1");
  TRITONSERVER_Server *s = h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_EXPLICIT));
  static const struct {
    const char *name, *msg;
  } cases[] = {
      {"../outside", "invalid model name '../outside', model name must not contain path traversal characters"},
      {"..", "invalid model name '..', model name must not contain path traversal characters"},
      {" .. ", "invalid model name ' .. ', model name must not contain path traversal characters"},
      {".", "invalid model name '.', model name must not contain path traversal characters"},
      {"a/b", "invalid model name 'a/b', model name must not contain path traversal characters"},
      {"", "Model name cannot be empty. Please enter a valid name to deploy."},
      {" \t", "Model name cannot be empty. Please enter a valid name to deploy."},
  };
  TRITONSERVER_Parameter *p = TRITONSERVER_ParameterNew("config", TRITONSERVER_PARAMETER_STRING, "{}");
  const TRITONSERVER_Parameter *params[] = {p};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    for (int with_params = 0; with_params < 2; with_params++) {
      TRITONSERVER_Error *e = with_params ? TRITONSERVER_ServerLoadModelWithParameters(s, cases[i].name, params, 1)
                                          : TRITONSERVER_ServerLoadModel(s, cases[i].name);
      cr_assert_not_null(e, "%s", cases[i].name);
      cr_assert_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_INVALID_ARG, "%s", cases[i].name);
      cr_assert_str_eq(TRITONSERVER_ErrorMessage(e), cases[i].msg);
      TRITONSERVER_ErrorDelete(e);
    }
  }
  TRITONSERVER_ParameterDelete(p);
  /* "model..x" and "..x" are names like any other (50830ba). */
  TRITONSERVER_Error *e = TRITONSERVER_ServerLoadModel(s, "..inside");
  cr_assert_not_null(e);
  cr_assert(strstr(TRITONSERVER_ErrorMessage(e), "failed to poll from model repository"), "%s",
            TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
  TRITONSERVER_Message *m = NULL;
  H_OK(TRITONSERVER_ServerModelIndex(s, 0, &m));
  char *idx = h_msg_text(m);
  cr_assert(!strstr(idx, "outside") && !strstr(idx, "\"..\"") && !strstr(idx, "..inside"), "%s", idx);
  free(idx);
  H_OK(TRITONSERVER_ServerLoadModel(s, "inside"));
  cr_assert(ready(s, "inside", -1));
  H_OK(TRITONSERVER_ServerDelete(s));
  free(repo);
}
