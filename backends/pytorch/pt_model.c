/*
 * Model and instance setup of the pytorch backend (pt_model.h): the
 * configuration's parameters and tensors, and how they map onto the
 * TorchScript module's forward(), by the rules of Triton's pytorch backend:
 *
 * - inputs named after forward()'s arguments bind by name, in any order;
 *   otherwise names "<name>__<index>" bind by index; otherwise the
 *   configuration's order is forward()'s order (with a warning);
 * - a forward() taking one Dict[str, Tensor] gets every input by name;
 * - outputs "<name>__<index>" take that element of the returned tuple,
 *   otherwise the configuration's order;
 * - sequence control inputs and states must use "<name>__<index>".
 */
#include "pt_model.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "nereid/backend_utils.h"

#define BACKEND "pytorch"

static TRITONSERVER_Error *oom(void) {
  return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, BACKEND ": out of memory");
}

/* ---- small readers --------------------------------------------------------- */

/* Triton's datatype of a configuration "TYPE_*" string; INVALID if none. */
static TRITONSERVER_DataType config_datatype(const char *s) {
  if (s == NULL || strncmp(s, "TYPE_", 5) != 0) return TRITONSERVER_TYPE_INVALID;
  if (strcmp(s + 5, "STRING") == 0) return TRITONSERVER_TYPE_BYTES;
  return TRITONSERVER_StringToDataType(s + 5);
}

/* Whether libtorch takes a datatype as a tensor (Triton's mapping: no
 * unsigned types above 8 bits, no BF16). */
static bool torch_datatype(TRITONSERVER_DataType dt) {
  switch (dt) {
    case TRITONSERVER_TYPE_BOOL:
    case TRITONSERVER_TYPE_UINT8:
    case TRITONSERVER_TYPE_INT8:
    case TRITONSERVER_TYPE_INT16:
    case TRITONSERVER_TYPE_INT32:
    case TRITONSERVER_TYPE_INT64:
    case TRITONSERVER_TYPE_FP16:
    case TRITONSERVER_TYPE_FP32:
    case TRITONSERVER_TYPE_FP64: return true;
    default: return false;
  }
}

/* The index of a "<name>__<index>" name (digits after the first "__",
 * where Triton reads them; no digits reads as 0, as atoi does), or -1 when
 * the name does not follow the convention. */
static int named_index(const char *name) {
  const char *sep = strstr(name, "__");
  if (sep == NULL) return -1;
  const char *d = sep + 2;
  long v = 0;
  for (; *d != '\0'; d++) {
    if (!isdigit((unsigned char)*d)) return -1;
    if (v < INT_MAX / 10) v = v * 10 + (*d - '0');
  }
  return (int)v;
}

/* Triton's boolean parameter values (any case): true/on/1, false/off/0. */
static TRITONSERVER_Error *param_bool(const json_t *config, const char *model, const char *key, int *out) {
  const char *v = nrd_bu_config_parameter(config, key);
  if (v == NULL) return NULL;
  if (strcasecmp(v, "true") == 0 || strcasecmp(v, "on") == 0 || strcmp(v, "1") == 0) {
    *out = 1;
  } else if (strcasecmp(v, "false") == 0 || strcasecmp(v, "off") == 0 || strcmp(v, "0") == 0) {
    *out = 0;
  } else {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             "failed to convert '%s' to boolean (parameter %s of model '%s': true, false, on, off, "
                             "1 or 0)",
                             v, key, model);
  }
  return NULL;
}

/* An integer parameter; values <= 0 leave libtorch's default, as in Triton. */
static TRITONSERVER_Error *param_int(const json_t *config, const char *model, const char *key, int *out) {
  const char *v = nrd_bu_config_parameter(config, key);
  if (v == NULL) return NULL;
  char *end = NULL;
  errno = 0;
  long n = strtol(v, &end, 10);
  if (end == v || *end != '\0' || errno != 0 || n > INT_MAX || n < INT_MIN) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             "failed to convert '%s' to integral number (parameter %s of model '%s')", v, key, model);
  }
  *out = (int)n;
  return NULL;
}

