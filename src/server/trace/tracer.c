/* Request tracing (tracer.h).
 *
 * Settings: the global one (from the command line, changed by the trace
 * extension) and one per model that the extension set something for; a
 * model's unset fields follow the global ones, except its count and sample
 * counter, which are its own once it has a setting. One lock guards the
 * settings, the pending traces and the files; `active` lets sampling skip
 * the lock while no setting can trace.
 *
 * A handle collects one request's trace objects: a text stream per trace
 * id (the request's, and its ensemble steps'). It is finished when the
 * front end is done and every core trace it saw has been released (the
 * core releases an ensemble's step traces before the ensemble's own).
 *
 * In opentelemetry mode a stream keeps its trace's timestamps as events
 * instead of text, and the front end's marks are kept apart; the finished
 * handle becomes spans as Triton makes them: "InferRequest" (the front
 * end's marks), one span per model request named after the model (its
 * REQUEST_START, QUEUE_START, REQUEST_END...; an ensemble step's under the
 * ensemble's), and "compute" under it (the COMPUTE_* marks). Only
 * TIMESTAMPS are traced in this mode. */
#include "tracer.h"
#include "error_ignore.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "float16.h"
#include "otel_exporter.h"

typedef struct tracer tracer;
typedef struct handle handle;

typedef struct setting {
  bool has_level, has_rate, has_count, has_logf; /* set here (a model's); the global has all */
  unsigned level;
  int64_t rate, count, logf;
  uint64_t sampled; /* requests seen while it could trace */
} setting;

typedef struct model_setting {
  char *model;
  setting s;
} model_setting;

struct tracer {
  nrd_srv_tracer pub; /* first: what the front ends see */
  TRITONSERVER_Server *server;
  pthread_mutex_t mu;
  setting defaults; /* the command line's */
  setting global;
  model_setting *models;
  size_t n_models;
  char *file; /* "" when none */
  /* Finished traces not yet written: JSON objects joined by commas. */
  char *pending;
  size_t pending_len, pending_cap, pending_n;
  unsigned index; /* next indexed file */
  FILE *main; /* <file>, opened at its first write */
  unsigned outstanding; /* handles not yet finished */
  nrd_srv_otel *otel; /* opentelemetry mode; NULL: triton mode */
  int64_t unix_offset_ns; /* wall clock minus the monotonic clock, for span times */
};

/* One timestamp of a trace, in opentelemetry mode. */
typedef struct otel_event {
  uint64_t ns;
  char *name; /* owned */
} otel_event;

typedef struct otel_events {
  otel_event *v;
  size_t n, cap;
} otel_events;

typedef struct trace_stream {
  uint64_t id;
  char *text;
  size_t len, cap;
  bool released;
  /* opentelemetry mode: the trace's facts and timestamps */
  char *model, *request_id;
  int64_t version;
  uint64_t parent;
  otel_events evs;
} trace_stream;

struct handle {
  nrd_srv_trace pub; /* first: what the front ends see */
  tracer *tracer;
  pthread_mutex_t mu;
  int refs; /* the front end's, the request's trace, each step trace seen */
  TRITONSERVER_InferenceTrace *core;
  uint64_t root_id;
  int64_t log_frequency;
  unsigned level; /* front-end marks only with TIMESTAMPS, as Triton */
  bool count_exhausted; /* its sample took the last of the count */
  trace_stream *streams;
  size_t n_streams;
  /* opentelemetry mode */
  bool otel;
  otel_events marks; /* the front end's */
  char trace_id[33]; /* the client's (traceparent) or a new one */
  char parent_span[17]; /* the client's span, or "" */
};

/* ------------------------------------------------------------ text */

static bool grow(char **p, size_t *cap, size_t need) {
  if (need <= *cap) return true;
  size_t c = *cap ? *cap : 256;
  while (c < need) c *= 2;
  char *n = realloc(*p, c);
  if (!n) return false;
  *p = n;
  *cap = c;
  return true;
}

static void append(char **p, size_t *len, size_t *cap, const char *s, size_t n) {
  if (!grow(p, cap, *len + n + 1)) return; /* out of memory: the trace loses this part */
  memcpy(*p + *len, s, n);
  *len += n;
  (*p)[*len] = '\0';
}

static void appendf(trace_stream *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void appendf(trace_stream *st, const char *fmt, ...) {
  char small[512], *buf = small;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n >= sizeof small) { /* a long custom activity name: never cut JSON short */
    buf = malloc((size_t)n + 1);
    if (!buf) return;
    va_start(ap, fmt);
    vsnprintf(buf, (size_t)n + 1, fmt, ap);
    va_end(ap);
  }
  if (st->len) append(&st->text, &st->len, &st->cap, ",", 1);
  append(&st->text, &st->len, &st->cap, buf, (size_t)n);
  if (buf != small) free(buf);
}

/* A JSON string (quotes included) for a name or id a client chose. */
static char *json_quoted(const char *s) {
  json_t *j = json_string(s ? s : "");
  char *out = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
  json_decref(j);
  return out;
}

/* ------------------------------------------------------------ files */

static void write_indexed(tracer *t) {
  char path[4200];
  snprintf(path, sizeof path, "%s.%u", t->file, t->index++);
  FILE *f = fopen(path, "w");
  if (f) {
    fprintf(f, "[%s]", t->pending ? t->pending : "");
    fclose(f);
  } else {
    fprintf(stderr, "nereid: error: cannot write trace file %s\n", path);
  }
  t->pending_len = t->pending_n = 0;
  if (t->pending) t->pending[0] = '\0';
}

