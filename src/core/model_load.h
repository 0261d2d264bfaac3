/* The lifecycle of a model version: load (backend, ModelInitialize,
 * configuration, instances, scheduler, warmup) and unload (drain,
 * finalize). Above the schedulers and instances it creates; the model
 * object that requests use is model.h. */
#ifndef NRD_MODEL_LOAD_H
#define NRD_MODEL_LOAD_H

#include "ensemble.h"
#include "model.h"

/* Everything a load needs besides the model's own folder. */
typedef struct nrd_model_load_args {
  TRITONSERVER_Server *server;
  const char *name;
  const char *ns; /* the model's namespace ("" without namespacing) */
  int64_t version;
  const char *model_dir;
  const json_t *config; /* parsed, before the full normalization */
  bool auto_complete;
  const char *backend_dir;
  const json_t *backend_cmdline; /* {"<backend>":{"key":"value"}}; "" holds the
                                    settings every backend gets */
  const nrd_step_resolver *steps; /* an ensemble's way to its steps (borrowed) */
  bool *whole_model; /* optional out: set when a failure concerns the model, not
                        the version (an ensemble's checks against its steps,
                        which Triton's dependency graph makes) */
} nrd_model_load_args;

/* Runs the whole load lifecycle for one version: backend, ModelInitialize,
 * config normalization and validation, instances, scheduler. On success
 * returns a READY model holding one reference for the caller. On failure
 * everything created is finalized in reverse order and the error carries the
 * reason (the backend's own message where it failed). Loader thread. */
TRITONSERVER_Error *nrd_model_load(const nrd_model_load_args *args, TRITONBACKEND_Model **out);

/* Stops accepting requests, drains the queue and in-flight requests (waiting
 * at most `timeout_s` seconds for the latter), finalizes instances and the
 * model in reverse order, and drops the caller's reference. Any thread that
 * is not an instance thread of this model. */
void nrd_model_unload(TRITONBACKEND_Model *m, unsigned timeout_s);

#endif
