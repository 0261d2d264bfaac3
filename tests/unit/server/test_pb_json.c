/* Unit tests for JSON -> protobuf-c messages (src/server/grpc/pb_json.c), on
 * the model configuration schema the ModelConfig RPC answers with. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model_config.pb-c.h"
#include "pb_json.h"

/* A test arena: every block is kept and freed at the end. */
typedef struct blocks {
  void *p[512];
  size_t n;
  size_t fail_after; /* 0: never fail */
} blocks;

static void *take(void *ctx, size_t size) {
  blocks *b = ctx;
  if (b->fail_after && b->n + 1 >= b->fail_after) return NULL;
  cr_assert_lt(b->n, 512);
  void *x = calloc(1, size ? size : 1);
  b->p[b->n++] = x;
  return x;
}

static void release(blocks *b) {
  for (size_t i = 0; i < b->n; i++) free(b->p[i]);
  b->n = 0;
}

static json_t *load(const char *text) {
  json_error_t e;
  json_t *j = json_loads(text, 0, &e);
  cr_assert_not_null(j, "%s", e.text);
  return j;
}

Test(pb_json, fills_scalars_enums_repeated_maps_and_oneofs) {
  json_t *j = load("{\"name\":\"m\",\"max_batch_size\":8,\"version_policy\":{\"specific\":{\"versions\":[\"1\",3]}},"
                   "\"input\":[{\"name\":\"I\",\"data_type\":\"TYPE_FP16\",\"dims\":[-1,\"4\"],\"optional\":true}],"
                   "\"dynamic_batching\":{\"max_queue_delay_microseconds\":\"18446744073709551615\","
                   "\"priority_queue_policy\":{\"2\":{\"timeout_action\":\"DELAY\",\"max_queue_size\":5}}},"
                   "\"parameters\":{\"k\":{\"string_value\":\"v\"}},\"metric_tags\":{\"a\":\"b\"},"
                   "\"sequence_batching\":null,"
                   "\"model_warmup\":[{\"inputs\":{\"I\":{\"random_data\":true,\"dims\":[2]}}}]}");
  blocks b = {0};
  Inference__ModelConfig c = INFERENCE__MODEL_CONFIG__INIT;
  cr_assert_eq(nrd_srv_pb_from_json(&c.base, j, take, &b), 0);
  cr_assert_str_eq(c.name, "m");
  cr_assert_eq(c.max_batch_size, 8);
  cr_assert_eq(c.version_policy->policy_choice_case, INFERENCE__MODEL_VERSION_POLICY__POLICY_CHOICE_SPECIFIC);
  cr_assert_eq(c.version_policy->specific->n_versions, 2);
  cr_assert_eq(c.version_policy->specific->versions[0], 1, "64-bit integers may come as strings");
  cr_assert_eq(c.n_input, 1);
  cr_assert_eq(c.input[0]->data_type, INFERENCE__DATA_TYPE__TYPE_FP16);
  cr_assert_eq(c.input[0]->dims[0], -1);
  cr_assert_eq(c.input[0]->dims[1], 4);
  cr_assert(c.input[0]->optional);
  cr_assert_eq(c.scheduling_choice_case, INFERENCE__MODEL_CONFIG__SCHEDULING_CHOICE_DYNAMIC_BATCHING,
               "a null member is absent");
  cr_assert_eq(c.dynamic_batching->max_queue_delay_microseconds, UINT64_MAX);
  cr_assert_eq(c.dynamic_batching->n_priority_queue_policy, 1);
  cr_assert_eq(c.dynamic_batching->priority_queue_policy[0]->key, 2, "integer map keys come as strings");
  cr_assert_eq(c.dynamic_batching->priority_queue_policy[0]->value->timeout_action,
               INFERENCE__MODEL_QUEUE_POLICY__TIMEOUT_ACTION__DELAY);
  cr_assert_eq(c.n_parameters, 1);
  cr_assert_str_eq(c.parameters[0]->key, "k");
  cr_assert_str_eq(c.parameters[0]->value->string_value, "v");
  cr_assert_str_eq(c.metric_tags[0]->value, "b");
  cr_assert_eq(c.model_warmup[0]->inputs[0]->value->input_data_type_case,
               INFERENCE__MODEL_WARMUP__INPUT__INPUT_DATA_TYPE_RANDOM_DATA);
  /* The filled message packs and unpacks to the same values. */
  size_t n = inference__model_config__get_packed_size(&c);
  uint8_t *buf = malloc(n);
  inference__model_config__pack(&c, buf);
  Inference__ModelConfig *back = inference__model_config__unpack(NULL, n, buf);
  cr_assert_not_null(back);
  cr_assert_eq(back->dynamic_batching->priority_queue_policy[0]->value->max_queue_size, 5);
  inference__model_config__free_unpacked(back, NULL);
  free(buf);
  release(&b);
  json_decref(j);
}

