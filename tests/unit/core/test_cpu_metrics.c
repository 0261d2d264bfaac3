/* Unit tests for the CPU metrics' /proc parsers and utilization
 * (src/core/cpu_metrics.c), good text and bad. */
#include <criterion/criterion.h>

#include "cpu_metrics.h"

Test(cpu_metrics, stat_sums_busy_and_idle_columns) {
  /* user nice system idle iowait irq softirq steal guest guest_nice */
  const char *text = "cpu  10 2 30 400 5 6 7 8 90 100\ncpu0 5 1 15 200 2 3 3 4 45 50\nintr 1 2 3\n";
  nrd_cpu_times t;
  cr_assert_eq(nrd_cpu_parse_stat(text, &t), 0);
  cr_assert_eq(t.busy, 10u + 2 + 30 + 6 + 7 + 8, "guest time is inside user time already");
  cr_assert_eq(t.idle, 400u + 5);
}

Test(cpu_metrics, stat_refuses_what_linux_does_not_write) {
  nrd_cpu_times t;
  cr_assert_eq(nrd_cpu_parse_stat("", &t), -1);
  cr_assert_eq(nrd_cpu_parse_stat("cpu0 1 2 3 4 5 6 7 8\n", &t), -1, "a per-core line first");
  cr_assert_eq(nrd_cpu_parse_stat("cpu  1 2 3 4\ncpu0 1 2 3 4 5 6 7 8\n", &t), -1, "too few numbers");
  cr_assert_eq(nrd_cpu_parse_stat("cpu  1 2 x 4 5 6 7 8\n", &t), -1);
  cr_assert_eq(nrd_cpu_parse_stat("intr 1 2 3\n", &t), -1);
}

Test(cpu_metrics, meminfo_used_is_total_less_available) {
  const char *text = "MemTotal:       1000 kB\nMemFree:         100 kB\nMemAvailable:    250 kB\nBuffers: 1 kB\n";
  uint64_t total = 0, used = 0;
  cr_assert_eq(nrd_cpu_parse_meminfo(text, &total, &used), 0);
  cr_assert_eq(total, 1000u * 1024);
  cr_assert_eq(used, 750u * 1024);
}

Test(cpu_metrics, meminfo_refuses_missing_or_inconsistent_values) {
  uint64_t total = 7, used = 7;
  cr_assert_eq(nrd_cpu_parse_meminfo("MemTotal: 1000 kB\nMemFree: 10 kB\n", &total, &used), -1, "no MemAvailable");
  cr_assert_eq(nrd_cpu_parse_meminfo("MemAvailable: 10 kB\n", &total, &used), -1, "no MemTotal");
  cr_assert_eq(nrd_cpu_parse_meminfo("MemTotal: 10 kB\nMemAvailable: 20 kB\n", &total, &used), -1,
               "available above total");
  cr_assert_eq(nrd_cpu_parse_meminfo("MemTotal: lots\nMemAvailable: 20 kB\n", &total, &used), -1);
  cr_assert_eq(nrd_cpu_parse_meminfo("MemTotalX: 10 kB\nMemAvailable: 1 kB\n", &total, &used), -1,
               "a longer key is another key");
  cr_assert_eq(nrd_cpu_parse_meminfo("", &total, &used), -1);
  cr_assert_eq(total, 7u, "outputs untouched on failure");
  cr_assert_eq(used, 7u);
}

Test(cpu_metrics, utilization_is_the_busy_share_of_the_interval) {
  nrd_cpu_times a = {.busy = 100, .idle = 300}, b = {.busy = 130, .idle = 370};
  cr_assert_float_eq(nrd_cpu_utilization(&a, &b), 0.3, 1e-12);
  cr_assert_float_eq(nrd_cpu_utilization(&a, &a), 0.0, 0, "no time passed");
  cr_assert_float_eq(nrd_cpu_utilization(&b, &a), 0.0, 0, "counters went backwards");
  nrd_cpu_times c = {.busy = 140, .idle = 300};
  cr_assert_float_eq(nrd_cpu_utilization(&a, &c), 1.0, 1e-12, "all busy");
}

Test(cpu_metrics, renders_three_gauges_from_this_machine) {
  nrd_cpu_metrics c;
  nrd_cpu_metrics_init(&c, 3600 * 1000);
  nrd_text t = {0};
  cr_assert_eq(nrd_cpu_metrics_prometheus(&c, &t), 0);
  cr_assert(strstr(t.p, "# TYPE nv_cpu_utilization gauge\nnv_cpu_utilization 0\n"),
            "the first value is 0 until an interval passed: %s", t.p);
  unsigned long long total = 0, used = 0;
  const char *m = strstr(t.p, "\nnv_cpu_memory_total_bytes ");
  cr_assert(m && sscanf(m, "\nnv_cpu_memory_total_bytes %llu", &total) == 1, "%s", t.p);
  m = strstr(t.p, "\nnv_cpu_memory_used_bytes ");
  cr_assert(m && sscanf(m, "\nnv_cpu_memory_used_bytes %llu", &used) == 1, "%s", t.p);
  cr_assert(total > 0 && used > 0 && used <= total, "total %llu used %llu", total, used);
  free(t.p);
  nrd_cpu_metrics_destroy(&c);
}
