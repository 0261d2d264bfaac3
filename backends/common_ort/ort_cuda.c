/*
 * The CUDA execution provider's options and its registration (ort_cuda.h).
 */
#include "ort_cuda.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "nereid/backend_utils.h"

typedef enum { OPT_BOOL, OPT_SIZE, OPT_INT, OPT_ENUM } opt_kind;

/* ONNX Runtime's CUDA provider options a configuration may give (its
 * names); device_id and the stream are the backend's to set. */
static const struct {
  const char *key;
  opt_kind kind;
  const char *choices[4]; /* OPT_ENUM: the values ONNX Runtime takes */
} kOptions[] = {
    {"cudnn_conv_algo_search", OPT_ENUM, {"EXHAUSTIVE", "HEURISTIC", "DEFAULT", NULL}},
    {"arena_extend_strategy", OPT_ENUM, {"kNextPowerOfTwo", "kSameAsRequested", NULL, NULL}},
    {"gpu_mem_limit", OPT_SIZE, {NULL}},
    {"do_copy_in_default_stream", OPT_BOOL, {NULL}},
    {"use_ep_level_unified_stream", OPT_BOOL, {NULL}},
    {"cudnn_conv_use_max_workspace", OPT_BOOL, {NULL}},
    {"cudnn_conv1d_pad_to_nc1d", OPT_BOOL, {NULL}},
    {"enable_cuda_graph", OPT_BOOL, {NULL}},
    {"enable_skip_layer_norm_strict_mode", OPT_BOOL, {NULL}},
    {"prefer_nhwc", OPT_BOOL, {NULL}},
    {"use_tf32", OPT_BOOL, {NULL}},
    {"fuse_conv_bias", OPT_BOOL, {NULL}},
    {"tunable_op_enable", OPT_BOOL, {NULL}},
    {"tunable_op_tuning_enable", OPT_BOOL, {NULL}},
    {"tunable_op_max_tuning_duration_ms", OPT_INT, {NULL}},
    {"sdpa_kernel", OPT_INT, {NULL}},
};
#define N_OPTIONS (sizeof kOptions / sizeof kOptions[0])

static TRITONSERVER_Error *bad(const char *backend, const char *model, const char *fmt, const char *a, const char *b) {
  char what[512];
  snprintf(what, sizeof what, fmt, a, b);
  return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "%s: model '%s': %s", backend, model, what);
}

/* Sets (or replaces) one option; the table is far larger than kOptions. */
static void put(ort_cuda_options *o, const char *key, const char *value) {
  size_t i = 0;
  while (i < o->count && strcmp(o->keys[i], key) != 0) i++;
  if (i == ORT_CUDA_MAX_OPTIONS) return;
  if (i == o->count) o->count++;
  snprintf(o->keys[i], sizeof o->keys[i], "%s", key);
  snprintf(o->values[i], sizeof o->values[i], "%s", value);
}

/* Triton's boolean words (true/false, on/off, 1/0, any case); ONNX Runtime
 * is given 1 or 0. */
static bool parse_bool(const char *text, const char **out) {
  static const char *const yes[] = {"true", "on", "1"}, *const no[] = {"false", "off", "0"};
  for (int i = 0; i < 3; i++) {
    if (strcasecmp(text, yes[i]) == 0) *out = "1";
    if (strcasecmp(text, no[i]) == 0) *out = "0";
  }
  return *out != NULL;
}

/* A whole decimal number: unsigned (sizes) or signed int. */
static bool parse_number(const char *text, bool is_unsigned) {
  if (text[0] == '\0' || isspace((unsigned char)text[0]) || (is_unsigned && text[0] == '-')) return false;
  char *end = NULL;
  errno = 0;
  if (is_unsigned) {
    (void)strtoull(text, &end, 10);
  } else {
    long v = strtol(text, &end, 10);
    if (v < -2147483647L - 1 || v > 2147483647L) return false;
  }
  return errno == 0 && *end == '\0';
}

/* Checks 'value' for option 'key' of a gpu_execution_accelerator entry and
 * keeps it, normalized. */
