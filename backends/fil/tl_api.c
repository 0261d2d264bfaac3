/*
 * Loading Treelite's library and its C API (tl_api.h).
 */
#include "tl_api.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "nereid/backend_utils.h"

static const char kLibrary[] = "libtreelite.so";

/* Looks up "Treelite<name>" into '*slot'; false when absent. */
static bool bind(void *lib, const char *name, void *slot) {
  char full[128];
  snprintf(full, sizeof full, "Treelite%s", name);
  void *sym = dlsym(lib, full);
  memcpy(slot, &sym, sizeof sym);
  return sym != NULL;
}

TRITONSERVER_Error *tl_api_open(const char *backend_dir, tl_api *out) {
  tl_api api;
  memset(&api, 0, sizeof api);
  char tried[2048];
  api.library = nrd_bu_dlopen_beside(backend_dir, kLibrary, api.path, sizeof api.path, tried, sizeof tried);
  if (api.library == NULL) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_UNAVAILABLE,
                             "fil: cannot load Treelite (scripts/fetch_pypi.sh installs it); tried %s", tried);
  }
  static const struct {
    const char *name;
    size_t offset;
  } kFunctions[] = {
      {"GetLastError", offsetof(tl_api, GetLastError)},
      {"LoadXGBoostModelLegacyBinary", offsetof(tl_api, LoadXGBoostModelLegacyBinary)},
      {"LoadXGBoostModelJSON", offsetof(tl_api, LoadXGBoostModelJSON)},
      {"LoadXGBoostModelUBJSON", offsetof(tl_api, LoadXGBoostModelUBJSON)},
      {"LoadLightGBMModel", offsetof(tl_api, LoadLightGBMModel)},
      {"DeserializeModelFromFile", offsetof(tl_api, DeserializeModelFromFile)},
      {"FreeModel", offsetof(tl_api, FreeModel)},
      {"QueryNumFeature", offsetof(tl_api, QueryNumFeature)},
      {"QueryNumTree", offsetof(tl_api, QueryNumTree)},
      {"GetInputType", offsetof(tl_api, GetInputType)},
      {"GetOutputType", offsetof(tl_api, GetOutputType)},
      {"GTILParseConfig", offsetof(tl_api, GTILParseConfig)},
      {"GTILDeleteConfig", offsetof(tl_api, GTILDeleteConfig)},
      {"GTILGetOutputShape", offsetof(tl_api, GTILGetOutputShape)},
      {"GTILPredict", offsetof(tl_api, GTILPredict)},
      {"RegisterLogCallback", offsetof(tl_api, RegisterLogCallback)},
      {"RegisterWarningCallback", offsetof(tl_api, RegisterWarningCallback)},
  };
  for (size_t i = 0; i < sizeof kFunctions / sizeof kFunctions[0]; i++) {
    if (!bind(api.library, kFunctions[i].name, (char *)&api + kFunctions[i].offset)) {
      TRITONSERVER_Error *err = nrd_bu_error_newf(TRITONSERVER_ERROR_UNAVAILABLE,
                                                  "fil: %s has no function Treelite%s (the backend needs Treelite 4)",
                                                  api.path, kFunctions[i].name);
      dlclose(api.library);
      return err;
    }
  }
  *out = api;
  return NULL;
}

void tl_api_close(tl_api *api) {
  /* The library stays mapped: its OpenMP runtime keeps threads and
   * thread-local state alive until exit, and backends are finalized only at
   * process exit anyway. */
  memset(api, 0, sizeof *api);
}

const char *tl_api_error(const tl_api *api) {
  const char *msg = api->GetLastError != NULL ? api->GetLastError() : NULL;
  return msg != NULL ? msg : "(no message)";
}
