/* Triton's CPU metrics, from /proc: nv_cpu_utilization (the share of time
 * every core was busy since the previous sample), nv_cpu_memory_total_bytes
 * and nv_cpu_memory_used_bytes (MemTotal - MemAvailable).
 *
 * Triton polls them from a thread every --metrics-interval-ms. Nereid
 * samples when /metrics is read instead: a read at least one interval after
 * the previous sample takes a new one, a read sooner repeats the last
 * values. So an idle server never wakes for them, and the utilization a
 * scrape sees covers at least one interval. */
#ifndef NRD_CPU_METRICS_H
#define NRD_CPU_METRICS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "stats.h"

/* Jiffies of the aggregate "cpu" line of /proc/stat. */
typedef struct nrd_cpu_times {
  uint64_t busy; /* user + nice + system + irq + softirq + steal */
  uint64_t idle; /* idle + iowait */
} nrd_cpu_times;

typedef struct nrd_cpu_metrics {
  pthread_mutex_t lock;
  uint64_t interval_ns;
  uint64_t sampled_ns; /* when `last` was read; 0: never */
  nrd_cpu_times last;
  double utilization; /* [0, 1] */
  uint64_t mem_total, mem_used;
} nrd_cpu_metrics;

/* Takes the first sample (utilization starts at 0, as Triton's does).
 * Always succeeds: values that cannot be read show as 0. The caller owns
 * `c` and calls nrd_cpu_metrics_destroy. */
void nrd_cpu_metrics_init(nrd_cpu_metrics *c, uint64_t interval_ms);
void nrd_cpu_metrics_destroy(nrd_cpu_metrics *c);

/* Appends the three gauges (HELP, TYPE, value) to `out`, sampling first
 * when an interval has passed. 0, or -1 when memory runs out. Any thread. */
int nrd_cpu_metrics_prometheus(nrd_cpu_metrics *c, nrd_text *out);

/* Parsers, exposed for tests. Each returns 0, or -1 when the text is not
 * what Linux writes (no aggregate "cpu " first line with at least eight
 * numbers; no MemTotal or MemAvailable, or available above total). */
int nrd_cpu_parse_stat(const char *text, nrd_cpu_times *out);
int nrd_cpu_parse_meminfo(const char *text, uint64_t *total_bytes, uint64_t *used_bytes);

/* Busy share between two samples; 0 when no time passed or the counters
 * went backwards. */
double nrd_cpu_utilization(const nrd_cpu_times *older, const nrd_cpu_times *newer);

#endif
