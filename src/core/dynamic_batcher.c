/* The dynamic batcher (see dynamic_batcher.h and docs/batching.md).
 *
 * There is no batcher thread: an idle instance thread calls next_batch,
 * which looks at the queues under the batcher's lock and either takes a
 * batch or sleeps until the queue delay ends, the nearest request timeout
 * passes, or a new request arrives. Several idle instances may sleep at
 * once; whichever wakes first takes the batch and wakes another one when
 * requests remain, so every instance is fed.
 *
 * Queue layout: one level per priority that has queued requests (one level
 * when priority_levels is 0), kept sorted by priority; priority_levels may
 * be as large as UINT64_MAX, so a level exists only while it holds a
 * request (levels that empty are dropped after each look). Each level has a "live" FIFO and a "delayed" FIFO for requests whose
 * timeout expired under timeout_action DELAY; the delayed ones are served
 * after the live ones of the same level. A batch is always a prefix of the
 * order level 1 live, level 1 delayed, level 2 live, ...: the scan that
 * decides the batch removes every cancelled or rejected request it passes
 * and moves expired DELAY requests to their delayed FIFO, so popping the
 * first N requests in that order yields exactly the scanned batch. */
#include "dynamic_batcher.h"

#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <unistd.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "error.h"
#include "files.h"
#include "log.h"
#include "model.h"
#include "request.h"
#include "response.h"
#include "response_order.h"
#include "stats.h"

typedef TRITONSERVER_InferenceRequest db_req;

typedef struct db_list {
  db_req *head, *tail;
} db_list;

typedef struct db_policy {
  bool delay_on_timeout; /* timeout_action DELAY (else REJECT) */
  uint64_t default_timeout_us; /* 0 = no timeout */
  bool allow_override;
  uint32_t max_queue_size; /* 0 = unbounded */
} db_policy;

typedef struct db_level {
  uint64_t prio; /* 1..priority_levels; 0 without priority levels */
  db_policy pol;
  db_list live, delayed;
  uint64_t size; /* live + delayed, what max_queue_size bounds */
} db_level;

/* A priority_queue_policy entry. */
typedef struct db_level_policy {
  uint64_t prio;
  db_policy pol;
} db_level_policy;

/* --------------------------------------------------- custom batching */

typedef TRITONSERVER_Error *(*db_batcher_init_fn)(TRITONBACKEND_Batcher **, TRITONBACKEND_Model *);
typedef TRITONSERVER_Error *(*db_batcher_fini_fn)(TRITONBACKEND_Batcher *);
typedef TRITONSERVER_Error *(*db_include_fn)(TRITONBACKEND_Request *, void *, bool *);
typedef TRITONSERVER_Error *(*db_batch_init_fn)(const TRITONBACKEND_Batcher *, void **);
typedef TRITONSERVER_Error *(*db_batch_fini_fn)(void *);

/* The five TRITONBACKEND_ModelBatch* hooks of a model, from a strategy
 * library (TRITON_BATCH_STRATEGY_PATH or batchstrategy.so, as Triton looks
 * them up) or else from the backend library itself. `include` is NULL when
 * the model has none. */
typedef struct db_hooks {
  void *dl; /* the strategy library we opened, NULL for the backend's own */
  db_batcher_init_fn batcher_init;
  db_batcher_fini_fn batcher_fini;
  db_include_fn include;
  db_batch_init_fn batch_init;
  db_batch_fini_fn batch_fini;
  TRITONBACKEND_Batcher *batcher; /* what ModelBatcherInitialize made */
} db_hooks;

/* ------------------------------------------------------- the batcher */

typedef struct dyn_batcher {
  nrd_scheduler base;
  TRITONBACKEND_Model *model;
  pthread_mutex_t mu;
  pthread_cond_t cv; /* CLOCK_MONOTONIC, like nrd_now_ns */

  db_level *levels; /* levels holding requests, by priority */
  uint32_t n_levels, cap_levels;
  db_level_policy *policies; /* priority_queue_policy, by priority */
  uint32_t n_policies;
  db_policy def_policy; /* default_queue_policy */
  uint64_t max_level; /* priority_levels */
  uint64_t default_prio; /* default_priority_level (0 without levels) */
  bool by_priority; /* priority_levels > 0 */

  uint64_t max_rows; /* max_batch_size */
  int64_t *preferred;
  size_t n_preferred;
  uint64_t max_preferred;
  uint64_t delay_ns; /* max_queue_delay_microseconds */
  uint64_t hold_ns; /* how long a short batch is held: see DB_EARLY_MAX_NS */
  bool check_inputs; /* some input's shape or presence can differ */
  bool has_optional;

  uint64_t queued; /* requests in all levels */
  unsigned sleepers; /* instance threads waiting on cv */
  atomic_uint changes; /* bumped (under mu) by each enqueue and by stop,
                             so a spinning instance can notice them (read
                             without mu) */
  bool stopped;
  uint32_t delay_cnt; /* TRITONSERVER_DELAY_SCHEDULER: hold requests until this many queue; 0: off */
  nrd_response_order *order; /* NULL unless preserve_ordering */
  db_hooks hooks;
} dyn_batcher;

