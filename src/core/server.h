/* The server object: options, the model repository, and the entry points
 * of the in-process API that act on them. */
#ifndef NRD_SERVER_H
#define NRD_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include <jansson.h>

#include "triton/core/tritonserver.h"
#include "gpu.h"
#include "model_config.h"
#include "repository.h"

struct TRITONSERVER_Server {
  char *id;
  TRITONSERVER_ModelControlMode mode;
  bool strict_readiness;
  atomic_uint exit_timeout_s;
  nrd_repository *repo;
  atomic_bool stopped;
  struct nrd_rate_limiter *limiter; /* NULL: --rate-limit=off */
  struct nrd_response_cache *cache; /* NULL: no --cache-config */
  json_t *host_policies; /* {policy: {setting: value}} from --host-policy */
  bool counter_latencies; /* --metrics-config counter_latencies (default true) */
  bool summary_latencies; /* --metrics-config summary_latencies (default false) */
  bool histogram_latencies; /* --metrics-config histogram_latencies (default false) */
  struct nrd_cpu_metrics *cpu; /* NULL: metrics or CPU metrics off */
  struct nrd_gpu_metrics *gpu_metrics; /* NULL: metrics or GPU metrics off, or no GPU NVML knows */
  double quantiles[8]; /* summary_quantiles, as given */
  /* The GPUs models may use (compute capability at least the minimum);
   * gpu_support is false without an NVIDIA driver. Fixed after ServerNew. */
  bool gpu_support;
  nrd_mc_gpus gpus;
  /* --model-load-gpu-limit: the fraction of each GPU's memory in use past
   * which a KIND_GPU instance may not be created (1: no limit). */
  double gpu_load_limit[NRD_GPU_MAX];
  unsigned n_quantiles;
  /* Models loaded only because an ensemble needed them (not by name):
   * unload_dependents takes them away with the ensemble. */
  pthread_mutex_t deps_lock;
  char **deps;
  size_t n_deps;
};

/* A READY model with a counted reference for the caller (release with
 * nrd_model_unref). Version -1 means the highest ready version. Any thread. */
TRITONSERVER_Error *nrd_server_get_model(TRITONSERVER_Server *server, const char *name, int64_t version,
                                         TRITONBACKEND_Model **out);

/* TRITONSERVER_InferenceRequestNew with namespace `ns`'s model of that
 * name first (an ensemble's step; see nrd_repo_get_in). Same ownership:
 * the caller owns the new request; nothing is made on error. Any thread. */
TRITONSERVER_Error *nrd_server_request_new_in(TRITONSERVER_InferenceRequest **inference_request,
                                              TRITONSERVER_Server *server, const char *ns, const char *model_name,
                                              int64_t model_version);

/* As nrd_server_get_model, with namespace `ns`'s model of that name first
 * (NULL or "": none); see nrd_repo_get_in. Any thread. */
TRITONSERVER_Error *nrd_server_get_model_in(TRITONSERVER_Server *server, const char *ns, const char *name,
                                            int64_t version, TRITONBACKEND_Model **out);

#endif
