/* The SageMaker endpoint (--allow-sagemaker), single-model mode, as
 * tritonserver serves it for SageMaker's real-time endpoints: GET /ping is
 * the server's readiness (or liveness, SAGEMAKER_TRITON_PING_MODE=live);
 * POST /invocations runs the model SAGEMAKER_TRITON_DEFAULT_MODEL_NAME names
 * through the KServe v2 infer route, or the generate or generate_stream
 * route (SAGEMAKER_TRITON_INFERENCE_TYPE). Binary data is framed by a
 * Content-Type that carries the JSON header's size, both ways (see
 * http_infer.c). Multi-model endpoints (/models...) are sagemaker_mme.c's. */
#include <stdlib.h>
#include <string.h>

#include "http_internal.h"
#include "sagemaker_mme.h"

/* The endpoint's context: its options, the model owned, and its model
 * table. */
typedef struct nrd_srv_sagemaker_ctx {
  nrd_srv_sagemaker_options o;
  nrd_srv_sagemaker_mme *mme;
} nrd_srv_sagemaker_ctx;

static void sagemaker_free(void *ctx) {
  nrd_srv_sagemaker_ctx *c = ctx;
  if (!c) return;
  nrd_srv_sagemaker_mme_free(c->mme);
  free((char *)c->o.model);
  free(c);
}

void *nrd_srv_sagemaker_ctx_new(const nrd_srv_sagemaker_options *o) {
  nrd_srv_sagemaker_ctx *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->o = *o;
  c->o.model = strdup(o->model);
  c->mme = nrd_srv_sagemaker_mme_new();
  if (!c->o.model || !c->mme) {
    sagemaker_free(c);
    return NULL;
  }
  return c;
}

static void sagemaker_route(nrd_srv_http_loop *loop, nrd_srv_http_req *req, void *ctx) {
  const nrd_srv_sagemaker_ctx *c = ctx;
  if (!strcmp(req->path, "/ping")) {
    const char *path = req->path;
    req->path = c->o.ping_live ? "/v2/health/live" : "/v2/health/ready";
    nrd_srv_http_route_api(loop, req);
    req->path = path;
    return;
  }
  if (!strcmp(req->path, "/invocations")) {
    /* --http-restricted-api holds here as on the KServe routes: Triton's
     * /invocations is its infer or generate handler, which checks the
     * inference group before the method (a5b45da57). */
    if (nrd_srv_http_refused(loop->http, req, NRD_SRV_API_INFERENCE)) return;
    if (req->method != NRD_SRV_HTTP_POST) return nrd_srv_http_reply_error(req, 405, "Method Not Allowed");
    switch (c->o.kind) {
      case NRD_SRV_SAGEMAKER_INFER: return nrd_srv_http_infer(loop, req, c->o.model, -1);
      case NRD_SRV_SAGEMAKER_GENERATE: return nrd_srv_http_generate(loop, req, c->o.model, -1, false);
      case NRD_SRV_SAGEMAKER_GENERATE_STREAM: return nrd_srv_http_generate(loop, req, c->o.model, -1, true);
    }
  }
  if (!strcmp(req->path, "/models") || !strncmp(req->path, "/models/", 8))
    return nrd_srv_sagemaker_mme_route(loop, req, c->mme);
  nrd_srv_http_reply_error(req, 400, "SageMaker endpoint: unknown route (expected /ping or /invocations)");
}

const nrd_srv_http_endpoint_ops nrd_srv_sagemaker_endpoint = {
    .name = "SageMaker",
    .binary_mime = "application/vnd.sagemaker-triton.binary+json;json-header-size=",
    .reply_framed = true,
    .route = sagemaker_route,
    .free = sagemaker_free,
};
