/* Request validation at TRITONSERVER_ServerInferAsync: each failure is a
 * synchronous INVALID_ARG naming the input and what was expected, no
 * callback fires, and the request can be fixed and sent again. Also the
 * shape features validation enables (optional inputs, -1 dims, reshape, raw
 * inputs) and model-configuration load errors. */
#include <jansson.h>

#include "harness.h"

/* ------------------------------------------------------------ helpers */

typedef struct fixture {
  char *repo;
  TRITONSERVER_Server *s;
} fixture;

static void fixture_down(fixture *f) {
  if (f->s) H_OK(TRITONSERVER_ServerDelete(f->s));
  h_rmtree(f->repo);
  free(f->repo);
}

/* "v": unbatched; INPUT0 FP32 [2,3], INPUT1 INT32 [-1,2], INPUT2 BYTES [3],
 * INPUT3 INT16 [1] optional. */
static const char *kV = "name: \"v\"\nbackend: \"identity\"\nmax_batch_size: 0\n"
                        "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 2, 3 ] },"
                        " { name: \"INPUT1\" data_type: TYPE_INT32 dims: [ -1, 2 ] },"
                        " { name: \"INPUT2\" data_type: TYPE_STRING dims: [ 3 ] },"
                        " { name: \"INPUT3\" data_type: TYPE_INT16 dims: [ 1 ] optional: true } ]\n"
                        "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ 2, 3 ] },"
                        " { name: \"OUTPUT1\" data_type: TYPE_INT32 dims: [ -1, 2 ] },"
                        " { name: \"OUTPUT2\" data_type: TYPE_STRING dims: [ 3 ] },"
                        " { name: \"OUTPUT3\" data_type: TYPE_INT16 dims: [ 1 ] } ]\n";

/* "b": batched (max 4); INPUT0/INPUT1 FP32 [3]. */
static const char *kB = "name: \"b\"\nbackend: \"identity\"\nmax_batch_size: 4\n"
                        "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 3 ] },"
                        " { name: \"INPUT1\" data_type: TYPE_FP32 dims: [ 3 ] } ]\n"
                        "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ 3 ] },"
                        " { name: \"OUTPUT1\" data_type: TYPE_FP32 dims: [ 3 ] } ]\n";

/* "rs": reshape [6] -> [2,3], unbatched. "rsb": batched, [4] -> [2,-1]. */
static const char *kRs = "name: \"rs\"\nbackend: \"identity\"\nmax_batch_size: 0\n"
                         "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 6 ] reshape { shape: [ 2, 3 ] } } ]\n"
                         "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ 2, 3 ] } ]\n";
static const char *kRsb =
    "name: \"rsb\"\nbackend: \"identity\"\nmax_batch_size: 4\n"
    "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 4 ] reshape { shape: [ 2, 2 ] } } ]\n"
    "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ 2, 2 ] } ]\n";

/* Output reshapes: the backend (identity) answers in reshape.shape, the
 * client gets dims. "rso": [4] <-> [2,2]; "rsv": [-1] <-> [-1,1]. */
static const char *kRso =
    "name: \"rso\"\nbackend: \"identity\"\nmax_batch_size: 4\n"
    "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 4 ] reshape { shape: [ 2, 2 ] } } ]\n"
    "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ 4 ] reshape { shape: [ 2, 2 ] } } ]\n";
static const char *kRsv =
    "name: \"rsv\"\nbackend: \"identity\"\nmax_batch_size: 4\n"
    "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ -1 ] reshape { shape: [ -1, 1 ] } } ]\n"
    "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ -1 ] reshape { shape: [ -1, 1 ] } } ]\n";

static fixture setup(void) {
  fixture f = {h_tmpdir(), NULL};
  h_model(f.repo, "rso", kRso, "1");
  h_model(f.repo, "rsv", kRsv, "1");
  h_model(f.repo, "v", kV, "1");
  h_model(f.repo, "b", kB, "1");
  h_model(f.repo, "rs", kRs, "1");
  h_model(f.repo, "rsb", kRsb, "1");
  f.s = h_server_new(h_options(f.repo, TRITONSERVER_MODEL_CONTROL_NONE));
  return f;
}

static float kF[64];
static int32_t kI[64];
static const int16_t kS[1] = {7};
/* Three BYTES elements: "ab", "", "xyz". */
static const uint8_t kStr[] = {2, 0, 0, 0, 'a', 'b', 0, 0, 0, 0, 3, 0, 0, 0, 'x', 'y', 'z'};

