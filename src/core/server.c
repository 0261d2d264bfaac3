/* TRITONSERVER_Server*: creating and stopping a server, readiness, metadata,
 * model control, statistics, metrics and inference submission. */
#include "server.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "backend.h"
#include "cpu_metrics.h"
#include "error.h"
#include "files.h"
#include "gpu.h"
#include "gpu_memory.h"
#include "gpu_metrics.h"
#include "log.h"
#include "message.h"
#include "metrics.h"
#include "model.h"
#include "model_config.h"
#include "rate_limiter.h"
#include "response_cache.h"
#include "parameter.h"
#include "request.h"
#include "response.h"
#include "server_options.h"
#include "stats.h"
#include "text.h"
#include "trace.h"

/* Servers alive in this process; backends are finalized with the last one. */
static atomic_int live_servers;

/* Settings every backend receives in TRITONBACKEND_BackendConfig, then the
 * --backend-config pairs: "" holds those given without a backend name. */
static json_t *backend_cmdline(const TRITONSERVER_ServerOptions *o) {
  json_t *all = json_object();
  json_t *global = json_object();
  char buf[64];
  json_object_set_new(global, "auto-complete-config", json_string(o->strict_model_config ? "false" : "true"));
  json_object_set_new(global, "backend-directory", json_string(o->backend_dir ? o->backend_dir : ""));
  snprintf(buf, sizeof buf, "%f", o->min_compute_capability);
  json_object_set_new(global, "min-compute-capability", json_string(buf));
  json_object_set_new(global, "default-max-batch-size", json_string("4"));
  /* TRITONSERVER_ServerOptionsSetModelLoadDeviceLimit lands here in Triton. */
  for (size_t i = 0; i < o->n_device_limits; i++) {
    char key[64];
    snprintf(key, sizeof key, "model-load-gpu-limit-device-%d", o->device_limits[i].device);
    snprintf(buf, sizeof buf, "%f", o->device_limits[i].fraction);
    json_object_set_new(global, key, json_string(buf));
  }
  json_object_set_new(all, "", global);
  for (size_t i = 0; i < o->backend_configs.count; i++) {
    const nrd_option_triple *t = &o->backend_configs.items[i];
    const char *group = t->group ? t->group : "";
    json_t *g = json_object_get(all, group);
    if (!g) {
      g = json_object();
      json_object_set_new(all, group, g);
    }
    json_object_set_new(g, t->key, json_string(t->value ? t->value : ""));
  }
  return all;
}

/* Notes whether `name` was loaded only as an ensemble's step model. */
static void deps_mark(TRITONSERVER_Server *s, const char *name, bool dep) {
  pthread_mutex_lock(&s->deps_lock);
  size_t i = 0;
  while (i < s->n_deps && strcmp(s->deps[i], name)) i++;
  if (!dep && i < s->n_deps) {
    free(s->deps[i]);
    s->deps[i] = s->deps[--s->n_deps];
  } else if (dep && i == s->n_deps) {
    char **n = realloc(s->deps, (s->n_deps + 1) * sizeof(*n));
    if (n) {
      s->deps = n;
      if ((n[s->n_deps] = strdup(name))) s->n_deps++;
    }
  }
  pthread_mutex_unlock(&s->deps_lock);
}

static bool deps_has(TRITONSERVER_Server *s, const char *name) {
  pthread_mutex_lock(&s->deps_lock);
  bool has = false;
  for (size_t i = 0; i < s->n_deps && !has; i++) has = !strcmp(s->deps[i], name);
  pthread_mutex_unlock(&s->deps_lock);
  return has;
}

static TRITONSERVER_Error *load_with_steps(TRITONSERVER_Server *s, const char *name, const char **chain, size_t depth);

enum { MAX_DEPTH = 32 };

/* Loads those of `steps` (the step models of ensemble `name`, inside
 * `chain`) that are not loaded yet; frees `steps` and its names. Only a
 * cycle is an error: a step that fails to load is logged by its load, and
 * the ensemble's own load then says it is missing. */
static TRITONSERVER_Error *load_steps(TRITONSERVER_Server *s, const char *name, char **steps, size_t n,
                                      const char **chain, size_t depth) {
  TRITONSERVER_Error *err = NULL;
  for (size_t i = 0; i < n; i++) {
    TRITONBACKEND_Model *m = NULL;
    TRITONSERVER_Error *have = err ? NULL : nrd_server_get_model(s, steps[i], -1, &m);
    if (m) nrd_model_unref(m);
    /* INVALID_ARG: loaded in several namespaces, so loaded. */
    bool missing = have && TRITONSERVER_ErrorCode(have) != TRITONSERVER_ERROR_INVALID_ARG;
    if (have) TRITONSERVER_ErrorDelete(have);
    if (missing) {
      const char *next[MAX_DEPTH + 1];
      if (depth) memcpy(next, chain, depth * sizeof(*chain));
      next[depth] = name;
      TRITONSERVER_Error *e = load_with_steps(s, steps[i], next, depth + 1);
      if (e && strstr(TRITONSERVER_ErrorMessage(e), "circular dependency"))
        err = e;
      else if (e)
        TRITONSERVER_ErrorDelete(e); /* logged by the load */
    }
    free(steps[i]);
  }
  free(steps);
  return err;
}

/* Loads `name`; when it is an ensemble, first the models of its steps that
 * are not loaded yet, as Triton loads an ensemble's composing models with
 * it. `chain` lists the ensembles being loaded around this one (a name
 * seen again is a cycle). A step model that fails to load is logged; the
 * ensemble's own load then says it is missing. */
static TRITONSERVER_Error *load_with_steps(TRITONSERVER_Server *s, const char *name, const char **chain, size_t depth) {
  for (size_t i = 0; i < depth; i++) {
    if (strcmp(chain[i], name)) continue;
    char path[1024];
    size_t used = 0;
    for (size_t k = i; k < depth && used < sizeof path; k++)
      used += (size_t)snprintf(path + used, sizeof path - used, "%s -> ", chain[k]);
    /* Triton's sentence (the ensemble met again, the last one before it),
     * then the whole path as ours. */
    TRITONSERVER_Error *e = nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                                          "circular dependency between ensembles: %s -> ... -> %s -> %s "
                                          "(path: %s%s)",
                                          name, chain[depth - 1], name, path, name);
    NRD_LOG_ERROR("failed to load '%s': %s", chain[0], TRITONSERVER_ErrorMessage(e));
    return e;
  }
  if (depth == MAX_DEPTH) {
    NRD_LOG_ERROR("failed to load '%s': ensembles are nested more than %d deep", chain[0], MAX_DEPTH);
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "ensemble '%s' is nested more than %d deep", name, MAX_DEPTH);
  }
  char **steps = NULL;
  size_t n = 0;
  nrd_repo_ensemble_steps(s->repo, name, &steps, &n);
  TRITONSERVER_Error *err = load_steps(s, name, steps, n, chain, depth);
  if (err) return err;
  err = nrd_repo_load(s->repo, name, NULL, NULL, 0);
  if (!err) deps_mark(s, name, depth > 0);
  return err;
}

