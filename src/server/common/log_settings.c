/* Log settings shared by the front ends: see log_settings.h. */
#include "log_settings.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct nrd_srv_log_settings {
  pthread_mutex_t mu; /* guards the fields below and serializes updates */
  char *file;
  uint32_t verbose;
  TRITONSERVER_LogFormat format;
};

nrd_srv_log_settings *nrd_srv_log_settings_new(const char *file, int verbose, TRITONSERVER_LogFormat format) {
  nrd_srv_log_settings *ls = calloc(1, sizeof *ls);
  if (ls == NULL) return NULL;
  ls->file = strdup(file ? file : "");
  if (ls->file == NULL) {
    free(ls);
    return NULL;
  }
  pthread_mutex_init(&ls->mu, NULL);
  ls->verbose = verbose > 0 ? (uint32_t)verbose : 0;
  ls->format = format;
  return ls;
}

void nrd_srv_log_settings_free(nrd_srv_log_settings *ls) {
  if (ls == NULL) return;
  pthread_mutex_destroy(&ls->mu);
  free(ls->file);
  free(ls);
}

int nrd_srv_log_settings_get(nrd_srv_log_settings *ls, nrd_srv_log_snapshot *out) {
  pthread_mutex_lock(&ls->mu);
  out->file = strdup(ls->file);
  out->verbose_level = ls->verbose;
  out->format = ls->format;
  pthread_mutex_unlock(&ls->mu);
  out->info = TRITONSERVER_LogIsEnabled(TRITONSERVER_LOG_INFO);
  out->warning = TRITONSERVER_LogIsEnabled(TRITONSERVER_LOG_WARN);
  out->error = TRITONSERVER_LogIsEnabled(TRITONSERVER_LOG_ERROR);
  return out->file ? 0 : -1;
}

TRITONSERVER_Error *nrd_srv_log_settings_update(nrd_srv_log_settings *ls, const nrd_srv_log_update *u) {
  if (u->has_file)
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNSUPPORTED,
                                 "log file location can not be updated through network protocol");
  TRITONSERVER_LogFormat fmt = TRITONSERVER_LOG_DEFAULT;
  if (u->has_format) {
    const char *f = u->format ? u->format : "";
    if (strcmp(f, "ISO8601") == 0) {
      fmt = TRITONSERVER_LOG_ISO8601;
    } else if (strcmp(f, "default") != 0) {
      char msg[200];
      snprintf(msg, sizeof msg, "invalid argument for --log_format, got: %.100s", f);
      return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, msg);
    }
  }
  if (u->has_verbose_level && u->verbose_level > INT32_MAX)
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG,
                                 "Unable to parse 'log_verbose_level': expected an unsigned integer");
  TRITONSERVER_ServerOptions *o = NULL;
  TRITONSERVER_Error *err = TRITONSERVER_ServerOptionsNew(&o);
  pthread_mutex_lock(&ls->mu);
  if (u->has_info && !err) err = TRITONSERVER_ServerOptionsSetLogInfo(o, u->info);
  if (u->has_warning && !err) err = TRITONSERVER_ServerOptionsSetLogWarn(o, u->warning);
  if (u->has_error && !err) err = TRITONSERVER_ServerOptionsSetLogError(o, u->error);
  if (u->has_verbose_level && !err) {
    err = TRITONSERVER_ServerOptionsSetLogVerbose(o, (int)u->verbose_level);
    if (!err) ls->verbose = u->verbose_level;
  }
  if (u->has_format && !err) {
    err = TRITONSERVER_ServerOptionsSetLogFormat(o, fmt);
    if (!err) ls->format = fmt;
  }
  pthread_mutex_unlock(&ls->mu);
  if (o) TRITONSERVER_ServerOptionsDelete(o);
  return err;
}

void nrd_srv_logf(TRITONSERVER_LogLevel level, const char *file, int line, const char *fmt, ...) {
  if (!TRITONSERVER_LogIsEnabled(level)) return;
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  TRITONSERVER_Error *err = TRITONSERVER_LogMessage(level, file, line, buf);
  if (err) TRITONSERVER_ErrorDelete(err);
}
