/* nrd_bench_stateful: the accumulate model at many concurrent sequences,
 * in-process (libtritonserver's public API, no network, no Python client),
 * served by the stateful backend and by the onnxruntime backend with
 * implicit state (sequence_batching.state), in the same run.
 *
 *   nrd_bench_stateful [--sequences N] [--steps K] [--rounds R]
 *                      [--max-batch B] [--backend-dir DIR] [--quick]
 *
 * The model repository is the one bench/stateful_bench.py writes (its
 * make_repo, run with /usr/bin/python3): model "stateful" (Input
 * [4, -1, 5], the state kept by the backend) and model "implicit" (Input
 * [4, 5], the state carried by the sequence batcher), both one instance,
 * Oldest strategy, max_candidate_sequences = N, max_batch_size B, 2 ms
 * queue delay, one ONNX Runtime thread.
 *
 * N lanes each run R sequences one after the other (START, K steps in
 * all, the last with END; a new correlation ID each time), with exactly
 * one request outstanding per lane at all times: a lane's next request
 * is sent as soon as its previous response arrives. Every output is
 * checked against the running sum the model must compute.
 *
 * Prints, per model: steps/s, p50/p99 per step (send to final response),
 * and the CPU time of the whole process per step (getrusage: the server's
 * threads and this client's sender thread and callbacks, the same client
 * work for both models; CPU time, which other load on the machine
 * inflates less than wall-clock figures). Then the ratios. Prints figures
 * only; the exit status is non-zero when a call fails or an output is
 * wrong.
 *
 * Threads: one sender thread issues every request; the server's threads
 * run the callbacks, which only check, record and hand the lane back to
 * the sender through a locked queue. */
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "triton/core/tritonserver.h"

#include "bench_util.h"

#ifndef NRD_BACKEND_DIR
#define NRD_BACKEND_DIR "backends"
#endif
#ifndef NRD_SOURCE_DIR
#define NRD_SOURCE_DIR "."
#endif

#define SEGS 4
#define WIDTH 5
#define VALUES (SEGS * WIDTH)

