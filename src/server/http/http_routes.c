/* Routing and the non-inference routes of the HTTP front end: server and
 * model metadata, health, readiness, configuration, statistics, the
 * repository extension (index, load, unload) and /metrics. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "http_internal.h"
#include "log_settings.h"
#include "error_ignore.h"

/* ---- small helpers -------------------------------------------------------- */

static bool is_get(nrd_srv_http_req *req) {
  nrd_srv_http_method c = req->method;
  return c == NRD_SRV_HTTP_GET || c == NRD_SRV_HTTP_HEAD;
}

static bool is_post(nrd_srv_http_req *req) { return req->method == NRD_SRV_HTTP_POST; }

static void method_not_allowed(nrd_srv_http_req *req) { nrd_srv_http_reply_error(req, 405, "Method Not Allowed"); }

/* Sends a core message's JSON (200), or err; deletes both. */
static void reply_message(nrd_srv_http_req *req, TRITONSERVER_Error *err, TRITONSERVER_Message *msg) {
  if (err == NULL) {
    const char *base = NULL;
    size_t size = 0;
    err = TRITONSERVER_MessageSerializeToJson(msg, &base, &size);
    if (err == NULL) nrd_srv_http_reply_json(req, 200, base, size);
  }
  if (msg) TRITONSERVER_MessageDelete(msg);
  if (err) nrd_srv_http_reply_tserr(req, err);
}

/* "" is -1 (the version policy chooses); otherwise a whole number >= 0. */
static int parse_version(const char *s, int64_t *out) {
  if (s == NULL || *s == '\0') {
    *out = -1;
    return 0;
  }
  if (!isdigit((unsigned char)*s)) return -1;
  errno = 0;
  char *end = NULL;
  long long v = strtoll(s, &end, 10);
  if (errno != 0 || *end != '\0') return -1;
  *out = v;
  return 0;
}

/* ---- server routes ------------------------------------------------------- */

static void server_metadata(nrd_srv_http *h, nrd_srv_http_req *req) {
  if (!is_get(req)) return method_not_allowed(req);
  TRITONSERVER_Message *msg = NULL;
  TRITONSERVER_Error *err = TRITONSERVER_ServerMetadata(h->server, &msg);
  reply_message(req, err, msg);
}

static void health(nrd_srv_http *h, nrd_srv_http_req *req, bool live) {
  if (!is_get(req)) return method_not_allowed(req);
  bool ok = false;
  TRITONSERVER_Error *err =
      live ? TRITONSERVER_ServerIsLive(h->server, &ok) : TRITONSERVER_ServerIsReady(h->server, &ok);
  nrd_srv_http_reply_empty(req, ok && err == NULL ? 200 : 400);
  NRD_SRV_IGNORE(err, "server health unknown: answered as unhealthy");
}

void nrd_srv_http_metrics(nrd_srv_http *h, nrd_srv_http_req *req) {
  if (!is_get(req)) return method_not_allowed(req);
  TRITONSERVER_Metrics *m = NULL;
  TRITONSERVER_Error *err = TRITONSERVER_ServerMetrics(h->server, &m);
  const char *base = NULL;
  size_t size = 0;
  if (err == NULL) err = TRITONSERVER_MetricsFormatted(m, TRITONSERVER_METRIC_PROMETHEUS, &base, &size);
  if (err == NULL) {
    if (nrd_srv_http_add_header(req, "Content-Type", "text/plain; charset=utf-8") != 0 ||
        nrd_srv_http_add_body(req, base, size) != 0)
      nrd_srv_http_send(req, 500);
    else
      nrd_srv_http_send(req, 200);
  } else {
    nrd_srv_http_reply_tserr(req, err);
  }
  if (m) TRITONSERVER_MetricsDelete(m);
}

/* ---- access --------------------------------------------------------------- */

bool nrd_srv_http_refused(const nrd_srv_http *h, nrd_srv_http_req *req, nrd_srv_api api) {
  const char *header = nrd_srv_restriction_header(h->restricted, api);
  if (!header) return false;
  if (nrd_srv_restriction_allows(h->restricted, api, nrd_srv_http_header_get(req, header))) return false;
  char msg[300];
  snprintf(msg, sizeof msg, "This API is restricted, expecting header '%.200s'", header);
  nrd_srv_http_reply_error(req, 403, msg);
  return true;
}

