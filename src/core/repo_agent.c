/* Repository agents; see repo_agent.h.
 *
 * Agents are kept in one process-wide list, keyed by library path and
 * counted: the first chain that needs one opens and initializes it, the
 * last one to let go finalizes and closes it. The list's lock is held
 * across Initialize and Finalize so an agent is never initialized while
 * its previous life is still finalizing. */
#include "repo_agent.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "files.h"
#include "log.h"
#include "message.h"
#include "model_config.h"

typedef TRITONSERVER_Error *(*agent_fn)(TRITONREPOAGENT_Agent *);
typedef TRITONSERVER_Error *(*model_fn)(TRITONREPOAGENT_Agent *, TRITONREPOAGENT_AgentModel *);
typedef TRITONSERVER_Error *(*action_fn)(TRITONREPOAGENT_Agent *, TRITONREPOAGENT_AgentModel *,
                                         const TRITONREPOAGENT_ActionType);

struct TRITONREPOAGENT_Agent {
  char *name;
  char *path; /* the library; the list's key */
  void *dl;
  unsigned refs; /* chains' agent models using it */
  void *state;
  agent_fn finalize;
  model_fn model_init, model_fini;
  action_fn action;
  struct TRITONREPOAGENT_Agent *next;
};

struct TRITONREPOAGENT_AgentModel {
  TRITONREPOAGENT_Agent *agent;
  char *model_name; /* for messages */
  TRITONREPOAGENT_ArtifactType type;
  char *location;
  char *config; /* the configuration it was given, JSON */
  char **keys, **values; /* its parameters, in the configuration's order */
  uint32_t n_params;
  char *acquired; /* ModelRepositoryLocationAcquire's folder */
  void *state;
  TRITONREPOAGENT_ActionType action;
  bool told; /* `action` has been told at least once */
  bool initialized; /* ModelInitialize was called (or is absent) */
};

struct nrd_agent_chain {
  TRITONREPOAGENT_AgentModel **m;
  size_t n;
};

static pthread_mutex_t agents_lock = PTHREAD_MUTEX_INITIALIZER;
static TRITONREPOAGENT_Agent *agents;

static const char *action_name(TRITONREPOAGENT_ActionType a) {
  switch (a) {
    case TRITONREPOAGENT_ACTION_LOAD: return "TRITONREPOAGENT_ACTION_LOAD";
    case TRITONREPOAGENT_ACTION_LOAD_COMPLETE: return "TRITONREPOAGENT_ACTION_LOAD_COMPLETE";
    case TRITONREPOAGENT_ACTION_LOAD_FAIL: return "TRITONREPOAGENT_ACTION_LOAD_FAIL";
    case TRITONREPOAGENT_ACTION_UNLOAD: return "TRITONREPOAGENT_ACTION_UNLOAD";
    case TRITONREPOAGENT_ACTION_UNLOAD_COMPLETE: return "TRITONREPOAGENT_ACTION_UNLOAD_COMPLETE";
  }
  return "an unknown action";
}

/* ------------------------------------------------------------ the agents */

static void agent_close(TRITONREPOAGENT_Agent *a) {
  if (a->dl) dlclose(a->dl);
  free(a->name);
  free(a->path);
  free(a);
}

/* A counted reference to the agent `name` under `dir`, opened and
 * initialized if no chain holds it now. */