static void write_main(tracer *t) {
  if (!t->main) {
    t->main = fopen(t->file, "w");
    if (!t->main) {
      fprintf(stderr, "nereid: error: cannot write trace file %s\n", t->file);
      t->pending_len = t->pending_n = 0;
      return;
    }
    fputc('[', t->main);
  } else {
    fputc(',', t->main);
  }
  fputs(t->pending ? t->pending : "", t->main);
  fflush(t->main);
  t->pending_len = t->pending_n = 0;
}

/* Writes what is pending, as Triton does when a setting goes away: to an
 * indexed file with a log frequency, else on into the main file. Locked. */
static void flush_pending(tracer *t) {
  if (t->pending_n == 0) return;
  if (t->global.logf > 0)
    write_indexed(t);
  else
    write_main(t);
}

/* ------------------------------------------------------------ settings */

static model_setting *find_model(tracer *t, const char *model) {
  for (size_t i = 0; model && i < t->n_models; i++)
    if (!strcmp(t->models[i].model, model)) return &t->models[i];
  return NULL;
}

/* The setting a model's requests follow, fields resolved. Locked. */
static setting effective(const tracer *t, const model_setting *m) {
  if (!m) return t->global;
  setting s = t->global;
  if (m->s.has_level) s.level = m->s.level;
  if (m->s.has_rate) s.rate = m->s.rate;
  if (m->s.has_logf) s.logf = m->s.logf;
  s.count = m->s.count; /* a model setting keeps its own count */
  return s;
}

/* The levels a mode traces: opentelemetry spans carry timestamps only. */
static unsigned traced_levels(const tracer *t) {
  return t->otel ? TRITONSERVER_TRACE_LEVEL_TIMESTAMPS
                 : TRITONSERVER_TRACE_LEVEL_TIMESTAMPS | TRITONSERVER_TRACE_LEVEL_TENSORS;
}

static bool can_trace(const tracer *t, const setting *s) {
  return (s->level & traced_levels(t)) && s->rate > 0 && s->count != 0 && (t->otel || t->file[0]);
}

/* opentelemetry mode: a request that brings its client's context is
 * traced whenever the level allows, rate and count aside (as Triton). */
static bool can_trace_propagated(const tracer *t, const setting *s) {
  return t->otel && (s->level & TRITONSERVER_TRACE_LEVEL_TIMESTAMPS);
}

static void update_active(tracer *t) {
  bool any = can_trace(t, &t->global) || can_trace_propagated(t, &t->global);
  for (size_t i = 0; !any && i < t->n_models; i++) {
    setting s = effective(t, &t->models[i]);
    any = can_trace(t, &s) || can_trace_propagated(t, &s);
  }
  atomic_store(&t->pub.active, any);
}

static const nrd_srv_tracer_ops tracer_ops;

