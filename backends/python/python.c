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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nereid/backend_utils.h"
#include "py_bls.h"
#include "py_exec.h"
#include "py_stub.h"

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
  state->shm_size = 64u << 20;
  state->stub_timeout_ms = 0;
  const char *v = nrd_bu_backend_setting(config, "shm-default-byte-size");
  if (v != NULL && strtoull(v, NULL, 10) > 0) {
    state->shm_size = strtoull(v, NULL, 10);
  }
  v = nrd_bu_backend_setting(config, "stub-timeout-seconds");
  if (v != NULL) {
    state->stub_timeout_ms = strtoull(v, NULL, 10) * 1000u;
  }
  json_decref(config);
  return TRITONBACKEND_BackendSetState(backend, state);
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_Finalize(TRITONBACKEND_Backend *backend) {
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_BackendState(backend, &state);
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

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance *instance,
                                                                          TRITONBACKEND_Request **requests,
                                                                          const uint32_t request_count) {
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelInstanceState(instance, &state);
  if (err != NULL) {
    return err;
  }
  nrd_py_execute(state, requests, request_count);
  return NULL;
}
