/* Per-model statistics: accumulation and rendering (JSON, Prometheus). */
#include "stats.h"

#include "buffer_attributes.h"
#include "error.h"
#include "summary.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t nrd_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Later minus earlier, 0 when the backend gave them out of order. */
static uint64_t span(uint64_t from, uint64_t to) { return to > from ? to - from : 0; }

static void add(nrd_duration *d, uint64_t ns) {
  d->count++;
  d->ns += ns;
}

/* Indexes into nrd_stats_summary_families. */
enum { SUM_REQUEST, SUM_QUEUE, SUM_INPUT, SUM_INFER, SUM_OUTPUT, SUM_CACHE_HIT, SUM_CACHE_MISS };

const char *const nrd_stats_summary_families[][2] = {
    {"nv_inference_request_summary_us", "Summary of successful request durations, microseconds"},
    {"nv_inference_queue_summary_us", "Summary of queue durations of successful requests, microseconds"},
    {"nv_inference_compute_input_summary_us", "Summary of input preparation durations, microseconds"},
    {"nv_inference_compute_infer_summary_us", "Summary of compute durations, microseconds"},
    {"nv_inference_compute_output_summary_us", "Summary of output preparation durations, microseconds"},
    /* Only for models whose config enables the response cache. */
    {"nv_cache_hit_summary_us", "Summary of response cache hit durations (lookup and copy), microseconds"},
    {"nv_cache_miss_summary_us", "Summary of response cache miss durations (lookup and insertion), microseconds"},
};
const unsigned nrd_stats_summary_family_count =
    sizeof nrd_stats_summary_families / sizeof nrd_stats_summary_families[0];

int nrd_stats_enable_summaries(nrd_model_stats *s) {
  nrd_summary *sums = calloc(nrd_stats_summary_family_count, sizeof(*sums));
  if (!sums) return -1;
  for (unsigned i = 0; i < nrd_stats_summary_family_count; i++) {
    if (nrd_summary_init(&sums[i]) == 0) continue;
    while (i--) nrd_summary_destroy(&sums[i]);
    free(sums);
    return -1;
  }
  s->summaries = sums;
  return 0;
}

int nrd_stats_prometheus_summary(nrd_model_stats *s, const char *model, int64_t version, unsigned family,
                                 const double *quantiles, size_t n_quantiles, nrd_text *out) {
  if (!s->summaries || family >= nrd_stats_summary_family_count) return 0;
  char labels[600];
  snprintf(labels, sizeof labels, "model=\"%.500s\",version=\"%" PRId64 "\"", model, version);
  pthread_mutex_lock(&s->lock);
  int rc = nrd_summary_prometheus(&s->summaries[family], nrd_now_ns(), quantiles, n_quantiles,
                                  nrd_stats_summary_families[family][0], labels, out);
  pthread_mutex_unlock(&s->lock);
  return rc;
}

void nrd_stats_init(nrd_model_stats *s) {
  memset(s, 0, sizeof(*s));
  atomic_init(&s->pending, 0);
  pthread_mutex_init(&s->lock, NULL);
}

void nrd_stats_destroy(nrd_model_stats *s) {
  for (unsigned i = 0; s->summaries && i < nrd_stats_summary_family_count; i++) nrd_summary_destroy(&s->summaries[i]);
  free(s->summaries);
  free(s->mem);
  free(s->batch);
  free(s->resp);
  free(s->by_gpu);
  pthread_mutex_destroy(&s->lock);
}

/* Device `gpu`'s entry, made on first use; NULL for -1 or out of memory
 * (the totals still count it). Lock held. */
static nrd_device_stats *on_gpu(nrd_model_stats *s, int32_t gpu) {
  if (gpu < 0) return NULL;
  for (uint32_t i = 0; i < s->n_gpu; i++)
    if (s->by_gpu[i].device == gpu) return &s->by_gpu[i];
  nrd_device_stats *n = realloc(s->by_gpu, (s->n_gpu + 1) * sizeof(*n));
  if (!n) return NULL;
  s->by_gpu = n;
  n = &s->by_gpu[s->n_gpu++];
  memset(n, 0, sizeof(*n));
  n->device = gpu;
  return n;
}