static TRITONSERVER_Error *agent_acquire(const char *dir, const char *name, TRITONREPOAGENT_Agent **out) {
  if (!nrd_plain_name(name))
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "invalid repository agent name '%s'", name);
  size_t n = strlen(dir) + 2 * strlen(name) + 32;
  char *path = malloc(n);
  if (!path) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  snprintf(path, n, "%s/%s/libtritonrepoagent_%s.so", dir, name, name);

  pthread_mutex_lock(&agents_lock);
  for (TRITONREPOAGENT_Agent *a = agents; a; a = a->next) {
    if (!strcmp(a->path, path)) {
      a->refs++;
      pthread_mutex_unlock(&agents_lock);
      free(path);
      *out = a;
      return NULL;
    }
  }
  TRITONSERVER_Error *err = NULL;
  TRITONREPOAGENT_Agent *a = calloc(1, sizeof(*a));
  if (!a || !(a->name = strdup(name))) {
    err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  } else if (access(path, F_OK) != 0) {
    err = nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                        "unable to find 'libtritonrepoagent_%s.so' for repo agent '%s', searched: %s (set "
                        "--repoagent-directory to the folder holding %s/libtritonrepoagent_%s.so)",
                        name, name, dir, name, name);
  } else if (!(a->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL))) {
    const char *why = dlerror();
    err = nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "unable to load repo agent '%s' from '%s': %s", name, path,
                        why ? why : "unknown dlopen error");
  } else if (!(a->action = (action_fn)dlsym(a->dl, "TRITONREPOAGENT_ModelAction"))) {
    err = nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "repo agent library '%s' does not define %s", path,
                        "TRITONREPOAGENT_ModelAction");
  }
  if (!err) {
    a->path = path;
    path = NULL;
    a->finalize = (agent_fn)dlsym(a->dl, "TRITONREPOAGENT_Finalize");
    a->model_init = (model_fn)dlsym(a->dl, "TRITONREPOAGENT_ModelInitialize");
    a->model_fini = (model_fn)dlsym(a->dl, "TRITONREPOAGENT_ModelFinalize");
    agent_fn init = (agent_fn)dlsym(a->dl, "TRITONREPOAGENT_Initialize");
    TRITONSERVER_Error *e = init ? init(a) : NULL;
    if (e) {
      err = nrd_error_new(TRITONSERVER_ErrorCode(e), "repo agent '%s' failed to initialize: %s", name,
                          TRITONSERVER_ErrorMessage(e));
      TRITONSERVER_ErrorDelete(e);
    }
  }
  if (err) {
    if (a) agent_close(a);
  } else {
    a->refs = 1;
    a->next = agents;
    agents = a;
    *out = a;
  }
  pthread_mutex_unlock(&agents_lock);
  free(path);
  return err;
}

static void agent_release(TRITONREPOAGENT_Agent *a) {
  pthread_mutex_lock(&agents_lock);
  if (--a->refs == 0) {
    for (TRITONREPOAGENT_Agent **p = &agents; *p; p = &(*p)->next) {
      if (*p == a) {
        *p = a->next;
        break;
      }
    }
    TRITONSERVER_Error *e = a->finalize ? a->finalize(a) : NULL;
    if (e) {
      NRD_LOG_ERROR("repo agent '%s' failed to finalize: %s", a->name, TRITONSERVER_ErrorMessage(e));
      TRITONSERVER_ErrorDelete(e);
    }
    agent_close(a);
  }
  pthread_mutex_unlock(&agents_lock);
}

/* ------------------------------------------------------- the agent models */

/* Triton's order of actions; anything else is refused before the agent
 * sees it. */
static bool may_follow(const TRITONREPOAGENT_AgentModel *m, TRITONREPOAGENT_ActionType next) {
  if (!m->told) return next == TRITONREPOAGENT_ACTION_LOAD;
  switch (next) {
    case TRITONREPOAGENT_ACTION_LOAD: return false;
    case TRITONREPOAGENT_ACTION_LOAD_COMPLETE:
    case TRITONREPOAGENT_ACTION_LOAD_FAIL: return m->action == TRITONREPOAGENT_ACTION_LOAD;
    case TRITONREPOAGENT_ACTION_UNLOAD: return m->action == TRITONREPOAGENT_ACTION_LOAD_COMPLETE;
    case TRITONREPOAGENT_ACTION_UNLOAD_COMPLETE: return m->action == TRITONREPOAGENT_ACTION_UNLOAD;
  }
  return false;
}

static TRITONSERVER_Error *tell(TRITONREPOAGENT_AgentModel *m, TRITONREPOAGENT_ActionType action) {
  if (!may_follow(m, action))
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "repo agent '%s': %s cannot follow %s", m->agent->name,
                         action_name(action), m->told ? action_name(m->action) : "the start");
  m->action = action;
  m->told = true;
  return m->agent->action(m->agent, m, action);
}

/* Tells `action` and logs what the agent answers. */
static void tell_logged(TRITONREPOAGENT_AgentModel *m, TRITONREPOAGENT_ActionType action) {
  TRITONSERVER_Error *e = tell(m, action);
  if (e) {
    NRD_LOG_ERROR("repo agent '%s', model '%s', %s: %s", m->agent->name, m->model_name, action_name(action),
                  TRITONSERVER_ErrorMessage(e));
    TRITONSERVER_ErrorDelete(e);
  }
}

