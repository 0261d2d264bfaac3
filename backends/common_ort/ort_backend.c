/*
 * The TRITONBACKEND_* entry points of the backends on ONNX Runtime and the
 * setup steps they share (ort_backend.h).
 */
#include "ort_backend.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "ort_cuda.h"

#include "nereid/backend_utils.h"

static TRITONSERVER_Error *oom(void) {
  return nrd_bu_error_newf(TRITONSERVER_ERROR_UNAVAILABLE, "%s: out of memory", ort_backend.name);
}

/* The environment's logging level: ort-logging-level when the backend
 * reads it (default 2, warning), as Triton's Stateful Backend does. */
static TRITONSERVER_Error *logging_level(TRITONBACKEND_Backend *backend, long *level) {
  *level = ORT_LOGGING_LEVEL_WARNING;
  if (!ort_backend.logging_level_setting) return NULL;
  json_t *bconfig = NULL;
  TRITONSERVER_Error *err = nrd_bu_backend_config(backend, &bconfig);
  const char *text = err == NULL ? nrd_bu_backend_setting(bconfig, "ort-logging-level") : NULL;
  if (text != NULL) {
    char *end = NULL;
    *level = strtol(text, &end, 10);
    if (end == text || *end != '\0' || *level < 0 || *level > 4) {
      err = nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                              "%s: backend setting ort-logging-level: '%s' is not a level from 0 (verbose) to 4 "
                              "(fatal)",
                              ort_backend.name, text);
    }
  }
  json_decref(bconfig);
  return err;
}

/* Triton's onnxruntime backend settings for global thread pools; the
 * model's own thread counts are then ignored, as there. */
static TRITONSERVER_Error *global_threads(TRITONBACKEND_Backend *backend, ort_global_threads *out) {
  memset(out, 0, sizeof *out);
  if (strcmp(ort_backend.name, "onnxruntime") != 0) return NULL;
  json_t *bconfig = NULL;
  TRITONSERVER_Error *err = nrd_bu_backend_config(backend, &bconfig);
  const char *on = err == NULL ? nrd_bu_backend_setting(bconfig, "enable-global-threadpool") : NULL;
  if (on != NULL) err = ort_parse_bool(on, "enable-global-threadpool", &out->enabled);
  static const char *const keys[2] = {"intra_op_thread_count", "inter_op_thread_count"};
  int *counts[2] = {&out->intra, &out->inter};
  for (int k = 0; err == NULL && out->enabled && k < 2; k++) {
    const char *text = nrd_bu_backend_setting(bconfig, keys[k]);
    char *end = NULL;
    long v = text != NULL ? strtol(text, &end, 10) : 0;
    if (text != NULL && (end == text || v < INT_MIN || v > INT_MAX)) {
      err = nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                              "failed to convert '%s' to integral number (%s: backend setting %s)", text,
                              ort_backend.name, keys[k]);
    }
    *counts[k] = (int)v;
  }
  json_decref(bconfig);
  return err;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_Initialize(TRITONBACKEND_Backend *backend) {
  TRITONSERVER_Error *err = nrd_bu_api_version_check(ort_backend.name);
  if (err != NULL) return err;
  TRITONBACKEND_ArtifactType type;
  const char *dir = NULL;
  long level = ORT_LOGGING_LEVEL_WARNING;
  err = TRITONBACKEND_BackendArtifacts(backend, &type, &dir);
  ort_global_threads threads;
  if (err == NULL) err = logging_level(backend, &level);
  if (err == NULL) err = global_threads(backend, &threads);
  if (err != NULL) return err;
  ort_runtime *rt = calloc(1, sizeof *rt);
  if (rt == NULL) return oom();
  err = ort_runtime_open(dir, (OrtLoggingLevel)level, &threads, rt);
  if (err == NULL) err = TRITONBACKEND_BackendSetState(backend, rt);
  if (err != NULL) {
    ort_runtime_close(rt);
    free(rt);
    return err;
  }
  NRD_BU_LOG(TRITONSERVER_LOG_INFO, "%s: ONNX Runtime %s from %s, ort-logging-level %ld%s", ort_backend.name,
             rt->version, rt->path, level, rt->global_threads ? ", global thread pools" : "");
  return NULL;
}