static uint64_t cpu_ns(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000u +
         (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000u;
}

/* ------------------------------------------------------------ lanes */

struct run;

/* One lane: a sequence at a time, one request outstanding. Owned by the
 * sender thread between requests, by the server while one is in flight. */
typedef struct lane {
  struct run *run;
  struct lane *qnext;
  uint32_t index;
  uint32_t step; /* steps sent in all, over every round */
  float sum[WIDTH]; /* the state the model must hold after the last step */
  float in[VALUES];
  float out[VALUES];
  uint64_t sent_ns;
} lane;

typedef struct run {
  TRITONSERVER_Server *server;
  TRITONSERVER_ResponseAllocator *alloc;
  const char *model;
  bool stateful; /* Input [1, 4, 1, 5], else [1, 4, 5] */
  uint32_t n, steps, rounds;
  lane *lanes;
  uint64_t *lat; /* n * steps * rounds latencies */
  atomic_size_t n_lat;
  atomic_uint errors, wrong;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  lane *qhead, *qtail; /* lanes whose next request is due */
  uint32_t finished; /* lanes done with every round */
} run;

static void lane_due(run *r, lane *l) {
  pthread_mutex_lock(&r->mu);
  l->qnext = NULL;
  if (r->qtail)
    r->qtail->qnext = l;
  else
    r->qhead = l;
  r->qtail = l;
  pthread_cond_signal(&r->cv);
  pthread_mutex_unlock(&r->mu);
}

static TRITONSERVER_Error *alloc_fn(TRITONSERVER_ResponseAllocator *a, const char *name, size_t size,
                                    TRITONSERVER_MemoryType mt, int64_t mt_id, void *userp, void **buffer,
                                    void **buffer_userp, TRITONSERVER_MemoryType *actual_mt, int64_t *actual_id) {
  (void)a, (void)name, (void)mt, (void)mt_id;
  lane *l = userp;
  if (size > sizeof l->out) return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "bench: output too large");
  *buffer = l->out;
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

static void on_release(TRITONSERVER_InferenceRequest *req, const uint32_t flags, void *userp) {
  (void)flags, (void)userp;
  TRITONSERVER_InferenceRequestDelete(req);
}

/* Checks the output against the running sum: Output = Input + state. */
static bool output_right(const lane *l) {
  for (int s = 0; s < SEGS; s++)
    for (int w = 0; w < WIDTH; w++)
      if (l->out[s * WIDTH + w] != l->in[s * WIDTH + w] + l->sum[w]) return false;
  return true;
}

static void on_response(TRITONSERVER_InferenceResponse *resp, const uint32_t flags, void *userp) {
  lane *l = userp;
  run *r = l->run;
  if (resp) {
    TRITONSERVER_Error *e = TRITONSERVER_InferenceResponseError(resp);
    if (e) {
      if (atomic_fetch_add(&r->errors, 1) < 5)
        failed(e, "response");
      else
        TRITONSERVER_ErrorDelete(e);
    } else if (!output_right(l)) {
      if (atomic_fetch_add(&r->wrong, 1) < 5)
        fprintf(stderr, "error: %s lane %u step %u: Output[0] %g, expected %g\n", r->model, l->index, l->step,
                (double)l->out[0], (double)(l->in[0] + l->sum[0]));
    }
    TRITONSERVER_InferenceResponseDelete(resp);
  }
  if (!(flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL)) return;
  r->lat[atomic_fetch_add(&r->n_lat, 1)] = now_ns() - l->sent_ns;
  if (l->step == r->steps * r->rounds) {
    pthread_mutex_lock(&r->mu);
    r->finished++;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
    return;
  }
  lane_due(r, l);
}

/* Sends the next step of `l`. Sender thread. */
static bool send_step(run *r, lane *l) {
  uint32_t k = l->step % r->steps, round = l->step / r->steps;
  bool start = k == 0, end = k + 1 == r->steps;
  float v = (float)(1 + (l->index + l->step) % 3);
  if (start) memset(l->sum, 0, sizeof l->sum);
  for (int i = 0; i < VALUES; i++) l->in[i] = v;
  for (int w = 0; w < WIDTH; w++) l->sum[w] += SEGS * v;
  l->step++;
  /* correlation IDs: distinct per lane and round, never 0 */
  uint64_t corr = 1 + (uint64_t)round * r->n + l->index;
  int64_t shape4[4] = {1, SEGS, 1, WIDTH}, shape3[3] = {1, SEGS, WIDTH};
  TRITONSERVER_InferenceRequest *req = NULL;
  if (failed(TRITONSERVER_InferenceRequestNew(&req, r->server, r->model, -1), "InferenceRequestNew")) return false;
  uint32_t fl =
      (start ? TRITONSERVER_REQUEST_FLAG_SEQUENCE_START : 0) | (end ? TRITONSERVER_REQUEST_FLAG_SEQUENCE_END : 0);
  bool ok =
      !failed(TRITONSERVER_InferenceRequestSetCorrelationId(req, corr), "correlation id") &&
      !failed(TRITONSERVER_InferenceRequestSetFlags(req, fl), "flags") &&
      !failed(TRITONSERVER_InferenceRequestAddInput(req, "Input", TRITONSERVER_TYPE_FP32, r->stateful ? shape4 : shape3,
                                                    r->stateful ? 4 : 3),
              "input") &&
      !failed(
          TRITONSERVER_InferenceRequestAppendInputData(req, "Input", l->in, sizeof l->in, TRITONSERVER_MEMORY_CPU, 0),
          "input data") &&
      !failed(TRITONSERVER_InferenceRequestAddRequestedOutput(req, "Output"), "output") &&
      !failed(TRITONSERVER_InferenceRequestSetReleaseCallback(req, on_release, l), "release callback") &&
      !failed(TRITONSERVER_InferenceRequestSetResponseCallback(req, r->alloc, l, on_response, l), "response callback");
  l->sent_ns = now_ns();
  if (ok && !failed(TRITONSERVER_ServerInferAsync(r->server, req, NULL), "ServerInferAsync")) return true;
  TRITONSERVER_InferenceRequestDelete(req);
  return false;
}

typedef struct figures {
  double steps_s, p50_us, p99_us, cpu_us;
  uint64_t steps;
} figures;

/* Runs every lane of `model` to the end; fills `f`. */
static bool run_model(TRITONSERVER_Server *s, TRITONSERVER_ResponseAllocator *alloc, const char *model, bool stateful,
                      uint32_t n, uint32_t steps, uint32_t rounds, figures *f) {
  run r = {.server = s, .alloc = alloc, .model = model, .stateful = stateful, .n = n, .steps = steps, .rounds = rounds};
  uint64_t total = (uint64_t)n * steps * rounds;
  r.lanes = calloc(n, sizeof *r.lanes);
  r.lat = calloc(total, sizeof *r.lat);
  if (!r.lanes || !r.lat) {
    free(r.lanes);
    free(r.lat);
    return false;
  }
  pthread_mutex_init(&r.mu, NULL);
  pthread_cond_init(&r.cv, NULL);
  for (uint32_t i = 0; i < n; i++) r.lanes[i] = (lane){.run = &r, .index = i};
  bool ok = true;
  uint64_t c0 = cpu_ns(), t0 = now_ns();
  for (uint32_t i = 0; ok && i < n; i++) ok = send_step(&r, &r.lanes[i]);
  pthread_mutex_lock(&r.mu);
  while (ok && r.finished < n) {
    lane *l = r.qhead;
    if (!l) {
      pthread_cond_wait(&r.cv, &r.mu);
      continue;
    }
    r.qhead = l->qnext;
    if (!r.qhead) r.qtail = NULL;
    pthread_mutex_unlock(&r.mu);
    ok = send_step(&r, l);
    pthread_mutex_lock(&r.mu);
  }
  pthread_mutex_unlock(&r.mu);
  uint64_t t1 = now_ns(), c1 = cpu_ns();
  size_t got = atomic_load(&r.n_lat);
  ok = ok && got == total && !atomic_load(&r.errors) && !atomic_load(&r.wrong);
  if (ok) {
    qsort(r.lat, total, sizeof *r.lat, cmp_u64);
    f->steps = total;
    f->steps_s = (double)total / ((double)(t1 - t0) / 1e9);
    f->p50_us = (double)r.lat[(size_t)(0.50 * (double)(total - 1))] / 1e3;
    f->p99_us = (double)r.lat[(size_t)(0.99 * (double)(total - 1))] / 1e3;
    f->cpu_us = (double)(c1 - c0) / 1e3 / (double)total;
  } else {
    fprintf(stderr, "error: %s: %zu of %llu steps answered, %u errors, %u wrong outputs\n", model, got,
            (unsigned long long)total, atomic_load(&r.errors), atomic_load(&r.wrong));
  }
  /* On failure lanes may still be in flight: leave their memory be. */
  if (ok) {
    free(r.lanes);
    free(r.lat);
    pthread_cond_destroy(&r.cv);
    pthread_mutex_destroy(&r.mu);
  }
  return ok;
}

static bool wait_ready(TRITONSERVER_Server *s, const char *const *models, int n) {
  for (int tries = 0; tries < 1200; tries++) {
    int ready_all = 1;
    for (int i = 0; i < n; i++) {
      bool ready = false;
      if (failed(TRITONSERVER_ServerModelIsReady(s, models[i], -1, &ready), "ModelIsReady")) return false;
      ready_all &= ready;
    }
    if (ready_all) return true;
    struct timespec ts = {0, 50000000};
    nanosleep(&ts, NULL);
  }
  fprintf(stderr, "error: models not ready after 60 s\n");
  return false;
}

int main(int argc, char **argv) {
  const char *backend_dir = NRD_BACKEND_DIR;
  unsigned n = 1000, steps = 10, rounds = 5, mbs = 64;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick")) {
      n = 64, steps = 4, rounds = 2;
    } else if (!strcmp(argv[i], "--backend-dir") && i + 1 < argc) {
      backend_dir = argv[++i];
    } else if (!strcmp(argv[i], "--sequences") && i + 1 < argc) {
      n = (unsigned)atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--steps") && i + 1 < argc) {
      steps = (unsigned)atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
      rounds = (unsigned)atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--max-batch") && i + 1 < argc) {
      mbs = (unsigned)atoi(argv[++i]);
    } else {
      fprintf(stderr,
              "usage: %s [--quick] [--sequences N] [--steps K] [--rounds R] [--max-batch B] [--backend-dir DIR]\n",
              argv[0]);
      return 2;
    }
  }
  if (!n || !steps || !rounds || !mbs || n > 1000000 || steps > 100000 || rounds > 1000) {
    fprintf(stderr, "error: --sequences, --steps, --rounds and --max-batch must be positive and sane\n");
    return 2;
  }
  char repo[] = "/tmp/nrd-bench-stateful-XXXXXX";
  if (!mkdtemp(repo)) return 1;
  char cmd[PATH_MAX * 2 + 256];
  snprintf(cmd, sizeof cmd,
           "/usr/bin/python3 -c 'import sys; sys.path.insert(0, \"%s/bench\"); import stateful_bench; "
           "stateful_bench.make_repo(\"%s\", %u, %u)'",
           NRD_SOURCE_DIR, repo, n, mbs);
  bool ok = system(cmd) == 0;
  if (!ok) fprintf(stderr, "error: writing the model repository failed: %s\n", cmd);
  TRITONSERVER_ServerOptions *o = NULL;
  TRITONSERVER_Server *s = NULL;
  ok = ok && !failed(TRITONSERVER_ServerOptionsNew(&o), "options") &&
       !failed(TRITONSERVER_ServerOptionsSetModelRepositoryPath(o, repo), "options") &&
       !failed(TRITONSERVER_ServerOptionsSetBackendDirectory(o, backend_dir), "options") &&
       !failed(TRITONSERVER_ServerOptionsSetLogInfo(o, false), "options") &&
       !failed(TRITONSERVER_ServerOptionsSetLogWarn(o, false), "options") &&
       !failed(TRITONSERVER_ServerOptionsSetExitTimeout(o, 10), "options") &&
       !failed(TRITONSERVER_ServerNew(&s, o), "ServerNew");
  if (o) TRITONSERVER_ServerOptionsDelete(o);
  const char *models[] = {"stateful", "implicit"};
  ok = ok && wait_ready(s, models, 2);
  TRITONSERVER_ResponseAllocator *alloc = NULL;
  ok = ok && !failed(TRITONSERVER_ResponseAllocatorNew(&alloc, alloc_fn, release_fn, NULL), "allocator");
  figures fs = {0}, fi = {0}, warm = {0};
  /* a short warm-up of each, then the measured runs */
  ok = ok && run_model(s, alloc, "stateful", true, n < 64 ? n : 64, 2, 1, &warm) &&
       run_model(s, alloc, "implicit", false, n < 64 ? n : 64, 2, 1, &warm);
  ok = ok && run_model(s, alloc, "stateful", true, n, steps, rounds, &fs) &&
       run_model(s, alloc, "implicit", false, n, steps, rounds, &fi);
  if (ok) {
    double load[3] = {0, 0, 0};
    if (getloadavg(load, 3) < 0) load[0] = load[1] = load[2] = 0;
    printf("accumulate model, %u concurrent sequences x %u rounds of %u steps, max_batch_size %u, "
           "outputs checked (%llu steps each)\n",
           n, rounds, steps, mbs, (unsigned long long)fs.steps);
    printf("  %-30s %10s %10s %10s %12s\n", "", "steps/s", "p50 us", "p99 us", "CPU us/step");
    printf("  %-30s %10.0f %10.1f %10.1f %12.2f\n", "stateful (whole batch)", fs.steps_s, fs.p50_us, fs.p99_us,
           fs.cpu_us);
    printf("  %-30s %10.0f %10.1f %10.1f %12.2f\n", "onnxruntime (implicit state)", fi.steps_s, fi.p50_us, fi.p99_us,
           fi.cpu_us);
    printf("  stateful / implicit: steps/s %.2fx, p50 %.2fx, p99 %.2fx, CPU per step %.2fx\n",
           fi.steps_s > 0 ? fs.steps_s / fi.steps_s : 0.0, fi.p50_us > 0 ? fs.p50_us / fi.p50_us : 0.0,
           fi.p99_us > 0 ? fs.p99_us / fi.p99_us : 0.0, fi.cpu_us > 0 ? fs.cpu_us / fi.cpu_us : 0.0);
    printf("  online CPUs %ld, load average %.2f %.2f %.2f\n", sysconf(_SC_NPROCESSORS_ONLN), load[0], load[1],
           load[2]);
  }
  if (alloc) TRITONSERVER_ResponseAllocatorDelete(alloc);
  if (s) {
    failed(TRITONSERVER_ServerStop(s), "ServerStop");
    failed(TRITONSERVER_ServerDelete(s), "ServerDelete");
  }
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", repo);
  if (system(cmd) != 0) fprintf(stderr, "note: could not remove %s\n", repo);
  return ok ? 0 : 1;
}
