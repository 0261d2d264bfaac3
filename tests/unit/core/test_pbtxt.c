/* Grammar tests for the schema-driven protobuf text-format reader. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model_config_schema.h"
#include "pbtxt.h"

static json_t *parse_ok(const char *text) {
  char *err = NULL;
  json_t *j = nrd_pbtxt_parse(nrd_schema_model_config(), text, strlen(text), "t.pbtxt", &err);
  cr_assert_not_null(j, "unexpected error for <<%s>>: %s", text, err ? err : "(none)");
  cr_assert_null(err);
  return j;
}

/* Parses text expecting failure; returns the malloc'd error. */
static char *parse_err(const char *text) {
  char *err = NULL;
  json_t *j = nrd_pbtxt_parse(nrd_schema_model_config(), text, strlen(text), "t.pbtxt", &err);
  cr_assert_null(j, "expected an error for <<%s>>", text);
  json_decref(j);
  cr_assert_not_null(err);
  return err;
}

static void assert_json(json_t *got, const char *expected) {
  json_error_t e;
  json_t *want = json_loads(expected, 0, &e);
  cr_assert_not_null(want, "bad expected JSON: %s", e.text);
  char *g = json_dumps(got, JSON_SORT_KEYS | JSON_COMPACT);
  cr_assert(json_equal(got, want), "got %s\nwant %s", g, expected);
  free(g);
  json_decref(want);
}

static void check(const char *text, const char *expected) {
  json_t *j = parse_ok(text);
  assert_json(j, expected);
  json_decref(j);
}

Test(pbtxt, empty_and_comments) {
  check("", "{}");
  check("   \n\t# just a comment\n", "{}");
  check("name: \"a\" # trailing\n# x\nplatform: 'b'", "{\"name\":\"a\",\"platform\":\"b\"}");
}

Test(pbtxt, message_forms) {
  check("version_policy { latest { num_versions: 2 } }", "{\"version_policy\":{\"latest\":{\"num_versions\":2}}}");
  check("version_policy: { all: {} }", "{\"version_policy\":{\"all\":{}}}");
  check("version_policy < specific < versions: 3 > >", "{\"version_policy\":{\"specific\":{\"versions\":[3]}}}");
  check("dynamic_batching {}", "{\"dynamic_batching\":{}}");
}

Test(pbtxt, lists_and_repeats) {
  check("input { dims: [1, 2, -1] dims: 4 }", "{\"input\":[{\"dims\":[1,2,-1,4]}]}");
  check("input { dims: [] }", "{\"input\":[{\"dims\":[]}]}");
  check("input [ { name: \"a\" }, { name: \"b\" } ] input { name: \"c\" }",
        "{\"input\":[{\"name\":\"a\"},{\"name\":\"b\"},{\"name\":\"c\"}]}");
  check("input: [ { name: \"a\" } ]", "{\"input\":[{\"name\":\"a\"}]}");
  check("input []", "{\"input\":[]}");
  check("input < name: 'x' >", "{\"input\":[{\"name\":\"x\"}]}");
}

Test(pbtxt, enums) {
  check("input { data_type: TYPE_FP32 format: FORMAT_NCHW }",
        "{\"input\":[{\"data_type\":\"TYPE_FP32\",\"format\":\"FORMAT_NCHW\"}]}");
  check("input { data_type: 13 }", "{\"input\":[{\"data_type\":\"TYPE_STRING\"}]}");
  check("instance_group { kind: KIND_MODEL }", "{\"instance_group\":[{\"kind\":\"KIND_MODEL\"}]}");
}

Test(pbtxt, strings) {
  check("name: \"a\\n\\t\\\\\\\"\\'b\"", "{\"name\":\"a\\n\\t\\\\\\\"'b\"}");
  check("name: 'it''s' \"x\"", "{\"name\":\"itsx\"}");
  check("name: \"\\101\\x42\\x043\"", "{\"name\":\"AB\\u00043\"}" /* \x04 then '3' */);
  check("name: \"caf\\303\\251\"", "{\"name\":\"caf\\u00e9\"}");
  check("name: \"\\u00e9\"", "{\"name\":\"\\u00e9\"}");
  check("name: \"\"", "{\"name\":\"\"}");
  check("name: \"caf\xc3\xa9\"", "{\"name\":\"caf\\u00e9\"}");
}

