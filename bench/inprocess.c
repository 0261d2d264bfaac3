/* nrd_bench_inprocess: figures for the in-process API with the identity
 * backend (start-up, stop, single-client round trip, throughput with
 * several outstanding requests). Uses only the public API.
 *
 * It prints figures and never judges them: the exit status is non-zero only
 * when a call fails (server, request or response error), never because a
 * figure misses a target.
 *
 * Threads: main() runs on the bench's own thread; the callbacks run on the
 * model-instance threads and may re-send requests from there. */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "triton/core/tritonserver.h"

#include "bench_util.h"

#ifndef NRD_BACKEND_DIR
#define NRD_BACKEND_DIR "backends"
#endif

#define NELEM 16 /* FP32 values per tensor */
#define MAX_SLOTS 32 /* outstanding requests at most */
#define MODEL_ONE "bench_ident_1"
#define MODEL_MANY "bench_ident_n"

/* ------------------------------------------------------------ options */

typedef struct opts {
  int iterations; /* timed round trips */
  int warmup; /* untimed round trips first */
  double duration_s; /* per throughput point */
  int instances; /* instance count of the throughput model */
  int start_runs; /* start/stop repetitions */
  const char *backend_dir;
  const char *only; /* NULL, "start", "roundtrip" or "throughput" */
} opts;

static void usage(const char *argv0) {
  fprintf(stderr,
          "usage: %s [--iterations N] [--duration SECONDS] [--instances N]\n"
          "          [--start-runs N] [--backend-dir DIR] [--quick]\n"
          "          [--only start|roundtrip|throughput]\n",
          argv0);
}

static bool parse_opts(int argc, char **argv, opts *o) {
  *o = (opts){20000, 2000, 2.0, 2, 7, NRD_BACKEND_DIR, NULL};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--quick")) {
      o->iterations = 2000;
      o->warmup = 200;
      o->duration_s = 0.25;
      o->start_runs = 3;
      continue;
    }
    if (!v) {
      usage(argv[0]);
      return false;
    }
    if (!strcmp(a, "--iterations"))
      o->iterations = atoi(v);
    else if (!strcmp(a, "--duration"))
      o->duration_s = atof(v);
    else if (!strcmp(a, "--instances"))
      o->instances = atoi(v);
    else if (!strcmp(a, "--start-runs"))
      o->start_runs = atoi(v);
    else if (!strcmp(a, "--backend-dir"))
      o->backend_dir = v;
    else if (!strcmp(a, "--only"))
      o->only = v;
    else {
      usage(argv[0]);
      return false;
    }
    i++;
  }
  bool only_ok =
      !o->only || !strcmp(o->only, "start") || !strcmp(o->only, "roundtrip") || !strcmp(o->only, "throughput");
  if (o->iterations < 1 || o->duration_s <= 0 || o->instances < 1 || o->start_runs < 1 || !only_ok) {
    usage(argv[0]);
    return false;
  }
  if (o->warmup > o->iterations) o->warmup = o->iterations;
  return true;
}

/* -------------------------------------------------------------- utils */

static uint64_t cpu_ns(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * 1000000000u +
         ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000u;
}

/* Sorts `v` in place; returns the value at quantile q (nearest rank). */
static uint64_t quantile(uint64_t *v, size_t n, double q, bool sorted) {
  if (!sorted) qsort(v, n, sizeof *v, cmp_u64);
  size_t k = (size_t)(q * (double)(n - 1) + 0.5);
  return v[k < n ? k : n - 1];
}

/* Waits until *flag reaches `want`: spins briefly, then yields the core. */
static void wait_for(atomic_uint *flag, unsigned want) {
  for (unsigned spins = 0; atomic_load_explicit(flag, memory_order_acquire) < want; spins++) {
    if (spins < 20000) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    } else {
      sched_yield();
    }
  }
}

/* --------------------------------------------------------- repository */

/* Adds model `name` (identity, FP32 [16] in/out, `count` CPU instances) to
 * `repo`. */