nrd_srv_tracer *nrd_srv_tracer_new(TRITONSERVER_Server *server, const nrd_srv_trace_config *cfg, char *err,
                                   size_t errlen) {
  tracer *t = calloc(1, sizeof(*t));
  if (t) t->file = strdup(cfg->file ? cfg->file : "");
  if (!t || !t->file) {
    free(t);
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  if (cfg->otel && !(t->otel = nrd_srv_otel_new(cfg->otel, err, errlen))) {
    free(t->file);
    free(t);
    return NULL;
  }
  struct timespec wall, mono;
  clock_gettime(CLOCK_REALTIME, &wall);
  clock_gettime(CLOCK_MONOTONIC, &mono);
  t->unix_offset_ns = ((int64_t)wall.tv_sec - (int64_t)mono.tv_sec) * 1000000000 + (wall.tv_nsec - mono.tv_nsec);
  t->server = server;
  pthread_mutex_init(&t->mu, NULL);
  t->defaults = (setting){true, true, true, true, cfg->level, cfg->rate, cfg->count, cfg->log_frequency, 0};
  t->global = t->defaults;
  t->pub.ops = &tracer_ops;
  update_active(t);
  return &t->pub;
}

void nrd_srv_tracer_free(nrd_srv_tracer *pub) {
  if (!pub) return;
  tracer *t = (tracer *)pub;
  flush_pending(t);
  if (t->main) {
    fputc(']', t->main);
    fclose(t->main);
  }
  for (size_t i = 0; i < t->n_models; i++) free(t->models[i].model);
  free(t->models);
  free(t->pending);
  free(t->file);
  nrd_srv_otel_free(t->otel); /* a last export of what it holds */
  pthread_mutex_destroy(&t->mu);
  free(t);
}

/* ------------------------------------------------------------ handles */

static trace_stream *stream_of(handle *h, uint64_t id, bool *added) {
  *added = false;
  for (size_t i = 0; i < h->n_streams; i++)
    if (h->streams[i].id == id) return &h->streams[i];
  trace_stream *n = realloc(h->streams, (h->n_streams + 1) * sizeof(*n));
  if (!n) return NULL;
  h->streams = n;
  h->streams[h->n_streams] = (trace_stream){.id = id};
  *added = true;
  return &h->streams[h->n_streams++];
}

static void events_add(otel_events *e, uint64_t ns, const char *name) {
  if (e->n == e->cap) {
    size_t cap = e->cap ? 2 * e->cap : 8;
    otel_event *v = realloc(e->v, cap * sizeof(*v));
    if (!v) return; /* out of memory: the span loses this event */
    e->v = v;
    e->cap = cap;
  }
  char *copy = strdup(name);
  if (copy) e->v[e->n++] = (otel_event){ns, copy};
}

static void events_free(otel_events *e) {
  for (size_t i = 0; i < e->n; i++) free(e->v[i].name);
  free(e->v);
}

static json_t *kv_string(const char *key, const char *value) {
  return json_pack("{s:s,s:{s:s}}", "key", key, "value", "stringValue", value ? value : "");
}

static json_t *kv_int(const char *key, int64_t value) {
  char num[24];
  snprintf(num, sizeof num, "%" PRId64, value); /* OTLP JSON writes 64-bit integers as strings */
  return json_pack("{s:s,s:{s:s}}", "key", key, "value", "intValue", num);
}

static json_t *unix_ns(const tracer *t, uint64_t mono_ns) {
  char num[24];
  snprintf(num, sizeof num, "%" PRIu64, (uint64_t)((int64_t)mono_ns + t->unix_offset_ns));
  return json_string(num);
}

static void cover(const otel_events *e, uint64_t *lo, uint64_t *hi) {
  for (size_t i = 0; e && i < e->n; i++) {
    if (e->v[i].ns < *lo) *lo = e->v[i].ns;
    if (e->v[i].ns > *hi) *hi = e->v[i].ns;
  }
}

/* A span with the events of `e` that `pick` says are its own (all when
 * pick is NULL). Its times span them and [lo, hi] (its children's: a
 * backend may report its compute end after releasing the request; lo >
 * hi: nothing more). kind: 1 internal, 2 server. */
static json_t *make_span(const tracer *t, const char *trace_id, const char *span_id, const char *parent,
                         const char *name, int kind, const otel_events *e, bool (*pick)(const char *), uint64_t lo,
                         uint64_t hi) {
  json_t *events = json_array();
  for (size_t i = 0; e && i < e->n; i++) {
    if (pick && !pick(e->v[i].name)) continue;
    json_array_append_new(events, json_pack("{s:o,s:s}", "timeUnixNano", unix_ns(t, e->v[i].ns), "name", e->v[i].name));
    if (e->v[i].ns < lo) lo = e->v[i].ns;
    if (e->v[i].ns > hi) hi = e->v[i].ns;
  }
  if (lo > hi) lo = hi = nrd_srv_trace_now_ns();
  json_t *span = json_pack("{s:s,s:s,s:s,s:i,s:o,s:o,s:o,s:[]}", "traceId", trace_id, "spanId", span_id, "name", name,
                           "kind", kind, "startTimeUnixNano", unix_ns(t, lo), "endTimeUnixNano", unix_ns(t, hi),
                           "events", events, "attributes");
  if (span && parent && parent[0]) json_object_set_new(span, "parentSpanId", json_string(parent));
  return span;
}

static bool is_compute(const char *name) { return !strncmp(name, "COMPUTE_", 8); }
static bool not_compute(const char *name) { return !is_compute(name); }

/* opentelemetry mode: the handle's spans to the exporter. */
static void export_spans(handle *h) {
  tracer *t = h->tracer;
  char root[17];
  nrd_srv_otel_random_id(root, 8);
  /* The root covers everything below it. */
  uint64_t lo = UINT64_MAX, hi = 0;
  for (size_t k = 0; k < h->n_streams; k++) cover(&h->streams[k].evs, &lo, &hi);
  nrd_srv_otel_add(t->otel,
                   make_span(t, h->trace_id, root, h->parent_span, "InferRequest", 2, &h->marks, NULL, lo, hi));
  json_t *span;
  char(*ids)[17] = calloc(h->n_streams ? h->n_streams : 1, sizeof *ids);
  if (!ids) return;
  for (size_t k = 0; k < h->n_streams; k++) nrd_srv_otel_random_id(ids[k], 8);
  for (size_t k = 0; k < h->n_streams; k++) {
    const trace_stream *st = &h->streams[k];
    if (!st->evs.n) continue;
    const char *parent = root;
    for (size_t j = 0; st->parent && j < h->n_streams; j++)
      if (h->streams[j].id == st->parent) parent = ids[j];
    /* It covers its compute marks and an ensemble's steps. */
    lo = UINT64_MAX, hi = 0;
    cover(&st->evs, &lo, &hi);
    for (size_t j = 0; j < h->n_streams; j++)
      if (h->streams[j].parent == st->id) cover(&h->streams[j].evs, &lo, &hi);
    span = make_span(t, h->trace_id, ids[k], parent, st->model ? st->model : "", 1, &st->evs, not_compute, lo, hi);
    json_t *attrs = json_object_get(span, "attributes");
    json_array_append_new(attrs, kv_string("triton.model_name", st->model));
    json_array_append_new(attrs, kv_int("triton.model_version", st->version));
    json_array_append_new(attrs, kv_int("triton.trace_id", (int64_t)st->id));
    json_array_append_new(attrs, kv_int("triton.trace_parent_id", (int64_t)st->parent));
    json_array_append_new(attrs, kv_string("triton.request_id", st->request_id));
    nrd_srv_otel_add(t->otel, span);
    bool computed = false;
    for (size_t i = 0; i < st->evs.n && !computed; i++) computed = is_compute(st->evs.v[i].name);
    if (!computed) continue;
    char cid[17];
    nrd_srv_otel_random_id(cid, 8);
    nrd_srv_otel_add(t->otel,
                     make_span(t, h->trace_id, cid, ids[k], "compute", 1, &st->evs, is_compute, UINT64_MAX, 0));
  }
  free(ids);
}

/* Joins the streams (the request's first, then its steps' by id) and hands
 * the result to the tracer's pending traces, or its spans to the exporter;
 * frees the handle. */
static void finish(handle *h) {
  tracer *t = h->tracer;
  if (h->otel) {
    export_spans(h);
    pthread_mutex_lock(&t->mu);
    t->outstanding--;
    pthread_mutex_unlock(&t->mu);
    for (size_t i = 0; i < h->n_streams; i++) {
      free(h->streams[i].model);
      free(h->streams[i].request_id);
      events_free(&h->streams[i].evs);
    }
    events_free(&h->marks);
    free(h->streams);
    pthread_mutex_destroy(&h->mu);
    free(h);
    return;
  }
  for (size_t i = 1; i < h->n_streams; i++) /* ids grow with creation: a few, insertion sort */
    for (size_t k = i; k > 1 && h->streams[k].id < h->streams[k - 1].id; k--) {
      trace_stream tmp = h->streams[k];
      h->streams[k] = h->streams[k - 1];
      h->streams[k - 1] = tmp;
    }
  pthread_mutex_lock(&t->mu);
  for (size_t i = 0; i < h->n_streams; i++) {
    if (!h->streams[i].len) continue;
    if (t->pending_len) append(&t->pending, &t->pending_len, &t->pending_cap, ",", 1);
    append(&t->pending, &t->pending_len, &t->pending_cap, h->streams[i].text, h->streams[i].len);
  }
  t->pending_n++;
  t->outstanding--;
  if (h->log_frequency > 0 && t->pending_n >= (uint64_t)h->log_frequency)
    write_indexed(t);
  else if (h->count_exhausted && t->outstanding == 0)
    write_indexed(t); /* the last of the count */
  pthread_mutex_unlock(&t->mu);
  for (size_t i = 0; i < h->n_streams; i++) free(h->streams[i].text);
  free(h->streams);
  pthread_mutex_destroy(&h->mu);
  free(h);
}

static void unref(handle *h, int n) {
  pthread_mutex_lock(&h->mu);
  h->refs -= n;
  bool last = h->refs == 0;
  pthread_mutex_unlock(&h->mu);
  if (last) finish(h);
}

/* The name of a CUSTOM_ACTIVITY: the context maps its timestamp to it. */
static char *custom_name(TRITONSERVER_InferenceTrace *trace, uint64_t ns) {
  const char *ctx = NULL;
  NRD_SRV_IGNORE(TRITONSERVER_InferenceTraceContext(trace, &ctx), "a trace without a context");
  json_t *j = ctx ? json_loads(ctx, 0, NULL) : NULL;
  char key[24];
  snprintf(key, sizeof key, "%" PRIu64, ns);
  const char *name = json_string_value(json_object_get(j, key));
  char *out = json_quoted(name ? name : "CUSTOM_ACTIVITY");
  json_decref(j);
  return out;
}

/* opentelemetry mode: keeps the timestamp as an event of its trace. */
static void otel_activity(handle *h, TRITONSERVER_InferenceTrace *trace, TRITONSERVER_InferenceTraceActivity activity,
                          uint64_t id, uint64_t ns) {
  const char *model = "", *rid = "";
  int64_t version = 0;
  uint64_t parent = 0;
  if (activity == TRITONSERVER_TRACE_REQUEST_START) {
    NRD_SRV_IGNORE(TRITONSERVER_InferenceTraceModelName(trace, &model), "a trace without its model name");
    NRD_SRV_IGNORE(TRITONSERVER_InferenceTraceModelVersion(trace, &version), "a trace without its model version");
    NRD_SRV_IGNORE(TRITONSERVER_InferenceTraceRequestId(trace, &rid), "a trace without its request id");
    NRD_SRV_IGNORE(TRITONSERVER_InferenceTraceParentId(trace, &parent), "a trace without its parent id");
  }
  char *custom = NULL;
  if (activity == TRITONSERVER_TRACE_CUSTOM_ACTIVITY) {
    char *quoted = custom_name(trace, ns);
    json_t *j = quoted ? json_loads(quoted, JSON_DECODE_ANY, NULL) : NULL;
    custom = strdup(json_string_value(j) ? json_string_value(j) : "CUSTOM_ACTIVITY");
    json_decref(j);
    free(quoted);
  }
  pthread_mutex_lock(&h->mu);
  bool added = false;
  trace_stream *st = stream_of(h, id, &added);
  if (added && id != h->root_id) h->refs++; /* a step's trace: wait for its release too */
  if (st && activity == TRITONSERVER_TRACE_REQUEST_START && !st->model) {
    st->model = strdup(model ? model : "");
    st->request_id = strdup(rid ? rid : "");
    st->version = version;
    st->parent = parent;
  }
  if (st) events_add(&st->evs, ns, custom ? custom : TRITONSERVER_InferenceTraceActivityString(activity));
  pthread_mutex_unlock(&h->mu);
  free(custom);
}

static void on_activity(TRITONSERVER_InferenceTrace *trace, TRITONSERVER_InferenceTraceActivity activity, uint64_t ns,
                        void *userp) {
  handle *h = userp;
  uint64_t id = 0, parent = 0;
  NRD_SRV_IGNORE(TRITONSERVER_InferenceTraceId(trace, &id), "a trace without its id");
  if (h->otel) {
    otel_activity(h, trace, activity, id, ns);
    return;
  }
  char *info = NULL, *custom = NULL;
  if (activity == TRITONSERVER_TRACE_REQUEST_START) {
    const char *model = "", *rid = "";
    int64_t version = 0;
    NRD_SRV_IGNORE(TRITONSERVER_InferenceTraceModelName(trace, &model), "a trace without its model name");
    NRD_SRV_IGNORE(TRITONSERVER_InferenceTraceModelVersion(trace, &version), "a trace without its model version");
    NRD_SRV_IGNORE(TRITONSERVER_InferenceTraceRequestId(trace, &rid), "a trace without its request id");
    NRD_SRV_IGNORE(TRITONSERVER_InferenceTraceParentId(trace, &parent), "a trace without its parent id");
    char *qm = json_quoted(model), *qr = rid && rid[0] ? json_quoted(rid) : NULL;
    size_t n = (qm ? strlen(qm) : 2) + (qr ? strlen(qr) : 0) + 160; /* the fixed text and three numbers fit */
    info = malloc(n);
    if (info) {
      int k = snprintf(info, n, "{\"id\":%" PRIu64 ",\"model_name\":%s,\"model_version\":%" PRId64, id,
                       qm ? qm : "\"\"", version);
      if (qr) k += snprintf(info + k, n - (size_t)k, ",\"request_id\":%s", qr);
      if (parent) k += snprintf(info + k, n - (size_t)k, ",\"parent_id\":%" PRIu64, parent);
      snprintf(info + k, n - (size_t)k, "}");
    }
    free(qm);
    free(qr);
  }
  if (activity == TRITONSERVER_TRACE_CUSTOM_ACTIVITY) custom = custom_name(trace, ns);
  pthread_mutex_lock(&h->mu);
  bool added = false;
  trace_stream *st = stream_of(h, id, &added);
  if (added && id != h->root_id) h->refs++; /* a step's trace: wait for its release too */
  if (st && info) {
    if (st->len) append(&st->text, &st->len, &st->cap, ",", 1);
    append(&st->text, &st->len, &st->cap, info, strlen(info));
  }
  if (st) {
    if (custom)
      appendf(st, "{\"id\":%" PRIu64 ",\"timestamps\":[{\"name\":%s,\"ns\":%" PRIu64 "}]}", id, custom, ns);
    else
      appendf(st, "{\"id\":%" PRIu64 ",\"timestamps\":[{\"name\":\"%s\",\"ns\":%" PRIu64 "}]}", id,
              TRITONSERVER_InferenceTraceActivityString(activity), ns);
  }
  pthread_mutex_unlock(&h->mu);
  free(info);
  free(custom);
}

/* A tensor's elements as Triton's trace writes them, comma separated:
 * numbers (BOOL as 0/1; FP16 and BF16 as their float values, which
 * Triton leaves out) and BYTES elements each in double quotes, bytes
 * outside printable ASCII and the backslash as \xNN (Triton writes them
 * raw). Appended raw: the caller quotes the whole for JSON. */
static void element_text(char **p, size_t *len, size_t *cap, TRITONSERVER_DataType dt, const unsigned char *b,
                         size_t byte_size, uint64_t count) {
  char num[64];
  size_t at = 0;
  for (uint64_t e = 0; e < count; e++) {
    int n = 0;
    if (dt == TRITONSERVER_TYPE_BYTES) {
      uint32_t l;
      if (at + 4 > byte_size) return;
      memcpy(&l, b + at, 4);
      at += 4;
      if (l > byte_size - at) return;
      if (e) append(p, len, cap, ",", 1);
      append(p, len, cap, "\"", 1);
      for (uint32_t i = 0; i < l; i++) {
        unsigned char ch = b[at + i];
        if (ch >= 0x20 && ch < 0x7f && ch != '\\') {
          append(p, len, cap, (const char *)&ch, 1);
        } else { /* binary data (or a backslash): keeps the file valid JSON and the text unambiguous */
          char esc[5];
          snprintf(esc, sizeof esc, "\\x%02x", ch);
          append(p, len, cap, esc, 4);
        }
      }
      append(p, len, cap, "\"", 1);
      at += l;
      continue;
    }
    size_t w = TRITONSERVER_DataTypeByteSize(dt);
    if (w == 0 || at + w > byte_size) return;
    const unsigned char *x = b + at;
    at += w;
    union {
      int8_t i8;
      int16_t i16;
      int32_t i32;
      int64_t i64;
      uint8_t u8;
      uint16_t u16;
      uint32_t u32;
      uint64_t u64;
      float f;
      double d;
    } v;
    memcpy(&v, x, w);
    switch (dt) {
      case TRITONSERVER_TYPE_BOOL: n = snprintf(num, sizeof num, "%d", v.u8 != 0); break;
      case TRITONSERVER_TYPE_UINT8: n = snprintf(num, sizeof num, "%u", (unsigned)v.u8); break;
      case TRITONSERVER_TYPE_UINT16: n = snprintf(num, sizeof num, "%u", (unsigned)v.u16); break;
      case TRITONSERVER_TYPE_UINT32: n = snprintf(num, sizeof num, "%" PRIu32, v.u32); break;
      case TRITONSERVER_TYPE_UINT64: n = snprintf(num, sizeof num, "%" PRIu64, v.u64); break;
      case TRITONSERVER_TYPE_INT8: n = snprintf(num, sizeof num, "%d", (int)v.i8); break;
      case TRITONSERVER_TYPE_INT16: n = snprintf(num, sizeof num, "%d", (int)v.i16); break;
      case TRITONSERVER_TYPE_INT32: n = snprintf(num, sizeof num, "%" PRId32, v.i32); break;
      case TRITONSERVER_TYPE_INT64: n = snprintf(num, sizeof num, "%" PRId64, v.i64); break;
      case TRITONSERVER_TYPE_FP16: n = snprintf(num, sizeof num, "%g", (double)nrd_srv_half_to_float(v.u16)); break;
      case TRITONSERVER_TYPE_BF16: n = snprintf(num, sizeof num, "%g", (double)nrd_srv_bf16_to_float(v.u16)); break;
      case TRITONSERVER_TYPE_FP32: n = snprintf(num, sizeof num, "%g", (double)v.f); break;
      case TRITONSERVER_TYPE_FP64: n = snprintf(num, sizeof num, "%g", v.d); break;
      default: return;
    }
    if (e) append(p, len, cap, ",", 1);
    append(p, len, cap, num, (size_t)n);
  }
}

static void on_tensor(TRITONSERVER_InferenceTrace *trace, TRITONSERVER_InferenceTraceActivity activity,
                      const char *name, TRITONSERVER_DataType dt, const void *base, size_t byte_size,
                      const int64_t *shape, uint64_t dims, TRITONSERVER_MemoryType mtype, int64_t mtype_id,
                      void *userp) {
  (void)mtype_id;
  handle *h = userp;
  uint64_t id = 0;
  NRD_SRV_IGNORE(TRITONSERVER_InferenceTraceId(trace, &id), "a trace without its id");
  uint64_t count = 1;
  char *sh = NULL;
  size_t sh_len = 0, sh_cap = 0;
  append(&sh, &sh_len, &sh_cap, "", 0);
  for (uint64_t i = 0; i < dims; i++) {
    char num[24];
    int n = snprintf(num, sizeof num, "%s%" PRId64, i ? "," : "", shape[i]);
    append(&sh, &sh_len, &sh_cap, num, (size_t)n);
    count *= shape[i] > 0 ? (uint64_t)shape[i] : 0;
  }
  char *data = NULL;
  size_t data_len = 0, data_cap = 0;
  append(&data, &data_len, &data_cap, "", 0);
  if (base && mtype != TRITONSERVER_MEMORY_GPU) /* GPU data would need a copy; there is no GPU here */
    element_text(&data, &data_len, &data_cap, dt, base, byte_size, count);
  char *qname = json_quoted(name), *qdata = json_quoted(data ? data : "");
  pthread_mutex_lock(&h->mu);
  bool added = false;
  trace_stream *st = stream_of(h, id, &added);
  if (added && id != h->root_id) h->refs++; /* a step's trace: wait for its release too */
  if (st && qname && qdata && sh)
    appendf(st,
            "{\"id\":%" PRIu64 ",\"activity\":\"%s\",\"tensor\":{\"name\":%s,\"data\":%s,\"shape\":\"%s\","
            "\"dtype\":\"%s\"}}",
            id, TRITONSERVER_InferenceTraceActivityString(activity), qname, qdata, sh, TRITONSERVER_DataTypeString(dt));
  pthread_mutex_unlock(&h->mu);
  free(qname);
  free(qdata);
  free(sh);
  free(data);
}

static void on_release(TRITONSERVER_InferenceTrace *trace, void *userp) {
  handle *h = userp;
  uint64_t id = 0;
  NRD_SRV_IGNORE(TRITONSERVER_InferenceTraceId(trace, &id), "a trace without its id");
  pthread_mutex_lock(&h->mu);
  int drop = 0;
  if (id == h->root_id) {
    drop = 1;
  } else {
    for (size_t i = 0; i < h->n_streams; i++)
      if (h->streams[i].id == id && !h->streams[i].released) {
        h->streams[i].released = true;
        drop = 1;
      }
  }
  pthread_mutex_unlock(&h->mu);
  NRD_SRV_IGNORE(TRITONSERVER_InferenceTraceDelete(trace), "deleting a trace");
  if (drop) unref(h, drop);
}

/* A W3C traceparent: "00-<32 hex trace id>-<16 hex span id>-<2 hex flags>",
 * ids not all zero. Fills the ids (lowercase) when it is one. */
static bool parse_traceparent(const char *v, char trace_id[33], char span_id[17]) {
  if (!v || strlen(v) < 55 || (v[55] != '\0' && v[55] != '-')) return false;
  if (v[2] != '-' || v[35] != '-' || v[52] != '-' || !strncmp(v, "ff", 2)) return false;
  static const struct { int at, len; } parts[] = {{0, 2}, {3, 32}, {36, 16}, {53, 2}};
  for (size_t p = 0; p < 4; p++)
    for (int i = 0; i < parts[p].len; i++) {
      char c = v[parts[p].at + i];
      if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) return false;
    }
  bool tz = true, sz = true;
  for (int i = 0; i < 32; i++) {
    char c = v[3 + i];
    trace_id[i] = (char)(c >= 'A' && c <= 'F' ? c - 'A' + 'a' : c);
    tz = tz && c == '0';
  }
  for (int i = 0; i < 16; i++) {
    char c = v[36 + i];
    span_id[i] = (char)(c >= 'A' && c <= 'F' ? c - 'A' + 'a' : c);
    sz = sz && c == '0';
  }
  trace_id[32] = span_id[16] = '\0';
  return !tz && !sz;
}

