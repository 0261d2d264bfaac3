/* Test harness for driving libtritonserver.so through its public API only.
 *
 * Header-only (every function static) so each test executable is
 * self-contained. Helpers abort the test through Criterion's asserts on any
 * unexpected failure. Thread rule: functions marked "any thread" may be used
 * from callbacks; the rest from the test's own thread. */
#ifndef NRD_TEST_HARNESS_H
#define NRD_TEST_HARNESS_H

#include <criterion/criterion.h>
#include <dirent.h>
#include <jansson.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "triton/core/tritonserver.h"

/* Every helper is static; a test uses only some of them. */
#define H_API static __attribute__((unused))

/* Fails the current test when `expr` returns an error, printing it. */
#define H_OK(expr)                                                                                                     \
  do {                                                                                                                 \
    TRITONSERVER_Error *h_err__ = (expr);                                                                              \
    if (h_err__) {                                                                                                     \
      cr_assert_fail("%s failed: %s (%s)", #expr, TRITONSERVER_ErrorMessage(h_err__),                                  \
                     TRITONSERVER_ErrorCodeString(h_err__));                                                           \
    }                                                                                                                  \
  } while (0)

/* ------------------------------------------------------------ files */

/* mkdir -p for the parent folders of `path`, then the folder itself when
 * `last` is true. */
H_API void h_mkdirs(const char *path, int last) {
  char buf[4096];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *c = buf + 1; *c; c++) {
    if (*c != '/') continue;
    *c = '\0';
    mkdir(buf, 0755);
    *c = '/';
  }
  if (last) mkdir(buf, 0755);
}

/* A fresh folder under /tmp; the caller frees the string (the folder is
 * left for post-mortem inspection and removed by h_rmtree if wanted). */
H_API char *h_tmpdir(void) {
  char tmpl[] = "/tmp/nrd-test-XXXXXX";
  cr_assert_not_null(mkdtemp(tmpl), "mkdtemp: %s", strerror(errno));
  return strdup(tmpl);
}

/* Writes `text` to dir/rel, creating folders. */
H_API void h_write(const char *dir, const char *rel, const char *text) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, rel);
  h_mkdirs(path, 0);
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f, "cannot write %s: %s", path, strerror(errno));
  fputs(text, f);
  fclose(f);
}

/* Creates repo/name/config.pbtxt (when config != NULL) and the version
 * folders listed in `versions` (a string like "1 2 3"). */
H_API void h_model(const char *repo, const char *name, const char *config, const char *versions) {
  char rel[1024];
  if (config) {
    snprintf(rel, sizeof rel, "%s/config.pbtxt", name);
    h_write(repo, rel, config);
  }
  char vbuf[256];
  snprintf(vbuf, sizeof vbuf, "%s", versions ? versions : "1");
  for (char *tok = strtok(vbuf, " "); tok; tok = strtok(NULL, " ")) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s/%s", repo, name, tok);
    h_mkdirs(dir, 1);
  }
}

H_API void h_rmtree(const char *path) {
  DIR *d = opendir(path);
  if (d) {
    struct dirent *e;
    while ((e = readdir(d))) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
      char sub[4096];
      snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
      struct stat st;
      if (!lstat(sub, &st) && S_ISDIR(st.st_mode))
        h_rmtree(sub);
      else
        unlink(sub);
    }
    closedir(d);
  }
  rmdir(path);
}

/* A fixture for tests that read what a test backend or agent records: a
 * fresh model repository in *repo, and in *record the path of
 * record.txt inside another fresh folder. h_repo_record_free removes both
 * folders and frees both strings. */
H_API void h_repo_record_new(char **repo, char **record) {
  *repo = h_tmpdir();
  char *d = h_tmpdir();
  size_t n = strlen(d) + sizeof "/record.txt";
  *record = malloc(n);
  cr_assert_not_null(*record);
  snprintf(*record, n, "%s/record.txt", d);
  free(d);
}

H_API void h_repo_record_free(char *repo, char *record) {
  h_rmtree(repo);
  free(repo);
  char *slash = strrchr(record, '/');
  if (slash) *slash = '\0';
  h_rmtree(record);
  free(record);
}

/* Reads a whole file into a malloc'd string ("" when missing). */
H_API char *h_read(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return strdup("");
  char *buf = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&buf, &len);
  int c;
  while ((c = fgetc(f)) != EOF) fputc(c, m);
  fclose(f);
  fclose(m);
  return buf;
}

