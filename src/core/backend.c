/* Backend libraries: the search order, dlopen and symbol checks, the
 * process-wide registry, and the TRITONBACKEND_Backend* / BackendAttribute* API. */
#include "backend.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "files.h"
#include "log.h"
#include "memory_manager.h"
#include "message.h"

/* Every loaded backend of the process; guarded by registry_lock, which also
 * serializes loading so a library is initialized exactly once. */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static TRITONBACKEND_Backend **registry;
static size_t registry_len, registry_cap;

static char *path_join3(const char *a, const char *b, const char *c) {
  size_t n = strlen(a) + strlen(b) + (c ? strlen(c) : 0) + 3;
  char *p = malloc(n);
  if (!p) return NULL;
  if (c)
    snprintf(p, n, "%s/%s/%s", a, b, c);
  else
    snprintf(p, n, "%s/%s", a, b);
  return p;
}

static void backend_free(TRITONBACKEND_Backend *b) {
  if (!b) return;
  for (size_t i = 0; i < b->attrs.n_groups; i++) free(b->attrs.groups[i].device_ids);
  free(b->attrs.groups);
  if (b->config_msg) TRITONSERVER_MessageDelete(b->config_msg);
  free(b->name);
  free(b->lib_path);
  free(b->dir);
  free(b);
}

/* A Python-based backend, as Triton finds one: no library of its own, but
 * <backend_dir>/<name>/model.py and the python backend's library, which
 * serves it. Returns that library's real path and, in *folder, the
 * backend's own folder (its artifacts); NULL when it is not one. */
static char *python_based(const char *backend_name, const char *backend_dir, char **folder) {
  *folder = NULL;
  if (!backend_dir || !strcmp(backend_name, "python")) return NULL;
  char *model_py = path_join3(backend_dir, backend_name, "model.py");
  char *lib = path_join3(backend_dir, "python", "libtriton_python.so");
  char *found = NULL;
  if (model_py && lib && access(model_py, R_OK) == 0 && access(lib, R_OK) == 0) {
    found = realpath(lib, NULL);
    char *dir = path_join3(backend_dir, backend_name, NULL);
    *folder = dir ? realpath(dir, NULL) : NULL;
    free(dir);
    if (!*folder) {
      free(found);
      found = NULL;
    }
  }
  free(model_py);
  free(lib);
  return found;
}

/* Looks the library up in the documented order; returns a malloc'd real
 * path, and in *folder the backend's own folder when it is not the
 * library's (a Python-based backend), else NULL. */
static TRITONSERVER_Error *find_library(const char *backend_name, const char *runtime, const char *model_dir,
                                        const char *version_dir, const char *backend_dir, char **out, char **folder) {
  *folder = NULL;
  /* The name is a folder of --backend-directory and part of a file name:
   * a configuration (a client's override too) must not climb out. */
  if (!nrd_plain_name(backend_name))
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "backend '%s' is not a backend name (no '/', not '.' or '..')", backend_name);
  char libname[PATH_MAX];
  if (runtime && *runtime) {
    if (strchr(runtime, '/'))
      return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "runtime '%s' must be a library file name, not a path",
                           runtime);
    size_t rl = strlen(runtime);
    if (rl < 4 || strcmp(runtime + rl - 3, ".so"))
      return nrd_error_new(TRITONSERVER_ERROR_UNSUPPORTED,
                           "runtime '%s' is not a shared library; backends written in other languages "
                           "are not supported",
                           runtime);
    snprintf(libname, sizeof libname, "%s", runtime);
  } else {
    snprintf(libname, sizeof libname, "libtriton_%s.so", backend_name);
  }
  char *cand[3] = {
      version_dir ? path_join3(version_dir, libname, NULL) : NULL,
      model_dir ? path_join3(model_dir, libname, NULL) : NULL,
      backend_dir ? path_join3(backend_dir, backend_name, libname) : NULL,
  };
  TRITONSERVER_Error *err = NULL;
  char *found = NULL;
  for (int i = 0; i < 3 && !found; i++) {
    if (cand[i] && access(cand[i], R_OK) == 0) found = realpath(cand[i], NULL);
  }
  if (!found && !(runtime && *runtime)) found = python_based(backend_name, backend_dir, folder);
  if (!found)
    /* Triton's sentence and code (backend_model.cc), then where we looked. */
    err = nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                        "unable to find backend library for backend '%s', try specifying runtime on the model "
                        "configuration. (looked for '%s' in '%s', '%s', '%s')",
                        backend_name, libname, cand[0] ? cand[0] : "-", cand[1] ? cand[1] : "-",
                        cand[2] ? cand[2] : "-");
  for (int i = 0; i < 3; i++) free(cand[i]);
  *out = found;
  return err;
}