static const nrd_srv_trace_ops handle_ops;

static nrd_srv_trace *tracer_sample(nrd_srv_tracer *pub, const char *model, const char *traceparent) {
  tracer *t = (tracer *)pub;
  if (!atomic_load_explicit(&t->pub.active, memory_order_relaxed)) return NULL;
  char trace_id[33] = "", parent_span[17] = "";
  bool propagated = t->otel && parse_traceparent(traceparent, trace_id, parent_span);
  pthread_mutex_lock(&t->mu);
  model_setting *m = find_model(t, model);
  setting s = effective(t, m);
  setting *own = m ? &m->s : &t->global;
  bool take = propagated ? can_trace_propagated(t, &s) : can_trace(t, &s) && ++own->sampled % (uint64_t)s.rate == 0;
  bool exhausted = false;
  if (take && !propagated && s.count > 0) {
    own->count = s.count - 1;
    exhausted = own->count == 0;
    if (exhausted) update_active(t);
  }
  if (take) t->outstanding++;
  pthread_mutex_unlock(&t->mu);
  if (!take) return NULL;
  handle *h = calloc(1, sizeof(*h));
  TRITONSERVER_InferenceTrace *core = NULL;
  unsigned level = s.level & traced_levels(t);
  TRITONSERVER_Error *e = h ? TRITONSERVER_InferenceTraceTensorNew(&core, (TRITONSERVER_InferenceTraceLevel)level, 0,
                                                                   on_activity, on_tensor, on_release, h)
                            : NULL;
  if (!h || e) {
    NRD_SRV_IGNORE(e, "the core cannot trace the request: it goes untraced");
    free(h);
    pthread_mutex_lock(&t->mu);
    t->outstanding--;
    pthread_mutex_unlock(&t->mu);
    return NULL;
  }
  pthread_mutex_init(&h->mu, NULL);
  h->pub.ops = &handle_ops;
  h->tracer = t;
  h->refs = 2; /* the front end and the request's trace */
  h->core = core;
  NRD_SRV_IGNORE(TRITONSERVER_InferenceTraceId(core, &h->root_id), "a trace without its id");
  h->log_frequency = s.logf;
  h->level = level;
  h->count_exhausted = exhausted;
  if (t->otel) {
    h->otel = true;
    if (propagated) {
      memcpy(h->trace_id, trace_id, sizeof trace_id);
      memcpy(h->parent_span, parent_span, sizeof parent_span);
    } else {
      nrd_srv_otel_random_id(h->trace_id, 16);
    }
  }
  bool added;
  stream_of(h, h->root_id, &added);
  return &h->pub;
}

