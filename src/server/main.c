/* nereid: the server binary. Parses the command line, starts a server
 * through the public in-process API, prints the model status table, then
 * waits for SIGINT/SIGTERM and shuts down.
 *
 * Signals: SIGINT and SIGTERM are blocked in every thread (the mask is set
 * before the first thread exists, and threads inherit it) and received with
 * sigwait on the main thread, so no work ever runs in a signal handler.
 * While the server shuts down a small thread waits for a second signal and
 * then exits at once with status 1, for the user who does not want to wait
 * for in-flight work. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "error_ignore.h"
#include "grpc_endpoint.h"
#include "http_endpoints.h"
#include "malloc_tuning.h"
#include "model_table.h"
#include "tracer.h"
#include "triton/core/tritonserver.h"

/* Prints "<what>: <code> - <message>" to stderr and frees err. */
/* The server when a front end could not stop in time (kept reachable for
 * leak checkers: it is left to the process exit on purpose). */
static TRITONSERVER_Server *left_running;

static void report_error(const char *what, TRITONSERVER_Error *err) {
  fprintf(stderr, "nereid: error: %s: %s - %s\n", what, TRITONSERVER_ErrorCodeString(err),
          TRITONSERVER_ErrorMessage(err));
  TRITONSERVER_ErrorDelete(err);
}

/* ---- repository poller (POLL mode) ------------------------------------ */

typedef struct poller {
  TRITONSERVER_Server *server;
  unsigned secs;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv; /* uses CLOCK_MONOTONIC */
  bool stop;
  bool started;
} poller;

static void *poller_main(void *arg) {
  poller *p = arg;
  pthread_mutex_lock(&p->mu);
  while (!p->stop) {
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += (time_t)p->secs;
    int rc = 0;
    while (!p->stop && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&p->cv, &p->mu, &until);
    if (p->stop) break;
    pthread_mutex_unlock(&p->mu);
    TRITONSERVER_Error *err = TRITONSERVER_ServerPollModelRepository(p->server);
    if (err) {
      nrd_srv_logf(TRITONSERVER_LOG_ERROR, __FILE__, __LINE__, "failed to poll model repository: %s",
                   TRITONSERVER_ErrorMessage(err));
      TRITONSERVER_ErrorDelete(err);
    }
    pthread_mutex_lock(&p->mu);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

/* Starts the poll thread; on failure logs why and leaves p->started false
 * (the server keeps running without periodic rescans). */
static void poller_start(poller *p, TRITONSERVER_Server *server, unsigned secs) {
  memset(p, 0, sizeof(*p));
  p->server = server;
  p->secs = secs;
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, &ca);
  pthread_condattr_destroy(&ca);
  int rc = pthread_create(&p->thread, NULL, poller_main, p);
  if (rc != 0) {
    nrd_srv_logf(TRITONSERVER_LOG_ERROR, __FILE__, __LINE__, "cannot start the repository poll thread: %s",
                 strerror(rc));
    return;
  }
  p->started = true;
  nrd_srv_logf(TRITONSERVER_LOG_INFO, __FILE__, __LINE__, "polling model repositories every %u s", secs);
}

/* Stops and joins the poll thread (waits for a poll in progress). */
static void poller_stop(poller *p) {
  if (!p->started) return;
  pthread_mutex_lock(&p->mu);
  p->stop = true;
  pthread_cond_signal(&p->cv);
  pthread_mutex_unlock(&p->mu);
  pthread_join(p->thread, NULL);
  pthread_cond_destroy(&p->cv);
  pthread_mutex_destroy(&p->mu);
  p->started = false;
}

/* ---- signals ---------------------------------------------------------- */

static void *second_signal_main(void *arg) {
  const sigset_t *set = arg;
  int sig = 0;
  if (sigwait(set, &sig) == 0) {
    static const char msg[] = "nereid: second signal during shutdown, exiting now\n";
    ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)w;
    _exit(1);
  }
  return NULL;
}

static void watch_for_second_signal(sigset_t *set) {
  pthread_t t;
  if (pthread_create(&t, NULL, second_signal_main, set) == 0) pthread_detach(t);
}

/* ---- main -------------------------------------------------------------- */