/* The parameters Triton's pytorch backend reads (r25.07). */
static const char *const known_params[] = {"DISABLE_OPTIMIZED_EXECUTION",
                                           "ENABLE_CACHE_CLEANING",
                                           "INFERENCE_MODE",
                                           "DISABLE_CUDNN",
                                           "ENABLE_TENSOR_FUSER",
                                           "ENABLE_WEIGHT_SHARING",
                                           "ENABLE_DETERMINISTIC_ALGORITHMS",
                                           "ENABLE_JIT_PROFILING",
                                           "ENABLE_JIT_EXECUTOR",
                                           "INTRA_OP_THREAD_COUNT",
                                           "INTER_OP_THREAD_COUNT"};

static TRITONSERVER_Error *read_parameters(const json_t *config, pt_model *m) {
  int disable_opt = 0, cache = 0, inference = 1, disable_cudnn = 0, sharing = 0, deterministic = 0;
  int profiling = -1, executor = -1, fuser = -1, intra = 0, inter = 0;
  TRITONSERVER_Error *err = param_bool(config, m->name, "DISABLE_OPTIMIZED_EXECUTION", &disable_opt);
  if (err == NULL) err = param_bool(config, m->name, "ENABLE_CACHE_CLEANING", &cache);
  if (err == NULL) err = param_bool(config, m->name, "INFERENCE_MODE", &inference);
  if (err == NULL) err = param_bool(config, m->name, "DISABLE_CUDNN", &disable_cudnn);
  if (err == NULL) err = param_bool(config, m->name, "ENABLE_TENSOR_FUSER", &fuser);
  if (err == NULL) err = param_bool(config, m->name, "ENABLE_WEIGHT_SHARING", &sharing);
  if (err == NULL) err = param_bool(config, m->name, "ENABLE_DETERMINISTIC_ALGORITHMS", &deterministic);
  if (err == NULL) err = param_bool(config, m->name, "ENABLE_JIT_PROFILING", &profiling);
  if (err == NULL) err = param_bool(config, m->name, "ENABLE_JIT_EXECUTOR", &executor);
  if (err == NULL) err = param_int(config, m->name, "INTRA_OP_THREAD_COUNT", &intra);
  if (err == NULL) err = param_int(config, m->name, "INTER_OP_THREAD_COUNT", &inter);
  if (err == NULL && inter > 0) err = pt_set_inter_op_threads(inter);
  if (err != NULL) return err;
  m->options.optimized = !disable_opt;
  m->options.inference_mode = inference != 0;
  m->options.cudnn = !disable_cudnn;
  m->options.deterministic = deterministic != 0;
  m->options.jit_profiling = profiling;
  m->options.jit_executor = executor;
  m->options.tensor_fuser = fuser;
  m->options.intra_op_threads = intra;
  m->weight_sharing = sharing != 0;
  /* ENABLE_CACHE_CLEANING empties the CUDA cache: nothing to do on a CPU. */
  (void)cache;
  const json_t *params = json_object_get(config, "parameters");
  const char *key;
  json_t *value;
  json_object_foreach((json_t *)params, key, value) {
    bool known = false;
    for (size_t i = 0; i < sizeof known_params / sizeof known_params[0]; i++) {
      known = known || strcmp(key, known_params[i]) == 0;
    }
    if (!known) {
      NRD_BU_LOG(TRITONSERVER_LOG_WARN, BACKEND ": model '%s': parameter '%s' is not one the pytorch backend reads",
                 m->name, key);
    }
  }
  NRD_BU_LOG(TRITONSERVER_LOG_INFO,
             BACKEND ": model '%s': optimized execution %s, inference mode %s, cuDNN %s, weight sharing %s, "
                     "intra-op threads %d",
             m->name, m->options.optimized ? "enabled" : "disabled", inference ? "enabled" : "disabled",
             disable_cudnn ? "disabled" : "enabled", sharing ? "enabled" : "disabled", intra);
  return NULL;
}

