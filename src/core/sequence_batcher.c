/* The sequence batcher (see sequence_batcher.h and docs/sequence.md).
 *
 * Layout: every live sequence is in exactly one place: a slot of an
 * instance, or the backlog FIFO (no free slot yet). Sequences that have not
 * received their END request are also in the correlation-id table, which
 * is how later requests find them; an END request takes its sequence out
 * of the table at once, so a new START with the same id begins a new
 * sequence while the old one finishes.
 *
 * There is no batcher thread. An idle instance thread calls next_batch,
 * which first retires the batch it executed last (those sequences are free
 * to run again; a finished sequence gives its slot to the backlog), frees
 * idle sequences, then takes the head request of each of its slots that
 * has one. Direct: each at its slot's index in the batch (gaps below the
 * highest such slot are padded with null requests, as Triton does).
 * Oldest: the slots are candidate sequences, and the batch is the oldest
 * heads, as many as Triton's dynamic batcher would send. A sequence never has two requests executing: a
 * slot's sequence is "busy" from the moment its request is handed out
 * until its instance comes back for the next batch. The control and state
 * inputs are added after the lock is dropped, on the instance thread.
 *
 * Locks: the batcher lock guards everything here; each instance sleeps on
 * its own condition variable so a request wakes the one thread that can
 * run it. State values have their own lock (state.c). */
#include "sequence_batcher.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "datatype.h"
#include "error.h"
#include "instance.h"
#include "log.h"
#include "model.h"
#include "request.h"
#include "response.h"
#include "response_order.h"
#include "state.h"
#include "stats.h"

#define SB_BUCKETS 1024u

typedef TRITONSERVER_InferenceRequest sb_req;

enum { CTL_START, CTL_END, CTL_READY, CTL_CORRID, CTL_KINDS };

/* One configured control input. */
typedef struct sb_control {
  char *name; /* NULL: this kind is not configured */
  TRITONSERVER_DataType dtype;
  unsigned char value[2][4]; /* false, true (booleans only) */
  size_t size; /* bytes of one value */
} sb_control;

typedef struct sb_seq {
  struct sb_seq *hnext; /* table chain */
  struct sb_seq *bl_next; /* backlog link */
  uint64_t id;
  char *sid; /* string correlation id, else NULL */
  uint32_t bucket;
  bool in_table;
  bool ended; /* its END request was accepted */
  bool busy; /* a request of it is executing */
  bool from_backlog; /* got its slot from the backlog; not yet looked at */
  struct sb_inst *inst; /* slot owner, NULL while in the backlog */
  uint32_t slot;
  sb_req *qhead, *qtail;
  uint64_t last_ns; /* arrival of its last request (Triton's idle clock) */
  nrd_state_set *states; /* counted; NULL without implicit state */
} sb_seq;

typedef struct sb_inst {
  TRITONBACKEND_ModelInstance *inst;
  pthread_cond_t cv; /* CLOCK_MONOTONIC, like nrd_now_ns */
  unsigned sleepers;
  sb_seq **slots; /* n_slots entries, NULL = free */
  sb_seq **last; /* sequences of the batch executed last */
  uint32_t n_last;
  sb_seq **ready; /* Oldest: n_slots entries, the slots with a request, found by the last scan */
  nrd_response_order *order; /* Oldest with preserve_ordering, else NULL */
} sb_inst;

typedef struct seq_batcher {
  nrd_scheduler base;
  TRITONBACKEND_Model *model;
  pthread_mutex_t mu;
  sb_inst *insts;
  uint32_t n_insts;
  uint32_t n_slots; /* per instance */
  sb_seq *table[SB_BUCKETS];
  sb_seq *bl_head, *bl_tail;
  uint64_t idle_ns; /* max_sequence_idle_microseconds */
  uint64_t delay_ns; /* the strategy's max_queue_delay_microseconds */
  uint32_t min_ready; /* Direct: ready slots that end the delay early (minimum_slot_utilization); 0: none */
  bool oldest; /* Oldest strategy (else Direct) */
  uint32_t max_batch; /* requests in one execution: max(1, max_batch_size) */
  uint32_t *preferred; /* Oldest: preferred batch sizes, largest first */
  uint32_t n_preferred;
  sb_control ctl[CTL_KINDS];
  nrd_state_config *states; /* counted; NULL without implicit state */
  bool batched; /* max_batch_size > 0 */
  bool stopped;
  uint32_t delay_cnt; /* TRITONSERVER_DELAY_SCHEDULER: hold requests until this many queue; 0: off */
  /* iterative_sequence: a request the backend releases with RESCHEDULE
   * runs again in its sequence (without START); released for good, it
   * ends the sequence. A request without a correlation ID gets the next
   * of these and START, as in Triton. */
  bool iterative;
  atomic_uint_fast64_t next_auto_id;
} seq_batcher;

/* Requests leaving the batcher without running, answered after unlock. */
typedef struct sb_dead {
  sb_req *head, *tail;
} sb_dead;

static void dead_push(sb_dead *d, sb_req *r) {
  r->next = NULL;
  if (d->tail)
    d->tail->next = r;
  else
    d->head = r;
  d->tail = r;
}

/* ------------------------------------------------------------ the table */

