/* Prometheus summaries for --metrics-config summary_latencies=true: the
 * quantiles of recent observations (a sliding window of at most
 * NRD_SUMMARY_WINDOW observations no older than NRD_SUMMARY_MAX_AGE_NS,
 * as Triton's 60 s window) plus the all-time count and sum. Quantiles are
 * exact over the window (Triton's library estimates them within the
 * configured error). Not thread-safe: the owner's lock guards it. */
#ifndef NRD_SUMMARY_H
#define NRD_SUMMARY_H

#include <stddef.h>
#include <stdint.h>

#include "text.h"

#define NRD_SUMMARY_WINDOW 4096u
#define NRD_SUMMARY_MAX_AGE_NS (60ull * 1000000000ull)

typedef struct nrd_summary_sample {
  uint64_t at_ns, value_ns;
} nrd_summary_sample;

typedef struct nrd_summary {
  uint64_t count, sum_ns; /* every observation */
  nrd_summary_sample *ring; /* NRD_SUMMARY_WINDOW entries, owned */
  uint32_t head, n; /* next slot; samples held */
} nrd_summary;

/* 0, or -1 when memory runs out (then nothing to destroy). */
int nrd_summary_init(nrd_summary *s);
void nrd_summary_destroy(nrd_summary *s);

/* Adds one observation of `value_ns` made at `now_ns`. */
void nrd_summary_observe(nrd_summary *s, uint64_t now_ns, uint64_t value_ns);

/* Appends the summary in Prometheus text, values in microseconds: one
 * `family{<labels>,quantile="q"}` line per quantile (NaN with an empty
 * window), then family_sum and family_count. `labels` is the inside of the
 * braces. Returns nrd_text_appendf's result (non-zero: out of memory). */
int nrd_summary_prometheus(const nrd_summary *s, uint64_t now_ns, const double *quantiles, size_t n_quantiles,
                           const char *family, const char *labels, nrd_text *out);

#endif
