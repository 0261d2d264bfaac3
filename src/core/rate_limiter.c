/* The rate limiter (rate_limiter.h).
 *
 * Resources are counted per key: a name and a device, or a name and
 * GLOBAL. A key's limit is what the command line gave for it, or, when the
 * command line named no resource at all, the largest count any registered
 * instance needs (so every instance can run, one at a time at worst).
 *
 * Turns: an instance that wants to run is staged. Only the staged
 * instance with the lowest score (runs so far x priority, priority 0
 * counting as 1; the earlier staged first on a tie) may take resources,
 * and only when all of them are free; the others wait behind it, as in
 * Triton. Everything is guarded by one lock; waiters sleep on one
 * condition variable, woken on every change. */
#include "rate_limiter.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "log.h"

#define RL_GLOBAL (-2)

typedef struct rl_need {
  char *name;
  int device; /* RL_GLOBAL for a global resource */
  uint64_t count;
} rl_need;

struct nrd_rl_client {
  struct nrd_rl_client *next;
  char *model;
  rl_need *needs;
  size_t n_needs;
  uint64_t priority; /* at least 1 */
  uint64_t runs;
  uint64_t staged_at; /* 0: not waiting */
  bool running;
};

typedef struct rl_pool {
  char *name;
  int device;
  uint64_t limit, used;
} rl_pool;

struct nrd_rate_limiter {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  nrd_rate_limit_resource *given; /* command line; names lower-cased */
  size_t n_given;
  nrd_rl_client *clients;
  rl_pool *pools;
  size_t n_pools;
  uint64_t stage_seq;
};

static char *lower_dup(const char *s) {
  char *d = strdup(s);
  for (char *p = d; p && *p; p++)
    if (*p >= 'A' && *p <= 'Z') *p = (char)(*p - 'A' + 'a');
  return d;
}

TRITONSERVER_Error *nrd_rate_limiter_new(TRITONSERVER_RateLimitMode mode, const nrd_rate_limit_resource *res, size_t n,
                                         nrd_rate_limiter **out) {
  *out = NULL;
  if (mode == TRITONSERVER_RATE_LIMIT_OFF) return NULL;
  nrd_rate_limiter *rl = calloc(1, sizeof(*rl));
  if (rl && n) rl->given = calloc(n, sizeof(*rl->given));
  if (!rl || (n && !rl->given)) {
    if (rl) free(rl->given);
    free(rl);
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory creating the rate limiter");
  }
  for (size_t i = 0; i < n; i++) {
    rl->given[i] = res[i];
    if (!(rl->given[i].name = lower_dup(res[i].name))) {
      rl->n_given = i;
      nrd_rate_limiter_free(rl);
      return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory creating the rate limiter");
    }
  }
  rl->n_given = n;
  pthread_mutex_init(&rl->mu, NULL);
  pthread_cond_init(&rl->cv, NULL);
  *out = rl;
  return NULL;
}

static void client_free(nrd_rl_client *c) {
  for (size_t i = 0; i < c->n_needs; i++) free(c->needs[i].name);
  free(c->needs);
  free(c->model);
  free(c);
}

static void pools_free(nrd_rate_limiter *rl) {
  for (size_t i = 0; i < rl->n_pools; i++) free(rl->pools[i].name);
  free(rl->pools);
  rl->pools = NULL;
  rl->n_pools = 0;
}

void nrd_rate_limiter_free(nrd_rate_limiter *rl) {
  if (!rl) return;
  while (rl->clients) {
    nrd_rl_client *c = rl->clients;
    rl->clients = c->next;
    client_free(c);
  }
  pools_free(rl);
  for (size_t i = 0; i < rl->n_given; i++) free(rl->given[i].name);
  free(rl->given);
  pthread_mutex_destroy(&rl->mu);
  pthread_cond_destroy(&rl->cv);
  free(rl);
}

/* The limit the command line sets for a key (see the top), or -1 when
 * it named no resource at all. */
static int64_t given_limit(const nrd_rate_limiter *rl, const char *name, int device) {
  if (!rl->n_given) return -1;
  uint64_t best = 0;
  for (size_t i = 0; i < rl->n_given; i++) {
    const nrd_rate_limit_resource *g = &rl->given[i];
    if (strcmp(g->name, name)) continue;
    if (device == RL_GLOBAL || g->device == -1 || g->device == device)
      if (g->count > best) best = g->count;
  }
  return (int64_t)best;
}

