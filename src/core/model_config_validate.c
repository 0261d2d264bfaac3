/* Model configuration validation, in Triton's order: the model's identity
 * and backend, batching and scheduling (model_config_validate_sched.c),
 * model metrics, instance groups, inputs and outputs, batch inputs and
 * outputs. */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_config.h"
#include "model_config_int.h"

static int backend_type(const char *backend) {
  static const char *const known[] = {"tensorflow", "tensorrt", "onnxruntime", "pytorch"};
  for (int i = 0; i < 4; i++)
    if (strcmp(backend, known[i]) == 0) return i + 1;
  return 0;
}

static int platform_type(const char *platform) {
  if (strcmp(platform, "tensorflow_graphdef") == 0 || strcmp(platform, "tensorflow_savedmodel") == 0) return 1;
  if (strcmp(platform, "tensorrt_plan") == 0) return 2;
  if (strcmp(platform, "onnxruntime_onnx") == 0) return 3;
  if (strcmp(platform, "pytorch_libtorch") == 0) return 4;
  return 0;
}

/* Product of dims (WILDCARD -1 makes the count -1). */
static long long element_count(const json_t *dims) {
  long long n = 1;
  for (size_t i = 0; i < json_array_size(dims); i++) {
    long long d = (long long)json_integer_value(json_array_get(dims, i));
    if (d == -1) return -1;
    if (d != 0 && n > LLONG_MAX / d) return LLONG_MAX;
    n *= d;
  }
  return n;
}

/* Fills counts[] with the element counts of the segments between -1 dims. */
static size_t segment_counts(const json_t *dims, long long *counts, size_t max) {
  size_t n = 0;
  long long cur = 1;
  for (size_t i = 0; i < json_array_size(dims); i++) {
    long long d = (long long)json_integer_value(json_array_get(dims, i));
    if (d == -1) {
      if (n < max) counts[n] = cur;
      n++;
      cur = 1;
    } else {
      cur = (d != 0 && cur > LLONG_MAX / d) ? LLONG_MAX : cur * d;
    }
  }
  if (n < max) counts[n] = cur;
  return n + 1;
}

