/* Small helpers the in-process benchmarks share (inprocess.c,
 * python_inprocess.c, stateful_inprocess.c). Header-only: each bench is
 * one translation unit. Any thread. */
#ifndef NRD_BENCH_UTIL_H
#define NRD_BENCH_UTIL_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "triton/core/tritonserver.h"

/* CLOCK_MONOTONIC in ns. */
static inline uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Prints and deletes `err` (owned); true when there was one. */
static inline bool failed(TRITONSERVER_Error *err, const char *what) {
  if (!err) return false;
  fprintf(stderr, "error: %s: %s: %s\n", what, TRITONSERVER_ErrorCodeString(err), TRITONSERVER_ErrorMessage(err));
  TRITONSERVER_ErrorDelete(err);
  return true;
}

/* qsort comparator for uint64_t. */
static inline int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Writes `text` to `path`; false (with a message) on failure. */
static inline bool write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "error: cannot write %s: %s\n", path, strerror(errno));
    return false;
  }
  fputs(text, f);
  return fclose(f) == 0;
}

#endif /* NRD_BENCH_UTIL_H */
