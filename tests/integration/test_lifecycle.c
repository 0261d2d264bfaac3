/* Backend, model and instance lifecycles as the seed's "Backend Lifecycles"
 * section describes them, observed through the recording test backends, and
 * the failure paths (every stage, reverse-order cleanup, other models keep
 * serving). */
#include "harness.h"

#include <sched.h>

static char *g_repo, *g_record;

static void setup(void) { h_repo_record_new(&g_repo, &g_record); }

static void teardown(void) { h_repo_record_free(g_repo, g_record); }

/* Explicit-mode server whose recorder/failing backends write to g_record. */
static TRITONSERVER_Server *explicit_server(void) {
  TRITONSERVER_ServerOptions *o = h_options(g_repo, TRITONSERVER_MODEL_CONTROL_EXPLICIT);
  H_OK(TRITONSERVER_ServerOptionsSetBackendConfig(o, "recorder", "record_file", g_record));
  H_OK(TRITONSERVER_ServerOptionsSetBackendConfig(o, "failing", "record_file", g_record));
  return h_server_new(o);
}

static const char *IO_FP32_4 = "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n"
                               "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n";

static void write_model(const char *name, const char *backend, const char *extra) {
  char cfg[8192]; /* above any caller's `extra` buffer */
  snprintf(cfg, sizeof cfg, "name: \"%s\"\nbackend: \"%s\"\n%s%s", name, backend, IO_FP32_4, extra ? extra : "");
  h_model(g_repo, name, cfg, "1");
}

/* Runs one FP32[4] request and returns the error text of its response. */
static char *infer_once(TRITONSERVER_Server *s, const char *model) {
  float in[4] = {1, 2, 3, 4};
  int64_t shape[1] = {4};
  TRITONSERVER_InferenceRequest *r = h_request(s, model);
  h_add_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, shape, 1, in, sizeof in);
  h_call *c = h_infer(s, r);
  cr_assert_eq(c->finals, 1);
  cr_assert_eq(c->released, 1);
  char *err = h_response_error(c, 0);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  return err;
}

/* Lines of the record file as one string joined by '|'. */
static char *record(void) {
  char *t = h_read(g_record);
  for (char *c = t; *c; c++)
    if (*c == '\n') *c = '|';
  return t;
}

/* Polls of 10 ms for 30 s: generous, as sanitizer builds on a loaded
 * 2-core machine are slow; a poll ends as soon as its condition holds. */
#define POLLS 3000

/* Waits until the index says `model` is no longer READY (background unload). */
static void wait_unloaded(TRITONSERVER_Server *s, const char *model) {
  for (int i = 0; i < POLLS; i++) {
    bool ready = true;
    H_OK(TRITONSERVER_ServerModelIsReady(s, model, -1, &ready));
    char *rec = record();
    bool finalized = strstr(rec, "ModelFinalize") != NULL;
    free(rec);
    if (!ready && finalized) return;
    usleep(10000);
  }
  cr_assert_fail("model '%s' did not finish unloading", model);
}

TestSuite(lifecycle, .init = setup, .fini = teardown, .timeout = 60);