static uint32_t hash_id(uint64_t id, const char *sid) {
  uint64_t h = 1469598103934665603u;
  if (sid) {
    for (const unsigned char *p = (const unsigned char *)sid; *p; p++) h = (h ^ *p) * 1099511628211u;
  } else {
    h = id * 0x9E3779B97F4A7C15u;
    h ^= h >> 29;
  }
  return (uint32_t)(h % SB_BUCKETS);
}

static bool same_id(const sb_seq *s, uint64_t id, const char *sid) {
  if (!sid != !s->sid) return false;
  return sid ? !strcmp(sid, s->sid) : s->id == id;
}

static sb_seq *table_find(seq_batcher *b, uint32_t bucket, uint64_t id, const char *sid) {
  for (sb_seq *s = b->table[bucket]; s; s = s->hnext)
    if (same_id(s, id, sid)) return s;
  return NULL;
}

static void table_remove(seq_batcher *b, sb_seq *s) {
  if (!s->in_table) return;
  for (sb_seq **p = &b->table[s->bucket]; *p; p = &(*p)->hnext)
    if (*p == s) {
      *p = s->hnext;
      break;
    }
  s->hnext = NULL;
  s->in_table = false;
}

/* ------------------------------------------------------ slots, backlog */

static void wake(sb_inst *in) {
  if (in->sleepers) pthread_cond_signal(&in->cv);
}

/* Binds `s` to slot `slot` of `in` and wakes that instance. Lock held. */
static void bind_slot(sb_inst *in, uint32_t slot, sb_seq *s) {
  in->slots[slot] = s;
  s->inst = in;
  s->slot = slot;
  wake(in);
}

/* A free slot for a new sequence: the lowest slot index, spreading
 * sequences over instances first. False when every slot is taken. */
static bool find_free_slot(seq_batcher *b, sb_inst **in, uint32_t *slot) {
  for (uint32_t j = 0; j < b->n_slots; j++)
    for (uint32_t i = 0; i < b->n_insts; i++)
      if (!b->insts[i].slots[j]) {
        *in = &b->insts[i];
        *slot = j;
        return true;
      }
  return false;
}

/* Frees a sequence that has no queued request: its slot goes to the oldest
 * backlog sequence, if any. Lock held. */
static void seq_free(seq_batcher *b, sb_seq *s) {
  table_remove(b, s);
  sb_inst *in = s->inst;
  uint32_t slot = s->slot;
  if (in) {
    in->slots[slot] = NULL;
    sb_seq *next = b->bl_head;
    if (next) {
      b->bl_head = next->bl_next;
      if (!b->bl_head) b->bl_tail = NULL;
      next->bl_next = NULL;
      next->from_backlog = true;
      bind_slot(in, slot, next);
    }
  }
  nrd_state_set_unref(s->states);
  free(s->sid);
  free(s);
}

/* Whether `s` has been idle for max_sequence_idle_microseconds at `now`.
 * A last use stamped after `now` (another thread read the clock later) is
 * no idle time: the unsigned difference must not wrap around. Lock held. */
static bool idle_expired(const seq_batcher *b, const sb_seq *s, uint64_t now) {
  return b->idle_ns && s->inst && !s->busy && !s->qhead && !s->ended && now > s->last_ns &&
         now - s->last_ns >= b->idle_ns;
}

/* Frees every sequence idle for too long; returns the nearest time another
 * one may become idle (0: none). Lock held. */
static uint64_t reap_idle(seq_batcher *b, uint64_t now) {
  uint64_t next = 0;
  for (uint32_t i = 0; i < b->n_insts; i++) {
    for (uint32_t j = 0; j < b->n_slots; j++) {
      sb_seq *s = b->insts[i].slots[j];
      if (!s || s->busy || s->qhead || s->ended || !b->idle_ns) continue;
      if (idle_expired(b, s, now)) {
        NRD_LOG_VERBOSE(1, "model '%s': sequence %s%" PRIu64 " idle for more than %" PRIu64 " us; freeing its slot",
                        b->model->name, s->sid ? s->sid : "", s->sid ? 0 : s->id, b->idle_ns / 1000u);
        seq_free(b, s);
        continue;
      }
      uint64_t at = s->last_ns + b->idle_ns;
      if (!next || at < next) next = at;
    }
  }
  return next;
}

/* ------------------------------------------------------------- enqueue */

