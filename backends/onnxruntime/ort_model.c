/*
 * Model configuration for the onnxruntime backend: reading it, completing
 * it from the model when the server allows, and checking it against the
 * session each instance opens.
 */
#include "ort_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nereid/backend_utils.h"
#include "ort_backend.h"

static TRITONSERVER_Error *oom(void) {
  return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, "onnxruntime: out of memory");
}

/* "TYPE_FP32" -> TRITONSERVER_TYPE_FP32 (TYPE_STRING is BYTES); INVALID
 * for anything else. */
static TRITONSERVER_DataType config_type(const json_t *tensor) {
  const char *s = json_string_value(json_object_get(tensor, "data_type"));
  if (s == NULL || strncmp(s, "TYPE_", 5) != 0) return TRITONSERVER_TYPE_INVALID;
  if (strcmp(s, "TYPE_STRING") == 0) return TRITONSERVER_TYPE_BYTES;
  return TRITONSERVER_StringToDataType(s + 5);
}

/* The configuration's name of a datatype: "TYPE_FP32", "TYPE_STRING". */
static void config_type_name(TRITONSERVER_DataType dt, char *buf, size_t cap) {
  if (dt == TRITONSERVER_TYPE_BYTES) {
    snprintf(buf, cap, "TYPE_STRING");
  } else if (dt == TRITONSERVER_TYPE_INVALID) {
    snprintf(buf, cap, "(none)");
  } else {
    snprintf(buf, cap, "TYPE_%s", TRITONSERVER_DataTypeString(dt));
  }
}

static const char *onnx_type_name(ONNXTensorElementDataType et) {
  TRITONSERVER_DataType dt = ort_triton_type(et);
  return dt == TRITONSERVER_TYPE_INVALID ? "a type Triton has no name for" : TRITONSERVER_DataTypeString(dt);
}

/* ---- model ------------------------------------------------------------- */

static TRITONSERVER_Error *read_states(const json_t *config, ort_model *m) {
  const json_t *list = json_object_get(json_object_get(config, "sequence_batching"), "state");
  size_t n = json_array_size(list);
  if (n == 0) return NULL;
  m->states = calloc(n, sizeof *m->states);
  if (m->states == NULL) return oom();
  m->state_count = n;
  for (size_t i = 0; i < n; i++) {
    const json_t *s = json_array_get(list, i);
    const char *in = json_string_value(json_object_get(s, "input_name"));
    const char *out = json_string_value(json_object_get(s, "output_name"));
    if (in == NULL || out == NULL) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                               "onnxruntime: model '%s': sequence_batching.state[%zu] needs "
                               "input_name and output_name",
                               m->name, i);
    }
    m->states[i].input = strdup(in);
    m->states[i].output = strdup(out);
    if (m->states[i].input == NULL || m->states[i].output == NULL) {
      return oom();
    }
  }
  return NULL;
}

/* batch_input entries, one per target name; the core has checked kinds,
 * data types and sources against the configuration already. */
static TRITONSERVER_Error *read_batch_inputs(const json_t *config, ort_model *m) {
  const json_t *list = json_object_get(config, "batch_input");
  size_t n = 0;
  for (size_t i = 0; i < json_array_size(list); i++)
    n += json_array_size(json_object_get(json_array_get(list, i), "target_name"));
  if (n > 0 && (m->batch_inputs = calloc(n, sizeof *m->batch_inputs)) == NULL) return oom();
  for (size_t i = 0; i < json_array_size(list); i++) {
    const json_t *bi = json_array_get(list, i);
    const char *kind = json_string_value(json_object_get(bi, "kind"));
    const char *dtype = json_string_value(json_object_get(bi, "data_type"));
    const char *source = json_string_value(json_array_get(json_object_get(bi, "source_input"), 0));
    nrd_bu_batch_input_kind k;
    if (!nrd_bu_batch_input_kind_from(kind, &k) || source == NULL) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                               "onnxruntime: model '%s': batch_input[%zu] has kind '%s' and source_input '%s'", m->name,
                               i, kind != NULL ? kind : "", source != NULL ? source : "");
    }
    const json_t *targets = json_object_get(bi, "target_name");
    for (size_t t = 0; t < json_array_size(targets); t++) {
      ort_batch_input *b = &m->batch_inputs[m->batch_input_count++];
      b->kind = k;
      b->datatype = dtype != NULL && strcmp(dtype, "TYPE_FP32") == 0 ? TRITONSERVER_TYPE_FP32 : TRITONSERVER_TYPE_INT32;
      b->target = strdup(
          json_string_value(json_array_get(targets, t)) != NULL ? json_string_value(json_array_get(targets, t)) : "");
      b->source = strdup(source);
      if (b->target == NULL || b->source == NULL) return oom();
    }
  }
  return NULL;
}

