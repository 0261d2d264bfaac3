/* Inference through the public API: identity with every datatype, batching,
 * requested outputs, add_sub, request ids, correlation ids, parameters,
 * request reuse, in-flight and unloaded-model errors, large inputs. */
#include <dlfcn.h>

#include "harness.h"

/* ------------------------------------------------------------ helpers */

static uint32_t output_count(TRITONSERVER_InferenceResponse *r) {
  uint32_t n = 0;
  H_OK(TRITONSERVER_InferenceResponseOutputCount(r, &n));
  return n;
}

/* Asserts that call `c` holds exactly one successful final response. */
static TRITONSERVER_InferenceResponse *one_ok(h_call *c) {
  cr_assert_eq(c->n, 1, "expected one response, got %zu", c->n);
  cr_assert_not_null(c->responses[0]);
  char *e = h_response_error(c, 0);
  cr_assert_null(e, "response error: %s", e ? e : "");
  cr_assert(c->flags[0] & TRITONSERVER_RESPONSE_COMPLETE_FINAL);
  return c->responses[0];
}

static void expect_shape(const h_output *v, const int64_t *shape, uint64_t dims) {
  cr_assert_eq(v->dims, dims, "output %s: %lu dims, expected %lu", v->name, (unsigned long)v->dims,
               (unsigned long)dims);
  for (uint64_t d = 0; d < dims; d++)
    cr_assert_eq(v->shape[d], shape[d], "output %s dim %lu: %ld != %ld", v->name, (unsigned long)d, (long)v->shape[d],
                 (long)shape[d]);
}

typedef struct fixture {
  char *repo;
  TRITONSERVER_Server *s;
} fixture;

static void fixture_down(fixture *f) {
  if (f->s) H_OK(TRITONSERVER_ServerDelete(f->s));
  h_rmtree(f->repo);
  free(f->repo);
}

#define IDENT_1(name, type, dims, extra)                                                                               \
  "name: \"" name "\"\nbackend: \"identity\"\nmax_batch_size: 0\n"                                                     \
  "input [ { name: \"INPUT0\" data_type: " type " dims: " dims " } ]\n"                                                \
  "output [ { name: \"OUTPUT0\" data_type: " type " dims: " dims " } ]\n" extra

/* Appends a BYTES element (4-byte little-endian length + bytes) to buf. */
static size_t put_str(uint8_t *buf, size_t off, const char *s, size_t len) {
  buf[off] = (uint8_t)len;
  buf[off + 1] = (uint8_t)(len >> 8);
  buf[off + 2] = (uint8_t)(len >> 16);
  buf[off + 3] = (uint8_t)(len >> 24);
  memcpy(buf + off + 4, s, len);
  return off + 4 + len;
}

/* ------------------------------------------------------- all datatypes */

static const struct {
  const char *cfg;
  TRITONSERVER_DataType dt;
  size_t esz;
} kTypes[] = {
    {"TYPE_BOOL", TRITONSERVER_TYPE_BOOL, 1},     {"TYPE_UINT8", TRITONSERVER_TYPE_UINT8, 1},
    {"TYPE_UINT16", TRITONSERVER_TYPE_UINT16, 2}, {"TYPE_UINT32", TRITONSERVER_TYPE_UINT32, 4},
    {"TYPE_UINT64", TRITONSERVER_TYPE_UINT64, 8}, {"TYPE_INT8", TRITONSERVER_TYPE_INT8, 1},
    {"TYPE_INT16", TRITONSERVER_TYPE_INT16, 2},   {"TYPE_INT32", TRITONSERVER_TYPE_INT32, 4},
    {"TYPE_INT64", TRITONSERVER_TYPE_INT64, 8},   {"TYPE_FP16", TRITONSERVER_TYPE_FP16, 2},
    {"TYPE_FP32", TRITONSERVER_TYPE_FP32, 4},     {"TYPE_FP64", TRITONSERVER_TYPE_FP64, 8},
    {"TYPE_BF16", TRITONSERVER_TYPE_BF16, 2},     {"TYPE_STRING", TRITONSERVER_TYPE_BYTES, 0},
};
#define N_TYPES (sizeof kTypes / sizeof kTypes[0])

/* One identity model with INPUT<i>/OUTPUT<i> of every datatype, shape [-1, 3]. */
static void all_types_model(const char *repo) {
  char cfg[8192];
  size_t o = (size_t)snprintf(cfg, sizeof cfg, "name: \"alltypes\"\nbackend: \"identity\"\nmax_batch_size: 0\ninput [");
  for (size_t i = 0; i < N_TYPES; i++)
    o += (size_t)snprintf(cfg + o, sizeof cfg - o, "%s{ name: \"INPUT%zu\" data_type: %s dims: [ -1, 3 ] }",
                          i ? "," : "", i, kTypes[i].cfg);
  o += (size_t)snprintf(cfg + o, sizeof cfg - o, "]\noutput [");
  for (size_t i = 0; i < N_TYPES; i++)
    o += (size_t)snprintf(cfg + o, sizeof cfg - o, "%s{ name: \"OUTPUT%zu\" data_type: %s dims: [ -1, 3 ] }",
                          i ? "," : "", i, kTypes[i].cfg);
  snprintf(cfg + o, sizeof cfg - o, "]\n");
  h_model(repo, "alltypes", cfg, "1");
}

Test(infer, identity_every_datatype) {
  fixture f = {h_tmpdir(), NULL};
  all_types_model(f.repo);
  f.s = h_server_new(h_options(f.repo, TRITONSERVER_MODEL_CONTROL_NONE));
  int64_t shape[2] = {2, 3};
  uint8_t data[N_TYPES][64];
  size_t sizes[N_TYPES];
  TRITONSERVER_InferenceRequest *r = h_request(f.s, "alltypes");
  for (size_t i = 0; i < N_TYPES; i++) {
    char name[32];
    snprintf(name, sizeof name, "INPUT%zu", i);
    if (kTypes[i].dt == TRITONSERVER_TYPE_BYTES) {
      size_t off = 0;
      const char *strs[6] = {"", "a", "hello", "", "\xff\x00z", "last"};
      const size_t lens[6] = {0, 1, 5, 0, 3, 4};
      for (int k = 0; k < 6; k++) off = put_str(data[i], off, strs[k], lens[k]);
      sizes[i] = off;
    } else {
      sizes[i] = 6 * kTypes[i].esz;
      for (size_t b = 0; b < sizes[i]; b++)
        data[i][b] = kTypes[i].dt == TRITONSERVER_TYPE_BOOL ? (uint8_t)(b & 1) : (uint8_t)(b * 7 + i + 1);
    }
    h_add_input(r, name, kTypes[i].dt, shape, 2, data[i], sizes[i]);
  }
  h_call *c = h_infer(f.s, r);
  TRITONSERVER_InferenceResponse *resp = one_ok(c);
  cr_assert_eq(output_count(resp), N_TYPES);
  for (size_t i = 0; i < N_TYPES; i++) {
    char name[32];
    snprintf(name, sizeof name, "OUTPUT%zu", i);
    h_output v;
    cr_assert(h_find_output(resp, name, &v), "%s missing", name);
    cr_assert_eq(v.dtype, kTypes[i].dt, "%s: datatype %s", name, TRITONSERVER_DataTypeString(v.dtype));
    expect_shape(&v, shape, 2);
    cr_assert_eq(v.size, sizes[i], "%s: %zu bytes, expected %zu", name, v.size, sizes[i]);
    cr_assert_eq(memcmp(v.base, data[i], sizes[i]), 0, "%s: bytes differ", name);
  }
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  fixture_down(&f);
}

