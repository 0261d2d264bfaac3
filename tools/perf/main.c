/* nrd_perf: a load generator for Nereid (and any KServe v2 server), in
 * the manner of Triton's perf_analyzer. Parses the options, opens the
 * transport, builds the inputs from the model's metadata, then for each
 * load level repeats measurement windows until they are stable and
 * reports the merged figures.
 *
 * Exit status: 0 done, 1 a run-time failure (server, request errors,
 * files), 2 bad arguments. Unstable levels are reported, not failures. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driver.h"
#include "load.h"
#include "measure.h"
#include "options.h"
#include "report.h"
#include "tensors.h"

#define ERRLEN 1024
#define DRAIN_MS 30000

static volatile sig_atomic_t interrupted;

static void on_signal(int sig) {
  (void)sig;
  interrupted = 1;
}

static void sleep_ms(int ms) {
  struct timespec d = {ms / 1000, (long)(ms % 1000) * 1000000};
  while (nanosleep(&d, &d) && errno == EINTR && !interrupted) {
  }
}

static nrd_perf_server_snap snapshot(nrd_perf_driver *d) {
  char err[ERRLEN];
  json_t *j = d->ops->statistics(d, err, sizeof err);
  nrd_perf_server_snap s = {0};
  if (j) {
    s = nrd_perf_server_snap_parse(j);
    json_decref(j);
  }
  return s;
}

/* Runs one load level (already started) until stable or out of trials.
 * Returns false on request errors (message in err) or an interrupt. */
static bool measure_level(nrd_perf_driver *d, nrd_perf_load *l, const nrd_perf_opts *o, const char *level,
                          nrd_perf_row *row, char *err, size_t errlen) {
  nrd_perf_window *w = calloc((size_t)o->max_trials, sizeof *w);
  if (!w) {
    snprintf(err, errlen, "out of memory");
    return false;
  }
  bool ok = true;
  int n = 0;
  uint64_t early_errors = 0; /* failures outside a window still fail the run */
  nrd_perf_samples warm;
  nrd_perf_load_take(l, &warm); /* whatever completed while starting */
  free(warm.lat_ns);
  early_errors += warm.errors;
  while (n < o->max_trials) {
    nrd_perf_window *cur = &w[n];
    cur->before = snapshot(d);
    nrd_perf_load_take(l, &warm);
    free(warm.lat_ns);
    early_errors += warm.errors;
    uint64_t t0 = nrd_perf_now_ns(), end = t0 + (uint64_t)o->window_ms * 1000000u;
    for (uint64_t t = t0; t < end && !interrupted; t = nrd_perf_now_ns()) {
      nrd_perf_progress(level, n + 1, o->max_trials, (double)(t - t0) / 1e9, o->window_ms / 1e3,
                        (unsigned long long)nrd_perf_load_count(l));
      uint64_t left_ms = (end - t) / 1000000u;
      sleep_ms(left_ms < 200 ? (int)left_ms + 1 : 200);
    }
    nrd_perf_load_take(l, &cur->s);
    cur->after = snapshot(d);
    n++;
    nrd_perf_window_finish(cur, o->batch, o->percentile);
    if (interrupted) {
      snprintf(err, errlen, "interrupted");
      ok = false;
      break;
    }
    cur->s.errors += early_errors;
    early_errors = 0;
    if (cur->s.errors) {
      char first[512];
      nrd_perf_load_first_error(l, first, sizeof first);
      snprintf(err, errlen, "%llu request(s) failed at %s; first error: %s", (unsigned long long)cur->s.errors, level,
               first);
      ok = false;
      break;
    }
    if (nrd_perf_windows_stable(w, n, o->stability_pct)) {
      row->stable = true;
      break;
    }
  }
  nrd_perf_progress_clear();
  nrd_perf_row_from_windows(row, w, n, o->batch, o->percentile);
  row->trials = n;
  for (int i = 0; i < n; i++) nrd_perf_window_free(&w[i]);
  free(w);
  return ok;
}

static nrd_perf_driver *open_driver(const nrd_perf_opts *o, char *err, size_t errlen) {
  switch (o->service) {
    case NRD_PERF_SERVICE_INPROCESS: return nrd_perf_driver_inprocess_new(o, err, errlen);
    case NRD_PERF_SERVICE_HTTP: return nrd_perf_driver_http_new(o, err, errlen);
    case NRD_PERF_SERVICE_GRPC: return nrd_perf_driver_grpc_new(o, err, errlen);
  }
  return NULL;
}