static bool add_model(const char *repo, const char *name, int count) {
  char path[4096], cfg[1024];
  snprintf(path, sizeof path, "%s/%s", repo, name);
  if (mkdir(path, 0755)) return false;
  snprintf(path, sizeof path, "%s/%s/1", repo, name);
  if (mkdir(path, 0755)) return false;
  snprintf(cfg, sizeof cfg,
           "name: \"%s\"\nbackend: \"identity\"\nmax_batch_size: 0\n"
           "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ %d ] } ]\n"
           "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ %d ] } ]\n"
           "instance_group [ { count: %d kind: KIND_CPU } ]\n",
           name, NELEM, NELEM, count);
  snprintf(path, sizeof path, "%s/%s/config.pbtxt", repo, name);
  return write_file(path, cfg);
}

/* Removes what add_model created (and the repository folder). */
static void remove_repo(const char *repo, const char *const *names, int n) {
  char path[4096];
  for (int i = 0; i < n; i++) {
    snprintf(path, sizeof path, "%s/%s/config.pbtxt", repo, names[i]);
    unlink(path);
    snprintf(path, sizeof path, "%s/%s/1", repo, names[i]);
    rmdir(path);
    snprintf(path, sizeof path, "%s/%s", repo, names[i]);
    rmdir(path);
  }
  rmdir(repo);
}

/* ------------------------------------------------------------- server */

/* A quiet server on `repo` (every model loaded at start). NULL on error,
 * printed. The options are freed either way. */
static TRITONSERVER_Server *server_new(const char *repo, const char *backend_dir) {
  TRITONSERVER_ServerOptions *o = NULL;
  TRITONSERVER_Server *s = NULL;
  if (failed(TRITONSERVER_ServerOptionsNew(&o), "ServerOptionsNew")) return NULL;
  bool ok = !failed(TRITONSERVER_ServerOptionsSetModelRepositoryPath(o, repo), "options") &&
            !failed(TRITONSERVER_ServerOptionsSetModelControlMode(o, TRITONSERVER_MODEL_CONTROL_NONE), "options") &&
            !failed(TRITONSERVER_ServerOptionsSetBackendDirectory(o, backend_dir), "options") &&
            !failed(TRITONSERVER_ServerOptionsSetLogInfo(o, false), "options") &&
            !failed(TRITONSERVER_ServerOptionsSetLogWarn(o, false), "options") &&
            !failed(TRITONSERVER_ServerOptionsSetExitTimeout(o, 5), "options");
  if (ok && failed(TRITONSERVER_ServerNew(&s, o), "ServerNew")) {
    if (s) TRITONSERVER_ServerDelete(s);
    s = NULL;
  }
  TRITONSERVER_ServerOptionsDelete(o);
  return s;
}

/* True once the server and `model` report ready (waits up to 30 s). */
static bool wait_ready(TRITONSERVER_Server *s, const char *model) {
  uint64_t until = now_ns() + 30ull * 1000000000u;
  for (;;) {
    bool live = false, mready = false;
    if (failed(TRITONSERVER_ServerIsReady(s, &live), "ServerIsReady")) return false;
    if (live && failed(TRITONSERVER_ServerModelIsReady(s, model, -1, &mready), "ServerModelIsReady")) return false;
    if (live && mready) return true;
    if (now_ns() > until) {
      fprintf(stderr, "error: server or model '%s' not ready after 30 s\n", model);
      return false;
    }
    sched_yield();
  }
}

/* ----------------------------------------------------- request slots */

typedef struct bench bench;

/* One outstanding request, reused for every send. */
typedef struct slot {
  bench *b;
  TRITONSERVER_InferenceRequest *req;
  atomic_uint done; /* +1 final response, +1 release: 2 = reusable */
  uint64_t t_send; /* ns, set before each send */
  uint64_t t_response; /* ns, set in the final response callback */
  float in[NELEM];
  _Alignas(64) unsigned char out[NELEM * sizeof(float)];
  bool out_busy; /* `out` handed to a response not yet deleted */
} slot;

struct bench {
  TRITONSERVER_Server *server;
  TRITONSERVER_ResponseAllocator *alloc;
  bool timed; /* round trip: stamp send and response times */
  atomic_bool resend; /* throughput: completions re-send */
  atomic_uint_fast64_t completed;
  atomic_uint active; /* slots with a request in flight */
  atomic_uint errors;
  slot slots[MAX_SLOTS];
};

/* Output buffers come from the slot itself (one FP32 [16] tensor), so the
 * figures carry no malloc of the client's; anything bigger is malloc'd. */