Test(infer, bytes_split_across_buffers) {
  fixture f = {h_tmpdir(), NULL};
  h_model(f.repo, "strs", IDENT_1("strs", "TYPE_STRING", "[ -1 ]", ""), "1");
  f.s = h_server_new(h_options(f.repo, TRITONSERVER_MODEL_CONTROL_NONE));
  uint8_t all[128];
  size_t n = 0;
  n = put_str(all, n, "first string", 12);
  n = put_str(all, n, "", 0);
  n = put_str(all, n, "third", 5);
  n = put_str(all, n, "", 0);
  /* Cuts: inside the first length prefix, inside the first string, inside
   * the third prefix, and an empty buffer. */
  size_t cuts[] = {0, 2, 9, 20, 20, 27, n};
  int64_t shape[1] = {4};
  TRITONSERVER_InferenceRequest *r = h_request(f.s, "strs");
  H_OK(TRITONSERVER_InferenceRequestAddInput(r, "INPUT0", TRITONSERVER_TYPE_BYTES, shape, 1));
  for (size_t k = 0; k + 1 < sizeof cuts / sizeof cuts[0]; k++)
    H_OK(TRITONSERVER_InferenceRequestAppendInputData(r, "INPUT0", all + cuts[k], cuts[k + 1] - cuts[k],
                                                      TRITONSERVER_MEMORY_CPU, 0));
  h_call *c = h_infer(f.s, r);
  h_output v;
  cr_assert(h_find_output(one_ok(c), "OUTPUT0", &v));
  cr_assert_eq(v.dtype, TRITONSERVER_TYPE_BYTES);
  expect_shape(&v, shape, 1);
  cr_assert_eq(v.size, n);
  cr_assert_eq(memcmp(v.base, all, n), 0);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  fixture_down(&f);
}

Test(infer, empty_bytes_tensor_and_all_empty_strings) {
  fixture f = {h_tmpdir(), NULL};
  h_model(f.repo, "strs", IDENT_1("strs", "TYPE_STRING", "[ -1 ]", ""), "1");
  f.s = h_server_new(h_options(f.repo, TRITONSERVER_MODEL_CONTROL_NONE));
  /* Three empty strings. */
  uint8_t buf[12] = {0};
  int64_t shape[1] = {3};
  TRITONSERVER_InferenceRequest *r = h_request(f.s, "strs");
  h_add_input(r, "INPUT0", TRITONSERVER_TYPE_BYTES, shape, 1, buf, sizeof buf);
  h_call *c = h_infer(f.s, r);
  h_output v;
  cr_assert(h_find_output(one_ok(c), "OUTPUT0", &v));
  cr_assert_eq(v.size, sizeof buf);
  cr_assert_eq(memcmp(v.base, buf, sizeof buf), 0);
  h_call_free(c);
  /* Zero elements, zero bytes. */
  H_OK(TRITONSERVER_InferenceRequestRemoveAllInputs(r));
  shape[0] = 0;
  H_OK(TRITONSERVER_InferenceRequestAddInput(r, "INPUT0", TRITONSERVER_TYPE_BYTES, shape, 1));
  c = h_infer(f.s, r);
  cr_assert(h_find_output(one_ok(c), "OUTPUT0", &v));
  cr_assert_eq(v.size, 0);
  expect_shape(&v, shape, 1);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  fixture_down(&f);
}

/* ------------------------------------------------------------ batching */

Test(infer, batched_shapes) {
  fixture f = {h_tmpdir(), NULL};
  h_model(f.repo, "b",
          "name: \"b\"\nbackend: \"identity\"\nmax_batch_size: 8\n"
          "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 3, 4 ] } ]\n"
          "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ 3, 4 ] } ]\n",
          "1");
  f.s = h_server_new(h_options(f.repo, TRITONSERVER_MODEL_CONTROL_NONE));
  float in[8 * 12];
  for (int i = 0; i < 8 * 12; i++) in[i] = (float)i * 0.5f;
  const int64_t batches[] = {1, 2, 8};
  for (size_t k = 0; k < 3; k++) {
    int64_t shape[3] = {batches[k], 3, 4};
    TRITONSERVER_InferenceRequest *r = h_request(f.s, "b");
    h_add_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, shape, 3, in, (size_t)batches[k] * 12 * sizeof(float));
    h_call *c = h_infer(f.s, r);
    h_output v;
    cr_assert(h_find_output(one_ok(c), "OUTPUT0", &v));
    expect_shape(&v, shape, 3);
    cr_assert_eq(v.size, (size_t)batches[k] * 12 * sizeof(float));
    cr_assert_eq(memcmp(v.base, in, v.size), 0);
    h_call_free(c);
    H_OK(TRITONSERVER_InferenceRequestDelete(r));
  }
  fixture_down(&f);
}

/* ---------------------------------------------------- requested outputs */

static const char *kTwoIo = "name: \"two\"\nbackend: \"identity\"\nmax_batch_size: 0\n"
                            "input [ { name: \"INPUT0\" data_type: TYPE_INT32 dims: [ 2 ] },"
                            " { name: \"INPUT1\" data_type: TYPE_INT32 dims: [ 2 ] } ]\n"
                            "output [ { name: \"OUTPUT0\" data_type: TYPE_INT32 dims: [ 2 ] },"
                            " { name: \"OUTPUT1\" data_type: TYPE_INT32 dims: [ 2 ] } ]\n";

Test(infer, requested_outputs_only) {
  fixture f = {h_tmpdir(), NULL};
  h_model(f.repo, "two", kTwoIo, "1");
  f.s = h_server_new(h_options(f.repo, TRITONSERVER_MODEL_CONTROL_NONE));
  int32_t a[2] = {1, 2}, b[2] = {3, 4};
  int64_t shape[1] = {2};
  TRITONSERVER_InferenceRequest *r = h_request(f.s, "two");
  h_add_input(r, "INPUT0", TRITONSERVER_TYPE_INT32, shape, 1, a, sizeof a);
  h_add_input(r, "INPUT1", TRITONSERVER_TYPE_INT32, shape, 1, b, sizeof b);
  H_OK(TRITONSERVER_InferenceRequestAddRequestedOutput(r, "OUTPUT1"));
  h_call *c = h_infer(f.s, r);
  TRITONSERVER_InferenceResponse *resp = one_ok(c);
  cr_assert_eq(output_count(resp), 1);
  h_output v;
  cr_assert(h_find_output(resp, "OUTPUT1", &v));
  cr_assert_eq(memcmp(v.base, b, sizeof b), 0);
  cr_assert_not(h_find_output(resp, "OUTPUT0", &v));
  h_call_free(c);

  /* No requested output: every output comes back. */
  H_OK(TRITONSERVER_InferenceRequestRemoveAllRequestedOutputs(r));
  c = h_infer(f.s, r);
  cr_assert_eq(output_count(one_ok(c)), 2);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  fixture_down(&f);
}

/* A requested output whose input is optional and left out: zeros of the
 * configured datatype and dims, after the batch size (Triton's identity
 * backend, qa/L0_optional_input); a required one's absence stays an
 * error (the core refuses the request first). */
Test(infer, an_optional_input_left_out_answers_zeros) {
  fixture f = {h_tmpdir(), NULL};
  h_model(f.repo, "opt",
          "name: \"opt\"\nbackend: \"identity\"\nmax_batch_size: 4\n"
          "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 2 ] optional: true },\n"
          "        { name: \"INPUT1\" data_type: TYPE_INT16 dims: [ 3 ] optional: true } ]\n"
          "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ 2 ] },\n"
          "         { name: \"OUTPUT1\" data_type: TYPE_INT16 dims: [ 3 ] } ]\n",
          "1");
  f.s = h_server_new(h_options(f.repo, TRITONSERVER_MODEL_CONTROL_NONE));
  float a[4] = {1, 2, 3, 4};
  int64_t shape[2] = {2, 2};
  TRITONSERVER_InferenceRequest *r = h_request(f.s, "opt");
  h_add_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, shape, 2, a, sizeof a);
  H_OK(TRITONSERVER_InferenceRequestAddRequestedOutput(r, "OUTPUT0"));
  H_OK(TRITONSERVER_InferenceRequestAddRequestedOutput(r, "OUTPUT1"));
  h_call *c = h_infer(f.s, r);
  TRITONSERVER_InferenceResponse *resp = one_ok(c);
  h_output v;
  cr_assert(h_find_output(resp, "OUTPUT0", &v));
  cr_assert_eq(memcmp(v.base, a, sizeof a), 0);
  cr_assert(h_find_output(resp, "OUTPUT1", &v));
  const int64_t want[2] = {2, 3};
  expect_shape(&v, want, 2);
  cr_assert_eq(v.dtype, TRITONSERVER_TYPE_INT16);
  cr_assert_eq(v.size, 2 * 3 * sizeof(int16_t));
  for (size_t i = 0; i < 6; i++) cr_assert_eq(((const int16_t *)v.base)[i], 0);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  fixture_down(&f);
}

