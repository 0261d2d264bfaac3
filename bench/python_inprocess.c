/* nrd_bench_python: the python backend in-process (libtritonserver's
 * public API, no HTTP), against the C identity backend:
 *
 *   round trip   identity of 16 x FP32, one client, p50/p99: the C
 *                identity backend, the same as model.py
 *   BLS          a model.py that calls the C identity model by BLS for
 *                each request: its p50 less the plain model.py's
 *   16 MB        a 16 MB FP32 tensor through the model.py identity (and
 *                the C one): p50 and GB/s of tensor bytes in
 *   instances    a CPU-bound model.py (a pure-Python loop per request)
 *                with one instance and with two, four clients each:
 *                requests/s and their ratio
 *
 * It prints figures and never judges them: the exit status is non-zero
 * only when a call fails.
 *
 * Threads: each client thread owns its request; the callbacks run on the
 * server's threads and only count and wake. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "triton/core/tritonserver.h"

#include "bench_util.h"

#ifndef NRD_BACKEND_DIR
#define NRD_BACKEND_DIR "backends"
#endif

#define SMALL 16 /* FP32 values of the small tensor */
#define BIG (4u << 20) /* FP32 values of the 16 MB tensor */
#define CLIENTS 4 /* threads of the instances figure */

static double q_us(uint64_t *v, size_t n, double q) {
  qsort(v, n, sizeof *v, cmp_u64);
  size_t k = (size_t)(q * (double)(n - 1) + 0.5);
  return (double)v[k < n ? k : n - 1] / 1e3;
}

/* CPU time (user + system, ns) of this process and of its children that
 * still run (the stubs), from /proc: the CPU a request costs whatever
 * the machine's other load does to the wall clock. */
