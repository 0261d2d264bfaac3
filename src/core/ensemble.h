/* Ensemble models (platform "ensemble", ensemble_scheduling): a request runs
 * as a graph of requests to other models, each step as soon as its inputs
 * exist, and is answered with the ensemble's outputs. See docs/ensemble.md. */
#ifndef NRD_ENSEMBLE_H
#define NRD_ENSEMBLE_H

#include <stdbool.h>

#include "scheduler.h"

/* How the ensemble scheduler reaches the models of its steps without
 * calling the server above it (docs/core.md, "Layers"): the server installs
 * these three calls, with itself as `ctx`, when it creates the repository,
 * which hands them to each model load. Each behaves as the server call it
 * stands for: get_model as nrd_server_get_model_in (a counted reference for
 * the caller), request_new as nrd_server_request_new_in (the caller owns
 * the request), infer as TRITONSERVER_ServerInferAsync (takes `trace`
 * either way). Any thread; `ctx` outlives every model. */
typedef struct nrd_step_resolver {
  void *ctx;
  TRITONSERVER_Error *(*get_model)(void *ctx, const char *ns, const char *name, int64_t version,
                                   TRITONBACKEND_Model **out);
  TRITONSERVER_Error *(*request_new)(void *ctx, TRITONSERVER_InferenceRequest **out, const char *ns, const char *name,
                                     int64_t version);
  TRITONSERVER_Error *(*infer)(void *ctx, TRITONSERVER_InferenceRequest *request, TRITONSERVER_InferenceTrace *trace);
} nrd_step_resolver;

/* Creates the ensemble scheduler of `model` (its configuration already
 * validated). Every composing model must be loaded and READY and agree
 * with the ensemble; otherwise an error says which and why. *decoupled
 * tells whether the ensemble answers like a decoupled model (its outputs
 * come from a decoupled step's responses). The scheduler takes no
 * reference on `model`, which owns it; `steps` is copied. Loader thread. */
TRITONSERVER_Error *nrd_ensemble_scheduler_new(TRITONBACKEND_Model *model, const nrd_step_resolver *steps,
                                               nrd_scheduler **out, bool *decoupled);

#endif