Test(infer, unknown_requested_output_rejected) {
  fixture f = {h_tmpdir(), NULL};
  h_model(f.repo, "two", kTwoIo, "1");
  f.s = h_server_new(h_options(f.repo, TRITONSERVER_MODEL_CONTROL_NONE));
  int32_t a[2] = {1, 2};
  int64_t shape[1] = {2};
  TRITONSERVER_InferenceRequest *r = h_request(f.s, "two");
  h_add_input(r, "INPUT0", TRITONSERVER_TYPE_INT32, shape, 1, a, sizeof a);
  h_add_input(r, "INPUT1", TRITONSERVER_TYPE_INT32, shape, 1, a, sizeof a);
  H_OK(TRITONSERVER_InferenceRequestAddRequestedOutput(r, "NOPE"));
  h_call *c = h_call_new();
  h_bind(r, c);
  TRITONSERVER_Error *e = TRITONSERVER_ServerInferAsync(f.s, r, NULL);
  cr_assert_not_null(e);
  cr_assert_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_INVALID_ARG);
  cr_assert(strstr(TRITONSERVER_ErrorMessage(e), "NOPE"), "message: %s", TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
  cr_assert_eq(c->n, 0);
  cr_assert_eq(c->released, 0);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  fixture_down(&f);
}

/* -------------------------------------------------------------- add_sub */

#define SIMPLE_CFG(name, type)                                                                                         \
  "name: \"" name "\"\nbackend: \"add_sub\"\nmax_batch_size: 8\n"                                                      \
  "input [ { name: \"INPUT0\" data_type: " type " dims: [ 16 ] },"                                                     \
  " { name: \"INPUT1\" data_type: " type " dims: [ 16 ] } ]\n"                                                         \
  "output [ { name: \"OUTPUT0\" data_type: " type " dims: [ 16 ] },"                                                   \
  " { name: \"OUTPUT1\" data_type: " type " dims: [ 16 ] } ]\n"

Test(infer, add_sub_int32_simple) {
  fixture f = {h_tmpdir(), NULL};
  h_model(f.repo, "simple", SIMPLE_CFG("simple", "TYPE_INT32"), "1");
  f.s = h_server_new(h_options(f.repo, TRITONSERVER_MODEL_CONTROL_NONE));
  int32_t a[16], b[16];
  for (int i = 0; i < 16; i++) a[i] = i, b[i] = 1;
  int64_t shape[2] = {1, 16};
  TRITONSERVER_InferenceRequest *r = h_request(f.s, "simple");
  h_add_input(r, "INPUT0", TRITONSERVER_TYPE_INT32, shape, 2, a, sizeof a);
  h_add_input(r, "INPUT1", TRITONSERVER_TYPE_INT32, shape, 2, b, sizeof b);
  h_call *c = h_infer(f.s, r);
  TRITONSERVER_InferenceResponse *resp = one_ok(c);
  h_output sum, diff;
  cr_assert(h_find_output(resp, "OUTPUT0", &sum));
  cr_assert(h_find_output(resp, "OUTPUT1", &diff));
  cr_assert_eq(sum.dtype, TRITONSERVER_TYPE_INT32);
  expect_shape(&sum, shape, 2);
  expect_shape(&diff, shape, 2);
  cr_assert_eq(sum.size, sizeof a);
  cr_assert_eq(diff.size, sizeof a);
  for (int i = 0; i < 16; i++) {
    cr_assert_eq(((const int32_t *)sum.base)[i], i + 1);
    cr_assert_eq(((const int32_t *)diff.base)[i], i - 1);
  }
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  fixture_down(&f);
}

Test(infer, add_sub_fp32_batch_of_two) {
  fixture f = {h_tmpdir(), NULL};
  h_model(f.repo, "simplef", SIMPLE_CFG("simplef", "TYPE_FP32"), "1");
  f.s = h_server_new(h_options(f.repo, TRITONSERVER_MODEL_CONTROL_NONE));
  float a[32], b[32];
  for (int i = 0; i < 32; i++) a[i] = (float)i * 1.5f, b[i] = 0.25f * (float)(i % 5);
  int64_t shape[2] = {2, 16};
  TRITONSERVER_InferenceRequest *r = h_request(f.s, "simplef");
  h_add_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, shape, 2, a, sizeof a);
  h_add_input(r, "INPUT1", TRITONSERVER_TYPE_FP32, shape, 2, b, sizeof b);
  H_OK(TRITONSERVER_InferenceRequestAddRequestedOutput(r, "OUTPUT1"));
  h_call *c = h_infer(f.s, r);
  TRITONSERVER_InferenceResponse *resp = one_ok(c);
  cr_assert_eq(output_count(resp), 1);
  h_output diff;
  cr_assert(h_find_output(resp, "OUTPUT1", &diff));
  cr_assert_eq(diff.dtype, TRITONSERVER_TYPE_FP32);
  expect_shape(&diff, shape, 2);
  for (int i = 0; i < 32; i++) cr_assert_float_eq(((const float *)diff.base)[i], a[i] - b[i], 1e-6);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestRemoveAllRequestedOutputs(r));
  c = h_infer(f.s, r);
  h_output sum;
  cr_assert(h_find_output(one_ok(c), "OUTPUT0", &sum));
  for (int i = 0; i < 32; i++) cr_assert_float_eq(((const float *)sum.base)[i], a[i] + b[i], 1e-6);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  fixture_down(&f);
}

/* ------------------------------------------- ids, correlation, params */

static TRITONSERVER_InferenceRequest *ident4_request(TRITONSERVER_Server *s, const float *in) {
  int64_t shape[1] = {4};
  TRITONSERVER_InferenceRequest *r = h_request(s, "ident");
  h_add_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, shape, 1, in, 4 * sizeof(float));
  return r;
}

static fixture ident_fixture(const char *extra, TRITONSERVER_ModelControlMode mode) {
  fixture f = {h_tmpdir(), NULL};
  char cfg[1024];
  snprintf(cfg, sizeof cfg, IDENT_1("ident", "TYPE_FP32", "[ 4 ]", "%s"), extra);
  h_model(f.repo, "ident", cfg, "1");
  f.s = h_server_new(h_options(f.repo, mode));
  return f;
}

Test(infer, request_id_echoed) {
  fixture f = ident_fixture("", TRITONSERVER_MODEL_CONTROL_NONE);
  float in[4] = {1, 2, 3, 4};
  TRITONSERVER_InferenceRequest *r = ident4_request(f.s, in);
  const char *id = NULL;
  H_OK(TRITONSERVER_InferenceRequestId(r, &id));
  cr_assert_str_eq(id, "");
  H_OK(TRITONSERVER_InferenceRequestSetId(r, "req-42"));
  H_OK(TRITONSERVER_InferenceRequestId(r, &id));
  cr_assert_str_eq(id, "req-42");
  h_call *c = h_infer(f.s, r);
  TRITONSERVER_InferenceResponse *resp = one_ok(c);
  H_OK(TRITONSERVER_InferenceResponseId(resp, &id));
  cr_assert_str_eq(id, "req-42");
  const char *mname = NULL;
  int64_t mver = 0;
  H_OK(TRITONSERVER_InferenceResponseModel(resp, &mname, &mver));
  cr_assert_str_eq(mname, "ident");
  cr_assert_eq(mver, 1);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  fixture_down(&f);
}

