/* nrd_perf output: the settings banner, one block per load level and a
 * summary table on stdout, a progress line on stderr (only when stderr is
 * a terminal), and the CSV and JSON reports.
 *
 * Threads: main thread only. */
#ifndef NRD_PERF_REPORT_H
#define NRD_PERF_REPORT_H

#include <stdbool.h>
#include <stdio.h>

#include "measure.h"
#include "options.h"

void nrd_perf_report_banner(FILE *f, const nrd_perf_opts *o);

/* The block of one finished load level. */
void nrd_perf_report_level(FILE *f, const nrd_perf_opts *o, const nrd_perf_row *r);

/* The summary table of every level. */
void nrd_perf_report_table(FILE *f, const nrd_perf_opts *o, const nrd_perf_row *rows, int n);

/* Writes the CSV / JSON report to `path`; false with a message in err. */
bool nrd_perf_report_csv(const char *path, const nrd_perf_opts *o, const nrd_perf_row *rows, int n, char *err,
                         size_t errlen);
bool nrd_perf_report_json(const char *path, const nrd_perf_opts *o, const nrd_perf_row *rows, int n, char *err,
                          size_t errlen);

/* Progress on stderr, overwritten in place; a no-op unless stderr is a
 * terminal. `level` names the load level ("concurrency 4"). */
void nrd_perf_progress(const char *level, int trial, int max_trials, double elapsed_s, double window_s,
                       unsigned long long requests);

/* Clears the progress line (no-op unless stderr is a terminal). */
void nrd_perf_progress_clear(void);

#endif