Test(pb_json, values_of_the_wrong_type_or_range_are_skipped) {
  json_t *j = load("{\"name\":7,\"max_batch_size\":4294967296,\"platform\":\"p\","
                   "\"input\":[{\"data_type\":\"TYPE_NOPE\",\"dims\":[1,\"x\",2.5,true,3],\"format\":2},5,\"s\"],"
                   "\"dynamic_batching\":{\"max_queue_delay_microseconds\":-1,\"preserve_ordering\":1},"
                   "\"instance_group\":{\"not\":\"a list\"},\"parameters\":[1,2],\"unknown_field\":{\"a\":1},"
                   "\"sequence_batching\":{\"control_input\":[{\"control\":[{\"fp32_false_true\":[\"NaN\",\"-"
                   "Infinity\",\"x\"]}]}]}}");
  blocks b = {0};
  Inference__ModelConfig c = INFERENCE__MODEL_CONFIG__INIT;
  cr_assert_eq(nrd_srv_pb_from_json(&c.base, j, take, &b), 0);
  cr_assert_str_eq(c.name, "", "a number is no string");
  cr_assert_eq(c.max_batch_size, 0, "out of int32 range");
  cr_assert_str_eq(c.platform, "p");
  cr_assert_eq(c.n_input, 1, "array members that are no objects are dropped");
  cr_assert_eq(c.input[0]->data_type, 0, "unknown enum names keep the default");
  cr_assert_eq(c.input[0]->format, INFERENCE__MODEL_INPUT__FORMAT__FORMAT_NCHW, "enums may come as numbers");
  cr_assert_eq(c.input[0]->n_dims, 2);
  cr_assert_eq(c.input[0]->dims[1], 3);
  cr_assert_eq(c.n_instance_group, 0);
  cr_assert_eq(c.n_parameters, 0);
  /* Both scheduling members were given; the later field in the descriptor wins. */
  cr_assert_eq(c.scheduling_choice_case, INFERENCE__MODEL_CONFIG__SCHEDULING_CHOICE_SEQUENCE_BATCHING);
  Inference__ModelSequenceBatching__Control *ctl = c.sequence_batching->control_input[0]->control[0];
  cr_assert_eq(ctl->n_fp32_false_true, 2);
  cr_assert(isnan(ctl->fp32_false_true[0]));
  cr_assert(isinf(ctl->fp32_false_true[1]) && ctl->fp32_false_true[1] < 0);
  release(&b);
  json_decref(j);
  /* Not an object at all: nothing is filled. */
  j = load("[1,2]");
  Inference__ModelConfig d = INFERENCE__MODEL_CONFIG__INIT;
  cr_assert_eq(nrd_srv_pb_from_json(&d.base, j, take, &b), 0);
  cr_assert_eq(d.n_input, 0);
  json_decref(j);
}

Test(pb_json, an_allocation_failure_is_reported) {
  json_t *j = load("{\"input\":[{\"name\":\"a\",\"dims\":[1]},{\"name\":\"b\",\"dims\":[2]}],"
                   "\"metric_tags\":{\"x\":\"y\"}}");
  for (size_t fail = 1; fail < 8; fail++) {
    blocks b = {.fail_after = fail};
    Inference__ModelConfig c = INFERENCE__MODEL_CONFIG__INIT;
    cr_assert_eq(nrd_srv_pb_from_json(&c.base, j, take, &b), -1, "failing allocation %zu", fail);
    release(&b);
  }
  blocks b = {0};
  Inference__ModelConfig c = INFERENCE__MODEL_CONFIG__INIT;
  cr_assert_eq(nrd_srv_pb_from_json(&c.base, j, take, &b), 0);
  cr_assert_eq(c.n_input, 2);
  release(&b);
  json_decref(j);
}
