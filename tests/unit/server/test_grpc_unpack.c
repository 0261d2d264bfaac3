/* Unit tests for the hand-written ModelInferRequest decoder
 * (src/server/grpc/grpc_unpack.c): whatever it decodes must equal protobuf-c's
 * unpack of the same bytes, on random messages and on random damage to
 * them; what it does not handle it must hand back (fallback), never
 * decode differently. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grpc_unpack.h"

#define GRPC_RANDOM_SEED 0x9e3779b97f4a7c15ull
#include "grpc_random.h"

/* Blocks handed out by the test allocator, freed together. */
static void *blocks[100000];
static size_t n_blocks;
static size_t fail_after = SIZE_MAX; /* allocations left before one fails */

static void *t_alloc(void *data, size_t size) {
  (void)data;
  if (fail_after == 0) return NULL;
  if (fail_after != SIZE_MAX) fail_after--;
  cr_assert_lt(n_blocks, sizeof blocks / sizeof *blocks);
  return blocks[n_blocks++] = malloc(size ? size : 1);
}
static void t_free(void *data, void *p) {
  (void)data;
  (void)p; /* all at once in release_all */
}
static ProtobufCAllocator alloc = {t_alloc, t_free, NULL};

static void release_all(void) {
  for (size_t i = 0; i < n_blocks; i++) free(blocks[i]);
  n_blocks = 0;
}

static char *text(void) {
  size_t n = next() % 4 == 0 ? 0 : next() % 150; /* empty, and lengths past 127 */
  char *s = malloc(n + 1);
  for (size_t i = 0; i < n; i++) {
    /* Mostly letters; some bytes above 0x7f, not always valid UTF-8. */
    s[i] = next() % 10 ? (char)('a' + next() % 26) : (char)(0x80 + next() % 0x7f);
  }
  s[n] = '\0';
  return s;
}

/* The three entry types share one layout; each is made through its own
 * init so it packs with its own descriptor. */
#define MAKE_PARAMS(TYPE, INIT_FN, out, n)                                                                             \
  do {                                                                                                                 \
    *(n) = next() % 4;                                                                                                 \
    *(out) = calloc(*(n) + 1, sizeof **(out));                                                                         \
    for (size_t i_ = 0; i_ < *(n); i_++) {                                                                             \
      TYPE *e_ = calloc(1, sizeof *e_);                                                                                \
      INIT_FN(e_);                                                                                                     \
      e_->key = text();                                                                                                \
      e_->value = next() % 8 ? param() : NULL;                                                                         \
      (*(out))[i_] = e_;                                                                                               \
    }                                                                                                                  \
  } while (0)

static Inference__ModelInferRequest *request(void) {
  Inference__ModelInferRequest *r = calloc(1, sizeof *r);
  inference__model_infer_request__init(r);
  r->model_name = text();
  r->model_version = text();
  r->id = text();
  MAKE_PARAMS(Inference__ModelInferRequest__ParametersEntry, inference__model_infer_request__parameters_entry__init,
              &r->parameters, &r->n_parameters);
  r->n_inputs = next() % 4;
  r->inputs = calloc(r->n_inputs + 1, sizeof *r->inputs);
  for (size_t i = 0; i < r->n_inputs; i++) {
    Inference__ModelInferRequest__InferInputTensor *t = calloc(1, sizeof *t);
    inference__model_infer_request__infer_input_tensor__init(t);
    t->name = text();
    t->datatype = text();
    t->n_shape = next() % 5;
    t->shape = calloc(t->n_shape + 1, sizeof *t->shape);
    for (size_t k = 0; k < t->n_shape; k++) t->shape[k] = wide();
    MAKE_PARAMS(Inference__ModelInferRequest__InferInputTensor__ParametersEntry,
                inference__model_infer_request__infer_input_tensor__parameters_entry__init, &t->parameters,
                &t->n_parameters);
    r->inputs[i] = t;
  }
  r->n_outputs = next() % 3;
  r->outputs = calloc(r->n_outputs + 1, sizeof *r->outputs);
  for (size_t i = 0; i < r->n_outputs; i++) {
    Inference__ModelInferRequest__InferRequestedOutputTensor *t = calloc(1, sizeof *t);
    inference__model_infer_request__infer_requested_output_tensor__init(t);
    t->name = text();
    MAKE_PARAMS(Inference__ModelInferRequest__InferRequestedOutputTensor__ParametersEntry,
                inference__model_infer_request__infer_requested_output_tensor__parameters_entry__init, &t->parameters,
                &t->n_parameters);
    r->outputs[i] = t;
  }
  r->n_raw_input_contents = next() % 4;
  r->raw_input_contents = calloc(r->n_raw_input_contents + 1, sizeof *r->raw_input_contents);
  for (size_t i = 0; i < r->n_raw_input_contents; i++) {
    size_t n = next() % 3 == 0 ? 0 : next() % 20000; /* empty, and three-byte lengths */
    r->raw_input_contents[i].len = n;
    r->raw_input_contents[i].data = malloc(n + 1);
    for (size_t k = 0; k < n; k++) r->raw_input_contents[i].data[k] = (uint8_t)next();
  }
  return r;
}

