/* nrd_bench_openvino: a small model through Nereid's openvino backend
 * against OpenVINO's own inference call on the same input, in one process.
 *
 *   nrd_bench_openvino [--iters N] [--rounds R] [--backend-dir DIR] [--quick]
 *
 * The model is tools/onnx_models.py's fixed_add_sub (INT32 [4] + [4] ->
 * sum and difference, static shapes), written to a temporary repository
 * with /usr/bin/python3 (python3-onnx). Both sides compile it for the CPU
 * with the same properties (one inference thread, one stream, LATENCY)
 * from the same libopenvino_c, the one beside the backend.
 *
 * Measured, one request outstanding at a time, R rounds of N calls each,
 * the sides alternating round by round (a noisy shared machine then hits
 * both alike):
 *   bare infer   ov_infer_request_infer alone, tensors set once;
 *   bare call    what a caller of OpenVINO does per request: input tensors
 *                over its buffers, set, infer, output tensors read and
 *                copied out (the floor for a server);
 *   nereid       TRITONSERVER_ServerInferAsync to the final response
 *                callback (request reused, output into a caller buffer).
 * Prints the median over rounds of each round's p50 and p99, and
 * nereid - bare call: what the server adds. Figures only; the exit status
 * is non-zero when a call fails or an output is wrong. Threads: the main
 * thread sends and waits; the server's threads run the callbacks. */
#include <dlfcn.h>
#include <sched.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench_util.h"
#include "ov_api.h"
#include "triton/core/tritonserver.h"

#ifndef NRD_BACKEND_DIR
#define NRD_BACKEND_DIR "backends"
#endif
#ifndef NRD_SOURCE_DIR
#define NRD_SOURCE_DIR "."
#endif

#define MAX_ROUNDS 64

typedef struct opts {
  int iters, rounds;
  const char *backend_dir;
} opts;

static const char kConfig[] =
    "backend: \"openvino\"\n"
    "default_model_filename: \"model.onnx\"\n"
    "input [ { name: \"INPUT0\" data_type: TYPE_INT32 dims: [ 4 ] },\n"
    "        { name: \"INPUT1\" data_type: TYPE_INT32 dims: [ 4 ] } ]\n"
    "output [ { name: \"OUTPUT0\" data_type: TYPE_INT32 dims: [ 4 ] },\n"
    "         { name: \"OUTPUT1\" data_type: TYPE_INT32 dims: [ 4 ] } ]\n"
    "instance_group [ { count: 1 kind: KIND_CPU } ]\n"
    "parameters { key: \"INFERENCE_NUM_THREADS\" value { string_value: \"1\" } }\n"
    "parameters { key: \"NUM_STREAMS\" value { string_value: \"1\" } }\n"
    "parameters { key: \"PERFORMANCE_HINT\" value { string_value: \"LATENCY\" } }\n";

static int32_t in0[4] = {1, 2, 3, 4}, in1[4] = {10, 20, 30, 40};

static bool outputs_right(const int32_t *sum, const int32_t *diff) {
  for (int i = 0; i < 4; i++) {
    if (sum[i] != in0[i] + in1[i] || diff[i] != in0[i] - in1[i]) return false;
  }
  return true;
}

/* ------------------------------------------------------------ bare */

typedef struct bare {
  void *lib;
  nrd_ov_api api;
  nrd_ov_core_t *core;
  nrd_ov_model_t *model;
  nrd_ov_compiled_model_t *compiled;
  nrd_ov_infer_request_t *req;
} bare;

static bool ok(const bare *b, nrd_ov_status st, const char *what) {
  if (st == NRD_OV_OK) return true;
  const char *msg = b->api.ov_get_last_err_msg();
  fprintf(stderr, "error: %s: %s\n", what, msg ? msg : "?");
  if (msg) b->api.ov_free(msg);
  return false;
}

static bool bare_open(bare *b, const char *backend_dir, const char *onnx) {
  char path[4096];
  snprintf(path, sizeof path, "%s/openvino/libopenvino_c.so.2520", backend_dir);
  b->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!b->lib) {
    fprintf(stderr, "error: %s\n", dlerror());
    return false;
  }
#define NRD_OV_ENTRY(ret, name, params) {#name, offsetof(nrd_ov_api, name)},
  static const struct {
    const char *symbol;
    size_t offset;
  } kFunctions[] = {NRD_OV_FUNCTIONS(NRD_OV_ENTRY)};
