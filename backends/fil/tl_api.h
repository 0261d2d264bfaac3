/*
 * Treelite's C API (libtreelite.so from PyPI's treelite 4.7.0 wheel, which
 * ships no headers), loaded at run time: the functions the fil backend
 * calls, declared here from Treelite 4's c_api.h signatures, and looked up
 * with dlsym so that a library lacking one fails the backend's load with
 * its name rather than at the first call.
 *
 * Threads: a tl_api is immutable once opened. Treelite keeps its last
 * error per thread; a loaded model and a GTIL configuration are read-only
 * and may be used by several threads at once (TreeliteGTILPredict does not
 * modify either).
 */
#ifndef NEREID_FIL_TL_API_H
#define NEREID_FIL_TL_API_H

#include <stddef.h>
#include <stdint.h>

#include "triton/core/tritonserver.h"

typedef void *TreeliteModelHandle;
typedef void *TreeliteGTILConfigHandle;

/* Every function returns 0 on success, -1 on failure (then
 * TreeliteGetLastError gives the calling thread's message). */
typedef struct tl_api {
  void *library; /* dlopen handle */
  char path[4096]; /* where the library was found */
  const char *(*GetLastError)(void);
  /* Loaders: 'config_json' is a JSON object of parser options ("{}"). */
  int (*LoadXGBoostModelLegacyBinary)(const char *filename, const char *config_json, TreeliteModelHandle *out);
  int (*LoadXGBoostModelJSON)(const char *filename, const char *config_json, TreeliteModelHandle *out);
  int (*LoadXGBoostModelUBJSON)(const char *filename, const char *config_json, TreeliteModelHandle *out);
  int (*LoadLightGBMModel)(const char *filename, const char *config_json, TreeliteModelHandle *out);
  int (*DeserializeModelFromFile)(const char *filename, TreeliteModelHandle *out);
  int (*FreeModel)(TreeliteModelHandle handle);
  int (*QueryNumFeature)(TreeliteModelHandle handle, int *out);
  int (*QueryNumTree)(TreeliteModelHandle handle, size_t *out);
  /* "float32" or "float64", in a per-thread slot that the next call of
   * either overwrites: copy it at once. */
  int (*GetInputType)(TreeliteModelHandle handle, const char **out);
  int (*GetOutputType)(TreeliteModelHandle handle, const char **out);
  /* GTIL: {"predict_type": "default", "nthread": n}. */
  int (*GTILParseConfig)(const char *config_json, TreeliteGTILConfigHandle *out);
  int (*GTILDeleteConfig)(TreeliteGTILConfigHandle handle);
  /* '*out' lives in the calling thread's Treelite store until its next call. */
  int (*GTILGetOutputShape)(TreeliteModelHandle model, uint64_t num_row, TreeliteGTILConfigHandle config,
                            const uint64_t **out, uint64_t *out_ndim);
  /* 'input': num_row dense rows of the model's num_feature values of
   * 'input_type'; 'output': GTILGetOutputShape's elements of the model's
   * output type. */
  int (*GTILPredict)(TreeliteModelHandle model, const void *input, const char *input_type, uint64_t num_row,
                     void *output, TreeliteGTILConfigHandle config);
  /* Where Treelite's info and warning lines go instead of stderr: the
   * registry is per thread, so each thread that loads a model registers. */
  int (*RegisterLogCallback)(void (*callback)(const char *));
  int (*RegisterWarningCallback)(void (*callback)(const char *));
} tl_api;

/*
 * Opens libtreelite.so, first from 'backend_dir' (may be NULL), then through
 * the loader's search path, and looks up every function above. On failure
 * the error names the places tried or the missing function and nothing
 * stays open. The caller owns '*out' (tl_api_close). Thread:
 * TRITONBACKEND_Initialize.
 */
TRITONSERVER_Error *tl_api_open(const char *backend_dir, tl_api *out);

/* Forgets the table; the library stays mapped (see tl_api.c). */
void tl_api_close(tl_api *api);

/* Treelite's message for the calling thread's last failure (never NULL). */
const char *tl_api_error(const tl_api *api);

#endif /* NEREID_FIL_TL_API_H */
