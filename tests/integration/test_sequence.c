/* Sequence batcher: correlation ids and START/END, implicit state carried
 * across requests and reset on START, control inputs as the backend sees
 * them, errors for sequences that were never started or carry no id, idle
 * sequences freed, batching of several sequences, unload with open
 * sequences. Driven with the accumulate test backend (a running sum per
 * sequence). */
#include <inttypes.h>
#include <jansson.h>

#include "harness.h"

#define START TRITONSERVER_REQUEST_FLAG_SEQUENCE_START
#define END TRITONSERVER_REQUEST_FLAG_SEQUENCE_END

/* An accumulate model with implicit state INPUT_STATE/OUTPUT_STATE. */
static void state_model(const char *repo, const char *name, int max_batch, const char *extra) {
  char cfg[2048];
  snprintf(cfg, sizeof cfg,
           "name: \"%s\"\nbackend: \"accumulate\"\nmax_batch_size: %d\n"
           "input [ { name: \"INPUT\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
           "output [ { name: \"OUTPUT\" data_type: TYPE_INT32 dims: [ 1 ] },\n"
           "         { name: \"CONTROLS\" data_type: TYPE_FP32 dims: [ 5 ] } ]\n"
           "instance_group [ { kind: KIND_CPU count: 1 } ]\n"
           "sequence_batching {\n"
           "  state [ { input_name: \"INPUT_STATE\" output_name: \"OUTPUT_STATE\"\n"
           "            data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
           "  %s\n}\n",
           name, max_batch, extra ? extra : "");
  h_model(repo, name, cfg, "1");
}

/* An accumulate model without state, with the four control inputs. */
static void control_model(const char *repo, const char *name, const char *corrid_type) {
  char cfg[2048];
  snprintf(cfg, sizeof cfg,
           "name: \"%s\"\nbackend: \"accumulate\"\nmax_batch_size: 2\n"
           "input [ { name: \"INPUT\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
           "output [ { name: \"OUTPUT\" data_type: TYPE_INT32 dims: [ 1 ] },\n"
           "         { name: \"CONTROLS\" data_type: TYPE_FP32 dims: [ 5 ] } ]\n"
           "sequence_batching {\n"
           "  control_input [\n"
           "    { name: \"START\" control [ { kind: CONTROL_SEQUENCE_START fp32_false_true: [ 0, 1.5 ] } ] },\n"
           "    { name: \"END\" control [ { kind: CONTROL_SEQUENCE_END int32_false_true: [ 0, 7 ] } ] },\n"
           "    { name: \"READY\" control [ { kind: CONTROL_SEQUENCE_READY bool_false_true: [ false, true ] } ] },\n"
           "    { name: \"CORRID\" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: %s } ] }\n"
           "  ]\n}\n",
           name, corrid_type);
  h_model(repo, name, cfg, "1");
}

static TRITONSERVER_Server *server_on(char *repo) {
  return h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE));
}

static void server_done(TRITONSERVER_Server *s, char *repo) {
  H_OK(TRITONSERVER_ServerDelete(s));
  h_rmtree(repo);
  free(repo);
}

/* A request of one INT32 value for sequence `id` (or `sid` when not NULL). */
static TRITONSERVER_InferenceRequest *seq_request(TRITONSERVER_Server *s, const char *model, uint64_t id,
                                                  const char *sid, uint32_t flags, const int32_t *value) {
  TRITONSERVER_InferenceRequest *r = h_request(s, model);
  int64_t shape[2] = {1, 1};
  h_add_input(r, "INPUT", TRITONSERVER_TYPE_INT32, shape, 2, value, sizeof *value);
  if (sid)
    H_OK(TRITONSERVER_InferenceRequestSetCorrelationIdString(r, sid));
  else if (id)
    H_OK(TRITONSERVER_InferenceRequestSetCorrelationId(r, id));
  H_OK(TRITONSERVER_InferenceRequestSetFlags(r, flags));
  return r;
}

/* Copies output `name` of the first response of `c` into `out` (at most
 * `size` bytes); fails the test when the response is an error. */
static void read_output(h_call *c, const char *name, void *out, size_t size) {
  char *err = h_response_error(c, 0);
  cr_assert_null(err, "response error: %s", err ? err : "");
  h_output o;
  cr_assert(h_find_output(c->responses[0], name, &o), "no output %s", name);
  cr_assert_geq(o.size, size, "output %s has %zu bytes", name, o.size);
  memcpy(out, o.base, size);
}

/* Runs one request and returns OUTPUT; `controls` (5 floats) when wanted. */
static int32_t step(TRITONSERVER_Server *s, const char *model, uint64_t id, const char *sid, uint32_t flags,
                    int32_t value, float *controls) {
  TRITONSERVER_InferenceRequest *r = seq_request(s, model, id, sid, flags, &value);
  h_call *c = h_infer(s, r);
  int32_t sum = 0;
  read_output(c, "OUTPUT", &sum, sizeof sum);
  if (controls) read_output(c, "CONTROLS", controls, 5 * sizeof(float));
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  return sum;
}

/* InferAsync must refuse the request; returns the error message (caller
 * frees) after checking the code. */
