/* Model configuration: golden renders, malformed-input corpus, JSON input,
 * normalization and validation. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_config.h"

#define CONFIG_DIR NRD_TEST_DATA_DIR "/configs"

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f, "cannot open %s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  cr_assert_not_null(buf);
  cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
  buf[n] = '\0';
  fclose(f);
  *len = (size_t)n;
  return buf;
}

/* Lists the <name>.pbtxt files of the config directory (sorted). */
static size_t list_configs(char names[][128], size_t max) {
  DIR *d = opendir(CONFIG_DIR);
  cr_assert_not_null(d);
  size_t n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL && n < max) {
    size_t l = strlen(e->d_name);
    if (l > 6 && l < 120 && strcmp(e->d_name + l - 6, ".pbtxt") == 0) {
      memcpy(names[n], e->d_name, l - 6);
      names[n][l - 6] = '\0';
      n++;
    }
  }
  closedir(d);
  for (size_t i = 0; i < n; i++)
    for (size_t j = i + 1; j < n; j++)
      if (strcmp(names[i], names[j]) > 0) {
        char t[128];
        strcpy(t, names[i]);
        strcpy(names[i], names[j]);
        strcpy(names[j], t);
      }
  return n;
}

static json_t *load_normalized(const char *text, size_t len, const char *name) {
  char *err = NULL;
  json_t *cfg = nrd_model_config_parse(text, len, name, &err);
  cr_assert_not_null(cfg, "parse %s: %s", name, err ? err : "");
  cr_assert_eq(nrd_model_config_normalize(cfg, NULL, 0, &err), 0, "normalize %s: %s", name, err ? err : "");
  return cfg;
}

/* ---- golden renders ---- */

Test(model_config, golden_renders) {
  char names[64][128];
  size_t n = list_configs(names, 64);
  cr_assert_geq(n, 9, "expected the golden configs in %s", CONFIG_DIR);
  for (size_t i = 0; i < n; i++) {
    char path[512];
    size_t len, jlen;
    snprintf(path, sizeof path, "%s/%s.pbtxt", CONFIG_DIR, names[i]);
    char *text = read_file(path, &len);
    snprintf(path, sizeof path, "%s/%s.json", CONFIG_DIR, names[i]);
    char *golden = read_file(path, &jlen);

    json_t *cfg = load_normalized(text, len, names[i]);
    char *err = NULL;
    cr_expect_eq(nrd_model_config_validate(cfg, names[i], 0, &err), 0, "validate %s: %s", names[i], err ? err : "");
    free(err);
    char *out = nrd_model_config_render(cfg);
    cr_assert_not_null(out);
    json_error_t je;
    json_t *got = json_loads(out, 0, &je);
    cr_assert_not_null(got, "%s: render is not JSON: %s\n%s", names[i], je.text, out);
    json_t *want = json_loads(golden, 0, &je);
    cr_assert_not_null(want, "%s.json: %s", names[i], je.text);
    cr_expect(json_equal(got, want), "%s: render differs from golden\n%s", names[i], out);

    /* Render -> from_json -> render is a fixed point. */
    json_t *back = nrd_model_config_from_json(out, strlen(out), &err);
    cr_assert_not_null(back, "%s: from_json of render failed: %s", names[i], err ? err : "");
    char *out2 = nrd_model_config_render(back);
    cr_expect_str_eq(out2, out, "%s: render not stable through from_json", names[i]);

    free(out2);
    json_decref(back);
    json_decref(got);
    json_decref(want);
    free(out);
    json_decref(cfg);
    free(text);
    free(golden);
  }
}

Test(model_config, render_64bit_rules) {
  const char *text = "name: \"m\" backend: \"b\" max_batch_size: 2\n"
                     "input { name: \"i\" data_type: TYPE_INT8 dims: [-1] }\n"
                     "output { name: \"o\" data_type: TYPE_INT8 dims: [2] }\n"
                     "dynamic_batching { max_queue_delay_microseconds: 18446744073709551615 }\n"
                     "instance_group { secondary_devices { device_id: -5 } }\n";
  json_t *cfg = load_normalized(text, strlen(text), "m");
  char *out = nrd_model_config_render(cfg);
  cr_assert_not_null(strstr(out, "\"max_queue_delay_microseconds\":18446744073709551615"), "%s", out);
  cr_assert_not_null(strstr(out, "\"device_id\":\"-5\""), "%s", out);
  cr_assert_not_null(strstr(out, "\"dims\":[-1]"), "%s", out);
  cr_assert_not_null(strstr(out, "\"priority_levels\":0"), "%s", out);
  free(out);
  json_decref(cfg);
}

