/* Model warmup (`model_warmup`): each instance runs the samples through
 * Execute before the model is READY (the recorder backend writes down the
 * executions), the runs are not counted in statistics, zeros, random
 * bytes and files under <model>/warmup/ feed them, decoupled models are
 * waited for until their final response, and every failure (a backend
 * error, bad sample settings, a short or missing file) fails the load with
 * a message that names the sample. */
#include "harness.h"

#include <unistd.h>

static char *g_repo, *g_record;

static void setup(void) { h_repo_record_new(&g_repo, &g_record); }

static void teardown(void) { h_repo_record_free(g_repo, g_record); }

TestSuite(warmup, .init = setup, .fini = teardown, .timeout = 60);

static TRITONSERVER_Server *explicit_server(void) {
  TRITONSERVER_ServerOptions *o = h_options(g_repo, TRITONSERVER_MODEL_CONTROL_EXPLICIT);
  H_OK(TRITONSERVER_ServerOptionsSetBackendConfig(o, "recorder", "record_file", g_record));
  return h_server_new(o);
}

static const char *IO_FP32_4 = "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n"
                               "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n";

static void write_model(const char *name, const char *backend, const char *extra) {
  char cfg[8192];
  snprintf(cfg, sizeof cfg, "name: \"%s\"\nbackend: \"%s\"\n%s%s", name, backend, IO_FP32_4, extra ? extra : "");
  h_model(g_repo, name, cfg, "1");
}

static bool ready(TRITONSERVER_Server *s, const char *m) {
  bool r = false;
  H_OK(TRITONSERVER_ServerModelIsReady(s, m, -1, &r));
  return r;
}

static size_t count_lines(const char *text, const char *line) {
  size_t n = 0, len = strlen(line);
  for (const char *p = text; (p = strstr(p, line)); p += len)
    if ((p == text || p[-1] == '\n') && (p[len] == '\n' || p[len] == '\0')) n++;
  return n;
}

