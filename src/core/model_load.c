/* Model lifecycle: load (backend, ModelInitialize, configuration,
 * instances, scheduler, warmup) and unload, and the TRITONBACKEND_Model*
 * API backends call meanwhile. The model object itself is model.c. */
#include "model_load.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "datatype.h"
#include "model_metrics.h"
#include "dynamic_batcher.h"
#include "ensemble.h"
#include "rate_limiter.h"
#include "server.h"
#include "error.h"
#include "files.h"
#include "gpu.h"
#include "warmup.h"
#include "instance.h"
#include "log.h"
#include "message.h"
#include "model_config.h"
#include "sequence_batcher.h"

/* ------------------------------------------------------- config helpers */

static const char *jstr(const json_t *o, const char *key) {
  const char *s = json_string_value(json_object_get(o, key));
  return s ? s : "";
}

static int64_t jint(const json_t *o, const char *key) { return (int64_t)json_integer_value(json_object_get(o, key)); }

static bool jbool(const json_t *o, const char *key) { return json_is_true(json_object_get(o, key)); }

static int64_t *dims_of(const json_t *arr, uint32_t *n) {
  size_t len = json_array_size(arr);
  int64_t *d = malloc((len ? len : 1) * sizeof(int64_t));
  if (!d) return NULL;
  for (size_t i = 0; i < len; i++) d[i] = (int64_t)json_integer_value(json_array_get(arr, i));
  *n = (uint32_t)len;
  return d;
}

/* Reads a classification label file: one label per line. The file must
 * resolve inside the model folder (Triton core f2226c0, dcb315d). */
static TRITONSERVER_Error *load_labels(const TRITONBACKEND_Model *m, nrd_io *io, const char *file) {
  char *path = nrd_path_join(m->model_dir, file);
  if (!path) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  bool inside = false;
  TRITONSERVER_Error *e = file[0] == '/' ? NULL : nrd_path_inside(path, m->model_dir, &inside);
  if (!e && !inside)
    e = nrd_error_new(TRITONSERVER_ERROR_UNSUPPORTED,
                      "label file path '%s' for output '%s' in model '%s' is outside model directory (field "
                      "'label_filename': '%s')",
                      path, io->name, m->name, file);
  if (e) {
    free(path);
    return e;
  }
  FILE *f = fopen(path, "r");
  if (!f) {
    e = nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "model '%s': cannot open label_filename '%s' of output '%s': %s",
                      m->name, path, io->name, strerror(errno));
    free(path);
    return e;
  }
  free(path);
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  while ((len = getline(&line, &cap, f)) >= 0) {
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
    char **nl = realloc(io->labels, (io->n_labels + 1) * sizeof(char *));
    char *copy = strdup(line);
    if (!nl || !copy) {
      free(copy);
      if (nl) io->labels = nl;
      free(line);
      fclose(f);
      return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory reading labels");
    }
    io->labels = nl;
    io->labels[io->n_labels++] = copy;
  }
  free(line);
  fclose(f);
  return NULL;
}

static TRITONSERVER_Error *parse_io(TRITONBACKEND_Model *m, const json_t *arr, bool is_input, nrd_io **out,
                                    uint32_t *count) {
  size_t n = json_array_size(arr);
  nrd_io *io = calloc(n ? n : 1, sizeof(*io));
  if (!io) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  *out = io;
  *count = 0;
  for (size_t i = 0; i < n; i++) {
    const json_t *e = json_array_get(arr, i);
    nrd_io *x = &io[i];
    (*count)++;
    x->name = strdup(jstr(e, "name"));
    x->dtype = nrd_datatype_from_config(jstr(e, "data_type"));
    x->dims = dims_of(json_object_get(e, "dims"), &x->ndims);
    if (!x->name || !x->dims) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    const json_t *rs = json_object_get(e, "reshape");
    if (rs) {
      x->reshape = dims_of(json_object_get(rs, "shape"), &x->nreshape);
      if (!x->reshape) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    }
    x->optional = is_input && jbool(e, "optional");
    x->is_shape_tensor = jbool(e, "is_shape_tensor");
    x->allow_ragged_batch = is_input && jbool(e, "allow_ragged_batch");
    const char *labels = is_input ? "" : jstr(e, "label_filename");
    if (*labels) NRD_RETURN_IF_ERROR(load_labels(m, x, labels));
  }
  return NULL;
}

/* Refuses a model file name of the configuration (default_model_filename
 * or a cc_model_filenames value, read by backends in the version folder)
 * that resolves outside the model folder: "..", an absolute path or a
 * symbolic link leaving it. */