static TRITONSERVER_Error *read_ragged(const json_t *config, ort_model *m) {
  const json_t *list = json_object_get(config, "input");
  for (size_t i = 0; i < json_array_size(list); i++) {
    const json_t *in = json_array_get(list, i);
    if (!json_is_true(json_object_get(in, "allow_ragged_batch"))) continue;
    char **grown = realloc(m->ragged, (m->ragged_count + 1) * sizeof *grown);
    if (grown == NULL) return oom();
    m->ragged = grown;
    const char *name = json_string_value(json_object_get(in, "name"));
    if ((m->ragged[m->ragged_count] = strdup(name != NULL ? name : "")) == NULL) return oom();
    m->ragged_count++;
  }
  return NULL;
}

/* batch_output: the one kind there is, BATCH_SCATTER_WITH_INPUT_SHAPE. */
static TRITONSERVER_Error *read_batch_outputs(const json_t *config, ort_model *m) {
  const json_t *list = json_object_get(config, "batch_output");
  for (size_t i = 0; i < json_array_size(list); i++) {
    const json_t *bo = json_array_get(list, i);
    const char *kind = json_string_value(json_object_get(bo, "kind"));
    const char *source = json_string_value(json_array_get(json_object_get(bo, "source_input"), 0));
    if (kind == NULL || strcmp(kind, "BATCH_SCATTER_WITH_INPUT_SHAPE") != 0 || source == NULL) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                               "onnxruntime: model '%s': batch_output[%zu] has kind '%s' and source_input '%s'",
                               m->name, i, kind != NULL ? kind : "", source != NULL ? source : "");
    }
    const json_t *targets = json_object_get(bo, "target_name");
    for (size_t t = 0; t < json_array_size(targets); t++) {
      char **grown = realloc(m->scatter, (m->scatter_count + 2) * sizeof *grown);
      if (grown == NULL) return oom();
      m->scatter = grown;
      const char *target = json_string_value(json_array_get(targets, t));
      grown[m->scatter_count] = strdup(target != NULL ? target : "");
      grown[m->scatter_count + 1] = strdup(source);
      if (grown[m->scatter_count] == NULL || grown[m->scatter_count + 1] == NULL) {
        free(grown[m->scatter_count]);
        free(grown[m->scatter_count + 1]);
        return oom();
      }
      m->scatter_count += 2;
    }
  }
  return NULL;
}

const char *ort_model_batch_output_source(const ort_model *m, const char *name) {
  for (size_t i = 0; i + 1 < m->scatter_count; i += 2) {
    if (strcmp(m->scatter[i], name) == 0) return m->scatter[i + 1];
  }
  return NULL;
}

const ort_batch_input *ort_model_batch_input(const ort_model *m, const char *name) {
  for (size_t i = 0; i < m->batch_input_count; i++) {
    if (strcmp(m->batch_inputs[i].target, name) == 0) return &m->batch_inputs[i];
  }
  return NULL;
}

bool ort_model_input_ragged(const ort_model *m, const char *name) {
  for (size_t i = 0; i < m->ragged_count; i++) {
    if (strcmp(m->ragged[i], name) == 0) return true;
  }
  return false;
}

static bool is_state_input(const json_t *config, const char *name) {
  const json_t *list = json_object_get(json_object_get(config, "sequence_batching"), "state");
  for (size_t i = 0; i < json_array_size(list); i++) {
    const char *in = json_string_value(json_object_get(json_array_get(list, i), "input_name"));
    const char *out = json_string_value(json_object_get(json_array_get(list, i), "output_name"));
    if ((in != NULL && strcmp(in, name) == 0) || (out != NULL && strcmp(out, name) == 0)) {
      return true;
    }
  }
  return false;
}

/* ---- auto-complete ------------------------------------------------------ */

/* Whether every tensor of a list has a dynamic first dimension. */
static bool batchable(const ort_tensor_info *list, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (list[i].rank == 0 || list[i].dims[0] != -1) return false;
  }
  return n > 0;
}