/* A backend directory holding every shipped and test backend (symlinks),
 * so one --backend-directory reaches them all. Caller frees. */
H_API char *h_backend_dir(void) {
  char *dir = h_tmpdir();
  const char *srcs[2] = {NRD_BACKEND_DIR, NRD_TEST_BACKEND_DIR};
  for (int i = 0; i < 2; i++) {
    DIR *d = opendir(srcs[i]);
    if (!d) continue;
    struct dirent *e;
    while ((e = readdir(d))) {
      if (e->d_name[0] == '.') continue;
      char from[4096], to[4096];
      snprintf(from, sizeof from, "%s/%s", srcs[i], e->d_name);
      snprintf(to, sizeof to, "%s/%s", dir, e->d_name);
      if (symlink(from, to) && errno != EEXIST) cr_assert_fail("symlink %s: %s", to, strerror(errno));
    }
    closedir(d);
  }
  return dir;
}

/* ---------------------------------------------------------- servers */

/* Options for a quiet server on `repo` with every backend reachable.
 * The caller may add settings, then calls h_server_new. */
H_API TRITONSERVER_ServerOptions *h_options(const char *repo, TRITONSERVER_ModelControlMode mode) {
  TRITONSERVER_ServerOptions *o = NULL;
  H_OK(TRITONSERVER_ServerOptionsNew(&o));
  H_OK(TRITONSERVER_ServerOptionsSetModelRepositoryPath(o, repo));
  H_OK(TRITONSERVER_ServerOptionsSetModelControlMode(o, mode));
  char *bdir = h_backend_dir();
  H_OK(TRITONSERVER_ServerOptionsSetBackendDirectory(o, bdir));
  free(bdir);
  H_OK(TRITONSERVER_ServerOptionsSetLogInfo(o, false));
  H_OK(TRITONSERVER_ServerOptionsSetLogWarn(o, false));
  H_OK(TRITONSERVER_ServerOptionsSetExitTimeout(o, 5));
  return o;
}

/* Creates the server and frees the options; fails the test on error. */
H_API TRITONSERVER_Server *h_server_new(TRITONSERVER_ServerOptions *o) {
  TRITONSERVER_Server *s = NULL;
  TRITONSERVER_Error *e = TRITONSERVER_ServerNew(&s, o);
  TRITONSERVER_ServerOptionsDelete(o);
  if (e) {
    const char *msg = TRITONSERVER_ErrorMessage(e);
    if (s) TRITONSERVER_ServerDelete(s);
    cr_assert_fail("ServerNew failed: %s", msg);
  }
  return s;
}

/* JSON text of a message-returning call; caller frees. */
H_API char *h_msg_text(TRITONSERVER_Message *m) {
  const char *base = NULL;
  size_t len = 0;
  H_OK(TRITONSERVER_MessageSerializeToJson(m, &base, &len));
  char *s = strndup(base, len);
  TRITONSERVER_MessageDelete(m);
  return s;
}

/* ------------------------------------------------- inference calls */

#define H_MAX_RESPONSES 4096

/* One in-flight inference: collects every response and the release. */
typedef struct h_call {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  TRITONSERVER_InferenceResponse *responses[H_MAX_RESPONSES]; /* NULL for flags-only */
  uint32_t flags[H_MAX_RESPONSES];
  size_t n;
  int finals; /* responses carrying the FINAL flag */
  int released; /* release callbacks seen */
  atomic_int live_buffers;
} h_call;

H_API TRITONSERVER_Error *h_alloc(TRITONSERVER_ResponseAllocator *a, const char *name, size_t size,
                                  TRITONSERVER_MemoryType mt, int64_t mt_id, void *userp, void **buffer,
                                  void **buffer_userp, TRITONSERVER_MemoryType *actual_mt, int64_t *actual_id) {
  (void)a, (void)name, (void)mt, (void)mt_id;
  h_call *c = userp;
  *buffer = malloc(size ? size : 1);
  *buffer_userp = c;
  *actual_mt = TRITONSERVER_MEMORY_CPU;
  *actual_id = 0;
  atomic_fetch_add(&c->live_buffers, 1);
  return NULL;
}

H_API TRITONSERVER_Error *h_release_buf(TRITONSERVER_ResponseAllocator *a, void *buffer, void *buffer_userp,
                                        size_t size, TRITONSERVER_MemoryType mt, int64_t mt_id) {
  (void)a, (void)size, (void)mt, (void)mt_id;
  h_call *c = buffer_userp;
  free(buffer);
  atomic_fetch_sub(&c->live_buffers, 1);
  return NULL;
}

