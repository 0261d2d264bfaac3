/* Flag parsing for nereid. Flags follow tritonserver's: `--name=value` or
 * `--name value`, repeatable where tritonserver's are. Every value is checked
 * here so that a typo stops the program with a message naming the flag,
 * rather than surfacing later as a puzzling server error. */
#include "cli.h"
#include "fmt.h"
#include "grpc_server.h"
#include "header_forward.h"
#include "http_server.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

typedef enum flag_id {
  F_HELP,
  F_VERSION,
  F_MODEL_REPOSITORY,
  F_BACKEND_DIRECTORY,
  F_BACKEND_CONFIG,
  F_MODEL_CONTROL_MODE,
  F_LOAD_MODEL,
  F_REPOSITORY_POLL_SECS,
  F_LOG_VERBOSE,
  F_LOG_INFO,
  F_LOG_WARNING,
  F_LOG_ERROR,
  F_LOG_FORMAT,
  F_LOG_FILE,
  F_EXIT_TIMEOUT_SECS,
  F_EXIT_ON_ERROR,
  F_STRICT_READINESS,
  F_DISABLE_AUTO_COMPLETE_CONFIG,
  F_STRICT_MODEL_CONFIG,
  F_ID,
  F_MODEL_CONFIG_NAME,
  F_RATE_LIMIT,
  F_RATE_LIMIT_RESOURCE,
  F_CACHE_CONFIG,
  F_RESPONSE_CACHE_BYTE_SIZE,
  F_ALLOW_HTTP,
  F_HTTP_PORT,
  F_HTTP_ADDRESS,
  F_HTTP_THREAD_COUNT,
  F_HTTP_MAX_INPUT_SIZE,
  F_HTTP_CLIENT_TIMEOUT,
  F_ALLOW_METRICS,
  F_METRICS_PORT,
  F_METRICS_ADDRESS,
  F_ALLOW_GRPC,
  F_GRPC_PORT,
  F_GRPC_ADDRESS,
  F_GRPC_THREAD_COUNT,
  F_GRPC_MAX_MESSAGE_SIZE,
  F_GRPC_MAX_DECOMPRESSED_SIZE,
  F_GRPC_KEEPALIVE_TIME,
  F_GRPC_KEEPALIVE_TIMEOUT,
  F_GRPC_KEEPALIVE_PERMIT_WITHOUT_CALLS,
  F_GRPC_HTTP2_MAX_PINGS_WITHOUT_DATA,
  F_GRPC_HTTP2_MIN_RECV_PING_INTERVAL,
  F_GRPC_HTTP2_MAX_PING_STRIKES,
  F_GRPC_INFER_RESPONSE_COMPRESSION_LEVEL,
  F_GRPC_HANDSHAKE_TIMEOUT,
  /* More of tritonserver's flags: taken so that its command lines work. */
  F_REUSE_HTTP_PORT,
  F_REUSE_GRPC_PORT,
  F_METRICS_CONFIG,
  F_METRICS_INTERVAL_MS,
  F_ALLOW_GPU_METRICS,
  F_ALLOW_CPU_METRICS,
  F_HOST_POLICY,
  F_PINNED_MEMORY_POOL_BYTE_SIZE,
  F_CUDA_MEMORY_POOL_BYTE_SIZE,
  F_CUDA_VIRTUAL_ADDRESS_SIZE,
  F_MODEL_LOAD_GPU_LIMIT,
  F_MIN_SUPPORTED_COMPUTE_CAPABILITY,
  F_ENABLE_PEER_ACCESS,
  F_BUFFER_MANAGER_THREAD_COUNT,
  F_MODEL_LOAD_THREAD_COUNT,
  F_MODEL_LOAD_RETRY_COUNT,
  F_REPOAGENT_DIRECTORY,
  F_CACHE_DIRECTORY,
  F_GRPC_INFER_ALLOCATION_POOL_SIZE,
  F_GRPC_MAX_RESPONSE_POOL_SIZE,
  /* Features nereid does not have: only their off values are taken. */
  F_TRACE_CONFIG,
  F_TRACE_DEPRECATED,
  F_MODEL_NAMESPACING,
  F_GRPC_USE_SSL,
  F_GRPC_USE_SSL_MUTUAL,
  F_GRPC_SERVER_CERT,
  F_GRPC_SERVER_KEY,
  F_GRPC_ROOT_CERT,
  F_ALLOW_SAGEMAKER,
  F_ALLOW_VERTEX_AI,
  F_SAGEMAKER_PORT,
  F_SAGEMAKER_SAFE_PORT_RANGE,
  F_SAGEMAKER_THREAD_COUNT,
  F_VERTEX_AI_PORT,
  F_VERTEX_AI_THREAD_COUNT,
  F_VERTEX_AI_DEFAULT_MODEL,
  F_HTTP_RESTRICTED_API,
  F_ALLOW_CLIENT_SHM,
  F_GRPC_RESTRICTED_PROTOCOL,
  F_HTTP_HEADER_FORWARD,
  F_GRPC_HEADER_FORWARD,
  F_GRPC_MAX_CONNECTION_AGE,
  F_GRPC_MAX_CONNECTION_AGE_GRACE,
} flag_id;

/* How a flag's value is taken. The plain kinds are applied by the table
 * alone (apply_plain); K_CUSTOM flags by apply_flag. */
typedef enum flag_kind {
  K_CUSTOM, /* apply_flag's switch */
  K_TRUE, /* no value: sets a bool */
  K_BOOL, /* true/false, 1/0, yes/no, on/off */
  K_NUM, /* a whole number in [lo, hi] */
  K_TEXT, /* kept as given (borrowed from argv); `expected` set: not empty */
  K_ENUM, /* one of `names`, any case */
} flag_kind;

typedef struct flag_name {
  const char *name;
  int value;
} flag_name;

typedef struct flag_spec {
  const char *name;
  flag_id id;
  const char *arg; /* NULL: the flag takes no value */
  const char *help;
  flag_kind kind;
  /* Where the value goes in nrd_srv_cli; size 0: checked, not kept. */
  size_t offset, size;
  long lo, hi; /* K_NUM */
  const char *expected; /* the error's words for a good value */
  const flag_name *names; /* K_ENUM: ends with {NULL, 0} */
} flag_spec;

#define FIELD(f) .offset = offsetof(nrd_srv_cli, f), .size = sizeof(((nrd_srv_cli *)0)->f)
#define CUSTOM .kind = K_CUSTOM
#define AS_TRUE(f) .kind = K_TRUE, FIELD(f)
#define AS_BOOL(f) .kind = K_BOOL, FIELD(f)
#define CHECK_BOOL .kind = K_BOOL
#define AS_NUM(f, l, h, what) .kind = K_NUM, FIELD(f), .lo = (l), .hi = (h), .expected = (what)
#define CHECK_NUM(l, h, what) .kind = K_NUM, .lo = (l), .hi = (h), .expected = (what)
#define AS_TEXT(f, what) .kind = K_TEXT, FIELD(f), .expected = (what)
#define AS_ENUM(f, table, what) .kind = K_ENUM, FIELD(f), .names = (table), .expected = (what)

static const flag_name kControlModes[] = {{"none", TRITONSERVER_MODEL_CONTROL_NONE},
                                          {"poll", TRITONSERVER_MODEL_CONTROL_POLL},
                                          {"explicit", TRITONSERVER_MODEL_CONTROL_EXPLICIT},
                                          {NULL, 0}};
static const flag_name kLogFormats[] = {
    {"default", TRITONSERVER_LOG_DEFAULT}, {"ISO8601", TRITONSERVER_LOG_ISO8601}, {NULL, 0}};
static const flag_name kRateLimitModes[] = {
    {"off", TRITONSERVER_RATE_LIMIT_OFF}, {"execution_count", TRITONSERVER_RATE_LIMIT_EXEC_COUNT}, {NULL, 0}};
static const flag_name kCompressionLevels[] = {{"none", NRD_SRV_COMPRESS_NONE},
                                               {"low", NRD_SRV_COMPRESS_LOW},
                                               {"medium", NRD_SRV_COMPRESS_MEDIUM},
                                               {"high", NRD_SRV_COMPRESS_HIGH},
                                               {NULL, 0}};