/* ---- tensors of the configuration ----------------------------------------- */

/* Number of dims an entry has for the String check: reshape.shape if any. */
static size_t dims_of(const json_t *io) {
  const json_t *reshape = json_object_get(io, "reshape");
  if (reshape != NULL) return json_array_size(json_object_get(reshape, "shape"));
  return json_array_size(json_object_get(io, "dims"));
}

/* Appends one tensor to 'list'; its name is copied. */
static TRITONSERVER_Error *push_io(pt_io **list, size_t *count, const char *name, TRITONSERVER_DataType dt, int index) {
  pt_io *grown = realloc(*list, (*count + 1) * sizeof **list);
  if (grown == NULL) return oom();
  *list = grown;
  pt_io *io = &grown[*count];
  memset(io, 0, sizeof *io);
  io->name = strdup(name);
  if (io->name == NULL) return oom();
  io->datatype = dt;
  io->index = index;
  (*count)++;
  return NULL;
}

/* Checks the datatype and String shape of one configured tensor. 'what' is
 * "input", "output", "input state" or "state" as in Triton's sentences. */
static TRITONSERVER_Error *check_io(const pt_model *m, const char *what, const char *name, const char *dtype,
                                    size_t dims, TRITONSERVER_DataType *dt) {
  *dt = config_datatype(dtype);
  if (!torch_datatype(*dt) && *dt != TRITONSERVER_TYPE_BYTES) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL, "unsupported datatype %s for %s '%s' for model '%s'",
                             dtype != NULL ? dtype : "(none)", what, name, m->name);
  }
  if (*dt == TRITONSERVER_TYPE_BYTES && dims + (m->max_batch_size > 0 ? 1 : 0) > 1) {
    bool in = strncmp(what, "input", 5) == 0;
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL,
                             "Triton only supports 1 dimensional List of String as %s for '%s' for model '%s'",
                             in ? "input" : "output", name, m->name);
  }
  return NULL;
}

/* The sequence batcher's control inputs: each "<name>__<index>". */
static TRITONSERVER_Error *read_controls(const json_t *seq, pt_model *m) {
  size_t i;
  const json_t *control;
  json_array_foreach(json_object_get(seq, "control_input"), i, control) {
    const char *name = json_string_value(json_object_get(control, "name"));
    if (name == NULL) continue;
    int index = named_index(name);
    if (index < 0) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL,
                               "input '%s' does not follow <name>__<index> naming convention.", name);
    }
    /* The control's datatype: data_type of its entry (typed controls), or
     * the datatype of its int32/fp32/bool false/true values. */
    const json_t *entry = json_array_get(json_object_get(control, "control"), 0);
    const char *dtype = json_string_value(json_object_get(entry, "data_type"));
    TRITONSERVER_DataType dt = TRITONSERVER_TYPE_INT32;
    if (dtype != NULL && strcmp(dtype, "TYPE_INVALID") == 0) dtype = NULL; /* rendered default */
    if (dtype != NULL) {
      dt = config_datatype(dtype);
    } else if (json_array_size(json_object_get(entry, "fp32_false_true")) > 0) {
      dt = TRITONSERVER_TYPE_FP32;
    } else if (json_array_size(json_object_get(entry, "bool_false_true")) > 0) {
      dt = TRITONSERVER_TYPE_BOOL;
    }
    if (!torch_datatype(dt)) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL, "input '%s' type '%s' is not supported by PyTorch.", name,
                               dtype != NULL ? dtype : "(none)");
    }
    TRITONSERVER_Error *err = push_io(&m->inputs, &m->input_count, name, dt, index);
    if (err != NULL) return err;
  }
  return NULL;
}