void nrd_stats_device_add(nrd_model_stats *s, int32_t gpu) {
  pthread_mutex_lock(&s->lock);
  (void)on_gpu(s, gpu);
  pthread_mutex_unlock(&s->lock);
}

void nrd_stats_request_success(nrd_model_stats *s, uint64_t request_start_ns, uint64_t queue_start_ns,
                               uint64_t exec_start_ns, uint64_t compute_start_ns, uint64_t compute_end_ns,
                               uint64_t exec_end_ns, int32_t gpu) {
  pthread_mutex_lock(&s->lock);
  s->last_inference_ms = wall_ms();
  add(&s->success, span(request_start_ns, exec_end_ns));
  add(&s->queue, span(queue_start_ns, exec_start_ns));
  add(&s->compute_input, span(exec_start_ns, compute_start_ns));
  add(&s->compute_infer, span(compute_start_ns, compute_end_ns));
  add(&s->compute_output, span(compute_end_ns, exec_end_ns));
  nrd_device_stats *d = on_gpu(s, gpu);
  if (d) {
    add(&d->success, span(request_start_ns, exec_end_ns));
    add(&d->queue, span(queue_start_ns, exec_start_ns));
    add(&d->compute_input, span(exec_start_ns, compute_start_ns));
    add(&d->compute_infer, span(compute_start_ns, compute_end_ns));
    add(&d->compute_output, span(compute_end_ns, exec_end_ns));
  }
  if (s->summaries) {
    uint64_t now = nrd_now_ns();
    nrd_summary_observe(&s->summaries[SUM_REQUEST], now, span(request_start_ns, exec_end_ns));
    nrd_summary_observe(&s->summaries[SUM_QUEUE], now, span(queue_start_ns, exec_start_ns));
    nrd_summary_observe(&s->summaries[SUM_INPUT], now, span(exec_start_ns, compute_start_ns));
    nrd_summary_observe(&s->summaries[SUM_INFER], now, span(compute_start_ns, compute_end_ns));
    nrd_summary_observe(&s->summaries[SUM_OUTPUT], now, span(compute_end_ns, exec_end_ns));
  }
  pthread_mutex_unlock(&s->lock);
}

void nrd_stats_request_fail(nrd_model_stats *s, uint64_t request_start_ns, uint64_t queue_start_ns,
                            uint64_t exec_start_ns, uint64_t end_ns, nrd_fail_reason reason, int32_t gpu) {
  pthread_mutex_lock(&s->lock);
  s->last_inference_ms = wall_ms();
  add(&s->fail, span(request_start_ns, end_ns));
  s->fail_by_reason[reason < NRD_FAIL_REASONS ? reason : NRD_FAIL_OTHER]++;
  if (queue_start_ns && exec_start_ns) add(&s->queue, span(queue_start_ns, exec_start_ns));
  /* Only a backend's failure comes from an instance. */
  nrd_device_stats *d = reason == NRD_FAIL_BACKEND ? on_gpu(s, gpu) : NULL;
  if (d) {
    add(&d->fail, span(request_start_ns, end_ns));
    if (queue_start_ns && exec_start_ns) add(&d->queue, span(queue_start_ns, exec_start_ns));
  }
  pthread_mutex_unlock(&s->lock);
}

void nrd_stats_cache_hit(nrd_model_stats *s, uint64_t request_start_ns, uint64_t lookup_start_ns,
                         uint64_t lookup_end_ns) {
  pthread_mutex_lock(&s->lock);
  add(&s->success, span(request_start_ns, lookup_end_ns));
  add(&s->queue, span(request_start_ns, lookup_start_ns));
  add(&s->cache_hit, span(lookup_start_ns, lookup_end_ns));
  if (s->summaries) {
    uint64_t now = nrd_now_ns();
    nrd_summary_observe(&s->summaries[SUM_REQUEST], now, span(request_start_ns, lookup_end_ns));
    nrd_summary_observe(&s->summaries[SUM_QUEUE], now, span(request_start_ns, lookup_start_ns));
    nrd_summary_observe(&s->summaries[SUM_CACHE_HIT], now, span(lookup_start_ns, lookup_end_ns));
  }
  pthread_mutex_unlock(&s->lock);
}

