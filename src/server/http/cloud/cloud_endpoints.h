/* The cloud endpoints: HTTP front ends that serve Vertex AI's or
 * SageMaker's routes instead of KServe's, as tables for
 * nrd_srv_http_options.endpoint (http_server.h). Each *_ctx_new makes the
 * context to pass with its table; the front end owns it from
 * nrd_srv_http_start on (even when that fails).
 *
 * Threads: the constructors run on the main thread. */
#ifndef NRD_SRV_CLOUD_ENDPOINTS_H
#define NRD_SRV_CLOUD_ENDPOINTS_H

#include <stdbool.h>

#include "http_server.h"

/* Vertex AI (--allow-vertex-ai; http_vertex.c): the routes Vertex AI's
 * environment names. */
typedef struct nrd_srv_vertex_routes {
  const char *predict_route; /* AIP_PREDICT_ROUTE: inference on default_model, or a redirect */
  const char *health_route; /* AIP_HEALTH_ROUTE: the server's readiness */
  const char *default_model; /* the model the predict route serves */
} nrd_srv_vertex_routes;

extern const nrd_srv_http_endpoint_ops nrd_srv_vertex_endpoint;

/* A context with copies of `routes`; NULL when out of memory. */
void *nrd_srv_vertex_ctx_new(const nrd_srv_vertex_routes *routes);

/* SageMaker (--allow-sagemaker; http_sagemaker.c, sagemaker_mme.c): what
 * /ping and /invocations serve; the multi-model table of /models comes
 * with the context. */
typedef enum {
  NRD_SRV_SAGEMAKER_INFER,
  NRD_SRV_SAGEMAKER_GENERATE,
  NRD_SRV_SAGEMAKER_GENERATE_STREAM
} nrd_srv_sagemaker_kind;

typedef struct nrd_srv_sagemaker_options {
  const char *model; /* SAGEMAKER_TRITON_DEFAULT_MODEL_NAME */
  bool ping_live; /* SAGEMAKER_TRITON_PING_MODE=live: /ping is liveness, else readiness */
  nrd_srv_sagemaker_kind kind; /* SAGEMAKER_TRITON_INFERENCE_TYPE */
} nrd_srv_sagemaker_options;

extern const nrd_srv_http_endpoint_ops nrd_srv_sagemaker_endpoint;

/* A context with a copy of `o` and an empty model table; NULL when out of
 * memory. */
void *nrd_srv_sagemaker_ctx_new(const nrd_srv_sagemaker_options *o);

#endif