static void expect_load_error(TRITONSERVER_Server *s, const char *model, const char *part) {
  TRITONSERVER_Error *e = TRITONSERVER_ServerLoadModel(s, model);
  cr_assert_not_null(e, "loading '%s' should fail", model);
  cr_expect(strstr(TRITONSERVER_ErrorMessage(e), part), "'%s' not in: %s", part, TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
  cr_expect(!ready(s, model));
}

#define ZERO_SAMPLE(batch, count)                                                                                      \
  "model_warmup [ { name: \"zeros\" batch_size: " #batch " count: " #count                                             \
  " inputs { key: \"INPUT0\" value { data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } } } ]\n"

Test(warmup, every_instance_runs_every_sample_before_the_model_is_ready) {
  write_model("rec", "recorder",
              "max_batch_size: 8\ninstance_group [ { count: 2 kind: KIND_CPU } ]\n"
              "model_warmup [ { name: \"zeros\" batch_size: 2 count: 3 inputs { key: \"INPUT0\" value {"
              " data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } } },"
              " { name: \"noise\" batch_size: 1 inputs { key: \"INPUT0\" value {"
              " data_type: TYPE_FP32 dims: [ 4 ] random_data: true } } },"
              " { name: \"skipped\" batch_size: 0 inputs { key: \"INPUT0\" value {"
              " data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } } } ]\n");
  write_model("ident", "identity", "max_batch_size: 8\n" ZERO_SAMPLE(2, 3));
  TRITONSERVER_Server *s = explicit_server();
  H_OK(TRITONSERVER_ServerLoadModel(s, "rec"));
  cr_assert(ready(s, "rec"));
  H_OK(TRITONSERVER_ServerLoadModel(s, "ident"));
  /* identity reports batch statistics: none of the warmup's may count. */
  cr_expect_eq(h_stat_count(s, "ident", "execution_count"), 0);
  cr_expect_eq(h_stat_count(s, "ident", "success"), 0);
  char *rec = h_read(g_record);
  /* count 3 of a batch of 2, then one of 1 (count 0 runs once); nothing
   * for batch_size 0. */
  cr_expect_eq(count_lines(rec, "ModelInstanceExecute rec_0_0 2"), 3, "%s", rec);
  cr_expect_eq(count_lines(rec, "ModelInstanceExecute rec_0_1 2"), 3, "%s", rec);
  cr_expect_eq(count_lines(rec, "ModelInstanceExecute rec_0_0 1"), 1, "%s", rec);
  cr_expect_eq(count_lines(rec, "ModelInstanceExecute rec_0_1 1"), 1, "%s", rec);
  free(rec);
  cr_expect_eq(h_stat_count(s, "rec", "execution_count"), 0, "warmup runs are not counted");
  cr_expect_eq(h_stat_count(s, "rec", "inference_count"), 0);
  cr_expect_eq(h_stat_count(s, "rec", "success"), 0);
  cr_expect_eq(h_stat_count(s, "rec", "fail"), 0);
  H_OK(TRITONSERVER_ServerDelete(s));
}

Test(warmup, passive_instances_are_not_warmed_up) {
  write_model("rec", "recorder",
              "max_batch_size: 8\ninstance_group [ { count: 1 kind: KIND_CPU passive: true } ]\n" ZERO_SAMPLE(1, 1));
  TRITONSERVER_Server *s = explicit_server();
  H_OK(TRITONSERVER_ServerLoadModel(s, "rec"));
  char *rec = h_read(g_record);
  cr_expect_null(strstr(rec, "ModelInstanceExecute"), "%s", rec);
  free(rec);
  H_OK(TRITONSERVER_ServerDelete(s));
}

Test(warmup, a_backend_error_fails_the_load_naming_the_sample) {
  write_model(
      "bad_response", "failing",
      "max_batch_size: 4\nparameters { key: \"fail_at\" value { string_value: \"execute_response\" } }\n" ZERO_SAMPLE(
          2, 1));
  write_model(
      "bad_execute", "failing",
      "max_batch_size: 4\nparameters { key: \"fail_at\" value { string_value: \"execute\" } }\n" ZERO_SAMPLE(1, 1));
  TRITONSERVER_Server *s = explicit_server();
  expect_load_error(s, "bad_response", "failed to run warmup sample 'zeros': failing backend: failed in");
  expect_load_error(s, "bad_execute", "failed to run warmup sample 'zeros': failing backend: failed in");
  H_OK(TRITONSERVER_ServerDelete(s));
}

Test(warmup, bad_sample_settings_fail_the_load_with_the_field_named) {
  write_model("vardim", "identity",
              "max_batch_size: 4\nmodel_warmup [ { name: \"v\" batch_size: 1 inputs { key: \"INPUT0\" value {"
              " data_type: TYPE_FP32 dims: [ -1 ] zero_data: true } } } ]\n");
  write_model("nokind", "identity",
              "max_batch_size: 4\nmodel_warmup [ { name: \"k\" batch_size: 1 inputs { key: \"INPUT0\" value {"
              " data_type: TYPE_FP32 dims: [ 4 ] } } } ]\n");
  write_model("toobig", "identity", "max_batch_size: 4\n" ZERO_SAMPLE(5, 1));
  write_model("nobatch", "identity", "max_batch_size: 0\n" ZERO_SAMPLE(2, 1));
  write_model("wrongtype", "identity",
              "max_batch_size: 4\nmodel_warmup [ { name: \"t\" batch_size: 1 inputs { key: \"INPUT0\" value {"
              " data_type: TYPE_INT32 dims: [ 4 ] zero_data: true } } } ]\n");
  write_model("missing_input", "identity", "max_batch_size: 4\nmodel_warmup [ { name: \"m\" batch_size: 1 } ]\n");
  write_model("huge", "identity",
              "max_batch_size: 4\nmodel_warmup [ { name: \"h\" batch_size: 1 inputs { key: \"INPUT0\" value {"
              " data_type: TYPE_FP32 dims: [ 65536, 65536 ] zero_data: true } } } ]\n");
  TRITONSERVER_Server *s = explicit_server();
  expect_load_error(s, "vardim",
                    "warmup setting expects all variable-size dimensions are specified for input 'INPUT0' "
                    "(model 'vardim', warmup sample 'v')");
  expect_load_error(s, "nokind",
                    "warmup setting expects input 'INPUT0' to have input_data_type set (model 'nokind', "
                    "warmup sample 'k')");
  /* Where the sample is in config.pbtxt follows (line 6: after name,
   * backend, input, output and max_batch_size). */
  expect_load_error(s, "vardim", "vardim/config.pbtxt:6:");
  expect_load_error(s, "vardim", ": field 'model_warmup[0]')");
  expect_load_error(s, "toobig", "model_warmup[0].batch_size 5 is more than max_batch_size 4");
  expect_load_error(s, "toobig", "toobig/config.pbtxt:6:");
  expect_load_error(s, "nobatch", "model_warmup[0].batch_size must be 1 for a model that does not batch");
  expect_load_error(s, "wrongtype", "failed to run warmup sample 't':");
  expect_load_error(s, "missing_input", "failed to run warmup sample 'm':");
  expect_load_error(s, "huge",
                    "input 'INPUT0' is larger than warmup data may be (1 GiB) (model 'huge', warmup sample 'h')");
  H_OK(TRITONSERVER_ServerDelete(s));
}

#define FILE_SAMPLE(type, dims, file)                                                                                  \
  "model_warmup [ { name: \"f\" batch_size: 1 inputs { key: \"INPUT0\" value { data_type: " type " dims: [ " dims      \
  " ] input_data_file: \"" file "\" } } } ]\n"

Test(warmup, files_come_from_the_warmup_folder_and_are_checked) {
  write_model("ok", "identity", "max_batch_size: 4\n" FILE_SAMPLE("TYPE_FP32", "4", "in.bin"));
  h_write(g_repo, "ok/warmup/in.bin", "0123456789abcdefXX"); /* 18 bytes; 16 are used */
  write_model("short", "identity", "max_batch_size: 4\n" FILE_SAMPLE("TYPE_FP32", "4", "in.bin"));
  h_write(g_repo, "short/warmup/in.bin", "0123456789");
  write_model("missing", "identity", "max_batch_size: 4\n" FILE_SAMPLE("TYPE_FP32", "4", "none.bin"));
  write_model("escape", "identity", "max_batch_size: 4\n" FILE_SAMPLE("TYPE_FP32", "4", "../config.pbtxt"));
  /* A link leading out of the model folder is refused too (issue 53). */
  write_model("linked", "identity", "max_batch_size: 4\n" FILE_SAMPLE("TYPE_FP32", "4", "in.bin"));
  h_write(g_repo, "secret.bin", "0123456789abcdefXX");
  char at[4096], to[4096];
  snprintf(at, sizeof at, "%s/linked/warmup", g_repo);
  h_mkdirs(at, 1);
  snprintf(at, sizeof at, "%s/linked/warmup/in.bin", g_repo);
  snprintf(to, sizeof to, "%s/secret.bin", g_repo);
  cr_assert_eq(symlink(to, at), 0);
  TRITONSERVER_Server *s = explicit_server();
  H_OK(TRITONSERVER_ServerLoadModel(s, "ok"));
  char want[4096];
  snprintf(want, sizeof want,
           "warmup setting expects 16 bytes, but the data provided from %s/short/warmup/in.bin only has 10 bytes",
           g_repo);
  expect_load_error(s, "short", want);
  snprintf(want, sizeof want, "cannot read '%s/missing/warmup/none.bin'", g_repo);
  expect_load_error(s, "missing", want);
  expect_load_error(s, "escape", "input_data_file '../config.pbtxt' must name a file inside the model's warmup folder");
  expect_load_error(s, "linked", "input_data_file 'in.bin' must name a file inside the model's warmup folder");
  H_OK(TRITONSERVER_ServerDelete(s));
}

/* BYTES read from a file are used as they are: framing that is not
 * length-prefixed strings fails the sample, so the file's bytes are what
 * reached the request. */
Test(warmup, bytes_inputs_take_the_whole_file) {
  static const char *IO_BYTES = "input [ { name: \"INPUT0\" data_type: TYPE_STRING dims: [ 2 ] } ]\n"
                                "output [ { name: \"OUTPUT0\" data_type: TYPE_STRING dims: [ 2 ] } ]\n";
  char cfg[4096];
  snprintf(cfg, sizeof cfg, "name: \"good\"\nbackend: \"identity\"\nmax_batch_size: 2\n%s%s", IO_BYTES,
           FILE_SAMPLE("TYPE_STRING", "2", "strings.bin"));
  h_model(g_repo, "good", cfg, "1");
  static const unsigned char two[] = {2, 0, 0, 0, 'h', 'i', 3, 0, 0, 0, 'y', 'o', 'u'};
  char path[4096];
  snprintf(path, sizeof path, "%s/good/warmup/strings.bin", g_repo);
  h_mkdirs(path, 0);
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f);
  fwrite(two, 1, sizeof two, f);
  fclose(f);
  snprintf(cfg, sizeof cfg, "name: \"garbled\"\nbackend: \"identity\"\nmax_batch_size: 2\n%s%s", IO_BYTES,
           FILE_SAMPLE("TYPE_STRING", "2", "strings.bin"));
  h_model(g_repo, "garbled", cfg, "1");
  h_write(g_repo, "garbled/warmup/strings.bin", "\x09\x00");
  snprintf(cfg, sizeof cfg,
           "name: \"zeros\"\nbackend: \"identity\"\nmax_batch_size: 2\n%s"
           "model_warmup [ { name: \"z\" batch_size: 2 inputs { key: \"INPUT0\" value { data_type: TYPE_STRING"
           " dims: [ 2 ] random_data: true } } } ]\n",
           IO_BYTES);
  h_model(g_repo, "zeros", cfg, "1");
  TRITONSERVER_Server *s = explicit_server();
  H_OK(TRITONSERVER_ServerLoadModel(s, "good"));
  H_OK(TRITONSERVER_ServerLoadModel(s, "zeros")); /* random BYTES are empty strings, as in Triton */
  expect_load_error(s, "garbled", "failed to run warmup sample 'f':");
  H_OK(TRITONSERVER_ServerDelete(s));
}