/* A valid request for "v" (INPUT3 left out) asking for OUTPUT0..2. */
static TRITONSERVER_InferenceRequest *v_request(TRITONSERVER_Server *s) {
  TRITONSERVER_InferenceRequest *r = h_request(s, "v");
  int64_t s0[2] = {2, 3}, s1[2] = {5, 2}, s2[1] = {3};
  h_add_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, s0, 2, kF, 6 * sizeof(float));
  h_add_input(r, "INPUT1", TRITONSERVER_TYPE_INT32, s1, 2, kI, 10 * sizeof(int32_t));
  h_add_input(r, "INPUT2", TRITONSERVER_TYPE_BYTES, s2, 1, kStr, sizeof kStr);
  H_OK(TRITONSERVER_InferenceRequestAddRequestedOutput(r, "OUTPUT0"));
  H_OK(TRITONSERVER_InferenceRequestAddRequestedOutput(r, "OUTPUT1"));
  H_OK(TRITONSERVER_InferenceRequestAddRequestedOutput(r, "OUTPUT2"));
  return r;
}

/* Replaces input `name` of `r` (removing it first when present). */
static void set_input(TRITONSERVER_InferenceRequest *r, const char *name, TRITONSERVER_DataType dt,
                      const int64_t *shape, uint64_t dims, const void *data, size_t size) {
  TRITONSERVER_Error *e = TRITONSERVER_InferenceRequestRemoveInput(r, name);
  if (e) TRITONSERVER_ErrorDelete(e);
  h_add_input(r, name, dt, shape, dims, data, size);
}

/* InferAsync must fail with INVALID_ARG synchronously, the message holding
 * every non-NULL needle, and no callback may fire. */
static void expect_reject(TRITONSERVER_Server *s, TRITONSERVER_InferenceRequest *r, TRITONSERVER_Error_Code code,
                          const char *n1, const char *n2, const char *n3) {
  h_call *c = h_call_new();
  h_bind(r, c);
  TRITONSERVER_Error *e = TRITONSERVER_ServerInferAsync(s, r, NULL);
  if (!e) {
    h_wait(c, 10000);
    char *re = c->n ? h_response_error(c, 0) : NULL;
    cr_assert_fail("InferAsync accepted an invalid request (response error: %s)", re ? re : "none");
  }
  const char *msg = TRITONSERVER_ErrorMessage(e);
  cr_expect_eq(TRITONSERVER_ErrorCode(e), code, "code %s, message: %s", TRITONSERVER_ErrorCodeString(e), msg);
  const char *needles[3] = {n1, n2, n3};
  for (int i = 0; i < 3; i++)
    if (needles[i]) cr_expect(strstr(msg, needles[i]) != NULL, "message lacks '%s': %s", needles[i], msg);
  TRITONSERVER_ErrorDelete(e);
  usleep(5000);
  cr_assert_eq(c->n, 0, "a response callback fired after a rejected InferAsync");
  cr_assert_eq(c->released, 0, "a release callback fired after a rejected InferAsync");
  h_call_free(c);
}

/* InferAsync succeeds; returns the call for inspection (caller frees). */
static h_call *expect_ok(TRITONSERVER_Server *s, TRITONSERVER_InferenceRequest *r) {
  h_call *c = h_infer(s, r);
  cr_assert_eq(c->n, 1);
  char *e = h_response_error(c, 0);
  cr_assert_null(e, "response error: %s", e ? e : "");
  return c;
}

static void expect_ok_free(TRITONSERVER_Server *s, TRITONSERVER_InferenceRequest *r) { h_call_free(expect_ok(s, r)); }

/* Shape of output `name` in the single response of `c`. */
static void output_shape(h_call *c, const char *name, const int64_t **shape, uint64_t *dims, TRITONSERVER_DataType *dt,
                         size_t *size) {
  uint32_t n = 0;
  H_OK(TRITONSERVER_InferenceResponseOutputCount(c->responses[0], &n));
  for (uint32_t i = 0; i < n; i++) {
    const char *on;
    const void *base;
    TRITONSERVER_MemoryType mt;
    int64_t id;
    void *u;
    H_OK(TRITONSERVER_InferenceResponseOutput(c->responses[0], i, &on, dt, shape, dims, &base, size, &mt, &id, &u));
    if (!strcmp(on, name)) return;
  }
  cr_assert_fail("output %s missing", name);
}

/* ---------------------------------------------------------------- tests */

Test(validation, baseline_request_is_valid) {
  fixture f = setup();
  TRITONSERVER_InferenceRequest *r = v_request(f.s);
  expect_ok_free(f.s, r);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  fixture_down(&f);
}

Test(validation, unknown_input) {
  fixture f = setup();
  TRITONSERVER_InferenceRequest *r = v_request(f.s);
  int64_t s[1] = {1};
  h_add_input(r, "BOGUS", TRITONSERVER_TYPE_FP32, s, 1, kF, 4);
  expect_reject(f.s, r, TRITONSERVER_ERROR_INVALID_ARG, "BOGUS", "'v'", NULL);
  H_OK(TRITONSERVER_InferenceRequestRemoveInput(r, "BOGUS"));
  expect_ok_free(f.s, r);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  fixture_down(&f);
}