Test(infer, correlation_ids) {
  fixture f = ident_fixture("", TRITONSERVER_MODEL_CONTROL_NONE);
  float in[4] = {1, 2, 3, 4};
  TRITONSERVER_InferenceRequest *r = ident4_request(f.s, in);
  uint64_t u = 1;
  const char *str = NULL;
  H_OK(TRITONSERVER_InferenceRequestCorrelationId(r, &u));
  cr_assert_eq(u, 0);

  H_OK(TRITONSERVER_InferenceRequestSetCorrelationId(r, UINT64_MAX - 5));
  H_OK(TRITONSERVER_InferenceRequestCorrelationId(r, &u));
  cr_assert_eq(u, UINT64_MAX - 5);
  TRITONSERVER_Error *e = TRITONSERVER_InferenceRequestCorrelationIdString(r, &str);
  cr_assert_not_null(e, "string getter must fail on an integer id");
  TRITONSERVER_ErrorDelete(e);
  h_call *c = h_infer(f.s, r);
  one_ok(c);
  h_call_free(c);

  H_OK(TRITONSERVER_InferenceRequestSetCorrelationIdString(r, "session-7"));
  H_OK(TRITONSERVER_InferenceRequestCorrelationIdString(r, &str));
  cr_assert_str_eq(str, "session-7");
  e = TRITONSERVER_InferenceRequestCorrelationId(r, &u);
  cr_assert_not_null(e, "integer getter must fail on a string id");
  TRITONSERVER_ErrorDelete(e);
  c = h_infer(f.s, r);
  one_ok(c);
  h_call_free(c);

  /* Back to an integer. */
  H_OK(TRITONSERVER_InferenceRequestSetCorrelationId(r, 9));
  H_OK(TRITONSERVER_InferenceRequestCorrelationId(r, &u));
  cr_assert_eq(u, 9);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  fixture_down(&f);
}

/* Request parameters reach the backend with their names, types and
 * values: echo_params gives each response its request's parameters. */
Test(infer, request_parameters_accepted) {
  fixture f = {h_tmpdir(), NULL};
  const char *cfg = "name: \"echo\"\nbackend: \"echo_params\"\nmax_batch_size: 0\n"
                    "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n"
                    "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n";
  h_model(f.repo, "echo", cfg, "1");
  f.s = h_server_new(h_options(f.repo, TRITONSERVER_MODEL_CONTROL_NONE));
  float in[4] = {1, 2, 3, 4};
  TRITONSERVER_InferenceRequest *r = NULL;
  H_OK(TRITONSERVER_InferenceRequestNew(&r, f.s, "echo", -1));
  const int64_t shape[1] = {4};
  H_OK(TRITONSERVER_InferenceRequestAddInput(r, "INPUT0", TRITONSERVER_TYPE_FP32, shape, 1));
  H_OK(TRITONSERVER_InferenceRequestAppendInputData(r, "INPUT0", in, sizeof in, TRITONSERVER_MEMORY_CPU, 0));
  H_OK(TRITONSERVER_InferenceRequestSetStringParameter(r, "s", "text"));
  H_OK(TRITONSERVER_InferenceRequestSetIntParameter(r, "i", -12345678901LL));
  H_OK(TRITONSERVER_InferenceRequestSetBoolParameter(r, "b", true));
  H_OK(TRITONSERVER_InferenceRequestSetDoubleParameter(r, "d", 2.5));
  h_call *c = h_infer(f.s, r);
  TRITONSERVER_InferenceResponse *resp = one_ok(c);
  uint32_t n = 99;
  H_OK(TRITONSERVER_InferenceResponseParameterCount(resp, &n));
  cr_assert_eq(n, 4, "the backend saw %u parameters, want 4", n);
  bool seen[4] = {false, false, false, false};
  for (uint32_t k = 0; k < n; k++) {
    const char *name = NULL;
    TRITONSERVER_ParameterType t;
    const void *val = NULL;
    H_OK(TRITONSERVER_InferenceResponseParameter(resp, k, &name, &t, &val));
    if (!strcmp(name, "s")) {
      cr_assert_eq(t, TRITONSERVER_PARAMETER_STRING);
      cr_assert_str_eq((const char *)val, "text");
      seen[0] = true;
    } else if (!strcmp(name, "i")) {
      cr_assert_eq(t, TRITONSERVER_PARAMETER_INT);
      cr_assert_eq(*(const int64_t *)val, -12345678901LL);
      seen[1] = true;
    } else if (!strcmp(name, "b")) {
      cr_assert_eq(t, TRITONSERVER_PARAMETER_BOOL);
      cr_assert(*(const bool *)val);
      seen[2] = true;
    } else if (!strcmp(name, "d")) {
      cr_assert_eq(t, TRITONSERVER_PARAMETER_DOUBLE);
      cr_assert_eq(*(const double *)val, 2.5);
      seen[3] = true;
    } else {
      cr_assert_fail("unexpected parameter '%s'", name);
    }
  }
  cr_assert(seen[0] && seen[1] && seen[2] && seen[3]);
  const char *name;
  TRITONSERVER_ParameterType t;
  const void *val;
  TRITONSERVER_Error *e = TRITONSERVER_InferenceResponseParameter(resp, n, &name, &t, &val);
  cr_assert_not_null(e, "parameter %u of a response with %u must fail", n, n);
  TRITONSERVER_ErrorDelete(e);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  fixture_down(&f);
}

/* ------------------------------------------------------ request lifecycle */

Test(infer, reuse_request_after_release) {
  fixture f = ident_fixture("", TRITONSERVER_MODEL_CONTROL_NONE);
  float in[4] = {1, 2, 3, 4};
  TRITONSERVER_InferenceRequest *r = ident4_request(f.s, in);
  for (int k = 0; k < 5; k++) {
    in[0] = (float)k; /* same buffer, new content each round */
    h_call *c = h_infer(f.s, r);
    h_output v;
    cr_assert(h_find_output(one_ok(c), "OUTPUT0", &v));
    cr_assert_eq(memcmp(v.base, in, sizeof in), 0, "round %d", k);
    cr_assert_eq(c->released, 1);
    h_call_free(c);
  }
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  fixture_down(&f);
}

/* Expects `err` to be INVALID_ARG with exactly `msg`, and deletes it. */
static void expect_invalid(TRITONSERVER_Error *err, const char *msg) {
  cr_assert_not_null(err, "expected: %s", msg);
  cr_assert_eq(TRITONSERVER_ErrorCode(err), TRITONSERVER_ERROR_INVALID_ARG);
  cr_assert_str_eq(TRITONSERVER_ErrorMessage(err), msg);
  TRITONSERVER_ErrorDelete(err);
}

/* Requests with many names find duplicates through the request's name
 * index (request_names.c, from 32 names on): duplicates are refused with
 * Triton's sentences (core e93e4a9 for outputs) after removals, re-adds
 * and RemoveAll as before, lookups by name still find every input, and
 * the unknown names fail the request as Triton fails it. */