static TRITONSERVER_Error *load_startup_models(TRITONSERVER_Server *s, const TRITONSERVER_ServerOptions *o) {
  char **names = NULL;
  size_t n = 0;
  bool all = s->mode != TRITONSERVER_MODEL_CONTROL_EXPLICIT;
  for (size_t i = 0; i < o->n_startup_models; i++) all |= !strcmp(o->startup_models[i], "*");
  if (all) {
    NRD_RETURN_IF_ERROR(nrd_repo_scan(s->repo, &names, &n));
  } else {
    names = calloc(o->n_startup_models ? o->n_startup_models : 1, sizeof(char *));
    if (!names) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    for (size_t i = 0; i < o->n_startup_models; i++) names[n++] = strdup(o->startup_models[i]);
  }
  /* Ensembles last, so their steps' models are there when they load; one
   * named alone brings its steps' models with it. */
  size_t failed = 0;
  bool *ens = calloc(n ? n : 1, sizeof(*ens));
  for (size_t i = 0; ens && i < n; i++) ens[i] = names[i] && nrd_repo_is_ensemble(s->repo, names[i]);
  for (int pass = 0; pass < 2; pass++) {
    for (size_t i = 0; i < n; i++) {
      bool ensemble = ens && ens[i];
      if (ensemble != (pass == 1)) continue;
      TRITONSERVER_Error *e = !names[i]  ? nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory")
                              : ensemble ? load_with_steps(s, names[i], NULL, 0)
                                         : nrd_repo_load(s->repo, names[i], NULL, NULL, 0);
      if (e) {
        failed++;
        TRITONSERVER_ErrorDelete(e);
      }
    }
  }
  free(ens);
  for (size_t i = 0; i < n; i++) free(names[i]);
  free(names);
  if (failed) return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "failed to load all models");
  return NULL;
}

/* --host-policy settings as {policy: {setting: value}}. */
static TRITONSERVER_Error *host_policies(const TRITONSERVER_ServerOptions *options, json_t **out) {
  json_t *all = json_object();
  for (size_t i = 0; all && i < options->host_policies.count; i++) {
    const nrd_option_triple *t = &options->host_policies.items[i];
    json_t *p = json_object_get(all, t->group);
    if (!p && json_object_set_new(all, t->group, p = json_object()) != 0) p = NULL;
    if (!p || json_object_set_new(p, t->key, json_string(t->value)) != 0) {
      json_decref(all);
      all = NULL;
    }
  }
  *out = all;
  return all ? NULL : nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory creating server");
}

/* As Triton does, a server whose startup models failed to load is still
 * returned in *server together with the error (with exit-on-error, the
 * default), so an embedding application may choose to keep serving the
 * rest; it then owns the server. */
/* A --metrics-config boolean: false, 0, no and off are false; unset: dflt. */
static bool config_bool(const char *v, bool dflt) {
  if (!v) return dflt;
  return strcasecmp(v, "false") && strcmp(v, "0") && strcasecmp(v, "no") && strcasecmp(v, "off");
}

/* summary_quantiles "<quantile>:<error>,...", as Triton takes it: each
 * pair split at ',' then ':', each part read as std::stod reads it (a
 * number at its start; what follows it is ignored, so Triton's own
 * example "0.1:0.0.1" is 0.1 with error 0). Each quantile in [0, 1] (the
 * error is read and checked, not used: our quantiles are exact over the
 * window). At most 8. */
static TRITONSERVER_Error *parse_quantiles(const char *text, TRITONSERVER_Server *s) {
  s->n_quantiles = 0;
  for (const char *p = text; *p;) {
    const char *comma = strchr(p, ',');
    const char *stop = comma ? comma : p + strlen(p);
    const char *colon = memchr(p, ':', (size_t)(stop - p));
    char *end = NULL;
    double q = strtod(p, &end);
    bool ok = colon && end != p && end <= colon;
    double e = -1;
    if (ok) {
      e = strtod(colon + 1, &end);
      ok = end != colon + 1 && end <= stop;
    }
    if (!ok || e < 0 || e > 1 || !(q >= 0 && q <= 1) || s->n_quantiles == 8)
      return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                           "invalid summary_quantiles '%s': expected up to 8 <quantile>:<error> pairs, each in [0, 1], "
                           "separated by commas",
                           text);
    s->quantiles[s->n_quantiles++] = q;
    p = comma ? comma + 1 : stop;
  }
  return NULL;
}

/* The step resolver the server gives ensembles (ensemble.h): its own calls,
 * with the server as context. */
static TRITONSERVER_Error *step_get_model(void *ctx, const char *ns, const char *name, int64_t version,
                                          TRITONBACKEND_Model **out) {
  return nrd_server_get_model_in(ctx, ns, name, version, out);
}

static TRITONSERVER_Error *step_request_new(void *ctx, TRITONSERVER_InferenceRequest **out, const char *ns,
                                            const char *name, int64_t version) {
  return nrd_server_request_new_in(out, ctx, ns, name, version);
}

static TRITONSERVER_Error *step_infer(void *ctx, TRITONSERVER_InferenceRequest *request,
                                      TRITONSERVER_InferenceTrace *trace) {
  /* A step launched from the previous step's response callback must not
   * hold that step's instance: the pipeline would run one step at a time. */
  request->no_nested_inline = true;
  return TRITONSERVER_ServerInferAsync(ctx, request, trace);
}

/* Triton's "supported GPUs": those whose compute capability is at least
 * the minimum; the others are logged and never used. */
static void find_gpus(TRITONSERVER_Server *s, double min_cc) {
  s->gpu_support = nrd_gpu_driver_loaded();
  s->gpus.min_cc = min_cc;
  for (int id = 0; s->gpu_support && id < NRD_GPU_MAX && s->gpus.n < NRD_MC_GPUS_MAX; id++) {
    const nrd_gpu_device *d = nrd_gpu_device_get(id);
    if (!d) continue;
    double cc = d->cc_major + d->cc_minor / 10.0;
    if (cc + 1e-9 < min_cc) {
      NRD_LOG_INFO("GPU %d: %s, compute capability %d.%d, %llu bytes: not used (below the minimum compute "
                   "capability %.1f)",
                   id, d->name, d->cc_major, d->cc_minor, (unsigned long long)d->total_memory, min_cc);
      continue;
    }
    NRD_LOG_INFO("GPU %d: %s, compute capability %d.%d, %llu bytes", id, d->name, d->cc_major, d->cc_minor,
                 (unsigned long long)d->total_memory);
    s->gpus.ids[s->gpus.n++] = id;
  }
}