static TRITONSERVER_InferenceTrace *handle_core(nrd_srv_trace *pub) {
  handle *h = (handle *)pub;
  TRITONSERVER_InferenceTrace *c = h->core;
  h->core = NULL;
  return c;
}

static void handle_mark(nrd_srv_trace *pub, const char *name, uint64_t ns) {
  handle *h = (handle *)pub;
  if (!(h->level & TRITONSERVER_TRACE_LEVEL_TIMESTAMPS)) return;
  if (!ns) ns = nrd_srv_trace_now_ns();
  pthread_mutex_lock(&h->mu);
  if (h->otel) {
    events_add(&h->marks, ns, name);
    pthread_mutex_unlock(&h->mu);
    return;
  }
  bool added;
  trace_stream *st = stream_of(h, h->root_id, &added);
  if (st)
    appendf(st, "{\"id\":%" PRIu64 ",\"timestamps\":[{\"name\":\"%s\",\"ns\":%" PRIu64 "}]}", h->root_id, name, ns);
  pthread_mutex_unlock(&h->mu);
}

static void handle_done(nrd_srv_trace *pub) {
  handle *h = (handle *)pub;
  if (h->core) {
    /* Never handed to the core: it will not come back; drop it here. */
    NRD_SRV_IGNORE(TRITONSERVER_InferenceTraceDelete(h->core), "deleting a trace");
    h->core = NULL;
    unref(h, 2);
    return;
  }
  unref(h, 1);
}