static void *sym(void *dl, const char *name) { return dlsym(dl, name); }

/* Opens the library and resolves its entry points; no backend code runs. */
static TRITONSERVER_Error *open_library(TRITONBACKEND_Backend *b) {
  dlerror();
  b->dl = dlopen(b->lib_path, RTLD_NOW | RTLD_LOCAL);
  if (!b->dl) {
    const char *why = dlerror();
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "unable to load backend library '%s': %s", b->lib_path,
                         why ? why : "unknown dlopen error");
  }
  b->init = (nrd_backend_fn)sym(b->dl, "TRITONBACKEND_Initialize");
  b->fini = (nrd_backend_fn)sym(b->dl, "TRITONBACKEND_Finalize");
  b->model_init = (nrd_model_fn)sym(b->dl, "TRITONBACKEND_ModelInitialize");
  b->model_fini = (nrd_model_fn)sym(b->dl, "TRITONBACKEND_ModelFinalize");
  b->inst_init = (nrd_instance_fn)sym(b->dl, "TRITONBACKEND_ModelInstanceInitialize");
  b->inst_fini = (nrd_instance_fn)sym(b->dl, "TRITONBACKEND_ModelInstanceFinalize");
  b->inst_ready = (nrd_instance_fn)sym(b->dl, "TRITONBACKEND_ModelInstanceReady");
  b->execute = (nrd_execute_fn)sym(b->dl, "TRITONBACKEND_ModelInstanceExecute");
  b->get_attr = (nrd_attr_fn)sym(b->dl, "TRITONBACKEND_GetBackendAttribute");
  uint32_t (*inline_max)(void) = (uint32_t(*)(void))sym(b->dl, "NRDBACKEND_InlineExecutionMaxUs");
  b->inline_max_us = inline_max ? inline_max() : 0;
  b->execute_inline = (nrd_execute_fn)sym(b->dl, "NRDBACKEND_ModelInstanceExecuteInline");
  b->batcher_init = sym(b->dl, "TRITONBACKEND_ModelBatcherInitialize");
  b->batcher_fini = sym(b->dl, "TRITONBACKEND_ModelBatcherFinalize");
  b->batch_include = sym(b->dl, "TRITONBACKEND_ModelBatchIncludeRequest");
  b->batch_init = sym(b->dl, "TRITONBACKEND_ModelBatchInitialize");
  b->batch_fini = sym(b->dl, "TRITONBACKEND_ModelBatchFinalize");
  if (!b->execute)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "backend library '%s' does not export TRITONBACKEND_ModelInstanceExecute, "
                         "which every backend must implement",
                         b->lib_path);
  int hooks = !!b->batcher_init + !!b->batcher_fini + !!b->batch_include + !!b->batch_init + !!b->batch_fini;
  if (hooks != 0 && hooks != 5)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "backend library '%s' exports %d of the 5 TRITONBACKEND_ModelBatch* custom batching "
                         "functions; a backend must export all of them or none",
                         b->lib_path, hooks);
  return NULL;
}