static TRITONSERVER_Error *check_model_file(const TRITONBACKEND_Model *m, const char *field, const char *file) {
  if (!*file) return NULL;
  char *path = nrd_path_join(m->version_dir, file);
  if (!path) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  bool inside = false;
  TRITONSERVER_Error *e = file[0] == '/' ? NULL : nrd_path_inside(path, m->model_dir, &inside);
  if (!e && !inside)
    e = nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                      "model '%s': %s '%s' resolves to '%s', outside the model directory '%s'", m->name, field, file,
                      path, m->model_dir);
  free(path);
  return e;
}

static TRITONSERVER_Error *check_model_files(const TRITONBACKEND_Model *m, const json_t *cfg) {
  NRD_RETURN_IF_ERROR(check_model_file(m, "default_model_filename", jstr(cfg, "default_model_filename")));
  const char *key;
  const json_t *v;
  json_object_foreach((json_t *)json_object_get(cfg, "cc_model_filenames"), key, v) {
    if (json_is_string(v)) NRD_RETURN_IF_ERROR(check_model_file(m, "cc_model_filenames", json_string_value(v)));
  }
  return NULL;
}

/* Re-reads everything the request path needs from m->config. */
static TRITONSERVER_Error *apply_config(TRITONBACKEND_Model *m) {
  nrd_model_io_free(m->inputs, m->n_inputs);
  nrd_model_io_free(m->outputs, m->n_outputs);
  m->inputs = m->outputs = NULL;
  m->n_inputs = m->n_outputs = 0;
  m->max_batch_size = (int32_t)jint(m->config, "max_batch_size");
  m->decoupled = jbool(json_object_get(m->config, "model_transaction_policy"), "decoupled");
  m->response_cache = jbool(json_object_get(m->config, "response_cache"), "enable");
  NRD_RETURN_IF_ERROR(parse_io(m, json_object_get(m->config, "input"), true, &m->inputs, &m->n_inputs));
  NRD_RETURN_IF_ERROR(parse_io(m, json_object_get(m->config, "output"), false, &m->outputs, &m->n_outputs));
  m->output_reshape = false;
  for (uint32_t i = 0; i < m->n_outputs; i++) m->output_reshape |= m->outputs[i].reshape != NULL;
  return NULL;
}

static TRITONSERVER_Error *config_error(TRITONSERVER_Error_Code code, char *msg) {
  TRITONSERVER_Error *e = nrd_error_new(code, "%s", msg ? msg : "invalid model configuration");
  free(msg);
  return e;
}

/* The GPU set a model is normalized and validated against (NULL: the
 * server has no GPU support). */
static const nrd_mc_gpus *load_gpus(const TRITONBACKEND_Model *m) {
  return m->server->gpu_support ? &m->server->gpus : NULL;
}

/* Validates a normalized copy of `cfg` with nrd_model_config_validate_early.
 * When `cfg` names no backend, gives it the one normalization found (from
 * the platform, the default model file name or a model name of the form
 * 'model.<backend_name>'). */
static TRITONSERVER_Error *validate_early(const TRITONBACKEND_Model *m, json_t *cfg) {
  char *msg = NULL;
  json_t *copy = json_deep_copy(cfg);
  if (!copy) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory loading model '%s'", m->name);
  int bad = nrd_model_config_normalize_gpus(copy, m->name, load_gpus(m), &msg);
  if (!bad) {
    /* The file, line and column come with a configuration read from a
     * file (NRD_MODEL_CONFIG_POSITIONS); others have none to name. */
    bad = nrd_model_config_validate_gpus(copy, NULL, load_gpus(m), true, &msg);
  }
  const char *derived = json_string_value(json_object_get(copy, "backend"));
  if (!bad && !*jstr(cfg, "backend") && derived && *derived) json_object_set_new(cfg, "backend", json_string(derived));
  json_decref(copy);
  return bad ? config_error(TRITONSERVER_ERROR_INVALID_ARG, msg) : NULL;
}

/* Normalizes `cfg` (consumed) and installs it with its rendering. */
static TRITONSERVER_Error *install_config(TRITONBACKEND_Model *m, json_t *cfg) {
  char *msg = NULL;
  if (nrd_model_config_normalize_gpus(cfg, m->name, load_gpus(m), &msg)) {
    json_decref(cfg);
    return config_error(TRITONSERVER_ERROR_INVALID_ARG, msg);
  }
  char *rendered = nrd_model_config_render(cfg);
  if (!rendered) {
    json_decref(cfg);
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory rendering the model configuration");
  }
  pthread_mutex_lock(&m->config_lock);
  json_decref(m->config);
  free(m->config_json);
  m->config = cfg;
  m->config_json = rendered;
  pthread_mutex_unlock(&m->config_lock);
  return NULL;
}