Test(infer, many_names_duplicates_found_through_the_index) {
  fixture f = ident_fixture("", TRITONSERVER_MODEL_CONTROL_NONE);
  float in[4] = {1, 2, 3, 4};
  TRITONSERVER_InferenceRequest *r = ident4_request(f.s, in);
  const int64_t shape[1] = {4};
  char name[32];
  for (int round = 0; round < 2; round++) {
    for (int i = 0; i < 200; i++) {
      snprintf(name, sizeof name, "X%d", i);
      H_OK(TRITONSERVER_InferenceRequestAddInput(r, name, TRITONSERVER_TYPE_FP32, shape, 1));
      snprintf(name, sizeof name, "O%d", i);
      H_OK(TRITONSERVER_InferenceRequestAddRequestedOutput(r, name));
    }
    expect_invalid(TRITONSERVER_InferenceRequestAddInput(r, "X150", TRITONSERVER_TYPE_FP32, shape, 1),
                   "[request id: <id_unknown>] input 'X150' already exists in request");
    expect_invalid(TRITONSERVER_InferenceRequestAddInput(r, "INPUT0", TRITONSERVER_TYPE_FP32, shape, 1),
                   "[request id: <id_unknown>] input 'INPUT0' already exists in request");
    expect_invalid(TRITONSERVER_InferenceRequestAddRequestedOutput(r, "O199"),
                   "[request id: <id_unknown>] output 'O199' already exists in request");
    /* A removal, then the same name again: accepted once, refused twice. */
    H_OK(TRITONSERVER_InferenceRequestRemoveInput(r, "X7"));
    H_OK(TRITONSERVER_InferenceRequestRemoveRequestedOutput(r, "O7"));
    H_OK(TRITONSERVER_InferenceRequestAddInput(r, "X7", TRITONSERVER_TYPE_FP32, shape, 1));
    H_OK(TRITONSERVER_InferenceRequestAddRequestedOutput(r, "O7"));
    expect_invalid(TRITONSERVER_InferenceRequestAddInput(r, "X7", TRITONSERVER_TYPE_FP32, shape, 1),
                   "[request id: <id_unknown>] input 'X7' already exists in request");
    expect_invalid(TRITONSERVER_InferenceRequestAddRequestedOutput(r, "O7"),
                   "[request id: <id_unknown>] output 'O7' already exists in request");
    /* Data goes to the input found by name, the last one added included. */
    H_OK(TRITONSERVER_InferenceRequestAppendInputData(r, "X7", in, sizeof in, TRITONSERVER_MEMORY_CPU, 0));
    H_OK(TRITONSERVER_InferenceRequestAppendInputData(r, "X199", in, sizeof in, TRITONSERVER_MEMORY_CPU, 0));
    expect_invalid(TRITONSERVER_InferenceRequestAppendInputData(r, "X200", in, sizeof in, TRITONSERVER_MEMORY_CPU, 0),
                   "[request id: <id_unknown>] input 'X200' does not exist in request");
    /* Back to the one input: the next round builds the index again. */
    H_OK(TRITONSERVER_InferenceRequestRemoveAllRequestedOutputs(r));
    for (int i = 0; i < 200; i++) {
      snprintf(name, sizeof name, "X%d", i);
      H_OK(TRITONSERVER_InferenceRequestRemoveInput(r, name));
    }
  }
  h_call *c = h_infer(f.s, r);
  h_output v;
  cr_assert(h_find_output(one_ok(c), "OUTPUT0", &v));
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  fixture_down(&f);
}

/* More inputs, buffers, dimensions, requested and returned outputs and
 * longer names and ids than a request and a response keep inline
 * (request.h, response.h); then some removed, re-added and everything sent
 * again with the same request, so moved inputs must still be whole. */
#define WIDE_LONG "_name_longer_than_the_inline_room_of_32_bytes"
#define WIDE_IO(dir, s, dims) " { name: \"" dir s "\" data_type: TYPE_INT32 dims: " dims " optional: true }"
#define WIDE_CONFIG                                                                                                    \
  "name: \"wide\"\nbackend: \"identity\"\nmax_batch_size: 0\ninput [" WIDE_IO("INPUT", "0", "[ 4 ]") "," WIDE_IO(      \
      "INPUT", "1",                                                                                                    \
      "[ 4 ]") "," WIDE_IO("INPUT", "2",                                                                               \
                           "[ 4 ]") "," WIDE_IO("INPUT", "3",                                                          \
                                                "[ 4 ]") "," WIDE_IO("INPUT", WIDE_LONG,                               \
                                                                     "[ 1, 1, 1, 1, 1, 4 ]") " ]\noutput ["            \
                                                                                             " { name: \"OUTPUT0\" "   \
                                                                                             "data_type: TYPE_INT32 "  \
                                                                                             "dims: [ 4 ] },"          \
                                                                                             " { name: \"OUTPUT1\" "   \
                                                                                             "data_type: TYPE_INT32 "  \
                                                                                             "dims: [ 4 ] },"          \
                                                                                             " { name: \"OUTPUT2\" "   \
                                                                                             "data_type: TYPE_INT32 "  \
                                                                                             "dims: [ 4 ] },"          \
                                                                                             " { name: \"OUTPUT3\" "   \
                                                                                             "data_type: TYPE_INT32 "  \
                                                                                             "dims: [ 4 ] },"          \
                                                                                             " { name: "               \
                                                                                             "\"OUTPUT" WIDE_LONG      \
                                                                                             "\" data_type: "          \
                                                                                             "TYPE_INT32 dims: [ 1, "  \
                                                                                             "1, 1, 1, 1, 4 ] } ]\n"

static const char *const wide_suffix[5] = {"0", "1", "2", "3", WIDE_LONG};

/* One good response holding exactly the outputs flagged in `want`, each a
 * copy of its input. */
static void wide_expect(h_call *c, int32_t data[5][4], const bool want[5]) {
  TRITONSERVER_InferenceResponse *resp = one_ok(c);
  uint32_t n = 0;
  for (int i = 0; i < 5; i++) {
    char name[64];
    snprintf(name, sizeof name, "OUTPUT%s", wide_suffix[i]);
    h_output v;
    bool got = h_find_output(resp, name, &v);
    cr_assert_eq(got, want[i], "%s: present %d, expected %d", name, got, want[i]);
    if (!got) continue;
    n++;
    cr_assert_eq(v.size, sizeof data[i], "%s", name);
    cr_assert_eq(memcmp(v.base, data[i], sizeof data[i]), 0, "%s", name);
    const int64_t shape6[6] = {1, 1, 1, 1, 1, 4}, shape1[1] = {4};
    if (i == 4)
      expect_shape(&v, shape6, 6);
    else
      expect_shape(&v, shape1, 1);
  }
  cr_assert_eq(output_count(resp), n);
  const char *id = NULL;
  H_OK(TRITONSERVER_InferenceResponseId(resp, &id));
  cr_assert_str_eq(id, "short");
}

static void wide_request_output(TRITONSERVER_InferenceRequest *r, int i) {
  char name[64];
  snprintf(name, sizeof name, "OUTPUT%s", wide_suffix[i]);
  H_OK(TRITONSERVER_InferenceRequestAddRequestedOutput(r, name));
}