static TRITONSERVER_Error *accelerator_option(const char *backend, const char *model, const char *key,
                                              const char *value, ort_cuda_options *o) {
  size_t k = 0;
  while (k < N_OPTIONS && strcmp(kOptions[k].key, key) != 0) k++;
  if (k == N_OPTIONS) {
    char known[768] = "";
    for (size_t i = 0; i < N_OPTIONS; i++) {
      strcat(known, i > 0 ? ", " : "");
      strcat(known, kOptions[i].key);
    }
    return bad(backend, model,
               "optimization.execution_accelerators.gpu_execution_accelerator 'cuda': unknown parameter '%s' (the "
               "CUDA execution provider takes %s)",
               key, known);
  }
  const char *norm = value;
  bool ok = true;
  switch (kOptions[k].kind) {
    case OPT_BOOL:
      norm = NULL;
      ok = parse_bool(value, &norm);
      break;
    case OPT_SIZE: ok = parse_number(value, true); break;
    case OPT_INT: ok = parse_number(value, false); break;
    case OPT_ENUM:
      ok = false;
      for (int i = 0; kOptions[k].choices[i] != NULL; i++) ok = ok || strcmp(value, kOptions[k].choices[i]) == 0;
      break;
  }
  if (!ok || strlen(norm) >= sizeof o->values[0]) {
    static const char *const want[] = {"true or false", "a byte count", "an integer", NULL};
    char what[160];
    if (kOptions[k].kind == OPT_ENUM) {
      snprintf(what, sizeof what, "%s, %s%s%s", kOptions[k].choices[0], kOptions[k].choices[1],
               kOptions[k].choices[2] != NULL ? " or " : "",
               kOptions[k].choices[2] != NULL ? kOptions[k].choices[2] : "");
    } else {
      snprintf(what, sizeof what, "%s", want[kOptions[k].kind]);
    }
    char fmt[384];
    snprintf(fmt, sizeof fmt,
             "optimization.execution_accelerators.gpu_execution_accelerator 'cuda': parameter '%%s': '%%s' is "
             "not %s",
             what);
    return bad(backend, model, fmt, key, value);
  }
  put(o, key, norm);
  return NULL;
}

static TRITONSERVER_Error *read_accelerators(const json_t *config, const char *backend, const char *model,
                                             ort_cuda_options *o) {
  const json_t *list = json_object_get(
      json_object_get(json_object_get(config, "optimization"), "execution_accelerators"), "gpu_execution_accelerator");
  size_t i;
  const json_t *ea;
  json_array_foreach(list, i, ea) {
    const char *name = json_string_value(json_object_get(ea, "name"));
    if (name == NULL) name = "";
    if (strcmp(name, "cuda") != 0) {
      /* Triton's sentence; TensorRT is the other name Triton's GPU builds
       * know, and this build has no TensorRT. */
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                               "unknown Execution Accelerator '%s' is requested (%s: model '%s': "
                               "gpu_execution_accelerator takes 'cuda'%s)",
                               name, backend, model,
                               strcmp(name, "tensorrt") == 0 ? "; this build has no TensorRT execution provider" : "");
    }
    const char *key;
    const json_t *value;
    json_object_foreach((json_t *)json_object_get(ea, "parameters"), key, value) {
      const char *text = json_string_value(value);
      if (text == NULL) {
        return bad(backend, model,
                   "optimization.execution_accelerators.gpu_execution_accelerator 'cuda': parameter '%s' must be "
                   "a string%s",
                   key, "");
      }
      TRITONSERVER_Error *err = accelerator_option(backend, model, key, text, o);
      if (err != NULL) return err;
    }
  }
  return NULL;
}

/* A model parameter Triton reads as an integer choice: 'names[v]' is what
 * ONNX Runtime is given for value v. */
static TRITONSERVER_Error *int_choice(const json_t *config, const char *backend, const char *model, const char *key,
                                      const char *const *names, int count, ort_cuda_options *o) {
  const char *text = nrd_bu_config_parameter(config, key);
  if (text == NULL) {
    put(o, key, names[0]);
    return NULL;
  }
  if (!parse_number(text, false)) return bad(backend, model, "parameter %s: '%s' is not an integer", key, text);
  long v = strtol(text, NULL, 10);
  if (v < 0 || v >= count) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             "unsupported %s value '%ld' is requested (%s: model '%s': 0 %s, 1 %s%s%s)", key, v,
                             backend, model, names[0], names[1], count > 2 ? ", 2 " : "", count > 2 ? names[2] : "");
  }
  put(o, key, names[v]);
  return NULL;
}