/* Implicit states: an input and an output each, "<name>__<index>". */
static TRITONSERVER_Error *read_states(const json_t *seq, pt_model *m) {
  size_t i;
  const json_t *state;
  json_array_foreach(json_object_get(seq, "state"), i, state) {
    const char *in = json_string_value(json_object_get(state, "input_name"));
    const char *out = json_string_value(json_object_get(state, "output_name"));
    const char *dtype = json_string_value(json_object_get(state, "data_type"));
    in = in != NULL ? in : "";
    out = out != NULL ? out : "";
    const char *bad = named_index(in) < 0 ? in : named_index(out) < 0 ? out : NULL;
    if (bad != NULL) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                               "PyTorch model '%s' is using sequence batching with state but state '%s' does not "
                               "follow the <name>__<index> naming convention. ",
                               m->name, bad);
    }
    TRITONSERVER_DataType dt;
    size_t dims = json_array_size(json_object_get(state, "dims"));
    TRITONSERVER_Error *err = check_io(m, "input state", in, dtype, 0, &dt);
    if (err == NULL) err = check_io(m, "state", out, dtype, dims, &dt);
    if (err == NULL) err = push_io(&m->inputs, &m->input_count, in, dt, named_index(in));
    if (err != NULL) return err;
    /* A state output also listed as an output is one entry doing both. */
    pt_io *o = NULL;
    for (size_t k = 0; k < m->output_count; k++) {
      if (strcmp(m->outputs[k].name, out) == 0) o = &m->outputs[k];
    }
    if (o == NULL) {
      err = push_io(&m->outputs, &m->output_count, out, dt, named_index(out));
      if (err != NULL) return err;
      o = &m->outputs[m->output_count - 1];
    }
    o->requested_always = true;
  }
  return NULL;
}

/* batch_input: one input per target name, computed from the source
 * input's shapes (every kind of Triton's backend input collector). */
static TRITONSERVER_Error *read_batch_inputs(const json_t *config, pt_model *m) {
  size_t i;
  const json_t *bi;
  json_array_foreach(json_object_get(config, "batch_input"), i, bi) {
    const char *kind = json_string_value(json_object_get(bi, "kind"));
    const char *dtype = json_string_value(json_object_get(bi, "data_type"));
    const char *source = json_string_value(json_array_get(json_object_get(bi, "source_input"), 0));
    nrd_bu_batch_input_kind k;
    if (!nrd_bu_batch_input_kind_from(kind, &k)) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "unexpected batch input kind '%s' (model '%s')",
                               kind != NULL ? kind : "", m->name);
    }
    TRITONSERVER_DataType dt = config_datatype(dtype);
    if (dt != TRITONSERVER_TYPE_INT32 && dt != TRITONSERVER_TYPE_FP32) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                               "model '%s': batch_input[%zu] has data_type %s; element counts are TYPE_INT32 or "
                               "TYPE_FP32",
                               m->name, i, dtype != NULL ? dtype : "(none)");
    }
    if (source == NULL || pt_model_input(m, source) == NULL) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                               "model '%s': batch_input[%zu] has source_input '%s', which is not an input", m->name, i,
                               source != NULL ? source : "");
    }
    size_t t;
    const json_t *target;
    json_array_foreach(json_object_get(bi, "target_name"), t, target) {
      const char *name = json_string_value(target);
      TRITONSERVER_Error *err = push_io(&m->inputs, &m->input_count, name != NULL ? name : "", dt, -1);
      if (err != NULL) return err;
      pt_io *io = &m->inputs[m->input_count - 1];
      io->batch_input = true;
      io->batch_kind = k;
      io->source = strdup(source);
      if (io->source == NULL) return oom();
    }
  }
  return NULL;
}

/* batch_output: BATCH_SCATTER_WITH_INPUT_SHAPE, the only kind: each
 * request gets the output's next elements, shaped as its source input. */