static char *refused(TRITONSERVER_Server *s, const char *model, uint64_t id, const char *sid, uint32_t flags,
                     TRITONSERVER_Error_Code code) {
  int32_t v = 1;
  TRITONSERVER_InferenceRequest *r = seq_request(s, model, id, sid, flags, &v);
  h_call *c = h_call_new();
  h_bind(r, c);
  TRITONSERVER_Error *e = TRITONSERVER_ServerInferAsync(s, r, NULL);
  cr_assert_not_null(e, "request was accepted");
  cr_expect_eq(TRITONSERVER_ErrorCode(e), code, "code %s: %s", TRITONSERVER_ErrorCodeString(e),
               TRITONSERVER_ErrorMessage(e));
  char *msg = strdup(TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
  cr_expect_eq(c->n, 0, "no callback may fire for a refused request");
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  return msg;
}

Test(sequence, interleaved_sequences_keep_separate_sums, .timeout = 60) {
  char *repo = h_tmpdir();
  state_model(repo, "acc", 4, NULL);
  TRITONSERVER_Server *s = server_on(repo);
  cr_expect_eq(step(s, "acc", 1, NULL, START, 1, NULL), 1);
  cr_expect_eq(step(s, "acc", 2, NULL, START, 10, NULL), 10);
  cr_expect_eq(step(s, "acc", 1, NULL, 0, 2, NULL), 3);
  cr_expect_eq(step(s, "acc", 2, NULL, 0, 20, NULL), 30);
  cr_expect_eq(step(s, "acc", 1, NULL, END, 3, NULL), 6);
  cr_expect_eq(step(s, "acc", 2, NULL, END, 30, NULL), 60);
  server_done(s, repo);
}

Test(sequence, implicit_state_resets_on_start, .timeout = 60) {
  char *repo = h_tmpdir();
  state_model(repo, "acc", 0, NULL); /* no batching: state shape [1] */
  TRITONSERVER_Server *s = server_on(repo);
  /* Non-batching models take requests without the batch dimension. */
  int32_t v = 4;
  TRITONSERVER_InferenceRequest *r = h_request(s, "acc");
  int64_t shape[1] = {1};
  h_add_input(r, "INPUT", TRITONSERVER_TYPE_INT32, shape, 1, &v, sizeof v);
  H_OK(TRITONSERVER_InferenceRequestSetCorrelationId(r, 5));
  const uint32_t flags[4] = {START, 0, START, END};
  const int32_t values[4] = {4, 5, 1, 2}, want[4] = {4, 9, 1, 3};
  for (int i = 0; i < 4; i++) {
    v = values[i];
    H_OK(TRITONSERVER_InferenceRequestSetFlags(r, flags[i]));
    h_call *c = h_infer(s, r); /* the same request object, reused */
    int32_t sum = 0;
    read_output(c, "OUTPUT", &sum, sizeof sum);
    cr_expect_eq(sum, want[i], "step %d: got %d, want %d", i, sum, want[i]);
    h_call_free(c);
  }
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  /* After END the sequence is gone: a new one starts from zero. */
  char *msg = refused(s, "acc", 5, NULL, 0, TRITONSERVER_ERROR_INVALID_ARG);
  free(msg);
  server_done(s, repo);
}

Test(sequence, control_inputs_seen_by_backend, .timeout = 60) {
  char *repo = h_tmpdir();
  control_model(repo, "ctl", "TYPE_UINT64");
  TRITONSERVER_Server *s = server_on(repo);
  float c[5];
  cr_expect_eq(step(s, "ctl", 42, NULL, START, 5, c), 5);
  cr_expect(c[0] == 1.5f && c[1] == 0 && c[2] == 1 && c[3] == 42, "start: %g %g %g %g", c[0], c[1], c[2], c[3]);
  cr_expect_eq(step(s, "ctl", 43, NULL, START, 100, c), 100);
  cr_expect_eq(step(s, "ctl", 42, NULL, 0, 6, c), 11);
  cr_expect(c[0] == 0 && c[1] == 0 && c[2] == 1 && c[3] == 42, "middle: %g %g %g %g", c[0], c[1], c[2], c[3]);
  cr_expect_eq(step(s, "ctl", 42, NULL, END, 7, c), 18);
  cr_expect(c[0] == 0 && c[1] == 7 && c[2] == 1 && c[3] == 42, "end: %g %g %g %g", c[0], c[1], c[2], c[3]);
  cr_expect_eq(step(s, "ctl", 43, NULL, START | END, 1, c), 1);
  cr_expect(c[0] == 1.5f && c[1] == 7 && c[3] == 43, "start+end: %g %g %g %g", c[0], c[1], c[2], c[3]);
  server_done(s, repo);
}

Test(sequence, string_correlation_ids, .timeout = 60) {
  char *repo = h_tmpdir();
  state_model(repo, "acc", 2, NULL);
  control_model(repo, "ctl", "TYPE_STRING");
  TRITONSERVER_Server *s = server_on(repo);
  cr_expect_eq(step(s, "acc", 0, "alpha", START, 1, NULL), 1);
  cr_expect_eq(step(s, "acc", 0, "beta", START, 100, NULL), 100);
  cr_expect_eq(step(s, "acc", 0, "alpha", 0, 1, NULL), 2);
  cr_expect_eq(step(s, "acc", 0, "beta", END, 1, NULL), 101);
  cr_expect_eq(step(s, "acc", 0, "alpha", END, 1, NULL), 3);
  char *msg = refused(s, "acc", 0, "gamma", 0, TRITONSERVER_ERROR_INVALID_ARG);
  cr_expect(strstr(msg, "sequence gamma") && strstr(msg, "START flag"), "%s", msg);
  free(msg);
  /* A string CORRID control input carries the id as a BYTES element. */
  float c[5];
  step(s, "ctl", 0, "abcdef", START, 1, c);
  cr_expect_eq(c[3], 6.0f, "CORRID element length %g", c[3]);
  server_done(s, repo);
}

Test(sequence, unknown_sequence_without_start_is_refused, .timeout = 60) {
  char *repo = h_tmpdir();
  state_model(repo, "acc", 4, NULL);
  TRITONSERVER_Server *s = server_on(repo);
  char *msg = refused(s, "acc", 77, NULL, 0, TRITONSERVER_ERROR_INVALID_ARG);
  cr_expect_str_eq(msg, "inference request for sequence 77 to model 'acc' must specify the START flag on the first "
                        "request of the sequence");
  free(msg);
  msg = refused(s, "acc", 77, NULL, END, TRITONSERVER_ERROR_INVALID_ARG);
  free(msg);
  server_done(s, repo);
}

Test(sequence, missing_correlation_id_is_refused, .timeout = 60) {
  char *repo = h_tmpdir();
  state_model(repo, "acc", 4, NULL);
  TRITONSERVER_Server *s = server_on(repo);
  char *msg = refused(s, "acc", 0, NULL, START, TRITONSERVER_ERROR_INVALID_ARG);
  cr_expect_str_eq(msg, "inference request to model 'acc' must specify a non-zero or non-empty correlation ID");
  free(msg);
  msg = refused(s, "acc", 0, "", START, TRITONSERVER_ERROR_INVALID_ARG);
  free(msg);
  server_done(s, repo);
}

Test(sequence, idle_sequence_is_freed, .timeout = 60) {
  char *repo = h_tmpdir();
  state_model(repo, "acc", 1, "max_sequence_idle_microseconds: 200000");
  TRITONSERVER_Server *s = server_on(repo);
  cr_expect_eq(step(s, "acc", 9, NULL, START, 1, NULL), 1);
  cr_expect_eq(step(s, "acc", 9, NULL, 0, 1, NULL), 2); /* well within the idle time */
  usleep(500 * 1000);
  char *msg = refused(s, "acc", 9, NULL, 0, TRITONSERVER_ERROR_INVALID_ARG);
  cr_expect(strstr(msg, "START flag") != NULL, "%s", msg);
  free(msg);
  /* Its slot (the only one) is free again for a new sequence. */
  cr_expect_eq(step(s, "acc", 10, NULL, START, 3, NULL), 3);
  cr_expect_eq(step(s, "acc", 10, NULL, END, 3, NULL), 6);
  server_done(s, repo);
}

Test(sequence, backlog_waits_for_a_free_slot, .timeout = 60) {
  char *repo = h_tmpdir();
  state_model(repo, "acc", 1, NULL); /* one slot */
  TRITONSERVER_Server *s = server_on(repo);
  cr_expect_eq(step(s, "acc", 1, NULL, START, 1, NULL), 1);
  /* Sequence 2 has no slot until 1 ends: its request waits. */
  int32_t v = 50;
  TRITONSERVER_InferenceRequest *r = seq_request(s, "acc", 2, NULL, START, &v);
  h_call *c = h_call_new();
  h_bind(r, c);
  H_OK(TRITONSERVER_ServerInferAsync(s, r, NULL));
  cr_expect_not(h_wait(c, 300), "a backlogged sequence must not run while the slot is taken");
  cr_expect_eq(step(s, "acc", 1, NULL, END, 1, NULL), 2);
  cr_assert(h_wait(c, 10000));
  int32_t sum = 0;
  read_output(c, "OUTPUT", &sum, sizeof sum);
  cr_expect_eq(sum, 50);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  server_done(s, repo);
}

/* An accumulate model whose state uses one buffer for input and output,
 * with the backend checking it gets that buffer and skipping StateUpdate. */
static void same_buffer_model(const char *repo, const char *name, const char *dims, const char *state_extra) {
  char cfg[2048];
  snprintf(cfg, sizeof cfg,
           "name: \"%s\"\nbackend: \"accumulate\"\nmax_batch_size: 2\n"
           "input [ { name: \"INPUT\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
           "output [ { name: \"OUTPUT\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
           "instance_group [ { kind: KIND_CPU count: 1 } ]\n"
           "parameters { key: \"same_buffer\" value: { string_value: \"1\" } }\n"
           "sequence_batching {\n"
           "  state [ { input_name: \"INPUT_STATE\" output_name: \"OUTPUT_STATE\"\n"
           "            data_type: TYPE_INT32 dims: [ %s ] use_same_buffer_for_input_output: true %s } ]\n"
           "}\n",
           name, dims, state_extra);
  h_model(repo, name, cfg, "1");
}

Test(sequence, same_buffer_state_is_written_in_place, .timeout = 60) {
  char *repo = h_tmpdir();
  same_buffer_model(repo, "acc_same", "1", "");
  /* A variable dimension starts as 1, as in Triton: one zero to add to
   * (0 would give an empty state, and StateBuffer a buffer of its own). */
  same_buffer_model(repo, "acc_var", "-1", "");
  TRITONSERVER_Server *s = server_on(repo);
  cr_expect_eq(step(s, "acc_var", 1, NULL, START, 2, NULL), 2);
  cr_expect_eq(step(s, "acc_var", 1, NULL, END, 3, NULL), 5);
  /* Two sequences side by side: each writes its own buffer. */
  cr_expect_eq(step(s, "acc_same", 1, NULL, START, 5, NULL), 5);
  cr_expect_eq(step(s, "acc_same", 2, NULL, START, 100, NULL), 100);
  cr_expect_eq(step(s, "acc_same", 1, NULL, 0, 1, NULL), 6);
  cr_expect_eq(step(s, "acc_same", 2, NULL, 0, 1, NULL), 101);
  cr_expect_eq(step(s, "acc_same", 1, NULL, START, 7, NULL), 7); /* START: the initial value again */
  cr_expect_eq(step(s, "acc_same", 1, NULL, END, 1, NULL), 8);
  cr_expect_eq(step(s, "acc_same", 2, NULL, END, 1, NULL), 102);
  /* A new sequence starts from zero, not from what the last one wrote. */
  cr_expect_eq(step(s, "acc_same", 3, NULL, START | END, 4, NULL), 4);
  server_done(s, repo);
}

Test(sequence, growable_memory_is_refused_at_load, .timeout = 60) {
  char *repo = h_tmpdir();
  same_buffer_model(repo, "grow", "1", "use_growable_memory: true");
  h_model(repo, "grow_alone",
          "name: \"grow_alone\"\nbackend: \"accumulate\"\nmax_batch_size: 2\n"
          "input [ { name: \"INPUT\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
          "output [ { name: \"OUTPUT\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
          "sequence_batching { state [ { input_name: \"INPUT_STATE\" output_name: \"OUTPUT_STATE\"\n"
          "  data_type: TYPE_INT32 dims: [ 1 ] use_growable_memory: true } ] }\n",
          "1");
  TRITONSERVER_Server *s = h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_EXPLICIT));
  TRITONSERVER_Error *e = TRITONSERVER_ServerLoadModel(s, "grow");
  cr_assert_not_null(e);
  cr_expect(strstr(TRITONSERVER_ErrorMessage(e), "'use_growable_memory' can only work with KIND_GPU") != NULL, "%s",
            TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
  e = TRITONSERVER_ServerLoadModel(s, "grow_alone");
  cr_assert_not_null(e);
  cr_expect(strstr(TRITONSERVER_ErrorMessage(e), "In order to 'use_growable_memory', you must also enable") != NULL,
            "%s", TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
  server_done(s, repo);
}

/* Writes n bytes to dir/rel, creating folders. */
static void write_bytes(const char *dir, const char *rel, const void *data, size_t n) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, rel);
  h_mkdirs(path, 0);
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f, "cannot write %s", path);
  cr_assert_eq(fwrite(data, 1, n, f), n);
  fclose(f);
}