static void list_push(db_list *l, db_req *r) {
  r->next = NULL;
  if (l->tail)
    l->tail->next = r;
  else
    l->head = r;
  l->tail = r;
}

static db_req *list_pop(db_list *l) {
  db_req *r = l->head;
  if (!r) return NULL;
  l->head = r->next;
  if (!l->head) l->tail = NULL;
  r->next = NULL;
  return r;
}

static uint64_t rows_of(const db_req *r) { return r->batch_size ? r->batch_size : 1; }

static bool is_preferred(const dyn_batcher *b, uint64_t rows) {
  for (size_t i = 0; i < b->n_preferred; i++)
    if ((uint64_t)b->preferred[i] == rows) return true;
  return false;
}

static const nrd_input *find_input(const db_req *r, const char *name) {
  for (uint32_t i = 0; i < r->n_inputs; i++)
    if (!strcmp(r->inputs[i].name, name)) return &r->inputs[i];
  return NULL;
}

/* Same shape beyond the batch dimension. */
static bool same_shape(const nrd_input *a, const nrd_input *b) {
  if (a->dims_count != b->dims_count) return false;
  for (uint32_t i = 1; i < a->dims_count; i++)
    if (a->shape[i] != b->shape[i]) return false;
  return true;
}

/* Shape tensors must also hold the same values to share a batch. Anything
 * not in one CPU buffer compares unequal, which only costs batching. */
static bool same_content(const nrd_input *a, const nrd_input *b) {
  if (a->nbufs != 1 || b->nbufs != 1) return false;
  const nrd_buffer *x = &a->bufs[0], *y = &b->bufs[0];
  if (x->size != y->size || x->mtype == TRITONSERVER_MEMORY_GPU || y->mtype == TRITONSERVER_MEMORY_GPU) return false;
  return x->size == 0 || memcmp(x->base, y->base, x->size) == 0;
}

/* Whether `r` may join a batch started by `first`: every input without
 * allow_ragged_batch has the same shape (shape tensors the same values),
 * and with optional inputs in the model, both carry the same inputs. */
static bool compatible(const dyn_batcher *b, const db_req *first, const db_req *r) {
  const TRITONBACKEND_Model *m = b->model;
  if (b->has_optional && first->n_inputs != r->n_inputs) return false;
  for (uint32_t i = 0; i < m->n_inputs; i++) {
    const nrd_io *io = &m->inputs[i];
    const nrd_input *x = find_input(first, io->name), *y = find_input(r, io->name);
    if (!x || !y) {
      if (x != y) return false;
      continue;
    }
    if (io->is_shape_tensor) {
      if (!same_shape(x, y) || !same_content(x, y)) return false;
    } else if (!io->allow_ragged_batch && !same_shape(x, y)) {
      return false;
    }
  }
  return true;
}

/* What one look at the queues found. */
typedef struct db_scan {
  uint32_t count; /* requests in the candidate batch */
  uint64_t rows;
  uint32_t best_count; /* a prefix whose rows hit a preferred size, or
                           the largest prefix within the largest preferred
                           size once the batch would pass it; 0: none */
  bool full; /* the next request cannot join: send now */
  uint64_t oldest_ns; /* earliest arrival in the candidate batch */
  uint64_t closest_deadline_ns; /* earliest timeout in it, 0: none */
  bool hook_started; /* ModelBatchInitialize was called for this scan */
  void *userp; /* what it returned */
} db_scan;

/* Requests leaving the queue without running, answered after unlock. */
typedef struct db_dead {
  db_list cancelled, rejected;
} db_dead;