static TRITONSERVER_Error *read_batch_outputs(const json_t *config, pt_model *m) {
  size_t i;
  const json_t *bo;
  json_array_foreach(json_object_get(config, "batch_output"), i, bo) {
    const char *kind = json_string_value(json_object_get(bo, "kind"));
    const char *source = json_string_value(json_array_get(json_object_get(bo, "source_input"), 0));
    if (kind == NULL || strcmp(kind, "BATCH_SCATTER_WITH_INPUT_SHAPE") != 0) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "unexpected batch output kind '%s' (model '%s')",
                               kind != NULL ? kind : "", m->name);
    }
    if (source == NULL || pt_model_input(m, source) == NULL) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                               "model '%s': batch_output[%zu] has source_input '%s', which is not an input", m->name, i,
                               source != NULL ? source : "");
    }
    size_t t;
    const json_t *target;
    json_array_foreach(json_object_get(bo, "target_name"), t, target) {
      pt_io *o = NULL;
      for (size_t k = 0; k < m->output_count; k++) {
        if (strcmp(m->outputs[k].name, json_string_value(target) != NULL ? json_string_value(target) : "") == 0) {
          o = &m->outputs[k];
        }
      }
      if (o == NULL || o->datatype == TRITONSERVER_TYPE_BYTES) {
        return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                                 "model '%s': batch_output[%zu] target '%s' is not a tensor output", m->name, i,
                                 json_string_value(target) != NULL ? json_string_value(target) : "");
      }
      free(o->source);
      o->source = strdup(source);
      if (o->source == NULL) return oom();
    }
  }
  return NULL;
}

/* Whether every name of a configuration section follows "<name>__<index>". */
static bool all_named_index(const json_t *section) {
  size_t i;
  const json_t *io;
  json_array_foreach(section, i, io) {
    const char *name = json_string_value(json_object_get(io, "name"));
    if (name == NULL || named_index(name) < 0) return false;
  }
  return true;
}

static TRITONSERVER_Error *read_tensors(const json_t *config, pt_model *m) {
  const json_t *inputs = json_object_get(config, "input");
  const json_t *outputs = json_object_get(config, "output");
  if (json_array_size(inputs) == 0) {
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL,
                                 "model configuration must contain at least one input, none were specified.");
  }
  if (json_array_size(outputs) == 0) {
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL,
                                 "model configuration must contain at least one output, none were specified.");
  }
  /* Inputs get their argument index per instance, once forward() is known;
   * outputs here: "<name>__<index>" or the configuration's order. */
  bool out_named = all_named_index(outputs);
  if (!out_named) {
    NRD_BU_LOG(TRITONSERVER_LOG_WARN,
               "output(s) of the model '%s' do not follow the <name>__<index> naming convention. Falling back to "
               "enforcing strict ordering from model configuration.",
               m->name);
  }
  size_t i;
  const json_t *io;
  json_array_foreach(inputs, i, io) {
    const char *name = json_string_value(json_object_get(io, "name"));
    const char *dtype = json_string_value(json_object_get(io, "data_type"));
    TRITONSERVER_DataType dt;
    TRITONSERVER_Error *err = check_io(m, "input", name != NULL ? name : "", dtype, dims_of(io), &dt);
    if (err == NULL) err = push_io(&m->inputs, &m->input_count, name != NULL ? name : "", dt, -1);
    if (err != NULL) return err;
    m->inputs[m->input_count - 1].ragged = json_is_true(json_object_get(io, "allow_ragged_batch"));
  }
  m->config_input_count = m->input_count;
  TRITONSERVER_Error *berr = read_batch_inputs(config, m);
  if (berr != NULL) return berr;
  json_array_foreach(outputs, i, io) {
    const char *name = json_string_value(json_object_get(io, "name"));
    const char *dtype = json_string_value(json_object_get(io, "data_type"));
    TRITONSERVER_DataType dt;
    name = name != NULL ? name : "";
    TRITONSERVER_Error *err = check_io(m, "output", name, dtype, dims_of(io), &dt);
    if (err == NULL) err = push_io(&m->outputs, &m->output_count, name, dt, out_named ? named_index(name) : (int)i);
    if (err != NULL) return err;
    m->outputs[m->output_count - 1].is_output = true;
  }
  TRITONSERVER_Error *oerr = read_batch_outputs(config, m);
  if (oerr != NULL) return oerr;
  const json_t *seq = json_object_get(config, "sequence_batching");
  if (seq != NULL) {
    TRITONSERVER_Error *err = read_controls(seq, m);
    if (err == NULL && json_array_size(json_object_get(seq, "state")) > 0 && !out_named) {
      err = nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                              "PyTorch model '%s' is using sequence batching with state but not all inputs and "
                              "outputs follow the <name>__<index> naming convention. ",
                              m->name);
    }
    m->has_states = json_array_size(json_object_get(seq, "state")) > 0;
    if (err == NULL) err = read_states(seq, m);
    if (err != NULL) return err;
  }
  return NULL;
}

