/* Server options: typed setters over a plain struct. Every setter checks its
 * arguments first and changes nothing when it returns an error. */
#include "server_options.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "gpu.h"
#include "log.h"

#define NO_OPTIONS() nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "server options object must not be NULL")

static TRITONSERVER_Error *oom(void) { return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory"); }

static TRITONSERVER_Error *null_arg(const char *fn, const char *arg) {
  return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "%s: '%s' must not be NULL", fn, arg);
}

/* Replaces *slot with a copy of value. */
static TRITONSERVER_Error *set_string(char **slot, const char *value) {
  char *copy = strdup(value);
  if (copy == NULL) return oom();
  free(*slot);
  *slot = copy;
  return NULL;
}

/* Appends a copy of value unless an equal string is already present. */
static TRITONSERVER_Error *add_unique(char ***arr, size_t *n, const char *value) {
  for (size_t i = 0; i < *n; i++)
    if (strcmp((*arr)[i], value) == 0) return NULL;
  char **grown = realloc(*arr, (*n + 1) * sizeof(*grown));
  if (grown == NULL) return oom();
  *arr = grown;
  grown[*n] = strdup(value);
  if (grown[*n] == NULL) return oom();
  (*n)++;
  return NULL;
}

static void free_strings(char **arr, size_t n) {
  for (size_t i = 0; i < n; i++) free(arr[i]);
  free(arr);
}

static TRITONSERVER_Error *triples_set(nrd_option_triples *list, const char *group, const char *key,
                                       const char *value) {
  for (size_t i = 0; i < list->count; i++) {
    nrd_option_triple *t = &list->items[i];
    if (strcmp(t->group, group) == 0 && strcmp(t->key, key) == 0) return set_string(&t->value, value);
  }
  nrd_option_triple t = {strdup(group), strdup(key), strdup(value)};
  if (t.group == NULL || t.key == NULL || t.value == NULL) goto fail;
  nrd_option_triple *grown = realloc(list->items, (list->count + 1) * sizeof(*grown));
  if (grown == NULL) goto fail;
  list->items = grown;
  grown[list->count++] = t;
  return NULL;
fail:
  free(t.group);
  free(t.key);
  free(t.value);
  return oom();
}

static void triples_free(nrd_option_triples *list) {
  for (size_t i = 0; i < list->count; i++) {
    free(list->items[i].group);
    free(list->items[i].key);
    free(list->items[i].value);
  }
  free(list->items);
  list->items = NULL;
  list->count = 0;
}

const char *nrd_option_triples_find(const nrd_option_triples *list, const char *group, const char *key) {
  if (list == NULL || group == NULL || key == NULL) return NULL;
  for (size_t i = 0; i < list->count; i++)
    if (strcmp(list->items[i].group, group) == 0 && strcmp(list->items[i].key, key) == 0) return list->items[i].value;
  return NULL;
}

