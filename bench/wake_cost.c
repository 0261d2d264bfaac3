/* What one thread waking another costs on this machine: two threads pass
 * a turn back and forth through futex words, first free to run on any CPU
 * (the scheduler puts a woken thread on the idle CPU: a cross-CPU wake-up),
 * then both pinned to CPU 0 (a same-CPU wake-up). Prints wall time and the
 * process's CPU time (utime + stime) per wake-up. This is the price of the
 * hand-off from a front end's thread to an instance thread that inline
 * execution avoids (docs/core.md, "Inline execution"). Figures only.
 *
 *   nrd_bench_wake_cost [ROUND_TRIPS]      (default 100000)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static atomic_uint ping, pong;
static unsigned rounds;
static bool pinned;

static void wake(atomic_uint *w) { syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0); }

/* Waits until *w is no longer `v`. */
static void wait_past(atomic_uint *w, unsigned v) {
  while (atomic_load(w) == v) syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, v, NULL, NULL, 0);
}

static void pin_to_cpu0(void) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(0, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void *peer(void *arg) {
  (void)arg;
  if (pinned) pin_to_cpu0();
  for (unsigned i = 0; i < rounds; i++) {
    wait_past(&ping, i);
    atomic_store(&pong, i + 1);
    wake(&pong);
  }
  return NULL;
}

static double cpu_us(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e6 + (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

static double wall_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static void run(bool pin, const char *label) {
  pinned = pin;
  atomic_store(&ping, 0);
  atomic_store(&pong, 0);
  cpu_set_t all;
  if (pin) {
    sched_getaffinity(0, sizeof all, &all);
    pin_to_cpu0();
  }
  pthread_t t;
  if (pthread_create(&t, NULL, peer, NULL)) {
    perror("pthread_create");
    exit(1);
  }
  double c0 = cpu_us(), w0 = wall_us();
  for (unsigned i = 0; i < rounds; i++) {
    atomic_store(&ping, i + 1);
    wake(&ping);
    wait_past(&pong, i);
  }
  double w1 = wall_us(), c1 = cpu_us();
  pthread_join(t, NULL);
  if (pin) pthread_setaffinity_np(pthread_self(), sizeof all, &all);
  double wakes = 2.0 * rounds;
  printf("%-28s %8.2f us wall  %8.2f us CPU per wake-up\n", label, (w1 - w0) / wakes, (c1 - c0) / wakes);
}

int main(int argc, char **argv) {
  long n = argc > 1 ? strtol(argv[1], NULL, 10) : 100000;
  if (n <= 0 || n > 100000000) {
    fprintf(stderr, "usage: %s [ROUND_TRIPS (1-100000000)]\n", argv[0]);
    return 2;
  }
  rounds = (unsigned)n;
  printf("futex ping-pong, %u round trips, %ld CPUs online\n", rounds, sysconf(_SC_NPROCESSORS_ONLN));
  run(false, "threads free (cross-CPU)");
  run(true, "both on CPU 0 (same CPU)");
  return 0;
}
