/* Process-wide logger. Level switches are atomics so the hot-path check costs
 * one load; the output stream and its path are guarded by one mutex, held only
 * while a fully formatted line is written. */
#include "log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "error.h"

static atomic_bool log_info = true;
static atomic_bool log_warn = true;
static atomic_bool log_error = true;
static atomic_int log_verbose = 0;
static atomic_int log_fmt = TRITONSERVER_LOG_DEFAULT;

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static FILE *log_fp; /* NULL means stderr; guarded by log_mu */
static char *log_path; /* NULL means stderr; guarded by log_mu */

bool nrd_log_enabled(TRITONSERVER_LogLevel level) {
  switch (level) {
    case TRITONSERVER_LOG_INFO: return atomic_load(&log_info);
    case TRITONSERVER_LOG_WARN: return atomic_load(&log_warn);
    case TRITONSERVER_LOG_ERROR: return atomic_load(&log_error);
    case TRITONSERVER_LOG_VERBOSE: return atomic_load(&log_verbose) >= 1;
  }
  return false;
}

bool nrd_log_verbose_enabled(int level) { return level >= 1 && atomic_load(&log_verbose) >= level; }

static char level_letter(TRITONSERVER_LogLevel level) {
  switch (level) {
    case TRITONSERVER_LOG_ERROR: return 'E';
    case TRITONSERVER_LOG_WARN: return 'W';
    default: return 'I';
  }
}

static const char *base_name(const char *file) {
  if (file == NULL || file[0] == '\0') return "?";
  const char *slash = strrchr(file, '/');
  return slash != NULL ? slash + 1 : file;
}

/* Formats the line prefix into buf (which is large enough for any prefix
 * given a bounded file name; longer names are truncated by snprintf). */
static int format_prefix(char *buf, size_t size, TRITONSERVER_LogLevel level, const char *file, int line) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  unsigned pid = (unsigned)getpid();
  if (atomic_load(&log_fmt) == TRITONSERVER_LOG_ISO8601) {
    return snprintf(buf, size, "%04d-%02d-%02dT%02d:%02d:%02dZ %c %u %s:%d] ", tm.tm_year + 1900, tm.tm_mon + 1,
                    tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, level_letter(level), pid, base_name(file), line);
  }
  return snprintf(buf, size, "%c%02d%02d %02d:%02d:%02d.%06ld %u %s:%d] ", level_letter(level), tm.tm_mon + 1,
                  tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (long)(ts.tv_nsec / 1000), pid, base_name(file), line);
}

/* As Triton's logger: a message is written as a JSON string (quoted,
 * with JSON's escapes) unless TRITON_SERVER_ESCAPE_LOG_MESSAGES is "0".
 * Read at the first message (again after nrd_log_reset); -1: not yet. */
static atomic_int escape_state = -1;

static bool escape_messages(void) {
  int v = atomic_load_explicit(&escape_state, memory_order_relaxed);
  if (v < 0) {
    const char *env = getenv("TRITON_SERVER_ESCAPE_LOG_MESSAGES");
    v = !(env != NULL && strcmp(env, "0") == 0);
    atomic_store_explicit(&escape_state, v, memory_order_relaxed);
  }
  return v != 0;
}

/* Writes msg[0..len) to fp as a JSON string. fp locked by the caller. */
static void write_escaped(FILE *fp, const char *msg, size_t len) {
  static const char hex[] = "0123456789ABCDEF";
  putc_unlocked('"', fp);
  for (size_t i = 0; i < len; i++) {
    unsigned char ch = (unsigned char)msg[i];
    const char *esc = NULL;
    switch (ch) {
      case '"': esc = "\\\""; break;
      case '\\': esc = "\\\\"; break;
      case '\b': esc = "\\b"; break;
      case '\f': esc = "\\f"; break;
      case '\n': esc = "\\n"; break;
      case '\r': esc = "\\r"; break;
      case '\t': esc = "\\t"; break;
      default: break;
    }
    if (esc != NULL) {
      fputs_unlocked(esc, fp);
    } else if (ch < 0x20) {
      char u[7] = {'\\', 'u', '0', '0', hex[ch >> 4], hex[ch & 15], '\0'};
      fputs_unlocked(u, fp);
    } else {
      putc_unlocked((int)ch, fp);
    }
  }
  putc_unlocked('"', fp);
}

static void write_line(TRITONSERVER_LogLevel level, const char *file, int line, const char *fmt, va_list ap) {
  char prefix[512];
  int plen = format_prefix(prefix, sizeof(prefix), level, file, line);
  if (plen < 0) return;
  if ((size_t)plen >= sizeof(prefix)) plen = (int)sizeof(prefix) - 1;

  char small[1024];
  va_list ap2;
  va_copy(ap2, ap);
  int mlen = vsnprintf(small, sizeof(small), fmt, ap);
  char *msg = small;
  if (mlen < 0) {
    va_end(ap2);
    return;
  }
  if ((size_t)mlen >= sizeof(small)) {
    msg = malloc((size_t)mlen + 1);
    if (msg == NULL) {
      msg = small; /* out of memory: keep the truncated text */
      mlen = (int)sizeof(small) - 1;
    } else {
      vsnprintf(msg, (size_t)mlen + 1, fmt, ap2);
    }
  }
  va_end(ap2);

  pthread_mutex_lock(&log_mu);
  FILE *fp = log_fp != NULL ? log_fp : stderr;
  flockfile(fp);
  fwrite(prefix, 1, (size_t)plen, fp);
  if (escape_messages())
    write_escaped(fp, msg, (size_t)mlen);
  else
    fwrite(msg, 1, (size_t)mlen, fp);
  fputc('\n', fp);
  fflush(fp);
  funlockfile(fp);
  pthread_mutex_unlock(&log_mu);
  if (msg != small) free(msg);
}

