/* Model configuration: Triton's defaults (nrd_model_config_normalize). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model_config.h"
#include "model_config_int.h"

/* Gets (creating when absent) the object member k of o; NULL on OOM or if
 * the member exists with another type. */
static json_t *need_obj(json_t *o, const char *k) {
  json_t *v = json_object_get(o, k);
  if (v != NULL) return json_is_object(v) ? v : NULL;
  v = json_object();
  if (v == NULL || json_object_set_new(o, k, v) != 0) return NULL;
  return v;
}

static json_t *need_arr(json_t *o, const char *k) {
  json_t *v = json_object_get(o, k);
  if (v != NULL) return json_is_array(v) ? v : NULL;
  v = json_array();
  if (v == NULL || json_object_set_new(o, k, v) != 0) return NULL;
  return v;
}

static int set_str(json_t *o, const char *k, const char *s) { return json_object_set_new(o, k, json_string(s)); }

/* Fills platform/backend/default_model_filename from each other for the
 * frameworks Triton knows, without looking at the model directory. */
static int autofill_backend(json_t *cfg, const char *model_name, char **err) {
  const char *platform = get_str(cfg, "platform");
  const char *backend = get_str(cfg, "backend");
  const char *dmf = get_str(cfg, "default_model_filename");
  int rc = 0;

  if (strcmp(platform, "tensorflow_savedmodel") == 0 || strcmp(platform, "tensorflow_graphdef") == 0) {
    int saved = strcmp(platform, "tensorflow_savedmodel") == 0;
    if (*backend == '\0') rc |= set_str(cfg, "backend", "tensorflow");
    if (*dmf == '\0') rc |= set_str(cfg, "default_model_filename", saved ? "model.savedmodel" : "model.graphdef");
    goto done;
  }
  if (*backend == '\0' && *platform == '\0' && strcmp(backend, "tensorflow") != 0) {
    if (strcmp(dmf, "model.savedmodel") == 0 || strcmp(dmf, "model.graphdef") == 0) {
      int saved = strcmp(dmf, "model.savedmodel") == 0;
      rc |= set_str(cfg, "platform", saved ? "tensorflow_savedmodel" : "tensorflow_graphdef");
      rc |= set_str(cfg, "backend", "tensorflow");
      goto done;
    }
  }
  if (*backend == '\0') {
    if (strcmp(platform, "tensorrt_plan") == 0 || strcmp(dmf, "model.plan") == 0) {
      rc |= set_str(cfg, "backend", "tensorrt");
    } else if (strcmp(platform, "onnxruntime_onnx") == 0 || strcmp(dmf, "model.onnx") == 0) {
      rc |= set_str(cfg, "backend", "onnxruntime");
    } else if (strcmp(dmf, "model.xml") == 0) {
      rc |= set_str(cfg, "backend", "openvino");
    } else if (strcmp(platform, "pytorch_libtorch") == 0 || strcmp(dmf, "model.pt") == 0) {
      rc |= set_str(cfg, "backend", "pytorch");
    } else if (strcmp(dmf, "model.py") == 0) {
      rc |= set_str(cfg, "backend", "python");
    } else if (*platform == '\0' && *dmf == '\0') {
      /* Custom backend named by the model: "<anything>.<backend>". */
      const char *dot = model_name != NULL ? strchr(model_name, '.') : NULL;
      if (dot == NULL) {
        char *where = nrd_mc_where(cfg, NULL, NULL, NULL);
        *err = nrd_mc_strdupf("Invalid model name: Could not determine backend for model '%s' "
                              "with no backend in model configuration. Expected model name of "
                              "the form 'model.<backend_name>'.%s",
                              model_name != NULL ? model_name : get_str(cfg, "name"), where ? where : "");
        free(where);
        return -1;
      }
      char *fname = nrd_mc_strdupf("model.%s", dot + 1);
      if (fname == NULL) goto oom;
      rc |= set_str(cfg, "backend", dot + 1);
      rc |= set_str(cfg, "default_model_filename", fname);
      free(fname);
      goto done;
    }
    if (rc != 0) goto oom;
    backend = get_str(cfg, "backend");
    platform = get_str(cfg, "platform");
    dmf = get_str(cfg, "default_model_filename");
  }
  if (strcmp(backend, "tensorrt") == 0) {
    if (*platform == '\0') rc |= set_str(cfg, "platform", "tensorrt_plan");
    if (*dmf == '\0') rc |= set_str(cfg, "default_model_filename", "model.plan");
  } else if (strcmp(backend, "onnxruntime") == 0) {
    if (*platform == '\0') rc |= set_str(cfg, "platform", "onnxruntime_onnx");
    if (*dmf == '\0') rc |= set_str(cfg, "default_model_filename", "model.onnx");
  } else if (strcmp(backend, "openvino") == 0) {
    if (*dmf == '\0') rc |= set_str(cfg, "default_model_filename", "model.xml");
  } else if (strcmp(backend, "pytorch") == 0) {
    if (*platform == '\0') {
      rc |= set_str(cfg, "platform", "pytorch_libtorch");
      if (*dmf == '\0') rc |= set_str(cfg, "default_model_filename", "model.pt");
    }
  } else if (strcmp(backend, "python") == 0) {
    if (*dmf == '\0') rc |= set_str(cfg, "default_model_filename", "model.py");
  }
done:
  if (rc != 0) goto oom;
  return 0;
oom:
  *err = nrd_mc_strdupf("out of memory");
  return -1;
}