static rl_pool *pool_of(nrd_rate_limiter *rl, const char *name, int device) {
  for (size_t i = 0; i < rl->n_pools; i++)
    if (rl->pools[i].device == device && !strcmp(rl->pools[i].name, name)) return &rl->pools[i];
  return NULL;
}

/* Rebuilds the pools from the clients (in use counts are kept). Lock held.
 * False on out-of-memory (the old pools stay). */
static bool rebuild_pools(nrd_rate_limiter *rl) {
  size_t cap = 0;
  for (nrd_rl_client *c = rl->clients; c; c = c->next) cap += c->n_needs;
  rl_pool *np = calloc(cap ? cap : 1, sizeof(*np));
  if (!np) return false;
  size_t n = 0;
  for (nrd_rl_client *c = rl->clients; c; c = c->next)
    for (size_t i = 0; i < c->n_needs; i++) {
      const rl_need *d = &c->needs[i];
      rl_pool *p = NULL;
      for (size_t k = 0; k < n && !p; k++)
        if (np[k].device == d->device && !strcmp(np[k].name, d->name)) p = &np[k];
      if (!p) {
        p = &np[n];
        if (!(p->name = strdup(d->name))) {
          for (size_t k = 0; k < n; k++) free(np[k].name);
          free(np);
          return false;
        }
        p->device = d->device;
        int64_t g = given_limit(rl, d->name, d->device);
        p->limit = g >= 0 ? (uint64_t)g : 0;
        const rl_pool *old = pool_of(rl, d->name, d->device);
        p->used = old ? old->used : 0;
        n++;
      }
      if (given_limit(rl, d->name, d->device) < 0 && d->count > p->limit) p->limit = d->count;
    }
  pools_free(rl);
  rl->pools = np;
  rl->n_pools = n;
  return true;
}

TRITONSERVER_Error *nrd_rate_limiter_register(nrd_rate_limiter *rl, const char *model, const json_t *cfg, int device,
                                              nrd_rl_client **out) {
  *out = NULL;
  const json_t *res = json_object_get(cfg, "resources");
  size_t n = json_array_size(res);
  nrd_rl_client *c = calloc(1, sizeof(*c));
  if (c) c->model = strdup(model);
  if (c && n) c->needs = calloc(n, sizeof(*c->needs));
  if (!c || !c->model || (n && !c->needs)) {
    if (c) client_free(c);
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory registering with the rate limiter");
  }
  json_int_t prio = json_integer_value(json_object_get(cfg, "priority"));
  c->priority = prio > 1 ? (uint64_t)prio : 1;
  TRITONSERVER_Error *err = NULL;
  for (size_t i = 0; i < n && !err; i++) {
    const json_t *r = json_array_get(res, i);
    const char *name = json_string_value(json_object_get(r, "name"));
    bool global = json_is_true(json_object_get(r, "global"));
    json_int_t count = json_integer_value(json_object_get(r, "count"));
    if (!name) continue;
    rl_need d = {lower_dup(name), global ? RL_GLOBAL : device, count > 0 ? (uint64_t)count : 0};
    if (!d.name) {
      err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory registering with the rate limiter");
      break;
    }
    /* A resource named again: the last count counts, as in Triton. */
    size_t k = 0;
    while (k < c->n_needs && (c->needs[k].device != d.device || strcmp(c->needs[k].name, d.name))) k++;
    for (size_t m = 0; m < c->n_needs && !err; m++)
      if (!strcmp(c->needs[m].name, d.name) && c->needs[m].device != d.device)
        err = nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                            "Resource \"%s\" is present as both global and device-specific resource in the model "
                            "configuration.",
                            name);
    if (err) {
      free(d.name);
    } else if (k < c->n_needs) {
      free(c->needs[k].name);
      c->needs[k] = d;
    } else {
      c->needs[c->n_needs++] = d;
    }
  }
  pthread_mutex_lock(&rl->mu);
  /* Global in one model and per device in another is refused too: Triton
   * checks its pools, which every loaded model's instances feed. */
  for (size_t i = 0; i < c->n_needs && !err; i++)
    for (const nrd_rl_client *o = rl->clients; o && !err; o = o->next)
      for (size_t k = 0; k < o->n_needs && !err; k++)
        if (!strcmp(o->needs[k].name, c->needs[i].name) &&
            (o->needs[k].device == RL_GLOBAL) != (c->needs[i].device == RL_GLOBAL))
          err = nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                              "Resource \"%s\" is present as both global and device-specific resource in the model "
                              "configuration. (model '%s'; model '%s' declares it %s)",
                              c->needs[i].name, model, o->model,
                              o->needs[k].device == RL_GLOBAL ? "global" : "per device");
  for (size_t i = 0; i < c->n_needs && !err; i++) {
    int64_t g = given_limit(rl, c->needs[i].name, c->needs[i].device);
    if (g >= 0 && (uint64_t)g < c->needs[i].count)
      err = nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                          "Resource count for \"%s\" is limited to %lld which will prevent scheduling of one or more "
                          "model instances, the minimum required count is %llu",
                          c->needs[i].name, (long long)g, (unsigned long long)c->needs[i].count);
  }
  if (!err) {
    c->next = rl->clients;
    rl->clients = c;
    if (!rebuild_pools(rl)) {
      rl->clients = c->next;
      err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory registering with the rate limiter");
    }
  }
  pthread_cond_broadcast(&rl->cv);
  pthread_mutex_unlock(&rl->mu);
  if (err) {
    client_free(c);
    return err;
  }
  *out = c;
  return NULL;
}