static void free_gpu_metrics(TRITONSERVER_Server *s) {
  if (s->gpu_metrics) nrd_gpu_metrics_destroy(s->gpu_metrics);
  free(s->gpu_metrics);
  s->gpu_metrics = NULL;
}

/* The pinned and CUDA memory pools, for the supported GPUs (once per
 * process: a later server keeps the first one's). */
static void make_pools(const TRITONSERVER_Server *s, const TRITONSERVER_ServerOptions *o) {
  if (!s->gpu_support) return;
  int devs[NRD_GPU_MAX];
  uint64_t sizes[NRD_GPU_MAX];
  size_t n = 0;
  for (size_t i = 0; i < o->n_cuda_pools && n < NRD_GPU_MAX; i++, n++)
    devs[n] = o->cuda_pools[i].device, sizes[n] = o->cuda_pools[i].size;
  nrd_gpu_memory_init(o->pinned_memory_pool_byte_size, devs, sizes, n, s->gpus.ids, s->gpus.n);
}

TRITONSERVER_Error *TRITONSERVER_ServerNew(TRITONSERVER_Server **server, TRITONSERVER_ServerOptions *options) {
  NRD_ARG_CHECK(server && options, "server and options must not be NULL");
  *server = NULL;
  if (!options->n_repo_paths)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "at least one model repository path must be given");
  TRITONSERVER_Server *s = calloc(1, sizeof(*s));
  if (!s) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory creating server");
  nrd_response_delay_init(); /* Triton's test hook TRITONSERVER_DELAY_RESPONSE_COMPLETION */
  s->id = strdup(options->server_id ? options->server_id : "triton");
  pthread_mutex_init(&s->deps_lock, NULL);
  s->mode = options->control_mode;
  s->strict_readiness = options->strict_readiness;
  atomic_init(&s->exit_timeout_s, options->exit_timeout_secs);
  const nrd_step_resolver steps = {s, step_get_model, step_request_new, step_infer};
  s->repo = nrd_repo_new(s, &steps, options->repo_paths, options->n_repo_paths, options->backend_dir,
                         options->repoagent_dir, backend_cmdline(options), !options->strict_model_config,
                         options->model_config_name, options->exit_timeout_secs);
  TRITONSERVER_Error *lerr = nrd_rate_limiter_new(options->rate_limit_mode, options->rate_limit_resources,
                                                  options->n_rate_limit_resources, &s->limiter);
  if (!lerr) lerr = nrd_response_cache_new(&options->cache_configs, options->cache_dir, &s->cache);
  if (!lerr) lerr = host_policies(options, &s->host_policies);
  s->counter_latencies = config_bool(nrd_option_triples_find(&options->metrics_configs, "", "counter_latencies"), true);
  s->summary_latencies =
      config_bool(nrd_option_triples_find(&options->metrics_configs, "", "summary_latencies"), false);
  s->histogram_latencies =
      config_bool(nrd_option_triples_find(&options->metrics_configs, "", "histogram_latencies"), false);
  const char *quantiles = nrd_option_triples_find(&options->metrics_configs, "", "summary_quantiles");
  if (!lerr) lerr = parse_quantiles(quantiles ? quantiles : "0.5:0.05,0.9:0.01,0.95:0.001,0.99:0.001", s);
  if (!lerr && options->metrics && options->cpu_metrics) {
    s->cpu = malloc(sizeof(*s->cpu));
    if (s->cpu)
      nrd_cpu_metrics_init(s->cpu, options->metrics_interval_ms);
    else
      lerr = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory creating server");
  }
  if (!s->id || !s->repo || lerr) {
    if (s->cpu) nrd_cpu_metrics_destroy(s->cpu);
    free(s->cpu);
    free_gpu_metrics(s);
    json_decref(s->host_policies);
    nrd_repo_free(s->repo);
    nrd_rate_limiter_free(s->limiter);
    nrd_response_cache_free(s->cache);
    pthread_mutex_destroy(&s->deps_lock);
    free(s->id);
    free(s);
    return lerr ? lerr : nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory creating server");
  }
  find_gpus(s, options->min_compute_capability);
  for (int d = 0; d < NRD_GPU_MAX; d++) s->gpu_load_limit[d] = 1.0;
  for (size_t i = 0; i < options->n_device_limits; i++)
    if (options->device_limits[i].device < NRD_GPU_MAX)
      s->gpu_load_limit[options->device_limits[i].device] = options->device_limits[i].fraction;
  make_pools(s, options);
  if (options->metrics && options->gpu_metrics && s->gpu_support) {
    /* No GPU that NVML knows: no GPU metrics, as Triton without DCGM. */
    s->gpu_metrics = malloc(sizeof(*s->gpu_metrics));
    if (s->gpu_metrics && !nrd_gpu_metrics_init(s->gpu_metrics, options->metrics_interval_ms)) {
      free(s->gpu_metrics);
      s->gpu_metrics = NULL;
    }
  }
  s->repo->load_retries = options->model_load_retries;
  s->repo->namespacing = options->model_namespacing;
  atomic_fetch_add(&live_servers, 1);
  /* The repositories must exist even when no model loads at startup. */
  char **names = NULL;
  size_t n = 0;
  TRITONSERVER_Error *err = nrd_repo_scan(s->repo, &names, &n);
  for (size_t i = 0; i < n; i++) free(names[i]);
  free(names);
  if (err) {
    TRITONSERVER_ServerDelete(s);
    return err;
  }
  err = load_startup_models(s, options);
  if (err && !options->exit_on_error) {
    /* As Triton: without exit-on-error the failures are only logged and the
     * server serves the models that did load. */
    NRD_LOG_ERROR("%s; serving the models that loaded (exit-on-error is off)", TRITONSERVER_ErrorMessage(err));
    TRITONSERVER_ErrorDelete(err);
    err = NULL;
  }
  *server = s;
  return err;
}

/* Every model is unloaded concurrently in the background; Stop waits for
 * them at most the exit timeout and then reports what is still busy rather
 * than hang on a backend that never returns. */