Test(pbtxt, integers) {
  check("max_batch_size: 0x10", "{\"max_batch_size\":16}");
  check("max_batch_size: 010", "{\"max_batch_size\":8}");
  check("max_batch_size: -2147483648", "{\"max_batch_size\":-2147483648}");
  check("max_batch_size: 2147483647", "{\"max_batch_size\":2147483647}");
  check("max_batch_size: - 3", "{\"max_batch_size\":-3}");
  check("input { dims: -9223372036854775808 dims: 9223372036854775807 }",
        "{\"input\":[{\"dims\":[-9223372036854775808,9223372036854775807]}]}");
  check("version_policy { latest { num_versions: 4294967295 } }",
        "{\"version_policy\":{\"latest\":{\"num_versions\":4294967295}}}");
  json_t *j = parse_ok("dynamic_batching { max_queue_delay_microseconds: 18446744073709551615 }");
  json_t *v = json_object_get(json_object_get(j, "dynamic_batching"), "max_queue_delay_microseconds");
  cr_assert_eq((uint64_t)json_integer_value(v), UINT64_MAX);
  json_decref(j);
}

Test(pbtxt, floats) {
  json_t *j = parse_ok("sequence_batching { direct { minimum_slot_utilization: 0.25 } }");
  json_t *v =
      json_object_get(json_object_get(json_object_get(j, "sequence_batching"), "direct"), "minimum_slot_utilization");
  cr_assert(json_is_real(v));
  cr_assert_float_eq(json_real_value(v), 0.25, 1e-12);
  json_decref(j);
  check("model_metrics { metric_control { histogram_options { buckets: [1e3, -2.5E-1, .5, 5., 3, 2f, 1.5F] } } }",
        "{\"model_metrics\":{\"metric_control\":[{\"histogram_options\":{\"buckets\":[1000.0,-0.25,0.5,5.0,3.0,2.0,1.5]"
        "}}]}}");
  check("model_metrics { metric_control { histogram_options { buckets: [inf, -inf, nan, Infinity, -NaN] } } }",
        "{\"model_metrics\":{\"metric_control\":[{\"histogram_options\":{\"buckets\":"
        "[\"Infinity\",\"-Infinity\",\"NaN\",\"Infinity\",\"NaN\"]}}]}}");
  /* float fields are rounded to single precision */
  j = parse_ok("sequence_batching { control_input { control { fp32_false_true: [0.1] } } }");
  double d = json_real_value(json_array_get(
      json_object_get(
          json_array_get(
              json_object_get(
                  json_array_get(json_object_get(json_object_get(j, "sequence_batching"), "control_input"), 0),
                  "control"),
              0),
          "fp32_false_true"),
      0));
  cr_assert_eq(d, (double)0.1f);
  json_decref(j);
}

Test(pbtxt, bools) {
  check("response_cache { enable: true }", "{\"response_cache\":{\"enable\":true}}");
  check("response_cache { enable: True }", "{\"response_cache\":{\"enable\":true}}");
  check("response_cache { enable: t }", "{\"response_cache\":{\"enable\":true}}");
  check("response_cache { enable: 1 }", "{\"response_cache\":{\"enable\":true}}");
  check("response_cache { enable: false }", "{\"response_cache\":{\"enable\":false}}");
  check("response_cache { enable: False }", "{\"response_cache\":{\"enable\":false}}");
  check("response_cache { enable: f }", "{\"response_cache\":{\"enable\":false}}");
  check("response_cache { enable: 0 }", "{\"response_cache\":{\"enable\":false}}");
}

