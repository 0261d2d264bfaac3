/* Issue 33: where a configuration error is. The text-format reader records
 * the line and column of every field, and each validation check appends
 * them (with the field and its value) after Triton's sentence. One bad
 * configuration per check of docs/model-config.md, in the table's order. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_config.h"
#include "model_config_schema.h"
#include "pbtxt.h"

#define FILE_NAME "models/m/config.pbtxt"

/* Copies `marked` without its '@' into out, and gives the 1-based line and
 * column the '@' stood at (0, 0 without one). */
static void unmark(const char *marked, char *out, size_t cap, int *line, int *col) {
  int l = 1, c = 1;
  size_t n = 0;
  *line = *col = 0;
  for (const char *p = marked; *p; p++) {
    if (*p == '@') {
      *line = l;
      *col = c;
      continue;
    }
    cr_assert_lt(n + 1, cap);
    out[n++] = *p;
    if (*p == '\n') {
      l++;
      c = 1;
    } else {
      c++;
    }
  }
  out[n] = '\0';
}

static void expect_position(const json_t *at, const char *path, int line, int col) {
  int l = 0, c = 0;
  cr_assert(nrd_pbtxt_position(at, path, &l, &c), "no position for '%s'", path);
  cr_assert(l == line && c == col, "'%s' at %d:%d, want %d:%d", path, l, c, line, col);
}

Test(model_config_positions, reader_records_fields_elements_and_map_entries) {
  const char *text = "name: \"m\"\n"
                     "input [\n"
                     "  { name: \"a\" dims: [ 1, 2 ] },\n"
                     "  { name: \"b\" dims: 3 dims: 4 }\n"
                     "]\n"
                     "output { name: \"o\" }\n"
                     "output { name: \"p\" }\n"
                     "dynamic_batching {\n"
                     "  priority_queue_policy { key: 2 value { timeout_action: DELAY } }\n"
                     "  priority_queue_policy { value { max_queue_size: 1 } key: 3 }\n"
                     "}\n"
                     "parameters { key: \"k\" value { string_value: \"v\" } }\n";
  char *err = NULL;
  json_t *at = NULL;
  json_t *cfg = nrd_pbtxt_parse_pos(nrd_schema_model_config(), text, strlen(text), "f", &at, &err);
  cr_assert_not_null(cfg, "%s", err ? err : "");
  cr_assert_not_null(at);
  expect_position(at, "name", 1, 1);
  expect_position(at, "input", 2, 1);
  expect_position(at, "input[0]", 3, 3);
  expect_position(at, "input[0].name", 3, 5);
  expect_position(at, "input[0].dims", 3, 15);
  expect_position(at, "input[0].dims[1]", 3, 26);
  expect_position(at, "input[1].dims[0]", 4, 21);
  expect_position(at, "input[1].dims[1]", 4, 29);
  /* A repeated message outside a list: the field's name. */
  expect_position(at, "output[0]", 6, 1);
  expect_position(at, "output[1].name", 7, 10);
  /* Map entries: the key, and the value's fields under the key. */
  expect_position(at, "dynamic_batching.priority_queue_policy[2]", 9, 27);
  expect_position(at, "dynamic_batching.priority_queue_policy[2].timeout_action", 9, 42);
  expect_position(at, "dynamic_batching.priority_queue_policy[3]", 10, 55);
  expect_position(at, "dynamic_batching.priority_queue_policy[3].max_queue_size", 10, 35);
  expect_position(at, "parameters[k].string_value", 12, 31);
  int l, c;
  cr_assert_not(nrd_pbtxt_position(at, "input[2]", &l, &c));
  cr_assert_not(nrd_pbtxt_position(at, "max_batch_size", &l, &c));
  cr_assert_not(nrd_pbtxt_position(NULL, "name", &l, &c));
  /* No stand-in path left behind by the map entries. */
  const char *k;
  json_t *v;
  json_object_foreach(at, k, v) cr_assert(strchr(k, '\x01') == NULL, "stand-in left: %s", k);
  json_decref(at);
  json_decref(cfg);

  /* On a parse error there is no table. */
  at = (json_t *)1;
  cr_assert_null(nrd_pbtxt_parse_pos(nrd_schema_model_config(), "name: 1", 7, "f", &at, &err));
  cr_assert_null(at);
  free(err);
}

Test(model_config_positions, deep_paths_are_left_out_not_truncated) {
  /* A map key longer than the path buffer: no position for it (nor a
   * wrong one under a cut name), and the rest still has theirs. */
  char key[700];
  memset(key, 'x', sizeof key - 1);
  key[sizeof key - 1] = '\0';
  char text[1024];
  snprintf(text, sizeof text, "parameters { key: \"%s\" value { string_value: \"v\" } }\nmax_batch_size: 2\n", key);
  char *err = NULL;
  json_t *at = NULL;
  json_t *cfg = nrd_pbtxt_parse_pos(nrd_schema_model_config(), text, strlen(text), "f", &at, &err);
  cr_assert_not_null(cfg, "%s", err ? err : "");
  expect_position(at, "parameters", 1, 1);
  expect_position(at, "max_batch_size", 2, 1);
  const char *k;
  json_t *v;
  json_object_foreach(at, k, v) cr_assert(strncmp(k, "parameters[", 11) != 0, "cut path recorded: %.40s", k);
  json_decref(at);
  json_decref(cfg);
}

typedef enum stage { NORMALIZE, VALIDATE, RAW } stage;

