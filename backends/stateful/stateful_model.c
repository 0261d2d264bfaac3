/*
 * The stateful backend's configuration and its check against the ONNX
 * model: every error names the parameter or tensor at fault.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nereid/backend_utils.h"
#include "ort_backend.h"
#include "stateful.h"

static TRITONSERVER_Error *oom(void) {
  return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, "stateful: out of memory");
}

static TRITONSERVER_Error *bad(const char *model, const char *what) {
  return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "stateful: model '%s': %s", model, what);
}

static const char *type_name(ONNXTensorElementDataType et) {
  TRITONSERVER_DataType dt = ort_triton_type(et);
  return dt == TRITONSERVER_TYPE_INVALID ? "(no Triton type)" : TRITONSERVER_DataTypeString(dt);
}

/* ---- model ------------------------------------------------------------- */

/* The ONNX file: onnx_file_name (a file name in the version folder), or
 * default_model_filename, or model.onnx. */
static TRITONSERVER_Error *model_path(TRITONBACKEND_Model *model, const json_t *config, const char *name, char **out) {
  const char *file = nrd_bu_config_parameter(config, "onnx_file_name");
  if (file != NULL && strchr(file, '/') != NULL) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             "stateful: model '%s': onnx_file_name '%s' must "
                             "be a file name in the version folder",
                             name, file);
  }
  return ort_model_file(model, config, name, file, "onnx_file_name", out);
}

/* One of 'choices' (NULL-terminated) for parameter 'key', as an index;
 * 'dflt' when absent. */
static TRITONSERVER_Error *choice(const json_t *config, const char *model, const char *key, const char *const *choices,
                                  int dflt, int *out) {
  const char *v = nrd_bu_config_parameter(config, key);
  *out = dflt;
  if (v == NULL) return NULL;
  for (int i = 0; choices[i] != NULL; i++) {
    if (strcmp(v, choices[i]) == 0) {
      *out = i;
      return NULL;
    }
  }
  char list[128] = "";
  for (int i = 0; choices[i] != NULL; i++) {
    size_t n = strlen(list);
    snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "", choices[i]);
  }
  return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                           "stateful: model '%s': parameter %s: '%s' is not "
                           "one of %s",
                           model, key, v, list);
}

static TRITONSERVER_Error *flag(const json_t *config, const char *key, bool dflt, bool *out) {
  int64_t v = 0;
  TRITONSERVER_Error *err = nrd_bu_config_parameter_int(config, key, dflt ? 1 : 0, 0, 1, &v);
  *out = v != 0;
  return err;
}

static TRITONSERVER_Error *read_sequence(const json_t *config, sf_model *m) {
  const json_t *sb = json_object_get(config, "sequence_batching");
  const json_t *oldest = json_object_get(sb, "oldest");
  if (!json_is_object(sb) || !json_is_object(oldest)) {
    return bad(m->name, "sequence_batching with the oldest strategy is required (the "
                        "only strategy the stateful backend supports)");
  }
  int64_t slots = 0;
  const json_t *v = json_object_get(oldest, "max_candidate_sequences");
  if (v != NULL) {
    TRITONSERVER_Error *err = nrd_bu_json_int(v, "sequence_batching.oldest.max_candidate_sequences", &slots);
    if (err != NULL) return err;
  }
  if (slots <= 0) slots = m->max_batch_size;
  if (slots > (1 << 24)) {
    return bad(m->name, "sequence_batching.oldest.max_candidate_sequences is "
                        "too large");
  }
  m->max_slots = (long)slots;
  int64_t idle_us = 0;
  v = json_object_get(sb, "max_sequence_idle_microseconds");
  if (v != NULL) {
    TRITONSERVER_Error *err = nrd_bu_json_int(v, "sequence_batching.max_sequence_idle_microseconds", &idle_us);
    if (err != NULL) return err;
  }
  /* Triton's default idle time is one second. */
  m->idle_ns = (uint64_t)(idle_us > 0 ? idle_us : 1000000) * 1000u;
  const json_t *list = json_object_get(sb, "control_input");
  size_t i;
  const json_t *ci;
  json_array_foreach(list, i, ci) {
    const char *name = json_string_value(json_object_get(ci, "name"));
    size_t j;
    const json_t *c;
    json_array_foreach(json_object_get(ci, "control"), j, c) {
      const char *kind = json_string_value(json_object_get(c, "kind"));
      if (kind == NULL || name == NULL) continue;
      if (strcmp(kind, "CONTROL_SEQUENCE_START") == 0) {
        free(m->start_name);
        m->start_name = strdup(name);
        if (m->start_name == NULL) return oom();
      } else if (strcmp(kind, "CONTROL_SEQUENCE_CORRID") == 0) {
        const char *dt = json_string_value(json_object_get(c, "data_type"));
        m->corrid_string = dt != NULL && strcmp(dt, "TYPE_STRING") == 0;
      }
    }
  }
  if (m->start_name == NULL) {
    return bad(m->name, "sequence_batching.control_input: a CONTROL_SEQUENCE_START "
                        "control input (e.g. ResetSequence) is required to reset the "
                        "states");
  }
  return NULL;
}