/* ------------------------------------------------------------ the extension */

static json_t *setting_json(const tracer *t, const setting *s) {
  json_t *levels = json_array();
  if (s->level & TRITONSERVER_TRACE_LEVEL_TIMESTAMPS) json_array_append_new(levels, json_string("TIMESTAMPS"));
  if (s->level & TRITONSERVER_TRACE_LEVEL_TENSORS) json_array_append_new(levels, json_string("TENSORS"));
  if (!json_array_size(levels)) json_array_append_new(levels, json_string("OFF"));
  char rate[24], count[24], logf[24];
  snprintf(rate, sizeof rate, "%" PRId64, s->rate);
  snprintf(count, sizeof count, "%" PRId64, s->count);
  snprintf(logf, sizeof logf, "%" PRId64, s->logf);
  return json_pack("{s:o,s:s,s:s,s:s,s:s,s:s}", "trace_level", levels, "trace_rate", rate, "trace_count", count,
                   "log_frequency", logf, "trace_file", t->file, "trace_mode", t->otel ? "opentelemetry" : "triton");
}

static TRITONSERVER_Error *check_model(tracer *t, const char *model) {
  bool ready = false;
  NRD_SRV_IGNORE(TRITONSERVER_ServerModelIsReady(t->server, model, -1, &ready),
                 "model readiness unknown: counted as not ready");
  if (ready) return NULL;
  char msg[512];
  snprintf(msg, sizeof msg, "Request for unknown model : %s", model);
  return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, msg);
}