typedef struct pcase {
  stage stage; /* which call fails: normalize, validate after it, or validate alone */
  int has_gpu;
  const char *model; /* directory name; NULL: "m" */
  const char *pbtxt; /* '@' marks where the position must point */
  const char *sentence; /* Triton's, whole */
  const char *field; /* ours after the position: "field 'x', value v" (NULL: none) */
} pcase;

#define IO                                                                                                             \
  "input { name: \"i\" data_type: TYPE_FP32 dims: [ 4 ] }\noutput { name: \"o\" data_type: TYPE_FP32 dims: [ 4 ] }\n"
#define ENS_IO                                                                                                         \
  "input { name: \"i\" data_type: TYPE_FP32 dims: [ 4 ] }\noutput { name: \"o\" data_type: TYPE_FP32 dims: [ 4 ] }\n"

static const pcase pcases[] = {
    /* 1 */
    {NORMALIZE, 0, NULL, "name: \"m\"\n@platform: \"ensemble\"\n",
     "ensemble scheduling must be set for ensemble m whose platform is ensemble", "field 'platform', value 'ensemble'"},
    /* 2 */
    {NORMALIZE, 0, "dir", "@name: \"m\"\nbackend: \"b\"\n",
     "unexpected directory name 'dir' for model 'm', directory name must equal model name", "field 'name'"},
    /* 3 */
    {NORMALIZE, 0, NULL, "name: \"m\"\n",
     "Invalid model name: Could not determine backend for model 'm' with no backend in model configuration. Expected "
     "model name of the form 'model.<backend_name>'.",
     NULL},
    /* 4 */
    {RAW, 0, NULL, "backend: \"b\"\n", "model configuration must specify 'name'", "field 'name'"},
    /* 5 */
    {VALIDATE, 0, NULL, "name: \"m\"\n@platform: \"tf_lite\"\n", "unexpected platform type 'tf_lite' for m",
     "field 'platform', value 'tf_lite', backend empty"},
    /* 6 */
    {VALIDATE, 0, NULL, "name: \"m\"\nplatform: \"ensemble\"\n  @backend: \"b\"\n",
     "Ensemble model 'm' must have platform type 'ensemble' and empty backend type", "field 'backend', value 'b'"},
    /* 7 */
    {VALIDATE, 0, NULL, "name: \"m\"\n@platform: \"tensorrt_plan\"\nbackend: \"onnxruntime\"\n",
     "unexpected 'platform' and 'backend' pair, got:tensorrt_plan, onnxruntime",
     "field 'platform', value 'tensorrt_plan', backend 'onnxruntime'"},
    /* 8 */
    {VALIDATE, 0, NULL, "name: \"m\"\nbackend: \"b\"\n@max_batch_size: -3\n",
     "'max_batch_size' must be non-negative value for m", "field 'max_batch_size', value -3"},
    /* 9: normalization adds it, so only a configuration not normalized lacks it */
    {RAW, 0, NULL, "name: \"m\"\nbackend: \"b\"\n", "must specify 'version policy' for m", "field 'version_policy'"},
    /* 10 */
    {VALIDATE, 0, NULL,
     "name: \"m\"\nbackend: \"b\"\nmax_batch_size: 8\ndynamic_batching {\n  preferred_batch_size: [ 4, @0 ]\n}\n",
     "dynamic batching preferred size must be positive for m",
     "field 'dynamic_batching.preferred_batch_size[1]', value 0"},
    {VALIDATE, 0, NULL,
     "name: \"m\"\nbackend: \"b\"\nmax_batch_size: 8\ndynamic_batching { preferred_batch_size: @16 }\n",
     "dynamic batching preferred size must be <= max batch size for m",
     "field 'dynamic_batching.preferred_batch_size[0]', value 16, max_batch_size 8"},
    /* 11 */
    {VALIDATE, 0, NULL,
     "name: \"m\"\nbackend: \"b\"\nmax_batch_size: 8\ndynamic_batching {\n  priority_levels: 3\n  "
     "@default_priority_level: 4\n}\n",
     "default priority level must be in range [1, 3] for m",
     "field 'dynamic_batching.default_priority_level', value 4"},
    {VALIDATE, 0, NULL,
     "name: \"m\"\nbackend: \"b\"\nmax_batch_size: 8\ndynamic_batching {\n  priority_levels: 3\n  "
     "default_priority_level: 1\n  priority_queue_policy {\n    @key: 0\n    value { max_queue_size: 2 }\n  }\n}\n",
     "priority queue policy must have priority level in range [1, 3] for m",
     "field 'dynamic_batching.priority_queue_policy[0]'"},
    /* 12 */
    {VALIDATE, 0, NULL,
     "name: \"m\"\nbackend: \"b\"\nmax_batch_size: 8\ndynamic_batching {\n  preserve_ordering: true\n  "
     "@priority_levels: 2\n  default_priority_level: 1\n}\n",
     "Only one priority level is allowed when 'preserve_ordering' is true for m",
     "field 'dynamic_batching.priority_levels', value 2"},
    {VALIDATE, 0, NULL,
     "name: \"m\"\nbackend: \"b\"\nmax_batch_size: 8\ndynamic_batching {\n  preserve_ordering: true\n  "
     "default_queue_policy { @timeout_action: DELAY default_timeout_microseconds: 100 }\n}\n",
     "Queue policy can not have DELAY as timeout action when 'preserve_ordering' is true for m",
     "field 'dynamic_batching.default_queue_policy.timeout_action', value DELAY"},
    {VALIDATE, 0, NULL,
     "name: \"m\"\nbackend: \"b\"\nmax_batch_size: 8\ndynamic_batching {\n  preserve_ordering: true\n  "
     "priority_queue_policy { key: 1 value { default_timeout_microseconds: 100 @timeout_action: DELAY } }\n}\n",
     "Queue policy can not have DELAY as timeout action when 'preserve_ordering' is true for m",
     "field 'dynamic_batching.priority_queue_policy[1].timeout_action', value DELAY"},
    /* 13 */
    {VALIDATE, 0, NULL, "name: \"m\"\nbackend: \"b\"\nsequence_batching { }\nresponse_cache { @enable: true }\n",
     "Response Cache does not currently support model m with sequence batching scheduler. Please disable the response "
     "cache.",
     "field 'response_cache.enable', value true"},
    /* 14 */
    {VALIDATE, 0, NULL,
     "name: \"m\"\nbackend: \"b\"\nsequence_batching {\n  @control_input { control { kind: CONTROL_SEQUENCE_START "
     "int32_false_true: [ 0, 1 ] } }\n}\n",
     "sequence batching control tensor must have a name for m", "field 'sequence_batching.control_input[0].name'"},
    {VALIDATE, 0, NULL,
     "name: \"m\"\nbackend: \"b\"\nsequence_batching {\n  control_input { name: \"s\" }\n  control_input { @name: "
     "\"s\" "
     "}\n}\n",
     "sequence batching control tensor 's' is specified for multiple control kinds for m",
     "field 'sequence_batching.control_input[1].name', value 's' (also control_input[0])"},
    {VALIDATE, 0, NULL,
     "name: \"m\"\nbackend: \"b\"\nsequence_batching {\n  control_input { name: \"s\" control { kind: "
     "CONTROL_SEQUENCE_END int32_false_true: [ 0, 1 ] } }\n  control_input { name: \"t\" control { @kind: "
     "CONTROL_SEQUENCE_END int32_false_true: [ 0, 1 ] } }\n}\n",
     "sequence batching specifies multiple CONTROL_SEQUENCE_END tensors for m",
     "field 'sequence_batching.control_input[1].control[0].kind', value CONTROL_SEQUENCE_END"},
    {VALIDATE, 0, NULL,
     "name: \"m\"\nbackend: \"b\"\nsequence_batching {\n  control_input { name: \"s\" @control { kind: "
     "CONTROL_SEQUENCE_READY } }\n}\n",
     "sequence batching must specify either 'int32_false_true', 'fp32_false_true' or 'bool_false_true' for "
     "CONTROL_SEQUENCE_READY for m",
     "field 'sequence_batching.control_input[0].control[0]'"},
    {VALIDATE, 0, NULL,
     "name: \"m\"\nbackend: \"b\"\nsequence_batching {\n  control_input { name: \"s\" @control { kind: "
     "CONTROL_SEQUENCE_START fp32_false_true: [ 0, 1 ] bool_false_true: [ false, true ] } }\n}\n",
     "sequence batching specifies more than one from 'int32_false_true', 'fp32_false_true' and 'bool_false_true' for "
     "CONTROL_SEQUENCE_START for m",
     "field 'sequence_batching.control_input[0].control[0]'"},
    {VALIDATE, 0, NULL,
     "name: \"m\"\nbackend: \"b\"\nsequence_batching {\n  control_input { name: \"s\" control { kind: "
     "CONTROL_SEQUENCE_START @fp32_false_true: [ 0, 1, 2 ] } }\n}\n",
     "sequence batching control 'fp32_false_true' must have exactly 2 entries for CONTROL_SEQUENCE_START for m",
     "field 'sequence_batching.control_input[0].control[0].fp32_false_true', value 3 entries"},
    {VALIDATE, 0, NULL,
     "name: \"m\"\nbackend: \"b\"\nsequence_batching {\n  control_input { name: \"c\" control { kind: "
     "CONTROL_SEQUENCE_CORRID @data_type: TYPE_FP32 } }\n}\n",
     "unexpected data type for control CONTROL_SEQUENCE_CORRID for m. Allowed data types are TYPE_UINT64, TYPE_INT64, "
     "TYPE_UINT32, TYPE_INT32 and TYPE_STRING",
     "field 'sequence_batching.control_input[0].control[0].data_type', value TYPE_FP32"},
    {VALIDATE, 0, NULL,
     "name: \"m\"\nbackend: \"b\"\nsequence_batching {\n  control_input { name: \"c\" @control { kind: "
     "CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 bool_false_true: [ false, true ] } }\n}\n",
     "sequence batching must not specify either 'int32_false_true', 'fp32_false_true' or 'bool_false_true' for "
     "CONTROL_SEQUENCE_CORRID for m",
     "field 'sequence_batching.control_input[0].control[0]'"},
    /* Triton reports a second CORRID before the first one's data type. */
    {VALIDATE, 0, NULL,
     "name: \"m\"\nbackend: \"b\"\nsequence_batching {\n  control_input { name: \"c\" control { kind: "
     "CONTROL_SEQUENCE_CORRID data_type: TYPE_FP32 } }\n  control_input { name: \"d\" control { @kind: "
     "CONTROL_SEQUENCE_CORRID data_type: TYPE_INT32 } }\n}\n",
     "sequence batching specifies multiple CONTROL_SEQUENCE_CORRID tensors for m",
     "field 'sequence_batching.control_input[1].control[0].kind', value CONTROL_SEQUENCE_CORRID"},
    /* 15 */
    {VALIDATE, 0, NULL,
     "name: \"m\"\nbackend: \"b\"\nmax_batch_size: 4\nsequence_batching {\n  oldest { preferred_batch_size: [ @-2 ] "
     "}\n}\n",
     "sequence batching preferred batch size must be positive for m",
     "field 'sequence_batching.oldest.preferred_batch_size[0]', value -2"},
    {VALIDATE, 0, NULL,
     "name: \"m\"\nbackend: \"b\"\nmax_batch_size: 4\nsequence_batching {\n  oldest { preferred_batch_size: [ 2, @5 ] "
     "}\n}\n",
     "sequence batching preferred batch size must be <= max batch size for m",
     "field 'sequence_batching.oldest.preferred_batch_size[1]', value 5, max_batch_size 4"},
    {VALIDATE, 0, NULL,
     "name: \"m\"\nbackend: \"b\"\nsequence_batching {\n  direct { @minimum_slot_utilization: 1.5 }\n}\n",
     "sequence batching minimum slot utilization must be in range (0.0, 1.0] for m",
     "field 'sequence_batching.direct.minimum_slot_utilization', value 1.5"},
    /* 16: ensembles */
    {VALIDATE, 0, NULL, "name: \"m\"\nbackend: \"b\"\n@ensemble_scheduling { step { model_name: \"a\" } }\n",
     "ensemble scheduling cannot be set for model 'm' whose platform is not ensemble", "field 'ensemble_scheduling'"},
    {VALIDATE, 0, NULL,
     "name: \"m\"\nplatform: \"ensemble\"\n@instance_group { kind: KIND_CPU }\nensemble_scheduling { step { } }\n",
     "instance group should not be specified for ensemble 'm'", "field 'instance_group'"},
    {VALIDATE, 0, NULL, "name: \"m\"\nplatform: \"ensemble\"\n@optimization { }\nensemble_scheduling { step { } }\n",
     "optimization should not be specified for ensemble 'm'", "field 'optimization'"},
    {VALIDATE, 0, NULL,
     "name: \"m\"\nplatform: \"ensemble\"\n@model_warmup { name: \"w\" }\nensemble_scheduling { step { } }\n",
     "model_warmup can not be specified for ensemble 'm'", "field 'model_warmup'"},
    {VALIDATE, 0, NULL, "name: \"m\"\nplatform: \"ensemble\"\n@ensemble_scheduling { }\n",
     "must specify 'step' for ensemble 'm'", "field 'ensemble_scheduling.step'"},
    {VALIDATE, 0, NULL,
     "name: \"m\"\nplatform: \"ensemble\"\nensemble_scheduling {\n  step { model_name: \"a\" input_map { key: \"x\" "
     "value: \"i\" } output_map { key: \"y\" value: \"o\" } }\n  @step { }\n}\n",
     "must specify 'model_name' in step 1 of ensemble 'm'", "field 'ensemble_scheduling.step[1].model_name'"},
    {VALIDATE, 0, NULL,
     "name: \"m\"\nplatform: \"ensemble\"\nensemble_scheduling {\n  @step { model_name: \"a\" }\n}\n",
     "must specify 'input_map' in step 0 of ensemble 'm'", "field 'ensemble_scheduling.step[0].input_map'"},
    {VALIDATE, 0, NULL,
     "name: \"m\"\nplatform: \"ensemble\"\nensemble_scheduling {\n  step { model_name: \"a\" input_map { key: \"x\" "
     "value: \"i\" } @output_map [ ] }\n}\n",
     "must specify 'output_map' in step 0 of ensemble 'm'", "field 'ensemble_scheduling.step[0].output_map'"},
    {VALIDATE, 0, NULL,
     "name: \"m\"\nplatform: \"ensemble\"\n" ENS_IO
     "ensemble_scheduling {\n  step { model_name: \"a\" input_map { key: \"x\" value: \"i\" } output_map { key: \"y\" "
     "value: \"t\" } }\n  step { model_name: \"b\" input_map { key: \"x\" value: \"i\" } output_map { @key: \"z\" "
     "value: \"t\" } }\n}\n",
     "ensemble tensor 't' can appear in an output map only once for ensemble 'm' step 1",
     "field 'ensemble_scheduling.step[1].output_map[z]', value 't'"},
    {VALIDATE, 0, NULL,
     "name: \"m\"\nplatform: \"ensemble\"\ninput { @name: \"i\" data_type: TYPE_FP32 dims: [ 4 ] }\noutput { name: "
     "\"o\" data_type: TYPE_FP32 dims: [ 4 ] }\nensemble_scheduling {\n  step { model_name: \"a\" input_map { key: "
     "\"x\" value: \"q\" } output_map { key: \"y\" value: \"o\" } }\n}\n",
     "ensemble input 'i' for ensemble m' is not used", "field 'input[0].name', value 'i'"},
    {VALIDATE, 0, NULL,
     "name: \"m\"\nplatform: \"ensemble\"\ninput { name: \"i\" data_type: TYPE_FP32 dims: [ 4 ] }\noutput { @name: "
     "\"o\" data_type: TYPE_FP32 dims: [ 4 ] }\nensemble_scheduling {\n  step { model_name: \"a\" input_map { key: "
     "\"x\" value: \"i\" } output_map { key: \"y\" value: \"t\" } }\n}\n",
     "ensemble output 'o' for ensemble m' is not used", "field 'output[0].name', value 'o'"},
    {VALIDATE, 0, NULL,
     "name: \"m\"\nplatform: \"ensemble\"\ninput { name: \"i\" data_type: TYPE_FP32 dims: [ 4 ] }\noutput { @name: "
     "\"o\" data_type: TYPE_FP32 dims: [ 4 ] }\nensemble_scheduling {\n  step { model_name: \"a\" input_map [ { key: "
     "\"x\" value: \"i\" }, { key: \"x2\" value: \"loose\" } ] output_map { key: \"y\" value: \"o\" } }\n}\n",
     "output 'o' for ensemble 'm' is not written: at least one of its depending tensors, 'loose', is not connected",
     "field 'output[0].name', value 'o'"},
    {VALIDATE, 0, NULL,
     "name: \"m\"\nplatform: \"ensemble\"\ninput { name: \"i\" data_type: TYPE_FP32 dims: [ 4 ] }\noutput { @name: "
     "\"o\" data_type: TYPE_FP32 dims: [ 4 ] }\nensemble_scheduling {\n  step { model_name: \"a\" input_map { key: "
     "\"x\" value: \"o\" } output_map { key: \"y\" value: \"o\" } }\n  step { model_name: \"b\" input_map { key: \"x\" "
     "value: \"i\" } output_map { key: \"y\" value: \"t\" } }\n}\n",
     "output 'o' for ensemble 'm' is not written", "field 'output[0].name', value 'o'"},
    {VALIDATE, 0, NULL,
     "name: \"m\"\nplatform: \"ensemble\"\n" ENS_IO
     "ensemble_scheduling {\n  step { model_name: \"a\" input_map { key: \"x\" value: \"i\" }\n    output_map [ { key: "
     "\"y\" value: \"o\" }, { @key: \"z\" value: \"extra\" } ] }\n}\n",
     "ensemble tensor 'extra' is unused in ensemble 'm'",
     "field 'ensemble_scheduling.step[0].output_map[z]', value 'extra'"},
    /* 17 */
    {VALIDATE, 0, NULL,
     "name: \"m\"\nbackend: \"b\"\nmodel_transaction_policy { decoupled: true }\nresponse_cache { @enable: true }\n",
     "Response Cache does not currently support model m with 'decoupled' transaction policy. Please disable the "
     "response cache.",
     "field 'response_cache.enable', value true"},
    /* 18 */
    {VALIDATE, 0, NULL, "name: \"m\"\nbackend: \"b\"\nmodel_metrics {\n  @metric_control { }\n}\n",
     "metric control must specify 'metric_identifier'", "field 'model_metrics.metric_control[0].metric_identifier'"},
    {VALIDATE, 0, NULL,
     "name: \"m\"\nbackend: \"b\"\nmodel_metrics {\n  metric_control { @metric_identifier { } }\n}\n",
     "metric identifier must specify non-empty 'family'",
     "field 'model_metrics.metric_control[0].metric_identifier.family'"},
    {VALIDATE, 0, NULL,
     "name: \"m\"\nbackend: \"b\"\nmodel_metrics {\n  @metric_control { metric_identifier { family: \"f\" } }\n}\n",
     "metric control must specify 'histogram_options'", "field 'model_metrics.metric_control[0].histogram_options'"},
    {VALIDATE, 0, NULL,
     "name: \"m\"\nbackend: \"b\"\nmodel_metrics {\n  metric_control { metric_identifier { family: \"f\" }\n    "
     "@histogram_options { } }\n}\n",
     "histogram options must specify non-empty 'buckets'",
     "field 'model_metrics.metric_control[0].histogram_options.buckets'"},
    /* 19 */
    {VALIDATE, 0, NULL, "name: \"m\"\nbackend: \"b\"\ninstance_group [\n  { kind: KIND_MODEL @gpus: [ 0 ] }\n]\n",
     "instance group m_0 of model m has kind KIND_MODEL but specifies one or more GPUs",
     "field 'instance_group[0].gpus'"},
    {VALIDATE, 0, NULL, "name: \"m\"\nbackend: \"b\"\ninstance_group [\n  { name: \"g\" @kind: KIND_GPU }\n]\n",
     "instance group g of model m has kind KIND_GPU but server does not support GPUs",
     "field 'instance_group[0].kind', value KIND_GPU"},
    {VALIDATE, 0, NULL,
     "name: \"m\"\nbackend: \"b\"\ninstance_group { kind: KIND_CPU }\ninstance_group { kind: KIND_CPU @gpus: 1 }\n",
     "instance group m_1 of model m has kind KIND_CPU but specifies one or more GPUs",
     "field 'instance_group[1].gpus'"},
    {VALIDATE, 0, NULL,
     "name: \"m\"\nplatform: \"onnxruntime_onnx\"\ninstance_group { kind: KIND_CPU @profile: \"0\" }\n",
     "instance group m_0 of model m and platform onnxruntime_onnxspecifies profile field which is only supported for "
     "TensorRT models",
     "field 'instance_group[0].profile'"},
    {VALIDATE, 1, NULL, "name: \"m\"\nplatform: \"tensorrt_plan\"\ninstance_group { profile: [ \"0\", @\"-1\" ] }\n",
     "instance group m_0 of model m and platform tensorrt_plan specifies invalid profile -1. The field should contain "
     "the string representation of a non-negative integer.",
     "field 'instance_group[0].profile[1]'"},
    {VALIDATE, 1, NULL, "name: \"m\"\nplatform: \"tensorrt_plan\"\ninstance_group { profile: @\"one\" }\n",
     "unable to parse 'one': stoi", "field 'instance_group[0].profile[0]'"},
    {VALIDATE, 1, NULL, "name: \"m\"\nplatform: \"tensorrt_plan\"\ninstance_group { profile: @\"\" }\n",
     "profile name must not be empty", "field 'instance_group[0].profile[0]'"},
    /* 20: inputs, then outputs */
    {VALIDATE, 0, NULL, "name: \"m\"\nbackend: \"b\"\n@input { data_type: TYPE_FP32 dims: [ 4 ] }\n",
     "model input must specify 'name' for m", "field 'input[0].name'"},
    {VALIDATE, 0, NULL, "name: \"m\"\nbackend: \"b\"\ninput [\n  @{ name: \"i\" dims: [ 4 ] }\n]\n",
     "model input 'i' must specify 'data_type' for m", "field 'input[0].data_type'"},
    {VALIDATE, 0, NULL, "name: \"m\"\nbackend: \"b\"\n" IO "@output { name: \"p\" data_type: TYPE_FP32 }\n",
     "model output 'p' must specify 'dims' for m", "field 'output[1].dims'"},
    {VALIDATE, 0, NULL,
     "name: \"m\"\nbackend: \"b\"\ninput { name: \"i\" data_type: TYPE_FP32 dims: [ 1 ] @reshape { } }\n",
     "model input 'i' cannot have empty reshape for non-batching model as scalar tensors are not supported for m",
     "field 'input[0].reshape'"},
    {VALIDATE, 0, NULL,
     "name: \"m\"\nbackend: \"b\"\ninput {\n  name: \"zerodims_input0\"\n  data_type: TYPE_FP32\n  dims: [ 2, @0 "
     "]\n}\n",
     "model input 'zerodims_input0' dimension must be integer >= 1, or -1 to indicate a variable-size dimension for m",
     "field 'input[0].dims[1]', value 0"},
    {VALIDATE, 0, NULL,
     "name: \"m\"\nbackend: \"b\"\n" IO "output {\n  name: \"p\"\n  data_type: TYPE_FP32\n  dims: 2\n  dims: @-5\n}\n",
     "model output 'p' dimension must be integer >= 1, or -1 to indicate a variable-size dimension for m",
     "field 'output[1].dims[1]', value -5"},
    {VALIDATE, 0, NULL,
     "name: \"m\"\nbackend: \"b\"\ninput { name: \"i\" data_type: TYPE_FP32 dims: [ 4 ] reshape { shape: [ 2, @0 ] } "
     "}\n",
     "model input 'i' reshape dimensions must be integer >= 1, or -1 to indicate a variable-size dimension for m",
     "field 'input[0].reshape.shape[1]', value 0"},
    {VALIDATE, 0, NULL,
     "name: \"m\"\nbackend: \"b\"\ninput { name: \"i\" data_type: TYPE_FP32 dims: [ 4 ] @reshape { shape: [ 5 ] } }\n",
     "model input 'i' has different size for dims and reshape for m",
     "field 'input[0].reshape', value 5 elements, dims 4"},
    {VALIDATE, 0, NULL,
     "name: \"m\"\nbackend: \"b\"\ninput { name: \"i\" data_type: TYPE_FP32 dims: [ 2, -1 ]\n  @reshape { shape: [ "
     "-1, -1 ] } }\n",
     "model input 'i' has different number of variable-size dimensions for dims and reshape for m",
     "field 'input[0].reshape'"},
    {VALIDATE, 0, NULL,
     "name: \"m\"\nbackend: \"b\"\ninput { name: \"i\" data_type: TYPE_FP32 @format: FORMAT_NCHW dims: [ 4 ] }\n",
     "model input NHWC/NCHW require 3 dims for m", "field 'input[0].format', value FORMAT_NCHW with 1 dims"},
    {VALIDATE, 0, NULL,
     "name: \"m\"\nbackend: \"b\"\n" IO
     "output { name: \"s\" data_type: TYPE_INT32 dims: [ 1 ] @is_shape_tensor: true }\n",
     "shape tensors are only supported for TensorRT platform for m", "field 'output[1].is_shape_tensor', value true"},
    {VALIDATE, 0, NULL,
     "name: \"m\"\nbackend: \"b\"\ninput { name: \"i\" data_type: TYPE_FP32 dims: [ 4 ] @is_non_linear_format_io: "
     "true }\n",
     "Non-linear IO format is only supported for the TensorRT platform for m",
     "field 'input[0].is_non_linear_format_io', value true"},
    {VALIDATE, 1, NULL,
     "name: \"m\"\nplatform: \"tensorrt_plan\"\noutput { name: \"o\" data_type: TYPE_FP32 @dims: [ 4 ] "
     "is_non_linear_format_io: true }\n",
     "Non-linear IO format output requires 3 dims for m", "field 'output[0].dims', value 1 dims"},
    /* 21 */
    {VALIDATE, 0, NULL, "name: \"m\"\nbackend: \"b\"\n" IO "output { @name: \"o\" data_type: TYPE_FP32 dims: [ 4 ] }\n",
     "output name 'o' is specified more than once for m", "field 'output[1].name', value 'o' (also output[0])"},
    /* 22 */
    {VALIDATE, 0, NULL,
     "name: \"m\"\nbackend: \"b\"\n" IO "@batch_input { kind: BATCH_ITEM_SHAPE data_type: TYPE_INT32 }\n",
     "batch input kind 'BATCH_ITEM_SHAPE' expects 1 source input, got 0 for m", "field 'batch_input[0].source_input'"},
    {VALIDATE, 0, NULL,
     "name: \"m\"\nbackend: \"b\"\n" IO "batch_input { source_input: \"i\" @data_type: TYPE_FP16 }\n",
     "batch input data type must be TYPE_INT32 or TYPE_FP32 for m",
     "field 'batch_input[0].data_type', value TYPE_FP16"},
    {VALIDATE, 0, NULL,
     "name: \"m\"\nbackend: \"b\"\n" IO "batch_input { data_type: TYPE_FP32 source_input: @\"nope\" }\n",
     "unknown source input name 'nope' for m", "field 'batch_input[0].source_input[0]'"},
    {VALIDATE, 0, NULL, "name: \"m\"\nbackend: \"b\"\n" IO "batch_output { @source_input: [ \"i\", \"i\" ] }\n",
     "batch output kind 'BATCH_SCATTER_WITH_INPUT_SHAPE' expects 1 source input, got 2 for m",
     "field 'batch_output[0].source_input'"},
    {VALIDATE, 0, NULL, "name: \"m\"\nbackend: \"b\"\n" IO "batch_output { source_input: [ @\"q\" ] }\n",
     "unknown source input name 'q' for m", "field 'batch_output[0].source_input[0]'"},
    {VALIDATE, 0, NULL,
     "name: \"m\"\nbackend: \"b\"\n" IO "batch_output { source_input: \"i\" target_name: [ \"o\", @\"x\" ] }\n",
     "unknown target output name 'x' for m", "field 'batch_output[0].target_name[1]'"},
    {VALIDATE, 0, NULL,
     "name: \"m\"\nbackend: \"b\"\n" IO
     "batch_output { source_input: \"i\" target_name: \"o\"\n  target_name: @\"o\" }\n",
     "target output name 'o' can only be specified once for m", "field 'batch_output[0].target_name[1]'"},
};

