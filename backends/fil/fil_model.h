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

/* GTIL configurations a model keeps: 1, 2, 4, ... threads up to 4096. */
#define FIL_MAX_CONFIGS 14

/* Rows each thread gets at least: a batch of r rows runs on the largest
 * configured count of threads t with r >= t * FIL_ROWS_PER_THREAD (about
 * 150 us of GTIL per thread for a 100-tree model, well above what waking
 * an OpenMP thread costs; docs/fil.md, "Threads"). */
#define FIL_ROWS_PER_THREAD 16

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
  int cpu_nthread; /* GTIL's threads at most; <= 0: every online core */
} fil_params;

typedef struct fil_model {
  char *name; /* the model's name, for messages */
  const tl_api *tl; /* the backend's; outlives every model */
  fil_params params;
  char *path; /* the model file */
  int64_t max_batch_size;
  TreeliteModelHandle handle; /* FreeModel */
  /* GTIL configurations (GTILDeleteConfig each): configs[k] predicts on
   * threads[k] threads, 1, 2, 4, ... up to the model's maximum, the last
   * being the maximum itself. fil_model_config picks one per batch. */
  TreeliteGTILConfigHandle configs[FIL_MAX_CONFIGS];
  int threads[FIL_MAX_CONFIGS];
  int config_count;
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

/* The GTIL configuration for a batch of 'rows' rows (see configs). Any
 * thread. */
TreeliteGTILConfigHandle fil_model_config(const fil_model *m, uint64_t rows);

/* Frees a model and what Treelite holds for it; NULL is fine. */
void fil_model_free(fil_model *m);

#endif /* NEREID_FIL_MODEL_H */
