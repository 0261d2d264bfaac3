/* nrd_bench_fil: a 100-tree model through the fil backend (in-process
 * API) against Treelite's bare GTIL call on the same model file and the
 * same rows, in one run: p50 latency and rows/s at batch 1, 64 and 4096.
 * bench/fil_bench.sh trains the model and runs this.
 *
 * Both sides pick their GTIL thread count as the backend does (fil_model.h:
 * a power of two, or every core, with at least FIL_ROWS_PER_THREAD rows
 * each). One request in flight at a time: the figures are latency-bound.
 *
 * Prints figures, never judges them: the exit status is non-zero only when
 * a call fails. Threads: main() runs everything; callbacks come on the
 * model-instance thread and only count completions main() waits for. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"
#include "fil_model.h"
#include "tl_api.h"
#include "triton/core/tritonserver.h"

#ifndef NRD_BACKEND_DIR
#define NRD_BACKEND_DIR "backends"
#endif

#define MODEL "fil100"
#define MAX_ROWS 4096

typedef struct opts {
  const char *repo;
  const char *backend_dir;
  int features;
  double seconds; /* per measurement */
  int max_rows; /* largest batch measured */
  long threads; /* GTIL's threads at most, as the model's cpu_nthread */
} opts;

typedef struct result {
  uint64_t p50_ns;
  double rows_per_s;
} result;

static struct {
  atomic_uint done; /* +1 final response, +1 release */
  atomic_uint errors;
  pthread_mutex_t lock; /* with cond: main() sleeps until done reaches 2 */
  pthread_cond_t cond;
  float out[MAX_ROWS];
} g = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

static void done_add(void) {
  pthread_mutex_lock(&g.lock);
  atomic_fetch_add_explicit(&g.done, 1, memory_order_release);
  pthread_cond_signal(&g.cond);
  pthread_mutex_unlock(&g.lock);
}

static TRITONSERVER_Error *alloc_fn(TRITONSERVER_ResponseAllocator *a, const char *name, size_t size,
                                    TRITONSERVER_MemoryType mt, int64_t mt_id, void *userp, void **buffer,
                                    void **buffer_userp, TRITONSERVER_MemoryType *actual_mt, int64_t *actual_id) {
  (void)a, (void)name, (void)mt, (void)mt_id, (void)userp;
  if (size > sizeof g.out) return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "bench: output too large");
  *buffer = g.out;
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
  (void)userp;
  if (r != NULL) {
    if (failed(TRITONSERVER_InferenceResponseError(r), "response")) atomic_fetch_add(&g.errors, 1);
    TRITONSERVER_InferenceResponseDelete(r);
  }
  if (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) done_add();
}

static void on_release(TRITONSERVER_InferenceRequest *req, const uint32_t flags, void *userp) {
  (void)req, (void)flags, (void)userp;
  done_add();
}

static TRITONSERVER_Server *server_new(const opts *o) {
  TRITONSERVER_ServerOptions *so = NULL;
  TRITONSERVER_Server *s = NULL;
  if (failed(TRITONSERVER_ServerOptionsNew(&so), "ServerOptionsNew")) return NULL;
  bool ok = !failed(TRITONSERVER_ServerOptionsSetModelRepositoryPath(so, o->repo), "options") &&
            !failed(TRITONSERVER_ServerOptionsSetBackendDirectory(so, o->backend_dir), "options") &&
            !failed(TRITONSERVER_ServerOptionsSetLogInfo(so, false), "options") &&
            !failed(TRITONSERVER_ServerOptionsSetExitTimeout(so, 5), "options");
  if (ok && failed(TRITONSERVER_ServerNew(&s, so), "ServerNew")) s = NULL;
  TRITONSERVER_ServerOptionsDelete(so);
  return s;
}

/* Times 'fn' until o->seconds pass (at least 10 calls, after 3 untimed):
 * p50 and rows/s. */
typedef bool (*call_fn)(void *ctx);
static result measure(const opts *o, int rows, call_fn fn, void *ctx) {
  size_t cap = 1 << 20, n = 0;
  uint64_t *lat = malloc(cap * sizeof *lat);
  result r = {0, 0};
  if (lat == NULL) return r;
  for (int i = 0; i < 3; i++) fn(ctx); /* warm-up */
  uint64_t start = now_ns(), until = start + (uint64_t)(o->seconds * 1e9);
  while (n < cap && (n < 10 || now_ns() < until)) {
    uint64_t t0 = now_ns();
    if (!fn(ctx)) break;
    lat[n++] = now_ns() - t0;
  }
  uint64_t total = now_ns() - start;
  if (n > 0) {
    qsort(lat, n, sizeof *lat, cmp_u64);
    r.p50_ns = lat[n / 2];
    r.rows_per_s = (double)n * rows / ((double)total / 1e9);
  }
  free(lat);
  return r;
}