/* A BYTES state: accumulate keeps the sum as the length of the state's
 * one string. It starts as the empty string, or as the initial_state file
 * (one element, "abc"); a file that is not exactly the elements refuses
 * the load. */
Test(sequence, bytes_state_carries_strings, .timeout = 60) {
  char *repo = h_tmpdir();
  const char *cfg = "name: \"%s\"\nbackend: \"accumulate\"\nmax_batch_size: 2\n"
                    "input [ { name: \"INPUT\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
                    "output [ { name: \"OUTPUT\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
                    "sequence_batching { state [ { input_name: \"INPUT_STATE\" output_name: \"OUTPUT_STATE\"\n"
                    "  data_type: TYPE_STRING dims: [ 1 ] %s } ] }\n";
  char text[2048];
  snprintf(text, sizeof text, cfg, "acc_str", "");
  h_model(repo, "acc_str", text, "1");
  const char *from_file =
      "initial_state [ { name: \"init\" data_type: TYPE_STRING dims: [ 1 ] data_file: \"s.bin\" } ]";
  snprintf(text, sizeof text, cfg, "acc_str_file", from_file);
  h_model(repo, "acc_str_file", text, "1");
  snprintf(text, sizeof text, cfg, "acc_str_bad", from_file);
  h_model(repo, "acc_str_bad", text, "1");
  const unsigned char abc[7] = {3, 0, 0, 0, 'a', 'b', 'c'};
  write_bytes(repo, "acc_str_file/initial_state/s.bin", abc, sizeof abc);
  write_bytes(repo, "acc_str_bad/initial_state/s.bin", abc, sizeof abc - 1); /* the string is cut short */
  TRITONSERVER_Server *s = h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_EXPLICIT));
  H_OK(TRITONSERVER_ServerLoadModel(s, "acc_str"));
  H_OK(TRITONSERVER_ServerLoadModel(s, "acc_str_file"));
  cr_expect_eq(step(s, "acc_str", 1, NULL, START, 3, NULL), 3);
  cr_expect_eq(step(s, "acc_str", 2, NULL, START, 10, NULL), 10);
  cr_expect_eq(step(s, "acc_str", 1, NULL, 0, 4, NULL), 7);
  cr_expect_eq(step(s, "acc_str", 1, NULL, END, 1, NULL), 8);
  cr_expect_eq(step(s, "acc_str", 2, NULL, END, 1, NULL), 11);
  cr_expect_eq(step(s, "acc_str_file", 1, NULL, START, 2, NULL), 5);
  cr_expect_eq(step(s, "acc_str_file", 1, NULL, END, 1, NULL), 6);
  TRITONSERVER_Error *e = TRITONSERVER_ServerLoadModel(s, "acc_str_bad");
  cr_assert_not_null(e);
  cr_expect(strstr(TRITONSERVER_ErrorMessage(e), "must hold exactly 1 length-prefixed elements") != NULL, "%s",
            TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
  server_done(s, repo);
}

/* iterative_sequence with the reschedule backend: each request runs three
 * passes (released with RESCHEDULE twice); START is set on the first pass
 * only (the backend answers with an error otherwise); a request without a
 * correlation ID gets one; the final release ends the sequence, so the
 * only slot goes to the next sequence at once, not after the 60 s idle
 * time. */
/* A reschedule model (identity on FP32 [4], one slot) with `rest` of its
 * configuration. */
static void reschedule_model(const char *repo, const char *name, const char *rest) {
  char cfg[2048];
  snprintf(cfg, sizeof cfg,
           "name: \"%s\"\nbackend: \"reschedule\"\nmax_batch_size: 1\n"
           "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n"
           "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n%s",
           name, rest);
  h_model(repo, name, cfg, "1");
}

/* Triton's core 9f6c3ca, a4ed606, e813ef8: the core's own release hooks
 * on a request (here the iterative sequence's) run once per release and
 * are gone afterwards, so a request object reused after its final
 * release runs its three passes again and is released once each time,
 * never with a hook left from the round before. */
Test(sequence, iterative_request_reused_after_release, .timeout = 60) {
  char *repo = h_tmpdir();
  reschedule_model(repo, "iter",
                   "instance_group [ { kind: KIND_CPU count: 1 } ]\n"
                   "parameters [ { key: \"passes\" value: { string_value: \"3\" } } ]\n"
                   "sequence_batching { iterative_sequence: true max_sequence_idle_microseconds: 60000000 }\n");
  TRITONSERVER_Server *s = server_on(repo);
  static const float in[4] = {1, 2, 3, 4};
  int64_t shape[2] = {1, 4};
  TRITONSERVER_InferenceRequest *r = h_request(s, "iter");
  h_add_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, shape, 2, in, sizeof in);
  H_OK(TRITONSERVER_InferenceRequestSetCorrelationId(r, 77));
  for (int round = 0; round < 4; round++) {
    H_OK(TRITONSERVER_InferenceRequestSetFlags(r, START)); /* each round a sequence of its own */
    char id[8]; /* the backend counts passes per request id */
    snprintf(id, sizeof id, "r%d", round);
    H_OK(TRITONSERVER_InferenceRequestSetId(r, id));
    h_call *c = h_submit(s, r);
    cr_assert(h_wait(c, 10000), "round %d did not finish", round);
    cr_expect_eq(c->n, 1, "round %d: %zu responses", round, c->n);
    char *err = h_response_error(c, 0);
    cr_expect_null(err, "round %d: %s", round, err);
    free(err);
    cr_expect_eq(c->released, 1, "round %d: released %d times", round, c->released);
    h_call_free(c);
  }
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  uint64_t runs = h_stat_count(s, "iter", "execution_count");
  cr_expect_eq(runs, 12, "%llu executions", (unsigned long long)runs);
  server_done(s, repo);
}

Test(sequence, iterative_sequences_run_until_released, .timeout = 60) {
  char *repo = h_tmpdir();
  reschedule_model(repo, "iter",
                   "instance_group [ { kind: KIND_CPU count: 1 } ]\n"
                   "parameters [ { key: \"passes\" value: { string_value: \"3\" } },\n"
                   "             { key: \"check_start\" value: { string_value: \"1\" } } ]\n"
                   "sequence_batching { iterative_sequence: true max_sequence_idle_microseconds: 60000000\n"
                   "  control_input [ { name: \"START\" control [ { kind: CONTROL_SEQUENCE_START "
                   "int32_false_true: [ 0, 1 ] } ] } ] }\n");
  TRITONSERVER_Server *s = server_on(repo);
  static const float in[4] = {1, 2, 3, 4};
  int64_t shape[2] = {1, 4};
  const char *ids[3] = {"a", "b", "c"};
  TRITONSERVER_InferenceRequest *r[3];
  h_call *c[3];
  for (int i = 0; i < 3; i++) {
    r[i] = h_request(s, "iter");
    H_OK(TRITONSERVER_InferenceRequestSetId(r[i], ids[i]));
    if (i == 2) { /* a client's own sequence works as before */
      H_OK(TRITONSERVER_InferenceRequestSetCorrelationId(r[i], 77));
      H_OK(TRITONSERVER_InferenceRequestSetFlags(r[i], START));
    }
    h_add_input(r[i], "INPUT0", TRITONSERVER_TYPE_FP32, shape, 2, in, sizeof in);
    c[i] = h_submit(s, r[i]);
  }
  for (int i = 0; i < 3; i++) {
    cr_assert(h_wait(c[i], 10000), "request %s did not finish: its sequence waited for a slot", ids[i]);
    cr_expect_eq(c[i]->n, 1);
    char *err = h_response_error(c[i], 0);
    cr_expect_null(err, "%s: %s", ids[i], err);
    free(err);
    cr_expect_eq(c[i]->released, 1);
    h_call_free(c[i]);
    H_OK(TRITONSERVER_InferenceRequestDelete(r[i]));
  }
  cr_expect_eq(h_stat_count(s, "iter", "execution_count"), 9);
  server_done(s, repo);
}