TRITONSERVER_Error *TRITONSERVER_ServerStop(TRITONSERVER_Server *server) {
  NRD_ARG_CHECK(server, "server must not be NULL");
  if (atomic_exchange(&server->stopped, true)) return NULL;
  nrd_repository *r = server->repo;
  char **names = NULL;
  size_t n = 0;
  pthread_rwlock_rdlock(&r->table_lock);
  names = calloc(r->n_models ? r->n_models : 1, sizeof(char *));
  for (size_t i = 0; names && i < r->n_models; i++) names[n++] = strdup(r->models[i].name);
  pthread_rwlock_unlock(&r->table_lock);
  unsigned timeout = atomic_load(&server->exit_timeout_s);
  atomic_store(&r->exit_timeout_s, timeout);
  for (size_t i = 0; i < n; i++) {
    if (names[i]) {
      NRD_ERROR_IGNORE(nrd_repo_unload(r, names[i], false), "stop: unloading a model already going away");
    }
    free(names[i]);
  }
  free(names);
  /* The drain inside each unload may itself use the whole timeout; allow
   * one more second for finalization before giving up. */
  unsigned left = nrd_repo_wait_background(r, timeout + 1);
  if (left)
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL,
                         "exit timeout (%u s) expired: %u model unload(s) still waiting for their backend", timeout,
                         left);
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_ServerDelete(TRITONSERVER_Server *server) {
  if (!server) return NULL;
  NRD_ERROR_IGNORE(TRITONSERVER_ServerStop(server), "delete: stopping a server that stopped already");
  nrd_repo_free(server->repo);
  nrd_rate_limiter_free(server->limiter); /* after the models: their instances unregister */
  nrd_response_cache_free(server->cache); /* after the models: no request can reach it */
  json_decref(server->host_policies);
  if (server->cpu) nrd_cpu_metrics_destroy(server->cpu);
  free(server->cpu);
  free_gpu_metrics(server);
  free(server->id);
  for (size_t i = 0; i < server->n_deps; i++) free(server->deps[i]);
  free(server->deps);
  pthread_mutex_destroy(&server->deps_lock);
  free(server);
  /* Backends go with the last server, unless an abandoned unload may still
   * be running their code: then they stay loaded until the process exits. */
  if (atomic_fetch_sub(&live_servers, 1) == 1) {
    if (nrd_repo_any_abandoned())
      NRD_LOG_ERROR("backends left loaded: a model unload is still running their code");
    else
      nrd_backend_finalize_all();
  }
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_ServerSetExitTimeout(TRITONSERVER_Server *server, unsigned int timeout) {
  NRD_ARG_CHECK(server, "server must not be NULL");
  atomic_store(&server->exit_timeout_s, timeout);
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_ServerRegisterModelRepository(TRITONSERVER_Server *server, const char *repository_path,
                                                               const TRITONSERVER_Parameter **name_mapping,
                                                               const uint32_t mapping_count) {
  NRD_ARG_CHECK(server && repository_path, "server and repository path must not be NULL");
  NRD_ARG_CHECK(name_mapping || !mapping_count, "name mapping must not be NULL when its count is not 0");
  if (server->mode != TRITONSERVER_MODEL_CONTROL_EXPLICIT)
    return nrd_error_new(TRITONSERVER_ERROR_UNSUPPORTED,
                         "repository registration is not allowed if model control mode is not EXPLICIT");
  /* Each parameter maps a folder (its name) to a model name (its string value). */
  const char **names = calloc(mapping_count ? mapping_count : 1, sizeof(char *));
  const char **folders = calloc(mapping_count ? mapping_count : 1, sizeof(char *));
  TRITONSERVER_Error *err = (names && folders) ? NULL : nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  for (uint32_t i = 0; i < mapping_count && !err; i++) {
    const nrd_param *p = name_mapping[i] ? &name_mapping[i]->p : NULL;
    if (!p || p->type != TRITONSERVER_PARAMETER_STRING || !p->v.s)
      err = nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "mapped model name '%s' must be a string",
                          p && p->name ? p->name : "");
    else if (strchr(p->name, '/') || !strcmp(p->name, ".") || !strcmp(p->name, ".."))
      err = nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                          "failed to register '%s': '%s' is not a folder of the repository", repository_path, p->name);
    else {
      folders[i] = p->name;
      names[i] = p->v.s;
    }
  }
  if (!err) err = nrd_repo_register(server->repo, repository_path, names, folders, mapping_count);
  free(names);
  free(folders);
  return err;
}

TRITONSERVER_Error *TRITONSERVER_ServerUnregisterModelRepository(TRITONSERVER_Server *server,
                                                                 const char *repository_path) {
  NRD_ARG_CHECK(server && repository_path, "server and repository path must not be NULL");
  if (server->mode != TRITONSERVER_MODEL_CONTROL_EXPLICIT)
    return nrd_error_new(TRITONSERVER_ERROR_UNSUPPORTED,
                         "repository unregistration is not allowed if model control mode is not EXPLICIT");
  return nrd_repo_unregister(server->repo, repository_path);
}

TRITONSERVER_Error *TRITONSERVER_ServerPollModelRepository(TRITONSERVER_Server *server) {
  NRD_ARG_CHECK(server, "server must not be NULL");
  if (server->mode != TRITONSERVER_MODEL_CONTROL_POLL)
    return nrd_error_new(TRITONSERVER_ERROR_UNAVAILABLE, "poll is only allowed in POLL model control mode");
  if (atomic_load(&server->stopped)) return nrd_error_new(TRITONSERVER_ERROR_UNAVAILABLE, "server is stopping");
  return nrd_repo_poll(server->repo);
}