/* The TorchScript file: <repository>/<version>/<default_model_filename or
 * model.pt>. */
static TRITONSERVER_Error *model_path(TRITONBACKEND_Model *model, const json_t *config, pt_model *m) {
  TRITONBACKEND_ArtifactType type;
  const char *location = NULL;
  uint64_t version = 0;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelRepository(model, &type, &location);
  if (err == NULL) err = TRITONBACKEND_ModelVersion(model, &version);
  if (err != NULL) return err;
  if (type != TRITONBACKEND_ARTIFACT_FILESYSTEM) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_UNSUPPORTED,
                             BACKEND ": model '%s': only models on the file system can be loaded", m->name);
  }
  const char *file = json_string_value(json_object_get(config, "default_model_filename"));
  if (file == NULL || file[0] == '\0') file = "model.pt";
  size_t cap = strlen(location) + strlen(file) + 32;
  m->path = malloc(cap);
  if (m->path == NULL) return oom();
  snprintf(m->path, cap, "%s/%llu/%s", location, (unsigned long long)version, file);
  struct stat st;
  if (stat(m->path, &st) != 0 || !S_ISREG(st.st_mode)) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_UNAVAILABLE, "unable to find '%s' for model instance '%s'", m->path,
                             m->name);
  }
  return NULL;
}

TRITONSERVER_Error *pt_model_new(TRITONBACKEND_Model *model, pt_model **out) {
  const char *name = NULL;
  json_t *config = NULL;
  pt_model *m = calloc(1, sizeof *m);
  if (m == NULL) return oom();
  pthread_mutex_init(&m->lock, NULL);
  TRITONSERVER_Error *err = TRITONBACKEND_ModelName(model, &name);
  if (err == NULL) {
    m->name = strdup(name);
    if (m->name == NULL) err = oom();
  }
  if (err == NULL) err = nrd_bu_model_config(model, &config);
  if (err == NULL) err = nrd_bu_config_max_batch_size(config, &m->max_batch_size);
  if (err == NULL) err = model_path(model, config, m);
  if (err == NULL) err = read_parameters(config, m);
  if (err == NULL) err = read_tensors(config, m);
  json_decref(config);
  if (err != NULL) {
    pt_model_free(m);
    return err;
  }
  *out = m;
  return NULL;
}

static void free_ios(pt_io *ios, size_t count) {
  for (size_t i = 0; i < count; i++) {
    free(ios[i].name);
    free(ios[i].source);
  }
  free(ios);
}

void pt_model_free(pt_model *m) {
  if (m == NULL) return;
  pt_module_free(m->shared);
  pthread_mutex_destroy(&m->lock);
  free_ios(m->inputs, m->input_count);
  free_ios(m->outputs, m->output_count);
  free(m->path);
  free(m->name);
  free(m);
}

const pt_io *pt_model_input(const pt_model *m, const char *name) {
  for (size_t i = 0; i < m->input_count; i++) {
    if (strcmp(m->inputs[i].name, name) == 0) return &m->inputs[i];
  }
  return NULL;
}

/* ---- instances --------------------------------------------------------------- */

/* The module of an instance: its own, or the model's shared one (loaded
 * by the first instance, under the lock, so that parallel instance
 * initialization loads it once). */