/* Runs one case the way model_load does (a deep copy is normalized, then
 * validated) and returns the error. */
static char *run_case(const pcase *c, const char *text) {
  char *err = NULL;
  json_t *parsed = nrd_model_config_parse(text, strlen(text), FILE_NAME, &err);
  cr_assert_not_null(parsed, "parse: %s\n%s", err ? err : "", text);
  json_t *cfg = json_deep_copy(parsed);
  json_decref(parsed);
  int rc = 0;
  if (c->stage != RAW) rc = nrd_model_config_normalize(cfg, c->model ? c->model : "m", c->has_gpu, &err);
  if (c->stage == NORMALIZE) {
    cr_assert_eq(rc, -1, "normalize accepted:\n%s", text);
  } else {
    cr_assert_eq(rc, 0, "normalize: %s\n%s", err ? err : "", text);
    rc = nrd_model_config_validate(cfg, NULL, c->has_gpu, &err);
    cr_assert_eq(rc, -1, "validate accepted:\n%s", text);
  }
  json_decref(cfg);
  cr_assert_not_null(err);
  return err;
}

Test(model_config_positions, one_bad_configuration_per_check) {
  for (size_t i = 0; i < sizeof pcases / sizeof pcases[0]; i++) {
    const pcase *c = &pcases[i];
    char text[2048];
    int line, col;
    unmark(c->pbtxt, text, sizeof text, &line, &col);
    char *err = run_case(c, text);
    char want[1536];
    if (line > 0)
      snprintf(want, sizeof want, "%s (%s:%d:%d%s%s)", c->sentence, FILE_NAME, line, col, c->field ? ": " : "",
               c->field ? c->field : "");
    else
      snprintf(want, sizeof want, "%s (%s%s%s)", c->sentence, FILE_NAME, c->field ? ": " : "",
               c->field ? c->field : "");
    cr_expect_str_eq(err, want, "case %zu", i);
    /* Triton's sentence is whole at the start, for grep. */
    cr_expect(strncmp(err, c->sentence, strlen(c->sentence)) == 0, "case %zu: %s", i, err);
    free(err);
  }
}

