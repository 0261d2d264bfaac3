/* Unit tests for error.c: codes, code strings, messages, the OOM sentinel. */
#include <criterion/criterion.h>
#include <string.h>

#include "error.h"

Test(error, new_keeps_code_and_copies_message) {
  char msg[] = "model 'x' not found";
  TRITONSERVER_Error *err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_NOT_FOUND, msg);
  msg[0] = 'M';
  cr_assert_eq(TRITONSERVER_ErrorCode(err), TRITONSERVER_ERROR_NOT_FOUND);
  cr_assert_str_eq(TRITONSERVER_ErrorMessage(err), "model 'x' not found");
  cr_assert_str_eq(TRITONSERVER_ErrorCodeString(err), "Not found");
  TRITONSERVER_ErrorDelete(err);
}

Test(error, null_message_is_empty) {
  TRITONSERVER_Error *err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, NULL);
  cr_assert_str_eq(TRITONSERVER_ErrorMessage(err), "");
  TRITONSERVER_ErrorDelete(err);
}

Test(error, every_code_string) {
  static const struct {
    TRITONSERVER_Error_Code code;
    const char *name;
  } cases[] = {
      {TRITONSERVER_ERROR_UNKNOWN, "Unknown"},
      {TRITONSERVER_ERROR_INTERNAL, "Internal"},
      {TRITONSERVER_ERROR_NOT_FOUND, "Not found"},
      {TRITONSERVER_ERROR_INVALID_ARG, "Invalid argument"},
      {TRITONSERVER_ERROR_UNAVAILABLE, "Unavailable"},
      {TRITONSERVER_ERROR_UNSUPPORTED, "Unsupported"},
      {TRITONSERVER_ERROR_ALREADY_EXISTS, "Already exists"},
      {TRITONSERVER_ERROR_CANCELLED, "Cancelled"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    TRITONSERVER_Error *err = TRITONSERVER_ErrorNew(cases[i].code, "x");
    cr_assert_str_eq(TRITONSERVER_ErrorCodeString(err), cases[i].name);
    cr_assert_eq(TRITONSERVER_ErrorCode(err), cases[i].code);
    TRITONSERVER_ErrorDelete(err);
  }
}

Test(error, enum_values_match_triton) {
  cr_assert_eq(TRITONSERVER_ERROR_UNKNOWN, 0);
  cr_assert_eq(TRITONSERVER_ERROR_INTERNAL, 1);
  cr_assert_eq(TRITONSERVER_ERROR_NOT_FOUND, 2);
  cr_assert_eq(TRITONSERVER_ERROR_INVALID_ARG, 3);
  cr_assert_eq(TRITONSERVER_ERROR_UNAVAILABLE, 4);
  cr_assert_eq(TRITONSERVER_ERROR_UNSUPPORTED, 5);
  cr_assert_eq(TRITONSERVER_ERROR_ALREADY_EXISTS, 6);
  cr_assert_eq(TRITONSERVER_ERROR_CANCELLED, 7);
}

Test(error, printf_style_internal_constructor) {
  TRITONSERVER_Error *err = nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "input '%s' has %d dims", "INPUT0", 3);
  cr_assert_str_eq(TRITONSERVER_ErrorMessage(err), "input 'INPUT0' has 3 dims");
  cr_assert_eq(TRITONSERVER_ErrorCode(err), TRITONSERVER_ERROR_INVALID_ARG);
  cr_assert_not(nrd_error_is_oom(err));
  TRITONSERVER_ErrorDelete(err);
}

Test(error, long_message_is_not_truncated) {
  char big[5000];
  memset(big, 'a', sizeof(big) - 1);
  big[sizeof(big) - 1] = '\0';
  TRITONSERVER_Error *err = nrd_error_new(TRITONSERVER_ERROR_UNKNOWN, "%s!", big);
  cr_assert_eq(strlen(TRITONSERVER_ErrorMessage(err)), sizeof(big));
  TRITONSERVER_ErrorDelete(err);
}

Test(error, delete_null_is_noop) { TRITONSERVER_ErrorDelete(NULL); }

Test(error, null_error_accessors_do_not_crash) {
  cr_assert_eq(TRITONSERVER_ErrorCode(NULL), TRITONSERVER_ERROR_UNKNOWN);
  cr_assert_str_eq(TRITONSERVER_ErrorMessage(NULL), "");
  cr_assert_str_eq(TRITONSERVER_ErrorCodeString(NULL), "OK");
}

static TRITONSERVER_Error *fails_with(TRITONSERVER_Error *e, int *reached) {
  NRD_RETURN_IF_ERROR(e);
  *reached = 1;
  return NULL;
}

Test(error, return_if_error_macro) {
  int reached = 0;
  cr_assert_null(fails_with(NULL, &reached));
  cr_assert_eq(reached, 1);
  reached = 0;
  TRITONSERVER_Error *e = fails_with(nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "boom"), &reached);
  cr_assert_not_null(e);
  cr_assert_eq(reached, 0);
  TRITONSERVER_ErrorDelete(e);
}

/* Forcing malloc to fail is not possible under ASan here, so only the
 * sentinel's identity check is covered: ordinary errors are never the
 * sentinel, and NULL is not either. */
Test(error, ordinary_errors_are_not_the_oom_sentinel) {
  TRITONSERVER_Error *e = nrd_error_new(TRITONSERVER_ERROR_UNKNOWN, "%s", "ok");
  cr_assert_not(nrd_error_is_oom(e));
  TRITONSERVER_ErrorDelete(e);
  cr_assert_not(nrd_error_is_oom(NULL));
}
