/* The Vertex AI prediction endpoint (--allow-vertex-ai), as tritonserver
 * serves it: a second HTTP endpoint that answers only two routes, named by
 * Vertex AI's environment. The health route (AIP_HEALTH_ROUTE) is the
 * server's readiness. The predict route (AIP_PREDICT_ROUTE) runs an
 * inference on the default model; or, with the header
 * X-Vertex-Ai-Triton-Redirect: <v2 route>, any of the KServe routes Triton
 * lets through (Vertex AI only sends POST: routes that read are served as
 * if they were a GET); routes that change state (shared memory register
 * and unregister, model load and unload) are 403, as Triton. Anything
 * else is 400. Binary tensor data is framed
 * by a Content-Type that carries the JSON header's size. */
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <strings.h>

#include "cloud_endpoints.h"
#include "http_internal.h"

#define REDIRECT_HEADER "X-Vertex-Ai-Triton-Redirect"

/* How a redirect target is served: not at all (400), refused (403), as
 * it came (POST), or as a GET. */
typedef enum { REDIRECT_NO, REDIRECT_FORBIDDEN, REDIRECT_POST, REDIRECT_GET } redirect_kind;

/* The routes Triton's Vertex AI endpoint redirects to, and how. */
static redirect_kind redirect_kind_of(const char *path) {
  if (!strcmp(path, "/metrics") || !strcmp(path, "/v2/models/stats") || !strcmp(path, "/v2") ||
      !strncmp(path, "/v2/health/", 11))
    return REDIRECT_GET;
  if (!strncmp(path, "/v2/models/", 11)) {
    /* <model>[/versions/<v>][/ready|/infer|/config|/stats] */
    const char *p = path + 11, *slash = strchr(p, '/');
    if (slash == p) return REDIRECT_NO;
    if (!slash) return REDIRECT_GET; /* metadata */
    p = slash + 1;
    if (!strncmp(p, "versions/", 9)) {
      p += 9;
      slash = strchr(p, '/');
      if (slash == p) return REDIRECT_NO;
      if (!slash) return REDIRECT_GET;
      p = slash + 1;
    }
    if (!strcmp(p, "infer")) return REDIRECT_POST;
    if (!strcmp(p, "ready") || !strcmp(p, "config") || !strcmp(p, "stats")) return REDIRECT_GET;
    return REDIRECT_NO;
  }
  /* Only what reads goes through a redirect (d8f1616f6): a region's status
   * and the repository index. Registering or unregistering a region, and
   * loading or unloading a model, need the KServe endpoint itself: 403. */
  if (!strncmp(path, "/v2/systemsharedmemory/", 23) || !strncmp(path, "/v2/cudasharedmemory/", 21)) {
    size_t n = strlen(path);
    return n >= 7 && !strcmp(path + n - 7, "/status") ? REDIRECT_GET : REDIRECT_FORBIDDEN;
  }
  if (!strcmp(path, "/v2/repository/index")) return REDIRECT_POST;
  if (!strncmp(path, "/v2/repository/models/", 22)) return REDIRECT_FORBIDDEN;
  return REDIRECT_NO;
}

typedef struct vertex_ctx {
  char *predict, *health, *model;
} vertex_ctx;

static void vertex_free(void *ctx) {
  vertex_ctx *v = ctx;
  if (!v) return;
  free(v->predict);
  free(v->health);
  free(v->model);
  free(v);
}

void *nrd_srv_vertex_ctx_new(const nrd_srv_vertex_routes *routes) {
  vertex_ctx *v = calloc(1, sizeof *v);
  if (!v) return NULL;
  v->predict = strdup(routes->predict_route);
  v->health = strdup(routes->health_route);
  v->model = strdup(routes->default_model);
  if (!v->predict || !v->health || !v->model) {
    vertex_free(v);
    return NULL;
  }
  return v;
}

static void vertex_route(nrd_srv_http_loop *loop, nrd_srv_http_req *req, void *ctx) {
  nrd_srv_http *h = loop->http;
  const vertex_ctx *v = ctx;
  if (!strcmp(req->path, v->health)) {
    const char *path = req->path;
    req->path = "/v2/health/ready";
    nrd_srv_http_route_api(loop, req);
    req->path = path;
    return;
  }
  if (strcmp(req->path, v->predict) != 0)
    return nrd_srv_http_reply_error(req, 400,
                                    "Vertex AI endpoint: unknown route (expected the health or the "
                                    "prediction route)");
  const char *redirect = nrd_srv_http_header_get(req, REDIRECT_HEADER);
  if (!redirect) {
    /* Triton's infer handler: the inference group's restriction before
     * the method (6b0539b92 gave this endpoint --http-restricted-api). */
    if (nrd_srv_http_refused(h, req, NRD_SRV_API_INFERENCE)) return;
    if (req->method != NRD_SRV_HTTP_POST) return nrd_srv_http_reply_error(req, 405, "Method Not Allowed");
    return nrd_srv_http_infer(loop, req, v->model, -1);
  }
  if (req->method != NRD_SRV_HTTP_POST) return nrd_srv_http_reply_error(req, 405, "Method Not Allowed");
  char target[1024];
  int n = snprintf(target, sizeof target, "/%s", redirect);
  redirect_kind kind = n > 0 && (size_t)n < sizeof target ? redirect_kind_of(target) : REDIRECT_NO;
  if (kind == REDIRECT_NO) {
    char msg[300];
    snprintf(msg, sizeof msg, "Vertex AI endpoint: cannot redirect to '%.200s'", redirect);
    return nrd_srv_http_reply_error(req, 400, msg);
  }
  if (kind == REDIRECT_FORBIDDEN) return nrd_srv_http_reply_empty(req, 403);
  /* The target lives on this stack frame: the routes copy what they keep. */
  const char *path = req->path;
  nrd_srv_http_method method = req->method;
  req->path = target;
  if (kind == REDIRECT_GET) req->method = NRD_SRV_HTTP_GET;
  if (!strcmp(target, "/metrics"))
    nrd_srv_http_metrics(h, req);
  else
    nrd_srv_http_route_api(loop, req);
  req->path = path;
  req->method = method;
}

const nrd_srv_http_endpoint_ops nrd_srv_vertex_endpoint = {
    .name = "Vertex AI",
    .binary_mime = "application/vnd.vertex-ai-triton.binary+json;json-header-size=",
    .reply_framed = false,
    .route = vertex_route,
    .free = vertex_free,
};
