/* Model configuration: the backend told by the files of a model's first
 * version directory (nrd_model_config_detect_backend). */
#include <dirent.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "files.h"
#include "model_config.h"

static const char *str_of(const json_t *cfg, const char *key) {
  const char *s = json_string_value(json_object_get(cfg, key));
  return s ? s : "";
}

/* The first subdirectory of `dir` in byte order (as Triton's std::set of
 * names), malloc'd; NULL when there is none. */
static char *first_subdir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return NULL;
  char *best = NULL;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    if (best && strcmp(e->d_name, best) >= 0) continue;
    char *path = nrd_path_join(dir, e->d_name);
    struct stat st;
    bool is_dir = path && stat(path, &st) == 0 && S_ISDIR(st.st_mode);
    free(path);
    if (!is_dir) continue;
    char *copy = strdup(e->d_name);
    if (!copy) continue;
    free(best);
    best = copy;
  }
  closedir(d);
  return best;
}

/* 1: `name` in `dir` is a directory, 0: another kind of file, -1: absent. */
static int entry_kind(const char *dir, const char *name) {
  char *path = nrd_path_join(dir, name);
  struct stat st;
  int kind = !path || stat(path, &st) != 0 ? -1 : S_ISDIR(st.st_mode) ? 1 : 0;
  free(path);
  return kind;
}

static int set(json_t *cfg, const char *key, const char *value) {
  return json_object_set_new(cfg, key, json_string(value));
}

int nrd_model_config_detect_backend(json_t *cfg, const char *model_dir) {
  if (*str_of(cfg, "platform") || *str_of(cfg, "default_model_filename")) return 0;
  const char *backend = str_of(cfg, "backend");
  bool tf = !strcmp(backend, "tensorflow");
  if (*backend && !tf) return 0;
  char *first = first_subdir(model_dir);
  if (!first) return 0;
  char *vdir = nrd_path_join(model_dir, first);
  free(first);
  if (!vdir) return -1;
  int rc = 0;
  /* Triton's order: TensorFlow (a graphdef file wins over a savedmodel
   * directory), then TensorRT, ONNX Runtime, OpenVINO, PyTorch, Python. */
  const char *platform = NULL;
  if (entry_kind(vdir, "model.savedmodel") == 1) platform = "tensorflow_savedmodel";
  if (entry_kind(vdir, "model.graphdef") == 0) platform = "tensorflow_graphdef";
  if (platform) {
    rc = set(cfg, "platform", platform);
  } else if (!tf) {
    if (entry_kind(vdir, "model.plan") == 0)
      rc = set(cfg, "backend", "tensorrt");
    else if (entry_kind(vdir, "model.onnx") >= 0) /* a file, or a folder for a large model */
      rc = set(cfg, "backend", "onnxruntime");
    else if (entry_kind(vdir, "model.xml") >= 0)
      rc = set(cfg, "backend", "openvino");
    else if (entry_kind(vdir, "model.pt") == 0)
      rc = set(cfg, "backend", "pytorch") | set(cfg, "platform", "pytorch_libtorch");
    else if (entry_kind(vdir, "model.pt") < 0 && entry_kind(vdir, "model.pt2") == 0)
      rc = set(cfg, "backend", "pytorch") | set(cfg, "platform", "torch_aoti");
    else if (entry_kind(vdir, "model.py") >= 0)
      rc = set(cfg, "backend", "python");
  }
  free(vdir);
  return rc ? -1 : 0;
}
