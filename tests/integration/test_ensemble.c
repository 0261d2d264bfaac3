/* Ensemble models: steps run in data order and feed each other, the
 * ensemble answers with its requested outputs, request fields reach the
 * steps, statistics, loading (an ensemble brings its steps' models; a
 * missing, decoupled or circular step model fails the load with Triton's
 * message), a step failing at run time, decoupled steps (an answer per
 * iteration, nested decoupled steps, outputs of two decoupled steps).
 * Driven with add_sub, identity and square. */
#include <inttypes.h>
#include <jansson.h>

#include "harness.h"

/* add_sub on INT32 [4] vectors. */
static void addsub_model(const char *repo) {
  h_model(repo, "addsub",
          "name: \"addsub\"\nbackend: \"add_sub\"\nmax_batch_size: 8\n"
          "input [ { name: \"INPUT0\" data_type: TYPE_INT32 dims: [ 4 ] },\n"
          "        { name: \"INPUT1\" data_type: TYPE_INT32 dims: [ 4 ] } ]\n"
          "output [ { name: \"OUTPUT0\" data_type: TYPE_INT32 dims: [ 4 ] },\n"
          "         { name: \"OUTPUT1\" data_type: TYPE_INT32 dims: [ 4 ] } ]\n",
          "1");
  h_model(repo, "id_int32",
          "name: \"id_int32\"\nbackend: \"identity\"\nmax_batch_size: 8\n"
          "input [ { name: \"INPUT0\" data_type: TYPE_INT32 dims: [ -1 ] } ]\n"
          "output [ { name: \"OUTPUT0\" data_type: TYPE_INT32 dims: [ -1 ] } ]\n",
          "1");
}

/* ens(A, B): S, D = A + B, A - B; SUM2, X2 = S + D, S - D (2A, 2B); COPY =
 * identity(S). The steps are listed out of data order on purpose. */
static void ensemble_model(const char *repo) {
  h_model(repo, "ens",
          "name: \"ens\"\nplatform: \"ensemble\"\nmax_batch_size: 8\n"
          "input [ { name: \"A\" data_type: TYPE_INT32 dims: [ 4 ] },\n"
          "        { name: \"B\" data_type: TYPE_INT32 dims: [ 4 ] } ]\n"
          "output [ { name: \"SUM2\" data_type: TYPE_INT32 dims: [ 4 ] },\n"
          "         { name: \"X2\" data_type: TYPE_INT32 dims: [ 4 ] },\n"
          "         { name: \"COPY\" data_type: TYPE_INT32 dims: [ 4 ] },\n"
          "         { name: \"D\" data_type: TYPE_INT32 dims: [ 4 ] } ]\n"
          "ensemble_scheduling { step [\n"
          "  { model_name: \"addsub\" model_version: -1\n"
          "    input_map { key: \"INPUT0\" value: \"S\" } input_map { key: \"INPUT1\" value: \"D\" }\n"
          "    output_map { key: \"OUTPUT0\" value: \"SUM2\" } output_map { key: \"OUTPUT1\" value: \"X2\" } },\n"
          "  { model_name: \"id_int32\" model_version: -1\n"
          "    input_map { key: \"INPUT0\" value: \"S\" } output_map { key: \"OUTPUT0\" value: \"COPY\" } },\n"
          "  { model_name: \"addsub\" model_version: -1\n"
          "    input_map { key: \"INPUT0\" value: \"A\" } input_map { key: \"INPUT1\" value: \"B\" }\n"
          "    output_map { key: \"OUTPUT0\" value: \"S\" } output_map { key: \"OUTPUT1\" value: \"D\" } }\n"
          "] }\n",
          "1");
}

static const int32_t A[4] = {1, 2, 3, 4}, B[4] = {10, 20, 30, 40};

static TRITONSERVER_InferenceRequest *ens_request(TRITONSERVER_Server *s) {
  TRITONSERVER_InferenceRequest *r = h_request(s, "ens");
  int64_t shape[2] = {1, 4};
  h_add_input(r, "A", TRITONSERVER_TYPE_INT32, shape, 2, A, sizeof A);
  h_add_input(r, "B", TRITONSERVER_TYPE_INT32, shape, 2, B, sizeof B);
  return r;
}

/* Output `name` of the call's only response into out[4]; false if absent. */
static bool output(h_call *c, const char *name, int32_t *out) {
  h_output o;
  if (!h_find_output(c->responses[0], name, &o)) return false;
  cr_assert_eq(o.dtype, TRITONSERVER_TYPE_INT32);
  cr_assert(o.dims == 2 && o.shape[0] == 1 && o.shape[1] == 4, "%s: %" PRIu64 " dims", name, o.dims);
  cr_assert_eq(o.size, 4 * sizeof(int32_t));
  memcpy(out, o.base, o.size);
  return true;
}

static void done(TRITONSERVER_Server *s, char *repo) {
  H_OK(TRITONSERVER_ServerDelete(s));
  h_rmtree(repo);
  free(repo);
}

Test(ensemble, steps_feed_each_other_and_the_answer_has_every_output, .timeout = 60) {
  char *repo = h_tmpdir();
  addsub_model(repo);
  ensemble_model(repo);
  TRITONSERVER_Server *s = h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE));
  TRITONSERVER_InferenceRequest *r = ens_request(s);
  H_OK(TRITONSERVER_InferenceRequestSetId(r, "e-1"));
  h_call *c = h_infer(s, r);
  cr_assert_eq(c->n, 1);
  char *err = h_response_error(c, 0);
  cr_assert_null(err, "%s", err);
  const char *model = NULL, *id = NULL;
  int64_t version = 0;
  H_OK(TRITONSERVER_InferenceResponseModel(c->responses[0], &model, &version));
  H_OK(TRITONSERVER_InferenceResponseId(c->responses[0], &id));
  cr_expect(!strcmp(model, "ens") && version == 1 && !strcmp(id, "e-1"), "%s %ld %s", model, (long)version, id);
  int32_t sum2[4], x2[4], copy[4], d[4];
  cr_assert(output(c, "SUM2", sum2) && output(c, "X2", x2) && output(c, "COPY", copy) && output(c, "D", d));
  for (int i = 0; i < 4; i++) {
    cr_expect_eq(sum2[i], 2 * A[i]);
    cr_expect_eq(x2[i], 2 * B[i]);
    cr_expect_eq(copy[i], A[i] + B[i]);
    cr_expect_eq(d[i], A[i] - B[i]);
  }
  h_call_free(c);
  /* Only what was asked for comes back. */
  H_OK(TRITONSERVER_InferenceRequestAddRequestedOutput(r, "COPY"));
  c = h_infer(s, r);
  uint32_t n = 0;
  H_OK(TRITONSERVER_InferenceResponseOutputCount(c->responses[0], &n));
  cr_expect_eq(n, 1);
  cr_expect(output(c, "COPY", copy) && copy[3] == 44);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  /* Two ensemble requests: the first runs both addsub steps and the
   * identity step, the second (COPY only) the first addsub and the
   * identity, as Triton prunes it. */
  cr_expect_eq(h_stat_count(s, "ens", "success"), 2);
  cr_expect_eq(h_stat_count(s, "ens", "inference_count"), 2);
  cr_expect_eq(h_stat_count(s, "addsub", "success"), 3);
  cr_expect_eq(h_stat_count(s, "id_int32", "success"), 2);
  /* The ensemble's metadata names its platform. */
  TRITONSERVER_Message *msg = NULL;
  H_OK(TRITONSERVER_ServerModelMetadata(s, "ens", -1, &msg));
  char *text = h_msg_text(msg);
  cr_expect(strstr(text, "\"platform\":\"ensemble\""), "%s", text);
  free(text);
  done(s, repo);
}

Test(ensemble, many_concurrent_requests, .timeout = 60) {
  char *repo = h_tmpdir();
  addsub_model(repo);
  ensemble_model(repo);
  TRITONSERVER_Server *s = h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE));
  enum { N = 64 };
  TRITONSERVER_InferenceRequest *r[N];
  h_call *c[N];
  for (int i = 0; i < N; i++) {
    r[i] = ens_request(s);
    c[i] = h_submit(s, r[i]);
  }
  for (int i = 0; i < N; i++) {
    cr_assert(h_wait(c[i], 10000));
    int32_t sum2[4];
    cr_expect(output(c[i], "SUM2", sum2) && sum2[2] == 6);
    h_call_free(c[i]);
    H_OK(TRITONSERVER_InferenceRequestDelete(r[i]));
  }
  cr_expect_eq(h_stat_count(s, "ens", "success"), N);
  done(s, repo);
}