static TRITONSERVER_Error *sb_enqueue(nrd_scheduler *sched, sb_req *req) {
  seq_batcher *b = (seq_batcher *)sched;
  const char *mname = b->model->name;
  if (req->batch_size > 1)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "inference request to model '%s' must specify batch-size 1 due to requirements of sequence "
                         "batcher",
                         mname);
  /* Only a request that ran has `seq`: this one the backend rescheduled. */
  bool rescheduled = req->seq != NULL;
  if (b->iterative && rescheduled) {
    /* Its next pass continues the sequence (an END request ends it). */
    req->flags &= ~(uint32_t)TRITONSERVER_REQUEST_FLAG_SEQUENCE_START;
  } else if (b->iterative && (req->corr_id_str ? !*req->corr_id_str : req->corr_id == 0)) {
    free(req->corr_id_str);
    req->corr_id_str = NULL;
    req->corr_id = atomic_fetch_add(&b->next_auto_id, 1);
    req->flags |= TRITONSERVER_REQUEST_FLAG_SEQUENCE_START;
  }
  const char *sid = req->corr_id_str;
  if (sid ? !*sid : req->corr_id == 0)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "inference request to model '%s' must specify a non-zero or non-empty correlation ID", mname);
  /* A request the backend rescheduled still carries its last inputs. */
  if (req->seq || req->n_core_inputs) nrd_request_detach_core(req);
  bool start = req->flags & TRITONSERVER_REQUEST_FLAG_SEQUENCE_START;
  bool end = req->flags & TRITONSERVER_REQUEST_FLAG_SEQUENCE_END;
  uint32_t bucket = hash_id(req->corr_id, sid);

  pthread_mutex_lock(&b->mu);
  /* Read under the lock: an instance thread holding it may have stamped
   * this sequence's last use after a time read before it. */
  uint64_t now = nrd_now_ns();
  if (b->stopped) {
    pthread_mutex_unlock(&b->mu);
    return nrd_error_new(TRITONSERVER_ERROR_UNAVAILABLE, "model '%s' is unloading and takes no new requests", mname);
  }
  sb_seq *s = table_find(b, bucket, req->corr_id, sid);
  if (s && idle_expired(b, s, now)) {
    seq_free(b, s);
    s = NULL;
  }
  if (!s) {
    if (!start) {
      pthread_mutex_unlock(&b->mu);
      if (sid)
        return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                             "inference request for sequence %s to model '%s' must specify the START flag on the "
                             "first request of the sequence",
                             sid, mname);
      return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                           "inference request for sequence %" PRIu64
                           " to model '%s' must specify the START flag on the first request of the sequence",
                           req->corr_id, mname);
    }
    s = calloc(1, sizeof(*s));
    if (s && sid && !(s->sid = strdup(sid))) {
      free(s);
      s = NULL;
    }
    if (s && b->states && !(s->states = nrd_state_set_new(b->states))) {
      free(s->sid);
      free(s);
      s = NULL;
    }
    if (!s) {
      pthread_mutex_unlock(&b->mu);
      return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory starting a sequence of model '%s'", mname);
    }
    s->id = req->corr_id;
    s->bucket = bucket;
    s->hnext = b->table[bucket];
    b->table[bucket] = s;
    s->in_table = true;
    sb_inst *in;
    uint32_t slot;
    if (find_free_slot(b, &in, &slot)) {
      bind_slot(in, slot, s);
    } else {
      if (b->bl_tail)
        b->bl_tail->bl_next = s;
      else
        b->bl_head = s;
      b->bl_tail = s;
    }
  } else if (start) {
    /* As in Triton: the earlier sequence never ended; this one continues
     * in its place (the START request resets the state). */
    NRD_LOG_WARN("sequence %s%" PRIu64 " for model '%s' has a conflict. The previous sequence did not end before "
                 "this sequence start. Previous sequence will be terminated early.",
                 sid ? sid : "", sid ? 0 : req->corr_id, mname);
  }
  req->next = NULL;
  if (s->qtail)
    s->qtail->next = req;
  else
    s->qhead = req;
  s->qtail = req;
  s->last_ns = now;
  if (end) {
    s->ended = true;
    table_remove(b, s);
  }
  if (s->inst) wake(s->inst);
  pthread_mutex_unlock(&b->mu);
  return NULL;
}

/* ----------------------------------------------------------- next_batch */

/* The batch `in` executed last is over: its sequences may run again, and
 * those whose END request ran are freed. Lock held. */
static void retire_last(seq_batcher *b, sb_inst *in) {
  /* last_ns stays the arrival time: Triton's reaper counts idleness from
   * a sequence's last request, so an execution longer than the idle time
   * frees the slot as soon as it ends. */
  for (uint32_t k = 0; k < in->n_last; k++) {
    sb_seq *s = in->last[k];
    s->busy = false;
    if (s->ended && !s->qhead) seq_free(b, s);
  }
  in->n_last = 0;
}

/* Pops the head request of `s`. Lock held. */
static sb_req *seq_pop(sb_seq *s) {
  sb_req *r = s->qhead;
  s->qhead = r->next;
  if (!s->qhead) s->qtail = NULL;
  r->next = NULL;
  return r;
}

/* Writes one control value for `r` into `dst` and adds the input. */
static TRITONSERVER_Error *add_control(seq_batcher *b, sb_req *r, int kind, bool value, nrd_seq_attach *a) {
  const sb_control *c = &b->ctl[kind];
  int64_t shape[2] = {1, 1};
  uint32_t nd = b->batched ? 2 : 1;
  if (kind != CTL_CORRID) {
    memcpy(a->ctrl[kind], c->value[value], c->size);
    return nrd_request_add_core_input(r, c->name, c->dtype, shape, nd, a->ctrl[kind], c->size);
  }
  if (c->dtype == TRITONSERVER_TYPE_BYTES) {
    char text[160];
    int n = r->is_null       ? 0 /* a null request's id is the empty string, as in Triton */
            : r->corr_id_str ? snprintf(text, sizeof text, "%s", r->corr_id_str)
                             : snprintf(text, sizeof text, "%" PRIu64, r->corr_id);
    uint32_t len = n < 0 ? 0 : (uint32_t)n >= sizeof text ? (uint32_t)sizeof text - 1 : (uint32_t)n;
    memcpy(a->corrid_bytes, &len, 4); /* BYTES elements: 4-byte little-endian length, then the bytes */
    memcpy(a->corrid_bytes + 4, text, len);
    return nrd_request_add_core_input(r, c->name, c->dtype, shape, nd, a->corrid_bytes, 4u + len);
  }
  if (r->corr_id_str)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "sequence %s of model '%s' has a string correlation id, but control input '%s' "
                         "(CONTROL_SEQUENCE_CORRID) is %s",
                         r->corr_id_str, b->model->name, c->name, nrd_datatype_config_name(c->dtype));
  size_t size = nrd_datatype_byte_size(c->dtype);
  if (size == 8) {
    memcpy(a->ctrl[kind], &r->corr_id, 8);
  } else {
    uint32_t v = (uint32_t)r->corr_id;
    memcpy(a->ctrl[kind], &v, 4);
  }
  return nrd_request_add_core_input(r, c->name, c->dtype, shape, nd, a->ctrl[kind], size);
}