#undef NRD_OV_ENTRY
  for (size_t i = 0; i < sizeof kFunctions / sizeof kFunctions[0]; i++) {
    void *f = dlsym(b->lib, kFunctions[i].symbol);
    if (!f) {
      fprintf(stderr, "error: no %s in %s\n", kFunctions[i].symbol, path);
      return false;
    }
    memcpy((char *)&b->api + kFunctions[i].offset, &f, sizeof f);
  }
  return ok(b, b->api.ov_core_create(&b->core), "core") &&
         ok(b, b->api.ov_core_read_model(b->core, onnx, NULL, &b->model), "read_model") &&
         ok(b,
            b->api.ov_core_compile_model(b->core, b->model, "CPU", 8, &b->compiled, "INFERENCE_NUM_THREADS", "1",
                                         "NUM_STREAMS", "1", "PERFORMANCE_HINT", "LATENCY", "ALLOW_AUTO_BATCHING",
                                         "NO"),
            "compile_model") &&
         ok(b, b->api.ov_compiled_model_create_infer_request(b->compiled, &b->req), "infer request");
}

static void bare_close(bare *b) {
  if (b->req) b->api.ov_infer_request_free(b->req);
  if (b->compiled) b->api.ov_compiled_model_free(b->compiled);
  if (b->model) b->api.ov_model_free(b->model);
  if (b->core) b->api.ov_core_free(b->core);
}

/* Sets both inputs over in0/in1: the tensors are created per call. */
static bool bare_set_inputs(bare *b) {
  int64_t dims[1] = {4};
  nrd_ov_shape_t shape;
  if (!ok(b, b->api.ov_shape_create(1, dims, &shape), "shape")) return false;
  nrd_ov_tensor_t *t0 = NULL, *t1 = NULL;
  bool good = ok(b, b->api.ov_tensor_create_from_host_ptr(NRD_OV_I32, shape, in0, &t0), "tensor") &&
              ok(b, b->api.ov_tensor_create_from_host_ptr(NRD_OV_I32, shape, in1, &t1), "tensor") &&
              ok(b, b->api.ov_infer_request_set_tensor(b->req, "INPUT0", t0), "set_tensor") &&
              ok(b, b->api.ov_infer_request_set_tensor(b->req, "INPUT1", t1), "set_tensor");
  if (t0) b->api.ov_tensor_free(t0);
  if (t1) b->api.ov_tensor_free(t1);
  b->api.ov_shape_free(&shape);
  return good;
}

/* Reads one output and copies it to 'to' (4 values). */
static bool bare_get_output(bare *b, const char *name, int32_t *to) {
  nrd_ov_tensor_t *t = NULL;
  void *data = NULL;
  size_t bytes = 0;
  bool good = ok(b, b->api.ov_infer_request_get_tensor(b->req, name, &t), "get_tensor") &&
              ok(b, b->api.ov_tensor_get_byte_size(t, &bytes), "byte_size") &&
              ok(b, b->api.ov_tensor_data(t, &data), "data") && bytes == 4 * sizeof(int32_t);
  if (good) memcpy(to, data, bytes);
  if (t) b->api.ov_tensor_free(t);
  return good;
}

/* One call as a server must make it; t gets its duration. */
static bool bare_call(bare *b, uint64_t *t) {
  int32_t sum[4], diff[4];
  uint64_t t0 = now_ns();
  bool good = bare_set_inputs(b) && ok(b, b->api.ov_infer_request_infer(b->req), "infer") &&
              bare_get_output(b, "OUTPUT0", sum) && bare_get_output(b, "OUTPUT1", diff);
  *t = now_ns() - t0;
  if (good && !outputs_right(sum, diff)) {
    fprintf(stderr, "error: bare outputs are wrong\n");
    return false;
  }
  return good;
}

/* ---------------------------------------------------------- nereid */

typedef struct nrd {
  TRITONSERVER_Server *server;
  TRITONSERVER_ResponseAllocator *alloc;
  TRITONSERVER_InferenceRequest *req;
  atomic_uint done; /* final response + release */
  atomic_uint errors;
  uint64_t t_response;
  int32_t out[2][4];
} nrd;

static TRITONSERVER_Error *alloc_fn(TRITONSERVER_ResponseAllocator *a, const char *name, size_t size,
                                    TRITONSERVER_MemoryType mt, int64_t mt_id, void *userp, void **buffer,
                                    void **buffer_userp, TRITONSERVER_MemoryType *actual_mt, int64_t *actual_id) {
  (void)a, (void)mt, (void)mt_id;
  nrd *n = userp;
  if (size != sizeof n->out[0]) return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "bench: unexpected size");
  *buffer = n->out[strcmp(name, "OUTPUT0") == 0 ? 0 : 1];
  *buffer_userp = NULL;
  *actual_mt = TRITONSERVER_MEMORY_CPU;
  *actual_id = 0;
  return NULL;
}

