/* Closed-loop (concurrency) and open-loop (request rate) load, and the
 * completion record. One mutex guards the sample buffer and the free-slot
 * stack; it is held for a few instructions per completion. */
#include "load.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef enum load_mode { MODE_STOPPED, MODE_CONCURRENCY, MODE_RATE } load_mode;

typedef struct slot {
  uint64_t t_send;
} slot;

struct nrd_perf_load {
  nrd_perf_driver *d;
  int nslots;
  slot *slots;
  atomic_int mode; /* load_mode; completions re-send only in MODE_CONCURRENCY */
  atomic_int in_flight;

  pthread_mutex_t mu; /* guards everything below */
  pthread_cond_t cv; /* a slot became free, or the pacer must stop */
  uint64_t *lat;
  size_t nlat, cap;
  uint64_t errors, delayed, t_take;
  int *free_slots; /* rate mode: stack of idle slots */
  int nfree;
  char first_error[512];

  pthread_t pacer;
  bool pacer_running;
  double rps;
};

uint64_t nrd_perf_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Records an error message (the first one is kept). Under mu. */
static void note_error(nrd_perf_load *l, const char *msg) {
  l->errors++;
  if (!l->first_error[0]) snprintf(l->first_error, sizeof l->first_error, "%s", msg);
}

static void record(nrd_perf_load *l, uint64_t lat_ns) {
  if (l->nlat == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 65536;
    uint64_t *p = realloc(l->lat, cap * sizeof *p);
    if (!p) {
      note_error(l, "nrd_perf: out of memory recording latencies");
      return;
    }
    l->lat = p, l->cap = cap;
  }
  l->lat[l->nlat++] = lat_ns;
}

/* Sends slot i; on a synchronous failure records it and frees the slot.
 * Returns false on failure. Any thread; the slot must be idle. */
static bool send_slot(nrd_perf_load *l, int i) {
  char err[512];
  atomic_fetch_add(&l->in_flight, 1);
  l->slots[i].t_send = nrd_perf_now_ns();
  if (l->d->ops->send(l->d, i, err, sizeof err)) return true;
  pthread_mutex_lock(&l->mu);
  note_error(l, err);
  if (atomic_load(&l->mode) == MODE_RATE) {
    l->free_slots[l->nfree++] = i;
    pthread_cond_broadcast(&l->cv);
  }
  pthread_mutex_unlock(&l->mu);
  atomic_fetch_sub(&l->in_flight, 1); /* the last touch: stop may free l */
  return false;
}

/* The driver's completion callback: transport threads. */
static void on_done(void *ctx, int i, const char *error) {
  nrd_perf_load *l = ctx;
  uint64_t t = nrd_perf_now_ns();
  int mode = atomic_load(&l->mode);
  pthread_mutex_lock(&l->mu);
  if (error)
    note_error(l, error);
  else
    record(l, t - l->slots[i].t_send);
  if (mode == MODE_RATE) {
    l->free_slots[l->nfree++] = i;
    pthread_cond_broadcast(&l->cv); /* the pacer waits for a free slot */
  }
  pthread_mutex_unlock(&l->mu);
  if (mode == MODE_CONCURRENCY && !error) send_slot(l, i);
  /* Last, after the resend counted itself: once in_flight reads 0, no
   * completion touches l, so nrd_perf_load_stop's caller may free it. */
  atomic_fetch_sub(&l->in_flight, 1);
}

nrd_perf_load *nrd_perf_load_new(nrd_perf_driver *d, const nrd_perf_tensors *t, int nslots, char *err, size_t errlen) {
  nrd_perf_load *l = calloc(1, sizeof *l);
  if (!l) goto oom;
  l->d = d;
  l->nslots = nslots;
  l->slots = calloc((size_t)nslots, sizeof *l->slots);
  l->free_slots = calloc((size_t)nslots, sizeof *l->free_slots);
  if (!l->slots || !l->free_slots) goto oom;
  pthread_mutex_init(&l->mu, NULL);
  pthread_cond_init(&l->cv, NULL);
  if (!d->ops->prepare(d, t, nslots, on_done, l, err, errlen)) {
    nrd_perf_load_free(l);
    return NULL;
  }
  return l;
oom:
  if (l) {
    free(l->slots);
    free(l->free_slots);
    free(l);
  }
  snprintf(err, errlen, "out of memory");
  return NULL;
}

static void reset_record(nrd_perf_load *l) {
  pthread_mutex_lock(&l->mu);
  l->nlat = 0;
  l->errors = l->delayed = 0;
  l->t_take = nrd_perf_now_ns();
  pthread_mutex_unlock(&l->mu);
}