/* Maps a framework platform to the backend that serves it. */
static const char *backend_for_platform(const char *platform) {
  static const char *const map[][2] = {
      {"onnxruntime_onnx", "onnxruntime"},   {"tensorflow_savedmodel", "tensorflow"},
      {"tensorflow_graphdef", "tensorflow"}, {"pytorch_libtorch", "pytorch"},
      {"tensorrt_plan", "tensorrt"},
  };
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
    if (!strcmp(platform, map[i][0])) return map[i][1];
  return NULL;
}

/* Uses the backend's preferred instance groups when the config has none. */
static void apply_preferred_groups(json_t *cfg, const TRITONBACKEND_Backend *b) {
  if (json_array_size(json_object_get(cfg, "instance_group")) || !b->attrs.n_groups) return;
  json_t *groups = json_array();
  for (size_t i = 0; i < b->attrs.n_groups; i++) {
    const nrd_pref_group *g = &b->attrs.groups[i];
    json_t *o = json_object();
    char kind[32];
    snprintf(kind, sizeof kind, "KIND_%s", TRITONSERVER_InstanceGroupKindString(g->kind));
    json_object_set_new(o, "kind", json_string(kind));
    json_object_set_new(o, "count", json_integer((json_int_t)(g->count ? g->count : 1)));
    if (g->n_device_ids) {
      json_t *gpus = json_array();
      for (uint64_t d = 0; d < g->n_device_ids; d++)
        json_array_append_new(gpus, json_integer((json_int_t)g->device_ids[d]));
      json_object_set_new(o, "gpus", gpus);
    }
    json_array_append_new(groups, o);
  }
  json_object_set_new(cfg, "instance_group", groups);
}

/* ------------------------------------------------------------ lifecycle */

typedef struct init_job {
  TRITONBACKEND_ModelInstance *inst;
  TRITONSERVER_Error *err;
  pthread_t thread;
} init_job;

/* Triton's check after each KIND_GPU instance is made: its GPU's memory
 * in use must not exceed --model-load-gpu-limit's fraction (checked after,
 * so that the instance's own memory counts). */
static TRITONSERVER_Error *check_gpu_limit(TRITONBACKEND_ModelInstance *inst) {
  if (inst->kind != TRITONSERVER_INSTANCEGROUPKIND_GPU || inst->device_id < 0 || inst->device_id >= NRD_GPU_MAX)
    return NULL;
  double limit = inst->model->server->gpu_load_limit[inst->device_id];
  if (limit >= 1.0) return NULL;
  size_t free_bytes = 0, total = 0;
  NRD_RETURN_IF_ERROR(nrd_gpu_mem_info(inst->device_id, &free_bytes, &total));
  if ((double)(total - free_bytes) > (double)total * limit)
    return nrd_error_new(TRITONSERVER_ERROR_UNAVAILABLE,
                         "can not create model '%s': memory limit set for KIND_GPU %d has exceeded, model loading is "
                         "rejected.",
                         inst->name, (int)inst->device_id);
  return NULL;
}

static TRITONSERVER_Error *init_one(TRITONBACKEND_ModelInstance *inst) {
  TRITONSERVER_Error *e = nrd_instance_init(inst);
  return e ? e : check_gpu_limit(inst);
}

static void *init_main(void *arg) {
  init_job *j = arg;
  j->err = init_one(j->inst);
  return NULL;
}

/* Initializes instances one after another, or all at once when the backend
 * said it can take concurrent ModelInstanceInitialize calls. */
static TRITONSERVER_Error *init_instances(TRITONBACKEND_Model *m) {
  bool parallel = m->backend->attrs.parallel_instance_loading && m->n_instances > 1;
  if (!parallel) {
    for (uint32_t i = 0; i < m->n_instances; i++) {
      TRITONSERVER_Error *e = init_one(m->instances[i]);
      if (e) return e;
    }
    return NULL;
  }
  init_job *jobs = calloc(m->n_instances, sizeof(*jobs));
  if (!jobs) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  for (uint32_t i = 0; i < m->n_instances; i++) {
    jobs[i].inst = m->instances[i];
    if (pthread_create(&jobs[i].thread, NULL, init_main, &jobs[i])) init_main(&jobs[i]), jobs[i].thread = 0;
  }
  TRITONSERVER_Error *first = NULL;
  for (uint32_t i = 0; i < m->n_instances; i++) {
    if (jobs[i].thread) pthread_join(jobs[i].thread, NULL);
    if (jobs[i].err && !first)
      first = jobs[i].err;
    else if (jobs[i].err)
      TRITONSERVER_ErrorDelete(jobs[i].err);
  }
  free(jobs);
  return first;
}

