/*
 * SageMaker multi-model endpoints (see sagemaker_mme.h), with
 * tritonserver's contract:
 *
 *   POST   /models               {"model_name": N, "url": DIR}: load
 *   GET    /models               {"models": [{"modelName", "modelUrl"}]}
 *   GET    /models/N             {"modelName", "modelUrl"}, or 404
 *   POST   /models/N/invoke      inference, as /invocations, or 404
 *   DELETE /models/N             unload, or 404
 *
 * N is SageMaker's name for the model; the server's model name is the
 * X-Amzn-SageMaker-Target-Model header when there is one, else N. A load
 * picks the model folder in DIR (the only one, or the ensemble when there
 * are several), registers DIR as a repository mapping that folder to the
 * model name, and loads it; when DIR itself holds config.pbtxt (SageMaker's
 * /opt/ml/models/<id>/model layout) the repository is /opt/ml/models/<id>
 * and the folder "model". An unload waits until the repository index shows
 * the model unloaded, then unregisters the repository. Errors whose message
 * says memory ran out answer 507, as SageMaker expects.
 */
#include "sagemaker_mme.h"
#include "error_ignore.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log_settings.h"

typedef struct mme_model {
  char *name; /* SageMaker's name */
  char *target; /* the server's name for it */
  char *repo; /* the registered repository */
} mme_model;

struct nrd_srv_sagemaker_mme {
  pthread_mutex_t mu;
  mme_model *models;
  size_t n, cap;
};

static const char kTargetHeader[] = "X-Amzn-SageMaker-Target-Model";
enum { kUnloadTimeoutSecs = 350, kUnloadPollMs = 500 };

nrd_srv_sagemaker_mme *nrd_srv_sagemaker_mme_new(void) {
  nrd_srv_sagemaker_mme *m = calloc(1, sizeof *m);
  if (m && pthread_mutex_init(&m->mu, NULL) != 0) {
    free(m);
    m = NULL;
  }
  return m;
}

void nrd_srv_sagemaker_mme_free(nrd_srv_sagemaker_mme *m) {
  if (!m) return;
  for (size_t i = 0; i < m->n; i++) {
    free(m->models[i].name);
    free(m->models[i].target);
    free(m->models[i].repo);
  }
  free(m->models);
  pthread_mutex_destroy(&m->mu);
  free(m);
}

/* Index of `name` or -1. Caller holds mu. */
static ptrdiff_t find(const nrd_srv_sagemaker_mme *m, const char *name) {
  for (size_t i = 0; i < m->n; i++)
    if (!strcmp(m->models[i].name, name)) return (ptrdiff_t)i;
  return -1;
}

/* Copy of the repository of `name`, or NULL. Any thread. */
static char *repo_of(nrd_srv_sagemaker_mme *m, const char *name) {
  pthread_mutex_lock(&m->mu);
  ptrdiff_t i = find(m, name);
  char *repo = i >= 0 ? strdup(m->models[i].repo) : NULL;
  pthread_mutex_unlock(&m->mu);
  return repo;
}

static int add(nrd_srv_sagemaker_mme *m, const char *name, const char *target, const char *repo) {
  mme_model e = {strdup(name), strdup(target), strdup(repo)};
  int rc = -1;
  pthread_mutex_lock(&m->mu);
  ptrdiff_t at = find(m, name);
  if (e.name && e.target && e.repo && at < 0 && m->n == m->cap) {
    size_t cap = m->cap ? m->cap * 2 : 8;
    mme_model *grown = realloc(m->models, cap * sizeof *grown);
    if (grown) {
      m->models = grown;
      m->cap = cap;
    }
  }
  if (e.name && e.target && e.repo && (at >= 0 || m->n < m->cap)) {
    if (at >= 0) {
      free(m->models[at].name);
      free(m->models[at].target);
      free(m->models[at].repo);
      m->models[at] = e;
    } else {
      m->models[m->n++] = e;
    }
    rc = 0;
  }
  pthread_mutex_unlock(&m->mu);
  if (rc != 0) {
    free(e.name);
    free(e.target);
    free(e.repo);
  }
  return rc;
}