void nrd_stats_cache_miss(nrd_model_stats *s, uint64_t ns) {
  pthread_mutex_lock(&s->lock);
  add(&s->cache_miss, ns);
  s->success.ns += ns;
  if (s->summaries) nrd_summary_observe(&s->summaries[SUM_CACHE_MISS], nrd_now_ns(), ns);
  pthread_mutex_unlock(&s->lock);
}

void nrd_stats_batch(nrd_model_stats *s, uint64_t batch_size, uint64_t exec_start_ns, uint64_t compute_start_ns,
                     uint64_t compute_end_ns, uint64_t exec_end_ns, int32_t gpu) {
  pthread_mutex_lock(&s->lock);
  s->inference_count += batch_size;
  s->execution_count++;
  nrd_device_stats *d = on_gpu(s, gpu);
  if (d) {
    d->inference_count += batch_size;
    d->execution_count++;
  }
  s->last_inference_ms = wall_ms();
  nrd_batch_stat *b = NULL;
  for (uint32_t i = 0; i < s->n_batch; i++)
    if (s->batch[i].batch_size == batch_size) b = &s->batch[i];
  if (!b) {
    if (s->n_batch == s->cap_batch) {
      uint32_t cap = s->cap_batch ? s->cap_batch * 2 : 4;
      nrd_batch_stat *nb = realloc(s->batch, cap * sizeof(*nb));
      if (!nb) goto out;
      s->batch = nb;
      s->cap_batch = cap;
    }
    /* Keep the array sorted by batch size, as Triton reports it. */
    uint32_t at = 0;
    while (at < s->n_batch && s->batch[at].batch_size < batch_size) at++;
    memmove(&s->batch[at + 1], &s->batch[at], (s->n_batch - at) * sizeof(*b));
    b = &s->batch[at];
    memset(b, 0, sizeof(*b));
    b->batch_size = batch_size;
    s->n_batch++;
  }
  add(&b->compute_input, span(exec_start_ns, compute_start_ns));
  add(&b->compute_infer, span(compute_start_ns, compute_end_ns));
  add(&b->compute_output, span(compute_end_ns, exec_end_ns));
out:
  pthread_mutex_unlock(&s->lock);
}

void nrd_stats_response(nrd_model_stats *s, uint64_t index, uint64_t response_start_ns,
                        uint64_t compute_output_start_ns, uint64_t response_end_ns, nrd_response_kind kind) {
  pthread_mutex_lock(&s->lock);
  if (index >= NRD_STATS_MAX_RESPONSE_INDEX) goto out;
  if (index >= s->cap_resp) {
    uint64_t cap = s->cap_resp ? s->cap_resp : 4;
    while (cap <= index) cap *= 2;
    if (cap > NRD_STATS_MAX_RESPONSE_INDEX) cap = NRD_STATS_MAX_RESPONSE_INDEX;
    nrd_response_stat *nr = realloc(s->resp, cap * sizeof(*nr));
    if (!nr) goto out;
    memset(nr + s->cap_resp, 0, (cap - s->cap_resp) * sizeof(*nr));
    s->resp = nr;
    s->cap_resp = (uint32_t)cap;
  }
  if (index >= s->n_resp) s->n_resp = (uint32_t)index + 1;
  nrd_response_stat *r = &s->resp[index];
  r->seen = true;
  /* As Triton counts them: an empty or failed response's time is compute
   * infer up to its compute-output start (the whole of it without one),
   * and compute output after that start when it has one. A cancelled
   * one counts only as cancelled. */
  if (kind == NRD_RESPONSE_EMPTY) {
    add(&r->compute_infer, span(response_start_ns, response_end_ns));
    add(&r->empty_response, span(response_start_ns, response_end_ns));
  } else if (kind == NRD_RESPONSE_CANCEL) {
    add(&r->cancel, span(response_start_ns, response_end_ns));
  } else if (kind == NRD_RESPONSE_FAIL) {
    if (compute_output_start_ns) {
      add(&r->compute_infer, span(response_start_ns, compute_output_start_ns));
      uint64_t out_ns = span(compute_output_start_ns, response_end_ns);
      if (out_ns) add(&r->compute_output, out_ns);
    } else {
      add(&r->compute_infer, span(response_start_ns, response_end_ns));
    }
    add(&r->fail, span(response_start_ns, response_end_ns));
  } else {
    add(&r->compute_infer, span(response_start_ns, compute_output_start_ns));
    add(&r->compute_output, span(compute_output_start_ns, response_end_ns));
    add(&r->success, span(response_start_ns, response_end_ns));
  }
out:
  pthread_mutex_unlock(&s->lock);
}