Test(model_config, render_escapes_and_reals) {
  json_t *cfg = json_pack("{s:s, s:{s:{s:{s:f}}}, s:{s:[{s:{s:[f,s]}}]}}", "name", "q\"\\\n\x01\xc3\xa9",
                          "sequence_batching", "direct", "minimum_slot_utilization", "x", 0.0, "model_metrics",
                          "metric_control", "histogram_options", "buckets", 0.1, "NaN");
  cr_assert_not_null(cfg);
  json_t *direct = json_object_get(json_object_get(cfg, "sequence_batching"), "direct");
  json_object_del(direct, "minimum_slot_utilization");
  json_object_set_new(direct, "minimum_slot_utilization", json_real((double)0.1f));
  char *out = nrd_model_config_render(cfg);
  cr_assert_not_null(strstr(out, "\"name\":\"q\\\"\\\\\\n\\u0001\xc3\xa9\""), "%s", out);
  cr_assert_not_null(strstr(out, "\"minimum_slot_utilization\":0.1"), "%s", out);
  cr_assert_not_null(strstr(out, "\"buckets\":[0.1,\"NaN\"]"), "%s", out);
  /* Wrong JSON types render as defaults instead of crashing. */
  json_object_set_new(cfg, "max_batch_size", json_string("oops"));
  json_object_set_new(cfg, "input", json_string("oops"));
  free(out);
  out = nrd_model_config_render(cfg);
  cr_assert_not_null(strstr(out, "\"max_batch_size\":0"), "%s", out);
  cr_assert_not_null(strstr(out, "\"input\":[]"), "%s", out);
  free(out);
  json_decref(cfg);
  out = nrd_model_config_render(NULL);
  cr_assert_not_null(out);
  free(out);
}

/* ---- malformed corpus: never crash, never leak, always an error string ---- */

static void parse_any(const char *text, size_t len) {
  char *err = NULL;
  json_t *cfg = nrd_model_config_parse(text, len, "fuzz.pbtxt", &err);
  if (cfg == NULL) {
    cr_assert_not_null(err);
    cr_assert(strncmp(err, "fuzz.pbtxt:", 11) == 0, "bad error format: %s", err);
    free(err);
    return;
  }
  cr_assert_null(err);
  if (nrd_model_config_normalize(cfg, NULL, 0, &err) == 0) {
    if (nrd_model_config_validate(cfg, "fuzz.pbtxt", 0, &err) != 0) {
      cr_assert_not_null(err);
      free(err);
    }
    char *out = nrd_model_config_render(cfg);
    cr_assert_not_null(out);
    free(out);
  } else {
    cr_assert_not_null(err);
    free(err);
  }
  json_decref(cfg);
}

