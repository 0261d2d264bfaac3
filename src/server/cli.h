/* Command line of the nereid binary: the flags of Triton's `tritonserver`
 * that make sense before the network front ends exist, with the same
 * spelling, meaning and defaults, turned into TRITONSERVER_ServerOptions.
 *
 * Threads: everything here runs on the main thread before any other thread
 * starts; nothing is shared, nothing locks. */
#ifndef NRD_SRV_CLI_H
#define NRD_SRV_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "compress.h"
#include "restrict.h"
#include "triton/core/tritonserver.h"

/* One --backend-config setting; backend is "" for a setting given to every
 * backend (`--backend-config=<key>=<value>`). */
/* One --rate-limit-resource=<name>:<count>[:<device>] (name lower-cased,
 * owned by the cli; device -1: every device). */
typedef struct nrd_srv_rate_resource {
  char *name;
  size_t count;
  int device;
} nrd_srv_rate_resource;

typedef struct nrd_srv_backend_setting {
  char *backend;
  char *key;
  char *value;
} nrd_srv_backend_setting;

/* The parsed command line. Plain `const char *` fields borrow from argv
 * (which lives as long as the process); arrays and `char *` fields are owned
 * and freed by nrd_srv_cli_free. */
typedef struct nrd_srv_cli {
  bool help; /* --help: print usage, exit 0 */
  bool version; /* --version: print the version, exit 0 */
  const char **repos; /* --model-repository / --model-store */
  size_t n_repos;
  const char *backend_dir; /* NULL: the core's default */
  nrd_srv_backend_setting *backend_configs;
  size_t n_backend_configs;
  TRITONSERVER_ModelControlMode control_mode; /* default NONE, as tritonserver */
  const char **startup_models; /* --load-model, in order given */
  size_t n_startup_models;
  unsigned repository_poll_secs; /* default 15; used in POLL mode only */
  int log_verbose; /* default 0 */
  bool log_info, log_warn, log_error; /* default true */
  TRITONSERVER_LogFormat log_format; /* default TRITONSERVER_LOG_DEFAULT */
  const char *log_file; /* NULL: standard error */
  unsigned exit_timeout_secs; /* default 30 */
  bool exit_on_error; /* default true */
  bool strict_readiness; /* default true */
  bool strict_model_config; /* default false: auto-complete on */
  const char *server_id; /* default "triton" */
  const char *model_config_name; /* NULL: config.pbtxt */
  TRITONSERVER_RateLimitMode rate_limit; /* default OFF */
  nrd_srv_rate_resource *rate_resources; /* --rate-limit-resource, in order given */
  size_t n_rate_resources;
  nrd_srv_backend_setting *cache_configs; /* --cache-config; `backend` holds the cache name */
  size_t n_cache_configs;
  const char *cache_directory; /* --cache-directory; NULL: Triton's default */
  const char *repoagent_directory; /* --repoagent-directory; NULL: Triton's default */
  nrd_srv_backend_setting *metrics_configs; /* --metrics-config; `backend` holds the group ("" for none) */
  size_t n_metrics_configs;
  nrd_srv_backend_setting *host_policies; /* --host-policy; `backend` holds the policy name */
  size_t n_host_policies;
  bool reuse_http_port, reuse_grpc_port; /* SO_REUSEPORT; default false */
  unsigned model_load_retries; /* --model-load-retry-count; default 0 */
  bool model_namespacing; /* --model-namespacing; default false */
  /* --trace-config (and the deprecated --trace-* flags): trace/tracer.h. */
  unsigned trace_level; /* TRITONSERVER_InferenceTraceLevel mask; default 0 (off) */
  int64_t trace_rate; /* default 1000 */
  int64_t trace_count; /* default -1 */
  int64_t trace_log_frequency; /* default 0 */
  const char *trace_file; /* default NULL */
  bool trace_off; /* some level was "off": tracing stays off */
  /* mode=opentelemetry and its opentelemetry,<key>=<value> settings
   * (otel_exporter.h); numbers -1 when not given. */
  bool trace_otel;
  const char *trace_otel_url;
  const char **trace_otel_resource; /* "key=value", borrowed from argv; the array is owned */
  size_t n_trace_otel_resource;
  long long trace_otel_max_queue_size, trace_otel_schedule_delay_ms, trace_otel_max_export_batch_size;
  unsigned long long response_cache_byte_size; /* deprecated --response-cache-byte-size */
  bool response_cache_byte_size_given;
  /* HTTP/REST front end and metrics endpoint (http_server.h). */
  bool allow_http; /* default true */
  int http_port; /* default 8000 */
  const char *http_address; /* default "0.0.0.0" */
  int http_thread_count; /* default 8 */
  long long http_max_input_size; /* default 64 MB */
  int http_client_timeout_secs; /* default 120 (Nereid's own flag) */
  bool allow_metrics; /* default true */
  bool allow_client_shm; /* default false (Triton 26.x): client shared memory refused */
  bool allow_cpu_metrics; /* default true */
  unsigned metrics_interval_ms; /* default 2000 */
  /* GPU settings (docs/gpu.md), applied when the NVIDIA driver is there. */
  bool allow_gpu_metrics; /* default true, as Triton's GPU build */
  long long pinned_memory_pool_byte_size; /* -1: not given (the core's 256 MB) */
  double min_compute_capability; /* < 0: not given (the core's default) */
  const char **cuda_pools; /* "<gpu>:<bytes>" as given, in order */
  size_t n_cuda_pools;
  const char **gpu_load_limits; /* --model-load-gpu-limit "<gpu>:<fraction>" as given, in order */
  size_t n_gpu_load_limits;
  int metrics_port; /* default 8002 */
  const char *metrics_address; /* default: http_address */
  /* gRPC front end (grpc_server.h). */
  bool allow_grpc; /* default true */
  int grpc_port; /* default 8001 */
  const char *grpc_address; /* default "0.0.0.0" */
  int grpc_thread_count; /* default 2 */
  long long grpc_max_message_size; /* default INT32_MAX, as Triton */
  long long grpc_max_decompressed_size; /* default 64 MiB, Triton's HTTP limit */
  long long grpc_keepalive_time_ms; /* default 7200000 */
  long long grpc_keepalive_timeout_ms; /* default 20000 */
  long long grpc_max_connection_age_ms; /* 0 (default): no limit */
  long long grpc_max_connection_age_grace_ms; /* 0 (default): no limit */
  /* Ping policy, as Triton's flags of the same names (gRPC's defaults). */
  bool grpc_keepalive_permit_without_calls; /* default false */
  long long grpc_http2_max_pings_without_data; /* default 2; 0 = no limit */
  long long grpc_http2_min_recv_ping_interval_ms; /* default 300000 */
  long long grpc_http2_max_ping_strikes; /* default 2; 0 = no limit */
  nrd_srv_compress_level grpc_infer_response_compression; /* default NONE */
  int grpc_handshake_timeout_secs; /* default 120 (Nereid's own flag) */
  /* TLS (grpc_tls.h). --grpc-use-ssl-mutual=true implies --grpc-use-ssl,
   * as in tritonserver. Paths borrowed from argv. */
  bool grpc_use_ssl, grpc_use_ssl_mutual;
  const char *grpc_server_cert, *grpc_server_key, *grpc_root_cert;
  nrd_srv_restrictions http_restricted; /* --http-restricted-api (owned) */
  nrd_srv_restrictions grpc_restricted; /* --grpc-restricted-protocol (owned) */
  const char *http_header_forward; /* --http-header-forward-pattern; NULL: none */
  const char *grpc_header_forward; /* --grpc-header-forward-pattern; NULL: none */
  /* Vertex AI (http_vertex.c; defaults from AIP_MODE and AIP_HTTP_PORT). */
  bool allow_vertex_ai; /* default false; true with AIP_MODE=PREDICTION */
  int vertex_ai_port; /* default AIP_HTTP_PORT, else 8080 */
  int vertex_ai_thread_count; /* default 8 */
  const char *vertex_ai_default_model; /* NULL: the only model loaded */
  /* SageMaker (http_sagemaker.c). */
  bool allow_sagemaker; /* default false */
  int sagemaker_port; /* default 8080 */
  int sagemaker_thread_count; /* default 8 */
  bool sagemaker_safe_range; /* --sagemaker-safe-port-range given */
  int sagemaker_safe_lo, sagemaker_safe_hi;
} nrd_srv_cli;

