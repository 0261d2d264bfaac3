/* Backend shared libraries: search, load, API check, lifecycle.
 *
 * Backends are process-wide: each library path is loaded and initialized
 * once, shared by every model and server that uses it, and finalized only
 * when the last server of the process is deleted. */
#ifndef NRD_BACKEND_H
#define NRD_BACKEND_H

#include <stdbool.h>
#include <jansson.h>

#include "triton/core/tritonbackend.h"

typedef TRITONSERVER_Error *(*nrd_backend_fn)(TRITONBACKEND_Backend *);
typedef TRITONSERVER_Error *(*nrd_model_fn)(TRITONBACKEND_Model *);
typedef TRITONSERVER_Error *(*nrd_instance_fn)(TRITONBACKEND_ModelInstance *);
typedef TRITONSERVER_Error *(*nrd_execute_fn)(TRITONBACKEND_ModelInstance *, TRITONBACKEND_Request **, const uint32_t);
typedef TRITONSERVER_Error *(*nrd_attr_fn)(TRITONBACKEND_Backend *, TRITONBACKEND_BackendAttribute *);

/* One preferred instance group from TRITONBACKEND_GetBackendAttribute. */
typedef struct nrd_pref_group {
  TRITONSERVER_InstanceGroupKind kind;
  uint64_t count;
  uint64_t *device_ids;
  uint64_t n_device_ids;
} nrd_pref_group;

struct TRITONBACKEND_BackendAttribute {
  nrd_pref_group *groups;
  size_t n_groups;
  bool parallel_instance_loading;
};

struct TRITONBACKEND_Backend {
  char *name;
  char *lib_path;
  char *dir; /* the artifact location: the library's folder, or a
                                  Python-based backend's own (its model.py) */
  bool python_based; /* backends/<name>/model.py on libtriton_python.so */
  TRITONSERVER_Message *config_msg; /* {"cmdline":{...}}, owned by the backend object */
  void *dl;
  int refs; /* models using it; guarded by the registry lock */
  TRITONBACKEND_ExecutionPolicy policy;
  void *state;
  struct TRITONBACKEND_BackendAttribute attrs;
  nrd_backend_fn init, fini;
  nrd_attr_fn get_attr;
  nrd_model_fn model_init, model_fini;
  nrd_instance_fn inst_init, inst_fini;
  nrd_instance_fn inst_ready; /* optional TRITONBACKEND_ModelInstanceReady */
  nrd_execute_fn execute;
  /* From the optional NRDBACKEND_InlineExecutionMaxUs(), a Nereid
   * extension: how long an execution of this backend's models may take
   * and still run inline (scheduler.c); 0 when not exported. */
  uint32_t inline_max_us;
  /* Optional NRDBACKEND_ModelInstanceExecuteInline, a Nereid extension:
   * called instead of Execute for an inline execution (instance.c). */
  nrd_execute_fn execute_inline;
  /* Custom batching hooks: all present or all NULL. */
  void *batcher_init, *batcher_fini, *batch_include, *batch_init, *batch_fini;
};

/* Finds the library of `backend_name` for a model (runtime override first,
 * then version folder, model folder, backend directory), loads and
 * initializes it unless already loaded, and returns it with a reference
 * added. `cmdline` is the backend's --backend-config pairs (may be NULL).
 * On error nothing is kept. Any thread (serialized internally). */
TRITONSERVER_Error *nrd_backend_acquire(const char *backend_name, const char *runtime, const char *model_dir,
                                        const char *version_dir, const char *backend_dir, const json_t *cmdline,
                                        TRITONBACKEND_Backend **out);

/* Drops a model's reference. The library stays loaded until
 * nrd_backend_finalize_all. Any thread. */
void nrd_backend_release(TRITONBACKEND_Backend *b);

/* Calls TRITONBACKEND_Finalize of every loaded backend, unloads them and
 * frees the registry. Only when no model uses any backend (last server gone). */
void nrd_backend_finalize_all(void);

#endif
