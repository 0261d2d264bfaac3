/* TRITONSERVER_ServerOptions: every setting a server is created with, stored
 * in plain fields the server reads at TRITONSERVER_ServerNew.
 *
 * Ownership: every string and array below is owned by the options object and
 * freed by TRITONSERVER_ServerOptionsDelete; the server copies what it keeps.
 * Threads: an options object is used by one thread at a time (no locking).
 * The log setters also change the process-wide logger at once, as Triton's
 * do. GPU-only settings are stored and otherwise ignored on this CPU build. */
#ifndef NRD_SERVER_OPTIONS_H
#define NRD_SERVER_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "triton/core/tritonserver.h"

/* A (group, setting, value) triple: backend configs (group = backend name),
 * host policies (group = policy name) and metrics configs (group = config
 * group, "" for global). Setting the same group+setting again replaces the
 * value. */
typedef struct nrd_option_triple {
  char *group;
  char *key;
  char *value;
} nrd_option_triple;

typedef struct nrd_option_triples {
  nrd_option_triple *items;
  size_t count;
} nrd_option_triples;

typedef struct nrd_rate_limit_resource {
  char *name;
  size_t count;
  int device; /* -1: the count is available on every device */
} nrd_rate_limit_resource;

typedef struct nrd_cuda_pool {
  int device;
  uint64_t size;
} nrd_cuda_pool;

typedef struct nrd_device_limit {
  TRITONSERVER_InstanceGroupKind kind;
  int device;
  double fraction;
} nrd_device_limit;

struct TRITONSERVER_ServerOptions {
  char *server_id; /* default "triton" */
  char **repo_paths; /* in the order given; duplicates dropped */
  size_t n_repo_paths;
  TRITONSERVER_ModelControlMode control_mode; /* default POLL, as Triton's core */
  char **startup_models; /* duplicates dropped */
  size_t n_startup_models;
  bool strict_model_config; /* default true */
  char *model_config_name; /* default "" (use config.pbtxt) */
  TRITONSERVER_RateLimitMode rate_limit_mode; /* default OFF */
  nrd_rate_limit_resource *rate_limit_resources;
  size_t n_rate_limit_resources;
  uint64_t pinned_memory_pool_byte_size; /* default 256 MiB */
  nrd_cuda_pool *cuda_pools; /* stored only */
  size_t n_cuda_pools;
  nrd_cuda_pool *cuda_virtual_address_sizes; /* stored only */
  size_t n_cuda_virtual_address_sizes;
  char *cache_dir; /* default "/opt/tritonserver/caches" */
  nrd_option_triples cache_configs; /* group = cache name, key "config", value JSON */
  double min_compute_capability; /* default 0 on a CPU build */
  bool exit_on_error; /* default true */
  bool strict_readiness; /* default true */
  unsigned exit_timeout_secs; /* default 30 */
  unsigned buffer_manager_threads; /* default 0 */
  unsigned model_load_threads; /* default 4 */
  unsigned model_load_retries; /* default 0 */
  bool model_namespacing; /* default false */
  bool peer_access; /* default true; stored only */
  char *log_file; /* default "" (standard error) */
  bool log_info, log_warn, log_error; /* default true */
  TRITONSERVER_LogFormat log_format; /* default DEFAULT */
  int log_verbose; /* default 0 */
  bool metrics; /* default true */
  bool gpu_metrics; /* default true (Triton's GPU build); no effect without NVML */
  bool cpu_metrics; /* default true */
  uint64_t metrics_interval_ms; /* default 2000 */
  nrd_option_triples metrics_configs;
  char *backend_dir; /* default "/opt/tritonserver/backends" */
  char *repoagent_dir; /* default "/opt/tritonserver/repoagents" */
  nrd_device_limit *device_limits;
  size_t n_device_limits;
  nrd_option_triples backend_configs;
  nrd_option_triples host_policies;
};

/* Value of `key` in `group` of a triple list, or NULL. The pointer lives as
 * long as the options object. */
const char *nrd_option_triples_find(const nrd_option_triples *list, const char *group, const char *key);

#endif
