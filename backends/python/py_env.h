/*
 * Python execution environments (the EXECUTION_ENV_PATH model parameter):
 * a directory used as it is, or an archive (.tar.gz, as conda-pack makes)
 * unpacked once into the backend's cache.
 */
#ifndef NRD_PY_ENV_H
#define NRD_PY_ENV_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>

#include "nereid/backend_utils.h"

/* The unpacked archives of one backend: a directory made at the first
 * archive, removed with the backend. */
typedef struct nrd_py_env_cache {
  pthread_mutex_t lock; /* one unpacking at a time */
  char dir[PATH_MAX]; /* "" until the first archive */
} nrd_py_env_cache;

/* Prepares an empty cache. Backend initialization. */
void nrd_py_env_cache_init(nrd_py_env_cache *cache);

/* Removes the cache's directory and everything unpacked in it. Backend
 * finalization, once no stub runs. */
void nrd_py_env_cache_fini(nrd_py_env_cache *cache);

/*
 * Resolves 'value' (EXECUTION_ENV_PATH of model 'model', whose directory
 * is 'model_dir'): "$$TRITON_MODEL_DIRECTORY" becomes 'model_dir', a
 * directory is used as it is, a file is unpacked into 'cache' once per
 * (canonical path, modification time, size), so models sharing an archive
 * share its unpacked tree. Unless 'allow_outside', the path must resolve
 * (symbolic links followed) inside 'model_dir'; an archive is listed
 * first and refused when a member is absolute, has a ".." component or
 * lies under a symbolic link member. The environment must hold bin/activate and
 * lib/python<X.Y> of the stub's Python. On success '*env_dir' is a
 * malloc'ed absolute path the caller frees; errors name the parameter and
 * the path. Any thread (the cache has its own lock).
 */
TRITONSERVER_Error *nrd_py_env_resolve(nrd_py_env_cache *cache, const char *model, const char *model_dir,
                                       const char *value, bool allow_outside, char **env_dir);

#endif