static TRITONSERVER_Error *alloc_fn(TRITONSERVER_ResponseAllocator *a, const char *name, size_t size,
                                    TRITONSERVER_MemoryType mt, int64_t mt_id, void *userp, void **buffer,
                                    void **buffer_userp, TRITONSERVER_MemoryType *actual_mt, int64_t *actual_id) {
  (void)a, (void)name, (void)mt, (void)mt_id;
  slot *sl = userp;
  if (size <= sizeof sl->out && !sl->out_busy) {
    sl->out_busy = true;
    *buffer = sl->out;
    *buffer_userp = sl;
  } else {
    *buffer = malloc(size ? size : 1);
    *buffer_userp = NULL;
    if (!*buffer) return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, "bench: out of memory");
  }
  *actual_mt = TRITONSERVER_MEMORY_CPU;
  *actual_id = 0;
  return NULL;
}

static TRITONSERVER_Error *release_fn(TRITONSERVER_ResponseAllocator *a, void *buffer, void *buffer_userp, size_t size,
                                      TRITONSERVER_MemoryType mt, int64_t mt_id) {
  (void)a, (void)size, (void)mt, (void)mt_id;
  slot *sl = buffer_userp;
  if (sl)
    sl->out_busy = false;
  else
    free(buffer);
  return NULL;
}

/* Sends the slot's request once more; counts a failure as an error. Any
 * thread, only when the slot is idle. */
static void slot_send(slot *sl) {
  atomic_store_explicit(&sl->done, 0, memory_order_relaxed);
  if (sl->b->timed) sl->t_send = now_ns();
  if (failed(TRITONSERVER_ServerInferAsync(sl->b->server, sl->req, NULL), "ServerInferAsync")) {
    atomic_fetch_add(&sl->b->errors, 1);
    atomic_fetch_sub(&sl->b->active, 1);
    atomic_store_explicit(&sl->done, 2, memory_order_release);
  }
}

/* Called by whichever callback comes second: the request is idle again.
 * b was read before that callback's count, since the main thread may
 * re-initialize an idle slot (sl is only touched again when re-sending). */
static void slot_complete(bench *b, slot *sl) {
  atomic_fetch_add_explicit(&b->completed, 1, memory_order_relaxed);
  if (atomic_load_explicit(&b->resend, memory_order_relaxed))
    slot_send(sl);
  else
    atomic_fetch_sub(&b->active, 1);
}

/* Any thread. Deletes the response here, as the bench needs nothing of it. */
static void on_response(TRITONSERVER_InferenceResponse *r, const uint32_t flags, void *userp) {
  slot *sl = userp;
  uint64_t t = sl->b->timed ? now_ns() : 0;
  if (r) {
    TRITONSERVER_Error *e = TRITONSERVER_InferenceResponseError(r);
    if (e) {
      failed(e, "response");
      atomic_fetch_add(&sl->b->errors, 1);
    }
    TRITONSERVER_InferenceResponseDelete(r);
  }
  if (!(flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL)) return;
  sl->t_response = t;
  bench *b = sl->b;
  if (atomic_fetch_add_explicit(&sl->done, 1, memory_order_acq_rel) == 1) slot_complete(b, sl);
}

/* Any thread. */
static void on_release(TRITONSERVER_InferenceRequest *req, const uint32_t flags, void *userp) {
  (void)req, (void)flags;
  slot *sl = userp;
  bench *b = sl->b;
  if (atomic_fetch_add_explicit(&sl->done, 1, memory_order_acq_rel) == 1) slot_complete(b, sl);
}