/* One instance: its name, kind, device and host policy as Triton's
 * TritonModelInstance::CreateInstances gives them. */
static TRITONSERVER_Error *add_instance(TRITONBACKEND_Model *m, const json_t *grp, const char *iname,
                                        TRITONSERVER_InstanceGroupKind k, int32_t device) {
  const char *gname = jstr(grp, "name");
  bool passive = jbool(grp, "passive");
  TRITONBACKEND_ModelInstance *inst = nrd_instance_new(m, iname, gname, k, device, passive);
  if (!inst) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  const char *policy = jstr(grp, "host_policy");
  char gpu_policy[32];
  snprintf(gpu_policy, sizeof gpu_policy, "gpu_%d", (int)device);
  inst->host_policy_name = strdup(policy[0]                                   ? policy
                                  : k == TRITONSERVER_INSTANCEGROUPKIND_MODEL ? "model"
                                  : k == TRITONSERVER_INSTANCEGROUPKIND_GPU   ? gpu_policy
                                                                              : "cpu");
  if (!inst->host_policy_name) {
    nrd_instance_finalize_and_free(inst);
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  }
  const json_t *profiles = json_object_get(grp, "profile");
  size_t np = json_array_size(profiles);
  if (np) {
    inst->profiles = calloc(np, sizeof(char *));
    for (size_t p = 0; inst->profiles && p < np; p++) {
      inst->profiles[p] = strdup(json_string_value(json_array_get(profiles, p)) ?: "");
      if (inst->profiles[p]) inst->n_profiles++;
    }
  }
  m->instances[m->n_instances++] = inst;
  nrd_rate_limiter *rl = m->server->limiter;
  if (rl && !passive)
    return nrd_rate_limiter_register(rl, m->name, json_object_get(grp, "rate_limiter"), inst->device_id, &inst->rl);
  return NULL;
}

/* Instances of every group: `count` of them, each once per listed GPU for
 * KIND_GPU; named "<group>_<c>", also when count is 1 (the same name on
 * every GPU), as Triton 2.51 and later name them (backend_model.cc; the
 * older backend_model_instance.cc left out "_0" for a count of 1). */
static TRITONSERVER_Error *create_instances(TRITONBACKEND_Model *m) {
  const json_t *groups = json_object_get(m->config, "instance_group");
  uint32_t total = 0;
  for (size_t g = 0; g < json_array_size(groups); g++) {
    const json_t *grp = json_array_get(groups, g);
    int64_t c = jint(grp, "count");
    size_t per = strcmp(jstr(grp, "kind"), "KIND_GPU") == 0 ? json_array_size(json_object_get(grp, "gpus")) : 1;
    if (c < 0 || c > 4096 || per > NRD_MC_GPUS_MAX)
      return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                           "model '%s': instance_group[%zu].count %" PRId64 " is out of range", m->name, g, c);
    total += (uint32_t)c * (uint32_t)per;
  }
  m->instances = calloc(total ? total : 1, sizeof(*m->instances));
  if (!m->instances) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  for (size_t g = 0; g < json_array_size(groups); g++) {
    const json_t *grp = json_array_get(groups, g);
    const char *kind = jstr(grp, "kind");
    TRITONSERVER_InstanceGroupKind k;
    if (!strcmp(kind, "KIND_CPU") || !strcmp(kind, "KIND_AUTO"))
      k = TRITONSERVER_INSTANCEGROUPKIND_CPU;
    else if (!strcmp(kind, "KIND_MODEL"))
      k = TRITONSERVER_INSTANCEGROUPKIND_MODEL;
    else if (!strcmp(kind, "KIND_GPU") && m->server->gpu_support)
      k = TRITONSERVER_INSTANCEGROUPKIND_GPU;
    else
      return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                           "model '%s': instance_group '%s' asks for %s, but this server has no GPU", m->name,
                           jstr(grp, "name"), kind);
    int64_t count = jint(grp, "count");
    const char *gname = jstr(grp, "name");
    const json_t *gpus = json_object_get(grp, "gpus");
    for (int64_t c = 0; c < count; c++) {
      char iname[512];
      snprintf(iname, sizeof iname, "%s_%" PRId64, gname, c);
      TRITONSERVER_Error *e = NULL;
      if (k != TRITONSERVER_INSTANCEGROUPKIND_GPU) e = add_instance(m, grp, iname, k, 0);
      for (size_t d = 0; !e && k == TRITONSERVER_INSTANCEGROUPKIND_GPU && d < json_array_size(gpus); d++)
        e = add_instance(m, grp, iname, k, (int32_t)json_integer_value(json_array_get(gpus, d)));
      if (e) return e;
    }
  }
  return NULL;
}