typedef struct bare_ctx {
  const tl_api *tl;
  TreeliteModelHandle model;
  TreeliteGTILConfigHandle configs[FIL_MAX_CONFIGS];
  int threads[FIL_MAX_CONFIGS];
  int config_count;
  const float *in;
  float *out;
  int rows;
} bare_ctx;

static bool bare_call(void *p) {
  bare_ctx *c = p;
  int k = 0;
  while (k + 1 < c->config_count && (uint64_t)c->rows >= (uint64_t)c->threads[k + 1] * FIL_ROWS_PER_THREAD) k++;
  return c->tl->GTILPredict(c->model, c->in, "float32", (uint64_t)c->rows, c->out, c->configs[k]) == 0;
}

typedef struct server_ctx {
  TRITONSERVER_Server *server;
  TRITONSERVER_InferenceRequest *req;
} server_ctx;

static bool server_call(void *p) {
  server_ctx *c = p;
  atomic_store_explicit(&g.done, 0, memory_order_relaxed);
  if (failed(TRITONSERVER_ServerInferAsync(c->server, c->req, NULL), "ServerInferAsync")) return false;
  /* Spins briefly (a one-row answer comes within it), then sleeps: on a
   * machine with few cores a spinning or yielding client would keep the
   * instance thread from running. */
  for (unsigned spins = 0; spins < 2000 && atomic_load_explicit(&g.done, memory_order_acquire) < 2; spins++) {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  }
  pthread_mutex_lock(&g.lock);
  while (atomic_load_explicit(&g.done, memory_order_acquire) < 2) pthread_cond_wait(&g.cond, &g.lock);
  pthread_mutex_unlock(&g.lock);
  return atomic_load(&g.errors) == 0;
}

static bool request_new(TRITONSERVER_Server *s, TRITONSERVER_ResponseAllocator *alloc, const float *in, int rows,
                        int features, TRITONSERVER_InferenceRequest **out) {
  int64_t shape[2] = {rows, features};
  TRITONSERVER_InferenceRequest *r = NULL;
  if (failed(TRITONSERVER_InferenceRequestNew(&r, s, MODEL, -1), "InferenceRequestNew")) return false;
  *out = r;
  return !failed(TRITONSERVER_InferenceRequestAddInput(r, "input__0", TRITONSERVER_TYPE_FP32, shape, 2), "AddInput") &&
         !failed(TRITONSERVER_InferenceRequestAppendInputData(
                     r, "input__0", in, (size_t)rows * (size_t)features * sizeof(float), TRITONSERVER_MEMORY_CPU, 0),
                 "AppendInputData") &&
         !failed(TRITONSERVER_InferenceRequestSetReleaseCallback(r, on_release, NULL), "SetReleaseCallback") &&
         !failed(TRITONSERVER_InferenceRequestSetResponseCallback(r, alloc, NULL, on_response, NULL),
                 "SetResponseCallback");
}

