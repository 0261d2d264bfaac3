/* Terminal, CSV and JSON reports. Latencies are printed in microseconds. */
#include "report.h"

#include <errno.h>
#include <jansson.h>
#include <string.h>
#include <unistd.h>

static const char *pct_name(const nrd_perf_opts *o, char *buf, size_t len) {
  snprintf(buf, len, "p%d", o->percentile ? o->percentile : 50);
  return buf;
}

void nrd_perf_report_banner(FILE *f, const nrd_perf_opts *o) {
  char p[8];
  fprintf(f, "*** nrd_perf: model %s", o->model);
  if (o->version >= 0) fprintf(f, " version %lld", (long long)o->version);
  fprintf(f, ", service %s", nrd_perf_service_name(o->service));
  if (o->service != NRD_PERF_SERVICE_INPROCESS)
    fprintf(f, " at %s%s%s", o->url,
            o->service == NRD_PERF_SERVICE_HTTP ? (o->http_binary ? " (binary tensors)" : " (JSON tensors)") : "",
            !o->ssl_grpc      ? ""
            : o->ssl_key_file ? " (TLS, client certificate)"
                              : " (TLS)");
  fprintf(f, " ***\n");
  fprintf(f, "  batch size %lld, %s input data, measurement window %d ms\n", (long long)o->batch,
          o->data == NRD_PERF_DATA_RANDOM ? "random" : "zero", o->window_ms);
  fprintf(f,
          "  stable when 3 consecutive windows agree within %g%% on throughput and %s latency (at most %d windows)\n",
          o->stability_pct, pct_name(o, p, sizeof p), o->max_trials);
  if (o->rate_mode)
    fprintf(f, "  open loop: constant request rate %g to %g step %g req/s (at most %d in flight)\n\n", o->rate.start,
            o->rate.end, o->rate.step, o->max_outstanding);
  else
    fprintf(f, "  closed loop: concurrency %g to %g step %g\n\n", o->concurrency.start, o->concurrency.end,
            o->concurrency.step);
}

void nrd_perf_report_level(FILE *f, const nrd_perf_opts *o, const nrd_perf_row *r) {
  if (o->rate_mode)
    fprintf(f, "Request rate: %g req/s\n", r->rate);
  else
    fprintf(f, "Concurrency: %d\n", r->concurrency);
  fprintf(f, "  Client: %llu requests in %.2f s, throughput %.1f infer/s%s\n", (unsigned long long)r->requests,
          r->seconds, r->throughput, r->stable ? "" : "  (NOT STABLE)");
  fprintf(f, "    latency (us): avg %.1f  p50 %.1f  p90 %.1f  p95 %.1f  p99 %.1f  (min %.1f, max %.1f)\n", r->avg_us,
          r->p50_us, r->p90_us, r->p95_us, r->p99_us, r->min_us, r->max_us);
  if (o->percentile && o->percentile != 50 && o->percentile != 90 && o->percentile != 95 && o->percentile != 99)
    fprintf(f, "    p%d latency: %.1f us\n", o->percentile, r->pct_us);
  if (r->errors || r->delayed)
    fprintf(f, "    errors %llu, delayed sends %llu\n", (unsigned long long)r->errors, (unsigned long long)r->delayed);
  if (r->server_valid) {
    fprintf(f, "  Server: %llu requests in %llu executions\n", (unsigned long long)r->server_requests,
            (unsigned long long)r->server_executions);
    fprintf(f,
            "    avg request %.1f us = queue %.1f + compute input %.1f + compute infer %.1f + compute output %.1f"
            " + overhead %.1f\n",
            r->server_avg_us, r->server_queue_us, r->server_cin_us, r->server_infer_us, r->server_cout_us,
            r->server_overhead_us);
  } else {
    fprintf(f, "  Server: statistics not available\n");
  }
  fprintf(f, "    (%d window%s)\n\n", r->trials, r->trials == 1 ? "" : "s");
}

void nrd_perf_report_table(FILE *f, const nrd_perf_opts *o, const nrd_perf_row *rows, int n) {
  fprintf(f, "Summary (latency in us; server columns: average per request)\n");
  fprintf(f, "%12s %12s %9s %9s %9s %9s %9s %9s %9s %9s  %s\n", o->rate_mode ? "rate/s" : "concurrency", "infer/s",
          "avg", "p50", "p90", "p95", "p99", "srv.queue", "srv.infer", "srv.total", "stable");
  for (int i = 0; i < n; i++) {
    const nrd_perf_row *r = &rows[i];
    char lvl[32];
    if (o->rate_mode)
      snprintf(lvl, sizeof lvl, "%g", r->rate);
    else
      snprintf(lvl, sizeof lvl, "%d", r->concurrency);
    fprintf(f, "%12s %12.1f %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f  %s\n", lvl, r->throughput, r->avg_us,
            r->p50_us, r->p90_us, r->p95_us, r->p99_us, r->server_queue_us,
            r->server_cin_us + r->server_infer_us + r->server_cout_us, r->server_avg_us, r->stable ? "yes" : "no");
  }
}