Test(infer, many_inputs_and_outputs_removed_readded_reused) {
  fixture f = {h_tmpdir(), NULL};
  h_model(f.repo, "wide", WIDE_CONFIG, "1");
  f.s = h_server_new(h_options(f.repo, TRITONSERVER_MODEL_CONTROL_NONE));
  int32_t data[5][4];
  for (int i = 0; i < 5; i++)
    for (int k = 0; k < 4; k++) data[i][k] = i * 100 + k;
  const int64_t shape[1] = {4};
  TRITONSERVER_InferenceRequest *r = h_request(f.s, "wide");
  /* INPUT0 in three buffers; INPUT3 and the long one raw, the latter with
   * six dimensions from the configuration. */
  H_OK(TRITONSERVER_InferenceRequestAddInput(r, "INPUT0", TRITONSERVER_TYPE_INT32, shape, 1));
  H_OK(TRITONSERVER_InferenceRequestAppendInputData(r, "INPUT0", &data[0][0], 4, TRITONSERVER_MEMORY_CPU, 0));
  H_OK(TRITONSERVER_InferenceRequestAppendInputData(r, "INPUT0", &data[0][1], 4, TRITONSERVER_MEMORY_CPU, 0));
  H_OK(TRITONSERVER_InferenceRequestAppendInputData(r, "INPUT0", &data[0][2], 8, TRITONSERVER_MEMORY_CPU, 0));
  h_add_input(r, "INPUT1", TRITONSERVER_TYPE_INT32, shape, 1, data[1], sizeof data[1]);
  h_add_input(r, "INPUT2", TRITONSERVER_TYPE_INT32, shape, 1, data[2], sizeof data[2]);
  H_OK(TRITONSERVER_InferenceRequestAddRawInput(r, "INPUT3"));
  H_OK(TRITONSERVER_InferenceRequestAppendInputData(r, "INPUT3", data[3], sizeof data[3], TRITONSERVER_MEMORY_CPU, 0));
  H_OK(TRITONSERVER_InferenceRequestAddRawInput(r, "INPUT" WIDE_LONG));
  H_OK(TRITONSERVER_InferenceRequestAppendInputData(r, "INPUT" WIDE_LONG, data[4], sizeof data[4],
                                                    TRITONSERVER_MEMORY_CPU, 0));
  for (int i = 0; i < 5; i++) wide_request_output(r, i);
  /* A long id, then a short one; each time set again from its own storage. */
  const char *id = NULL;
  H_OK(TRITONSERVER_InferenceRequestSetId(r, "an-id-longer-than-the-thirty-two-bytes-kept-inline"));
  H_OK(TRITONSERVER_InferenceRequestId(r, &id));
  H_OK(TRITONSERVER_InferenceRequestSetId(r, id));
  H_OK(TRITONSERVER_InferenceRequestId(r, &id));
  cr_assert_str_eq(id, "an-id-longer-than-the-thirty-two-bytes-kept-inline");
  H_OK(TRITONSERVER_InferenceRequestSetId(r, "short"));
  H_OK(TRITONSERVER_InferenceRequestId(r, &id));
  H_OK(TRITONSERVER_InferenceRequestSetId(r, id));
  H_OK(TRITONSERVER_InferenceRequestId(r, &id));
  cr_assert_str_eq(id, "short");

  const bool all[5] = {true, true, true, true, true};
  for (int round = 0; round < 3; round++) {
    h_call *c = h_infer(f.s, r);
    wide_expect(c, data, all);
    h_call_free(c);
  }
  /* Removed from the front and the middle: the inputs behind them move. */
  H_OK(TRITONSERVER_InferenceRequestRemoveInput(r, "INPUT0"));
  H_OK(TRITONSERVER_InferenceRequestRemoveInput(r, "INPUT2"));
  H_OK(TRITONSERVER_InferenceRequestRemoveRequestedOutput(r, "OUTPUT0"));
  H_OK(TRITONSERVER_InferenceRequestRemoveRequestedOutput(r, "OUTPUT2"));
  const bool some[5] = {false, true, false, true, true};
  for (int round = 0; round < 2; round++) {
    h_call *c = h_infer(f.s, r);
    wide_expect(c, data, some);
    h_call_free(c);
  }
  /* Added again, now behind the others. */
  h_add_input(r, "INPUT2", TRITONSERVER_TYPE_INT32, shape, 1, data[2], sizeof data[2]);
  h_add_input(r, "INPUT0", TRITONSERVER_TYPE_INT32, shape, 1, data[0], sizeof data[0]);
  wide_request_output(r, 2);
  wide_request_output(r, 0);
  for (int round = 0; round < 2; round++) {
    h_call *c = h_infer(f.s, r);
    wide_expect(c, data, all);
    h_call_free(c);
  }
  /* Everything removed, then one of each again. */
  H_OK(TRITONSERVER_InferenceRequestRemoveAllInputs(r));
  H_OK(TRITONSERVER_InferenceRequestRemoveAllRequestedOutputs(r));
  H_OK(TRITONSERVER_InferenceRequestAddRawInput(r, "INPUT" WIDE_LONG));
  H_OK(TRITONSERVER_InferenceRequestAppendInputData(r, "INPUT" WIDE_LONG, data[4], sizeof data[4],
                                                    TRITONSERVER_MEMORY_CPU, 0));
  wide_request_output(r, 4);
  const bool last[5] = {false, false, false, false, true};
  for (int round = 0; round < 2; round++) {
    h_call *c = h_infer(f.s, r);
    wide_expect(c, data, last);
    h_call_free(c);
  }
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  fixture_down(&f);
}

Test(infer, in_flight_request_rejected) {
  fixture f = ident_fixture("parameters { key: \"execute_delay_ms\" value { string_value: \"50\" } }\n",
                            TRITONSERVER_MODEL_CONTROL_NONE);
  float in[4] = {1, 2, 3, 4};
  TRITONSERVER_InferenceRequest *r = ident4_request(f.s, in);
  h_call *c = h_call_new();
  h_bind(r, c);
  H_OK(TRITONSERVER_ServerInferAsync(f.s, r, NULL));
  TRITONSERVER_Error *e = TRITONSERVER_ServerInferAsync(f.s, r, NULL);
  cr_assert_not_null(e, "second InferAsync of an in-flight request must fail");
  TRITONSERVER_ErrorDelete(e);
  /* Modifying or deleting it in flight fails too. */
  e = TRITONSERVER_InferenceRequestSetId(r, "x");
  cr_assert_not_null(e);
  TRITONSERVER_ErrorDelete(e);
  e = TRITONSERVER_InferenceRequestDelete(r);
  cr_assert_not_null(e);
  TRITONSERVER_ErrorDelete(e);
  cr_assert(h_wait(c, 10000));
  one_ok(c);
  cr_assert_eq(c->released, 1);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  fixture_down(&f);
}

Test(infer, unloaded_model_unavailable) {
  fixture f = ident_fixture("", TRITONSERVER_MODEL_CONTROL_EXPLICIT);
  H_OK(TRITONSERVER_ServerLoadModel(f.s, "ident"));
  float in[4] = {1, 2, 3, 4};
  TRITONSERVER_InferenceRequest *r = ident4_request(f.s, in);
  H_OK(TRITONSERVER_ServerUnloadModel(f.s, "ident"));
  h_call *c = h_call_new();
  h_bind(r, c);
  TRITONSERVER_Error *e = TRITONSERVER_ServerInferAsync(f.s, r, NULL);
  cr_assert_not_null(e, "InferAsync on an unloaded model must fail");
  cr_assert_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_UNAVAILABLE, "%s: %s", TRITONSERVER_ErrorCodeString(e),
               TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
  usleep(20000);
  cr_assert_eq(c->n, 0, "no response callback may fire");
  cr_assert_eq(c->released, 0, "no release callback may fire");
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  /* New requests for it fail at creation. */
  TRITONSERVER_InferenceRequest *r2 = NULL;
  e = TRITONSERVER_InferenceRequestNew(&r2, f.s, "ident", -1);
  cr_assert_not_null(e);
  TRITONSERVER_ErrorDelete(e);
  fixture_down(&f);
}

Test(infer, one_megabyte_round_trip) {
  fixture f = {h_tmpdir(), NULL};
  h_model(f.repo, "big", IDENT_1("big", "TYPE_UINT8", "[ -1 ]", ""), "1");
  f.s = h_server_new(h_options(f.repo, TRITONSERVER_MODEL_CONTROL_NONE));
  size_t n = 1u << 20;
  uint8_t *in = malloc(n);
  for (size_t i = 0; i < n; i++) in[i] = (uint8_t)(i * 2654435761u >> 13);
  int64_t shape[1] = {(int64_t)n};
  TRITONSERVER_InferenceRequest *r = h_request(f.s, "big");
  h_add_input(r, "INPUT0", TRITONSERVER_TYPE_UINT8, shape, 1, in, n);
  h_call *c = h_infer(f.s, r);
  h_output v;
  cr_assert(h_find_output(one_ok(c), "OUTPUT0", &v));
  cr_assert_eq(v.size, n);
  expect_shape(&v, shape, 1);
  cr_assert_eq(memcmp(v.base, in, n), 0);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  free(in);
  fixture_down(&f);
}