/* A decoupled model's warmup ends with its final response: n = 0 sends
 * only a flags-only final, n = 3 three responses before it. */
Test(warmup, decoupled_samples_wait_for_the_final_response) {
  static const char *SQUARE = "name: \"%s\"\nbackend: \"square\"\nmax_batch_size: 0\n"
                              "model_transaction_policy { decoupled: true }\n"
                              "input [ { name: \"IN\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
                              "output [ { name: \"OUT\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
                              "model_warmup [ { name: \"w\" batch_size: 1 count: 2 inputs { key: \"IN\" value {"
                              " data_type: TYPE_INT32 dims: [ 1 ] %s } } } ]\n";
  char cfg[4096];
  snprintf(cfg, sizeof cfg, SQUARE, "sq_zero", "zero_data: true");
  h_model(g_repo, "sq_zero", cfg, "1");
  snprintf(cfg, sizeof cfg, SQUARE, "sq_three", "input_data_file: \"n.bin\"");
  h_model(g_repo, "sq_three", cfg, "1");
  int32_t three = 3;
  char path[4096];
  snprintf(path, sizeof path, "%s/sq_three/warmup/n.bin", g_repo);
  h_mkdirs(path, 0);
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f);
  fwrite(&three, sizeof three, 1, f);
  fclose(f);
  TRITONSERVER_Server *s = explicit_server();
  H_OK(TRITONSERVER_ServerLoadModel(s, "sq_zero"));
  H_OK(TRITONSERVER_ServerLoadModel(s, "sq_three"));
  cr_expect(ready(s, "sq_zero") && ready(s, "sq_three"));
  H_OK(TRITONSERVER_ServerDelete(s));
}

