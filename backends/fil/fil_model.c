/*
 * The fil backend's models: parameters, loading through Treelite, and the
 * checks of input__0 and output__0 against the loaded model (fil_model.h).
 */
#include "fil_model.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nereid/backend_utils.h"

static TRITONSERVER_Error *oom(void) {
  return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, "fil: out of memory");
}

static const struct {
  const char *name;
  fil_format format;
  const char *file;
} kFormats[] = {
    {"xgboost", FIL_XGBOOST, "xgboost.model"},
    {"xgboost_json", FIL_XGBOOST_JSON, "xgboost.json"},
    {"xgboost_ubj", FIL_XGBOOST_UBJ, "xgboost.ubj"},
    {"lightgbm", FIL_LIGHTGBM, "model.txt"},
    {"treelite_checkpoint", FIL_TREELITE, "checkpoint.tl"},
};

const char *fil_format_default_file(fil_format format) {
  for (size_t i = 0; i < sizeof kFormats / sizeof kFormats[0]; i++) {
    if (kFormats[i].format == format) return kFormats[i].file;
  }
  return "xgboost.model";
}

static const char *format_name(fil_format format) {
  for (size_t i = 0; i < sizeof kFormats / sizeof kFormats[0]; i++) {
    if (kFormats[i].format == format) return kFormats[i].name;
  }
  return "xgboost";
}

/* A boolean parameter as FIL reads one: "true" or "false" (any case). */
static TRITONSERVER_Error *param_bool(const json_t *config, const char *model_name, const char *key, bool dflt,
                                      bool *out) {
  const char *text = nrd_bu_config_parameter(config, key);
  if (text == NULL) {
    *out = dflt;
    return NULL;
  }
  if (strcasecmp(text, "true") == 0 || strcmp(text, "1") == 0) {
    *out = true;
  } else if (strcasecmp(text, "false") == 0 || strcmp(text, "0") == 0) {
    *out = false;
  } else {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "fil: model '%s': parameter %s: '%s' is not true or false",
                             model_name, key, text);
  }
  return NULL;
}

/* A name FIL checks though only its GPU path uses it: FIL's sentence for
 * an unknown one when it has one ('triton_sentence'), else ours listing
 * 'allowed_text'. */
static TRITONSERVER_Error *param_choice(const json_t *config, const char *model_name, const char *key,
                                        const char *triton_sentence, const char *const *allowed,
                                        const char *allowed_text) {
  const char *text = nrd_bu_config_parameter(config, key);
  if (text == NULL) return NULL;
  for (size_t i = 0; allowed[i] != NULL; i++) {
    if (strcmp(text, allowed[i]) == 0) return NULL;
  }
  if (triton_sentence == NULL) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "fil: model '%s': parameter %s: '%s' is not one of %s",
                             model_name, key, text, allowed_text);
  }
  return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "%s%s (fil: model '%s', parameter %s)", triton_sentence,
                           text, model_name, key);
}