static const flag_spec kFlags[] = {
    {"help", F_HELP, NULL, "Print this help and exit.", AS_TRUE(help)},
    {"version", F_VERSION, NULL, "Print nereid's version and exit.", AS_TRUE(version)},
    {"model-repository", F_MODEL_REPOSITORY, "DIR",
     "Model repository directory. Repeat to serve several; a model name found "
     "in two repositories is unavailable.",
     CUSTOM},
    {"model-store", F_MODEL_REPOSITORY, "DIR", "Same as --model-repository.", CUSTOM},
    {"backend-directory", F_BACKEND_DIRECTORY, "DIR",
     "Where backends are found, as DIR/<name>/libtriton_<name>.so "
     "(default: the backends folder beside the one nereid is in, as in an "
     "installed tree, when it exists; else /opt/tritonserver/backends).",
     AS_TEXT(backend_dir, "a directory")},
    {"backend-config", F_BACKEND_CONFIG, "<backend>,<key>=<value>",
     "Setting passed to one backend; '<key>=<value>' alone applies to every "
     "backend. Repeatable.",
     CUSTOM},
    {"model-control-mode", F_MODEL_CONTROL_MODE, "none|poll|explicit",
     "none (default): load every model at startup, never change them; poll: "
     "also rescan the repositories every --repository-poll-secs; explicit: load "
     "only the --load-model models at startup.",
     AS_ENUM(control_mode, kControlModes, "none, poll or explicit")},
    {"load-model", F_LOAD_MODEL, "NAME",
     "Model to load at startup in explicit mode; '*' (alone) loads all. "
     "Repeatable.",
     CUSTOM},
    {"repository-poll-secs", F_REPOSITORY_POLL_SECS, "N",
     "Seconds between repository rescans in poll mode (default 15; 0 turns "
     "the periodic rescan off).",
     AS_NUM(repository_poll_secs, 0, INT_MAX, "a whole number of seconds >= 0")},
    {"log-verbose", F_LOG_VERBOSE, "N", "Verbose log level; 0 (default) is off.", CUSTOM},
    {"log-info", F_LOG_INFO, "BOOL", "Write info log lines (default true).", AS_BOOL(log_info)},
    {"log-warning", F_LOG_WARNING, "BOOL", "Write warning log lines (default true).", AS_BOOL(log_warn)},
    {"log-error", F_LOG_ERROR, "BOOL", "Write error log lines (default true).", AS_BOOL(log_error)},
    {"log-format", F_LOG_FORMAT, "default|ISO8601", "Prefix format of log lines.",
     AS_ENUM(log_format, kLogFormats, "default or ISO8601")},
    {"log-file", F_LOG_FILE, "PATH", "Append the log to PATH instead of standard error.", AS_TEXT(log_file, NULL)},
    {"exit-timeout-secs", F_EXIT_TIMEOUT_SECS, "N",
     "On shutdown, seconds to wait for in-flight inferences (default 30).",
     AS_NUM(exit_timeout_secs, 0, INT_MAX, "a whole number of seconds >= 0")},
    {"exit-on-error", F_EXIT_ON_ERROR, "BOOL",
     "Exit with status 1 when a startup model fails to load (default true); "
     "false keeps serving the models that did load.",
     AS_BOOL(exit_on_error)},
    {"strict-readiness", F_STRICT_READINESS, "BOOL",
     "Report the server ready only when every model is ready (default true).", AS_BOOL(strict_readiness)},
    {"disable-auto-complete-config", F_DISABLE_AUTO_COMPLETE_CONFIG, NULL,
     "Do not let the server and backends fill in missing model configuration; "
     "every config.pbtxt must be complete.",
     CUSTOM},
    {"strict-model-config", F_STRICT_MODEL_CONFIG, "BOOL", "Deprecated: true means --disable-auto-complete-config.",
     CUSTOM},
    {"id", F_ID, "NAME", "Server identifier reported in metadata (default 'triton').",
     AS_TEXT(server_id, "a non-empty name")},
    {"model-config-name", F_MODEL_CONFIG_NAME, "NAME",
     "Use configs/NAME.pbtxt of each model when present, else config.pbtxt.", AS_TEXT(model_config_name, NULL)},
    {"rate-limit", F_RATE_LIMIT, "off|execution_count",
     "off (default): model instances run as soon as they are free; execution_count: an instance "
     "runs only while it holds the resources its instance group's rate_limiter asks for, taking "
     "turns by priority (docs/rate-limiter.md).",
     AS_ENUM(rate_limit, kRateLimitModes, "off or execution_count")},
    {"rate-limit-resource", F_RATE_LIMIT_RESOURCE, "<name>:<count>[:<device>]",
     "How many of a rate-limiter resource there are (on <device>, or on every device). Once one "
     "is given, resources not given count 0. Repeatable.",
     CUSTOM},
    {"cache-config", F_CACHE_CONFIG, "<cache>,<key>=<value>",
     "Response cache setting (repeatable); Nereid's one cache is 'local', "
     "e.g. local,size=1048576 (bytes). Models opt in with response_cache { enable: true }.",
     CUSTOM},
    {"response-cache-byte-size", F_RESPONSE_CACHE_BYTE_SIZE, "BYTES",
     "Deprecated: same as --cache-config=local,size=BYTES (0: no cache).", CUSTOM},
    {"allow-http", F_ALLOW_HTTP, "BOOL", "Serve the HTTP/REST API (default true).", AS_BOOL(allow_http)},
    {"http-port", F_HTTP_PORT, "N", "HTTP/REST port (default 8000; 0 picks a free port).",
     AS_NUM(http_port, INT_MIN, INT_MAX, "a port 0..65535")},
    {"http-address", F_HTTP_ADDRESS, "ADDR", "Address the HTTP/REST API binds (default 0.0.0.0).",
     AS_TEXT(http_address, NULL)},
    {"http-thread-count", F_HTTP_THREAD_COUNT, "N", "HTTP event-loop threads (default 8).",
     AS_NUM(http_thread_count, 1, 256, "a thread count 1..256")},
    {"http-max-input-size", F_HTTP_MAX_INPUT_SIZE, "BYTES",
     "Largest HTTP request body accepted (default 67108864); larger ones get 413.",
     AS_NUM(http_max_input_size, 1, LONG_MAX, "a size in bytes > 0")},
    {"http-client-timeout-secs", F_HTTP_CLIENT_TIMEOUT, "N",
     "Nereid only. Close an HTTP connection that is idle this long between requests, takes "
     "longer to send a request head, stalls this long in a body (those two get 408), or leaves "
     "a reply unread this long (default 120).",
     AS_NUM(http_client_timeout_secs, 1, 86400, "seconds 1..86400")},
    {"allow-metrics", F_ALLOW_METRICS, "BOOL", "Serve Prometheus metrics at /metrics (default true).",
     AS_BOOL(allow_metrics)},
    {"metrics-port", F_METRICS_PORT, "N", "Metrics port (default 8002; 0 picks a free port).",
     AS_NUM(metrics_port, INT_MIN, INT_MAX, "a port 0..65535")},
    {"metrics-address", F_METRICS_ADDRESS, "ADDR", "Address the metrics endpoint binds (default: --http-address).",
     AS_TEXT(metrics_address, NULL)},
    {"allow-grpc", F_ALLOW_GRPC, "BOOL", "Serve the gRPC API (default true).", AS_BOOL(allow_grpc)},
    {"grpc-port", F_GRPC_PORT, "N", "gRPC port (default 8001; 0 picks a free port).",
     AS_NUM(grpc_port, INT_MIN, INT_MAX, "a port 0..65535")},
    {"grpc-address", F_GRPC_ADDRESS, "ADDR", "Address the gRPC API binds (default 0.0.0.0).",
     AS_TEXT(grpc_address, NULL)},
    {"grpc-thread-count", F_GRPC_THREAD_COUNT, "N", "gRPC event-loop threads (default 2).",
     AS_NUM(grpc_thread_count, 1, 256, "a thread count 1..256")},
    {"grpc-max-message-size", F_GRPC_MAX_MESSAGE_SIZE, "BYTES",
     "Largest gRPC message accepted (default 2147483647); larger ones get RESOURCE_EXHAUSTED.",
     AS_NUM(grpc_max_message_size, 1, 2147483647L, "a size in bytes 1..2147483647")},
    {"grpc-max-decompressed-size", F_GRPC_MAX_DECOMPRESSED_SIZE, "BYTES",
     "Nereid only. Largest size a compressed gRPC message may inflate to (default 67108864, "
     "Triton's --http-max-input-size); larger ones get RESOURCE_EXHAUSTED.",
     AS_NUM(grpc_max_decompressed_size, 1, 2147483647L, "a size in bytes 1..2147483647")},
    {"grpc-keepalive-time", F_GRPC_KEEPALIVE_TIME, "MS",
     "Interval of server keepalive pings on idle gRPC connections (default 7200000).",
     AS_NUM(grpc_keepalive_time_ms, 1, 2147483647L, "milliseconds 1..2147483647")},
    {"grpc-keepalive-timeout", F_GRPC_KEEPALIVE_TIMEOUT, "MS",
     "Close a gRPC connection whose keepalive ping is unanswered this long (default 20000).",
     AS_NUM(grpc_keepalive_timeout_ms, 1, 2147483647L, "milliseconds 1..2147483647")},
    {"grpc-keepalive-permit-without-calls", F_GRPC_KEEPALIVE_PERMIT_WITHOUT_CALLS, "BOOL",
     "Keepalive pings also on gRPC connections without calls, from either side (default false).",
     AS_BOOL(grpc_keepalive_permit_without_calls)},
    {"grpc-http2-max-pings-without-data", F_GRPC_HTTP2_MAX_PINGS_WITHOUT_DATA, "N",
     "Keepalive pings the server sends with no data in between; 0: no limit (default 2).",
     AS_NUM(grpc_http2_max_pings_without_data, 0, 2147483647L, "a count 0..2147483647")},
    {"grpc-http2-min-recv-ping-interval-without-data", F_GRPC_HTTP2_MIN_RECV_PING_INTERVAL, "MS",
     "A client ping sooner than this after the previous one, with no data sent between, is a "
     "ping strike (default 300000).",
     AS_NUM(grpc_http2_min_recv_ping_interval_ms, 0, 2147483647L, "milliseconds 0..2147483647")},
    {"grpc-http2-max-ping-strikes", F_GRPC_HTTP2_MAX_PING_STRIKES, "N",
     "Ping strikes tolerated before GOAWAY (ENHANCE_YOUR_CALM); 0: no limit (default 2).",
     AS_NUM(grpc_http2_max_ping_strikes, 0, 2147483647L, "a count 0..2147483647")},
    {"grpc-infer-response-compression-level", F_GRPC_INFER_RESPONSE_COMPRESSION_LEVEL, "none|low|medium|high",
     "Compress ModelInfer/ModelStreamInfer responses (gzip or deflate, as the client accepts) "
     "(default none).",
     AS_ENUM(grpc_infer_response_compression, kCompressionLevels, "none, low, medium or high")},
    {"grpc-handshake-timeout-secs", F_GRPC_HANDSHAKE_TIMEOUT, "N",
     "Nereid only. Close a gRPC connection whose HTTP/2 preface and SETTINGS have not arrived "
     "this long after it was accepted (default 120, as gRPC's server handshake timeout).",
     AS_NUM(grpc_handshake_timeout_secs, 1, 86400, "seconds 1..86400")},
    {"reuse-http-port", F_REUSE_HTTP_PORT, "BOOL",
     "Bind the HTTP/REST port with SO_REUSEPORT, so several servers can share it (default false).",
     AS_BOOL(reuse_http_port)},
    {"reuse-grpc-port", F_REUSE_GRPC_PORT, "BOOL",
     "Bind the gRPC port with SO_REUSEPORT, so several servers can share it (default false).",
     AS_BOOL(reuse_grpc_port)},
    {"metrics-config", F_METRICS_CONFIG, "[<group>,]<key>=<value>",
     "counter_latencies=false leaves out the nv_inference_*_duration_us counters; summary_latencies=true "
     "adds the nv_inference_*_summary_us summaries, with summary_quantiles=<q>:<error>,... (default "
     "0.5:0.05,0.9:0.01,0.95:0.001,0.99:0.001). Repeatable.",
     CUSTOM},
    {"metrics-interval-ms", F_METRICS_INTERVAL_MS, "MS",
     "Least time between two samples of the CPU and GPU metrics (default 2000); sampled when /metrics is read.",
     AS_NUM(metrics_interval_ms, 1, INT_MAX, "a count >= 1")},
    {"allow-gpu-metrics", F_ALLOW_GPU_METRICS, "BOOL",
     "GPU utilization, memory, power and energy gauges (nv_gpu_*, nv_energy_consumption) from NVML "
     "(default true; none without an NVIDIA driver).",
     AS_BOOL(allow_gpu_metrics)},
    {"allow-cpu-metrics", F_ALLOW_CPU_METRICS, "BOOL",
     "CPU utilization and memory gauges (nv_cpu_*) on /metrics (default true).", AS_BOOL(allow_cpu_metrics)},
    {"host-policy", F_HOST_POLICY, "<name>,<key>=<value>", "A host policy setting, given to backends. Repeatable.",
     CUSTOM},
    {"pinned-memory-pool-byte-size", F_PINNED_MEMORY_POOL_BYTE_SIZE, "BYTES",
     "Size of the pinned host memory pool (default 268435456; unused without an NVIDIA driver).",
     AS_NUM(pinned_memory_pool_byte_size, 0, LONG_MAX, "a size in bytes")},
    {"cuda-memory-pool-byte-size", F_CUDA_MEMORY_POOL_BYTE_SIZE, "<gpu>:<bytes>",
     "Size of GPU <gpu>'s CUDA memory pool (default 67108864). Repeatable.", CUSTOM},
    {"cuda-virtual-address-size", F_CUDA_VIRTUAL_ADDRESS_SIZE, "<gpu>:<bytes>",
     "A KIND_GPU instance fails its load when, once made, more than this fraction of its GPU's memory is in "
     "use. Repeatable.",
     CUSTOM},
    {"model-load-gpu-limit", F_MODEL_LOAD_GPU_LIMIT, "<gpu>:<fraction>",
     "A KIND_GPU instance fails its load when, once made, more than this fraction of its GPU's memory is in "
     "use. Repeatable.",
     CUSTOM},
    {"min-supported-compute-capability", F_MIN_SUPPORTED_COMPUTE_CAPABILITY, "X.Y",
     "GPUs below this CUDA compute capability are not used (default 6.0).", CUSTOM},
    {"enable-peer-access", F_ENABLE_PEER_ACCESS, "BOOL", "Accepted; no effect (no GPU support).", CHECK_BOOL},
    {"buffer-manager-thread-count", F_BUFFER_MANAGER_THREAD_COUNT, "N", "Accepted; no effect.",
     CHECK_NUM(0, INT_MAX, "a count >= 0")},
    {"model-load-thread-count", F_MODEL_LOAD_THREAD_COUNT, "N",
     "Accepted; no effect (each model loads on a thread of its own).", CHECK_NUM(1, INT_MAX, "a count >= 1")},
    {"model-load-retry-count", F_MODEL_LOAD_RETRY_COUNT, "N",
     "Try a model version that fails to load this many more times (default 0).",
     AS_NUM(model_load_retries, 0, INT_MAX, "a count >= 0")},
    {"repoagent-directory", F_REPOAGENT_DIRECTORY, "DIR",
     "Where repository agents are: DIR/<name>/libtritonrepoagent_<name>.so (default /opt/tritonserver/repoagents).",
     AS_TEXT(repoagent_directory, "a directory")},
    {"cache-directory", F_CACHE_DIRECTORY, "DIR",
     "Where cache plugins are: DIR/<name>/libtritoncache_<name>.so (default /opt/tritonserver/caches).",
     AS_TEXT(cache_directory, "a directory")},
    {"grpc-infer-allocation-pool-size", F_GRPC_INFER_ALLOCATION_POOL_SIZE, "N", "Accepted; no effect.",
     CHECK_NUM(0, INT_MAX, "a count >= 0")},
    {"grpc-max-response-pool-size", F_GRPC_MAX_RESPONSE_POOL_SIZE, "N", "Accepted; no effect.",
     CHECK_NUM(0, INT_MAX, "a count >= 0")},
    {"trace-config", F_TRACE_CONFIG, "[<mode>,]<key>=<value>",
     "Request tracing (docs/tracing.md): level=TIMESTAMPS|TENSORS|OFF (repeat for both), rate=N, count=N, "
     "mode=triton|opentelemetry; in triton mode triton,file=PATH and triton,log-frequency=N; in "
     "opentelemetry mode opentelemetry,url=URL, opentelemetry,resource=KEY=VALUE and "
     "opentelemetry,bsp_max_queue_size|bsp_schedule_delay|bsp_max_export_batch_size=N. Repeatable.",
     CUSTOM},
    {"trace-file", F_TRACE_DEPRECATED, "PATH", "Deprecated: --trace-config=triton,file=PATH.", CUSTOM},
    {"trace-level", F_TRACE_DEPRECATED, "LEVEL", "Deprecated: --trace-config=level=LEVEL.", CUSTOM},
    {"trace-rate", F_TRACE_DEPRECATED, "N", "Deprecated: --trace-config=rate=N.", CUSTOM},
    {"trace-count", F_TRACE_DEPRECATED, "N", "Deprecated: --trace-config=count=N.", CUSTOM},
    {"trace-log-frequency", F_TRACE_DEPRECATED, "N", "Deprecated: --trace-config=triton,log-frequency=N.", CUSTOM},
    {"model-namespacing", F_MODEL_NAMESPACING, "BOOL",
     "Allow models of one name in different repositories, each repository its own namespace (default false).",
     AS_BOOL(model_namespacing)},
    {"grpc-use-ssl", F_GRPC_USE_SSL, "BOOL",
     "Serve gRPC over TLS (default false); needs --grpc-server-cert and --grpc-server-key.", CUSTOM},
    {"grpc-use-ssl-mutual", F_GRPC_USE_SSL_MUTUAL, "BOOL",
     "TLS with client certificates (default false); true also turns on --grpc-use-ssl and needs "
     "--grpc-root-cert.",
     CUSTOM},
    {"grpc-server-cert", F_GRPC_SERVER_CERT, "PATH", "PEM certificate (or chain, ours first) for gRPC TLS.",
     AS_TEXT(grpc_server_cert, NULL)},
    {"grpc-server-key", F_GRPC_SERVER_KEY, "PATH", "PEM private key of --grpc-server-cert.",
     AS_TEXT(grpc_server_key, NULL)},
    {"grpc-root-cert", F_GRPC_ROOT_CERT, "PATH",
     "PEM CA certificates that client certificates must chain to (--grpc-use-ssl-mutual).",
     AS_TEXT(grpc_root_cert, NULL)},
    {"allow-sagemaker", F_ALLOW_SAGEMAKER, "BOOL",
     "Serve SageMaker's /ping and /invocations for one model (docs/sagemaker.md); default false.",
     AS_BOOL(allow_sagemaker)},
    {"sagemaker-port", F_SAGEMAKER_PORT, "N", "SageMaker port (default 8080).",
     AS_NUM(sagemaker_port, INT_MIN, INT_MAX, "a port 0..65535")},
    {"sagemaker-safe-port-range", F_SAGEMAKER_SAFE_PORT_RANGE, "MIN-MAX",
     "Ports the other endpoints must use when SageMaker is on.", CUSTOM},
    {"sagemaker-thread-count", F_SAGEMAKER_THREAD_COUNT, "N", "SageMaker event-loop threads (default 8).",
     AS_NUM(sagemaker_thread_count, 1, 256, "a thread count 1..256")},
    {"allow-vertex-ai", F_ALLOW_VERTEX_AI, "BOOL",
     "Serve Vertex AI's prediction endpoint (docs/vertex-ai.md); default false, true when AIP_MODE=PREDICTION "
     "(which also turns HTTP/REST and gRPC off unless given).",
     AS_BOOL(allow_vertex_ai)},
    {"vertex-ai-port", F_VERTEX_AI_PORT, "N", "Vertex AI port (default AIP_HTTP_PORT, else 8080).",
     AS_NUM(vertex_ai_port, INT_MIN, INT_MAX, "a port 0..65535")},
    {"vertex-ai-thread-count", F_VERTEX_AI_THREAD_COUNT, "N", "Vertex AI event-loop threads (default 8).",
     AS_NUM(vertex_ai_thread_count, 1, 256, "a thread count 1..256")},
    {"vertex-ai-default-model", F_VERTEX_AI_DEFAULT_MODEL, "NAME",
     "The model the prediction route infers (default: the only model loaded).", AS_TEXT(vertex_ai_default_model, NULL)},
    {"allow-client-shm", F_ALLOW_CLIENT_SHM, "BOOL",
     "Let clients register, unregister and use system and CUDA shared memory regions for inference inputs "
     "and outputs, over HTTP and gRPC (default false, as Triton). The registry is global: once on, any "
     "client can read, write into and unregister any region by its name. Backends' own shared memory "
     "(the python backend's) is not affected.",
     AS_BOOL(allow_client_shm)},
    {"http-restricted-api", F_HTTP_RESTRICTED_API, "<apis>:<key>=<value>",
     "HTTP requests to these APIs (health, metadata, inference, shared-memory, model-config, model-repository, "
     "statistics, trace, logging; comma separated) need header <key> with <value>, else 403. Repeatable, one "
     "group per API.",
     CUSTOM},
    {"grpc-restricted-protocol", F_GRPC_RESTRICTED_PROTOCOL, "<protocols>:<key>=<value>",
     "gRPC calls of these groups (as --http-restricted-api) need metadata triton-grpc-protocol-<key> with "
     "<value>, else UNAVAILABLE. Repeatable.",
     CUSTOM},
    {"http-header-forward-pattern", F_HTTP_HEADER_FORWARD, "REGEX",
     "HTTP headers whose names match REGEX (POSIX extended, any case, a match anywhere) reach the model as "
     "string parameters of each inference request.",
     CUSTOM},
    {"grpc-header-forward-pattern", F_GRPC_HEADER_FORWARD, "REGEX",
     "The same for gRPC metadata keys (lower case) on ModelInfer and ModelStreamInfer.", CUSTOM},
    {"grpc-max-connection-age", F_GRPC_MAX_CONNECTION_AGE, "MS",
     "A gRPC connection older than this gets GOAWAY (its open calls go on) and closes once they end "
     "(default: no limit).",
     AS_NUM(grpc_max_connection_age_ms, 1, 2147483647L, "milliseconds 1..2147483647")},
    {"grpc-max-connection-age-grace", F_GRPC_MAX_CONNECTION_AGE_GRACE, "MS",
     "How long the calls of such a connection may still run before it is closed (default: no limit).",
     AS_NUM(grpc_max_connection_age_grace_ms, 1, 2147483647L, "milliseconds 1..2147483647")},
};

