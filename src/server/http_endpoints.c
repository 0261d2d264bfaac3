/* The HTTP endpoints of the nereid binary, from its command line. */
#include "http_endpoints.h"

#include "cloud_endpoints.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

static int start_one(TRITONSERVER_Server *server, const char *what, const char *address, int port, bool reuse_port,
                     int threads, size_t max_input, int metrics_only, int timeout_secs, nrd_srv_shm *shm,
                     nrd_srv_log_settings *log, nrd_srv_tracer *tracer, const nrd_srv_restrictions *restricted,
                     const char *header_forward, const nrd_srv_http_endpoint_ops *endpoint, void *endpoint_ctx,
                     nrd_srv_http **out) {
  nrd_srv_http_options o = {.address = address,
                            .port = port,
                            .reuse_port = reuse_port,
                            .threads = threads,
                            .max_input_size = max_input,
                            .metrics_only = metrics_only,
                            .client_timeout_secs = timeout_secs,
                            .shm = shm,
                            .log = log,
                            .tracer = tracer,
                            .restricted = restricted,
                            .header_forward = header_forward,
                            .endpoint = endpoint,
                            .endpoint_ctx = endpoint_ctx};
  TRITONSERVER_Error *err = nrd_srv_http_start(server, &o, out);
  if (err) {
    fprintf(stderr, "nereid: error: starting the %s endpoint: %s\n", what, TRITONSERVER_ErrorMessage(err));
    TRITONSERVER_ErrorDelete(err);
    return -1;
  }
  printf("nereid: %s listening on %s:%d\n", what, address, nrd_srv_http_port(*out));
  return 0;
}

/* The Vertex AI endpoint's default model, as tritonserver picks it: the
 * one asked for, which must be loaded, else the only model loaded.
 * Returns it (malloc'ed) or NULL after printing why. */
static char *vertex_default_model(TRITONSERVER_Server *server, const char *asked) {
  TRITONSERVER_Message *msg = NULL;
  const char *base = NULL;
  size_t size = 0;
  TRITONSERVER_Error *err = TRITONSERVER_ServerModelIndex(server, TRITONSERVER_INDEX_FLAG_READY, &msg);
  if (!err) err = TRITONSERVER_MessageSerializeToJson(msg, &base, &size);
  json_t *index = err ? NULL : json_loadb(base, size, 0, NULL);
  char *out = NULL;
  const char *why = NULL;
  if (err)
    why = TRITONSERVER_ErrorMessage(err);
  else if (!json_is_array(index))
    why = "cannot read the model index";
  else if (!asked && json_array_size(index) != 1)
    why = "Expect the model repository contains only a single model if default model is not specified";
  else if (!asked)
    out = strdup(json_string_value(json_object_get(json_array_get(index, 0), "name")) ?: "");
  for (size_t i = 0; asked && !why && !out && i < json_array_size(index); i++) {
    const char *name = json_string_value(json_object_get(json_array_get(index, i), "name"));
    if (name && !strcmp(name, asked)) out = strdup(asked);
  }
  if (!why && !out && asked) {
    fprintf(stderr, "nereid: error: starting the Vertex AI endpoint: Expect the default model '%s' is loaded\n", asked);
  } else if (why) {
    fprintf(stderr, "nereid: error: starting the Vertex AI endpoint: %s\n", why);
  }
  json_decref(index);
  if (msg) TRITONSERVER_MessageDelete(msg);
  if (err) TRITONSERVER_ErrorDelete(err);
  return out;
}

/* --allow-vertex-ai: the routes come from Vertex AI's environment. */
static int start_vertex(TRITONSERVER_Server *server, const nrd_srv_cli *cli, nrd_srv_shm *shm,
                        nrd_srv_log_settings *log, nrd_srv_tracer *tracer, nrd_srv_http_endpoints *ep) {
  const char *predict = getenv("AIP_PREDICT_ROUTE"), *health = getenv("AIP_HEALTH_ROUTE");
  if (!predict || !predict[0] || !health || !health[0]) {
    fprintf(stderr, "nereid: error: starting the Vertex AI endpoint: %s is not defined for Vertex AI endpoint\n",
            !predict || !predict[0] ? "AIP_PREDICT_ROUTE" : "AIP_HEALTH_ROUTE");
    return -1;
  }
  char *model = vertex_default_model(server, cli->vertex_ai_default_model);
  if (!model) return -1;
  nrd_srv_vertex_routes routes = {.predict_route = predict, .health_route = health, .default_model = model};
  void *ctx = nrd_srv_vertex_ctx_new(&routes);
  if (!ctx) {
    fprintf(stderr, "nereid: error: starting the Vertex AI endpoint: out of memory\n");
    free(model);
    return -1;
  }
  /* --http-restricted-api holds here too, as in Triton since 6b0539b92;
   * no header forwarding, as Triton's Vertex AI server has none. */
  int rc = start_one(server, "Vertex AI", "0.0.0.0", cli->vertex_ai_port, false, cli->vertex_ai_thread_count,
                     (size_t)cli->http_max_input_size, 0, cli->http_client_timeout_secs, shm, log, tracer,
                     &cli->http_restricted, NULL, &nrd_srv_vertex_endpoint, ctx, &ep->vertex);
  if (rc == 0) printf("nereid: Vertex AI routes: health %s, predict %s (default model '%s')\n", health, predict, model);
  free(model);
  return rc;
}

/* --allow-sagemaker: the model and the modes come from SageMaker's
 * environment, as tritonserver reads it. */