void nrd_rate_limiter_unregister(nrd_rate_limiter *rl, nrd_rl_client *c) {
  if (!rl || !c) return;
  pthread_mutex_lock(&rl->mu);
  for (nrd_rl_client **p = &rl->clients; *p; p = &(*p)->next)
    if (*p == c) {
      *p = c->next;
      break;
    }
  if (!rebuild_pools(rl)) NRD_LOG_WARN("rate limiter: out of memory rebuilding the resource pools");
  pthread_cond_broadcast(&rl->cv);
  pthread_mutex_unlock(&rl->mu);
  client_free(c);
}

/* The staged client whose turn it is. Lock held. */
static nrd_rl_client *next_turn(const nrd_rate_limiter *rl) {
  nrd_rl_client *best = NULL;
  for (nrd_rl_client *c = rl->clients; c; c = c->next) {
    if (!c->staged_at) continue;
    if (!best) {
      best = c;
      continue;
    }
    uint64_t s = c->runs * c->priority, b = best->runs * best->priority;
    if (s < b || (s == b && c->staged_at < best->staged_at)) best = c;
  }
  return best;
}

static bool fits(nrd_rate_limiter *rl, const nrd_rl_client *c) {
  for (size_t i = 0; i < c->n_needs; i++) {
    const rl_pool *p = pool_of(rl, c->needs[i].name, c->needs[i].device);
    if (!p || p->used + c->needs[i].count > p->limit) return false;
  }
  return true;
}

void nrd_rate_limiter_acquire(nrd_rate_limiter *rl, nrd_rl_client *c) {
  pthread_mutex_lock(&rl->mu);
  c->staged_at = ++rl->stage_seq;
  while (next_turn(rl) != c || !fits(rl, c)) pthread_cond_wait(&rl->cv, &rl->mu);
  for (size_t i = 0; i < c->n_needs; i++) pool_of(rl, c->needs[i].name, c->needs[i].device)->used += c->needs[i].count;
  c->staged_at = 0;
  c->running = true;
  pthread_cond_broadcast(&rl->cv); /* the next in turn may fit too */
  pthread_mutex_unlock(&rl->mu);
}

void nrd_rate_limiter_release(nrd_rate_limiter *rl, nrd_rl_client *c) {
  pthread_mutex_lock(&rl->mu);
  for (size_t i = 0; i < c->n_needs; i++) {
    rl_pool *p = pool_of(rl, c->needs[i].name, c->needs[i].device);
    if (p) p->used -= c->needs[i].count < p->used ? c->needs[i].count : p->used;
  }
  c->running = false;
  c->runs++;
  pthread_cond_broadcast(&rl->cv);
  pthread_mutex_unlock(&rl->mu);
}
