/* Process-wide logging in Triton's line format.
 *
 * Default format:  "I1122 04:16:12.123456 1234 file.c:42] message"
 *   (severity letter E/W/I, UTC month+day, UTC time with microseconds,
 *   process id, source file base name and line). Verbose lines use 'I'.
 * ISO8601 format:  "2024-11-22T04:16:12Z I 1234 file.c:42] message"
 *
 * Settings are process-wide (as in Triton, whose server options change the
 * global logger). Every function here is safe from any thread; each call
 * writes exactly one whole line (or nothing) with a single write under a
 * lock, so lines from different threads never interleave. */
#ifndef NRD_LOG_H
#define NRD_LOG_H

#include <jansson.h>
#include <stdbool.h>

#include "triton/core/tritonserver.h"

/* True when messages of `level` would be written. For
 * TRITONSERVER_LOG_VERBOSE this means verbose level >= 1. Any thread. */
bool nrd_log_enabled(TRITONSERVER_LogLevel level);

/* True when verbose messages of `level` (>= 1) would be written. Any thread. */
bool nrd_log_verbose_enabled(int level);

/* Writes one line at `level` when that level is enabled. `file` may be NULL
 * (printed as "?"); only its base name is printed. The message is formatted
 * printf-style; an embedded newline is kept as is. Output failures are
 * ignored (logging never fails the caller). Any thread. */
void nrd_log(TRITONSERVER_LogLevel level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Writes one verbose line when the verbose level is >= `level`. Any thread. */
void nrd_log_verbose(int level, const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* The logging macros: check the level first, so arguments are not evaluated
 * when the level is off. */
#define NRD_LOG_INFO(...)                                                                                              \
  do {                                                                                                                 \
    if (nrd_log_enabled(TRITONSERVER_LOG_INFO)) nrd_log(TRITONSERVER_LOG_INFO, __FILE__, __LINE__, __VA_ARGS__);       \
  } while (0)
#define NRD_LOG_WARN(...)                                                                                              \
  do {                                                                                                                 \
    if (nrd_log_enabled(TRITONSERVER_LOG_WARN)) nrd_log(TRITONSERVER_LOG_WARN, __FILE__, __LINE__, __VA_ARGS__);       \
  } while (0)
#define NRD_LOG_ERROR(...)                                                                                             \
  do {                                                                                                                 \
    if (nrd_log_enabled(TRITONSERVER_LOG_ERROR)) nrd_log(TRITONSERVER_LOG_ERROR, __FILE__, __LINE__, __VA_ARGS__);     \
  } while (0)
#define NRD_LOG_VERBOSE(lvl, ...)                                                                                      \
  do {                                                                                                                 \
    if (nrd_log_verbose_enabled(lvl)) nrd_log_verbose((lvl), __FILE__, __LINE__, __VA_ARGS__);                         \
  } while (0)

/* An error the core drops on purpose: logs `why` and the error's message
 * at verbose level 1 (with the caller's file and line), then deletes
 * `err`; NULL does nothing. For errors that change nothing for anyone
 * (the request is answered another way, the object is gone already), so
 * that none is dropped without a word. Here rather than in error.c, which
 * log.c calls: error.c calling log.c would make the two a cycle. Any
 * thread; takes ownership of `err`. */
void nrd_log_error_ignored(TRITONSERVER_Error *err, const char *file, int line, const char *why);
#define NRD_ERROR_IGNORE(err, why) nrd_log_error_ignored((err), __FILE__, __LINE__, (why))

/* Setters used by server options and the logging endpoint. Any thread; they
 * take effect for the next line written. Defaults: info, warning and error on,
 * verbose 0, default format, standard error. */
void nrd_log_set_info(bool on);
void nrd_log_set_warn(bool on);
void nrd_log_set_error(bool on);
/* Levels below 0 are treated as 0 (verbose off). */
void nrd_log_set_verbose(int level);
/* Unknown formats are ignored; callers validate first. */
void nrd_log_set_format(TRITONSERVER_LogFormat format);

/* Sends output to `path`, opened for appending; NULL or "" means standard
 * error. Returns 0, or an errno value when the file cannot be opened, in which
 * case the previous destination stays in use. The path is copied. Any thread. */
int nrd_log_set_file(const char *path);

/* Current settings. Any thread. */
bool nrd_log_info_on(void);
bool nrd_log_warn_on(void);
bool nrd_log_error_on(void);
int nrd_log_verbose_level(void);
TRITONSERVER_LogFormat nrd_log_format(void);

/* Copies the current log file path ("" for standard error) into `buf` of
 * `size` bytes, truncating if needed. Any thread. */
void nrd_log_file(char *buf, size_t size);

/* The current settings as a JSON object with Triton's logging-endpoint keys:
 * log_file (string), log_info, log_warning, log_error (booleans),
 * log_verbose_level (integer), log_format ("default" or "ISO8601").
 * Returns a new reference owned by the caller, or NULL on out-of-memory.
 * Any thread. */
json_t *nrd_log_settings_json(void);

/* Restores every setting to its default and closes any log file. For tests
 * and server shutdown. Any thread. */
void nrd_log_reset(void);

#endif