#define N_FLAGS (sizeof kFlags / sizeof kFlags[0])

static const flag_spec *find_flag(const char *name, size_t len) {
  for (size_t i = 0; i < N_FLAGS; i++)
    if (strlen(kFlags[i].name) == len && strncmp(kFlags[i].name, name, len) == 0) return &kFlags[i];
  return NULL;
}

static int parse_bool(const char *s, bool *out) {
  static const char *const yes[] = {"true", "1", "yes", "on"};
  static const char *const no[] = {"false", "0", "no", "off"};
  for (size_t i = 0; i < 4; i++) {
    if (strcasecmp(s, yes[i]) == 0) {
      *out = true;
      return 0;
    }
    if (strcasecmp(s, no[i]) == 0) {
      *out = false;
      return 0;
    }
  }
  return -1;
}

/* A whole decimal integer within [lo, hi]; no sign games, no trailing junk. */
static int parse_long(const char *s, long lo, long hi, long *out) {
  if (*s == '\0' || *s == ' ' || *s == '\t' || *s == '+') return -1;
  char *end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno != 0 || *end != '\0' || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

static int push_ptr(const char ***arr, size_t *n, const char *v) {
  const char **grown = realloc(*arr, (*n + 1) * sizeof(**arr));
  if (grown == NULL) return -1;
  grown[(*n)++] = v;
  *arr = grown;
  return 0;
}

/* Appends copies of group[0..glen), key[0..klen) and value to *arr.
 * Returns 0, or -1 on out-of-memory (nothing appended). */
static int push_setting(nrd_srv_backend_setting **arr, size_t *n, const char *group, size_t glen, const char *key,
                        size_t klen, const char *value) {
  nrd_srv_backend_setting *grown = realloc(*arr, (*n + 1) * sizeof(*grown));
  if (grown == NULL) return -1;
  *arr = grown;
  nrd_srv_backend_setting *s = &grown[*n];
  s->backend = strndup(group, glen);
  s->key = strndup(key, klen);
  s->value = strdup(value);
  if (s->backend == NULL || s->key == NULL || s->value == NULL) {
    free(s->backend);
    free(s->key);
    free(s->value);
    return -1;
  }
  (*n)++;
  return 0;
}

/* `<cache>,<key>=<value>`: the cache name is required. */
static int add_cache_config(nrd_srv_cli *cli, const char *arg, char *err, size_t errlen) {
  const char *comma = strchr(arg, ',');
  if (comma == NULL || comma == arg) {
    nrd_srv_fmt_err(err, errlen,
                    "No cache specified. --cache-config option format is "
                    "<cache name>,<setting>=<value>. Got '%s'",
                    arg);
    return -1;
  }
  const char *eq = strchr(comma + 1, '=');
  if (eq == NULL || eq == comma + 1 || eq[1] == '\0') {
    nrd_srv_fmt_err(err, errlen,
                    "--cache-config option format is '<cache name>,<setting>=<value>'. "
                    "Got '%s'",
                    arg);
    return -1;
  }
  if (push_setting(&cli->cache_configs, &cli->n_cache_configs, arg, (size_t)(comma - arg), comma + 1,
                   (size_t)(eq - comma - 1), eq + 1) == 0)
    return 0;
  nrd_srv_fmt_err(err, errlen, "out of memory storing --cache-config '%s'", arg);
  return -1;
}

/* `<backend>,<key>=<value>` or `<key>=<value>`. The comma is looked for only
 * before the first '=', so values may contain commas. */
static int add_backend_config(nrd_srv_cli *cli, const char *arg, char *err, size_t errlen) {
  const char *eq = strchr(arg, '=');
  if (eq == NULL) {
    nrd_srv_fmt_err(err, errlen,
                    "invalid value '%s' for --backend-config: expected <backend>,<key>=<value> or "
                    "<key>=<value>",
                    arg);
    return -1;
  }
  const char *comma = memchr(arg, ',', (size_t)(eq - arg));
  const char *key = comma ? comma + 1 : arg;
  size_t backend_len = comma ? (size_t)(comma - arg) : 0;
  size_t key_len = (size_t)(eq - key);
  if ((comma && backend_len == 0) || key_len == 0 || eq[1] == '\0') {
    nrd_srv_fmt_err(err, errlen,
                    "invalid value '%s' for --backend-config: backend name, key and value must not be "
                    "empty (expected <backend>,<key>=<value> or <key>=<value>)",
                    arg);
    return -1;
  }
  if (push_setting(&cli->backend_configs, &cli->n_backend_configs, arg, backend_len, key, key_len, eq + 1) == 0)
    return 0;
  nrd_srv_fmt_err(err, errlen, "out of memory storing --backend-config '%s'", arg);
  return -1;
}

static const char kBoolWords[] = "a boolean (true/false, 1/0, yes/no, on/off)";

static int bad_value(const flag_spec *f, const char *v, const char *expected, char *err, size_t errlen) {
  nrd_srv_fmt_err(err, errlen, "invalid value '%s' for --%s: expected %s", v, f->name, expected);
  return -1;
}

/* --rate-limit-resource=<name>:<count>[:<device>], lower-cased as
 * tritonserver does (resource names in configurations are matched the same
 * way). */
static int add_rate_resource(nrd_srv_cli *cli, const flag_spec *f, const char *v, char *err, size_t errlen) {
  const char *expected = "<name>:<count>[:<device>] with a count >= 0 and a device >= 0";
  const char *c1 = strchr(v, ':');
  if (!c1 || c1 == v) return bad_value(f, v, expected, err, errlen);
  const char *c2 = strchr(c1 + 1, ':');
  char num[32];
  size_t nlen = c2 ? (size_t)(c2 - c1 - 1) : strlen(c1 + 1);
  long count = 0, device = -1;
  if (nlen == 0 || nlen >= sizeof num) return bad_value(f, v, expected, err, errlen);
  memcpy(num, c1 + 1, nlen);
  num[nlen] = '\0';
  if (parse_long(num, 0, INT_MAX, &count) != 0) return bad_value(f, v, expected, err, errlen);
  if (c2 && parse_long(c2 + 1, 0, INT_MAX, &device) != 0) return bad_value(f, v, expected, err, errlen);
  nrd_srv_rate_resource *n = realloc(cli->rate_resources, (cli->n_rate_resources + 1) * sizeof(*n));
  if (!n) goto oom;
  cli->rate_resources = n;
  char *name = strndup(v, (size_t)(c1 - v));
  if (!name) goto oom;
  for (char *p = name; *p; p++)
    if (*p >= 'A' && *p <= 'Z') *p = (char)(*p - 'A' + 'a');
  n[cli->n_rate_resources++] = (nrd_srv_rate_resource){name, (size_t)count, (int)device};
  return 0;
oom:
  nrd_srv_fmt_err(err, errlen, "out of memory");
  return -1;
}

/* `<int>:<number>`, as the GPU flags take; the number may be a fraction
 * when `fraction` is set. Checked only: nereid has no GPU to apply it to. */
static int check_device_value(const flag_spec *f, const char *v, bool fraction, char *err, size_t errlen) {
  const char *expected = fraction ? "<gpu>:<fraction> with a fraction between 0 and 1" : "<gpu>:<bytes>";
  const char *colon = strchr(v, ':');
  char dev[16];
  long d = 0;
  if (!colon || colon == v || (size_t)(colon - v) >= sizeof dev) return bad_value(f, v, expected, err, errlen);
  memcpy(dev, v, (size_t)(colon - v));
  dev[colon - v] = '\0';
  if (parse_long(dev, 0, INT_MAX, &d) != 0) return bad_value(f, v, expected, err, errlen);
  const char *num = colon + 1;
  char *end = NULL;
  errno = 0;
  double x = strtod(num, &end);
  bool ok = *num >= '0' && *num <= '9' && *end == '\0' && errno == 0 &&
            (fraction ? x >= 0.0 && x <= 1.0 : strspn(num, "0123456789") == strlen(num));
  return ok ? 0 : bad_value(f, v, expected, err, errlen);
}

/* `[<group>,]<key>=<value>` of --metrics-config and --trace-config. */
static int split_setting(const char *v, const char **key, size_t *glen) {
  const char *eq = strchr(v, '=');
  if (!eq || eq == v || eq[1] == '\0') return -1;
  const char *comma = memchr(v, ',', (size_t)(eq - v));
  *glen = comma ? (size_t)(comma - v) : 0;
  *key = comma ? comma + 1 : v;
  return *key == eq ? -1 : 0;
}

static int apply_metrics_config(nrd_srv_cli *cli, const flag_spec *f, const char *v, char *err, size_t errlen) {
  const char *key = NULL;
  size_t glen = 0;
  if (split_setting(v, &key, &glen) != 0) return bad_value(f, v, "[<group>,]<key>=<value>", err, errlen);
  const char *eq = strchr(key, '=');
  size_t klen = (size_t)(eq - key);
  bool b = false;
  if (klen == 17 && !strncmp(key, "counter_latencies", klen) && parse_bool(eq + 1, &b) != 0)
    return bad_value(f, v, "counter_latencies=<bool>", err, errlen);
  if (klen == 17 && !strncmp(key, "summary_latencies", klen) && parse_bool(eq + 1, &b) != 0)
    return bad_value(f, v, "summary_latencies=<bool>", err, errlen);
  if (push_setting(&cli->metrics_configs, &cli->n_metrics_configs, v, glen, key, klen, eq + 1) == 0) return 0;
  nrd_srv_fmt_err(err, errlen, "out of memory storing --metrics-config '%s'", v);
  return -1;
}

/* One trace level word, as tritonserver reads them; -1 when unknown. */
static int trace_level_word(const char *v, nrd_srv_cli *cli) {
  if (!strcasecmp(v, "off") || !strcasecmp(v, "false")) {
    cli->trace_off = true;
    return 0;
  }
  if (!strcasecmp(v, "on") || !strcasecmp(v, "true") || !strcasecmp(v, "min") || !strcasecmp(v, "max") ||
      !strcasecmp(v, "timestamps")) {
    cli->trace_level |= TRITONSERVER_TRACE_LEVEL_TIMESTAMPS;
    return 0;
  }
  if (!strcasecmp(v, "tensors")) {
    cli->trace_level |= TRITONSERVER_TRACE_LEVEL_TENSORS;
    return 0;
  }
  return -1;
}

/* One trace setting by name (rate, count, level, file, log-frequency);
 * `arg` is the flag's whole value, for messages. */
static int trace_setting(nrd_srv_cli *cli, const flag_spec *f, const char *arg, const char *key, size_t klen,
                         const char *v, char *err, size_t errlen) {
  long n = 0;
#define KEY(k) (klen == sizeof(k) - 1 && !strncmp(key, k, klen))
  if (KEY("level")) {
    if (trace_level_word(v, cli) != 0) return bad_value(f, arg, "a trace level: off, timestamps, tensors", err, errlen);
  } else if (KEY("rate")) {
    if (parse_long(v, 0, UINT32_MAX, &n) != 0) return bad_value(f, arg, "rate=<count 0..4294967295>", err, errlen);
    cli->trace_rate = n;
  } else if (KEY("count")) {
    if (parse_long(v, -1, INT32_MAX, &n) != 0) return bad_value(f, arg, "count=<-1 or more>", err, errlen);
    cli->trace_count = n;
  } else if (KEY("log-frequency")) {
    if (parse_long(v, 0, UINT32_MAX, &n) != 0) return bad_value(f, arg, "log-frequency=<count>", err, errlen);
    cli->trace_log_frequency = n;
  } else if (KEY("file")) {
    cli->trace_file = v;
  } else if (KEY("mode")) {
    if (!strcasecmp(v, "opentelemetry"))
      cli->trace_otel = true;
    else if (!strcasecmp(v, "triton"))
      cli->trace_otel = false;
    else
      return bad_value(f, arg, "mode=triton or mode=opentelemetry", err, errlen);
  }
  /* Other keys, as tritonserver does, are ignored. */
#undef KEY
  return 0;
}

/* --trace-config opentelemetry,<key>=<value>: the exporter's settings
 * (url, resource, bsp_*); other keys are ignored, as tritonserver does. */
static int otel_setting(nrd_srv_cli *cli, const flag_spec *f, const char *arg, const char *key, size_t klen,
                        const char *v, char *err, size_t errlen) {
  long n = 0;
#define KEY(k) (klen == sizeof(k) - 1 && !strncmp(key, k, klen))
  if (KEY("url")) {
    cli->trace_otel_url = v;
  } else if (KEY("resource")) {
    if (!strchr(v, '=') || v[0] == '=') return bad_value(f, arg, "opentelemetry,resource=<key>=<value>", err, errlen);
    const char **grown = realloc(cli->trace_otel_resource, (cli->n_trace_otel_resource + 1) * sizeof(*grown));
    if (!grown) {
      nrd_srv_fmt_err(err, errlen, "out of memory storing --trace-config '%s'", arg);
      return -1;
    }
    cli->trace_otel_resource = grown;
    grown[cli->n_trace_otel_resource++] = v;
  } else if (KEY("bsp_max_queue_size") || KEY("bsp_schedule_delay") || KEY("bsp_max_export_batch_size")) {
    if (parse_long(v, 1, 1000000000, &n) != 0) return bad_value(f, arg, "a number 1..1000000000", err, errlen);
    if (KEY("bsp_max_queue_size"))
      cli->trace_otel_max_queue_size = n;
    else if (KEY("bsp_schedule_delay"))
      cli->trace_otel_schedule_delay_ms = n;
    else
      cli->trace_otel_max_export_batch_size = n;
  }
#undef KEY
  return 0;
}

/* --trace-config [<mode>,]<key>=<value>. */
static int apply_trace_config(nrd_srv_cli *cli, const flag_spec *f, const char *v, char *err, size_t errlen) {
  const char *eq = strchr(v, '=');
  if (v[0] == ',') {
    nrd_srv_fmt_err(err, errlen,
                    "No trace mode specified. --trace-config option format is <trace mode>,"
                    "<setting>=<value> or <setting>=<value>. Got %s",
                    v);
    return -1;
  }
  const char *comma = eq ? memchr(v, ',', (size_t)(eq - v)) : NULL;
  const char *key = comma ? comma + 1 : v;
  if (!eq || eq == key || eq[1] == '\0') {
    nrd_srv_fmt_err(err, errlen, "--trace-config option format is '<trace mode>,<setting>=<value>'. Got %s", v);
    return -1;
  }
  if (comma) {
    size_t mlen = (size_t)(comma - v);
    if (mlen == 13 && !strncasecmp(v, "opentelemetry", 13))
      return otel_setting(cli, f, v, key, (size_t)(eq - key), eq + 1, err, errlen);
    if (mlen != 6 || strncasecmp(v, "triton", 6)) {
      nrd_srv_fmt_err(err, errlen,
                      "invalid value for trace mode option: %s. Available options are \"triton\" "
                      "and \"opentelemetry\"",
                      v);
      return -1;
    }
  }
  /* file and log-frequency are taken without "triton," too (tritonserver
   * ignores them there, which only hides a mistake). */
  return trace_setting(cli, f, v, key, (size_t)(eq - key), eq + 1, err, errlen);
}

/* The deprecated --trace-file, --trace-level, --trace-rate, --trace-count
 * and --trace-log-frequency. */
static int apply_trace_flag(nrd_srv_cli *cli, const flag_spec *f, const char *v, char *err, size_t errlen) {
  fprintf(stderr, "nereid: warning: --%s is deprecated; use --trace-config\n", f->name);
  const char *key = f->name + 6; /* after "trace-" */
  return trace_setting(cli, f, v, key, strlen(key), v, err, errlen);
}

/* Applies a flag of a plain kind from its table entry alone. */
static int apply_plain(nrd_srv_cli *cli, const flag_spec *f, const char *v, char *err, size_t errlen) {
  unsigned char *field = (unsigned char *)cli + f->offset;
  bool b = true;
  long n = 0;
  switch (f->kind) {
    case K_TRUE:
    case K_BOOL:
      if (f->kind == K_BOOL && parse_bool(v, &b) != 0) return bad_value(f, v, kBoolWords, err, errlen);
      if (f->size) memcpy(field, &b, sizeof b);
      return 0;
    case K_NUM:
      if (f->id == F_HTTP_MAX_INPUT_SIZE && parse_long(v, LONG_MIN, LONG_MAX, &n) == 0 && n <= 0) {
        /* Triton's sentence (server r25.07, command_line_parser.cc). */
        nrd_srv_fmt_err(err, errlen, "Error: --http-max-input-size must be greater than 0. (got '%s')", v);
        return -1;
      }
      if (parse_long(v, f->lo, f->hi, &n) != 0) return bad_value(f, v, f->expected, err, errlen);
      break;
    case K_TEXT:
      if (f->expected && *v == '\0') return bad_value(f, v, f->expected, err, errlen);
      memcpy(field, &v, sizeof v);
      return 0;
    case K_ENUM: {
      const flag_name *e = f->names;
      while (e->name && strcasecmp(v, e->name) != 0) e++;
      if (!e->name) return bad_value(f, v, f->expected, err, errlen);
      n = e->value;
      break;
    }
    case K_CUSTOM: break;
  }
  /* A whole number into an int-sized or a long-sized field (the table's
   * ranges keep int-sized ones within INT_MAX). */
  if (f->size == sizeof(int) && f->hi <= INT_MAX) {
    int i = (int)n;
    memcpy(field, &i, sizeof i);
  } else if (f->size == sizeof(long long)) {
    long long l = n;
    memcpy(field, &l, sizeof l);
  }
  return 0;
}

static int apply_flag(nrd_srv_cli *cli, const flag_spec *f, const char *v, bool *strict_given,
                      bool *disable_auto_complete, char *err, size_t errlen) {
  long n = 0;
  bool b = false;
  switch (f->id) {
    case F_MODEL_REPOSITORY:
      if (*v == '\0') return bad_value(f, v, "a directory", err, errlen);
      if (push_ptr(&cli->repos, &cli->n_repos, v) != 0) goto oom;
      return 0;
    case F_BACKEND_CONFIG: return add_backend_config(cli, v, err, errlen);
    case F_LOAD_MODEL:
      if (*v == '\0') return bad_value(f, v, "a model name", err, errlen);
      if (push_ptr(&cli->startup_models, &cli->n_startup_models, v) != 0) goto oom;
      return 0;
    case F_LOG_VERBOSE:
      /* tritonserver also takes true/false here, meaning 1/0. */
      if (parse_long(v, 0, INT_MAX, &n) == 0)
        cli->log_verbose = (int)n;
      else if (parse_bool(v, &b) == 0)
        cli->log_verbose = b ? 1 : 0;
      else
        return bad_value(f, v, "a verbose level >= 0", err, errlen);
      return 0;
    case F_STRICT_MODEL_CONFIG:
      if (parse_bool(v, &b) != 0) return bad_value(f, v, kBoolWords, err, errlen);
      fprintf(stderr, "nereid: warning: --strict-model-config is deprecated; use "
                      "--disable-auto-complete-config instead\n");
      *strict_given = true;
      cli->strict_model_config = b;
      return 0;
    case F_DISABLE_AUTO_COMPLETE_CONFIG: *disable_auto_complete = true; return 0;
    case F_RATE_LIMIT_RESOURCE: return add_rate_resource(cli, f, v, err, errlen);
    case F_CACHE_CONFIG: return add_cache_config(cli, v, err, errlen);
    case F_RESPONSE_CACHE_BYTE_SIZE: {
      char *end = NULL;
      errno = 0;
      unsigned long long size = strtoull(v, &end, 10);
      if (*v < '0' || *v > '9' || *end != '\0' || errno == ERANGE)
        return bad_value(f, v, "a size in bytes", err, errlen);
      fprintf(stderr,
              "nereid: warning: --response-cache-byte-size is deprecated; use "
              "--cache-config=local,size=%llu\n",
              size);
      cli->response_cache_byte_size = size;
      cli->response_cache_byte_size_given = true;
      return 0;
    }
    case F_SAGEMAKER_SAFE_PORT_RANGE: {
      long lo = 0, hi = 0;
      const char *dash = strchr(v, '-');
      char first[16] = "";
      if (dash && (size_t)(dash - v) < sizeof first) memcpy(first, v, (size_t)(dash - v));
      if (!dash || parse_long(first, 0, 65535, &lo) != 0 || parse_long(dash + 1, 0, 65535, &hi) != 0 || lo > hi)
        return bad_value(f, v, "<min>-<max>, ports 0..65535", err, errlen);
      cli->sagemaker_safe_lo = (int)lo;
      cli->sagemaker_safe_hi = (int)hi;
      cli->sagemaker_safe_range = true;
      return 0;
    }
    case F_GRPC_USE_SSL:
    case F_GRPC_USE_SSL_MUTUAL:
      if (parse_bool(v, &b) != 0) return bad_value(f, v, kBoolWords, err, errlen);
      if (f->id == F_GRPC_USE_SSL) {
        cli->grpc_use_ssl = b;
      } else {
        cli->grpc_use_ssl_mutual = b;
        if (b) cli->grpc_use_ssl = true;
      }
      return 0;
    case F_HTTP_RESTRICTED_API: return nrd_srv_restrictions_add(&cli->http_restricted, f->name, v, "", err, errlen);
    case F_GRPC_RESTRICTED_PROTOCOL:
      return nrd_srv_restrictions_add(&cli->grpc_restricted, f->name, v, "triton-grpc-protocol-", err, errlen);
    case F_HTTP_HEADER_FORWARD:
    case F_GRPC_HEADER_FORWARD: {
      char why[300];
      nrd_srv_header_forward *check = nrd_srv_header_forward_new(v, true, why, sizeof why);
      if (!check) {
        nrd_srv_fmt_err(err, errlen, "invalid value for --%s: %s", f->name, why);
        return -1;
      }
      nrd_srv_header_forward_free(check);
      if (f->id == F_HTTP_HEADER_FORWARD)
        cli->http_header_forward = v;
      else
        cli->grpc_header_forward = v;
      return 0;
    }
    case F_METRICS_CONFIG: return apply_metrics_config(cli, f, v, err, errlen);
    case F_TRACE_CONFIG: return apply_trace_config(cli, f, v, err, errlen);
    case F_TRACE_DEPRECATED: return apply_trace_flag(cli, f, v, err, errlen);
    case F_HOST_POLICY: {
      const char *comma = strchr(v, ',');
      const char *eq = comma ? strchr(comma + 1, '=') : NULL;
      if (!comma || comma == v || !eq || eq == comma + 1 || eq[1] == '\0')
        return bad_value(f, v, "<policy name>,<setting>=<value>", err, errlen);
      if (push_setting(&cli->host_policies, &cli->n_host_policies, v, (size_t)(comma - v), comma + 1,
                       (size_t)(eq - comma - 1), eq + 1) != 0)
        goto oom;
      return 0;
    }
    case F_CUDA_MEMORY_POOL_BYTE_SIZE: {
      if (check_device_value(f, v, false, err, errlen) != 0) return -1;
      const char **grown = realloc(cli->cuda_pools, (cli->n_cuda_pools + 1) * sizeof(*grown));
      if (!grown) goto oom;
      cli->cuda_pools = grown;
      cli->cuda_pools[cli->n_cuda_pools++] = v;
      return 0;
    }
    case F_CUDA_VIRTUAL_ADDRESS_SIZE: return check_device_value(f, v, false, err, errlen);
    case F_MODEL_LOAD_GPU_LIMIT: {
      if (check_device_value(f, v, true, err, errlen) != 0) return -1;
      const char **grown = realloc(cli->gpu_load_limits, (cli->n_gpu_load_limits + 1) * sizeof(*grown));
      if (!grown) goto oom;
      cli->gpu_load_limits = grown;
      cli->gpu_load_limits[cli->n_gpu_load_limits++] = v;
      return 0;
    }
    case F_MIN_SUPPORTED_COMPUTE_CAPABILITY: {
      char *end = NULL;
      double x = strtod(v, &end);
      if (*v < '0' || *v > '9' || *end != '\0' || x < 0) return bad_value(f, v, "a version like 6.0", err, errlen);
      cli->min_compute_capability = x;
      return 0;
    }
    default: break;
  }
  nrd_srv_fmt_err(err, errlen, "internal error: unhandled flag --%s", f->name);
  return -1;
oom:
  nrd_srv_fmt_err(err, errlen, "out of memory storing --%s", f->name);
  return -1;
}

/* Rules that involve several flags, checked once everything is read. */
static int check_combination(nrd_srv_cli *cli, bool strict_given, bool disable_auto_complete, char *err,
                             size_t errlen) {
  if (disable_auto_complete) {
    if (strict_given && !cli->strict_model_config)
      fprintf(stderr, "nereid: warning: --disable-auto-complete-config overrides "
                      "--strict-model-config=false\n");
    cli->strict_model_config = true;
  }
  if (cli->trace_off) cli->trace_level = 0; /* any "off" wins, as in tritonserver */
  if (cli->trace_level && !cli->trace_otel && (!cli->trace_file || !cli->trace_file[0]))
    fprintf(stderr, "nereid: warning: tracing is on but no trace file was given "
                    "(--trace-config=triton,file=PATH): nothing will be traced\n");
  if (cli->help || cli->version) return 0;
  /* Ports and addresses count only for the endpoints that are on: Triton
   * starts with --grpc-port=-47 when --allow-grpc=false. */
  const struct {
    bool on;
    const char *port_flag;
    int port;
    const char *address_flag, *address;
  } eps[] = {
      {cli->allow_http, "http-port", cli->http_port, "http-address", cli->http_address},
      {cli->allow_grpc, "grpc-port", cli->grpc_port, "grpc-address", cli->grpc_address},
      {cli->allow_metrics, "metrics-port", cli->metrics_port, "metrics-address", cli->metrics_address},
      {cli->allow_vertex_ai, "vertex-ai-port", cli->vertex_ai_port, NULL, NULL},
      {cli->allow_sagemaker, "sagemaker-port", cli->sagemaker_port, NULL, NULL},
  };
  for (size_t i = 0; i < sizeof eps / sizeof eps[0]; i++) {
    if (!eps[i].on) continue;
    if (eps[i].port < 0 || eps[i].port > 65535) {
      nrd_srv_fmt_err(err, errlen, "invalid value '%d' for --%s: expected a port 0..65535", eps[i].port,
                      eps[i].port_flag);
      return -1;
    }
    if (eps[i].address_flag && eps[i].address && !eps[i].address[0]) {
      nrd_srv_fmt_err(err, errlen, "invalid value '' for --%s: expected an address", eps[i].address_flag);
      return -1;
    }
  }
  if (cli->response_cache_byte_size_given && cli->n_cache_configs > 0) {
    nrd_srv_fmt_err(err, errlen,
                    "Incompatible flags --response-cache-byte-size and --cache-config both "
                    "provided. Please provide one or the other.");
    return -1;
  }
  if (cli->n_repos == 0) {
    nrd_srv_fmt_err(err, errlen, "--model-repository is required (give at least one model repository)");
    return -1;
  }
  if (cli->allow_sagemaker && cli->sagemaker_safe_range) {
    /* As tritonserver: with SageMaker on, the other endpoints stay within
     * the range SageMaker allows them. */
    struct {
      bool on;
      int port;
      const char *what;
    } others[] = {{cli->allow_http, cli->http_port, "HTTP"},
                  {cli->allow_grpc, cli->grpc_port, "GRPC"},
                  {cli->allow_metrics, cli->metrics_port, "metrics"}};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
      if (!others[i].on || (others[i].port >= cli->sagemaker_safe_lo && others[i].port <= cli->sagemaker_safe_hi))
        continue;
      nrd_srv_fmt_err(err, errlen,
                      "The server cannot listen to %s requests at port %d, allowed port range is "
                      "[%d, %d]",
                      others[i].what, others[i].port, cli->sagemaker_safe_lo, cli->sagemaker_safe_hi);
      return -1;
    }
  }
  if (cli->allow_grpc && cli->grpc_use_ssl) {
    const char *missing = !cli->grpc_server_cert                             ? "--grpc-server-cert"
                          : !cli->grpc_server_key                            ? "--grpc-server-key"
                          : cli->grpc_use_ssl_mutual && !cli->grpc_root_cert ? "--grpc-root-cert"
                                                                             : NULL;
    if (missing) {
      const char *which = cli->grpc_use_ssl_mutual ? "--grpc-use-ssl-mutual" : "--grpc-use-ssl";
      nrd_srv_fmt_err(err, errlen, "%s needs %s", which, missing);
      return -1;
    }
  }
  if (cli->n_startup_models > 0 && cli->control_mode != TRITONSERVER_MODEL_CONTROL_EXPLICIT) {
    nrd_srv_fmt_err(err, errlen, "--load-model requires --model-control-mode=explicit");
    return -1;
  }
  for (size_t i = 0; i < cli->n_startup_models; i++) {
    if (strcmp(cli->startup_models[i], "*") == 0 && cli->n_startup_models > 1) {
      nrd_srv_fmt_err(err, errlen, "--load-model=* must be the only --load-model");
      return -1;
    }
  }
  return 0;
}