TRITONSERVER_Error *TRITONSERVER_ServerIsLive(TRITONSERVER_Server *server, bool *live) {
  NRD_ARG_CHECK(server && live, "server and result must not be NULL");
  *live = !atomic_load(&server->stopped);
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_ServerIsReady(TRITONSERVER_Server *server, bool *ready) {
  NRD_ARG_CHECK(server && ready, "server and result must not be NULL");
  *ready = !atomic_load(&server->stopped) && (!server->strict_readiness || nrd_repo_all_ready(server->repo));
  return NULL;
}

TRITONSERVER_Error *nrd_server_get_model(TRITONSERVER_Server *server, const char *name, int64_t version,
                                         TRITONBACKEND_Model **out) {
  if (atomic_load(&server->stopped)) return nrd_error_new(TRITONSERVER_ERROR_UNAVAILABLE, "Server is stopping");
  return nrd_repo_get(server->repo, name, version, out);
}

TRITONSERVER_Error *nrd_server_get_model_in(TRITONSERVER_Server *server, const char *ns, const char *name,
                                            int64_t version, TRITONBACKEND_Model **out) {
  if (atomic_load(&server->stopped)) return nrd_error_new(TRITONSERVER_ERROR_UNAVAILABLE, "Server is stopping");
  return nrd_repo_get_in(server->repo, ns, name, version, out);
}

TRITONSERVER_Error *nrd_server_request_new_in(TRITONSERVER_InferenceRequest **inference_request,
                                              TRITONSERVER_Server *server, const char *ns, const char *model_name,
                                              int64_t model_version) {
  NRD_ARG_CHECK(inference_request && server && model_name, "request, server and model name must not be NULL");
  TRITONBACKEND_Model *m = NULL;
  NRD_RETURN_IF_ERROR(nrd_server_get_model_in(server, ns, model_name, model_version, &m));
  return nrd_request_new_for(inference_request, server, m, model_version);
}

/* Here rather than in request.c: finding the model is the server's part. */
TRITONSERVER_Error *TRITONSERVER_InferenceRequestNew(TRITONSERVER_InferenceRequest **inference_request,
                                                     TRITONSERVER_Server *server, const char *model_name,
                                                     const int64_t model_version) {
  return nrd_server_request_new_in(inference_request, server, NULL, model_name, model_version);
}

/* Asks each instance's TRITONBACKEND_ModelInstanceReady (a Python stub
 * that died, for one). The in-flight count keeps an unload from finalizing
 * the instances meanwhile: it goes up before the state is read, as in
 * infer_async. */
static bool instances_ready(TRITONBACKEND_Model *m) {
  nrd_model_inflight_add(m);
  bool ready = atomic_load(&m->state) == NRD_MODEL_READY;
  for (uint32_t i = 0; ready && i < m->n_instances; i++) {
    TRITONSERVER_Error *e = m->backend->inst_ready(m->instances[i]);
    if (e) {
      NRD_LOG_VERBOSE(1, "model '%s' version %" PRId64 " is not ready: %s", m->name, m->version,
                      TRITONSERVER_ErrorMessage(e));
      TRITONSERVER_ErrorDelete(e);
      ready = false;
    }
  }
  nrd_model_inflight_done(m);
  return ready;
}

TRITONSERVER_Error *TRITONSERVER_ServerModelIsReady(TRITONSERVER_Server *server, const char *model_name,
                                                    const int64_t model_version, bool *ready) {
  NRD_ARG_CHECK(server && model_name && ready, "server, model name and result must not be NULL");
  TRITONBACKEND_Model *m = NULL;
  TRITONSERVER_Error *e = nrd_server_get_model(server, model_name, model_version, &m);
  *ready = e == NULL;
  if (e) {
    TRITONSERVER_ErrorDelete(e);
    return NULL;
  }
  if (m->backend && m->backend->inst_ready) *ready = instances_ready(m);
  nrd_model_unref(m);
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_ServerModelBatchProperties(TRITONSERVER_Server *server, const char *model_name,
                                                            const int64_t model_version, uint32_t *flags,
                                                            void **voidp) {
  NRD_ARG_CHECK(server && model_name && flags, "server, model name and flags must not be NULL");
  TRITONBACKEND_Model *m = NULL;
  NRD_RETURN_IF_ERROR(nrd_server_get_model(server, model_name, model_version, &m));
  *flags = m->max_batch_size > 0 ? TRITONSERVER_BATCH_FIRST_DIM : TRITONSERVER_BATCH_UNKNOWN;
  if (voidp) *voidp = NULL;
  nrd_model_unref(m);
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_ServerModelTransactionProperties(TRITONSERVER_Server *server, const char *model_name,
                                                                  const int64_t model_version, uint32_t *txn_flags,
                                                                  void **voidp) {
  NRD_ARG_CHECK(server && model_name && txn_flags, "server, model name and flags must not be NULL");
  TRITONBACKEND_Model *m = NULL;
  NRD_RETURN_IF_ERROR(nrd_server_get_model(server, model_name, model_version, &m));
  *txn_flags = m->decoupled ? TRITONSERVER_TXN_DECOUPLED : TRITONSERVER_TXN_ONE_TO_ONE;
  if (voidp) *voidp = NULL;
  nrd_model_unref(m);
  return NULL;
}

static TRITONSERVER_Error *message_out(json_t *j, TRITONSERVER_Message **out) {
  if (!j) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  *out = nrd_message_from_json(j);
  if (!*out) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_ServerMetadata(TRITONSERVER_Server *server, TRITONSERVER_Message **server_metadata) {
  NRD_ARG_CHECK(server && server_metadata, "server and result must not be NULL");
  /* Triton's list and order; trace before logging, as Triton's build with
   * tracing lists it. */
  json_t *ext =
      json_pack("[s,s,s,s,s,s,s,s,s,s,s,s,s]", "classification", "sequence", "model_repository",
                "model_repository(unload_dependents)", "schedule_policy", "model_configuration", "system_shared_memory",
                "cuda_shared_memory", "binary_tensor_data", "parameters", "statistics", "trace", "logging");
  return message_out(json_pack("{s:s,s:s,s:o}", "name", server->id, "version", NRD_VERSION, "extensions", ext),
                     server_metadata);
}

TRITONSERVER_Error *TRITONSERVER_ServerModelMetadata(TRITONSERVER_Server *server, const char *model_name,
                                                     const int64_t model_version,
                                                     TRITONSERVER_Message **model_metadata) {
  NRD_ARG_CHECK(server && model_name && model_metadata, "arguments must not be NULL");
  TRITONBACKEND_Model *m = NULL;
  NRD_RETURN_IF_ERROR(nrd_server_get_model(server, model_name, model_version, &m));
  json_t *j = nrd_model_metadata_json(m);
  /* List every ready version, as Triton does. */
  json_t *versions = json_array();
  nrd_repository *r = server->repo;
  pthread_rwlock_rdlock(&r->table_lock);
  for (size_t i = 0; i < r->n_models; i++) {
    if (strcmp(r->models[i].name, model_name)) continue;
    for (size_t k = r->models[i].n_slots; k-- > 0;) {
      nrd_version_slot *s = &r->models[i].slots[k];
      if (!s->model || atomic_load(&s->model->state) != NRD_MODEL_READY) continue;
      char v[32];
      snprintf(v, sizeof v, "%" PRId64, s->version);
      json_array_append_new(versions, json_string(v));
    }
  }
  pthread_rwlock_unlock(&r->table_lock);
  if (j)
    json_object_set_new(j, "versions", versions);
  else
    json_decref(versions);
  nrd_model_unref(m);
  return message_out(j, model_metadata);
}

TRITONSERVER_Error *TRITONSERVER_ServerModelStatistics(TRITONSERVER_Server *server, const char *model_name,
                                                       const int64_t model_version,
                                                       TRITONSERVER_Message **model_stats) {
  NRD_ARG_CHECK(server && model_stats, "server and result must not be NULL");
  json_t *j = NULL;
  NRD_RETURN_IF_ERROR(nrd_repo_stats(server->repo, model_name, model_version, &j));
  return message_out(j, model_stats);
}

TRITONSERVER_Error *TRITONSERVER_ServerModelConfig(TRITONSERVER_Server *server, const char *model_name,
                                                   const int64_t model_version, const uint32_t config_version,
                                                   TRITONSERVER_Message **model_config) {
  NRD_ARG_CHECK(server && model_name && model_config, "arguments must not be NULL");
  TRITONBACKEND_Model *m = NULL;
  NRD_RETURN_IF_ERROR(nrd_server_get_model(server, model_name, model_version, &m));
  TRITONSERVER_Error *e = TRITONBACKEND_ModelConfig(m, config_version, model_config);
  nrd_model_unref(m);
  return e;
}

TRITONSERVER_Error *TRITONSERVER_ServerModelIndex(TRITONSERVER_Server *server, uint32_t flags,
                                                  TRITONSERVER_Message **model_index) {
  NRD_ARG_CHECK(server && model_index, "server and result must not be NULL");
  return message_out(nrd_repo_index(server->repo, flags & TRITONSERVER_INDEX_FLAG_READY), model_index);
}

static TRITONSERVER_Error *check_control(TRITONSERVER_Server *server) {
  if (atomic_load(&server->stopped)) return nrd_error_new(TRITONSERVER_ERROR_UNAVAILABLE, "server is stopping");
  if (server->mode != TRITONSERVER_MODEL_CONTROL_EXPLICIT)
    return nrd_error_new(TRITONSERVER_ERROR_UNAVAILABLE,
                         "explicit model load / unload is not allowed if polling is enabled");
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_ServerLoadModel(TRITONSERVER_Server *server, const char *model_name) {
  NRD_ARG_CHECK(server && model_name, "server and model name must not be NULL");
  NRD_RETURN_IF_ERROR(check_control(server));
  NRD_RETURN_IF_ERROR(nrd_check_model_name(model_name));
  return load_with_steps(server, model_name, NULL, 0);
}

/* The step model names of the ensemble that a load's `config` override
 * (JSON) describes, as nrd_repo_ensemble_steps gives them; none when it
 * is not an ensemble or does not parse (the load then says why). */
static void override_steps(const char *config, char ***steps, size_t *n) {
  *steps = NULL;
  *n = 0;
  json_t *cfg = json_loads(config, 0, NULL);
  const json_t *platform = json_object_get(cfg, "platform");
  const json_t *list = json_object_get(json_object_get(cfg, "ensemble_scheduling"), "step");
  size_t count = json_is_string(platform) && !strcmp(json_string_value(platform), NRD_ENSEMBLE_PLATFORM)
                     ? json_array_size(list)
                     : 0;
  if (count) *steps = calloc(count, sizeof(**steps));
  for (size_t i = 0; *steps && i < count; i++) {
    const char *m = json_string_value(json_object_get(json_array_get(list, i), "model_name"));
    if (m && (((*steps)[*n] = strdup(m)))) (*n)++;
  }
  json_decref(cfg);
}

TRITONSERVER_Error *TRITONSERVER_ServerLoadModelWithParameters(TRITONSERVER_Server *server, const char *model_name,
                                                               const TRITONSERVER_Parameter **parameters,
                                                               const uint64_t parameter_count) {
  NRD_ARG_CHECK(server && model_name, "server and model name must not be NULL");
  NRD_ARG_CHECK(parameters || !parameter_count, "parameters must not be NULL");
  NRD_RETURN_IF_ERROR(check_control(server));
  NRD_RETURN_IF_ERROR(nrd_check_model_name(model_name));
  const char *config = NULL;
  const TRITONSERVER_Parameter **files = calloc(parameter_count ? parameter_count : 1, sizeof(*files));
  if (!files) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  size_t n_files = 0;
  TRITONSERVER_Error *err = NULL;
  for (uint64_t i = 0; i < parameter_count && !err; i++) {
    const nrd_param *p = &parameters[i]->p;
    if (!strcmp(p->name, "config")) {
      if (p->type != TRITONSERVER_PARAMETER_STRING)
        err = nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "load parameter 'config' must be a string of JSON");
      else
        config = p->v.s;
    } else if (!strncmp(p->name, "file:", 5)) {
      if (p->type != TRITONSERVER_PARAMETER_BYTES)
        err = nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "load parameter '%s' must hold bytes", p->name);
      else
        files[n_files++] = parameters[i];
    } else {
      err = nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "unrecognized load parameter '%s'", p->name);
    }
  }
  if (!err) {
    char **steps = NULL;
    size_t n = 0;
    if (config)
      override_steps(config, &steps, &n);
    else
      nrd_repo_ensemble_steps(server->repo, model_name, &steps, &n);
    err = load_steps(server, model_name, steps, n, NULL, 0);
  }
  if (!err) err = nrd_repo_load(server->repo, model_name, config, files, n_files);
  if (!err) deps_mark(server, model_name, false);
  free(files);
  return err;
}

/* The step model names of a loaded ensemble, as a JSON array (new
 * reference) of strings, or NULL when `name` is not a loaded ensemble. */
static json_t *loaded_steps(TRITONSERVER_Server *s, const char *name) {
  TRITONBACKEND_Model *m = NULL;
  TRITONSERVER_Error *e = nrd_server_get_model(s, name, -1, &m);
  if (e) {
    TRITONSERVER_ErrorDelete(e);
    return NULL;
  }
  json_t *names = NULL;
  pthread_mutex_lock(&m->config_lock);
  const json_t *steps = json_object_get(json_object_get(m->config, "ensemble_scheduling"), "step");
  if (json_array_size(steps) && (names = json_array())) {
    for (size_t i = 0; i < json_array_size(steps); i++) {
      const json_t *n = json_object_get(json_array_get(steps, i), "model_name");
      if (json_is_string(n)) json_array_append(names, (json_t *)n);
    }
  }
  pthread_mutex_unlock(&m->config_lock);
  nrd_model_unref(m);
  return names;
}

static bool names_contain(const json_t *names, const char *name) {
  for (size_t i = 0; i < json_array_size(names); i++)
    if (!strcmp(json_string_value(json_array_get(names, i)), name)) return true;
  return false;
}

/* Unloads `name`, then every loaded ensemble that has a step on it, as
 * Triton does (an ensemble cannot serve without its step models). */
static TRITONSERVER_Error *unload_with_users(TRITONSERVER_Server *s, const char *name, unsigned depth) {
  NRD_RETURN_IF_ERROR(nrd_repo_unload(s->repo, name, false));
  deps_mark(s, name, false);
  if (depth > 32) return NULL;
  json_t *idx = nrd_repo_index(s->repo, true);
  for (size_t i = 0; i < json_array_size(idx); i++) {
    const char *other = json_string_value(json_object_get(json_array_get(idx, i), "name"));
    json_t *steps = other && strcmp(other, name) ? loaded_steps(s, other) : NULL;
    bool user = names_contain(steps, name);
    json_decref(steps);
    if (user) {
      NRD_LOG_INFO("unloading ensemble '%s': its step model '%s' is being unloaded", other, name);
      NRD_ERROR_IGNORE(unload_with_users(s, other, depth + 1), "unloading an ensemble that uses the model");
    }
  }
  json_decref(idx);
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_ServerUnloadModel(TRITONSERVER_Server *server, const char *model_name) {
  NRD_ARG_CHECK(server && model_name, "server and model name must not be NULL");
  NRD_RETURN_IF_ERROR(check_control(server));
  return unload_with_users(server, model_name, 0);
}

/* Whether a loaded ensemble other than `except` has a step on `name`. */
static bool used_by_other(TRITONSERVER_Server *s, const char *name, const char *except) {
  json_t *idx = nrd_repo_index(s->repo, true);
  bool used = false;
  for (size_t i = 0; i < json_array_size(idx) && !used; i++) {
    const char *other = json_string_value(json_object_get(json_array_get(idx, i), "name"));
    if (!other || !strcmp(other, except) || !strcmp(other, name)) continue;
    json_t *steps = loaded_steps(s, other);
    used = names_contain(steps, name);
    json_decref(steps);
  }
  json_decref(idx);
  return used;
}

TRITONSERVER_Error *TRITONSERVER_ServerUnloadModelAndDependents(TRITONSERVER_Server *server, const char *model_name) {
  NRD_ARG_CHECK(server && model_name, "server and model name must not be NULL");
  NRD_RETURN_IF_ERROR(check_control(server));
  /* The step models that came only with this ensemble go with it, unless
   * another loaded ensemble still uses them. */
  json_t *steps = loaded_steps(server, model_name);
  TRITONSERVER_Error *err = unload_with_users(server, model_name, 0);
  for (size_t i = 0; !err && i < json_array_size(steps); i++) {
    const char *step = json_string_value(json_array_get(steps, i));
    if (!deps_has(server, step) || used_by_other(server, step, model_name)) continue;
    NRD_ERROR_IGNORE(TRITONSERVER_ServerUnloadModelAndDependents(server, step),
                     "unloading an ensemble's step model no other model uses");
  }
  json_decref(steps);
  return err;
}

/* ----------------------------------------------------------------- metrics */

struct TRITONSERVER_Metrics {
  char *text;
  size_t len;
};

TRITONSERVER_Error *TRITONSERVER_ServerMetrics(TRITONSERVER_Server *server, TRITONSERVER_Metrics **metrics) {
  NRD_ARG_CHECK(server && metrics, "server and result must not be NULL");
  nrd_text t = {0};
  bool sums = server->summary_latencies;
  /* GPU instances' series carry gpu_uuid while GPU metrics are collected. */
  char uuid[NRD_GPU_MAX][96];
  const char *labels[NRD_GPU_MAX];
  int n_uuid = 0;
  if (server->gpu_metrics) {
    nrd_gpu_metrics_uuids(server->gpu_metrics, uuid);
    for (n_uuid = 0; n_uuid < NRD_GPU_MAX; n_uuid++) labels[n_uuid] = uuid[n_uuid][0] ? uuid[n_uuid] : NULL;
  }
  if (nrd_repo_prometheus(server->repo, server->counter_latencies, sums ? server->quantiles : NULL,
                          sums ? server->n_quantiles : 0, n_uuid ? labels : NULL, n_uuid, &t)) {
    free(t.p);
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory rendering metrics");
  }
  char *custom = NULL;
  size_t clen = 0;
  TRITONSERVER_Error *e = nrd_metrics_render(&custom, &clen);
  if (e) {
    free(t.p);
    return e;
  }
  if (clen && nrd_text_appendf(&t, "%s", custom)) {
    free(custom);
    free(t.p);
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory rendering metrics");
  }
  free(custom);
  if (server->gpu_metrics && nrd_gpu_metrics_prometheus(server->gpu_metrics, &t)) {
    free(t.p);
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory rendering metrics");
  }
  if (server->cpu && nrd_cpu_metrics_prometheus(server->cpu, &t)) {
    free(t.p);
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory rendering metrics");
  }
  /* Triton's pinned memory pool gauges. Without the NVIDIA driver there
   * is no pinned pool (as in Triton on a machine without CUDA): both 0. */
  if (nrd_text_appendf(&t,
                       "# HELP nv_pinned_memory_pool_total_bytes Size of the pinned host memory pool, bytes\n"
                       "# TYPE nv_pinned_memory_pool_total_bytes gauge\nnv_pinned_memory_pool_total_bytes %llu\n"
                       "# HELP nv_pinned_memory_pool_used_bytes Pinned host memory in use from the pool, bytes\n"
                       "# TYPE nv_pinned_memory_pool_used_bytes gauge\nnv_pinned_memory_pool_used_bytes %llu\n",
                       (unsigned long long)nrd_gpu_memory_pinned_total(),
                       (unsigned long long)nrd_gpu_memory_pinned_used())) {
    free(t.p);
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory rendering metrics");
  }
  if (server->cache && nrd_response_cache_prometheus(server->cache, &t)) {
    free(t.p);
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory rendering metrics");
  }
  TRITONSERVER_Metrics *m = malloc(sizeof(*m));
  if (!m) {
    free(t.p);
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  }
  m->text = t.p ? t.p : strdup("");
  m->len = t.len;
  *metrics = m;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_MetricsDelete(TRITONSERVER_Metrics *metrics) {
  if (!metrics) return NULL;
  free(metrics->text);
  free(metrics);
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_MetricsFormatted(TRITONSERVER_Metrics *metrics, TRITONSERVER_MetricFormat format,
                                                  const char **base, size_t *byte_size) {
  NRD_ARG_CHECK(metrics && base && byte_size, "arguments must not be NULL");
  if (format != TRITONSERVER_METRIC_PROMETHEUS)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "unknown metrics format %d", (int)format);
  *base = metrics->text ? metrics->text : "";
  *byte_size = metrics->len;
  return NULL;
}

/* --------------------------------------------------------------- inference */

/* A request made before its model was reloaded follows the reload: it is
 * moved to the version that serves its name now, so no request is dropped. */
static TRITONSERVER_Error *follow_reload(TRITONSERVER_Server *server, TRITONSERVER_InferenceRequest *req) {
  TRITONBACKEND_Model *m = req->model;
  if (atomic_load(&m->state) == NRD_MODEL_READY) return NULL;
  TRITONBACKEND_Model *now = NULL;
  TRITONSERVER_Error *lookup = nrd_repo_get_in(server->repo, m->ns, m->name, req->requested_version, &now);
  if (lookup || now == m) {
    if (lookup) TRITONSERVER_ErrorDelete(lookup);
    if (now) nrd_model_unref(now);
    return nrd_error_new(TRITONSERVER_ERROR_UNAVAILABLE, "model '%s' version %" PRId64 " is not ready (unloading)",
                         m->name, m->version);
  }
  req->model = now;
  nrd_model_unref(m);
  return NULL;
}

/* For a model with the response cache on: answers `req` from the cache and
 * returns true, or notes the key in `d` so the response is stored. A
 * request that cannot be hashed (data outside CPU memory) goes on as a
 * miss that stores nothing. */
static bool answered_from_cache(nrd_response_cache *c, TRITONSERVER_InferenceRequest *req, nrd_delivery *d) {
  nrd_cache_key key;
  TRITONSERVER_Error *err = nrd_cache_key_of(req, &key);
  if (err) {
    NRD_LOG_ERROR("Failed to hash request of model '%s': %s", req->model->name, TRITONSERVER_ErrorMessage(err));
    TRITONSERVER_ErrorDelete(err);
    return false;
  }
  uint64_t start = nrd_now_ns();
  nrd_cache_entry *e = nrd_cache_lookup(c, &key);
  if (e) {
    nrd_cache_answer(req, e, start);
    nrd_cache_entry_release(e);
    return true;
  }
  d->cache = c;
  d->on_final = nrd_cache_store_final;
  d->cache_key = key;
  d->cache_lookup_ns = nrd_now_ns() - start;
  return false;
}

/* Hands req to m's scheduler (or answers it from the response cache), with
 * `trace` (may be NULL) riding along from `start_ns`; its start is reported
 * once however often InferAsync tries (*reported). NULL when accepted;
 * otherwise the caller keeps the request and the trace and no callback
 * fires. */
static TRITONSERVER_Error *enqueue(TRITONBACKEND_Model *m, TRITONSERVER_InferenceRequest *req,
                                   TRITONSERVER_InferenceTrace *trace, uint64_t start_ns, bool *reported) {
  if (trace) NRD_RETURN_IF_ERROR(nrd_trace_attach(trace, m->name, m->version, req->id));
  nrd_delivery *d = nrd_delivery_new(req);
  if (!d) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  uint64_t now = nrd_now_ns();
  req->delivery = d;
  nrd_request_adopt_cancel(req, d->cancel);
  req->queue_start_ns = now;
  d->start_ns = now;
  req->deadline_ns = req->timeout_us ? now + req->timeout_us * 1000u : 0;
  req->in_flight = true;
  nrd_model_inflight_add(m);
  nrd_stats_pending_add(&m->stats, 1);
  req->pending = true;
  if (trace) {
    req->trace = trace;
    d->trace = trace;
    if (!*reported) {
      /* Reported before the request can run (and finish) elsewhere. */
      *reported = true;
      nrd_trace_report(trace, TRITONSERVER_TRACE_REQUEST_START, start_ns);
      nrd_trace_report(trace, TRITONSERVER_TRACE_QUEUE_START, now);
      nrd_request_trace_inputs(req, TRITONSERVER_TRACE_TENSOR_QUEUE_INPUT);
    }
  }
  if (m->response_cache && req->server->cache && answered_from_cache(req->server->cache, req, d)) return NULL;
  TRITONSERVER_Error *err = m->sched->ops->enqueue(m->sched, req);
  if (!err) return NULL;
  req->in_flight = false;
  req->trace = NULL;
  d->trace = NULL; /* the caller keeps it */
  req->delivery = NULL;
  atomic_store(&d->final_sent, true);
  nrd_delivery_unref(d);
  nrd_request_pending_done(req);
  nrd_model_inflight_done(m);
  return err;
}

static TRITONSERVER_Error *infer_async(TRITONSERVER_Server *server, TRITONSERVER_InferenceRequest *req,
                                       TRITONSERVER_InferenceTrace *trace) {
  NRD_ARG_CHECK(server && req, "server and request must not be NULL");
  uint64_t start_ns = trace ? nrd_now_ns() : 0;
  if (req->in_flight) return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "inference request is already in flight");
  if (!req->response_fn)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "inference request for model '%s' has no response callback",
                         req->model->name);
  /* A reload can retire the model between the check and the enqueue; then
   * the request moves to the new version and tries again. */
  bool reported = false; /* the trace's start, once across attempts */
  for (int attempt = 0;; attempt++) {
    if (atomic_load(&server->stopped)) return nrd_error_new(TRITONSERVER_ERROR_UNAVAILABLE, "Server is stopping");
    NRD_RETURN_IF_ERROR(follow_reload(server, req));
    TRITONBACKEND_Model *m = req->model;
    NRD_RETURN_IF_ERROR(nrd_request_validate(req));
    /* This call holds a reference and an in-flight count of its own until
     * the scheduler's enqueue has returned: the request can finish and let
     * go of its own before that (the enqueue still wakes a thread after
     * unlocking), and an unload destroys the scheduler only once the count
     * is zero. The count goes up before the state is read, and an unload
     * sets the state before it reads the count, so a call that sees the
     * model READY is always waited for. */
    nrd_model_ref(m);
    nrd_model_inflight_add(m);
    bool ready = atomic_load(&m->state) == NRD_MODEL_READY;
    TRITONSERVER_Error *err =
        ready ? enqueue(m, req, trace, start_ns, &reported)
              : nrd_error_new(TRITONSERVER_ERROR_UNAVAILABLE, "model '%s' version %" PRId64 " is not ready (unloading)",
                              m->name, m->version);
    if (err && ready) ready = atomic_load(&m->state) == NRD_MODEL_READY;
    nrd_model_inflight_done(m);
    nrd_model_unref(m);
    if (!err) return NULL;
    if (attempt >= 2 || ready) return err;
    TRITONSERVER_ErrorDelete(err);
  }
}

/* A trace given with a request that is not accepted goes back through its
 * release callback, as in Triton: the caller never frees it itself. */
TRITONSERVER_Error *TRITONSERVER_ServerInferAsync(TRITONSERVER_Server *server, TRITONSERVER_InferenceRequest *req,
                                                  TRITONSERVER_InferenceTrace *trace) {
  TRITONSERVER_Error *err = infer_async(server, req, trace);
  if (err && trace) nrd_trace_release(trace);
  return err;
}
