/* The default scheduler's inline execution (scheduler.c): which thread
 * runs each request, driven through a model whose backend is a fake with
 * an execution time the test sets per request. Instances run on their
 * real threads (nrd_instance_start). */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "exec_clock.h"
#include "instance.h"
#include "model.h"
#include "request.h"
#include "scheduler.h"

#define MAX_REQS 64
/* The tests' limit is 50 ms, slow executions take 100 ms: far from each
 * other, so that a fast execution preempted on a loaded machine still
 * counts as fast. */
#define LIMIT_US "50000"
#define SLOW_US 100000

typedef struct fake_req {
  TRITONSERVER_InferenceRequest req; /* first: the scheduler sees only this */
  int index;
  unsigned delay_us; /* how long Execute takes */
  unsigned callback_us; /* of which in a (pretend) application callback */
  bool nest; /* Execute enqueues the next request itself */
  bool hold; /* Execute waits until the test lets it go */
  pthread_t ran_on;
  atomic_bool done;
} fake_req;

static TRITONBACKEND_Model model;
static TRITONBACKEND_Backend backend;
static fake_req reqs[MAX_REQS];
static pthread_t test_thread;
static atomic_bool holding, let_go;

static void sleep_us(unsigned us) {
  struct timespec ts = {us / 1000000, (long)(us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

static TRITONSERVER_Error *fake_execute(TRITONBACKEND_ModelInstance *inst, TRITONBACKEND_Request **rs, uint32_t n) {
  (void)inst;
  for (uint32_t i = 0; i < n; i++) {
    fake_req *r = (fake_req *)rs[i];
    r->ran_on = pthread_self();
    if (r->delay_us) sleep_us(r->delay_us);
    if (r->callback_us) {
      uint64_t mark = nrd_exec_callback_enter();
      sleep_us(r->callback_us);
      nrd_exec_callback_leave(mark);
    }
    if (r->nest) cr_assert_null(model.sched->ops->enqueue(model.sched, &reqs[r->index + 1].req));
    if (r->hold) {
      atomic_store(&holding, true);
      while (!atomic_load(&let_go)) sleep_us(100);
    }
    atomic_store(&r->done, true);
  }
  return NULL;
}

/* A model of `n_instances` whose inline limit is `limit_us`, its
 * instances' threads started. */
static void start(uint32_t n_instances, const char *limit_us) {
  setenv("NEREID_INLINE_EXECUTION_MAX_US", limit_us, 1);
  test_thread = pthread_self();
  memset(reqs, 0, sizeof reqs);
  for (int i = 0; i < MAX_REQS; i++) reqs[i].index = i;
  backend.execute = fake_execute;
  model.name = "fake";
  model.backend = &backend;
  model.instances = calloc(n_instances, sizeof(*model.instances));
  for (uint32_t i = 0; i < n_instances; i++) {
    model.instances[i] = nrd_instance_new(&model, "fake_0", "fake", TRITONSERVER_INSTANCEGROUPKIND_CPU, 0, false);
    cr_assert_not_null(model.instances[i]);
  }
  model.n_instances = n_instances;
  nrd_exec_instance insts[8];
  cr_assert(n_instances <= 8);
  for (uint32_t i = 0; i < n_instances; i++) insts[i] = (nrd_exec_instance){model.instances[i], false, false};
  nrd_executor ex = {.execute = nrd_instance_execute, .instances = insts, .n_instances = n_instances};
  model.sched = nrd_default_scheduler_new(&model, &ex);
  cr_assert_not_null(model.sched);
  for (uint32_t i = 0; i < n_instances; i++) cr_assert_null(nrd_instance_start(model.instances[i]));
}

/* After the scheduler stopped: joins the instance threads (a joined one
 * again is a no-op) and frees the model's parts. */
static void free_model(void) {
  for (uint32_t i = 0; i < model.n_instances; i++) {
    nrd_instance_join(model.instances[i]);
    nrd_instance_finalize_and_free(model.instances[i]);
  }
  model.sched->ops->destroy(model.sched);
  free(model.instances);
}

static void stop(void) {
  model.sched->ops->stop(model.sched);
  free_model();
}

static void wait_done(int i) {
  for (int t = 0; t < 20000 && !atomic_load(&reqs[i].done); t++) sleep_us(100);
  cr_assert(atomic_load(&reqs[i].done), "request %d never ran", i);
}

/* Sends request i and waits until it ran, then lets the instance thread
 * settle (note the run, go idle) so the next request finds it idle. */
static void send(int i) {
  cr_assert_null(model.sched->ops->enqueue(model.sched, &reqs[i].req));
  wait_done(i);
  sleep_us(3000);
}

static bool inline_ran(int i) { return pthread_equal(reqs[i].ran_on, test_thread); }

/* Sends requests from `first` on until one runs inline (at most 24) and
 * returns the index after it; none of the first `at_least` may. How soon
 * after the eighth fast execution it happens depends on when the instance
 * thread gets back to its idle state; once one request ran inline the next
 * ones find the instance idle at once (it is given back before enqueue
 * returns). */
static int send_until_inline(int first, int at_least) {
  for (int i = first; i < first + 24; i++) {
    send(i);
    if (inline_ran(i)) {
      cr_expect(i >= first + at_least, "request %d ran inline, %d after %d", i, i - first, first);
      return i + 1;
    }
  }
  cr_assert_fail("none of requests %d to %d ran inline", first, first + 23);
  return 0;
}

/* Sends requests first .. first + n - 1, none of which may run inline. */
static void send_to_threads(int first, int n, const char *why) {
  for (int i = first; i < first + n; i++) {
    send(i);
    cr_expect(!inline_ran(i), "request %d ran inline %s", i, why);
  }
}

Test(scheduler, fast_model_runs_inline_after_eight_fast_executions) {
  start(1, LIMIT_US);
  int next = send_until_inline(0, 8);
  for (int i = next; i < next + 4; i++) {
    send(i);
    cr_expect(inline_ran(i), "request %d did not run inline", i);
  }
  stop();
}

Test(scheduler, a_slow_execution_sends_the_next_eight_to_the_thread) {
  start(1, LIMIT_US);
  int slow = send_until_inline(0, 8);
  reqs[slow].delay_us = SLOW_US;
  send(slow);
  cr_expect(inline_ran(slow), "the slow request was not lent the idle instance (the model looked fast)");
  /* Before request slow + 1 + k, at most k runs were counted fast again. */
  send_to_threads(slow + 1, 8, "too soon after a slow one");
  send_until_inline(slow + 9, 0); /* and eight fast runs bring it back */
  stop();
}

Test(scheduler, a_model_slower_than_the_limit_never_runs_inline) {
  start(1, LIMIT_US);
  for (int i = 0; i < 12; i++) reqs[i].delay_us = SLOW_US;
  send_to_threads(0, 12, "though slower than the limit");
  stop();
}

Test(scheduler, time_in_application_callbacks_is_not_the_models) {
  start(1, LIMIT_US);
  for (int i = 0; i < MAX_REQS; i++) reqs[i].callback_us = SLOW_US;
  send_until_inline(0, 8);
  stop();
}

Test(scheduler, limit_zero_turns_inlining_off) {
  start(1, "0");
  send_to_threads(0, 20, "with the limit at 0");
  stop();
}

Test(scheduler, an_inline_execution_lends_another_instance_once) {
  start(2, LIMIT_US);
  int outer = send_until_inline(0, 8);
  /* `outer` runs inline and, from inside its Execute, queues the next
   * request while the second instance is idle (a BLS call): that one runs
   * inline too, on the same thread; the one it queues in turn goes to an
   * instance thread: never two levels. */
  reqs[outer].nest = true;
  reqs[outer + 1].nest = true;
  send(outer);
  wait_done(outer + 2);
  cr_expect(inline_ran(outer), "the outer request did not run inline");
  cr_expect(inline_ran(outer + 1), "the request made inside an inline execution did not run inline");
  cr_expect(!inline_ran(outer + 2), "a request ran inline two levels deep");
  stop();
}

Test(scheduler, ensemble_steps_and_rescheduled_requests_never_run_inline_inside_an_execution) {
  start(2, LIMIT_US);
  int outer = send_until_inline(0, 8);
  reqs[outer].nest = true;
  reqs[outer + 1].req.no_nested_inline = true;
  send(outer);
  wait_done(outer + 1);
  cr_expect(inline_ran(outer), "the outer request did not run inline");
  cr_expect(!inline_ran(outer + 1), "a request marked no_nested_inline ran inside another execution");
  cr_expect(!pthread_equal(reqs[outer + 1].ran_on, reqs[outer].ran_on));
  stop();
}

static void *send_held(void *arg) {
  cr_assert_null(model.sched->ops->enqueue(model.sched, &((fake_req *)arg)->req));
  return NULL;
}

static atomic_bool joined;

static void *join_instance(void *arg) {
  (void)arg;
  nrd_instance_join(model.instances[0]);
  atomic_store(&joined, true);
  return NULL;
}

Test(scheduler, stopping_waits_for_the_instance_an_inline_execution_holds) {
  start(1, LIMIT_US);
  int held = send_until_inline(0, 8);
  reqs[held].hold = true;
  pthread_t sender, joiner;
  pthread_create(&sender, NULL, send_held, &reqs[held]);
  while (!atomic_load(&holding)) sleep_us(100);
  model.sched->ops->stop(model.sched);
  pthread_create(&joiner, NULL, join_instance, NULL);
  sleep_us(50000);
  cr_expect(!atomic_load(&joined), "the instance thread ended while its instance was still executing inline");
  atomic_store(&let_go, true);
  pthread_join(sender, NULL);
  pthread_join(joiner, NULL);
  cr_expect(atomic_load(&joined));
  cr_expect(pthread_equal(reqs[held].ran_on, sender), "the held request did not run on its sender's thread");
  free_model();
}

Test(scheduler, a_stopped_scheduler_refuses_requests) {
  start(1, LIMIT_US);
  model.sched->ops->stop(model.sched);
  TRITONSERVER_Error *e = model.sched->ops->enqueue(model.sched, &reqs[0].req);
  cr_assert_not_null(e);
  cr_expect_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_UNAVAILABLE);
  TRITONSERVER_ErrorDelete(e);
  free_model();
}