TRITONSERVER_Error *fil_params_read(const json_t *config, const char *model_name, fil_params *out) {
  fil_params p;
  memset(&p, 0, sizeof p);
  p.threshold = 0.5f;
  const char *type = nrd_bu_config_parameter(config, "model_type");
  if (type == NULL) type = "xgboost";
  size_t i = 0;
  while (i < sizeof kFormats / sizeof kFormats[0] && strcmp(kFormats[i].name, type) != 0) i++;
  if (i == sizeof kFormats / sizeof kFormats[0]) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_UNSUPPORTED,
                             "%s not recognized as a valid serialization format. (fil: model '%s', parameter "
                             "model_type: one of xgboost, xgboost_json, xgboost_ubj, lightgbm, treelite_checkpoint)",
                             type, model_name);
  }
  p.format = kFormats[i].format;
  /* is_classifier is the newer name of output_class; either may be given. */
  bool legacy = false;
  TRITONSERVER_Error *err = param_bool(config, model_name, "output_class", false, &legacy);
  if (err == NULL) err = param_bool(config, model_name, "is_classifier", legacy, &p.output_class);
  if (err == NULL) err = param_bool(config, model_name, "predict_proba", false, &p.predict_proba);
  if (err == NULL) err = param_bool(config, model_name, "xgboost_allow_unknown_field", false, &p.allow_unknown_field);
  if (err != NULL) return err;
  const char *threshold = nrd_bu_config_parameter(config, "threshold");
  if (threshold != NULL && p.output_class) {
    char *end = NULL;
    errno = 0;
    double v = strtod(threshold, &end);
    if (end == threshold || *end != '\0' || errno != 0 || !isfinite(v)) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                               "fil: model '%s': parameter threshold: '%s' is not a number", model_name, threshold);
    }
    p.threshold = (float)v;
  }
  int64_t nthread = -1, ignored = 0;
  err = nrd_bu_config_parameter_int(config, "cpu_nthread", -1, INT32_MIN, 4096, &nthread);
  /* The GPU-only parameters: read and checked as FIL reads them, then
   * unused (this backend runs on the CPU, as FIL does for KIND_CPU). */
  if (err == NULL) err = nrd_bu_config_parameter_int(config, "threads_per_tree", 1, INT32_MIN, INT32_MAX, &ignored);
  if (err == NULL) err = nrd_bu_config_parameter_int(config, "blocks_per_sm", 0, INT32_MIN, INT32_MAX, &ignored);
  if (err == NULL) err = nrd_bu_config_parameter_int(config, "transfer_threshold", 1, 0, INT64_MAX, &ignored);
  if (err == NULL) err = nrd_bu_config_parameter_int(config, "chunk_size", 1, INT32_MIN, INT32_MAX, &ignored);
  bool unused = false;
  if (err == NULL) err = param_bool(config, model_name, "use_experimental_optimizations", false, &unused);
  static const char *const kAlgos[] = {"ALGO_AUTO", "NAIVE", "TREE_REORG", "BATCH_TREE_REORG", NULL};
  static const char *const kStorage[] = {"AUTO", "DENSE", "SPARSE", "SPARSE8", NULL};
  static const char *const kLayouts[] = {"depth_first", "breadth_first", "layered", NULL};
  if (err == NULL) err = param_choice(config, model_name, "algo", "Unknown FIL algorithm name: ", kAlgos, NULL);
  if (err == NULL) {
    err = param_choice(config, model_name, "storage_type", "Unknown FIL storage type name: ", kStorage, NULL);
  }
  if (err == NULL) {
    err = param_choice(config, model_name, "layout", NULL, kLayouts, "depth_first, breadth_first, layered");
  }
  if (err != NULL) return err;
  p.cpu_nthread = (int)nthread;
  *out = p;
  return NULL;
}

/* <repository>/<version>/<default_model_filename or the type's file>. */
static TRITONSERVER_Error *model_path(TRITONBACKEND_Model *model, const json_t *config, fil_model *m) {
  TRITONBACKEND_ArtifactType type;
  const char *location = NULL;
  uint64_t version = 0;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelRepository(model, &type, &location);
  if (err == NULL) err = TRITONBACKEND_ModelVersion(model, &version);
  if (err != NULL) return err;
  if (type != TRITONBACKEND_ARTIFACT_FILESYSTEM) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_UNSUPPORTED,
                             "fil: model '%s': only models on the file system can be loaded", m->name);
  }
  const char *file = json_string_value(json_object_get(config, "default_model_filename"));
  if (file == NULL || file[0] == '\0') file = fil_format_default_file(m->params.format);
  size_t cap = strlen(location) + strlen(file) + 32;
  m->path = malloc(cap);
  if (m->path == NULL) return oom();
  snprintf(m->path, cap, "%s/%llu/%s", location, (unsigned long long)version, file);
  struct stat st;
  if (stat(m->path, &st) != 0 || !S_ISREG(st.st_mode)) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             "Model failed to load into Treelite with error: model file '%s' does not exist "
                             "(fil: model '%s', model_type %s)",
                             m->path, m->name, format_name(m->params.format));
  }
  return NULL;
}