TRITONSERVER_Error *ort_cuda_options_read(const json_t *config, const char *backend, const char *model,
                                          ort_cuda_options *out) {
  memset(out, 0, sizeof *out);
  TRITONSERVER_Error *err = read_accelerators(config, backend, model, out);
  if (err != NULL || json_object_size(json_object_get(config, "parameters")) == 0) return err;
  /* The older model parameters, read after (and over) the accelerator's,
   * with Triton's defaults when absent. */
  static const char *const searches[] = {"EXHAUSTIVE", "HEURISTIC", "DEFAULT"};
  static const char *const strategies[] = {"kNextPowerOfTwo", "kSameAsRequested"};
  err = int_choice(config, backend, model, "cudnn_conv_algo_search", searches, 3, out);
  if (err == NULL) err = int_choice(config, backend, model, "arena_extend_strategy", strategies, 2, out);
  if (err != NULL) return err;
  const char *limit = nrd_bu_config_parameter(config, "gpu_mem_limit");
  if (limit != NULL && (!parse_number(limit, true) || strlen(limit) >= sizeof out->values[0])) {
    return bad(backend, model, "parameter gpu_mem_limit: '%s' is not a byte count%s", limit, "");
  }
  char max[32];
  snprintf(max, sizeof max, "%zu", (size_t)-1);
  put(out, "gpu_mem_limit", limit != NULL ? limit : max);
  const char *copy = nrd_bu_config_parameter(config, "do_copy_in_default_stream");
  const char *norm = NULL;
  if (copy != NULL && !parse_bool(copy, &norm)) {
    return bad(backend, model, "parameter do_copy_in_default_stream: '%s' is not true or false%s", copy, "");
  }
  put(out, "do_copy_in_default_stream", copy != NULL ? norm : "1");
  return NULL;
}

TRITONSERVER_Error *ort_cuda_append(const ort_runtime *rt, OrtSessionOptions *so, const ort_cuda_options *options,
                                    int device, const char *backend, const char *instance) {
  const OrtApi *api = rt->api;
  OrtCUDAProviderOptionsV2 *cuda = NULL;
  const char *step = "CreateCUDAProviderOptions";
  OrtStatus *st = api->CreateCUDAProviderOptions(&cuda);
  if (st == NULL) {
    const char *keys[ORT_CUDA_MAX_OPTIONS + 2], *values[ORT_CUDA_MAX_OPTIONS + 2];
    char id[16];
    snprintf(id, sizeof id, "%d", device);
    size_t n = 0;
    for (size_t i = 0; i < options->count; i++, n++) {
      keys[n] = options->keys[i];
      values[n] = options->values[i];
    }
    keys[n] = "device_id", values[n++] = id;
    keys[n] = "has_user_compute_stream", values[n++] = "0";
    step = "UpdateCUDAProviderOptions";
    st = api->UpdateCUDAProviderOptions(cuda, keys, values, n);
  }
  if (st == NULL) {
    step = "SessionOptionsAppendExecutionProvider_CUDA_V2";
    st = api->SessionOptionsAppendExecutionProvider_CUDA_V2(so, cuda);
  }
  if (st == NULL) {
    char *text = NULL;
    if (api->GetCUDAProviderOptionsAsString(cuda, rt->allocator, &text) == NULL && text != NULL) {
      NRD_BU_LOG(TRITONSERVER_LOG_VERBOSE,
                 "%s: CUDA Execution Accelerator is set for instance '%s' on device %d "
                 "with options: %s",
                 backend, instance, device, text);
      api->AllocatorFree(rt->allocator, text);
    }
  }
  if (cuda != NULL) api->ReleaseCUDAProviderOptions(cuda);
  if (st == NULL) return NULL;
  /* Triton's wording for any ONNX Runtime error, then where it happened. */
  TRITONSERVER_Error *err = nrd_bu_error_newf(
      TRITONSERVER_ERROR_INTERNAL,
      "onnx runtime error %d: %s (%s: instance '%s' on GPU %d: %s failed in %s, ONNX Runtime %s; "
      "KIND_GPU instances run on ONNX Runtime's CUDA execution provider: see docs/gpu.md)",
      (int)api->GetErrorCode(st), api->GetErrorMessage(st), backend, instance, device, step, rt->path, rt->version);
  api->ReleaseStatus(st);
  return err;
}