Test(ensemble, explicit_load_brings_the_step_models, .timeout = 60) {
  char *repo = h_tmpdir();
  addsub_model(repo);
  ensemble_model(repo);
  TRITONSERVER_Server *s = h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_EXPLICIT));
  bool ready = true;
  H_OK(TRITONSERVER_ServerModelIsReady(s, "addsub", -1, &ready));
  cr_assert_not(ready);
  H_OK(TRITONSERVER_ServerLoadModel(s, "ens"));
  const char *all[3] = {"ens", "addsub", "id_int32"};
  for (int i = 0; i < 3; i++) {
    H_OK(TRITONSERVER_ServerModelIsReady(s, all[i], -1, &ready));
    cr_expect(ready, "%s is not ready", all[i]);
  }
  done(s, repo);
}

Test(ensemble, a_failing_step_fails_the_request, .timeout = 60) {
  char *repo = h_tmpdir();
  /* A variable ensemble tensor is checked by the step's request: [4] into a model of [2]. */
  h_model(repo, "id_two",
          "name: \"id_two\"\nbackend: \"identity\"\nmax_batch_size: 8\n"
          "input [ { name: \"INPUT0\" data_type: TYPE_INT32 dims: [ 2 ] } ]\n"
          "output [ { name: \"OUTPUT0\" data_type: TYPE_INT32 dims: [ 2 ] } ]\n",
          "1");
  h_model(repo, "bad_shape",
          "name: \"bad_shape\"\nplatform: \"ensemble\"\nmax_batch_size: 8\n"
          "input [ { name: \"X\" data_type: TYPE_INT32 dims: [ -1 ] } ]\n"
          "output [ { name: \"Y\" data_type: TYPE_INT32 dims: [ -1 ] } ]\n"
          "ensemble_scheduling { step [ { model_name: \"id_two\" input_map { key: \"INPUT0\" value: \"X\" }\n"
          "  output_map { key: \"OUTPUT0\" value: \"Y\" } } ] }\n",
          "1");
  TRITONSERVER_Server *s = h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE));
  TRITONSERVER_InferenceRequest *r = h_request(s, "bad_shape");
  int64_t shape[2] = {1, 4};
  h_add_input(r, "X", TRITONSERVER_TYPE_INT32, shape, 2, A, sizeof A);
  h_call *c = h_infer(s, r);
  char *err = h_response_error(c, 0);
  cr_assert_not_null(err);
  cr_expect(strstr(err, "Invalid argument: in ensemble 'bad_shape', ") && strstr(err, "INPUT0"), "%s", err);
  free(err);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  cr_expect_eq(h_stat_count(s, "bad_shape", "fail"), 2); /* Triton counts a failed ensemble twice */
  done(s, repo);
}

/* Loads `name` in EXPLICIT mode and returns the error message (caller frees). */
static char *load_error(TRITONSERVER_Server *s, const char *name) {
  TRITONSERVER_Error *e = TRITONSERVER_ServerLoadModel(s, name);
  cr_assert_not_null(e, "%s loaded", name);
  char *msg = strdup(TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
  return msg;
}

static void one_step_ensemble(const char *repo, const char *name, const char *step_model) {
  char cfg[1024];
  snprintf(cfg, sizeof cfg,
           "name: \"%s\"\nplatform: \"ensemble\"\nmax_batch_size: 0\n"
           "input [ { name: \"X\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
           "output [ { name: \"Y\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
           "ensemble_scheduling { step [ { model_name: \"%s\" model_version: -1\n"
           "  input_map { key: \"IN\" value: \"X\" } output_map { key: \"OUT\" value: \"Y\" } } ] }\n",
           name, step_model);
  h_model(repo, name, cfg, "1");
}

Test(ensemble, loads_that_fail_say_why, .timeout = 60) {
  char *repo = h_tmpdir();
  one_step_ensemble(repo, "needs_nope", "nope");
  one_step_ensemble(repo, "loop_a", "loop_b");
  one_step_ensemble(repo, "loop_b", "loop_a");
  one_step_ensemble(repo, "self", "self");
  TRITONSERVER_Server *s = h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_EXPLICIT));
  char *m = load_error(s, "needs_nope");
  cr_expect(strstr(m, "ensemble needs_nope contains models that are not available or ambiguous: nope"), "%s", m);
  free(m);
  m = load_error(s, "loop_a");
  cr_expect(strstr(m, "circular dependency between ensembles: loop_a -> ... -> loop_b -> loop_a "
                      "(path: loop_a -> loop_b -> loop_a)"),
            "%s", m);
  free(m);
  m = load_error(s, "self");
  cr_expect(strstr(m, "circular dependency between ensembles: self -> ... -> self -> self (path: self -> self)"), "%s",
            m);
  free(m);
  done(s, repo);
}

/* An ensemble of one addsub step: `io` its inputs and outputs, `maps` the
 * step's maps, `mbs` its max_batch_size. */
static void addsub_ensemble(const char *repo, const char *name, int mbs, const char *io, const char *maps) {
  char cfg[2048];
  snprintf(cfg, sizeof cfg,
           "name: \"%s\"\nplatform: \"ensemble\"\nmax_batch_size: %d\n%s"
           "ensemble_scheduling { step [ { model_name: \"addsub\" model_version: -1\n%s } ] }\n",
           name, mbs, io, maps);
  h_model(repo, name, cfg, "1");
}