/* The API group of a model route's action (NULL: metadata). */
static nrd_srv_api model_action_api(const char *action) {
  if (!action) return NRD_SRV_API_METADATA;
  if (!strcmp(action, "ready")) return NRD_SRV_API_HEALTH;
  if (!strcmp(action, "config")) return NRD_SRV_API_MODEL_CONFIG;
  if (!strcmp(action, "stats")) return NRD_SRV_API_STATISTICS;
  if (!strcmp(action, "trace/setting")) return NRD_SRV_API_TRACE;
  return NRD_SRV_API_INFERENCE; /* infer, generate, generate_stream; others are 404 anyway */
}

/* ---- model routes -------------------------------------------------------- */

static void model_route(nrd_srv_http_loop *loop, nrd_srv_http_req *req, const char *model, const char *version_str,
                        const char *action) {
  nrd_srv_http *h = loop->http;
  if (nrd_srv_http_refused(h, req, model_action_api(action))) return;
  int64_t version = -1;
  /* Triton's route takes only digits as a version: anything else is no
   * route at all. */
  if (version_str && *version_str && strspn(version_str, "0123456789") != strlen(version_str))
    return nrd_srv_http_reply_error(req, 404, "Not Found");
  if (parse_version(version_str, &version) != 0) {
    char msg[200];
    snprintf(msg, sizeof msg, "failed to get model version from specified version string '%.100s'", version_str);
    return nrd_srv_http_reply_error(req, 400, msg);
  }
  if (*model == '\0') return nrd_srv_http_reply_error(req, 400, "Missing model name in request");
  TRITONSERVER_Message *msg = NULL;
  TRITONSERVER_Error *err = NULL;
  if (action == NULL) {
    if (!is_get(req)) return method_not_allowed(req);
    err = TRITONSERVER_ServerModelMetadata(h->server, model, version, &msg);
    return reply_message(req, err, msg);
  }
  if (strcmp(action, "ready") == 0) {
    if (!is_get(req)) return method_not_allowed(req);
    bool ready = false;
    err = TRITONSERVER_ServerModelIsReady(h->server, model, version, &ready);
    if (err) return nrd_srv_http_reply_tserr(req, err);
    if (!ready) return nrd_srv_http_reply_error(req, 400, "Model version not ready");
    return nrd_srv_http_reply_empty(req, 200);
  }
  if (strcmp(action, "config") == 0) {
    if (!is_get(req)) return method_not_allowed(req);
    err = TRITONSERVER_ServerModelConfig(h->server, model, version, 1, &msg);
    return reply_message(req, err, msg);
  }
  if (strcmp(action, "stats") == 0) {
    if (!is_get(req)) return method_not_allowed(req);
    err = TRITONSERVER_ServerModelStatistics(h->server, model, version, &msg);
    return reply_message(req, err, msg);
  }
  if (strcmp(action, "infer") == 0) {
    if (!is_post(req)) return method_not_allowed(req);
    return nrd_srv_http_infer(loop, req, model, version);
  }
  if (strcmp(action, "generate") == 0 || strcmp(action, "generate_stream") == 0) {
    if (!is_post(req)) return method_not_allowed(req);
    return nrd_srv_http_generate(loop, req, model, version, action[8] == '_');
  }
  if (strcmp(action, "trace/setting") == 0) return nrd_srv_http_trace(h, req, model);
  nrd_srv_http_reply_error(req, 404, "Not Found");
}

/* ---- repository extension ------------------------------------------------- */

static int b64_value(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+' || c == '-') return 62;
  if (c == '/' || c == '_') return 63;
  return -1;
}