static uint8_t *pack(const Inference__ModelInferRequest *r, size_t *len) {
  *len = inference__model_infer_request__get_packed_size(r);
  uint8_t *b = malloc(*len + 1);
  inference__model_infer_request__pack(r, b);
  return b;
}

/* ---- deep comparison ----------------------------------------------------- */

static void same_str(const char *a, const char *b, const char *what) { cr_assert_str_eq(a, b, "%s differs", what); }

static void same_param(const Inference__InferParameter *a, const Inference__InferParameter *b) {
  if (a == NULL || b == NULL) {
    cr_assert(a == NULL && b == NULL, "one parameter value is missing");
    return;
  }
  cr_assert_eq(a->parameter_choice_case, b->parameter_choice_case);
  switch (a->parameter_choice_case) {
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM: cr_assert_eq(a->bool_param, b->bool_param); break;
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM: cr_assert_eq(a->int64_param, b->int64_param); break;
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM:
      same_str(a->string_param, b->string_param, "string_param");
      break;
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_DOUBLE_PARAM:
      cr_assert_eq(memcmp(&a->double_param, &b->double_param, 8), 0);
      break;
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_UINT64_PARAM:
      cr_assert_eq(a->uint64_param, b->uint64_param);
      break;
    default: break;
  }
}

/* Entries of any of the three map types (same layout). */
static void same_entries(size_t na, void *const *va, size_t nb, void *const *vb) {
  cr_assert_eq(na, nb, "%zu parameters, protobuf-c %zu", na, nb);
  for (size_t i = 0; i < na; i++) {
    const Inference__ModelInferRequest__ParametersEntry *a = va[i], *b = vb[i];
    same_str(a->key, b->key, "parameter key");
    same_param(a->value, b->value);
  }
}

static void same_request(const Inference__ModelInferRequest *a, const Inference__ModelInferRequest *b) {
  same_str(a->model_name, b->model_name, "model_name");
  same_str(a->model_version, b->model_version, "model_version");
  same_str(a->id, b->id, "id");
  same_entries(a->n_parameters, (void *const *)a->parameters, b->n_parameters, (void *const *)b->parameters);
  cr_assert_eq(a->n_inputs, b->n_inputs);
  for (size_t i = 0; i < a->n_inputs; i++) {
    const Inference__ModelInferRequest__InferInputTensor *x = a->inputs[i], *y = b->inputs[i];
    same_str(x->name, y->name, "input name");
    same_str(x->datatype, y->datatype, "input datatype");
    cr_assert_eq(x->n_shape, y->n_shape);
    for (size_t k = 0; k < x->n_shape; k++) cr_assert_eq(x->shape[k], y->shape[k]);
    same_entries(x->n_parameters, (void *const *)x->parameters, y->n_parameters, (void *const *)y->parameters);
    cr_assert(x->contents == NULL && y->contents == NULL);
  }
  cr_assert_eq(a->n_outputs, b->n_outputs);
  for (size_t i = 0; i < a->n_outputs; i++) {
    same_str(a->outputs[i]->name, b->outputs[i]->name, "output name");
    same_entries(a->outputs[i]->n_parameters, (void *const *)a->outputs[i]->parameters, b->outputs[i]->n_parameters,
                 (void *const *)b->outputs[i]->parameters);
  }
  cr_assert_eq(a->n_raw_input_contents, b->n_raw_input_contents);
  for (size_t i = 0; i < a->n_raw_input_contents; i++) {
    cr_assert_eq(a->raw_input_contents[i].len, b->raw_input_contents[i].len);
    if (a->raw_input_contents[i].len)
      cr_assert_eq(memcmp(a->raw_input_contents[i].data, b->raw_input_contents[i].data, a->raw_input_contents[i].len),
                   0);
  }
  cr_assert_eq(a->base.n_unknown_fields, 0u);
  cr_assert_eq(a->base.descriptor, b->base.descriptor);
}