/* Sets (device -> size) in a per-device list, replacing an earlier value. */
static TRITONSERVER_Error *device_size_set(nrd_cuda_pool **arr, size_t *n, int device, uint64_t size) {
  for (size_t i = 0; i < *n; i++) {
    if ((*arr)[i].device == device) {
      (*arr)[i].size = size;
      return NULL;
    }
  }
  nrd_cuda_pool *grown = realloc(*arr, (*n + 1) * sizeof(*grown));
  if (grown == NULL) return oom();
  *arr = grown;
  grown[(*n)++] = (nrd_cuda_pool){device, size};
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_ServerOptionsDelete(TRITONSERVER_ServerOptions *options) {
  if (options == NULL) return NULL;
  free(options->server_id);
  free_strings(options->repo_paths, options->n_repo_paths);
  free_strings(options->startup_models, options->n_startup_models);
  free(options->model_config_name);
  for (size_t i = 0; i < options->n_rate_limit_resources; i++) free(options->rate_limit_resources[i].name);
  free(options->rate_limit_resources);
  free(options->cuda_pools);
  free(options->cuda_virtual_address_sizes);
  free(options->cache_dir);
  triples_free(&options->cache_configs);
  free(options->log_file);
  triples_free(&options->metrics_configs);
  free(options->backend_dir);
  free(options->repoagent_dir);
  free(options->device_limits);
  triples_free(&options->backend_configs);
  triples_free(&options->host_policies);
  free(options);
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_ServerOptionsNew(TRITONSERVER_ServerOptions **options) {
  if (options == NULL) return null_arg("TRITONSERVER_ServerOptionsNew", "options");
  *options = NULL;
  TRITONSERVER_ServerOptions *o = calloc(1, sizeof(*o));
  if (o == NULL) return oom();
  o->server_id = strdup("triton");
  o->model_config_name = strdup("");
  o->cache_dir = strdup("/opt/tritonserver/caches");
  o->log_file = strdup("");
  o->backend_dir = strdup("/opt/tritonserver/backends");
  o->repoagent_dir = strdup("/opt/tritonserver/repoagents");
  if (o->server_id == NULL || o->model_config_name == NULL || o->cache_dir == NULL || o->log_file == NULL ||
      o->backend_dir == NULL || o->repoagent_dir == NULL) {
    TRITONSERVER_ServerOptionsDelete(o);
    return oom();
  }
  o->control_mode = TRITONSERVER_MODEL_CONTROL_POLL;
  o->strict_model_config = true;
  o->rate_limit_mode = TRITONSERVER_RATE_LIMIT_OFF;
  o->pinned_memory_pool_byte_size = (uint64_t)1 << 28;
  /* Triton's GPU build asks for 6.0 by default; without a driver, 0. */
  o->min_compute_capability = nrd_gpu_driver_loaded() ? 6.0 : 0.0;
  o->exit_on_error = true;
  o->strict_readiness = true;
  o->exit_timeout_secs = 30;
  o->buffer_manager_threads = 0;
  o->model_load_threads = 4;
  o->model_load_retries = 0;
  o->model_namespacing = false;
  o->peer_access = true;
  o->log_info = o->log_warn = o->log_error = true;
  o->log_format = TRITONSERVER_LOG_DEFAULT;
  o->log_verbose = 0;
  o->metrics = true;
  o->gpu_metrics = true; /* as Triton's GPU build; nothing without a driver */
  o->cpu_metrics = true;
  o->metrics_interval_ms = 2000;
  *options = o;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_ServerOptionsSetServerId(TRITONSERVER_ServerOptions *options, const char *server_id) {
  if (options == NULL) return NO_OPTIONS();
  if (server_id == NULL) return null_arg("TRITONSERVER_ServerOptionsSetServerId", "server_id");
  return set_string(&options->server_id, server_id);
}

TRITONSERVER_Error *TRITONSERVER_ServerOptionsSetModelRepositoryPath(TRITONSERVER_ServerOptions *options,
                                                                     const char *model_repository_path) {
  if (options == NULL) return NO_OPTIONS();
  if (model_repository_path == NULL)
    return null_arg("TRITONSERVER_ServerOptionsSetModelRepositoryPath", "model_repository_path");
  if (model_repository_path[0] == '\0')
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "TRITONSERVER_ServerOptionsSetModelRepositoryPath: the model repository "
                         "path must not be empty");
  return add_unique(&options->repo_paths, &options->n_repo_paths, model_repository_path);
}

TRITONSERVER_Error *TRITONSERVER_ServerOptionsSetModelControlMode(TRITONSERVER_ServerOptions *options,
                                                                  TRITONSERVER_ModelControlMode mode) {
  if (options == NULL) return NO_OPTIONS();
  if (mode != TRITONSERVER_MODEL_CONTROL_NONE && mode != TRITONSERVER_MODEL_CONTROL_POLL &&
      mode != TRITONSERVER_MODEL_CONTROL_EXPLICIT)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "invalid model control mode %d", (int)mode);
  options->control_mode = mode;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_ServerOptionsSetStartupModel(TRITONSERVER_ServerOptions *options,
                                                              const char *model_name) {
  if (options == NULL) return NO_OPTIONS();
  if (model_name == NULL) return null_arg("TRITONSERVER_ServerOptionsSetStartupModel", "model_name");
  if (model_name[0] == '\0')
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "TRITONSERVER_ServerOptionsSetStartupModel: the model name must not be empty");
  return add_unique(&options->startup_models, &options->n_startup_models, model_name);
}

TRITONSERVER_Error *TRITONSERVER_ServerOptionsSetStrictModelConfig(TRITONSERVER_ServerOptions *options, bool strict) {
  if (options == NULL) return NO_OPTIONS();
  options->strict_model_config = strict;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_ServerOptionsSetModelConfigName(TRITONSERVER_ServerOptions *options,
                                                                 const char *model_config_name) {
  if (options == NULL) return NO_OPTIONS();
  if (model_config_name == NULL) return null_arg("TRITONSERVER_ServerOptionsSetModelConfigName", "model_config_name");
  return set_string(&options->model_config_name, model_config_name);
}

TRITONSERVER_Error *TRITONSERVER_ServerOptionsSetRateLimiterMode(TRITONSERVER_ServerOptions *options,
                                                                 TRITONSERVER_RateLimitMode mode) {
  if (options == NULL) return NO_OPTIONS();
  if (mode != TRITONSERVER_RATE_LIMIT_OFF && mode != TRITONSERVER_RATE_LIMIT_EXEC_COUNT)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "invalid rate limit mode %d", (int)mode);
  options->rate_limit_mode = mode;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_ServerOptionsAddRateLimiterResource(TRITONSERVER_ServerOptions *options,
                                                                     const char *resource_name,
                                                                     const size_t resource_count, const int device) {
  if (options == NULL) return NO_OPTIONS();
  if (resource_name == NULL) return null_arg("TRITONSERVER_ServerOptionsAddRateLimiterResource", "resource_name");
  if (device < -1)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "rate limiter resource '%s': invalid device %d (use -1 for every device)", resource_name,
                         device);
  for (size_t i = 0; i < options->n_rate_limit_resources; i++) {
    nrd_rate_limit_resource *r = &options->rate_limit_resources[i];
    if (r->device == device && strcmp(r->name, resource_name) == 0)
      return nrd_error_new(TRITONSERVER_ERROR_ALREADY_EXISTS, "rate limiter resource '%s' is already set for device %d",
                           resource_name, device);
  }
  char *name = strdup(resource_name);
  if (name == NULL) return oom();
  nrd_rate_limit_resource *grown =
      realloc(options->rate_limit_resources, (options->n_rate_limit_resources + 1) * sizeof(*grown));
  if (grown == NULL) {
    free(name);
    return oom();
  }
  options->rate_limit_resources = grown;
  grown[options->n_rate_limit_resources++] = (nrd_rate_limit_resource){name, resource_count, device};
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_ServerOptionsSetPinnedMemoryPoolByteSize(TRITONSERVER_ServerOptions *options,
                                                                          uint64_t size) {
  if (options == NULL) return NO_OPTIONS();
  options->pinned_memory_pool_byte_size = size;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_ServerOptionsSetCudaMemoryPoolByteSize(TRITONSERVER_ServerOptions *options,
                                                                        int gpu_device, uint64_t size) {
  if (options == NULL) return NO_OPTIONS();
  if (gpu_device < 0) return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "invalid GPU device %d", gpu_device);
  return device_size_set(&options->cuda_pools, &options->n_cuda_pools, gpu_device, size);
}

TRITONSERVER_Error *TRITONSERVER_ServerOptionsSetCudaVirtualAddressSize(TRITONSERVER_ServerOptions *options,
                                                                        int gpu_device,
                                                                        size_t cuda_virtual_address_size) {
  if (options == NULL) return NO_OPTIONS();
  if (gpu_device < 0) return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "invalid GPU device %d", gpu_device);
  return device_size_set(&options->cuda_virtual_address_sizes, &options->n_cuda_virtual_address_sizes, gpu_device,
                         (uint64_t)cuda_virtual_address_size);
}

TRITONSERVER_Error *TRITONSERVER_ServerOptionsSetResponseCacheByteSize(TRITONSERVER_ServerOptions *options,
                                                                       uint64_t size) {
  if (options == NULL) return NO_OPTIONS();
  /* Deprecated form of a "local" cache config: {"size": N}; 0 leaves the
   * cache off, as in Triton. */
  if (size == 0) return NULL;
  char json[64];
  snprintf(json, sizeof(json), "{\"size\":%llu}", (unsigned long long)size);
  return triples_set(&options->cache_configs, "local", "config", json);
}

TRITONSERVER_Error *TRITONSERVER_ServerOptionsSetCacheConfig(TRITONSERVER_ServerOptions *options,
                                                             const char *cache_name, const char *config_json) {
  if (options == NULL) return NO_OPTIONS();
  if (cache_name == NULL) return null_arg("TRITONSERVER_ServerOptionsSetCacheConfig", "cache_name");
  if (config_json == NULL) return null_arg("TRITONSERVER_ServerOptionsSetCacheConfig", "config_json");
  if (cache_name[0] == '\0')
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "TRITONSERVER_ServerOptionsSetCacheConfig: the cache name must not be empty");
  return triples_set(&options->cache_configs, cache_name, "config", config_json);
}