static TRITONSERVER_Error *tl_failed(const fil_model *m, const char *what) {
  return nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL, "fil: model '%s': %s: %s", m->name, what, tl_api_error(m->tl));
}

/* Treelite's own lines (a parser's warnings: an unknown JSON key, ...)
 * into the server's log rather than bare on stderr. */
static void tl_log_info(const char *msg) { NRD_BU_LOG(TRITONSERVER_LOG_VERBOSE, "fil: Treelite: %s", msg); }
static void tl_log_warning(const char *msg) { NRD_BU_LOG(TRITONSERVER_LOG_WARN, "fil: Treelite: %s", msg); }

static TRITONSERVER_Error *load(fil_model *m) {
  const tl_api *tl = m->tl;
  /* Per thread in Treelite: registered by each thread that loads. */
  if (tl->RegisterLogCallback(tl_log_info) != 0 || tl->RegisterWarningCallback(tl_log_warning) != 0) {
    return tl_failed(m, "cannot route Treelite's log");
  }
  const char *parser = m->params.allow_unknown_field ? "{\"allow_unknown_field\": true}" : "{}";
  int rc = -1;
  switch (m->params.format) {
    case FIL_XGBOOST: rc = tl->LoadXGBoostModelLegacyBinary(m->path, "{}", &m->handle); break;
    case FIL_XGBOOST_JSON: rc = tl->LoadXGBoostModelJSON(m->path, parser, &m->handle); break;
    case FIL_XGBOOST_UBJ: rc = tl->LoadXGBoostModelUBJSON(m->path, parser, &m->handle); break;
    case FIL_LIGHTGBM: rc = tl->LoadLightGBMModel(m->path, "{}", &m->handle); break;
    case FIL_TREELITE: rc = tl->DeserializeModelFromFile(m->path, &m->handle); break;
  }
  if (rc != 0) {
    m->handle = NULL;
    /* Triton's sentence (an UNKNOWN error in FIL), then which file. */
    return nrd_bu_error_newf(TRITONSERVER_ERROR_UNKNOWN,
                             "Model failed to load into Treelite with error: %s (fil: model '%s', file '%s', "
                             "model_type %s)",
                             tl_api_error(tl), m->name, m->path, format_name(m->params.format));
  }
  int features = 0;
  const char *type = NULL;
  char in_type[16] = "", out_type[16] = "";
  if (tl->QueryNumFeature(m->handle, &features) != 0) return tl_failed(m, "cannot read the number of features");
  if (tl->QueryNumTree(m->handle, &m->num_tree) != 0) return tl_failed(m, "cannot read the number of trees");
  /* Each answer lives in the same per-thread slot of Treelite's until the
   * next call: copied at once. */
  if (tl->GetInputType(m->handle, &type) != 0) return tl_failed(m, "cannot read the model's input type");
  snprintf(in_type, sizeof in_type, "%s", type);
  if (tl->GetOutputType(m->handle, &type) != 0) return tl_failed(m, "cannot read the model's output type");
  snprintf(out_type, sizeof out_type, "%s", type);
  m->num_feature = features;
  if (features <= 0) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "fil: model '%s': '%s' uses no feature", m->name, m->path);
  }
  if ((strcmp(in_type, "float32") != 0 && strcmp(in_type, "float64") != 0) ||
      (strcmp(out_type, "float32") != 0 && strcmp(out_type, "float64") != 0)) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_UNSUPPORTED,
                             "fil: model '%s': '%s' takes %s and gives %s; this backend serves float32 and "
                             "float64 models",
                             m->name, m->path, in_type, out_type);
  }
  m->input_f64 = strcmp(in_type, "float64") == 0;
  m->output_f64 = strcmp(out_type, "float64") == 0;
  /* 1, 2, 4, ... threads, then the maximum: cpu_nthread, or every online
   * core as GTIL's own default (nthread <= 0) would take. */
  long most = m->params.cpu_nthread > 0 ? m->params.cpu_nthread : sysconf(_SC_NPROCESSORS_ONLN);
  if (most < 1) most = 1;
  if (most > 4096) most = 4096;
  for (long t = 1; m->config_count < FIL_MAX_CONFIGS; t *= 2) {
    int n = (int)(t < most ? t : most);
    char json[96];
    snprintf(json, sizeof json, "{\"predict_type\": \"default\", \"nthread\": %d}", n);
    if (tl->GTILParseConfig(json, &m->configs[m->config_count]) != 0) {
      m->configs[m->config_count] = NULL;
      return tl_failed(m, "cannot configure GTIL");
    }
    m->threads[m->config_count++] = n;
    if (n == most) break;
  }
  const uint64_t *shape = NULL;
  uint64_t ndim = 0;
  if (tl->GTILGetOutputShape(m->handle, 1, m->configs[0], &shape, &ndim) != 0 || ndim < 1) {
    return tl_failed(m, "cannot find GTIL's output shape");
  }
  m->gtil_per_row = 1;
  for (uint64_t d = 1; d < ndim; d++) m->gtil_per_row *= shape[d];
  if (m->gtil_per_row == 0) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "fil: model '%s': '%s' has no output", m->name, m->path);
  }
  /* As FIL: a binary classifier's probabilities are [1 - p, p]; a class id
   * is one value; otherwise what the model gives. */
  if (m->params.predict_proba && m->gtil_per_row == 1) {
    m->out_per_row = 2;
  } else if (m->params.output_class && !m->params.predict_proba) {
    m->out_per_row = 1;
  } else {
    m->out_per_row = m->gtil_per_row;
  }
  return NULL;
}

