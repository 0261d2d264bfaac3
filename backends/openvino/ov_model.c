/*
 * Model setup for the openvino backend (ov_model.h): the model file, the
 * configuration checked against the model, the parameters of Triton's
 * openvino backend (r25.07 README) and the compilation for the CPU.
 */
#include "ov_model.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "nereid/backend_utils.h"

#define NRD_OV_MAX_RANK 16

static TRITONSERVER_Error *oom(void) { return nrd_bu_error_newf(TRITONSERVER_ERROR_UNAVAILABLE, "openvino: out of memory"); }

/* A model port as OpenVINO describes it. Dimensions: -1 where dynamic,
 * with 'lo'/'hi' the interval OpenVINO gives (hi -1: unbounded). */
typedef struct port {
  char *name; /* ov_free */
  nrd_ov_element element;
  bool rank_dynamic;
  int64_t rank;
  int64_t dims[NRD_OV_MAX_RANK];
  int64_t lo[NRD_OV_MAX_RANK];
  int64_t hi[NRD_OV_MAX_RANK];
} port;

/* The ports of the model's inputs or outputs; '*out' (ports_free). */
static TRITONSERVER_Error *ports_read(const ov_runtime *rt, const nrd_ov_model_t *model, bool inputs, port **out,
                                      size_t *count) {
  const nrd_ov_api *api = &rt->api;
  *out = NULL;
  *count = 0;
  size_t n = 0;
  nrd_ov_status st = inputs ? api->ov_model_inputs_size(model, &n) : api->ov_model_outputs_size(model, &n);
  TRITONSERVER_Error *err =
      ov_runtime_error(rt, st, TRITONSERVER_ERROR_INTERNAL, inputs ? "getting input infos" : "getting output infos");
  if (err != NULL) return err;
  port *ports = calloc(n > 0 ? n : 1, sizeof *ports);
  if (ports == NULL) return oom();
  for (size_t i = 0; err == NULL && i < n; i++) {
    nrd_ov_output_const_port_t *p = NULL;
    st = inputs ? api->ov_model_const_input_by_index(model, i, &p) : api->ov_model_const_output_by_index(model, i, &p);
    err = ov_runtime_error(rt, st, TRITONSERVER_ERROR_INTERNAL, inputs ? "getting input infos" : "getting output infos");
    if (err != NULL) break;
    /* "Models without output names are not supported" (README). */
    err = ov_runtime_error(rt, api->ov_port_get_any_name(p, &ports[i].name), TRITONSERVER_ERROR_INVALID_ARG,
                           "getting tensor names (models must name their inputs and outputs)");
    if (err == NULL) {
      err = ov_runtime_error(rt, api->ov_port_get_element_type(p, &ports[i].element), TRITONSERVER_ERROR_INTERNAL,
                             "getting element types");
    }
    nrd_ov_partial_shape_t ps;
    memset(&ps, 0, sizeof ps);
    if (err == NULL) {
      err = ov_runtime_error(rt, api->ov_port_get_partial_shape(p, &ps), TRITONSERVER_ERROR_INTERNAL,
                             "retrieving original shapes");
    }
    if (err == NULL) {
      ports[i].rank_dynamic = ps.rank.min != ps.rank.max || ps.rank.max < 0;
      ports[i].rank = ports[i].rank_dynamic ? 0 : ps.rank.max;
      if (ports[i].rank > NRD_OV_MAX_RANK) {
        err = nrd_bu_error_newf(TRITONSERVER_ERROR_UNSUPPORTED, "openvino: tensor '%s' has %lld dimensions, at most %d "
                                "are supported", ports[i].name, (long long)ports[i].rank, NRD_OV_MAX_RANK);
      }
      for (int64_t d = 0; err == NULL && d < ports[i].rank; d++) {
        ports[i].lo[d] = ps.dims[d].min;
        ports[i].hi[d] = ps.dims[d].max;
        ports[i].dims[d] = ps.dims[d].min == ps.dims[d].max ? ps.dims[d].max : -1;
      }
      api->ov_partial_shape_free(&ps);
    }
    api->ov_output_const_port_free(p);
  }
  if (err != NULL) {
    for (size_t i = 0; i < n; i++) {
      if (ports[i].name != NULL) api->ov_free(ports[i].name);
    }
    free(ports);
    return err;
  }
  *out = ports;
  *count = n;
  return NULL;
}

