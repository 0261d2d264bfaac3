/* Unit tests for the model statistics (src/core/stats.c): per-response
 * statistics, which decoupled backends report once per response. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>

#include "stats.h"

static json_int_t count_of(json_t *stats, int index, const char *kind) {
  char key[16];
  snprintf(key, sizeof key, "%d", index);
  json_t *d = json_object_get(json_object_get(json_object_get(stats, "response_stats"), key), kind);
  return json_integer_value(json_object_get(d, "count"));
}

Test(stats, responses_are_counted_per_index_in_any_order) {
  nrd_model_stats s;
  nrd_stats_init(&s);
  /* Two requests of 3 responses and a flags-only final each, interleaved,
   * then indexes that first appear out of order. */
  for (int req = 0; req < 2; req++)
    for (int i = 0; i < 3; i++) nrd_stats_response(&s, (uint64_t)i, 100, 150, 200, NRD_RESPONSE_SUCCESS);
  nrd_stats_response(&s, 3, 100, 0, 120, NRD_RESPONSE_EMPTY);
  nrd_stats_response(&s, 3, 100, 0, 120, NRD_RESPONSE_EMPTY);
  nrd_stats_response(&s, 6, 100, 150, 200, NRD_RESPONSE_SUCCESS);
  nrd_stats_response(&s, 4, 100, 150, 200, NRD_RESPONSE_FAIL);
  nrd_stats_response(&s, 5, 100, 0, 130, NRD_RESPONSE_CANCEL);
  nrd_stats_response(&s, 6, 100, 150, 200, NRD_RESPONSE_SUCCESS);
  json_t *j = nrd_stats_json(&s, "m", 1);
  for (int i = 0; i < 3; i++) {
    cr_assert_eq(count_of(j, i, "success"), 2, "index %d", i);
    cr_assert_eq(count_of(j, i, "compute_output"), 2);
  }
  cr_assert_eq(count_of(j, 3, "empty_response"), 2);
  cr_assert_eq(count_of(j, 3, "success"), 0);
  cr_assert_eq(count_of(j, 4, "fail"), 1);
  /* Triton counts a cancelled response as cancel only (infer_stats.cc). */
  cr_assert_eq(count_of(j, 5, "cancel"), 1);
  cr_assert_eq(count_of(j, 5, "compute_infer"), 0);
  cr_assert_eq(count_of(j, 5, "fail"), 0);
  cr_assert_eq(count_of(j, 6, "success"), 2);
  cr_assert_eq(json_object_size(json_object_get(j, "response_stats")), 7, "one entry per index seen");
  json_decref(j);
  nrd_stats_destroy(&s);
}

Test(stats, many_responses_per_request) {
  nrd_model_stats s;
  nrd_stats_init(&s);
  for (int req = 0; req < 3; req++)
    for (int i = 0; i < 5000; i++) nrd_stats_response(&s, (uint64_t)i, 0, 1, 2, NRD_RESPONSE_SUCCESS);
  json_t *j = nrd_stats_json(&s, "m", 1);
  cr_assert_eq(json_object_size(json_object_get(j, "response_stats")), 5000);
  cr_assert_eq(count_of(j, 4999, "success"), 3);
  json_decref(j);
  nrd_stats_destroy(&s);
}

/* A request of millions of responses: indexes past the limit are not kept
 * (memory stays bounded); those below it still are. */
Test(stats, response_indexes_past_the_limit_are_not_kept) {
  nrd_model_stats s;
  nrd_stats_init(&s);
  nrd_stats_response(&s, NRD_STATS_MAX_RESPONSE_INDEX - 1, 0, 1, 2, NRD_RESPONSE_SUCCESS);
  nrd_stats_response(&s, NRD_STATS_MAX_RESPONSE_INDEX, 0, 1, 2, NRD_RESPONSE_SUCCESS);
  nrd_stats_response(&s, (uint64_t)1 << 31, 0, 1, 2, NRD_RESPONSE_SUCCESS);
  json_t *j = nrd_stats_json(&s, "m", 1);
  cr_assert_eq(json_object_size(json_object_get(j, "response_stats")), 1);
  cr_assert_eq(count_of(j, (int)NRD_STATS_MAX_RESPONSE_INDEX - 1, "success"), 1);
  json_decref(j);
  nrd_stats_destroy(&s);
}