/* Parses argv[1..argc-1] into *cli (which need not be initialized).
 * Returns 0 on success. On a bad command line returns -1 with a one-line
 * message naming the offending flag or value in err (always NUL-terminated,
 * truncated to errlen) and *cli holds nothing that needs freeing beyond what
 * nrd_srv_cli_free releases (calling it is always safe after this returns).
 * Deprecation warnings go to stderr. Main thread only. */
int nrd_srv_cli_parse(int argc, char **argv, nrd_srv_cli *cli, char *err, size_t errlen);

/* Frees what nrd_srv_cli_parse allocated and zeroes *cli; safe on a zeroed
 * or already freed struct. argv strings are not touched. Main thread only. */
void nrd_srv_cli_free(nrd_srv_cli *cli);

/* Writes the flag reference to `out`. Main thread only. */
void nrd_srv_cli_usage(FILE *out, const char *prog);

/* Builds server options from a parsed command line. On success the caller
 * owns *options (TRITONSERVER_ServerOptionsDelete). On failure returns the
 * error (caller owns it), *options is NULL and nothing is leaked. The log
 * settings take effect process-wide at once, as TRITONSERVER's log setters
 * do. Main thread only. */
TRITONSERVER_Error *nrd_srv_cli_make_options(const nrd_srv_cli *cli, TRITONSERVER_ServerOptions **options);

#endif