static void ports_free(const ov_runtime *rt, port *ports, size_t n) {
  for (size_t i = 0; ports != NULL && i < n; i++) {
    if (ports[i].name != NULL) rt->api.ov_free(ports[i].name);
  }
  free(ports);
}

/* "unexpected inference input 'x', allowed inputs are: a, b" (Triton's
 * sentence; the names sorted, as its std::set lists them). */
static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }
static TRITONSERVER_Error *unexpected(const char *what, const char *name, const port *ports, size_t n) {
  const char **names = calloc(n > 0 ? n : 1, sizeof *names);
  if (names == NULL) return oom();
  size_t len = 1;
  for (size_t i = 0; i < n; i++) {
    names[i] = ports[i].name;
    len += strlen(ports[i].name) + 2;
  }
  qsort(names, n, sizeof *names, cmp_names);
  char *list = malloc(len);
  if (list == NULL) {
    free(names);
    return oom();
  }
  list[0] = '\0';
  for (size_t i = 0; i < n; i++) {
    if (i > 0) strcat(list, ", ");
    strcat(list, names[i]);
  }
  TRITONSERVER_Error *err = nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                                              "unexpected inference %s '%s', allowed %ss are: %s", what, name, what, list);
  free(list);
  free(names);
  return err;
}

static const port *port_named(const port *ports, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++) {
    if (strcmp(ports[i].name, name) == 0) return &ports[i];
  }
  return NULL;
}

/* The configured dims of a tensor (reshape.shape when given, as Triton's
 * backend compares), at most NRD_OV_MAX_RANK. */
static TRITONSERVER_Error *config_dims(const json_t *io, const char *name, int64_t *dims, size_t *count) {
  const json_t *reshape = json_object_get(io, "reshape");
  const json_t *arr = reshape != NULL ? json_object_get(reshape, "shape") : json_object_get(io, "dims");
  *count = 0;
  if (arr == NULL) return NULL;
  if (!json_is_array(arr) || json_array_size(arr) > NRD_OV_MAX_RANK) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "openvino: tensor '%s': dims must be a list of at most %d "
                             "dimensions", name, NRD_OV_MAX_RANK);
  }
  for (size_t i = 0; i < json_array_size(arr); i++) {
    TRITONSERVER_Error *err = nrd_bu_json_int(json_array_get(arr, i), "dims", &dims[i]);
    if (err != NULL) return err;
  }
  *count = json_array_size(arr);
  return NULL;
}

/* Whether a model dimension accepts a configured one (Triton's backend:
 * a static one must be equal; a bounded dynamic one must lie strictly
 * inside its interval; an unbounded one takes anything). */
static bool dim_matches(const port *p, int64_t d, int64_t want) {
  if (p->dims[d] >= 0) return p->dims[d] == want;
  if (p->hi[d] < 0) return true;
  return want < p->hi[d] && want > p->lo[d];
}

/* The configured shape against the model's, in Triton's words. */
static TRITONSERVER_Error *compare_dims(const ov_model *m, const port *p, const int64_t *dims, size_t count,
                                        bool exact) {
  char ms[256], cs[256];
  int64_t full[NRD_OV_MAX_RANK + 1];
  size_t n = 0;
  if (m->max_batch_size > 0) {
    if (p->rank == 0) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                               "model '%s', tensor '%s': for the model to support batching the shape should have at "
                               "least 1 dimension",
                               m->name, p->name);
    }
    full[n++] = m->max_batch_size;
  }
  for (size_t i = 0; i < count; i++) full[n++] = dims[i];
  bool ok = !p->rank_dynamic && (size_t)p->rank == n;
  for (size_t i = 0; ok && i < n; i++) {
    bool batch = m->max_batch_size > 0 && i == 0;
    if (exact || (!batch && full[i] != -1)) ok = dim_matches(p, (int64_t)i, full[i]);
  }
  if (ok) return NULL;
  nrd_bu_shape_string(p->dims, (uint32_t)p->rank, ms, sizeof ms);
  nrd_bu_shape_string(full, (uint32_t)n, cs, sizeof cs);
  if (m->max_batch_size > 0) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             "model '%s', tensor '%s': the model expects %lld dimensions (shape %s) but the model "
                             "configuration specifies %zu dimensions (an initial batch dimension because "
                             "max_batch_size > 0 followed by the explicit tensor shape, making complete shape %s)",
                             m->name, p->name, (long long)p->rank, ms, n, cs);
  }
  return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                           "model '%s', tensor '%s': the model expects %lld dimensions (shape %s) but the model "
                           "configuration specifies %zu dimensions (shape %s)",
                           m->name, p->name, (long long)p->rank, ms, n, cs);
}