static void drop(nrd_srv_sagemaker_mme *m, const char *name) {
  pthread_mutex_lock(&m->mu);
  ptrdiff_t i = find(m, name);
  if (i >= 0) {
    free(m->models[i].name);
    free(m->models[i].target);
    free(m->models[i].repo);
    m->models[i] = m->models[--m->n];
  }
  pthread_mutex_unlock(&m->mu);
}

/* ---- paths ------------------------------------------------------------ */

/* `url` made absolute and normal ("." and ".." resolved lexically, no
 * repeated or trailing slashes) into out[PATH_MAX]; -1 when too long. */
static int normal_path(const char *url, char *out) {
  char joined[2 * PATH_MAX];
  if (url[0] == '/') {
    if (snprintf(joined, sizeof joined, "%s", url) >= (int)sizeof joined) return -1;
  } else {
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd)) return -1;
    if (snprintf(joined, sizeof joined, "%s/%s", cwd, url) >= (int)sizeof joined) return -1;
  }
  size_t len = 0;
  out[0] = '\0';
  for (char *save = NULL, *part = strtok_r(joined, "/", &save); part; part = strtok_r(NULL, "/", &save)) {
    if (!strcmp(part, ".")) continue;
    if (!strcmp(part, "..")) {
      char *slash = strrchr(out, '/');
      len = slash ? (size_t)(slash - out) : 0;
      out[len] = '\0';
      continue;
    }
    size_t n = strlen(part);
    if (len + 1 + n + 1 > PATH_MAX) return -1;
    out[len++] = '/';
    memcpy(out + len, part, n + 1);
    len += n;
  }
  if (len == 0) strcpy(out, "/");
  return 0;
}

/* Whether normal absolute `path` is in /dev, /proc or /sys (Triton's
 * a202ae54f refuses those for "url"). */
static bool kernel_path(const char *path) {
  static const char *const roots[] = {"/dev", "/proc", "/sys"};
  for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++) {
    size_t n = strlen(roots[i]);
    if (!strncmp(path, roots[i], n) && (path[n] == '\0' || path[n] == '/')) return true;
  }
  return false;
}

static bool name_chars(const char *s, size_t n) {
  if (n == 0) return false;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '.' || c == '_'))
      return false;
  }
  return true;
}

/* SageMaker's layout /opt/ml/models/<id>/model[/<sub>]: sets parent to
 * /opt/ml/models/<id>; false when `path` is not laid out so. */
static bool sagemaker_layout(const char *path, char *parent, size_t cap) {
  static const char prefix[] = "/opt/ml/models/";
  if (strncmp(path, prefix, sizeof prefix - 1)) return false;
  const char *id = path + sizeof prefix - 1;
  const char *slash = strchr(id, '/');
  if (!slash || !name_chars(id, (size_t)(slash - id)) || strncmp(slash, "/model", 6)) return false;
  const char *rest = slash + 6;
  if (*rest && (*rest != '/' || (rest[1] && !name_chars(rest + 1, strlen(rest + 1))))) return false;
  return snprintf(parent, cap, "%.*s", (int)(slash - path), path) < (int)cap;
}

/* Whether the config.pbtxt in dir/sub says platform: "ensemble". */
static bool is_ensemble(const char *dir, const char *sub) {
  char path[PATH_MAX];
  if (snprintf(path, sizeof path, "%s/%s/config.pbtxt", dir, sub) >= (int)sizeof path) return false;
  FILE *f = fopen(path, "r");
  if (!f) return false;
  char line[1024];
  bool found = false;
  while (!found && fgets(line, sizeof line, f)) {
    char *p = strstr(line, "platform:");
    if (!p) continue;
    p += 9;
    while (*p == ' ' || *p == '\t') p++;
    found = !strncmp(p, "\"ensemble\"", 10);
  }
  fclose(f);
  return found;
}

