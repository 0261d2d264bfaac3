/*
 * python backend: serves Triton Python-backend models (model.py with class
 * TritonPythonModel) unchanged. Each model instance runs its Python in a
 * process of its own (triton_python_backend_stub, beside this library);
 * messages and tensor bytes cross through shared memory (py_ipc.h, py_stub.c),
 * the Python side lives in nrd_python_stub.py and
 * triton_python_backend_utils.py, also beside this library.
 *
 * Threads: the model state is written in ModelInitialize and only read
 * afterwards; each instance's stub is used only by that instance's thread.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nereid/backend_utils.h"
#include "py_bls.h"
#include "py_exec.h"

/* 200 us: the two hand-offs inline execution saves (30-40 us) are then
 * at least a sixth of the execution; a blank model.py takes 30-40 us, one
 * making a BLS call 70-80, with a tail past 100 on a loaded machine (at
 * 100 us, one slow execution in eight sent BLS models back to their
 * instance threads: 64 us added p50 against 37). */
#define NRD_PY_INLINE_MAX_US 200u
#include "py_stub.h"

/* A --backend-config=python,<key>=<value> count: a whole decimal number
 * of at least 'least'; else an error that starts with Triton's sentence
 * 'triton' (when it has one) and names the setting and the value. */
static TRITONSERVER_Error *count_setting(const json_t *config, const char *key, uint64_t least, const char *triton,
                                         uint64_t *out) {
  const char *v = nrd_bu_backend_setting(config, key);
  if (v == NULL) {
    return NULL;
  }
  char *end = NULL;
  errno = 0;
  unsigned long long n = strtoull(v, &end, 10);
  bool number = v[0] >= '0' && v[0] <= '9' && *end == '\0' && errno == 0;
  if (!number || n < least) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "%s%s(python: --backend-config=python,%s='%s': %s%llu)",
                             triton ? triton : "", triton ? " " : "", key, v,
                             number ? "the least accepted is " : "not a whole number; at least ",
                             (unsigned long long)least);
  }
  *out = n;
  return NULL;
}

/* The settings the core gives every backend, and ours; any other
 * --backend-config=python,... key is ignored (as Triton does) with a
 * warning. */
static const char *const known_settings[] = {
    "auto-complete-config",   "backend-directory",      "min-compute-capability",
    "default-max-batch-size", "shm-default-byte-size",  "shm-growth-byte-size",
    "stub-timeout-seconds",   "shm-region-prefix-name", "execution-env-outside-model"};