/* Tears down whatever a load (or a loaded model) created, newest first. */
static void teardown(TRITONBACKEND_Model *m) {
  if (m->sched) {
    m->sched->ops->stop(m->sched);
    for (uint32_t i = m->n_instances; i-- > 0;) nrd_instance_join(m->instances[i]);
  }
  for (uint32_t i = m->n_instances; i-- > 0;) nrd_instance_finalize_and_free(m->instances[i]);
  m->n_instances = 0;
  if (m->sched) {
    m->sched->ops->destroy(m->sched);
    m->sched = NULL;
  }
  if (m->backend_initialized && m->backend->model_fini) {
    TRITONSERVER_Error *e = m->backend->model_fini(m);
    if (e) {
      NRD_LOG_ERROR("model '%s' version %" PRId64 " failed to finalize: %s", m->name, m->version,
                    TRITONSERVER_ErrorMessage(e));
      TRITONSERVER_ErrorDelete(e);
    }
  }
  m->backend_initialized = false;
  if (m->backend) nrd_backend_release(m->backend);
  m->backend = NULL;
}

/* An ensemble: no backend and no instance; its scheduler runs the steps
 * (ensemble.c). `cfg` is consumed. */
static TRITONSERVER_Error *load_ensemble(TRITONBACKEND_Model *m, json_t *cfg, const nrd_step_resolver *steps,
                                         bool *whole_model, TRITONBACKEND_Model **out) {
  TRITONSERVER_Error *err = install_config(m, cfg);
  if (!err) {
    char *msg = NULL;
    int bad = nrd_model_config_validate_gpus(m->config, NULL, load_gpus(m), false, &msg);
    if (bad) err = config_error(TRITONSERVER_ERROR_INVALID_ARG, msg);
  }
  if (!err) err = apply_config(m);
  if (!err) err = nrd_model_metrics_create(m);
  bool decoupled = false;
  if (!err) {
    err = nrd_ensemble_scheduler_new(m, steps, &m->sched, &decoupled);
    if (err && whole_model) *whole_model = true;
  }
  if (!err && !decoupled && !json_is_object(json_object_get(m->config, "model_transaction_policy"))) {
    /* Triton's configuration of an ensemble states its policy too. */
    json_t *copy = json_deep_copy(m->config);
    if (!copy || json_object_set_new(copy, "model_transaction_policy", json_pack("{s:b}", "decoupled", 0)) != 0) {
      json_decref(copy);
      err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory loading ensemble '%s'", m->name);
    } else {
      err = install_config(m, copy);
    }
  }
  if (!err && decoupled) {
    /* As Triton's check does: an ensemble fed by a decoupled step's
     * responses is decoupled itself, and its configuration says so. */
    json_t *copy = json_deep_copy(m->config);
    json_t *policy = copy ? json_object_get(copy, "model_transaction_policy") : NULL;
    if (copy && !json_is_object(policy)) {
      policy = json_object();
      json_object_set_new(copy, "model_transaction_policy", policy);
    }
    if (!copy || !policy || json_object_set_new(policy, "decoupled", json_true()) != 0) {
      json_decref(copy);
      err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory loading ensemble '%s'", m->name);
    } else {
      err = install_config(m, copy);
    }
    if (!err) m->decoupled = true;
    if (!err) err = nrd_model_metrics_create(m); /* decoupled now: its first-response histogram */
    if (!err && m->response_cache)
      err = nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                          "Response Cache does not currently support model %s with 'decoupled' transaction "
                          "policy. Please disable the response cache.",
                          m->name);
  }
  if (err) {
    teardown(m);
    atomic_store(&m->state, NRD_MODEL_UNAVAILABLE);
    nrd_model_unref(m);
    return err;
  }
  m->stats.load_ns = nrd_now_ns() - m->stats.load_ns;
  atomic_store(&m->state, NRD_MODEL_READY);
  NRD_LOG_INFO("successfully loaded '%s' version %" PRId64, m->name, m->version);
  *out = m;
  return NULL;
}