Test(infer, many_concurrent_requests_release_all_buffers) {
  fixture f = ident_fixture("", TRITONSERVER_MODEL_CONTROL_NONE);
  enum { N = 32 };
  float in[N][4];
  TRITONSERVER_InferenceRequest *r[N];
  h_call *c[N];
  for (int k = 0; k < N; k++) {
    for (int j = 0; j < 4; j++) in[k][j] = (float)(k * 4 + j);
    r[k] = ident4_request(f.s, in[k]);
    c[k] = h_call_new();
    h_bind(r[k], c[k]);
    H_OK(TRITONSERVER_ServerInferAsync(f.s, r[k], NULL));
  }
  for (int k = 0; k < N; k++) {
    cr_assert(h_wait(c[k], 10000));
    h_output v;
    cr_assert(h_find_output(one_ok(c[k]), "OUTPUT0", &v));
    cr_assert_eq(memcmp(v.base, in[k], sizeof in[k]), 0);
    h_call_free(c[k]); /* checks live_buffers == 0 */
    H_OK(TRITONSERVER_InferenceRequestDelete(r[k]));
  }
  fixture_down(&f);
}

/* Release callback that deletes the request, as many clients do. */
typedef struct del_ctx {
  h_call *c;
  atomic_int deleted;
} del_ctx;

static void release_and_delete(TRITONSERVER_InferenceRequest *req, const uint32_t flags, void *userp) {
  del_ctx *d = userp;
  TRITONSERVER_Error *e = TRITONSERVER_InferenceRequestDelete(req);
  if (e)
    TRITONSERVER_ErrorDelete(e);
  else
    atomic_store(&d->deleted, 1);
  h_on_release(req, flags, d->c);
}

Test(infer, delete_request_in_release_callback) {
  fixture f = ident_fixture("", TRITONSERVER_MODEL_CONTROL_NONE);
  float in[4] = {1, 2, 3, 4};
  for (int k = 0; k < 8; k++) {
    TRITONSERVER_InferenceRequest *r = ident4_request(f.s, in);
    del_ctx d = {h_call_new(), 0};
    H_OK(TRITONSERVER_InferenceRequestSetReleaseCallback(r, release_and_delete, &d));
    H_OK(TRITONSERVER_InferenceRequestSetResponseCallback(r, h_allocator(), d.c, h_on_response, d.c));
    H_OK(TRITONSERVER_ServerInferAsync(f.s, r, NULL));
    cr_assert(h_wait(d.c, 10000));
    cr_assert_eq(atomic_load(&d.deleted), 1, "Delete inside the release callback failed");
    one_ok(d.c);
    h_call_free(d.c);
  }
  fixture_down(&f);
}

Test(infer, missing_response_callback_rejected) {
  fixture f = ident_fixture("", TRITONSERVER_MODEL_CONTROL_NONE);
  float in[4] = {1, 2, 3, 4};
  TRITONSERVER_InferenceRequest *r = ident4_request(f.s, in);
  TRITONSERVER_Error *e = TRITONSERVER_ServerInferAsync(f.s, r, NULL);
  cr_assert_not_null(e, "InferAsync without a response callback must fail");
  cr_expect_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_INVALID_ARG);
  TRITONSERVER_ErrorDelete(e);
  h_call *c = h_infer(f.s, r); /* fine once callbacks are set */
  one_ok(c);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  fixture_down(&f);
}

Test(infer, request_for_unknown_model_or_version) {
  fixture f = ident_fixture("", TRITONSERVER_MODEL_CONTROL_NONE);
  TRITONSERVER_InferenceRequest *r = NULL;
  TRITONSERVER_Error *e = TRITONSERVER_InferenceRequestNew(&r, f.s, "nope", -1);
  cr_assert_not_null(e);
  cr_expect(strstr(TRITONSERVER_ErrorMessage(e), "nope"), "%s", TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
  e = TRITONSERVER_InferenceRequestNew(&r, f.s, "ident", 3);
  cr_assert_not_null(e);
  TRITONSERVER_ErrorDelete(e);
  H_OK(TRITONSERVER_InferenceRequestNew(&r, f.s, "ident", 1));
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  fixture_down(&f);
}

/* ------------------------------------------------- inline execution */

/* The thread the last response callback ran on: written before
 * h_on_response takes the call's lock, read after h_wait took it. */
static pthread_t response_thread;

static void note_response_thread(TRITONSERVER_InferenceResponse *r, const uint32_t flags, void *userp) {
  response_thread = pthread_self();
  h_on_response(r, flags, userp);
}

/* Sends `n` requests to `model` (FP32 [4] in, identity-like) one after
 * another, pausing between them so the instance thread can go idle, and
 * returns the index of the first whose response callback ran on this
 * thread, that is which this thread ran inline (docs/core.md); n when
 * none did. Every later one must have run inline too: an inline
 * execution gives the instance back before InferAsync returns. */
static int first_inline(TRITONSERVER_Server *s, const char *model, int n) {
  float in[4] = {1, 2, 3, 4};
  int64_t shape[1] = {4};
  int first = n;
  for (int i = 0; i < n; i++) {
    TRITONSERVER_InferenceRequest *r = h_request(s, model);
    h_add_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, shape, 1, in, sizeof in);
    h_call *c = h_call_new();
    H_OK(TRITONSERVER_InferenceRequestSetReleaseCallback(r, h_on_release, c));
    H_OK(TRITONSERVER_InferenceRequestSetResponseCallback(r, h_allocator(), c, note_response_thread, c));
    H_OK(TRITONSERVER_ServerInferAsync(s, r, NULL));
    cr_assert(h_wait(c, 10000), "request %d of '%s' was not answered", i, model);
    cr_assert_null(h_response_error(c, 0), "request %d of '%s' failed", i, model);
    bool here = pthread_equal(response_thread, pthread_self());
    if (here && first == n) first = i;
    cr_expect(here || first == n, "request %d of '%s' went to the instance thread after %d ran inline", i, model,
              first);
    h_call_free(c);
    H_OK(TRITONSERVER_InferenceRequestDelete(r));
    usleep(2000);
  }
  return first;
}

Test(infer, fast_model_runs_inline_after_eight_executions) {
  /* 100 ms: a preempted execution on a loaded machine still counts as fast. */
  setenv("NEREID_INLINE_EXECUTION_MAX_US", "100000", 1);
  fixture f = {h_tmpdir(), NULL};
  h_model(f.repo, "fast", IDENT_1("fast", "TYPE_FP32", "[ 4 ]", ""), "1");
  f.s = h_server_new(h_options(f.repo, TRITONSERVER_MODEL_CONTROL_NONE));
  /* The first 8 prove the model fast on its thread; soon after, requests
   * run inline. */
  int first = first_inline(f.s, "fast", 24);
  cr_expect(first >= 8 && first < 24, "first request run inline: %d of 24", first);
  json_int_t ok = h_stat_count(f.s, "fast", "success");
  cr_expect_eq(ok, 24, "statistics counted %lld of 24 requests", (long long)ok);
  fixture_down(&f);
}

Test(infer, model_slower_than_the_limit_runs_on_its_thread) {
  setenv("NEREID_INLINE_EXECUTION_MAX_US", "1000", 1);
  fixture f = {h_tmpdir(), NULL};
  h_model(f.repo, "slow",
          "name: \"slow\"\nbackend: \"costly\"\nmax_batch_size: 0\n"
          "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n"
          "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n"
          "parameters { key: \"exec_us\" value { string_value: \"3000\" } }\n",
          "1");
  f.s = h_server_new(h_options(f.repo, TRITONSERVER_MODEL_CONTROL_NONE));
  cr_expect_eq(first_inline(f.s, "slow", 12), 12);
  fixture_down(&f);
}