static int default_preferred(json_t *sched, long long max_batch_size) {
  if (sched == NULL || arr_size(sched, "preferred_batch_size") != 0 || max_batch_size <= 0) return 0;
  json_t *a = need_arr(sched, "preferred_batch_size");
  if (a == NULL) return -1;
  return json_array_append_new(a, json_integer(max_batch_size));
}

static bool gpu_known(const nrd_mc_gpus *gpus, long long id) {
  if (gpus->any) return true;
  for (uint32_t j = 0; j < gpus->n; j++)
    if (gpus->ids[j] == id) return true;
  return false;
}

/* KIND_AUTO is KIND_GPU when there are GPUs and the group lists only
 * present ones, else KIND_CPU (Triton's NormalizeInstanceGroup). */
static bool auto_is_gpu(const json_t *g, const nrd_mc_gpus *gpus) {
  if (!gpus || (!gpus->any && gpus->n == 0)) return false;
  for (size_t k = 0; k < arr_size(g, "gpus"); k++)
    if (!gpu_known(gpus, json_integer_value(arr_get(g, "gpus", k)))) return false;
  return true;
}

static int normalize_instance_groups(json_t *cfg, const nrd_mc_gpus *gpus) {
  const char *name = get_str(cfg, "name");
  json_t *groups = need_arr(cfg, "instance_group");
  if (groups == NULL) return -1;
  if (json_array_size(groups) == 0) {
    json_t *g = json_object();
    if (g == NULL || json_array_append_new(groups, g) != 0 || set_str(g, "name", name) != 0) return -1;
  }
  const char *backend = get_str(cfg, "backend");
  int two_cpu = strcmp(backend, "tensorflow") == 0 || strcmp(backend, "onnxruntime") == 0;
  for (size_t i = 0; i < json_array_size(groups); i++) {
    json_t *g = json_array_get(groups, i);
    if (!json_is_object(g)) continue;
    if (*get_str(g, "name") == '\0') {
      char *n = nrd_mc_strdupf("%s_%zu", name, i);
      if (n == NULL) return -1;
      int rc = set_str(g, "name", n);
      free(n);
      if (rc != 0) return -1;
    }
    const char *kind = get_str(g, "kind");
    if (*kind == '\0' || strcmp(kind, "KIND_AUTO") == 0) {
      if (set_str(g, "kind", auto_is_gpu(g, gpus) ? "KIND_GPU" : "KIND_CPU") != 0) return -1;
    }
    if (gpus && !gpus->any && strcmp(get_str(g, "kind"), "KIND_GPU") == 0 && arr_size(g, "gpus") == 0) {
      json_t *ids = need_arr(g, "gpus");
      if (ids == NULL) return -1;
      for (uint32_t k = 0; k < gpus->n; k++)
        if (json_array_append_new(ids, json_integer(gpus->ids[k])) != 0) return -1;
    }
    if (get_int(g, "count") < 1) {
      int cpu = strcmp(get_str(g, "kind"), "KIND_CPU") == 0;
      if (json_object_set_new(g, "count", json_integer(cpu && two_cpu ? 2 : 1)) != 0) return -1;
    }
  }
  return 0;
}