/* After every instance thread reported (or was joined): frees the samples.
 * The instances' pointers to them are left: a thread reads them once, at
 * its start, and writing them now would race with threads that had no
 * warmup to run. */
/* The scheduler its config asks for, given the instances it may run on
 * and how (nrd_executor). */
static TRITONSERVER_Error *create_scheduler(TRITONBACKEND_Model *m) {
  nrd_exec_instance *insts = calloc(m->n_instances ? m->n_instances : 1, sizeof(*insts));
  if (!insts)
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory creating the scheduler of '%s'", m->name);
  for (uint32_t i = 0; i < m->n_instances; i++)
    insts[i] = (nrd_exec_instance){m->instances[i], m->instances[i]->passive, m->instances[i]->rl != NULL};
  nrd_executor ex = {.execute = nrd_instance_execute, .instances = insts, .n_instances = m->n_instances};
  TRITONSERVER_Error *err = NULL;
  if (json_object_get(m->config, "sequence_batching")) {
    err = nrd_sequence_batcher_new(m, &ex, &m->sched);
  } else if (json_object_get(m->config, "dynamic_batching") && m->max_batch_size > 0) {
    err = nrd_dynamic_batcher_new(m, &m->sched);
  } else if (!(m->sched = nrd_default_scheduler_new(m, &ex))) {
    err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory creating the scheduler of '%s'", m->name);
  }
  free(insts);
  return err;
}

static void warmup_done(nrd_warmup_wait *wait, nrd_warmup *warmup) {
  if (wait->first_err) TRITONSERVER_ErrorDelete(wait->first_err);
  wait->first_err = NULL;
  nrd_warmup_free(warmup);
}

