/* The default scheduler: one FIFO per model, one request per execution,
 * feeding whichever instance is idle.
 *
 * Each instance thread owns a slot with a futex word of its own. An idle
 * thread puts its slot on the idle stack and sleeps on that word; a request
 * pops the most recently idle slot and wakes exactly that thread, so no
 * thread wakes to find nothing and none comes back holding a mutex marked
 * contended.
 *
 * Inline execution. A request that finds the queue empty and an instance
 * idle may run on the calling thread instead, while the instance's own
 * thread sleeps on. Handing a request to a sleeping thread costs a
 * cross-CPU wake-up, on the virtual machines we measure 15-20 us of CPU,
 * more than a small model's whole execution; for a model whose last
 * INLINE_WARM executions each took at most the limit (environment variable
 * NEREID_INLINE_EXECUTION_MAX_US, default 20 or the backend's
 * NRDBACKEND_InlineExecutionMaxUs when larger; 0 turns this off) running it
 * in place is cheaper and no slower. The caller is blocked for that long;
 * one slower inline execution sends the next INLINE_WARM back to the
 * instance threads, which time theirs until the model is fast again. Time
 * in the application's callbacks is not counted. Inside an execution (on
 * an instance thread, or in an inline execution) only once more, and
 * only for a call the executing model waits for (BLS): never for an
 * ensemble step or a rescheduled request, which would hold the executing
 * instance. Never for a rate-limited instance. The response and release callbacks then fire before
 * InferAsync returns, as Triton's do on a response-cache hit.
 * docs/core.md, "Inline execution". */
#include "scheduler.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "error.h"
#include "backend.h"
#include "exec_clock.h"
#include "log.h"
#include "model.h"
#include "request.h"
#include "response.h"
#include "stats.h"

#define INLINE_WARM 8 /* fast executions in a row before inlining */
#define INLINE_DEFAULT_MAX_US 20 /* about what a hand-off costs */
#define INLINE_LIMIT_MAX_US 1000000u /* one second: past that the flag is a mistake */

typedef enum slot_state {
  SLOT_BUSY, /* its thread is executing, or about to look at the queue */
  SLOT_IDLE, /* on the idle stack, its thread asleep or about to be */
  SLOT_WOKEN, /* taken off the stack by a request; its thread is being woken */
  SLOT_LENT /* taken off the stack by an inline execution; its thread sleeps */
} slot_state;

typedef struct slot {
  TRITONBACKEND_ModelInstance *inst;
  bool rate_limited; /* never lent to a caller */
  atomic_uint word; /* the futex word its thread sleeps on; bumped to wake it */
  slot_state state; /* under the scheduler's mu */
  bool timed; /* its thread's timer runs for the execution it is doing */
} slot;

typedef struct default_sched {
  nrd_scheduler base;
  TRITONBACKEND_Model *model;
  void (*execute)(TRITONBACKEND_ModelInstance *, TRITONSERVER_InferenceRequest **, uint32_t); /* nrd_executor's */
  pthread_mutex_t mu; /* guards everything below but the futex words */
  TRITONSERVER_InferenceRequest *head, *tail;
  bool stopped;
  slot *slots; /* one per instance of the model, passive ones included */
  uint32_t n_slots;
  slot **idle; /* stack of idle slots, the most recently idle on top */
  uint32_t n_idle;
  uint64_t inline_max_ns; /* 0: never inline */
  uint32_t fast_runs; /* executions in a row within inline_max_ns, at most INLINE_WARM */
  uint32_t delay_cnt; /* TRITONSERVER_DELAY_SCHEDULER: hold requests until this many queue; 0: off */
} default_sched;

static void futex_wake(atomic_uint *word, int n) { syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0); }

static void futex_wait(atomic_uint *word, unsigned seen) {
  /* Returns at once when the word no longer holds `seen`; a spurious or
   * interrupted return only makes the caller look again. */
  syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
}

/* Marks `s` for waking (under mu); the caller wakes it after unlocking. */
static void slot_signal(slot *s, slot_state to) {
  s->state = to;
  atomic_fetch_add_explicit(&s->word, 1, memory_order_release);
}

static void idle_push(default_sched *d, slot *s) {
  s->state = SLOT_IDLE;
  d->idle[d->n_idle++] = s;
}

static void idle_remove(default_sched *d, slot *s) {
  for (uint32_t i = 0; i < d->n_idle; i++)
    if (d->idle[i] == s) {
      d->idle[i] = d->idle[--d->n_idle];
      return;
    }
}

/* Counts one execution of `ns` towards (or against) inlining. Under mu. */
static void note_run(default_sched *d, uint64_t ns) {
  if (ns > d->inline_max_ns)
    d->fast_runs = 0;
  else if (d->fast_runs < INLINE_WARM)
    d->fast_runs++;
}

/* A request that was cancelled or outlived its timeout while queued is
 * answered here instead of reaching the backend. */
