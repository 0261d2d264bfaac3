/* Unit tests for server_options.c: defaults, every setter, bad arguments. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "server_options.h"

static TRITONSERVER_ServerOptions *o;

static void setup(void) {
  nrd_log_reset();
  cr_assert_null(TRITONSERVER_ServerOptionsNew(&o));
}

static void teardown(void) {
  TRITONSERVER_ServerOptionsDelete(o);
  nrd_log_reset();
}

TestSuite(server_options, .init = setup, .fini = teardown);

static void expect_msg(TRITONSERVER_Error *e, TRITONSERVER_Error_Code code, const char *msg) {
  cr_assert_not_null(e);
  cr_assert_eq(TRITONSERVER_ErrorCode(e), code, "%s", TRITONSERVER_ErrorMessage(e));
  cr_assert_str_eq(TRITONSERVER_ErrorMessage(e), msg, "%s", TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
}

static void expect_code(TRITONSERVER_Error *e, TRITONSERVER_Error_Code code) {
  cr_assert_not_null(e);
  cr_assert_eq(TRITONSERVER_ErrorCode(e), code, "got %s: %s", TRITONSERVER_ErrorCodeString(e),
               TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
}

Test(server_options, defaults) {
  cr_assert_str_eq(o->server_id, "triton");
  cr_assert_eq(o->n_repo_paths, 0);
  cr_assert_eq(o->control_mode, TRITONSERVER_MODEL_CONTROL_POLL);
  cr_assert_eq(o->n_startup_models, 0);
  cr_assert(o->strict_model_config);
  cr_assert_str_eq(o->model_config_name, "");
  cr_assert_eq(o->rate_limit_mode, TRITONSERVER_RATE_LIMIT_OFF);
  cr_assert_eq(o->pinned_memory_pool_byte_size, 1u << 28);
  cr_assert_str_eq(o->cache_dir, "/opt/tritonserver/caches");
  cr_assert_eq(o->min_compute_capability, 0.0);
  cr_assert(o->exit_on_error);
  cr_assert(o->strict_readiness);
  cr_assert_eq(o->exit_timeout_secs, 30);
  cr_assert_eq(o->buffer_manager_threads, 0);
  cr_assert_eq(o->model_load_threads, 4);
  cr_assert_eq(o->model_load_retries, 0);
  cr_assert_not(o->model_namespacing);
  cr_assert(o->peer_access);
  cr_assert_str_eq(o->log_file, "");
  cr_assert(o->log_info && o->log_warn && o->log_error);
  cr_assert_eq(o->log_format, TRITONSERVER_LOG_DEFAULT);
  cr_assert_eq(o->log_verbose, 0);
  cr_assert(o->metrics);
  cr_assert(o->gpu_metrics);
  cr_assert(o->cpu_metrics);
  cr_assert_eq(o->metrics_interval_ms, 2000);
  cr_assert_str_eq(o->backend_dir, "/opt/tritonserver/backends");
  cr_assert_str_eq(o->repoagent_dir, "/opt/tritonserver/repoagents");
  cr_assert_eq(o->backend_configs.count, 0);
}

Test(server_options, strings_and_repeatables) {
  cr_assert_null(TRITONSERVER_ServerOptionsSetServerId(o, "nereid"));
  cr_assert_str_eq(o->server_id, "nereid");
  cr_assert_null(TRITONSERVER_ServerOptionsSetModelRepositoryPath(o, "/models/a"));
  cr_assert_null(TRITONSERVER_ServerOptionsSetModelRepositoryPath(o, "/models/b"));
  cr_assert_null(TRITONSERVER_ServerOptionsSetModelRepositoryPath(o, "/models/a"));
  cr_assert_eq(o->n_repo_paths, 2);
  cr_assert_str_eq(o->repo_paths[0], "/models/a");
  cr_assert_str_eq(o->repo_paths[1], "/models/b");
  cr_assert_null(TRITONSERVER_ServerOptionsSetStartupModel(o, "simple"));
  cr_assert_null(TRITONSERVER_ServerOptionsSetStartupModel(o, "*"));
  cr_assert_null(TRITONSERVER_ServerOptionsSetStartupModel(o, "simple"));
  cr_assert_eq(o->n_startup_models, 2);
  cr_assert_str_eq(o->startup_models[1], "*");
  cr_assert_null(TRITONSERVER_ServerOptionsSetModelConfigName(o, "h100_config"));
  cr_assert_str_eq(o->model_config_name, "h100_config");
  cr_assert_null(TRITONSERVER_ServerOptionsSetBackendDirectory(o, "/b"));
  cr_assert_str_eq(o->backend_dir, "/b");
  cr_assert_null(TRITONSERVER_ServerOptionsSetRepoAgentDirectory(o, "/r"));
  cr_assert_str_eq(o->repoagent_dir, "/r");
  cr_assert_null(TRITONSERVER_ServerOptionsSetCacheDirectory(o, "/c"));
  cr_assert_str_eq(o->cache_dir, "/c");
}

Test(server_options, enums_and_scalars) {
  cr_assert_null(TRITONSERVER_ServerOptionsSetModelControlMode(o, TRITONSERVER_MODEL_CONTROL_EXPLICIT));
  cr_assert_eq(o->control_mode, TRITONSERVER_MODEL_CONTROL_EXPLICIT);
  cr_assert_null(TRITONSERVER_ServerOptionsSetModelControlMode(o, TRITONSERVER_MODEL_CONTROL_NONE));
  cr_assert_eq(o->control_mode, TRITONSERVER_MODEL_CONTROL_NONE);
  cr_assert_null(TRITONSERVER_ServerOptionsSetStrictModelConfig(o, false));
  cr_assert_not(o->strict_model_config);
  cr_assert_null(TRITONSERVER_ServerOptionsSetRateLimiterMode(o, TRITONSERVER_RATE_LIMIT_EXEC_COUNT));
  cr_assert_eq(o->rate_limit_mode, TRITONSERVER_RATE_LIMIT_EXEC_COUNT);
  cr_assert_null(TRITONSERVER_ServerOptionsSetPinnedMemoryPoolByteSize(o, 0));
  cr_assert_eq(o->pinned_memory_pool_byte_size, 0);
  cr_assert_null(TRITONSERVER_ServerOptionsSetMinSupportedComputeCapability(o, 7.5));
  cr_assert_eq(o->min_compute_capability, 7.5);
  cr_assert_null(TRITONSERVER_ServerOptionsSetExitOnError(o, false));
  cr_assert_not(o->exit_on_error);
  cr_assert_null(TRITONSERVER_ServerOptionsSetStrictReadiness(o, false));
  cr_assert_not(o->strict_readiness);
  cr_assert_null(TRITONSERVER_ServerOptionsSetExitTimeout(o, 5));
  cr_assert_eq(o->exit_timeout_secs, 5);
  cr_assert_null(TRITONSERVER_ServerOptionsSetBufferManagerThreadCount(o, 8));
  cr_assert_eq(o->buffer_manager_threads, 8);
  cr_assert_null(TRITONSERVER_ServerOptionsSetModelLoadThreadCount(o, 2));
  cr_assert_eq(o->model_load_threads, 2);
  cr_assert_null(TRITONSERVER_ServerOptionsSetModelLoadThreadCount(o, 0));
  cr_assert_eq(o->model_load_threads, 1);
  cr_assert_null(TRITONSERVER_ServerOptionsSetModelLoadRetryCount(o, 3));
  cr_assert_eq(o->model_load_retries, 3);
  cr_assert_null(TRITONSERVER_ServerOptionsSetModelNamespacing(o, true));
  cr_assert(o->model_namespacing);
  cr_assert_null(TRITONSERVER_ServerOptionsSetModelNamespacing(o, false));
  cr_assert_not(o->model_namespacing);
  cr_assert_null(TRITONSERVER_ServerOptionsSetEnablePeerAccess(o, false));
  cr_assert_not(o->peer_access);
  cr_assert_null(TRITONSERVER_ServerOptionsSetMetrics(o, false));
  cr_assert_not(o->metrics);
  cr_assert_null(TRITONSERVER_ServerOptionsSetGpuMetrics(o, false));
  cr_assert_not(o->gpu_metrics);
  cr_assert_null(TRITONSERVER_ServerOptionsSetCpuMetrics(o, false));
  cr_assert_not(o->cpu_metrics);
  cr_assert_null(TRITONSERVER_ServerOptionsSetMetricsInterval(o, 500));
  cr_assert_eq(o->metrics_interval_ms, 500);
}

Test(server_options, gpu_settings_are_stored) {
  cr_assert_null(TRITONSERVER_ServerOptionsSetCudaMemoryPoolByteSize(o, 0, 1024));
  cr_assert_null(TRITONSERVER_ServerOptionsSetCudaMemoryPoolByteSize(o, 1, 2048));
  cr_assert_null(TRITONSERVER_ServerOptionsSetCudaMemoryPoolByteSize(o, 0, 4096));
  cr_assert_eq(o->n_cuda_pools, 2);
  cr_assert_eq(o->cuda_pools[0].size, 4096);
  cr_assert_null(TRITONSERVER_ServerOptionsSetCudaVirtualAddressSize(o, 0, 1 << 20));
  cr_assert_eq(o->n_cuda_virtual_address_sizes, 1);
  cr_assert_null(TRITONSERVER_ServerOptionsSetModelLoadDeviceLimit(o, TRITONSERVER_INSTANCEGROUPKIND_GPU, 0, 0.5));
  cr_assert_null(TRITONSERVER_ServerOptionsSetModelLoadDeviceLimit(o, TRITONSERVER_INSTANCEGROUPKIND_GPU, 0, 0.75));
  cr_assert_eq(o->n_device_limits, 1);
  cr_assert_eq(o->device_limits[0].fraction, 0.75);
  /* Triton's messages and order: device, fraction, then kind. */
  expect_msg(TRITONSERVER_ServerOptionsSetModelLoadDeviceLimit(o, TRITONSERVER_INSTANCEGROUPKIND_CPU, -1, 1.5),
             TRITONSERVER_ERROR_INVALID_ARG, "expects device ID >= 0, got -1");
  expect_msg(TRITONSERVER_ServerOptionsSetModelLoadDeviceLimit(o, TRITONSERVER_INSTANCEGROUPKIND_CPU, 0, 1.5),
             TRITONSERVER_ERROR_INVALID_ARG, "expects limit fraction to be in range [0.0, 1.0], got 1.500000");
  expect_msg(TRITONSERVER_ServerOptionsSetModelLoadDeviceLimit(o, TRITONSERVER_INSTANCEGROUPKIND_CPU, 0, 0.5),
             TRITONSERVER_ERROR_INVALID_ARG, "given device kind is not supported, got: CPU");
  expect_code(TRITONSERVER_ServerOptionsSetCudaMemoryPoolByteSize(o, -1, 1), TRITONSERVER_ERROR_INVALID_ARG);
}