/* With a CPU-only ONNX Runtime, a model without instance groups gets a CPU
 * group even where the core finds GPUs (where KIND_AUTO would become
 * KIND_GPU, which such a library cannot run), with the count Triton gives
 * a CPU group of the backend (2 for onnxruntime). With the CUDA provider
 * the onnxruntime backend states no preference, as Triton's: KIND_AUTO
 * runs on the GPUs. The stateful backend keeps its CPU group (its default
 * ort_ep, trt, cannot run a GPU instance here). */
NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_GetBackendAttribute(TRITONBACKEND_Backend *backend,
                                                                         TRITONBACKEND_BackendAttribute *attributes) {
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_BackendState(backend, &state);
  if (err != NULL) return err;
  const ort_runtime *rt = state;
  if (rt != NULL && rt->cuda && strcmp(ort_backend.name, "onnxruntime") == 0) return NULL;
  uint64_t count = strcmp(ort_backend.name, "onnxruntime") == 0 ? 2 : 1;
  return TRITONBACKEND_BackendAttributeAddPreferredInstanceGroup(attributes, TRITONSERVER_INSTANCEGROUPKIND_CPU, count,
                                                                 NULL, 0);
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_Finalize(TRITONBACKEND_Backend *backend) {
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_BackendState(backend, &state);
  if (err != NULL) return err;
  if (state != NULL) {
    ort_runtime_close(state);
    free(state);
  }
  return NULL;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model *model) {
  TRITONBACKEND_Backend *backend = NULL;
  void *rt = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelBackend(model, &backend);
  if (err == NULL) err = TRITONBACKEND_BackendState(backend, &rt);
  if (err != NULL) return err;
  void *m = NULL;
  err = ort_backend.model_new(model, rt, &m);
  if (err == NULL) err = TRITONBACKEND_ModelSetState(model, m);
  if (err != NULL) ort_backend.model_free(m);
  return err;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model *model) {
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelState(model, &state);
  if (err != NULL) return err;
  ort_backend.model_free(state);
  return TRITONBACKEND_ModelSetState(model, NULL);
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance *instance) {
  void *m = NULL;
  TRITONSERVER_Error *err = nrd_bu_instance_model_state(instance, ort_backend.name, &m);
  if (err != NULL) return err;
  void *inst = NULL;
  err = ort_backend.instance_new(instance, m, &inst);
  if (err == NULL) err = TRITONBACKEND_ModelInstanceSetState(instance, inst);
  if (err != NULL) ort_backend.instance_free(inst);
  return err;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance *instance) {
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelInstanceState(instance, &state);
  if (err != NULL) return err;
  ort_backend.instance_free(state);
  return TRITONBACKEND_ModelInstanceSetState(instance, NULL);
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance *instance,
                                                                          TRITONBACKEND_Request **requests,
                                                                          const uint32_t request_count) {
  void *state = NULL;
  TRITONSERVER_Error *err = nrd_bu_instance_state(instance, ort_backend.name, &state);
  if (err != NULL) return err;
  ort_backend.instance_execute(state, instance, requests, request_count);
  return NULL;
}

/* ---- model and instance setup ------------------------------------------ */

TRITONSERVER_Error *ort_model_file(TRITONBACKEND_Model *model, const json_t *config, const char *model_name,
                                   const char *file, const char *field, char **out) {
  TRITONBACKEND_ArtifactType type;
  const char *location = NULL;
  uint64_t version = 0;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelRepository(model, &type, &location);
  if (err == NULL) err = TRITONBACKEND_ModelVersion(model, &version);
  if (err != NULL) return err;
  if (type != TRITONBACKEND_ARTIFACT_FILESYSTEM) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_UNSUPPORTED,
                             "%s: model '%s': only models on the file system can be loaded", ort_backend.name,
                             model_name);
  }
  if (file == NULL || file[0] == '\0') {
    file = json_string_value(json_object_get(config, "default_model_filename"));
  }
  if (file == NULL || file[0] == '\0') file = "model.onnx";
  size_t cap = strlen(location) + strlen(file) + 64 + strlen("/model.onnx");
  char *path = malloc(cap);
  if (path == NULL) return oom();
  snprintf(path, cap, "%s/%llu/%s", location, (unsigned long long)version, file);
  /* Triton also takes a directory named like the file, holding model.onnx
   * (for models whose weights live in files beside it). */
  struct stat st;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
    strcat(path, "/model.onnx");
  }
  if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
    err = nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "%s: model '%s': model file '%s' (%s) does not exist",
                            ort_backend.name, model_name, path, field);
    free(path);
    return err;
  }
  *out = path;
  return NULL;
}

