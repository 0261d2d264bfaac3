/*
 * A model of the fil backend: its parameters (the FIL backend's, read from
 * config.pbtxt as Triton's fil_backend reads them), the tree model loaded
 * by Treelite from the version folder, and the GTIL configurations used to
 * predict with it. Loaded once per model and shared, read-only, by every
 * instance (Treelite's GTIL predicts from a const model).
 *
 * Threads: fil_model_new and fil_model_free run on the thread that
 * initializes or finalizes the model; everything else only reads a model.
 */
#ifndef NEREID_FIL_MODEL_H
#define NEREID_FIL_MODEL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "tl_api.h"
#include "triton/core/tritonbackend.h"

/* model_type, with the file each reads by default. */
typedef enum fil_format {
  FIL_XGBOOST, /* xgboost.model, XGBoost's legacy binary */
  FIL_XGBOOST_JSON, /* xgboost.json */
  FIL_XGBOOST_UBJ, /* xgboost.ubj */
  FIL_LIGHTGBM, /* model.txt, LightGBM's text format */
  FIL_TREELITE, /* checkpoint.tl, a Treelite checkpoint */
} fil_format;

/* The parameters, after defaults and checks. */
typedef struct fil_params {
  fil_format format;
  bool output_class; /* output_class (or is_classifier): a classifier */
  bool predict_proba; /* one score per class instead of a class id */
  float threshold; /* binary classifiers: class 1 above it (0.5) */
  bool allow_unknown_field; /* xgboost_allow_unknown_field */
  int cpu_nthread; /* GTIL's threads for large batches; <= 0: all cores */
} fil_params;

typedef struct fil_model {
  char *name; /* the model's name, for messages */
  const tl_api *tl; /* the backend's; outlives every model */
  fil_params params;
  char *path; /* the model file */
  int64_t max_batch_size;
  TreeliteModelHandle handle; /* FreeModel */
  TreeliteGTILConfigHandle one_thread; /* GTILDeleteConfig; small batches */
  TreeliteGTILConfigHandle threads; /* GTILDeleteConfig; large batches */
  uint64_t parallel_rows; /* batches of at least this many rows use 'threads' */
  int64_t num_feature; /* columns of input__0 */
  size_t num_tree;
  bool input_f64; /* the model's thresholds are float64 (LightGBM): inputs are widened */
  bool output_f64; /* GTIL writes float64 */
  uint64_t gtil_per_row; /* values GTIL gives per row: classes (1 for binary and regression) */
  uint64_t out_per_row; /* values output__0 holds per row */
} fil_model;

/*
 * Reads the FIL parameters of a model configuration into 'out'. Errors are
 * INVALID_ARG (UNSUPPORTED for an unknown model_type, as FIL's) naming the
 * parameter and the text. Any thread.
 */
TRITONSERVER_Error *fil_params_read(const json_t *config, const char *model_name, fil_params *out);

/* The file a model_type reads when default_model_filename is not set. */
const char *fil_format_default_file(fil_format format);

/*
 * Reads the configuration, loads the model file through Treelite and
 * checks input__0 and output__0 against it. On success the caller owns
 * '*out' (fil_model_free); on failure nothing is left allocated and the
 * error names the model, the file or field, and Treelite's message. Thread:
 * TRITONBACKEND_ModelInitialize.
 */
TRITONSERVER_Error *fil_model_new(TRITONBACKEND_Model *model, const tl_api *tl, fil_model **out);

/* Frees a model and what Treelite holds for it; NULL is fine. */
void fil_model_free(fil_model *m);

#endif /* NEREID_FIL_MODEL_H */
