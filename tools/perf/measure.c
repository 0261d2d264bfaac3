/* Figures from samples and statistics snapshots. */
#include "measure.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t json_u64(json_t *v) {
  if (json_is_integer(v)) return (uint64_t)json_integer_value(v);
  if (json_is_string(v)) return strtoull(json_string_value(v), NULL, 10);
  if (json_is_real(v)) return (uint64_t)json_real_value(v);
  return 0;
}

static void section(json_t *inf, const char *key, uint64_t *count, uint64_t *ns) {
  json_t *s = json_object_get(inf, key);
  if (count) *count += json_u64(json_object_get(s, "count"));
  if (ns) *ns += json_u64(json_object_get(s, "ns"));
}

nrd_perf_server_snap nrd_perf_server_snap_parse(json_t *stats) {
  nrd_perf_server_snap s = {0};
  json_t *arr = json_object_get(stats, "model_stats");
  size_t i;
  json_t *m;
  json_array_foreach(arr, i, m) {
    json_t *inf = json_object_get(m, "inference_stats");
    if (!inf) continue;
    s.valid = true;
    s.inference_count += json_u64(json_object_get(m, "inference_count"));
    s.execution_count += json_u64(json_object_get(m, "execution_count"));
    section(inf, "success", &s.success_count, &s.success_ns);
    section(inf, "fail", &s.fail_count, NULL);
    section(inf, "queue", NULL, &s.queue_ns);
    section(inf, "compute_input", NULL, &s.cin_ns);
    section(inf, "compute_infer", NULL, &s.infer_ns);
    section(inf, "compute_output", NULL, &s.cout_ns);
  }
  return s;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted v (in µs). */
static double pctl(const uint64_t *v, size_t n, double p) {
  if (n == 0) return 0;
  size_t rank = (size_t)ceil(p / 100.0 * (double)n);
  if (rank < 1) rank = 1;
  if (rank > n) rank = n;
  return (double)v[rank - 1] / 1e3;
}

void nrd_perf_window_finish(nrd_perf_window *w, int64_t batch, int percentile) {
  qsort(w->s.lat_ns, w->s.n, sizeof *w->s.lat_ns, cmp_u64);
  double secs = (double)(w->s.t_end - w->s.t_start) / 1e9;
  w->throughput = secs > 0 ? (double)w->s.n * (double)batch / secs : 0;
  w->p50_us = pctl(w->s.lat_ns, w->s.n, 50);
  w->pct_us = pctl(w->s.lat_ns, w->s.n, percentile ? percentile : 50);
}

static bool within(double a, double b, double c, double pct) {
  double mean = (a + b + c) / 3;
  if (mean <= 0) return false;
  double lim = mean * pct / 100;
  return fabs(a - mean) <= lim && fabs(b - mean) <= lim && fabs(c - mean) <= lim;
}

bool nrd_perf_windows_stable(const nrd_perf_window *w, int n, double pct) {
  if (n < 3) return false;
  const nrd_perf_window *a = &w[n - 3], *b = &w[n - 2], *c = &w[n - 1];
  if (!a->s.n || !b->s.n || !c->s.n) return false;
  return within(a->throughput, b->throughput, c->throughput, pct) && within(a->pct_us, b->pct_us, c->pct_us, pct);
}

static double per_req(uint64_t ns, uint64_t count) { return count ? (double)ns / (double)count / 1e3 : 0; }

void nrd_perf_row_from_windows(nrd_perf_row *r, const nrd_perf_window *w, int n, int64_t batch, int percentile) {
  int first = n > 3 ? n - 3 : 0;
  size_t total = 0;
  uint64_t ns = 0;
  r->requests = r->errors = r->delayed = 0;
  for (int i = first; i < n; i++) {
    total += w[i].s.n;
    r->errors += w[i].s.errors;
    r->delayed += w[i].s.delayed;
    ns += w[i].s.t_end - w[i].s.t_start;
  }
  uint64_t *all = malloc((total ? total : 1) * sizeof *all);
  size_t k = 0;
  double sum = 0;
  for (int i = first; all && i < n; i++) {
    memcpy(all + k, w[i].s.lat_ns, w[i].s.n * sizeof *all);
    k += w[i].s.n;
  }
  if (!all) total = 0;
  qsort(all, total, sizeof *all, cmp_u64);
  for (size_t i = 0; i < total; i++) sum += (double)all[i];
  r->requests = total;
  r->seconds = (double)ns / 1e9;
  r->throughput = r->seconds > 0 ? (double)total * (double)batch / r->seconds : 0;
  r->avg_us = total ? sum / (double)total / 1e3 : 0;
  r->min_us = total ? (double)all[0] / 1e3 : 0;
  r->max_us = total ? (double)all[total - 1] / 1e3 : 0;
  r->p50_us = pctl(all, total, 50);
  r->p90_us = pctl(all, total, 90);
  r->p95_us = pctl(all, total, 95);
  r->p99_us = pctl(all, total, 99);
  r->pct_us = pctl(all, total, percentile ? percentile : 50);
  free(all);

  nrd_perf_server_snap d = {0};
  r->server_valid = w[first].before.valid && w[n - 1].after.valid;
  for (int i = first; r->server_valid && i < n; i++) {
    const nrd_perf_server_snap *a = &w[i].before, *b = &w[i].after;
    d.success_count += b->success_count - a->success_count;
    d.success_ns += b->success_ns - a->success_ns;
    d.execution_count += b->execution_count - a->execution_count;
    d.queue_ns += b->queue_ns - a->queue_ns;
    d.cin_ns += b->cin_ns - a->cin_ns;
    d.infer_ns += b->infer_ns - a->infer_ns;
    d.cout_ns += b->cout_ns - a->cout_ns;
  }
  r->server_requests = d.success_count;
  r->server_executions = d.execution_count;
  r->server_avg_us = per_req(d.success_ns, d.success_count);
  r->server_queue_us = per_req(d.queue_ns, d.success_count);
  r->server_cin_us = per_req(d.cin_ns, d.success_count);
  r->server_infer_us = per_req(d.infer_ns, d.success_count);
  r->server_cout_us = per_req(d.cout_ns, d.success_count);
  double parts = r->server_queue_us + r->server_cin_us + r->server_infer_us + r->server_cout_us;
  r->server_overhead_us = r->server_avg_us > parts ? r->server_avg_us - parts : 0;
}

void nrd_perf_window_free(nrd_perf_window *w) {
  free(w->s.lat_ns);
  w->s.lat_ns = NULL;
}