/* Gives `r` (of sequence `s`) its control and state inputs. On error the
 * request keeps what was attached; its release removes it. Instance
 * thread, lock not held; `s` stays alive while busy. */
static TRITONSERVER_Error *prepare(seq_batcher *b, sb_seq *s, sb_req *r) {
  nrd_seq_attach *a = nrd_state_attach_new();
  if (!a) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory preparing a sequence request");
  r->seq = a;
  bool start = r->flags & TRITONSERVER_REQUEST_FLAG_SEQUENCE_START;
  bool end = r->flags & TRITONSERVER_REQUEST_FLAG_SEQUENCE_END;
  const bool values[CTL_KINDS] = {start, end, true, false};
  for (int k = 0; k < CTL_KINDS; k++)
    if (b->ctl[k].name) NRD_RETURN_IF_ERROR(add_control(b, r, k, values[k], a));
  if (s->states) {
    if (start && !nrd_state_set_reset(s->states))
      return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory resetting the state of a sequence");
    NRD_RETURN_IF_ERROR(nrd_state_attach_inputs(s->states, r, a));
  }
  return NULL;
}

/* A null request padding a Direct batch (nrd_request_new_null): copied
 * from `from`'s client inputs, with every control false (CORRID 0) and, with
 * implicit state, state inputs of its own at their initial values, so what
 * the backend does with them reaches no sequence. NULL when it cannot be
 * made (logged). Instance thread, lock not held. */
static sb_req *make_null(seq_batcher *b, const sb_req *from) {
  sb_req *r = nrd_request_new_null(from);
  if (!r) {
    NRD_LOG_ERROR("model '%s': out of memory for a null request; the batch goes without it", b->model->name);
    return NULL;
  }
  TRITONSERVER_Error *err = NULL;
  nrd_seq_attach *a = nrd_state_attach_new();
  if (!a) err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  r->seq = a;
  for (int k = 0; !err && k < CTL_KINDS; k++)
    if (b->ctl[k].name) err = add_control(b, r, k, false, a);
  if (!err && b->states) {
    nrd_state_set *own = nrd_state_set_new(b->states);
    if (!own)
      err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    else
      err = nrd_state_attach_inputs(own, r, a);
    nrd_state_set_unref(own);
  }
  if (!err) return r;
  NRD_LOG_ERROR("model '%s': cannot make a null request (%s); the batch goes without it", b->model->name,
                TRITONSERVER_ErrorMessage(err));
  TRITONSERVER_ErrorDelete(err);
  nrd_request_release(r, TRITONSERVER_REQUEST_RELEASE_ALL);
  return NULL;
}

/* Readies a Direct batch taken from slots 0 .. n-1: out[j] is slot j's
 * request, NULL where the slot had none. Those gaps get null requests
 * copied from the batch's first request, as Triton pads it, so a backend
 * that keeps per-slot data sees each sequence at the same index every
 * time. The real requests get their control and state inputs; one that
 * cannot be prepared is answered with the error and its place padded too.
 * Returns the batch's length (a null that could not be made is left out),
 * 0 when no real request is left. Instance thread, lock not held. */
static uint32_t finish_batch(seq_batcher *b, sb_inst *in, sb_req **out, uint32_t n) {
  const sb_req *first = NULL;
  for (uint32_t j = 0; j < n && !first; j++) first = out[j];
  for (uint32_t j = 0; j < n; j++)
    if (!out[j]) out[j] = make_null(b, first);
  uint32_t real = 0, seq = 0;
  for (uint32_t j = 0; j < n; j++) {
    sb_req *r = out[j];
    if (!r || r->is_null) continue;
    TRITONSERVER_Error *err = prepare(b, in->last[seq++], r); /* last[] lists the real ones in order */
    if (!err) {
      real++;
      continue;
    }
    out[j] = make_null(b, r);
    nrd_request_fail(r, err, NRD_FAIL_OTHER);
  }
  uint32_t kept = 0;
  for (uint32_t j = 0; j < n; j++) {
    if (!out[j]) continue;
    if (!real)
      nrd_request_release(out[j], TRITONSERVER_REQUEST_RELEASE_ALL); /* only nulls left */
    else
      out[kept++] = out[j];
  }
  return real ? kept : 0;
}

/* Oldest strategy: how many of the `ready` sequences (each with a request
 * queued) run now, as Triton's dynamic batcher decides: a full batch at
 * once; else, once the queue delay is over, all of them; else the largest
 * preferred batch size they reach; else none yet (wait). */
static uint32_t oldest_take(const seq_batcher *b, uint32_t ready, bool delay_over, uint32_t max) {
  uint32_t most = b->max_batch < max ? b->max_batch : max;
  if (ready >= most) return most;
  if (delay_over) return ready;
  for (uint32_t i = 0; i < b->n_preferred; i++)
    if (b->preferred[i] <= ready) return b->preferred[i];
  return 0;
}