bool nrd_perf_report_csv(const char *path, const nrd_perf_opts *o, const nrd_perf_row *rows, int n, char *err,
                         size_t errlen) {
  FILE *f = fopen(path, "w");
  if (!f) {
    snprintf(err, errlen, "-f %s: %s", path, strerror(errno));
    return false;
  }
  fprintf(f,
          "%s,Inferences/Second,Server Queue,Server Compute Input,Server Compute Infer,"
          "Server Compute Output,Server Overhead,p50 latency,p90 latency,p95 latency,p99 latency,"
          "Avg latency,Requests,Errors,Delayed,Stable\n",
          o->rate_mode ? "Request Rate" : "Concurrency");
  for (int i = 0; i < n; i++) {
    const nrd_perf_row *r = &rows[i];
    if (o->rate_mode)
      fprintf(f, "%g,", r->rate);
    else
      fprintf(f, "%d,", r->concurrency);
    fprintf(f, "%.2f,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%llu,%llu,%llu,%s\n", r->throughput,
            r->server_queue_us, r->server_cin_us, r->server_infer_us, r->server_cout_us, r->server_overhead_us,
            r->p50_us, r->p90_us, r->p95_us, r->p99_us, r->avg_us, (unsigned long long)r->requests,
            (unsigned long long)r->errors, (unsigned long long)r->delayed, r->stable ? "yes" : "no");
  }
  if (fclose(f)) {
    snprintf(err, errlen, "-f %s: %s", path, strerror(errno));
    return false;
  }
  return true;
}

bool nrd_perf_report_json(const char *path, const nrd_perf_opts *o, const nrd_perf_row *rows, int n, char *err,
                          size_t errlen) {
  json_t *root = json_object(), *arr = json_array();
  json_object_set_new(root, "model", json_string(o->model));
  json_object_set_new(root, "model_version", json_integer(o->version));
  json_object_set_new(root, "service_kind", json_string(nrd_perf_service_name(o->service)));
  if (o->service != NRD_PERF_SERVICE_INPROCESS) json_object_set_new(root, "url", json_string(o->url));
  json_object_set_new(root, "mode", json_string(o->rate_mode ? "request_rate" : "concurrency"));
  json_object_set_new(root, "batch_size", json_integer(o->batch));
  json_object_set_new(root, "measurement_interval_ms", json_integer(o->window_ms));
  json_object_set_new(root, "stability_percentage", json_real(o->stability_pct));
  json_object_set_new(root, "percentile", json_integer(o->percentile ? o->percentile : 50));
  for (int i = 0; i < n; i++) {
    const nrd_perf_row *r = &rows[i];
    json_t *e = json_object(), *lat = json_object(), *srv = json_object();
    if (o->rate_mode)
      json_object_set_new(e, "request_rate", json_real(r->rate));
    else
      json_object_set_new(e, "concurrency", json_integer(r->concurrency));
    json_object_set_new(e, "throughput_infer_per_sec", json_real(r->throughput));
    json_object_set_new(e, "requests", json_integer((json_int_t)r->requests));
    json_object_set_new(e, "errors", json_integer((json_int_t)r->errors));
    json_object_set_new(e, "delayed", json_integer((json_int_t)r->delayed));
    json_object_set_new(e, "seconds", json_real(r->seconds));
    json_object_set_new(e, "stable", json_boolean(r->stable));
    json_object_set_new(e, "windows", json_integer(r->trials));
    json_object_set_new(lat, "avg", json_real(r->avg_us));
    json_object_set_new(lat, "min", json_real(r->min_us));
    json_object_set_new(lat, "max", json_real(r->max_us));
    json_object_set_new(lat, "p50", json_real(r->p50_us));
    json_object_set_new(lat, "p90", json_real(r->p90_us));
    json_object_set_new(lat, "p95", json_real(r->p95_us));
    json_object_set_new(lat, "p99", json_real(r->p99_us));
    if (o->percentile) {
      char k[8];
      snprintf(k, sizeof k, "p%d", o->percentile);
      json_object_set_new(lat, k, json_real(r->pct_us));
    }
    json_object_set_new(e, "latency_us", lat);
    if (r->server_valid) {
      json_object_set_new(srv, "requests", json_integer((json_int_t)r->server_requests));
      json_object_set_new(srv, "executions", json_integer((json_int_t)r->server_executions));
      json_object_set_new(srv, "request_us", json_real(r->server_avg_us));
      json_object_set_new(srv, "queue_us", json_real(r->server_queue_us));
      json_object_set_new(srv, "compute_input_us", json_real(r->server_cin_us));
      json_object_set_new(srv, "compute_infer_us", json_real(r->server_infer_us));
      json_object_set_new(srv, "compute_output_us", json_real(r->server_cout_us));
      json_object_set_new(srv, "overhead_us", json_real(r->server_overhead_us));
      json_object_set_new(e, "server", srv);
    } else {
      json_decref(srv);
      json_object_set_new(e, "server", json_null());
    }
    json_array_append_new(arr, e);
  }
  json_object_set_new(root, "results", arr);
  int rc = json_dump_file(root, path, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
  json_decref(root);
  if (rc) {
    snprintf(err, errlen, "--json %s: cannot write the file", path);
    return false;
  }
  return true;
}

void nrd_perf_progress(const char *level, int trial, int max_trials, double elapsed_s, double window_s,
                       unsigned long long requests) {
  if (!isatty(STDERR_FILENO)) return;
  fprintf(stderr, "\r\033[K  %s: window %d/%d  %.1f/%.1f s  %llu requests", level, trial, max_trials, elapsed_s,
          window_s, requests);
  fflush(stderr);
}

void nrd_perf_progress_clear(void) {
  if (!isatty(STDERR_FILENO)) return;
  fprintf(stderr, "\r\033[K");
  fflush(stderr);
}