/* Reads --backend-config=python,... into 'state'. */
static TRITONSERVER_Error *read_settings(nrd_py_backend *state, const json_t *config) {
  state->shm_size = 64u << 20;
  state->shm_growth = 64u << 20;
  state->stub_timeout_ms = 0;
  snprintf(state->shm_prefix, sizeof state->shm_prefix, "triton_python_backend_shm_region_");
  TRITONSERVER_Error *err = count_setting(config, "shm-default-byte-size", 1u << 20,
                                          "shm-default-byte-size can't be smaller than 4 MiBs", &state->shm_size);
  if (err == NULL) {
    err = count_setting(config, "shm-growth-byte-size", 1,
                        "shm-growth-byte-size can't be smaller than or equal to zero.", &state->shm_growth);
  }
  uint64_t seconds = 0;
  if (err == NULL) {
    err = count_setting(config, "stub-timeout-seconds", 1,
                        "stub-timeout-seconds can't be smaller than or equal to zero.", &seconds);
  }
  if (err != NULL) {
    return err;
  }
  if (seconds > UINT64_MAX / 1000u) {
    seconds = UINT64_MAX / 1000u;
  }
  state->stub_timeout_ms = seconds * 1000u;
  const char *prefix = nrd_bu_backend_setting(config, "shm-region-prefix-name");
  if (prefix != NULL) {
    if (prefix[0] == '\0') {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                               "shm-region-prefix-name must at least contain one character. (python: "
                               "--backend-config=python,shm-region-prefix-name)");
    }
    if (strlen(prefix) >= sizeof state->shm_prefix || strchr(prefix, '/') != NULL) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                               "python: --backend-config=python,shm-region-prefix-name='%s': at most %zu "
                               "characters, no '/'",
                               prefix, sizeof state->shm_prefix - 1);
    }
    snprintf(state->shm_prefix, sizeof state->shm_prefix, "%s", prefix);
  }
  const char *outside = nrd_bu_backend_setting(config, "execution-env-outside-model");
  state->env_outside_model = false;
  if (outside != NULL) {
    if (strcmp(outside, "true") != 0 && strcmp(outside, "false") != 0) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                               "python: --backend-config=python,execution-env-outside-model='%s': expected true or "
                               "false",
                               outside);
    }
    state->env_outside_model = strcmp(outside, "true") == 0;
  }
  const char *key;
  const json_t *value;
  json_object_foreach((json_t *)json_object_get(config, "cmdline"), key, value) {
    bool known = false;
    for (size_t i = 0; i < sizeof known_settings / sizeof known_settings[0] && !known; i++) {
      known = strcmp(key, known_settings[i]) == 0;
    }
    if (!known) {
      NRD_BU_LOG(TRITONSERVER_LOG_WARN, "python: --backend-config=python,%s has no meaning here; ignored", key);
    }
  }
  return NULL;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_Initialize(TRITONBACKEND_Backend *backend) {
  TRITONSERVER_Error *err = nrd_bu_api_version_check("python");
  if (err != NULL) {
    return err;
  }
  TRITONBACKEND_ArtifactType type;
  const char *dir = NULL;
  err = TRITONBACKEND_BackendArtifacts(backend, &type, &dir);
  if (err != NULL) {
    return err;
  }
  json_t *config = NULL;
  err = nrd_bu_backend_config(backend, &config);
  if (err != NULL) {
    return err;
  }
  nrd_py_backend *state = calloc(1, sizeof *state);
  if (state == NULL) {
    json_decref(config);
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL, "python: out of memory");
  }
  /* The stub and its .py files sit beside this library; a Python-based
   * backend (backends/<name>/model.py, served by this library) has its own
   * folder as artifacts, with the model.py every model of it runs. */
  Dl_info self;
  if (dladdr((void *)TRITONBACKEND_Initialize, &self) != 0 && self.dli_fname != NULL) {
    snprintf(state->dir, sizeof state->dir, "%s", self.dli_fname);
    char *slash = strrchr(state->dir, '/');
    if (slash != NULL) {
      *slash = '\0';
    }
  } else {
    snprintf(state->dir, sizeof state->dir, "%s", dir);
  }
  if (strcmp(state->dir, dir) != 0) {
    snprintf(state->backend_model_file, sizeof state->backend_model_file, "%s/model.py", dir);
  }
  err = read_settings(state, config);
  if (err != NULL) {
    json_decref(config);
    free(state);
    return err;
  }
  nrd_py_env_cache_init(&state->envs);
  json_decref(config);
  err = TRITONBACKEND_BackendSetState(backend, state);
  if (err != NULL) {
    nrd_py_env_cache_fini(&state->envs);
    free(state);
  }
  return err;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_Finalize(TRITONBACKEND_Backend *backend) {
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_BackendState(backend, &state);
  if (state != NULL) {
    nrd_py_env_cache_fini(&((nrd_py_backend *)state)->envs);
  }
  free(state);
  nrd_py_bls_fini();
  return err;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model *model) {
  nrd_py_model *state = NULL;
  TRITONSERVER_Error *err = nrd_py_model_new(model, &state);
  if (err != NULL) {
    return err;
  }
  err = TRITONBACKEND_ModelSetState(model, state);
  if (err != NULL) {
    nrd_py_model_free(state);
  }
  return err;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model *model) {
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelState(model, &state);
  nrd_py_model_free(state);
  return err;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance *instance) {
  nrd_py_instance *state = NULL;
  TRITONSERVER_Error *err = nrd_py_instance_new(instance, &state);
  if (err != NULL) {
    return err;
  }
  err = TRITONBACKEND_ModelInstanceSetState(instance, state);
  if (err != NULL) {
    nrd_py_instance_free(state);
  }
  return err;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance *instance) {
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelInstanceState(instance, &state);
  nrd_py_instance_free(state);
  return err;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceReady(TRITONBACKEND_ModelInstance *instance) {
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelInstanceState(instance, &state);
  if (err != NULL) {
    return err;
  }
  return nrd_py_instance_ready(state);
}

/* Both Execute entry points; 'caller_waits' for the inline one. */
static TRITONSERVER_Error *execute(TRITONBACKEND_ModelInstance *instance, TRITONBACKEND_Request **requests,
                                   uint32_t request_count, bool caller_waits) {
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelInstanceState(instance, &state);
  if (err != NULL) {
    return err;
  }
  nrd_py_execute(state, requests, request_count, caller_waits);
  return NULL;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance *instance,
                                                                          TRITONBACKEND_Request **requests,
                                                                          const uint32_t request_count) {
  return execute(instance, requests, request_count, false);
}

/*
 * Nereid's extension (docs/backend-guide.md): Execute for an inline
 * execution, whose caller waits and behind which nothing is queued: the
 * exchanges with the stub spin before they sleep. On an instance thread
 * requests queue, the stub is the bottleneck, and a spin would only take
 * the CPU the queued work needs (at 8 HTTP connections it raised the CPU
 * per request from 95 to 137-158 us with the same throughput).
 */
NRD_BACKEND_EXPORT TRITONSERVER_Error *NRDBACKEND_ModelInstanceExecuteInline(TRITONBACKEND_ModelInstance *instance,
                                                                             TRITONBACKEND_Request **requests,
                                                                             const uint32_t request_count) {
  return execute(instance, requests, request_count, true);
}

/*
 * Nereid's extension (docs/core.md, "Inline execution"): an execution of a
 * model.py is a relay to its stub process, which does the work; run on the
 * caller's thread it saves the two hand-offs to and from an instance
 * thread (15-20 us each on our VMs), more than a blank model.py's Python
 * costs. So a model whose executions take at most this long may run on its
 * caller's thread. Any thread; no state.
 */
NRD_BACKEND_EXPORT uint32_t NRDBACKEND_InlineExecutionMaxUs(void) { return NRD_PY_INLINE_MAX_US; }