Test(lifecycle, order_of_calls) {
  write_model("rec", "recorder", "instance_group [ { count: 2 kind: KIND_CPU } ]\n");
  TRITONSERVER_Server *s = explicit_server();
  H_OK(TRITONSERVER_ServerLoadModel(s, "rec"));
  cr_assert_null(infer_once(s, "rec"));
  H_OK(TRITONSERVER_ServerUnloadModel(s, "rec"));
  wait_unloaded(s, "rec");
  H_OK(TRITONSERVER_ServerDelete(s));
  char *rec = record();
  /* Initialize once, attributes, model, two instances, execution, then the
   * reverse: instances (newest first), model, and the backend at exit. */
  char want_prefix[] = "Initialize|GetBackendAttribute|ModelInitialize rec v1|ModelInstanceInitialize ";
  cr_assert(!strncmp(rec, want_prefix, strlen(want_prefix)), "record: %s", rec);
  char *i0 = strstr(rec, "ModelInstanceInitialize ");
  char *exec = strstr(rec, "ModelInstanceExecute ");
  char *f = strstr(rec, "ModelInstanceFinalize ");
  char *mf = strstr(rec, "ModelFinalize rec");
  char *bf = strstr(rec, "|Finalize|");
  cr_assert(i0 && exec && f && mf && bf, "record: %s", rec);
  cr_assert(i0 < exec && exec < f && f < mf && mf < bf, "record out of order: %s", rec);
  /* Two instances initialized, finalized in reverse order. */
  char a[64] = "", b[64] = "", fa[64] = "", fb[64] = "";
  sscanf(i0, "ModelInstanceInitialize %63[^|]|ModelInstanceInitialize %63[^|]", a, b);
  sscanf(f, "ModelInstanceFinalize %63[^|]|ModelInstanceFinalize %63[^|]", fa, fb);
  cr_assert(*a && *b && strcmp(a, b), "two distinct instances expected: %s", rec);
  cr_assert_str_eq(fa, b, "newest instance finalized first: %s", rec);
  cr_assert_str_eq(fb, a, "record: %s", rec);
  /* Finalize is the very last line. */
  size_t n = strlen(rec);
  cr_assert(n > 10 && !strcmp(rec + n - 10, "|Finalize|"), "record: %s", rec);
  free(rec);
}

Test(lifecycle, backend_initialized_once_for_many_models) {
  write_model("rec_a", "recorder", NULL);
  write_model("rec_b", "recorder", NULL);
  TRITONSERVER_Server *s = explicit_server();
  H_OK(TRITONSERVER_ServerLoadModel(s, "rec_a"));
  H_OK(TRITONSERVER_ServerLoadModel(s, "rec_b"));
  H_OK(TRITONSERVER_ServerUnloadModel(s, "rec_a"));
  H_OK(TRITONSERVER_ServerUnloadModel(s, "rec_b"));
  H_OK(TRITONSERVER_ServerLoadModel(s, "rec_a"));
  H_OK(TRITONSERVER_ServerDelete(s));
  char *rec = record();
  int inits = 0, finis = 0;
  for (char *p = rec; (p = strstr(p, "Initialize|")); p++)
    if (p == rec || p[-1] == '|') inits++;
  for (char *p = rec; (p = strstr(p, "|Finalize|")); p++) finis++;
  cr_assert_eq(inits, 1, "backend initialized %d times: %s", inits, rec);
  cr_assert_eq(finis, 1, "backend finalized %d times: %s", finis, rec);
  free(rec);
}

Test(lifecycle, preferred_instance_groups_used_without_config) {
  write_model("rec", "recorder", NULL); /* no instance_group */
  TRITONSERVER_Server *s = explicit_server();
  H_OK(TRITONSERVER_ServerLoadModel(s, "rec"));
  char *rec = record();
  int n = 0;
  for (char *p = rec; (p = strstr(p, "ModelInstanceInitialize")); p++) n++;
  cr_assert_eq(n, 2, "recorder prefers one CPU group of 2 instances: %s", rec);
  free(rec);
  TRITONSERVER_Message *m = NULL;
  H_OK(TRITONSERVER_ServerModelConfig(s, "rec", -1, 1, &m));
  char *cfg = h_msg_text(m);
  cr_assert(strstr(cfg, "\"count\":2") && strstr(cfg, "KIND_CPU"), "config: %s", cfg);
  free(cfg);
  H_OK(TRITONSERVER_ServerDelete(s));
}

