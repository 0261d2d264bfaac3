/* identity and add_sub run a dynamic batch in one pass with the
 * backend_utils batch helpers (gather each input, scatter each output):
 * every request of the batch must get back its own rows, shape and
 * outputs. The batch is forced with preferred_batch_size equal to the sum
 * of the requests' rows and a long queue delay, and checked in the batch
 * statistics. */
#include <inttypes.h>
#include <jansson.h>

#include "harness.h"

#define ROWS_TOTAL 6

static TRITONSERVER_Server *start(const char *repo) {
  return h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE));
}

/* Model `name` of `backend` with INPUT0/1 and OUTPUT0/1 of `type` [3],
 * batched into one batch of ROWS_TOTAL rows. */
static void model(const char *repo, const char *name, const char *backend, const char *type) {
  char cfg[2048];
  snprintf(cfg, sizeof cfg,
           "name: \"%s\"\nbackend: \"%s\"\nmax_batch_size: 8\n"
           "input [ { name: \"INPUT0\" data_type: %s dims: [ 3 ] },"
           " { name: \"INPUT1\" data_type: %s dims: [ 3 ] } ]\n"
           "output [ { name: \"OUTPUT0\" data_type: %s dims: [ 3 ] },"
           " { name: \"OUTPUT1\" data_type: %s dims: [ 3 ] } ]\n"
           "instance_group [ { kind: KIND_CPU count: 1 } ]\n"
           "dynamic_batching { preferred_batch_size: [ %d ] max_queue_delay_microseconds: 5000000 }\n",
           name, backend, type, type, type, type, ROWS_TOTAL);
  h_model(repo, name, cfg, "1");
}

/* Request i has i+1 rows (1 + 2 + 3 = ROWS_TOTAL) of INT32 values
 * 100*i + j in INPUT0 and 7*i + j in INPUT1. */
typedef struct req_data {
  int32_t in0[9], in1[9];
  int64_t rows;
} req_data;

static void fill(req_data *d, int i) {
  d->rows = i + 1;
  for (int j = 0; j < 9; j++) {
    d->in0[j] = 100 * i + j;
    d->in1[j] = 7 * i + j;
  }
}

/* Submits request i; `outputs` is NULL (all) or a list ending in NULL.
 * With `split`, INPUT0's data is given as two buffers. */
static TRITONSERVER_InferenceRequest *submit(TRITONSERVER_Server *s, const char *name, const req_data *d,
                                             const char **outputs, bool split, h_call **call) {
  int64_t shape[2] = {d->rows, 3};
  size_t bytes = (size_t)d->rows * 3 * sizeof(int32_t);
  TRITONSERVER_InferenceRequest *r = h_request(s, name);
  if (split) {
    H_OK(TRITONSERVER_InferenceRequestAddInput(r, "INPUT0", TRITONSERVER_TYPE_INT32, shape, 2));
    H_OK(TRITONSERVER_InferenceRequestAppendInputData(r, "INPUT0", d->in0, 4, TRITONSERVER_MEMORY_CPU, 0));
    H_OK(TRITONSERVER_InferenceRequestAppendInputData(r, "INPUT0", (const char *)d->in0 + 4, bytes - 4,
                                                      TRITONSERVER_MEMORY_CPU, 0));
  } else {
    h_add_input(r, "INPUT0", TRITONSERVER_TYPE_INT32, shape, 2, d->in0, bytes);
  }
  h_add_input(r, "INPUT1", TRITONSERVER_TYPE_INT32, shape, 2, d->in1, bytes);
  for (const char **o = outputs; o && *o; o++) H_OK(TRITONSERVER_InferenceRequestAddRequestedOutput(r, *o));
  *call = h_call_new();
  h_bind(r, *call);
  H_OK(TRITONSERVER_ServerInferAsync(s, r, NULL));
  return r;
}

/* Checks output `name` of the call's response: shape [rows, 3], INT32,
 * element j equal to want[j]. */
