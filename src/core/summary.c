/* Prometheus summaries (summary.h). */
#include "summary.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int nrd_summary_init(nrd_summary *s) {
  memset(s, 0, sizeof(*s));
  s->ring = malloc(NRD_SUMMARY_WINDOW * sizeof(*s->ring));
  return s->ring ? 0 : -1;
}

void nrd_summary_destroy(nrd_summary *s) {
  free(s->ring);
  s->ring = NULL;
}

void nrd_summary_observe(nrd_summary *s, uint64_t now_ns, uint64_t value_ns) {
  s->count++;
  s->sum_ns += value_ns;
  s->ring[s->head] = (nrd_summary_sample){now_ns, value_ns};
  s->head = (s->head + 1) % NRD_SUMMARY_WINDOW;
  if (s->n < NRD_SUMMARY_WINDOW) s->n++;
}

static int by_value(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

int nrd_summary_prometheus(const nrd_summary *s, uint64_t now_ns, const double *quantiles, size_t n_quantiles,
                           const char *family, const char *labels, nrd_text *out) {
  /* The window: recent enough samples, sorted. */
  uint64_t window[NRD_SUMMARY_WINDOW];
  uint32_t n = 0;
  for (uint32_t i = 0; i < s->n; i++) {
    const nrd_summary_sample *x = &s->ring[(s->head + NRD_SUMMARY_WINDOW - 1 - i) % NRD_SUMMARY_WINDOW];
    if (now_ns - x->at_ns > NRD_SUMMARY_MAX_AGE_NS) break; /* older ones follow */
    window[n++] = x->value_ns;
  }
  qsort(window, n, sizeof(window[0]), by_value);
  int rc = 0;
  for (size_t q = 0; q < n_quantiles && !rc; q++) {
    if (n == 0) {
      rc |= nrd_text_appendf(out, "%s{%s,quantile=\"%g\"} NaN\n", family, labels, quantiles[q]);
      continue;
    }
    /* Nearest rank: the smallest value with at least q of the window at or below it. */
    size_t rank = (size_t)ceil(quantiles[q] * (double)n);
    if (rank > 0) rank--;
    if (rank >= n) rank = n - 1;
    rc |= nrd_text_appendf(out, "%s{%s,quantile=\"%g\"} %g\n", family, labels, quantiles[q],
                           (double)window[rank] / 1000.0);
  }
  rc |= nrd_text_appendf(out, "%s_sum{%s} %g\n%s_count{%s} %" PRIu64 "\n", family, labels, (double)s->sum_ns / 1000.0,
                         family, labels, s->count);
  return rc;
}