/* Creates slot i's request for `model`. */
static bool slot_init(bench *b, int i, const char *model) {
  slot *sl = &b->slots[i];
  sl->b = b;
  for (int k = 0; k < NELEM; k++) sl->in[k] = (float)(i * NELEM + k);
  int64_t shape[1] = {NELEM};
  TRITONSERVER_InferenceRequest *r = NULL;
  if (failed(TRITONSERVER_InferenceRequestNew(&r, b->server, model, -1), "InferenceRequestNew")) return false;
  sl->req = r;
  return !failed(TRITONSERVER_InferenceRequestAddInput(r, "INPUT0", TRITONSERVER_TYPE_FP32, shape, 1), "AddInput") &&
         !failed(TRITONSERVER_InferenceRequestAppendInputData(r, "INPUT0", sl->in, sizeof sl->in,
                                                              TRITONSERVER_MEMORY_CPU, 0),
                 "AppendInputData") &&
         !failed(TRITONSERVER_InferenceRequestAddRequestedOutput(r, "OUTPUT0"), "AddRequestedOutput") &&
         !failed(TRITONSERVER_InferenceRequestSetReleaseCallback(r, on_release, sl), "SetReleaseCallback") &&
         !failed(TRITONSERVER_InferenceRequestSetResponseCallback(r, b->alloc, sl, on_response, sl),
                 "SetResponseCallback");
}

static void slot_fini(slot *sl) {
  if (sl->req) failed(TRITONSERVER_InferenceRequestDelete(sl->req), "InferenceRequestDelete");
  sl->req = NULL;
}

/* --------------------------------------------------------- start-up */

typedef struct start_fig {
  double start_ms, stop_ms, start_min, start_max, stop_min, stop_max;
} start_fig;

static bool bench_start(const opts *o, start_fig *f) {
  char repo[] = "/tmp/nrd-bench-start-XXXXXX";
  if (!mkdtemp(repo)) return false;
  const char *names[1] = {MODEL_ONE};
  bool ok = add_model(repo, MODEL_ONE, 1);
  uint64_t *st = calloc((size_t)o->start_runs, sizeof *st), *sp = calloc((size_t)o->start_runs, sizeof *sp);
  for (int i = 0; ok && i < o->start_runs; i++) {
    uint64_t t0 = now_ns();
    TRITONSERVER_Server *s = server_new(repo, o->backend_dir);
    ok = s && wait_ready(s, MODEL_ONE);
    uint64_t t1 = now_ns();
    if (s) {
      ok = !failed(TRITONSERVER_ServerStop(s), "ServerStop") && ok;
      ok = !failed(TRITONSERVER_ServerDelete(s), "ServerDelete") && ok;
    }
    uint64_t t2 = now_ns();
    st[i] = t1 - t0;
    sp[i] = t2 - t1;
  }
  if (ok) {
    size_t n = (size_t)o->start_runs;
    f->start_ms = (double)quantile(st, n, 0.5, false) / 1e6;
    f->start_min = (double)st[0] / 1e6, f->start_max = (double)st[n - 1] / 1e6;
    f->stop_ms = (double)quantile(sp, n, 0.5, false) / 1e6;
    f->stop_min = (double)sp[0] / 1e6, f->stop_max = (double)sp[n - 1] / 1e6;
  }
  free(st);
  free(sp);
  remove_repo(repo, names, 1);
  return ok;
}

/* ------------------------------------------------------- round trip */

typedef struct rt_fig {
  double med, p90, p99, mean, min, max;
  double med_release; /* until the request is reusable (both callbacks) */
} rt_fig;

static bool bench_round_trip(bench *b, const opts *o, rt_fig *f) {
  slot *sl = &b->slots[0];
  size_t n = (size_t)o->iterations;
  uint64_t *lat = calloc(n, sizeof *lat), *full = calloc(n, sizeof *full);
  if (!lat || !full) return false;
  atomic_store(&b->resend, false);
  b->timed = true;
  bool ok = true;
  for (int i = 0; ok && i < o->warmup + o->iterations; i++) {
    atomic_store(&b->active, 1);
    slot_send(sl);
    wait_for(&sl->done, 2);
    uint64_t t_idle = now_ns();
    if (atomic_load(&b->errors)) ok = false;
    if (i >= o->warmup) {
      lat[i - o->warmup] = sl->t_response - sl->t_send;
      full[i - o->warmup] = t_idle - sl->t_send;
    }
  }
  b->timed = false;
  if (ok) {
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += (double)lat[i];
    f->mean = sum / (double)n / 1e3;
    f->med = (double)quantile(lat, n, 0.5, false) / 1e3;
    f->p90 = (double)quantile(lat, n, 0.9, true) / 1e3;
    f->p99 = (double)quantile(lat, n, 0.99, true) / 1e3;
    f->min = (double)lat[0] / 1e3;
    f->max = (double)lat[n - 1] / 1e3;
    f->med_release = (double)quantile(full, n, 0.5, false) / 1e3;
  }
  free(lat);
  free(full);
  return ok;
}