/* Without iterative_sequence a correlation ID is still required. */
Test(sequence, iterative_needs_the_option, .timeout = 60) {
  char *repo = h_tmpdir();
  reschedule_model(repo, "plain", "sequence_batching { }\n");
  TRITONSERVER_Server *s = server_on(repo);
  TRITONSERVER_InferenceRequest *r = h_request(s, "plain");
  static const float in[4] = {1, 2, 3, 4};
  int64_t shape[2] = {1, 4};
  h_add_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, shape, 2, in, sizeof in);
  h_call *c = h_call_new();
  h_bind(r, c);
  TRITONSERVER_Error *e = TRITONSERVER_ServerInferAsync(s, r, NULL);
  cr_assert_not_null(e);
  cr_expect(strstr(TRITONSERVER_ErrorMessage(e), "correlation ID") != NULL, "%s", TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  server_done(s, repo);
}

Test(sequence, ready_sequences_share_an_execution, .timeout = 60) {
  char *repo = h_tmpdir();
  state_model(repo, "acc", 4, "");
  /* Execute sleeps, so requests queue behind the first one. */
  char path[4096];
  snprintf(path, sizeof path, "%s/acc/config.pbtxt", repo);
  char *cfg = h_read(path);
  char *more = NULL;
  cr_assert(asprintf(&more, "%sparameters { key: \"execute_delay_ms\" value: { string_value: \"300\" } }\n", cfg) > 0);
  h_write(repo, "acc/config.pbtxt", more);
  free(cfg);
  free(more);
  TRITONSERVER_Server *s = server_on(repo);
  enum { N = 4 };
  const uint64_t ids[N] = {1, 2, 3, 1};
  const uint32_t flags[N] = {START, START, START, 0};
  int32_t vals[N] = {1, 10, 100, 2};
  TRITONSERVER_InferenceRequest *r[N];
  h_call *c[N];
  for (int i = 0; i < N; i++) {
    r[i] = seq_request(s, "acc", ids[i], NULL, flags[i], &vals[i]);
    c[i] = h_call_new();
    h_bind(r[i], c[i]);
    H_OK(TRITONSERVER_ServerInferAsync(s, r[i], NULL));
    if (i == 0) /* the first one is executing now */
      cr_assert(h_pending_reaches(s, "acc", 0, 30000), "the first request never reached the instance");
  }
  const int32_t want[N] = {1, 10, 100, 3};
  float batch[N];
  for (int i = 0; i < N; i++) {
    cr_assert(h_wait(c[i], 10000));
    int32_t sum = 0;
    float ctl[5];
    read_output(c[i], "OUTPUT", &sum, sizeof sum);
    read_output(c[i], "CONTROLS", ctl, sizeof ctl);
    batch[i] = ctl[4];
    cr_expect_eq(sum, want[i], "request %d: %d", i, sum);
  }
  cr_expect_eq(batch[0], 1.0f);
  /* Sequences 2 and 3 and the second request of 1 ran together. */
  cr_expect(batch[1] == 3 && batch[2] == 3 && batch[3] == 3, "batches %g %g %g", batch[1], batch[2], batch[3]);
  for (int i = 0; i < N; i++) {
    h_call_free(c[i]);
    H_OK(TRITONSERVER_InferenceRequestDelete(r[i]));
  }
  server_done(s, repo);
}

Test(sequence, unload_with_open_sequences, .timeout = 60) {
  char *repo = h_tmpdir();
  state_model(repo, "acc", 2, NULL);
  TRITONSERVER_Server *s = h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_EXPLICIT));
  H_OK(TRITONSERVER_ServerLoadModel(s, "acc"));
  cr_expect_eq(step(s, "acc", 1, NULL, START, 1, NULL), 1);
  cr_expect_eq(step(s, "acc", 2, NULL, START, 2, NULL), 2);
  /* Sequence 3 is backlogged (both slots are taken) when the unload comes:
   * it is answered with an error, not left hanging. */
  int32_t v = 3;
  TRITONSERVER_InferenceRequest *r = seq_request(s, "acc", 3, NULL, START, &v);
  h_call *c = h_call_new();
  h_bind(r, c);
  H_OK(TRITONSERVER_ServerInferAsync(s, r, NULL));
  H_OK(TRITONSERVER_ServerUnloadModel(s, "acc"));
  cr_assert(h_wait(c, 10000));
  char *err = h_response_error(c, 0);
  cr_expect(err && strstr(err, "Unavailable: model is unloading"), "%s", err ? err : "(success)");
  free(err);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  /* Reloading starts from scratch: the old sequences are gone. */
  H_OK(TRITONSERVER_ServerLoadModel(s, "acc"));
  char *msg = refused(s, "acc", 1, NULL, 0, TRITONSERVER_ERROR_INVALID_ARG);
  free(msg);
  cr_expect_eq(step(s, "acc", 1, NULL, START, 4, NULL), 4);
  server_done(s, repo);
}

Test(sequence, initial_state_from_data_file, .timeout = 60) {
  char *repo = h_tmpdir();
  state_model(repo, "acc", 2, "");
  /* Replace the state with one whose initial value comes from a file. */
  char cfg[2048];
  snprintf(cfg, sizeof cfg,
           "name: \"acc\"\nbackend: \"accumulate\"\nmax_batch_size: 2\n"
           "input [ { name: \"INPUT\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
           "output [ { name: \"OUTPUT\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
           "sequence_batching {\n"
           "  state [ { input_name: \"INPUT_STATE\" output_name: \"OUTPUT_STATE\" data_type: TYPE_INT32 dims: [ 1 ]\n"
           "    initial_state { data_type: TYPE_INT32 dims: [ 1 ] name: \"init\" data_file: \"init.bin\" } } ]\n}\n");
  h_write(repo, "acc/config.pbtxt", cfg);
  h_write(repo, "acc/initial_state/init.bin", "\x01\x01\x01\x01"); /* 0x01010101 = 16843009 */
  TRITONSERVER_Server *s = server_on(repo);
  cr_expect_eq(step(s, "acc", 3, NULL, START, 1, NULL), 16843010);
  cr_expect_eq(step(s, "acc", 3, NULL, 0, 1, NULL), 16843011);
  cr_expect_eq(step(s, "acc", 3, NULL, START | END, 2, NULL), 16843011); /* START: back to the file's value */
  server_done(s, repo);
}

/* One step of a sequence on a model with the INDEX and NULLS outputs:
 * returns OUTPUT, and where the request sat in its execution, how many
 * requests the execution had and how many of them were null requests. */
static int32_t step_at(TRITONSERVER_Server *s, const char *model, uint64_t id, uint32_t flags, int32_t value,
                       int32_t *index, int32_t *nulls, float *batch) {
  TRITONSERVER_InferenceRequest *r = seq_request(s, model, id, NULL, flags, &value);
  h_call *c = h_infer(s, r);
  int32_t sum = 0;
  float ctl[5];
  read_output(c, "OUTPUT", &sum, sizeof sum);
  read_output(c, "INDEX", index, sizeof *index);
  read_output(c, "NULLS", nulls, sizeof *nulls);
  read_output(c, "CONTROLS", ctl, sizeof ctl);
  *batch = ctl[4];
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  return sum;
}

/* Runs sequences 1, 2 and 3 on `model` (slots 0, 1 and 2), one request at
 * a time: a request of slot k must run at index k, after k null requests
 * whose state updates reach no sequence (the sums stay right). Then checks
 * that null requests count in no statistic: as many successes as steps, no
 * failure (their outputs cannot be allocated, so the backend reports each
 * of them failed). */