/* Decodes both ways. Returns true when the fast decoder took the message;
 * then protobuf-c must have taken it too, with the same content. */
static bool check(const uint8_t *b, size_t len) {
  bool fallback = false;
  Inference__ModelInferRequest *mine = nrd_srv_grpc_unpack_infer_request(&alloc, b, len, &fallback);
  Inference__ModelInferRequest *want = inference__model_infer_request__unpack(NULL, len, b);
  if (mine == NULL) {
    cr_assert(fallback, "NULL without fallback, but memory did not run out");
  } else {
    cr_assert_not_null(want, "decoded a message protobuf-c rejects (%zu bytes)", len);
    same_request(mine, want);
  }
  if (want) inference__model_infer_request__free_unpacked(want, NULL);
  release_all();
  return mine != NULL;
}

Test(grpc_unpack, random_requests_match_protobuf_c) {
  for (int i = 0; i < 300; i++) {
    Inference__ModelInferRequest *r = request();
    size_t len;
    uint8_t *b = pack(r, &len);
    cr_assert(check(b, len), "a message with only handled fields fell back");
    free(b);
    inference__model_infer_request__free_unpacked(r, NULL);
  }
}

Test(grpc_unpack, damaged_requests_never_decode_differently) {
  size_t taken = 0, total = 0;
  for (int i = 0; i < 300; i++) {
    Inference__ModelInferRequest *r = request();
    size_t len;
    uint8_t *b = pack(r, &len);
    for (int k = 0; k < 20 && len > 0; k++) {
      uint8_t *d = malloc(len + 8);
      memcpy(d, b, len);
      size_t dlen = len;
      switch (next() % 4) {
        case 0: d[next() % dlen] ^= (uint8_t)(1u << (next() % 8)); break; /* one bit */
        case 1: d[next() % dlen] = (uint8_t)next(); break; /* one byte */
        case 2: dlen = next() % dlen; break; /* cut short */
        default: /* a few random bytes at the end: a new field, perhaps a bad one */
          for (int j = 0; j < 8; j++) d[dlen++] = (uint8_t)next();
          break;
      }
      taken += check(d, dlen);
      total++;
      free(d);
    }
    free(b);
    inference__model_infer_request__free_unpacked(r, NULL);
  }
  /* Many damaged messages stay well formed (a changed letter, say): the
   * comparison above must have covered some. */
  cr_assert_gt(taken, total / 10, "only %zu of %zu damaged messages were decoded", taken, total);
}

/* What tritonclient sends for one FP32 [1, 16] input in raw form. */
static uint8_t *tritonclient_request(size_t *len) {
  Inference__ModelInferRequest r = INFERENCE__MODEL_INFER_REQUEST__INIT;
  Inference__ModelInferRequest__InferInputTensor in = INFERENCE__MODEL_INFER_REQUEST__INFER_INPUT_TENSOR__INIT;
  Inference__ModelInferRequest__InferInputTensor *ins[1] = {&in};
  int64_t shape[2] = {1, 16};
  float data[16] = {0};
  ProtobufCBinaryData raw = {sizeof data, (uint8_t *)data};
  r.model_name = "identity_fp32";
  in.name = "INPUT0";
  in.datatype = "FP32";
  in.n_shape = 2;
  in.shape = shape;
  r.n_inputs = 1;
  r.inputs = ins;
  r.n_raw_input_contents = 1;
  r.raw_input_contents = &raw;
  return pack(&r, len);
}

Test(grpc_unpack, tritonclient_request_is_decoded) {
  size_t len;
  uint8_t *b = tritonclient_request(&len);
  cr_assert(check(b, len));
  free(b);
}

Test(grpc_unpack, empty_message_is_all_defaults) {
  bool fallback = true;
  Inference__ModelInferRequest *m = nrd_srv_grpc_unpack_infer_request(&alloc, (const uint8_t *)"", 0, &fallback);
  cr_assert_not_null(m);
  cr_assert(!fallback);
  cr_assert_str_eq(m->model_name, "");
  cr_assert_eq(m->n_inputs, 0u);
  cr_assert_null(m->inputs);
  cr_assert_null(m->raw_input_contents);
  release_all();
}

