/* Random protobuf values for the gRPC codec tests (test_grpc_pack.c,
 * test_grpc_unpack.c). Define GRPC_RANDOM_SEED and a `static char
 * *text(void)` (malloc'ed strings) before including; a fixed seed makes a
 * failure replayable. */
#ifndef NRD_TEST_GRPC_RANDOM_H
#define NRD_TEST_GRPC_RANDOM_H

#include <stdint.h>
#include <stdlib.h>

#include "grpc_service.pb-c.h"

static uint64_t rng_state = GRPC_RANDOM_SEED;
static uint64_t next(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

static char *text(void);

static int64_t wide(void) {
  switch (next() % 4) {
    case 0: return 0;
    case 1: return -(int64_t)(next() % 1000) - 1; /* negative: ten varint bytes */
    case 2: return (int64_t)(next() >> 1);
    default: return (int64_t)(next() % 300);
  }
}

/* One of the five kinds, or nothing set. */
static Inference__InferParameter *param(void) {
  Inference__InferParameter *p = calloc(1, sizeof *p);
  inference__infer_parameter__init(p);
  switch (next() % 6) {
    case 0:
      p->parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM;
      p->bool_param = next() % 2;
      break;
    case 1:
      p->parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM;
      p->int64_param = wide();
      break;
    case 2:
      p->parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM;
      p->string_param = text();
      break;
    case 3:
      p->parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_DOUBLE_PARAM;
      p->double_param = (double)wide() / 7.0;
      break;
    case 4:
      p->parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_UINT64_PARAM;
      p->uint64_param = next();
      break;
    default: break; /* nothing set */
  }
  return p;
}

#endif
