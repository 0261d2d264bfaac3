/* CPU utilization and memory gauges; see cpu_metrics.h. */
#include "cpu_metrics.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Reads a small /proc file whole into buf (NUL-terminated). -1 on error. */
static int read_proc(const char *path, char *buf, size_t size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  size_t got = 0;
  while (got + 1 < size) {
    ssize_t n = read(fd, buf + got, size - 1 - got);
    if (n < 0) {
      close(fd);
      return -1;
    }
    if (n == 0) break;
    got += (size_t)n;
  }
  close(fd);
  buf[got] = '\0';
  return 0;
}

int nrd_cpu_parse_stat(const char *text, nrd_cpu_times *out) {
  uint64_t v[8];
  if (strncmp(text, "cpu ", 4) != 0) return -1;
  /* A line without the eight numbers makes sscanf read on into the next
   * line; a "cpu0" there starts with a letter, so it stops short. */
  if (sscanf(text + 4, " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64,
             &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) != 8)
    return -1;
  /* user nice system idle iowait irq softirq steal */
  out->busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
  out->idle = v[3] + v[4];
  return 0;
}

/* The kB value of "<key>:" at the start of a line of /proc/meminfo. */
static int meminfo_value(const char *text, const char *key, uint64_t *kb) {
  size_t klen = strlen(key);
  for (const char *line = text; line;) {
    if (strncmp(line, key, klen) == 0 && line[klen] == ':')
      return sscanf(line + klen + 1, " %" SCNu64, kb) == 1 ? 0 : -1;
    line = strchr(line, '\n');
    if (line) line++;
  }
  return -1;
}

int nrd_cpu_parse_meminfo(const char *text, uint64_t *total_bytes, uint64_t *used_bytes) {
  uint64_t total = 0, avail = 0;
  if (meminfo_value(text, "MemTotal", &total) || meminfo_value(text, "MemAvailable", &avail) || avail > total ||
      total > UINT64_MAX / 1024)
    return -1;
  *total_bytes = total * 1024;
  *used_bytes = (total - avail) * 1024;
  return 0;
}

double nrd_cpu_utilization(const nrd_cpu_times *older, const nrd_cpu_times *newer) {
  uint64_t busy = newer->busy > older->busy ? newer->busy - older->busy : 0;
  uint64_t idle = newer->idle > older->idle ? newer->idle - older->idle : 0;
  return busy + idle ? (double)busy / (double)(busy + idle) : 0.0;
}

/* Takes a sample now; c->lock held. */
static void sample(nrd_cpu_metrics *c, uint64_t now) {
  char buf[8192];
  nrd_cpu_times t;
  if (read_proc("/proc/stat", buf, sizeof buf) == 0 && nrd_cpu_parse_stat(buf, &t) == 0) {
    if (c->sampled_ns) c->utilization = nrd_cpu_utilization(&c->last, &t);
    c->last = t;
  } else {
    c->utilization = 0;
  }
  if (read_proc("/proc/meminfo", buf, sizeof buf) != 0 || nrd_cpu_parse_meminfo(buf, &c->mem_total, &c->mem_used))
    c->mem_total = c->mem_used = 0;
  c->sampled_ns = now;
}

void nrd_cpu_metrics_init(nrd_cpu_metrics *c, uint64_t interval_ms) {
  memset(c, 0, sizeof(*c));
  pthread_mutex_init(&c->lock, NULL);
  /* Capped at a day, so the product in nanoseconds cannot overflow. */
  c->interval_ns = (interval_ms > 86400000u ? 86400000u : interval_ms) * 1000000u;
  sample(c, nrd_now_ns());
}

void nrd_cpu_metrics_destroy(nrd_cpu_metrics *c) { pthread_mutex_destroy(&c->lock); }

int nrd_cpu_metrics_prometheus(nrd_cpu_metrics *c, nrd_text *out) {
  pthread_mutex_lock(&c->lock);
  uint64_t now = nrd_now_ns();
  if (now - c->sampled_ns >= c->interval_ns) sample(c, now);
  double util = c->utilization;
  uint64_t total = c->mem_total, used = c->mem_used;
  pthread_mutex_unlock(&c->lock);
  return nrd_text_appendf(out,
                          "# HELP nv_cpu_utilization Share of time the CPUs were busy since the previous sample, "
                          "0 to 1\n# TYPE nv_cpu_utilization gauge\nnv_cpu_utilization %.16g\n"
                          "# HELP nv_cpu_memory_total_bytes Memory (RAM) in all, bytes\n"
                          "# TYPE nv_cpu_memory_total_bytes gauge\nnv_cpu_memory_total_bytes %" PRIu64 "\n"
                          "# HELP nv_cpu_memory_used_bytes Memory (RAM) in use (total less available), bytes\n"
                          "# TYPE nv_cpu_memory_used_bytes gauge\nnv_cpu_memory_used_bytes %" PRIu64 "\n",
                          util, total, used);
}
