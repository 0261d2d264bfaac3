/* Unit tests for the hand-written ModelInferResponse packer
 * (src/server/grpc/grpc_pack.c): its bytes must be protobuf-c's, for every kind
 * of field it writes, on random messages and on the edge cases. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grpc_call.h"
#include "grpc_pack.h"

#define GRPC_RANDOM_SEED 88172645463325252ull
#include "grpc_random.h"

static char *text(void) {
  size_t n = next() % 4 == 0 ? 0 : next() % 200; /* empty strings too, and lengths past 127 */
  char *s = malloc(n + 1);
  for (size_t i = 0; i < n; i++) s[i] = (char)('a' + next() % 26);
  s[n] = '\0';
  return s;
}

static Inference__ModelInferResponse__ParametersEntry **params(size_t *n) {
  *n = next() % 4;
  Inference__ModelInferResponse__ParametersEntry **v = calloc(*n + 1, sizeof *v);
  for (size_t i = 0; i < *n; i++) {
    v[i] = calloc(1, sizeof **v);
    inference__model_infer_response__parameters_entry__init(v[i]);
    v[i]->key = text();
    v[i]->value = next() % 8 ? param() : NULL;
  }
  return v;
}

static Inference__ModelInferResponse *response(void) {
  Inference__ModelInferResponse *r = calloc(1, sizeof *r);
  inference__model_infer_response__init(r);
  r->model_name = text();
  r->model_version = text();
  r->id = text();
  r->parameters = params(&r->n_parameters);
  r->n_outputs = next() % 4;
  r->outputs = calloc(r->n_outputs + 1, sizeof *r->outputs);
  for (size_t i = 0; i < r->n_outputs; i++) {
    Inference__ModelInferResponse__InferOutputTensor *t = calloc(1, sizeof *t);
    inference__model_infer_response__infer_output_tensor__init(t);
    t->name = text();
    t->datatype = text();
    t->n_shape = next() % 5;
    t->shape = calloc(t->n_shape + 1, sizeof *t->shape);
    for (size_t k = 0; k < t->n_shape; k++) t->shape[k] = wide();
    t->parameters = (Inference__ModelInferResponse__InferOutputTensor__ParametersEntry **)params(&t->n_parameters);
    r->outputs[i] = t;
  }
  r->n_raw_output_contents = next() % 4;
  r->raw_output_contents = calloc(r->n_raw_output_contents + 1, sizeof *r->raw_output_contents);
  for (size_t i = 0; i < r->n_raw_output_contents; i++) {
    size_t n = next() % 3 == 0 ? 0 : next() % 40000; /* empty elements, and lengths of 3 varint bytes */
    r->raw_output_contents[i].len = n;
    r->raw_output_contents[i].data = malloc(n + 1);
    for (size_t k = 0; k < n; k++) r->raw_output_contents[i].data[k] = (uint8_t)next();
  }
  return r;
}

/* Packs `r` both ways and requires the same bytes. */
static void same_bytes(const Inference__ModelInferResponse *r, int stream, const char *error) {
  size_t len = 0, want_len = 0;
  uint8_t *got = nrd_srv_grpc_pack_infer_response(r, stream, error, &len);
  uint8_t *want;
  if (stream) {
    Inference__ModelStreamInferResponse s = INFERENCE__MODEL_STREAM_INFER_RESPONSE__INIT;
    s.error_message = (char *)(error ? error : "");
    s.infer_response = (Inference__ModelInferResponse *)r;
    want = nrd_srv_grpc_frame(&s.base, &want_len);
  } else {
    want = nrd_srv_grpc_frame(&r->base, &want_len);
  }
  cr_assert_not_null(got);
  cr_assert_eq(len, want_len, "length %zu, protobuf-c %zu", len, want_len);
  cr_assert_eq(memcmp(got, want, len), 0, "bytes differ from protobuf-c's");
  free(got);
  free(want);
}

Test(grpc_pack, random_responses_match_protobuf_c) {
  for (int i = 0; i < 400; i++) {
    Inference__ModelInferResponse *r = response();
    char *error = i % 3 == 0 ? text() : NULL;
    same_bytes(r, 0, NULL);
    same_bytes(r, 1, error);
    inference__model_infer_response__free_unpacked(r, NULL);
    free(error);
  }
}

Test(grpc_pack, empty_and_typed_contents_fall_back) {
  Inference__ModelInferResponse r = INFERENCE__MODEL_INFER_RESPONSE__INIT;
  same_bytes(&r, 0, NULL);
  same_bytes(&r, 1, NULL);
  same_bytes(&r, 1, "an error");
  /* An output with typed contents goes through protobuf-c. */
  Inference__InferTensorContents c = INFERENCE__INFER_TENSOR_CONTENTS__INIT;
  int32_t ints[3] = {1, -2, 3};
  c.n_int_contents = 3;
  c.int_contents = ints;
  Inference__ModelInferResponse__InferOutputTensor t = INFERENCE__MODEL_INFER_RESPONSE__INFER_OUTPUT_TENSOR__INIT;
  t.name = "OUT";
  t.contents = &c;
  Inference__ModelInferResponse__InferOutputTensor *tp = &t;
  r.n_outputs = 1;
  r.outputs = &tp;
  same_bytes(&r, 0, NULL);
  same_bytes(&r, 1, "e");
}