int main(int argc, char **argv) {
  opts o = {NULL, NRD_BACKEND_DIR, 32, 1.0, MAX_ROWS, 0};
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick")) { /* the test suite's run: does it work? */
      o.seconds = 0.05;
      o.max_rows = 64;
    } else if (i + 1 < argc && !strcmp(argv[i], "--backend-dir")) {
      o.backend_dir = argv[++i];
    } else if (i + 1 < argc && !strcmp(argv[i], "--features")) {
      o.features = atoi(argv[++i]);
    } else if (i + 1 < argc && !strcmp(argv[i], "--threads")) {
      o.threads = atol(argv[++i]);
    } else if (i + 1 < argc && !strcmp(argv[i], "--seconds")) {
      o.seconds = atof(argv[++i]);
    } else if (o.repo == NULL && argv[i][0] != '-') {
      o.repo = argv[i];
    } else {
      fprintf(stderr, "usage: %s REPO [--features N] [--seconds S] [--threads N] [--backend-dir DIR] [--quick]\n",
              argv[0]);
      return 2;
    }
  }
  if (o.repo == NULL || o.features < 1) {
    fprintf(stderr, "usage: %s REPO [--features N] [--seconds S] [--threads N] [--backend-dir DIR] [--quick]\n",
            argv[0]);
    return 2;
  }
  char dir[4096], file[4096];
  snprintf(dir, sizeof dir, "%s/fil", o.backend_dir);
  snprintf(file, sizeof file, "%s/%s/1/xgboost.json", o.repo, MODEL);
  tl_api tl;
  if (failed(tl_api_open(dir, &tl), "tl_api_open")) return 1;
  bare_ctx bc;
  memset(&bc, 0, sizeof bc);
  bc.tl = &tl;
  bool ok = tl.LoadXGBoostModelJSON(file, "{}", &bc.model) == 0;
  long most = o.threads > 0 ? o.threads : sysconf(_SC_NPROCESSORS_ONLN);
  for (long t = 1; ok && bc.config_count < FIL_MAX_CONFIGS; t *= 2) {
    int n = (int)(t < most ? t : most);
    char json[96];
    snprintf(json, sizeof json, "{\"predict_type\": \"default\", \"nthread\": %d}", n);
    ok = tl.GTILParseConfig(json, &bc.configs[bc.config_count]) == 0;
    bc.threads[bc.config_count++] = n;
    if (n >= most) break;
  }
  if (!ok) {
    fprintf(stderr, "error: Treelite: %s: %s\n", file, tl_api_error(&tl));
    return 1;
  }
  float *in = malloc((size_t)MAX_ROWS * (size_t)o.features * sizeof(float));
  float *out = malloc(MAX_ROWS * sizeof(float));
  if (in == NULL || out == NULL) return 1;
  uint64_t seed = 47;
  for (size_t i = 0; i < (size_t)MAX_ROWS * (size_t)o.features; i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    in[i] = (float)((double)(seed >> 11) / (double)(1ull << 53) * 4.0 - 2.0);
  }
  bc.in = in;
  bc.out = out;
  TRITONSERVER_Server *s = server_new(&o);
  TRITONSERVER_ResponseAllocator *alloc = NULL;
  if (s == NULL || failed(TRITONSERVER_ResponseAllocatorNew(&alloc, alloc_fn, release_fn, NULL), "AllocatorNew")) {
    return 1;
  }
  bool ready = false;
  if (failed(TRITONSERVER_ServerModelIsReady(s, MODEL, -1, &ready), "ModelIsReady") || !ready) {
    fprintf(stderr, "error: model '%s' is not ready\n", MODEL);
    return 1;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  printf("fil: %s, 100 trees, %d features; one request in flight; %.2f s per figure\n", file, o.features, o.seconds);
  printf("%6s %12s %12s %10s %14s %14s %8s\n", "batch", "bare p50 us", "nereid p50", "added us", "bare rows/s",
         "nereid rows/s", "ratio");
  static const int kBatches[] = {1, 64, 4096};
  int rc = 0;
  for (size_t k = 0; k < sizeof kBatches / sizeof kBatches[0]; k++) {
    int rows = kBatches[k];
    if (rows > o.max_rows) break;
    bc.rows = rows;
    server_ctx sc = {s, NULL};
    if (!request_new(s, alloc, in, rows, o.features, &sc.req)) {
      rc = 1;
      break;
    }
    result bare = measure(&o, rows, bare_call, &bc);
    result served = measure(&o, rows, server_call, &sc);
    /* The floor again after the server's turn: the machine is shared, so
     * the lower of the two is the floor reported. */
    result bare2 = measure(&o, rows, bare_call, &bc);
    if (bare2.p50_ns != 0 && bare2.p50_ns < bare.p50_ns) bare = bare2;
    TRITONSERVER_InferenceRequestDelete(sc.req);
    if (served.p50_ns == 0 || atomic_load(&g.errors) != 0) {
      rc = 1;
      break;
    }
    printf("%6d %12.2f %12.2f %10.2f %14.0f %14.0f %8.3f\n", rows, bare.p50_ns / 1e3, served.p50_ns / 1e3,
           ((double)served.p50_ns - (double)bare.p50_ns) / 1e3, bare.rows_per_s, served.rows_per_s,
           served.rows_per_s / bare.rows_per_s);
  }
  TRITONSERVER_ResponseAllocatorDelete(alloc);
  failed(TRITONSERVER_ServerStop(s), "ServerStop");
  TRITONSERVER_ServerDelete(s);
  for (int i = 0; i < bc.config_count; i++) tl.GTILDeleteConfig(bc.configs[i]);
  tl.FreeModel(bc.model);
  free(in);
  free(out);
  return rc;
}