/* The model folder of dir: the ensemble's when one of its folders holds
 * an ensemble, else the last folder read (there is normally one). */
static void model_folder(const char *dir, char *out, size_t cap) {
  out[0] = '\0';
  DIR *d = opendir(dir);
  if (!d) return;
  char ensemble[NAME_MAX + 1] = "";
  for (struct dirent *e; (e = readdir(d));) {
    if (e->d_type != DT_DIR || !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    snprintf(out, cap, "%s", e->d_name);
    if (!ensemble[0] && is_ensemble(dir, e->d_name)) snprintf(ensemble, sizeof ensemble, "%s", e->d_name);
  }
  closedir(d);
  if (ensemble[0]) snprintf(out, cap, "%s", ensemble);
}

/* ---- answers ------------------------------------------------------------ */

/* SageMaker's out-of-memory status: messages of the kinds its clients
 * retry elsewhere get 507, others 400. */
static int load_status(const char *msg) {
  static const char *const oom[] = {"CUDA out of memory",
                                    "CUDA_OUT_OF_MEMORY",
                                    "Out of memory",
                                    "Out Of Memory",
                                    "out of memory",
                                    "MemoryError",
                                    "OutOfMemory",
                                    "OOM",
                                    "Dst tensor is not initialized",
                                    "Src tensor is not initialized",
                                    "CNMEM_STATUS_OUT_OF_MEMORY",
                                    "CUDNN_STATUS_NOT_INITIALIZED",
                                    "CUBLAS_STATUS_ALLOC_FAILED",
                                    "CUBLAS_STATUS_NOT_INITIALIZED",
                                    "Failed to allocate memory",
                                    "failed to allocate memory",
                                    "No space left on device"};
  for (size_t i = 0; i < sizeof oom / sizeof oom[0]; i++)
    if (strstr(msg, oom[i])) return 507;
  return 400;
}

/* A load or unload, run on its own thread, answered on the loop. */
typedef struct mme_job {
  nrd_srv_http_pending pending; /* first: the pending record */
  nrd_srv_http_loop *loop;
  nrd_srv_sagemaker_mme *mme; /* the endpoint's, which outlives its jobs */
  bool unload;
  char *name; /* SageMaker's */
  char *target; /* the server's */
  char *url; /* load */
  int status; /* the answer: status, and an error message or NULL */
  char *error;
} mme_job;

static void job_free(mme_job *j) {
  free(j->name);
  free(j->target);
  free(j->url);
  free(j->error);
  free(j);
}

static void job_fail(mme_job *j, int status, TRITONSERVER_Error *err, const char *msg) {
  j->status = status;
  j->error = strdup(err ? TRITONSERVER_ErrorMessage(err) : msg);
  if (err) TRITONSERVER_ErrorDelete(err);
}

static void job_done(void *arg) {
  mme_job *j = arg;
  nrd_srv_http_req *req = nrd_srv_http_pending_finish(j->loop, &j->pending);
  if (req) {
    if (j->error)
      nrd_srv_http_reply_error(req, j->status, j->error);
    else
      nrd_srv_http_reply_empty(req, j->status);
  }
  job_free(j);
}

static void do_load(mme_job *j) {
  nrd_srv_http *h = j->loop->http;
  char path[PATH_MAX];
  if (normal_path(j->url, path) != 0) return job_fail(j, 400, NULL, "the \"url\" path is too long");
  if (kernel_path(path)) return job_fail(j, 400, NULL, "\"url\" cannot start with /dev/, /proc/ or /sys/");
  /* Triton checks the text only; a symbolic link (/tmp/x -> /proc/self)
   * must not lead there either, so the real path is checked and used. */
  char real[PATH_MAX];
  if (realpath(path, real)) {
    if (kernel_path(real)) {
      char msg[PATH_MAX + 80];
      snprintf(msg, sizeof msg, "\"url\" cannot start with /dev/, /proc/ or /sys/ (it leads to '%s')", real);
      return job_fail(j, 400, NULL, msg);
    }
    snprintf(path, sizeof path, "%s", real);
  }
  char folder[NAME_MAX + 1], repo[PATH_MAX], config[PATH_MAX + 16];
  model_folder(path, folder, sizeof folder);
  snprintf(repo, sizeof repo, "%s", path);
  snprintf(config, sizeof config, "%s/config.pbtxt", path);
  struct stat st;
  if (stat(config, &st) == 0) {
    /* The model is DIR itself: SageMaker's layout names its repository. */
    if (!sagemaker_layout(path, repo, sizeof repo))
      return job_fail(j, 400, NULL,
                      "\"url\" holds config.pbtxt itself but is not laid out as /opt/ml/models/<id>/model; "
                      "give the folder that holds the model's folder");
    snprintf(folder, sizeof folder, "model");
  }
  if (!folder[0]) return job_fail(j, 400, NULL, "\"url\" holds no model folder");
  TRITONSERVER_Parameter *map = TRITONSERVER_ParameterNew(folder, TRITONSERVER_PARAMETER_STRING, j->target);
  if (!map) return job_fail(j, 500, NULL, "out of memory");
  const TRITONSERVER_Parameter *maps[1] = {map};
  TRITONSERVER_Error *err = TRITONSERVER_ServerRegisterModelRepository(h->server, repo, maps, 1);
  TRITONSERVER_ParameterDelete(map);
  if (err) {
    int status = TRITONSERVER_ErrorCode(err) == TRITONSERVER_ERROR_ALREADY_EXISTS ? 409 : 400;
    return job_fail(j, status, err, NULL);
  }
  err = TRITONSERVER_ServerLoadModel(h->server, j->target);
  if (!err && add(j->mme, j->name, j->target, repo) != 0)
    err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory recording the model");
  if (err) {
    int status = TRITONSERVER_ErrorCode(err) == TRITONSERVER_ERROR_ALREADY_EXISTS
                     ? 409
                     : load_status(TRITONSERVER_ErrorMessage(err));
    NRD_SRV_IGNORE(TRITONSERVER_ServerUnregisterModelRepository(h->server, repo),
                   "unregistering the repository of a model that did not load");
    return job_fail(j, status, err, NULL);
  }
  nrd_srv_logf(TRITONSERVER_LOG_INFO, __FILE__, __LINE__, "SageMaker: loaded '%s' (model '%s') from %s", j->name,
               j->target, repo);
  j->status = 200;
}

/* Whether the repository index shows `model` unloaded. */
static bool unloaded(TRITONSERVER_Server *server, const char *model) {
  TRITONSERVER_Message *msg = NULL;
  TRITONSERVER_Error *err = TRITONSERVER_ServerModelIndex(server, 0, &msg);
  if (err) {
    TRITONSERVER_ErrorDelete(err);
    return true; /* nothing to wait for that can be seen */
  }
  const char *buf = NULL;
  size_t len = 0;
  bool done = false;
  json_t *index = NULL;
  if (!TRITONSERVER_MessageSerializeToJson(msg, &buf, &len)) index = json_loadb(buf, len, 0, NULL);
  size_t i;
  json_t *e;
  json_array_foreach(index, i, e) {
    const char *name = json_string_value(json_object_get(e, "name"));
    const char *state = json_string_value(json_object_get(e, "state"));
    const char *reason = json_string_value(json_object_get(e, "reason"));
    if (name && !strcmp(name, model) && state && !strcmp(state, "UNAVAILABLE") && reason && !strcmp(reason, "unloaded"))
      done = true;
  }
  json_decref(index);
  TRITONSERVER_MessageDelete(msg);
  return done;
}

static void do_unload(mme_job *j) {
  nrd_srv_http *h = j->loop->http;
  char *repo = repo_of(j->mme, j->name);
  if (!repo) {
    j->status = 404;
    return;
  }
  TRITONSERVER_Error *err = TRITONSERVER_ServerUnloadModelAndDependents(h->server, j->target);
  if (err) {
    free(repo);
    return job_fail(j, 400, err, NULL);
  }
  /* SageMaker gives an unload 360 s; stop waiting a little before. */
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    if (unloaded(h->server, j->target)) break;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - start.tv_sec >= kUnloadTimeoutSecs) {
      nrd_srv_logf(TRITONSERVER_LOG_ERROR, __FILE__, __LINE__, "SageMaker: unloading '%s' did not finish within %d s",
                   j->target, kUnloadTimeoutSecs);
      break;
    }
    struct timespec pause = {0, kUnloadPollMs * 1000000L};
    while (nanosleep(&pause, &pause) != 0 && errno == EINTR) {
    }
  }
  err = TRITONSERVER_ServerUnregisterModelRepository(h->server, repo);
  free(repo);
  drop(j->mme, j->name);
  if (err) return job_fail(j, 400, err, NULL);
  j->status = 200;
}