/* Tells what is left of the sequence `m` is in. */
static void agent_model_complete(TRITONREPOAGENT_AgentModel *m) {
  if (!m->told) return;
  switch (m->action) {
    case TRITONREPOAGENT_ACTION_LOAD: tell_logged(m, TRITONREPOAGENT_ACTION_LOAD_FAIL); break;
    case TRITONREPOAGENT_ACTION_LOAD_COMPLETE:
      tell_logged(m, TRITONREPOAGENT_ACTION_UNLOAD);
      tell_logged(m, TRITONREPOAGENT_ACTION_UNLOAD_COMPLETE);
      break;
    case TRITONREPOAGENT_ACTION_UNLOAD: tell_logged(m, TRITONREPOAGENT_ACTION_UNLOAD_COMPLETE); break;
    case TRITONREPOAGENT_ACTION_LOAD_FAIL:
    case TRITONREPOAGENT_ACTION_UNLOAD_COMPLETE: break;
  }
}

/* Completes the sequence, finalizes and frees. */
static void agent_model_free(TRITONREPOAGENT_AgentModel *m) {
  if (!m) return;
  agent_model_complete(m);
  if (m->initialized && m->agent->model_fini) {
    TRITONSERVER_Error *e = m->agent->model_fini(m->agent, m);
    if (e) {
      NRD_LOG_ERROR("repo agent '%s' failed to finalize model '%s': %s", m->agent->name, m->model_name,
                    TRITONSERVER_ErrorMessage(e));
      TRITONSERVER_ErrorDelete(e);
    }
  }
  if (m->acquired) nrd_remove_tree(m->acquired);
  free(m->acquired);
  agent_release(m->agent);
  for (uint32_t i = 0; i < m->n_params; i++) {
    free(m->keys[i]);
    free(m->values[i]);
  }
  free(m->keys);
  free(m->values);
  free(m->config);
  free(m->location);
  free(m->model_name);
  free(m);
}

/* A new agent model of `agent` (whose reference it takes over) for one
 * load, with the parameters its entry in the configuration gives. */
static TRITONSERVER_Error *agent_model_new(TRITONREPOAGENT_Agent *agent, const char *model_name, const json_t *entry,
                                           const char *location, const json_t *cfg, TRITONREPOAGENT_AgentModel **out) {
  TRITONREPOAGENT_AgentModel *m = calloc(1, sizeof(*m));
  if (!m) {
    agent_release(agent);
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  }
  m->agent = agent;
  m->type = TRITONREPOAGENT_ARTIFACT_FILESYSTEM;
  const json_t *params = json_object_get(entry, "parameters");
  size_t np = json_object_size(params);
  json_t *plain = nrd_model_config_without_positions(cfg); /* the agent sees the ModelConfig only */
  bool ok = (m->model_name = strdup(model_name)) && (m->location = strdup(location)) && plain &&
            (m->config = json_dumps(plain, JSON_COMPACT | JSON_PRESERVE_ORDER)) &&
            (m->keys = calloc(np ? np : 1, sizeof(char *))) && (m->values = calloc(np ? np : 1, sizeof(char *)));
  const char *k;
  const json_t *v;
  json_object_foreach((json_t *)params, k, v) {
    if (!ok) break;
    const char *s = json_string_value(v);
    ok = (m->keys[m->n_params] = strdup(k)) && (m->values[m->n_params] = strdup(s ? s : ""));
    m->n_params++;
  }
  json_decref(plain);
  if (!ok) {
    agent_model_free(m);
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  }
  /* Triton finalizes an agent model whose initialize failed, too. */
  m->initialized = true;
  TRITONSERVER_Error *e = agent->model_init ? agent->model_init(agent, m) : NULL;
  if (e) {
    TRITONSERVER_Error *err =
        nrd_error_new(TRITONSERVER_ErrorCode(e), "repo agent '%s' failed to initialize model '%s': %s", agent->name,
                      model_name, TRITONSERVER_ErrorMessage(e));
    TRITONSERVER_ErrorDelete(e);
    agent_model_free(m);
    return err;
  }
  *out = m;
  return NULL;
}

/* ------------------------------------------------------------ the chains */

void nrd_agent_chain_free(nrd_agent_chain *c) {
  if (!c) return;
  /* Completions go last agent first, as Triton tells them; then each
   * agent model is finalized, first to last. */
  for (size_t i = c->n; i-- > 0;) agent_model_complete(c->m[i]);
  for (size_t i = 0; i < c->n; i++) agent_model_free(c->m[i]);
  free(c->m);
  free(c);
}

void nrd_agent_chain_tell(nrd_agent_chain *c, TRITONREPOAGENT_ActionType action) {
  if (!c) return;
  bool forward = action == TRITONREPOAGENT_ACTION_LOAD || action == TRITONREPOAGENT_ACTION_UNLOAD;
  for (size_t k = 0; k < c->n; k++) tell_logged(c->m[forward ? k : c->n - 1 - k], action);
}