int nrd_srv_cli_parse(int argc, char **argv, nrd_srv_cli *cli, char *err, size_t errlen) {
  memset(cli, 0, sizeof(*cli));
  if (errlen) err[0] = '\0';
  cli->control_mode = TRITONSERVER_MODEL_CONTROL_NONE;
  cli->repository_poll_secs = 15;
  cli->log_info = cli->log_warn = cli->log_error = true;
  cli->log_format = TRITONSERVER_LOG_DEFAULT;
  cli->exit_timeout_secs = 30;
  cli->allow_http = true;
  cli->http_port = 8000;
  cli->http_address = "0.0.0.0";
  cli->http_thread_count = 8;
  cli->http_max_input_size = 64LL * 1024 * 1024;
  cli->http_client_timeout_secs = NRD_SRV_HTTP_CLIENT_TIMEOUT_DEFAULT;
  cli->grpc_handshake_timeout_secs = NRD_SRV_GRPC_HANDSHAKE_TIMEOUT_DEFAULT;
  cli->allow_metrics = true;
  cli->allow_cpu_metrics = true;
  cli->metrics_interval_ms = 2000;
  cli->allow_gpu_metrics = true;
  cli->pinned_memory_pool_byte_size = -1;
  cli->min_compute_capability = -1;
  cli->metrics_port = 8002;
  cli->allow_grpc = true;
  cli->grpc_port = 8001;
  cli->grpc_address = "0.0.0.0";
  cli->grpc_thread_count = 2;
  cli->grpc_max_message_size = 2147483647LL;
  cli->grpc_max_decompressed_size = 64LL * 1024 * 1024;
  cli->grpc_keepalive_time_ms = 7200000;
  cli->grpc_keepalive_timeout_ms = 20000;
  cli->grpc_keepalive_permit_without_calls = false;
  cli->grpc_http2_max_pings_without_data = 2;
  cli->grpc_http2_min_recv_ping_interval_ms = 300000;
  cli->grpc_http2_max_ping_strikes = 2;
  cli->grpc_infer_response_compression = NRD_SRV_COMPRESS_NONE;
  cli->trace_rate = 1000;
  cli->trace_count = -1;
  cli->vertex_ai_port = 8080;
  cli->vertex_ai_thread_count = 8;
  cli->sagemaker_port = 8080;
  cli->sagemaker_thread_count = 8;
  /* Vertex AI's environment, as tritonserver reads it: in a prediction
   * container the Vertex AI endpoint is on and the others off, unless the
   * flags say otherwise; its port comes from AIP_HTTP_PORT. */
  const char *aip_mode = getenv("AIP_MODE");
  if (aip_mode && !strcmp(aip_mode, "PREDICTION")) {
    cli->allow_vertex_ai = true;
    cli->allow_http = cli->allow_grpc = false;
  }
  const char *aip_port = getenv("AIP_HTTP_PORT");
  if (aip_port && aip_port[0]) {
    long port = 0;
    if (parse_long(aip_port, 0, 65535, &port) != 0) {
      nrd_srv_fmt_err(err, errlen, "AIP_HTTP_PORT: expected a port 0..65535, got '%s'", aip_port);
      return -1;
    }
    cli->vertex_ai_port = (int)port;
  }
  cli->trace_otel_max_queue_size = cli->trace_otel_schedule_delay_ms = cli->trace_otel_max_export_batch_size = -1;
  cli->exit_on_error = true;
  cli->strict_readiness = true;
  cli->strict_model_config = false;
  bool strict_given = false, disable_auto_complete = false;

  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "-h") == 0) {
      cli->help = true;
      continue;
    }
    if (strncmp(a, "--", 2) != 0 || a[2] == '\0') {
      nrd_srv_fmt_err(err, errlen, "unexpected argument '%s' (flags start with --)", a);
      return -1;
    }
    const char *name = a + 2;
    const char *eq = strchr(name, '=');
    size_t name_len = eq ? (size_t)(eq - name) : strlen(name);
    const flag_spec *f = find_flag(name, name_len);
    if (f == NULL) {
      nrd_srv_fmt_err(err, errlen, "unknown flag '--%.*s'", (int)(name_len > 200 ? 200 : name_len), name);
      return -1;
    }
    const char *value = NULL;
    if (f->arg == NULL) {
      if (eq != NULL) {
        nrd_srv_fmt_err(err, errlen, "flag --%s takes no value (got '%s')", f->name, eq + 1);
        return -1;
      }
    } else if (eq != NULL) {
      value = eq + 1;
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      nrd_srv_fmt_err(err, errlen, "flag --%s needs a value (%s)", f->name, f->arg);
      return -1;
    }
    int rc = f->kind == K_CUSTOM ? apply_flag(cli, f, value, &strict_given, &disable_auto_complete, err, errlen)
                                 : apply_plain(cli, f, value, err, errlen);
    if (rc != 0) return -1;
  }
  return check_combination(cli, strict_given, disable_auto_complete, err, errlen);
}