Test(pbtxt, maps) {
  check("parameters { key: \"x\" value: { string_value: \"y\" } }",
        "{\"parameters\":{\"x\":{\"string_value\":\"y\"}}}");
  check("parameters [ { key: \"a\" value { string_value: \"1\" } }, { value { } key: \"b\" } ]",
        "{\"parameters\":{\"a\":{\"string_value\":\"1\"},\"b\":{}}}");
  check("parameters { key: \"a\" value { string_value: \"1\" } } "
        "parameters { key: \"a\" value { string_value: \"2\" } }",
        "{\"parameters\":{\"a\":{\"string_value\":\"2\"}}}");
  check("metric_tags { key: 'k' value: 'v' } metric_tags {}", "{\"metric_tags\":{\"k\":\"v\",\"\":\"\"}}");
  check("dynamic_batching { priority_queue_policy { key: 0x2 value { max_queue_size: 3 } } }",
        "{\"dynamic_batching\":{\"priority_queue_policy\":{\"2\":{\"max_queue_size\":3}}}}");
  check("parameters: []", "{\"parameters\":{}}");
}

Test(pbtxt, separators) {
  check("name: \"a\", platform: \"b\"; backend: \"c\";", "{\"name\":\"a\",\"platform\":\"b\",\"backend\":\"c\"}");
  check("input { name: \"a\"; dims: 1, }", "{\"input\":[{\"name\":\"a\",\"dims\":[1]}]}");
}

Test(pbtxt, null_err_pointer_and_null_text) {
  json_t *j = nrd_pbtxt_parse(nrd_schema_model_config(), "bogus: 1", 8, NULL, NULL);
  cr_assert_null(j);
  j = nrd_pbtxt_parse(nrd_schema_model_config(), NULL, 0, NULL, NULL);
  cr_assert_not_null(j);
  json_decref(j);
}

Test(pbtxt, not_nul_terminated) {
  const char text[] = {'n', 'a', 'm', 'e', ':', ' ', '"', 'x', '"'};
  char *err = NULL;
  json_t *j = nrd_pbtxt_parse(nrd_schema_model_config(), text, sizeof text, "t", &err);
  cr_assert_not_null(j);
  cr_assert_str_eq(json_string_value(json_object_get(j, "name")), "x");
  json_decref(j);
}

/* ---- errors with positions ---- */

typedef struct bad_case {
  const char *text;
  const char *where; /* "t.pbtxt:L:C: " prefix expected */
  const char *substr; /* must appear in the message */
} bad_case;