/* Whether the head request of `a` arrived before that of `b`; on a tie the
 * lower slot comes first. */
static bool head_before(const sb_seq *a, const sb_seq *b) {
  uint64_t x = a->qhead->queue_start_ns, y = b->qhead->queue_start_ns;
  return x < y || (x == y && a->slot < b->slot);
}

/* Sift-down of the max-heap h[0..n) ordered by head_before (the root is
 * the latest head). */
static void heap_down(sb_seq **h, uint32_t n, uint32_t i) {
  for (;;) {
    uint32_t l = 2 * i + 1, m = i;
    if (l < n && head_before(h[m], h[l])) m = l;
    if (l + 1 < n && head_before(h[m], h[l + 1])) m = l + 1;
    if (m == i) return;
    sb_seq *t = h[i];
    h[i] = h[m];
    h[m] = t;
    i = m;
  }
}

/* Oldest strategy: pops the head requests of the `take` sequences of
 * ready[0..n_ready) (all of them with a queued request, none busy) whose
 * heads arrived first into out[], oldest first, marking them busy (their
 * sequences in in->last, in the same order). One pass over the ready
 * slots keeping the `take` oldest in a max-heap, then a heap sort of
 * those: O(ready log take), where picking the oldest `take` times over
 * every slot cost O(take x slots) (at 1,000 sequences and batches of 64,
 * most of the batcher's CPU). Reorders ready[]. Lock held. */
static uint32_t pick_oldest(sb_inst *in, sb_seq **ready, uint32_t n_ready, sb_req **out, uint32_t take) {
  if (take > n_ready) take = n_ready;
  if (!take) return 0;
  sb_seq **h = ready; /* the heap is ready[0..take) */
  for (uint32_t i = take / 2; i-- > 0;) heap_down(h, take, i);
  for (uint32_t k = take; k < n_ready; k++)
    if (head_before(ready[k], h[0])) {
      h[0] = ready[k];
      heap_down(h, take, 0);
    }
  for (uint32_t n = take; n > 1; n--) { /* ascending: oldest first */
    sb_seq *t = h[0];
    h[0] = h[n - 1];
    h[n - 1] = t;
    heap_down(h, n - 1, 0);
  }
  for (uint32_t n = 0; n < take; n++) {
    sb_seq *s = h[n];
    s->busy = true;
    in->last[in->n_last++] = s;
    out[n] = seq_pop(s);
    if (in->order) nrd_response_order_add(in->order, out[n]);
  }
  return take;
}

static sb_inst *inst_of(seq_batcher *b, TRITONBACKEND_ModelInstance *inst) {
  for (uint32_t i = 0; i < b->n_insts; i++)
    if (b->insts[i].inst == inst) return &b->insts[i];
  return NULL;
}

static void wait_until(sb_inst *in, pthread_mutex_t *mu, uint64_t wake_ns) {
  in->sleepers++;
  if (!wake_ns) {
    pthread_cond_wait(&in->cv, mu);
  } else {
    struct timespec ts = {.tv_sec = (time_t)(wake_ns / 1000000000u), .tv_nsec = (long)(wake_ns % 1000000000u)};
    pthread_cond_timedwait(&in->cv, mu, &ts);
  }
  in->sleepers--;
}

static void answer_dead(sb_dead *d, TRITONSERVER_Error_Code code, const char *why) {
  sb_req *r;
  while ((r = d->head)) {
    d->head = r->next;
    r->next = NULL;
    bool cancelled = nrd_request_is_cancelled(r);
    if (cancelled)
      nrd_request_fail(r, nrd_error_new(TRITONSERVER_ERROR_CANCELLED, "Request was cancelled"), NRD_FAIL_CANCELED);
    else
      nrd_request_fail(r, nrd_error_new(code, "%s", why), NRD_FAIL_REJECTED);
  }
  d->tail = NULL;
}

/* Answers every request of `d` CANCELLED (a cancelled sequence). */
static void answer_cancelled(sb_dead *d) {
  sb_req *r;
  while ((r = d->head)) {
    d->head = r->next;
    r->next = NULL;
    nrd_request_fail(r, nrd_error_new(TRITONSERVER_ERROR_CANCELLED, "Request was cancelled"), NRD_FAIL_CANCELED);
  }
  d->tail = NULL;
}

/* True when the sequence in a slot is cancelled: its head request is, or
 * (first look after leaving the backlog) any of its queued requests is.
 * Clears from_backlog. Lock held. */
static bool seq_cancelled(sb_seq *s) {
  if (!s->qhead) return false;
  if (nrd_request_is_cancelled(s->qhead)) return true;
  if (!s->from_backlog) return false;
  s->from_backlog = false;
  for (sb_req *r = s->qhead->next; r; r = r->next)
    if (nrd_request_is_cancelled(r)) return true;
  return false;
}