Test(validation, missing_required_input) {
  fixture f = setup();
  TRITONSERVER_InferenceRequest *r = v_request(f.s);
  H_OK(TRITONSERVER_InferenceRequestRemoveInput(r, "INPUT1"));
  /* Triton's sentence, its inputs listed last-added first. */
  expect_reject(f.s, r, TRITONSERVER_ERROR_INVALID_ARG,
                "[request id: <id_unknown>] expected number of inputs between 3 and 4 but got 2 inputs for model 'v'. "
                "Got input(s) ['INPUT2','INPUT0'], but missing required input(s) ['INPUT1']. Please provide all "
                "required input(s).",
                NULL, NULL);
  /* Ours: Triton only counts the inputs, so the optional INPUT3 would
   * stand in for the missing INPUT1. */
  int64_t s3[1] = {1};
  h_add_input(r, "INPUT3", TRITONSERVER_TYPE_INT16, s3, 1, kS, sizeof kS);
  expect_reject(f.s, r, TRITONSERVER_ERROR_INVALID_ARG, "but got 3 inputs for model 'v'",
                "missing required input(s) ['INPUT1']", NULL);
  H_OK(TRITONSERVER_InferenceRequestRemoveInput(r, "INPUT3"));
  int64_t s1[2] = {1, 2};
  h_add_input(r, "INPUT1", TRITONSERVER_TYPE_INT32, s1, 2, kI, 8);
  expect_ok_free(f.s, r);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  fixture_down(&f);
}

Test(validation, optional_input_may_be_given_or_missing) {
  fixture f = setup();
  TRITONSERVER_InferenceRequest *r = v_request(f.s); /* INPUT3 absent */
  expect_ok_free(f.s, r);
  int64_t s3[1] = {1};
  h_add_input(r, "INPUT3", TRITONSERVER_TYPE_INT16, s3, 1, kS, sizeof kS);
  H_OK(TRITONSERVER_InferenceRequestAddRequestedOutput(r, "OUTPUT3"));
  h_call *c = expect_ok(f.s, r);
  const int64_t *shape;
  uint64_t dims;
  TRITONSERVER_DataType dt;
  size_t size;
  output_shape(c, "OUTPUT3", &shape, &dims, &dt, &size);
  cr_assert_eq(dt, TRITONSERVER_TYPE_INT16);
  cr_assert_eq(size, 2);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  fixture_down(&f);
}

Test(validation, wrong_datatype) {
  fixture f = setup();
  TRITONSERVER_InferenceRequest *r = v_request(f.s);
  int64_t s0[2] = {2, 3};
  set_input(r, "INPUT0", TRITONSERVER_TYPE_INT32, s0, 2, kI, 6 * sizeof(int32_t));
  expect_reject(f.s, r, TRITONSERVER_ERROR_INVALID_ARG, "INPUT0", "FP32", "INT32");
  set_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, s0, 2, kF, 6 * sizeof(float));
  expect_ok_free(f.s, r);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  fixture_down(&f);
}

Test(validation, wrong_rank) {
  fixture f = setup();
  TRITONSERVER_InferenceRequest *r = v_request(f.s);
  int64_t s0[1] = {6};
  set_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, s0, 1, kF, 6 * sizeof(float));
  expect_reject(f.s, r, TRITONSERVER_ERROR_INVALID_ARG, "INPUT0", "[2,3]", NULL);
  int64_t s3[3] = {1, 2, 3};
  set_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, s3, 3, kF, 6 * sizeof(float));
  expect_reject(f.s, r, TRITONSERVER_ERROR_INVALID_ARG, "INPUT0", "[2,3]", NULL);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  fixture_down(&f);
}

Test(validation, wrong_fixed_dim) {
  fixture f = setup();
  TRITONSERVER_InferenceRequest *r = v_request(f.s);
  int64_t s0[2] = {3, 2};
  set_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, s0, 2, kF, 6 * sizeof(float));
  expect_reject(f.s, r, TRITONSERVER_ERROR_INVALID_ARG, "INPUT0", "[2,3]", "[3,2]");
  /* -1 dim of INPUT1 has a fixed second dim 2. */
  int64_t s0ok[2] = {2, 3};
  set_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, s0ok, 2, kF, 6 * sizeof(float));
  int64_t s1[2] = {2, 3};
  set_input(r, "INPUT1", TRITONSERVER_TYPE_INT32, s1, 2, kI, 6 * sizeof(int32_t));
  expect_reject(f.s, r, TRITONSERVER_ERROR_INVALID_ARG, "INPUT1", "[-1,2]", NULL);
  /* A negative dim in the request is never valid. */
  int64_t sneg[2] = {-1, 2};
  set_input(r, "INPUT1", TRITONSERVER_TYPE_INT32, sneg, 2, kI, 8);
  expect_reject(f.s, r, TRITONSERVER_ERROR_INVALID_ARG, "INPUT1", NULL, NULL);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  fixture_down(&f);
}