/* The README's parameters. */
static TRITONSERVER_Error *read_parameters(const json_t *config, sf_model *m, bool gpu_kind) {
  char err_text[512];
  const char *pairs = nrd_bu_config_parameter(config, "state_pairs");
  if (pairs == NULL) {
    return bad(m->name, "parameter state_pairs is missing "
                        "(\"<<<State_In, State_Out>>> ...\")");
  }
  if (!sf_state_pairs_parse(pairs, &m->pairs, &m->pair_count, err_text, sizeof err_text)) {
    return bad(m->name, err_text);
  }
  static const char *const eps[] = {"trt", "cuda", "cpu", NULL};
  static const char *const precisions[] = {"fp32", "fp16", NULL};
  static const char *const levels[] = {"NONE", "INFO", "VERBOSE", NULL};
  static const char *const streams[] = {"NONE", "INFO", "VERBOSE", NULL};
  int ep = 0, precision = 0;
  TRITONSERVER_Error *err = choice(config, m->name, "ort_ep", eps, 0, &ep);
  if (err == NULL) {
    err = choice(config, m->name, "compute_precision", precisions, 0, &precision);
  }
  if (err == NULL) {
    err = choice(config, m->name, "logging_level", levels, SF_LOG_INFO, &m->log_level);
  }
  if (err == NULL) {
    err = choice(config, m->name, "batch_info_logging_level", streams, SF_LOG_INFO, &m->batch_info_level);
  }
  if (err == NULL) {
    err = choice(config, m->name, "detailed_metrics_logging_level", streams, SF_LOG_VERBOSE, &m->detailed_level);
  }
  if (err == NULL && (m->batch_info_level == SF_LOG_NONE || m->detailed_level == SF_LOG_NONE)) {
    err = bad(m->name, "parameters batch_info_logging_level and "
                       "detailed_metrics_logging_level take INFO or VERBOSE");
  }
  if (err == NULL) err = flag(config, "store_states_as_fp16", false, &m->fp16_states);
  if (err == NULL) err = flag(config, "infer_end_requests", true, &m->infer_end);
  if (err == NULL) err = flag(config, "always_pad_to_max_batch", false, &m->pad_to_max);
  bool trt_cache = false;
  if (err == NULL) err = flag(config, "enable_trt_caching", false, &trt_cache);
  bool cuda_graph = false;
  if (err == NULL) err = flag(config, "enable_cuda_graph", false, &cuda_graph);
  if (err == NULL) {
    err =
        nrd_bu_config_parameter_int(config, "metric_logging_frequency_seconds", 0, 0, 86400 * 365, &m->metric_seconds);
  }
  if (err == NULL) {
    err = nrd_bu_config_parameter_int(config, "error_inject_rate", 0, 0, 100, &m->error_inject_rate);
  }
  if (err != NULL) return err;
  double ratio = 0.9;
  const char *r = nrd_bu_config_parameter(config, "max_candidate_sequence_use_ratio");
  if (r != NULL) {
    char *end = NULL;
    ratio = strtod(r, &end);
    if (end == r || *end != '\0' || !(ratio > 0.0 && ratio <= 1.0)) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                               "stateful: model '%s': parameter "
                               "max_candidate_sequence_use_ratio: '%s' is "
                               "not a number in (0, 1]",
                               m->name, r);
    }
  }
  m->use_limit = (long)floor(ratio * (double)m->max_slots);
  if (m->use_limit < 1) m->use_limit = 1;
  if (!sf_lazy_parse(nrd_bu_config_parameter(config, "initial_buffer_size"),
                     nrd_bu_config_parameter(config, "subsequent_buffer_size"),
                     nrd_bu_config_parameter(config, "buffer_alloc_threshold"),
                     nrd_bu_config_parameter(config, "buffer_dealloc_threshold"), m->max_slots, &m->lazy, err_text,
                     sizeof err_text)) {
    return bad(m->name, err_text);
  }
  /* What only a GPU build of the README's backend does: accepted, said. */
  static const char *const gpu_only[] = {"ort_ep",        "compute_precision", "enable_trt_caching",
                                         "trt_cache_dir", "enable_cuda_graph", NULL};
  bool any_gpu = false;
  for (int i = 0; gpu_only[i] != NULL; i++) {
    any_gpu = any_gpu || nrd_bu_config_parameter(config, gpu_only[i]) != NULL;
  }
  /* KIND_GPU instances (ort_instance_open): cuda runs ONNX Runtime's CUDA
   * provider, cpu the CPU one, trt is refused (no TensorRT here). */
  m->options.gpu_ep = ep == 0 ? ORT_GPU_EP_TENSORRT : ep == 1 ? ORT_GPU_EP_CUDA : ORT_GPU_EP_CPU;
  if (gpu_kind && (precision != 0 || trt_cache || cuda_graph)) {
    NRD_BU_LOG(TRITONSERVER_LOG_INFO,
               "stateful: model '%s': compute_precision '%s', enable_trt_caching and enable_cuda_graph are not "
               "applied: GPU instances run ONNX Runtime's CUDA execution provider in fp32 without CUDA graphs",
               m->name, precisions[precision]);
  }
  if (!gpu_kind && any_gpu) {
    NRD_BU_LOG(TRITONSERVER_LOG_INFO,
               "stateful: model '%s': ort_ep '%s', compute_precision '%s', "
               "enable_trt_caching, trt_cache_dir and enable_cuda_graph only "
               "apply to GPU instances; KIND_CPU runs on ONNX Runtime's CPU "
               "execution provider in fp32",
               m->name, eps[ep], precisions[precision]);
  }
  if (m->error_inject_rate > 0) {
    NRD_BU_LOG(TRITONSERVER_LOG_INFO,
               "stateful: model '%s': error_inject_rate %lld accepted; "
#ifdef NRD_STATEFUL_ERROR_INJECT
               "this test build fails that percentage of executions",
#else
               "as in normal builds it injects nothing",
#endif
               m->name, (long long)m->error_inject_rate);
  }
  return NULL;
}

