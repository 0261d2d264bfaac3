/* The model repository: which models exist on disk, which versions are
 * loaded, and the load / unload / poll operations of the control modes.
 *
 * Two locks: `table_lock` (a read-write lock) guards the table of models and
 * is only read on the request path; `op_lock` serializes load, unload and
 * poll operations, which run backend code and can take long, so the table
 * lock is never held while a backend runs. */
#ifndef NRD_REPOSITORY_H
#define NRD_REPOSITORY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <jansson.h>

#include "triton/core/tritonbackend.h"
#include "ensemble.h"
#include "model.h"

typedef struct nrd_version_slot {
  int64_t version;
  TRITONBACKEND_Model *model; /* counted reference while loaded, else NULL */
  nrd_model_state state;
  char *reason; /* why it is not READY, "" otherwise */
} nrd_version_slot;

typedef struct nrd_model_entry {
  char *name;
  char *ns; /* namespace: the repository path with namespacing, else "" */
  char *dir; /* where it was last loaded from */
  nrd_version_slot *slots;
  size_t n_slots;
  char *reason; /* model-level failure (no version loaded) */
  bool attempted; /* a load was tried since the last unload */
  uint64_t stamp; /* newest mtime under dir at the last load (poll) */
  char *override_dir; /* temporary folder of a load with file overrides */
  struct nrd_agent_chain *agents; /* the repository agents of the loaded versions */
} nrd_model_entry;

/* A model name given to one folder of a registered repository
 * (TRITONSERVER_ServerRegisterModelRepository's name mapping). */
typedef struct nrd_repo_mapping {
  char *name; /* the model's name */
  char *repo; /* the repository it was registered with */
  char *dir; /* repo/<folder> */
} nrd_repo_mapping;

typedef struct nrd_repository {
  TRITONSERVER_Server *server;
  /* Repository paths and name mappings; paths_lock guards both, as paths
   * are added and removed at run time (writers also hold op_lock). */
  pthread_rwlock_t paths_lock;
  char **paths;
  size_t n_paths;
  nrd_repo_mapping *maps;
  size_t n_maps;
  char *backend_dir;
  char *agent_dir; /* --repoagent-directory */
  char *override_base; /* private (0700) root of every file-override folder, made at the first one; under op_lock */
  json_t *backend_cmdline; /* see nrd_model_load_args */
  nrd_step_resolver steps; /* the server's, handed to every load */
  bool auto_complete;
  char *config_name; /* "" or a name under configs/ */
  atomic_uint exit_timeout_s; /* set again by ServerStop while unloads may run */
  unsigned load_retries; /* a failed version load is tried again this many times */
  /* --model-namespacing: each repository path is a namespace, so one name
   * may be loaded from several repositories (one entry each). A name
   * alone then finds its model only when one entry has it. */
  bool namespacing;

  pthread_rwlock_t table_lock;
  nrd_model_entry *models;
  size_t n_models, cap_models;

  pthread_mutex_t op_lock;

  /* Unloads running in the background (ServerUnloadModel returns at once).
   * Counted separately so a job stuck in a backend that outlives the
   * repository never touches freed memory. */
  struct nrd_bg_tracker *bg;
} nrd_repository;

/* Sets up an empty repository; copies what it keeps from the arguments
 * (`steps` too: the server's calls an ensemble runs its steps with).
 * Returns NULL on out-of-memory. */
nrd_repository *nrd_repo_new(TRITONSERVER_Server *server, const nrd_step_resolver *steps, char *const *paths,
                             size_t n_paths, const char *backend_dir, const char *agent_dir,
                             json_t *backend_cmdline /* stolen */, bool auto_complete, const char *config_name,
                             unsigned exit_timeout_s);

/* Unloads every model (waiting for in-flight requests up to the exit
 * timeout) and frees the repository. Unloads still stuck after the exit
 * timeout are abandoned (logged), never waited for forever. */
void nrd_repo_free(nrd_repository *r);

/* Adds a repository at run time; `names` / `folders` (n each, borrowed)
 * give folders of it model names of their own. Errors as Triton's: the
 * path is no directory (INVALID_ARG), it is registered already or a name
 * is mapped already (ALREADY_EXISTS), two folders get one name
 * (INVALID_ARG). Any thread. */