void nrd_log(TRITONSERVER_LogLevel level, const char *file, int line, const char *fmt, ...) {
  if (!nrd_log_enabled(level)) return;
  va_list ap;
  va_start(ap, fmt);
  write_line(level, file, line, fmt, ap);
  va_end(ap);
}

void nrd_log_verbose(int level, const char *file, int line, const char *fmt, ...) {
  if (!nrd_log_verbose_enabled(level)) return;
  va_list ap;
  va_start(ap, fmt);
  write_line(TRITONSERVER_LOG_VERBOSE, file, line, fmt, ap);
  va_end(ap);
}

void nrd_log_set_info(bool on) { atomic_store(&log_info, on); }
void nrd_log_set_warn(bool on) { atomic_store(&log_warn, on); }
void nrd_log_set_error(bool on) { atomic_store(&log_error, on); }
void nrd_log_set_verbose(int level) { atomic_store(&log_verbose, level < 0 ? 0 : level); }

void nrd_log_set_format(TRITONSERVER_LogFormat format) {
  if (format == TRITONSERVER_LOG_DEFAULT || format == TRITONSERVER_LOG_ISO8601) atomic_store(&log_fmt, (int)format);
}

int nrd_log_set_file(const char *path) {
  FILE *fp = NULL;
  char *copy = NULL;
  if (path != NULL && path[0] != '\0') {
    copy = strdup(path);
    if (copy == NULL) return ENOMEM;
    fp = fopen(path, "a");
    if (fp == NULL) {
      int e = errno;
      free(copy);
      return e != 0 ? e : EIO;
    }
  }
  pthread_mutex_lock(&log_mu);
  FILE *old_fp = log_fp;
  char *old_path = log_path;
  log_fp = fp;
  log_path = copy;
  pthread_mutex_unlock(&log_mu);
  if (old_fp != NULL) fclose(old_fp);
  free(old_path);
  return 0;
}

bool nrd_log_info_on(void) { return atomic_load(&log_info); }
bool nrd_log_warn_on(void) { return atomic_load(&log_warn); }
bool nrd_log_error_on(void) { return atomic_load(&log_error); }
int nrd_log_verbose_level(void) { return atomic_load(&log_verbose); }
TRITONSERVER_LogFormat nrd_log_format(void) { return (TRITONSERVER_LogFormat)atomic_load(&log_fmt); }

void nrd_log_file(char *buf, size_t size) {
  if (buf == NULL || size == 0) return;
  pthread_mutex_lock(&log_mu);
  snprintf(buf, size, "%s", log_path != NULL ? log_path : "");
  pthread_mutex_unlock(&log_mu);
}

json_t *nrd_log_settings_json(void) {
  json_t *obj = json_object();
  if (obj == NULL) return NULL;
  pthread_mutex_lock(&log_mu);
  json_t *file = json_string(log_path != NULL ? log_path : "");
  pthread_mutex_unlock(&log_mu);
  int rc = json_object_set_new(obj, "log_file", file);
  rc |= json_object_set_new(obj, "log_info", json_boolean(nrd_log_info_on()));
  rc |= json_object_set_new(obj, "log_warning", json_boolean(nrd_log_warn_on()));
  rc |= json_object_set_new(obj, "log_error", json_boolean(nrd_log_error_on()));
  rc |= json_object_set_new(obj, "log_verbose_level", json_integer(nrd_log_verbose_level()));
  rc |= json_object_set_new(obj, "log_format",
                            json_string(nrd_log_format() == TRITONSERVER_LOG_ISO8601 ? "ISO8601" : "default"));
  if (rc != 0) {
    json_decref(obj);
    return NULL;
  }
  return obj;
}

void nrd_log_reset(void) {
  nrd_log_set_info(true);
  nrd_log_set_warn(true);
  nrd_log_set_error(true);
  nrd_log_set_verbose(0);
  nrd_log_set_format(TRITONSERVER_LOG_DEFAULT);
  (void)nrd_log_set_file(NULL);
  atomic_store(&escape_state, -1);
}

bool TRITONSERVER_LogIsEnabled(TRITONSERVER_LogLevel level) { return nrd_log_enabled(level); }

TRITONSERVER_Error *TRITONSERVER_LogMessage(TRITONSERVER_LogLevel level, const char *filename, const int line,
                                            const char *msg) {
  if (level != TRITONSERVER_LOG_INFO && level != TRITONSERVER_LOG_WARN && level != TRITONSERVER_LOG_ERROR &&
      level != TRITONSERVER_LOG_VERBOSE)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "unknown log level %d", (int)level);
  if (msg == NULL) return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "log message must not be NULL");
  nrd_log(level, filename, line, "%s", msg);
  return NULL;
}

void nrd_log_error_ignored(TRITONSERVER_Error *err, const char *file, int line, const char *why) {
  if (!err) return;
  if (nrd_log_verbose_enabled(1))
    nrd_log_verbose(1, file, line, "%s (ignored): %s", why, TRITONSERVER_ErrorMessage(err));
  TRITONSERVER_ErrorDelete(err);
}