Test(ensemble, step_models_are_checked_against_the_ensemble, .timeout = 60) {
  char *repo = h_tmpdir();
  addsub_model(repo);
  const char *io_int =
      "input [ { name: \"A\" data_type: TYPE_INT32 dims: [ 4 ] }, { name: \"B\" data_type: TYPE_INT32 dims: [ 4 ] } ]\n"
      "output [ { name: \"S\" data_type: TYPE_INT32 dims: [ 4 ] } ]\n";
  const char *io_fp =
      "input [ { name: \"A\" data_type: TYPE_FP32 dims: [ 4 ] }, { name: \"B\" data_type: TYPE_INT32 dims: [ 4 ] } ]\n"
      "output [ { name: \"S\" data_type: TYPE_INT32 dims: [ 4 ] } ]\n";
  const char *maps = "input_map { key: \"INPUT0\" value: \"A\" } input_map { key: \"INPUT1\" value: \"B\" }\n"
                     "output_map { key: \"OUTPUT0\" value: \"S\" }\n";
  addsub_ensemble(repo, "bad_type", 8, io_fp, maps);
  addsub_ensemble(repo, "bad_batch", 16, io_int, maps);
  addsub_ensemble(repo, "bad_input", 8, io_int,
                  "input_map { key: \"INPUT0\" value: \"A\" } input_map { key: \"NOPE\" value: \"B\" }\n"
                  "output_map { key: \"OUTPUT0\" value: \"S\" }\n");
  addsub_ensemble(repo, "unmapped", 8,
                  "input [ { name: \"A\" data_type: TYPE_INT32 dims: [ 4 ] } ]\n"
                  "output [ { name: \"S\" data_type: TYPE_INT32 dims: [ 4 ] } ]\n",
                  "input_map { key: \"INPUT0\" value: \"A\" } output_map { key: \"OUTPUT0\" value: \"S\" }\n");
  addsub_ensemble(repo, "bad_output", 8, io_int,
                  "input_map { key: \"INPUT0\" value: \"A\" } input_map { key: \"INPUT1\" value: \"B\" }\n"
                  "output_map { key: \"OUT9\" value: \"S\" }\n");
  addsub_ensemble(
      repo, "bad_shape", 8,
      "input [ { name: \"A\" data_type: TYPE_INT32 dims: [ 3 ] }, { name: \"B\" data_type: TYPE_INT32 dims: [ 4 ] } ]\n"
      "output [ { name: \"S\" data_type: TYPE_INT32 dims: [ 4 ] } ]\n",
      maps);
  addsub_ensemble(repo, "bad_rank", 0,
                  "input [ { name: \"A\" data_type: TYPE_INT32 dims: [ 4, 1 ] }, { name: \"B\" data_type: TYPE_INT32 "
                  "dims: [ 4 ] } ]\n"
                  "output [ { name: \"S\" data_type: TYPE_INT32 dims: [ 4 ] } ]\n",
                  maps);
  /* A step pinned to a version that is not loaded (addsub has only 1). */
  char pinned[2048];
  snprintf(pinned, sizeof pinned,
           "name: \"pinned_v2\"\nplatform: \"ensemble\"\nmax_batch_size: 8\n%s"
           "ensemble_scheduling { step [ { model_name: \"addsub\" model_version: 2\n%s } ] }\n",
           io_int, maps);
  h_model(repo, "pinned_v2", pinned, "1");
  addsub_ensemble(repo, "good", 4, io_int, maps); /* a smaller batch than the step model's is fine */
  /* Not batching, with the step's batch dimension spelled out; and a variable dimension. */
  addsub_ensemble(repo, "good_full_dims", 0,
                  "input [ { name: \"A\" data_type: TYPE_INT32 dims: [ -1, 4 ] }, { name: \"B\" data_type: TYPE_INT32 "
                  "dims: [ 2, 4 ] } ]\n"
                  "output [ { name: \"S\" data_type: TYPE_INT32 dims: [ -1, -1 ] } ]\n",
                  maps);
  TRITONSERVER_Server *s = h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_EXPLICIT));
  struct {
    const char *model, *want;
  } cases[] = {
      {"bad_type", "in ensemble bad_type, ensemble tensor A: inconsistent data type: TYPE_FP32 is inferred from model "
                   "bad_type while TYPE_INT32 is inferred from model addsub"},
      {"bad_batch", "ensemble bad_batch allows maximum batch size 16, but it contains model addsub which only allows "
                    "maximum batch size to be 8"},
      {"bad_input", "in ensemble bad_input, ensemble tensor B is mapping to non-existing input NOPE in model addsub"},
      {"unmapped", "in ensemble unmapped, input INPUT1 in model addsub is not mapped to any ensemble tensors"},
      {"bad_output",
       "in ensemble bad_output, ensemble tensor S is mapped from non-existing output OUT9 in model addsub"},
      {"bad_shape", "in ensemble bad_shape, ensemble tensor A: inconsistent shape: [-1,3] is inferred from model "
                    "bad_shape while [-1,4] is inferred from model addsub"},
      {"bad_rank", "in ensemble bad_rank, ensemble tensor A: inconsistent shape: [4,1] is inferred from model "
                   "bad_rank while [-1,4] is inferred from model addsub"},
      {"pinned_v2", "ensemble 'pinned_v2' depends on 'addsub' whose required version 2 is not loaded (step 0, field "
                    "'model_version')"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *m = load_error(s, cases[i].model);
    cr_expect(strstr(m, cases[i].want), "%s: %s", cases[i].model, m);
    free(m);
  }
  H_OK(TRITONSERVER_ServerLoadModel(s, "good"));
  H_OK(TRITONSERVER_ServerLoadModel(s, "good_full_dims"));
  done(s, repo);
}

Test(ensemble, a_cancelled_request_starts_no_more_steps, .timeout = 60) {
  char *repo = h_tmpdir();
  addsub_model(repo);
  h_model(repo, "slow_id",
          "name: \"slow_id\"\nbackend: \"identity\"\nmax_batch_size: 8\n"
          "input [ { name: \"INPUT0\" data_type: TYPE_INT32 dims: [ -1 ] } ]\n"
          "output [ { name: \"OUTPUT0\" data_type: TYPE_INT32 dims: [ -1 ] } ]\n"
          "parameters { key: \"execute_delay_ms\" value: { string_value: \"500\" } }\n",
          "1");
  h_model(repo, "chain",
          "name: \"chain\"\nplatform: \"ensemble\"\nmax_batch_size: 8\n"
          "input [ { name: \"X\" data_type: TYPE_INT32 dims: [ 4 ] } ]\n"
          "output [ { name: \"Y\" data_type: TYPE_INT32 dims: [ 4 ] } ]\n"
          "ensemble_scheduling { step [\n"
          "  { model_name: \"slow_id\" input_map { key: \"INPUT0\" value: \"X\" }\n"
          "    output_map { key: \"OUTPUT0\" value: \"T\" } },\n"
          "  { model_name: \"id_int32\" input_map { key: \"INPUT0\" value: \"T\" }\n"
          "    output_map { key: \"OUTPUT0\" value: \"Y\" } } ] }\n",
          "1");
  TRITONSERVER_Server *s = h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE));
  TRITONSERVER_InferenceRequest *r = h_request(s, "chain");
  int64_t shape[2] = {1, 4};
  h_add_input(r, "X", TRITONSERVER_TYPE_INT32, shape, 2, A, sizeof A);
  h_call *c = h_submit(s, r);
  usleep(100 * 1000); /* the first step is running */
  H_OK(TRITONSERVER_InferenceRequestCancel(r));
  cr_assert(h_wait(c, 10000));
  TRITONSERVER_Error *e = TRITONSERVER_InferenceResponseError(c->responses[0]);
  cr_assert_not_null(e, "the ensemble answered");
  cr_expect_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_CANCELLED, "%s", TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  cr_expect_eq(h_stat_count(s, "id_int32", "success"), 0, "the second step ran");
  cr_expect_eq(h_stat_count(s, "chain", "fail"), 2); /* Triton counts a failed ensemble twice */
  done(s, repo);
}

static bool is_ready(TRITONSERVER_Server *s, const char *name) {
  bool ready = false;
  H_OK(TRITONSERVER_ServerModelIsReady(s, name, -1, &ready));
  return ready;
}

Test(ensemble, unloads_follow_the_dependencies, .timeout = 60) {
  char *repo = h_tmpdir();
  addsub_model(repo);
  ensemble_model(repo);
  TRITONSERVER_Server *s = h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_EXPLICIT));
  /* Unloading a step model takes the ensemble with it. */
  H_OK(TRITONSERVER_ServerLoadModel(s, "ens"));
  cr_assert(is_ready(s, "ens") && is_ready(s, "addsub") && is_ready(s, "id_int32"));
  H_OK(TRITONSERVER_ServerUnloadModel(s, "id_int32"));
  cr_expect_not(is_ready(s, "ens"), "the ensemble outlived its step model");
  cr_expect(is_ready(s, "addsub"));
  /* unload_dependents takes the step models that came with the ensemble. */
  H_OK(TRITONSERVER_ServerLoadModel(s, "ens"));
  cr_assert(is_ready(s, "ens") && is_ready(s, "id_int32"));
  H_OK(TRITONSERVER_ServerUnloadModelAndDependents(s, "ens"));
  cr_expect_not(is_ready(s, "ens"));
  cr_expect_not(is_ready(s, "id_int32"), "a step model loaded with the ensemble stayed");
  /* addsub came with the first load too, but was never unloaded since:
   * it also goes. A model loaded by name stays. */
  cr_expect_not(is_ready(s, "addsub"));
  H_OK(TRITONSERVER_ServerLoadModel(s, "addsub"));
  H_OK(TRITONSERVER_ServerLoadModel(s, "ens"));
  H_OK(TRITONSERVER_ServerUnloadModelAndDependents(s, "ens"));
  cr_expect(is_ready(s, "addsub"), "a model loaded by name went with the ensemble");
  cr_expect_not(is_ready(s, "id_int32"));
  /* Without unload_dependents the step models stay. */
  H_OK(TRITONSERVER_ServerLoadModel(s, "ens"));
  H_OK(TRITONSERVER_ServerUnloadModel(s, "ens"));
  cr_expect(is_ready(s, "addsub") && is_ready(s, "id_int32"));
  done(s, repo);
}

/* What HTTP and gRPC call: the same, and with a config override the
 * override's steps are the ones brought. */