TRITONSERVER_Error *nrd_agent_chain_load(const char *agent_dir, const char *model_name, const json_t *cfg,
                                         const char *dir, nrd_agent_config_reader reread, void *reread_ctx,
                                         nrd_agent_chain **out, const char **location) {
  *out = NULL;
  *location = dir;
  const json_t *list = json_object_get(json_object_get(cfg, "model_repository_agents"), "agents");
  size_t n = json_array_size(list);
  if (!n) return NULL;
  nrd_agent_chain *c = calloc(1, sizeof(*c));
  if (!c || !(c->m = calloc(n, sizeof(*c->m)))) {
    free(c);
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  }
  TRITONSERVER_Error *err = NULL;
  json_t *seen = json_incref((json_t *)cfg); /* the configuration the next agent is given */
  for (size_t i = 0; !err && i < n; i++) {
    const json_t *entry = json_array_get(list, i);
    const char *name = json_string_value(json_object_get(entry, "name"));
    if (!name) name = "";
    const char *here = c->n ? c->m[c->n - 1]->location : dir;
    /* A later agent sees the configuration where the earlier one left the
     * model (none when there is none there). */
    if (c->n && strcmp(here, dir)) {
      json_decref(seen);
      seen = reread(reread_ctx, here);
      if (!seen) seen = json_object();
    }
    TRITONREPOAGENT_Agent *agent = NULL;
    TRITONREPOAGENT_AgentModel *m = NULL;
    err = agent_acquire(agent_dir, name, &agent);
    if (!err) err = agent_model_new(agent, model_name, entry, here, seen ? seen : cfg, &m);
    if (err) break;
    c->m[c->n++] = m;
    TRITONSERVER_Error *e = tell(m, TRITONREPOAGENT_ACTION_LOAD);
    if (e) {
      err = nrd_error_new(TRITONSERVER_ErrorCode(e), "repo agent '%s' failed to load model '%s': %s", name, model_name,
                          TRITONSERVER_ErrorMessage(e));
      TRITONSERVER_ErrorDelete(e);
    }
  }
  json_decref(seen);
  if (err) {
    nrd_agent_chain_free(c); /* LOAD_FAIL to those told LOAD, then finalize */
    return err;
  }
  *out = c;
  *location = c->m[c->n - 1]->location;
  return NULL;
}

/* ------------------------------------------------------ the server's side */

TRITONSERVER_Error *TRITONREPOAGENT_ApiVersion(uint32_t *major, uint32_t *minor) {
  NRD_ARG_CHECK(major && minor, "major and minor must not be NULL");
  *major = TRITONREPOAGENT_API_VERSION_MAJOR;
  *minor = TRITONREPOAGENT_API_VERSION_MINOR;
  return NULL;
}

TRITONSERVER_Error *TRITONREPOAGENT_ModelRepositoryLocation(TRITONREPOAGENT_Agent *agent,
                                                            TRITONREPOAGENT_AgentModel *model,
                                                            TRITONREPOAGENT_ArtifactType *artifact_type,
                                                            const char **location) {
  (void)agent;
  NRD_ARG_CHECK(model && artifact_type && location, "model, artifact_type and location must not be NULL");
  *artifact_type = model->type;
  *location = model->location;
  return NULL;
}

TRITONSERVER_Error *TRITONREPOAGENT_ModelRepositoryLocationAcquire(TRITONREPOAGENT_Agent *agent,
                                                                   TRITONREPOAGENT_AgentModel *model,
                                                                   const TRITONREPOAGENT_ArtifactType artifact_type,
                                                                   const char **location) {
  (void)agent;
  NRD_ARG_CHECK(model && location, "model and location must not be NULL");
  if (artifact_type != TRITONREPOAGENT_ARTIFACT_FILESYSTEM)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "Unexpected artifact type, expects 'TRITONREPOAGENT_ARTIFACT_FILESYSTEM'");
  if (!model->acquired) {
    char tmpl[] = "/tmp/nereid-agent-XXXXXX";
    if (!mkdtemp(tmpl))
      return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "cannot create a folder for repo agent '%s': %s",
                           model->agent->name, strerror(errno));
    if (!(model->acquired = strdup(tmpl))) {
      nrd_remove_tree(tmpl);
      return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    }
  }
  *location = model->acquired;
  return NULL;
}