/* The dims of a configuration tensor, after the batch dimension. */
static TRITONSERVER_Error *tensor_dims(const fil_model *m, const json_t *config, const char *section, const char *name,
                                       int64_t *dims, size_t cap, size_t *count) {
  const json_t *t = nrd_bu_config_tensor(config, section, name);
  if (t == NULL) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             "fil: model '%s': the configuration has no %s named '%s' (the FIL backend's %s is "
                             "always '%s')",
                             m->name, section, name, section, name);
  }
  const char *dt = json_string_value(json_object_get(t, "data_type"));
  if (dt == NULL || strcmp(dt, "TYPE_FP32") != 0) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             "fil: model '%s': %s '%s' is %s; the FIL backend takes and gives TYPE_FP32 only", m->name,
                             section, name, dt != NULL ? dt : "untyped");
  }
  const json_t *arr = json_object_get(t, "dims");
  size_t n = json_array_size(arr);
  if (n > cap) n = cap;
  for (size_t i = 0; i < n; i++) {
    TRITONSERVER_Error *err = nrd_bu_json_int(json_array_get(arr, i), "dims", &dims[i]);
    if (err != NULL) return err;
  }
  *count = n;
  return NULL;
}

/* input__0 holds num_feature columns, output__0 out_per_row values. */
static TRITONSERVER_Error *check_io(const fil_model *m, const json_t *config) {
  int64_t dims[8];
  size_t n = 0;
  TRITONSERVER_Error *err = tensor_dims(m, config, "input", "input__0", dims, 8, &n);
  if (err != NULL) return err;
  bool batched = m->max_batch_size > 0;
  if (n < 1 || n > (batched ? 1u : 2u)) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             "fil: model '%s': input 'input__0' has %zu dims; it takes %s", m->name, n,
                             batched ? "one, the features: dims: [ <features> ]"
                                     : "the rows and the features (dims: [ -1, <features> ]) or the features alone");
  }
  if (dims[n - 1] != -1 && dims[n - 1] != m->num_feature) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             "fil: model '%s': input 'input__0' has %lld features but the model in '%s' uses %lld",
                             m->name, (long long)dims[n - 1], m->path, (long long)m->num_feature);
  }
  /* FIL's other output, treeshap_output (SHAP values), is not offered:
   * a configuration naming it, or any other, is refused here rather than
   * answered without it. */
  const json_t *outputs = json_object_get(config, "output");
  for (size_t i = 0; i < json_array_size(outputs); i++) {
    const char *name = json_string_value(json_object_get(json_array_get(outputs, i), "name"));
    if (name != NULL && strcmp(name, "output__0") != 0) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_UNSUPPORTED,
                               "fil: model '%s': output '%s' is not offered; this backend gives 'output__0' only "
                               "(FIL's SHAP output, treeshap_output, is not implemented)",
                               m->name, name);
    }
  }
  err = tensor_dims(m, config, "output", "output__0", dims, 8, &n);
  if (err != NULL) return err;
  int64_t count = 1;
  bool variable = false;
  for (size_t i = batched || n < 2 ? 0 : 1; i < n; i++) {
    if (dims[i] < 0) variable = true;
    count *= dims[i];
  }
  if (!variable && count != (int64_t)m->out_per_row) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             "fil: model '%s': output 'output__0' holds %lld values per row but the model gives %llu "
                             "(%llu class%s; output_class %s, predict_proba %s)",
                             m->name, (long long)count, (unsigned long long)m->out_per_row,
                             (unsigned long long)m->gtil_per_row, m->gtil_per_row == 1 ? "" : "es",
                             m->params.output_class ? "true" : "false", m->params.predict_proba ? "true" : "false");
  }
  return NULL;
}

