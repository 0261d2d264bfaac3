/* Repository agents (TRITONREPOAGENT_*, include/triton/core/tritonrepoagent.h):
 * the agents a model's configuration names, run in order when it loads,
 * and told of its life afterwards.
 *
 * One chain per load of a model. The repository owns it: it runs LOAD when
 * the load starts (nrd_agent_chain_load), tells the outcome
 * (LOAD_COMPLETE or LOAD_FAIL) and, for a model that loaded, UNLOAD before
 * the versions are unloaded; freeing the chain finishes what is left of the
 * sequence (UNLOAD_COMPLETE after an unload) and finalizes each agent
 * model. Agent libraries are shared by every chain that uses them and
 * unloaded when the last one goes. */
#ifndef NRD_REPO_AGENT_H
#define NRD_REPO_AGENT_H

#include <jansson.h>

#include "triton/core/tritonrepoagent.h"

typedef struct nrd_agent_chain nrd_agent_chain;

/* Reads the configuration in a folder an agent left the model in: a new
 * reference, or NULL when there is none to read. */
typedef json_t *(*nrd_agent_config_reader)(void *ctx, const char *dir);

/* Runs LOAD on every agent of `cfg`'s model_repository_agents, in order,
 * starting at the model folder `dir`. An agent after one that moved the
 * model is given the configuration `reread` finds there (an empty one
 * when it finds none).
 * With no agents, *out is NULL and *location `dir`. Otherwise *out is the
 * chain (the caller frees it with nrd_agent_chain_free) and *location
 * where the last agent left the model (owned by the chain). An error
 * (missing library, an agent's own failure, named with the agent) has
 * already told LOAD_FAIL to the agents that ran. Thread: one load at a
 * time per model. */
TRITONSERVER_Error *nrd_agent_chain_load(const char *agent_dir, const char *model_name, const json_t *cfg,
                                         const char *dir, nrd_agent_config_reader reread, void *reread_ctx,
                                         nrd_agent_chain **out, const char **location);

/* Tells every agent of the chain `action` (LOAD_COMPLETE, LOAD_FAIL or
 * UNLOAD; UNLOAD_COMPLETE is told by nrd_agent_chain_free). Agents'
 * errors are logged: the model's fate is decided by then. NULL is a no-op.
 * Thread: not concurrently with another call on the same chain. */
void nrd_agent_chain_tell(nrd_agent_chain *c, TRITONREPOAGENT_ActionType action);

/* Completes the sequence each agent model is in (LOAD_FAIL after LOAD,
 * UNLOAD and UNLOAD_COMPLETE after LOAD_COMPLETE, UNLOAD_COMPLETE after
 * UNLOAD), finalizes the agent models, deletes the folders they acquired
 * and lets go of the agents. NULL is a no-op. */
void nrd_agent_chain_free(nrd_agent_chain *c);

#endif