/* The backends folder of an installed tree (cmake/install.cmake):
 * <prefix>/backends for the binary <prefix>/bin/nereid, found through
 * /proc/self/exe (so a symbolic link such as /usr/bin/nereid leads to the
 * real tree). Writes it into buf and returns buf when that folder exists,
 * else NULL and the core's default (/opt/tritonserver/backends) stays.
 * Main thread only. */
static const char *installed_backend_dir(char *buf, size_t len) {
  ssize_t n = readlink("/proc/self/exe", buf, len - 1);
  if (n <= 0) return NULL;
  buf[n] = '\0';
  for (int up = 0; up < 2; up++) {
    char *slash = strrchr(buf, '/');
    if (slash == NULL) return NULL;
    *slash = '\0';
  }
  size_t used = strlen(buf);
  if ((size_t)snprintf(buf + used, len - used, "/backends") >= len - used) return NULL;
  struct stat st;
  return stat(buf, &st) == 0 && S_ISDIR(st.st_mode) ? buf : NULL;
}

static const char *mode_name(TRITONSERVER_ModelControlMode m) {
  switch (m) {
    case TRITONSERVER_MODEL_CONTROL_POLL: return "poll";
    case TRITONSERVER_MODEL_CONTROL_EXPLICIT: return "explicit";
    default: return "none";
  }
}

