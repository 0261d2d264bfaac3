/* Models: TRITONBACKEND_Model, one loaded version of a model (its
 * lifecycle is model_load.h: backend ModelInitialize, instances, scheduler,
 * drain, finalize).
 *
 * A model is reference counted: the server's model table holds one
 * reference while the version is loaded, every request and delivery holds
 * one. The backend side is finalized at unload, after the scheduler drained
 * and every in-flight request was released; the struct itself is freed when
 * the last reference goes. */
#ifndef NRD_MODEL_H
#define NRD_MODEL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <jansson.h>

#include "triton/core/tritonbackend.h"
#include "scheduler.h"
#include "stats.h"

/* One input or output of the configuration, in the form the request path
 * checks against. */
typedef struct nrd_io {
  char *name;
  TRITONSERVER_DataType dtype;
  int64_t *dims; /* without the batch dimension */
  uint32_t ndims;
  int64_t *reshape; /* NULL when the config has no reshape */
  uint32_t nreshape;
  bool optional;
  bool is_shape_tensor;
  bool allow_ragged_batch;
  char **labels; /* classification labels from label_filename, or NULL */
  size_t n_labels;
} nrd_io;

typedef enum nrd_model_state {
  NRD_MODEL_LOADING,
  NRD_MODEL_READY,
  NRD_MODEL_UNLOADING,
  NRD_MODEL_UNAVAILABLE
} nrd_model_state;

struct TRITONBACKEND_Model {
  atomic_int refs;
  TRITONSERVER_Server *server;
  char *name;
  char *ns; /* namespace: its repository with --model-namespacing, else "" */
  int64_t version;
  char *model_dir; /* <repository>/<name> */
  char *version_dir; /* <repository>/<name>/<version> */

  pthread_mutex_t config_lock; /* guards config/config_json during init */
  json_t *config; /* normalized */
  char *config_json; /* rendered, what ModelConfig returns */
  bool auto_complete; /* backend may complete the config */

  TRITONBACKEND_Backend *backend; /* counted reference on the backend */
  void *user_state; /* the backend's */
  bool backend_initialized; /* ModelInitialize succeeded */

  int32_t max_batch_size;
  bool decoupled;
  bool response_cache; /* response_cache.enable in its config */
  nrd_io *inputs;
  uint32_t n_inputs;
  nrd_io *outputs;
  uint32_t n_outputs;
  bool output_reshape; /* some output has a reshape */

  TRITONBACKEND_ModelInstance **instances;
  uint32_t n_instances;
  nrd_scheduler *sched;

  _Atomic nrd_model_state state;
  pthread_mutex_t drain_lock;
  pthread_cond_t drained;
  atomic_uint_fast64_t inflight; /* requests between InferAsync and release */

  nrd_model_stats stats;
  /* histogram_latencies: this version's first-response histogram (NULL when
   * off); see model_metrics.h. */
  TRITONSERVER_MetricFamily *first_response_family;
  TRITONSERVER_Metric *first_response_metric;
};

/* Frees `n` entries of an inputs or outputs array and the array (NULL
 * with n == 0 is fine). Loader thread, or the last unref. */
void nrd_model_io_free(nrd_io *io, uint32_t n);

/* Reference counting; the last unref frees the struct. Any thread. */
void nrd_model_ref(TRITONBACKEND_Model *m);
void nrd_model_unref(TRITONBACKEND_Model *m);

/* Accounting of requests owned by the core, for drain at unload. */
void nrd_model_inflight_add(TRITONBACKEND_Model *m);
void nrd_model_inflight_done(TRITONBACKEND_Model *m);

/* Hands `r`, which the backend released with RELEASE_RESCHEDULE, back to
 * the model's scheduler to run again. On success the scheduler owns it; on
 * error (stopping, queue full) the caller still does. Any thread. */
TRITONSERVER_Error *nrd_model_reschedule(TRITONBACKEND_Model *m, TRITONSERVER_InferenceRequest *r);

/* Tells the model's scheduler that `r`, which ran at least once, is being
 * released for good (the sequence batcher ends an iterative sequence's
 * turn). The request is still intact. Any thread. */
void nrd_model_request_released(TRITONBACKEND_Model *m, TRITONSERVER_InferenceRequest *r);

/* Returns the config entry for an input/output name or NULL. Any thread. */
const nrd_io *nrd_model_find_input(const TRITONBACKEND_Model *m, const char *name);
const nrd_io *nrd_model_find_output(const TRITONBACKEND_Model *m, const char *name);

/* The classification label `idx` of output `output`, or NULL when the
 * output has no label file or the index is past its end. The string lives
 * as long as the model. Any thread. */
const char *nrd_model_output_label(const TRITONBACKEND_Model *m, const char *output, size_t idx);

/* Model metadata JSON as Triton answers it (name, versions, platform,
 * inputs, outputs). Returns a new reference. Any thread. */
json_t *nrd_model_metadata_json(const TRITONBACKEND_Model *m);

#endif