static const bad_case bad_cases[] = {
    {"dimz: 1", "t.pbtxt:1:1: ", "unknown field 'dimz' in ModelConfig"},
    {"input {\n  name: \"a\"\n  dimz: [1]\n}", "t.pbtxt:3:3: ", "unknown field 'dimz' in ModelInput"},
    {"name: \"a\"\nname: \"b\"", "t.pbtxt:2:1: ", "'name' of ModelConfig is specified more than once"},
    {"optimization {} optimization {}", "t.pbtxt:1:17: ", "more than once"},
    {"max_batch_size: \"8\"", "t.pbtxt:1:17: ", "Expected integer, got: \"8\" (int32 field 'max_batch_size')"},
    {"max_batch_size: 1.5", "t.pbtxt:1:17: ", "invalid integer"},
    {"max_batch_size: 2147483648", "t.pbtxt:1:17: ", "Integer out of range (2147483648) (2147483648 for int32"},
    {"max_batch_size: -2147483649", "t.pbtxt:1:17: ", "out of range"},
    {"max_batch_size: 99999999999999999999999", "t.pbtxt:1:17: ", "out of range"},
    {"version_policy { latest { num_versions: -1 } }", "t.pbtxt:1:41: ", "Expected integer, got: - (uint32 field"},
    {"version_policy { latest { num_versions: 4294967296 } }", "t.pbtxt:1:41: ", "out of range"},
    {"input { dims: 9223372036854775808 }",
     "t.pbtxt:1:15: ", "Integer out of range (9223372036854775808) (9223372036854775808 for int64"},
    {"dynamic_batching { max_queue_delay_microseconds: 18446744073709551616 }", "t.pbtxt:1:50: ", "out of range"},
    {"dynamic_batching { max_queue_delay_microseconds: -1 }",
     "t.pbtxt:1:50: ", "Expected integer, got: - (uint64 field"},
    {"max_batch_size: 0x", "t.pbtxt:1:17: ", "invalid integer"},
    {"max_batch_size: 08", "t.pbtxt:1:17: ", "invalid integer"},
    {"max_batch_size: 12abc", "t.pbtxt:1:17: ", "invalid integer"},
    {"max_batch_size: true", "t.pbtxt:1:17: ", "Expected integer, got: true"},
    {"max_batch_size 8", "t.pbtxt:1:16: ", "expected ':'"},
    {"max_batch_size: [1]", "t.pbtxt:1:17: ", "not repeated"},
    {"input { data_type: TYPE_FLOAT }", "t.pbtxt:1:20: ", "unknown value 'TYPE_FLOAT' for enum DataType"},
    {"input { data_type: 99 }", "t.pbtxt:1:20: ", "unknown number 99 for enum DataType"},
    {"input { data_type: -1 }", "t.pbtxt:1:20: ", "unknown number -1"},
    {"input { data_type: \"TYPE_FP32\" }", "t.pbtxt:1:20: ", "expected an enum value name"},
    {"instance_group { kind: KIND_TPU }", "t.pbtxt:1:24: ", "unknown value 'KIND_TPU'"},
    {"response_cache { enable: yes }", "t.pbtxt:1:26: ", "invalid value 'yes' for bool"},
    {"response_cache { enable: 2 }", "t.pbtxt:1:26: ", "bool field 'enable'"},
    {"response_cache { enable: TRUE }", "t.pbtxt:1:26: ", "bool field"},
    {"response_cache { enable: -1 }", "t.pbtxt:1:26: ", "bool field"},
    {"name: abc", "t.pbtxt:1:7: ", "expected a string for field 'name'"},
    {"name: 5", "t.pbtxt:1:7: ", "expected a string"},
    {"name: \"abc", "t.pbtxt:1:7: ", "unterminated string"},
    {"name: 'abc\"", "t.pbtxt:1:7: ", "unterminated string"},
    {"name: \"ab\ncd\"", "t.pbtxt:1:7: ", "unterminated string"},
    {"name: \"ab\\", "t.pbtxt:1:7: ", "unterminated string"},
    {"name: \"\\q\"", "t.pbtxt:1:8: ", "invalid escape sequence '\\q'"},
    {"name: \"\\xg\"", "t.pbtxt:1:8: ", "invalid \\x escape"},
    {"name: \"\\u12\"", "t.pbtxt:1:8: ", "invalid \\u escape"},
    {"name: \"\\ud800\"", "t.pbtxt:1:8: ", "invalid unicode escape"},
    {"name: \"\\777\"", "t.pbtxt:1:8: ", "octal escape out of range"},
    {"name: \"\\xff\"", "t.pbtxt:1:7: ", "not valid UTF-8"},
    {"name: \"\xc3\"", "t.pbtxt:1:7: ", "not valid UTF-8"},
    {"name: \"\xed\xa0\x80\"", "t.pbtxt:1:7: ", "not valid UTF-8"},
    {"name: \"\xc0\xaf\"", "t.pbtxt:1:7: ", "not valid UTF-8"},
    {"name: \"a\\000b\"", "t.pbtxt:1:7: ", "NUL byte"},
    {"input {", "t.pbtxt:1:8: ", "ModelInput opened at 1:7 is not closed"},
    {"input {\n name: \"x\"\n", "t.pbtxt:3:1: ", "opened at 1:7 is not closed (missing '}')"},
    {"input <\n name: \"x\"\n}", "t.pbtxt:3:1: ", "expected a field name"},
    {"input { name: \"x\" >", "t.pbtxt:1:19: ", "expected a field name"},
    {"}", "t.pbtxt:1:1: ", "expected a field name in ModelConfig, got '}'"},
    {"input { dims: [1, 2 }", "t.pbtxt:1:21: ", "expected ',' or ']'"},
    {"input { dims: [1, 2", "t.pbtxt:1:20: ", "list of field 'dims' opened at 1:15 is not closed"},
    {"input { dims: [1,, 2] }", "t.pbtxt:1:18: ", "Expected integer, got:"},
    {"input { dims: [,] }", "t.pbtxt:1:16: ", "Expected integer, got:"},
    {"input [ name: \"x\" ]", "t.pbtxt:1:9: ", "expected '{' to start message field 'input'"},
    {"input: 5", "t.pbtxt:1:8: ", "expected '{'"},
    {"input { name: \"a\" } }", "t.pbtxt:1:21: ", "expected a field name"},
    {"version_policy { latest {} all {} }", "t.pbtxt:1:28: ", "conflicts with 'latest'"},
    {"dynamic_batching {} sequence_batching {}", "t.pbtxt:1:21: ", "oneof 'scheduling_choice'"},
    {"sequence_batching { direct {} oldest {} }", "t.pbtxt:1:31: ", "oneof 'strategy_choice'"},
    {"model_warmup { inputs { key: \"a\" value { zero_data: true random_data: true } } }",
     "t.pbtxt:1:58: ", "oneof 'input_data_type'"},
    {"parameters { key: \"a\" key: \"b\" }", "t.pbtxt:1:23: ", "duplicate 'key'"},
    {"parameters { key: \"a\" foo: 1 }", "t.pbtxt:1:23: ", "expected 'key' or 'value'"},
    {"parameters { key: 5 }", "t.pbtxt:1:19: ", "expected a string"},
    {"parameters { value: \"x\" }", "t.pbtxt:1:21: ", "expected '{'"},
    {"parameters { key: \"a\"", "t.pbtxt:1:22: ", "entry of map field 'parameters' opened at 1:12"},
    {"parameters \"a\"", "t.pbtxt:1:12: ", "expected '{' to start an entry of map field"},
    {"dynamic_batching { priority_queue_policy { key: \"a\" } }", "t.pbtxt:1:49: ", "Expected integer, got: \"a\""},
    {"dynamic_batching { priority_queue_policy { key: -1 } }", "t.pbtxt:1:49: ", "Expected integer, got: -"},
    {"[ext.field]: 1", "t.pbtxt:1:1: ", "extension and Any fields are not supported"},
    {"name: \"a\" @", "t.pbtxt:1:11: ", "unexpected character '@'"},
    {"name: \"a\"\n\x01", "t.pbtxt:2:1: ", "unexpected byte 0x01"},
    {"name: \"a\"\n  \xc3\xa9", "t.pbtxt:2:3: ", "unexpected byte 0xc3"},
    {"max_batch_size: ", "t.pbtxt:1:17: ", "got end of input"},
    {"max_batch_size:", "t.pbtxt:1:16: ", "end of input"},
    {"name", "t.pbtxt:1:5: ", "expected ':'"},
    {"input", "t.pbtxt:1:6: ", "expected '{'"},
    {"input:", "t.pbtxt:1:7: ", "expected '{'"},
    {"sequence_batching { direct { minimum_slot_utilization: abc } }", "t.pbtxt:1:56: ", "expected a number"},
    {"sequence_batching { direct { minimum_slot_utilization: 1.2.3 } }", "t.pbtxt:1:56: ", "invalid number"},
    {"sequence_batching { direct { minimum_slot_utilization: 1e } }", "t.pbtxt:1:56: ", "invalid number"},
    {"sequence_batching { direct { minimum_slot_utilization: \"0.5\" } }", "t.pbtxt:1:56: ", "expected a number"},
    {"- 5", "t.pbtxt:1:1: ", "expected a field name"},
    {"input { name: \"a\" dims: [1] reshape { shape: [x] } }", "t.pbtxt:1:47: ", "Expected integer, got:"},
    {"input { reshape { shape: 1 } reshape {} }",
     "t.pbtxt:1:30: ", "'reshape' of ModelInput is specified more than once"},
    {"# only a comment\n\n   foo { }", "t.pbtxt:3:4: ", "unknown field 'foo'"},
    {"instance_group [ { count: 1 }, { cnt: 2 } ]", "t.pbtxt:1:34: ", "unknown field 'cnt' in ModelInstanceGroup"},
    {"ensemble_scheduling { step { model_version: \"1\" } }", "t.pbtxt:1:45: ", "Expected integer, got:"},
    {"ensemble_scheduling { step { input_map { key: \"a\" value: 1 } } }", "t.pbtxt:1:58: ", "expected a string"},
    {"optimization { cuda { graph_spec { input { key: \"x\" value { dim: [a] } } } } }",
     "t.pbtxt:1:67: ", "Expected integer, got:"},
    {"name: \"a\" \"b", "t.pbtxt:1:11: ", "unterminated string"},
    {"input { name: \"a\" }\ninput { name: \"b\" dims: [1 2] }", "t.pbtxt:2:28: ", "expected ',' or ']'"},
    {"max_batch_size: 1 max_batch_size: 2", "t.pbtxt:1:19: ", "more than once"},
    {"input {\r\n  bogus: 1\r\n}", "t.pbtxt:2:3: ", "unknown field 'bogus'"},
    {"name:\t\"x\"\tbad_field: 1", "t.pbtxt:1:11: ", "unknown field 'bad_field'"},
};