TRITONSERVER_Error *nrd_model_load(const nrd_model_load_args *a, TRITONBACKEND_Model **out) {
  TRITONSERVER_Error *err = NULL;
  nrd_warmup *warmup = NULL;
  nrd_warmup_wait wait = {.lock = PTHREAD_MUTEX_INITIALIZER, .done = PTHREAD_COND_INITIALIZER};
  TRITONBACKEND_Model *m = calloc(1, sizeof(*m));
  if (!m) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory loading model '%s'", a->name);
  atomic_init(&m->refs, 1);
  atomic_init(&m->state, NRD_MODEL_LOADING);
  atomic_init(&m->inflight, 0);
  pthread_mutex_init(&m->config_lock, NULL);
  pthread_mutex_init(&m->drain_lock, NULL);
  pthread_cond_init(&m->drained, NULL);
  nrd_stats_init(&m->stats);
  m->stats.load_ns = nrd_now_ns(); /* the start, until the load is done */
  m->server = a->server;
  m->version = a->version;
  m->auto_complete = a->auto_complete;
  m->name = strdup(a->name);
  m->ns = strdup(a->ns ? a->ns : "");
  m->model_dir = strdup(a->model_dir);
  char vbuf[32];
  snprintf(vbuf, sizeof vbuf, "%" PRId64, a->version);
  m->version_dir = nrd_path_join(a->model_dir, vbuf);
  json_t *cfg = json_deep_copy(a->config);
  bool sums_failed = a->server->summary_latencies && nrd_stats_enable_summaries(&m->stats) != 0;
  if (!m->name || !m->ns || !m->model_dir || !m->version_dir || !cfg || sums_failed) {
    json_decref(cfg);
    err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory loading model '%s'", a->name);
    goto fail;
  }

  /* As Triton: the configuration is validated before any backend call, so
   * a bad one gets the core's message, never the backend's. Only what the
   * backend's auto-complete may still fill in waits for the full check
   * after its ModelInitialize. */
  if (nrd_model_config_detect_backend(cfg, m->model_dir) != 0) {
    json_decref(cfg);
    err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory loading model '%s'", a->name);
    goto fail;
  }
  if ((err = validate_early(m, cfg)) || (err = check_model_files(m, cfg))) {
    json_decref(cfg);
    goto fail;
  }
  /* Which backend serves it: 'backend', else derived from 'platform'. */
  const char *bname = jstr(cfg, "backend");
  if (!*bname) {
    const char *platform = jstr(cfg, "platform");
    if (!strcmp(platform, NRD_ENSEMBLE_PLATFORM)) return load_ensemble(m, cfg, a->steps, a->whole_model, out);
    const char *derived = backend_for_platform(platform);
    if (!derived) {
      json_decref(cfg);
      err = nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "model '%s' names no backend (set 'backend' in config.pbtxt)",
                          a->name);
      goto fail;
    }
    json_object_set_new(cfg, "backend", json_string(derived));
    bname = jstr(cfg, "backend");
  }
  /* Server-wide settings first, then the ones given for this backend. */
  json_t *cmdline = json_object();
  json_object_update(cmdline, json_object_get(a->backend_cmdline, ""));
  json_object_update(cmdline, json_object_get(a->backend_cmdline, bname));
  err = nrd_backend_acquire(bname, jstr(cfg, "runtime"), m->model_dir, m->version_dir, a->backend_dir, cmdline,
                            &m->backend);
  json_decref(cmdline);
  if (err) {
    json_decref(cfg);
    goto fail;
  }
  apply_preferred_groups(cfg, m->backend);
  if ((err = install_config(m, cfg))) goto fail;

  if (m->backend->model_init) {
    TRITONSERVER_Error *e = m->backend->model_init(m);
    if (e) {
      err = e; /* the backend's own message is the reason */
      goto fail;
    }
  }
  m->backend_initialized = true;

  char *msg = NULL;
  int bad = nrd_model_config_validate_gpus(m->config, NULL, load_gpus(m), false, &msg);
  if (bad) {
    err = config_error(TRITONSERVER_ERROR_INVALID_ARG, msg);
    goto fail;
  }
  if ((err = apply_config(m))) goto fail;
  if ((err = nrd_model_metrics_create(m))) goto fail;
  if ((err = create_instances(m))) goto fail;
  if ((err = init_instances(m))) goto fail;
  if ((err = create_scheduler(m))) goto fail;
  /* Warmup runs on each instance's thread before it serves; the model is
   * READY only once every instance ran every sample. */
  if ((err = nrd_warmup_prepare(m, &warmup))) goto fail;
  for (uint32_t i = 0; warmup && i < m->n_instances; i++) {
    if (m->instances[i]->passive) continue;
    m->instances[i]->warmup = warmup;
    m->instances[i]->warmup_wait = &wait;
    wait.pending++;
  }
  for (uint32_t i = 0; i < m->n_instances; i++) {
    if ((err = nrd_instance_start(m->instances[i]))) {
      if (m->instances[i]->warmup) wait.pending--;
      for (uint32_t k = i + 1; k < m->n_instances; k++)
        if (m->instances[k]->warmup) wait.pending--;
      break;
    }
  }
  pthread_mutex_lock(&wait.lock);
  while (wait.pending) pthread_cond_wait(&wait.done, &wait.lock);
  pthread_mutex_unlock(&wait.lock);
  if (!err && wait.first_err) {
    err = wait.first_err;
    wait.first_err = NULL;
  }
  if (err) goto fail;
  warmup_done(&wait, warmup);
  m->stats.load_ns = nrd_now_ns() - m->stats.load_ns;
  atomic_store(&m->state, NRD_MODEL_READY);
  NRD_LOG_INFO("successfully loaded '%s' version %" PRId64, m->name, m->version);
  *out = m;
  return NULL;

fail:
  teardown(m);
  warmup_done(&wait, warmup);
  atomic_store(&m->state, NRD_MODEL_UNAVAILABLE);
  nrd_model_unref(m);
  return err;
}

void nrd_model_unload(TRITONBACKEND_Model *m, unsigned timeout_s) {
  atomic_store(&m->state, NRD_MODEL_UNLOADING);
  /* Queued requests still run; the instance threads exit once drained. */
  if (m->sched) {
    m->sched->ops->stop(m->sched);
    for (uint32_t i = 0; i < m->n_instances; i++) nrd_instance_join(m->instances[i]);
  }
  /* Requests a (decoupled) backend still holds must come back first. The
   * state was set to UNLOADING before reading the counter, and a finishing
   * request decrements before reading the state: whichever comes second in
   * that order sees the other, so either we see zero or it wakes us. */
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += timeout_s;
  pthread_mutex_lock(&m->drain_lock);
  while (atomic_load(&m->inflight) > 0)
    if (pthread_cond_timedwait(&m->drained, &m->drain_lock, &until) == ETIMEDOUT) break;
  uint64_t left = atomic_load(&m->inflight);
  pthread_mutex_unlock(&m->drain_lock);
  if (left)
    NRD_LOG_WARN("model '%s' version %" PRId64 ": %" PRIu64 " requests still in flight after %u s; finalizing anyway",
                 m->name, m->version, left, timeout_s);
  teardown(m);
  atomic_store(&m->state, NRD_MODEL_UNAVAILABLE);
  NRD_LOG_INFO("successfully unloaded '%s' version %" PRId64, m->name, m->version);
  nrd_model_unref(m);
}