/* A configured tensor's name and datatype; 'section' is "input"/"output". */
static TRITONSERVER_Error *io_read(const ov_model *m, const json_t *io, const char *section, ov_io *out) {
  const char *name = json_string_value(json_object_get(io, "name"));
  const char *type = json_string_value(json_object_get(io, "data_type"));
  if (name == NULL) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "openvino: model '%s': an %s has no name", m->name,
                             section);
  }
  TRITONSERVER_DataType dt = TRITONSERVER_TYPE_INVALID;
  if (type != NULL && strncmp(type, "TYPE_", 5) == 0) dt = TRITONSERVER_StringToDataType(type + 5);
  if (strcmp(type != NULL ? type : "", "TYPE_STRING") == 0) dt = TRITONSERVER_TYPE_BYTES;
  if (ov_element_of(dt) == NRD_OV_DYNAMIC) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL, "unsupported datatype %s for %s '%s' for model '%s'",
                             type != NULL ? type : "(none)", section, name, m->name);
  }
  out->name = strdup(name);
  if (out->name == NULL) return oom();
  out->datatype = dt;
  return NULL;
}

/* ---- parameters ---------------------------------------------------------- */

/* A parameter's value, lower-cased into 'buf' ("" when absent). */
static const char *param_lower(const json_t *config, const char *key, char *buf, size_t cap) {
  const char *v = nrd_bu_config_parameter(config, key);
  size_t i = 0;
  for (; v != NULL && v[i] != '\0' && i + 1 < cap; i++) buf[i] = (char)tolower((unsigned char)v[i]);
  buf[i] = '\0';
  return buf;
}

static bool all_digits(const char *s) {
  if (s[0] == '\0') return false;
  for (; *s != '\0'; s++) {
    if (!isdigit((unsigned char)*s)) return false;
  }
  return true;
}

/* One CPU property from the configuration, as Triton's backend maps it;
 * '*key' NULL when the parameter is absent. 'value' gets OpenVINO's value. */
static TRITONSERVER_Error *cpu_property(const json_t *config, const char *param, const char **key, char *value,
                                        size_t cap) {
  char v[64];
  param_lower(config, param, v, sizeof v);
  *key = NULL;
  if (v[0] == '\0') return NULL;
  if (strcmp(param, "INFERENCE_NUM_THREADS") == 0 || strcmp(param, "COMPILATION_NUM_THREADS") == 0) {
    if (!all_digits(v) || strlen(v) > 9) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                               "expected the parameter '%s' to be a non-negative number, got %s", param, v);
    }
    *key = param;
    snprintf(value, cap, "%d", atoi(v));
  } else if (strcmp(param, "HINT_BF16") == 0) {
    if (strcmp(v, "yes") != 0) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "expected the parameter '%s' to be YES, got %s", param,
                               v);
    }
    *key = "INFERENCE_PRECISION_HINT";
    snprintf(value, cap, "bf16");
  } else if (strcmp(param, "NUM_STREAMS") == 0) {
    if (strcmp(v, "auto") == 0 || strcmp(v, "numa") == 0) {
      snprintf(value, cap, "%s", strcmp(v, "auto") == 0 ? "AUTO" : "NUMA");
    } else if (all_digits(v) && strlen(v) <= 9) {
      snprintf(value, cap, "%d", atoi(v));
    } else {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                               "expected the parameter '%s' to be either AUTO/NUMA/<int_value>, got %s", param, v);
    }
    *key = param;
  } else if (strcmp(param, "PERFORMANCE_HINT") == 0) {
    if (strcmp(v, "latency") == 0 || strcmp(v, "throughput") == 0 || strcmp(v, "cumulative_throughput") == 0) {
      for (size_t i = 0; v[i] != '\0'; i++) v[i] = (char)toupper((unsigned char)v[i]);
      snprintf(value, cap, "%s", v);
    } else {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                               "expected the parameter '%s' to be LATENCY/THROUGHPUT/CUMULATIVE_THROUGHPUT, got %s",
                               param, v);
    }
    *key = param;
  }
  return NULL;
}

