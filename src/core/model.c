/* The model object: references, the in-flight count that unload drains,
 * the look-ups the request path makes, metadata, and the hooks through
 * which requests reach the model's scheduler. Its lifecycle is
 * model_load.c. */
#include "model.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "datatype.h"
#include "model_metrics.h"

static const char *jstr(const json_t *o, const char *key) {
  const char *s = json_string_value(json_object_get(o, key));
  return s ? s : "";
}

void nrd_model_io_free(nrd_io *io, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    free(io[i].name);
    free(io[i].dims);
    free(io[i].reshape);
    for (size_t l = 0; l < io[i].n_labels; l++) free(io[i].labels[l]);
    free(io[i].labels);
  }
  free(io);
}

/* --------------------------------------------------------------- refs */

void nrd_model_ref(TRITONBACKEND_Model *m) { atomic_fetch_add_explicit(&m->refs, 1, memory_order_relaxed); }

void nrd_model_unref(TRITONBACKEND_Model *m) {
  if (!m || atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel) != 1) return;
  nrd_model_io_free(m->inputs, m->n_inputs);
  nrd_model_io_free(m->outputs, m->n_outputs);
  json_decref(m->config);
  free(m->config_json);
  free(m->name);
  free(m->ns);
  free(m->model_dir);
  free(m->version_dir);
  free(m->instances);
  nrd_model_metrics_delete(m);
  nrd_stats_destroy(&m->stats);
  pthread_mutex_destroy(&m->config_lock);
  pthread_mutex_destroy(&m->drain_lock);
  pthread_cond_destroy(&m->drained);
  free(m);
}

void nrd_model_inflight_add(TRITONBACKEND_Model *m) { atomic_fetch_add(&m->inflight, 1); }

/* Lock-free while the model serves; only a model being unloaded has a
 * waiter to wake (see nrd_model_unload for why no wake-up can be missed). */
void nrd_model_inflight_done(TRITONBACKEND_Model *m) {
  if (atomic_fetch_sub(&m->inflight, 1) == 1 && atomic_load(&m->state) != NRD_MODEL_READY) {
    pthread_mutex_lock(&m->drain_lock);
    pthread_cond_broadcast(&m->drained);
    pthread_mutex_unlock(&m->drain_lock);
  }
}

TRITONSERVER_Error *nrd_model_reschedule(TRITONBACKEND_Model *m, TRITONSERVER_InferenceRequest *r) {
  return m->sched->ops->enqueue(m->sched, r);
}

void nrd_model_request_released(TRITONBACKEND_Model *m, TRITONSERVER_InferenceRequest *r) {
  if (m->sched && m->sched->ops->released) m->sched->ops->released(m->sched, r);
}

const nrd_io *nrd_model_find_input(const TRITONBACKEND_Model *m, const char *name) {
  for (uint32_t i = 0; i < m->n_inputs; i++)
    if (!strcmp(m->inputs[i].name, name)) return &m->inputs[i];
  return NULL;
}

const nrd_io *nrd_model_find_output(const TRITONBACKEND_Model *m, const char *name) {
  for (uint32_t i = 0; i < m->n_outputs; i++)
    if (!strcmp(m->outputs[i].name, name)) return &m->outputs[i];
  return NULL;
}

const char *nrd_model_output_label(const TRITONBACKEND_Model *m, const char *output, size_t idx) {
  const nrd_io *io = nrd_model_find_output(m, output);
  return io && idx < io->n_labels ? io->labels[idx] : NULL;
}

static json_t *io_meta(const TRITONBACKEND_Model *m, const nrd_io *io, uint32_t n) {
  json_t *arr = json_array();
  for (uint32_t i = 0; i < n; i++) {
    json_t *shape = json_array();
    if (m->max_batch_size > 0) json_array_append_new(shape, json_integer(-1));
    for (uint32_t d = 0; d < io[i].ndims; d++) json_array_append_new(shape, json_integer(io[i].dims[d]));
    json_array_append_new(arr, json_pack("{s:s,s:s,s:o}", "name", io[i].name, "datatype",
                                         TRITONSERVER_DataTypeString(io[i].dtype), "shape", shape));
  }
  return arr;
}

json_t *nrd_model_metadata_json(const TRITONBACKEND_Model *m) {
  char vbuf[32];
  snprintf(vbuf, sizeof vbuf, "%" PRId64, m->version);
  const char *platform = jstr(m->config, "platform");
  if (!*platform) platform = jstr(m->config, "backend");
  return json_pack("{s:s,s:[s],s:s,s:o,s:o}", "name", m->name, "versions", vbuf, "platform", platform, "inputs",
                   io_meta(m, m->inputs, m->n_inputs), "outputs", io_meta(m, m->outputs, m->n_outputs));
}