Test(model_config, truncated_at_every_offset) {
  char names[64][128];
  size_t n = list_configs(names, 64);
  size_t total = 0;
  for (size_t i = 0; i < n; i++) {
    char path[512];
    size_t len;
    snprintf(path, sizeof path, "%s/%s.pbtxt", CONFIG_DIR, names[i]);
    char *text = read_file(path, &len);
    for (size_t cut = 0; cut <= len; cut++) {
      char *copy = malloc(cut ? cut : 1); /* exact size: ASan catches over-reads */
      memcpy(copy, text, cut);
      parse_any(copy, cut);
      free(copy);
      total++;
    }
    free(text);
  }
  cr_assert_gt(total, 1000);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

Test(model_config, mutated_corpus) {
  static const char alphabet[] = "{}[]<>:;,\"'\\#-.0123456789xeE_abcdefTYPE \n\t\x80\xff\x00";
  char names[64][128];
  size_t n = list_configs(names, 64);
  size_t cases = 0;
  for (size_t i = 0; i < n; i++) {
    char path[512];
    size_t len;
    snprintf(path, sizeof path, "%s/%s.pbtxt", CONFIG_DIR, names[i]);
    char *text = read_file(path, &len);
    for (int round = 0; round < 60; round++) {
      size_t cap = len + 16;
      char *m = malloc(cap);
      memcpy(m, text, len);
      size_t mlen = len;
      int edits = 1 + (int)(rng() % 4);
      for (int e = 0; e < edits; e++) {
        size_t pos = mlen ? (size_t)(rng() % mlen) : 0;
        char c = alphabet[rng() % (sizeof alphabet - 1)];
        switch (rng() % 3) {
          case 0: /* flip */
            if (mlen) m[pos] = c;
            break;
          case 1: /* insert */
            if (mlen + 1 < cap) {
              memmove(m + pos + 1, m + pos, mlen - pos);
              m[pos] = c;
              mlen++;
            }
            break;
          default: /* delete */
            if (mlen) {
              memmove(m + pos, m + pos + 1, mlen - pos - 1);
              mlen--;
            }
        }
      }
      char *exact = malloc(mlen ? mlen : 1);
      memcpy(exact, m, mlen);
      parse_any(exact, mlen);
      free(exact);
      free(m);
      cases++;
    }
    free(text);
  }
  cr_assert_geq(cases, 500);
}

Test(model_config, parse_error_format) {
  const char *t = "name: \"x\"\ninput {\n  name: \"a\"\n  dimz: [1]\n}\n";
  char *err = NULL;
  cr_assert_null(nrd_model_config_parse(t, strlen(t), "models/x/config.pbtxt", &err));
  cr_assert_str_eq(err, "models/x/config.pbtxt:4:3: unknown field 'dimz' in ModelInput");
  free(err);
}

/* ---- JSON input ---- */

static json_t *from_json_ok(const char *s) {
  char *err = NULL;
  json_t *j = nrd_model_config_from_json(s, strlen(s), &err);
  cr_assert_not_null(j, "from_json(%s): %s", s, err ? err : "");
  return j;
}

static void from_json_err(const char *s, const char *substr) {
  char *err = NULL;
  json_t *j = nrd_model_config_from_json(s, strlen(s), &err);
  cr_assert_null(j, "expected error for %s", s);
  cr_assert_not_null(err);
  cr_expect(strstr(err, substr) != NULL, "want '%s' in '%s'", substr, err);
  free(err);
}

Test(model_config, from_json_accepts_protobuf_styles) {
  json_t *j =
      from_json_ok("{\"name\":\"m\",\"maxBatchSize\":\"4\",\"input\":[{\"name\":\"i\",\"dataType\":\"type_fp32\","
                   "\"dims\":[\"3\",-1,2.0]}],\"dynamic_batching\":{\"max_queue_delay_microseconds\":"
                   "\"18446744073709551615\",\"priority_queue_policy\":{\"2\":{\"timeout_action\":1}}},"
                   "\"optimization\":null,\"parameters\":{\"k\":{\"string_value\":\"v\"}}}");
  cr_assert_eq(json_integer_value(json_object_get(j, "max_batch_size")), 4);
  json_t *in = json_array_get(json_object_get(j, "input"), 0);
  cr_assert_str_eq(json_string_value(json_object_get(in, "data_type")), "TYPE_FP32");
  json_t *dims = json_object_get(in, "dims");
  cr_assert_eq(json_integer_value(json_array_get(dims, 0)), 3);
  cr_assert_eq(json_integer_value(json_array_get(dims, 1)), -1);
  cr_assert_eq(json_integer_value(json_array_get(dims, 2)), 2);
  json_t *db = json_object_get(j, "dynamic_batching");
  cr_assert_eq((uint64_t)json_integer_value(json_object_get(db, "max_queue_delay_microseconds")), UINT64_MAX);
  cr_assert_str_eq(json_string_value(json_object_get(json_object_get(json_object_get(db, "priority_queue_policy"), "2"),
                                                     "timeout_action")),
                   "DELAY");
  cr_assert_null(json_object_get(j, "optimization"));
  json_decref(j);
}

Test(model_config, from_json_errors_name_paths) {
  from_json_err("{\"input\":[{\"name\":\"a\",\"dimz\":[1]}]}", "input[0].dimz: unknown field 'dimz' in ModelInput");
  from_json_err("{\"max_batch_size\":\"x\"}", "max_batch_size: invalid integer string");
  from_json_err("{\"max_batch_size\":1.5}", "max_batch_size: expected an integer");
  from_json_err("{\"max_batch_size\":4294967296}", "out of range for int32");
  from_json_err("{\"max_batch_size\":true}", "expected int32");
  from_json_err("{\"name\":5}", "name: expected string");
  from_json_err("{\"input\":{}}", "expected an array for repeated field 'input'");
  from_json_err("{\"input\":[5]}", "input[0]: expected an object");
  from_json_err("{\"parameters\":[]}", "expected an object for map field");
  from_json_err("{\"dynamic_batching\":{\"priority_queue_policy\":{\"x\":{}}}}",
                "dynamic_batching.priority_queue_policy.x: invalid uint64 map key");
  from_json_err("{\"input\":[{\"data_type\":\"TYPE_NOPE\"}]}", "unknown value 'TYPE_NOPE'");
  from_json_err("{\"input\":[{\"data_type\":77}]}", "unknown number 77");
  from_json_err("{\"version_policy\":{\"latest\":{},\"all\":{}}}", "oneof 'policy_choice'");
  from_json_err("{\"max_batch_size\":1,\"maxBatchSize\":2}", "specified more than once");
  from_json_err("{\"name\":\"a\",\"name\":\"b\"}", "JSON:");
  from_json_err("[1]", "expected a JSON object");
  from_json_err("{\"name\":", "JSON:1:");
  from_json_err("{\"response_cache\":{\"enable\":\"yes\"}}", "response_cache.enable: expected bool");
  from_json_err("{\"sequence_batching\":{\"direct\":{\"minimum_slot_utilization\":\"abc\"}}}", "invalid number string");
  from_json_err("{\"name\":\"a\\u0000b\"}", "NUL");
  char *err = NULL;
  cr_assert_null(nrd_model_config_from_json(NULL, 0, &err));
  free(err);
  cr_assert_null(nrd_model_config_from_json("{\"x\":1}", 7, NULL));
}

/* ---- normalization ---- */

Test(model_config, normalize_name_rules) {
  char *err = NULL;
  json_t *cfg = json_pack("{s:s}", "backend", "identity");
  cr_assert_eq(nrd_model_config_normalize(cfg, "mymodel", 0, &err), 0);
  cr_assert_str_eq(json_string_value(json_object_get(cfg, "name")), "mymodel");
  json_t *g = json_array_get(json_object_get(cfg, "instance_group"), 0);
  cr_assert_str_eq(json_string_value(json_object_get(g, "name")), "mymodel");
  cr_assert_str_eq(json_string_value(json_object_get(g, "kind")), "KIND_CPU");
  cr_assert_eq(json_integer_value(json_object_get(g, "count")), 1);
  json_decref(cfg);

  cfg = json_pack("{s:s, s:s}", "name", "other", "backend", "identity");
  cr_assert_eq(nrd_model_config_normalize(cfg, "mymodel", 0, &err), -1);
  cr_assert_str_eq(err, "unexpected directory name 'mymodel' for model 'other', directory name "
                        "must equal model name (field 'name')");
  free(err);
  json_decref(cfg);
}

Test(model_config, normalize_backend_autofill) {
  char *err = NULL;
  json_t *cfg = json_object();
  cr_assert_eq(nrd_model_config_normalize(cfg, "model.square", 0, &err), 0, "%s", err);
  cr_assert_str_eq(json_string_value(json_object_get(cfg, "backend")), "square");
  cr_assert_str_eq(json_string_value(json_object_get(cfg, "default_model_filename")), "model.square");
  json_decref(cfg);

  cfg = json_object();
  cr_assert_eq(nrd_model_config_normalize(cfg, "nodot", 0, &err), -1);
  cr_assert(strstr(err, "Could not determine backend for model 'nodot'") != NULL, "%s", err);
  free(err);
  json_decref(cfg);

  cfg = json_pack("{s:s}", "backend", "onnxruntime");
  cr_assert_eq(nrd_model_config_normalize(cfg, "o", 0, &err), 0);
  cr_assert_str_eq(json_string_value(json_object_get(cfg, "platform")), "onnxruntime_onnx");
  cr_assert_str_eq(json_string_value(json_object_get(cfg, "default_model_filename")), "model.onnx");
  cr_assert_eq(json_integer_value(json_object_get(json_array_get(json_object_get(cfg, "instance_group"), 0), "count")),
               2);
  json_decref(cfg);

  cfg = json_pack("{s:s}", "default_model_filename", "model.py");
  cr_assert_eq(nrd_model_config_normalize(cfg, "p", 0, &err), 0);
  cr_assert_str_eq(json_string_value(json_object_get(cfg, "backend")), "python");
  json_decref(cfg);

  cfg = json_pack("{s:s}", "platform", "tensorrt_plan");
  cr_assert_eq(nrd_model_config_normalize(cfg, "t", 1, &err), 0);
  cr_assert_str_eq(json_string_value(json_object_get(cfg, "backend")), "tensorrt");
  cr_assert_str_eq(
      json_string_value(json_object_get(json_array_get(json_object_get(cfg, "instance_group"), 0), "kind")),
      "KIND_GPU");
  json_decref(cfg);
}

Test(model_config, normalize_batching_defaults) {
  char *err = NULL;
  json_t *cfg = json_pack("{s:s, s:i, s:{s:{}}}", "backend", "b", "max_batch_size", 8, "sequence_batching", "oldest");
  cr_assert_eq(nrd_model_config_normalize(cfg, "m", 0, &err), 0);
  json_t *sb = json_object_get(cfg, "sequence_batching");
  cr_assert_eq(json_integer_value(json_object_get(sb, "max_sequence_idle_microseconds")), NRD_SEQUENCE_IDLE_DEFAULT_US);
  cr_assert_eq(
      json_integer_value(json_array_get(json_object_get(json_object_get(sb, "oldest"), "preferred_batch_size"), 0)), 8);
  json_decref(cfg);

  cfg = json_pack("{s:s, s:{}}", "backend", "b", "dynamic_batching");
  cr_assert_eq(nrd_model_config_normalize(cfg, "m", 0, &err), 0);
  cr_assert_null(json_object_get(json_object_get(cfg, "dynamic_batching"), "preferred_batch_size"));
  json_decref(cfg);

  cr_assert_eq(nrd_model_config_normalize(NULL, "m", 0, &err), -1);
  free(err);
}

/* ---- validation ---- */

typedef struct vcase {
  const char *pbtxt;
  int has_gpu;
  const char *substr;
} vcase;

#define IO_OK                                                                                                          \
  "input { name: \"i\" data_type: TYPE_FP32 dims: [4] } output { name: \"o\" data_type: TYPE_FP32 dims: [4] } "

static const vcase vcases[] = {
    {"backend: \"b\" max_batch_size: -1", 0,
     "'max_batch_size' must be non-negative value for m (m/config.pbtxt:1:24: field 'max_batch_size', value -1)"},
    {"platform: \"tensorrt_plan\" backend: \"onnxruntime\"", 0, "unexpected 'platform' and 'backend' pair"},
    {"platform: \"ensemble\" backend: \"b\"", 0, "must have platform type 'ensemble' and empty backend"},
    {"backend: \"b\" max_batch_size: 4 dynamic_batching { preferred_batch_size: [0] }", 0,
     "dynamic batching preferred size must be positive for m (m/config.pbtxt:1:84: field "
     "'dynamic_batching.preferred_batch_size[0]', value 0)"},
    {"backend: \"b\" max_batch_size: 4 dynamic_batching { preferred_batch_size: [8] }", 0,
     "preferred size must be <= max batch size"},
    {"backend: \"b\" max_batch_size: 4 dynamic_batching { priority_levels: 2 }", 0,
     "default priority level must be in range [1, 2] for m (m/config.pbtxt:1:42: field "
     "'dynamic_batching.default_priority_level', value 0)"},
    {"backend: \"b\" max_batch_size: 4 dynamic_batching { priority_levels: 2 default_priority_level: 1 "
     "priority_queue_policy { key: 3 value {} } }",
     0,
     "priority queue policy must have priority level in range [1, 2] for m (m/config.pbtxt:1:130: field "
     "'dynamic_batching.priority_queue_policy[3]')"},
    {"backend: \"b\" max_batch_size: 4 dynamic_batching { preserve_ordering: true priority_levels: 2 "
     "default_priority_level: 1 }",
     0, "Only one priority level"},
    {"backend: \"b\" max_batch_size: 4 dynamic_batching { preserve_ordering: true default_queue_policy { "
     "timeout_action: DELAY default_timeout_microseconds: 5 } }",
     0, "DELAY as timeout action"},
    {"backend: \"b\" max_batch_size: 4 dynamic_batching { preserve_ordering: true priority_queue_policy { key: 1 value "
     "{ timeout_action: DELAY default_timeout_microseconds: 5 } } }",
     0, "DELAY as timeout action"},
    {"backend: \"b\" sequence_batching {} response_cache { enable: true }", 0,
     "Response Cache does not currently support model m with sequence"},
    {"backend: \"b\" sequence_batching { control_input { control { kind: CONTROL_SEQUENCE_START int32_false_true: "
     "[0,1] } } }",
     0, "control tensor must have a name"},
    {"backend: \"b\" sequence_batching { control_input { name: \"a\" } control_input { name: \"a\" } }", 0,
     "'a' is specified for multiple control kinds"},
    {"backend: \"b\" sequence_batching { control_input { name: \"a\" control { kind: CONTROL_SEQUENCE_START } } }", 0,
     "must specify either 'int32_false_true'"},
    {"backend: \"b\" sequence_batching { control_input { name: \"a\" control { kind: CONTROL_SEQUENCE_END "
     "int32_false_true: [0,1] fp32_false_true: [0,1] } } }",
     0, "more than one from"},
    {"backend: \"b\" sequence_batching { control_input { name: \"a\" control { kind: CONTROL_SEQUENCE_READY "
     "int32_false_true: [0] } } }",
     0, "'int32_false_true' must have exactly 2 entries for CONTROL_SEQUENCE_READY"},
    {"backend: \"b\" sequence_batching { control_input { name: \"a\" control { kind: CONTROL_SEQUENCE_START "
     "bool_false_true: [true] } } }",
     0, "'bool_false_true' must have exactly 2"},
    {"backend: \"b\" sequence_batching { control_input { name: \"a\" control { kind: CONTROL_SEQUENCE_START "
     "int32_false_true: [0,1] } } control_input { name: \"b\" control { kind: CONTROL_SEQUENCE_START int32_false_true: "
     "[0,1] } } }",
     0, "multiple CONTROL_SEQUENCE_START tensors"},
    {"backend: \"b\" sequence_batching { control_input { name: \"c\" control { kind: CONTROL_SEQUENCE_CORRID "
     "data_type: TYPE_FP32 } } }",
     0, "unexpected data type for control CONTROL_SEQUENCE_CORRID"},
    {"backend: \"b\" sequence_batching { control_input { name: \"c\" control { kind: CONTROL_SEQUENCE_CORRID "
     "data_type: TYPE_INT64 int32_false_true: [0,1] } } }",
     0, "must not specify"},
    {"backend: \"b\" max_batch_size: 2 sequence_batching { oldest { preferred_batch_size: [3] } }", 0,
     "sequence batching preferred batch size must be <= max batch size"},
    {"backend: \"b\" max_batch_size: 2 sequence_batching { oldest { preferred_batch_size: [-1] } }", 0,
     "sequence batching preferred batch size must be positive"},
    {"backend: \"b\" sequence_batching { direct { minimum_slot_utilization: 1.5 } }", 0,
     "minimum slot utilization must be in range"},
    {"backend: \"b\" model_transaction_policy { decoupled: true } response_cache { enable: true }", 0,
     "with 'decoupled' transaction policy"},
    {"backend: \"b\" model_metrics { metric_control {} }", 0, "must specify 'metric_identifier'"},
    {"backend: \"b\" model_metrics { metric_control { metric_identifier {} } }", 0, "non-empty 'family'"},
    {"backend: \"b\" model_metrics { metric_control { metric_identifier { family: \"f\" } } }", 0,
     "must specify 'histogram_options'"},
    {"backend: \"b\" model_metrics { metric_control { metric_identifier { family: \"f\" } histogram_options {} } }", 0,
     "non-empty 'buckets'"},
    {"backend: \"b\" instance_group { kind: KIND_GPU }", 0,
     "instance group m_0 of model m has kind KIND_GPU but server does not support GPUs"},
    {"backend: \"b\" instance_group { kind: KIND_CPU gpus: [0] }", 0,
     "has kind KIND_CPU but specifies one or more GPUs"},
    {"backend: \"b\" instance_group { kind: KIND_MODEL gpus: [0] }", 0,
     "has kind KIND_MODEL but specifies one or more GPUs"},
    {"backend: \"b\" instance_group { kind: KIND_CPU profile: \"0\" }", 0,
     "profile field which is only supported for TensorRT"},
    {"platform: \"tensorrt_plan\" instance_group { kind: KIND_GPU profile: \"x\" }", 1, "unable to parse 'x': stoi (m/config.pbtxt:1:78: field 'instance_group[0].profile[0]')"},
    {"platform: \"tensorrt_plan\" instance_group { kind: KIND_GPU profile: \"-1\" }", 1,
     "instance group m_0 of model m and platform tensorrt_plan specifies invalid profile -1. The field should "
     "contain the string representation of a non-negative integer. (m/config.pbtxt:1:78: field "
     "'instance_group[0].profile[0]')"},
    {"platform: \"tensorrt_plan\" instance_group { kind: KIND_GPU profile: \"\" }", 1,
     "profile name must not be empty (m/config.pbtxt:1:78: field 'instance_group[0].profile[0]')"},
    {"backend: \"b\" input { data_type: TYPE_FP32 dims: [1] }", 0, "model input must specify 'name' for m"},
    {"backend: \"b\" input { name: \"i\" dims: [1] }", 0, "model input 'i' must specify 'data_type' for m"},
    {"backend: \"b\" output { name: \"o\" data_type: TYPE_INVALID dims: [1] }", 0,
     "model output 'o' must specify 'data_type'"},
    {"backend: \"b\" input { name: \"i\" data_type: TYPE_FP32 }", 0, "model input 'i' must specify 'dims'"},
    {"backend: \"b\" input { name: \"i\" data_type: TYPE_FP32 dims: [0] }", 0,
     "model input 'i' dimension must be integer >= 1, or -1 to indicate a variable-size dimension for m "
     "(m/config.pbtxt:1:70: field 'input[0].dims[0]', value 0)"},
    {"backend: \"b\" input { name: \"i\" data_type: TYPE_FP32 dims: [-2] }", 0,
     "dimension must be integer >= 1, or -1 to indicate a variable-size dimension for m (m/config.pbtxt:1:70: field "
     "'input[0].dims[0]', value -2)"},
    {"backend: \"b\" input { name: \"i\" data_type: TYPE_FP32 dims: [4] reshape { } }", 0,
     "cannot have empty reshape for non-batching model"},
    {"backend: \"b\" input { name: \"i\" data_type: TYPE_FP32 dims: [4] reshape { shape: [0] } }", 0,
     "model input 'i' reshape dimensions must be integer >= 1, or -1 to indicate a variable-size dimension for m "
     "(m/config.pbtxt:1:91: field 'input[0].reshape.shape[0]', value 0)"},
    {"backend: \"b\" input { name: \"i\" data_type: TYPE_FP32 dims: [4] reshape { shape: [5] } }", 0,
     "has different size for dims and reshape"},
    {"backend: \"b\" input { name: \"i\" data_type: TYPE_FP32 dims: [2, -1] reshape { shape: [-1, -1] } }", 0,
     "different number of variable-size dimensions"},
    {"backend: \"b\" input { name: \"i\" data_type: TYPE_FP32 dims: [2, -1, 3] reshape { shape: [2, -1, 4] } }", 0,
     "has different size for dims and reshape"},
    {"backend: \"b\" input { name: \"i\" data_type: TYPE_FP32 format: FORMAT_NHWC dims: [4] }", 0,
     "NHWC/NCHW require 3 dims"},
    {"backend: \"b\" input { name: \"i\" data_type: TYPE_FP32 dims: [4] is_shape_tensor: true }", 0,
     "shape tensors are only supported for TensorRT"},
    {"backend: \"b\" output { name: \"o\" data_type: TYPE_FP32 dims: [4] is_non_linear_format_io: true }", 0,
     "Non-linear IO format is only supported"},
    {"platform: \"tensorrt_plan\" instance_group { kind: KIND_GPU } input { name: \"i\" data_type: TYPE_FP32 dims: [4] "
     "is_non_linear_format_io: true }",
     1, "Non-linear IO format input requires 3 dims"},
    {"backend: \"b\" input { name: \"i\" data_type: TYPE_FP32 dims: [4] } input { name: \"i\" data_type: TYPE_FP32 "
     "dims: [4] }",
     0, "input name 'i' is specified more than once for m (m/config.pbtxt:1:83: field 'input[1].name', value 'i' (also "
     "input[0]))"},
    {"backend: \"b\" " IO_OK "batch_input { kind: BATCH_ELEMENT_COUNT data_type: TYPE_INT32 }", 0,
     "expects 1 source input, got 0"},
    {"backend: \"b\" " IO_OK "batch_input { data_type: TYPE_FP16 source_input: \"i\" }", 0,
     "batch input data type must be TYPE_INT32 or TYPE_FP32"},
    {"backend: \"b\" " IO_OK "batch_input { data_type: TYPE_INT32 source_input: \"zz\" }", 0,
     "unknown source input name 'zz'"},
    {"backend: \"b\" " IO_OK "batch_output { source_input: [] }", 0,
     "batch output kind 'BATCH_SCATTER_WITH_INPUT_SHAPE' expects 1 source input"},
    {"backend: \"b\" " IO_OK "batch_output { source_input: \"q\" }", 0, "unknown source input name 'q'"},
    {"backend: \"b\" " IO_OK "batch_output { source_input: \"i\" target_name: \"x\" }", 0,
     "unknown target output name 'x'"},
    {"backend: \"b\" " IO_OK "batch_output { source_input: \"i\" target_name: [\"o\", \"o\"] }", 0,
     "target output name 'o' can only be specified once"},
    {"backend: \"b\" ensemble_scheduling { step {} }", 0,
     "ensemble scheduling cannot be set for model 'm' whose platform is not ensemble"},
    {"platform: \"ensemble\" ensemble_scheduling { }", 0, "must specify 'step' for ensemble 'm'"},
    {"platform: \"ensemble\" ensemble_scheduling { step { } }", 0, "must specify 'model_name' in step 0"},
    {"platform: \"ensemble\" ensemble_scheduling { step { model_name: \"a\" } }", 0,
     "must specify 'input_map' in step 0"},
    {"platform: \"ensemble\" ensemble_scheduling { step { model_name: \"a\" input_map { key: \"x\" value: \"i\" } } }",
     0, "must specify 'output_map' in step 0"},
    {"platform: \"ensemble\" instance_group {} ensemble_scheduling { step { } }", 0,
     "instance group should not be specified for ensemble"},
    {"platform: \"ensemble\" optimization {} ensemble_scheduling { step { } }", 0,
     "optimization should not be specified"},
    {"platform: \"ensemble\" model_warmup {} ensemble_scheduling { step { } }", 0, "model_warmup can not be specified"},
    {"platform: \"ensemble\" " IO_OK "ensemble_scheduling { step { model_name: \"a\" input_map { key: \"x\" value: "
                                     "\"i\" } output_map { key: \"y\" value: \"t\" } } step { model_name: \"b\" "
                                     "input_map { key: \"x\" value: \"i\" } output_map { key: \"y\" value: \"t\" } } }",
     0, "ensemble tensor 't' can appear in an output map only once"},
    {"platform: \"ensemble\" " IO_OK "ensemble_scheduling { step { model_name: \"a\" input_map { key: \"x\" value: "
                                     "\"zz\" } output_map { key: \"y\" value: \"o\" } } }",
     0, "ensemble input 'i' for ensemble m' is not used"},
    {"platform: \"ensemble\" " IO_OK "ensemble_scheduling { step { model_name: \"a\" input_map { key: \"x\" value: "
                                     "\"i\" } output_map { key: \"y\" value: \"t\" } } }",
     0, "ensemble output 'o' for ensemble m' is not used"},
    {"platform: \"ensemble\" " IO_OK
     "ensemble_scheduling { step { model_name: \"a\" input_map [ { key: \"x\" value: \"i\" }, { key: \"x2\" value: "
     "\"loose\" } ] output_map { key: \"y\" value: \"o\" } } }",
     0,
     "output 'o' for ensemble 'm' is not written: at least one of its depending tensors, 'loose', is not connected "
     "(m/config.pbtxt:1:92: field 'output[0].name', value 'o')"},
    {"platform: \"ensemble\" " IO_OK
     "ensemble_scheduling { step { model_name: \"a\" input_map { key: \"x\" value: \"i\" } output_map [ { key: \"y\" "
     "value: \"o\" }, { key: \"z\" value: \"extra\" } ] } }",
     0, "ensemble tensor 'extra' is unused in ensemble 'm'"},
};

Test(model_config, validation_errors) {
  size_t n = sizeof vcases / sizeof vcases[0];
  for (size_t i = 0; i < n; i++) {
    char text[2048];
    snprintf(text, sizeof text, "name: \"m\" %s", vcases[i].pbtxt);
    char *err = NULL;
    json_t *cfg = nrd_model_config_parse(text, strlen(text), "m/config.pbtxt", &err);
    cr_assert_not_null(cfg, "case %zu: parse: %s", i, err ? err : "");
    cr_assert_eq(nrd_model_config_normalize(cfg, "m", vcases[i].has_gpu, &err), 0, "case %zu: normalize: %s", i,
                 err ? err : "");
    int rc = nrd_model_config_validate(cfg, "m/config.pbtxt", vcases[i].has_gpu, &err);
    cr_expect_eq(rc, -1, "case %zu: expected validation error '%s'", i, vcases[i].substr);
    if (rc == -1) {
      /* Triton's sentence whole, then ours in parentheses after it. */
      const char *ours = strstr(err, " (m/config.pbtxt");
      const char *triton = strstr(err, vcases[i].substr);
      cr_expect(ours != NULL, "case %zu: no position appended: %s", i, err);
      cr_expect(triton != NULL, "case %zu: want '%s' in '%s'", i, vcases[i].substr, err);
      cr_expect(triton == NULL || ours == NULL || triton < ours, "case %zu: detail inside the sentence: %s", i, err);
      free(err);
    }
    json_decref(cfg);
  }
}

Test(model_config, validation_raw_configs) {
  char *err = NULL;
  /* Not normalized: no name, no version policy, AUTO kind, missing groups. */
  json_t *cfg = json_object();
  cr_assert_eq(nrd_model_config_validate(cfg, NULL, 0, &err), -1);
  cr_assert_str_eq(err, "model configuration must specify 'name' (field 'name')");
  free(err);
  json_object_set_new(cfg, "name", json_string("m"));
  cr_assert_eq(nrd_model_config_validate(cfg, NULL, 0, &err), -1);
  cr_assert_str_eq(err, "unexpected platform type '' for m (field 'platform', value '', backend empty)");
  free(err);
  json_object_set_new(cfg, "backend", json_string("b"));
  cr_assert_eq(nrd_model_config_validate(cfg, NULL, 0, &err), -1);
  cr_assert_str_eq(err, "must specify 'version policy' for m (field 'version_policy')");
  free(err);
  json_object_set_new(cfg, "version_policy", json_pack("{s:{}}", "all"));
  cr_assert_eq(nrd_model_config_validate(cfg, NULL, 0, &err), -1);
  cr_assert_str_eq(err, "must specify one or more 'instance group's for m (field 'instance_group')");
  free(err);
  json_object_set_new(cfg, "instance_group", json_pack("[{s:s}]", "name", "g"));
  cr_assert_eq(nrd_model_config_validate(cfg, NULL, 0, &err), -1);
  cr_assert(strstr(err, "unexpected kind KIND_AUTO") != NULL, "%s", err);
  free(err);
  json_object_set_new(cfg, "instance_group", json_pack("[{s:s, s:s}]", "name", "g", "kind", "KIND_CPU"));
  cr_assert_eq(nrd_model_config_validate(cfg, NULL, 0, &err), -1);
  cr_assert(strstr(err, "must have 'count' >= 1") != NULL, "%s", err);
  free(err);
  json_object_set_new(json_array_get(json_object_get(cfg, "instance_group"), 0), "count", json_integer(1));
  cr_assert_eq(nrd_model_config_validate(cfg, NULL, 0, &err), 0);
  cr_assert_eq(nrd_model_config_validate(cfg, NULL, 0, NULL), 0);
  json_decref(cfg);
  cr_assert_eq(nrd_model_config_validate(NULL, "f", 0, &err), -1);
  free(err);
}

Test(model_config, gpu_server_accepts_kind_gpu) {
  const char *t = "name: \"g\" backend: \"b\" instance_group { kind: KIND_GPU gpus: [0] }";
  char *err = NULL;
  json_t *cfg = nrd_model_config_parse(t, strlen(t), "g", &err);
  cr_assert_eq(nrd_model_config_normalize(cfg, "g", 1, &err), 0);
  cr_assert_eq(nrd_model_config_validate(cfg, "g", 1, &err), 0, "%s", err);
  json_decref(cfg);
}

/* Triton reports an ensemble without ensemble_scheduling before a
 * directory that does not match the model's name. */
Test(model_config, ensemble_without_scheduling_before_directory_name) {
  const char *text = "name: \"ens\" platform: \"ensemble\"";
  char *err = NULL;
  json_t *cfg = nrd_model_config_parse(text, strlen(text), "other/config.pbtxt", &err);
  cr_assert_not_null(cfg, "%s", err ? err : "");
  cr_assert_eq(nrd_model_config_normalize(cfg, "other", 0, &err), -1);
  cr_assert_str_eq(err, "ensemble scheduling must be set for ensemble ens whose platform is ensemble "
                        "(other/config.pbtxt:1:13: field 'platform', value 'ensemble')");
  free(err);
  json_decref(cfg);
  /* Without the ensemble, the directory name is what is wrong. */
  text = "name: \"m\" backend: \"b\"";
  cfg = nrd_model_config_parse(text, strlen(text), "other/config.pbtxt", &err);
  cr_assert_not_null(cfg);
  cr_assert_eq(nrd_model_config_normalize(cfg, "other", 0, &err), -1);
  cr_assert(strncmp(err, "unexpected directory name 'other' for model 'm'", 47) == 0, "%s", err);
  free(err);
  json_decref(cfg);
}