TRITONSERVER_Error *nrd_backend_acquire(const char *backend_name, const char *runtime, const char *model_dir,
                                        const char *version_dir, const char *backend_dir, const json_t *cmdline,
                                        TRITONBACKEND_Backend **out) {
  char *path = NULL, *folder = NULL;
  NRD_RETURN_IF_ERROR(find_library(backend_name, runtime, model_dir, version_dir, backend_dir, &path, &folder));

  /* One backend per library, and per folder for Python-based backends
   * (each is a backend of its own on the python backend's library). */
  pthread_mutex_lock(&registry_lock);
  for (size_t i = 0; i < registry_len; i++) {
    if (!strcmp(registry[i]->lib_path, path) &&
        (folder ? !strcmp(registry[i]->dir, folder) : !registry[i]->python_based)) {
      registry[i]->refs++;
      *out = registry[i];
      pthread_mutex_unlock(&registry_lock);
      free(path);
      free(folder);
      return NULL;
    }
  }

  TRITONSERVER_Error *err = NULL;
  TRITONBACKEND_Backend *b = calloc(1, sizeof(*b));
  if (!b) {
    err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory loading backend '%s'", backend_name);
    goto fail;
  }
  b->lib_path = path;
  path = NULL;
  b->name = strdup(backend_name);
  b->python_based = folder != NULL;
  b->dir = folder ? folder : strdup(b->lib_path);
  folder = NULL;
  if (!b->name || !b->dir) {
    err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory loading backend '%s'", backend_name);
    goto fail;
  }
  char *slash = b->python_based ? NULL : strrchr(b->dir, '/');
  if (slash) *slash = '\0';
  b->policy = TRITONBACKEND_EXECUTION_BLOCKING;
  json_t *cfg = json_pack("{s:o}", "cmdline", cmdline ? json_deep_copy(cmdline) : json_object());
  b->config_msg = cfg ? nrd_message_from_json(cfg) : NULL;
  if (!b->config_msg) {
    err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory loading backend '%s'", backend_name);
    goto fail;
  }
  if ((err = open_library(b))) goto fail;

  if (b->init) {
    TRITONSERVER_Error *e = b->init(b);
    if (e) {
      err = nrd_error_new(TRITONSERVER_ErrorCode(e), "backend '%s' (%s) failed to initialize: %s", b->name, b->lib_path,
                          TRITONSERVER_ErrorMessage(e));
      TRITONSERVER_ErrorDelete(e);
      goto fail;
    }
  }
  if (b->get_attr) {
    TRITONSERVER_Error *e = b->get_attr(b, &b->attrs);
    if (e) {
      err = nrd_error_new(TRITONSERVER_ErrorCode(e), "backend '%s' (%s) failed to report its attributes: %s", b->name,
                          b->lib_path, TRITONSERVER_ErrorMessage(e));
      TRITONSERVER_ErrorDelete(e);
      if (b->fini) {
        NRD_ERROR_IGNORE(b->fini(b), "finalizing a backend whose load failed");
      }
      goto fail;
    }
  }
  if (registry_len == registry_cap) {
    size_t cap = registry_cap ? registry_cap * 2 : 8;
    TRITONBACKEND_Backend **nr = realloc(registry, cap * sizeof(*nr));
    if (!nr) {
      err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory loading backend '%s'", backend_name);
      if (b->fini) {
        NRD_ERROR_IGNORE(b->fini(b), "finalizing a backend whose load failed");
      }
      goto fail;
    }
    registry = nr;
    registry_cap = cap;
  }
  b->refs = 1;
  registry[registry_len++] = b;
  pthread_mutex_unlock(&registry_lock);
  NRD_LOG_INFO("loaded backend '%s' from %s", b->name, b->lib_path);
  *out = b;
  return NULL;

fail:
  pthread_mutex_unlock(&registry_lock);
  if (b && b->dl) dlclose(b->dl);
  backend_free(b);
  free(path);
  free(folder);
  return err;
}

void nrd_backend_release(TRITONBACKEND_Backend *b) {
  pthread_mutex_lock(&registry_lock);
  if (b->refs > 0) b->refs--;
  pthread_mutex_unlock(&registry_lock);
}

void nrd_backend_finalize_all(void) {
  pthread_mutex_lock(&registry_lock);
  /* Reverse load order, so a backend loaded later (which may depend on an
   * earlier one) goes first. */
  for (size_t i = registry_len; i-- > 0;) {
    TRITONBACKEND_Backend *b = registry[i];
    if (b->fini) {
      TRITONSERVER_Error *e = b->fini(b);
      if (e) {
        NRD_LOG_ERROR("backend '%s' failed to finalize: %s", b->name, TRITONSERVER_ErrorMessage(e));
        TRITONSERVER_ErrorDelete(e);
      }
    }
    dlclose(b->dl);
    backend_free(b);
  }
  free(registry);
  registry = NULL;
  registry_len = registry_cap = 0;
  pthread_mutex_unlock(&registry_lock);
}