/* A configuration from JSON (a load with a config override, a backend's
 * auto-complete) has no file: the field and value only. */
Test(model_config_positions, json_configs_have_no_position) {
  const char *j = "{\"name\":\"m\",\"backend\":\"b\",\"input\":[{\"name\":\"i\",\"data_type\":\"TYPE_FP32\","
                  "\"dims\":[4,0]}]}";
  char *err = NULL;
  json_t *cfg = nrd_model_config_from_json(j, strlen(j), &err);
  cr_assert_not_null(cfg, "%s", err ? err : "");
  cr_assert_eq(nrd_model_config_normalize(cfg, "m", 0, &err), 0, "%s", err ? err : "");
  cr_assert_eq(nrd_model_config_validate(cfg, NULL, 0, &err), -1);
  cr_assert_str_eq(err,
                   "model input 'i' dimension must be integer >= 1, or -1 to indicate a variable-size dimension for m "
                   "(field 'input[0].dims[1]', value 0)");
  free(err);
  /* A file name given by the caller is named, without a position. */
  cr_assert_eq(nrd_model_config_validate(cfg, "x/config.pbtxt", 0, &err), -1);
  cr_assert(strstr(err, " (x/config.pbtxt: field 'input[0].dims[1]', value 0)") != NULL, "%s", err);
  free(err);
  json_decref(cfg);
}

