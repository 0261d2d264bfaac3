/* Unit tests for trace.c: names, the trace object's accessors, ids and
 * children, reports reaching the callbacks by level, and the NULL-trace
 * calls of untraced inference. */
#include <criterion/criterion.h>
#include <string.h>

#include "trace.h"

static void expect_invalid(TRITONSERVER_Error *e) {
  cr_assert_not_null(e);
  cr_assert_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_INVALID_ARG);
  TRITONSERVER_ErrorDelete(e);
}

typedef struct seen {
  int n;
  TRITONSERVER_InferenceTraceActivity acts[16];
  uint64_t ns[16];
  int released;
} seen;

static void on_activity(TRITONSERVER_InferenceTrace *t, TRITONSERVER_InferenceTraceActivity a, uint64_t ns,
                        void *userp) {
  (void)t;
  seen *s = userp;
  if (s->n < 16) {
    s->acts[s->n] = a;
    s->ns[s->n] = ns;
  }
  s->n++;
}

static void on_release(TRITONSERVER_InferenceTrace *t, void *userp) {
  ((seen *)userp)->released++;
  TRITONSERVER_InferenceTraceDelete(t);
}

Test(trace, names) {
  cr_assert_str_eq(TRITONSERVER_InferenceTraceLevelString(TRITONSERVER_TRACE_LEVEL_DISABLED), "DISABLED");
  cr_assert_str_eq(TRITONSERVER_InferenceTraceLevelString(TRITONSERVER_TRACE_LEVEL_TIMESTAMPS), "TIMESTAMPS");
  cr_assert_str_eq(TRITONSERVER_InferenceTraceLevelString(TRITONSERVER_TRACE_LEVEL_TENSORS), "TENSORS");
  cr_assert_str_eq(TRITONSERVER_InferenceTraceLevelString((TRITONSERVER_InferenceTraceLevel)0xc), "<unknown>");
  cr_assert_str_eq(TRITONSERVER_InferenceTraceActivityString(TRITONSERVER_TRACE_REQUEST_START), "REQUEST_START");
  cr_assert_str_eq(TRITONSERVER_InferenceTraceActivityString(TRITONSERVER_TRACE_COMPUTE_END), "COMPUTE_END");
  cr_assert_str_eq(TRITONSERVER_InferenceTraceActivityString(TRITONSERVER_TRACE_TENSOR_BACKEND_OUTPUT),
                   "TENSOR_BACKEND_OUTPUT");
  cr_assert_str_eq(TRITONSERVER_InferenceTraceActivityString(TRITONSERVER_TRACE_CUSTOM_ACTIVITY), "CUSTOM_ACTIVITY");
  cr_assert_str_eq(TRITONSERVER_InferenceTraceActivityString((TRITONSERVER_InferenceTraceActivity)99), "<unknown>");
}