Test(server_options, rate_limiter_resources) {
  cr_assert_null(TRITONSERVER_ServerOptionsAddRateLimiterResource(o, "R1", 4, -1));
  cr_assert_null(TRITONSERVER_ServerOptionsAddRateLimiterResource(o, "R1", 2, 0));
  cr_assert_eq(o->n_rate_limit_resources, 2);
  cr_assert_str_eq(o->rate_limit_resources[0].name, "R1");
  cr_assert_eq(o->rate_limit_resources[0].count, 4);
  cr_assert_eq(o->rate_limit_resources[1].device, 0);
  expect_code(TRITONSERVER_ServerOptionsAddRateLimiterResource(o, "R1", 1, 0), TRITONSERVER_ERROR_ALREADY_EXISTS);
  expect_code(TRITONSERVER_ServerOptionsAddRateLimiterResource(o, "R2", 1, -2), TRITONSERVER_ERROR_INVALID_ARG);
  expect_code(TRITONSERVER_ServerOptionsAddRateLimiterResource(o, NULL, 1, 0), TRITONSERVER_ERROR_INVALID_ARG);
  cr_assert_eq(o->n_rate_limit_resources, 2);
}

Test(server_options, triples_replace_and_find) {
  cr_assert_null(TRITONSERVER_ServerOptionsSetBackendConfig(o, "python", "shm-default-byte-size", "1"));
  cr_assert_null(TRITONSERVER_ServerOptionsSetBackendConfig(o, "python", "shm-default-byte-size", "2"));
  cr_assert_null(TRITONSERVER_ServerOptionsSetBackendConfig(o, "", "default-max-batch-size", "8"));
  cr_assert_eq(o->backend_configs.count, 2);
  cr_assert_str_eq(nrd_option_triples_find(&o->backend_configs, "python", "shm-default-byte-size"), "2");
  cr_assert_str_eq(nrd_option_triples_find(&o->backend_configs, "", "default-max-batch-size"), "8");
  cr_assert_null(nrd_option_triples_find(&o->backend_configs, "onnx", "x"));
  cr_assert_null(TRITONSERVER_ServerOptionsSetHostPolicy(o, "numa0", "numa-node", "0"));
  cr_assert_str_eq(nrd_option_triples_find(&o->host_policies, "numa0", "numa-node"), "0");
  cr_assert_null(TRITONSERVER_ServerOptionsSetMetricsConfig(o, "summary_latencies", "", "true"));
  cr_assert_str_eq(nrd_option_triples_find(&o->metrics_configs, "summary_latencies", ""), "true");
  cr_assert_null(TRITONSERVER_ServerOptionsSetCacheConfig(o, "local", "{\"size\":1048576}"));
  cr_assert_str_eq(nrd_option_triples_find(&o->cache_configs, "local", "config"), "{\"size\":1048576}");
  cr_assert_null(TRITONSERVER_ServerOptionsSetResponseCacheByteSize(o, 2048));
  cr_assert_str_eq(nrd_option_triples_find(&o->cache_configs, "local", "config"), "{\"size\":2048}");
  expect_code(TRITONSERVER_ServerOptionsSetBackendConfig(o, NULL, "a", "b"), TRITONSERVER_ERROR_INVALID_ARG);
  expect_code(TRITONSERVER_ServerOptionsSetBackendConfig(o, "a", NULL, "b"), TRITONSERVER_ERROR_INVALID_ARG);
  expect_code(TRITONSERVER_ServerOptionsSetHostPolicy(o, "a", "b", NULL), TRITONSERVER_ERROR_INVALID_ARG);
  expect_code(TRITONSERVER_ServerOptionsSetMetricsConfig(o, NULL, "b", "c"), TRITONSERVER_ERROR_INVALID_ARG);
  expect_code(TRITONSERVER_ServerOptionsSetCacheConfig(o, "", "{}"), TRITONSERVER_ERROR_INVALID_ARG);
  expect_code(TRITONSERVER_ServerOptionsSetCacheConfig(o, "local", NULL), TRITONSERVER_ERROR_INVALID_ARG);
}

