/* The runner behind criterion_lite (criterion/criterion.h): one forked
 * child per test, in file order, each with its suite's or its own init,
 * fini and timeout. Prints one line per test and a summary; exits 1 when
 * any test failed. Options such as --jobs are accepted and ignored: tests
 * always run one at a time. */
#include "criterion/criterion.h"

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static nrd_crl_test *tests_head, **tests_tail = &tests_head;
static nrd_crl_suite *suites;

/* The child's state: which thread runs the test, where a fatal check
 * jumps to, and whether any check failed. */
static pthread_t test_thread;
static jmp_buf test_jump;
static volatile sig_atomic_t any_failed;

void nrd_crl_register_test(nrd_crl_test *t) {
  t->next = NULL;
  *tests_tail = t;
  tests_tail = &t->next;
}

void nrd_crl_register_suite(nrd_crl_suite *s) {
  s->next = suites;
  suites = s;
}

bool nrd_crl_str_eq(const char *a, const char *b) { return a && b && strcmp(a, b) == 0; }

bool nrd_crl_check(bool ok, bool fatal, const char *file, int line, const char *expr, const char *fmt, ...) {
  if (ok) return true;
  any_failed = 1;
  fprintf(stderr, "%s:%d: %s failed: %s", file, line, fatal ? "assertion" : "expectation", expr);
  if (fmt[1]) { /* the macros prefix one space to the message, if any */
    fputc(':', stderr);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
  }
  fputc('\n', stderr);
  if (fatal) {
    if (pthread_equal(pthread_self(), test_thread)) longjmp(test_jump, 1);
    fflush(NULL);
    _exit(1);
  }
  return false;
}

static const struct nrd_crl_options *suite_options(const char *name) {
  for (nrd_crl_suite *s = suites; s; s = s->next)
    if (strcmp(s->name, name) == 0) return &s->opts;
  return NULL;
}

/* The child: init, the test, fini; the exit code says pass (0) or fail. */
static void run_child(const nrd_crl_test *t, void (*init)(void), void (*fini)(void)) {
  test_thread = pthread_self();
  if (setjmp(test_jump) == 0) {
    if (init) init();
    t->fn();
  }
  if (fini && setjmp(test_jump) == 0) fini();
  fflush(NULL);
  exit(any_failed ? 1 : 0); /* exit, so the sanitizer's own exit code can apply */
}

static bool run_one(const nrd_crl_test *t) {
  const struct nrd_crl_options *so = suite_options(t->suite);
  void (*init)(void) = t->opts.init ? t->opts.init : so ? so->init : NULL;
  void (*fini)(void) = t->opts.fini ? t->opts.fini : so ? so->fini : NULL;
  double timeout = t->opts.timeout > 0 ? t->opts.timeout : so ? so->timeout : 0;
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    perror("fork");
    return false;
  }
  if (pid == 0) {
    if (timeout > 0) alarm((unsigned)timeout + 1);
    run_child(t, init, fini);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  bool pass = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (pass) {
    printf("[PASS] %s::%s\n", t->suite, t->name);
  } else if (WIFSIGNALED(status)) {
    printf("[FAIL] %s::%s: %s\n", t->suite, t->name,
           WTERMSIG(status) == SIGALRM ? "timed out" : strsignal(WTERMSIG(status)));
  } else {
    printf("[FAIL] %s::%s: exit code %d\n", t->suite, t->name, WEXITSTATUS(status));
  }
  return pass;
}

int main(int argc, char **argv) {
  (void)argc, (void)argv;
  int passed = 0, failed = 0;
  for (nrd_crl_test *t = tests_head; t; t = t->next) {
    if (run_one(t))
      passed++;
    else
      failed++;
  }
  printf("Synthesis: Tested: %d | Passing: %d | Failing: %d\n", passed + failed, passed, failed);
  return failed ? 1 : 0;
}
