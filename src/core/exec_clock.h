/* The calling thread's execution state and clock: whether it executes
 * models (an instance thread, or a thread running an inline execution), and
 * a timer of what an execution costs, less the time spent in the
 * application's callbacks meanwhile. A leaf: schedulers, instances,
 * requests and responses use it; it calls nothing of theirs.
 * docs/core.md, "Inline execution". */
#ifndef NRD_EXEC_CLOCK_H
#define NRD_EXEC_CLOCK_H

#include <stdbool.h>
#include <stdint.h>

/* Marks (or unmarks) the calling thread as an instance thread, for its
 * whole life. Calling thread only. */
void nrd_exec_thread_set(bool executing);

/* How deep in executions the calling thread is: 1 for an instance
 * thread, plus 1 per inline execution it runs (nested ones included);
 * 0 on a thread that executes nothing. Calling thread only. */
unsigned nrd_exec_nesting(void);

/* True while the calling thread runs an inline execution (its caller
 * waits for it, no request is queued). Calling thread only. */
bool nrd_exec_running_inline(void);

/* The timer of an execution an inline one runs inside (its caller's). */
typedef struct nrd_exec_saved {
  uint64_t start_ns, callback_ns;
} nrd_exec_saved;

/* Around an inline execution: enter saves the thread's timer into
 * '*saved', counts the nesting and starts the timer; leave returns the
 * execution's time (less callbacks) and restores the saved timer, so an
 * execution inside another (a BLS call run inline) leaves the outer
 * one's timer running. Calling thread only. */
void nrd_exec_inline_enter(nrd_exec_saved *saved);
uint64_t nrd_exec_inline_leave(const nrd_exec_saved *saved);

/* The calling thread's execution timer: stop returns the ns since start,
 * less the time spent in the application's callbacks meanwhile (those are
 * the caller's, not the model's). One timer per thread; any thread. */
void nrd_exec_timer_start(void);
uint64_t nrd_exec_timer_stop(void);

/* Bracket a call into the application (a response or release callback):
 * while the thread's timer runs, the time in between is left out of it.
 * Enter returns the mark to pass to leave (0: the timer is not running,
 * no clock read). Any thread. */
uint64_t nrd_exec_callback_enter(void);
void nrd_exec_callback_leave(uint64_t mark);

#endif