int nrd_model_config_normalize(json_t *cfg, const char *model_name, int has_gpu, char **err) {
  static const nrd_mc_gpus any_gpu = {.any = true};
  return nrd_model_config_normalize_gpus(cfg, model_name, has_gpu ? &any_gpu : NULL, err);
}

int nrd_model_config_normalize_gpus(json_t *cfg, const char *model_name, const nrd_mc_gpus *gpus, char **err) {
  char *dummy = NULL;
  if (err == NULL) err = &dummy;
  *err = NULL;
  if (!json_is_object(cfg)) {
    *err = nrd_mc_strdupf("model configuration must be a JSON object");
    goto fail;
  }
  const char *name = get_str(cfg, "name");
  /* Triton reports an ensemble without its scheduling before a directory
   * that does not match the name. */
  if (strcmp(get_str(cfg, "platform"), NRD_ENSEMBLE_PLATFORM) == 0 && *get_str(cfg, "backend") == '\0' &&
      get_obj(cfg, "ensemble_scheduling") == NULL) {
    char *where = nrd_mc_where(cfg, NULL, "platform", "'ensemble'");
    *err = nrd_mc_strdupf("ensemble scheduling must be set for ensemble %s whose platform is ensemble%s",
                          *name        ? name
                          : model_name ? model_name
                                       : "",
                          where ? where : "");
    free(where);
    goto fail;
  }
  if (*name == '\0') {
    if (model_name != NULL && set_str(cfg, "name", model_name) != 0) goto oom;
  } else if (model_name != NULL && strcmp(name, model_name) != 0) {
    char *where = nrd_mc_where(cfg, NULL, "name", NULL);
    *err = nrd_mc_strdupf("unexpected directory name '%s' for model '%s', directory name must "
                          "equal model name%s",
                          model_name, name, where ? where : "");
    free(where);
    goto fail;
  }
  if (autofill_backend(cfg, model_name, err) != 0) goto fail;

  if (get_obj(cfg, "version_policy") == NULL) {
    json_t *vp = need_obj(cfg, "version_policy");
    json_t *latest = vp != NULL ? need_obj(vp, "latest") : NULL;
    if (latest == NULL || json_object_set_new(latest, "num_versions", json_integer(1)) != 0) goto oom;
  }
  long long mbs = get_int(cfg, "max_batch_size");
  json_t *db = (json_t *)get_obj(cfg, "dynamic_batching");
  if (default_preferred(db, mbs) != 0) goto oom;
  json_t *sb = (json_t *)get_obj(cfg, "sequence_batching");
  if (sb != NULL) {
    if (get_uint(sb, "max_sequence_idle_microseconds") == 0 &&
        json_object_set_new(sb, "max_sequence_idle_microseconds", json_integer(NRD_SEQUENCE_IDLE_DEFAULT_US)) != 0)
      goto oom;
    if (default_preferred((json_t *)get_obj(sb, "oldest"), mbs) != 0) goto oom;
  }
  if (get_obj(cfg, "ensemble_scheduling") == NULL) {
    json_t *opt = need_obj(cfg, "optimization");
    if (opt == NULL) goto oom;
    const char *pins[2] = {"input_pinned_memory", "output_pinned_memory"};
    for (int i = 0; i < 2; i++) {
      if (get_obj(opt, pins[i]) == NULL) {
        json_t *p = need_obj(opt, pins[i]);
        if (p == NULL || json_object_set_new(p, "enable", json_true()) != 0) goto oom;
      }
    }
    if (normalize_instance_groups(cfg, gpus) != 0) goto oom;
  }
  return 0;
oom:
  free(*err);
  *err = nrd_mc_strdupf("out of memory while normalizing the model configuration");
fail:
  if (err == &dummy) free(dummy);
  return -1;
}