/* Whether any instance group asks for a GPU. */
static bool wants_gpu(const json_t *config) {
  size_t i;
  const json_t *g;
  json_array_foreach(json_object_get(config, "instance_group"), i, g) {
    const char *kind = json_string_value(json_object_get(g, "kind"));
    if (kind != NULL && strcmp(kind, "KIND_GPU") == 0) return true;
  }
  return false;
}

TRITONSERVER_Error *sf_model_new(TRITONBACKEND_Model *model, const ort_runtime *rt, void **out) {
  *out = NULL;
  const char *name = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelName(model, &name);
  if (err != NULL) return err;
  json_t *config = NULL;
  err = nrd_bu_model_config(model, &config);
  if (err != NULL) return err;
  sf_model *m = calloc(1, sizeof *m);
  if (m == NULL) {
    json_decref(config);
    return oom();
  }
  m->rt = rt;
  m->name = strdup(name);
  if (m->name == NULL) err = oom();
  if (err == NULL) err = nrd_bu_config_max_batch_size(config, &m->max_batch_size);
  if (err == NULL && m->max_batch_size < 1) {
    err = bad(m->name, "max_batch_size must be at least 1: sequences are "
                       "batched along the -1 dimension");
  }
  if (err == NULL) err = model_path(model, config, m->name, &m->path);
  if (err == NULL) err = read_sequence(config, m);
  if (err == NULL) err = read_parameters(config, m, wants_gpu(config));
  if (err == NULL) err = ort_session_options_read(config, &m->options);
  json_decref(config);
  if (err != NULL) {
    sf_model_free(m);
    return err;
  }
  *out = m;
  return NULL;
}

void sf_model_free(void *model_state) {
  sf_model *m = model_state;
  if (m == NULL) return;
  sf_state_pairs_free(m->pairs, m->pair_count);
  free(m->start_name);
  free(m->path);
  free(m->name);
  free(m);
}

/* ---- instance: the session against the configuration -------------------- */