static TRITONSERVER_Error *tracer_get(nrd_srv_tracer *pub, const char *model, json_t **out) {
  tracer *t = (tracer *)pub;
  bool global = !model || !model[0];
  if (!global) {
    TRITONSERVER_Error *e = check_model(t, model);
    if (e) return e;
  }
  pthread_mutex_lock(&t->mu);
  setting s = effective(t, global ? NULL : find_model(t, model));
  *out = setting_json(t, &s);
  pthread_mutex_unlock(&t->mu);
  return *out ? NULL : TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory");
}

static TRITONSERVER_Error *parse_err(const char *fmt, const char *key, const char *got) {
  char msg[512];
  snprintf(msg, sizeof msg, fmt, key, got);
  return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, msg);
}

/* One numeric setting: a JSON string (or null: unset). */
static TRITONSERVER_Error *parse_number(const json_t *body, const char *key, int64_t lo, int64_t hi, bool *given,
                                        bool *clear, int64_t *v) {
  const json_t *j = json_object_get(body, key);
  *given = j != NULL;
  *clear = json_is_null(j);
  if (!j || *clear) return NULL;
  if (!json_is_string(j)) return parse_err("Unable to parse '%s': expected a string such as \"1000\"%s", key, "");
  const char *s = json_string_value(j);
  char *end = NULL;
  long long x = strtoll(s, &end, 10);
  if (!s[0] || *end) return parse_err("Unable to parse '%s', got: %s", key, s);
  if (!strcmp(key, "trace_count") && x < -1)
    return parse_err("Unable to parse '%s'. Expecting value >= -1, got:%s", key, s);
  if (x < lo || x > hi) {
    char msg[512];
    snprintf(msg, sizeof msg, "Unable to parse '%s', value is out of range [ %" PRId64 ", %" PRId64 " ], got: %s", key,
             lo, hi, s);
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, msg);
  }
  *v = x;
  return NULL;
}

