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

/* Marks (or unmarks) the calling thread as one that executes models: an
 * instance thread for its whole life, any thread for the length of an
 * inline execution. Such a thread is never lent an instance. Calling
 * thread only. */
void nrd_exec_thread_set(bool executing);

/* True on a thread marked by nrd_exec_thread_set. Calling thread only. */
bool nrd_exec_on_execution_thread(void);

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