/* Hook failures are logged and otherwise ignored, as Triton does: a
 * batching hook can only make batches smaller, never fail requests. */
static void hook_error(const dyn_batcher *b, const char *hook, TRITONSERVER_Error *e) {
  if (!e) return;
  NRD_LOG_ERROR("model '%s': custom batching function %s failed: %s", b->model->name, hook,
                TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
}

/* Asks the hooks whether `r` joins the batch of `sc`, starting that batch's
 * state (ModelBatchInitialize) on the first question. The request is only
 * looked at. A hook error leaves the answer the hook had written, false by
 * default. Batcher lock held. */
static bool hook_include(dyn_batcher *b, db_scan *sc, db_req *r) {
  if (!sc->hook_started) {
    sc->hook_started = true;
    sc->userp = NULL;
    hook_error(b, "TRITONBACKEND_ModelBatchInitialize", b->hooks.batch_init(b->hooks.batcher, &sc->userp));
  }
  bool include = false;
  hook_error(b, "TRITONBACKEND_ModelBatchIncludeRequest",
             b->hooks.include((TRITONBACKEND_Request *)r, sc->userp, &include));
  return include;
}

/* Ends the hooks' view of the batch a scan formed, whether it is sent now
 * or formed again at the next look: ModelBatchFinalize, skipped (as in
 * Triton) when Initialize left no state. Batcher lock held. */
static void hook_end(dyn_batcher *b, db_scan *sc) {
  if (!sc->hook_started) return;
  sc->hook_started = false;
  if (sc->userp) hook_error(b, "TRITONBACKEND_ModelBatchFinalize", b->hooks.batch_fini(sc->userp));
  sc->userp = NULL;
}

/* The policy of priority `prio`: its priority_queue_policy entry, else
 * the default one. */
static const db_policy *policy_of(const dyn_batcher *b, uint64_t prio) {
  uint32_t lo = 0, hi = b->n_policies;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (b->policies[mid].prio < prio)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo < b->n_policies && b->policies[lo].prio == prio) return &b->policies[lo].pol;
  return &b->def_policy;
}

/* The level of priority `prio`, made (in priority order) when absent;
 * NULL when out of memory. The pointer holds until the levels change.
 * Batcher lock held. */
static db_level *level_get(dyn_batcher *b, uint64_t prio) {
  uint32_t lo = 0, hi = b->n_levels;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (b->levels[mid].prio < prio)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo < b->n_levels && b->levels[lo].prio == prio) return &b->levels[lo];
  if (b->n_levels == b->cap_levels) {
    if (b->cap_levels == UINT32_MAX) return NULL;
    uint32_t cap = b->cap_levels ? (b->cap_levels > UINT32_MAX / 2 ? UINT32_MAX : b->cap_levels * 2) : 4;
    db_level *grown = realloc(b->levels, (size_t)cap * sizeof(*grown));
    if (!grown) return NULL;
    b->levels = grown;
    b->cap_levels = cap;
  }
  memmove(&b->levels[lo + 1], &b->levels[lo], (size_t)(b->n_levels - lo) * sizeof(*b->levels));
  b->n_levels++;
  db_level *lv = &b->levels[lo];
  memset(lv, 0, sizeof(*lv));
  lv->prio = prio;
  lv->pol = *policy_of(b, prio);
  return lv;
}

/* Drops the levels that hold no request. Batcher lock held. */
static void levels_prune(dyn_batcher *b) {
  uint32_t kept = 0;
  for (uint32_t l = 0; l < b->n_levels; l++)
    if (b->levels[l].size) b->levels[kept++] = b->levels[l];
  b->n_levels = kept;
}

/* Walks the queues in batch order building the candidate batch (at most
 * `cap` requests). Cancelled and REJECT-expired requests met on the way
 * leave the queue into `dead`; DELAY-expired ones move to their level's
 * delayed FIFO. With custom batching hooks, each request that passes the
 * built-in checks is offered to ModelBatchIncludeRequest; the first one
 * refused ends the batch, except that a refused first request still runs
 * alone (no later batch would take it either; Triton would spin on it).
 * The caller ends the hooks' batch with hook_end. Batcher lock held. */
