/* Turning samples into figures: one window's throughput and latency
 * percentiles, the server-side breakdown from two statistics snapshots,
 * the stability rule, and one result row per load level.
 *
 * Threads: main thread only. */
#ifndef NRD_PERF_MEASURE_H
#define NRD_PERF_MEASURE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "load.h"

/* Cumulative server counters of one model (summed over its versions). */
typedef struct nrd_perf_server_snap {
  bool valid;
  uint64_t inference_count, execution_count;
  uint64_t success_count, success_ns, fail_count;
  uint64_t queue_ns, cin_ns, infer_ns, cout_ns;
} nrd_perf_server_snap;

/* Reads a {"model_stats": [...]} document; valid = false if it has none. */
nrd_perf_server_snap nrd_perf_server_snap_parse(json_t *stats);

/* One load level's result (the stable windows merged). */
typedef struct nrd_perf_row {
  int concurrency; /* concurrency mode; 0 in rate mode */
  double rate; /* rate mode: requested req/s; 0 otherwise */
  uint64_t requests, errors, delayed;
  double seconds; /* measured time */
  double throughput; /* inferences/s = requests * batch / seconds */
  double avg_us, min_us, max_us, p50_us, p90_us, p95_us, p99_us, pct_us; /* pct: --percentile */
  bool stable;
  int trials;
  bool server_valid; /* the breakdown below is known */
  uint64_t server_requests, server_executions;
  double server_avg_us, server_queue_us, server_cin_us, server_infer_us, server_cout_us, server_overhead_us;
} nrd_perf_row;

/* One window: its samples (ownership moves in) and the server counters
 * before and after. */
typedef struct nrd_perf_window {
  nrd_perf_samples s;
  nrd_perf_server_snap before, after;
  double throughput, p50_us, pct_us; /* filled by nrd_perf_window_finish */
} nrd_perf_window;

/* Sorts the window's latencies and fills its summary figures. */
void nrd_perf_window_finish(nrd_perf_window *w, int64_t batch, int percentile);

/* True when the last 3 windows of w[0..n) all lie within pct% of their
 * mean, both in throughput and in the stabilizing latency (p50, or
 * --percentile). */
bool nrd_perf_windows_stable(const nrd_perf_window *w, int n, double pct);

/* Merges the last min(3, n) windows into row `r` (load level fields are
 * left to the caller). */
void nrd_perf_row_from_windows(nrd_perf_row *r, const nrd_perf_window *w, int n, int64_t batch, int percentile);

/* Frees the samples of a window. */
void nrd_perf_window_free(nrd_perf_window *w);

#endif