bool nrd_perf_load_start_concurrency(nrd_perf_load *l, int n, char *err, size_t errlen) {
  if (n > l->nslots) n = l->nslots;
  reset_record(l);
  atomic_store(&l->mode, MODE_CONCURRENCY);
  for (int i = 0; i < n; i++) {
    if (!send_slot(l, i)) {
      nrd_perf_load_first_error(l, err, errlen);
      nrd_perf_load_stop(l, 10000);
      return false;
    }
  }
  return true;
}

static void add_ns(struct timespec *ts, uint64_t ns) {
  uint64_t v = (uint64_t)ts->tv_nsec + ns;
  ts->tv_sec += (time_t)(v / 1000000000u);
  ts->tv_nsec = (long)(v % 1000000000u);
}

/* The open loop: the k-th request is due at start + k / rps. A request
 * that finds no idle slot waits for one and counts as delayed; the
 * schedule is not shifted, so the loop catches up afterwards. */
static void *pacer_main(void *arg) {
  nrd_perf_load *l = arg;
  struct timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  double period_ns = 1e9 / l->rps;
  for (uint64_t k = 0;; k++) {
    struct timespec due = start;
    add_ns(&due, (uint64_t)((double)k * period_ns));
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &due, NULL) == EINTR) {
    }
    pthread_mutex_lock(&l->mu);
    bool waited = false;
    while (l->nfree == 0 && atomic_load(&l->mode) == MODE_RATE) {
      waited = true;
      pthread_cond_wait(&l->cv, &l->mu);
    }
    if (atomic_load(&l->mode) != MODE_RATE) {
      pthread_mutex_unlock(&l->mu);
      return NULL;
    }
    if (waited) l->delayed++;
    int i = l->free_slots[--l->nfree];
    pthread_mutex_unlock(&l->mu);
    send_slot(l, i);
  }
}

bool nrd_perf_load_start_rate(nrd_perf_load *l, double rps, char *err, size_t errlen) {
  reset_record(l);
  pthread_mutex_lock(&l->mu);
  l->nfree = 0;
  for (int i = l->nslots - 1; i >= 0; i--) l->free_slots[l->nfree++] = i;
  pthread_mutex_unlock(&l->mu);
  l->rps = rps;
  atomic_store(&l->mode, MODE_RATE);
  int rc = pthread_create(&l->pacer, NULL, pacer_main, l);
  if (rc) {
    atomic_store(&l->mode, MODE_STOPPED);
    snprintf(err, errlen, "cannot start the pacer thread: %s", strerror(rc));
    return false;
  }
  l->pacer_running = true;
  return true;
}

bool nrd_perf_load_stop(nrd_perf_load *l, int timeout_ms) {
  pthread_mutex_lock(&l->mu);
  atomic_store(&l->mode, MODE_STOPPED);
  pthread_mutex_unlock(&l->mu);
  pthread_cond_broadcast(&l->cv);
  if (l->pacer_running) {
    pthread_join(l->pacer, NULL);
    l->pacer_running = false;
  }
  uint64_t until = nrd_perf_now_ns() + (uint64_t)timeout_ms * 1000000u;
  while (atomic_load(&l->in_flight) > 0 && nrd_perf_now_ns() < until) {
    struct timespec d = {0, 200000};
    nanosleep(&d, NULL);
  }
  return atomic_load(&l->in_flight) == 0;
}

void nrd_perf_load_take(nrd_perf_load *l, nrd_perf_samples *out) {
  size_t cap = 65536;
  uint64_t *fresh = malloc(cap * sizeof *fresh);
  pthread_mutex_lock(&l->mu);
  uint64_t t = nrd_perf_now_ns();
  *out = (nrd_perf_samples){l->lat, l->nlat, l->errors, l->delayed, l->t_take, t};
  l->lat = fresh;
  l->cap = fresh ? cap : 0;
  l->nlat = 0;
  l->errors = l->delayed = 0;
  l->t_take = t;
  pthread_mutex_unlock(&l->mu);
}

size_t nrd_perf_load_count(nrd_perf_load *l) {
  pthread_mutex_lock(&l->mu);
  size_t n = l->nlat;
  pthread_mutex_unlock(&l->mu);
  return n;
}

int nrd_perf_load_in_flight(nrd_perf_load *l) { return atomic_load(&l->in_flight); }

void nrd_perf_load_first_error(nrd_perf_load *l, char *buf, size_t len) {
  pthread_mutex_lock(&l->mu);
  snprintf(buf, len, "%s", l->first_error);
  pthread_mutex_unlock(&l->mu);
}

void nrd_perf_load_free(nrd_perf_load *l) {
  if (!l) return;
  pthread_mutex_destroy(&l->mu);
  pthread_cond_destroy(&l->cv);
  free(l->lat);
  free(l->slots);
  free(l->free_slots);
  free(l);
}