static void scan(dyn_batcher *b, uint64_t now, uint32_t cap, db_scan *sc, db_dead *dead) {
  memset(sc, 0, sizeof(*sc));
  const db_req *first = NULL;
  for (uint32_t l = 0; l < b->n_levels; l++) {
    db_level *lv = &b->levels[l];
    for (int which = 0; which < 2; which++) {
      db_list *list = which ? &lv->delayed : &lv->live;
      db_req **link = &list->head, *prev = NULL;
      while (*link) {
        db_req *r = *link;
        bool cancelled = nrd_request_is_cancelled(r);
        bool expired = !cancelled && r->deadline_ns && now > r->deadline_ns;
        if (cancelled || expired) {
          *link = r->next;
          if (list->tail == r) list->tail = prev;
          if (expired && lv->pol.delay_on_timeout) {
            r->deadline_ns = 0; /* delayed requests no longer time out */
            list_push(&lv->delayed, r);
          } else {
            lv->size--;
            b->queued--;
            list_push(cancelled ? &dead->cancelled : &dead->rejected, r);
          }
          continue;
        }
        uint64_t rows = rows_of(r);
        if (sc->count == 0) {
          first = r;
        } else {
          if (sc->rows + rows > b->max_preferred && sc->best_count == 0) sc->best_count = sc->count;
          if (sc->rows + rows > b->max_rows || sc->count >= cap || (b->check_inputs && !compatible(b, first, r))) {
            sc->full = true;
            return;
          }
        }
        bool refused = b->hooks.include && !hook_include(b, sc, r);
        if (refused && sc->count > 0) {
          sc->full = true;
          return;
        }
        sc->count++;
        sc->rows += rows;
        if (sc->count == 1 || r->queue_start_ns < sc->oldest_ns) sc->oldest_ns = r->queue_start_ns;
        if (r->deadline_ns && (!sc->closest_deadline_ns || r->deadline_ns < sc->closest_deadline_ns))
          sc->closest_deadline_ns = r->deadline_ns;
        if (is_preferred(b, sc->rows)) sc->best_count = sc->count;
        if (refused) {
          sc->full = true;
          return;
        }
        prev = r;
        link = &r->next;
      }
    }
  }
}

/* max_queue_delay is a maximum: a short batch must have left by then. A
 * thread that waits for a point in time runs some time after it (wake-up
 * latency, preemption, the hypervisor: tens of microseconds typically and
 * hundreds in the tail on the 2-core VM, see docs/batching.md), so a short
 * batch is held until a little before the delay ends: 1/8 of the delay, at
 * most DB_EARLY_MAX_NS. At low load every request then waits at most the
 * delay in the queue, rather than the delay plus the lateness. */
#define DB_EARLY_MAX_NS 250000u

/* Decides from a scan how many requests to take now (0: wait), and until
 * when to wait (0: until woken). */
static uint32_t decide(const dyn_batcher *b, const db_scan *sc, uint64_t now, uint64_t *wake_ns) {
  *wake_ns = 0;
  if (sc->count == 0) return 0;
  bool delay_over = b->stopped || (b->delay_ns && now - sc->oldest_ns >= b->hold_ns);
  if (sc->best_count && !delay_over) return sc->best_count;
  if (sc->full || sc->rows >= b->max_preferred || delay_over || b->delay_ns == 0) return sc->count;
  *wake_ns = sc->oldest_ns + b->hold_ns;
  /* Wake just after the nearest timeout too, so an expired request is
   * answered (or delayed) when it expires rather than at the batch. */
  if (sc->closest_deadline_ns && sc->closest_deadline_ns + 1000 < *wake_ns) *wake_ns = sc->closest_deadline_ns + 1000;
  return 0;
}

static void answer_dead(db_dead *dead) {
  db_req *r;
  while ((r = list_pop(&dead->cancelled)))
    nrd_request_fail(r, nrd_error_new(TRITONSERVER_ERROR_CANCELLED, "Request was cancelled"), NRD_FAIL_CANCELED);
  while ((r = list_pop(&dead->rejected)))
    nrd_request_fail(r, nrd_error_new(TRITONSERVER_ERROR_UNAVAILABLE, "Request timeout expired"), NRD_FAIL_REJECTED);
}