/* Fills 'io' from a session tensor; exactly one dynamic dimension. */
static TRITONSERVER_Error *describe(const sf_model *m, const char *what, const ort_tensor_info *t, sf_io *io) {
  memset(io, 0, sizeof *io);
  io->name = t->name;
  io->et = t->type;
  io->dt = ort_triton_type(t->type);
  if (io->dt == TRITONSERVER_TYPE_INVALID || io->dt == TRITONSERVER_TYPE_BYTES) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             "stateful: model '%s': %s '%s' of %s has a type "
                             "the stateful backend cannot batch",
                             m->name, what, t->name, ort_file_of(m->path));
  }
  if (t->rank > SF_MAX_RANK) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             "stateful: model '%s': %s '%s' has too many "
                             "dimensions",
                             m->name, what, t->name);
  }
  io->rank = t->rank;
  io->elem = TRITONSERVER_DataTypeByteSize(io->dt);
  size_t dynamic = 0;
  for (size_t d = 0; d < t->rank; d++) {
    io->dims[d] = t->dims[d];
    if (t->dims[d] < 0) {
      dynamic++;
      io->axis = d;
    }
  }
  if (dynamic != 1) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             "stateful: model '%s': %s '%s' of %s has %zu "
                             "dynamic dimensions; it needs exactly one, the "
                             "batch dimension",
                             m->name, what, t->name, ort_file_of(m->path), dynamic);
  }
  io->outer = 1;
  io->inner = 1;
  for (size_t d = 0; d < t->rank; d++) {
    if (d < io->axis) io->outer *= io->dims[d];
    if (d > io->axis) io->inner *= io->dims[d];
  }
  return NULL;
}

/* Checks one configured input or output against the session. */
static TRITONSERVER_Error *check_config_tensor(const sf_model *m, const char *section, const json_t *entry,
                                               const ort_tensor_info *list, size_t n, sf_io *io) {
  const char *name = json_string_value(json_object_get(entry, "name"));
  if (name == NULL) return bad(m->name, "a configured tensor has no name");
  const ort_tensor_info *t = ort_session_find(list, n, name);
  if (t == NULL) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             "stateful: model '%s': %s '%s' is not an %s of "
                             "%s",
                             m->name, section, name, section, ort_file_of(m->path));
  }
  const json_t *dims = json_object_get(entry, "dims");
  size_t cfg_rank = json_array_size(dims);
  int64_t cfg[SF_MAX_RANK];
  size_t dynamic = 0;
  for (size_t d = 0; d < cfg_rank && d < SF_MAX_RANK; d++) {
    TRITONSERVER_Error *err = nrd_bu_json_int(json_array_get(dims, d), "dims", &cfg[d]);
    if (err != NULL) return err;
    dynamic += cfg[d] < 0;
  }
  if (dynamic != 1) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             "stateful: model '%s': %s '%s' has %zu -1 "
                             "dimensions in its dims; exactly one marks the "
                             "batch dimension",
                             m->name, section, name, dynamic);
  }
  /* Every dimension but the batch one comes from the configuration, as the
   * Stateful Backend takes them: a symbolic ONNX dimension the
   * configuration fixes is fixed; a fixed one must agree. The batch
   * dimension (-1 in the configuration) must be symbolic in the model. */
  bool fits = cfg_rank == t->rank && cfg_rank <= SF_MAX_RANK;
  for (size_t d = 0; fits && d < cfg_rank; d++)
    fits = cfg[d] < 0 ? t->dims[d] < 0 : (t->dims[d] < 0 || t->dims[d] == cfg[d]);
  if (!fits) {
    char a[128], b[128];
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             "stateful: model '%s': %s '%s' has dims %s in "
                             "the configuration, %s in %s (-1 there is symbolic; the configuration "
                             "must fix every dimension but the batch one, which must be symbolic)",
                             m->name, section, name, nrd_bu_shape_string(cfg, (uint32_t)cfg_rank, a, sizeof a),
                             nrd_bu_shape_string(t->dims, (uint32_t)t->rank, b, sizeof b), ort_file_of(m->path));
  }
  int64_t fixed[SF_MAX_RANK];
  memcpy(fixed, cfg, cfg_rank * sizeof *fixed);
  ort_tensor_info eff = *t;
  eff.dims = fixed;
  TRITONSERVER_Error *err = describe(m, section, &eff, io);
  if (err != NULL) return err;
  const char *dt_text = json_string_value(json_object_get(entry, "data_type"));
  TRITONSERVER_DataType cdt = dt_text != NULL && strncmp(dt_text, "TYPE_", 5) == 0
                                  ? TRITONSERVER_StringToDataType(dt_text + 5)
                                  : TRITONSERVER_TYPE_INVALID;
  if (cdt != io->dt) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             "stateful: model '%s': %s '%s' is %s in the "
                             "configuration, %s in %s",
                             m->name, section, name, dt_text != NULL ? dt_text : "(none)", type_name(io->et),
                             ort_file_of(m->path));
  }
  return NULL;
}

