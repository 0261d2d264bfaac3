/* The default scheduler: one FIFO per model, one request per execution,
 * feeding whichever instance thread is idle. */
#include "scheduler.h"

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "error.h"
#include "model.h"
#include "request.h"
#include "response.h"
#include "stats.h"

/* Idle instance threads sleep on a futex word rather than a condition
 * variable: a woken thread does not come back holding a mutex marked
 * contended (whose unlock is one more system call per request), and a
 * request wakes a sleeper only when no wake is already on its way to it. */
typedef struct default_sched {
  nrd_scheduler base;
  TRITONBACKEND_Model *model;
  pthread_mutex_t mu; /* guards the queue and the counts below */
  TRITONSERVER_InferenceRequest *head, *tail;
  bool stopped;
  unsigned sleepers;  /* instance threads asleep or about to be */
  unsigned waking;    /* wakes sent that no sleeper has taken yet */
  atomic_uint wake_seq; /* the futex word: bumped by every wake */
} default_sched;

static void futex_wake(atomic_uint *word, int n) {
  syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

static void futex_wait(atomic_uint *word, unsigned seen) {
  /* Returns at once when the word no longer holds `seen`; a spurious or
   * interrupted return only makes the caller look at the queue again. */
  syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
}

static TRITONSERVER_Error *ds_enqueue(nrd_scheduler *s, TRITONSERVER_InferenceRequest *req) {
  default_sched *d = (default_sched *)s;
  pthread_mutex_lock(&d->mu);
  if (d->stopped) {
    pthread_mutex_unlock(&d->mu);
    return nrd_error_new(TRITONSERVER_ERROR_UNAVAILABLE, "model '%s' is unloading and takes no new requests",
                         d->model->name);
  }
  req->next = NULL;
  if (d->tail) d->tail->next = req;
  else d->head = req;
  d->tail = req;
  /* A sleeper registers under the lock before it waits, so it is either
   * counted here or sees the request itself. */
  bool wake = d->sleepers > d->waking;
  if (wake) {
    d->waking++;
    atomic_fetch_add_explicit(&d->wake_seq, 1, memory_order_release);
  }
  pthread_mutex_unlock(&d->mu);
  if (wake) futex_wake(&d->wake_seq, 1);
  return NULL;
}

/* A request that was cancelled or outlived its timeout while queued is
 * answered here instead of reaching the backend. */
static bool reject_stale(TRITONSERVER_InferenceRequest *r) {
  if (r->delivery && atomic_load(&r->delivery->cancel->set)) {
    nrd_request_fail(r, nrd_error_new(TRITONSERVER_ERROR_CANCELLED, "Request was cancelled"), NRD_FAIL_CANCELED);
    return true;
  }
  if (r->deadline_ns && nrd_now_ns() > r->deadline_ns) {
    nrd_request_fail(r, nrd_error_new(TRITONSERVER_ERROR_UNAVAILABLE, "Request timeout expired"), NRD_FAIL_REJECTED);
    return true;
  }
  return false;
}

static uint32_t ds_next_batch(nrd_scheduler *s, TRITONBACKEND_ModelInstance *inst,
                              TRITONSERVER_InferenceRequest **out, uint32_t max) {
  (void)inst;
  default_sched *d = (default_sched *)s;
  if (!max) return 0;
  for (;;) {
    pthread_mutex_lock(&d->mu);
    while (!d->head && !d->stopped) {
      d->sleepers++;
      unsigned seen = atomic_load_explicit(&d->wake_seq, memory_order_acquire);
      pthread_mutex_unlock(&d->mu);
      futex_wait(&d->wake_seq, seen);
      pthread_mutex_lock(&d->mu);
      d->sleepers--;
      if (d->waking) d->waking--;
    }
    TRITONSERVER_InferenceRequest *r = d->head;
    if (r) {
      d->head = r->next;
      if (!d->head) d->tail = NULL;
      r->next = NULL;
    }
    pthread_mutex_unlock(&d->mu);
    if (!r) return 0; /* stopped and drained */
    if (reject_stale(r)) continue;
    out[0] = r;
    return 1;
  }
}

static void ds_stop(nrd_scheduler *s) {
  default_sched *d = (default_sched *)s;
  pthread_mutex_lock(&d->mu);
  d->stopped = true;
  atomic_fetch_add_explicit(&d->wake_seq, 1, memory_order_release);
  pthread_mutex_unlock(&d->mu);
  futex_wake(&d->wake_seq, INT_MAX);
}

static void ds_destroy(nrd_scheduler *s) {
  default_sched *d = (default_sched *)s;
  pthread_mutex_destroy(&d->mu);
  free(d);
}

static const nrd_scheduler_ops default_ops = {ds_enqueue, ds_next_batch, ds_stop, ds_destroy, NULL};

nrd_scheduler *nrd_default_scheduler_new(TRITONBACKEND_Model *model) {
  default_sched *d = calloc(1, sizeof(*d));
  if (!d) return NULL;
  d->base.ops = &default_ops;
  d->model = model;
  pthread_mutex_init(&d->mu, NULL);
  atomic_init(&d->wake_seq, 0);
  return &d->base;
}