Test(server_options, log_setters_apply_immediately) {
  cr_assert_null(TRITONSERVER_ServerOptionsSetLogInfo(o, false));
  cr_assert_not(nrd_log_info_on());
  cr_assert_null(TRITONSERVER_ServerOptionsSetLogWarn(o, false));
  cr_assert_not(nrd_log_warn_on());
  cr_assert_null(TRITONSERVER_ServerOptionsSetLogError(o, false));
  cr_assert_not(nrd_log_error_on());
  cr_assert_null(TRITONSERVER_ServerOptionsSetLogVerbose(o, 2));
  cr_assert_eq(nrd_log_verbose_level(), 2);
  cr_assert_eq(o->log_verbose, 2);
  cr_assert_null(TRITONSERVER_ServerOptionsSetLogFormat(o, TRITONSERVER_LOG_ISO8601));
  cr_assert_eq(nrd_log_format(), TRITONSERVER_LOG_ISO8601);
  char path[64];
  snprintf(path, sizeof(path), "/tmp/nrd_opts_log_%d.txt", (int)getpid());
  cr_assert_null(TRITONSERVER_ServerOptionsSetLogFile(o, path));
  cr_assert_str_eq(o->log_file, path);
  char cur[64];
  nrd_log_file(cur, sizeof(cur));
  cr_assert_str_eq(cur, path);
  expect_code(TRITONSERVER_ServerOptionsSetLogFile(o, "/no/such/dir/log.txt"), TRITONSERVER_ERROR_INVALID_ARG);
  cr_assert_str_eq(o->log_file, path);
  cr_assert_null(TRITONSERVER_ServerOptionsSetLogFile(o, ""));
  nrd_log_file(cur, sizeof(cur));
  cr_assert_str_eq(cur, "");
  unlink(path);
}