Test(ensemble, a_load_with_parameters_brings_the_step_models_too, .timeout = 60) {
  char *repo = h_tmpdir();
  addsub_model(repo);
  ensemble_model(repo);
  TRITONSERVER_Server *s = h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_EXPLICIT));
  H_OK(TRITONSERVER_ServerLoadModelWithParameters(s, "ens", NULL, 0));
  cr_expect(is_ready(s, "ens") && is_ready(s, "addsub") && is_ready(s, "id_int32"));
  H_OK(TRITONSERVER_ServerUnloadModelAndDependents(s, "ens"));
  cr_expect_not(is_ready(s, "addsub"), "a step model loaded with the ensemble stayed");
  const char *json = "{\"name\":\"ens\",\"platform\":\"ensemble\",\"max_batch_size\":8,"
                     "\"input\":[{\"name\":\"A\",\"data_type\":\"TYPE_INT32\",\"dims\":[4]}],"
                     "\"output\":[{\"name\":\"COPY\",\"data_type\":\"TYPE_INT32\",\"dims\":[4]}],"
                     "\"ensemble_scheduling\":{\"step\":[{\"model_name\":\"id_int32\",\"model_version\":-1,"
                     "\"input_map\":{\"INPUT0\":\"A\"},\"output_map\":{\"OUTPUT0\":\"COPY\"}}]}}";
  TRITONSERVER_Parameter *p = TRITONSERVER_ParameterNew("config", TRITONSERVER_PARAMETER_STRING, json);
  const TRITONSERVER_Parameter *params[1] = {p};
  H_OK(TRITONSERVER_ServerLoadModelWithParameters(s, "ens", params, 1));
  TRITONSERVER_ParameterDelete(p);
  cr_expect(is_ready(s, "ens") && is_ready(s, "id_int32"));
  cr_expect_not(is_ready(s, "addsub"), "a step of the file's configuration came with the override");
  done(s, repo);
}

/* addsub on INT32 [1], not batching. */
static void addsub1_model(const char *repo) {
  h_model(repo, "addsub1",
          "name: \"addsub1\"\nbackend: \"add_sub\"\nmax_batch_size: 0\n"
          "input [ { name: \"INPUT0\" data_type: TYPE_INT32 dims: [ 1 ] },\n"
          "        { name: \"INPUT1\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
          "output [ { name: \"OUTPUT0\" data_type: TYPE_INT32 dims: [ 1 ] },\n"
          "         { name: \"OUTPUT1\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n",
          "1");
}

/* square_int32: the decoupled square backend (n responses of n). */
static void square_int32_model(const char *repo) {
  h_model(repo, "square_int32",
          "name: \"square_int32\"\nbackend: \"square\"\nmax_batch_size: 0\n"
          "model_transaction_policy { decoupled: true }\n"
          "input [ { name: \"IN\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
          "output [ { name: \"OUT\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n",
          "1");
}

static void square_model(const char *repo) {
  square_int32_model(repo);
  h_model(repo, "id_nb",
          "name: \"id_nb\"\nbackend: \"identity\"\nmax_batch_size: 0\n"
          "input [ { name: \"INPUT0\" data_type: TYPE_INT32 dims: [ -1 ] } ]\n"
          "output [ { name: \"OUTPUT0\" data_type: TYPE_INT32 dims: [ -1 ] } ]\n",
          "1");
}

/* The answers among c's responses (flags-only ones skipped): none may
 * fail, and each has the INT32 outputs names[i] equal to want[i]. */
static size_t answers(h_call *c, const char *const *names, const int32_t *want, int n) {
  size_t count = 0;
  for (size_t i = 0; i < c->n; i++) {
    if (!c->responses[i]) {
      cr_expect(c->flags[i] & TRITONSERVER_RESPONSE_COMPLETE_FINAL);
      continue;
    }
    char *err = h_response_error(c, i);
    cr_assert_null(err, "%s", err);
    for (int k = 0; k < n; k++) {
      h_output o;
      cr_assert(h_find_output(c->responses[i], names[k], &o), "no output %s", names[k]);
      cr_expect(o.size == 4 && *(const int32_t *)o.base == want[k], "%s = %d, not %d", names[k],
                *(const int32_t *)o.base, want[k]);
    }
    count++;
  }
  return count;
}

/* sq_chain(N): square(N) sends N responses of N; each goes through id_nb:
 * Y. (An output computed from N alone would be refused, as Triton does.) */
static void square_ensemble(const char *repo) {
  h_model(repo, "sq_chain",
          "name: \"sq_chain\"\nplatform: \"ensemble\"\nmax_batch_size: 0\n"
          "input [ { name: \"N\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
          "output [ { name: \"Y\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
          "ensemble_scheduling { step [\n"
          "  { model_name: \"square_int32\" input_map { key: \"IN\" value: \"N\" }\n"
          "    output_map { key: \"OUT\" value: \"T\" } },\n"
          "  { model_name: \"id_nb\" input_map { key: \"INPUT0\" value: \"T\" }\n"
          "    output_map { key: \"OUTPUT0\" value: \"Y\" } } ] }\n",
          "1");
}

Test(ensemble, a_decoupled_step_makes_an_answer_per_response, .timeout = 60) {
  char *repo = h_tmpdir();
  square_model(repo);
  square_ensemble(repo);
  TRITONSERVER_Server *s = h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE));
  uint32_t txn = 0;
  H_OK(TRITONSERVER_ServerModelTransactionProperties(s, "sq_chain", -1, &txn, NULL));
  cr_expect(txn & TRITONSERVER_TXN_DECOUPLED, "the ensemble is not decoupled");
  TRITONSERVER_Message *msg = NULL;
  H_OK(TRITONSERVER_ServerModelConfig(s, "sq_chain", -1, 1, &msg));
  char *text = h_msg_text(msg);
  cr_expect(strstr(text, "\"decoupled\":true"), "%s", text);
  free(text);
  for (int32_t n = 0; n <= 5; n += 5) {
    TRITONSERVER_InferenceRequest *r = h_request(s, "sq_chain");
    int64_t shape[1] = {1};
    h_add_input(r, "N", TRITONSERVER_TYPE_INT32, shape, 1, &n, sizeof n);
    h_call *c = h_infer(s, r);
    const char *names[1] = {"Y"};
    size_t got = answers(c, names, &n, 1);
    cr_expect_eq(got, (size_t)n, "n = %d: %zu answers", n, got);
    cr_expect_eq(c->finals, 1);
    h_call_free(c);
    H_OK(TRITONSERVER_InferenceRequestDelete(r));
  }
  /* id_nb ran once per square response. */
  cr_expect_eq(h_stat_count(s, "id_nb", "success"), 5);
  cr_expect_eq(h_stat_count(s, "sq_chain", "success"), 2);
  done(s, repo);
}

Test(ensemble, two_decoupled_sources_into_one_step_are_refused, .timeout = 60) {
  char *repo = h_tmpdir();
  square_model(repo);
  addsub1_model(repo);
  h_model(
      repo, "two_sq",
      "name: \"two_sq\"\nplatform: \"ensemble\"\nmax_batch_size: 0\n"
      "input [ { name: \"A\" data_type: TYPE_INT32 dims: [ 1 ] }, { name: \"B\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
      "output [ { name: \"S\" data_type: TYPE_INT32 dims: [ 1 ] }, { name: \"D\" data_type: TYPE_INT32 dims: [ 1 ] } "
      "]\n"
      "ensemble_scheduling { step [\n"
      "  { model_name: \"square_int32\" input_map { key: \"IN\" value: \"A\" } output_map { key: \"OUT\" value: \"TA\" "
      "} },\n"
      "  { model_name: \"square_int32\" input_map { key: \"IN\" value: \"B\" } output_map { key: \"OUT\" value: \"TB\" "
      "} },\n"
      "  { model_name: \"addsub1\" input_map { key: \"INPUT0\" value: \"TA\" } input_map { key: \"INPUT1\" value: "
      "\"TB\" }\n"
      "    output_map { key: \"OUTPUT0\" value: \"S\" } output_map { key: \"OUTPUT1\" value: \"D\" } } ] }\n",
      "1");
  TRITONSERVER_Server *s = h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_EXPLICIT));
  char *m = load_error(s, "two_sq");
  cr_expect(strstr(m, "in ensemble two_sq, step of model 'addsub1' receives inputs originated from different "
                      "decoupled models"),
            "%s", m);
  free(m);
  done(s, repo);
}

/* square(N) -> T, addsub1(T, T) -> S = 2T, square(S) -> Y: N * 2N answers.
 * addsub1 reads T twice because a step may not mix an iteration with an
 * ensemble input (Triton refuses that, see the test below). */