/* The CPU properties of the configuration, set on the model's core. */
static TRITONSERVER_Error *configure_core(ov_model *m, const json_t *config) {
  static const char *const kParams[] = {"INFERENCE_NUM_THREADS", "COMPILATION_NUM_THREADS", "HINT_BF16", "NUM_STREAMS",
                                        "PERFORMANCE_HINT"};
  for (size_t i = 0; i < sizeof kParams / sizeof kParams[0]; i++) {
    const char *key = NULL;
    char value[64];
    TRITONSERVER_Error *err = cpu_property(config, kParams[i], &key, value, sizeof value);
    if (err == NULL && key != NULL && strcmp(key, "COMPILATION_NUM_THREADS") == 0) {
      /* OpenVINO 2025.2's CPU plugin has no such property and would fail
       * the load (as it does under Triton); checked, then left out. */
      NRD_BU_LOG(TRITONSERVER_LOG_INFO, "openvino: model '%s': COMPILATION_NUM_THREADS %s is not a property of the CPU "
                 "plugin; ignored", m->name, value);
      continue;
    }
    if (err == NULL && key != NULL) {
      err = ov_runtime_error(m->rt, m->rt->api.ov_core_set_property(m->core, "CPU", key, value),
                             TRITONSERVER_ERROR_INVALID_ARG, "configuring openvino core");
    }
    if (err != NULL) return err;
  }
  return NULL;
}

/* ---- the model file ------------------------------------------------------ */

static TRITONSERVER_Error *model_path(TRITONBACKEND_Model *model, const json_t *config, const char *name, char **out) {
  TRITONBACKEND_ArtifactType type;
  const char *location = NULL;
  uint64_t version = 0;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelRepository(model, &type, &location);
  if (err == NULL) err = TRITONBACKEND_ModelVersion(model, &version);
  if (err != NULL) return err;
  if (type != TRITONBACKEND_ARTIFACT_FILESYSTEM) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_UNSUPPORTED,
                             "openvino: model '%s': only models on the file system can be loaded", name);
  }
  const char *file = json_string_value(json_object_get(config, "default_model_filename"));
  if (file == NULL || file[0] == '\0') file = "model.xml";
  size_t cap = strlen(location) + strlen(file) + 32;
  char *path = malloc(cap);
  if (path == NULL) return oom();
  snprintf(path, cap, "%s/%llu/%s", location, (unsigned long long)version, file);
  struct stat st;
  if (stat(path, &st) != 0) {
    err = nrd_bu_error_newf(TRITONSERVER_ERROR_UNAVAILABLE, "unable to find '%s' for model '%s'", path, name);
    free(path);
    return err;
  }
  *out = path;
  return NULL;
}

/* ---- checks and preprocessing -------------------------------------------- */

/* Replaces 'm''s source model with one whose inputs take the configured
 * shapes: RESHAPE_IO_LAYERS puts the configured dims (-1 dynamic) after
 * the batch dimension, and max_batch_size > 0 fixes the batch dimension
 * to max_batch_size, as Triton's backend (ov::set_batch) does. */
