/*
 * Nereid: repository agent API (TRITONREPOAGENT_*), source-compatible with
 * Triton's tritonrepoagent.h at API version 0.1.
 *
 * A repository agent is a shared library libtritonrepoagent_<name>.so in
 * <repoagent directory>/<name>/ (--repoagent-directory). A model names its
 * agents in config.pbtxt:
 *
 *   model_repository_agents { agents [ { name: "<name>"
 *       parameters { key: "<k>" value: "<v>" } } ] }
 *
 * When the model loads, each agent in turn sees where the model's files
 * are and may hand the server another folder to load them from (for
 * example one it decrypted or checked the files into). Two kinds of
 * functions live here:
 *  - functions the server implements and the agent calls
 *    (TRITONREPOAGENT_DECLSPEC), and
 *  - functions the agent implements and the server finds with dlsym
 *    (TRITONREPOAGENT_ISPEC); only TRITONREPOAGENT_ModelAction is required.
 *
 * The conventions of tritonserver.h apply: NULL means success and a
 * returned error belongs to the caller.
 */
#ifndef TRITON_CORE_TRITONREPOAGENT_H
#define TRITON_CORE_TRITONREPOAGENT_H

#include <stddef.h>
#include <stdint.h>

#include "triton/core/tritonserver.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifndef TRITONREPOAGENT_DECLSPEC
#if defined(__GNUC__)
#define TRITONREPOAGENT_DECLSPEC __attribute__((__visibility__("default")))
#else
#define TRITONREPOAGENT_DECLSPEC
#endif
#endif

#ifndef TRITONREPOAGENT_ISPEC
#if defined(__GNUC__)
#define TRITONREPOAGENT_ISPEC __attribute__((__visibility__("default")))
#else
#define TRITONREPOAGENT_ISPEC
#endif
#endif

struct TRITONREPOAGENT_Agent;
struct TRITONREPOAGENT_AgentModel;
typedef struct TRITONREPOAGENT_Agent TRITONREPOAGENT_Agent;
typedef struct TRITONREPOAGENT_AgentModel TRITONREPOAGENT_AgentModel;

/* The API version this header describes. An agent built against it works
 * with a server whose major version is equal and minor version is not
 * lower. */
#define TRITONREPOAGENT_API_VERSION_MAJOR 0
#define TRITONREPOAGENT_API_VERSION_MINOR 1

/* How a model's files reach an agent and come back: a folder on the local
 * file system, or a remote location in the repository path syntax
 * ("s3://..."). Nereid loads from local folders only. */
typedef enum TRITONREPOAGENT_artifacttype_enum {
  TRITONREPOAGENT_ARTIFACT_FILESYSTEM,
  TRITONREPOAGENT_ARTIFACT_REMOTE_FILESYSTEM
} TRITONREPOAGENT_ArtifactType;

/* Where a model is in its life, as told to TRITONREPOAGENT_ModelAction.
 * The sequences are LOAD, LOAD_COMPLETE, UNLOAD, UNLOAD_COMPLETE for a
 * model that loaded, and LOAD, LOAD_FAIL for one that did not. */
typedef enum TRITONREPOAGENT_actiontype_enum {
  TRITONREPOAGENT_ACTION_LOAD,
  TRITONREPOAGENT_ACTION_LOAD_COMPLETE,
  TRITONREPOAGENT_ACTION_LOAD_FAIL,
  TRITONREPOAGENT_ACTION_UNLOAD,
  TRITONREPOAGENT_ACTION_UNLOAD_COMPLETE
} TRITONREPOAGENT_ActionType;

/* ------------------------------------------------ implemented by the server */

/* The API version the server implements. Thread: any. */
TRITONREPOAGENT_DECLSPEC TRITONSERVER_Error *TRITONREPOAGENT_ApiVersion(uint32_t *major, uint32_t *minor);

/* Where the model's files are now: the model's folder in the repository,
 * or what an earlier agent in the model's list gave. The server owns
 * *location (valid until the agent model is finalized); the agent must
 * not change the files there. */
TRITONREPOAGENT_DECLSPEC TRITONSERVER_Error *
TRITONREPOAGENT_ModelRepositoryLocation(TRITONREPOAGENT_Agent *agent, TRITONREPOAGENT_AgentModel *model,
                                        TRITONREPOAGENT_ArtifactType *artifact_type, const char **location);

/* An empty folder of the agent's own (made once per agent model; later
 * calls return the same one). FILESYSTEM only. The server owns the string
 * and deletes the folder with its contents at
 * TRITONREPOAGENT_ModelRepositoryLocationRelease, or after
 * TRITONREPOAGENT_ModelFinalize at the latest. */
TRITONREPOAGENT_DECLSPEC TRITONSERVER_Error *
TRITONREPOAGENT_ModelRepositoryLocationAcquire(TRITONREPOAGENT_Agent *agent, TRITONREPOAGENT_AgentModel *model,
                                               const TRITONREPOAGENT_ArtifactType artifact_type, const char **location);