void nrd_stats_pending_add(nrd_model_stats *s, int64_t delta) { atomic_fetch_add(&s->pending, delta); }

TRITONSERVER_Error *nrd_stats_memory_report(nrd_model_stats *s, const void *owner,
                                            TRITONSERVER_BufferAttributes **usage, uint32_t n) {
  if (n && !usage) return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "memory usage array must not be NULL");
  for (uint32_t i = 0; i < n; i++)
    if (!usage[i]) return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "memory usage entry %u is NULL", i);
  pthread_mutex_lock(&s->lock);
  uint32_t kept = 0;
  for (uint32_t i = 0; i < s->n_mem; i++)
    if (s->mem[i].owner != owner) kept++;
  nrd_mem_usage *m = malloc((kept + n ? kept + n : 1) * sizeof(*m));
  if (!m) {
    pthread_mutex_unlock(&s->lock);
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory recording memory usage");
  }
  uint32_t o = 0;
  for (uint32_t i = 0; i < s->n_mem; i++)
    if (s->mem[i].owner != owner) m[o++] = s->mem[i];
  for (uint32_t i = 0; i < n; i++)
    m[o++] = (nrd_mem_usage){owner, usage[i]->memory_type, usage[i]->memory_type_id, usage[i]->byte_size};
  free(s->mem);
  s->mem = m;
  s->n_mem = o;
  pthread_mutex_unlock(&s->lock);
  return NULL;
}

/* The memory_usage array: one entry per memory type and id, summed over
 * the model and its instances. Caller holds s->lock. */
static json_t *memory_json(const nrd_model_stats *s) {
  json_t *arr = json_array();
  for (uint32_t i = 0; i < s->n_mem; i++) {
    bool seen = false;
    for (uint32_t k = 0; k < i && !seen; k++) seen = s->mem[k].type == s->mem[i].type && s->mem[k].id == s->mem[i].id;
    if (seen) continue;
    uint64_t total = 0;
    for (uint32_t k = i; k < s->n_mem; k++)
      if (s->mem[k].type == s->mem[i].type && s->mem[k].id == s->mem[i].id) total += s->mem[k].byte_size;
    json_array_append_new(arr, json_pack("{s:s,s:I,s:I}", "type", TRITONSERVER_MemoryTypeString(s->mem[i].type), "id",
                                         (json_int_t)s->mem[i].id, "byte_size", (json_int_t)total));
  }
  return arr;
}

static json_t *dur_json(const nrd_duration *d) {
  return json_pack("{s:I,s:I}", "count", (json_int_t)d->count, "ns", (json_int_t)d->ns);
}

json_t *nrd_stats_json(nrd_model_stats *s, const char *model, int64_t version) {
  char vbuf[32];
  snprintf(vbuf, sizeof vbuf, "%" PRId64, version);
  pthread_mutex_lock(&s->lock);
  json_t *inf =
      json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "success", dur_json(&s->success), "fail", dur_json(&s->fail),
                "queue", dur_json(&s->queue), "compute_input", dur_json(&s->compute_input), "compute_infer",
                dur_json(&s->compute_infer), "compute_output", dur_json(&s->compute_output), "cache_hit",
                dur_json(&s->cache_hit), "cache_miss", dur_json(&s->cache_miss));
  json_t *batch = json_array();
  for (uint32_t i = 0; i < s->n_batch; i++) {
    const nrd_batch_stat *b = &s->batch[i];
    json_array_append_new(batch,
                          json_pack("{s:I,s:o,s:o,s:o}", "batch_size", (json_int_t)b->batch_size, "compute_input",
                                    dur_json(&b->compute_input), "compute_infer", dur_json(&b->compute_infer),
                                    "compute_output", dur_json(&b->compute_output)));
  }
  json_t *resp = json_object();
  for (uint32_t i = 0; i < s->n_resp; i++) {
    const nrd_response_stat *r = &s->resp[i];
    if (!r->seen) continue;
    char key[32];
    snprintf(key, sizeof key, "%" PRIu32, i);
    json_object_set_new(resp, key,
                        json_pack("{s:o,s:o,s:o,s:o,s:o,s:o}", "compute_infer", dur_json(&r->compute_infer),
                                  "compute_output", dur_json(&r->compute_output), "success", dur_json(&r->success),
                                  "fail", dur_json(&r->fail), "empty_response", dur_json(&r->empty_response), "cancel",
                                  dur_json(&r->cancel)));
  }
  json_t *out = json_pack("{s:s,s:s,s:I,s:I,s:I,s:o,s:o,s:o,s:o}", "name", model, "version", vbuf, "last_inference",
                          (json_int_t)s->last_inference_ms, "inference_count", (json_int_t)s->inference_count,
                          "execution_count", (json_int_t)s->execution_count, "inference_stats", inf, "response_stats",
                          resp, "batch_stats", batch, "memory_usage", memory_json(s));
  pthread_mutex_unlock(&s->lock);
  return out;
}

