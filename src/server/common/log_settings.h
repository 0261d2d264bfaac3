/* The log settings of Triton's logging extension, shared by the HTTP
 * (/v2/logging) and gRPC (LogSettings) front ends.
 *
 * The public API reads the INFO/WARN/ERROR switches with
 * TRITONSERVER_LogIsEnabled but has no reader for the log file, verbose
 * level or format, and no setter that takes no server options. As in
 * Triton, the TRITONSERVER_ServerOptionsSetLog* setters change the
 * process-wide logger as they are called, so an update goes through a
 * scratch options object, and this module remembers the file, verbose
 * level and format nereid started with and what was set since.
 *
 * Threads: every function may be called from any thread. */
#ifndef NRD_SRV_LOG_SETTINGS_H
#define NRD_SRV_LOG_SETTINGS_H

#include <stdbool.h>
#include <stdint.h>

#include "triton/core/tritonserver.h"

typedef struct nrd_srv_log_settings nrd_srv_log_settings;

/* Writes one printf-formatted line (cut at 1 KiB) through the server's
 * logger, so the --log-* flags apply, naming `file`:`line`; a failure to
 * log is ignored. Any thread. */
void nrd_srv_logf(TRITONSERVER_LogLevel level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* What a client reads back. `file` is a copy the caller frees. */
typedef struct nrd_srv_log_snapshot {
  char *file; /* "" for standard error */
  bool info, warning, error;
  uint32_t verbose_level;
  TRITONSERVER_LogFormat format;
} nrd_srv_log_snapshot;

/* One update; a `has_*` flag false leaves that setting alone. */
typedef struct nrd_srv_log_update {
  bool has_file; /* any file change is refused (UNSUPPORTED), as Triton */
  bool has_info, info;
  bool has_warning, warning;
  bool has_error, error;
  bool has_verbose_level;
  uint32_t verbose_level;
  bool has_format;
  const char *format; /* "default" or "ISO8601"; others are UNAVAILABLE, as Triton */
} nrd_srv_log_update;

/* Creates the settings as nereid started (file may be NULL). Returns NULL
 * when memory runs out; the caller frees it with nrd_srv_log_settings_free. */
nrd_srv_log_settings *nrd_srv_log_settings_new(const char *file, int verbose, TRITONSERVER_LogFormat format);

/* Frees ls; NULL is a no-op. No other thread may be using it. */
void nrd_srv_log_settings_free(nrd_srv_log_settings *ls);

/* Fills *out with the current settings. Returns 0, or -1 when memory runs
 * out (nothing to free then). */
int nrd_srv_log_settings_get(nrd_srv_log_settings *ls, nrd_srv_log_snapshot *out);

/* Validates every part of u, then applies them all; on error nothing is
 * changed and the caller owns the returned error (UNSUPPORTED for a file,
 * UNAVAILABLE for an unknown format, as Triton answers). */
TRITONSERVER_Error *nrd_srv_log_settings_update(nrd_srv_log_settings *ls, const nrd_srv_log_update *u);

#endif