static bool reject_stale(TRITONSERVER_InferenceRequest *r) {
  if (nrd_request_is_cancelled(r)) {
    nrd_request_fail(r, nrd_error_new(TRITONSERVER_ERROR_CANCELLED, "Request was cancelled"), NRD_FAIL_CANCELED);
    return true;
  }
  if (r->deadline_ns && nrd_now_ns() > r->deadline_ns) {
    nrd_request_fail(r, nrd_error_new(TRITONSERVER_ERROR_UNAVAILABLE, "Request timeout expired"), NRD_FAIL_REJECTED);
    return true;
  }
  return false;
}

/* Runs `req` on the calling thread with the lent slot `s`, then gives the
 * instance back: to its thread when requests queued up meanwhile or the
 * scheduler stopped (it must see both), else to the idle stack. */
static void run_inline(default_sched *d, slot *s, TRITONSERVER_InferenceRequest *req) {
  uint64_t took = 0;
  bool ran = !reject_stale(req);
  if (ran) {
    nrd_exec_saved outer;
    nrd_exec_inline_enter(&outer);
    d->execute(s->inst, &req, 1);
    took = nrd_exec_inline_leave(&outer);
  }
  pthread_mutex_lock(&d->mu);
  if (ran) note_run(d, took);
  bool wake = d->head || d->stopped;
  if (wake)
    slot_signal(s, SLOT_WOKEN);
  else
    idle_push(d, s);
  pthread_mutex_unlock(&d->mu);
  if (wake) futex_wake(&s->word, 1);
}

/* The idle slot a request may run inline with, taken off the stack and
 * marked lent; NULL when it must queue. Under mu. */
static slot *lend(default_sched *d, const TRITONSERVER_InferenceRequest *req) {
  if (!d->inline_max_ns || d->fast_runs < INLINE_WARM || d->head || !d->n_idle || d->delay_cnt) return NULL;
  slot *s = d->idle[d->n_idle - 1];
  if (s->rate_limited) return NULL;
  /* Inside an execution only a call its Execute waits for (BLS), once. */
  unsigned nesting = nrd_exec_nesting();
  if (nesting > 1 || (nesting == 1 && req->no_nested_inline)) return NULL;
  d->n_idle--;
  s->state = SLOT_LENT;
  return s;
}

static TRITONSERVER_Error *ds_enqueue(nrd_scheduler *sched, TRITONSERVER_InferenceRequest *req) {
  default_sched *d = (default_sched *)sched;
  pthread_mutex_lock(&d->mu);
  if (d->stopped) {
    pthread_mutex_unlock(&d->mu);
    return nrd_error_new(TRITONSERVER_ERROR_UNAVAILABLE, "model '%s' is unloading and takes no new requests",
                         d->model->name);
  }
  slot *lent = lend(d, req);
  if (lent) {
    pthread_mutex_unlock(&d->mu);
    run_inline(d, lent, req);
    return NULL;
  }
  req->next = NULL;
  if (d->tail)
    d->tail->next = req;
  else
    d->head = req;
  d->tail = req;
  if (d->delay_cnt) {
    /* The test hook: nothing runs until delay_cnt requests are queued. */
    uint32_t queued = 0;
    for (TRITONSERVER_InferenceRequest *q = d->head; q && queued < d->delay_cnt; q = q->next) queued++;
    if (queued < d->delay_cnt) {
      pthread_mutex_unlock(&d->mu);
      return NULL;
    }
    d->delay_cnt = 0;
    while (d->n_idle) slot_signal(d->idle[--d->n_idle], SLOT_WOKEN);
    pthread_mutex_unlock(&d->mu);
    for (uint32_t i = 0; i < d->n_slots; i++) futex_wake(&d->slots[i].word, 1);
    return NULL;
  }
  slot *s = d->n_idle ? d->idle[--d->n_idle] : NULL;
  if (s) slot_signal(s, SLOT_WOKEN);
  pthread_mutex_unlock(&d->mu);
  if (s) futex_wake(&s->word, 1);
  return NULL;
}

static slot *slot_of(default_sched *d, TRITONBACKEND_ModelInstance *inst) {
  for (uint32_t i = 0; i < d->n_slots; i++)
    if (d->slots[i].inst == inst) return &d->slots[i];
  return NULL;
}

static uint32_t ds_next_batch(nrd_scheduler *sched, TRITONBACKEND_ModelInstance *inst,
                              TRITONSERVER_InferenceRequest **out, uint32_t max) {
  default_sched *d = (default_sched *)sched;
  slot *s = slot_of(d, inst);
  if (!max || !s) return 0; /* not this model's instance: nothing to run */
  bool timed = s->timed;
  uint64_t took = timed ? nrd_exec_timer_stop() : 0;
  s->timed = false;
  pthread_mutex_lock(&d->mu);
  if (timed) note_run(d, took);
  for (;;) {
    if (s->state != SLOT_LENT) {
      TRITONSERVER_InferenceRequest *r = d->delay_cnt ? NULL : d->head;
      if (r || d->stopped) {
        if (s->state == SLOT_IDLE) idle_remove(d, s);
        s->state = SLOT_BUSY;
      }
      if (r) {
        d->head = r->next;
        if (!d->head) d->tail = NULL;
        r->next = NULL;
        /* Executions here are timed only while the model proves itself
         * fast; after that the inline ones are (clock reads saved under
         * load, when requests queue and never run inline). */
        bool judge = d->inline_max_ns && d->fast_runs < INLINE_WARM;
        pthread_mutex_unlock(&d->mu);
        if (reject_stale(r)) {
          pthread_mutex_lock(&d->mu);
          continue;
        }
        if (judge) nrd_exec_timer_start();
        s->timed = judge;
        out[0] = r;
        return 1;
      }
      if (d->stopped) {
        pthread_mutex_unlock(&d->mu);
        return 0; /* stopped and drained */
      }
      if (s->state != SLOT_IDLE) idle_push(d, s);
    }
    unsigned seen = atomic_load_explicit(&s->word, memory_order_acquire);
    pthread_mutex_unlock(&d->mu);
    futex_wait(&s->word, seen);
    pthread_mutex_lock(&d->mu);
  }
}