/* The positions are ours: the rendering backends see, and a repo agent's
 * copy, have none; JSON input cannot set them. */
Test(model_config_positions, positions_stay_inside) {
  const char *t = "name: \"m\"\nbackend: \"b\"\n";
  char *err = NULL;
  json_t *cfg = nrd_model_config_parse(t, strlen(t), FILE_NAME, &err);
  cr_assert_not_null(cfg);
  cr_assert_not_null(json_object_get(cfg, NRD_MODEL_CONFIG_POSITIONS));
  char *r = nrd_model_config_render(cfg);
  cr_assert_not_null(r);
  cr_assert(strstr(r, "positions") == NULL, "%s", r);
  free(r);
  json_t *plain = nrd_model_config_without_positions(cfg);
  cr_assert_not_null(plain);
  cr_assert_null(json_object_get(plain, NRD_MODEL_CONFIG_POSITIONS));
  cr_assert_not_null(json_object_get(cfg, NRD_MODEL_CONFIG_POSITIONS), "the original keeps them");
  json_decref(plain);
  json_decref(cfg);
  cr_assert_null(nrd_model_config_without_positions(NULL));
  const char *j = "{\"name\":\"m\",\":positions\":{}}";
  cr_assert_null(nrd_model_config_from_json(j, strlen(j), &err));
  free(err);
}