/* Deletes the acquired folder and its contents. UNAVAILABLE when none was
 * acquired. */
TRITONREPOAGENT_DECLSPEC TRITONSERVER_Error *
TRITONREPOAGENT_ModelRepositoryLocationRelease(TRITONREPOAGENT_Agent *agent, TRITONREPOAGENT_AgentModel *model,
                                               const char *location);

/* Load the model from `location` instead (copied). Only while handling
 * TRITONREPOAGENT_ACTION_LOAD; INVALID_ARG otherwise. The files must stay
 * until the agent model is finalized. */
TRITONREPOAGENT_DECLSPEC TRITONSERVER_Error *
TRITONREPOAGENT_ModelRepositoryUpdate(TRITONREPOAGENT_Agent *agent, TRITONREPOAGENT_AgentModel *model,
                                      const TRITONREPOAGENT_ArtifactType artifact_type, const char *location);

/* How many parameters the model's configuration gives this agent. */
TRITONREPOAGENT_DECLSPEC TRITONSERVER_Error *
TRITONREPOAGENT_ModelParameterCount(TRITONREPOAGENT_Agent *agent, TRITONREPOAGENT_AgentModel *model, uint32_t *count);

/* Parameter `index` (0 <= index < count). The strings are the server's,
 * valid until the agent model is finalized. */
TRITONREPOAGENT_DECLSPEC TRITONSERVER_Error *
TRITONREPOAGENT_ModelParameter(TRITONREPOAGENT_Agent *agent, TRITONREPOAGENT_AgentModel *model, const uint32_t index,
                               const char **parameter_name, const char **parameter_value);

/* The model's configuration as read before this agent ran, as a JSON
 * message (config_version must be 1). The caller owns *model_config and
 * frees it with TRITONSERVER_MessageDelete. */
TRITONREPOAGENT_DECLSPEC TRITONSERVER_Error *TRITONREPOAGENT_ModelConfig(TRITONREPOAGENT_Agent *agent,
                                                                         TRITONREPOAGENT_AgentModel *model,
                                                                         const uint32_t config_version,
                                                                         TRITONSERVER_Message **model_config);

/* The agent model's opaque state pointer (NULL until set). */
TRITONREPOAGENT_DECLSPEC TRITONSERVER_Error *TRITONREPOAGENT_ModelState(TRITONREPOAGENT_AgentModel *model,
                                                                        void **state);
TRITONREPOAGENT_DECLSPEC TRITONSERVER_Error *TRITONREPOAGENT_ModelSetState(TRITONREPOAGENT_AgentModel *model,
                                                                           void *state);

/* The agent's opaque state pointer, shared by every model using it. */
TRITONREPOAGENT_DECLSPEC TRITONSERVER_Error *TRITONREPOAGENT_State(TRITONREPOAGENT_Agent *agent, void **state);
TRITONREPOAGENT_DECLSPEC TRITONSERVER_Error *TRITONREPOAGENT_SetState(TRITONREPOAGENT_Agent *agent, void *state);

/* ------------------------------------------------- implemented by the agent */

/* Optional. Called once when the library is loaded, before any model uses
 * it. An error fails the load of the model that needed the agent. */
TRITONREPOAGENT_ISPEC TRITONSERVER_Error *TRITONREPOAGENT_Initialize(TRITONREPOAGENT_Agent *agent);

/* Optional. Called once when no model uses the agent any more, before the
 * library is unloaded; the agent stops its threads and frees its state. */
TRITONREPOAGENT_ISPEC TRITONSERVER_Error *TRITONREPOAGENT_Finalize(TRITONREPOAGENT_Agent *agent);

/* Optional. Called when a load of a model naming this agent begins. */
TRITONREPOAGENT_ISPEC TRITONSERVER_Error *TRITONREPOAGENT_ModelInitialize(TRITONREPOAGENT_Agent *agent,
                                                                          TRITONREPOAGENT_AgentModel *model);

/* Optional. Called once that model's life (as in the action sequences
 * above) is over; the agent frees the model's state. */
TRITONREPOAGENT_ISPEC TRITONSERVER_Error *TRITONREPOAGENT_ModelFinalize(TRITONREPOAGENT_Agent *agent,
                                                                        TRITONREPOAGENT_AgentModel *model);

/* Required. Tells the agent where the model is in its life. An action the
 * agent has nothing to do for returns success. On LOAD, the agent may give
 * the server another location (TRITONREPOAGENT_ModelRepositoryUpdate);
 * an error from LOAD fails the model's load with that error. Calls for
 * one model never overlap; calls for different models may. */
TRITONREPOAGENT_ISPEC TRITONSERVER_Error *TRITONREPOAGENT_ModelAction(TRITONREPOAGENT_Agent *agent,
                                                                      TRITONREPOAGENT_AgentModel *model,
                                                                      const TRITONREPOAGENT_ActionType action_type);

#ifdef __cplusplus
}
#endif

#endif