static void expect_output(h_call *c, const char *name, int64_t rows, const int32_t *want, const char *what) {
  cr_assert(h_wait(c, 10000), "%s: no answer", what);
  char *e = h_response_error(c, 0);
  cr_assert_null(e, "%s failed: %s", what, e ? e : "");
  TRITONSERVER_InferenceResponse *resp = c->responses[0];
  uint32_t n = 0;
  H_OK(TRITONSERVER_InferenceResponseOutputCount(resp, &n));
  for (uint32_t i = 0; i < n; i++) {
    const char *oname;
    TRITONSERVER_DataType dt;
    const int64_t *shape;
    uint64_t dims;
    const void *base;
    size_t size;
    TRITONSERVER_MemoryType mt;
    int64_t mtid;
    void *userp;
    H_OK(TRITONSERVER_InferenceResponseOutput(resp, i, &oname, &dt, &shape, &dims, &base, &size, &mt, &mtid, &userp));
    if (strcmp(oname, name)) continue;
    cr_assert_eq(dt, TRITONSERVER_TYPE_INT32, "%s %s: datatype", what, name);
    cr_assert_eq(dims, 2, "%s %s: %" PRIu64 " dims", what, name, dims);
    cr_assert_eq(shape[0], rows, "%s %s: %" PRId64 " rows, expected %" PRId64, what, name, shape[0], rows);
    cr_assert_eq(shape[1], 3);
    cr_assert_eq(size, (size_t)rows * 3 * sizeof(int32_t), "%s %s: %zu bytes", what, name, size);
    for (int64_t j = 0; j < rows * 3; j++) {
      int32_t got;
      memcpy(&got, (const char *)base + j * 4, 4);
      cr_assert_eq(got, want[j], "%s %s[%" PRId64 "] = %d, expected %d", what, name, j, got, want[j]);
    }
    return;
  }
  cr_assert_fail("%s: no output %s among %u", what, name, n);
}

static bool has_output(h_call *c, const char *name) {
  uint32_t n = 0;
  H_OK(TRITONSERVER_InferenceResponseOutputCount(c->responses[0], &n));
  for (uint32_t i = 0; i < n; i++) {
    const char *oname;
    TRITONSERVER_DataType dt;
    const int64_t *shape;
    uint64_t dims;
    const void *base;
    size_t size;
    TRITONSERVER_MemoryType mt;
    int64_t mtid;
    void *userp;
    H_OK(TRITONSERVER_InferenceResponseOutput(c->responses[0], i, &oname, &dt, &shape, &dims, &base, &size, &mt, &mtid,
                                              &userp));
    if (!strcmp(oname, name)) return true;
  }
  return false;
}

/* Waits until the model reported ROWS_TOTAL rows; returns how many
 * executions had batch size ROWS_TOTAL. */
static uint64_t full_batches(TRITONSERVER_Server *s, const char *name) {
  for (int tries = 0; tries < 300; tries++) {
    TRITONSERVER_Message *msg = NULL;
    H_OK(TRITONSERVER_ServerModelStatistics(s, name, -1, &msg));
    char *text = h_msg_text(msg);
    json_t *j = json_loads(text, 0, NULL);
    free(text);
    json_t *bs = json_object_get(json_array_get(json_object_get(j, "model_stats"), 0), "batch_stats");
    uint64_t rows = 0, full = 0;
    size_t i;
    json_t *e;
    json_array_foreach(bs, i, e) {
      uint64_t size = (uint64_t)json_integer_value(json_object_get(e, "batch_size"));
      uint64_t count = (uint64_t)json_integer_value(json_object_get(json_object_get(e, "compute_infer"), "count"));
      rows += size * count;
      if (size == ROWS_TOTAL) full += count;
    }
    json_decref(j);
    if (rows >= ROWS_TOTAL) return full;
    usleep(10 * 1000);
  }
  cr_assert_fail("statistics of '%s' never reached %d rows", name, ROWS_TOTAL);
  return 0;
}

typedef struct run {
  req_data d[3];
  TRITONSERVER_InferenceRequest *r[3];
  h_call *c[3];
} run;

static void run_free(run *x) {
  for (int i = 0; i < 3; i++) {
    h_call_free(x->c[i]);
    H_OK(TRITONSERVER_InferenceRequestDelete(x->r[i]));
  }
}

/* identity: each request gets back its own INPUT<s> as OUTPUT<s>, one of
 * them from a two-buffer input, all in a single execution. */
Test(batch_backends, identity_batch_slices) {
  char *repo = h_tmpdir();
  model(repo, "id", "identity", "TYPE_INT32");
  TRITONSERVER_Server *s = start(repo);
  run x;
  for (int i = 0; i < 3; i++) {
    fill(&x.d[i], i);
    x.r[i] = submit(s, "id", &x.d[i], NULL, i == 1, &x.c[i]);
  }
  for (int i = 0; i < 3; i++) {
    expect_output(x.c[i], "OUTPUT0", x.d[i].rows, x.d[i].in0, "identity");
    expect_output(x.c[i], "OUTPUT1", x.d[i].rows, x.d[i].in1, "identity");
  }
  cr_assert_eq(full_batches(s, "id"), 1, "the three requests did not run as one batch");
  run_free(&x);
  H_OK(TRITONSERVER_ServerDelete(s));
  h_rmtree(repo);
  free(repo);
}