Test(lifecycle, model_init_failure_reports_backend_message) {
  write_model("bad", "failing", "parameters { key: \"fail_at\" value: { string_value: \"model_init\" } }\n");
  write_model("good", "identity", NULL);
  TRITONSERVER_Server *s = explicit_server();
  H_OK(TRITONSERVER_ServerLoadModel(s, "good"));
  TRITONSERVER_Error *e = TRITONSERVER_ServerLoadModel(s, "bad");
  cr_assert_not_null(e);
  cr_assert(strstr(TRITONSERVER_ErrorMessage(e), "failed in ModelInitialize"), "%s", TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
  /* The index names the reason; the other model keeps serving. */
  TRITONSERVER_Message *m = NULL;
  H_OK(TRITONSERVER_ServerModelIndex(s, 0, &m));
  char *idx = h_msg_text(m);
  cr_assert(strstr(idx, "\"name\":\"bad\"") && strstr(idx, "UNAVAILABLE") && strstr(idx, "failed in ModelInitialize"),
            "index: %s", idx);
  free(idx);
  cr_assert_null(infer_once(s, "good"));
  H_OK(TRITONSERVER_ServerDelete(s));
  char *rec = record();
  cr_assert(strstr(rec, "ModelInitialize bad v1"), "%s", rec);
  cr_assert_null(strstr(rec, "ModelFinalize bad"), "ModelFinalize must not follow a failed ModelInitialize: %s", rec);
  cr_assert_null(strstr(rec, "ModelInstanceInitialize"), "%s", rec);
  free(rec);
}

/* --model-load-retry-count: a version that fails to load is tried again;
 * without retries the same model stays unavailable. */
Test(lifecycle, a_failed_load_is_retried_when_asked) {
  char marker[4200], cfg[4400];
  for (int retries = 0; retries < 2; retries++) {
    snprintf(marker, sizeof marker, "%s/marker%d", g_repo, retries);
    snprintf(cfg, sizeof cfg,
             "parameters { key: \"fail_at\" value: { string_value: \"model_init\" } }\n"
             "parameters { key: \"fail_once_marker\" value: { string_value: \"%s\" } }\n",
             marker);
    write_model("flaky", "failing", cfg);
    TRITONSERVER_ServerOptions *o = h_options(g_repo, TRITONSERVER_MODEL_CONTROL_EXPLICIT);
    H_OK(TRITONSERVER_ServerOptionsSetModelLoadRetryCount(o, (unsigned)retries));
    TRITONSERVER_Server *s = h_server_new(o);
    TRITONSERVER_Error *e = TRITONSERVER_ServerLoadModel(s, "flaky");
    bool ready = false;
    H_OK(TRITONSERVER_ServerModelIsReady(s, "flaky", -1, &ready));
    if (retries == 0) {
      cr_assert_not_null(e);
      cr_expect(strstr(TRITONSERVER_ErrorMessage(e), "failed in ModelInitialize"), "%s", TRITONSERVER_ErrorMessage(e));
      TRITONSERVER_ErrorDelete(e);
      cr_expect_not(ready);
    } else {
      cr_assert_null(e, "%s", e ? TRITONSERVER_ErrorMessage(e) : "");
      cr_expect(ready);
      cr_expect_null(infer_once(s, "flaky"));
    }
    H_OK(TRITONSERVER_ServerDelete(s));
  }
}

Test(lifecycle, instance_init_failure_unwinds_in_reverse) {
  write_model("bad", "failing",
              "instance_group [ { count: 3 kind: KIND_CPU } ]\n"
              "parameters { key: \"fail_at\" value: { string_value: \"instance_init\" } }\n"
              "parameters { key: \"fail_instance\" value: { string_value: \"1\" } }\n");
  TRITONSERVER_Server *s = explicit_server();
  TRITONSERVER_Error *e = TRITONSERVER_ServerLoadModel(s, "bad");
  cr_assert_not_null(e);
  cr_assert(strstr(TRITONSERVER_ErrorMessage(e), "failing backend"), "%s", TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
  bool ready = true;
  H_OK(TRITONSERVER_ServerModelIsReady(s, "bad", -1, &ready));
  cr_assert(!ready);
  H_OK(TRITONSERVER_ServerDelete(s));
  char *rec = record();
  /* Instance 0 initialized and is finalized; instance 1 failed (never
   * finalized); instance 2 never started; then the model is finalized. */
  int inits = 0, finis = 0;
  for (char *p = rec; (p = strstr(p, "ModelInstanceInitialize")); p++) inits++;
  for (char *p = rec; (p = strstr(p, "ModelInstanceFinalize")); p++) finis++;
  cr_assert_eq(inits, 2, "%s", rec);
  cr_assert_eq(finis, 1, "%s", rec);
  char *fi = strstr(rec, "ModelInstanceFinalize"), *mf = strstr(rec, "ModelFinalize bad");
  cr_assert(fi && mf && fi < mf, "%s", rec);
  free(rec);
}

Test(lifecycle, backend_init_failure_then_retry) {
  write_model("m", "fail_backend_init", NULL);
  write_model("good", "identity", NULL);
  TRITONSERVER_Server *s = explicit_server();
  for (int i = 0; i < 2; i++) {
    TRITONSERVER_Error *e = TRITONSERVER_ServerLoadModel(s, "m");
    cr_assert_not_null(e);
    cr_assert(strstr(TRITONSERVER_ErrorMessage(e), "refusing to initialize"), "%s", TRITONSERVER_ErrorMessage(e));
    TRITONSERVER_ErrorDelete(e);
  }
  H_OK(TRITONSERVER_ServerLoadModel(s, "good"));
  cr_assert_null(infer_once(s, "good"));
  H_OK(TRITONSERVER_ServerDelete(s));
}

Test(lifecycle, backend_without_execute_rejected) {
  write_model("m", "no_execute", NULL);
  TRITONSERVER_Server *s = explicit_server();
  TRITONSERVER_Error *e = TRITONSERVER_ServerLoadModel(s, "m");
  cr_assert_not_null(e);
  cr_assert(strstr(TRITONSERVER_ErrorMessage(e), "TRITONBACKEND_ModelInstanceExecute"), "%s",
            TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
  H_OK(TRITONSERVER_ServerDelete(s));
}

Test(lifecycle, unknown_backend_names_search_paths) {
  write_model("m", "no_such_backend", NULL);
  TRITONSERVER_Server *s = explicit_server();
  TRITONSERVER_Error *e = TRITONSERVER_ServerLoadModel(s, "m");
  cr_assert_not_null(e);
  const char *msg = TRITONSERVER_ErrorMessage(e);
  cr_assert(strstr(msg, "libtriton_no_such_backend.so") && strstr(msg, "/m/1/") && strstr(msg, "no_such_backend/"),
            "%s", msg);
  TRITONSERVER_ErrorDelete(e);
  H_OK(TRITONSERVER_ServerDelete(s));
}

Test(lifecycle, gpu_instance_group_rejected_without_gpu) {
  write_model("m", "identity", "instance_group [ { count: 1 kind: KIND_GPU } ]\n");
  TRITONSERVER_Server *s = explicit_server();
  TRITONSERVER_Error *e = TRITONSERVER_ServerLoadModel(s, "m");
  cr_assert_not_null(e);
  cr_assert(strstr(TRITONSERVER_ErrorMessage(e), "GPU"), "%s", TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
  H_OK(TRITONSERVER_ServerDelete(s));
}

Test(lifecycle, execute_error_answers_every_request) {
  write_model("m", "failing", "parameters { key: \"fail_at\" value: { string_value: \"execute\" } }\n");
  TRITONSERVER_Server *s = explicit_server();
  H_OK(TRITONSERVER_ServerLoadModel(s, "m"));
  char *err = infer_once(s, "m");
  cr_assert_not_null(err);
  cr_assert(strstr(err, "failing backend"), "%s", err);
  free(err);
  H_OK(TRITONSERVER_ServerDelete(s));
}

Test(lifecycle, backend_runs_another_model_from_execute) {
  write_model("target", "identity", NULL);
  write_model("outer", "bls", "parameters { key: \"target\" value: { string_value: \"target\" } }\n");
  TRITONSERVER_Server *s = explicit_server();
  H_OK(TRITONSERVER_ServerLoadModel(s, "target"));
  H_OK(TRITONSERVER_ServerLoadModel(s, "outer"));
  for (int i = 0; i < 20; i++) cr_assert_null(infer_once(s, "outer"));
  /* The nested request is visible in the target's statistics. */
  TRITONSERVER_Message *m = NULL;
  H_OK(TRITONSERVER_ServerModelStatistics(s, "target", -1, &m));
  char *stats = h_msg_text(m);
  cr_assert(strstr(stats, "\"inference_count\":20"), "%s", stats);
  free(stats);
  H_OK(TRITONSERVER_ServerDelete(s));
}

static uint64_t load_ms(TRITONSERVER_Server *s, const char *model) {
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  H_OK(TRITONSERVER_ServerLoadModel(s, model));
  clock_gettime(CLOCK_MONOTONIC, &b);
  int64_t ns = (int64_t)(b.tv_sec - a.tv_sec) * 1000000000 + (b.tv_nsec - a.tv_nsec);
  return (uint64_t)(ns / 1000000);
}

Test(lifecycle, parallel_instance_loading_when_backend_allows) {
  /* Four instances sleeping 1.5 s each: sequential loading takes >= 6 s,
   * parallel loading about 1.5 s. The bound leaves 3 s for a loaded
   * machine (300 ms each with a 1 s bound left 0.7 s, too little there). */
  write_model("slow", "slow_init",
              "instance_group [ { count: 4 kind: KIND_CPU } ]\n"
              "parameters { key: \"init_ms\" value: { string_value: \"1500\" } }\n");
  TRITONSERVER_Server *s = explicit_server();
  uint64_t ms = load_ms(s, "slow");
  cr_assert_lt(ms, 4500, "4 x 1500 ms instance init took %llu ms: not parallel", (unsigned long long)ms);
  cr_assert_null(infer_once(s, "slow"));
  H_OK(TRITONSERVER_ServerDelete(s));
}

Test(lifecycle, released_with_reschedule_runs_again) {
  write_model("again", "reschedule", "parameters { key: \"passes\" value: { string_value: \"3\" } }\n");
  TRITONSERVER_Server *s = explicit_server();
  H_OK(TRITONSERVER_ServerLoadModel(s, "again"));
  float in[4] = {1, 2, 3, 4};
  int64_t shape[1] = {4};
  TRITONSERVER_InferenceRequest *r = h_request(s, "again");
  H_OK(TRITONSERVER_InferenceRequestSetId(r, "req-1"));
  h_add_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, shape, 1, in, sizeof in);
  h_call *c = h_infer(s, r);
  cr_assert_eq(c->n, 1);
  cr_assert_null(h_response_error(c, 0));
  cr_assert_eq(c->released, 1, "released to the client once, after the last pass");
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  TRITONSERVER_Message *m = NULL;
  H_OK(TRITONSERVER_ServerModelStatistics(s, "again", -1, &m));
  char *stats = h_msg_text(m);
  cr_assert(strstr(stats, "\"execution_count\":3"), "three executions for one request: %s", stats);
  free(stats);
  H_OK(TRITONSERVER_ServerDelete(s));
}

Test(lifecycle, reported_memory_usage_in_statistics) {
  /* slow_init reports 1000 bytes of CPU memory for the model (replacing an
   * earlier 5) and 10 CPU + 7 pinned bytes per instance. */
  write_model("mem", "slow_init",
              "instance_group [ { count: 2 kind: KIND_CPU } ]\n"
              "parameters { key: \"init_ms\" value: { string_value: \"0\" } }\n");
  TRITONSERVER_Server *s = explicit_server();
  H_OK(TRITONSERVER_ServerLoadModel(s, "mem"));
  TRITONSERVER_Message *m = NULL;
  H_OK(TRITONSERVER_ServerModelStatistics(s, "mem", -1, &m));
  char *stats = h_msg_text(m);
  cr_assert(strstr(stats, "\"memory_usage\":[{\"type\":\"CPU\",\"id\":0,\"byte_size\":1020},"
                          "{\"type\":\"CPU_PINNED\",\"id\":0,\"byte_size\":14}]"),
            "%s", stats);
  free(stats);
  H_OK(TRITONSERVER_ServerDelete(s));
}

/* Scheduling policies of this process's threads whose name starts with
 * `prefix`: counts of SCHED_BATCH and of other policies. */
static void thread_policies(const char *prefix, int *batch, int *other) {
  *batch = *other = 0;
  DIR *d = opendir("/proc/self/task");
  cr_assert_not_null(d);
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char path[300], comm[32] = "";
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    if (!fgets(comm, sizeof comm, f)) comm[0] = '\0';
    fclose(f);
    if (strncmp(comm, prefix, strlen(prefix)) != 0) continue;
    int policy = sched_getscheduler((pid_t)atoi(e->d_name));
    if (policy == SCHED_BATCH)
      (*batch)++;
    else
      (*other)++;
  }
  closedir(d);
}

Test(lifecycle, instance_threads_run_under_sched_batch_unless_told_otherwise) {
  write_model("batchy", "recorder", "instance_group [ { count: 2 kind: KIND_CPU } ]\n");
  write_model("plain", "recorder", "instance_group [ { count: 1 kind: KIND_CPU } ]\n");
  TRITONSERVER_Server *s = explicit_server();
  H_OK(TRITONSERVER_ServerLoadModel(s, "batchy"));
  /* Each thread names itself and sets its policy as it starts. */
  int batch = 0, other = 0;
  for (int i = 0; i < POLLS && batch + other < 2; i++, usleep(10000)) thread_policies("nrd-batchy", &batch, &other);
  cr_assert_eq(batch, 2, "instance threads under SCHED_BATCH: %d (others: %d)", batch, other);
  cr_assert_eq(other, 0);
  setenv("NEREID_INSTANCE_THREAD_POLICY", "normal", 1);
  H_OK(TRITONSERVER_ServerLoadModel(s, "plain"));
  unsetenv("NEREID_INSTANCE_THREAD_POLICY");
  batch = other = 0;
  for (int i = 0; i < POLLS && batch + other < 1; i++, usleep(10000)) thread_policies("nrd-plain", &batch, &other);
  cr_assert_eq(other, 1, "NEREID_INSTANCE_THREAD_POLICY=normal: %d normal, %d batch", other, batch);
  cr_assert_eq(batch, 0);
  char *err = infer_once(s, "plain");
  cr_assert_null(err, "%s", err);
  H_OK(TRITONSERVER_ServerDelete(s));
}

/* Issue 33: a configuration that is invalid is refused with the core's
 * message (Triton's sentence, then ours) before any backend call, so the
 * backend's ModelInitialize never runs for it; with or without
 * auto-complete. */
static void expect_refused_before_backend(bool strict, const char *name, const char *body, const char *sentence,
                                          const char *detail) {
  char cfg[4096];
  snprintf(cfg, sizeof cfg, "name: \"%s\"\nbackend: \"recorder\"\n%s", name, body);
  h_model(g_repo, name, cfg, "1");
  TRITONSERVER_ServerOptions *o = h_options(g_repo, TRITONSERVER_MODEL_CONTROL_EXPLICIT);
  H_OK(TRITONSERVER_ServerOptionsSetBackendConfig(o, "recorder", "record_file", g_record));
  H_OK(TRITONSERVER_ServerOptionsSetStrictModelConfig(o, strict));
  TRITONSERVER_Server *s = h_server_new(o);
  TRITONSERVER_Error *e = TRITONSERVER_ServerLoadModel(s, name);
  cr_assert_not_null(e, "%s loaded", name);
  const char *msg = TRITONSERVER_ErrorMessage(e);
  const char *at = strstr(msg, sentence);
  cr_assert_not_null(at, "%s: want \"%s\" in \"%s\"", name, sentence, msg);
  /* Our part (the file, line and column, the field, the value) comes
   * after the sentence. */
  char ours[512];
  snprintf(ours, sizeof ours, "%s (%s/%s/config.pbtxt:%s)", sentence, g_repo, name, detail);
  cr_assert(strstr(msg, ours) != NULL, "%s: want \"%s\" in \"%s\"", name, ours, msg);
  TRITONSERVER_ErrorDelete(e);
  H_OK(TRITONSERVER_ServerDelete(s));
  char *rec = record();
  cr_assert(strstr(rec, "ModelInitialize") == NULL, "%s: the backend saw the model: %s", name, rec);
  free(rec);
}

Test(lifecycle, invalid_config_never_reaches_the_backend) {
  static const char *IO = "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n";
  static const struct {
    const char *name, *body, *sentence, *detail;
  } cases[] = {
      {"zero_dims", "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 0 ] } ]\n",
       "model input 'INPUT0' dimension must be integer >= 1, or -1 to indicate a variable-size dimension for "
       "zero_dims",
       "3:55: field 'input[0].dims[0]', value 0"},
      {"bad_reshape", "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 4 ] reshape { shape: [ 0 ] } } ]\n",
       "model input 'INPUT0' reshape dimensions must be integer >= 1, or -1 to indicate a variable-size dimension "
       "for bad_reshape",
       "3:78: field 'input[0].reshape.shape[0]', value 0"},
      {"neg_batch", "max_batch_size: -1\ninput [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n",
       "'max_batch_size' must be non-negative value for neg_batch", "3:1: field 'max_batch_size', value -1"},
      {"bad_priority",
       "max_batch_size: 4\ndynamic_batching { priority_levels: 2 default_priority_level: 3 }\n"
       "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n",
       "default priority level must be in range [1, 2] for bad_priority",
       "4:39: field 'dynamic_batching.default_priority_level', value 3"},
      {"dup_input",
       "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 4 ] }, "
       "{ name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n",
       "input name 'INPUT0' is specified more than once for dup_input",
       "3:64: field 'input[1].name', value 'INPUT0' (also input[0])"},
      {"no_control_name",
       "sequence_batching { control_input [ { control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } "
       "] } ] }\ninput [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n",
       "sequence batching control tensor must have a name for no_control_name",
       "3:37: field 'sequence_batching.control_input[0].name'"},
      {"bad_batch_input",
       "max_batch_size: 2\ninput [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\nbatch_input [ { kind: "
       "BATCH_ELEMENT_COUNT target_name: \"B\" data_type: TYPE_INT32 source_input: \"NOPE\" } ]\n",
       "unknown source input name 'NOPE' for bad_batch_input", "5:96: field 'batch_input[0].source_input[0]'"},
  };
  for (int strict = 0; strict < 2; strict++) {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
      char body[1024];
      snprintf(body, sizeof body, "%s%s", cases[i].body, IO);
      expect_refused_before_backend(strict, cases[i].name, body, cases[i].sentence, cases[i].detail);
    }
  }
}

/* Issue 33: with no backend and no platform, the backend comes from a model
 * name of the form 'model.<backend_name>'; any other name is refused with
 * Triton's message, before any backend call. */
Test(lifecycle, backend_from_the_model_name) {
  h_model(g_repo, "m.recorder",
          "name: \"m.recorder\"\n"
          "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n"
          "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n",
          "1");
  h_model(g_repo, "nobackend",
          "name: \"nobackend\"\n"
          "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n"
          "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n",
          "1");
  TRITONSERVER_Server *s = explicit_server();
  H_OK(TRITONSERVER_ServerLoadModel(s, "m.recorder"));
  cr_assert_null(infer_once(s, "m.recorder"));
  TRITONSERVER_Error *e = TRITONSERVER_ServerLoadModel(s, "nobackend");
  cr_assert_not_null(e);
  char *msg = strdup(TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
  cr_assert(strstr(msg, "Invalid model name: Could not determine backend for model 'nobackend' with no backend in "
                        "model configuration. Expected model name of the form 'model.<backend_name>'.") != NULL,
            "%s", msg);
  free(msg);
  H_OK(TRITONSERVER_ServerDelete(s));
  char *rec = record();
  cr_assert(strstr(rec, "ModelInitialize m.recorder") != NULL, "%s", rec);
  cr_assert(strstr(rec, "nobackend") == NULL, "%s", rec);
  free(rec);
}

/* Issue 33: a configuration a backend completed (TRITONBACKEND_ModelSetConfig)
 * keeps its file and the positions still true; one given as JSON names no
 * file at all. */
static char *load_error(TRITONSERVER_Server *s, const char *name, const char *override_json) {
  TRITONSERVER_Error *e;
  if (override_json) {
    TRITONSERVER_Parameter *p = TRITONSERVER_ParameterNew("config", TRITONSERVER_PARAMETER_STRING, override_json);
    const TRITONSERVER_Parameter *params[1] = {p};
    e = TRITONSERVER_ServerLoadModelWithParameters(s, name, params, 1);
    TRITONSERVER_ParameterDelete(p);
  } else {
    e = TRITONSERVER_ServerLoadModel(s, name);
  }
  cr_assert_not_null(e, "%s loaded", name);
  char *msg = strdup(TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
  return msg;
}

Test(lifecycle, config_errors_after_auto_complete_and_from_json) {
  /* max_batch_size 0 lets the preferred size wait for auto-complete, which
   * sets max_batch_size 8. */
  h_model(g_repo, "completed",
          "name: \"completed\"\nbackend: \"autocomplete\"\n"
          "dynamic_batching { preferred_batch_size: [ 16 ] }\n",
          "1");
  write_model("overridden", "recorder", "");
  TRITONSERVER_ServerOptions *o = h_options(g_repo, TRITONSERVER_MODEL_CONTROL_EXPLICIT);
  H_OK(TRITONSERVER_ServerOptionsSetStrictModelConfig(o, false));
  TRITONSERVER_Server *s = h_server_new(o);
  char *msg = load_error(s, "completed", NULL);
  char want[1024];
  snprintf(want, sizeof want,
           "dynamic batching preferred size must be <= max batch size for completed (%s/completed/config.pbtxt:3:44: "
           "field 'dynamic_batching.preferred_batch_size[0]', value 16, max_batch_size 8)",
           g_repo);
  cr_assert(strstr(msg, want) != NULL, "want \"%s\" in \"%s\"", want, msg);
  free(msg);
  msg = load_error(s, "overridden",
                   "{\"backend\":\"recorder\",\"input\":[{\"name\":\"INPUT0\",\"data_type\":\"TYPE_FP32\","
                   "\"dims\":[4,0]}],\"output\":[{\"name\":\"OUTPUT0\",\"data_type\":\"TYPE_FP32\",\"dims\":[4]}]}");
  cr_assert(strstr(msg, "model input 'INPUT0' dimension must be integer >= 1, or -1 to indicate a variable-size "
                        "dimension for overridden (field 'input[0].dims[1]', value 0)") != NULL,
            "%s", msg);
  cr_assert(strstr(msg, "config.pbtxt") == NULL, "a JSON configuration has no file: %s", msg);
  free(msg);
  H_OK(TRITONSERVER_ServerDelete(s));
  char *rec = record();
  cr_assert(strstr(rec, "ModelInitialize overridden") == NULL, "%s", rec);
  free(rec);
}

/* Instance names as Triton 2.51 forms them (run beside us): "<group>_<c>"
 * also for a count of 1; an unnamed group is "<model>_<index>". */
Test(lifecycle, instances_are_named_as_triton_names_them) {
  write_model("grouped", "recorder", "instance_group [ { count: 1 kind: KIND_CPU }, { name: \"g\" count: 2 } ]\n");
  TRITONSERVER_Server *s = explicit_server();
  H_OK(TRITONSERVER_ServerLoadModel(s, "grouped"));
  H_OK(TRITONSERVER_ServerDelete(s));
  char *rec = record();
  const char *want[] = {"ModelInstanceInitialize grouped_0_0|", "ModelInstanceInitialize g_0|",
                        "ModelInstanceInitialize g_1|"};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    cr_expect_not_null(strstr(rec, want[i]), "no '%s' in %s", want[i], rec);
  free(rec);
}