/* Timed sleeps overshoot (timer slack, wake-up latency on a busy or virtual
 * machine: about 100 us here), and a batch waiting out the queue delay would
 * then be late by that much on every request at low load. So the wait ends
 * a little early and the rest is spun, with the lock released; this costs
 * at most DB_SPIN_NS of CPU per delayed batch, and only when batches wait.
 *
 * The spin never calls sched_yield: with another runnable thread on the CPU
 * (a compiler, the load generator) the kernel hands it the CPU for up to a
 * time slice, and the batch leaves up to milliseconds late. Measured on the
 * 2-core VM with other work running, the p99 of a spin's lateness was
 * 0.8-1.5 ms with sched_yield and 31-101 us with this loop (see
 * docs/batching.md). A request arriving (or the model stopping)
 * ends the spin at once, as it would wake the timed wait, so a batch that
 * becomes preferred is not held until the deadline. */
#define DB_SPIN_NS 150000u

/* One step of a busy wait: tells the CPU we spin (frees the sibling
 * hyperthread, saves power) without entering the kernel. */
static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
  __asm__ __volatile__("yield");
#endif
}

static void wait_until(dyn_batcher *b, uint64_t wake_ns) {
  if (wake_ns) {
    uint64_t now = nrd_now_ns();
    if (wake_ns <= now + DB_SPIN_NS) {
      unsigned seen = atomic_load_explicit(&b->changes, memory_order_relaxed);
      pthread_mutex_unlock(&b->mu);
      while (nrd_now_ns() < wake_ns && atomic_load_explicit(&b->changes, memory_order_relaxed) == seen) {
        cpu_relax();
      }
      pthread_mutex_lock(&b->mu);
      return;
    }
    wake_ns -= DB_SPIN_NS;
  }
  b->sleepers++;
  if (!wake_ns) {
    pthread_cond_wait(&b->cv, &b->mu);
  } else {
    struct timespec ts = {.tv_sec = (time_t)(wake_ns / 1000000000u), .tv_nsec = (long)(wake_ns % 1000000000u)};
    pthread_cond_timedwait(&b->cv, &b->mu, &ts);
  }
  b->sleepers--;
}

static uint32_t db_next_batch(nrd_scheduler *s, TRITONBACKEND_ModelInstance *inst, db_req **out, uint32_t max) {
  (void)inst;
  dyn_batcher *b = (dyn_batcher *)s;
  if (!max) return 0;
  pthread_mutex_lock(&b->mu);
  for (;;) {
    if (b->delay_cnt) {
      /* The test hook: no batch until delay_cnt requests are queued. */
      if (b->queued < b->delay_cnt && !b->stopped) {
        wait_until(b, 0);
        continue;
      }
      b->delay_cnt = 0;
      pthread_cond_broadcast(&b->cv);
    }
    uint64_t now = nrd_now_ns();
    db_scan sc;
    db_dead dead = {{NULL, NULL}, {NULL, NULL}};
    scan(b, now, max, &sc, &dead);
    uint64_t wake_ns;
    uint32_t take = decide(b, &sc, now, &wake_ns);
    /* Whatever happens next (send, answer the dead and look again, wait),
     * this formation is over for the hooks; the next look starts anew. */
    hook_end(b, &sc);
    if (dead.cancelled.head || dead.rejected.head) {
      /* Answer outside the lock (client callbacks run), then look again:
       * the queue may have changed meanwhile. */
      levels_prune(b);
      pthread_mutex_unlock(&b->mu);
      answer_dead(&dead);
      pthread_mutex_lock(&b->mu);
      continue;
    }
    if (take) {
      uint32_t n = 0;
      for (uint32_t l = 0; l < b->n_levels && n < take; l++) {
        db_level *lv = &b->levels[l];
        while (n < take && (out[n] = list_pop(&lv->live))) n++, lv->size--;
        while (n < take && (out[n] = list_pop(&lv->delayed))) n++, lv->size--;
      }
      b->queued -= n;
      levels_prune(b);
      if (b->order)
        for (uint32_t i = 0; i < n; i++) nrd_response_order_add(b->order, out[i]);
      bool more = b->queued > 0 && b->sleepers > 0;
      pthread_mutex_unlock(&b->mu);
      if (more) pthread_cond_signal(&b->cv); /* another idle instance can take the rest */
      return n;
    }
    if (b->stopped && b->queued == 0) {
      pthread_mutex_unlock(&b->mu);
      return 0;
    }
    wait_until(b, wake_ns);
  }
}