static uint64_t cpu_ns_all(void) {
  uint64_t total = 0;
  long tick = sysconf(_SC_CLK_TCK);
  pid_t self = getpid();
  DIR *d = opendir("/proc");
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    char path[300], buf[1024];
    snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *rp = strrchr(buf, ')');
    if (!rp) continue;
    /* after ")": state ppid pgrp session tty tpgid flags minflt cminflt
     * majflt cmajflt utime stime */
    int ppid = 0;
    unsigned long long ut = 0, st = 0;
    if (sscanf(rp + 2, "%*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ppid, &ut, &st) != 3) continue;
    if (atoi(e->d_name) == self || ppid == self) total += (ut + st) * (1000000000ull / (uint64_t)tick);
  }
  if (d) closedir(d);
  return total;
}

/* ------------------------------------------------------ repository */

static const char IDENT_PY[] = "import triton_python_backend_utils as pb_utils\n\n\n"
                               "class TritonPythonModel:\n"
                               "    def execute(self, requests):\n"
                               "        return [pb_utils.InferenceResponse([pb_utils.Tensor(\"OUTPUT0\",\n"
                               "                pb_utils.get_input_tensor_by_name(r, \"INPUT0\").as_numpy())])\n"
                               "                for r in requests]\n";

static const char BLS_PY[] = "import triton_python_backend_utils as pb_utils\n\n\n"
                             "class TritonPythonModel:\n"
                             "    def execute(self, requests):\n"
                             "        out = []\n"
                             "        for r in requests:\n"
                             "            x = pb_utils.get_input_tensor_by_name(r, \"INPUT0\")\n"
                             "            reply = pb_utils.InferenceRequest(model_name=\"ident_c\", inputs=[x],\n"
                             "                requested_output_names=[\"OUTPUT0\"]).exec()\n"
                             "            if reply.has_error():\n"
                             "                raise pb_utils.TritonModelException(reply.error().message())\n"
                             "            y = pb_utils.get_output_tensor_by_name(reply, \"OUTPUT0\")\n"
                             "            out.append(pb_utils.InferenceResponse([y]))\n"
                             "        return out\n";

/* About 10 ms of pure-Python work per request on this VM. */
static const char BUSY_PY[] = "import triton_python_backend_utils as pb_utils\n\n\n"
                              "class TritonPythonModel:\n"
                              "    def execute(self, requests):\n"
                              "        out = []\n"
                              "        for r in requests:\n"
                              "            s = 0\n"
                              "            for i in range(200000):\n"
                              "                s += i\n"
                              "            x = pb_utils.get_input_tensor_by_name(r, \"INPUT0\").as_numpy()\n"
                              "            out.append(pb_utils.InferenceResponse([pb_utils.Tensor(\"OUTPUT0\", x)]))\n"
                              "        return out\n";

/* Model `name` in `repo`: FP32 [-1] in and out, `count` CPU instances,
 * served by `backend`, with `model_py` as its model.py when given. */
static bool add_model(const char *repo, const char *name, const char *backend, int count, const char *model_py) {
  char path[PATH_MAX], cfg[1024];
  snprintf(path, sizeof path, "%s/%s", repo, name);
  if (mkdir(path, 0755)) return false;
  snprintf(path, sizeof path, "%s/%s/1", repo, name);
  if (mkdir(path, 0755)) return false;
  snprintf(cfg, sizeof cfg,
           "name: \"%s\"\nbackend: \"%s\"\nmax_batch_size: 0\n"
           "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n"
           "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n"
           "instance_group [ { count: %d kind: KIND_CPU } ]\n",
           name, backend, count);
  snprintf(path, sizeof path, "%s/%s/config.pbtxt", repo, name);
  if (!write_file(path, cfg)) return false;
  if (model_py) {
    snprintf(path, sizeof path, "%s/%s/1/model.py", repo, name);
    return write_file(path, model_py);
  }
  return true;
}

/* --------------------------------------------------------- clients */

typedef struct client {
  TRITONSERVER_Server *server;
  TRITONSERVER_ResponseAllocator *alloc;
  TRITONSERVER_InferenceRequest *req;
  uint32_t done; /* futex: +1 final response, +1 release */
  atomic_uint errors;
  float *in, *out;
  size_t out_cap;
} client;

static TRITONSERVER_Error *alloc_fn(TRITONSERVER_ResponseAllocator *a, const char *name, size_t size,
                                    TRITONSERVER_MemoryType mt, int64_t mt_id, void *userp, void **buffer,
                                    void **buffer_userp, TRITONSERVER_MemoryType *actual_mt, int64_t *actual_id) {
  (void)a, (void)name, (void)mt, (void)mt_id;
  client *c = userp;
  if (size > c->out_cap) return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "bench: output too large");
  *buffer = c->out;
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

static void bump(client *c) {
  __atomic_add_fetch(&c->done, 1, __ATOMIC_RELEASE);
  syscall(SYS_futex, &c->done, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static void on_response(TRITONSERVER_InferenceResponse *r, const uint32_t flags, void *userp) {
  client *c = userp;
  if (r) {
    TRITONSERVER_Error *e = TRITONSERVER_InferenceResponseError(r);
    if (e) {
      failed(e, "response");
      atomic_fetch_add(&c->errors, 1);
    }
    TRITONSERVER_InferenceResponseDelete(r);
  }
  if (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) bump(c);
}

static void on_release(TRITONSERVER_InferenceRequest *req, const uint32_t flags, void *userp) {
  (void)req, (void)flags;
  bump(userp);
}

/* A client of `model` sending `n` FP32 values. */
static bool client_init(client *c, TRITONSERVER_Server *s, TRITONSERVER_ResponseAllocator *alloc, const char *model,
                        size_t n) {
  memset(c, 0, sizeof *c);
  c->server = s;
  c->alloc = alloc;
  c->in = calloc(n, sizeof(float));
  c->out = calloc(n, sizeof(float));
  c->out_cap = n * sizeof(float);
  if (!c->in || !c->out) return false;
  for (size_t i = 0; i < n; i++) c->in[i] = (float)i;
  int64_t shape[1] = {(int64_t)n};
  if (failed(TRITONSERVER_InferenceRequestNew(&c->req, s, model, -1), "InferenceRequestNew")) return false;
  return !failed(TRITONSERVER_InferenceRequestAddInput(c->req, "INPUT0", TRITONSERVER_TYPE_FP32, shape, 1), "input") &&
         !failed(TRITONSERVER_InferenceRequestAppendInputData(c->req, "INPUT0", c->in, n * sizeof(float),
                                                              TRITONSERVER_MEMORY_CPU, 0),
                 "input data") &&
         !failed(TRITONSERVER_InferenceRequestAddRequestedOutput(c->req, "OUTPUT0"), "output") &&
         !failed(TRITONSERVER_InferenceRequestSetReleaseCallback(c->req, on_release, c), "release callback") &&
         !failed(TRITONSERVER_InferenceRequestSetResponseCallback(c->req, alloc, c, on_response, c),
                 "response callback");
}

static void client_fini(client *c) {
  if (c->req) failed(TRITONSERVER_InferenceRequestDelete(c->req), "InferenceRequestDelete");
  free(c->in);
  free(c->out);
}

/* One request, waited for (a brief spin, then the futex); its time in ns,
 * 0 on error. */
static uint64_t round_trip(client *c) {
  __atomic_store_n(&c->done, 0, __ATOMIC_RELAXED);
  uint64_t t0 = now_ns();
  if (failed(TRITONSERVER_ServerInferAsync(c->server, c->req, NULL), "ServerInferAsync")) return 0;
  for (int spin = 0;; spin++) {
    uint32_t d = __atomic_load_n(&c->done, __ATOMIC_ACQUIRE);
    if (d >= 2) break;
    if (spin < 1000) {
      __builtin_ia32_pause();
      continue;
    }
    syscall(SYS_futex, &c->done, FUTEX_WAIT_PRIVATE, d, NULL, NULL, 0);
  }
  uint64_t t = now_ns() - t0;
  return atomic_load(&c->errors) ? 0 : (t ? t : 1);
}

/* p50 and p99 in µs of `iters` round trips of `n` values to `model`. */
static bool latency(TRITONSERVER_Server *s, TRITONSERVER_ResponseAllocator *alloc, const char *model, size_t n,
                    int warmup, int iters, double *p50, double *p99, double *cpu_us) {
  client c;
  memset(&c, 0, sizeof c);
  uint64_t *v = calloc((size_t)iters, sizeof *v);
  bool ok = v && client_init(&c, s, alloc, model, n);
  uint64_t cpu0 = 0;
  for (int i = 0; ok && i < warmup + iters; i++) {
    if (i == warmup) cpu0 = cpu_ns_all();
    uint64_t t = round_trip(&c);
    ok = t != 0;
    if (i >= warmup) v[i - warmup] = t;
  }
  if (ok) {
    *cpu_us = (double)(cpu_ns_all() - cpu0) / 1e3 / iters;
    *p50 = q_us(v, (size_t)iters, 0.5);
    *p99 = q_us(v, (size_t)iters, 0.99);
  }
  client_fini(&c);
  free(v);
  return ok;
}

typedef struct loader {
  client c;
  uint64_t until;
  uint64_t count;
  bool ok;
} loader;

static void *load_thread(void *arg) {
  loader *l = arg;
  while (l->ok && now_ns() < l->until) {
    l->ok = round_trip(&l->c) != 0;
    l->count++;
  }
  return NULL;
}

/* Requests/s of CLIENTS threads sending to `model` for `seconds`. */
static bool throughput(TRITONSERVER_Server *s, TRITONSERVER_ResponseAllocator *alloc, const char *model, double seconds,
                       double *rps, double *cores) {
  loader l[CLIENTS];
  pthread_t th[CLIENTS];
  bool ok = true;
  for (int i = 0; i < CLIENTS; i++) {
    l[i].ok = client_init(&l[i].c, s, alloc, model, SMALL);
    l[i].count = 0;
    ok = ok && l[i].ok;
  }
  for (int i = 0; ok && i < 2; i++) ok = round_trip(&l[0].c) != 0; /* warm */
  uint64_t cpu0 = cpu_ns_all();
  uint64_t t0 = now_ns();
  for (int i = 0; i < CLIENTS; i++) {
    l[i].until = t0 + (uint64_t)(seconds * 1e9);
    if (ok) pthread_create(&th[i], NULL, load_thread, &l[i]);
  }
  uint64_t total = 0;
  for (int i = 0; i < CLIENTS; i++) {
    if (ok) pthread_join(th[i], NULL);
    ok = ok && l[i].ok;
    total += l[i].count;
    client_fini(&l[i].c);
  }
  double wall = (double)(now_ns() - t0);
  *rps = (double)total / (wall / 1e9);
  *cores = (double)(cpu_ns_all() - cpu0) / wall;
  return ok;
}

/* -------------------------------------------------------------- main */

static bool wait_ready(TRITONSERVER_Server *s, const char *const *models, int n) {
  uint64_t until = now_ns() + 300ull * 1000000000u;
  for (int i = 0; i < n; i++) {
    bool ready = false;
    while (!ready) {
      if (failed(TRITONSERVER_ServerModelIsReady(s, models[i], -1, &ready), "ModelIsReady")) return false;
      if (!ready && now_ns() > until) {
        fprintf(stderr, "error: model '%s' not ready\n", models[i]);
        return false;
      }
      if (!ready) usleep(10000);
    }
  }
  return true;
}

int main(int argc, char **argv) {
  const char *backend_dir = NRD_BACKEND_DIR;
  int iters = 5000;
  double seconds = 4.0;
  bool small_only = false; /* --small: the round trip and BLS figures only (for profiling) */
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick")) {
      iters = 300, seconds = 0.5;
    } else if (!strcmp(argv[i], "--small")) {
      small_only = true;
    } else if (!strcmp(argv[i], "--backend-dir") && i + 1 < argc) {
      backend_dir = argv[++i];
    } else if (!strcmp(argv[i], "--iterations") && i + 1 < argc) {
      iters = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--duration") && i + 1 < argc) {
      seconds = atof(argv[++i]);
    } else {
      fprintf(stderr, "usage: %s [--quick] [--small] [--iterations N] [--duration S] [--backend-dir DIR]\n", argv[0]);
      return 2;
    }
  }
  if (iters < 10) iters = 10;
  char repo[] = "/tmp/nrd-bench-python-XXXXXX";
  if (!mkdtemp(repo)) return 1;
  bool ok = add_model(repo, "ident_c", "identity", 1, NULL) && add_model(repo, "ident_py", "python", 1, IDENT_PY) &&
            add_model(repo, "bls_py", "python", 1, BLS_PY) && add_model(repo, "busy_py_1", "python", 1, BUSY_PY) &&
            add_model(repo, "busy_py_2", "python", 2, BUSY_PY);
  TRITONSERVER_ServerOptions *o = NULL;
  TRITONSERVER_Server *s = NULL;
  ok = ok && !failed(TRITONSERVER_ServerOptionsNew(&o), "options") &&
       !failed(TRITONSERVER_ServerOptionsSetModelRepositoryPath(o, repo), "options") &&
       !failed(TRITONSERVER_ServerOptionsSetBackendDirectory(o, backend_dir), "options") &&
       !failed(TRITONSERVER_ServerOptionsSetLogInfo(o, false), "options") &&
       !failed(TRITONSERVER_ServerOptionsSetExitTimeout(o, 10), "options") &&
       !failed(TRITONSERVER_ServerNew(&s, o), "ServerNew");
  if (o) TRITONSERVER_ServerOptionsDelete(o);
  const char *models[] = {"ident_c", "ident_py", "bls_py", "busy_py_1", "busy_py_2"};
  ok = ok && wait_ready(s, models, 5);
  TRITONSERVER_ResponseAllocator *alloc = NULL;
  ok = ok && !failed(TRITONSERVER_ResponseAllocatorNew(&alloc, alloc_fn, release_fn, NULL), "allocator");

  double c50 = 0, c99 = 0, p50 = 0, p99 = 0, b50 = 0, b99 = 0, bc50 = 0, bc99 = 0, bp50 = 0, bp99 = 0;
  double r1 = 0, r2 = 0, k1 = 0, k2 = 0, ccpu = 0, pcpu = 0, bcpu = 0, bccpu = 0, bpcpu = 0;
  ok = ok && latency(s, alloc, "ident_c", SMALL, iters / 10, iters, &c50, &c99, &ccpu);
  ok = ok && latency(s, alloc, "ident_py", SMALL, iters / 10, iters, &p50, &p99, &pcpu);
  ok = ok && latency(s, alloc, "bls_py", SMALL, iters / 10, iters, &b50, &b99, &bcpu);
  int big_iters = iters / 100 < 20 ? 20 : iters / 100;
  if (ok && small_only) {
    printf("round trip, 16 x FP32, one client (%d requests):\n", iters);
    printf("  C identity backend   p50 %8.1f us  p99 %8.1f us  CPU %7.1f us/req\n", c50, c99, ccpu);
    printf("  model.py identity    p50 %8.1f us  p99 %8.1f us  CPU %7.1f us/req (server + stub)\n", p50, p99, pcpu);
    printf("  model.py + BLS       p50 %8.1f us  p99 %8.1f us  CPU %7.1f us/req  (added p50 %.1f us, CPU %.1f us)\n",
           b50, b99, bcpu, b50 - p50, bcpu - pcpu);
  }
  bool more = ok && !small_only;
  more = more && latency(s, alloc, "ident_c", BIG, 3, big_iters, &bc50, &bc99, &bccpu);
  more = more && latency(s, alloc, "ident_py", BIG, 3, big_iters, &bp50, &bp99, &bpcpu);
  more = more && throughput(s, alloc, "busy_py_1", seconds, &r1, &k1);
  more = more && throughput(s, alloc, "busy_py_2", seconds, &r2, &k2);
  if (!small_only) ok = more;
  if (ok && !small_only) {
    double mb = (double)BIG * sizeof(float) / 1e6;
    printf("round trip, 16 x FP32, one client (%d requests):\n", iters);
    printf("  C identity backend   p50 %8.1f us  p99 %8.1f us  CPU %7.1f us/req\n", c50, c99, ccpu);
    printf("  model.py identity    p50 %8.1f us  p99 %8.1f us  CPU %7.1f us/req (server + stub)\n", p50, p99, pcpu);
    printf("BLS, model.py calling the C identity model:\n");
    printf("  model.py + BLS       p50 %8.1f us  p99 %8.1f us  CPU %7.1f us/req  (added p50 %.1f us, CPU %.1f us)\n",
           b50, b99, bcpu, b50 - p50, bcpu - pcpu);
    printf("%.1f MB FP32 tensor in and out (%d requests):\n", mb, big_iters);
    printf("  C identity backend   p50 %8.1f us  %6.2f GB/s  CPU %7.1f us/req\n", bc50, mb / 1e3 / (bc50 / 1e6), bccpu);
    printf("  model.py identity    p50 %8.1f us  %6.2f GB/s  CPU %7.1f us/req\n", bp50, mb / 1e3 / (bp50 / 1e6), bpcpu);
    printf("CPU-bound model.py (pure-Python loop), %d clients, %.1f s each:\n", CLIENTS, seconds);
    printf("  one instance         %8.1f req/s  %.2f cores busy\n", r1, k1);
    printf("  two instances        %8.1f req/s  %.2f cores busy  (%.2fx)\n", r2, k2, r1 > 0 ? r2 / r1 : 0.0);
    printf("  online CPUs          %ld\n", sysconf(_SC_NPROCESSORS_ONLN));
  }
  if (alloc) TRITONSERVER_ResponseAllocatorDelete(alloc);
  if (s) {
    failed(TRITONSERVER_ServerStop(s), "ServerStop");
    failed(TRITONSERVER_ServerDelete(s), "ServerDelete");
  }
  char cmd[PATH_MAX + 16];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", repo);
  if (system(cmd) != 0) fprintf(stderr, "note: could not remove %s\n", repo);
  return ok ? 0 : 1;
}