/* A backend's auto-complete replaces the configuration: the positions
 * still true come along, the others are dropped. */
Test(model_config_positions, carried_to_a_completed_config_when_still_true) {
  const char *t = "name: \"m\"\n"
                  "backend: \"b\"\n"
                  "max_batch_size: 0\n"
                  "input [ { name: \"a\" data_type: TYPE_FP32 dims: [ 4 ] }, { name: \"b\" dims: [ 0 ] } ]\n"
                  "dynamic_batching { preferred_batch_size: [ 16 ] }\n";
  char *err = NULL;
  json_t *old = nrd_model_config_parse(t, strlen(t), FILE_NAME, &err);
  cr_assert_not_null(old, "%s", err ? err : "");
  cr_assert_eq(nrd_model_config_normalize(old, "m", 0, &err), 0, "%s", err ? err : "");
  /* The backend set max_batch_size, a data type, and put b first. */
  const char *j = "{\"name\":\"m\",\"backend\":\"b\",\"max_batch_size\":8,\"input\":["
                  "{\"name\":\"b\",\"data_type\":\"TYPE_FP32\",\"dims\":[0]},"
                  "{\"name\":\"a\",\"data_type\":\"TYPE_FP32\",\"dims\":[4]}],"
                  "\"dynamic_batching\":{\"preferred_batch_size\":[16]}}";
  json_t *cfg = nrd_model_config_from_json(j, strlen(j), &err);
  cr_assert_not_null(cfg, "%s", err ? err : "");
  nrd_model_config_carry_positions(cfg, old);
  const json_t *pos = json_object_get(cfg, NRD_MODEL_CONFIG_POSITIONS);
  cr_assert_str_eq(json_string_value(json_object_get(pos, "file")), FILE_NAME);
  const json_t *at = json_object_get(pos, "at");
  expect_position(at, "name", 1, 1);
  expect_position(at, "input", 4, 1);
  expect_position(at, "dynamic_batching.preferred_batch_size[0]", 5, 44);
  int l, c;
  cr_assert_not(nrd_pbtxt_position(at, "max_batch_size", &l, &c), "its value changed");
  cr_assert_not(nrd_pbtxt_position(at, "input[0]", &l, &c), "another input now");
  cr_assert_not(nrd_pbtxt_position(at, "input[0].name", &l, &c));
  cr_assert_not(nrd_pbtxt_position(at, "input[1].dims[0]", &l, &c));
  cr_assert_eq(nrd_model_config_normalize(cfg, "m", 0, &err), 0, "%s", err ? err : "");
  cr_assert_eq(nrd_model_config_validate(cfg, NULL, 0, &err), -1);
  cr_assert_str_eq(err, "dynamic batching preferred size must be <= max batch size for m (" FILE_NAME
                        ":5:44: field 'dynamic_batching.preferred_batch_size[0]', value 16, max_batch_size 8)");
  free(err);
  /* Fixed that, the moved input's error points at the input list only. */
  json_array_set_new(json_object_get(json_object_get(cfg, "dynamic_batching"), "preferred_batch_size"), 0,
                     json_integer(8));
  cr_assert_eq(nrd_model_config_validate(cfg, NULL, 0, &err), -1);
  cr_assert_str_eq(err, "model input 'b' dimension must be integer >= 1, or -1 to indicate a variable-size dimension "
                        "for m (" FILE_NAME ":4:1: field 'input[0].dims[0]', value 0)");
  free(err);
  json_decref(cfg);
  /* Nothing to carry from a configuration without positions. */
  cfg = nrd_model_config_from_json(j, strlen(j), &err);
  json_t *plain = nrd_model_config_without_positions(old);
  nrd_model_config_carry_positions(cfg, plain);
  cr_assert_null(json_object_get(cfg, NRD_MODEL_CONFIG_POSITIONS));
  json_decref(plain);
  json_decref(cfg);
  json_decref(old);
}