static TRITONSERVER_Error *db_enqueue(nrd_scheduler *s, db_req *req) {
  dyn_batcher *b = (dyn_batcher *)s;
  /* As in Triton: 0, or a priority past priority_levels, means the
   * default level. All 64 bits count. */
  uint64_t prio = b->default_prio;
  if (b->by_priority && req->priority >= 1 && req->priority <= b->max_level) prio = req->priority;
  pthread_mutex_lock(&b->mu);
  if (b->stopped) {
    pthread_mutex_unlock(&b->mu);
    return nrd_error_new(TRITONSERVER_ERROR_UNAVAILABLE, "model '%s' is unloading and takes no new requests",
                         b->model->name);
  }
  db_level *lv = level_get(b, prio);
  if (!lv) {
    pthread_mutex_unlock(&b->mu);
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory queueing a request of model '%s'", b->model->name);
  }
  /* Triton's rule: the level's default timeout applies; a request's own
   * timeout counts only with allow_timeout_override, and only to shorten
   * a non-zero default. */
  uint64_t timeout_us = lv->pol.default_timeout_us;
  if (lv->pol.allow_override && req->timeout_us && req->timeout_us < timeout_us) timeout_us = req->timeout_us;
  uint32_t max_queue = lv->pol.max_queue_size;
  if (max_queue && lv->size >= max_queue) {
    pthread_mutex_unlock(&b->mu);
    return nrd_error_new(TRITONSERVER_ERROR_UNAVAILABLE,
                         "Exceeds maximum queue size: model '%s' already queues %" PRIu32
                         " requests at priority level %" PRIu64 " (max_queue_size)",
                         b->model->name, max_queue, prio);
  }
  req->deadline_ns = timeout_us ? nrd_now_ns() + timeout_us * 1000u : 0;
  list_push(&lv->live, req);
  lv->size++;
  b->queued++;
  atomic_fetch_add_explicit(&b->changes, 1, memory_order_relaxed);
  bool wake = b->sleepers > 0;
  pthread_mutex_unlock(&b->mu);
  if (wake) pthread_cond_signal(&b->cv);
  return NULL;
}

static void db_stop(nrd_scheduler *s) {
  dyn_batcher *b = (dyn_batcher *)s;
  pthread_mutex_lock(&b->mu);
  b->stopped = true;
  atomic_fetch_add_explicit(&b->changes, 1, memory_order_relaxed);
  pthread_mutex_unlock(&b->mu);
  pthread_cond_broadcast(&b->cv);
}

/* Frees what ModelBatcherInitialize made (Triton calls the finalizer
 * whenever the hooks exist, even for a NULL batcher) and closes a strategy
 * library. Loader or unload thread, no batch being formed. */
static void hooks_close(dyn_batcher *b) {
  db_hooks *h = &b->hooks;
  if (h->batcher_fini) hook_error(b, "TRITONBACKEND_ModelBatcherFinalize", h->batcher_fini(h->batcher));
  if (h->dl) dlclose(h->dl);
  memset(h, 0, sizeof(*h));
}

static void db_destroy(nrd_scheduler *s) {
  dyn_batcher *b = (dyn_batcher *)s;
  hooks_close(b);
  nrd_response_order_unref(b->order);
  pthread_mutex_destroy(&b->mu);
  pthread_cond_destroy(&b->cv);
  free(b->levels);
  free(b->policies);
  free(b->preferred);
  free(b);
}

static const nrd_scheduler_ops dyn_ops = {db_enqueue, db_next_batch, db_stop, db_destroy, NULL};

/* ------------------------------------------------------------ creation */

static uint64_t juint(const json_t *obj, const char *key) {
  json_int_t v = json_integer_value(json_object_get(obj, key));
  return v > 0 ? (uint64_t)v : 0;
}

static void read_policy(const json_t *j, db_policy *p) {
  memset(p, 0, sizeof(*p));
  if (!json_is_object(j)) return;
  const char *action = json_string_value(json_object_get(j, "timeout_action"));
  p->delay_on_timeout = action && !strcmp(action, "DELAY");
  p->default_timeout_us = juint(j, "default_timeout_microseconds");
  p->allow_override = json_is_true(json_object_get(j, "allow_timeout_override"));
  uint64_t q = juint(j, "max_queue_size");
  p->max_queue_size = q > UINT32_MAX ? UINT32_MAX : (uint32_t)q;
}

/* Opens the strategy library at `path` and takes its hooks: all five or
 * none (then the model has no custom batching, as in Triton). */