TRITONSERVER_Error *fil_model_new(TRITONBACKEND_Model *model, const tl_api *tl, fil_model **out) {
  const char *name = NULL;
  json_t *config = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelName(model, &name);
  if (err == NULL) err = nrd_bu_model_config(model, &config);
  if (err != NULL) return err;
  fil_model *m = calloc(1, sizeof *m);
  if (m == NULL || (m->name = strdup(name)) == NULL) {
    free(m);
    json_decref(config);
    return oom();
  }
  m->tl = tl;
  err = fil_params_read(config, m->name, &m->params);
  if (err == NULL) err = nrd_bu_config_max_batch_size(config, &m->max_batch_size);
  if (err == NULL) err = model_path(model, config, m);
  if (err == NULL) err = load(m);
  if (err == NULL) err = check_io(m, config);
  json_decref(config);
  if (err != NULL) {
    fil_model_free(m);
    return err;
  }
  NRD_BU_LOG(TRITONSERVER_LOG_INFO,
             "fil: model '%s': %zu trees, %lld features, %llu output%s per row from '%s' (%s), up to %d threads",
             m->name, m->num_tree, (long long)m->num_feature, (unsigned long long)m->out_per_row,
             m->out_per_row == 1 ? "" : "s", m->path, format_name(m->params.format), m->threads[m->config_count - 1]);
  *out = m;
  return NULL;
}

TreeliteGTILConfigHandle fil_model_config(const fil_model *m, uint64_t rows) {
  int k = 0;
  while (k + 1 < m->config_count && rows >= (uint64_t)m->threads[k + 1] * FIL_ROWS_PER_THREAD) k++;
  return m->configs[k];
}

void fil_model_free(fil_model *m) {
  if (m == NULL) return;
  if (m->tl != NULL) {
    for (int i = 0; i < m->config_count; i++) m->tl->GTILDeleteConfig(m->configs[i]);
    if (m->handle != NULL) m->tl->FreeModel(m->handle);
  }
  free(m->path);
  free(m->name);
  free(m);
}