static TRITONSERVER_Error *reshape_inputs(ov_model *m, nrd_ov_model_t *model, const port *ports, size_t n,
                                          const int64_t (*want)[NRD_OV_MAX_RANK], const size_t *want_count,
                                          const size_t *config_index) {
  const nrd_ov_api *api = &m->rt->api;
  nrd_ov_partial_shape_t *shapes = calloc(n > 0 ? n : 1, sizeof *shapes);
  const char **names = calloc(n > 0 ? n : 1, sizeof *names);
  TRITONSERVER_Error *err = shapes == NULL || names == NULL ? oom() : NULL;
  size_t made = 0;
  for (size_t i = 0; err == NULL && i < n; i++) {
    const port *p = &ports[i];
    nrd_ov_dimension_t dims[NRD_OV_MAX_RANK];
    for (int64_t d = 0; d < p->rank; d++) {
      dims[d].min = p->dims[d] >= 0 ? p->dims[d] : p->lo[d];
      dims[d].max = p->dims[d] >= 0 ? p->dims[d] : p->hi[d];
    }
    size_t at = m->max_batch_size > 0 ? 1 : 0;
    size_t c = config_index[i];
    if (m->reshape_io) {
      if (p->rank_dynamic || (size_t)p->rank != at + want_count[c]) {
        char cs[256];
        nrd_bu_shape_string(want[c], (uint32_t)want_count[c], cs, sizeof cs);
        err = nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                                "model '%s', tensor '%s': RESHAPE_IO_LAYERS: the model's input has %lld dimensions, "
                                "the configuration gives %zu after the batch dimension (%s)",
                                m->name, p->name, (long long)p->rank, want_count[c], cs);
        break;
      }
      for (size_t k = 0; k < want_count[c]; k++) {
        int64_t v = want[c][k];
        if (v <= 0 && v != -1) {
          err = nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL, "openvino backend does not support dimensions values "
                                  "other than `-1` or positive integers");
          break;
        }
        dims[at + k].min = v;
        dims[at + k].max = v;
      }
      if (err != NULL) break;
    }
    if (m->max_batch_size > 0 && p->rank >= 1) {
      dims[0].min = m->max_batch_size;
      dims[0].max = m->max_batch_size;
    }
    names[i] = p->name;
    err = ov_runtime_error(m->rt, api->ov_partial_shape_create(p->rank, dims, &shapes[i]), TRITONSERVER_ERROR_INTERNAL,
                           "setting shape");
    if (err == NULL) made++;
  }
  if (err == NULL) {
    err = ov_runtime_error(m->rt, api->ov_model_reshape(model, names, shapes, n), TRITONSERVER_ERROR_INVALID_ARG,
                           m->max_batch_size > 0 ? "setting max batch size" : "reshaping inputs");
  }
  for (size_t i = 0; shapes != NULL && i < made; i++) api->ov_partial_shape_free(&shapes[i]);
  free(shapes);
  free(names);
  return err;
}

/* Checks the configured inputs against the model and reshapes it. */
static TRITONSERVER_Error *check_inputs(ov_model *m, const json_t *config, nrd_ov_model_t *model) {
  port *ports = NULL;
  size_t n = 0;
  TRITONSERVER_Error *err = ports_read(m->rt, model, true, &ports, &n);
  if (err != NULL) return err;
  const json_t *ios = json_object_get(config, "input");
  size_t want = json_array_size(ios);
  if (n != want) {
    err = nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                            "unable to load model '%s', configuration expects %zu inputs, model provides %zu", m->name,
                            want, n);
    ports_free(m->rt, ports, n);
    return err;
  }
  m->inputs = calloc(want > 0 ? want : 1, sizeof *m->inputs);
  int64_t (*dims)[NRD_OV_MAX_RANK] = calloc(want > 0 ? want : 1, sizeof *dims);
  size_t *dims_count = calloc(want > 0 ? want : 1, sizeof *dims_count);
  size_t *config_index = calloc(n > 0 ? n : 1, sizeof *config_index);
  if (m->inputs == NULL || dims == NULL || dims_count == NULL || config_index == NULL) err = oom();
  for (size_t i = 0; err == NULL && i < want; i++) {
    const json_t *io = json_array_get(ios, i);
    err = io_read(m, io, "input", &m->inputs[i]);
    if (err == NULL) m->input_count++;
    const port *p = err == NULL ? port_named(ports, n, m->inputs[i].name) : NULL;
    if (err == NULL && p == NULL) err = unexpected("input", m->inputs[i].name, ports, n);
    if (err == NULL) err = config_dims(io, m->inputs[i].name, dims[i], &dims_count[i]);
    if (err == NULL) config_index[p - ports] = i;
    if (err == NULL && !m->reshape_io) err = compare_dims(m, p, dims[i], dims_count[i], false);
  }
  if (err == NULL && (m->reshape_io || m->max_batch_size > 0) && n > 0) {
    err = reshape_inputs(m, model, ports, n, (const int64_t(*)[NRD_OV_MAX_RANK])dims, dims_count, config_index);
  }
  free(dims);
  free(dims_count);
  free(config_index);
  ports_free(m->rt, ports, n);
  return err;
}