static void ds_stop(nrd_scheduler *sched) {
  default_sched *d = (default_sched *)sched;
  pthread_mutex_lock(&d->mu);
  d->stopped = true;
  d->delay_cnt = 0; /* what is queued drains */
  for (uint32_t i = 0; i < d->n_slots; i++) atomic_fetch_add_explicit(&d->slots[i].word, 1, memory_order_release);
  pthread_mutex_unlock(&d->mu);
  /* A lent slot's thread sleeps on until its inline execution gives it
   * back, so joining the instance threads also waits for those. */
  for (uint32_t i = 0; i < d->n_slots; i++) futex_wake(&d->slots[i].word, INT_MAX);
}

static void ds_destroy(nrd_scheduler *sched) {
  default_sched *d = (default_sched *)sched;
  pthread_mutex_destroy(&d->mu);
  free(d->slots);
  free(d->idle);
  free(d);
}

static const nrd_scheduler_ops default_ops = {ds_enqueue, ds_next_batch, ds_stop, ds_destroy, NULL};

uint32_t nrd_scheduler_delay_count(const char *model_name) {
  const char *v = getenv("TRITONSERVER_DELAY_SCHEDULER");
  if (v == NULL || *v == '\0') return 0;
  char *end;
  errno = 0;
  unsigned long n = strtoul(v, &end, 10);
  if (errno || *end != '\0' || *v == '-' || n > UINT32_MAX) {
    NRD_LOG_WARN("TRITONSERVER_DELAY_SCHEDULER='%s' is not a count of requests: not delaying", v);
    return 0;
  }
  if (n) NRD_LOG_VERBOSE(1, "Delaying scheduler of '%s' until %lu queued requests...", model_name, n);
  return (uint32_t)n;
}

/* The environment's limit when set; else the default, or the model's
 * backend's own (NRDBACKEND_InlineExecutionMaxUs) when larger. */
static uint64_t inline_limit_ns(const TRITONBACKEND_Model *model) {
  const char *v = getenv("NEREID_INLINE_EXECUTION_MAX_US");
  if (v == NULL || *v == '\0') {
    uint32_t us = model->backend ? model->backend->inline_max_us : 0;
    if (us > INLINE_LIMIT_MAX_US) us = INLINE_LIMIT_MAX_US;
    return (us > INLINE_DEFAULT_MAX_US ? us : INLINE_DEFAULT_MAX_US) * 1000ull;
  }
  char *end;
  errno = 0;
  unsigned long us = strtoul(v, &end, 10);
  if (errno || *end != '\0' || *v == '-' || us > INLINE_LIMIT_MAX_US) {
    NRD_LOG_WARN("NEREID_INLINE_EXECUTION_MAX_US='%s' is not a number of microseconds from 0 to %u: using %d", v,
                 INLINE_LIMIT_MAX_US, INLINE_DEFAULT_MAX_US);
    return INLINE_DEFAULT_MAX_US * 1000ull;
  }
  return us * 1000ull;
}

nrd_scheduler *nrd_default_scheduler_new(TRITONBACKEND_Model *model, const nrd_executor *ex) {
  default_sched *d = calloc(1, sizeof(*d));
  if (!d) return NULL;
  uint32_t n = ex->n_instances;
  d->slots = calloc(n ? n : 1, sizeof(*d->slots));
  d->idle = calloc(n ? n : 1, sizeof(*d->idle));
  if (!d->slots || !d->idle) {
    free(d->slots);
    free(d->idle);
    free(d);
    return NULL;
  }
  d->base.ops = &default_ops;
  d->model = model;
  d->execute = ex->execute;
  d->n_slots = n;
  for (uint32_t i = 0; i < n; i++) {
    d->slots[i].inst = ex->instances[i].inst;
    d->slots[i].rate_limited = ex->instances[i].rate_limited;
    d->slots[i].state = SLOT_BUSY; /* until its thread first asks for work */
    atomic_init(&d->slots[i].word, 0);
  }
  d->inline_max_ns = inline_limit_ns(model);
  d->delay_cnt = nrd_scheduler_delay_count(model->name);
  pthread_mutex_init(&d->mu, NULL);
  return &d->base;
}