/* ------------------------------------------------------------ public API */

TRITONSERVER_Error *TRITONBACKEND_BackendName(TRITONBACKEND_Backend *backend, const char **name) {
  NRD_ARG_CHECK(backend && name, "backend and name must not be NULL");
  *name = backend->name;
  return NULL;
}

/* The message belongs to the backend object; callers must not delete it. */
TRITONSERVER_Error *TRITONBACKEND_BackendConfig(TRITONBACKEND_Backend *backend, TRITONSERVER_Message **backend_config) {
  NRD_ARG_CHECK(backend && backend_config, "backend and config must not be NULL");
  *backend_config = backend->config_msg;
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_BackendExecutionPolicy(TRITONBACKEND_Backend *backend,
                                                         TRITONBACKEND_ExecutionPolicy *policy) {
  NRD_ARG_CHECK(backend && policy, "backend and policy must not be NULL");
  *policy = backend->policy;
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_BackendSetExecutionPolicy(TRITONBACKEND_Backend *backend,
                                                            TRITONBACKEND_ExecutionPolicy policy) {
  NRD_ARG_CHECK(backend, "backend must not be NULL");
  if (policy != TRITONBACKEND_EXECUTION_BLOCKING && policy != TRITONBACKEND_EXECUTION_DEVICE_BLOCKING)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "unknown execution policy %d", (int)policy);
  backend->policy = policy;
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_BackendArtifacts(TRITONBACKEND_Backend *backend,
                                                   TRITONBACKEND_ArtifactType *artifact_type, const char **location) {
  NRD_ARG_CHECK(backend && artifact_type && location, "arguments must not be NULL");
  *artifact_type = TRITONBACKEND_ARTIFACT_FILESYSTEM;
  *location = backend->dir;
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_BackendMemoryManager(TRITONBACKEND_Backend *backend,
                                                       TRITONBACKEND_MemoryManager **manager) {
  NRD_ARG_CHECK(backend && manager, "backend and manager must not be NULL");
  *manager = nrd_memory_manager();
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_BackendState(TRITONBACKEND_Backend *backend, void **state) {
  NRD_ARG_CHECK(backend && state, "backend and state must not be NULL");
  *state = backend->state;
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_BackendSetState(TRITONBACKEND_Backend *backend, void *state) {
  NRD_ARG_CHECK(backend, "backend must not be NULL");
  backend->state = state;
  return NULL;
}

TRITONSERVER_Error *
TRITONBACKEND_BackendAttributeAddPreferredInstanceGroup(TRITONBACKEND_BackendAttribute *backend_attributes,
                                                        const TRITONSERVER_InstanceGroupKind kind, const uint64_t count,
                                                        const uint64_t *device_ids, const uint64_t id_count) {
  NRD_ARG_CHECK(backend_attributes, "backend attributes must not be NULL");
  NRD_ARG_CHECK(device_ids || !id_count, "device ids must not be NULL when id_count > 0");
  TRITONBACKEND_BackendAttribute *a = backend_attributes;
  nrd_pref_group *ng = realloc(a->groups, (a->n_groups + 1) * sizeof(*ng));
  if (!ng) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  a->groups = ng;
  nrd_pref_group *g = &a->groups[a->n_groups];
  memset(g, 0, sizeof(*g));
  if (id_count) {
    g->device_ids = malloc(id_count * sizeof(uint64_t));
    if (!g->device_ids) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    memcpy(g->device_ids, device_ids, id_count * sizeof(uint64_t));
  }
  g->kind = kind;
  g->count = count;
  g->n_device_ids = id_count;
  a->n_groups++;
  return NULL;
}

TRITONSERVER_Error *
TRITONBACKEND_BackendAttributeSetParallelModelInstanceLoading(TRITONBACKEND_BackendAttribute *backend_attributes,
                                                              bool enabled) {
  NRD_ARG_CHECK(backend_attributes, "backend attributes must not be NULL");
  backend_attributes->parallel_instance_loading = enabled;
  return NULL;
}