/* The load levels of the sweep; returns their count (at most `max`). */
static int levels(const nrd_perf_opts *o, double *out, int max) {
  const nrd_perf_range *r = o->rate_mode ? &o->rate : &o->concurrency;
  int n = 0;
  for (double v = r->start; v <= r->end * (1 + 1e-9) && n < max; v += r->step) out[n++] = v;
  return n;
}

int main(int argc, char **argv) {
  nrd_perf_opts o;
  switch (nrd_perf_opts_parse(argc, argv, &o, stderr)) {
    case NRD_PERF_PARSE_OK: break;
    case NRD_PERF_PARSE_HELP: nrd_perf_opts_usage(stdout, argv[0]); return 0;
    case NRD_PERF_PARSE_ERROR: nrd_perf_opts_usage(stderr, argv[0]); return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  signal(SIGPIPE, SIG_IGN);
  struct sigaction sa = {0};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);

  enum { MAX_LEVELS = 4096 };
  static double lv[MAX_LEVELS];
  int nlv = levels(&o, lv, MAX_LEVELS);
  int max_conc = 1;
  for (int i = 0; !o.rate_mode && i < nlv; i++)
    if ((int)lv[i] > max_conc) max_conc = (int)lv[i];

  char err[ERRLEN] = "";
  int rc = 1;
  bool stuck = false;
  nrd_perf_tensors t = {0};
  nrd_perf_load *l = NULL;
  nrd_perf_row *rows = calloc((size_t)nlv, sizeof *rows);
  json_t *meta = NULL, *config = NULL;
  nrd_perf_driver *d = open_driver(&o, err, sizeof err);
  if (!d || !rows) goto done;
  if (!(meta = d->ops->metadata(d, err, sizeof err))) goto done;
  config = d->ops->config(d, err, sizeof err); /* optional: a server may not offer it */
  if (!nrd_perf_tensors_build(&t, meta, config, &o, err, sizeof err)) goto done;
  l = nrd_perf_load_new(d, &t, o.rate_mode ? o.max_outstanding : max_conc, err, sizeof err);
  if (!l) goto done;

  nrd_perf_report_banner(stdout, &o);
  int done_rows = 0;
  for (int i = 0; i < nlv; i++) {
    nrd_perf_row *row = &rows[i];
    char level[64];
    bool started;
    if (o.rate_mode) {
      row->rate = lv[i];
      snprintf(level, sizeof level, "request rate %g", lv[i]);
      started = nrd_perf_load_start_rate(l, lv[i], err, sizeof err);
    } else {
      row->concurrency = (int)lv[i];
      snprintf(level, sizeof level, "concurrency %d", (int)lv[i]);
      started = nrd_perf_load_start_concurrency(l, (int)lv[i], err, sizeof err);
    }
    if (!started) goto done;
    bool ok = measure_level(d, l, &o, level, row, err, sizeof err);
    if (!nrd_perf_load_stop(l, DRAIN_MS)) {
      fprintf(stderr, "nrd_perf: %d requests still in flight %d s after the end of %s\n", nrd_perf_load_in_flight(l),
              DRAIN_MS / 1000, level);
      stuck = true; /* the load and driver cannot be freed safely; the process exits */
      goto done;
    }
    if (!ok) goto done;
    nrd_perf_report_level(stdout, &o, row);
    done_rows++;
  }
  nrd_perf_report_table(stdout, &o, rows, done_rows);
  if (o.csv_path && !nrd_perf_report_csv(o.csv_path, &o, rows, done_rows, err, sizeof err)) goto done;
  if (o.json_path && !nrd_perf_report_json(o.json_path, &o, rows, done_rows, err, sizeof err)) goto done;
  rc = 0;

done:
  if (rc && err[0]) fprintf(stderr, "nrd_perf: error: %s\n", err);
  if (l && !stuck) nrd_perf_load_free(l);
  if (d && !stuck) d->ops->destroy(d);
  nrd_perf_tensors_free(&t);
  json_decref(meta);
  json_decref(config);
  free(rows);
  return rc;
}