static void check_slots(TRITONSERVER_Server *s, const char *model) {
  struct {
    uint64_t id;
    uint32_t flags;
    int32_t value, sum, index;
  } steps[] = {
      {1, START, 1, 1, 0}, {2, START, 10, 10, 1}, {3, START, 100, 100, 2}, {2, 0, 5, 15, 1},
      {1, 0, 2, 3, 0},     {3, END, 1, 101, 2},   {2, END, 1, 16, 1},      {1, 0, 3, 6, 0},
  };
  const size_t n = sizeof steps / sizeof steps[0];
  for (size_t i = 0; i < n; i++) {
    int32_t index = -1, nulls = -1;
    float batch = 0;
    int32_t sum = step_at(s, model, steps[i].id, steps[i].flags, steps[i].value, &index, &nulls, &batch);
    cr_expect_eq(sum, steps[i].sum, "%s step %zu: sum %d", model, i, sum);
    cr_expect_eq(index, steps[i].index, "%s step %zu: index %d", model, i, index);
    cr_expect_eq(nulls, steps[i].index, "%s step %zu: %d null requests", model, i, nulls);
    cr_expect_eq(batch, (float)steps[i].index + 1, "%s step %zu: %g requests in the execution", model, i, batch);
  }
  cr_expect_eq(h_stat_count(s, model, "success"), (json_int_t)n, "%s", model);
  cr_expect_eq(h_stat_count(s, model, "fail"), 0, "%s", model);
}

/* An accumulate model with state, the four controls (CORRID of
 * `corrid_type`) and the CONTROLS, INDEX and NULLS outputs, 4 slots. */
static void slots_model(const char *repo, const char *name, const char *corrid_type) {
  char cfg[2048];
  snprintf(cfg, sizeof cfg,
           "name: \"%s\"\nbackend: \"accumulate\"\nmax_batch_size: 4\n"
           "input [ { name: \"INPUT\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
           "output [ { name: \"OUTPUT\" data_type: TYPE_INT32 dims: [ 1 ] },\n"
           "         { name: \"CONTROLS\" data_type: TYPE_FP32 dims: [ 5 ] },\n"
           "         { name: \"INDEX\" data_type: TYPE_INT32 dims: [ 1 ] },\n"
           "         { name: \"NULLS\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
           "instance_group [ { kind: KIND_CPU count: 1 } ]\n"
           "sequence_batching {\n"
           "  control_input [\n"
           "    { name: \"START\" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },\n"
           "    { name: \"END\" control [ { kind: CONTROL_SEQUENCE_END int32_false_true: [ 0, 1 ] } ] },\n"
           "    { name: \"READY\" control [ { kind: CONTROL_SEQUENCE_READY bool_false_true: [ false, true ] } ] },\n"
           "    { name: \"CORRID\" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: %s } ] }\n"
           "  ]\n"
           "  state [ { input_name: \"INPUT_STATE\" output_name: \"OUTPUT_STATE\"\n"
           "            data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
           "}\n",
           name, corrid_type);
  h_model(repo, name, cfg, "1");
}

Test(sequence, direct_batches_keep_each_sequence_at_its_slot, .timeout = 60) {
  char *repo = h_tmpdir();
  slots_model(repo, "slots", "TYPE_UINT64");
  slots_model(repo, "slots_str", "TYPE_STRING"); /* a null's CORRID is then the empty string */
  TRITONSERVER_Server *s = server_on(repo);
  check_slots(s, "slots");
  check_slots(s, "slots_str");
  server_done(s, repo);
}

/* Sends sequence `id`'s request of `value` without waiting; the caller
 * waits on, frees and deletes what it gets back. */
static h_call *send_async(TRITONSERVER_Server *s, const char *model, uint64_t id, uint32_t flags, int32_t *value,
                          TRITONSERVER_InferenceRequest **req) {
  *req = seq_request(s, model, id, NULL, flags, value);
  return h_submit(s, *req);
}

/* An accumulate model on the Oldest strategy (`oldest` is the inside of
 * its braces), with INDEX and NULLS, Execute taking `delay_ms`, answering
 * an execution's requests last to first when `reverse`. */
static void oldest_model_ex(const char *repo, const char *name, int max_batch, int delay_ms, const char *oldest,
                            bool reverse) {
  char cfg[2048];
  snprintf(cfg, sizeof cfg,
           "name: \"%s\"\nbackend: \"accumulate\"\nmax_batch_size: %d\n"
           "input [ { name: \"INPUT\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
           "output [ { name: \"OUTPUT\" data_type: TYPE_INT32 dims: [ 1 ] },\n"
           "         { name: \"CONTROLS\" data_type: TYPE_FP32 dims: [ 5 ] },\n"
           "         { name: \"INDEX\" data_type: TYPE_INT32 dims: [ 1 ] },\n"
           "         { name: \"NULLS\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
           "instance_group [ { kind: KIND_CPU count: 1 } ]\n"
           "parameters { key: \"execute_delay_ms\" value: { string_value: \"%d\" } }\n"
           "parameters { key: \"respond_in_reverse\" value: { string_value: \"%d\" } }\n"
           "sequence_batching {\n"
           "  max_sequence_idle_microseconds: 60000000\n"
           "  oldest { %s }\n"
           "  control_input [\n"
           "    { name: \"READY\" control [ { kind: CONTROL_SEQUENCE_READY int32_false_true: [ 0, 1 ] } ] },\n"
           "    { name: \"CORRID\" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 } ] }\n"
           "  ]\n"
           "  state [ { input_name: \"INPUT_STATE\" output_name: \"OUTPUT_STATE\"\n"
           "            data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
           "}\n",
           name, max_batch, delay_ms, reverse, oldest);
  h_model(repo, name, cfg, "1");
}

static void oldest_model(const char *repo, const char *name, int max_batch, int delay_ms, const char *oldest) {
  oldest_model_ex(repo, name, max_batch, delay_ms, oldest, false);
}

/* Reads OUTPUT, INDEX, NULLS and the execution's size from a finished call
 * (the controls: READY must be true, no null request may appear). */
static int32_t call_result(h_call *c, int32_t *index, float *batch) {
  cr_assert(h_wait(c, 10000), "no answer");
  int32_t sum = 0, nulls = -1;
  float ctl[5];
  read_output(c, "OUTPUT", &sum, sizeof sum);
  read_output(c, "INDEX", index, sizeof *index);
  read_output(c, "NULLS", &nulls, sizeof nulls);
  read_output(c, "CONTROLS", ctl, sizeof ctl);
  cr_expect_eq(nulls, 0, "the Oldest strategy sends no null request");
  cr_expect_eq(ctl[2], 1.0f, "READY is true");
  *batch = ctl[4];
  return sum;
}

Test(sequence, oldest_strategy_batches_the_oldest_requests, .timeout = 60) {
  char *repo = h_tmpdir();
  /* 4 candidate sequences, 2 requests an execution. */
  /* Execute takes 600 ms, time enough to queue three requests behind one. */
  oldest_model(repo, "old", 2, 600, "max_candidate_sequences: 4");
  TRITONSERVER_Server *s = server_on(repo);
  int32_t index;
  float batch;
  /* Sequences 1, 2, 3 and 4 all hold a candidate slot at once (the Direct
   * strategy would have given only 2 slots here, the other two sequences
   * waiting for one to end). */
  int32_t v[8] = {1, 10, 100, 1000, 2, 20, 200, 3};
  TRITONSERVER_InferenceRequest *r[8];
  h_call *c[8];
  for (int i = 0; i < 4; i++) c[i] = send_async(s, "old", (uint64_t)i + 1, START, &v[i], &r[i]);
  const int32_t first[4] = {1, 10, 100, 1000};
  for (int i = 0; i < 4; i++) cr_expect_eq(call_result(c[i], &index, &batch), first[i], "sequence %d", i + 1);
  /* While sequence 4 runs, sequences 3, 2 and 1 queue one request each, in
   * that order: the next execution takes the two oldest (3, then 2), not
   * the two lowest slots; 1 runs after them. */
  int32_t four = 4000;
  TRITONSERVER_InferenceRequest *busy_r;
  h_call *busy = send_async(s, "old", 4, 0, &four, &busy_r);
  cr_assert(h_pending_reaches(s, "old", 0, 30000), "sequence 4's request never reached the instance");
  for (int i = 0; i < 3; i++) {
    c[4 + i] = send_async(s, "old", (uint64_t)(3 - i), 0, &v[6 - i], &r[4 + i]);
    usleep(20 * 1000);
  }
  cr_expect_eq(call_result(busy, &index, &batch), 5000);
  cr_expect_eq(call_result(c[4], &index, &batch), 300, "sequence 3");
  cr_expect(index == 0 && batch == 2, "sequence 3 ran at %d of %g", index, batch);
  cr_expect_eq(call_result(c[5], &index, &batch), 30, "sequence 2");
  cr_expect(index == 1 && batch == 2, "sequence 2 ran at %d of %g", index, batch);
  cr_expect_eq(call_result(c[6], &index, &batch), 3, "sequence 1");
  cr_expect(index == 0 && batch == 1, "sequence 1 ran at %d of %g", index, batch);
  for (int i = 0; i < 7; i++) {
    h_call_free(c[i]);
    H_OK(TRITONSERVER_InferenceRequestDelete(r[i]));
  }
  h_call_free(busy);
  H_OK(TRITONSERVER_InferenceRequestDelete(busy_r));
  server_done(s, repo);
}