/* [{name, data_type, dims}] for the tensors of a list that are not state
 * tensors, without the batch dimension when 'batched'. */
static json_t *tensor_list(const json_t *config, const ort_tensor_info *list, size_t n, bool batched,
                           const char *model_name, TRITONSERVER_Error **err) {
  json_t *arr = json_array();
  for (size_t i = 0; arr != NULL && i < n; i++) {
    if (is_state_input(config, list[i].name)) continue;
    TRITONSERVER_DataType dt = ort_triton_type(list[i].type);
    if (dt == TRITONSERVER_TYPE_INVALID) {
      *err = nrd_bu_error_newf(TRITONSERVER_ERROR_UNSUPPORTED,
                               "onnxruntime: model '%s': tensor '%s' of the model is not a tensor "
                               "of a type Triton supports",
                               model_name, list[i].name);
      json_decref(arr);
      return NULL;
    }
    char type[32];
    config_type_name(dt, type, sizeof type);
    json_t *dims = json_array();
    for (size_t d = batched ? 1 : 0; dims != NULL && d < list[i].rank; d++) {
      json_array_append_new(dims, json_integer(list[i].dims[d]));
    }
    /* A scalar (after the batch dimension) becomes dims [1]; with batching
     * it also gets reshape: { shape: [ ] }, as Triton's backend completes
     * it, so the model still sees [batch]. */
    bool scalar = dims != NULL && json_array_size(dims) == 0;
    if (scalar) json_array_append_new(dims, json_integer(1));
    json_t *t =
        dims == NULL ? NULL : json_pack("{s:s, s:s, s:o}", "name", list[i].name, "data_type", type, "dims", dims);
    if (t != NULL && scalar && batched && json_object_set_new(t, "reshape", json_pack("{s:[]}", "shape")) != 0) {
      json_decref(t);
      t = NULL;
    }
    if (t == NULL || json_array_append_new(arr, t) != 0) {
      json_decref(arr);
      *err = oom();
      return NULL;
    }
  }
  if (arr == NULL) *err = oom();
  return arr;
}

static int64_t default_max_batch_size(TRITONBACKEND_Model *model) {
  TRITONBACKEND_Backend *backend = NULL;
  json_t *bc = NULL;
  int64_t v = 4;
  if (TRITONBACKEND_ModelBackend(model, &backend) == NULL && nrd_bu_backend_config(backend, &bc) == NULL) {
    const char *s = nrd_bu_backend_setting(bc, "default-max-batch-size");
    char *end = NULL;
    long long parsed = s != NULL ? strtoll(s, &end, 10) : -1;
    if (s != NULL && *end == '\0' && parsed >= 0) v = parsed;
    json_decref(bc);
  }
  return v;
}

/*
 * Fills what the configuration leaves out from the model: the inputs and
 * outputs when they are absent, and batching (max_batch_size from
 * default-max-batch-size, with the dynamic batcher when no other scheduler
 * is set) when the configuration names no tensors, sets no batch size and
 * every tensor of the model has a dynamic first dimension.
 */
static TRITONSERVER_Error *auto_complete(TRITONBACKEND_Model *model, const ort_runtime *rt, const char *name,
                                         const char *path, json_t *config) {
  bool has_in = json_array_size(json_object_get(config, "input")) > 0;
  bool has_out = json_array_size(json_object_get(config, "output")) > 0;
  int64_t mbs = 0;
  TRITONSERVER_Error *err = nrd_bu_config_max_batch_size(config, &mbs);
  if (err != NULL || (has_in && has_out)) return err;
  ort_session_options o = {.intra_op_threads = 1,
                           .inter_op_threads = 1,
                           .optimization = ORT_DISABLE_ALL,
                           .mem_arena = -1,
                           .mem_pattern = -1};
  ort_session s;
  err = ort_session_open(rt, path, &o, &s);
  if (err != NULL) return err;
  bool batched = mbs > 0;
  if (!batched && !has_in && !has_out && batchable(s.inputs, s.input_count) && batchable(s.outputs, s.output_count)) {
    int64_t dflt = default_max_batch_size(model);
    if (dflt > 0) {
      batched = true;
      json_object_set_new(config, "max_batch_size", json_integer(dflt));
      if (dflt > 1 && json_object_get(config, "dynamic_batching") == NULL &&
          json_object_get(config, "sequence_batching") == NULL &&
          json_object_get(config, "ensemble_scheduling") == NULL) {
        json_object_set_new(config, "dynamic_batching", json_object());
      }
    }
  }
  if (!has_in) {
    json_t *l = tensor_list(config, s.inputs, s.input_count, batched, name, &err);
    if (l != NULL) json_object_set_new(config, "input", l);
  }
  if (err == NULL && !has_out) {
    json_t *l = tensor_list(config, s.outputs, s.output_count, batched, name, &err);
    if (l != NULL) json_object_set_new(config, "output", l);
  }
  ort_session_close(rt, &s);
  if (err != NULL) return err;
  char *text = json_dumps(config, JSON_COMPACT);
  if (text == NULL) return oom();
  TRITONSERVER_Message *message = NULL;
  err = TRITONSERVER_MessageNewFromSerializedJson(&message, text, strlen(text));
  free(text);
  if (err != NULL) return err;
  err = TRITONBACKEND_ModelSetConfig(model, 1, message);
  nrd_bu_error_log_and_delete(TRITONSERVER_MessageDelete(message), "onnxruntime: cannot delete a message");
  return err;
}