static TRITONSERVER_Error *check_section(const sf_model *m, const json_t *config, const char *section,
                                         const ort_tensor_info *list, size_t n, sf_io **out, size_t *count) {
  const json_t *entries = json_object_get(config, section);
  size_t k = json_array_size(entries);
  *out = calloc(k > 0 ? k : 1, sizeof **out);
  if (*out == NULL) return oom();
  *count = k;
  for (size_t i = 0; i < k; i++) {
    TRITONSERVER_Error *err = check_config_tensor(m, section, json_array_get(entries, i), list, n, &(*out)[i]);
    if (err != NULL) return err;
  }
  return NULL;
}

static TRITONSERVER_Error *check_states(sf_instance *inst) {
  const sf_model *m = inst->m;
  const ort_session *s = &inst->session;
  size_t n = m->pair_count;
  inst->state_in = calloc(n, sizeof *inst->state_in);
  inst->state_out = calloc(n, sizeof *inst->state_out);
  inst->state_off = calloc(n, sizeof *inst->state_off);
  if (inst->state_in == NULL || inst->state_out == NULL || inst->state_off == NULL) {
    return oom();
  }
  for (size_t i = 0; i < n; i++) {
    const ort_tensor_info *ti = ort_session_find(s->inputs, s->input_count, m->pairs[i].input);
    const ort_tensor_info *to = ort_session_find(s->outputs, s->output_count, m->pairs[i].output);
    if (ti == NULL || to == NULL) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                               "stateful: model '%s': state_pairs: state %s '%s' is not an %s of "
                               "%s",
                               m->name, ti == NULL ? "input" : "output",
                               ti == NULL ? m->pairs[i].input : m->pairs[i].output, ti == NULL ? "input" : "output",
                               ort_file_of(m->path));
    }
    TRITONSERVER_Error *err = describe(m, "state input", ti, &inst->state_in[i]);
    if (err == NULL) err = describe(m, "state output", to, &inst->state_out[i]);
    if (err != NULL) return err;
    const sf_io *a = &inst->state_in[i], *b = &inst->state_out[i];
    bool same = a->et == b->et && a->rank == b->rank && a->axis == b->axis;
    for (size_t d = 0; same && d < a->rank; d++) same = a->dims[d] == b->dims[d];
    if (!same) {
      char x[128], y[128];
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                               "stateful: model '%s': state_pairs: state input '%s' (%s %s) and "
                               "state output '%s' (%s %s) differ in type or shape",
                               m->name, a->name, type_name(a->et),
                               nrd_bu_shape_string(a->dims, (uint32_t)a->rank, x, sizeof x), b->name, type_name(b->et),
                               nrd_bu_shape_string(b->dims, (uint32_t)b->rank, y, sizeof y));
    }
    inst->state_off[i] = inst->slot_bytes;
    size_t elem = m->fp16_states && a->dt == TRITONSERVER_TYPE_FP32 ? 2 : a->elem;
    inst->slot_bytes += (size_t)(a->outer * a->inner) * elem;
  }
  return NULL;
}

/* Every model input is a configured input, a state or the START control. */
static TRITONSERVER_Error *check_fed(sf_instance *inst) {
  const sf_model *m = inst->m;
  const ort_session *s = &inst->session;
  const ort_tensor_info *reset = ort_session_find(s->inputs, s->input_count, m->start_name);
  if (reset == NULL) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             "stateful: model '%s': control input '%s' (CONTROL_SEQUENCE_START) "
                             "is not an input of %s",
                             m->name, m->start_name, ort_file_of(m->path));
  }
  TRITONSERVER_Error *err = describe(m, "control input", reset, &inst->reset);
  if (err != NULL) return err;
  for (size_t i = 0; i < s->input_count; i++) {
    const char *name = s->inputs[i].name;
    bool known = strcmp(name, m->start_name) == 0;
    for (size_t k = 0; !known && k < inst->input_count; k++) {
      known = strcmp(inst->inputs[k].name, name) == 0;
    }
    for (size_t k = 0; !known && k < m->pair_count; k++) {
      known = strcmp(m->pairs[k].input, name) == 0;
    }
    if (!known) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                               "stateful: model '%s': input '%s' of %s is neither a configured "
                               "input, a state input of state_pairs nor the "
                               "CONTROL_SEQUENCE_START control input",
                               m->name, name, ort_file_of(m->path));
    }
  }
  for (size_t k = 0; k < m->pair_count; k++) {
    for (size_t i = 0; i < inst->input_count; i++) {
      if (strcmp(inst->inputs[i].name, m->pairs[k].input) == 0) {
        return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                                 "stateful: model '%s': state_pairs: state input '%s' must not be "
                                 "listed among the configuration's inputs",
                                 m->name, m->pairs[k].input);
      }
    }
    for (size_t i = 0; i < inst->output_count; i++) {
      if (strcmp(inst->outputs[i].name, m->pairs[k].output) == 0) {
        return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                                 "stateful: model '%s': state_pairs: state output '%s' must not "
                                 "be listed among the configuration's outputs",
                                 m->name, m->pairs[k].output);
      }
    }
  }
  return NULL;
}