int nrd_srv_http_b64_decode(const char *s, size_t n, unsigned char **out, size_t *out_len) {
  unsigned char *o = malloc(n / 4 * 3 + 3);
  if (o == NULL) return -1;
  size_t w = 0;
  uint32_t acc = 0;
  int bits = 0;
  bool pad = false;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    if (c == '=') {
      pad = true;
      continue;
    }
    int v = b64_value(c);
    if (v < 0 || pad) {
      free(o);
      return -1;
    }
    acc = (acc << 6) | (uint32_t)v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      o[w++] = (unsigned char)(acc >> bits);
    }
  }
  *out = o;
  *out_len = w;
  return 0;
}

typedef struct load_job {
  nrd_srv_http_pending pending; /* first: the pending record */
  nrd_srv_http_loop *loop;
  char *model;
  TRITONSERVER_Parameter **params;
  size_t n_params;
  unsigned char **files;
  size_t n_files;
  TRITONSERVER_Error *result;
} load_job;

static void load_job_free(load_job *j) {
  for (size_t i = 0; i < j->n_params; i++) TRITONSERVER_ParameterDelete(j->params[i]);
  for (size_t i = 0; i < j->n_files; i++) free(j->files[i]);
  free(j->params);
  free(j->files);
  free(j->model);
  if (j->result) TRITONSERVER_ErrorDelete(j->result);
  free(j);
}

static void load_job_done(void *arg) {
  load_job *j = arg;
  nrd_srv_http_req *req = nrd_srv_http_pending_finish(j->loop, &j->pending);
  if (req) {
    if (j->result) {
      nrd_srv_http_reply_tserr(req, j->result);
      j->result = NULL;
    } else {
      nrd_srv_http_reply_json(req, 200, "", 0);
    }
  }
  load_job_free(j);
}

static void *load_job_main(void *arg) {
  load_job *j = arg;
  j->result = TRITONSERVER_ServerLoadModelWithParameters(j->loop->http->server, j->model,
                                                         (const TRITONSERVER_Parameter **)j->params, j->n_params);
  if (nrd_srv_http_post(j->loop, load_job_done, j) != 0) {
    /* The loop cannot be reached: the request stays unanswered until its
     * connection times out; the job is leaked rather than raced. */
    fprintf(stderr, "nereid: cannot post a model load result to the HTTP loop\n");
  }
  return NULL;
}

static void repo_load(nrd_srv_http_loop *loop, nrd_srv_http_req *req, const char *model) {
  json_t *j = NULL;
  if (nrd_srv_http_body_json(req, &j) != 0) return;
  load_job *job = calloc(1, sizeof *job);
  char msg[300];
  msg[0] = '\0';
  if (job == NULL || (job->model = strdup(model)) == NULL) {
    snprintf(msg, sizeof msg, "out of memory");
    goto fail;
  }
  job->loop = loop;
  json_t *params = j ? json_object_get(j, "parameters") : NULL;
  if (params && !json_is_object(params)) {
    snprintf(msg, sizeof msg, "Unable to parse 'parameters': expected an object");
    goto fail;
  }
  size_t np = params ? json_object_size(params) : 0;
  job->params = calloc(np + 1, sizeof *job->params);
  job->files = calloc(np + 1, sizeof *job->files);
  if (job->params == NULL || job->files == NULL) {
    snprintf(msg, sizeof msg, "out of memory");
    goto fail;
  }
  const char *key;
  json_t *val;
  json_object_foreach(params, key, val) {
    if (!json_is_string(val)) {
      snprintf(msg, sizeof msg, "Unable to parse parameter '%.100s': expected a string", key);
      goto fail;
    }
    TRITONSERVER_Parameter *p = NULL;
    if (strcmp(key, "config") == 0) {
      p = TRITONSERVER_ParameterNew(key, TRITONSERVER_PARAMETER_STRING, json_string_value(val));
    } else if (strncmp(key, "file:", 5) == 0) {
      unsigned char *bytes = NULL;
      size_t n = 0;
      if (nrd_srv_http_b64_decode(json_string_value(val), json_string_length(val), &bytes, &n) != 0) {
        snprintf(msg, sizeof msg, "parameter '%.100s' is not valid base64", key);
        goto fail;
      }
      job->files[job->n_files++] = bytes;
      p = TRITONSERVER_ParameterBytesNew(key, bytes, n);
    } else {
      snprintf(msg, sizeof msg, "unknown load parameter '%.100s' (expected 'config' or 'file:<path>')", key);
      goto fail;
    }
    if (p == NULL) {
      snprintf(msg, sizeof msg, "unexpected error on creating parameter '%.100s'", key);
      goto fail;
    }
    job->params[job->n_params++] = p;
  }
  json_decref(j);
  j = NULL;
  nrd_srv_http_pending_add(loop, &job->pending, req);
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int rc = pthread_create(&t, &attr, load_job_main, job);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    nrd_srv_http_req *r = nrd_srv_http_pending_finish(loop, &job->pending);
    load_job_free(job);
    if (r) nrd_srv_http_reply_error(r, 500, "cannot start a thread for the model load");
  }
  return;