TRITONSERVER_Error *ort_model_new(TRITONBACKEND_Model *model, const ort_runtime *rt, void **out) {
  ort_model *m = calloc(1, sizeof *m);
  if (m == NULL) return oom();
  m->rt = rt;
  const char *name = NULL;
  json_t *config = NULL;
  bool complete = false;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelName(model, &name);
  if (err == NULL) {
    m->name = strdup(name);
    if (m->name == NULL) err = oom();
  }
  if (err == NULL) err = nrd_bu_model_config(model, &config);
  if (err == NULL) err = ort_model_file(model, config, m->name, NULL, "default_model_filename", &m->path);
  if (err == NULL) err = TRITONBACKEND_ModelAutoCompleteConfig(model, &complete);
  if (err == NULL && complete) {
    err = auto_complete(model, rt, m->name, m->path, config);
    json_decref(config);
    config = NULL;
    if (err == NULL) err = nrd_bu_model_config(model, &config);
  }
  if (err == NULL) err = nrd_bu_config_max_batch_size(config, &m->max_batch_size);
  if (err == NULL) err = ort_session_options_read(config, &m->options);
  if (err == NULL) err = read_states(config, m);
  if (err == NULL) err = read_batch_inputs(config, m);
  if (err == NULL) err = read_ragged(config, m);
  if (err == NULL) err = read_batch_outputs(config, m);
  json_decref(config);
  if (err != NULL) {
    ort_model_free(m);
    return err;
  }
  *out = m;
  return NULL;
}

void ort_model_free(void *model_state) {
  ort_model *m = model_state;
  if (m == NULL) return;
  for (size_t i = 0; i < m->state_count; i++) {
    free(m->states[i].input);
    free(m->states[i].output);
  }
  free(m->states);
  for (size_t i = 0; i < m->batch_input_count; i++) {
    free(m->batch_inputs[i].target);
    free(m->batch_inputs[i].source);
  }
  free(m->batch_inputs);
  for (size_t i = 0; i < m->ragged_count; i++) free(m->ragged[i]);
  free(m->ragged);
  for (size_t i = 0; i < m->scatter_count; i++) free(m->scatter[i]);
  free(m->scatter);
  free(m->path);
  free(m->name);
  free(m);
}

/* ---- checking the configuration against the model ---------------------- */

/* Checks one configured tensor (input, output or state) against the
 * model's tensor of that name. 'batched' adds the batch dimension. */