/* Checks input or output `io`, at path `at` ("input[2]"). */
static int validate_io(nrd_mcv_ctx *v, const json_t *io, const char *at, int is_input, long long mbs,
                       const char *platform) {
  const char *kind = is_input ? "input" : "output";
  const char *ioname = get_str(io, "name");
  if (*ioname == '\0')
    return nrd_mcv_error(v, nrd_mcv_path(v, "%s.name", at), NULL, "model %s must specify 'name' for %s", kind, v->name);
  const char *dt = get_str(io, "data_type");
  if (!v->early && (*dt == '\0' || strcmp(dt, "TYPE_INVALID") == 0))
    return nrd_mcv_error(v, nrd_mcv_path(v, "%s.data_type", at), NULL, "model %s '%s' must specify 'data_type' for %s",
                         kind, ioname, v->name);
  const json_t *dims = json_object_get(io, "dims");
  if (!v->early && json_array_size(dims) == 0)
    return nrd_mcv_error(v, nrd_mcv_path(v, "%s.dims", at), NULL, "model %s '%s' must specify 'dims' for %s", kind,
                         ioname, v->name);
  const json_t *reshape = get_obj(io, "reshape");
  const json_t *shape = reshape != NULL ? json_object_get(reshape, "shape") : NULL;
  if (reshape != NULL && json_array_size(shape) == 0 && mbs == 0)
    return nrd_mcv_error(v, nrd_mcv_path(v, "%s.reshape", at), NULL,
                         "model %s '%s' cannot have empty reshape for non-batching model as "
                         "scalar tensors are not supported for %s",
                         kind, ioname, v->name);
  for (size_t i = 0; i < json_array_size(dims); i++) {
    long long d = (long long)json_integer_value(json_array_get(dims, i));
    if (d < 1 && d != -1)
      return nrd_mcv_error(v, nrd_mcv_path(v, "%s.dims[%zu]", at, i), nrd_mcv_detail(v, "%lld", d),
                           "model %s '%s' dimension must be integer >= 1, or -1 to indicate a "
                           "variable-size dimension for %s",
                           kind, ioname, v->name);
  }
  if (reshape != NULL) {
    for (size_t i = 0; i < json_array_size(shape); i++) {
      long long d = (long long)json_integer_value(json_array_get(shape, i));
      if (d < 1 && d != -1)
        return nrd_mcv_error(v, nrd_mcv_path(v, "%s.reshape.shape[%zu]", at, i), nrd_mcv_detail(v, "%lld", d),
                             "model %s '%s' reshape dimensions must be integer >= 1, or -1 to "
                             "indicate a variable-size dimension for %s",
                             kind, ioname, v->name);
    }
    long long dn = element_count(dims);
    long long rn = json_array_size(shape) == 0 ? 0 : element_count(shape);
    if (dn != rn && (rn != 0 || dn != 1))
      return nrd_mcv_error(v, nrd_mcv_path(v, "%s.reshape", at), nrd_mcv_detail(v, "%lld elements, dims %lld", rn, dn),
                           "model %s '%s' has different size for dims and reshape for %s", kind, ioname, v->name);
    if (dn == -1) {
      long long a[64], b[64];
      size_t na = segment_counts(dims, a, 64), nb = segment_counts(shape, b, 64);
      if (na != nb)
        return nrd_mcv_error(v, nrd_mcv_path(v, "%s.reshape", at), NULL,
                             "model %s '%s' has different number of variable-size dimensions for "
                             "dims and reshape for %s",
                             kind, ioname, v->name);
      for (size_t i = 0; i < na && i < 64; i++)
        if (a[i] != b[i])
          return nrd_mcv_error(v, nrd_mcv_path(v, "%s.reshape", at), NULL,
                               "model %s '%s' has different size for dims and reshape for %s", kind, ioname, v->name);
    }
  }
  if (is_input) {
    const char *fmt = get_str(io, "format");
    if ((strcmp(fmt, "FORMAT_NHWC") == 0 || strcmp(fmt, "FORMAT_NCHW") == 0) && json_array_size(dims) != 3)
      return nrd_mcv_error(v, nrd_mcv_path(v, "%s.format", at),
                           nrd_mcv_detail(v, "%s with %zu dims", fmt, json_array_size(dims)),
                           "model input NHWC/NCHW require 3 dims for %s", v->name);
  }
  int trt = strcmp(platform, "tensorrt_plan") == 0;
  if (!trt && get_bool(io, "is_shape_tensor"))
    return nrd_mcv_error(v, nrd_mcv_path(v, "%s.is_shape_tensor", at), "true",
                         "shape tensors are only supported for TensorRT platform for %s", v->name);
  if (get_bool(io, "is_non_linear_format_io")) {
    if (!trt)
      return nrd_mcv_error(v, nrd_mcv_path(v, "%s.is_non_linear_format_io", at), "true",
                           "Non-linear IO format is only supported for the TensorRT platform for %s", v->name);
    if (json_array_size(dims) != 3)
      return nrd_mcv_error(v, nrd_mcv_path(v, "%s.dims", at), nrd_mcv_detail(v, "%zu dims", json_array_size(dims)),
                           "Non-linear IO format %s requires 3 dims for %s", kind, v->name);
  }
  return 0;
}