/* ------------------------------------------------------- throughput */

typedef struct tp_fig {
  double rps, cpu_us_per_req;
  uint64_t requests;
} tp_fig;

static bool bench_throughput(bench *b, int outstanding, double duration_s, tp_fig *f) {
  atomic_store(&b->completed, 0);
  atomic_store(&b->resend, true);
  atomic_store(&b->active, (unsigned)outstanding);
  uint64_t c0 = cpu_ns(), t0 = now_ns();
  for (int i = 0; i < outstanding; i++) slot_send(&b->slots[i]);
  struct timespec d = {(time_t)duration_s, (long)((duration_s - (double)(time_t)duration_s) * 1e9)};
  while (nanosleep(&d, &d) && errno == EINTR) {
  }
  uint64_t done = atomic_load(&b->completed);
  uint64_t t1 = now_ns(), c1 = cpu_ns();
  atomic_store(&b->resend, false);
  uint64_t until = now_ns() + 10ull * 1000000000u;
  while (atomic_load(&b->active) && now_ns() < until) sched_yield();
  if (atomic_load(&b->active)) {
    fprintf(stderr, "error: %u requests still in flight 10 s after the run\n", atomic_load(&b->active));
    return false;
  }
  f->requests = done;
  f->rps = (double)done / ((double)(t1 - t0) / 1e9);
  f->cpu_us_per_req = done ? (double)(c1 - c0) / 1e3 / (double)done : 0;
  return atomic_load(&b->errors) == 0;
}

/* --------------------------------------------------- backend figures */

/* Average ns per request of a statistics section ("queue", ...). */
static double stat_avg_us(json_t *inf, const char *key) {
  json_t *sec = json_object_get(inf, key);
  double cnt = (double)json_integer_value(json_object_get(sec, "count"));
  double ns = (double)json_integer_value(json_object_get(sec, "ns"));
  return cnt > 0 ? ns / cnt / 1e3 : 0;
}

/* Prints the core's own per-request statistics of `model`, which include
 * what the backend reported for its compute phases. */
static void print_model_stats(TRITONSERVER_Server *s, const char *model) {
  TRITONSERVER_Message *m = NULL;
  if (failed(TRITONSERVER_ServerModelStatistics(s, model, -1, &m), "ServerModelStatistics")) return;
  const char *text = NULL;
  size_t len = 0;
  if (!failed(TRITONSERVER_MessageSerializeToJson(m, &text, &len), "MessageSerializeToJson")) {
    json_error_t jerr;
    json_t *root = json_loadb(text, len, 0, &jerr);
    json_t *inf = json_object_get(json_array_get(json_object_get(root, "model_stats"), 0), "inference_stats");
    if (inf) {
      printf("  server statistics of %s (avg per request, us): queue %.2f  compute_input %.2f  "
             "compute_infer %.2f  compute_output %.2f  success(total) %.2f\n",
             model, stat_avg_us(inf, "queue"), stat_avg_us(inf, "compute_input"), stat_avg_us(inf, "compute_infer"),
             stat_avg_us(inf, "compute_output"), stat_avg_us(inf, "success"));
    } else {
      printf("  server statistics of %s: not available\n", model);
    }
    json_decref(root);
  }
  TRITONSERVER_MessageDelete(m);
}

/* ------------------------------------------------------------- main */

static bool want(const opts *o, const char *section) { return !o->only || !strcmp(o->only, section); }