/* identity with requests asking for different outputs: answered request
 * by request, each with exactly what it asked. */
Test(batch_backends, identity_mixed_outputs_fall_back) {
  char *repo = h_tmpdir();
  model(repo, "id", "identity", "TYPE_INT32");
  TRITONSERVER_Server *s = start(repo);
  run x;
  const char *only1[] = {"OUTPUT1", NULL};
  const char *both[] = {"OUTPUT0", "OUTPUT1", NULL};
  for (int i = 0; i < 3; i++) {
    fill(&x.d[i], i);
    x.r[i] = submit(s, "id", &x.d[i], i == 1 ? only1 : both, false, &x.c[i]);
  }
  for (int i = 0; i < 3; i++) {
    expect_output(x.c[i], "OUTPUT1", x.d[i].rows, x.d[i].in1, "identity");
    if (i == 1)
      cr_assert(!has_output(x.c[i], "OUTPUT0"), "OUTPUT0 was not asked for");
    else
      expect_output(x.c[i], "OUTPUT0", x.d[i].rows, x.d[i].in0, "identity");
  }
  cr_assert_eq(full_batches(s, "id"), 1);
  run_free(&x);
  H_OK(TRITONSERVER_ServerDelete(s));
  h_rmtree(repo);
  free(repo);
}

/* add_sub: sums and differences computed over the whole batch, each
 * request getting its own rows. */
Test(batch_backends, add_sub_batch_slices) {
  char *repo = h_tmpdir();
  model(repo, "as", "add_sub", "TYPE_INT32");
  TRITONSERVER_Server *s = start(repo);
  run x;
  for (int i = 0; i < 3; i++) {
    fill(&x.d[i], i);
    x.r[i] = submit(s, "as", &x.d[i], NULL, i == 2, &x.c[i]);
  }
  for (int i = 0; i < 3; i++) {
    int32_t sum[9], diff[9];
    for (int j = 0; j < 9; j++) {
      sum[j] = x.d[i].in0[j] + x.d[i].in1[j];
      diff[j] = x.d[i].in0[j] - x.d[i].in1[j];
    }
    expect_output(x.c[i], "OUTPUT0", x.d[i].rows, sum, "add_sub");
    expect_output(x.c[i], "OUTPUT1", x.d[i].rows, diff, "add_sub");
  }
  cr_assert_eq(full_batches(s, "as"), 1, "the three requests did not run as one batch");
  run_free(&x);
  H_OK(TRITONSERVER_ServerDelete(s));
  h_rmtree(repo);
  free(repo);
}

/* add_sub with requests asking for different outputs falls back to one by
 * one, still correct. */
Test(batch_backends, add_sub_mixed_outputs_fall_back) {
  char *repo = h_tmpdir();
  model(repo, "as", "add_sub", "TYPE_INT32");
  TRITONSERVER_Server *s = start(repo);
  run x;
  const char *only1[] = {"OUTPUT1", NULL};
  for (int i = 0; i < 3; i++) {
    fill(&x.d[i], i);
    x.r[i] = submit(s, "as", &x.d[i], i == 0 ? only1 : NULL, false, &x.c[i]);
  }
  for (int i = 0; i < 3; i++) {
    int32_t sum[9], diff[9];
    for (int j = 0; j < 9; j++) {
      sum[j] = x.d[i].in0[j] + x.d[i].in1[j];
      diff[j] = x.d[i].in0[j] - x.d[i].in1[j];
    }
    expect_output(x.c[i], "OUTPUT1", x.d[i].rows, diff, "add_sub");
    if (i == 0)
      cr_assert(!has_output(x.c[i], "OUTPUT0"), "OUTPUT0 was not asked for");
    else
      expect_output(x.c[i], "OUTPUT0", x.d[i].rows, sum, "add_sub");
  }
  cr_assert_eq(full_batches(s, "as"), 1);
  run_free(&x);
  H_OK(TRITONSERVER_ServerDelete(s));
  h_rmtree(repo);
  free(repo);
}