TRITONSERVER_Error *sf_instance_new(TRITONBACKEND_ModelInstance *instance, const void *model_state, void **out) {
  const sf_model *m = model_state;
  *out = NULL;
  sf_instance *inst = calloc(1, sizeof *inst);
  if (inst == NULL) return oom();
  inst->m = m;
  json_t *config = NULL;
  TRITONSERVER_Error *err =
      ort_instance_open(instance, m->rt, m->path, &m->options, &inst->name, &inst->session, &config);
  if (err == NULL) {
    inst->seqs = calloc((size_t)m->max_slots, sizeof *inst->seqs);
    inst->index_cap = 16;
    while (inst->index_cap < 2 * (size_t)m->max_slots) inst->index_cap *= 2;
    inst->index = malloc(inst->index_cap * sizeof *inst->index);
    if (inst->index != NULL) {
      memset(inst->index, 0xff, inst->index_cap * sizeof *inst->index); /* -1 */
    }
    if (inst->seqs == NULL || inst->index == NULL) err = oom();
  }
  if (err == NULL) {
    err = check_section(m, config, "input", inst->session.inputs, inst->session.input_count, &inst->inputs,
                        &inst->input_count);
  }
  if (err == NULL) {
    err = check_section(m, config, "output", inst->session.outputs, inst->session.output_count, &inst->outputs,
                        &inst->output_count);
  }
  json_decref(config);
  if (err == NULL) err = check_states(inst);
  if (err == NULL) err = check_fed(inst);
  if (err == NULL) err = sf_run_prepare(inst);
  if (err == NULL) {
    long first = m->lazy.enabled ? m->lazy.initial : m->max_slots;
    inst->buffers = calloc(1, sizeof *inst->buffers);
    inst->buf_slots = calloc(1, sizeof *inst->buf_slots);
    if (inst->buffers == NULL || inst->buf_slots == NULL) err = oom();
    if (err == NULL) {
      inst->buffers[0] = calloc((size_t)first, inst->slot_bytes > 0 ? inst->slot_bytes : 1);
      if (inst->buffers[0] == NULL) err = oom();
    }
    if (err == NULL) {
      inst->buf_slots[0] = first;
      inst->buffer_count = 1;
      inst->total_slots = first;
      NRD_BU_LOG(TRITONSERVER_LOG_INFO,
                 "stateful: instance '%s': %zu bytes of state per sequence, "
                 "%ld slots allocated of %ld (max_candidate_sequences), %ld "
                 "sequences admitted (max_candidate_sequence_use_ratio)",
                 inst->name, inst->slot_bytes, first, m->max_slots, m->use_limit);
    }
  }
  if (err != NULL) {
    sf_instance_free(inst);
    return err;
  }
  inst->metric_start_ns = nrd_bu_now_ns();
  inst->inject_seed = 12345u;
  *out = inst;
  return NULL;
}

void sf_instance_free(void *instance_state) {
  sf_instance *inst = instance_state;
  if (inst == NULL) return;
  sf_run_release(inst);
  free(inst->scratch);
  ort_session_close(inst->m->rt, &inst->session);
  for (size_t i = 0; i < inst->buffer_count; i++) free(inst->buffers[i]);
  free(inst->buffers);
  free(inst->buf_slots);
  for (long i = 0; inst->seqs != NULL && i < inst->m->max_slots; i++) {
    free(inst->seqs[i].sid);
  }
  free(inst->seqs);
  free(inst->index);
  free(inst->inputs);
  free(inst->outputs);
  free(inst->state_in);
  free(inst->state_out);
  free(inst->state_off);
  free(inst->name);
  free(inst);
}