Test(validation, variable_dims_accept_any_size) {
  fixture f = setup();
  TRITONSERVER_InferenceRequest *r = v_request(f.s);
  const int64_t rows[] = {0, 1, 7, 32};
  for (size_t k = 0; k < 4; k++) {
    int64_t s1[2] = {rows[k], 2};
    set_input(r, "INPUT1", TRITONSERVER_TYPE_INT32, s1, 2, kI, (size_t)rows[k] * 2 * sizeof(int32_t));
    h_call *c = expect_ok(f.s, r);
    const int64_t *shape;
    uint64_t dims;
    TRITONSERVER_DataType dt;
    size_t size;
    output_shape(c, "OUTPUT1", &shape, &dims, &dt, &size);
    cr_assert_eq(dims, 2);
    cr_assert_eq(shape[0], rows[k]);
    cr_assert_eq(shape[1], 2);
    cr_assert_eq(size, (size_t)rows[k] * 8);
    h_call_free(c);
  }
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  fixture_down(&f);
}

Test(validation, batch_size_limits) {
  fixture f = setup();
  TRITONSERVER_InferenceRequest *r = h_request(f.s, "b");
  int64_t s[2] = {5, 3};
  h_add_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, s, 2, kF, 15 * sizeof(float));
  h_add_input(r, "INPUT1", TRITONSERVER_TYPE_FP32, s, 2, kF, 15 * sizeof(float));
  expect_reject(f.s, r, TRITONSERVER_ERROR_INVALID_ARG, "4", "'b'", NULL);
  /* Zero batch is invalid as well. */
  s[0] = 0;
  set_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, s, 2, kF, 0);
  set_input(r, "INPUT1", TRITONSERVER_TYPE_FP32, s, 2, kF, 0);
  /* Triton sizes the data of a batch of 0 without the batch dimension. */
  expect_reject(f.s, r, TRITONSERVER_ERROR_INVALID_ARG,
                "[request id: <id_unknown>] input byte size mismatch for input 'INPUT1' for model 'b'. Expected 12, "
                "got 0",
                NULL, NULL);
  /* Ours: with that much data Triton would run 0 rows. */
  set_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, s, 2, kF, 3 * sizeof(float));
  set_input(r, "INPUT1", TRITONSERVER_TYPE_FP32, s, 2, kF, 3 * sizeof(float));
  expect_reject(f.s, r, TRITONSERVER_ERROR_INVALID_ARG, "inference request batch-size must be <= 4 for 'b', got 0",
                "at least one row", NULL);
  /* Ours: an input of 0 rows visited first lets the next set the batch
   * size in Triton; its shape still says 0 rows. */
  int64_t one[2] = {1, 3};
  set_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, one, 2, kF, 3 * sizeof(float));
  set_input(r, "INPUT1", TRITONSERVER_TYPE_FP32, s, 2, kF, 3 * sizeof(float)); /* added last: visited first */
  expect_reject(f.s, r, TRITONSERVER_ERROR_INVALID_ARG,
                "[request id: <id_unknown>] input 'INPUT1' batch size does not match other inputs for 'b'", NULL, NULL);
  /* A negative batch dimension in every input: Triton reads the first
   * input it visits (the last added) as 4294967295 rows, and the next one
   * does not match it. */
  s[0] = -1;
  set_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, s, 2, kF, 12);
  set_input(r, "INPUT1", TRITONSERVER_TYPE_FP32, s, 2, kF, 12);
  expect_reject(f.s, r, TRITONSERVER_ERROR_INVALID_ARG,
                "[request id: <id_unknown>] input 'INPUT0' batch size does not match other inputs for 'b'", NULL, NULL);
  /* Missing batch dimension: the first dimension is taken as the batch,
   * and the shape without it is short (Triton visits INPUT1 first). */
  int64_t nb[1] = {3};
  set_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, nb, 1, kF, 3 * sizeof(float));
  set_input(r, "INPUT1", TRITONSERVER_TYPE_FP32, nb, 1, kF, 3 * sizeof(float));
  expect_reject(f.s, r, TRITONSERVER_ERROR_INVALID_ARG,
                "unexpected shape for input 'INPUT1' for model 'b'. Expected [-1,3], got [3]. NOTE:", NULL, NULL);
  s[0] = 4;
  set_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, s, 2, kF, 12 * sizeof(float));
  set_input(r, "INPUT1", TRITONSERVER_TYPE_FP32, s, 2, kF, 12 * sizeof(float));
  expect_ok_free(f.s, r);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  fixture_down(&f);
}