/* The Oldest strategy picks the oldest heads however the slots hold them:
 * with the scheduler held until all 16 requests are queued, 8 sequences
 * (slots 0-7) queue START in slot order, then their second steps in
 * reverse slot order. Batches of 4 then run the STARTs of 1-4 and of 5-8,
 * then the second steps of 8, 7, 6, 5 and of 4, 3, 2, 1, each in that
 * order (INDEX), whatever order the slots are in. */
Test(sequence, oldest_strategy_orders_heads_across_slots, .timeout = 60) {
  setenv("TRITONSERVER_DELAY_SCHEDULER", "16", 1);
  char *repo = h_tmpdir();
  oldest_model(repo, "heap", 4, 0, "max_candidate_sequences: 8");
  TRITONSERVER_Server *s = server_on(repo);
  unsetenv("TRITONSERVER_DELAY_SCHEDULER");
  int32_t one = 1, ten = 10;
  TRITONSERVER_InferenceRequest *r[16];
  h_call *c[16];
  for (int i = 0; i < 8; i++) c[i] = send_async(s, "heap", (uint64_t)i + 1, START, &one, &r[i]);
  for (int i = 0; i < 8; i++) c[8 + i] = send_async(s, "heap", (uint64_t)(8 - i), END, &ten, &r[8 + i]);
  for (int i = 0; i < 16; i++) {
    int32_t index = -1;
    float batch = 0;
    int32_t sum = call_result(c[i], &index, &batch);
    uint64_t seq = i < 8 ? (uint64_t)i + 1 : (uint64_t)(16 - i);
    cr_expect_eq(sum, i < 8 ? 1 : 11, "sequence %" PRIu64 " step %d", seq, i < 8 ? 1 : 2);
    cr_expect(index == i % 4 && batch == 4, "sequence %" PRIu64 " step %d ran at %d of %g, expected %d of 4", seq,
              i < 8 ? 1 : 2, index, batch, i % 4);
  }
  for (int i = 0; i < 16; i++) {
    h_call_free(c[i]);
    H_OK(TRITONSERVER_InferenceRequestDelete(r[i]));
  }
  server_done(s, repo);
}

/* The order final responses reached their clients in (any thread). */
static atomic_int g_nfinal;
static h_call *g_finals[8];

static void on_response_noting_order(TRITONSERVER_InferenceResponse *r, const uint32_t flags, void *userp) {
  if (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) {
    int i = atomic_fetch_add(&g_nfinal, 1);
    if (i < 8) g_finals[i] = userp;
  }
  h_on_response(r, flags, userp);
}

/* Runs sequences 1 and 2 in one execution of a backend that answers last
 * to first; returns which of the two reached its client first (1 or 2). */
static int first_answered(bool preserve) {
  char *repo = h_tmpdir();
  oldest_model_ex(repo, "ord", 2, 300,
                  preserve ? "max_candidate_sequences: 4 preserve_ordering: true" : "max_candidate_sequences: 4", true);
  TRITONSERVER_Server *s = server_on(repo);
  int32_t one = 1;
  TRITONSERVER_InferenceRequest *busy_r, *r[2];
  h_call *busy = send_async(s, "ord", 3, START, &one, &busy_r), *c[2];
  /* Sequence 3 holds the instance once it left the queue. */
  cr_assert(h_pending_reaches(s, "ord", 0, 30000), "sequence 3's request never reached the instance");
  atomic_store(&g_nfinal, 0);
  for (int i = 0; i < 2; i++) {
    r[i] = seq_request(s, "ord", (uint64_t)i + 1, NULL, START, &one);
    c[i] = h_call_new();
    H_OK(TRITONSERVER_InferenceRequestSetReleaseCallback(r[i], h_on_release, c[i]));
    H_OK(TRITONSERVER_InferenceRequestSetResponseCallback(r[i], h_allocator(), c[i], on_response_noting_order, c[i]));
    H_OK(TRITONSERVER_ServerInferAsync(s, r[i], NULL));
    usleep(20 * 1000); /* sequence 1's request is the older */
  }
  int32_t index;
  float batch;
  cr_expect_eq(call_result(busy, &index, &batch), 1);
  for (int i = 0; i < 2; i++) {
    cr_expect_eq(call_result(c[i], &index, &batch), 1);
    cr_expect(index == i && batch == 2, "sequence %d ran at %d of %g", i + 1, index, batch);
  }
  cr_assert_eq(atomic_load(&g_nfinal), 2);
  int first = g_finals[0] == c[0] ? 1 : 2;
  for (int i = 0; i < 2; i++) {
    h_call_free(c[i]);
    H_OK(TRITONSERVER_InferenceRequestDelete(r[i]));
  }
  h_call_free(busy);
  H_OK(TRITONSERVER_InferenceRequestDelete(busy_r));
  server_done(s, repo);
  return first;
}

/* preserve_ordering: an execution's responses reach the clients in the
 * order the batcher took the requests (oldest first), whatever order the
 * backend sends them in; without it, in the backend's order. */
Test(sequence, oldest_strategy_preserve_ordering, .timeout = 60) {
  cr_expect_eq(first_answered(true), 1, "with preserve_ordering the older request is answered first");
  cr_expect_eq(first_answered(false), 2, "without it the backend's order shows");
}

Test(sequence, oldest_strategy_sends_a_preferred_batch_before_the_delay, .timeout = 60) {
  char *repo = h_tmpdir();
  /* A 4 s queue delay: only reaching the preferred size sends a batch
   * that is neither full nor made of every candidate sequence sooner. */
  oldest_model(repo, "pref", 4, 100,
               "max_candidate_sequences: 4 preferred_batch_size: [ 2 ] "
               "max_queue_delay_microseconds: 4000000");
  TRITONSERVER_Server *s = server_on(repo);
  int32_t v[6] = {1, 10, 100, 2, 20, 0};
  TRITONSERVER_InferenceRequest *r[6];
  h_call *c[6];
  /* Three sequences start (however they group, a lone one waits out the
   * delay at worst). */
  for (int i = 0; i < 3; i++) c[i] = send_async(s, "pref", (uint64_t)i + 1, START, &v[i], &r[i]);
  int32_t index;
  float batch;
  for (int i = 0; i < 3; i++) cr_expect_eq(call_result(c[i], &index, &batch), v[i]);
  /* Two of the three send again: 2 is a preferred size, so they run now. */
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  c[3] = send_async(s, "pref", 1, 0, &v[3], &r[3]);
  c[4] = send_async(s, "pref", 2, 0, &v[4], &r[4]);
  cr_expect_eq(call_result(c[3], &index, &batch), 3);
  cr_expect_eq(batch, 2.0f, "the two ran together");
  cr_expect_eq(call_result(c[4], &index, &batch), 30);
  double secs = h_seconds_since(&t0);
  cr_expect_lt(secs, 2.5, "the preferred batch waited out the queue delay (%.1f s)", secs);
  for (int i = 0; i < 5; i++) {
    h_call_free(c[i]);
    H_OK(TRITONSERVER_InferenceRequestDelete(r[i]));
  }
  server_done(s, repo);
}

Test(sequence, minimum_slot_utilization_ends_the_delay_early, .timeout = 60) {
  char *repo = h_tmpdir();
  /* 4 slots, a 4 s delay, half the slots enough: 2 ready requests go at
   * once though a third sequence is open. */
  state_model(repo, "util", 4,
              "max_sequence_idle_microseconds: 60000000\n"
              "  direct { max_queue_delay_microseconds: 4000000 minimum_slot_utilization: 0.5 }");
  TRITONSERVER_Server *s = server_on(repo);
  int32_t v[5] = {1, 10, 100, 2, 20};
  TRITONSERVER_InferenceRequest *r[5];
  h_call *c[5];
  /* Three sequences start together (a lone one waits out the delay at worst). */
  for (int i = 0; i < 3; i++) c[i] = send_async(s, "util", (uint64_t)i + 1, START, &v[i], &r[i]);
  for (int i = 0; i < 3; i++) cr_assert(h_wait(c[i], 10000));
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 3; i < 5; i++) c[i] = send_async(s, "util", (uint64_t)i - 2, 0, &v[i], &r[i]);
  const int32_t want[2] = {3, 30};
  for (int i = 3; i < 5; i++) {
    int32_t sum = 0;
    cr_assert(h_wait(c[i], 10000));
    read_output(c[i], "OUTPUT", &sum, sizeof sum);
    cr_expect_eq(sum, want[i - 3]);
  }
  double secs = h_seconds_since(&t0);
  cr_expect_lt(secs, 2.5, "two of four slots ready still waited out the delay (%.1f s)", secs);
  for (int i = 0; i < 5; i++) {
    h_call_free(c[i]);
    H_OK(TRITONSERVER_InferenceRequestDelete(r[i]));
  }
  server_done(s, repo);
}

