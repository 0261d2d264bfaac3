/* A repository agent for the tests (libtritonrepoagent_recorder.so),
 * written only against triton/core/tritonrepoagent.h as an agent built for
 * Triton would be. It appends what it is told, one line each, to the file
 * named by the environment variable NRD_RECORDER_AGENT_LOG:
 *   "Initialize", "Finalize",
 *   "<event> <model> <tag>" for ModelInitialize, ModelFinalize and each
 *   action (LOAD, LOAD_COMPLETE, LOAD_FAIL, UNLOAD, UNLOAD_COMPLETE),
 *   "location <tag> <path>" on LOAD, "acquired <tag> <path>" when it
 *   makes a folder of its own,
 *   "params <tag> <count>",
 *   "refused <tag> <call> <error code>" for calls it makes to check that
 *   the server refuses them (an update outside LOAD, a parameter index out
 *   of range, config version 2, a remote acquire).
 *
 * Model parameters: "tag" (default "-"); "fail" names an action to fail
 * ("LOAD", "MODEL_INIT"); "new_version": on LOAD, acquire a folder, copy
 * config.pbtxt there and make version folder <new_version>, then load the
 * model from it; "update_to": on LOAD, load the model from that path. */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "triton/core/tritonrepoagent.h"

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...) {
  const char *path = getenv("NRD_RECORDER_AGENT_LOG");
  if (!path) return;
  FILE *f = fopen(path, "a");
  if (!f) return;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(f, fmt, ap);
  va_end(ap);
  fputc('\n', f);
  fclose(f);
}

static const char *param(TRITONREPOAGENT_Agent *a, TRITONREPOAGENT_AgentModel *m, const char *key) {
  uint32_t n = 0;
  if (TRITONREPOAGENT_ModelParameterCount(a, m, &n)) return NULL;
  for (uint32_t i = 0; i < n; i++) {
    const char *k = NULL, *v = NULL;
    TRITONSERVER_Error *e = TRITONREPOAGENT_ModelParameter(a, m, i, &k, &v);
    if (e) {
      TRITONSERVER_ErrorDelete(e);
      return NULL;
    }
    if (!strcmp(k, key)) return v;
  }
  return NULL;
}

static const char *tag(TRITONREPOAGENT_Agent *a, TRITONREPOAGENT_AgentModel *m) {
  const char *t = param(a, m, "tag");
  return t ? t : "-";
}

/* The model name the agent model was given in its configuration. */
static char *config_name(TRITONREPOAGENT_Agent *a, TRITONREPOAGENT_AgentModel *m) {
  TRITONSERVER_Message *msg = NULL;
  TRITONSERVER_Error *e = TRITONREPOAGENT_ModelConfig(a, m, 1, &msg);
  if (e) {
    TRITONSERVER_ErrorDelete(e);
    return strdup("(error)");
  }
  const char *base = NULL;
  size_t len = 0;
  char *out = NULL;
  if (!TRITONSERVER_MessageSerializeToJson(msg, &base, &len)) {
    json_t *cfg = json_loadb(base, len, 0, NULL);
    const char *name = json_string_value(json_object_get(cfg, "name"));
    out = strdup(name ? name : "(none)");
    json_decref(cfg);
  }
  TRITONSERVER_MessageDelete(msg);
  return out ? out : strdup("(error)");
}

static void refused(const char *t, const char *call, TRITONSERVER_Error *e) {
  note("refused %s %s %s", t, call, e ? TRITONSERVER_ErrorCodeString(e) : "no");
  if (e) TRITONSERVER_ErrorDelete(e);
}

static TRITONSERVER_Error *copy_file(const char *from, const char *to) {
  FILE *in = fopen(from, "rb"), *out = in ? fopen(to, "wb") : NULL;
  char buf[4096];
  size_t n;
  while (out && (n = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, n, out);
  bool ok = in && out;
  if (in) fclose(in);
  if (out) ok &= fclose(out) == 0;
  return ok ? NULL : TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "cannot copy config.pbtxt");
}

static TRITONSERVER_Error *relocate(TRITONREPOAGENT_Agent *a, TRITONREPOAGENT_AgentModel *m, const char *version) {
  TRITONREPOAGENT_ArtifactType type;
  const char *here = NULL, *there = NULL;
  TRITONSERVER_Error *e = TRITONREPOAGENT_ModelRepositoryLocation(a, m, &type, &here);
  if (!e) e = TRITONREPOAGENT_ModelRepositoryLocationAcquire(a, m, TRITONREPOAGENT_ARTIFACT_FILESYSTEM, &there);
  if (e) return e;
  note("acquired %s %s", tag(a, m), there);
  char from[4096], to[4096];
  snprintf(from, sizeof from, "%s/config.pbtxt", here);
  snprintf(to, sizeof to, "%s/config.pbtxt", there);
  if ((e = copy_file(from, to))) return e;
  snprintf(to, sizeof to, "%s/%s", there, version);
  if (mkdir(to, 0700) != 0 && errno != EEXIST)
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "cannot make the version folder");
  return TRITONREPOAGENT_ModelRepositoryUpdate(a, m, TRITONREPOAGENT_ARTIFACT_FILESYSTEM, there);
}