/* Checks the configured outputs against the (reshaped) model. */
static TRITONSERVER_Error *check_outputs(ov_model *m, const json_t *config, const nrd_ov_model_t *model) {
  port *ports = NULL;
  size_t n = 0;
  TRITONSERVER_Error *err = ports_read(m->rt, model, false, &ports, &n);
  if (err != NULL) return err;
  const json_t *ios = json_object_get(config, "output");
  size_t want = json_array_size(ios);
  m->outputs = calloc(want > 0 ? want : 1, sizeof *m->outputs);
  if (m->outputs == NULL) err = oom();
  for (size_t i = 0; err == NULL && i < want; i++) {
    const json_t *io = json_array_get(ios, i);
    int64_t dims[NRD_OV_MAX_RANK];
    size_t count = 0;
    err = io_read(m, io, "output", &m->outputs[i]);
    if (err == NULL) m->output_count++;
    const port *p = err == NULL ? port_named(ports, n, m->outputs[i].name) : NULL;
    if (err == NULL && p == NULL) err = unexpected("output", m->outputs[i].name, ports, n);
    if (err == NULL) err = config_dims(io, m->outputs[i].name, dims, &count);
    if (err == NULL) err = compare_dims(m, p, dims, count, true);
  }
  ports_free(m->rt, ports, n);
  return err;
}

/* The tensors' element types set to the configured datatypes (OpenVINO
 * converts at the model's edges); '*out' is the new model. */
static TRITONSERVER_Error *preprocess(ov_model *m, const nrd_ov_model_t *model, nrd_ov_model_t **out) {
  const nrd_ov_api *api = &m->rt->api;
  nrd_ov_ppp_t *ppp = NULL;
  TRITONSERVER_Error *err = ov_runtime_error(m->rt, api->ov_preprocess_prepostprocessor_create(model, &ppp),
                                             TRITONSERVER_ERROR_INTERNAL, "apply model input preprocessing");
  for (size_t i = 0; err == NULL && i < m->input_count; i++) {
    nrd_ov_ppp_input_t *info = NULL;
    nrd_ov_ppp_input_tensor_t *tensor = NULL;
    nrd_ov_status st = api->ov_preprocess_prepostprocessor_get_input_info_by_name(ppp, m->inputs[i].name, &info);
    if (st == NRD_OV_OK) st = api->ov_preprocess_input_info_get_tensor_info(info, &tensor);
    if (st == NRD_OV_OK) {
      st = api->ov_preprocess_input_tensor_info_set_element_type(tensor, ov_element_of(m->inputs[i].datatype));
    }
    err = ov_runtime_error(m->rt, st, TRITONSERVER_ERROR_INTERNAL, "setting precision for input");
    if (tensor != NULL) api->ov_preprocess_input_tensor_info_free(tensor);
    if (info != NULL) api->ov_preprocess_input_info_free(info);
  }
  for (size_t i = 0; err == NULL && i < m->output_count; i++) {
    nrd_ov_ppp_output_t *info = NULL;
    nrd_ov_ppp_output_tensor_t *tensor = NULL;
    nrd_ov_status st = api->ov_preprocess_prepostprocessor_get_output_info_by_name(ppp, m->outputs[i].name, &info);
    if (st == NRD_OV_OK) st = api->ov_preprocess_output_info_get_tensor_info(info, &tensor);
    if (st == NRD_OV_OK) st = api->ov_preprocess_output_set_element_type(tensor, ov_element_of(m->outputs[i].datatype));
    err = ov_runtime_error(m->rt, st, TRITONSERVER_ERROR_INTERNAL, "setting precision for output");
    if (tensor != NULL) api->ov_preprocess_output_tensor_info_free(tensor);
    if (info != NULL) api->ov_preprocess_output_info_free(info);
  }
  if (err == NULL) {
    err = ov_runtime_error(m->rt, api->ov_preprocess_prepostprocessor_build(ppp, out), TRITONSERVER_ERROR_INTERNAL,
                           "apply model preprocessing");
  }
  if (ppp != NULL) api->ov_preprocess_prepostprocessor_free(ppp);
  return err;
}

/* ---- auto-complete ------------------------------------------------------- */

/* [{name, data_type, dims}] for a model's ports: dims after the batch
 * dimension when the model batches, each the model's own (-1 where
 * dynamic). Triton's backend writes -1 for every dimension of a shape with
 * any dynamic one, which its own exact check of outputs then refuses. */