/* name, help, type; the order in which the families are printed. */
const char *const nrd_stats_families[][3] = {
    {"nv_inference_request_success", "Successful requests (every batch size)", "counter"},
    {"nv_inference_request_failure", "Failed requests (every batch size), by reason", "counter"},
    {"nv_inference_count", "Inferences run, counted in batch rows", "counter"},
    {"nv_inference_exec_count", "Model executions run (batches)", "counter"},
    {"nv_inference_request_duration_us", "Total request time, microseconds", "counter"},
    {"nv_inference_queue_duration_us", "Total time requests waited in queue, microseconds", "counter"},
    {"nv_inference_compute_input_duration_us", "Total time spent preparing inputs, microseconds", "counter"},
    {"nv_inference_compute_infer_duration_us", "Total time spent computing, microseconds", "counter"},
    {"nv_inference_compute_output_duration_us", "Total time spent producing outputs, microseconds", "counter"},
    {"nv_inference_pending_request_count", "Instantaneous number of pending requests awaiting execution per-model.",
     "gauge"},
    {"nv_model_load_duration_secs", "How long the model took to load, seconds", "gauge"},
    /* Only for models whose config enables the response cache. */
    {"nv_cache_num_hits_per_model", "Requests answered from the response cache", "counter"},
    {"nv_cache_num_misses_per_model", "Response cache lookups that found nothing", "counter"},
    {"nv_cache_hit_duration_per_model", "Total time of cache lookups that hit and copying their answers, microseconds",
     "counter"},
    {"nv_cache_miss_duration_per_model",
     "Total time of cache lookups that missed and inserting the responses, microseconds", "counter"},
};
const unsigned nrd_stats_family_count = sizeof nrd_stats_families / sizeof nrd_stats_families[0];

static const char *const fail_reason_names[NRD_FAIL_REASONS] = {"REJECTED", "CANCELED", "BACKEND", "OTHER"};

/* The value of a family that instances report, read from `d`; false for
 * the model's own families. */
static bool device_value(const nrd_device_stats *d, const char *family, uint64_t *v) {
  if (!strcmp(family, "nv_inference_request_success"))
    *v = d->success.count;
  else if (!strcmp(family, "nv_inference_count"))
    *v = d->inference_count;
  else if (!strcmp(family, "nv_inference_exec_count"))
    *v = d->execution_count;
  else if (!strcmp(family, "nv_inference_request_duration_us"))
    *v = (d->success.ns + d->fail.ns) / 1000;
  else if (!strcmp(family, "nv_inference_queue_duration_us"))
    *v = d->queue.ns / 1000;
  else if (!strcmp(family, "nv_inference_compute_input_duration_us"))
    *v = d->compute_input.ns / 1000;
  else if (!strcmp(family, "nv_inference_compute_infer_duration_us"))
    *v = d->compute_infer.ns / 1000;
  else if (!strcmp(family, "nv_inference_compute_output_duration_us"))
    *v = d->compute_output.ns / 1000;
  else
    return false;
  return true;
}

static void less(nrd_duration *a, const nrd_duration *b) {
  a->count -= b->count;
  a->ns -= b->ns;
}

/* Device i's label when it has one (Triton labels while it collects GPU
 * metrics), else NULL. */
static const char *uuid_of(const nrd_device_stats *d, const char *const *gpu_uuid, int n_uuid) {
  return gpu_uuid && d->device < n_uuid ? gpu_uuid[d->device] : NULL;
}