Test(validation, batch_dims_differ_between_inputs) {
  fixture f = setup();
  TRITONSERVER_InferenceRequest *r = h_request(f.s, "b");
  int64_t s0[2] = {2, 3}, s1[2] = {3, 3};
  h_add_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, s0, 2, kF, 6 * sizeof(float));
  h_add_input(r, "INPUT1", TRITONSERVER_TYPE_FP32, s1, 2, kF, 9 * sizeof(float));
  /* Triton visits the inputs last added first: INPUT1 sets the batch size. */
  expect_reject(f.s, r, TRITONSERVER_ERROR_INVALID_ARG,
                "[request id: <id_unknown>] input 'INPUT0' batch size does not match other inputs for 'b'", NULL, NULL);
  set_input(r, "INPUT1", TRITONSERVER_TYPE_FP32, s0, 2, kF, 6 * sizeof(float));
  expect_ok_free(f.s, r);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  fixture_down(&f);
}

Test(validation, byte_size_mismatch) {
  fixture f = setup();
  TRITONSERVER_InferenceRequest *r = v_request(f.s);
  int64_t s0[2] = {2, 3};
  set_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, s0, 2, kF, 6 * sizeof(float) - 1);
  expect_reject(f.s, r, TRITONSERVER_ERROR_INVALID_ARG, "INPUT0", "24", "23");
  set_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, s0, 2, kF, 7 * sizeof(float));
  expect_reject(f.s, r, TRITONSERVER_ERROR_INVALID_ARG, "INPUT0", "24", "28");
  /* Right total across two buffers is fine. */
  H_OK(TRITONSERVER_InferenceRequestRemoveAllInputData(r, "INPUT0"));
  H_OK(TRITONSERVER_InferenceRequestAppendInputData(r, "INPUT0", kF, 10, TRITONSERVER_MEMORY_CPU, 0));
  H_OK(
      TRITONSERVER_InferenceRequestAppendInputData(r, "INPUT0", (const char *)kF + 10, 14, TRITONSERVER_MEMORY_CPU, 0));
  expect_ok_free(f.s, r);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  fixture_down(&f);
}

Test(validation, bytes_truncated_length_prefix) {
  fixture f = setup();
  TRITONSERVER_InferenceRequest *r = v_request(f.s);
  int64_t s2[1] = {3};
  /* "ab", "" and then only two bytes of the third prefix. */
  set_input(r, "INPUT2", TRITONSERVER_TYPE_BYTES, s2, 1, kStr, 12);
  expect_reject(f.s, r, TRITONSERVER_ERROR_INVALID_ARG,
                "[request id: <id_unknown>] incomplete string length indicator for inference input 'INPUT2' for model "
                "'v', expecting 4 bytes but only 2 bytes available.",
                NULL, NULL);
  set_input(r, "INPUT2", TRITONSERVER_TYPE_BYTES, s2, 1, kStr, sizeof kStr);
  expect_ok_free(f.s, r);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  fixture_down(&f);
}

Test(validation, bytes_string_past_end) {
  fixture f = setup();
  TRITONSERVER_InferenceRequest *r = v_request(f.s);
  int64_t s2[1] = {3};
  /* Ours: Triton leaves an element cut short at the end to the backend. */
  set_input(r, "INPUT2", TRITONSERVER_TYPE_BYTES, s2, 1, kStr, sizeof kStr - 1);
  expect_reject(f.s, r, TRITONSERVER_ERROR_INVALID_ARG, "input 'INPUT2' of model 'v': BYTES data ends inside element 3",
                NULL, NULL);
  /* A huge declared length. */
  static const uint8_t huge[] = {0xff, 0xff, 0xff, 0x7f, 'a'};
  int64_t one[1] = {1};
  set_input(r, "INPUT2", TRITONSERVER_TYPE_BYTES, one, 1, huge, sizeof huge);
  expect_reject(f.s, r, TRITONSERVER_ERROR_INVALID_ARG, "INPUT2", NULL, NULL);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  fixture_down(&f);
}

Test(validation, bytes_element_count_mismatch) {
  fixture f = setup();
  TRITONSERVER_InferenceRequest *r = v_request(f.s);
  int64_t s2[1] = {3};
  /* Two elements for a shape of three. */
  set_input(r, "INPUT2", TRITONSERVER_TYPE_BYTES, s2, 1, kStr, 10);
  expect_reject(
      f.s, r, TRITONSERVER_ERROR_INVALID_ARG,
      "[request id: <id_unknown>] expected 3 string elements for inference input 'INPUT2' for model 'v', got 2", NULL,
      NULL);
  /* Four elements for a shape of three. */
  uint8_t four[sizeof kStr + 4];
  memcpy(four, kStr, sizeof kStr);
  memset(four + sizeof kStr, 0, 4);
  set_input(r, "INPUT2", TRITONSERVER_TYPE_BYTES, s2, 1, four, sizeof four);
  expect_reject(f.s, r, TRITONSERVER_ERROR_INVALID_ARG,
                "[request id: <id_unknown>] unexpected number of string elements 4 for inference input 'INPUT2' for "
                "model 'v', expecting 3",
                NULL, NULL);
  set_input(r, "INPUT2", TRITONSERVER_TYPE_BYTES, s2, 1, kStr, sizeof kStr);
  expect_ok_free(f.s, r);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  fixture_down(&f);
}