/* Any thread. */
H_API void h_on_response(TRITONSERVER_InferenceResponse *r, const uint32_t flags, void *userp) {
  h_call *c = userp;
  pthread_mutex_lock(&c->mu);
  if (c->n < H_MAX_RESPONSES) {
    c->responses[c->n] = r;
    c->flags[c->n] = flags;
    c->n++;
  } else if (r) {
    TRITONSERVER_InferenceResponseDelete(r);
  }
  if (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) c->finals++;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
}

/* Any thread. */
H_API void h_on_release(TRITONSERVER_InferenceRequest *req, const uint32_t flags, void *userp) {
  (void)req, (void)flags;
  h_call *c = userp;
  pthread_mutex_lock(&c->mu);
  c->released++;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
}

static TRITONSERVER_ResponseAllocator *h_allocator_;
H_API void h_allocator_make(void) {
  H_OK(TRITONSERVER_ResponseAllocatorNew(&h_allocator_, h_alloc, h_release_buf, NULL));
}

/* The shared response allocator, made on first use. Any thread. */
H_API TRITONSERVER_ResponseAllocator *h_allocator(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, h_allocator_make);
  return h_allocator_;
}

H_API h_call *h_call_new(void) {
  h_call *c = calloc(1, sizeof(*c));
  pthread_mutex_init(&c->mu, NULL);
  pthread_cond_init(&c->cv, NULL);
  return c;
}

/* Deletes every collected response, then the call. */
H_API void h_call_free(h_call *c) {
  for (size_t i = 0; i < c->n; i++)
    if (c->responses[i]) TRITONSERVER_InferenceResponseDelete(c->responses[i]);
  cr_expect_eq(atomic_load(&c->live_buffers), 0, "output buffers leaked");
  pthread_mutex_destroy(&c->mu);
  pthread_cond_destroy(&c->cv);
  free(c);
}

/* Sets the callbacks of `req` to collect into `c`. */
H_API void h_bind(TRITONSERVER_InferenceRequest *req, h_call *c) {
  H_OK(TRITONSERVER_InferenceRequestSetReleaseCallback(req, h_on_release, c));
  H_OK(TRITONSERVER_InferenceRequestSetResponseCallback(req, h_allocator(), c, h_on_response, c));
}

/* Waits until a final response and the release arrived; false on timeout. */
H_API bool h_wait(h_call *c, int timeout_ms) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += timeout_ms / 1000;
  until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
  if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
  pthread_mutex_lock(&c->mu);
  int rc = 0;
  while ((c->finals < 1 || c->released < 1) && rc == 0) rc = pthread_cond_timedwait(&c->cv, &c->mu, &until);
  bool ok = c->finals >= 1 && c->released >= 1;
  pthread_mutex_unlock(&c->mu);
  return ok;
}

/* A request for `model` (version -1) with an FP32 input of `n` values. */
H_API TRITONSERVER_InferenceRequest *h_request(TRITONSERVER_Server *s, const char *model) {
  TRITONSERVER_InferenceRequest *r = NULL;
  H_OK(TRITONSERVER_InferenceRequestNew(&r, s, model, -1));
  return r;
}

H_API void h_add_input(TRITONSERVER_InferenceRequest *r, const char *name, TRITONSERVER_DataType dt,
                       const int64_t *shape, uint64_t dims, const void *data, size_t size) {
  H_OK(TRITONSERVER_InferenceRequestAddInput(r, name, dt, shape, dims));
  H_OK(TRITONSERVER_InferenceRequestAppendInputData(r, name, data, size, TRITONSERVER_MEMORY_CPU, 0));
}

/* Runs a request to completion; returns the call (caller frees) with its
 * responses. Fails the test if InferAsync fails or nothing arrives in 10 s. */
/* Submits a request without waiting; returns the call (caller waits on
 * and frees it). Fails the test if InferAsync fails. */
H_API h_call *h_submit(TRITONSERVER_Server *s, TRITONSERVER_InferenceRequest *r) {
  h_call *c = h_call_new();
  h_bind(r, c);
  H_OK(TRITONSERVER_ServerInferAsync(s, r, NULL));
  return c;
}