/* A backend's NRDBACKEND_InlineExecutionMaxUs raises the default limit
 * for its models: 3 ms executions run inline on costly_relay (100 ms),
 * not on costly (the default 20 us). The environment still wins. */
Test(infer, backend_hint_raises_the_inline_limit_for_its_models) {
  unsetenv("NEREID_INLINE_EXECUTION_MAX_US");
  fixture f = {h_tmpdir(), NULL};
  const char *cfg = "name: \"%s\"\nbackend: \"%s\"\nmax_batch_size: 0\n"
                    "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n"
                    "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n"
                    "parameters { key: \"exec_us\" value { string_value: \"3000\" } }\n";
  char relay[512], plain[512];
  snprintf(relay, sizeof relay, cfg, "relay", "costly_relay");
  snprintf(plain, sizeof plain, cfg, "plain", "costly");
  h_model(f.repo, "relay", relay, "1");
  h_model(f.repo, "plain", plain, "1");
  f.s = h_server_new(h_options(f.repo, TRITONSERVER_MODEL_CONTROL_NONE));
  int first = first_inline(f.s, "relay", 16);
  cr_expect(first >= 8 && first < 16, "first request of costly_relay run inline: %d of 16", first);
  cr_expect_eq(first_inline(f.s, "plain", 12), 12);
  fixture_down(&f);

  setenv("NEREID_INLINE_EXECUTION_MAX_US", "0", 1);
  f = (fixture){h_tmpdir(), NULL};
  h_model(f.repo, "relay", relay, "1");
  f.s = h_server_new(h_options(f.repo, TRITONSERVER_MODEL_CONTROL_NONE));
  cr_expect_eq(first_inline(f.s, "relay", 16), 16);
  fixture_down(&f);
}

/* The Python backend asks for executions of up to 200 us inline (its
 * Execute relays to the stub process; docs/python.md). */
Test(infer, python_backend_exports_its_inline_limit) {
  void *lib = dlopen(NRD_BACKEND_DIR "/python/libtriton_python.so", RTLD_NOW | RTLD_LOCAL);
  cr_assert_not_null(lib, "%s", dlerror());
  uint32_t (*limit)(void) = (uint32_t(*)(void))dlsym(lib, "NRDBACKEND_InlineExecutionMaxUs");
  cr_assert_not_null(limit, "libtriton_python.so does not export NRDBACKEND_InlineExecutionMaxUs");
  cr_expect_eq(limit(), 200u);
  dlclose(lib);
}

/* Whether the i-th response of 'c' has the BOOL parameter 'name' true. */
static bool bool_parameter(h_call *c, size_t i, const char *name) {
  uint32_t n = 0;
  H_OK(TRITONSERVER_InferenceResponseParameterCount(c->responses[i], &n));
  for (uint32_t k = 0; k < n; k++) {
    const char *key = NULL;
    TRITONSERVER_ParameterType type;
    const void *v = NULL;
    H_OK(TRITONSERVER_InferenceResponseParameter(c->responses[i], k, &key, &type, &v));
    if (strcmp(key, name) == 0 && type == TRITONSERVER_PARAMETER_BOOL) return *(const bool *)v;
  }
  return false;
}

/* How many of 'n' requests to the bls model 'outer' had their target run
 * on the thread executing 'outer'; '*inline_calls' counts those the core
 * executed through NRDBACKEND_ModelInstanceExecuteInline (NULL: not
 * counted). */
static int bls_ran_here_counting(TRITONSERVER_Server *s, int n, int *inline_calls) {
  float in[4] = {1, 2, 3, 4};
  int64_t shape[1] = {4};
  int here = 0;
  for (int i = 0; i < n; i++) {
    TRITONSERVER_InferenceRequest *r = h_request(s, "outer");
    h_add_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, shape, 1, in, sizeof in);
    h_call *c = h_infer(s, r);
    cr_assert_null(h_response_error(c, 0), "request %d failed", i);
    here += bool_parameter(c, 0, "target_ran_here");
    if (inline_calls) *inline_calls += bool_parameter(c, 0, "executed_inline");
    h_call_free(c);
    H_OK(TRITONSERVER_InferenceRequestDelete(r));
  }
  return here;
}

static int bls_ran_here(TRITONSERVER_Server *s, int n) { return bls_ran_here_counting(s, n, NULL); }

/* A server with "fast" (identity) and "outer" (bls, calling "fast"). */
static fixture bls_fixture(void) {
  fixture f = {h_tmpdir(), NULL};
  h_model(f.repo, "fast", IDENT_1("fast", "TYPE_FP32", "[ 4 ]", ""), "1");
  h_model(f.repo, "outer",
          "name: \"outer\"\nbackend: \"bls\"\nmax_batch_size: 0\n"
          "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n"
          "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n"
          "parameters { key: \"target\" value { string_value: \"fast\" } }\n",
          "1");
  f.s = h_server_new(h_options(f.repo, TRITONSERVER_MODEL_CONTROL_NONE));
  return f;
}

/* A call an executing model waits for (BLS) runs inline on the executing
 * thread, once its target is proven fast; with inline execution off it
 * goes to the target's instance thread. */
Test(infer, bls_call_runs_inline_on_the_executing_thread) {
  setenv("NEREID_INLINE_EXECUTION_MAX_US", "100000", 1);
  fixture f = bls_fixture();
  int warm = bls_ran_here(f.s, 8); /* 'fast' proves itself on its thread */
  cr_expect_eq(warm, 0, "%d of the first 8 BLS calls ran inline", warm);
  /* Most, not all: a call that finds the target's instance still busy
   * with the previous one (its release not yet seen, or the 9th racing
   * the 8th's timing being noted) goes to the instance thread; under TSan
   * on a loaded 2-core machine that was 4 of 16. With inline execution
   * off (below) none runs here. */
  int here = bls_ran_here(f.s, 16);
  cr_expect(here >= 8, "%d of 16 BLS calls ran on the executing thread", here);
  fixture_down(&f);

  setenv("NEREID_INLINE_EXECUTION_MAX_US", "0", 1);
  f = bls_fixture();
  cr_expect_eq(bls_ran_here(f.s, 16), 0);
  fixture_down(&f);
}

/* A backend exporting NRDBACKEND_ModelInstanceExecuteInline gets its
 * inline executions there, the others through Execute. */
Test(infer, inline_executions_reach_the_backends_inline_entry_point) {
  setenv("NEREID_INLINE_EXECUTION_MAX_US", "100000", 1);
  fixture f = bls_fixture();
  int inline_calls = 0;
  bls_ran_here_counting(f.s, 8, &inline_calls); /* 'outer' proves itself on its thread */
  cr_expect_eq(inline_calls, 0, "%d of the first 8 executions came through the inline entry point", inline_calls);
  inline_calls = 0;
  bls_ran_here_counting(f.s, 16, &inline_calls);
  /* Most, as above (12 of 16 once under TSan on a loaded machine). */
  cr_expect(inline_calls >= 8, "%d of 16 executions came through the inline entry point", inline_calls);
  fixture_down(&f);

  setenv("NEREID_INLINE_EXECUTION_MAX_US", "0", 1);
  f = bls_fixture();
  inline_calls = 0;
  bls_ran_here_counting(f.s, 16, &inline_calls);
  cr_expect_eq(inline_calls, 0);
  fixture_down(&f);
}

Test(infer, inline_execution_can_be_turned_off) {
  setenv("NEREID_INLINE_EXECUTION_MAX_US", "0", 1);
  fixture f = {h_tmpdir(), NULL};
  h_model(f.repo, "fast", IDENT_1("fast", "TYPE_FP32", "[ 4 ]", ""), "1");
  f.s = h_server_new(h_options(f.repo, TRITONSERVER_MODEL_CONTROL_NONE));
  cr_expect_eq(first_inline(f.s, "fast", 20), 20);
  fixture_down(&f);
}