static void nested_ensemble(const char *repo) {
  h_model(repo, "sq_nest",
          "name: \"sq_nest\"\nplatform: \"ensemble\"\nmax_batch_size: 0\n"
          "input [ { name: \"N\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
          "output [ { name: \"Y\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
          "ensemble_scheduling { step [\n"
          "  { model_name: \"square_int32\" input_map { key: \"IN\" value: \"S\" } output_map { key: \"OUT\" "
          "value: \"Y\" } },\n"
          "  { model_name: \"addsub1\" input_map { key: \"INPUT0\" value: \"T\" } input_map { key: \"INPUT1\" "
          "value: \"T\" }\n"
          "    output_map { key: \"OUTPUT0\" value: \"S\" } },\n"
          "  { model_name: \"square_int32\" input_map { key: \"IN\" value: \"N\" } output_map { key: \"OUT\" "
          "value: \"T\" } } ] }\n",
          "1");
}

static TRITONSERVER_InferenceRequest *nest_request(TRITONSERVER_Server *s, int32_t n) {
  static int32_t values[2];
  static int which;
  int32_t *v = &values[which++ & 1];
  *v = n;
  TRITONSERVER_InferenceRequest *r = h_request(s, "sq_nest");
  int64_t shape[1] = {1};
  h_add_input(r, "N", TRITONSERVER_TYPE_INT32, shape, 1, v, sizeof *v);
  return r;
}

Test(ensemble, a_decoupled_step_reads_the_responses_of_another, .timeout = 60) {
  char *repo = h_tmpdir();
  square_int32_model(repo);
  addsub1_model(repo);
  nested_ensemble(repo);
  TRITONSERVER_Server *s = h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE));
  uint32_t txn = 0;
  H_OK(TRITONSERVER_ServerModelTransactionProperties(s, "sq_nest", -1, &txn, NULL));
  cr_expect(txn & TRITONSERVER_TXN_DECOUPLED, "the ensemble is not decoupled");
  for (int32_t n = 0; n <= 3; n += 3) {
    TRITONSERVER_InferenceRequest *r = nest_request(s, n);
    h_call *c = h_infer(s, r);
    const char *names[1] = {"Y"};
    int32_t twice = 2 * n;
    size_t got = answers(c, names, &twice, 1);
    cr_expect_eq(got, (size_t)(n * twice), "n = %d: %zu answers", n, got);
    cr_expect_eq(c->finals, 1);
    cr_expect(c->flags[c->n - 1] & TRITONSERVER_RESPONSE_COMPLETE_FINAL, "the final flag is not last");
    h_call_free(c);
    H_OK(TRITONSERVER_InferenceRequestDelete(r));
  }
  /* square ran once per request (N) and once per response of that run. */
  cr_expect_eq(h_stat_count(s, "square_int32", "success"), 2 + 3);
  cr_expect_eq(h_stat_count(s, "addsub1", "success"), 3);
  cr_expect_eq(h_stat_count(s, "sq_nest", "success"), 2);
  done(s, repo);
}

Test(ensemble, cancelling_reaches_the_runs_of_a_nested_decoupled_step, .timeout = 60) {
  char *repo = h_tmpdir();
  square_int32_model(repo);
  /* square_outer(N) -> T, square_int32(T) -> Y. Both runs would send a
   * billion responses; max_inflight_requests pauses the outer one (on its
   * own instance) while inner runs are busy. */
  h_model(repo, "square_outer",
          "name: \"square_outer\"\nbackend: \"square\"\nmax_batch_size: 0\n"
          "model_transaction_policy { decoupled: true }\n"
          "input [ { name: \"IN\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
          "output [ { name: \"OUT\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n",
          "1");
  h_model(repo, "sq_nest",
          "name: \"sq_nest\"\nplatform: \"ensemble\"\nmax_batch_size: 0\n"
          "input [ { name: \"N\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
          "output [ { name: \"Y\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
          "ensemble_scheduling { max_inflight_requests: 2 step [\n"
          "  { model_name: \"square_outer\" input_map { key: \"IN\" value: \"N\" } output_map { key: \"OUT\" "
          "value: \"T\" } },\n"
          "  { model_name: \"square_int32\" input_map { key: \"IN\" value: \"T\" } output_map { key: \"OUT\" "
          "value: \"Y\" } } ] }\n",
          "1");
  TRITONSERVER_Server *s = h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE));
  TRITONSERVER_InferenceRequest *r = nest_request(s, 1000000000);
  h_call *c = h_submit(s, r);
  pthread_mutex_lock(&c->mu);
  while (c->n == 0) pthread_cond_wait(&c->cv, &c->mu);
  pthread_mutex_unlock(&c->mu);
  H_OK(TRITONSERVER_InferenceRequestCancel(r));
  bool ended = h_wait(c, 20000);
  cr_assert(ended, "the ensemble did not end after cancelling: %zu responses, %d finals, %d released", c->n, c->finals,
            c->released);
  pthread_mutex_lock(&c->mu);
  size_t last = c->n - 1;
  pthread_mutex_unlock(&c->mu);
  cr_assert(last + 1 < H_MAX_RESPONSES, "%zu responses before the cancellation took", last + 1);
  cr_assert_not_null(c->responses[last]);
  TRITONSERVER_Error *e = TRITONSERVER_InferenceResponseError(c->responses[last]);
  cr_assert_not_null(e, "the last response has no error");
  cr_expect_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_CANCELLED, "%s", TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  cr_expect_eq(h_stat_count(s, "sq_nest", "fail"), 2); /* Triton counts a failed ensemble twice */
  done(s, repo);
}

/* Triton's decoupled-flow check (core r25.07, ensemble_utils.cc): the
 * outputs X = square(A) and Y = square(B) come from two decoupled steps,
 * and a step may not read both an iteration and an ensemble input. */
Test(ensemble, a_mix_of_decoupled_origins_is_refused_as_triton_does, .timeout = 60) {
  char *repo = h_tmpdir();
  square_int32_model(repo);
  addsub1_model(repo);
  h_model(
      repo, "two_out",
      "name: \"two_out\"\nplatform: \"ensemble\"\nmax_batch_size: 0\n"
      "input [ { name: \"A\" data_type: TYPE_INT32 dims: [ 1 ] }, { name: \"B\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
      "output [ { name: \"X\" data_type: TYPE_INT32 dims: [ 1 ] }, { name: \"Y\" data_type: TYPE_INT32 dims: [ 1 ] } "
      "]\n"
      "ensemble_scheduling { step [\n"
      "  { model_name: \"square_int32\" input_map { key: \"IN\" value: \"A\" } output_map { key: \"OUT\" value: \"X\" "
      "} },\n"
      "  { model_name: \"square_int32\" input_map { key: \"IN\" value: \"B\" } output_map { key: \"OUT\" value: \"Y\" "
      "} } ] }\n",
      "1");
  h_model(
      repo, "mixed_in",
      "name: \"mixed_in\"\nplatform: \"ensemble\"\nmax_batch_size: 0\n"
      "input [ { name: \"N\" data_type: TYPE_INT32 dims: [ 1 ] }, { name: \"B\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
      "output [ { name: \"Y\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
      "ensemble_scheduling { step [\n"
      "  { model_name: \"square_int32\" input_map { key: \"IN\" value: \"N\" } output_map { key: \"OUT\" value: "
      "\"T\" } },\n"
      "  { model_name: \"addsub1\" input_map { key: \"INPUT0\" value: \"T\" } input_map { key: \"INPUT1\" value: "
      "\"B\" } output_map { key: \"OUTPUT0\" value: \"Y\" } } ] }\n",
      "1");
  TRITONSERVER_Server *s = h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_EXPLICIT));
  const char *expect[2][2] = {
      {"two_out", "in ensemble two_out, step of model 'two_out' receives inputs originated from different decoupled "
                  "models"},
      {"mixed_in", "in ensemble mixed_in, step of model 'addsub1' receives inputs originated from different decoupled "
                   "models"}};
  for (int i = 0; i < 2; i++) {
    char *m = load_error(s, expect[i][0]);
    cr_expect(strstr(m, expect[i][1]), "%s: %s", expect[i][0], m);
    free(m);
  }
  done(s, repo);
}