Test(trace, accessors_ids_and_children) {
  seen s = {0};
  TRITONSERVER_InferenceTrace *a = NULL, *b = NULL, *child = NULL;
  cr_assert_null(
      TRITONSERVER_InferenceTraceNew(&a, TRITONSERVER_TRACE_LEVEL_TIMESTAMPS, 0, on_activity, on_release, &s));
  cr_assert_null(
      TRITONSERVER_InferenceTraceNew(&b, TRITONSERVER_TRACE_LEVEL_TIMESTAMPS, 7, on_activity, on_release, &s));
  uint64_t ida = 0, idb = 0, parent = 99;
  cr_assert_null(TRITONSERVER_InferenceTraceId(a, &ida));
  cr_assert_null(TRITONSERVER_InferenceTraceId(b, &idb));
  cr_assert(ida >= 1 && idb > ida);
  cr_assert_null(TRITONSERVER_InferenceTraceParentId(a, &parent));
  cr_assert_eq(parent, 0);
  cr_assert_null(TRITONSERVER_InferenceTraceParentId(b, &parent));
  cr_assert_eq(parent, 7);
  /* Before the trace enters the core: no model, no request id. */
  const char *str = NULL;
  int64_t ver = -5;
  cr_assert_null(TRITONSERVER_InferenceTraceModelName(a, &str));
  cr_assert_str_eq(str, "");
  cr_assert_null(TRITONSERVER_InferenceTraceRequestId(a, &str));
  cr_assert_str_eq(str, "");
  cr_assert_null(nrd_trace_attach(a, "m", 3, "req-1"));
  cr_assert_null(TRITONSERVER_InferenceTraceModelName(a, &str));
  cr_assert_str_eq(str, "m");
  cr_assert_null(TRITONSERVER_InferenceTraceModelVersion(a, &ver));
  cr_assert_eq(ver, 3);
  cr_assert_null(TRITONSERVER_InferenceTraceRequestId(a, &str));
  cr_assert_str_eq(str, "req-1");
  cr_assert_null(TRITONSERVER_InferenceTraceContext(a, &str));
  cr_assert_null(str);
  cr_assert_null(TRITONSERVER_InferenceTraceSetContext(a, "{\"k\":1}"));
  cr_assert_null(TRITONSERVER_InferenceTraceContext(a, &str));
  cr_assert_str_eq(str, "{\"k\":1}");
  /* A child: its own id, the parent's as parent, the same callbacks. */
  cr_assert_null(TRITONSERVER_InferenceTraceSpawnChildTrace(a, &child));
  uint64_t idc = 0;
  cr_assert_null(TRITONSERVER_InferenceTraceId(child, &idc));
  cr_assert(idc > idb);
  cr_assert_null(TRITONSERVER_InferenceTraceParentId(child, &parent));
  cr_assert_eq(parent, ida);
  nrd_trace_report(child, TRITONSERVER_TRACE_QUEUE_START, 42);
  cr_assert_eq(s.n, 1);
  cr_assert_eq(s.acts[0], TRITONSERVER_TRACE_QUEUE_START);
  cr_assert_eq(s.ns[0], 42);
  nrd_trace_release(child);
  cr_assert_eq(s.released, 1);
  cr_assert_null(TRITONSERVER_InferenceTraceDelete(a));
  cr_assert_null(TRITONSERVER_InferenceTraceDelete(b));
}

Test(trace, reports_follow_the_level) {
  seen s = {0};
  TRITONSERVER_InferenceTrace *t = NULL;
  /* TENSORS alone: no timestamps. */
  cr_assert_null(TRITONSERVER_InferenceTraceNew(&t, TRITONSERVER_TRACE_LEVEL_TENSORS, 0, on_activity, on_release, &s));
  nrd_trace_report(t, TRITONSERVER_TRACE_REQUEST_START, 1);
  cr_assert_eq(s.n, 0);
  cr_assert_null(TRITONSERVER_InferenceTraceDelete(t));
  cr_assert_null(TRITONSERVER_InferenceTraceNew(&t, TRITONSERVER_TRACE_LEVEL_TIMESTAMPS, 0, on_activity, NULL, &s));
  nrd_trace_report(t, TRITONSERVER_TRACE_REQUEST_START, 1);
  cr_assert_null(TRITONSERVER_InferenceTraceReportActivity(t, 5, "my_step"));
  cr_assert_eq(s.n, 2);
  cr_assert_eq(s.acts[1], TRITONSERVER_TRACE_CUSTOM_ACTIVITY);
  cr_assert_eq(s.ns[1], 5);
  expect_invalid(TRITONSERVER_InferenceTraceReportActivity(t, 5, NULL));
  nrd_trace_release(t); /* no release callback: nothing happens */
  cr_assert_eq(s.released, 0);
  cr_assert_null(TRITONSERVER_InferenceTraceDelete(t));
}

Test(trace, bad_arguments) {
  uint64_t id;
  const char *str;
  expect_invalid(TRITONSERVER_InferenceTraceNew(NULL, TRITONSERVER_TRACE_LEVEL_TIMESTAMPS, 0, NULL, NULL, NULL));
  expect_invalid(TRITONSERVER_InferenceTraceId(NULL, &id));
  expect_invalid(TRITONSERVER_InferenceTraceModelName(NULL, &str));
  TRITONSERVER_InferenceTrace *child = (TRITONSERVER_InferenceTrace *)0x1;
  expect_invalid(TRITONSERVER_InferenceTraceSpawnChildTrace(NULL, &child));
}