/* Triton's Direct batcher (core r25.07, DirectSequenceBatch) waits for a
 * batch only with a minimum_slot_utilization, and then until that share of
 * the slots is ready or the delay passed: a lone ready sequence does not
 * end the wait. Its QA (L0_metrics, queue size) sends 4 sequences' starts
 * one after the other and expects them in one execution. */
Test(sequence, direct_waits_until_the_utilization_is_met, .timeout = 60) {
  char *repo = h_tmpdir();
  state_model(repo, "full", 4,
              "max_sequence_idle_microseconds: 60000000\n"
              "  direct { max_queue_delay_microseconds: 3000000 minimum_slot_utilization: 1.0 }");
  TRITONSERVER_Server *s = server_on(repo);
  int32_t v[4] = {1, 2, 3, 4};
  TRITONSERVER_InferenceRequest *r[4];
  h_call *c[4];
  for (int i = 0; i < 4; i++) c[i] = send_async(s, "full", (uint64_t)i + 1, START, &v[i], &r[i]);
  for (int i = 0; i < 4; i++) {
    cr_assert(h_wait(c[i], 10000));
    float ctl[5];
    read_output(c[i], "CONTROLS", ctl, sizeof ctl);
    cr_expect_eq(ctl[4], 4.0f, "request %d ran in a batch of %g", i, ctl[4]);
    h_call_free(c[i]);
    H_OK(TRITONSERVER_InferenceRequestDelete(r[i]));
  }
  server_done(s, repo);
}

/* Without minimum_slot_utilization Triton's Direct batcher does not wait
 * at all, whatever max_queue_delay_microseconds says. */
Test(sequence, direct_without_utilization_does_not_wait, .timeout = 60) {
  char *repo = h_tmpdir();
  state_model(repo, "nowait", 4,
              "max_sequence_idle_microseconds: 60000000\n"
              "  direct { max_queue_delay_microseconds: 4000000 }");
  TRITONSERVER_Server *s = server_on(repo);
  int32_t v[3] = {1, 10, 2};
  TRITONSERVER_InferenceRequest *r[3];
  h_call *c[3];
  for (int i = 0; i < 2; i++) c[i] = send_async(s, "nowait", (uint64_t)i + 1, START, &v[i], &r[i]);
  for (int i = 0; i < 2; i++) cr_assert(h_wait(c[i], 10000));
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  c[2] = send_async(s, "nowait", 1, 0, &v[2], &r[2]); /* sequence 2 stays open, idle */
  cr_assert(h_wait(c[2], 10000));
  double secs = h_seconds_since(&t0);
  cr_expect_lt(secs, 2.0, "one of two open sequences ready waited out the delay (%.1f s)", secs);
  for (int i = 0; i < 3; i++) {
    h_call_free(c[i]);
    H_OK(TRITONSERVER_InferenceRequestDelete(r[i]));
  }
  server_done(s, repo);
}

/* Clients that send each sequence's next request as soon as the last one
 * is answered race with the instance thread coming back for its next
 * batch. The enqueue read the clock before taking the batcher lock, and
 * the instance thread, holding that lock, stamped the sequence's last use
 * with a later time: the unsigned "idle for" underflowed, the live
 * sequence was taken for idle and freed, and its next request was refused
 * with "must specify the START flag" (seen once in 19,000 sequences of a
 * soak on accumulate_onnx). Eight clients run 5-request sequences back to
 * back; every request must be answered with the right running sum. */
typedef struct seq_client {
  TRITONSERVER_Server *s;
  uint64_t first_id;
  int sequences;
  int wrong, refused;
  char first_error[256];
} seq_client;

static void *seq_client_main(void *arg) {
  seq_client *cl = arg;
  for (int q = 0; q < cl->sequences; q++) {
    uint64_t id = cl->first_id + (uint64_t)q;
    int32_t sum = 0;
    for (int k = 0; k < 5; k++) {
      uint32_t flags = (k == 0 ? TRITONSERVER_REQUEST_FLAG_SEQUENCE_START : 0) |
                       (k == 4 ? TRITONSERVER_REQUEST_FLAG_SEQUENCE_END : 0);
      int32_t v = k + 1;
      TRITONSERVER_InferenceRequest *r = seq_request(cl->s, "acc", id, NULL, flags, &v);
      h_call *c = h_call_new();
      h_bind(r, c);
      TRITONSERVER_Error *e = TRITONSERVER_ServerInferAsync(cl->s, r, NULL);
      char *err = NULL;
      if (e) {
        err = strdup(TRITONSERVER_ErrorMessage(e));
        TRITONSERVER_ErrorDelete(e);
      } else if (!h_wait(c, 60000)) {
        err = strdup("no answer within 60 s");
      } else {
        err = h_response_error(c, 0);
      }
      if (err) {
        if (!cl->refused++)
          snprintf(cl->first_error, sizeof cl->first_error, "sequence %" PRIu64 " request %d: %s", id, k, err);
        free(err);
      } else {
        h_output o;
        int32_t got = 0;
        if (h_find_output(c->responses[0], "OUTPUT", &o) && o.size >= sizeof got) memcpy(&got, o.base, sizeof got);
        sum += v;
        if (got != sum) cl->wrong++;
      }
      h_call_free(c);
      H_OK(TRITONSERVER_InferenceRequestDelete(r));
      if (err) break;
    }
  }
  return NULL;
}

Test(sequence, back_to_back_requests_keep_their_sequence, .timeout = 60) {
  char *repo = h_tmpdir();
  oldest_model(repo, "acc", 8, 0, "max_candidate_sequences: 8 max_queue_delay_microseconds: 1000");
  TRITONSERVER_Server *s = server_on(repo);
  seq_client cl[8];
  pthread_t t[8];
  for (int i = 0; i < 8; i++) {
    cl[i] = (seq_client){.s = s, .first_id = 1 + (uint64_t)i * 100000u, .sequences = 300};
    pthread_create(&t[i], NULL, seq_client_main, &cl[i]);
  }
  for (int i = 0; i < 8; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < 8; i++) {
    cr_expect_eq(cl[i].refused, 0, "client %d: %d requests failed; first: %s", i, cl[i].refused, cl[i].first_error);
    cr_expect_eq(cl[i].wrong, 0, "client %d: %d wrong sums", i, cl[i].wrong);
  }
  server_done(s, repo);
}
/* ------------------------------------------------ cancelling a sequence */

/* An accumulate model with one instance and one sequence slot whose
 * Execute takes `delay_ms`; `strategy` is "direct { }" or "oldest { }". */
static void one_slot_model(const char *repo, const char *name, int delay_ms, const char *strategy) {
  char cfg[2048];
  snprintf(cfg, sizeof cfg,
           "name: \"%s\"\nbackend: \"accumulate\"\nmax_batch_size: 1\n"
           "input [ { name: \"INPUT\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
           "output [ { name: \"OUTPUT\" data_type: TYPE_INT32 dims: [ 1 ] },\n"
           "         { name: \"CONTROLS\" data_type: TYPE_FP32 dims: [ 5 ] } ]\n"
           "instance_group [ { kind: KIND_CPU count: 1 } ]\n"
           "parameters { key: \"execute_delay_ms\" value: { string_value: \"%d\" } }\n"
           "sequence_batching {\n  max_sequence_idle_microseconds: 60000000\n  %s\n"
           "  state [ { input_name: \"INPUT_STATE\" output_name: \"OUTPUT_STATE\"\n"
           "            data_type: TYPE_INT32 dims: [ 1 ] } ]\n}\n",
           name, delay_ms, strategy);
  h_model(repo, name, cfg, "1");
}

/* The error code of the final response of a finished call, or SUCCESS. */
static const char *call_code(h_call *c) {
  cr_assert(h_wait(c, 10000), "no answer within 10 s");
  TRITONSERVER_Error *e = TRITONSERVER_InferenceResponseError(c->responses[c->n - 1]);
  if (!e) return "OK";
  const char *code = TRITONSERVER_ErrorCodeString(e);
  TRITONSERVER_ErrorDelete(e);
  return code;
}

/* Sequence 1's first request executes (slowly); its second and third wait
 * in the slot. Cancelling the second cancels the third too, and the
 * sequence is forgotten: a request without START is refused. */