/* ---- values of a long stream are freed as they are used ---------------- */

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
/* The sanitizers' allocator count (their runtimes export it). */
size_t __sanitizer_get_current_allocated_bytes(void);
#define HEAP_BYTES() __sanitizer_get_current_allocated_bytes()
#endif

typedef struct heap_watch {
  h_call *c;
  size_t base, peak, answers;
} heap_watch;

#ifdef HEAP_BYTES
static void heap_watch_response(TRITONSERVER_InferenceResponse *r, const uint32_t flags, void *userp) {
  heap_watch *w = userp;
  size_t now = HEAP_BYTES();
  if (r) TRITONSERVER_InferenceResponseDelete(r);
  pthread_mutex_lock(&w->c->mu);
  if (now > w->peak) w->peak = now;
  if (r) w->answers++;
  if (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) w->c->finals++;
  pthread_cond_broadcast(&w->c->cv);
  pthread_mutex_unlock(&w->c->mu);
}
#endif

/* square(N) -> T, id_nb(T) -> Y for each of the N responses (two runs of
 * id_nb in flight at most). Each answer takes Y's value and each id_nb run
 * T's; the heap must not grow with N. */
Test(ensemble, a_long_stream_does_not_keep_its_answered_values, .timeout = 120) {
#ifndef HEAP_BYTES
  cr_skip_test("needs a sanitizer's allocator count (CI's builds have one)");
#else
  char *repo = h_tmpdir();
  square_model(repo);
  h_model(repo, "sq_stream",
          "name: \"sq_stream\"\nplatform: \"ensemble\"\nmax_batch_size: 0\n"
          "input [ { name: \"N\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
          "output [ { name: \"Y\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
          "ensemble_scheduling { max_inflight_requests: 2 step [\n"
          "  { model_name: \"square_int32\" input_map { key: \"IN\" value: \"N\" }\n"
          "    output_map { key: \"OUT\" value: \"T\" } },\n"
          "  { model_name: \"id_nb\" input_map { key: \"INPUT0\" value: \"T\" }\n"
          "    output_map { key: \"OUTPUT0\" value: \"Y\" } } ] }\n",
          "1");
  TRITONSERVER_Server *s = h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE));
  const int32_t n = 30000;
  TRITONSERVER_InferenceRequest *r = h_request(s, "sq_stream");
  int64_t shape[1] = {1};
  h_add_input(r, "N", TRITONSERVER_TYPE_INT32, shape, 1, &n, sizeof n);
  heap_watch w = {.c = h_call_new()};
  H_OK(TRITONSERVER_InferenceRequestSetReleaseCallback(r, h_on_release, w.c));
  H_OK(TRITONSERVER_InferenceRequestSetResponseCallback(r, h_allocator(), w.c, heap_watch_response, &w));
  w.base = w.peak = HEAP_BYTES();
  H_OK(TRITONSERVER_ServerInferAsync(s, r, NULL));
  cr_assert(h_wait(w.c, 100000), "the stream did not end");
  cr_expect_eq(w.answers, (size_t)n);
  /* Kept values cost about 1 KB an iteration (30 MB here); freed ones
   * leave the iteration index arrays (under 1 MB) and what is in flight. */
  size_t grew = w.peak > w.base ? w.peak - w.base : 0;
  cr_expect(grew < 8u << 20, "the heap grew by %zu bytes during %d answers", grew, n);
  printf("heap growth during the stream: %zu bytes for %d answers\n", grew, n);
  h_call_free(w.c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  done(s, repo);
#endif
}

/* ---- max_inflight_requests (backpressure) ---------------------------- */

/* sq_slow / sq_slow_open: square(N) feeds N responses to id_slow (40 ms
 * per run, one instance); Y is its output. sq_slow allows 2 runs of a
 * step in flight across its requests, sq_slow_open any number. */
static void backpressure_models(const char *repo) {
  square_int32_model(repo);
  h_model(repo, "id_slow",
          "name: \"id_slow\"\nbackend: \"identity\"\nmax_batch_size: 0\n"
          "input [ { name: \"INPUT0\" data_type: TYPE_INT32 dims: [ -1 ] } ]\n"
          "output [ { name: \"OUTPUT0\" data_type: TYPE_INT32 dims: [ -1 ] } ]\n"
          "parameters { key: \"execute_delay_ms\" value: { string_value: \"40\" } }\n",
          "1");
  const char *fmt = "name: \"%s\"\nplatform: \"ensemble\"\nmax_batch_size: 0\n"
                    "input [ { name: \"N\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
                    "output [ { name: \"Y\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
                    "ensemble_scheduling { %s step [\n"
                    "  { model_name: \"square_int32\" input_map { key: \"IN\" value: \"N\" }\n"
                    "    output_map { key: \"OUT\" value: \"T\" } },\n"
                    "  { model_name: \"id_slow\" input_map { key: \"INPUT0\" value: \"T\" }\n"
                    "    output_map { key: \"OUTPUT0\" value: \"Y\" } } ] }\n";
  char cfg[1024];
  snprintf(cfg, sizeof cfg, fmt, "sq_slow", "max_inflight_requests: 2");
  h_model(repo, "sq_slow", cfg, "1");
  snprintf(cfg, sizeof cfg, fmt, "sq_slow_open", "");
  h_model(repo, "sq_slow_open", cfg, "1");
}

/* Samples id_slow's pending-request gauge (queued, not executing) until
 * told to stop, keeping the largest value seen. */
typedef struct gauge_watch {
  TRITONSERVER_Server *s;
  atomic_bool stop;
  long most;
  pthread_t thread;
} gauge_watch;

static long pending_of_id_slow(TRITONSERVER_Server *s) {
  char *text = h_metrics_text(s);
  const char *key = "nv_inference_pending_request_count{model=\"id_slow\",version=\"1\"} ";
  const char *at = strstr(text, key);
  long v = at ? strtol(at + strlen(key), NULL, 10) : -1;
  free(text);
  return v;
}

static void *gauge_main(void *arg) {
  gauge_watch *w = arg;
  while (!atomic_load(&w->stop)) {
    long v = pending_of_id_slow(w->s);
    if (v > w->most) w->most = v;
    usleep(2000);
  }
  return NULL;
}

static void gauge_start(gauge_watch *w, TRITONSERVER_Server *s) {
  w->s = s;
  w->most = -1;
  atomic_init(&w->stop, false);
  cr_assert_eq(pthread_create(&w->thread, NULL, gauge_main, w), 0);
}

static long gauge_stop(gauge_watch *w) {
  atomic_store(&w->stop, true);
  pthread_join(w->thread, NULL);
  return w->most;
}

static TRITONSERVER_InferenceRequest *sq_request(TRITONSERVER_Server *s, const char *model, const int32_t *n) {
  TRITONSERVER_InferenceRequest *r = h_request(s, model);
  int64_t shape[1] = {1};
  h_add_input(r, "N", TRITONSERVER_TYPE_INT32, shape, 1, n, sizeof *n);
  return r;
}

/* Answers with a Y of n in c (errors fail the test). */
static size_t sq_answers(h_call *c, int32_t n) {
  size_t answers = 0;
  for (size_t i = 0; i < c->n; i++) {
    if (!c->responses[i]) continue;
    char *err = h_response_error(c, i);
    cr_assert_null(err, "%s", err);
    h_output y;
    cr_assert(h_find_output(c->responses[i], "Y", &y));
    cr_expect(*(const int32_t *)y.base == n);
    answers++;
  }
  return answers;
}

