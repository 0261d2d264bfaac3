/* A stand-in for the part of Criterion's API our tests use, for the
 * ThreadSanitizer build only (cmake -DNRD_TSAN=ON; docs/testing-tsan in
 * README). Criterion maps its shared arena at random fixed addresses that
 * fall in TSan's shadow ranges, so a Criterion program aborts under TSan
 * before any test runs. Every other build uses the real Criterion.
 *
 * Covered: Test and TestSuite with .init, .fini and .timeout; cr_assert,
 * cr_expect and their _not/_eq/_neq/_lt/_leq/_gt/_geq/_null/_not_null/
 * _str_eq/_float_eq forms; cr_assert_fail. As in Criterion, each test runs
 * in its own forked child, a failed assert ends the test (fini still runs)
 * and a failed expect marks it failed and goes on. */
#ifndef NRD_CRITERION_LITE_H
#define NRD_CRITERION_LITE_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

struct nrd_crl_options {
  int unused_; /* lets an empty option list still be a valid initializer */
  void (*init)(void);
  void (*fini)(void);
  double timeout; /* seconds; 0 = none */
};

typedef struct nrd_crl_test {
  const char *suite, *name;
  void (*fn)(void);
  struct nrd_crl_options opts;
  struct nrd_crl_test *next;
} nrd_crl_test;

typedef struct nrd_crl_suite {
  const char *name;
  struct nrd_crl_options opts;
  struct nrd_crl_suite *next;
} nrd_crl_suite;

/* Called from constructors before main; the structs are static and stay
 * the caller's. Not thread-safe (there is only the main thread then). */
void nrd_crl_register_test(nrd_crl_test *t);
void nrd_crl_register_suite(nrd_crl_suite *s);

/* Reports a failed check (ok false) with the expression text and the
 * optional printf-style message. A failed fatal check ends the test: on
 * the test's own thread it jumps to the runner, which still runs fini; on
 * any other thread the child exits at once. Returns ok. Any thread. */
bool nrd_crl_check(bool ok, bool fatal, const char *file, int line, const char *expr, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/* strcmp that treats NULL as unequal to everything. */
bool nrd_crl_str_eq(const char *a, const char *b);

#define NRD_CRL_CAT_(a, b) a##b
#define NRD_CRL_CAT(a, b) NRD_CRL_CAT_(a, b)

#define Test(suite, name, ...)                                                                                         \
  static void nrd_crl_fn_##suite##_##name(void);                                                                       \
  static nrd_crl_test nrd_crl_t_##suite##_##name = {                                                                   \
      #suite, #name, nrd_crl_fn_##suite##_##name, {.unused_ = 0, __VA_ARGS__}, NULL};                                  \
  __attribute__((constructor)) static void nrd_crl_reg_##suite##_##name(void) {                                        \
    nrd_crl_register_test(&nrd_crl_t_##suite##_##name);                                                                \
  }                                                                                                                    \
  static void nrd_crl_fn_##suite##_##name(void)

#define TestSuite(suite, ...)                                                                                          \
  static nrd_crl_suite nrd_crl_s_##suite = {#suite, {.unused_ = 0, __VA_ARGS__}, NULL};                                \
  __attribute__((constructor)) static void nrd_crl_sreg_##suite(void) { nrd_crl_register_suite(&nrd_crl_s_##suite); }  \
  struct nrd_crl_swallow_semicolon_##suite

#define NRD_CRL_CHECK(fatal, cond, text, ...)                                                                          \
  nrd_crl_check((cond), (fatal), __FILE__, __LINE__, (text), " " __VA_ARGS__)

#define cr_assert(c, ...) NRD_CRL_CHECK(true, !!(c), #c, __VA_ARGS__)
#define cr_expect(c, ...) NRD_CRL_CHECK(false, !!(c), #c, __VA_ARGS__)
#define cr_assert_not(c, ...) NRD_CRL_CHECK(true, !(c), "!(" #c ")", __VA_ARGS__)
#define cr_expect_not(c, ...) NRD_CRL_CHECK(false, !(c), "!(" #c ")", __VA_ARGS__)
#define cr_assert_fail(...) NRD_CRL_CHECK(true, false, "cr_assert_fail", __VA_ARGS__)

#define NRD_CRL_CMP(fatal, a, op, b, ...) NRD_CRL_CHECK(fatal, (a)op(b), #a " " #op " " #b, __VA_ARGS__)
#define cr_assert_eq(a, b, ...) NRD_CRL_CMP(true, a, ==, b, __VA_ARGS__)
#define cr_expect_eq(a, b, ...) NRD_CRL_CMP(false, a, ==, b, __VA_ARGS__)
#define cr_assert_neq(a, b, ...) NRD_CRL_CMP(true, a, !=, b, __VA_ARGS__)
#define cr_expect_neq(a, b, ...) NRD_CRL_CMP(false, a, !=, b, __VA_ARGS__)
#define cr_assert_lt(a, b, ...) NRD_CRL_CMP(true, a, <, b, __VA_ARGS__)
#define cr_assert_leq(a, b, ...) NRD_CRL_CMP(true, a, <=, b, __VA_ARGS__)
#define cr_assert_gt(a, b, ...) NRD_CRL_CMP(true, a, >, b, __VA_ARGS__)
#define cr_assert_geq(a, b, ...) NRD_CRL_CMP(true, a, >=, b, __VA_ARGS__)
#define cr_expect_lt(a, b, ...) NRD_CRL_CMP(false, a, <, b, __VA_ARGS__)
#define cr_expect_leq(a, b, ...) NRD_CRL_CMP(false, a, <=, b, __VA_ARGS__)
#define cr_expect_gt(a, b, ...) NRD_CRL_CMP(false, a, >, b, __VA_ARGS__)
#define cr_expect_geq(a, b, ...) NRD_CRL_CMP(false, a, >=, b, __VA_ARGS__)

#define cr_assert_null(p, ...) NRD_CRL_CHECK(true, (p) == NULL, #p " == NULL", __VA_ARGS__)
#define cr_expect_null(p, ...) NRD_CRL_CHECK(false, (p) == NULL, #p " == NULL", __VA_ARGS__)
#define cr_assert_not_null(p, ...) NRD_CRL_CHECK(true, (p) != NULL, #p " != NULL", __VA_ARGS__)
#define cr_expect_not_null(p, ...) NRD_CRL_CHECK(false, (p) != NULL, #p " != NULL", __VA_ARGS__)

#define cr_assert_str_eq(a, b, ...) NRD_CRL_CHECK(true, nrd_crl_str_eq((a), (b)), #a " == " #b, __VA_ARGS__)
#define cr_expect_str_eq(a, b, ...) NRD_CRL_CHECK(false, nrd_crl_str_eq((a), (b)), #a " == " #b, __VA_ARGS__)

#define cr_assert_float_eq(a, b, eps, ...)                                                                             \
  NRD_CRL_CHECK(true, fabs((double)(a) - (double)(b)) <= (double)(eps), #a " ~= " #b, __VA_ARGS__)
#define cr_expect_float_eq(a, b, eps, ...)                                                                             \
  NRD_CRL_CHECK(false, fabs((double)(a) - (double)(b)) <= (double)(eps), #a " ~= " #b, __VA_ARGS__)

#endif