static void *job_main(void *arg) {
  mme_job *j = arg;
  if (j->unload)
    do_unload(j);
  else
    do_load(j);
  if (nrd_srv_http_post(j->loop, job_done, j) != 0)
    fprintf(stderr, "nereid: cannot post a SageMaker model %s result to the HTTP loop\n",
            j->unload ? "unload" : "load");
  return NULL;
}

static void start_job(nrd_srv_http_loop *loop, nrd_srv_http_req *req, mme_job *j) {
  j->loop = loop;
  nrd_srv_http_pending_add(loop, &j->pending, req);
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int rc = pthread_create(&t, &attr, job_main, j);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    nrd_srv_http_req *r = nrd_srv_http_pending_finish(loop, &j->pending);
    job_free(j);
    if (r) nrd_srv_http_reply_error(r, 500, "cannot start a thread for the SageMaker request");
  }
}

/* The server's name for SageMaker's model `name`. */
static const char *target_of(const nrd_srv_http_req *req, const char *name) {
  const char *t = nrd_srv_http_header_get(req, kTargetHeader);
  return t && t[0] ? t : name;
}

static void load(nrd_srv_http_loop *loop, nrd_srv_http_req *req, nrd_srv_sagemaker_mme *mme) {
  json_t *body = NULL;
  if (nrd_srv_http_body_json(req, &body) != 0) return;
  const json_t *name = json_object_get(body, "model_name");
  const json_t *url = json_object_get(body, "url");
  const char *why = !json_is_string(name) || !json_string_length(name) ? "\"model_name\" must be a non-empty string"
                    : !json_is_string(url) || !json_string_length(url) ? "\"url\" must be a non-empty string"
                                                                       : NULL;
  if (why) {
    json_decref(body);
    return nrd_srv_http_reply_error(req, 400, why);
  }
  mme_job *j = calloc(1, sizeof *j);
  if (j) {
    j->mme = mme;
    j->name = strdup(json_string_value(name));
    j->target = strdup(target_of(req, json_string_value(name)));
    j->url = strdup(json_string_value(url));
  }
  json_decref(body);
  if (!j || !j->name || !j->target || !j->url) {
    if (j) job_free(j);
    return nrd_srv_http_reply_error(req, 500, "out of memory");
  }
  start_job(loop, req, j);
}

