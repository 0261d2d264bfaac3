/* Unit tests for trace.c: names work, tracing itself is UNSUPPORTED, and the
 * NULL-trace calls of untraced inference succeed. */
#include <criterion/criterion.h>
#include <string.h>

#include "trace.h"

static void expect_unsupported(TRITONSERVER_Error *e)
{
  cr_assert_not_null(e);
  cr_assert_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_UNSUPPORTED);
  cr_assert_str_eq(TRITONSERVER_ErrorMessage(e), NRD_TRACE_UNSUPPORTED_MSG);
  TRITONSERVER_ErrorDelete(e);
}

Test(trace, names)
{
  cr_assert_str_eq(TRITONSERVER_InferenceTraceLevelString(TRITONSERVER_TRACE_LEVEL_DISABLED), "DISABLED");
  cr_assert_str_eq(TRITONSERVER_InferenceTraceLevelString(TRITONSERVER_TRACE_LEVEL_TIMESTAMPS), "TIMESTAMPS");
  cr_assert_str_eq(TRITONSERVER_InferenceTraceLevelString(TRITONSERVER_TRACE_LEVEL_TENSORS), "TENSORS");
  cr_assert_str_eq(TRITONSERVER_InferenceTraceLevelString((TRITONSERVER_InferenceTraceLevel)0xc), "<unknown>");
  cr_assert_str_eq(TRITONSERVER_InferenceTraceActivityString(TRITONSERVER_TRACE_REQUEST_START), "REQUEST_START");
  cr_assert_str_eq(TRITONSERVER_InferenceTraceActivityString(TRITONSERVER_TRACE_COMPUTE_END), "COMPUTE_END");
  cr_assert_str_eq(TRITONSERVER_InferenceTraceActivityString(TRITONSERVER_TRACE_TENSOR_BACKEND_OUTPUT),
                   "TENSOR_BACKEND_OUTPUT");
  cr_assert_str_eq(TRITONSERVER_InferenceTraceActivityString(TRITONSERVER_TRACE_CUSTOM_ACTIVITY),
                   "CUSTOM_ACTIVITY");
  cr_assert_str_eq(TRITONSERVER_InferenceTraceActivityString((TRITONSERVER_InferenceTraceActivity)99),
                   "<unknown>");
}

Test(trace, creation_is_unsupported)
{
  TRITONSERVER_InferenceTrace *t = (TRITONSERVER_InferenceTrace *)0x1;
  expect_unsupported(TRITONSERVER_InferenceTraceNew(&t, TRITONSERVER_TRACE_LEVEL_TIMESTAMPS, 0, NULL, NULL, NULL));
  cr_assert_null(t);
  t = (TRITONSERVER_InferenceTrace *)0x1;
  expect_unsupported(TRITONSERVER_InferenceTraceTensorNew(&t, TRITONSERVER_TRACE_LEVEL_TENSORS, 0, NULL, NULL,
                                                          NULL, NULL));
  cr_assert_null(t);
  expect_unsupported(TRITONSERVER_InferenceTraceNew(NULL, TRITONSERVER_TRACE_LEVEL_TIMESTAMPS, 0, NULL, NULL, NULL));
}

Test(trace, null_trace_calls_of_untraced_inference_succeed)
{
  cr_assert_null(TRITONSERVER_InferenceTraceDelete(NULL));
  cr_assert_null(TRITONSERVER_InferenceTraceReportActivity(NULL, 123, "my_activity"));
}

Test(trace, accessors_are_unsupported)
{
  uint64_t id;
  int64_t ver;
  const char *s;
  TRITONSERVER_InferenceTrace *child = (TRITONSERVER_InferenceTrace *)0x1;
  expect_unsupported(TRITONSERVER_InferenceTraceId(NULL, &id));
  expect_unsupported(TRITONSERVER_InferenceTraceParentId(NULL, &id));
  expect_unsupported(TRITONSERVER_InferenceTraceModelName(NULL, &s));
  expect_unsupported(TRITONSERVER_InferenceTraceModelVersion(NULL, &ver));
  expect_unsupported(TRITONSERVER_InferenceTraceRequestId(NULL, &s));
  expect_unsupported(TRITONSERVER_InferenceTraceSpawnChildTrace(NULL, &child));
  cr_assert_null(child);
  expect_unsupported(TRITONSERVER_InferenceTraceSetContext(NULL, "{}"));
  expect_unsupported(TRITONSERVER_InferenceTraceContext(NULL, &s));
}