static TRITONSERVER_Error *release_fn(TRITONSERVER_ResponseAllocator *a, void *buffer, void *buffer_userp, size_t size,
                                      TRITONSERVER_MemoryType mt, int64_t mt_id) {
  (void)a, (void)buffer, (void)buffer_userp, (void)size, (void)mt, (void)mt_id;
  return NULL;
}

static void on_response(TRITONSERVER_InferenceResponse *r, const uint32_t flags, void *userp) {
  nrd *n = userp;
  uint64_t t = now_ns();
  if (r) {
    TRITONSERVER_Error *e = TRITONSERVER_InferenceResponseError(r);
    if (e) {
      failed(e, "response");
      atomic_fetch_add(&n->errors, 1);
    }
    TRITONSERVER_InferenceResponseDelete(r);
  }
  if (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) {
    n->t_response = t;
    atomic_fetch_add_explicit(&n->done, 1, memory_order_release);
  }
}

static void on_release(TRITONSERVER_InferenceRequest *req, const uint32_t flags, void *userp) {
  (void)req, (void)flags;
  atomic_fetch_add_explicit(&((nrd *)userp)->done, 1, memory_order_release);
}

static bool nrd_open(nrd *n, const char *repo, const char *backend_dir) {
  TRITONSERVER_ServerOptions *o = NULL;
  if (failed(TRITONSERVER_ServerOptionsNew(&o), "ServerOptionsNew")) return false;
  bool good = !failed(TRITONSERVER_ServerOptionsSetModelRepositoryPath(o, repo), "options") &&
              !failed(TRITONSERVER_ServerOptionsSetBackendDirectory(o, backend_dir), "options") &&
              !failed(TRITONSERVER_ServerOptionsSetLogInfo(o, false), "options") &&
              !failed(TRITONSERVER_ServerOptionsSetExitTimeout(o, 5), "options") &&
              !failed(TRITONSERVER_ServerNew(&n->server, o), "ServerNew");
  TRITONSERVER_ServerOptionsDelete(o);
  bool ready = false;
  for (int i = 0; good && !ready && i < 3000; i++) {
    good = !failed(TRITONSERVER_ServerModelIsReady(n->server, "ov", -1, &ready), "ModelIsReady");
    if (!ready) usleep(10000);
  }
  if (good && !ready) fprintf(stderr, "error: model not ready\n");
  int64_t shape[1] = {4};
  return good && ready &&
         !failed(TRITONSERVER_ResponseAllocatorNew(&n->alloc, alloc_fn, release_fn, NULL), "AllocatorNew") &&
         !failed(TRITONSERVER_InferenceRequestNew(&n->req, n->server, "ov", -1), "RequestNew") &&
         !failed(TRITONSERVER_InferenceRequestAddInput(n->req, "INPUT0", TRITONSERVER_TYPE_INT32, shape, 1), "in") &&
         !failed(TRITONSERVER_InferenceRequestAppendInputData(n->req, "INPUT0", in0, sizeof in0,
                                                              TRITONSERVER_MEMORY_CPU, 0), "data") &&
         !failed(TRITONSERVER_InferenceRequestAddInput(n->req, "INPUT1", TRITONSERVER_TYPE_INT32, shape, 1), "in") &&
         !failed(TRITONSERVER_InferenceRequestAppendInputData(n->req, "INPUT1", in1, sizeof in1,
                                                              TRITONSERVER_MEMORY_CPU, 0), "data") &&
         !failed(TRITONSERVER_InferenceRequestSetReleaseCallback(n->req, on_release, n), "release cb") &&
         !failed(TRITONSERVER_InferenceRequestSetResponseCallback(n->req, n->alloc, n, on_response, n), "resp cb");
}

static void nrd_close(nrd *n) {
  if (n->req) failed(TRITONSERVER_InferenceRequestDelete(n->req), "RequestDelete");
  if (n->alloc) failed(TRITONSERVER_ResponseAllocatorDelete(n->alloc), "AllocatorDelete");
  if (n->server) {
    failed(TRITONSERVER_ServerStop(n->server), "ServerStop");
    failed(TRITONSERVER_ServerDelete(n->server), "ServerDelete");
  }
}

static bool nrd_call(nrd *n, uint64_t *t) {
  atomic_store_explicit(&n->done, 0, memory_order_relaxed);
  memset(n->out, 0, sizeof n->out);
  uint64_t t0 = now_ns();
  if (failed(TRITONSERVER_ServerInferAsync(n->server, n->req, NULL), "InferAsync")) return false;
  while (atomic_load_explicit(&n->done, memory_order_acquire) < 2) sched_yield();
  *t = n->t_response - t0;
  if (atomic_load(&n->errors) > 0) return false;
  if (!outputs_right(n->out[0], n->out[1])) {
    fprintf(stderr, "error: nereid outputs are wrong\n");
    return false;
  }
  return true;
}