int main(int argc, char **argv) {
  opts o;
  if (!parse_opts(argc, argv, &o)) return 2;
  setvbuf(stdout, NULL, _IOLBF, 0);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  printf("nrd_bench_inprocess: identity model, FP32 [%d] in/out, max_batch_size 0\n", NELEM);
  printf("  machine: %ld online cores; backend dir %s\n", cores, o.backend_dir);
  printf("  iterations %d (+%d warm-up), duration %.2f s per point, %d instances for throughput\n\n", o.iterations,
         o.warmup, o.duration_s, o.instances);

  start_fig sf = {0};
  if (want(&o, "start")) {
    if (!bench_start(&o, &sf)) {
      fprintf(stderr, "nrd_bench_inprocess: stopped on an error\n");
      return 1;
    }
    printf("start-up (ServerNew -> server and model ready), %d runs: median %.2f ms (min %.2f, max %.2f)\n",
           o.start_runs, sf.start_ms, sf.start_min, sf.start_max);
    printf("stop (ServerStop + ServerDelete, idle), %d runs:           median %.2f ms (min %.2f, max %.2f)\n\n",
           o.start_runs, sf.stop_ms, sf.stop_min, sf.stop_max);
  }

  int rc = 1;
  char repo[] = "/tmp/nrd-bench-XXXXXX";
  if (!mkdtemp(repo)) return 1;
  const char *names[2] = {MODEL_ONE, MODEL_MANY};
  bench *b = calloc(1, sizeof *b);
  rt_fig rt = {0};
  tp_fig tp[4] = {{0}};
  const int outstanding[4] = {1, 2, 8, 32};
  if (!b || !add_model(repo, MODEL_ONE, 1) || !add_model(repo, MODEL_MANY, o.instances)) goto done;
  if (want(&o, "roundtrip") || want(&o, "throughput")) {
    b->server = server_new(repo, o.backend_dir);
    if (!b->server || !wait_ready(b->server, MODEL_ONE) || !wait_ready(b->server, MODEL_MANY)) goto done;
    if (failed(TRITONSERVER_ResponseAllocatorNew(&b->alloc, alloc_fn, release_fn, NULL), "ResponseAllocatorNew"))
      goto done;
  }

  if (want(&o, "roundtrip")) {
    if (!slot_init(b, 0, MODEL_ONE) || !bench_round_trip(b, &o, &rt)) goto done;
    slot_fini(&b->slots[0]);
    printf("round trip, 1 client thread, 1 instance (ServerInferAsync -> final response callback), "
           "%d iterations:\n",
           o.iterations);
    printf("  median %.2f us   p90 %.2f us   p99 %.2f us   mean %.2f us   (min %.2f, max %.2f)\n", rt.med, rt.p90,
           rt.p99, rt.mean, rt.min, rt.max);
    printf("  median until the request is reusable (response + release callbacks seen by the client): %.2f us\n",
           rt.med_release);
    print_model_stats(b->server, MODEL_ONE);
    printf("\n");
  }

  if (want(&o, "throughput")) {
    for (int i = 0; i < 32; i++)
      if (!slot_init(b, i, MODEL_MANY)) goto done;
    printf("throughput, %d instances, %.2f s per point (CPU = process user+sys per request;\n"
           "  completions re-send from the instance thread that finished them):\n",
           o.instances, o.duration_s);
    printf("  %-12s %14s %14s %12s\n", "outstanding", "requests/s", "CPU us/req", "requests");
    for (int i = 0; i < 4; i++) {
      if (!bench_throughput(b, outstanding[i], o.duration_s, &tp[i])) goto done;
      printf("  %-12d %14.0f %14.2f %12llu\n", outstanding[i], tp[i].rps, tp[i].cpu_us_per_req,
             (unsigned long long)tp[i].requests);
    }
    print_model_stats(b->server, MODEL_MANY);
    printf("\n");
  }

  if (!o.only) {
    printf("targets: median round trip %.2f us (target <= 10 us: %s); start %.2f ms (target < 10 ms: %s); "
           "stop %.2f ms (target < 50 ms: %s)\n",
           rt.med, rt.med <= 10 ? "met" : "MISSED", sf.start_ms, sf.start_ms < 10 ? "met" : "MISSED", sf.stop_ms,
           sf.stop_ms < 50 ? "met" : "MISSED");
  }
  rc = 0;

done:
  if (b) {
    for (int i = 0; i < MAX_SLOTS; i++) slot_fini(&b->slots[i]);
    if (b->alloc) TRITONSERVER_ResponseAllocatorDelete(b->alloc);
    if (b->server && failed(TRITONSERVER_ServerDelete(b->server), "ServerDelete")) rc = 1;
    if (b->errors) {
      fprintf(stderr, "error: %u failed requests/responses\n", atomic_load(&b->errors));
      rc = 1;
    }
    free(b);
  }
  remove_repo(repo, names, 2);
  if (rc) fprintf(stderr, "nrd_bench_inprocess: stopped on an error\n");
  return rc;
}