Test(validation, reshape_seen_by_backend) {
  fixture f = setup();
  TRITONSERVER_InferenceRequest *r = h_request(f.s, "rs");
  int64_t s[1] = {6};
  h_add_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, s, 1, kF, 6 * sizeof(float));
  h_call *c = expect_ok(f.s, r);
  const int64_t *shape;
  uint64_t dims;
  TRITONSERVER_DataType dt;
  size_t size;
  output_shape(c, "OUTPUT0", &shape, &dims, &dt, &size);
  cr_assert_eq(dims, 2);
  cr_assert_eq(shape[0], 2);
  cr_assert_eq(shape[1], 3);
  h_call_free(c);
  /* The client-facing shape is still [6]: [2,3] is rejected. */
  int64_t wrong[2] = {2, 3};
  set_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, wrong, 2, kF, 6 * sizeof(float));
  expect_reject(f.s, r, TRITONSERVER_ERROR_INVALID_ARG, "INPUT0", "[6]", NULL);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));

  r = h_request(f.s, "rsb");
  int64_t sb[2] = {3, 4};
  h_add_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, sb, 2, kF, 12 * sizeof(float));
  c = expect_ok(f.s, r);
  output_shape(c, "OUTPUT0", &shape, &dims, &dt, &size);
  cr_assert_eq(dims, 3);
  cr_assert_eq(shape[0], 3);
  cr_assert_eq(shape[1], 2);
  cr_assert_eq(shape[2], 2);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  fixture_down(&f);
}

Test(validation, output_reshape_gives_the_client_dims) {
  fixture f = setup();
  const int64_t *shape;
  uint64_t dims;
  TRITONSERVER_DataType dt;
  size_t size;
  TRITONSERVER_InferenceRequest *r = h_request(f.s, "rso");
  int64_t s4[2] = {3, 4};
  h_add_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, s4, 2, kF, 12 * sizeof(float));
  h_call *c = expect_ok(f.s, r);
  output_shape(c, "OUTPUT0", &shape, &dims, &dt, &size);
  cr_assert_eq(dims, 2, "identity answered [3,2,2]; the client gets [3,4]");
  cr_assert_eq(shape[0], 3);
  cr_assert_eq(shape[1], 4);
  cr_assert_eq(size, 12 * sizeof(float));
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));

  r = h_request(f.s, "rsv");
  int64_t sv[2] = {2, 5};
  h_add_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, sv, 2, kF, 10 * sizeof(float));
  c = expect_ok(f.s, r);
  output_shape(c, "OUTPUT0", &shape, &dims, &dt, &size);
  cr_assert_eq(dims, 2, "identity answered [2,5,1]; the client gets [2,5]");
  cr_assert_eq(shape[0], 2);
  cr_assert_eq(shape[1], 5);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  fixture_down(&f);
}

Test(validation, raw_input_takes_config_shape) {
  fixture f = setup();
  TRITONSERVER_InferenceRequest *r = h_request(f.s, "rs");
  H_OK(TRITONSERVER_InferenceRequestAddRawInput(r, "INPUT0"));
  H_OK(TRITONSERVER_InferenceRequestAppendInputData(r, "INPUT0", kF, 6 * sizeof(float), TRITONSERVER_MEMORY_CPU, 0));
  h_call *c = expect_ok(f.s, r);
  const int64_t *shape;
  uint64_t dims;
  TRITONSERVER_DataType dt;
  size_t size;
  output_shape(c, "OUTPUT0", &shape, &dims, &dt, &size);
  cr_assert_eq(dt, TRITONSERVER_TYPE_FP32);
  cr_assert_eq(size, 24);
  cr_assert_eq(dims, 2); /* reshape applies to raw inputs too */
  h_call_free(c);
  /* Sent again (reuse) it still resolves. */
  c = expect_ok(f.s, r);
  h_call_free(c);
  /* Wrong byte size for the configured shape. */
  H_OK(TRITONSERVER_InferenceRequestAppendInputData(r, "INPUT0", kF, 4, TRITONSERVER_MEMORY_CPU, 0));
  expect_reject(f.s, r, TRITONSERVER_ERROR_INVALID_ARG, "INPUT0", NULL, NULL);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));

  /* Variable dims: the size fills the -1 dim. */
  r = h_request(f.s, "v");
  H_OK(TRITONSERVER_InferenceRequestAddRawInput(r, "INPUT1"));
  H_OK(TRITONSERVER_InferenceRequestAppendInputData(r, "INPUT1", kI, 6 * sizeof(int32_t), TRITONSERVER_MEMORY_CPU, 0));
  int64_t s0[2] = {2, 3}, s2[1] = {3};
  h_add_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, s0, 2, kF, 6 * sizeof(float));
  h_add_input(r, "INPUT2", TRITONSERVER_TYPE_BYTES, s2, 1, kStr, sizeof kStr);
  H_OK(TRITONSERVER_InferenceRequestAddRequestedOutput(r, "OUTPUT1"));
  c = expect_ok(f.s, r);
  output_shape(c, "OUTPUT1", &shape, &dims, &dt, &size);
  cr_assert_eq(dt, TRITONSERVER_TYPE_INT32);
  cr_assert_eq(dims, 2);
  cr_assert_eq(shape[0], 3);
  cr_assert_eq(shape[1], 2);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  fixture_down(&f);
}

