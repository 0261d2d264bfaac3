/*
 * ABI pins for the public headers: every enum constant and version macro
 * must keep the numeric value Triton uses, because backends built against
 * Triton's headers pass these numbers straight to us. A handful of
 * function signatures are also pinned at compile time (in unevaluated
 * _Generic selections, so nothing needs to link).
 */
#include <criterion/criterion.h>

#include <stddef.h>
#include <stdint.h>

#include "triton/core/tritonbackend.h"
#include "triton/core/tritonserver.h"

struct enum_pin {
  const char *name;
  long long actual;
  long long expected;
};

#define PIN(constant, value)                                                                                           \
  { #constant, (long long)(constant), (value) }

static const struct enum_pin server_pins[] = {
    /* TRITONSERVER_DataType */
    PIN(TRITONSERVER_TYPE_INVALID, 0),
    PIN(TRITONSERVER_TYPE_BOOL, 1),
    PIN(TRITONSERVER_TYPE_UINT8, 2),
    PIN(TRITONSERVER_TYPE_UINT16, 3),
    PIN(TRITONSERVER_TYPE_UINT32, 4),
    PIN(TRITONSERVER_TYPE_UINT64, 5),
    PIN(TRITONSERVER_TYPE_INT8, 6),
    PIN(TRITONSERVER_TYPE_INT16, 7),
    PIN(TRITONSERVER_TYPE_INT32, 8),
    PIN(TRITONSERVER_TYPE_INT64, 9),
    PIN(TRITONSERVER_TYPE_FP16, 10),
    PIN(TRITONSERVER_TYPE_FP32, 11),
    PIN(TRITONSERVER_TYPE_FP64, 12),
    PIN(TRITONSERVER_TYPE_BYTES, 13),
    PIN(TRITONSERVER_TYPE_BF16, 14),
    /* TRITONSERVER_MemoryType */
    PIN(TRITONSERVER_MEMORY_CPU, 0),
    PIN(TRITONSERVER_MEMORY_CPU_PINNED, 1),
    PIN(TRITONSERVER_MEMORY_GPU, 2),
    /* TRITONSERVER_ParameterType */
    PIN(TRITONSERVER_PARAMETER_STRING, 0),
    PIN(TRITONSERVER_PARAMETER_INT, 1),
    PIN(TRITONSERVER_PARAMETER_BOOL, 2),
    PIN(TRITONSERVER_PARAMETER_DOUBLE, 3),
    PIN(TRITONSERVER_PARAMETER_BYTES, 4),
    /* TRITONSERVER_InstanceGroupKind */
    PIN(TRITONSERVER_INSTANCEGROUPKIND_AUTO, 0),
    PIN(TRITONSERVER_INSTANCEGROUPKIND_CPU, 1),
    PIN(TRITONSERVER_INSTANCEGROUPKIND_GPU, 2),
    PIN(TRITONSERVER_INSTANCEGROUPKIND_MODEL, 3),
    /* TRITONSERVER_LogLevel */
    PIN(TRITONSERVER_LOG_INFO, 0),
    PIN(TRITONSERVER_LOG_WARN, 1),
    PIN(TRITONSERVER_LOG_ERROR, 2),
    PIN(TRITONSERVER_LOG_VERBOSE, 3),
    /* TRITONSERVER_LogFormat */
    PIN(TRITONSERVER_LOG_DEFAULT, 0),
    PIN(TRITONSERVER_LOG_ISO8601, 1),
    /* TRITONSERVER_Error_Code */
    PIN(TRITONSERVER_ERROR_UNKNOWN, 0),
    PIN(TRITONSERVER_ERROR_INTERNAL, 1),
    PIN(TRITONSERVER_ERROR_NOT_FOUND, 2),
    PIN(TRITONSERVER_ERROR_INVALID_ARG, 3),
    PIN(TRITONSERVER_ERROR_UNAVAILABLE, 4),
    PIN(TRITONSERVER_ERROR_UNSUPPORTED, 5),
    PIN(TRITONSERVER_ERROR_ALREADY_EXISTS, 6),
    PIN(TRITONSERVER_ERROR_CANCELLED, 7),
    /* TRITONSERVER_MetricFormat */
    PIN(TRITONSERVER_METRIC_PROMETHEUS, 0),
    /* TRITONSERVER_InferenceTraceLevel */
    PIN(TRITONSERVER_TRACE_LEVEL_DISABLED, 0),
    PIN(TRITONSERVER_TRACE_LEVEL_MIN, 1),
    PIN(TRITONSERVER_TRACE_LEVEL_MAX, 2),
    PIN(TRITONSERVER_TRACE_LEVEL_TIMESTAMPS, 4),
    PIN(TRITONSERVER_TRACE_LEVEL_TENSORS, 8),
    /* TRITONSERVER_InferenceTraceActivity */
    PIN(TRITONSERVER_TRACE_REQUEST_START, 0),
    PIN(TRITONSERVER_TRACE_QUEUE_START, 1),
    PIN(TRITONSERVER_TRACE_COMPUTE_START, 2),
    PIN(TRITONSERVER_TRACE_COMPUTE_INPUT_END, 3),
    PIN(TRITONSERVER_TRACE_COMPUTE_OUTPUT_START, 4),
    PIN(TRITONSERVER_TRACE_COMPUTE_END, 5),
    PIN(TRITONSERVER_TRACE_REQUEST_END, 6),
    PIN(TRITONSERVER_TRACE_TENSOR_QUEUE_INPUT, 7),
    PIN(TRITONSERVER_TRACE_TENSOR_BACKEND_INPUT, 8),
    PIN(TRITONSERVER_TRACE_TENSOR_BACKEND_OUTPUT, 9),
    PIN(TRITONSERVER_TRACE_CUSTOM_ACTIVITY, 10),
    /* TRITONSERVER_RequestFlag */
    PIN(TRITONSERVER_REQUEST_FLAG_SEQUENCE_START, 1),
    PIN(TRITONSERVER_REQUEST_FLAG_SEQUENCE_END, 2),
    /* TRITONSERVER_RequestReleaseFlag */
    PIN(TRITONSERVER_REQUEST_RELEASE_ALL, 1),
    PIN(TRITONSERVER_REQUEST_RELEASE_RESCHEDULE, 2),
    /* TRITONSERVER_ResponseCompleteFlag */
    PIN(TRITONSERVER_RESPONSE_COMPLETE_FINAL, 1),
    /* TRITONSERVER_ModelControlMode */
    PIN(TRITONSERVER_MODEL_CONTROL_NONE, 0),
    PIN(TRITONSERVER_MODEL_CONTROL_POLL, 1),
    PIN(TRITONSERVER_MODEL_CONTROL_EXPLICIT, 2),
    /* TRITONSERVER_RateLimitMode */
    PIN(TRITONSERVER_RATE_LIMIT_OFF, 0),
    PIN(TRITONSERVER_RATE_LIMIT_EXEC_COUNT, 1),
    /* TRITONSERVER_ModelBatchFlag */
    PIN(TRITONSERVER_BATCH_UNKNOWN, 1),
    PIN(TRITONSERVER_BATCH_FIRST_DIM, 2),
    /* TRITONSERVER_ModelIndexFlag */
    PIN(TRITONSERVER_INDEX_FLAG_READY, 1),
    /* TRITONSERVER_ModelTxnPropertyFlag */
    PIN(TRITONSERVER_TXN_ONE_TO_ONE, 1),
    PIN(TRITONSERVER_TXN_DECOUPLED, 2),
    /* TRITONSERVER_MetricKind */
    PIN(TRITONSERVER_METRIC_KIND_COUNTER, 0),
    PIN(TRITONSERVER_METRIC_KIND_GAUGE, 1),
    PIN(TRITONSERVER_METRIC_KIND_HISTOGRAM, 2),
};

static const struct enum_pin backend_pins[] = {
    /* TRITONBACKEND_ArtifactType */
    PIN(TRITONBACKEND_ARTIFACT_FILESYSTEM, 0),
    /* TRITONBACKEND_ExecutionPolicy */
    PIN(TRITONBACKEND_EXECUTION_BLOCKING, 0),
    PIN(TRITONBACKEND_EXECUTION_DEVICE_BLOCKING, 1),
};

static void check_pins(const struct enum_pin *pins, size_t count) {
  for (size_t i = 0; i < count; i++) {
    cr_expect_eq(pins[i].actual, pins[i].expected, "%s is %lld, Triton uses %lld", pins[i].name, pins[i].actual,
                 pins[i].expected);
  }
}

Test(enums, tritonserver_constants_match_triton) {
  check_pins(server_pins, sizeof(server_pins) / sizeof(server_pins[0]));
}

Test(enums, tritonbackend_constants_match_triton) {
  check_pins(backend_pins, sizeof(backend_pins) / sizeof(backend_pins[0]));
}

Test(enums, api_versions_match_triton) {
  cr_expect_eq(TRITONSERVER_API_VERSION_MAJOR, 1);
  cr_expect_eq(TRITONSERVER_API_VERSION_MINOR, 34);
  cr_expect_eq(TRITONBACKEND_API_VERSION_MAJOR, 1);
  cr_expect_eq(TRITONBACKEND_API_VERSION_MINOR, 19);
}

/* Enums cross the ABI by value, so they must stay int-sized. */
Test(enums, enum_types_are_int_sized) {
  cr_expect_eq(sizeof(TRITONSERVER_DataType), sizeof(int));
  cr_expect_eq(sizeof(TRITONSERVER_MemoryType), sizeof(int));
  cr_expect_eq(sizeof(TRITONSERVER_ParameterType), sizeof(int));
  cr_expect_eq(sizeof(TRITONSERVER_InstanceGroupKind), sizeof(int));
  cr_expect_eq(sizeof(TRITONSERVER_LogLevel), sizeof(int));
  cr_expect_eq(sizeof(TRITONSERVER_LogFormat), sizeof(int));
  cr_expect_eq(sizeof(TRITONSERVER_Error_Code), sizeof(int));
  cr_expect_eq(sizeof(TRITONSERVER_MetricFormat), sizeof(int));
  cr_expect_eq(sizeof(TRITONSERVER_InferenceTraceLevel), sizeof(int));
  cr_expect_eq(sizeof(TRITONSERVER_InferenceTraceActivity), sizeof(int));
  cr_expect_eq(sizeof(TRITONSERVER_RequestFlag), sizeof(int));
  cr_expect_eq(sizeof(TRITONSERVER_RequestReleaseFlag), sizeof(int));
  cr_expect_eq(sizeof(TRITONSERVER_ResponseCompleteFlag), sizeof(int));
  cr_expect_eq(sizeof(TRITONSERVER_ModelControlMode), sizeof(int));
  cr_expect_eq(sizeof(TRITONSERVER_RateLimitMode), sizeof(int));
  cr_expect_eq(sizeof(TRITONSERVER_ModelBatchFlag), sizeof(int));
  cr_expect_eq(sizeof(TRITONSERVER_ModelIndexFlag), sizeof(int));
  cr_expect_eq(sizeof(TRITONSERVER_ModelTxnPropertyFlag), sizeof(int));
  cr_expect_eq(sizeof(TRITONSERVER_MetricKind), sizeof(int));
  cr_expect_eq(sizeof(TRITONBACKEND_ArtifactType), sizeof(int));
  cr_expect_eq(sizeof(TRITONBACKEND_ExecutionPolicy), sizeof(int));
}

/*
 * Signature pins. _Generic does not evaluate its controlling expression,
 * so taking these addresses creates no link-time reference.
 */
#define HAS_TYPE(expr, type) _Generic((expr), type : 1, default : 0)

_Static_assert(HAS_TYPE(&TRITONSERVER_ErrorNew, TRITONSERVER_Error *(*)(TRITONSERVER_Error_Code, const char *)),
               "TRITONSERVER_ErrorNew signature");
_Static_assert(HAS_TYPE(&TRITONSERVER_ServerInferAsync,
                        TRITONSERVER_Error *(*)(TRITONSERVER_Server *, TRITONSERVER_InferenceRequest *,
                                                TRITONSERVER_InferenceTrace *)),
               "TRITONSERVER_ServerInferAsync signature");
_Static_assert(HAS_TYPE(&TRITONSERVER_InferenceResponseOutput,
                        TRITONSERVER_Error *(*)(TRITONSERVER_InferenceResponse *, uint32_t, const char **,
                                                TRITONSERVER_DataType *, const int64_t **, uint64_t *, const void **,
                                                size_t *, TRITONSERVER_MemoryType *, int64_t *, void **)),
               "TRITONSERVER_InferenceResponseOutput signature");
_Static_assert(HAS_TYPE(&TRITONBACKEND_ModelInstanceExecute,
                        TRITONSERVER_Error *(*)(TRITONBACKEND_ModelInstance *, TRITONBACKEND_Request **, uint32_t)),
               "TRITONBACKEND_ModelInstanceExecute signature");
_Static_assert(HAS_TYPE(&TRITONBACKEND_ResponseSend,
                        TRITONSERVER_Error *(*)(TRITONBACKEND_Response *, uint32_t, TRITONSERVER_Error *)),
               "TRITONBACKEND_ResponseSend signature");
_Static_assert(HAS_TYPE(&TRITONBACKEND_InputBuffer,
                        TRITONSERVER_Error *(*)(TRITONBACKEND_Input *, uint32_t, const void **, uint64_t *,
                                                TRITONSERVER_MemoryType *, int64_t *)),
               "TRITONBACKEND_InputBuffer signature");
_Static_assert(HAS_TYPE(&TRITONBACKEND_ModelBatchInitialize,
                        TRITONSERVER_Error *(*)(const TRITONBACKEND_Batcher *, void **)),
               "TRITONBACKEND_ModelBatchInitialize signature");
_Static_assert(HAS_TYPE(&TRITONBACKEND_ModelInstanceReportResponseStatistics,
                        TRITONSERVER_Error *(*)(const TRITONBACKEND_ModelInstanceResponseStatistics *)),
               "TRITONBACKEND_ModelInstanceReportResponseStatistics signature");