static TRITONSERVER_Error *hooks_from_library(const TRITONBACKEND_Model *m, const char *path, db_hooks *h) {
  void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!dl) {
    const char *why = dlerror();
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "unable to load batching library '%s' for model '%s': %s",
                         path, m->name, why ? why : "unknown dlopen error");
  }
  void *f[5] = {dlsym(dl, "TRITONBACKEND_ModelBatcherInitialize"), dlsym(dl, "TRITONBACKEND_ModelBatcherFinalize"),
                dlsym(dl, "TRITONBACKEND_ModelBatchIncludeRequest"), dlsym(dl, "TRITONBACKEND_ModelBatchInitialize"),
                dlsym(dl, "TRITONBACKEND_ModelBatchFinalize")};
  int found = !!f[0] + !!f[1] + !!f[2] + !!f[3] + !!f[4];
  if (found == 0) {
    dlclose(dl);
    return NULL;
  }
  if (found != 5) {
    dlclose(dl);
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "%s does not define all required custom batching functions for model %s (it defines %d "
                         "of the 5 TRITONBACKEND_ModelBatch* functions)",
                         path, m->name, found);
  }
  h->dl = dl;
  h->batcher_init = (db_batcher_init_fn)f[0];
  h->batcher_fini = (db_batcher_fini_fn)f[1];
  h->include = (db_include_fn)f[2];
  h->batch_init = (db_batch_init_fn)f[3];
  h->batch_fini = (db_batch_fini_fn)f[4];
  return NULL;
}

/* Finds the model's custom batching hooks where Triton looks for them:
 * model parameter TRITON_BATCH_STRATEGY_PATH, else a batchstrategy.so in
 * the version folder, the model folder, the backend library's folder.
 * Without a strategy library, the hooks the backend library itself exports
 * (checked all-or-none at load) apply: a Nereid addition, Triton only
 * reads a separate library. Leaves `h` empty when there are none. */
static TRITONSERVER_Error *hooks_find(const TRITONBACKEND_Model *m, db_hooks *h) {
  memset(h, 0, sizeof(*h));
  const json_t *param = json_object_get(json_object_get(m->config, "parameters"), "TRITON_BATCH_STRATEGY_PATH");
  const char *path = json_string_value(json_object_get(param, "string_value"));
  if (path && *path) {
    /* Triton (core dcb315d): the library must lie inside the model folder,
     * else a configuration (a client's override too) could have any
     * library of the machine loaded. */
    bool inside = false;
    NRD_RETURN_IF_ERROR(nrd_path_inside(path, m->model_dir, &inside));
    if (!inside)
      return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                           "Batching library path escapes model repository. (model '%s' parameter "
                           "TRITON_BATCH_STRATEGY_PATH '%s')",
                           m->name, path);
    if (access(path, F_OK) != 0)
      return nrd_error_new(TRITONSERVER_ERROR_NOT_FOUND, "Batching library path not found: %s", path);
    return hooks_from_library(m, path, h);
  }
  const char *dirs[3] = {m->version_dir, m->model_dir, m->backend ? m->backend->dir : NULL};
  for (int i = 0; i < 3; i++) {
    if (!dirs[i]) continue;
    char lib[4096];
    if (snprintf(lib, sizeof lib, "%s/batchstrategy.so", dirs[i]) >= (int)sizeof lib) continue;
    if (access(lib, F_OK) == 0) {
      NRD_LOG_INFO("loading custom batching strategy library %s for model %s", lib, m->name);
      return hooks_from_library(m, lib, h);
    }
  }
  const TRITONBACKEND_Backend *be = m->backend;
  if (be && be->batch_include) {
    h->batcher_init = (db_batcher_init_fn)be->batcher_init;
    h->batcher_fini = (db_batcher_fini_fn)be->batcher_fini;
    h->include = (db_include_fn)be->batch_include;
    h->batch_init = (db_batch_init_fn)be->batch_init;
    h->batch_fini = (db_batch_fini_fn)be->batch_fini;
  }
  return NULL;
}

static int policy_cmp(const void *a, const void *b) {
  uint64_t x = ((const db_level_policy *)a)->prio, y = ((const db_level_policy *)b)->prio;
  return x < y ? -1 : x > y;
}