static int validate_ios(nrd_mcv_ctx *v, const json_t *cfg) {
  long long mbs = get_int(cfg, "max_batch_size");
  const char *platform = get_str(cfg, "platform");
  const char *arrs[2] = {"input", "output"};
  for (int k = 0; k < 2; k++) {
    for (size_t i = 0; i < arr_size(cfg, arrs[k]); i++) {
      const json_t *io = arr_get(cfg, arrs[k], i);
      char at[32];
      snprintf(at, sizeof at, "%s[%zu]", arrs[k], i);
      if (validate_io(v, io, at, k == 0, mbs, platform) != 0) return -1;
      for (size_t j = 0; j < i; j++) {
        if (strcmp(get_str(arr_get(cfg, arrs[k], j), "name"), get_str(io, "name")) == 0)
          return nrd_mcv_error(v, nrd_mcv_path(v, "%s[%zu].name", arrs[k], i),
                               nrd_mcv_detail(v, "'%s' (also %s[%zu])", get_str(io, "name"), arrs[k], j),
                               "%s name '%s' is specified more than once for %s", arrs[k], get_str(io, "name"),
                               v->name);
      }
    }
  }
  for (size_t i = 0; i < arr_size(cfg, "batch_input"); i++) {
    const json_t *bi = arr_get(cfg, "batch_input", i);
    size_t ns = arr_size(bi, "source_input");
    const char *kind = get_str(bi, "kind");
    if (*kind == '\0') kind = "BATCH_ELEMENT_COUNT";
    if (ns != 1)
      return nrd_mcv_error(v, nrd_mcv_path(v, "batch_input[%zu].source_input", i), NULL,
                           "batch input kind '%s' expects 1 source input, got %zu for %s", kind, ns, v->name);
    const char *dt = get_str(bi, "data_type");
    if (strcmp(dt, "TYPE_INT32") != 0 && strcmp(dt, "TYPE_FP32") != 0)
      return nrd_mcv_error(v, nrd_mcv_path(v, "batch_input[%zu].data_type", i), *dt ? dt : "TYPE_INVALID",
                           "batch input data type must be TYPE_INT32 or TYPE_FP32 for %s", v->name);
    const char *src = json_string_value(arr_get(bi, "source_input", 0));
    if (src == NULL || !nrd_mc_has_name(cfg, "input", src))
      return nrd_mcv_error(v, nrd_mcv_path(v, "batch_input[%zu].source_input[0]", i), NULL,
                           "unknown source input name '%s' for %s", src ? src : "", v->name);
  }
  for (size_t i = 0; i < arr_size(cfg, "batch_output"); i++) {
    const json_t *bo = arr_get(cfg, "batch_output", i);
    size_t ns = arr_size(bo, "source_input");
    if (ns != 1)
      return nrd_mcv_error(v, nrd_mcv_path(v, "batch_output[%zu].source_input", i), NULL,
                           "batch output kind 'BATCH_SCATTER_WITH_INPUT_SHAPE' expects 1 source "
                           "input, got %zu for %s",
                           ns, v->name);
    const char *src = json_string_value(arr_get(bo, "source_input", 0));
    if (src == NULL || !nrd_mc_has_name(cfg, "input", src))
      return nrd_mcv_error(v, nrd_mcv_path(v, "batch_output[%zu].source_input[0]", i), NULL,
                           "unknown source input name '%s' for %s", src ? src : "", v->name);
    for (size_t t = 0; t < arr_size(bo, "target_name"); t++) {
      const char *tn = json_string_value(arr_get(bo, "target_name", t));
      if (tn == NULL || !nrd_mc_has_name(cfg, "output", tn))
        return nrd_mcv_error(v, nrd_mcv_path(v, "batch_output[%zu].target_name[%zu]", i, t), NULL,
                             "unknown target output name '%s' for %s", tn ? tn : "", v->name);
      for (size_t u = 0; u < t; u++)
        if (strcmp(tn, json_string_value(arr_get(bo, "target_name", u))) == 0)
          return nrd_mcv_error(v, nrd_mcv_path(v, "batch_output[%zu].target_name[%zu]", i, t), NULL,
                               "target output name '%s' can only be specified once for %s", tn, v->name);
    }
  }
  return 0;
}

/* Triton reads a profile with std::stoi: leading blanks and a sign, then
 * at least one digit (what follows is ignored). Returns 0 and *out, or -1
 * when there is no number, -2 when it does not fit an int. */