static TRITONSERVER_Error *instance_module(pt_model *m, pt_module **out) {
  TRITONSERVER_Error *err = NULL;
  if (m->weight_sharing) {
    pthread_mutex_lock(&m->lock);
    if (m->shared == NULL) err = pt_module_load(m->path, m->options.inference_mode, &m->shared);
    if (err == NULL) {
      *out = pt_module_share(m->shared);
      if (*out == NULL)
        err = oom();
      else
        NRD_BU_LOG(TRITONSERVER_LOG_INFO, BACKEND ": model '%s': instances share one module", m->name);
    }
    pthread_mutex_unlock(&m->lock);
  } else {
    err = pt_module_load(m->path, m->options.inference_mode, out);
  }
  if (err == NULL || TRITONSERVER_ErrorCode(err) == TRITONSERVER_ERROR_UNAVAILABLE) return err;
  TRITONSERVER_Error *named = nrd_bu_error_newf(TRITONSERVER_ErrorCode(err), "failed to load model '%s': %s (%s)",
                                                m->name, TRITONSERVER_ErrorMessage(err), m->path);
  TRITONSERVER_ErrorDelete(err);
  return named;
}

/* forward()'s arguments as "x: Tensor, y: Tensor", for error messages. */
static void describe_args(const pt_arg_info *args, size_t n, char *buf, size_t cap) {
  size_t at = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < n && at < cap; i++) {
    int w = snprintf(buf + at, cap - at, "%s%s: %s", i > 0 ? ", " : "", args[i].name, args[i].type);
    if (w < 0) break;
    at += (size_t)w;
  }
}

/* The configuration's input names, comma-separated, for error messages. */
static void describe_inputs(const pt_model *m, char *buf, size_t cap) {
  size_t at = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < m->input_count && at < cap; i++) {
    int w = snprintf(buf + at, cap - at, "%s%s", i > 0 ? ", " : "", m->inputs[i].name);
    if (w < 0) break;
    at += (size_t)w;
  }
}

/* Binds every input of the model to forward()'s arguments (Triton's
 * naming conventions, see the top of this file). */
static TRITONSERVER_Error *bind_inputs(pt_instance *inst, const pt_arg_info *args, size_t n) {
  const pt_model *m = inst->model;
  char have[1024], want[1024];
  describe_args(args, n, have, sizeof have);
  describe_inputs(m, want, sizeof want);
  inst->dict = n == 1 && args[0].kind == PT_ARG_DICT;
  if (inst->dict) {
    for (size_t i = 0; i < m->input_count; i++) inst->arg_index[i] = -1;
    return NULL;
  }
  for (size_t i = 0; i < n; i++) {
    if (args[i].kind == PT_ARG_DICT && n > 1) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL,
                               "Multiple inputs of kind DictType were detected. Only a single input of type "
                               "Dict(str, Tensor) is supported. (model '%s', forward(%s))",
                               m->name, have);
    }
  }
  for (size_t i = 0; i < n; i++) {
    if (args[i].kind != PT_ARG_TENSOR && args[i].kind != PT_ARG_LIST) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL,
                               "An input of type '%s' was detected in the model. Only a single input of type "
                               "Dict(str, Tensor) or input(s) of type Tensor are supported. (model '%s', "
                               "forward(%s))",
                               args[i].type, m->name, have);
    }
  }
  if (n != m->input_count) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             "unable to load model '%s', configuration expects %zu inputs, model provides %zu "
                             "(the configuration's inputs, sequence controls and states: %s; forward(%s))",
                             m->name, m->input_count, n, want, have);
  }
  /* The configuration's own inputs choose the convention; batch inputs
   * (which follow them, index -1 too) bind by it. */
  size_t configured = 0;
  while (configured < m->input_count && m->inputs[configured].index < 0) configured++;
  bool by_argument = true, by_index = true;
  for (size_t i = 0; i < m->config_input_count; i++) {
    bool found = false;
    for (size_t a = 0; a < n; a++) found = found || strcmp(args[a].name, m->inputs[i].name) == 0;
    by_argument = by_argument && found;
    by_index = by_index && named_index(m->inputs[i].name) >= 0;
  }
  if (!by_argument && !by_index) {
    NRD_BU_LOG(TRITONSERVER_LOG_WARN,
               "input(s) of the model '%s' are neither input arguments to the model nor do they follow the "
               "<name>__<index> naming convention. Falling back to enforcing strict ordering from model "
               "configuration.",
               m->name);
  }
  /* Triton requires the index convention itself there: argument names
   * that also read as <name>__<index> still count as names. */
  if (m->has_states && (by_argument || !by_index)) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             "PyTorch model '%s' is using sequence batching with state but not all inputs and "
                             "outputs follow the <name>__<index> naming convention. ",
                             m->name);
  }
  for (size_t i = 0; i < m->input_count; i++) {
    int index = m->inputs[i].index; /* controls and states */
    if (i < configured) {
      if (by_argument) {
        for (size_t a = 0; a < n; a++) {
          if (strcmp(args[a].name, m->inputs[i].name) == 0) index = (int)a;
        }
      } else {
        index = by_index ? named_index(m->inputs[i].name) : (int)i;
      }
    }
    if (index < 0) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                               "unable to load model '%s': input '%s' is not an argument of forward(%s)", m->name,
                               m->inputs[i].name, have);
    }
    /* Triton would write past forward()'s arguments here; we refuse. */
    if ((size_t)index >= n) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                               "unable to load model '%s': input '%s' names argument %d of forward(%s), which "
                               "takes %zu",
                               m->name, m->inputs[i].name, index, have, n);
    }
    for (size_t k = 0; k < i; k++) {
      if (inst->arg_index[k] == index) {
        return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                                 "unable to load model '%s': inputs '%s' and '%s' both name argument %d of "
                                 "forward(%s)",
                                 m->name, m->inputs[k].name, m->inputs[i].name, index, have);
      }
    }
    inst->arg_index[i] = index;
  }
  return NULL;
}

