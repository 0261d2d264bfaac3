/* What the do-nothing servers (nrd_bench_http_bare, nrd_bench_grpc_bare)
 * share around their front end: the stop signals, the ready line and the
 * wait. Header-only; each program includes it once. */
#ifndef NRD_BENCH_BARE_MAIN_H
#define NRD_BENCH_BARE_MAIN_H

#include <pthread.h>
#include <signal.h>
#include <stdio.h>

#include "triton/core/tritonserver.h"

/* Checks the command line (PORT [THREADS]): 2 after printing the usage
 * when it is short. Then blocks SIGINT and SIGTERM in every thread started
 * after it (nrd_bench_bare_serve takes them), ignores SIGPIPE and returns
 * 0. Main thread, first. */
static inline int nrd_bench_bare_start(int argc, char **argv, sigset_t *stop) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s PORT [THREADS]\n", argv[0]);
    return 2;
  }
  sigemptyset(stop);
  sigaddset(stop, SIGINT);
  sigaddset(stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, stop, NULL);
  signal(SIGPIPE, SIG_IGN);
  return 0;
}

/* After the front end's start: on err prints it (and frees it) and
 * returns 1; otherwise prints "NAME: ready on 127.0.0.1:PORT" and returns
 * 0 once a stop signal arrives. */
static inline int nrd_bench_bare_serve(const char *name, TRITONSERVER_Error *err, int port, const sigset_t *stop) {
  if (err) {
    fprintf(stderr, "%s: %s\n", name, TRITONSERVER_ErrorMessage(err));
    TRITONSERVER_ErrorDelete(err);
    return 1;
  }
  printf("%s: ready on 127.0.0.1:%d\n", name, port);
  fflush(stdout);
  int sig = 0;
  while (sigwait(stop, &sig) != 0) {
  }
  return 0;
}

#endif