static uint32_t sb_next_batch(nrd_scheduler *sched, TRITONBACKEND_ModelInstance *inst, sb_req **out, uint32_t max) {
  seq_batcher *b = (seq_batcher *)sched;
  sb_inst *in = inst_of(b, inst);
  if (!in || !max) return 0; /* not one of ours (passive): nothing to run */
  pthread_mutex_lock(&b->mu);
  for (;;) {
    uint64_t now = nrd_now_ns();
    retire_last(b, in);
    if (b->delay_cnt && !b->stopped) {
      /* The test hook: nothing runs until delay_cnt requests are queued
       * in the slots of all instances together (as Triton counts). */
      uint32_t queued = 0;
      for (uint32_t i = 0; i < b->n_insts; i++)
        for (uint32_t j = 0; j < b->n_slots; j++)
          for (sb_req *r = b->insts[i].slots[j] ? b->insts[i].slots[j]->qhead : NULL; r; r = r->next) queued++;
      if (queued < b->delay_cnt) {
        wait_until(in, &b->mu, 0);
        continue;
      }
      b->delay_cnt = 0;
      for (uint32_t i = 0; i < b->n_insts; i++) pthread_cond_broadcast(&b->insts[i].cv);
    }
    uint64_t wake_ns = reap_idle(b, now);
    /* Requests cancelled or timed out at the head of a slot's queue are
     * answered instead of run. */
    sb_dead dead = {NULL, NULL}, dead_cancel = {NULL, NULL};
    uint32_t ready = 0, occupied = 0;
    uint64_t oldest = 0;
    for (uint32_t j = 0; j < b->n_slots; j++) {
      sb_seq *s = in->slots[j];
      if (!s) continue;
      occupied++;
      if (seq_cancelled(s)) {
        /* As in Triton: a cancelled request at the head of a sequence (or
         * anywhere in a sequence that waited in the backlog) cancels the
         * whole sequence: every queued request of it is answered CANCELLED
         * and its correlation ID is forgotten. */
        NRD_LOG_VERBOSE(1, "model '%s': sequence %s%" PRIu64 " cancelled; releasing its slot", b->model->name,
                        s->sid ? s->sid : "", s->sid ? 0 : s->id);
        while (s->qhead) dead_push(&dead_cancel, seq_pop(s));
        seq_free(b, s);
        occupied--;
        j--;
        continue;
      }
      while (s->qhead) {
        sb_req *r = s->qhead;
        if (!(r->deadline_ns && now > r->deadline_ns)) break;
        dead_push(&dead, seq_pop(s));
      }
      if (s->qhead) {
        if (in->ready) in->ready[ready] = s;
        ready++;
        if (!oldest || s->qhead->queue_start_ns < oldest) oldest = s->qhead->queue_start_ns;
      } else if (s->ended) {
        /* Its END request was answered from the queue. The slot may go to
         * a backlog sequence: look at it again. */
        seq_free(b, s);
        occupied--;
        j--;
      }
    }
    if (dead.head || dead_cancel.head) {
      pthread_mutex_unlock(&b->mu);
      answer_dead(&dead, TRITONSERVER_ERROR_UNAVAILABLE, "Request timeout expired");
      answer_cancelled(&dead_cancel);
      pthread_mutex_lock(&b->mu);
      continue;
    }
    /* The queue delay, as Triton's: Direct waits only with a
     * minimum_slot_utilization, until that share of the slots has a
     * request; Oldest waits for its preferred batch sizes (oldest_take).
     * Either stops waiting once the oldest request waited the delay. */
    bool delay_over = !b->delay_ns || b->stopped || now >= oldest + b->delay_ns ||
                      (!b->oldest && (!b->min_ready || ready >= b->min_ready));
    uint32_t take = b->oldest && ready ? oldest_take(b, ready, delay_over, max) : 0;
    if (take) {
      uint32_t n = pick_oldest(in, in->ready, ready, out, take);
      pthread_mutex_unlock(&b->mu);
      uint32_t kept = 0;
      for (uint32_t k = 0; k < n; k++) {
        TRITONSERVER_Error *err = prepare(b, in->last[k], out[k]);
        if (err)
          nrd_request_fail(out[k], err, NRD_FAIL_OTHER);
        else
          out[kept++] = out[k];
      }
      if (kept) return kept;
      pthread_mutex_lock(&b->mu);
      continue;
    }
    if (!b->oldest && ready && delay_over) {
      /* Slots 0 .. the highest one with a request, each at its own index
       * (finish_batch pads the gaps). */
      uint32_t n = 0;
      for (uint32_t j = 0; j < b->n_slots && j < max; j++)
        if (in->slots[j] && in->slots[j]->qhead) n = j + 1;
      for (uint32_t j = 0; j < n; j++) {
        sb_seq *s = in->slots[j];
        out[j] = NULL;
        if (!s || !s->qhead) continue;
        s->busy = true;
        in->last[in->n_last++] = s; /* the real requests, in batch order */
        out[j] = seq_pop(s);
      }
      pthread_mutex_unlock(&b->mu);
      uint32_t kept = finish_batch(b, in, out, n);
      if (kept) return kept;
      pthread_mutex_lock(&b->mu);
      continue;
    }
    if (b->stopped && !ready) {
      pthread_mutex_unlock(&b->mu);
      return 0;
    }
    if (ready && (!wake_ns || oldest + b->delay_ns < wake_ns)) wake_ns = oldest + b->delay_ns;
    wait_until(in, &b->mu, wake_ns);
  }
}

/* ------------------------------------------------------- stop, destroy */

