/* The logging extension (GET/POST /v2/logging) and the trace setting
 * routes, which answer that tracing is unsupported.
 *
 * The public API reads the INFO/WARN/ERROR switches with
 * TRITONSERVER_LogIsEnabled but has no reader for the log file, verbose
 * level or format, and no setter that takes no server options. As in
 * Triton, the TRITONSERVER_ServerOptionsSetLog* setters change the
 * process-wide logger as they are called, so an update goes through a
 * scratch options object; the front end remembers the file, verbose level
 * and format it started with and what it set since. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/http.h>
#include <jansson.h>

#include "http_internal.h"

void nrd_srv_http_trace(struct evhttp_request *req) {
  enum evhttp_cmd_type m = evhttp_request_get_command(req);
  if (m != EVHTTP_REQ_GET && m != EVHTTP_REQ_POST && m != EVHTTP_REQ_HEAD)
    return nrd_srv_http_reply_error(req, 405, "Method Not Allowed");
  nrd_srv_http_reply_error(req, 503, "the server does not support tracing");
}

static void reply_settings(nrd_srv_http *h, struct evhttp_request *req) {
  pthread_mutex_lock(&h->log_mu);
  json_t *o = json_pack("{s:s,s:b,s:b,s:b,s:I,s:s}", "log_file", h->log_file ? h->log_file : "",
                        "log_info", (int)TRITONSERVER_LogIsEnabled(TRITONSERVER_LOG_INFO),
                        "log_warning", (int)TRITONSERVER_LogIsEnabled(TRITONSERVER_LOG_WARN),
                        "log_error", (int)TRITONSERVER_LogIsEnabled(TRITONSERVER_LOG_ERROR),
                        "log_verbose_level", (json_int_t)h->log_verbose, "log_format",
                        h->log_format == TRITONSERVER_LOG_ISO8601 ? "ISO8601" : "default");
  pthread_mutex_unlock(&h->log_mu);
  char *text = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
  json_decref(o);
  if (text == NULL) return nrd_srv_http_reply_error(req, 500, "out of memory");
  nrd_srv_http_reply_json(req, 200, text, strlen(text));
  free(text);
}

/* Validates every setting of the request before changing any. Returns 0,
 * or an HTTP status with msg. */
static int update(nrd_srv_http *h, json_t *j, char *msg, size_t msglen) {
  static const char *bools[] = {"log_info", "log_warning", "log_error"};
  json_t *v = json_object_get(j, "log_file");
  if (v && !json_is_null(v)) {
    snprintf(msg, msglen, "log file location can not be updated through network protocol");
    return 501;
  }
  for (int i = 0; i < 3; i++) {
    v = json_object_get(j, bools[i]);
    if (v && !json_is_null(v) && !json_is_boolean(v)) {
      snprintf(msg, msglen, "Unable to parse '%s': expected a boolean", bools[i]);
      return 400;
    }
  }
  json_t *verbose = json_object_get(j, "log_verbose_level");
  if (json_is_null(verbose)) verbose = NULL;
  if (verbose && (!json_is_integer(verbose) || json_integer_value(verbose) < 0 ||
                  json_integer_value(verbose) > INT32_MAX)) {
    snprintf(msg, msglen, "Unable to parse 'log_verbose_level': expected an unsigned integer");
    return 400;
  }
  json_t *format = json_object_get(j, "log_format");
  if (json_is_null(format)) format = NULL;
  TRITONSERVER_LogFormat fmt = TRITONSERVER_LOG_DEFAULT;
  if (format) {
    const char *f = json_is_string(format) ? json_string_value(format) : "";
    if (strcmp(f, "ISO8601") == 0) {
      fmt = TRITONSERVER_LOG_ISO8601;
    } else if (strcmp(f, "default") != 0) {
      /* Triton answers UNAVAILABLE (503) here. */
      snprintf(msg, msglen, "invalid argument for --log_format, got: %.100s", f);
      return 503;
    }
  }
  TRITONSERVER_ServerOptions *o = NULL;
  TRITONSERVER_Error *err = TRITONSERVER_ServerOptionsNew(&o);
  if ((v = json_object_get(j, "log_info")) && json_is_boolean(v) && !err)
    err = TRITONSERVER_ServerOptionsSetLogInfo(o, json_is_true(v));
  if ((v = json_object_get(j, "log_warning")) && json_is_boolean(v) && !err)
    err = TRITONSERVER_ServerOptionsSetLogWarn(o, json_is_true(v));
  if ((v = json_object_get(j, "log_error")) && json_is_boolean(v) && !err)
    err = TRITONSERVER_ServerOptionsSetLogError(o, json_is_true(v));
  pthread_mutex_lock(&h->log_mu);
  if (verbose && !err) {
    err = TRITONSERVER_ServerOptionsSetLogVerbose(o, (int)json_integer_value(verbose));
    if (!err) h->log_verbose = (int)json_integer_value(verbose);
  }
  if (format && !err) {
    err = TRITONSERVER_ServerOptionsSetLogFormat(o, fmt);
    if (!err) h->log_format = fmt;
  }
  pthread_mutex_unlock(&h->log_mu);
  if (o) TRITONSERVER_ServerOptionsDelete(o);
  if (err) {
    snprintf(msg, msglen, "%s", TRITONSERVER_ErrorMessage(err));
    int status = nrd_srv_http_status(err);
    TRITONSERVER_ErrorDelete(err);
    return status;
  }
  return 0;
}

void nrd_srv_http_logging(nrd_srv_http *h, struct evhttp_request *req) {
  enum evhttp_cmd_type m = evhttp_request_get_command(req);
  if (m == EVHTTP_REQ_GET || m == EVHTTP_REQ_HEAD) return reply_settings(h, req);
  if (m != EVHTTP_REQ_POST) return nrd_srv_http_reply_error(req, 405, "Method Not Allowed");
  json_t *j = NULL;
  if (nrd_srv_http_body_json(req, &j) != 0) return;
  if (j) {
    char msg[300];
    int status = update(h, j, msg, sizeof msg);
    json_decref(j);
    if (status) return nrd_srv_http_reply_error(req, status, msg);
  }
  reply_settings(h, req);
}
