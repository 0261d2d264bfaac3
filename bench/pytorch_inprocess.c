/* nrd_bench_pytorch: the pytorch backend in-process (libtritonserver's
 * public API, no HTTP), against the same TorchScript module's forward()
 * called directly on libtorch (through pt_torch.h, the backend's own thin
 * door, with the same tensors):
 *
 *   round trip   x + 1 on 16 x FP32, one client, p50/p99: through Nereid,
 *                and the bare forward() (tensor over the input, forward,
 *                output copied out); the difference is what Nereid adds
 *   instances    a CPU-bound model (eight 64x128 by 128x128 matmuls, one
 *                intra-op thread) with one instance and with two, four clients:
 *                requests/s; the bare forward() from one and from two
 *                threads beside it
 *
 * The models are compiled at start by pt_make_model. It prints figures
 * and never judges them: the exit status is non-zero only when a call
 * fails.
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

#include "pt_torch.h"
#include "triton/core/tritonserver.h"

#include "bench_util.h"

#ifndef NRD_BACKEND_DIR
#define NRD_BACKEND_DIR "backends"
#endif
#ifndef NRD_PT_MAKE_MODEL
#define NRD_PT_MAKE_MODEL "pt_make_model"
#endif

#define SMALL 16 /* FP32 values of the round-trip tensor */
#define WIDE 128 /* the CPU-bound model's width */
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

static const char SMALL_TS[] = "def forward(self, INPUT0):\n    return INPUT0 + 1\n";
/* A millisecond or so of one core's matmuls per request: the 16 inputs
 * tiled to 64 x 128, eight times through a 128 x 128 layer. */
static const char BUSY_TS[] = "def forward(self, INPUT0):\n"
                              "    x = INPUT0.reshape(1, 16).repeat(64, 8)\n"
                              "    for i in range(8):\n"
                              "        x = torch.tanh(torch.matmul(x, self.w))\n"
                              "    return x[0, :16].contiguous()\n";

/* Model `name` in `repo`: FP32 [-1] in and out, `count` CPU instances,
 * one intra-op thread, its model.pt compiled from `source`. */