/* ------------------------------------------------------------ public API */

TRITONSERVER_Error *TRITONBACKEND_ModelName(TRITONBACKEND_Model *model, const char **name) {
  NRD_ARG_CHECK(model && name, "model and name must not be NULL");
  *name = model->name;
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ModelVersion(TRITONBACKEND_Model *model, uint64_t *version) {
  NRD_ARG_CHECK(model && version, "model and version must not be NULL");
  *version = (uint64_t)model->version;
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ModelRepository(TRITONBACKEND_Model *model, TRITONBACKEND_ArtifactType *artifact_type,
                                                  const char **location) {
  NRD_ARG_CHECK(model && artifact_type && location, "arguments must not be NULL");
  *artifact_type = TRITONBACKEND_ARTIFACT_FILESYSTEM;
  *location = model->model_dir;
  return NULL;
}

/* The caller owns the returned message. */
TRITONSERVER_Error *TRITONBACKEND_ModelConfig(TRITONBACKEND_Model *model, const uint32_t config_version,
                                              TRITONSERVER_Message **model_config) {
  NRD_ARG_CHECK(model && model_config, "model and config must not be NULL");
  if (config_version != 1)
    return nrd_error_new(TRITONSERVER_ERROR_UNSUPPORTED,
                         "model configuration version %u is not supported; only version 1 is", config_version);
  pthread_mutex_lock(&model->config_lock);
  char *copy = strdup(model->config_json);
  pthread_mutex_unlock(&model->config_lock);
  if (!copy) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  *model_config = nrd_message_from_string(copy, strlen(copy));
  if (!*model_config) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ModelAutoCompleteConfig(TRITONBACKEND_Model *model, bool *auto_complete_config) {
  NRD_ARG_CHECK(model && auto_complete_config, "model and result must not be NULL");
  *auto_complete_config = model->auto_complete;
  return NULL;
}

/* The caller keeps ownership of `model_config`. Only during ModelInitialize. */
TRITONSERVER_Error *TRITONBACKEND_ModelSetConfig(TRITONBACKEND_Model *model, const uint32_t config_version,
                                                 TRITONSERVER_Message *model_config) {
  NRD_ARG_CHECK(model && model_config, "model and config must not be NULL");
  if (config_version != 1)
    return nrd_error_new(TRITONSERVER_ERROR_UNSUPPORTED,
                         "model configuration version %u is not supported; only version 1 is", config_version);
  if (atomic_load(&model->state) != NRD_MODEL_LOADING)
    return nrd_error_new(TRITONSERVER_ERROR_UNAVAILABLE,
                         "model '%s': the configuration can only be changed while the model loads", model->name);
  const char *json = NULL;
  size_t len = 0;
  NRD_RETURN_IF_ERROR(TRITONSERVER_MessageSerializeToJson(model_config, &json, &len));
  char *msg = NULL;
  json_t *cfg = nrd_model_config_from_json(json, len, &msg);
  if (!cfg) {
    TRITONSERVER_Error *e =
        nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "model '%s': configuration set by backend '%s' is invalid: %s",
                      model->name, model->backend->name, msg ? msg : "unknown error");
    free(msg);
    return e;
  }
  /* The backend's configuration still comes from the model's file, if it
   * had one: keep its name, and the positions that are still true. */
  nrd_model_config_carry_positions(cfg, model->config);
  return install_config(model, cfg);
}

TRITONSERVER_Error *TRITONBACKEND_ModelServer(TRITONBACKEND_Model *model, TRITONSERVER_Server **server) {
  NRD_ARG_CHECK(model && server, "model and server must not be NULL");
  *server = model->server;
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ModelBackend(TRITONBACKEND_Model *model, TRITONBACKEND_Backend **backend) {
  NRD_ARG_CHECK(model && backend, "model and backend must not be NULL");
  *backend = model->backend;
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ModelState(TRITONBACKEND_Model *model, void **state) {
  NRD_ARG_CHECK(model && state, "model and state must not be NULL");
  *state = model->user_state;
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ModelSetState(TRITONBACKEND_Model *model, void *state) {
  NRD_ARG_CHECK(model, "model must not be NULL");
  model->user_state = state;
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ModelReportMemoryUsage(TRITONBACKEND_Model *model,
                                                         TRITONSERVER_BufferAttributes **usage, uint32_t usage_size) {
  NRD_ARG_CHECK(model, "model must not be NULL");
  return nrd_stats_memory_report(&model->stats, model, usage, usage_size);
}