/* A sequence model's sample may name the control inputs: they reach the
 * backend without the request checks (a model input named START does not
 * exist), as Triton passes them. */
Test(warmup, sequence_samples_may_name_control_inputs) {
  h_model(g_repo, "acc",
          "name: \"acc\"\nbackend: \"accumulate\"\nmax_batch_size: 2\n"
          "input [ { name: \"INPUT\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
          "output [ { name: \"OUTPUT\" data_type: TYPE_INT32 dims: [ 1 ] },\n"
          "         { name: \"CONTROLS\" data_type: TYPE_FP32 dims: [ 5 ] } ]\n"
          "sequence_batching { control_input [\n"
          "  { name: \"START\" control [ { kind: CONTROL_SEQUENCE_START fp32_false_true: [ 0, 1 ] } ] },\n"
          "  { name: \"READY\" control [ { kind: CONTROL_SEQUENCE_READY fp32_false_true: [ 0, 1 ] } ] } ] }\n"
          "model_warmup [ { name: \"seq\" batch_size: 2 inputs [\n"
          "  { key: \"INPUT\" value { data_type: TYPE_INT32 dims: [ 1 ] zero_data: true } },\n"
          "  { key: \"START\" value { data_type: TYPE_FP32 dims: [ 1 ] zero_data: true } },\n"
          "  { key: \"READY\" value { data_type: TYPE_FP32 dims: [ 1 ] zero_data: true } } ] } ]\n",
          "1");
  TRITONSERVER_Server *s = explicit_server();
  H_OK(TRITONSERVER_ServerLoadModel(s, "acc"));
  cr_expect(ready(s, "acc"));
  H_OK(TRITONSERVER_ServerDelete(s));
}
