/* The calling thread's execution state and clock (exec_clock.h). */
#include "exec_clock.h"

#include "stats.h"

/* This file's thread-local variables are read on every request. The
 * initial-exec model makes each read one instruction instead of a call to
 * __tls_get_addr; it is safe since the library is loaded with the program
 * (DT_NEEDED), and the few bytes fit glibc's reserve for one loaded with
 * dlopen. */
#define NRD_TLS static _Thread_local __attribute__((tls_model("initial-exec")))

/* Set for the life of an instance thread. */
NRD_TLS bool on_execution_thread;
/* Inline executions the thread is running, nested ones included. */
NRD_TLS unsigned inline_depth;

/* The execution timer of this thread: when it started (0: not running)
 * and the time spent in the application's callbacks since. */
NRD_TLS uint64_t timer_start_ns, timer_callback_ns;

void nrd_exec_thread_set(bool executing) { on_execution_thread = executing; }

unsigned nrd_exec_nesting(void) { return (on_execution_thread ? 1u : 0u) + inline_depth; }

bool nrd_exec_running_inline(void) { return inline_depth > 0; }

void nrd_exec_inline_enter(nrd_exec_saved *saved) {
  saved->start_ns = timer_start_ns;
  saved->callback_ns = timer_callback_ns;
  inline_depth++;
  nrd_exec_timer_start();
}

uint64_t nrd_exec_inline_leave(const nrd_exec_saved *saved) {
  uint64_t took = nrd_exec_timer_stop();
  inline_depth--;
  timer_start_ns = saved->start_ns;
  timer_callback_ns = saved->callback_ns;
  return took;
}

void nrd_exec_timer_start(void) {
  timer_callback_ns = 0;
  timer_start_ns = nrd_now_ns();
}

uint64_t nrd_exec_timer_stop(void) {
  uint64_t took = nrd_now_ns() - timer_start_ns;
  timer_start_ns = 0;
  return took > timer_callback_ns ? took - timer_callback_ns : 0;
}

uint64_t nrd_exec_callback_enter(void) { return timer_start_ns ? nrd_now_ns() : 0; }

void nrd_exec_callback_leave(uint64_t mark) {
  if (mark) timer_callback_ns += nrd_now_ns() - mark;
}