static void sb_stop(nrd_scheduler *sched) {
  seq_batcher *b = (seq_batcher *)sched;
  sb_dead dead = {NULL, NULL};
  pthread_mutex_lock(&b->mu);
  b->stopped = true;
  /* Backlog sequences would never get a slot in time: refuse them now. */
  while (b->bl_head) {
    sb_seq *s = b->bl_head;
    b->bl_head = s->bl_next;
    while (s->qhead) dead_push(&dead, seq_pop(s));
    s->inst = NULL;
    seq_free(b, s);
  }
  b->bl_tail = NULL;
  for (uint32_t i = 0; i < b->n_insts; i++) pthread_cond_broadcast(&b->insts[i].cv);
  pthread_mutex_unlock(&b->mu);
  answer_dead(&dead, TRITONSERVER_ERROR_UNAVAILABLE, "model is unloading: the sequence never got a batch slot");
}

static void controls_free(seq_batcher *b) {
  for (int k = 0; k < CTL_KINDS; k++) free(b->ctl[k].name);
}

static void sb_destroy(nrd_scheduler *sched) {
  seq_batcher *b = (seq_batcher *)sched;
  sb_dead dead = {NULL, NULL};
  for (uint32_t i = 0; i < b->n_insts; i++) {
    sb_inst *in = &b->insts[i];
    for (uint32_t j = 0; j < b->n_slots; j++) {
      sb_seq *s = in->slots[j];
      if (!s) continue;
      while (s->qhead) dead_push(&dead, seq_pop(s)); /* only if no thread ever ran */
      s->inst = NULL;
      seq_free(b, s);
    }
    free(in->slots);
    free(in->last);
    free(in->ready);
    nrd_response_order_unref(in->order);
    pthread_cond_destroy(&in->cv);
  }
  answer_dead(&dead, TRITONSERVER_ERROR_UNAVAILABLE, "model is unloading");
  free(b->insts);
  controls_free(b);
  free(b->preferred);
  nrd_state_config_unref(b->states);
  pthread_mutex_destroy(&b->mu);
  free(b);
}

/* iterative_sequence: a request released for good (not rescheduled) ends
 * its sequence, which leaves its slot once nothing of it is queued or
 * running. Any thread. */
static void sb_released(nrd_scheduler *sched, sb_req *req) {
  seq_batcher *b = (seq_batcher *)sched;
  if (!b->iterative || (req->flags & TRITONSERVER_REQUEST_FLAG_SEQUENCE_END)) return; /* END ended it */
  uint32_t bucket = hash_id(req->corr_id, req->corr_id_str);
  pthread_mutex_lock(&b->mu);
  sb_seq *s = table_find(b, bucket, req->corr_id, req->corr_id_str);
  if (s) {
    s->ended = true;
    table_remove(b, s);
    if (s->inst && !s->busy && !s->qhead) seq_free(b, s);
  }
  pthread_mutex_unlock(&b->mu);
}

static const nrd_scheduler_ops seq_ops = {sb_enqueue, sb_next_batch, sb_stop, sb_destroy, sb_released};

/* ------------------------------------------------------------ creation */

static uint64_t juint(const json_t *obj, const char *key) {
  const json_t *v = json_object_get(obj, key);
  if (json_is_string(v)) return strtoull(json_string_value(v), NULL, 10);
  json_int_t i = json_integer_value(v);
  return i > 0 ? (uint64_t)i : 0;
}

/* Reads control_input: each kind's tensor name, data type and the
 * false/true values (the configuration check already ran). */
static TRITONSERVER_Error *read_controls(seq_batcher *b, const json_t *sb) {
  static const char *const kinds[CTL_KINDS] = {"CONTROL_SEQUENCE_START", "CONTROL_SEQUENCE_END",
                                               "CONTROL_SEQUENCE_READY", "CONTROL_SEQUENCE_CORRID"};
  const json_t *inputs = json_object_get(sb, "control_input");
  for (size_t i = 0; i < json_array_size(inputs); i++) {
    const json_t *ci = json_array_get(inputs, i);
    const char *name = json_string_value(json_object_get(ci, "name"));
    const json_t *ctls = json_object_get(ci, "control");
    for (size_t c = 0; name && c < json_array_size(ctls); c++) {
      const json_t *ctl = json_array_get(ctls, c);
      const char *kind = json_string_value(json_object_get(ctl, "kind"));
      if (!kind || !*kind) kind = kinds[CTL_START];
      int k = 0;
      while (k < CTL_KINDS && strcmp(kinds[k], kind)) k++;
      if (k == CTL_KINDS || b->ctl[k].name) continue;
      sb_control *x = &b->ctl[k];
      const json_t *i32 = json_object_get(ctl, "int32_false_true");
      const json_t *f32 = json_object_get(ctl, "fp32_false_true");
      const json_t *bl = json_object_get(ctl, "bool_false_true");
      if (k == CTL_CORRID) {
        x->dtype = nrd_datatype_from_config(json_string_value(json_object_get(ctl, "data_type")));
      } else if (json_array_size(i32) == 2) {
        x->dtype = TRITONSERVER_TYPE_INT32;
        x->size = 4;
        for (int v = 0; v < 2; v++) {
          int32_t val = (int32_t)json_integer_value(json_array_get(i32, (size_t)v));
          memcpy(x->value[v], &val, 4);
        }
      } else if (json_array_size(f32) == 2) {
        x->dtype = TRITONSERVER_TYPE_FP32;
        x->size = 4;
        for (int v = 0; v < 2; v++) {
          float val = (float)json_number_value(json_array_get(f32, (size_t)v));
          memcpy(x->value[v], &val, 4);
        }
      } else if (json_array_size(bl) == 2) {
        x->dtype = TRITONSERVER_TYPE_BOOL;
        x->size = 1;
        for (int v = 0; v < 2; v++) x->value[v][0] = json_is_true(json_array_get(bl, (size_t)v)) ? 1 : 0;
      } else {
        return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                             "model '%s': control input '%s' (%s) needs int32_false_true, fp32_false_true or "
                             "bool_false_true with 2 values",
                             b->model->name, name, kind);
      }
      if (x->dtype == TRITONSERVER_TYPE_INVALID)
        return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "model '%s': control input '%s' has no valid data_type",
                             b->model->name, name);
      if (!(x->name = strdup(name)))
        return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory reading the control inputs of '%s'",
                             b->model->name);
    }
  }
  return NULL;
}

