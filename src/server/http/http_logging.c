/* The logging extension (GET/POST /v2/logging, on the shared settings of
 * log_settings.h) and the trace extension's routes
 * (/v2/trace/setting, /v2/models/{model}/trace/setting), answered by the
 * tracer the front end was given (trace_hook.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "http_internal.h"

void nrd_srv_http_trace(nrd_srv_http *h, nrd_srv_http_req *req, const char *model) {
  nrd_srv_http_method m = req->method;
  if (m != NRD_SRV_HTTP_GET && m != NRD_SRV_HTTP_POST && m != NRD_SRV_HTTP_HEAD)
    return nrd_srv_http_reply_error(req, 405, "Method Not Allowed");
  json_t *j = NULL, *out = NULL;
  TRITONSERVER_Error *err = NULL;
  if (m == NRD_SRV_HTTP_POST) {
    if (nrd_srv_http_body_json(req, &j) != 0) return;
    err = j ? nrd_srv_tracer_update(h->tracer, model, j, &out) : nrd_srv_tracer_get(h->tracer, model, &out);
    json_decref(j);
  } else {
    err = nrd_srv_tracer_get(h->tracer, model, &out);
  }
  if (err) return nrd_srv_http_reply_tserr(req, err);
  char *text = json_dumps(out, JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_decref(out);
  if (text == NULL) return nrd_srv_http_reply_error(req, 500, "out of memory");
  nrd_srv_http_reply_json(req, 200, text, strlen(text));
  free(text);
}

static void reply_settings(nrd_srv_http *h, nrd_srv_http_req *req) {
  nrd_srv_log_snapshot snap;
  if (nrd_srv_log_settings_get(h->log, &snap) != 0) return nrd_srv_http_reply_error(req, 500, "out of memory");
  json_t *o =
      json_pack("{s:s,s:b,s:b,s:b,s:I,s:s}", "log_file", snap.file, "log_info", (int)snap.info, "log_warning",
                (int)snap.warning, "log_error", (int)snap.error, "log_verbose_level", (json_int_t)snap.verbose_level,
                "log_format", snap.format == TRITONSERVER_LOG_ISO8601 ? "ISO8601" : "default");
  free(snap.file);
  char *text = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
  json_decref(o);
  if (text == NULL) return nrd_srv_http_reply_error(req, 500, "out of memory");
  nrd_srv_http_reply_json(req, 200, text, strlen(text));
  free(text);
}

/* Checks the JSON types of every setting, then hands them to the shared
 * settings. Returns 0, or an HTTP status with msg. */
static int update(nrd_srv_http *h, json_t *j, char *msg, size_t msglen) {
  static const char *bools[] = {"log_info", "log_warning", "log_error"};
  nrd_srv_log_update u = {0};
  json_t *v = json_object_get(j, "log_file");
  u.has_file = v && !json_is_null(v);
  bool *has[] = {&u.has_info, &u.has_warning, &u.has_error};
  bool *val[] = {&u.info, &u.warning, &u.error};
  for (int i = 0; i < 3; i++) {
    v = json_object_get(j, bools[i]);
    if (v == NULL || json_is_null(v)) continue;
    if (!json_is_boolean(v)) { /* Triton's JSON type error: INTERNAL, 500 */
      snprintf(msg, msglen, "attempt to access JSON non-boolean as boolean (field '%s')", bools[i]);
      return 500;
    }
    *has[i] = true;
    *val[i] = json_is_true(v);
  }
  v = json_object_get(j, "log_verbose_level");
  if (v && !json_is_null(v)) {
    if (!json_is_integer(v) || json_integer_value(v) < 0) {
      snprintf(msg, msglen, "attempt to access JSON non-unsigned-integer as unsigned-integer (field 'log_verbose_level')");
      return 500;
    }
    if (json_integer_value(v) > INT32_MAX) {
      snprintf(msg, msglen, "Unable to parse 'log_verbose_level': at most %d", INT32_MAX);
      return 400;
    }
    u.has_verbose_level = true;
    u.verbose_level = (uint32_t)json_integer_value(v);
  }
  v = json_object_get(j, "log_format");
  if (v && !json_is_null(v)) {
    if (!json_is_string(v)) {
      snprintf(msg, msglen, "attempt to access JSON non-string as string (field 'log_format')");
      return 500;
    }
    u.has_format = true;
    u.format = json_string_value(v);
  }
  TRITONSERVER_Error *err = nrd_srv_log_settings_update(h->log, &u);
  if (err == NULL) return 0;
  snprintf(msg, msglen, "%s", TRITONSERVER_ErrorMessage(err));
  int status = nrd_srv_http_status(err);
  TRITONSERVER_ErrorDelete(err);
  return status;
}

void nrd_srv_http_logging(nrd_srv_http *h, nrd_srv_http_req *req) {
  nrd_srv_http_method m = req->method;
  if (m == NRD_SRV_HTTP_GET || m == NRD_SRV_HTTP_HEAD) return reply_settings(h, req);
  if (m != NRD_SRV_HTTP_POST) return nrd_srv_http_reply_error(req, 405, "Method Not Allowed");
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