Test(validation, append_to_unknown_input_name) {
  fixture f = setup();
  TRITONSERVER_InferenceRequest *r = v_request(f.s);
  TRITONSERVER_Error *e = TRITONSERVER_InferenceRequestAppendInputData(r, "NOPE", kF, 4, TRITONSERVER_MEMORY_CPU, 0);
  cr_assert_not_null(e);
  cr_expect_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_INVALID_ARG);
  cr_expect(strstr(TRITONSERVER_ErrorMessage(e), "NOPE"), "%s", TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
  expect_ok_free(f.s, r); /* the request is untouched */
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  fixture_down(&f);
}

Test(validation, duplicate_input_rejected) {
  fixture f = setup();
  TRITONSERVER_InferenceRequest *r = v_request(f.s);
  int64_t s0[2] = {2, 3};
  TRITONSERVER_Error *e = TRITONSERVER_InferenceRequestAddInput(r, "INPUT0", TRITONSERVER_TYPE_FP32, s0, 2);
  cr_assert_not_null(e);
  cr_expect_str_eq(TRITONSERVER_ErrorMessage(e), "[request id: <id_unknown>] input 'INPUT0' already exists in request");
  TRITONSERVER_ErrorDelete(e);
  /* Triton's prefix names the request's id once it has one. */
  H_OK(TRITONSERVER_InferenceRequestSetId(r, "req-7"));
  e = TRITONSERVER_InferenceRequestAddInput(r, "INPUT0", TRITONSERVER_TYPE_FP32, s0, 2);
  cr_assert_not_null(e);
  cr_expect_str_eq(TRITONSERVER_ErrorMessage(e), "[request id: req-7] input 'INPUT0' already exists in request");
  TRITONSERVER_ErrorDelete(e);
  /* A requested output asked for again is refused, as Triton 26.x does
   * (core e93e4a9, a security fix; r25.07 took it as the same output). */
  e = TRITONSERVER_InferenceRequestAddRequestedOutput(r, "OUTPUT0");
  cr_assert_not_null(e);
  cr_expect_str_eq(TRITONSERVER_ErrorMessage(e), "[request id: req-7] output 'OUTPUT0' already exists in request");
  TRITONSERVER_ErrorDelete(e);
  h_call *c = expect_ok(f.s, r);
  uint32_t n = 0;
  H_OK(TRITONSERVER_InferenceResponseOutputCount(c->responses[0], &n));
  cr_expect_eq(n, 3, "outputs: %u", n);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  fixture_down(&f);
}

Test(validation, gpu_input_unsupported) {
  fixture f = setup();
  TRITONSERVER_InferenceRequest *r = v_request(f.s);
  H_OK(TRITONSERVER_InferenceRequestRemoveAllInputData(r, "INPUT0"));
  TRITONSERVER_Error *e = TRITONSERVER_InferenceRequestAppendInputData(r, "INPUT0", kF, 24, TRITONSERVER_MEMORY_GPU, 0);
  cr_assert_not_null(e);
  cr_expect_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_UNSUPPORTED, "%s", TRITONSERVER_ErrorCodeString(e));
  TRITONSERVER_ErrorDelete(e);
  /* Through buffer attributes as well. */
  TRITONSERVER_BufferAttributes *a = NULL;
  H_OK(TRITONSERVER_BufferAttributesNew(&a));
  H_OK(TRITONSERVER_BufferAttributesSetByteSize(a, 24));
  H_OK(TRITONSERVER_BufferAttributesSetMemoryType(a, TRITONSERVER_MEMORY_GPU));
  e = TRITONSERVER_InferenceRequestAppendInputDataWithBufferAttributes(r, "INPUT0", kF, a);
  cr_assert_not_null(e);
  cr_expect_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_UNSUPPORTED, "%s", TRITONSERVER_ErrorCodeString(e));
  TRITONSERVER_ErrorDelete(e);
  H_OK(TRITONSERVER_BufferAttributesDelete(a));
  H_OK(TRITONSERVER_InferenceRequestAppendInputData(r, "INPUT0", kF, 24, TRITONSERVER_MEMORY_CPU, 0));
  expect_ok_free(f.s, r);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  fixture_down(&f);
}

