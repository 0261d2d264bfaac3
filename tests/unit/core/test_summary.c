/* Unit tests for the Prometheus summaries (src/core/summary.c): nearest
 * rank quantiles over the window, the window's age and size limits, and
 * the all-time count and sum. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "summary.h"

static const double kQ[] = {0.5, 0.9, 0.99};

static char *render(const nrd_summary *s, uint64_t now) {
  nrd_text t = {0};
  cr_assert_eq(nrd_summary_prometheus(s, now, kQ, 3, "x", "m=\"a\"", &t), 0);
  return t.p;
}

Test(summary, quantiles_count_and_sum) {
  nrd_summary s;
  cr_assert_eq(nrd_summary_init(&s), 0);
  for (uint64_t v = 100; v >= 1; v--) nrd_summary_observe(&s, 1000, v * 1000); /* 1..100 us, any order */
  char *t = render(&s, 2000);
  cr_assert_str_eq(t, "x{m=\"a\",quantile=\"0.5\"} 50\n"
                      "x{m=\"a\",quantile=\"0.9\"} 90\n"
                      "x{m=\"a\",quantile=\"0.99\"} 99\n"
                      "x_sum{m=\"a\"} 5050\n"
                      "x_count{m=\"a\"} 100\n");
  free(t);
  nrd_summary_destroy(&s);
}

Test(summary, old_observations_leave_the_window_but_not_the_count) {
  nrd_summary s;
  cr_assert_eq(nrd_summary_init(&s), 0);
  nrd_summary_observe(&s, 0, 7000);
  char *t = render(&s, NRD_SUMMARY_MAX_AGE_NS + 1);
  cr_assert(strstr(t, "x{m=\"a\",quantile=\"0.5\"} NaN\n"), "%s", t);
  cr_assert(strstr(t, "x_count{m=\"a\"} 1\n"), "%s", t);
  free(t);
  /* Past the window's size, the newest observations count. */
  for (uint64_t i = 0; i < NRD_SUMMARY_WINDOW; i++) nrd_summary_observe(&s, NRD_SUMMARY_MAX_AGE_NS, 1000);
  nrd_summary_observe(&s, NRD_SUMMARY_MAX_AGE_NS, 5000000);
  t = render(&s, NRD_SUMMARY_MAX_AGE_NS + 1);
  cr_assert(strstr(t, "quantile=\"0.5\"} 1\n"), "%s", t);
  cr_assert(strstr(t, "x_count{m=\"a\"} 4098\n"), "%s", t);
  free(t);
  nrd_summary_destroy(&s);
}