static bool add_model(const char *repo, const char *name, int count, const char *source, const char *params) {
  char path[PATH_MAX], src[PATH_MAX], cfg[1024], cmd[3 * PATH_MAX];
  snprintf(path, sizeof path, "%s/%s", repo, name);
  if (mkdir(path, 0755)) return false;
  snprintf(path, sizeof path, "%s/%s/1", repo, name);
  if (mkdir(path, 0755)) return false;
  snprintf(cfg, sizeof cfg,
           "name: \"%s\"\nbackend: \"pytorch\"\nmax_batch_size: 0\n"
           "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n"
           "output [ { name: \"OUTPUT__0\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n"
           "instance_group [ { count: %d kind: KIND_CPU } ]\n"
           "parameters { key: \"INTRA_OP_THREAD_COUNT\" value { string_value: \"1\" } }\n",
           name, count);
  snprintf(path, sizeof path, "%s/%s/config.pbtxt", repo, name);
  if (!write_file(path, cfg)) return false;
  snprintf(src, sizeof src, "%s/%s/source.ts", repo, name);
  if (!write_file(src, source)) return false;
  snprintf(cmd, sizeof cmd, "'%s' '%s/%s/1/model.pt' '%s' %s", NRD_PT_MAKE_MODEL, repo, name, src, params);
  if (system(cmd) != 0) {
    fprintf(stderr, "error: %s failed\n", cmd);
    return false;
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
         !failed(TRITONSERVER_InferenceRequestAddRequestedOutput(c->req, "OUTPUT__0"), "output") &&
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

/* ------------------------------------------------------ bare forward() */

static const pt_exec_options BARE = {true, true, true, false, -1, -1, -1, 1};

/* One bare forward() of `n` values: a tensor over `in`, forward, the
 * output copied to `out` (what the backend does around the call). */
static bool bare_once(pt_module *m, const float *in, float *out, size_t n) {
  int64_t shape[1] = {(int64_t)n};
  pt_args *a = pt_args_new(1, false);
  pt_result *r = NULL;
  bool ok = a && !failed(pt_args_set_tensor(a, 0, "INPUT0", in, TRITONSERVER_TYPE_FP32, shape, 1), "bare input") &&
            !failed(pt_module_forward(m, a, &BARE, &r), "bare forward");
  if (ok) {
    pt_output o;
    pt_result_output(r, 0, &o);
    ok = o.byte_size == n * sizeof(float);
    if (ok) memcpy(out, o.data, o.byte_size);
  }
  pt_result_free(r);
  pt_args_free(a);
  return ok;
}

static bool bare_latency(pt_module *m, int warmup, int iters, double *p50, double *p99) {
  float in[SMALL], out[SMALL];
  for (int i = 0; i < SMALL; i++) in[i] = (float)i;
  uint64_t *v = calloc((size_t)iters, sizeof *v);
  bool ok = v != NULL;
  for (int i = 0; ok && i < warmup + iters; i++) {
    uint64_t t0 = now_ns();
    ok = bare_once(m, in, out, SMALL);
    if (i >= warmup) v[i - warmup] = now_ns() - t0;
  }
  if (ok) {
    *p50 = q_us(v, (size_t)iters, 0.5);
    *p99 = q_us(v, (size_t)iters, 0.99);
  }
  free(v);
  return ok;
}

typedef struct bare_loader {
  pt_module *m;
  uint64_t until, count;
  bool ok;
} bare_loader;

static void *bare_thread(void *arg) {
  bare_loader *l = arg;
  float *in = calloc(SMALL, sizeof(float)), *out = calloc(SMALL, sizeof(float));
  l->ok = in && out;
  while (l->ok && now_ns() < l->until) {
    l->ok = bare_once(l->m, in, out, SMALL);
    l->count++;
  }
  free(in);
  free(out);
  return NULL;
}

/* forward()s/s of `threads` threads calling one module for `seconds`. */
static bool bare_throughput(pt_module *m, int threads, double seconds, double *rps) {
  bare_loader l[2];
  pthread_t th[2];
  uint64_t t0 = now_ns(), total = 0;
  bool ok = true;
  for (int i = 0; i < threads; i++) {
    l[i] = (bare_loader){m, t0 + (uint64_t)(seconds * 1e9), 0, true};
    pthread_create(&th[i], NULL, bare_thread, &l[i]);
  }
  for (int i = 0; i < threads; i++) {
    pthread_join(th[i], NULL);
    ok = ok && l[i].ok;
    total += l[i].count;
  }
  *rps = (double)total / ((double)(now_ns() - t0) / 1e9);
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
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick")) {
      iters = 300, seconds = 0.5;
    } else if (!strcmp(argv[i], "--backend-dir") && i + 1 < argc) {
      backend_dir = argv[++i];
    } else if (!strcmp(argv[i], "--iterations") && i + 1 < argc) {
      iters = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--duration") && i + 1 < argc) {
      seconds = atof(argv[++i]);
    } else {
      fprintf(stderr, "usage: %s [--quick] [--iterations N] [--duration S] [--backend-dir DIR]\n", argv[0]);
      return 2;
    }
  }
  if (iters < 10) iters = 10;
  char repo[] = "/tmp/nrd-bench-pytorch-XXXXXX";
  if (!mkdtemp(repo)) return 1;
  bool ok = add_model(repo, "small", 1, SMALL_TS, "") && add_model(repo, "busy_1", 1, BUSY_TS, "w=128x128") &&
            add_model(repo, "busy_2", 2, BUSY_TS, "w=128x128");
  TRITONSERVER_ServerOptions *o = NULL;
  TRITONSERVER_Server *s = NULL;
  ok = ok && !failed(TRITONSERVER_ServerOptionsNew(&o), "options") &&
       !failed(TRITONSERVER_ServerOptionsSetModelRepositoryPath(o, repo), "options") &&
       !failed(TRITONSERVER_ServerOptionsSetBackendDirectory(o, backend_dir), "options") &&
       !failed(TRITONSERVER_ServerOptionsSetLogInfo(o, false), "options") &&
       !failed(TRITONSERVER_ServerOptionsSetExitTimeout(o, 10), "options") &&
       !failed(TRITONSERVER_ServerNew(&s, o), "ServerNew");
  if (o) TRITONSERVER_ServerOptionsDelete(o);
  const char *models[] = {"small", "busy_1", "busy_2"};
  ok = ok && wait_ready(s, models, 3);
  TRITONSERVER_ResponseAllocator *alloc = NULL;
  ok = ok && !failed(TRITONSERVER_ResponseAllocatorNew(&alloc, alloc_fn, release_fn, NULL), "allocator");

  /* The bare side loads the same files into this process. */
  pt_module *bare_small = NULL, *bare_busy = NULL;
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/small/1/model.pt", repo);
  ok = ok && !failed(pt_module_load(path, true, &bare_small), "bare load");
  snprintf(path, sizeof path, "%s/busy_1/1/model.pt", repo);
  ok = ok && !failed(pt_module_load(path, true, &bare_busy), "bare load");

  double n50 = 0, n99 = 0, b50 = 0, b99 = 0, ncpu = 0, r1 = 0, r2 = 0, k1 = 0, k2 = 0, f1 = 0, f2 = 0;
  /* Interleaved, twice each, the better of each kept: the machine is shared. */
  for (int round = 0; ok && round < 2; round++) {
    double a50, a99, c, d50, d99;
    ok = latency(s, alloc, "small", SMALL, iters / 10, iters, &a50, &a99, &c) &&
         bare_latency(bare_small, iters / 10, iters, &d50, &d99);
    if (ok && (round == 0 || a50 < n50)) n50 = a50, n99 = a99, ncpu = c;
    if (ok && (round == 0 || d50 < b50)) b50 = d50, b99 = d99;
  }
  /* TorchScript profiles a module's first runs and optimizes after: every
   * instance (and the bare module) is warmed for a while first. */
  double warm = seconds / 4, ignored;
  ok = ok && throughput(s, alloc, "busy_1", warm, &r1, &k1) && throughput(s, alloc, "busy_2", warm, &r2, &k2) &&
       bare_throughput(bare_busy, 2, warm, &ignored);
  ok = ok && throughput(s, alloc, "busy_1", seconds, &r1, &k1);
  ok = ok && throughput(s, alloc, "busy_2", seconds, &r2, &k2);
  ok = ok && bare_throughput(bare_busy, 1, seconds, &f1) && bare_throughput(bare_busy, 2, seconds, &f2);
  if (ok) {
    printf("round trip, x + 1 on 16 x FP32, one client (%d requests, libtorch %s):\n", iters, pt_version());
    printf("  through Nereid       p50 %8.1f us  p99 %8.1f us  CPU %7.1f us/req\n", n50, n99, ncpu);
    printf("  bare forward()       p50 %8.1f us  p99 %8.1f us\n", b50, b99);
    printf("  Nereid adds          p50 %8.1f us  p99 %8.1f us  (%.2fx the bare p50)\n", n50 - b50, n99 - b99,
           b50 > 0 ? n50 / b50 : 0.0);
    printf("CPU-bound model (8 x 64x%d by %dx%d matmul + tanh), %d clients, %.1f s each:\n", WIDE, WIDE, WIDE, CLIENTS,
           seconds);
    printf("  one instance         %8.1f req/s  %.2f cores busy\n", r1, k1);
    printf("  two instances        %8.1f req/s  %.2f cores busy  (%.2fx)\n", r2, k2, r1 > 0 ? r2 / r1 : 0.0);
    printf("  bare, one thread     %8.1f req/s\n", f1);
    printf("  bare, two threads    %8.1f req/s  (%.2fx)\n", f2, f1 > 0 ? f2 / f1 : 0.0);
    printf("  Nereid / bare        %8.2f (one)  %.2f (two)\n", f1 > 0 ? r1 / f1 : 0.0, f2 > 0 ? r2 / f2 : 0.0);
    printf("  online CPUs          %ld\n", sysconf(_SC_NPROCESSORS_ONLN));
  }
  pt_module_free(bare_small);
  pt_module_free(bare_busy);
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