/* ------------------------------------------------- config load errors */

/* Entry of `name` in the model index JSON (borrowed from `index`). */
static json_t *index_entry(json_t *index, const char *name) {
  size_t i;
  json_t *e;
  json_array_foreach(index, i, e) {
    if (!strcmp(json_string_value(json_object_get(e, "name")), name)) return e;
  }
  return NULL;
}

static json_t *model_index(TRITONSERVER_Server *s) {
  TRITONSERVER_Message *m = NULL;
  H_OK(TRITONSERVER_ServerModelIndex(s, 0, &m));
  char *txt = h_msg_text(m);
  json_t *j = json_loads(txt, 0, NULL);
  cr_assert(json_is_array(j), "index is not an array: %s", txt);
  free(txt);
  return j;
}

/* True when `s` contains "config.pbtxt:<line>:<col>". */
static bool names_position(const char *s) {
  const char *p = strstr(s, "config.pbtxt:");
  if (!p) return false;
  int line = 0, col = 0;
  return sscanf(p, "config.pbtxt:%d:%d", &line, &col) == 2 && line > 0 && col > 0;
}

static const char *kBadCfg = "name: \"bad\"\nbackend: \"identity\"\nmax_batch_size: 0\n"
                             "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n"
                             "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n"
                             "no_such_field: 3\n";

Test(validation, config_error_explicit_load) {
  fixture f = {h_tmpdir(), NULL};
  h_model(f.repo, "bad", kBadCfg, "1");
  f.s = h_server_new(h_options(f.repo, TRITONSERVER_MODEL_CONTROL_EXPLICIT));
  TRITONSERVER_Error *e = TRITONSERVER_ServerLoadModel(f.s, "bad");
  cr_assert_not_null(e, "a model with a bad config must fail to load");
  cr_expect(names_position(TRITONSERVER_ErrorMessage(e)), "load error lacks file:line:col: %s",
            TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
  json_t *idx = model_index(f.s);
  json_t *ent = index_entry(idx, "bad");
  cr_assert_not_null(ent, "bad model missing from the index");
  cr_expect_str_eq(json_string_value(json_object_get(ent, "state")), "UNAVAILABLE");
  const char *reason = json_string_value(json_object_get(ent, "reason"));
  cr_assert_not_null(reason);
  cr_expect(names_position(reason), "reason lacks file:line:col: %s", reason);
  cr_expect(strstr(reason, "no_such_field") != NULL, "reason lacks the field: %s", reason);
  json_decref(idx);
  bool ready = true;
  H_OK(TRITONSERVER_ServerModelIsReady(f.s, "bad", -1, &ready));
  cr_expect_not(ready);
  fixture_down(&f);
}

Test(validation, config_error_at_startup_leaves_others_serving) {
  fixture f = {h_tmpdir(), NULL};
  h_model(f.repo, "bad", "name: \"bad\"\nbackend: \"identity\"\nmax_batch_size: \"eight\"\n", "1");
  h_model(f.repo, "b", kB, "1");
  TRITONSERVER_ServerOptions *o = h_options(f.repo, TRITONSERVER_MODEL_CONTROL_NONE);
  TRITONSERVER_Error *e = TRITONSERVER_ServerNew(&f.s, o);
  TRITONSERVER_ServerOptionsDelete(o);
  cr_expect_not_null(e, "ServerNew should report the failed model");
  if (e) TRITONSERVER_ErrorDelete(e);
  cr_assert_not_null(f.s, "the server object exists despite a failed model");
  json_t *idx = model_index(f.s);
  json_t *ent = index_entry(idx, "bad");
  cr_assert_not_null(ent);
  cr_expect_str_eq(json_string_value(json_object_get(ent, "state")), "UNAVAILABLE");
  const char *reason = json_string_value(json_object_get(ent, "reason"));
  cr_assert_not_null(reason);
  cr_expect(names_position(reason), "reason lacks file:line:col: %s", reason);
  cr_expect(strstr(reason, ":3:") != NULL, "reason should point at line 3: %s", reason);
  ent = index_entry(idx, "b");
  cr_assert_not_null(ent);
  cr_expect_str_eq(json_string_value(json_object_get(ent, "state")), "READY");
  json_decref(idx);
  /* The good model serves. */
  TRITONSERVER_InferenceRequest *r = h_request(f.s, "b");
  int64_t s[2] = {1, 3};
  h_add_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, s, 2, kF, 12);
  h_add_input(r, "INPUT1", TRITONSERVER_TYPE_FP32, s, 2, kF, 12);
  expect_ok_free(f.s, r);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  fixture_down(&f);
}
