/*
 * The python backend's model and instance states, and Execute: requests
 * into the shared memory, the stub's replies into responses.
 */
#ifndef NRD_PY_EXEC_H
#define NRD_PY_EXEC_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "nereid/backend_utils.h"
#include "py_env.h"
#include "py_stub.h"

/* The backend's settings (--backend-config=python,...). */
typedef struct nrd_py_backend {
  char dir[PATH_MAX]; /* where the stub and the .py files are */
  /* A Python-based backend's model.py (backends/<name>/model.py), which
   * every model of that backend runs; "" for the python backend itself. */
  char backend_model_file[PATH_MAX];
  uint64_t shm_size; /* shm-default-byte-size */
  uint64_t shm_growth; /* shm-growth-byte-size (accepted; the region is fixed) */
  uint64_t stub_timeout_ms; /* stub-timeout-seconds; 0: none */
  char shm_prefix[128]; /* shm-region-prefix-name: the memfds' names */
  unsigned regions; /* memfds made so far (atomic), for their names */
  nrd_py_env_cache envs; /* unpacked EXECUTION_ENV_PATH archives */
  bool env_outside_model; /* execution-env-outside-model: EXECUTION_ENV_PATH may leave the model folder */
} nrd_py_backend;

typedef struct nrd_py_model {
  TRITONBACKEND_Model *model;
  nrd_py_backend *backend;
  json_t *config; /* the model configuration */
  char *model_file; /* <repository>/<version>/<default_model_filename> */
  char *init_args; /* JSON of initialize()'s args less instance keys */
  char *env_dir; /* EXECUTION_ENV_PATH resolved (py_env.h), or NULL */
  const char *name;
} nrd_py_model;

typedef struct nrd_py_instance {
  nrd_py_model *model;
  TRITONBACKEND_ModelInstance *instance;
  nrd_py_stub stub;
  nrd_py_waiter bls_waiter; /* how long BLS calls took: the spin before a sleep */
  bool caller_waits; /* the executing batch runs inline (nrd_py_execute) */
  char *name;
  TRITONSERVER_InstanceGroupKind kind;
  int32_t device;
  /* Custom metrics the model made (py_services.c); ids are index + 1. */
  TRITONSERVER_MetricFamily **families;
  size_t n_families;
  TRITONSERVER_Metric **metrics;
  size_t n_metrics;
} nrd_py_instance;

/*
 * Reads the configuration and locates model.py. On success '*out' is a new
 * state freed with nrd_py_model_free. ModelInitialize's thread.
 */
TRITONSERVER_Error *nrd_py_model_new(TRITONBACKEND_Model *model, nrd_py_model **out);

/* Frees a model state (NULL is fine). ModelFinalize's thread. */
void nrd_py_model_free(nrd_py_model *state);

/*
 * Starts the instance's stub and runs initialize(); on failure the stub is
 * stopped and the error names what failed (file and line for Python).
 * '*out' is freed with nrd_py_instance_free. The instance's init thread.
 */
TRITONSERVER_Error *nrd_py_instance_new(TRITONBACKEND_ModelInstance *instance, nrd_py_instance **out);

/*
 * NULL while the instance's stub process runs, else an UNAVAILABLE error
 * the caller owns (TRITONBACKEND_ModelInstanceReady). The next batch
 * starts a dead stub again. Any thread.
 */
TRITONSERVER_Error *nrd_py_instance_ready(nrd_py_instance *state);

/* Runs finalize() and stops the stub; frees the state (NULL is fine). */
void nrd_py_instance_free(nrd_py_instance *state);

/*
 * Runs one batch of requests in the stub; answers and releases every
 * request whatever happens. 'caller_waits': an inline execution (no
 * request queued, the caller's thread blocked on this one), where
 * waiting for the stub spins (py_wait.h); else it sleeps at once, leaving
 * the CPU to the work queued. The thread the core executes the instance
 * on, one execution at a time.
 */
void nrd_py_execute(nrd_py_instance *state, TRITONBACKEND_Request **requests, uint32_t count, bool caller_waits);

#endif