static int profile_index(const char *s, long *out) {
  while (*s == ' ' || (*s >= '\t' && *s <= '\r')) s++;
  const char *d = s + (*s == '-' || *s == '+');
  if (*d < '0' || *d > '9') return -1;
  errno = 0;
  long x = strtol(s, NULL, 10);
  if (errno == ERANGE || x > INT_MAX || x < INT_MIN) return -2;
  *out = x;
  return 0;
}

/* Triton's checks of a KIND_GPU group against the supported GPUs. */
static int validate_gpu_ids(nrd_mcv_ctx *v, const json_t *g, const nrd_mc_gpus *gpus, size_t i) {
  if (gpus->any) return 0;
  const char *gname = get_str(g, "name");
  size_t ngpus = arr_size(g, "gpus");
  if (ngpus == 0)
    return nrd_mcv_error(v, nrd_mcv_path(v, "instance_group[%zu].gpus", i), NULL,
                         gpus->n == 0 ? "instance group %s of model %s has kind KIND_GPU but no GPUs are available"
                                      : "instance group %s of model %s has kind KIND_GPU but specifies no GPUs",
                         gname, v->name);
  for (size_t k = 0; k < ngpus; k++) {
    const json_t *id = arr_get(g, "gpus", k);
    long long gid = json_integer_value(id);
    bool found = false;
    for (uint32_t j = 0; j < gpus->n && !found; j++) found = gpus->ids[j] == gid;
    if (found) continue;
    char list[NRD_MC_GPUS_MAX * 12] = "";
    size_t len = 0;
    for (uint32_t j = 0; j < gpus->n && len < sizeof list; j++)
      len += (size_t)snprintf(list + len, sizeof list - len, "%s%d", j ? ", " : "", (int)gpus->ids[j]);
    return nrd_mcv_error(v, nrd_mcv_path(v, "instance_group[%zu].gpus[%zu]", i, k), nrd_mcv_detail(v, "%lld", gid),
                         "instance group %s of model %s specifies invalid or unsupported gpu id %lld. GPUs with at "
                         "least the minimum required CUDA compute compatibility of %f are: %s",
                         gname, v->name, gid, gpus->min_cc, list);
  }
  return 0;
}