Test(server_options, bad_arguments) {
  expect_code(TRITONSERVER_ServerOptionsNew(NULL), TRITONSERVER_ERROR_INVALID_ARG);
  expect_code(TRITONSERVER_ServerOptionsSetServerId(NULL, "x"), TRITONSERVER_ERROR_INVALID_ARG);
  expect_code(TRITONSERVER_ServerOptionsSetServerId(o, NULL), TRITONSERVER_ERROR_INVALID_ARG);
  expect_code(TRITONSERVER_ServerOptionsSetModelRepositoryPath(o, NULL), TRITONSERVER_ERROR_INVALID_ARG);
  expect_code(TRITONSERVER_ServerOptionsSetModelRepositoryPath(o, ""), TRITONSERVER_ERROR_INVALID_ARG);
  expect_code(TRITONSERVER_ServerOptionsSetStartupModel(o, NULL), TRITONSERVER_ERROR_INVALID_ARG);
  expect_code(TRITONSERVER_ServerOptionsSetModelControlMode(o, (TRITONSERVER_ModelControlMode)9),
              TRITONSERVER_ERROR_INVALID_ARG);
  expect_code(TRITONSERVER_ServerOptionsSetRateLimiterMode(o, (TRITONSERVER_RateLimitMode)9),
              TRITONSERVER_ERROR_INVALID_ARG);
  expect_code(TRITONSERVER_ServerOptionsSetLogFormat(o, (TRITONSERVER_LogFormat)9), TRITONSERVER_ERROR_INVALID_ARG);
  expect_code(TRITONSERVER_ServerOptionsSetLogVerbose(o, -1), TRITONSERVER_ERROR_INVALID_ARG);
  expect_code(TRITONSERVER_ServerOptionsSetMetricsInterval(o, 0), TRITONSERVER_ERROR_INVALID_ARG);
  expect_code(TRITONSERVER_ServerOptionsSetMinSupportedComputeCapability(o, -1.0), TRITONSERVER_ERROR_INVALID_ARG);
  expect_code(TRITONSERVER_ServerOptionsSetBackendDirectory(o, NULL), TRITONSERVER_ERROR_INVALID_ARG);
  expect_code(TRITONSERVER_ServerOptionsSetExitTimeout(NULL, 1), TRITONSERVER_ERROR_INVALID_ARG);
  expect_code(TRITONSERVER_ServerOptionsSetMetrics(NULL, true), TRITONSERVER_ERROR_INVALID_ARG);
  /* nothing changed */
  cr_assert_eq(o->control_mode, TRITONSERVER_MODEL_CONTROL_POLL);
  cr_assert_eq(o->n_repo_paths, 0);
  cr_assert_null(TRITONSERVER_ServerOptionsDelete(NULL));
}