/* Raw bytes for the cases protobuf-c's packer would not make. */
static void expect(const uint8_t *b, size_t len, bool decoded) {
  bool fallback = false;
  Inference__ModelInferRequest *m = nrd_srv_grpc_unpack_infer_request(&alloc, b, len, &fallback);
  release_all();
  cr_assert_eq(m != NULL, decoded, "decoded: %d, wanted %d", m != NULL, decoded);
  cr_assert_eq(fallback, !decoded);
  check(b, len); /* and whatever was decoded equals protobuf-c */
}

Test(grpc_unpack, what_it_leaves_to_protobuf_c) {
  /* Typed contents on an input: inputs { contents { int_contents: 1 } } */
  static const uint8_t typed[] = {0x2a, 0x04, 0x2a, 0x02, 0x10, 0x01};
  expect(typed, sizeof typed, false);
  /* An unknown field (number 15, varint). */
  static const uint8_t unknown[] = {0x0a, 0x01, 'm', 0x78, 0x05};
  expect(unknown, sizeof unknown, false);
  /* model_name twice. */
  static const uint8_t twice[] = {0x0a, 0x01, 'a', 0x0a, 0x01, 'b'};
  expect(twice, sizeof twice, false);
  /* model_name with the varint wire type. */
  static const uint8_t wrong_type[] = {0x08, 0x01};
  expect(wrong_type, sizeof wrong_type, false);
  /* A parameter with two members of its oneof. */
  static const uint8_t two_of_oneof[] = {0x22, 0x09, 0x0a, 0x01, 'k', 0x12, 0x04, 0x08, 0x01, 0x10, 0x05};
  expect(two_of_oneof, sizeof two_of_oneof, false);
  /* A length past the end. */
  static const uint8_t too_long[] = {0x0a, 0x05, 'a'};
  expect(too_long, sizeof too_long, false);
  /* An eleven-byte varint. */
  static const uint8_t long_varint[] = {0x2a, 0x0c, 0x18, 0xff, 0xff, 0xff, 0xff,
                                        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
  expect(long_varint, sizeof long_varint, false);
}

Test(grpc_unpack, unpacked_shape_and_missing_entry_parts_are_decoded) {
  /* inputs { shape: 2 (unpacked) shape: [3, -1] (packed) }, then a
   * parameters entry with neither key nor value, then one with a value
   * holding nothing. */
  static const uint8_t b[] = {0x2a, 0x0f, 0x18, 0x02, 0x1a, 0x0b, 0x03, 0xff, 0xff, 0xff, 0xff, 0xff,
                              0xff, 0xff, 0xff, 0xff, 0x01, 0x22, 0x00, 0x22, 0x02, 0x12, 0x00};
  expect(b, sizeof b, true);
  bool fallback;
  Inference__ModelInferRequest *m = nrd_srv_grpc_unpack_infer_request(&alloc, b, sizeof b, &fallback);
  cr_assert_not_null(m);
  cr_assert_eq(m->inputs[0]->n_shape, 3u);
  cr_assert_eq(m->inputs[0]->shape[0], 2);
  cr_assert_eq(m->inputs[0]->shape[2], -1);
  cr_assert_eq(m->n_parameters, 2u);
  cr_assert_str_eq(m->parameters[0]->key, "");
  cr_assert_null(m->parameters[0]->value);
  cr_assert_eq(m->parameters[1]->value->parameter_choice_case, INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE__NOT_SET);
  release_all();
}

Test(grpc_unpack, out_of_memory_is_not_a_fallback) {
  size_t len;
  uint8_t *b = tritonclient_request(&len);
  /* It takes nine blocks: each one in turn is refused. */
  for (size_t k = 0; k < 9; k++) {
    fail_after = k;
    bool fallback = true;
    Inference__ModelInferRequest *m = nrd_srv_grpc_unpack_infer_request(&alloc, b, len, &fallback);
    fail_after = SIZE_MAX;
    release_all();
    cr_assert_null(m, "allocation %zu refused, yet a message came back", k);
    cr_assert(!fallback);
  }
  free(b);
}