static void unload(nrd_srv_http_loop *loop, nrd_srv_http_req *req, const char *name, nrd_srv_sagemaker_mme *mme) {
  mme_job *j = calloc(1, sizeof *j);
  if (j) {
    j->mme = mme;
    j->unload = true;
    j->name = strdup(name);
    j->target = strdup(target_of(req, name));
  }
  if (!j || !j->name || !j->target) {
    if (j) job_free(j);
    return nrd_srv_http_reply_error(req, 500, "out of memory");
  }
  start_job(loop, req, j);
}

static void list(nrd_srv_http *h, nrd_srv_http_req *req, const char *only, nrd_srv_sagemaker_mme *m) {
  json_t *models = json_array();
  json_t *one = NULL;
  pthread_mutex_lock(&m->mu);
  for (size_t i = 0; i < m->n; i++) {
    const mme_model *e = &m->models[i];
    if (only) {
      if (!strcmp(e->name, only)) one = json_pack("{s:s, s:s}", "modelName", e->name, "modelUrl", e->repo);
      continue;
    }
    /* The list shows models ready to serve. */
    bool ready = false;
    NRD_SRV_IGNORE(TRITONSERVER_ServerModelIsReady(h->server, e->target, -1, &ready),
                   "model readiness unknown: counted as not ready");
    if (ready && models)
      json_array_append_new(models, json_pack("{s:s, s:s}", "modelName", e->name, "modelUrl", e->repo));
  }
  pthread_mutex_unlock(&m->mu);
  json_t *reply = only ? one : json_pack("{s:o}", "models", models);
  if (only) json_decref(models);
  if (only && !one) return nrd_srv_http_reply_empty(req, 404);
  char *text = reply ? json_dumps(reply, JSON_COMPACT) : NULL;
  json_decref(reply);
  if (!text) return nrd_srv_http_reply_error(req, 500, "out of memory");
  nrd_srv_http_reply_json(req, 200, text, strlen(text));
  free(text);
}