static void free_settings(nrd_srv_backend_setting *arr, size_t n) {
  for (size_t i = 0; i < n; i++) {
    free(arr[i].backend);
    free(arr[i].key);
    free(arr[i].value);
  }
  free(arr);
}

void nrd_srv_cli_free(nrd_srv_cli *cli) {
  if (cli == NULL) return;
  for (size_t i = 0; i < cli->n_rate_resources; i++) free(cli->rate_resources[i].name);
  free(cli->rate_resources);
  free_settings(cli->backend_configs, cli->n_backend_configs);
  free_settings(cli->cache_configs, cli->n_cache_configs);
  free_settings(cli->metrics_configs, cli->n_metrics_configs);
  free_settings(cli->host_policies, cli->n_host_policies);
  free(cli->repos);
  free(cli->startup_models);
  free(cli->cuda_pools);
  free(cli->gpu_load_limits);
  free(cli->trace_otel_resource);
  nrd_srv_restrictions_free(&cli->http_restricted);
  nrd_srv_restrictions_free(&cli->grpc_restricted);
  memset(cli, 0, sizeof(*cli));
}

/* Prints `text` wrapped at about 72 columns, indented by 8 spaces. */
static void print_wrapped(FILE *out, const char *text) {
  const size_t width = 64;
  while (*text) {
    size_t len = strlen(text);
    size_t cut = len;
    if (len > width) {
      cut = width;
      while (cut > 0 && text[cut] != ' ') cut--;
      if (cut == 0) cut = width;
    }
    fprintf(out, "        %.*s\n", (int)cut, text);
    text += cut;
    while (*text == ' ') text++;
  }
}