TRITONSERVER_Error *ort_parse_bool(const char *text, const char *what, bool *out) {
  static const char *const yes[] = {"true", "on", "1"}, *const no[] = {"false", "off", "0"};
  for (size_t i = 0; i < 3; i++) {
    if (strcasecmp(text, yes[i]) == 0) return (*out = true), NULL;
    if (strcasecmp(text, no[i]) == 0) return (*out = false), NULL;
  }
  return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "failed to convert '%s' to boolean (%s: %s)", text,
                           ort_backend.name, what);
}

/* A string parameter copied into `dst` (cap bytes), "" when absent. */
static TRITONSERVER_Error *string_parameter(const json_t *config, const char *key, char *dst, size_t cap) {
  const char *v = nrd_bu_config_parameter(config, key);
  dst[0] = '\0';
  if (v == NULL) return NULL;
  if (strlen(v) >= cap) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "%s: parameter '%s' is longer than %zu bytes",
                             ort_backend.name, key, cap - 1);
  }
  strcpy(dst, v);
  return NULL;
}

/* A boolean parameter as Triton parses it: 1, 0, or -1 when absent. */
static TRITONSERVER_Error *bool_parameter(const json_t *config, const char *key, int *out) {
  const char *v = nrd_bu_config_parameter(config, key);
  bool b = false;
  *out = -1;
  if (v == NULL) return NULL;
  TRITONSERVER_Error *err = ort_parse_bool(v, key, &b);
  if (err == NULL) *out = b ? 1 : 0;
  return err;
}

TRITONSERVER_Error *ort_session_options_read(const json_t *config, ort_session_options *o) {
  int64_t intra = 0, inter = 0, mode = 0, level = 0;
  TRITONSERVER_Error *perr = bool_parameter(config, "enable_mem_arena", &o->mem_arena);
  if (perr == NULL) perr = bool_parameter(config, "enable_mem_pattern", &o->mem_pattern);
  if (perr == NULL) {
    perr = string_parameter(config, "session.use_device_allocator_for_initializers",
                            o->device_allocator_for_initializers, sizeof o->device_allocator_for_initializers);
  }
  if (perr == NULL) {
    perr =
        string_parameter(config, "memory.enable_memory_arena_shrinkage", o->arena_shrinkage, sizeof o->arena_shrinkage);
  }
  if (perr != NULL) return perr;
  TRITONSERVER_Error *err = nrd_bu_config_parameter_int(config, "intra_op_thread_count", 0, 0, 1024, &intra);
  if (err == NULL) {
    err = nrd_bu_config_parameter_int(config, "inter_op_thread_count", 0, 0, 1024, &inter);
  }
  if (err == NULL) {
    err = nrd_bu_config_parameter_int(config, "execution_mode", 0, 0, 1, &mode);
  }
  const json_t *graph = json_object_get(json_object_get(json_object_get(config, "optimization"), "graph"), "level");
  if (err == NULL && graph != NULL) {
    err = nrd_bu_json_int(graph, "optimization.graph.level", &level);
  }
  if (err != NULL) return err;
  o->intra_op_threads = (int)intra;
  o->inter_op_threads = (int)inter;
  o->parallel = (int)mode;
  /* As Triton's backend maps optimization.graph.level: -1 basic, 1
   * extended, 2 none, anything else everything ONNX Runtime has. */
  o->optimization = level == -1  ? ORT_ENABLE_BASIC
                    : level == 1 ? ORT_ENABLE_EXTENDED
                    : level == 2 ? ORT_DISABLE_ALL
                                 : ORT_ENABLE_ALL;
  return NULL;
}