static int validate_instance_groups(nrd_mcv_ctx *v, const json_t *cfg, const nrd_mc_gpus *gpus) {
  size_t ng = arr_size(cfg, "instance_group");
  if (ng == 0)
    return nrd_mcv_error(v, "instance_group", NULL, "must specify one or more 'instance group's for %s", v->name);
  const char *platform = get_str(cfg, "platform");
  for (size_t i = 0; i < ng; i++) {
    const json_t *g = arr_get(cfg, "instance_group", i);
    const char *gname = get_str(g, "name");
    const char *kind = get_str(g, "kind");
    if (*kind == '\0') kind = "KIND_AUTO";
    size_t ngpus = arr_size(g, "gpus");
    if (strcmp(kind, "KIND_MODEL") == 0) {
      if (ngpus > 0)
        return nrd_mcv_error(v, nrd_mcv_path(v, "instance_group[%zu].gpus", i), NULL,
                             "instance group %s of model %s has kind KIND_MODEL but specifies one "
                             "or more GPUs",
                             gname, v->name);
    } else if (strcmp(kind, "KIND_GPU") == 0) {
      if (!gpus)
        return nrd_mcv_error(v, nrd_mcv_path(v, "instance_group[%zu].kind", i), "KIND_GPU",
                             "instance group %s of model %s has kind KIND_GPU but server does not "
                             "support GPUs",
                             gname, v->name);
      if (validate_gpu_ids(v, g, gpus, i) != 0) return -1;
    } else if (strcmp(kind, "KIND_CPU") == 0) {
      if (ngpus > 0)
        return nrd_mcv_error(v, nrd_mcv_path(v, "instance_group[%zu].gpus", i), NULL,
                             "instance group %s of model %s has kind KIND_CPU but specifies one or "
                             "more GPUs",
                             gname, v->name);
    } else {
      return nrd_mcv_error(v, nrd_mcv_path(v, "instance_group[%zu].kind", i),
                           "KIND_AUTO; normalize the configuration first",
                           "instance group %s of model %s has unexpected kind KIND_AUTO", gname, v->name);
    }
    if (get_int(g, "count") < 1)
      return nrd_mcv_error(v, nrd_mcv_path(v, "instance_group[%zu].count", i),
                           nrd_mcv_detail(v, "%lld", (long long)get_int(g, "count")),
                           "instance group %s of model %s must have 'count' >= 1", gname, v->name);
    size_t np = arr_size(g, "profile");
    /* Triton's sentence has no blank after the platform: kept. */
    if (np > 0 && strcmp(platform, "tensorrt_plan") != 0)
      return nrd_mcv_error(v, nrd_mcv_path(v, "instance_group[%zu].profile", i), NULL,
                           "instance group %s of model %s and platform %sspecifies profile field "
                           "which is only supported for TensorRT models",
                           gname, v->name, platform);
    for (size_t p = 0; p < np; p++) {
      const char *prof = json_string_value(arr_get(g, "profile", p));
      if (prof == NULL) prof = "";
      long pv = 0;
      int r = *prof == '\0' ? 0 : profile_index(prof, &pv);
      if (*prof == '\0')
        return nrd_mcv_error(v, nrd_mcv_path(v, "instance_group[%zu].profile[%zu]", i, p), NULL,
                             "profile name must not be empty");
      if (r == -1)
        return nrd_mcv_error(v, nrd_mcv_path(v, "instance_group[%zu].profile[%zu]", i, p), NULL,
                             "unable to parse '%s': stoi", prof);
      if (r != 0 || pv < 0)
        return nrd_mcv_error(v, nrd_mcv_path(v, "instance_group[%zu].profile[%zu]", i, p), NULL,
                             "instance group %s of model %s and platform %s specifies invalid "
                             "profile %s. The field should contain the string representation of a "
                             "non-negative integer.",
                             gname, v->name, platform, prof);
    }
  }
  return 0;
}

static int validate_metrics(nrd_mcv_ctx *v, const json_t *mm) {
  for (size_t i = 0; i < arr_size(mm, "metric_control"); i++) {
    const json_t *mc = arr_get(mm, "metric_control", i);
    const json_t *id = get_obj(mc, "metric_identifier");
    if (id == NULL)
      return nrd_mcv_error(v, nrd_mcv_path(v, "model_metrics.metric_control[%zu].metric_identifier", i), NULL,
                           "metric control must specify 'metric_identifier'");
    if (*get_str(id, "family") == '\0')
      return nrd_mcv_error(v, nrd_mcv_path(v, "model_metrics.metric_control[%zu].metric_identifier.family", i), NULL,
                           "metric identifier must specify non-empty 'family'");
    const json_t *h = get_obj(mc, "histogram_options");
    if (h == NULL)
      return nrd_mcv_error(v, nrd_mcv_path(v, "model_metrics.metric_control[%zu].histogram_options", i), NULL,
                           "metric control must specify 'histogram_options'");
    if (arr_size(h, "buckets") == 0)
      return nrd_mcv_error(v, nrd_mcv_path(v, "model_metrics.metric_control[%zu].histogram_options.buckets", i), NULL,
                           "histogram options must specify non-empty 'buckets'");
  }
  return 0;
}