static json_t *io_list(const ov_model *m, const port *ports, size_t n, TRITONSERVER_Error **err) {
  json_t *arr = json_array();
  for (size_t i = 0; arr != NULL && i < n; i++) {
    TRITONSERVER_DataType dt = ov_triton_type_of(ports[i].element);
    if (dt == TRITONSERVER_TYPE_INVALID) {
      *err = nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "openvino: model '%s': tensor '%s' has an element type "
                               "the backend does not serve; give it in the configuration", m->name, ports[i].name);
      json_decref(arr);
      return NULL;
    }
    json_t *dims = json_array();
    for (int64_t d = m->max_batch_size > 0 ? 1 : 0; dims != NULL && d < ports[i].rank; d++) {
      json_array_append_new(dims, json_integer(ports[i].dims[d]));
    }
    char type[32];
    snprintf(type, sizeof type, "TYPE_%s", TRITONSERVER_DataTypeString(dt));
    json_t *t = dims == NULL ? NULL : json_pack("{s:s, s:s, s:o}", "name", ports[i].name, "data_type", type, "dims", dims);
    if (t == NULL || json_array_append_new(arr, t) != 0) {
      json_decref(arr);
      *err = oom();
      return NULL;
    }
  }
  if (arr == NULL) *err = oom();
  return arr;
}

/* Fills the inputs, and the outputs, the configuration leaves out from the
 * model (Triton's backend completes a list only when it is empty) and
 * hands the configuration back to the server. max_batch_size is left as
 * configured: Triton's backend sets it only for models whose layout names a
 * batch dimension, which OpenVINO's C API does not show. */
static TRITONSERVER_Error *auto_complete(TRITONBACKEND_Model *model, const ov_model *m, const nrd_ov_model_t *source,
                                         json_t *config) {
  TRITONSERVER_Error *err = NULL;
  for (int k = 0; err == NULL && k < 2; k++) {
    const char *section = k == 0 ? "input" : "output";
    if (json_array_size(json_object_get(config, section)) > 0) {
      NRD_BU_LOG(TRITONSERVER_LOG_INFO, "openvino: skipping %s model configuration auto-complete for '%s': %s "
                 "already specified", section, m->name, section);
      continue;
    }
    port *ports = NULL;
    size_t n = 0;
    err = ports_read(m->rt, source, k == 0, &ports, &n);
    json_t *list = err == NULL ? io_list(m, ports, n, &err) : NULL;
    if (list != NULL && json_object_set_new(config, section, list) != 0) err = oom();
    ports_free(m->rt, ports, n);
  }
  if (err != NULL) return err;
  char *text = json_dumps(config, JSON_COMPACT);
  if (text == NULL) return oom();
  TRITONSERVER_Message *message = NULL;
  err = TRITONSERVER_MessageNewFromSerializedJson(&message, text, strlen(text));
  free(text);
  if (err != NULL) return err;
  err = TRITONBACKEND_ModelSetConfig(model, 1, message);
  nrd_bu_error_log_and_delete(TRITONSERVER_MessageDelete(message), "openvino: deleting a message");
  return err;
}

/* ---- model --------------------------------------------------------------- */