static TRITONSERVER_Error *tracer_update(nrd_srv_tracer *pub, const char *model, const json_t *body, json_t **out) {
  tracer *t = (tracer *)pub;
  bool global = !model || !model[0];
  if (!global) {
    TRITONSERVER_Error *e = check_model(t, model);
    if (e) return e;
  }
  if (!json_is_object(body))
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "trace settings must be a JSON object");
  if (json_object_get(body, "trace_file"))
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNSUPPORTED,
                                 "trace file location can not be updated through network protocol");
  /* Parse everything first. */
  const json_t *lv = json_object_get(body, "trace_level");
  bool lv_given = lv != NULL, lv_clear = json_is_null(lv);
  unsigned level = 0;
  if (lv_given && !lv_clear) {
    if (!json_is_array(lv))
      return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "trace_level must be an array of strings");
    size_t i;
    const json_t *v;
    bool off = false, known = false;
    json_array_foreach(lv, i, v) {
      const char *s = json_string_value(v);
      if (!s) return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "trace_level must be an array of strings");
      /* A level Triton does not know is passed over, as Triton does. */
      if (!strcmp(s, "OFF"))
        off = known = true;
      else if (!strcmp(s, "TIMESTAMPS"))
        level |= TRITONSERVER_TRACE_LEVEL_TIMESTAMPS, known = true;
      else if (!strcmp(s, "TENSORS"))
        level |= TRITONSERVER_TRACE_LEVEL_TENSORS, known = true;
    }
    if (off && json_array_size(lv) > 1)
      return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "Expect only one trace level 'OFF' is specified");
    if (!known) lv_given = false; /* an empty list, or none known: no change */
  }
  bool rg, rc, cg, cc, fg, fc;
  int64_t rate = 0, count = 0, logf = 0;
  TRITONSERVER_Error *e = parse_number(body, "trace_rate", 0, UINT32_MAX, &rg, &rc, &rate);
  if (!e) e = parse_number(body, "trace_count", -1, INT32_MAX, &cg, &cc, &count);
  if (!e) e = parse_number(body, "log_frequency", 0, UINT32_MAX, &fg, &fc, &logf);
  if (e) return e;

  pthread_mutex_lock(&t->mu);
  model_setting *m = global ? NULL : find_model(t, model);
  setting next = global ? t->global : m ? m->s : (setting){0};
  if (!global && !m) next.count = t->global.count;
  const setting *dflt = global ? &t->defaults : &t->global;
  if (lv_given) {
    next.has_level = global || !lv_clear;
    next.level = lv_clear ? dflt->level : level;
  }
  if (rg) {
    next.has_rate = global || !rc;
    next.rate = rc ? dflt->rate : rate;
  }
  if (cg) {
    next.has_count = global || !cc;
    next.count = cc ? dflt->count : count;
  }
  if (fg) {
    next.has_logf = global || !fc;
    next.logf = fc ? dflt->logf : logf;
  }
  next.sampled = 0; /* a new setting counts afresh, as Triton's does */
  /* Check what the requests would follow. */
  setting eff = next;
  if (!global) {
    eff = t->global;
    if (next.has_level) eff.level = next.level;
    if (next.has_rate) eff.rate = next.rate;
    if (next.has_logf) eff.logf = next.logf;
    eff.count = next.count;
  }
  const char *why = NULL;
  if (eff.level & (TRITONSERVER_TRACE_LEVEL_TIMESTAMPS | TRITONSERVER_TRACE_LEVEL_TENSORS)) {
    /* opentelemetry mode: rate 0 traces only requests that bring a context */
    if (eff.rate == 0 && !t->otel)
      why = "sample rate must be non-zero";
    else if (!t->file[0] && !t->otel)
      why = "trace file name is not given";
    else if (eff.count == 0)
      why = "trace count must not be 0";
  }
  if (why) {
    pthread_mutex_unlock(&t->mu);
    char msg[256];
    snprintf(msg, sizeof msg, "Attempting to set invalid trace setting :%s", why);
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, msg);
  }
  flush_pending(t); /* as Triton's replaced setting writes what it held */
  bool oom = false;
  if (global) {
    t->global = next;
  } else if (!next.has_level && !next.has_rate && !next.has_count && !next.has_logf) {
    if (m) { /* nothing of its own left: the model follows the global setting */
      free(m->model);
      *m = t->models[--t->n_models];
    }
  } else if (m) {
    m->s = next;
  } else {
    model_setting *grown = realloc(t->models, (t->n_models + 1) * sizeof(*grown));
    char *name = grown ? strdup(model) : NULL;
    if (grown) t->models = grown;
    if (name)
      t->models[t->n_models++] = (model_setting){name, next};
    else
      oom = true;
  }
  update_active(t);
  setting now = effective(t, global ? NULL : find_model(t, model));
  *out = oom ? NULL : setting_json(t, &now);
  pthread_mutex_unlock(&t->mu);
  return *out ? NULL : TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory");
}

static const nrd_srv_tracer_ops tracer_ops = {
    .sample = tracer_sample,
    .get = tracer_get,
    .update = tracer_update,
};

static const nrd_srv_trace_ops handle_ops = {
    .core = handle_core,
    .mark = handle_mark,
    .done = handle_done,
};