Test(ensemble, max_inflight_requests_bounds_each_step_across_requests, .timeout = 120) {
  char *repo = h_tmpdir();
  backpressure_models(repo);
  TRITONSERVER_Server *s = h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE));
  TRITONSERVER_Message *msg = NULL;
  H_OK(TRITONSERVER_ServerModelConfig(s, "sq_slow", -1, 1, &msg));
  char *text = h_msg_text(msg);
  cr_expect(strstr(text, "\"max_inflight_requests\":2"), "%s", text);
  free(text);
  /* Two requests at once, 6 responses each: square sends all 12 at once,
   * but id_slow never holds more than 2 of them in flight. */
  const int32_t n = 6;
  gauge_watch w;
  gauge_start(&w, s);
  TRITONSERVER_InferenceRequest *r1 = sq_request(s, "sq_slow", &n), *r2 = sq_request(s, "sq_slow", &n);
  h_call *c1 = h_submit(s, r1), *c2 = h_submit(s, r2);
  cr_assert(h_wait(c1, 30000) && h_wait(c2, 30000), "no final answer");
  long most = gauge_stop(&w);
  /* The gauge counts a request until it is released, just after its final
   * response frees the slot: the limit, plus one on its way out. */
  cr_expect(most >= 1 && most <= 3, "id_slow had %ld requests pending (limit 2)", most);
  cr_expect_eq(sq_answers(c1, n), (size_t)n);
  cr_expect_eq(sq_answers(c2, n), (size_t)n);
  h_call_free(c1);
  h_call_free(c2);
  H_OK(TRITONSERVER_InferenceRequestDelete(r1));
  H_OK(TRITONSERVER_InferenceRequestDelete(r2));
  /* The same pipeline without the limit queues them all at id_slow. */
  gauge_start(&w, s);
  TRITONSERVER_InferenceRequest *r = sq_request(s, "sq_slow_open", &n);
  h_call *c = h_infer(s, r);
  most = gauge_stop(&w);
  cr_expect(most > 3, "without a limit id_slow had only %ld requests pending", most);
  cr_expect_eq(sq_answers(c, n), (size_t)n);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  done(s, repo);
}

Test(ensemble, cancelling_frees_a_producer_waiting_for_room, .timeout = 120) {
  char *repo = h_tmpdir();
  backpressure_models(repo);
  TRITONSERVER_Server *s = h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE));
  const int32_t n = 40; /* 1.6 s of id_slow without cancellation */
  TRITONSERVER_InferenceRequest *r = sq_request(s, "sq_slow", &n);
  h_call *c = h_submit(s, r);
  /* Once the first answer is out, square is waiting for room. */
  pthread_mutex_lock(&c->mu);
  while (c->n == 0) pthread_cond_wait(&c->cv, &c->mu);
  pthread_mutex_unlock(&c->mu);
  H_OK(TRITONSERVER_InferenceRequestCancel(r));
  cr_assert(h_wait(c, 30000), "no final answer after cancelling");
  size_t answers = 0;
  bool cancelled = false;
  for (size_t i = 0; i < c->n; i++) {
    char *err = h_response_error(c, i);
    if (err && strstr(err, "cancelled"))
      cancelled = true;
    else if (c->responses[i] && !err)
      answers++;
    free(err);
  }
  cr_expect(cancelled, "no CANCELLED answer");
  cr_expect(answers >= 1 && answers < (size_t)n, "%zu answers", answers);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  /* The limit is free again: a new request gets all its answers. */
  const int32_t small = 3;
  r = sq_request(s, "sq_slow", &small);
  c = h_infer(s, r);
  cr_expect_eq(sq_answers(c, small), (size_t)small);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  done(s, repo);
}

/* ---- optional inputs left out --------------------------------------- */

/* An optional ensemble input the request leaves out: the step that reads
 * it runs without it (its own input is optional too) and the ensemble
 * answers with what the step produced, as Triton does; before, no step
 * could start and the request failed with "unexpected deadlock". */
Test(ensemble, an_optional_input_left_out_runs_the_step_without_it, .timeout = 60) {
  char *repo = h_tmpdir();
  h_model(repo, "ident_opt",
          "name: \"ident_opt\"\nbackend: \"identity\"\nmax_batch_size: 0\n"
          "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 2 ] },\n"
          "        { name: \"INPUT1\" data_type: TYPE_FP32 dims: [ 2 ] optional: true } ]\n"
          "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ 2 ] },\n"
          "         { name: \"OUTPUT1\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n",
          "1");
  h_model(repo, "ens_opt",
          "name: \"ens_opt\"\nplatform: \"ensemble\"\nmax_batch_size: 0\n"
          "input [ { name: \"A\" data_type: TYPE_FP32 dims: [ 2 ] },\n"
          "        { name: \"B\" data_type: TYPE_FP32 dims: [ 2 ] optional: true } ]\n"
          "output [ { name: \"Y\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n"
          "ensemble_scheduling { step [ { model_name: \"ident_opt\" model_version: -1\n"
          "  input_map { key: \"INPUT0\" value: \"A\" } input_map { key: \"INPUT1\" value: \"B\" }\n"
          "  output_map { key: \"OUTPUT0\" value: \"Y\" } } ] }\n",
          "1");
  TRITONSERVER_Server *s = h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE));
  const float a[2] = {3, 4}, b[2] = {5, 6};
  int64_t shape[1] = {2};
  for (int with_b = 0; with_b < 2; with_b++) {
    TRITONSERVER_InferenceRequest *r = h_request(s, "ens_opt");
    h_add_input(r, "A", TRITONSERVER_TYPE_FP32, shape, 1, a, sizeof a);
    if (with_b) h_add_input(r, "B", TRITONSERVER_TYPE_FP32, shape, 1, b, sizeof b);
    h_call *c = h_infer(s, r);
    char *err = h_response_error(c, 0);
    cr_assert_null(err, "with B %d: %s", with_b, err ? err : "");
    h_output y;
    cr_assert(h_find_output(c->responses[0], "Y", &y), "no Y");
    cr_expect(y.size == sizeof a && !memcmp(y.base, a, sizeof a), "Y is not A");
    h_call_free(c);
    H_OK(TRITONSERVER_InferenceRequestDelete(r));
  }
  done(s, repo);
}

/* A tensor crosses between models with and without batching as Triton's
 * ensemble moves it (its ReshapeTensorDims, qa/L0_infer's *_nobatch
 * ensembles): made without batching and sent where a batch is expected, it
 * gets a batch of 1; a batch of 1 sent where none is expected loses it.
 * And an ensemble output without labels takes its step output's, so that
 * classification through the ensemble names classes. */
Test(ensemble, tensors_cross_between_batching_and_unbatched_models_and_keep_labels, .timeout = 60) {
  char *repo = h_tmpdir();
  addsub_model(repo);
  h_model(repo, "addsub_nb",
          "name: \"addsub_nb\"\nbackend: \"add_sub\"\nmax_batch_size: 0\n"
          "input [ { name: \"INPUT0\" data_type: TYPE_INT32 dims: [ 4 ] },\n"
          "        { name: \"INPUT1\" data_type: TYPE_INT32 dims: [ 4 ] } ]\n"
          "output [ { name: \"OUTPUT0\" data_type: TYPE_INT32 dims: [ 4 ] label_filename: \"labels.txt\" },\n"
          "         { name: \"OUTPUT1\" data_type: TYPE_INT32 dims: [ 4 ] } ]\n",
          "1");
  h_write(repo, "addsub_nb/labels.txt", "zero\none\ntwo\nthree\n");
  h_model(repo, "nb_ens",
          "name: \"nb_ens\"\nplatform: \"ensemble\"\nmax_batch_size: 0\n"
          "input [ { name: \"A\" data_type: TYPE_INT32 dims: [ 4 ] },\n"
          "        { name: \"B\" data_type: TYPE_INT32 dims: [ 4 ] } ]\n"
          "output [ { name: \"SUM2\" data_type: TYPE_INT32 dims: [ 4 ] },\n"
          "         { name: \"S\" data_type: TYPE_INT32 dims: [ 4 ] } ]\n"
          "ensemble_scheduling { step [\n"
          "  { model_name: \"addsub\" model_version: -1\n"
          "    input_map { key: \"INPUT0\" value: \"A\" } input_map { key: \"INPUT1\" value: \"B\" }\n"
          "    output_map { key: \"OUTPUT0\" value: \"S\" } output_map { key: \"OUTPUT1\" value: \"D\" } },\n"
          "  { model_name: \"addsub_nb\" model_version: -1\n"
          "    input_map { key: \"INPUT0\" value: \"S\" } input_map { key: \"INPUT1\" value: \"D\" }\n"
          "    output_map { key: \"OUTPUT0\" value: \"SUM2\" } }\n"
          "] }\n",
          "1");
  TRITONSERVER_Server *s = h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE));
  TRITONSERVER_InferenceRequest *r = h_request(s, "nb_ens");
  int64_t shape[1] = {4};
  h_add_input(r, "A", TRITONSERVER_TYPE_INT32, shape, 1, A, sizeof A);
  h_add_input(r, "B", TRITONSERVER_TYPE_INT32, shape, 1, B, sizeof B);
  h_call *c = h_infer(s, r);
  char *err = h_response_error(c, 0);
  cr_assert_null(err, "%s", err);
  const char *names[2] = {"SUM2", "S"};
  for (int k = 0; k < 2; k++) {
    h_output o;
    cr_assert(h_find_output(c->responses[0], names[k], &o), "%s", names[k]);
    cr_assert(o.dims == 1 && o.shape[0] == 4, "%s: %" PRIu64 " dims", names[k], o.dims);
    int32_t v[4];
    memcpy(v, o.base, sizeof v);
    for (int i = 0; i < 4; i++) cr_assert_eq(v[i], k == 0 ? 2 * A[i] : A[i] + B[i], "%s[%d]", names[k], i);
  }
  /* SUM2 comes from addsub_nb's OUTPUT0: its labels. S has none. */
  uint32_t n = 0;
  H_OK(TRITONSERVER_InferenceResponseOutputCount(c->responses[0], &n));
  for (uint32_t i = 0; i < n; i++) {
    h_output o;
    TRITONSERVER_MemoryType mt;
    int64_t mid;
    void *up;
    H_OK(TRITONSERVER_InferenceResponseOutput(c->responses[0], i, &o.name, &o.dtype, &o.shape, &o.dims, &o.base,
                                              &o.size, &mt, &mid, &up));
    const char *label = NULL;
    H_OK(TRITONSERVER_InferenceResponseOutputClassificationLabel(c->responses[0], i, 2, &label));
    if (!strcmp(o.name, "SUM2"))
      cr_assert_str_eq(label, "two");
    else
      cr_assert_null(label);
  }
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  done(s, repo);
}