/* Everything after the configuration is read: core, file, checks, compile. */
static TRITONSERVER_Error *load(TRITONBACKEND_Model *model, ov_model *m, json_t *config) {
  const nrd_ov_api *api = &m->rt->api;
  char yes[16];
  m->skip_dynamic_batch = strcmp(param_lower(config, "SKIP_OV_DYNAMIC_BATCHSIZE", yes, sizeof yes), "yes") == 0;
  m->batch_padding = strcmp(param_lower(config, "ENABLE_BATCH_PADDING", yes, sizeof yes), "yes") == 0;
  m->reshape_io = strcmp(param_lower(config, "RESHAPE_IO_LAYERS", yes, sizeof yes), "yes") == 0;
  TRITONSERVER_Error *err =
      ov_runtime_error(m->rt, api->ov_core_create(&m->core), TRITONSERVER_ERROR_INTERNAL, "creating the core");
  if (err != NULL) return err;
  const char *ext = nrd_bu_config_parameter(config, "CPU_EXTENSION_PATH");
  if (ext != NULL && ext[0] != '\0') {
    err = ov_runtime_error(m->rt, api->ov_core_add_extension(m->core, ext), TRITONSERVER_ERROR_INVALID_ARG,
                           " loading custom CPU extensions");
    if (err != NULL) return err;
    NRD_BU_LOG(TRITONSERVER_LOG_INFO, "openvino: model '%s': CPU (MKLDNN) extensions is loaded %s", m->name, ext);
  }
  char *path = NULL;
  err = model_path(model, config, m->name, &path);
  if (err != NULL) return err;
  nrd_ov_model_t *source = NULL, *built = NULL;
  err = ov_runtime_error(m->rt, api->ov_core_read_model(m->core, path, NULL, &source), TRITONSERVER_ERROR_INVALID_ARG,
                         "reading model");
  bool complete = false;
  if (err == NULL) err = TRITONBACKEND_ModelAutoCompleteConfig(model, &complete);
  if (err == NULL && complete) err = auto_complete(model, m, source, config);
  if (err == NULL) err = check_inputs(m, config, source);
  if (err == NULL) err = check_outputs(m, config, source);
  if (err == NULL) err = preprocess(m, source, &built);
  if (err == NULL) err = configure_core(m, config);
  if (err == NULL) {
    /* Triton's backend lets OpenVINO batch on its own only for a model
     * that batches and does not skip it. */
    const char *auto_batch = m->max_batch_size > 0 && !m->skip_dynamic_batch ? "YES" : "NO";
    err = ov_runtime_error(m->rt,
                           api->ov_core_compile_model(m->core, built, "CPU", 2, &m->compiled, "ALLOW_AUTO_BATCHING",
                                                      auto_batch),
                           TRITONSERVER_ERROR_INVALID_ARG, "loading model");
  }
  if (built != NULL) api->ov_model_free(built);
  if (source != NULL) api->ov_model_free(source);
  if (err == NULL) {
    NRD_BU_LOG(TRITONSERVER_LOG_INFO, "openvino: model '%s' compiled for the CPU from %s", m->name, path);
  }
  free(path);
  return err;
}

TRITONSERVER_Error *ov_model_new(TRITONBACKEND_Model *model, const ov_runtime *rt, ov_model **out) {
  *out = NULL;
  const char *name = NULL;
  json_t *config = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelName(model, &name);
  if (err == NULL) err = nrd_bu_model_config(model, &config);
  if (err != NULL) return err;
  ov_model *m = calloc(1, sizeof *m);
  if (m == NULL || (m->name = strdup(name)) == NULL) {
    free(m);
    json_decref(config);
    return oom();
  }
  m->rt = rt;
  err = nrd_bu_config_max_batch_size(config, &m->max_batch_size);
  if (err == NULL) err = load(model, m, config);
  json_decref(config);
  if (err != NULL) {
    ov_model_free(m);
    return err;
  }
  *out = m;
  return NULL;
}

void ov_model_free(ov_model *m) {
  if (m == NULL) return;
  if (m->compiled != NULL) m->rt->api.ov_compiled_model_free(m->compiled);
  if (m->core != NULL) m->rt->api.ov_core_free(m->core);
  for (size_t i = 0; i < m->input_count; i++) free(m->inputs[i].name);
  for (size_t i = 0; i < m->output_count; i++) free(m->outputs[i].name);
  free(m->inputs);
  free(m->outputs);
  free(m->name);
  free(m);
}

/* ---- instance ------------------------------------------------------------ */

TRITONSERVER_Error *ov_instance_new(TRITONBACKEND_ModelInstance *instance, const ov_model *m, ov_instance **out) {
  *out = NULL;
  const char *name = NULL;
  TRITONSERVER_InstanceGroupKind kind;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelInstanceName(instance, &name);
  if (err == NULL) err = TRITONBACKEND_ModelInstanceKind(instance, &kind);
  if (err != NULL) return err;
  if (kind != TRITONSERVER_INSTANCEGROUPKIND_CPU) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             "unable to load model '%s', Triton openVINO backend supports only CPU device", m->name);
  }
  ov_instance *inst = calloc(1, sizeof *inst);
  if (inst == NULL || (inst->name = strdup(name)) == NULL) {
    free(inst);
    return oom();
  }
  inst->model = m;
  err = ov_runtime_error(m->rt, m->rt->api.ov_compiled_model_create_infer_request(m->compiled, &inst->request),
                         TRITONSERVER_ERROR_INTERNAL, "creating infer request object");
  if (err != NULL) {
    ov_instance_free(inst);
    return err;
  }
  *out = inst;
  return NULL;
}

void ov_instance_free(ov_instance *inst) {
  if (inst == NULL) return;
  if (inst->request != NULL) inst->model->rt->api.ov_infer_request_free(inst->request);
  free(inst->name);
  free(inst);
}
