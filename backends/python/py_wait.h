/*
 * How either side of the shared memory (py_ipc.h) waits for the other's
 * futex word: a spin sized by how long recent waits took, then futex
 * sleeps; and how it posts, with a wake-up only when the other side
 * sleeps.
 *
 * A futex wake-up of a sleeping thread on another CPU costs 13-18 us on
 * the virtual machines we measure (docs/core.md, "Inline execution"),
 * more than a blank model.py's whole execute; a spinning waiter sees the
 * word change within a few hundred ns. So a waiter whose recent waits
 * were short spins for about twice their average (at most
 * NRD_PY_SPIN_MAX_NS) before sleeping, and one whose waits are long
 * sleeps at once: a slow model costs no spinning CPU.
 *
 * Used by libtriton_python.so and by the stub (which is built without
 * the server's libraries): header-only, no allocation. Each nrd_py_waiter
 * belongs to one thread at a time; posting is safe from any thread.
 */
#ifndef NRD_PY_WAIT_H
#define NRD_PY_WAIT_H

#include <limits.h>
#include <sched.h>
#include <linux/futex.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* The longest spin: past this a futex sleep (15-20 us to wake) costs
 * little beside the wait itself. */
#define NRD_PY_SPIN_MAX_NS 100000u
/* A sched_yield that took longer ran another thread: the CPUs are
 * busy, and spinning on would take time from the work. */
#define NRD_PY_YIELD_LOST_NS 5000u
/* Waits counted in the average are cut to this, so one long wait (a
 * model's initialize, an idle minute) leaves it within a few waits. */
#define NRD_PY_WAIT_CAP_NS (4u * NRD_PY_SPIN_MAX_NS)

typedef struct nrd_py_waiter {
  uint64_t avg_ns; /* moving average of recent waits (1/8 weight), capped */
} nrd_py_waiter;

static inline uint64_t nrd_py_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* How long to spin before sleeping, from recent waits: none when they
 * were long. */
static inline uint64_t nrd_py_spin_budget_ns(const nrd_py_waiter *w) {
  if (w->avg_ns > NRD_PY_SPIN_MAX_NS) {
    return 0;
  }
  uint64_t b = 2 * w->avg_ns + 2000;
  return b < NRD_PY_SPIN_MAX_NS ? b : NRD_PY_SPIN_MAX_NS;
}

/* Records that a wait took 'ns'. */
static inline void nrd_py_waited(nrd_py_waiter *w, uint64_t ns) {
  if (ns > NRD_PY_WAIT_CAP_NS) {
    ns = NRD_PY_WAIT_CAP_NS;
  }
  w->avg_ns = w->avg_ns - w->avg_ns / 8 + ns / 8;
}

/* Spins while '*word' is (or, with 'until_equal', is not) 'value', until
 * the budget (from 'since', a nrd_py_now_ns reading) is spent, yielding
 * the CPU between checks so a thread waiting for it runs; true when the
 * wait is over. */
static inline bool nrd_py_spin_on(const nrd_py_waiter *w, const uint32_t *word, uint32_t value, bool until_equal,
                                  uint64_t since) {
  uint64_t budget = nrd_py_spin_budget_ns(w);
  for (;;) {
    for (int i = 0; i < 32; i++) {
      if ((__atomic_load_n(word, __ATOMIC_ACQUIRE) == value) == until_equal) {
        return true;
      }
      __builtin_ia32_pause();
    }
    uint64_t now = nrd_py_now_ns();
    if (budget == 0 || now - since > budget) {
      return false;
    }
    sched_yield();
    if (nrd_py_now_ns() - now > NRD_PY_YIELD_LOST_NS) {
      /* Another thread had this CPU meanwhile: it is wanted, sleep. */
      return false;
    }
  }
}

/* Spins until '*word' differs from 'seen'; true when it does. */
static inline bool nrd_py_spin(const nrd_py_waiter *w, const uint32_t *word, uint32_t seen, uint64_t since) {
  return nrd_py_spin_on(w, word, seen, false, since);
}

/* Spins until '*word' is 'want'; true when it is. */
static inline bool nrd_py_spin_all(const nrd_py_waiter *w, const uint32_t *word, uint32_t want, uint64_t since) {
  return nrd_py_spin_on(w, word, want, true, since);
}

/* One futex sleep of at most 'ms' while '*word' is 'seen', counted in
 * '*sleepers' so the poster knows to wake it. The count is raised before
 * the word is read again and the poster bumps the word before it reads
 * the count (both sequentially consistent): one of the two sees the
 * other, so a post is never missed. */
static inline void nrd_py_sleep(uint32_t *word, uint32_t *sleepers, uint32_t seen, long ms) {
  __atomic_add_fetch(sleepers, 1, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(word, __ATOMIC_SEQ_CST) == seen) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    syscall(SYS_futex, word, FUTEX_WAIT, seen, &ts, NULL, 0);
  }
  __atomic_sub_fetch(sleepers, 1, __ATOMIC_SEQ_CST);
}

/* Bumps '*word' (the message or reply is in place) and wakes the other
 * side if it sleeps. */
static inline void nrd_py_post(uint32_t *word, uint32_t *sleepers) {
  __atomic_add_fetch(word, 1, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(sleepers, __ATOMIC_SEQ_CST) != 0) {
    syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
  }
}

#endif