TRITONSERVER_Error *nrd_dynamic_batcher_new(TRITONBACKEND_Model *model, nrd_scheduler **out) {
  const json_t *db = json_object_get(model->config, "dynamic_batching");
  /* uint64 fields hold their bits in a json integer (see model_config.h). */
  uint64_t levels = (uint64_t)json_integer_value(json_object_get(db, "priority_levels"));
  dyn_batcher *b = calloc(1, sizeof(*b));
  TRITONSERVER_Error *err = NULL;
  if (!b) goto oom;
  b->base.ops = &dyn_ops;
  b->model = model;
  b->by_priority = levels > 0;
  b->max_level = levels;
  const json_t *pref = json_object_get(db, "preferred_batch_size");
  b->n_preferred = json_array_size(pref);
  b->preferred = calloc(b->n_preferred ? b->n_preferred : 1, sizeof(*b->preferred));
  if (!b->preferred) goto oom;

  read_policy(json_object_get(db, "default_queue_policy"), &b->def_policy);
  const json_t *per_level = b->by_priority ? json_object_get(db, "priority_queue_policy") : NULL;
  if (json_object_size(per_level)) {
    b->policies = calloc(json_object_size(per_level), sizeof(*b->policies));
    if (!b->policies) goto oom;
    const char *key;
    const json_t *pj;
    json_object_foreach((json_t *)per_level, key, pj) {
      db_level_policy *lp = &b->policies[b->n_policies++];
      lp->prio = strtoull(key, NULL, 10);
      read_policy(pj, &lp->pol);
    }
    qsort(b->policies, b->n_policies, sizeof(*b->policies), policy_cmp);
  }
  uint64_t def_level = (uint64_t)json_integer_value(json_object_get(db, "default_priority_level"));
  b->default_prio = (b->by_priority && def_level >= 1 && def_level <= levels) ? def_level : (b->by_priority ? 1 : 0);

  atomic_init(&b->changes, 0u);
  b->delay_cnt = nrd_scheduler_delay_count(model->name);
  b->max_rows = model->max_batch_size > 0 ? (uint64_t)model->max_batch_size : 1;
  for (size_t i = 0; i < b->n_preferred; i++) {
    b->preferred[i] = json_integer_value(json_array_get(pref, i));
    if (b->preferred[i] > 0 && (uint64_t)b->preferred[i] > b->max_preferred)
      b->max_preferred = (uint64_t)b->preferred[i];
  }
  /* Normalization fills preferred_batch_size with max_batch_size when
   * empty; without any, the batch grows up to max_batch_size. */
  if (!b->max_preferred) b->max_preferred = b->max_rows;
  b->delay_ns = juint(db, "max_queue_delay_microseconds") * 1000u;
  uint64_t early = b->delay_ns / 8 < DB_EARLY_MAX_NS ? b->delay_ns / 8 : DB_EARLY_MAX_NS;
  b->hold_ns = b->delay_ns - early;

  for (uint32_t i = 0; i < model->n_inputs; i++) {
    const nrd_io *io = &model->inputs[i];
    if (io->optional) b->has_optional = true;
    bool variable = false;
    for (uint32_t d = 0; d < io->ndims; d++)
      if (io->dims[d] < 0) variable = true;
    if (io->is_shape_tensor || (variable && !io->allow_ragged_batch)) b->check_inputs = true;
  }
  if (b->has_optional) b->check_inputs = true;

  if (json_is_true(json_object_get(db, "preserve_ordering"))) {
    b->order = nrd_response_order_new();
    if (!b->order) goto oom;
  }

  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&b->cv, &ca);
  pthread_condattr_destroy(&ca);
  pthread_mutex_init(&b->mu, NULL);

  /* Last, so a failure above never needs ModelBatcherFinalize. A failing
   * ModelBatcherInitialize fails the load with the backend's error, as in
   * Triton (which then does not call the finalizer either). */
  if ((err = hooks_find(model, &b->hooks))) goto fail_sync;
  if (b->hooks.batcher_init) {
    TRITONSERVER_Error *e = b->hooks.batcher_init(&b->hooks.batcher, model);
    if (e) {
      err = e;
      if (b->hooks.dl) dlclose(b->hooks.dl);
      memset(&b->hooks, 0, sizeof(b->hooks));
      goto fail_sync;
    }
  }
  *out = &b->base;
  return NULL;

fail_sync:
  pthread_mutex_destroy(&b->mu);
  pthread_cond_destroy(&b->cv);
  goto fail;
oom:
  err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory creating the dynamic batcher of '%s'", model->name);
fail:
  if (b) {
    nrd_response_order_unref(b->order);
    free(b->levels);
    free(b->policies);
    free(b->preferred);
    free(b);
  }
  return err;
}