TRITONREPOAGENT_ISPEC TRITONSERVER_Error *TRITONREPOAGENT_Initialize(TRITONREPOAGENT_Agent *agent) {
  uint32_t major = 0, minor = 0;
  TRITONSERVER_Error *e = TRITONREPOAGENT_ApiVersion(&major, &minor);
  if (e) return e;
  if (major != TRITONREPOAGENT_API_VERSION_MAJOR || minor < TRITONREPOAGENT_API_VERSION_MINOR)
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNSUPPORTED, "repo agent API version mismatch");
  static int instance;
  e = TRITONREPOAGENT_SetState(agent, &instance);
  if (e) return e;
  note("Initialize");
  return NULL;
}

TRITONREPOAGENT_ISPEC TRITONSERVER_Error *TRITONREPOAGENT_Finalize(TRITONREPOAGENT_Agent *agent) {
  void *state = NULL;
  TRITONSERVER_Error *e = TRITONREPOAGENT_State(agent, &state);
  if (e) return e;
  note("Finalize%s", state ? "" : " (state lost)");
  return NULL;
}

TRITONREPOAGENT_ISPEC TRITONSERVER_Error *TRITONREPOAGENT_ModelInitialize(TRITONREPOAGENT_Agent *agent,
                                                                          TRITONREPOAGENT_AgentModel *model) {
  char *name = config_name(agent, model);
  note("ModelInitialize %s %s", name, tag(agent, model));
  free(name);
  const char *fail = param(agent, model, "fail");
  if (fail && !strcmp(fail, "MODEL_INIT"))
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "the recorder was asked to fail ModelInitialize");
  return TRITONREPOAGENT_ModelSetState(model, strdup(tag(agent, model)));
}

TRITONREPOAGENT_ISPEC TRITONSERVER_Error *TRITONREPOAGENT_ModelFinalize(TRITONREPOAGENT_Agent *agent,
                                                                        TRITONREPOAGENT_AgentModel *model) {
  void *state = NULL;
  TRITONSERVER_Error *e = TRITONREPOAGENT_ModelState(model, &state);
  if (e) return e;
  note("ModelFinalize %s", state ? (char *)state : tag(agent, model));
  free(state);
  return NULL;
}

static const char *const action_names[] = {"LOAD", "LOAD_COMPLETE", "LOAD_FAIL", "UNLOAD", "UNLOAD_COMPLETE"};

TRITONREPOAGENT_ISPEC TRITONSERVER_Error *TRITONREPOAGENT_ModelAction(TRITONREPOAGENT_Agent *agent,
                                                                      TRITONREPOAGENT_AgentModel *model,
                                                                      const TRITONREPOAGENT_ActionType action) {
  const char *t = tag(agent, model);
  const char *what = (unsigned)action < 5 ? action_names[action] : "?";
  char *name = config_name(agent, model);
  note("%s %s %s", what, name, t);
  const char *fail = param(agent, model, "fail");
  if (fail && !strcmp(fail, what)) {
    free(name);
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "the recorder was asked to fail this action");
  }
  TRITONSERVER_Error *err = NULL;
  if (action == TRITONREPOAGENT_ACTION_LOAD) {
    TRITONREPOAGENT_ArtifactType type;
    const char *here = NULL;
    err = TRITONREPOAGENT_ModelRepositoryLocation(agent, model, &type, &here);
    if (!err) note("location %s %s", t, here);
    uint32_t n = 0;
    if (!err) err = TRITONREPOAGENT_ModelParameterCount(agent, model, &n);
    if (!err) note("params %s %u", t, n);
    const char *version = param(agent, model, "new_version");
    const char *update_to = param(agent, model, "update_to");
    if (!err && version) err = relocate(agent, model, version);
    if (!err && update_to)
      err = TRITONREPOAGENT_ModelRepositoryUpdate(agent, model, TRITONREPOAGENT_ARTIFACT_FILESYSTEM, update_to);
  } else if (action == TRITONREPOAGENT_ACTION_LOAD_COMPLETE) {
    const char *k, *v, *where;
    TRITONSERVER_Message *msg = NULL;
    refused(t, "update", TRITONREPOAGENT_ModelRepositoryUpdate(agent, model, TRITONREPOAGENT_ARTIFACT_FILESYSTEM, "/"));
    refused(t, "parameter", TRITONREPOAGENT_ModelParameter(agent, model, 1000, &k, &v));
    refused(t, "config_v2", TRITONREPOAGENT_ModelConfig(agent, model, 2, &msg));
    refused(t, "acquire_remote",
            TRITONREPOAGENT_ModelRepositoryLocationAcquire(agent, model, TRITONREPOAGENT_ARTIFACT_REMOTE_FILESYSTEM,
                                                           &where));
  }
  free(name);
  return err;
}