static TRITONSERVER_Error *check_tensor(const ort_model *m, const char *what, const char *name,
                                        TRITONSERVER_DataType dt, const json_t *dims, bool batched,
                                        const ort_tensor_info *info) {
  if (info->type == ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_UNSUPPORTED,
                             "onnxruntime: model '%s': %s '%s' is not a "
                             "tensor in %s (sequences and maps are not "
                             "supported)",
                             m->name, what, name, ort_file_of(m->path));
  }
  if (ort_triton_type(info->type) != dt) {
    char type[32];
    config_type_name(dt, type, sizeof type);
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             "onnxruntime: model '%s': %s '%s' has data_type %s in the "
                             "configuration but %s in %s",
                             m->name, what, name, type, onnx_type_name(info->type), ort_file_of(m->path));
  }
  size_t n = json_array_size(dims);
  size_t rank = n + (batched ? 1 : 0);
  /* dims [1] may stand for a scalar of the model (without batching the
   * server refuses the empty reshape that would say so). */
  bool scalar = !batched && info->rank == 0 && n == 1;
  if (batched && n == info->rank) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             "onnxruntime: model '%s': max_batch_size is %lld but %s '%s' of %s "
                             "has no batch dimension (its %zu dimensions are the configuration's "
                             "dims); use max_batch_size 0 for a model that does not batch",
                             m->name, (long long)m->max_batch_size, what, name, ort_file_of(m->path), n);
  }
  if (!scalar && rank != info->rank) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             "onnxruntime: model '%s': %s '%s' has %zu dimensions in the "
                             "configuration%s but %zu in %s",
                             m->name, what, name, rank, batched ? " (with the batch dimension)" : "", info->rank,
                             ort_file_of(m->path));
  }
  if (batched && info->dims[0] != -1) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             "onnxruntime: model '%s': max_batch_size is %lld but the first "
                             "dimension of %s '%s' is %lld in %s, not dynamic; use max_batch_size "
                             "0 for a model that does not batch",
                             m->name, (long long)m->max_batch_size, what, name, (long long)info->dims[0],
                             ort_file_of(m->path));
  }
  for (size_t i = 0; !scalar && i < n; i++) {
    int64_t c = 0;
    TRITONSERVER_Error *err = nrd_bu_json_int(json_array_get(dims, i), "dims", &c);
    if (err != NULL) return err;
    int64_t model_dim = info->dims[i + (batched ? 1 : 0)];
    if (c >= 0 && model_dim >= 0 && c != model_dim) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                               "onnxruntime: model '%s': %s '%s' dimension %zu is %lld in the "
                               "configuration but %lld in %s",
                               m->name, what, name, i, (long long)c, (long long)model_dim, ort_file_of(m->path));
    }
  }
  return NULL;
}

static TRITONSERVER_Error *check_section(const ort_model *m, const json_t *config, const char *section,
                                         const ort_tensor_info *list, size_t count) {
  const json_t *arr = json_object_get(config, section);
  for (size_t i = 0; i < json_array_size(arr); i++) {
    const json_t *t = json_array_get(arr, i);
    const char *name = json_string_value(json_object_get(t, "name"));
    if (name == NULL) continue;
    /* With a reshape the server hands the backend (and takes back) the
     * tensor in reshape.shape: that is what the model must take. */
    const json_t *reshape = json_object_get(json_object_get(t, "reshape"), "shape");
    const ort_tensor_info *info = ort_session_find(list, count, name);
    if (info == NULL) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                               "onnxruntime: model '%s': %s '%s' of the configuration is not an "
                               "%s of %s",
                               m->name, section, name, section, ort_file_of(m->path));
    }
    if (strcmp(section, "input") == 0 && json_is_true(json_object_get(t, "allow_ragged_batch"))) {
      /* A ragged input reaches the model flattened over the batch. */
      if (info->rank != 1 || info->dims[0] != -1) {
        char shape[256] = "[";
        for (size_t d = 0; d < info->rank && strlen(shape) < sizeof shape - 24; d++)
          snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld", d ? "," : "",
                   (long long)info->dims[d]);
        strcat(shape, "]");
        return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                                 "unable to load model '%s', configuration expects model provides input with shape "
                                 "[-1]  for ragged input '%s', model provides %s (onnxruntime: %s)",
                                 m->name, name, shape, ort_file_of(m->path));
      }
      if (ort_triton_type(info->type) != config_type(t)) {
        return check_tensor(m, section, name, config_type(t), json_object_get(t, "dims"), m->max_batch_size > 0, info);
      }
      continue;
    }
    if (strcmp(section, "output") == 0 && ort_model_batch_output_source(m, name) != NULL) {
      /* A batch output's shape is the batch's, not the configuration's:
       * only its type is compared, as in Triton. */
      if (ort_triton_type(info->type) != config_type(t)) {
        return check_tensor(m, section, name, config_type(t), json_object_get(t, "dims"), m->max_batch_size > 0, info);
      }
      continue;
    }
    TRITONSERVER_Error *err =
        check_tensor(m, section, name, config_type(t), reshape != NULL ? reshape : json_object_get(t, "dims"),
                     m->max_batch_size > 0, info);
    if (err != NULL) return err;
  }
  return NULL;
}

