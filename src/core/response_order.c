/* preserve_ordering (response_order.h): responses held per request and
 * handed out in the order the requests were dequeued. */
#include "response_order.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#include "log.h"
#include "request.h"
#include "response.h"

/* One response held back until the requests dequeued before its own one
 * have all sent their final response. */
typedef struct held_response {
  struct held_response *next;
  TRITONSERVER_InferenceResponse *resp; /* NULL for flags-only */
  uint32_t flags;
} held_response;

/* One dequeued request's place in the delivery order. It replaces the
 * delivery's callback and keeps the client's own callback to forward to. */
typedef struct order_slot {
  struct order_slot *next;
  struct nrd_response_order *order; /* counted reference */
  TRITONSERVER_InferenceResponseCompleteFn_t fn;
  void *userp;
  held_response *held, *held_tail;
  bool final_seen;
} order_slot;

/* The delivery order of one batcher. Counted: the batcher and every slot
 * hold a reference, so responses arriving after unload still find it. */
struct nrd_response_order {
  pthread_mutex_t mu;
  atomic_int refs;
  order_slot *head, *tail;
  bool flushing; /* one thread at a time hands responses out, in order */
};

void nrd_response_order_unref(nrd_response_order *o) {
  if (!o || atomic_fetch_sub(&o->refs, 1) != 1) return;
  pthread_mutex_destroy(&o->mu);
  free(o);
}

/* The callback installed on ordered deliveries. Holds the response in its
 * slot, then, unless another thread is already doing it, hands out every
 * response that is now in order. Client callbacks run without any lock
 * held, so a callback may itself submit requests. Any thread. */
static void ordered_response(TRITONSERVER_InferenceResponse *resp, const uint32_t flags, void *userp) {
  order_slot *slot = userp;
  nrd_response_order *o = slot->order;
  held_response *h = malloc(sizeof(*h));
  if (!h) {
    /* Out of memory: deliver now, out of order, rather than lose it; a
     * final one still frees the slot's place below. */
    NRD_LOG_ERROR("out of memory holding a response for preserve_ordering; delivering it out of order");
    slot->fn(resp, flags, slot->userp);
  }
  pthread_mutex_lock(&o->mu);
  if (h) {
    h->next = NULL;
    h->resp = resp;
    h->flags = flags;
    if (slot->held_tail)
      slot->held_tail->next = h;
    else
      slot->held = h;
    slot->held_tail = h;
  }
  if (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) slot->final_seen = true;
  if (o->flushing) {
    pthread_mutex_unlock(&o->mu);
    return;
  }
  o->flushing = true;
  for (;;) {
    order_slot *s = o->head;
    if (!s || (!s->held && !s->final_seen)) break;
    held_response *list = s->held;
    s->held = s->held_tail = NULL;
    bool done = s->final_seen;
    if (done) {
      o->head = s->next;
      if (!o->head) o->tail = NULL;
    }
    pthread_mutex_unlock(&o->mu);
    while (list) {
      held_response *next = list->next;
      s->fn(list->resp, list->flags, s->userp);
      free(list);
      list = next;
    }
    if (done) {
      nrd_response_order_unref(s->order);
      free(s);
    }
    pthread_mutex_lock(&o->mu);
  }
  o->flushing = false;
  pthread_mutex_unlock(&o->mu);
}

void nrd_response_order_add(nrd_response_order *o, TRITONSERVER_InferenceRequest *r) {
  nrd_delivery *d = r->delivery;
  if (!d || !d->response_fn || d->response_fn == ordered_response) return;
  order_slot *s = calloc(1, sizeof(*s));
  if (!s) {
    NRD_LOG_ERROR("out of memory ordering request '%s'; its responses may arrive out of order",
                  d->request_id ? d->request_id : "");
    return;
  }
  atomic_fetch_add(&o->refs, 1);
  s->order = o;
  s->fn = d->response_fn;
  s->userp = d->response_userp;
  pthread_mutex_lock(&o->mu);
  if (o->tail)
    o->tail->next = s;
  else
    o->head = s;
  o->tail = s;
  pthread_mutex_unlock(&o->mu);
  d->response_userp = s;
  d->response_fn = ordered_response;
}

nrd_response_order *nrd_response_order_new(void) {
  nrd_response_order *o = calloc(1, sizeof(*o));
  if (!o) return NULL;
  atomic_init(&o->refs, 1);
  pthread_mutex_init(&o->mu, NULL);
  return o;
}