TRITONSERVER_Error *TRITONSERVER_ServerOptionsSetCacheDirectory(TRITONSERVER_ServerOptions *options,
                                                                const char *cache_dir) {
  if (options == NULL) return NO_OPTIONS();
  if (cache_dir == NULL) return null_arg("TRITONSERVER_ServerOptionsSetCacheDirectory", "cache_dir");
  return set_string(&options->cache_dir, cache_dir);
}

TRITONSERVER_Error *TRITONSERVER_ServerOptionsSetMinSupportedComputeCapability(TRITONSERVER_ServerOptions *options,
                                                                               double cc) {
  if (options == NULL) return NO_OPTIONS();
  if (isnan(cc) || cc < 0.0)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "invalid minimum compute capability %g", cc);
  options->min_compute_capability = cc;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_ServerOptionsSetExitOnError(TRITONSERVER_ServerOptions *options, bool exit) {
  if (options == NULL) return NO_OPTIONS();
  options->exit_on_error = exit;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_ServerOptionsSetStrictReadiness(TRITONSERVER_ServerOptions *options, bool strict) {
  if (options == NULL) return NO_OPTIONS();
  options->strict_readiness = strict;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_ServerOptionsSetExitTimeout(TRITONSERVER_ServerOptions *options,
                                                             unsigned int timeout) {
  if (options == NULL) return NO_OPTIONS();
  options->exit_timeout_secs = timeout;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_ServerOptionsSetBufferManagerThreadCount(TRITONSERVER_ServerOptions *options,
                                                                          unsigned int thread_count) {
  if (options == NULL) return NO_OPTIONS();
  options->buffer_manager_threads = thread_count;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_ServerOptionsSetModelLoadThreadCount(TRITONSERVER_ServerOptions *options,
                                                                      unsigned int thread_count) {
  if (options == NULL) return NO_OPTIONS();
  /* Zero would mean no model ever loads; treat it as one thread. */
  options->model_load_threads = thread_count != 0 ? thread_count : 1;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_ServerOptionsSetModelLoadRetryCount(TRITONSERVER_ServerOptions *options,
                                                                     unsigned int retry_count) {
  if (options == NULL) return NO_OPTIONS();
  options->model_load_retries = retry_count;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_ServerOptionsSetModelNamespacing(TRITONSERVER_ServerOptions *options,
                                                                  bool enable_namespace) {
  if (options == NULL) return NO_OPTIONS();
  options->model_namespacing = enable_namespace;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_ServerOptionsSetEnablePeerAccess(TRITONSERVER_ServerOptions *options,
                                                                  bool enable_peer_access) {
  if (options == NULL) return NO_OPTIONS();
  options->peer_access = enable_peer_access;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_ServerOptionsSetLogFile(TRITONSERVER_ServerOptions *options, const char *file) {
  if (options == NULL) return NO_OPTIONS();
  if (file == NULL) return null_arg("TRITONSERVER_ServerOptionsSetLogFile", "file");
  char *copy = strdup(file);
  if (copy == NULL) return oom();
  int rc = nrd_log_set_file(file);
  if (rc != 0) {
    free(copy);
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "failed to open log file '%s': %s", file, strerror(rc));
  }
  free(options->log_file);
  options->log_file = copy;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_ServerOptionsSetLogInfo(TRITONSERVER_ServerOptions *options, bool log) {
  if (options == NULL) return NO_OPTIONS();
  options->log_info = log;
  nrd_log_set_info(log);
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_ServerOptionsSetLogWarn(TRITONSERVER_ServerOptions *options, bool log) {
  if (options == NULL) return NO_OPTIONS();
  options->log_warn = log;
  nrd_log_set_warn(log);
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_ServerOptionsSetLogError(TRITONSERVER_ServerOptions *options, bool log) {
  if (options == NULL) return NO_OPTIONS();
  options->log_error = log;
  nrd_log_set_error(log);
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_ServerOptionsSetLogFormat(TRITONSERVER_ServerOptions *options,
                                                           const TRITONSERVER_LogFormat format) {
  if (options == NULL) return NO_OPTIONS();
  if (format != TRITONSERVER_LOG_DEFAULT && format != TRITONSERVER_LOG_ISO8601)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "invalid log format %d", (int)format);
  options->log_format = format;
  nrd_log_set_format(format);
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_ServerOptionsSetLogVerbose(TRITONSERVER_ServerOptions *options, int level) {
  if (options == NULL) return NO_OPTIONS();
  if (level < 0) return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "invalid verbose log level %d", level);
  options->log_verbose = level;
  nrd_log_set_verbose(level);
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_ServerOptionsSetMetrics(TRITONSERVER_ServerOptions *options, bool metrics) {
  if (options == NULL) return NO_OPTIONS();
  options->metrics = metrics;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_ServerOptionsSetGpuMetrics(TRITONSERVER_ServerOptions *options, bool gpu_metrics) {
  if (options == NULL) return NO_OPTIONS();
  options->gpu_metrics = gpu_metrics;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_ServerOptionsSetCpuMetrics(TRITONSERVER_ServerOptions *options, bool cpu_metrics) {
  if (options == NULL) return NO_OPTIONS();
  options->cpu_metrics = cpu_metrics;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_ServerOptionsSetMetricsInterval(TRITONSERVER_ServerOptions *options,
                                                                 uint64_t metrics_interval_ms) {
  if (options == NULL) return NO_OPTIONS();
  if (metrics_interval_ms == 0)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "TRITONSERVER_ServerOptionsSetMetricsInterval: the interval must be at "
                         "least 1 ms");
  options->metrics_interval_ms = metrics_interval_ms;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_ServerOptionsSetBackendDirectory(TRITONSERVER_ServerOptions *options,
                                                                  const char *backend_dir) {
  if (options == NULL) return NO_OPTIONS();
  if (backend_dir == NULL) return null_arg("TRITONSERVER_ServerOptionsSetBackendDirectory", "backend_dir");
  return set_string(&options->backend_dir, backend_dir);
}

TRITONSERVER_Error *TRITONSERVER_ServerOptionsSetRepoAgentDirectory(TRITONSERVER_ServerOptions *options,
                                                                    const char *repoagent_dir) {
  if (options == NULL) return NO_OPTIONS();
  if (repoagent_dir == NULL) return null_arg("TRITONSERVER_ServerOptionsSetRepoAgentDirectory", "repoagent_dir");
  return set_string(&options->repoagent_dir, repoagent_dir);
}

TRITONSERVER_Error *TRITONSERVER_ServerOptionsSetModelLoadDeviceLimit(TRITONSERVER_ServerOptions *options,
                                                                      const TRITONSERVER_InstanceGroupKind kind,
                                                                      const int device_id, const double fraction) {
  if (options == NULL) return NO_OPTIONS();
  /* Triton's checks, in its order and words. */
  if (device_id < 0) return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "expects device ID >= 0, got %d", device_id);
  if (isnan(fraction) || fraction < 0.0 || fraction > 1.0)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "expects limit fraction to be in range [0.0, 1.0], got %f",
                         fraction);
  if (kind != TRITONSERVER_INSTANCEGROUPKIND_GPU)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "given device kind is not supported, got: %s",
                         TRITONSERVER_InstanceGroupKindString(kind));
  for (size_t i = 0; i < options->n_device_limits; i++) {
    nrd_device_limit *d = &options->device_limits[i];
    if (d->kind == kind && d->device == device_id) {
      d->fraction = fraction;
      return NULL;
    }
  }
  nrd_device_limit *grown = realloc(options->device_limits, (options->n_device_limits + 1) * sizeof(*grown));
  if (grown == NULL) return oom();
  options->device_limits = grown;
  grown[options->n_device_limits++] = (nrd_device_limit){kind, device_id, fraction};
  return NULL;
}

/* Shared argument checks of the three (group, setting, value) setters. */
static TRITONSERVER_Error *check_triple(const char *fn, const char *group_arg, const char *group, const char *setting,
                                        const char *value) {
  if (group == NULL) return null_arg(fn, group_arg);
  if (setting == NULL) return null_arg(fn, "setting");
  if (value == NULL) return null_arg(fn, "value");
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_ServerOptionsSetBackendConfig(TRITONSERVER_ServerOptions *options,
                                                               const char *backend_name, const char *setting,
                                                               const char *value) {
  if (options == NULL) return NO_OPTIONS();
  NRD_RETURN_IF_ERROR(
      check_triple("TRITONSERVER_ServerOptionsSetBackendConfig", "backend_name", backend_name, setting, value));
  return triples_set(&options->backend_configs, backend_name, setting, value);
}

TRITONSERVER_Error *TRITONSERVER_ServerOptionsSetHostPolicy(TRITONSERVER_ServerOptions *options,
                                                            const char *policy_name, const char *setting,
                                                            const char *value) {
  if (options == NULL) return NO_OPTIONS();
  NRD_RETURN_IF_ERROR(
      check_triple("TRITONSERVER_ServerOptionsSetHostPolicy", "policy_name", policy_name, setting, value));
  return triples_set(&options->host_policies, policy_name, setting, value);
}

TRITONSERVER_Error *TRITONSERVER_ServerOptionsSetMetricsConfig(TRITONSERVER_ServerOptions *options, const char *name,
                                                               const char *setting, const char *value) {
  if (options == NULL) return NO_OPTIONS();
  NRD_RETURN_IF_ERROR(check_triple("TRITONSERVER_ServerOptionsSetMetricsConfig", "name", name, setting, value));
  return triples_set(&options->metrics_configs, name, setting, value);
}
