/* nrd_model_config_detect_backend: the backend told by the files of the
 * first version directory, in Triton's order. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files.h"
#include "model_config.h"

static char g_root[64];

static void setup(void) {
  snprintf(g_root, sizeof g_root, "/tmp/nrd-detect-XXXXXX");
  cr_assert_not_null(mkdtemp(g_root));
}

static void teardown(void) { nrd_remove_tree(g_root); }

TestSuite(detect, .init = setup, .fini = teardown);

/* Makes <root>/<rel>: a folder when rel ends in '/', else an empty file
 * (its folders first). */
static void make(const char *rel) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", g_root, rel);
  for (char *p = path + strlen(g_root) + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    mkdir(path, 0755);
    *p = '/';
  }
  if (path[strlen(path) - 1] != '/') {
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s", path);
    fclose(f);
  }
}

/* The backend and platform detected for a configuration given as JSON. */
static void detect(const char *json, char *backend, char *platform) {
  json_t *cfg = json_loads(json, 0, NULL);
  cr_assert_not_null(cfg);
  cr_assert_eq(nrd_model_config_detect_backend(cfg, g_root), 0);
  const char *b = json_string_value(json_object_get(cfg, "backend"));
  const char *p = json_string_value(json_object_get(cfg, "platform"));
  snprintf(backend, 64, "%s", b ? b : "");
  snprintf(platform, 64, "%s", p ? p : "");
  json_decref(cfg);
}

#define EXPECT(json, want_backend, want_platform)                                                   \
  do {                                                                                              \
    char b[64], p[64];                                                                              \
    detect(json, b, p);                                                                             \
    cr_expect_str_eq(b, want_backend, "backend for %s", json);                                      \
    cr_expect_str_eq(p, want_platform, "platform for %s", json);                                    \
  } while (0)

Test(detect, a_model_py_is_python) {
  make("1/model.py");
  EXPECT("{}", "python", "");
}

Test(detect, each_framework_file) {
  make("1/model.plan");
  EXPECT("{}", "tensorrt", "");
  char plan[512];
  snprintf(plan, sizeof plan, "%s/1/model.plan", g_root);
  unlink(plan);
  make("1/model.onnx/");
  EXPECT("{}", "onnxruntime", "");
}

Test(detect, torchscript_and_aoti) {
  make("1/model.pt2");
  EXPECT("{}", "pytorch", "torch_aoti");
  make("1/model.pt");
  EXPECT("{}", "pytorch", "pytorch_libtorch");
}

Test(detect, a_model_pt_folder_is_not_torchscript) {
  make("1/model.pt/");
  make("1/model.py");
  EXPECT("{}", "python", "");
}

Test(detect, tensorflow_graphdef_wins_over_savedmodel) {
  make("1/model.savedmodel/");
  EXPECT("{}", "", "tensorflow_savedmodel");
  make("1/model.graphdef");
  EXPECT("{\"backend\": \"tensorflow\"}", "tensorflow", "tensorflow_graphdef");
}

Test(detect, only_the_first_version_folder_in_byte_order) {
  make("10/model.onnx");
  make("2/model.py");
  EXPECT("{}", "onnxruntime", "");
}

Test(detect, a_configuration_that_says_is_left_alone) {
  make("1/model.py");
  EXPECT("{\"backend\": \"identity\"}", "identity", "");
  EXPECT("{\"platform\": \"onnxruntime_onnx\"}", "", "onnxruntime_onnx");
  EXPECT("{\"default_model_filename\": \"m.bin\"}", "", "");
}

Test(detect, nothing_there_changes_nothing) {
  EXPECT("{}", "", "");
  make("1/weights.bin");
  EXPECT("{}", "", "");
}
