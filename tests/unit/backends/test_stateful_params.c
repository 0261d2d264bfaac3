/* Unit tests for the stateful backend's configuration strings
 * (backends/stateful/stateful_params.c). */
#include <criterion/criterion.h>
#include <string.h>

#include "stateful_params.h"

static char err[512];

Test(state_pairs, one_pair_as_in_the_readme)
{
  sf_state_pair *p;
  size_t n;
  cr_assert(sf_state_pairs_parse("<<<Accumulate_In, Accumulate_Out>>>", &p, &n,
                                 err, sizeof err), "%s", err);
  cr_assert_eq(n, 1);
  cr_assert_str_eq(p[0].input, "Accumulate_In");
  cr_assert_str_eq(p[0].output, "Accumulate_Out");
  sf_state_pairs_free(p, n);
}

Test(state_pairs, several_separated_by_spaces_or_commas)
{
  sf_state_pair *p;
  size_t n;
  cr_assert(sf_state_pairs_parse(" <<<a,b>>> <<< c , d >>>,<<<e, f>>> ,\n", &p,
                                 &n, err, sizeof err), "%s", err);
  cr_assert_eq(n, 3);
  cr_assert_str_eq(p[1].input, "c");
  cr_assert_str_eq(p[1].output, "d");
  cr_assert_str_eq(p[2].output, "f");
  sf_state_pairs_free(p, n);
}

Test(state_pairs, bad_strings_name_the_parameter)
{
  const char *bad[] = {"", "   ", "a, b", "<<<a>>>", "<<<a, b", "<<<a, b>>>x",
                       "<<<, b>>>", "<<<a, >>>", "<<<a b, c>>>",
                       "<<<a, b>>> <<<b, c>>>", "<<<a, a>>>", NULL};
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

Test(lazy, none_disables_and_all_four_enable)
{
  sf_lazy l;
  cr_assert(sf_lazy_parse(NULL, NULL, NULL, NULL, 1000, &l, err, sizeof err));
  cr_assert(!l.enabled);
  cr_assert(sf_lazy_parse("512", "100", "32", "200", 1000, &l, err, sizeof err),
            "%s", err);
  cr_assert(l.enabled);
  cr_assert_eq(l.initial, 512);
  cr_assert_eq(l.subsequent, 100);
  cr_assert_eq(l.alloc_threshold, 32);
  cr_assert_eq(l.dealloc_threshold, 200);
}

Test(lazy, bad_settings_name_the_parameter)
{
  struct { const char *v[4]; const char *key; } bad[] = {
    {{"512", NULL, "32", "200"}, "subsequent_buffer_size"},
    {{NULL, "100", "32", "200"}, "initial_buffer_size"},
    {{"x", "100", "32", "200"}, "initial_buffer_size"},
    {{"0", "100", "32", "200"}, "initial_buffer_size"},
    {{"512", "0", "32", "200"}, "subsequent_buffer_size"},
    {{"512", "100", "-1", "200"}, "buffer_alloc_threshold"},
    {{"512", "100", "32", "2x"}, "buffer_dealloc_threshold"},
    {{"2000", "100", "32", "200"}, "initial_buffer_size"},
    {{"512", "100", "300", "200"}, "buffer_alloc_threshold"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    sf_lazy l;
    cr_assert(!sf_lazy_parse(bad[i].v[0], bad[i].v[1], bad[i].v[2], bad[i].v[3],
                             1000, &l, err, sizeof err));
    cr_assert(strncmp(err, bad[i].key, strlen(bad[i].key)) == 0, "%zu: %s", i, err);
  }
}

Test(lazy, grows_below_the_alloc_threshold_and_shrinks_only_an_idle_last_buffer)
{
  sf_lazy l;
  cr_assert(sf_lazy_parse("8", "4", "2", "6", 16, &l, err, sizeof err));
  cr_assert(!sf_lazy_should_grow(&l, 2, 8, 16));
  cr_assert(sf_lazy_should_grow(&l, 1, 8, 16));
  cr_assert(!sf_lazy_should_grow(&l, 1, 16, 16)); /* at max_candidate_sequences */
  cr_assert(!sf_lazy_should_shrink(&l, 10, 1, true)); /* the initial buffer stays */
  cr_assert(!sf_lazy_should_shrink(&l, 6, 2, true));  /* not above the threshold */
  cr_assert(!sf_lazy_should_shrink(&l, 7, 2, false)); /* last buffer in use */
  cr_assert(sf_lazy_should_shrink(&l, 7, 2, true));
  sf_lazy off;
  cr_assert(sf_lazy_parse(NULL, NULL, NULL, NULL, 16, &off, err, sizeof err));
  cr_assert(!sf_lazy_should_grow(&off, 0, 8, 16));
  cr_assert(!sf_lazy_should_shrink(&off, 16, 2, true));
}
