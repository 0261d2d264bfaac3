/* Unit tests for the stateful backend's configuration strings
 * (backends/stateful/stateful_params.c). */
#include <criterion/criterion.h>
#include <string.h>

#include "stateful_params.h"

static char err[512];

Test(state_pairs, one_pair_as_in_the_readme) {
  sf_state_pair *p;
  size_t n;
  cr_assert(sf_state_pairs_parse("<<<Accumulate_In, Accumulate_Out>>>", &p, &n, err, sizeof err), "%s", err);
  cr_assert_eq(n, 1);
  cr_assert_str_eq(p[0].input, "Accumulate_In");
  cr_assert_str_eq(p[0].output, "Accumulate_Out");
  sf_state_pairs_free(p, n);
}

Test(state_pairs, several_separated_by_spaces_or_commas) {
  sf_state_pair *p;
  size_t n;
  cr_assert(sf_state_pairs_parse(" <<<a,b>>> <<< c , d >>>,<<<e, f>>> ,\n", &p, &n, err, sizeof err), "%s", err);
  cr_assert_eq(n, 3);
  cr_assert_str_eq(p[1].input, "c");
  cr_assert_str_eq(p[1].output, "d");
  cr_assert_str_eq(p[2].output, "f");
  sf_state_pairs_free(p, n);
}

Test(state_pairs, bad_strings_name_the_parameter) {
  const char *bad[] = {"",
                       "   ",
                       "a, b",
                       "<<<a>>>",
                       "<<<a, b",
                       "<<<a, b>>>x",
                       "<<<, b>>>",
                       "<<<a, >>>",
                       "<<<a b, c>>>",
                       "<<<a, b>>> <<<b, c>>>",
                       "<<<a, a>>>",
                       NULL};
  for (int i = 0; bad[i] != NULL; i++) {
    sf_state_pair *p = (void *)1;
    size_t n = 7;
    err[0] = '\0';
    cr_assert(!sf_state_pairs_parse(bad[i], &p, &n, err, sizeof err), "%s", bad[i]);
    cr_assert_null(p);
    cr_assert_eq(n, 0);
    cr_assert(strncmp(err, "state_pairs: ", 13) == 0, "%s -> %s", bad[i], err);
  }
}

Test(lazy, none_disables_and_all_four_enable) {
  sf_lazy l;
  cr_assert(sf_lazy_parse(NULL, NULL, NULL, NULL, 1000, &l, err, sizeof err));
  cr_assert(!l.enabled);
  cr_assert(sf_lazy_parse("512", "100", "32", "200", 1000, &l, err, sizeof err), "%s", err);
  cr_assert(l.enabled);
  cr_assert_eq(l.initial, 512);
  cr_assert_eq(l.subsequent, 100);
  cr_assert_eq(l.alloc_threshold, 32);
  cr_assert_eq(l.dealloc_threshold, 200);
}

Test(lazy, bad_settings_name_the_parameter) {
  struct {
    const char *v[4];
    const char *key;
  } bad[] = {
      {{"512", NULL, "32", "200"}, "subsequent_buffer_size"},   {{NULL, "100", "32", "200"}, "initial_buffer_size"},
      {{"x", "100", "32", "200"}, "initial_buffer_size"},       {{"0", "100", "32", "200"}, "initial_buffer_size"},
      {{"512", "0", "32", "200"}, "subsequent_buffer_size"},    {{"512", "100", "-1", "200"}, "buffer_alloc_threshold"},
      {{"512", "100", "32", "2x"}, "buffer_dealloc_threshold"}, {{"2000", "100", "32", "200"}, "initial_buffer_size"},
      {{"512", "100", "300", "200"}, "buffer_alloc_threshold"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    sf_lazy l;
    cr_assert(!sf_lazy_parse(bad[i].v[0], bad[i].v[1], bad[i].v[2], bad[i].v[3], 1000, &l, err, sizeof err));
    cr_assert(strncmp(err, bad[i].key, strlen(bad[i].key)) == 0, "%zu: %s", i, err);
  }
}

Test(lazy, grows_below_the_alloc_threshold_and_shrinks_only_an_idle_last_buffer) {
  sf_lazy l;
  cr_assert(sf_lazy_parse("8", "4", "2", "6", 16, &l, err, sizeof err));
  cr_assert(!sf_lazy_should_grow(&l, 2, 8, 16));
  cr_assert(sf_lazy_should_grow(&l, 1, 8, 16));
  cr_assert(!sf_lazy_should_grow(&l, 1, 16, 16)); /* at max_candidate_sequences */
  cr_assert(!sf_lazy_should_shrink(&l, 10, 1, true)); /* the initial buffer stays */
  cr_assert(!sf_lazy_should_shrink(&l, 6, 2, true)); /* not above the threshold */
  cr_assert(!sf_lazy_should_shrink(&l, 7, 2, false)); /* last buffer in use */
  cr_assert(sf_lazy_should_shrink(&l, 7, 2, true));
  sf_lazy off;
  cr_assert(sf_lazy_parse(NULL, NULL, NULL, NULL, 16, &off, err, sizeof err));
  cr_assert(!sf_lazy_should_grow(&off, 0, 8, 16));
  cr_assert(!sf_lazy_should_shrink(&off, 16, 2, true));
}

Test(half, exact_values_round_trip) {
  const float exact[] = {0.0f, 1.0f, -2.5f, 65504.0f, 0.000061035156f, 5.9604645e-8f /* smallest subnormal */, 1023.5f};
  for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++) {
    cr_assert_eq(sf_half_to_float(sf_half_from_float(exact[i])), exact[i], "%g", (double)exact[i]);
  }
  cr_assert_eq(sf_half_from_float(1.0f), 0x3c00);
  cr_assert_eq(sf_half_from_float(-2.0f), 0xc000);
}

Test(half, rounds_to_nearest_even_and_saturates_to_infinity) {
  /* 2049 lies between 2048 and 2050: ties to the even 2048. */
  cr_assert_eq(sf_half_to_float(sf_half_from_float(2049.0f)), 2048.0f);
  cr_assert_eq(sf_half_to_float(sf_half_from_float(2051.0f)), 2052.0f);
  cr_assert_eq(sf_half_from_float(1e6f), 0x7c00);
  cr_assert_eq(sf_half_from_float(-1e6f), 0xfc00);
  cr_assert_eq(sf_half_from_float(1e-9f), 0);
  uint16_t nan = sf_half_from_float(__builtin_nanf(""));
  cr_assert((nan & 0x7c00) == 0x7c00 && (nan & 0x3ff) != 0);
}

Test(half, relative_error_is_within_half_an_ulp) {
  for (float f = -3000.0f; f < 3000.0f; f += 0.737f) {
    float back = sf_half_to_float(sf_half_from_float(f));
    float tol = (f < 0 ? -f : f) / 2048.0f + 1e-7f;
    cr_assert(back - f <= tol && f - back <= tol, "%g -> %g", (double)f, (double)back);
  }
}