TRITONSERVER_Error *nrd_sequence_batcher_new(TRITONBACKEND_Model *model, const nrd_executor *ex, nrd_scheduler **out) {
  const json_t *sb = json_object_get(model->config, "sequence_batching");
  TRITONSERVER_Error *err = NULL;
  seq_batcher *b = calloc(1, sizeof(*b));
  if (!b) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory creating the sequence batcher");
  b->base.ops = &seq_ops;
  b->model = model;
  b->delay_cnt = nrd_scheduler_delay_count(model->name);
  b->batched = model->max_batch_size > 0;
  b->max_batch = b->batched ? (uint32_t)model->max_batch_size : 1;
  b->n_slots = b->max_batch;
  b->idle_ns = juint(sb, "max_sequence_idle_microseconds") * 1000u;
  b->iterative = json_is_true(json_object_get(sb, "iterative_sequence"));
  atomic_init(&b->next_auto_id, 1);
  const json_t *oldest = json_object_get(sb, "oldest");
  b->oldest = oldest != NULL;
  b->delay_ns = juint(b->oldest ? oldest : json_object_get(sb, "direct"), "max_queue_delay_microseconds") * 1000u;
  double util = json_number_value(json_object_get(json_object_get(sb, "direct"), "minimum_slot_utilization"));
  if (!b->oldest && b->delay_ns && util > 0) {
    /* As Triton: with a queue delay, a batch also goes once this share of
     * the slots has a request. */
    double need = util * (double)b->max_batch;
    b->min_ready = (uint32_t)need;
    if ((double)b->min_ready < need) b->min_ready++;
    if (b->min_ready < 1) b->min_ready = 1;
  }
  if (b->oldest) {
    /* Candidate sequences per instance; 0 falls back to the Direct count,
     * as in Triton. */
    uint64_t cand = juint(oldest, "max_candidate_sequences");
    if (cand > 0) b->n_slots = cand > 65536 ? 65536 : (uint32_t)cand;
    const json_t *pref = json_object_get(oldest, "preferred_batch_size");
    size_t np = json_array_size(pref);
    if (np && !(b->preferred = calloc(np, sizeof(*b->preferred)))) goto oom;
    for (size_t i = 0; i < np; i++) {
      json_int_t v = json_integer_value(json_array_get(pref, i));
      if (v <= 0 || (uint64_t)v > b->max_batch) continue; /* the configuration check refused these */
      uint32_t k = b->n_preferred++;
      while (k > 0 && b->preferred[k - 1] < (uint32_t)v) { /* largest first */
        b->preferred[k] = b->preferred[k - 1];
        k--;
      }
      b->preferred[k] = (uint32_t)v;
    }
  }
  if ((err = read_controls(b, sb))) goto fail;
  if ((err = nrd_state_config_new(model, &b->states))) goto fail;

  b->insts = calloc(ex->n_instances ? ex->n_instances : 1, sizeof(*b->insts));
  if (!b->insts) goto oom;
  for (uint32_t i = 0; i < ex->n_instances; i++) {
    if (ex->instances[i].passive) continue; /* never runs: gets no slots */
    sb_inst *in = &b->insts[b->n_insts];
    in->slots = calloc(b->n_slots, sizeof(*in->slots));
    in->last = calloc(b->n_slots, sizeof(*in->last));
    if (b->oldest) in->ready = calloc(b->n_slots, sizeof(*in->ready));
    if (!in->slots || !in->last || (b->oldest && !in->ready)) {
      free(in->slots);
      free(in->last);
      free(in->ready);
      goto oom;
    }
    in->inst = ex->instances[i].inst;
    /* As Triton, whose Oldest strategy is a dynamic batcher per instance:
     * the order is the instance's. */
    if (b->oldest && json_is_true(json_object_get(oldest, "preserve_ordering")) &&
        !(in->order = nrd_response_order_new())) {
      free(in->slots);
      free(in->last);
      free(in->ready);
      goto oom;
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&in->cv, &ca);
    pthread_condattr_destroy(&ca);
    b->n_insts++;
  }
  pthread_mutex_init(&b->mu, NULL);
  *out = &b->base;
  return NULL;

oom:
  err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory creating the sequence batcher of '%s'", model->name);
fail:
  for (uint32_t i = 0; i < b->n_insts; i++) {
    free(b->insts[i].slots);
    free(b->insts[i].last);
    free(b->insts[i].ready);
    nrd_response_order_unref(b->insts[i].order);
    pthread_cond_destroy(&b->insts[i].cv);
  }
  free(b->insts);
  controls_free(b);
  free(b->preferred);
  nrd_state_config_unref(b->states);
  free(b);
  return err;
}