TRITONSERVER_Error *nrd_repo_register(nrd_repository *r, const char *path, const char *const *names,
                                      const char *const *folders, size_t n);

/* Removes a repository and its name mappings (loaded models stay
 * loaded). INVALID_ARG when it is not registered. Any thread. */
TRITONSERVER_Error *nrd_repo_unregister(nrd_repository *r, const char *path);

/* Names of every model folder in the repository paths, sorted. The caller
 * frees the array and strings. Errors name an unreadable path. */
TRITONSERVER_Error *nrd_repo_scan(nrd_repository *r, char ***names, size_t *n);

/* When `name`'s configuration (as a load would read it now) is an
 * ensemble: the model names of its steps, in *steps (malloc'ed array of
 * strdup'ed names, the caller frees both) and *n. Otherwise, or when the
 * configuration cannot be read (a load will say why), *steps is NULL and
 * *n 0. Any thread; takes the repository's operation lock briefly. */
void nrd_repo_ensemble_steps(nrd_repository *r, const char *name, char ***steps, size_t *n);

/* Whether `name`'s configuration on disk is an ensemble (see
 * nrd_repo_ensemble_steps). Any thread. */
bool nrd_repo_is_ensemble(nrd_repository *r, const char *name);

/* Loads (or reloads) a model: every version its version policy selects.
 * With namespacing, every repository holding a folder of that name gives
 * one model (its own namespace); the first failure is returned.
 * `config_override` (JSON text) and `files` (name/content overrides from
 * LoadModelWithParameters) may be NULL. Old versions keep serving until the
 * new ones are ready, then are unloaded. Any thread but an instance thread. */
TRITONSERVER_Error *nrd_repo_load(nrd_repository *r, const char *name, const char *config_override,
                                  const TRITONSERVER_Parameter **files, size_t n_files);

/* Unloads every version of a model (with namespacing, of every model of
 * that name). Not loaded: success, as in Triton.
 * The model stops taking requests before this returns; with `wait` false
 * the drain and backend finalization finish on a background thread (so a
 * backend may unload a model from inside Execute), with `wait` true before
 * returning. */
TRITONSERVER_Error *nrd_repo_unload(nrd_repository *r, const char *name, bool wait);

/* Waits for every background unload to finish, at most `timeout_s`
 * seconds. Returns how many are still running (0: all done). */
unsigned nrd_repo_wait_background(nrd_repository *r, unsigned timeout_s);

/* True once some unload was abandoned after the exit timeout: its backend
 * may still be running code, so backends must never be unloaded. */
bool nrd_repo_any_abandoned(void);

/* Rescans: loads new models, reloads changed ones, unloads removed ones. */
TRITONSERVER_Error *nrd_repo_poll(nrd_repository *r);

/* A READY model with a reference for the caller; version -1 means the
 * highest ready version. Errors: unknown model or version, not ready, and
 * with namespacing a name loaded in more than one namespace (INVALID_ARG). */
TRITONSERVER_Error *nrd_repo_get(nrd_repository *r, const char *name, int64_t version, TRITONBACKEND_Model **out);

/* As nrd_repo_get, but the model of namespace `ns` comes first: an
 * ensemble finds its steps in its own repository before looking at the
 * others. `ns` NULL or "" is nrd_repo_get. Any thread. */
TRITONSERVER_Error *nrd_repo_get_in(nrd_repository *r, const char *ns, const char *name, int64_t version,
                                    TRITONBACKEND_Model **out);

/* Repository index in Triton's JSON shape. New reference. */
json_t *nrd_repo_index(nrd_repository *r, bool ready_only);

/* True when every model that was loaded has all its versions READY. */
bool nrd_repo_all_ready(nrd_repository *r);

/* Statistics for one model (version -1 = all loaded versions) or every
 * model (name NULL or ""). New reference or an error. */
TRITONSERVER_Error *nrd_repo_stats(nrd_repository *r, const char *name, int64_t version, json_t **out);

/* Appends the nv_inference_* families of every loaded model, without the
 * *_duration_* ones when `latencies` is false; `gpu_uuid`/`n_uuid` as
 * nrd_stats_prometheus takes them. 0 or -1. */
int nrd_repo_prometheus(nrd_repository *r, bool latencies, const double *quantiles, size_t n_quantiles,
                        const char *const *gpu_uuid, int n_uuid, nrd_text *out);

#endif