/* An ensemble's own reshape applies to its tensors as to any model's
 * (qa/L0_infer_reshape's simple_reshape_* ensembles): the request's
 * [1, 2, 2] input reaches the steps as the configured [1, 4], and the
 * [1, 4] step output answers as the ensemble's [1, 2, 2]. */
Test(ensemble, the_ensembles_reshape_applies_to_its_inputs_and_outputs, .timeout = 60) {
  char *repo = h_tmpdir();
  addsub_model(repo);
  h_model(repo, "rs_ens",
          "name: \"rs_ens\"\nplatform: \"ensemble\"\nmax_batch_size: 8\n"
          "input [ { name: \"A\" data_type: TYPE_INT32 dims: [ 2, 2 ] reshape: { shape: [ 4 ] } },\n"
          "        { name: \"B\" data_type: TYPE_INT32 dims: [ 4 ] } ]\n"
          "output [ { name: \"S\" data_type: TYPE_INT32 dims: [ 2, 2 ] reshape: { shape: [ 4 ] } } ]\n"
          "ensemble_scheduling { step [\n"
          "  { model_name: \"addsub\" model_version: -1\n"
          "    input_map { key: \"INPUT0\" value: \"A\" } input_map { key: \"INPUT1\" value: \"B\" }\n"
          "    output_map { key: \"OUTPUT0\" value: \"S\" } }\n"
          "] }\n",
          "1");
  TRITONSERVER_Server *s = h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE));
  TRITONSERVER_InferenceRequest *r = h_request(s, "rs_ens");
  int64_t a_shape[3] = {1, 2, 2}, b_shape[2] = {1, 4};
  h_add_input(r, "A", TRITONSERVER_TYPE_INT32, a_shape, 3, A, sizeof A);
  h_add_input(r, "B", TRITONSERVER_TYPE_INT32, b_shape, 2, B, sizeof B);
  h_call *c = h_infer(s, r);
  char *err = h_response_error(c, 0);
  cr_assert_null(err, "%s", err);
  h_output o;
  cr_assert(h_find_output(c->responses[0], "S", &o));
  cr_assert(o.dims == 3 && o.shape[0] == 1 && o.shape[1] == 2 && o.shape[2] == 2, "S: %" PRIu64 " dims", o.dims);
  int32_t v[4];
  memcpy(v, o.base, sizeof v);
  for (int i = 0; i < 4; i++) cr_assert_eq(v[i], A[i] + B[i]);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  done(s, repo);
}

/* Triton prunes an ensemble to the steps the requested outputs need
 * (qa/L0_simple_ensemble's one-output case counts the composing model's
 * inferences), and answers outputs made by steps with the request's
 * sequence fields as parameters. Asking ens for COPY alone runs the first
 * add_sub (S) and the identity, not the second add_sub. */
Test(ensemble, only_the_steps_the_requested_outputs_need_run, .timeout = 60) {
  char *repo = h_tmpdir();
  addsub_model(repo);
  ensemble_model(repo);
  TRITONSERVER_Server *s = h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE));
  TRITONSERVER_InferenceRequest *r = ens_request(s);
  H_OK(TRITONSERVER_InferenceRequestAddRequestedOutput(r, "COPY"));
  H_OK(TRITONSERVER_InferenceRequestSetCorrelationId(r, 42));
  h_call *c = h_infer(s, r);
  char *err = h_response_error(c, 0);
  cr_assert_null(err, "%s", err);
  int32_t v[4];
  cr_assert(output(c, "COPY", v));
  for (int i = 0; i < 4; i++) cr_assert_eq(v[i], A[i] + B[i]);
  cr_assert_not(output(c, "SUM2", v));
  uint32_t n = 0;
  H_OK(TRITONSERVER_InferenceResponseParameterCount(c->responses[0], &n));
  bool seen_id = false, seen_start = false, seen_end = false;
  for (uint32_t i = 0; i < n; i++) {
    const char *name;
    TRITONSERVER_ParameterType type;
    const void *value;
    H_OK(TRITONSERVER_InferenceResponseParameter(c->responses[0], i, &name, &type, &value));
    if (!strcmp(name, "sequence_id")) {
      cr_assert_eq(type, TRITONSERVER_PARAMETER_INT);
      cr_assert_eq(*(const int64_t *)value, 42);
      seen_id = true;
    } else if (!strcmp(name, "sequence_start") || !strcmp(name, "sequence_end")) {
      cr_assert_eq(type, TRITONSERVER_PARAMETER_BOOL);
      cr_assert_not(*(const bool *)value);
      *(name[9] == 's' ? &seen_start : &seen_end) = true;
    }
  }
  cr_assert(seen_id && seen_start && seen_end, "%u parameters", n);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  cr_assert_eq(h_stat_count(s, "addsub", "inference_count"), 1);
  cr_assert_eq(h_stat_count(s, "id_int32", "inference_count"), 1);
  done(s, repo);
}

/* A decoupled ensemble whose last answer is known to be the last (nothing
 * runs any more) sends it with the final flag, as Triton does: a gRPC
 * client that takes no empty final responses (qa/L0_simple_ensemble's
 * backpressure cases) sees the end. square sends its one response and its
 * final flag at once; the slow identity answers after both. */
Test(ensemble, the_last_answer_of_a_decoupled_ensemble_is_final, .timeout = 60) {
  char *repo = h_tmpdir();
  square_int32_model(repo);
  h_model(repo, "id_nb",
          "name: \"id_nb\"\nbackend: \"identity\"\nmax_batch_size: 0\n"
          "input [ { name: \"INPUT0\" data_type: TYPE_INT32 dims: [ -1 ] } ]\n"
          "output [ { name: \"OUTPUT0\" data_type: TYPE_INT32 dims: [ -1 ] } ]\n"
          "parameters { key: \"execute_delay_ms\" value { string_value: \"300\" } }\n",
          "1");
  square_ensemble(repo);
  TRITONSERVER_Server *s = h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE));
  TRITONSERVER_InferenceRequest *r = h_request(s, "sq_chain");
  int32_t n = 1;
  int64_t shape[1] = {1};
  h_add_input(r, "N", TRITONSERVER_TYPE_INT32, shape, 1, &n, sizeof n);
  h_call *c = h_infer(s, r);
  cr_assert_eq(c->n, 1, "%u responses", (unsigned)c->n);
  cr_assert_not_null(c->responses[0]);
  cr_assert(c->flags[0] & TRITONSERVER_RESPONSE_COMPLETE_FINAL);
  const char *names[1] = {"Y"};
  cr_assert_eq(answers(c, names, &n, 1), 1);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  done(s, repo);
}