static int start_sagemaker(TRITONSERVER_Server *server, const nrd_srv_cli *cli, nrd_srv_shm *shm,
                           nrd_srv_log_settings *log, nrd_srv_tracer *tracer, nrd_srv_http_endpoints *ep) {
  const char *model = getenv("SAGEMAKER_TRITON_DEFAULT_MODEL_NAME");
  const char *ping = getenv("SAGEMAKER_TRITON_PING_MODE");
  const char *type = getenv("SAGEMAKER_TRITON_INFERENCE_TYPE");
  nrd_srv_sagemaker_options o = {.model =
                                     model && model[0] ? model : "unspecified_SAGEMAKER_TRITON_DEFAULT_MODEL_NAME"};
  if (ping && ping[0] && strcmp(ping, "ready") && strcmp(ping, "live")) {
    fprintf(stderr,
            "nereid: error: starting the SageMaker endpoint: SAGEMAKER_TRITON_PING_MODE must be ready or "
            "live, got '%s'\n",
            ping);
    return -1;
  }
  o.ping_live = ping && !strcmp(ping, "live");
  if (!type || !type[0] || !strcmp(type, "infer")) {
    o.kind = NRD_SRV_SAGEMAKER_INFER;
  } else if (!strcmp(type, "generate")) {
    o.kind = NRD_SRV_SAGEMAKER_GENERATE;
  } else if (!strcmp(type, "generate_stream")) {
    o.kind = NRD_SRV_SAGEMAKER_GENERATE_STREAM;
  } else {
    fprintf(stderr,
            "nereid: error: starting the SageMaker endpoint: invalid inference type '%s' "
            "(SAGEMAKER_TRITON_INFERENCE_TYPE). Must be one of: infer, generate, generate_stream.\n",
            type);
    return -1;
  }
  void *ctx = nrd_srv_sagemaker_ctx_new(&o);
  if (!ctx) {
    fprintf(stderr, "nereid: error: starting the SageMaker endpoint: out of memory\n");
    return -1;
  }
  nrd_srv_http_options opts = {.address = "0.0.0.0",
                               .port = cli->sagemaker_port,
                               .threads = cli->sagemaker_thread_count,
                               .restricted = &cli->http_restricted,
                               .max_input_size = (size_t)cli->http_max_input_size,
                               .client_timeout_secs = cli->http_client_timeout_secs,
                               .shm = shm,
                               .log = log,
                               .tracer = tracer,
                               .endpoint = &nrd_srv_sagemaker_endpoint,
                               .endpoint_ctx = ctx};
  TRITONSERVER_Error *err = nrd_srv_http_start(server, &opts, &ep->sagemaker);
  if (err) {
    fprintf(stderr, "nereid: error: starting the SageMaker endpoint: %s\n", TRITONSERVER_ErrorMessage(err));
    TRITONSERVER_ErrorDelete(err);
    return -1;
  }
  printf("nereid: SageMaker listening on 0.0.0.0:%d (/invocations: %s of model '%s')\n",
         nrd_srv_http_port(ep->sagemaker), !type || !type[0] ? "infer" : type, o.model);
  return 0;
}

int nrd_srv_http_endpoints_start(TRITONSERVER_Server *server, const nrd_srv_cli *cli, nrd_srv_shm *shm,
                                 nrd_srv_log_settings *log, nrd_srv_tracer *tracer, nrd_srv_http_endpoints *ep) {
  memset(ep, 0, sizeof *ep);
  if (cli->allow_http &&
      start_one(server, "HTTP/REST", cli->http_address, cli->http_port, cli->reuse_http_port, cli->http_thread_count,
                (size_t)cli->http_max_input_size, 0, cli->http_client_timeout_secs, shm, log, tracer,
                &cli->http_restricted, cli->http_header_forward, NULL, NULL, &ep->api) != 0)
    return -1;
  if (cli->allow_metrics &&
      start_one(server, "metrics", cli->metrics_address ? cli->metrics_address : cli->http_address, cli->metrics_port,
                false, 1, 64 * 1024, 1, cli->http_client_timeout_secs, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                &ep->metrics) != 0) {
    nrd_srv_http_endpoints_stop(ep, 0);
    return -1;
  }
  if (cli->allow_vertex_ai && start_vertex(server, cli, shm, log, tracer, ep) != 0) {
    nrd_srv_http_endpoints_stop(ep, 0);
    return -1;
  }
  if (cli->allow_sagemaker && start_sagemaker(server, cli, shm, log, tracer, ep) != 0) {
    nrd_srv_http_endpoints_stop(ep, 0);
    return -1;
  }
  return 0;
}

void nrd_srv_http_endpoints_drain(nrd_srv_http_endpoints *ep) {
  nrd_srv_http_drain(ep->api);
  nrd_srv_http_drain(ep->metrics);
  nrd_srv_http_drain(ep->vertex);
  nrd_srv_http_drain(ep->sagemaker);
}

bool nrd_srv_http_endpoints_stop(nrd_srv_http_endpoints *ep, unsigned wait_secs) {
  bool clean = nrd_srv_http_stop(ep->api, wait_secs);
  clean &= nrd_srv_http_stop(ep->metrics, wait_secs);
  clean &= nrd_srv_http_stop(ep->vertex, wait_secs);
  clean &= nrd_srv_http_stop(ep->sagemaker, wait_secs);
  memset(ep, 0, sizeof *ep);
  return clean;
}