int nrd_stats_prometheus(nrd_model_stats *s, const char *model, int64_t version, const char *family,
                         const char *const *gpu_uuid, int n_uuid, nrd_text *out) {
  int rc = 0;
  pthread_mutex_lock(&s->lock);
  /* The unlabelled series: the totals less what labelled GPU series show. */
  nrd_device_stats base = {-1,       s->inference_count, s->execution_count, s->success,       s->fail,
                           s->queue, s->compute_input,   s->compute_infer,   s->compute_output};
  uint64_t by[NRD_FAIL_REASONS];
  memcpy(by, s->fail_by_reason, sizeof by);
  for (uint32_t i = 0; i < s->n_gpu; i++) {
    const nrd_device_stats *d = &s->by_gpu[i];
    if (!uuid_of(d, gpu_uuid, n_uuid)) continue;
    base.inference_count -= d->inference_count;
    base.execution_count -= d->execution_count;
    less(&base.success, &d->success);
    less(&base.fail, &d->fail);
    less(&base.queue, &d->queue);
    less(&base.compute_input, &d->compute_input);
    less(&base.compute_infer, &d->compute_infer);
    less(&base.compute_output, &d->compute_output);
    by[NRD_FAIL_BACKEND] -= d->fail.count;
  }
  uint64_t v = 0;
  if (!strcmp(family, "nv_inference_request_failure")) {
    /* One series per reason, zeros included, as Triton prints them; a GPU
     * series counts its instances' BACKEND failures. */
    for (unsigned r = 0; r < NRD_FAIL_REASONS; r++)
      rc |= nrd_text_appendf(out, "%s{model=\"%s\",reason=\"%s\",version=\"%" PRId64 "\"} %" PRIu64 "\n", family, model,
                             fail_reason_names[r], version, by[r]);
    for (uint32_t i = 0; i < s->n_gpu; i++) {
      const char *uuid = uuid_of(&s->by_gpu[i], gpu_uuid, n_uuid);
      for (unsigned r = 0; uuid && r < NRD_FAIL_REASONS; r++)
        rc |= nrd_text_appendf(
            out, "%s{gpu_uuid=\"%s\",model=\"%s\",reason=\"%s\",version=\"%" PRId64 "\"} %" PRIu64 "\n", family, uuid,
            model, fail_reason_names[r], version, r == NRD_FAIL_BACKEND ? s->by_gpu[i].fail.count : 0);
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
  }
  if (!strcmp(family, "nv_model_load_duration_secs")) {
    uint64_t ns = s->load_ns;
    pthread_mutex_unlock(&s->lock);
    return nrd_text_appendf(out, "%s{model=\"%s\",version=\"%" PRId64 "\"} %.16g\n", family, model, version,
                            (double)ns / 1e9);
  }
  if (device_value(&base, family, &v)) {
    rc |= nrd_text_appendf(out, "%s{model=\"%s\",version=\"%" PRId64 "\"} %" PRIu64 "\n", family, model, version, v);
    for (uint32_t i = 0; i < s->n_gpu; i++) {
      const char *uuid = uuid_of(&s->by_gpu[i], gpu_uuid, n_uuid);
      if (uuid && device_value(&s->by_gpu[i], family, &v))
        rc |= nrd_text_appendf(out, "%s{gpu_uuid=\"%s\",model=\"%s\",version=\"%" PRId64 "\"} %" PRIu64 "\n", family,
                               uuid, model, version, v);
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
  }
  if (!strcmp(family, "nv_inference_pending_request_count"))
    v = (uint64_t)atomic_load(&s->pending);
  else if (!strcmp(family, "nv_cache_num_hits_per_model"))
    v = s->cache_hit.count;
  else if (!strcmp(family, "nv_cache_num_misses_per_model"))
    v = s->cache_miss.count;
  else if (!strcmp(family, "nv_cache_hit_duration_per_model"))
    v = s->cache_hit.ns / 1000;
  else if (!strcmp(family, "nv_cache_miss_duration_per_model"))
    v = s->cache_miss.ns / 1000;
  pthread_mutex_unlock(&s->lock);
  return nrd_text_appendf(out, "%s{model=\"%s\",version=\"%" PRId64 "\"} %" PRIu64 "\n", family, model, version, v);
}