int main(int argc, char **argv) {
#ifndef NRD_SRV_EMBEDDED /* the wire fuzzers run this main in a thread of their own program */
  nrd_srv_malloc_tuning_apply(argv);
#endif
  static sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
  signal(SIGPIPE, SIG_IGN);
  setvbuf(stdout, NULL, _IOLBF, 0);

  const char *prog = argc > 0 && argv[0] ? argv[0] : "nereid";
  nrd_srv_cli cli;
  char err_text[512];
  if (nrd_srv_cli_parse(argc, argv, &cli, err_text, sizeof err_text) != 0) {
    fprintf(stderr, "nereid: error: %s\n\n", err_text);
    nrd_srv_cli_usage(stderr, prog);
    nrd_srv_cli_free(&cli);
    return 2;
  }
  if (cli.help) {
    nrd_srv_cli_usage(stdout, prog);
    nrd_srv_cli_free(&cli);
    return 0;
  }
  if (cli.version) {
    printf("nereid %s\n", NRD_VERSION);
    nrd_srv_cli_free(&cli);
    return 0;
  }
  static char backends_beside[PATH_MAX];
  if (cli.backend_dir == NULL) cli.backend_dir = installed_backend_dir(backends_beside, sizeof backends_beside);

  TRITONSERVER_ServerOptions *options = NULL;
  TRITONSERVER_Error *err = nrd_srv_cli_make_options(&cli, &options);
  if (err) {
    report_error("setting server options", err);
    nrd_srv_cli_free(&cli);
    return 1;
  }

  TRITONSERVER_Server *server = NULL;
  err = TRITONSERVER_ServerNew(&server, options);
  TRITONSERVER_ServerOptionsDelete(options);
  if (err && server == NULL) {
    report_error("creating server", err);
    nrd_srv_cli_free(&cli);
    return 1;
  }

  nrd_srv_model_counts counts = {0, 0, 0};
  TRITONSERVER_Error *table_err = nrd_srv_model_table_print(server, stdout, &counts);
  if (table_err) report_error("reading the model index", table_err);

  if (err) {
    if (cli.exit_on_error) {
      NRD_SRV_IGNORE(nrd_srv_model_table_print_failures(server, stderr), "listing the models that failed to load");
      report_error("creating server", err);
      fprintf(stderr, "nereid: exiting because a model failed to load (--exit-on-error=true; "
                      "see the table above)\n");
      TRITONSERVER_ServerDelete(server);
      nrd_srv_cli_free(&cli);
      return 1;
    }
    nrd_srv_logf(TRITONSERVER_LOG_WARN, __FILE__, __LINE__,
                 "%s; serving the models that loaded (--exit-on-error=false)", TRITONSERVER_ErrorMessage(err));
    TRITONSERVER_ErrorDelete(err);
  }

  /* State both front ends share, as in Triton: registered shared memory
   * regions and the log settings clients read and change. */
  nrd_srv_shm *shm = nrd_srv_shm_new(cli.allow_client_shm);
  nrd_srv_log_settings *log_settings = nrd_srv_log_settings_new(cli.log_file, cli.log_verbose, cli.log_format);
  nrd_srv_otel_config oc = {cli.trace_otel_url,
                            cli.trace_otel_resource,
                            cli.n_trace_otel_resource,
                            cli.trace_otel_max_queue_size,
                            cli.trace_otel_schedule_delay_ms,
                            cli.trace_otel_max_export_batch_size};
  nrd_srv_trace_config tc = {cli.trace_level,         cli.trace_rate, cli.trace_count,
                             cli.trace_log_frequency, cli.trace_file, cli.trace_otel ? &oc : NULL};
  char tracer_err[512] = "";
  nrd_srv_tracer *tracer = nrd_srv_tracer_new(server, &tc, tracer_err, sizeof tracer_err);
  nrd_srv_http_endpoints http_ep = {0};
  nrd_srv_grpc *grpc_ep = NULL;
  if (tracer == NULL) {
    fprintf(stderr, "nereid: error: tracing: %s\n", tracer_err);
    goto fail_endpoints;
  }
  if (shm == NULL || log_settings == NULL) {
    fprintf(stderr, "nereid: error: out of memory\n");
    goto fail_endpoints;
  }
  if (nrd_srv_http_endpoints_start(server, &cli, shm, log_settings, tracer, &http_ep) != 0) goto fail_endpoints;
  if (nrd_srv_grpc_endpoint_start(server, &cli, shm, log_settings, tracer, &grpc_ep) != 0) {
    nrd_srv_http_endpoints_stop(&http_ep, cli.exit_timeout_secs);
    goto fail_endpoints;
  }

  bool ready = false;
  NRD_SRV_IGNORE(TRITONSERVER_ServerIsReady(server, &ready), "server readiness unknown: counted as not ready");
  printf("nereid: server %s: %zu of %zu models READY, model control mode %s; "
         "stop with SIGINT or SIGTERM\n",
         ready ? "ready" : "running but not ready", counts.ready, counts.listed, mode_name(cli.control_mode));

  poller poll = {0};
  if (cli.control_mode == TRITONSERVER_MODEL_CONTROL_POLL && cli.repository_poll_secs > 0)
    poller_start(&poll, server, cli.repository_poll_secs);

  int sig = 0;
  while (sigwait(&stop_signals, &sig) != 0) {
  }
  printf("nereid: received %s, shutting down (a second signal exits at once)\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
  watch_for_second_signal(&stop_signals);

  poller_stop(&poll);
  /* Every front end drains at once, within one exit timeout in all. */
  nrd_srv_grpc_endpoint_drain(grpc_ep);
  nrd_srv_http_endpoints_drain(&http_ep);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  bool clean = nrd_srv_grpc_endpoint_stop(grpc_ep, cli.exit_timeout_secs);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  unsigned spent = (unsigned)(t1.tv_sec - t0.tv_sec);
  clean &= nrd_srv_http_endpoints_stop(&http_ep, spent < cli.exit_timeout_secs ? cli.exit_timeout_secs - spent : 0);
  err = TRITONSERVER_ServerStop(server);
  if (err) report_error("stopping server", err);
  if (!clean) {
    /* A front end still has work in the core (a backend holding requests
     * past the exit timeout, or a model load or unload stuck behind one):
     * its threads may still call the server, so the server and what the
     * front ends share stay allocated until the process exits. */
    fprintf(stderr, "nereid: work still in the core after the exit timeout; exiting without freeing the server\n");
    left_running = server;
    nrd_srv_cli_free(&cli);
    printf("nereid: stopped\n");
    return 0;
  }
  err = TRITONSERVER_ServerDelete(server);
  if (err) report_error("deleting server", err);
  nrd_srv_tracer_free(tracer); /* after the server: every trace has come back */
  nrd_srv_shm_free(shm);
  nrd_srv_log_settings_free(log_settings);
  nrd_srv_cli_free(&cli);
  printf("nereid: stopped\n");
  return 0;

fail_endpoints:
  err = TRITONSERVER_ServerStop(server);
  if (err) report_error("stopping server", err);
  TRITONSERVER_ServerDelete(server);
  nrd_srv_tracer_free(tracer);
  nrd_srv_shm_free(shm);
  nrd_srv_log_settings_free(log_settings);
  nrd_srv_cli_free(&cli);
  return 1;
}