TRITONSERVER_Error *TRITONREPOAGENT_ModelRepositoryLocationRelease(TRITONREPOAGENT_Agent *agent,
                                                                   TRITONREPOAGENT_AgentModel *model,
                                                                   const char *location) {
  (void)agent;
  (void)location; /* an agent model has one acquired folder at most */
  NRD_ARG_CHECK(model, "model must not be NULL");
  if (!model->acquired) return nrd_error_new(TRITONSERVER_ERROR_UNAVAILABLE, "No mutable location to be deleted");
  nrd_remove_tree(model->acquired);
  free(model->acquired);
  model->acquired = NULL;
  return NULL;
}

TRITONSERVER_Error *TRITONREPOAGENT_ModelRepositoryUpdate(TRITONREPOAGENT_Agent *agent,
                                                          TRITONREPOAGENT_AgentModel *model,
                                                          const TRITONREPOAGENT_ArtifactType artifact_type,
                                                          const char *location) {
  (void)agent;
  NRD_ARG_CHECK(model, "model must not be NULL");
  NRD_ARG_CHECK(location && *location, "location must not be NULL or empty");
  if (!model->told || model->action != TRITONREPOAGENT_ACTION_LOAD)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "location can only be updated during TRITONREPOAGENT_ACTION_LOAD, current action type is %s",
                         model->told ? action_name(model->action) : "not set");
  if (artifact_type != TRITONREPOAGENT_ARTIFACT_FILESYSTEM)
    return nrd_error_new(TRITONSERVER_ERROR_UNSUPPORTED,
                         "Nereid loads models from local folders only (TRITONREPOAGENT_ARTIFACT_FILESYSTEM), not "
                         "from '%s'",
                         location);
  char *copy = strdup(location);
  if (!copy) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  free(model->location);
  model->location = copy;
  model->type = artifact_type;
  return NULL;
}

TRITONSERVER_Error *TRITONREPOAGENT_ModelParameterCount(TRITONREPOAGENT_Agent *agent, TRITONREPOAGENT_AgentModel *model,
                                                        uint32_t *count) {
  (void)agent;
  NRD_ARG_CHECK(model && count, "model and count must not be NULL");
  *count = model->n_params;
  return NULL;
}

TRITONSERVER_Error *TRITONREPOAGENT_ModelParameter(TRITONREPOAGENT_Agent *agent, TRITONREPOAGENT_AgentModel *model,
                                                   const uint32_t index, const char **parameter_name,
                                                   const char **parameter_value) {
  (void)agent;
  NRD_ARG_CHECK(model && parameter_name && parameter_value,
                "model, parameter_name and parameter_value must not be NULL");
  if (index >= model->n_params)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "index out of range for model parameters (%u; the model gives this agent %u)", index,
                         model->n_params);
  *parameter_name = model->keys[index];
  *parameter_value = model->values[index];
  return NULL;
}

TRITONSERVER_Error *TRITONREPOAGENT_ModelConfig(TRITONREPOAGENT_Agent *agent, TRITONREPOAGENT_AgentModel *model,
                                                const uint32_t config_version, TRITONSERVER_Message **model_config) {
  (void)agent;
  NRD_ARG_CHECK(model && model_config, "model and model_config must not be NULL");
  if (config_version != 1)
    return nrd_error_new(TRITONSERVER_ERROR_UNSUPPORTED,
                         "model configuration version %u is not supported (only version 1)", config_version);
  char *copy = strdup(model->config);
  *model_config = copy ? nrd_message_from_string(copy, strlen(copy)) : NULL;
  if (!*model_config) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  return NULL;
}

TRITONSERVER_Error *TRITONREPOAGENT_ModelState(TRITONREPOAGENT_AgentModel *model, void **state) {
  NRD_ARG_CHECK(model && state, "model and state must not be NULL");
  *state = model->state;
  return NULL;
}

TRITONSERVER_Error *TRITONREPOAGENT_ModelSetState(TRITONREPOAGENT_AgentModel *model, void *state) {
  NRD_ARG_CHECK(model, "model must not be NULL");
  model->state = state;
  return NULL;
}

TRITONSERVER_Error *TRITONREPOAGENT_State(TRITONREPOAGENT_Agent *agent, void **state) {
  NRD_ARG_CHECK(agent && state, "agent and state must not be NULL");
  *state = agent->state;
  return NULL;
}

TRITONSERVER_Error *TRITONREPOAGENT_SetState(TRITONREPOAGENT_Agent *agent, void *state) {
  NRD_ARG_CHECK(agent, "agent must not be NULL");
  agent->state = state;
  return NULL;
}