/* ------------------------------------------------------------ main */

static uint64_t pct(uint64_t *v, int n, double q) {
  qsort(v, (size_t)n, sizeof *v, cmp_u64);
  return v[(int)(q * (n - 1))];
}

static double median_us(uint64_t *v, int n) { return pct(v, n, 0.5) / 1000.0; }

int main(int argc, char **argv) {
  opts o = {.iters = 2000, .rounds = 7, .backend_dir = NRD_BACKEND_DIR};
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--iters") && i + 1 < argc) {
      o.iters = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
      o.rounds = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--backend-dir") && i + 1 < argc) {
      o.backend_dir = argv[++i];
    } else if (!strcmp(argv[i], "--quick")) {
      o.iters = 200, o.rounds = 3;
    } else {
      fprintf(stderr, "usage: %s [--iters N] [--rounds R] [--backend-dir DIR] [--quick]\n", argv[0]);
      return 2;
    }
  }
  if (o.iters < 10 || o.rounds < 1 || o.rounds > MAX_ROUNDS) {
    fprintf(stderr, "error: --iters >= 10, 1 <= --rounds <= %d\n", MAX_ROUNDS);
    return 2;
  }
  char repo[] = "/tmp/nrd-bench-openvino-XXXXXX";
  if (!mkdtemp(repo)) return 1;
  char path[4200], cmd[8600];
  snprintf(path, sizeof path, "%s/ov/1", repo);
  int len = snprintf(cmd, sizeof cmd,
                     "mkdir -p %s && /usr/bin/python3 %s/tools/onnx_models.py %s fixed_add_sub && "
                     "mv %s/fixed_add_sub.onnx %s/model.onnx",
                     path, NRD_SOURCE_DIR, path, path, path);
  if (len < 0 || (size_t)len >= sizeof cmd) return 1;
  snprintf(path, sizeof path, "%s/ov/config.pbtxt", repo);
  int rc = 1;
  bare b;
  nrd n;
  memset(&b, 0, sizeof b);
  memset(&n, 0, sizeof n);
  uint64_t *t = malloc((size_t)o.iters * sizeof *t);
  uint64_t p50[3][MAX_ROUNDS], p99[3][MAX_ROUNDS];
  if (!t || system(cmd) != 0 || !write_file(path, kConfig)) goto out;
  snprintf(path, sizeof path, "%s/ov/1/model.onnx", repo);
  if (!bare_open(&b, o.backend_dir, path) || !nrd_open(&n, repo, o.backend_dir)) goto out;
  if (!bare_set_inputs(&b)) goto out;
  for (int r = -1; r < o.rounds; r++) { /* round -1: warm-up */
    for (int side = 0; side < 3; side++) {
      for (int i = 0; i < o.iters; i++) {
        bool good;
        if (side == 0) {
          uint64_t t0 = now_ns();
          good = ok(&b, b.api.ov_infer_request_infer(b.req), "infer");
          t[i] = now_ns() - t0;
        } else {
          good = side == 1 ? bare_call(&b, &t[i]) : nrd_call(&n, &t[i]);
        }
        if (!good) goto out;
      }
      if (r >= 0) {
        p99[side][r] = pct(t, o.iters, 0.99);
        p50[side][r] = pct(t, o.iters, 0.5);
      }
    }
  }
  static const char *const kSide[3] = {"bare infer", "bare call", "nereid"};
  printf("openvino, fixed_add_sub (INT32 [4] x2), 1 thread, 1 stream, LATENCY; %d rounds x %d calls\n", o.rounds,
         o.iters);
  double m50[3], m99[3];
  for (int s = 0; s < 3; s++) {
    m50[s] = median_us(p50[s], o.rounds);
    m99[s] = median_us(p99[s], o.rounds);
    printf("  %-11s p50 %8.2f us   p99 %8.2f us\n", kSide[s], m50[s], m99[s]);
  }
  printf("  nereid - bare call: p50 %+.2f us (ratio %.2f), nereid - bare infer: p50 %+.2f us\n", m50[2] - m50[1],
         m50[2] / m50[1], m50[2] - m50[0]);
  rc = 0;
out:
  nrd_close(&n);
  bare_close(&b);
  free(t);
  len = snprintf(cmd, sizeof cmd, "rm -rf %s", repo);
  if (len < 0 || (size_t)len >= sizeof cmd || system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", repo);
  return rc;
}