void nrd_srv_sagemaker_mme_route(nrd_srv_http_loop *loop, nrd_srv_http_req *req, nrd_srv_sagemaker_mme *mme) {
  nrd_srv_http *h = loop->http;
  /* /models, /models/, /models/<name>, /models/<name>/invoke */
  const char *rest = req->path + strlen("/models");
  char name[512] = "";
  bool invoke = false;
  if (*rest == '/') {
    rest++;
    const char *slash = strchr(rest, '/');
    size_t n = slash ? (size_t)(slash - rest) : strlen(rest);
    if (n >= sizeof name || (slash && strcmp(slash, "/invoke")))
      return nrd_srv_http_reply_error(req, 400, "SageMaker endpoint: unknown route");
    memcpy(name, rest, n);
    name[n] = '\0';
    invoke = slash != NULL;
  } else if (*rest) {
    return nrd_srv_http_reply_error(req, 400, "SageMaker endpoint: unknown route");
  }
  if (!mme) return nrd_srv_http_reply_error(req, 500, "SageMaker model table missing");
  if (invoke) {
    /* The inference group's restriction first, as Triton (b58e983ec). */
    if (nrd_srv_http_refused(h, req, NRD_SRV_API_INFERENCE)) return;
    if (req->method != NRD_SRV_HTTP_POST) return nrd_srv_http_reply_error(req, 405, "Method Not Allowed");
    char *repo = name[0] ? repo_of(mme, name) : NULL;
    if (!repo) return nrd_srv_http_reply_empty(req, 404);
    free(repo);
    return nrd_srv_http_infer(loop, req, target_of(req, name), -1);
  }
  switch (req->method) {
    case NRD_SRV_HTTP_GET:
      if (nrd_srv_http_refused(h, req, NRD_SRV_API_MODEL_REPOSITORY)) return;
      return list(h, req, name[0] ? name : NULL, mme);
    case NRD_SRV_HTTP_POST:
      if (nrd_srv_http_refused(h, req, NRD_SRV_API_MODEL_REPOSITORY)) return;
      return load(loop, req, mme);
    case NRD_SRV_HTTP_DELETE:
      if (nrd_srv_http_refused(h, req, NRD_SRV_API_MODEL_REPOSITORY)) return;
      if (!name[0]) return nrd_srv_http_reply_error(req, 400, "DELETE needs /models/<name>");
      return unload(loop, req, name, mme);
    default: return nrd_srv_http_reply_error(req, 400, "SageMaker endpoint: unsupported method for /models");
  }
}