TRITONSERVER_Error *pt_instance_new(TRITONBACKEND_ModelInstance *instance, pt_model *m, pt_instance **out) {
  const char *name = NULL;
  TRITONSERVER_InstanceGroupKind kind;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelInstanceName(instance, &name);
  if (err == NULL) err = TRITONBACKEND_ModelInstanceKind(instance, &kind);
  if (err != NULL) return err;
  if (kind != TRITONSERVER_INSTANCEGROUPKIND_CPU && kind != TRITONSERVER_INSTANCEGROUPKIND_MODEL) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_UNSUPPORTED,
                             BACKEND ": instance '%s' is %s; this build runs the pytorch backend on the CPU only "
                                     "(KIND_CPU or KIND_MODEL)",
                             name, TRITONSERVER_InstanceGroupKindString(kind));
  }
  pt_instance *inst = calloc(1, sizeof *inst);
  if (inst == NULL) return oom();
  inst->model = m;
  inst->name = strdup(name);
  inst->arg_index = calloc(m->input_count + 1, sizeof *inst->arg_index);
  if (inst->name == NULL || inst->arg_index == NULL) err = oom();
  if (err == NULL) err = instance_module(m, &inst->module);
  pt_arg_info *args = NULL;
  size_t n = 0;
  if (err == NULL) {
    err = pt_module_arguments(inst->module, &args, &n);
    if (err != NULL) {
      TRITONSERVER_Error *named =
          nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "unable to load model '%s': %s (%s)", m->name,
                            TRITONSERVER_ErrorMessage(err), m->path);
      TRITONSERVER_ErrorDelete(err);
      err = named;
    }
  }
  if (err == NULL) err = bind_inputs(inst, args, n);
  inst->arg_count = n;
  pt_arg_infos_free(args, n);
  if (err != NULL) {
    pt_instance_free(inst);
    return err;
  }
  *out = inst;
  return NULL;
}

void pt_instance_free(pt_instance *inst) {
  if (inst == NULL) return;
  pt_module_free(inst->module);
  free(inst->arg_index);
  free(inst->name);
  free(inst);
}
