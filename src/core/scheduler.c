/* The default scheduler: one FIFO per model, one request per execution,
 * feeding whichever instance thread is idle. */
#include "scheduler.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#include "error.h"
#include "model.h"
#include "request.h"
#include "response.h"
#include "stats.h"

typedef struct default_sched {
  nrd_scheduler base;
  TRITONBACKEND_Model *model;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  TRITONSERVER_InferenceRequest *head, *tail;
  bool stopped;
  atomic_uint sleepers; /* instance threads blocked in cond_wait */
} default_sched;

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
  pthread_mutex_unlock(&d->mu);
  /* A sleeper registers under the lock before it waits, so after our
   * unlock it is either counted here or will see the request itself. */
  if (atomic_load(&d->sleepers)) pthread_cond_signal(&d->cv);
  return NULL;
}

/* A request that was cancelled or outlived its timeout while queued is
 * answered here instead of reaching the backend. */
static bool reject_stale(TRITONSERVER_InferenceRequest *r) {
  if (r->delivery && atomic_load(&r->delivery->cancel->set)) {
    nrd_request_fail(r, nrd_error_new(TRITONSERVER_ERROR_CANCELLED, "Request was cancelled"));
    return true;
  }
  if (r->deadline_ns && nrd_now_ns() > r->deadline_ns) {
    nrd_request_fail(r, nrd_error_new(TRITONSERVER_ERROR_UNAVAILABLE, "Request timeout expired"));
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
      atomic_fetch_add(&d->sleepers, 1);
      pthread_cond_wait(&d->cv, &d->mu);
      atomic_fetch_sub(&d->sleepers, 1);
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
  pthread_mutex_unlock(&d->mu);
  pthread_cond_broadcast(&d->cv);
}

static void ds_destroy(nrd_scheduler *s) {
  default_sched *d = (default_sched *)s;
  pthread_mutex_destroy(&d->mu);
  pthread_cond_destroy(&d->cv);
  free(d);
}

static const nrd_scheduler_ops default_ops = {ds_enqueue, ds_next_batch, ds_stop, ds_destroy};

nrd_scheduler *nrd_default_scheduler_new(TRITONBACKEND_Model *model) {
  default_sched *d = calloc(1, sizeof(*d));
  if (!d) return NULL;
  d->base.ops = &default_ops;
  d->model = model;
  pthread_mutex_init(&d->mu, NULL);
  pthread_cond_init(&d->cv, NULL);
  return &d->base;
}