static void cancel_cancels_the_rest(const char *strategy) {
  char *repo = h_tmpdir();
  one_slot_model(repo, "acc", 1500, strategy);
  TRITONSERVER_Server *s = server_on(repo);
  int32_t v[3] = {1, 2, 3};
  const uint32_t flags[3] = {START, 0, 0};
  TRITONSERVER_InferenceRequest *r[3];
  h_call *c[3];
  for (int i = 0; i < 3; i++) {
    r[i] = seq_request(s, "acc", 1, NULL, flags[i], &v[i]);
    c[i] = h_submit(s, r[i]);
    if (i == 0) /* the first one is executing now */
      cr_assert(h_pending_reaches(s, "acc", 0, 30000), "the first request never reached the instance");
  }
  H_OK(TRITONSERVER_InferenceRequestCancel(r[1]));
  cr_expect_str_eq(call_code(c[0]), "OK");
  cr_expect_str_eq(call_code(c[1]), "Cancelled");
  cr_expect_str_eq(call_code(c[2]), "Cancelled", "the later request of the cancelled sequence must be cancelled");
  char *msg = refused(s, "acc", 1, NULL, 0, TRITONSERVER_ERROR_INVALID_ARG);
  cr_expect(strstr(msg, "must specify the START flag"), "%s", msg);
  free(msg);
  /* The slot is free again: a new sequence runs. */
  cr_expect_eq(step(s, "acc", 2, NULL, START | END, 5, NULL), 5);
  for (int i = 0; i < 3; i++) {
    h_call_free(c[i]);
    H_OK(TRITONSERVER_InferenceRequestDelete(r[i]));
  }
  server_done(s, repo);
}

Test(sequence, cancel_direct_cancels_the_whole_sequence, .timeout = 60) { cancel_cancels_the_rest("direct { }"); }

Test(sequence, cancel_oldest_cancels_the_whole_sequence, .timeout = 60) { cancel_cancels_the_rest("oldest { }"); }

/* Sequence 2 waits in the backlog behind sequence 1; a cancelled request
 * anywhere in it cancels all of it when it would get the slot. */
Test(sequence, cancel_in_backlog_cancels_the_whole_sequence, .timeout = 60) {
  char *repo = h_tmpdir();
  one_slot_model(repo, "acc", 1000, "direct { }");
  TRITONSERVER_Server *s = server_on(repo);
  int32_t v = 1;
  TRITONSERVER_InferenceRequest *a1 = seq_request(s, "acc", 1, NULL, START, &v);
  h_call *ca1 = h_submit(s, a1);
  /* a1 executes; sequence 1 holds the only slot. */
  cr_assert(h_pending_reaches(s, "acc", 0, 30000), "a1 never reached the instance");
  TRITONSERVER_InferenceRequest *b1 = seq_request(s, "acc", 2, NULL, START, &v);
  TRITONSERVER_InferenceRequest *b2 = seq_request(s, "acc", 2, NULL, 0, &v);
  h_call *cb1 = h_submit(s, b1);
  h_call *cb2 = h_submit(s, b2);
  H_OK(TRITONSERVER_InferenceRequestCancel(b2));
  TRITONSERVER_InferenceRequest *a2 = seq_request(s, "acc", 1, NULL, END, &v);
  h_call *ca2 = h_submit(s, a2);
  cr_expect_str_eq(call_code(ca1), "OK");
  cr_expect_str_eq(call_code(ca2), "OK");
  cr_expect_str_eq(call_code(cb1), "Cancelled", "the backlog sequence's first request must be cancelled");
  cr_expect_str_eq(call_code(cb2), "Cancelled");
  char *msg = refused(s, "acc", 2, NULL, 0, TRITONSERVER_ERROR_INVALID_ARG);
  free(msg);
  h_call *cs[4] = {ca1, ca2, cb1, cb2};
  TRITONSERVER_InferenceRequest *rs[4] = {a1, a2, b1, b2};
  for (int i = 0; i < 4; i++) {
    h_call_free(cs[i]);
    H_OK(TRITONSERVER_InferenceRequestDelete(rs[i]));
  }
  server_done(s, repo);
}

/* Triton's reaper counts a sequence's idleness from its last request's
 * arrival (core r25.07, correlation_id_timestamps_ set at enqueue), so a
 * sequence whose execution outlasts max_sequence_idle_microseconds frees
 * its slot as soon as the execution ends, and the backlog moves on. As in
 * Triton's QA (L0_request_cancellation, backlog cancellation): the
 * cancelled backlog sequence is answered right after the execution, not
 * an idle period later. */
Test(sequence, idleness_counts_from_the_last_request, .timeout = 60) {
  char *repo = h_tmpdir();
  char cfg[2048];
  snprintf(cfg, sizeof cfg,
           "name: \"acc\"\nbackend: \"accumulate\"\nmax_batch_size: 1\n"
           "input [ { name: \"INPUT\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
           "output [ { name: \"OUTPUT\" data_type: TYPE_INT32 dims: [ 1 ] },\n"
           "         { name: \"CONTROLS\" data_type: TYPE_FP32 dims: [ 5 ] } ]\n"
           "instance_group [ { kind: KIND_CPU count: 1 } ]\n"
           "parameters { key: \"execute_delay_ms\" value: { string_value: \"1500\" } }\n"
           "sequence_batching {\n  max_sequence_idle_microseconds: 1000000\n  direct { }\n"
           "  state [ { input_name: \"INPUT_STATE\" output_name: \"OUTPUT_STATE\"\n"
           "            data_type: TYPE_INT32 dims: [ 1 ] } ]\n}\n");
  h_model(repo, "acc", cfg, "1");
  TRITONSERVER_Server *s = server_on(repo);
  int32_t v = 1;
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  TRITONSERVER_InferenceRequest *a1 = seq_request(s, "acc", 1, NULL, START, &v);
  h_call *ca1 = h_submit(s, a1);
  cr_assert(h_pending_reaches(s, "acc", 0, 30000), "a1 never reached the instance");
  TRITONSERVER_InferenceRequest *b1 = seq_request(s, "acc", 2, NULL, START, &v);
  TRITONSERVER_InferenceRequest *b2 = seq_request(s, "acc", 2, NULL, 0, &v);
  h_call *cb1 = h_submit(s, b1);
  h_call *cb2 = h_submit(s, b2);
  H_OK(TRITONSERVER_InferenceRequestCancel(b1));
  cr_expect_str_eq(call_code(ca1), "OK");
  cr_expect_str_eq(call_code(cb1), "Cancelled");
  cr_expect_str_eq(call_code(cb2), "Cancelled");
  double secs = h_seconds_since(&t0);
  cr_expect_lt(secs, 2.3, "the backlog waited an idle period after the execution (%.2f s)", secs);
  h_call *cs[3] = {ca1, cb1, cb2};
  TRITONSERVER_InferenceRequest *rs[3] = {a1, b1, b2};
  for (int i = 0; i < 3; i++) {
    h_call_free(cs[i]);
    H_OK(TRITONSERVER_InferenceRequestDelete(rs[i]));
  }
  server_done(s, repo);
}

/* TRITONSERVER_DELAY_SCHEDULER=2: the first request waits until a second
 * is queued (in any slot), as in Triton's sequence batcher. */
Test(sequence, delay_scheduler_hook_holds_requests, .timeout = 60) {
  setenv("TRITONSERVER_DELAY_SCHEDULER", "2", 1);
  char *repo = h_tmpdir();
  state_model(repo, "acc", 4, NULL);
  TRITONSERVER_Server *s = server_on(repo);
  unsetenv("TRITONSERVER_DELAY_SCHEDULER");
  int32_t v1 = 1, v2 = 10;
  TRITONSERVER_InferenceRequest *r1 = seq_request(s, "acc", 1, NULL, START | END, &v1);
  h_call *c1 = h_submit(s, r1);
  usleep(100 * 1000);
  pthread_mutex_lock(&c1->mu);
  size_t early = c1->n;
  pthread_mutex_unlock(&c1->mu);
  cr_expect_eq(early, 0u, "answered before two requests were queued");
  TRITONSERVER_InferenceRequest *r2 = seq_request(s, "acc", 2, NULL, START | END, &v2);
  h_call *c2 = h_submit(s, r2);
  cr_expect_str_eq(call_code(c1), "OK");
  cr_expect_str_eq(call_code(c2), "OK");
  cr_expect_eq(step(s, "acc", 3, NULL, START | END, 5, NULL), 5); /* the hook is over */
  h_call_free(c1);
  h_call_free(c2);
  H_OK(TRITONSERVER_InferenceRequestDelete(r1));
  H_OK(TRITONSERVER_InferenceRequestDelete(r2));
  server_done(s, repo);
}