Test(pbtxt, bad_inputs_have_positions) {
  size_t n = sizeof bad_cases / sizeof bad_cases[0];
  for (size_t i = 0; i < n; i++) {
    char *err = parse_err(bad_cases[i].text);
    cr_expect(strncmp(err, bad_cases[i].where, strlen(bad_cases[i].where)) == 0,
              "case %zu <<%s>>: want prefix %s got %s", i, bad_cases[i].text, bad_cases[i].where, err);
    cr_expect(strstr(err, bad_cases[i].substr) != NULL, "case %zu <<%s>>: want '%s' in %s", i, bad_cases[i].text,
              bad_cases[i].substr, err);
    free(err);
  }
}

Test(pbtxt, embedded_nul_rejected_with_position) {
  const char text[] = "name: \"a\"\n  \0 x";
  char *err = NULL;
  json_t *j = nrd_pbtxt_parse(nrd_schema_model_config(), text, sizeof text - 1, "f", &err);
  cr_assert_null(j);
  cr_assert_str_eq(err, "f:2:3: unexpected NUL byte");
  free(err);
}

Test(pbtxt, default_filename) {
  char *err = NULL;
  json_t *j = nrd_pbtxt_parse(nrd_schema_model_config(), "x: 1", 4, NULL, &err);
  cr_assert_null(j);
  cr_assert_str_eq(err, "<input>:1:1: unknown field 'x' in ModelConfig");
  free(err);
}

Test(pbtxt, utf8_validator) {
  cr_assert(nrd_pbtxt_utf8_valid("", 0));
  cr_assert(nrd_pbtxt_utf8_valid("abc", 3));
  cr_assert(nrd_pbtxt_utf8_valid("\xf0\x9f\x98\x80", 4));
  cr_assert_not(nrd_pbtxt_utf8_valid("\xf0\x9f\x98", 3));
  cr_assert_not(nrd_pbtxt_utf8_valid("\xf4\x90\x80\x80", 4));
  cr_assert_not(nrd_pbtxt_utf8_valid("\xe0\x80\x80", 3));
  cr_assert_not(nrd_pbtxt_utf8_valid("\xff", 1));
  cr_assert_not(nrd_pbtxt_utf8_valid("\x80", 1));
}