TRITONSERVER_Error *ort_instance_open(TRITONBACKEND_ModelInstance *instance, const ort_runtime *rt, const char *path,
                                      const ort_session_options *options, char **name, ort_session *session,
                                      json_t **config) {
  TRITONSERVER_InstanceGroupKind kind;
  TRITONBACKEND_Model *model = NULL;
  const char *server_name = NULL;
  const char *model_name = NULL;
  int32_t device = 0;
  memset(session, 0, sizeof *session);
  *config = NULL;
  *name = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelInstanceName(instance, &server_name);
  if (err == NULL) err = TRITONBACKEND_ModelInstanceKind(instance, &kind);
  if (err == NULL) err = TRITONBACKEND_ModelInstanceDeviceId(instance, &device);
  if (err == NULL) err = TRITONBACKEND_ModelInstanceModel(instance, &model);
  if (err == NULL) err = TRITONBACKEND_ModelName(model, &model_name);
  if (err == NULL) err = nrd_bu_model_config(model, config);
  if (err != NULL) return err;
  bool cpu = kind == TRITONSERVER_INSTANCEGROUPKIND_CPU || kind == TRITONSERVER_INSTANCEGROUPKIND_MODEL;
  if (kind == TRITONSERVER_INSTANCEGROUPKIND_GPU && options->gpu_ep == ORT_GPU_EP_TENSORRT) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_UNSUPPORTED,
                             "%s: instance '%s' on GPU %d: ort_ep 'trt': this build has no TensorRT execution "
                             "provider (ort_ep 'cuda' runs ONNX Runtime's CUDA provider)",
                             ort_backend.name, server_name, (int)device);
  }
  if (kind == TRITONSERVER_INSTANCEGROUPKIND_GPU && options->gpu_ep == ORT_GPU_EP_CPU) cpu = true;
  if (!cpu && kind != TRITONSERVER_INSTANCEGROUPKIND_GPU) {
    return nrd_bu_error_newf(
        TRITONSERVER_ERROR_UNSUPPORTED, "%s: instance '%s' is %s; the %s backend runs KIND_CPU and KIND_GPU instances",
        ort_backend.name, server_name, TRITONSERVER_InstanceGroupKindString(kind), ort_backend.name);
  }
  *name = strdup(server_name);
  if (*name == NULL) return oom();
  ort_session_options o = *options;
  ort_cuda_options cuda;
  if (!cpu) {
    /* KIND_GPU: ONNX Runtime's CUDA provider on the instance's device, with
     * the options Triton's backend reads (checked before the provider is
     * asked for, so a bad value is named even where it is missing). */
    err = ort_cuda_options_read(*config, ort_backend.name, model_name, &cuda);
    if (err != NULL) return err;
    o.cuda = &cuda;
    o.device = (int)device;
    o.backend = ort_backend.name;
    o.instance = server_name;
  }
  return ort_session_open(rt, path, &o, session);
}

bool ort_output_requested(TRITONBACKEND_Request *request, const char *name) {
  uint32_t count = 0;
  TRITONSERVER_Error *err = TRITONBACKEND_RequestOutputCount(request, &count);
  if (err != NULL) {
    TRITONSERVER_ErrorDelete(err);
    return false;
  }
  for (uint32_t i = 0; i < count; i++) {
    const char *n = NULL;
    err = TRITONBACKEND_RequestOutputName(request, i, &n);
    if (err != NULL) {
      TRITONSERVER_ErrorDelete(err);
      continue;
    }
    if (strcmp(n, name) == 0) return true;
  }
  return false;
}

const char *ort_file_of(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash != NULL ? slash + 1 : path;
}