static int validate_all(nrd_mcv_ctx *v, const json_t *cfg, const nrd_mc_gpus *gpus) {
  if (*v->name == '\0') return nrd_mcv_error(v, "name", NULL, "model configuration must specify 'name'");
  const char *platform = get_str(cfg, "platform");
  const char *backend = get_str(cfg, "backend");
  int is_ensemble_platform = strcmp(platform, NRD_ENSEMBLE_PLATFORM) == 0;
  if (*backend == '\0') {
    if (!is_ensemble_platform)
      return nrd_mcv_error(v, "platform", nrd_mcv_detail(v, "'%s', backend empty", platform),
                           "unexpected platform type '%s' for %s", platform, v->name);
  } else if (is_ensemble_platform) {
    return nrd_mcv_error(v, "backend", nrd_mcv_detail(v, "'%s'", backend),
                         "Ensemble model '%s' must have platform type '%s' and empty backend type", v->name, platform);
  }
  int bt = backend_type(backend);
  if (bt != 0 && bt != platform_type(platform))
    return nrd_mcv_error(v, "platform", nrd_mcv_detail(v, "'%s', backend '%s'", platform, backend),
                         "unexpected 'platform' and 'backend' pair, got:%s, %s", platform, backend);
  if (get_int(cfg, "max_batch_size") < 0)
    return nrd_mcv_error(v, "max_batch_size", nrd_mcv_detail(v, "%lld", (long long)get_int(cfg, "max_batch_size")),
                         "'max_batch_size' must be non-negative value for %s", v->name);
  if (get_obj(cfg, "version_policy") == NULL)
    return nrd_mcv_error(v, "version_policy", NULL, "must specify 'version policy' for %s", v->name);
  const json_t *db = get_obj(cfg, "dynamic_batching");
  if (db != NULL && nrd_mcv_dynamic(v, cfg, db) != 0) return -1;
  const json_t *sb = get_obj(cfg, "sequence_batching");
  if (sb != NULL && nrd_mcv_sequence(v, cfg, sb) != 0) return -1;
  if (get_obj(cfg, "ensemble_scheduling") != NULL) {
    if (nrd_mcv_ensemble(v, cfg) != 0) return -1;
  } else if (is_ensemble_platform) {
    return nrd_mcv_error(v, "platform", "'ensemble'",
                         "ensemble scheduling must be set for ensemble %s whose platform is ensemble", v->name);
  }
  const json_t *tp = get_obj(cfg, "model_transaction_policy");
  const json_t *rc = get_obj(cfg, "response_cache");
  if (tp != NULL && get_bool(tp, "decoupled") && rc != NULL && get_bool(rc, "enable"))
    return nrd_mcv_error(v, "response_cache.enable", "true",
                         "Response Cache does not currently support model %s with 'decoupled' "
                         "transaction policy. Please disable the response cache.",
                         v->name);
  const json_t *mm = get_obj(cfg, "model_metrics");
  if (mm != NULL && validate_metrics(v, mm) != 0) return -1;
  if (get_obj(cfg, "ensemble_scheduling") == NULL && validate_instance_groups(v, cfg, gpus) != 0) return -1;
  return validate_ios(v, cfg);
}

static int validate(const json_t *cfg, const char *filename, const nrd_mc_gpus *gpus, int early, char **err) {
  nrd_mcv_ctx v = {.file = filename, .name = "", .early = early, .cfg = cfg};
  if (!json_is_object(cfg)) {
    nrd_mcv_error(&v, NULL, NULL, "model configuration must be a JSON object");
  } else {
    v.name = get_str(cfg, "name");
    if (validate_all(&v, cfg, gpus) == 0) return 0;
  }
  if (v.err == NULL) v.err = nrd_mc_strdupf("out of memory");
  if (err != NULL) {
    *err = v.err;
  } else {
    free(v.err);
  }
  return -1;
}

static const nrd_mc_gpus any_gpu = {.any = true};

int nrd_model_config_validate(const json_t *cfg, const char *filename, int has_gpu, char **err) {
  return validate(cfg, filename, has_gpu ? &any_gpu : NULL, 0, err);
}

int nrd_model_config_validate_gpus(const json_t *cfg, const char *filename, const nrd_mc_gpus *gpus, bool early,
                                   char **err) {
  return validate(cfg, filename, gpus, early ? 1 : 0, err);
}

int nrd_model_config_validate_early(const json_t *cfg, const char *filename, int has_gpu, char **err) {
  return validate(cfg, filename, has_gpu ? &any_gpu : NULL, 1, err);
}