void nrd_srv_cli_usage(FILE *out, const char *prog) {
  fprintf(out,
          "Usage: %s --model-repository=DIR [flags]\n"
          "\n"
          "Nereid: a Triton-compatible inference server. Loads the models of the\n"
          "repositories, prints their status, and serves until SIGINT or SIGTERM.\n"
          "Flags take '--flag=value' or '--flag value'; booleans accept\n"
          "true/false, 1/0, yes/no, on/off.\n"
          "\n",
          prog ? prog : "nereid");
  for (size_t i = 0; i < N_FLAGS; i++) {
    if (kFlags[i].arg)
      fprintf(out, "  --%s=%s\n", kFlags[i].name, kFlags[i].arg);
    else
      fprintf(out, "  --%s\n", kFlags[i].name);
    print_wrapped(out, kFlags[i].help);
  }
}

/* Relative directories are made absolute so the server sees the same path
 * whatever it does later; a path that does not resolve is passed on as
 * given and the server reports it. Returns a malloc'ed string or NULL. */
static char *absolute_dir(const char *path) {
  char *real = realpath(path, NULL);
  return real ? real : strdup(path);
}

/* The --cache-config settings of each cache as one JSON object of string
 * values, as tritonserver passes them. */
static TRITONSERVER_Error *set_cache_configs(const nrd_srv_cli *cli, TRITONSERVER_ServerOptions *o) {
  TRITONSERVER_Error *err = NULL;
  for (size_t i = 0; i < cli->n_cache_configs && !err; i++) {
    const char *name = cli->cache_configs[i].backend;
    bool seen = false;
    for (size_t k = 0; k < i && !seen; k++) seen = strcmp(cli->cache_configs[k].backend, name) == 0;
    if (seen) continue;
    json_t *j = json_object();
    for (size_t k = i; j && k < cli->n_cache_configs; k++)
      if (strcmp(cli->cache_configs[k].backend, name) == 0 &&
          json_object_set_new(j, cli->cache_configs[k].key, json_string(cli->cache_configs[k].value)) != 0) {
        json_decref(j);
        j = NULL;
      }
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    err = text ? TRITONSERVER_ServerOptionsSetCacheConfig(o, name, text)
               : TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    free(text);
  }
  return err;
}