fail:
  json_decref(j);
  if (job) load_job_free(job);
  nrd_srv_http_reply_error(req, 400, msg);
}

static void repo_unload(nrd_srv_http *h, nrd_srv_http_req *req, const char *model) {
  json_t *j = NULL;
  if (nrd_srv_http_body_json(req, &j) != 0) return;
  bool dependents = false;
  json_t *params = j ? json_object_get(j, "parameters") : NULL;
  json_t *ud = params && json_is_object(params) ? json_object_get(params, "unload_dependents") : NULL;
  if (ud) {
    if (!json_is_boolean(ud)) {
      json_decref(j);
      return nrd_srv_http_reply_error(req, 400, "Unable to parse 'unload_dependents': expected a boolean");
    }
    dependents = json_is_true(ud);
  }
  json_decref(j);
  TRITONSERVER_Error *err = dependents ? TRITONSERVER_ServerUnloadModelAndDependents(h->server, model)
                                       : TRITONSERVER_ServerUnloadModel(h->server, model);
  if (err) return nrd_srv_http_reply_tserr(req, err);
  nrd_srv_http_reply_json(req, 200, "", 0);
}

static void repo_index(nrd_srv_http *h, nrd_srv_http_req *req) {
  json_t *j = NULL;
  if (nrd_srv_http_body_json(req, &j) != 0) return;
  uint32_t flags = 0;
  json_t *ready = j ? json_object_get(j, "ready") : NULL;
  if (ready) {
    if (!json_is_boolean(ready)) {
      json_decref(j);
      return nrd_srv_http_reply_error(req, 400, "Unable to parse 'ready': expected a boolean");
    }
    if (json_is_true(ready)) flags |= TRITONSERVER_INDEX_FLAG_READY;
  }
  json_decref(j);
  TRITONSERVER_Message *msg = NULL;
  TRITONSERVER_Error *err = TRITONSERVER_ServerModelIndex(h->server, flags, &msg);
  reply_message(req, err, msg);
}

/* ---- dispatch -------------------------------------------------------------- */

/* Copies the next path segment of *p (up to '/') into seg; advances *p past
 * it and one '/'. Returns false when there is none or it is too long. */
static bool next_segment(const char **p, char *seg, size_t cap) {
  const char *s = *p;
  if (*s == '\0') return false;
  const char *e = strchr(s, '/');
  size_t n = e ? (size_t)(e - s) : strlen(s);
  if (n >= cap) return false;
  memcpy(seg, s, n);
  seg[n] = '\0';
  *p = e ? e + 1 : s + n;
  return true;
}

void nrd_srv_http_route(nrd_srv_http_loop *loop, nrd_srv_http_req *req) {
  nrd_srv_http *h = loop->http;
  /* Triton's verbose line, the method as libevhtp numbers it (GET 0,
   * HEAD 1, POST 2, PUT 3, DELETE 4; our enum keeps that order). */
  nrd_srv_logf(TRITONSERVER_LOG_VERBOSE, __FILE__, __LINE__, "HTTP request: %d %s", (int)req->method, req->path);
  if (h->metrics_only) {
    if (strcmp(req->path, "/metrics") == 0) return nrd_srv_http_metrics(h, req);
    return nrd_srv_http_reply_error(req, 404, "Not Found");
  }
  if (h->endpoint) return h->endpoint->route(loop, req, h->endpoint_ctx);
  nrd_srv_http_route_api(loop, req);
}