static TRITONSERVER_Error *check_states(const ort_model *m, const json_t *config, const ort_session *s) {
  const json_t *list = json_object_get(json_object_get(config, "sequence_batching"), "state");
  for (size_t i = 0; i < json_array_size(list); i++) {
    const json_t *st = json_array_get(list, i);
    const char *names[2] = {json_string_value(json_object_get(st, "input_name")),
                            json_string_value(json_object_get(st, "output_name"))};
    const ort_tensor_info *found[2] = {ort_session_find(s->inputs, s->input_count, names[0]),
                                       ort_session_find(s->outputs, s->output_count, names[1])};
    static const char *const what[2] = {"state input", "state output"};
    for (int k = 0; k < 2; k++) {
      if (found[k] == NULL) {
        return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                                 "onnxruntime: model '%s': %s '%s' (sequence_batching.state[%zu]) "
                                 "is not an %s of %s",
                                 m->name, what[k], names[k], i, k == 0 ? "input" : "output", ort_file_of(m->path));
      }
      TRITONSERVER_Error *err = check_tensor(m, what[k], names[k], config_type(st), json_object_get(st, "dims"),
                                             m->max_batch_size > 0, found[k]);
      if (err != NULL) return err;
    }
  }
  return NULL;
}

/* Every input of the model must be fed: configured or a state input. */
static TRITONSERVER_Error *check_fed(const ort_model *m, const json_t *config, const ort_session *s) {
  for (size_t i = 0; i < s->input_count; i++) {
    const char *name = s->inputs[i].name;
    if (nrd_bu_config_tensor(config, "input", name) != NULL) continue;
    const ort_batch_input *b = ort_model_batch_input(m, name);
    if (b != NULL) {
      /* Fed by the backend: INT32 or FP32, of the batch input's rank. */
      uint32_t rank = b->kind == NRD_BU_BATCH_ITEM_SHAPE ? 2 : 1;
      if (ort_triton_type(s->inputs[i].type) != b->datatype || s->inputs[i].rank != rank) {
        return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                                 "onnxruntime: model '%s': batch input '%s' is %s with %u dimension%s; input '%s' "
                                 "of %s is another type or rank",
                                 m->name, name, TRITONSERVER_DataTypeString(b->datatype), rank, rank == 1 ? "" : "s",
                                 name, ort_file_of(m->path));
      }
      continue;
    }
    bool state = false;
    for (size_t k = 0; k < m->state_count; k++) {
      state |= strcmp(m->states[k].input, name) == 0;
    }
    if (!state) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                               "onnxruntime: model '%s': input '%s' of %s is missing from the "
                               "configuration",
                               m->name, name, ort_file_of(m->path));
    }
  }
  return NULL;
}

TRITONSERVER_Error *ort_instance_new(TRITONBACKEND_ModelInstance *instance, const void *model_state, void **out) {
  const ort_model *m = model_state;
  ort_instance *inst = calloc(1, sizeof *inst);
  if (inst == NULL) return oom();
  inst->model = m;
  json_t *config = NULL;
  TRITONSERVER_Error *err =
      ort_instance_open(instance, m->rt, m->path, &m->options, &inst->name, &inst->session, &config);
  if (err == NULL) {
    err = check_section(m, config, "input", inst->session.inputs, inst->session.input_count);
  }
  if (err == NULL) {
    err = check_section(m, config, "output", inst->session.outputs, inst->session.output_count);
  }
  if (err == NULL) err = check_states(m, config, &inst->session);
  if (err == NULL) err = check_fed(m, config, &inst->session);
  json_decref(config);
  if (err == NULL) {
    size_t n = inst->session.output_count;
    inst->output_is_state = calloc(n > 0 ? n : 1, sizeof(bool));
    if (inst->output_is_state == NULL) err = oom();
    for (size_t i = 0; err == NULL && i < n; i++) {
      for (size_t k = 0; k < m->state_count; k++) {
        if (strcmp(m->states[k].output, inst->session.outputs[i].name) == 0) {
          inst->output_is_state[i] = true;
        }
      }
    }
  }
  if (err != NULL) {
    ort_instance_free(inst);
    return err;
  }
  *out = inst;
  return NULL;
}

void ort_instance_free(void *instance_state) {
  ort_instance *inst = instance_state;
  if (inst == NULL) return;
  ort_session_close(inst->model->rt, &inst->session);
  free(inst->output_is_state);
  free(inst->name);
  free(inst);
}