TRITONSERVER_Error *nrd_srv_cli_make_options(const nrd_srv_cli *cli, TRITONSERVER_ServerOptions **options) {
  *options = NULL;
  TRITONSERVER_ServerOptions *o = NULL;
  TRITONSERVER_Error *err = TRITONSERVER_ServerOptionsNew(&o);
  if (err) return err;

  /* Logging first, so anything later is logged the way the user asked. */
  if (cli->log_file && (err = TRITONSERVER_ServerOptionsSetLogFile(o, cli->log_file))) goto fail;
  if ((err = TRITONSERVER_ServerOptionsSetLogInfo(o, cli->log_info))) goto fail;
  if ((err = TRITONSERVER_ServerOptionsSetLogWarn(o, cli->log_warn))) goto fail;
  if ((err = TRITONSERVER_ServerOptionsSetLogError(o, cli->log_error))) goto fail;
  if ((err = TRITONSERVER_ServerOptionsSetLogVerbose(o, cli->log_verbose))) goto fail;
  if ((err = TRITONSERVER_ServerOptionsSetLogFormat(o, cli->log_format))) goto fail;

  if ((err = TRITONSERVER_ServerOptionsSetServerId(o, cli->server_id ? cli->server_id : "triton"))) goto fail;
  for (size_t i = 0; i < cli->n_repos; i++) {
    char *dir = absolute_dir(cli->repos[i]);
    if (dir == NULL) {
      err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory");
      goto fail;
    }
    err = TRITONSERVER_ServerOptionsSetModelRepositoryPath(o, dir);
    free(dir);
    if (err) goto fail;
  }
  if (cli->backend_dir) {
    char *dir = absolute_dir(cli->backend_dir);
    if (dir == NULL) {
      err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory");
      goto fail;
    }
    err = TRITONSERVER_ServerOptionsSetBackendDirectory(o, dir);
    free(dir);
    if (err) goto fail;
  }
  for (size_t i = 0; i < cli->n_backend_configs; i++) {
    const nrd_srv_backend_setting *s = &cli->backend_configs[i];
    if ((err = TRITONSERVER_ServerOptionsSetBackendConfig(o, s->backend, s->key, s->value))) goto fail;
  }
  if ((err = TRITONSERVER_ServerOptionsSetModelControlMode(o, cli->control_mode))) goto fail;
  for (size_t i = 0; i < cli->n_startup_models; i++)
    if ((err = TRITONSERVER_ServerOptionsSetStartupModel(o, cli->startup_models[i]))) goto fail;
  if ((err = TRITONSERVER_ServerOptionsSetStrictModelConfig(o, cli->strict_model_config))) goto fail;
  if (cli->model_config_name && (err = TRITONSERVER_ServerOptionsSetModelConfigName(o, cli->model_config_name)))
    goto fail;
  if ((err = TRITONSERVER_ServerOptionsSetExitOnError(o, cli->exit_on_error))) goto fail;
  if ((err = TRITONSERVER_ServerOptionsSetStrictReadiness(o, cli->strict_readiness))) goto fail;
  if ((err = TRITONSERVER_ServerOptionsSetExitTimeout(o, cli->exit_timeout_secs))) goto fail;
  if ((err = TRITONSERVER_ServerOptionsSetRateLimiterMode(o, cli->rate_limit))) goto fail;
  for (size_t i = 0; i < cli->n_rate_resources; i++) {
    const nrd_srv_rate_resource *r = &cli->rate_resources[i];
    if ((err = TRITONSERVER_ServerOptionsAddRateLimiterResource(o, r->name, r->count, r->device))) goto fail;
  }
  if (cli->response_cache_byte_size_given &&
      (err = TRITONSERVER_ServerOptionsSetResponseCacheByteSize(o, cli->response_cache_byte_size)))
    goto fail;
  if (cli->cache_directory && (err = TRITONSERVER_ServerOptionsSetCacheDirectory(o, cli->cache_directory))) goto fail;
  if (cli->repoagent_directory && (err = TRITONSERVER_ServerOptionsSetRepoAgentDirectory(o, cli->repoagent_directory)))
    goto fail;
  if ((err = set_cache_configs(cli, o))) goto fail;
  if ((err = TRITONSERVER_ServerOptionsSetModelLoadRetryCount(o, cli->model_load_retries))) goto fail;
  if ((err = TRITONSERVER_ServerOptionsSetModelNamespacing(o, cli->model_namespacing))) goto fail;
  if ((err = TRITONSERVER_ServerOptionsSetMetrics(o, cli->allow_metrics))) goto fail;
  if ((err = TRITONSERVER_ServerOptionsSetCpuMetrics(o, cli->allow_cpu_metrics))) goto fail;
  if ((err = TRITONSERVER_ServerOptionsSetMetricsInterval(o, cli->metrics_interval_ms))) goto fail;
  if ((err = TRITONSERVER_ServerOptionsSetGpuMetrics(o, cli->allow_gpu_metrics))) goto fail;
  if (cli->pinned_memory_pool_byte_size >= 0 &&
      (err = TRITONSERVER_ServerOptionsSetPinnedMemoryPoolByteSize(o, (uint64_t)cli->pinned_memory_pool_byte_size)))
    goto fail;
  if (cli->min_compute_capability >= 0 &&
      (err = TRITONSERVER_ServerOptionsSetMinSupportedComputeCapability(o, cli->min_compute_capability)))
    goto fail;
  for (size_t i = 0; i < cli->n_cuda_pools; i++) {
    /* check_device_value accepted "<gpu>:<digits>" already. */
    const char *colon = strchr(cli->cuda_pools[i], ':');
    int gpu = atoi(cli->cuda_pools[i]);
    if ((err = TRITONSERVER_ServerOptionsSetCudaMemoryPoolByteSize(o, gpu, strtoull(colon + 1, NULL, 10)))) goto fail;
  }
  for (size_t i = 0; i < cli->n_gpu_load_limits; i++) {
    /* check_device_value accepted "<gpu>:<fraction in [0, 1]>" already. */
    const char *colon = strchr(cli->gpu_load_limits[i], ':');
    if ((err = TRITONSERVER_ServerOptionsSetModelLoadDeviceLimit(
             o, TRITONSERVER_INSTANCEGROUPKIND_GPU, atoi(cli->gpu_load_limits[i]), strtod(colon + 1, NULL))))
      goto fail;
  }
  for (size_t i = 0; i < cli->n_metrics_configs; i++) {
    const nrd_srv_backend_setting *m = &cli->metrics_configs[i];
    if ((err = TRITONSERVER_ServerOptionsSetMetricsConfig(o, m->backend, m->key, m->value))) goto fail;
  }
  for (size_t i = 0; i < cli->n_host_policies; i++) {
    const nrd_srv_backend_setting *h = &cli->host_policies[i];
    if ((err = TRITONSERVER_ServerOptionsSetHostPolicy(o, h->backend, h->key, h->value))) goto fail;
  }
  *options = o;
  return NULL;
fail:
  TRITONSERVER_ServerOptionsDelete(o);
  return err;
}