void nrd_srv_http_route_api(nrd_srv_http_loop *loop, nrd_srv_http_req *req) {
  nrd_srv_http *h = loop->http;
  const char *path = req->path;
  char model[512], seg[512], version[64];
  const char *p;
  /* The model routes first: inference takes this way. */
  if (strncmp(path, "/v2/models/", 11) == 0) {
    p = path + 11;
    if (strcmp(p, "stats") == 0) {
      if (nrd_srv_http_refused(h, req, NRD_SRV_API_STATISTICS)) return;
      if (!is_get(req)) return method_not_allowed(req);
      TRITONSERVER_Message *msg = NULL;
      TRITONSERVER_Error *err = TRITONSERVER_ServerModelStatistics(h->server, "", -1, &msg);
      return reply_message(req, err, msg);
    }
    if (!next_segment(&p, model, sizeof model)) return nrd_srv_http_reply_error(req, 404, "Not Found");
    version[0] = '\0';
    const char *action = NULL;
    if (next_segment(&p, seg, sizeof seg)) {
      if (strcmp(seg, "versions") == 0) {
        if (!next_segment(&p, version, sizeof version)) return nrd_srv_http_reply_error(req, 404, "Not Found");
        if (next_segment(&p, seg, sizeof seg)) action = seg;
      } else {
        action = seg;
      }
    }
    if (action && strcmp(action, "trace") == 0 && strcmp(p, "setting") == 0) {
      action = "trace/setting";
      p += 7;
    }
    if (*p != '\0') return nrd_srv_http_reply_error(req, 404, "Not Found");
    return model_route(loop, req, model, version, action);
  }
  if (strcmp(path, "/v2") == 0 || strcmp(path, "/v2/") == 0) {
    if (nrd_srv_http_refused(h, req, NRD_SRV_API_METADATA)) return;
    return server_metadata(h, req);
  }
  if (strcmp(path, "/v2/health/live") == 0 || strcmp(path, "/v2/health/ready") == 0) {
    if (nrd_srv_http_refused(h, req, NRD_SRV_API_HEALTH)) return;
    return health(h, req, path[11] == 'l');
  }
  if (strcmp(path, "/v2/repository/index") == 0) {
    if (nrd_srv_http_refused(h, req, NRD_SRV_API_MODEL_REPOSITORY)) return;
    if (!is_post(req)) return method_not_allowed(req);
    return repo_index(h, req);
  }
  if (strncmp(path, "/v2/repository/models/", 22) == 0) {
    if (nrd_srv_http_refused(h, req, NRD_SRV_API_MODEL_REPOSITORY)) return;
    p = path + 22;
    if (!next_segment(&p, model, sizeof model) || !next_segment(&p, seg, sizeof seg) || *p != '\0')
      return nrd_srv_http_reply_error(req, 404, "Not Found");
    if (!is_post(req)) return method_not_allowed(req);
    if (strcmp(seg, "load") == 0) return repo_load(loop, req, model);
    if (strcmp(seg, "unload") == 0) return repo_unload(h, req, model);
    return nrd_srv_http_reply_error(req, 404, "Not Found");
  }
  if (strcmp(path, "/v2/trace/setting") == 0) {
    if (nrd_srv_http_refused(h, req, NRD_SRV_API_TRACE)) return;
    return nrd_srv_http_trace(h, req, NULL);
  }
  if (strncmp(path, "/v2/cudasharedmemory/", 21) == 0 || strncmp(path, "/v2/systemsharedmemory/", 23) == 0) {
    if (nrd_srv_http_refused(h, req, NRD_SRV_API_SHARED_MEMORY)) return;
    bool cuda = path[4] == 'c';
    return nrd_srv_http_shm_route(h, req, path + (cuda ? 20 : 22), cuda);
  }
  if (strcmp(path, "/v2/logging") == 0) {
    if (nrd_srv_http_refused(h, req, NRD_SRV_API_LOGGING)) return;
    return nrd_srv_http_logging(h, req);
  }
  nrd_srv_http_reply_error(req, 404, "Not Found");
}