H_API h_call *h_infer(TRITONSERVER_Server *s, TRITONSERVER_InferenceRequest *r) {
  h_call *c = h_submit(s, r);
  cr_assert(h_wait(c, 10000), "no final response/release within 10 s");
  return c;
}

/* Seconds of CLOCK_MONOTONIC since *t0. */
H_API double h_seconds_since(const struct timespec *t0) {
  struct timespec t1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

/* One output of a response; the pointers are the response's. */
typedef struct h_output {
  const char *name;
  TRITONSERVER_DataType dtype;
  const int64_t *shape;
  uint64_t dims;
  const void *base;
  size_t size;
} h_output;

/* Finds output `name` of `r` into *out; false when `r` has none of that name. */
H_API bool h_find_output(TRITONSERVER_InferenceResponse *r, const char *name, h_output *out) {
  uint32_t n = 0;
  H_OK(TRITONSERVER_InferenceResponseOutputCount(r, &n));
  for (uint32_t i = 0; i < n; i++) {
    TRITONSERVER_MemoryType mt;
    int64_t mid;
    void *userp;
    H_OK(TRITONSERVER_InferenceResponseOutput(r, i, &out->name, &out->dtype, &out->shape, &out->dims, &out->base,
                                              &out->size, &mt, &mid, &userp));
    if (!strcmp(out->name, name)) return true;
  }
  return false;
}

/* A count from `model`'s statistics: "inference_count" or
 * "execution_count", or the count of one of its inference_stats
 * ("success", "fail", "cache_hit", ...). */
H_API json_int_t h_stat_count(TRITONSERVER_Server *s, const char *model, const char *what) {
  TRITONSERVER_Message *msg = NULL;
  H_OK(TRITONSERVER_ServerModelStatistics(s, model, -1, &msg));
  char *text = h_msg_text(msg);
  json_t *j = json_loads(text, 0, NULL);
  cr_assert_not_null(j, "%s", text);
  json_t *ms = json_array_get(json_object_get(j, "model_stats"), 0);
  json_int_t v =
      !strcmp(what, "inference_count") || !strcmp(what, "execution_count")
          ? json_integer_value(json_object_get(ms, what))
          : json_integer_value(json_object_get(json_object_get(json_object_get(ms, "inference_stats"), what), "count"));
  json_decref(j);
  free(text);
  return v;
}

/* The server's Prometheus text (malloc'd). */
H_API char *h_metrics_text(TRITONSERVER_Server *s) {
  TRITONSERVER_Metrics *m = NULL;
  H_OK(TRITONSERVER_ServerMetrics(s, &m));
  const char *base = NULL;
  size_t len = 0;
  H_OK(TRITONSERVER_MetricsFormatted(m, TRITONSERVER_METRIC_PROMETHEUS, &base, &len));
  char *text = strndup(base, len);
  H_OK(TRITONSERVER_MetricsDelete(m));
  return text;
}

/* The nv_inference_pending_request_count gauge of `model` version 1 (-1
 * when absent): requests queued and not yet handed to an instance. */
H_API long h_pending_count(TRITONSERVER_Server *s, const char *model) {
  char *text = h_metrics_text(s);
  char key[256];
  snprintf(key, sizeof key, "nv_inference_pending_request_count{model=\"%s\",version=\"1\"} ", model);
  const char *at = strstr(text, key);
  long v = at ? strtol(at + strlen(key), NULL, 10) : -1;
  free(text);
  return v;
}

/* Polls until the pending gauge of `model` reads `want`; false after
 * `timeout_ms`. */
H_API bool h_pending_reaches(TRITONSERVER_Server *s, const char *model, long want, int timeout_ms) {
  for (int waited = 0; waited < timeout_ms; waited += 10) {
    if (h_pending_count(s, model) == want) return true;
    usleep(10 * 1000);
  }
  return h_pending_count(s, model) == want;
}

/* Error of response i as "CODE: message" (malloc'd), or NULL on success. */
H_API char *h_response_error(h_call *c, size_t i) {
  if (!c->responses[i]) return NULL;
  TRITONSERVER_Error *e = TRITONSERVER_InferenceResponseError(c->responses[i]);
  if (!e) return NULL;
  char *s = NULL;
  if (asprintf(&s, "%s: %s", TRITONSERVER_ErrorCodeString(e), TRITONSERVER_ErrorMessage(e)) < 0) s = NULL;
  TRITONSERVER_ErrorDelete(e);
  return s;
}

#endif
