/*
 * The part of ONNX Runtime's C API this backend uses, declared by us from
 * the API's published facts (names, signatures, enum values and the order of
 * the function table), so the build needs no ONNX Runtime headers.
 *
 * ONNX Runtime hands out its functions as one table (OrtApi) reached through
 * OrtGetApiBase()->GetApi(version). The table only ever grows at the end, so
 * a prefix of it is valid for every later library; the members this backend
 * never calls are kept as placeholders of pointer size, which keeps every
 * used member at its index (the comment before each member). We ask for
 * API version NRD_ORT_API_VERSION (ONNX Runtime 1.13), which every later
 * library still serves.
 */
#ifndef NEREID_ORT_API_H
#define NEREID_ORT_API_H

#include <stddef.h>
#include <stdint.h>

#define NRD_ORT_API_VERSION 13

typedef struct OrtEnv OrtEnv;
typedef struct OrtStatus OrtStatus;
typedef struct OrtMemoryInfo OrtMemoryInfo;
typedef struct OrtSession OrtSession;
typedef struct OrtValue OrtValue;
typedef struct OrtRunOptions OrtRunOptions;
typedef struct OrtTypeInfo OrtTypeInfo;
typedef struct OrtTensorTypeAndShapeInfo OrtTensorTypeAndShapeInfo;
typedef struct OrtSessionOptions OrtSessionOptions;
typedef struct OrtAllocator OrtAllocator; /* only passed back to the API */
typedef struct OrtCUDAProviderOptionsV2 OrtCUDAProviderOptionsV2; /* opaque */
typedef struct OrtThreadingOptions OrtThreadingOptions;

typedef enum ONNXTensorElementDataType {
  ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED = 0,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT = 1,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8 = 2,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8 = 3,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16 = 4,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16 = 5,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32 = 6,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64 = 7,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_STRING = 8,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL = 9,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16 = 10,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE = 11,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32 = 12,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64 = 13,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_COMPLEX64 = 14,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_COMPLEX128 = 15,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16 = 16,
} ONNXTensorElementDataType;

enum ONNXType {
  ONNX_TYPE_UNKNOWN = 0,
  ONNX_TYPE_TENSOR = 1,
  ONNX_TYPE_SEQUENCE = 2,
  ONNX_TYPE_MAP = 3,
  ONNX_TYPE_OPAQUE = 4,
  ONNX_TYPE_SPARSETENSOR = 5,
  ONNX_TYPE_OPTIONAL = 6,
};

typedef enum OrtLoggingLevel {
  ORT_LOGGING_LEVEL_VERBOSE = 0,
  ORT_LOGGING_LEVEL_INFO = 1,
  ORT_LOGGING_LEVEL_WARNING = 2,
  ORT_LOGGING_LEVEL_ERROR = 3,
  ORT_LOGGING_LEVEL_FATAL = 4,
} OrtLoggingLevel;

typedef enum OrtErrorCode {
  ORT_OK = 0,
  ORT_FAIL = 1,
  ORT_INVALID_ARGUMENT = 2,
  ORT_NO_SUCHFILE = 3,
  ORT_NO_MODEL = 4,
  ORT_ENGINE_ERROR = 5,
  ORT_RUNTIME_EXCEPTION = 6,
  ORT_INVALID_PROTOBUF = 7,
  ORT_MODEL_LOADED = 8,
  ORT_NOT_IMPLEMENTED = 9,
  ORT_INVALID_GRAPH = 10,
  ORT_EP_FAIL = 11,
} OrtErrorCode;

typedef enum GraphOptimizationLevel {
  ORT_DISABLE_ALL = 0,
  ORT_ENABLE_BASIC = 1,
  ORT_ENABLE_EXTENDED = 2,
  ORT_ENABLE_ALL = 99,
} GraphOptimizationLevel;

typedef enum ExecutionMode {
  ORT_SEQUENTIAL = 0,
  ORT_PARALLEL = 1,
} ExecutionMode;

typedef enum OrtAllocatorType {
  OrtInvalidAllocator = -1,
  OrtDeviceAllocator = 0,
  OrtArenaAllocator = 1,
} OrtAllocatorType;

typedef enum OrtMemType {
  OrtMemTypeCPUInput = -2,
  OrtMemTypeCPUOutput = -1,
  OrtMemTypeDefault = 0,
} OrtMemType;

/* A table slot this backend never calls. */
typedef void (*ort_unused_fn)(void);

/* Functions returning OrtStatus* return NULL on success; a non-NULL status
 * is the caller's to release (ReleaseStatus). */
typedef struct OrtApi {
  /*   0 */ OrtStatus *(*CreateStatus)(OrtErrorCode code, const char *msg);
  /*   1 */ OrtErrorCode (*GetErrorCode)(const OrtStatus *status);
  /*   2 */ const char *(*GetErrorMessage)(const OrtStatus *status);
  /*   3 */ OrtStatus *(*CreateEnv)(OrtLoggingLevel log_severity_level, const char *logid, OrtEnv **out);
  /*   4 */ ort_unused_fn CreateEnvWithCustomLogger;
  /*   5 */ ort_unused_fn EnableTelemetryEvents;
  /*   6 */ ort_unused_fn DisableTelemetryEvents;
  /*   7 */ OrtStatus *(*CreateSession)(const OrtEnv *env, const char *model_path, const OrtSessionOptions *options,
                                        OrtSession **out);
  /*   8 */ ort_unused_fn CreateSessionFromArray;
  /*   9 */ OrtStatus *(*Run)(OrtSession *session, const OrtRunOptions *run_options, const char *const *input_names,
                              const OrtValue *const *inputs, size_t input_len, const char *const *output_names,
                              size_t output_names_len, OrtValue **outputs);
  /*  10 */ OrtStatus *(*CreateSessionOptions)(OrtSessionOptions **options);
  /*  11 */ ort_unused_fn SetOptimizedModelFilePath;
  /*  12 */ ort_unused_fn CloneSessionOptions;
  /*  13 */ OrtStatus *(*SetSessionExecutionMode)(OrtSessionOptions *options, ExecutionMode execution_mode);
  /*  14 */ ort_unused_fn EnableProfiling;
  /*  15 */ ort_unused_fn DisableProfiling;
  /*  16 */ OrtStatus *(*EnableMemPattern)(OrtSessionOptions *options);
  /*  17 */ OrtStatus *(*DisableMemPattern)(OrtSessionOptions *options);
  /*  18 */ OrtStatus *(*EnableCpuMemArena)(OrtSessionOptions *options);
  /*  19 */ OrtStatus *(*DisableCpuMemArena)(OrtSessionOptions *options);
  /*  20 */ ort_unused_fn SetSessionLogId;
  /*  21 */ ort_unused_fn SetSessionLogVerbosityLevel;
  /*  22 */ ort_unused_fn SetSessionLogSeverityLevel;
  /*  23 */ OrtStatus *(*SetSessionGraphOptimizationLevel)(OrtSessionOptions *options,
                                                           GraphOptimizationLevel graph_optimization_level);
  /*  24 */ OrtStatus *(*SetIntraOpNumThreads)(OrtSessionOptions *options, int intra_op_num_threads);
  /*  25 */ OrtStatus *(*SetInterOpNumThreads)(OrtSessionOptions *options, int inter_op_num_threads);
  /*  26 */ ort_unused_fn CreateCustomOpDomain;
  /*  27 */ ort_unused_fn CustomOpDomain_Add;
  /*  28 */ ort_unused_fn AddCustomOpDomain;
  /*  29 */ ort_unused_fn RegisterCustomOpsLibrary;
  /*  30 */ OrtStatus *(*SessionGetInputCount)(const OrtSession *session, size_t *out);
  /*  31 */ OrtStatus *(*SessionGetOutputCount)(const OrtSession *session, size_t *out);
  /*  32 */ ort_unused_fn SessionGetOverridableInitializerCount;
  /*  33 */ OrtStatus *(*SessionGetInputTypeInfo)(const OrtSession *session, size_t index, OrtTypeInfo **type_info);
  /*  34 */ OrtStatus *(*SessionGetOutputTypeInfo)(const OrtSession *session, size_t index, OrtTypeInfo **type_info);
  /*  35 */ ort_unused_fn SessionGetOverridableInitializerTypeInfo;
  /*  36 */ OrtStatus *(*SessionGetInputName)(const OrtSession *session, size_t index, OrtAllocator *allocator,
                                              char **value);
  /*  37 */ OrtStatus *(*SessionGetOutputName)(const OrtSession *session, size_t index, OrtAllocator *allocator,
                                               char **value);
  /*  38 */ ort_unused_fn SessionGetOverridableInitializerName;
  /*  39 */ OrtStatus *(*CreateRunOptions)(OrtRunOptions **out);
  /*  40 */ ort_unused_fn RunOptionsSetRunLogVerbosityLevel;
  /*  41 */ ort_unused_fn RunOptionsSetRunLogSeverityLevel;
  /*  42 */ ort_unused_fn RunOptionsSetRunTag;
  /*  43 */ ort_unused_fn RunOptionsGetRunLogVerbosityLevel;
  /*  44 */ ort_unused_fn RunOptionsGetRunLogSeverityLevel;
  /*  45 */ ort_unused_fn RunOptionsGetRunTag;
  /*  46 */ ort_unused_fn RunOptionsSetTerminate;
  /*  47 */ ort_unused_fn RunOptionsUnsetTerminate;
  /*  48 */ OrtStatus *(*CreateTensorAsOrtValue)(OrtAllocator *allocator, const int64_t *shape, size_t shape_len,
                                                 ONNXTensorElementDataType type, OrtValue **out);
  /*  49 */ OrtStatus *(*CreateTensorWithDataAsOrtValue)(const OrtMemoryInfo *info, void *p_data, size_t p_data_len,
                                                         const int64_t *shape, size_t shape_len,
                                                         ONNXTensorElementDataType type, OrtValue **out);
  /*  50 */ ort_unused_fn IsTensor;
  /*  51 */ OrtStatus *(*GetTensorMutableData)(OrtValue *value, void **out);
  /*  52 */ OrtStatus *(*FillStringTensor)(OrtValue *value, const char *const *s, size_t s_len);
  /*  53 */ OrtStatus *(*GetStringTensorDataLength)(const OrtValue *value, size_t *len);
  /*  54 */ OrtStatus *(*GetStringTensorContent)(const OrtValue *value, void *s, size_t s_len, size_t *offsets,
                                                 size_t offsets_len);
  /*  55 */ OrtStatus *(*CastTypeInfoToTensorInfo)(const OrtTypeInfo *type_info, const OrtTensorTypeAndShapeInfo **out);
  /*  56 */ OrtStatus *(*GetOnnxTypeFromTypeInfo)(const OrtTypeInfo *type_info, enum ONNXType *out);
  /*  57 */ ort_unused_fn CreateTensorTypeAndShapeInfo;
  /*  58 */ ort_unused_fn SetTensorElementType;
  /*  59 */ ort_unused_fn SetDimensions;
  /*  60 */ OrtStatus *(*GetTensorElementType)(const OrtTensorTypeAndShapeInfo *info, ONNXTensorElementDataType *out);
  /*  61 */ OrtStatus *(*GetDimensionsCount)(const OrtTensorTypeAndShapeInfo *info, size_t *out);
  /*  62 */ OrtStatus *(*GetDimensions)(const OrtTensorTypeAndShapeInfo *info, int64_t *dim_values,
                                        size_t dim_values_length);
  /*  63 */ ort_unused_fn GetSymbolicDimensions;
  /*  64 */ OrtStatus *(*GetTensorShapeElementCount)(const OrtTensorTypeAndShapeInfo *info, size_t *out);
  /*  65 */ OrtStatus *(*GetTensorTypeAndShape)(const OrtValue *value, OrtTensorTypeAndShapeInfo **out);
  /*  66 */ ort_unused_fn GetTypeInfo;
  /*  67 */ ort_unused_fn GetValueType;
  /*  68 */ ort_unused_fn CreateMemoryInfo;
  /*  69 */ OrtStatus *(*CreateCpuMemoryInfo)(OrtAllocatorType type, OrtMemType mem_type, OrtMemoryInfo **out);
  /*  70 */ ort_unused_fn CompareMemoryInfo;
  /*  71 */ ort_unused_fn MemoryInfoGetName;
  /*  72 */ ort_unused_fn MemoryInfoGetId;
  /*  73 */ ort_unused_fn MemoryInfoGetMemType;
  /*  74 */ ort_unused_fn MemoryInfoGetType;
  /*  75 */ ort_unused_fn AllocatorAlloc;
  /*  76 */ OrtStatus *(*AllocatorFree)(OrtAllocator *ort_allocator, void *p);
  /*  77 */ ort_unused_fn AllocatorGetInfo;
  /*  78 */ OrtStatus *(*GetAllocatorWithDefaultOptions)(OrtAllocator **out);
  /*  79 */ ort_unused_fn AddFreeDimensionOverride;
  /*  80 */ ort_unused_fn GetValue;
  /*  81 */ ort_unused_fn GetValueCount;
  /*  82 */ ort_unused_fn CreateValue;
  /*  83 */ ort_unused_fn CreateOpaqueValue;
  /*  84 */ ort_unused_fn GetOpaqueValue;
  /*  85 */ ort_unused_fn KernelInfoGetAttribute_float;
  /*  86 */ ort_unused_fn KernelInfoGetAttribute_int64;
  /*  87 */ ort_unused_fn KernelInfoGetAttribute_string;
  /*  88 */ ort_unused_fn KernelContext_GetInputCount;
  /*  89 */ ort_unused_fn KernelContext_GetOutputCount;
  /*  90 */ ort_unused_fn KernelContext_GetInput;
  /*  91 */ ort_unused_fn KernelContext_GetOutput;
  /*  92 */ void (*ReleaseEnv)(OrtEnv *input);
  /*  93 */ void (*ReleaseStatus)(OrtStatus *input);
  /*  94 */ void (*ReleaseMemoryInfo)(OrtMemoryInfo *input);
  /*  95 */ void (*ReleaseSession)(OrtSession *input);
  /*  96 */ void (*ReleaseValue)(OrtValue *input);
  /*  97 */ void (*ReleaseRunOptions)(OrtRunOptions *input);
  /*  98 */ void (*ReleaseTypeInfo)(OrtTypeInfo *input);
  /*  99 */ void (*ReleaseTensorTypeAndShapeInfo)(OrtTensorTypeAndShapeInfo *input);
  /* 100 */ void (*ReleaseSessionOptions)(OrtSessionOptions *input);
  /* 101 .. 118: not called (map and sequence types, model metadata). */
  ort_unused_fn unused_101_118[18];
  /* 119 */ OrtStatus *(*CreateEnvWithGlobalThreadPools)(OrtLoggingLevel log_severity_level, const char *logid,
                                                         const OrtThreadingOptions *tp_options, OrtEnv **out);
  /* 120 */ OrtStatus *(*DisablePerSessionThreads)(OrtSessionOptions *options);
  /* 121 */ OrtStatus *(*CreateThreadingOptions)(OrtThreadingOptions **out);
  /* 122 */ void (*ReleaseThreadingOptions)(OrtThreadingOptions *input);
  /* 123 .. 129: not called. */
  ort_unused_fn unused_123_129[7];
  /* 130 */ OrtStatus *(*AddSessionConfigEntry)(OrtSessionOptions *options, const char *config_key,
                                                const char *config_value);
  /* 131 .. 146: not called (the IO binding functions among them). */
  ort_unused_fn unused_131_146[16];
  /* 147 */ OrtStatus *(*SetGlobalIntraOpNumThreads)(OrtThreadingOptions *tp_options, int intra_op_num_threads);
  /* 148 */ OrtStatus *(*SetGlobalInterOpNumThreads)(OrtThreadingOptions *tp_options, int inter_op_num_threads);
  /* 149 .. 164: not called. */
  ort_unused_fn unused_149_164[16];
  /* 165 */ OrtStatus *(*AddRunConfigEntry)(OrtRunOptions *options, const char *config_key, const char *config_value);
  /* 166 .. 203: not called (the TensorRT and sparse tensor functions among them). */
  ort_unused_fn unused_166_203[38];
  /* The CUDA execution provider (ONNX Runtime 1.11, API 11). A library
   * built without it answers each with "CUDA execution provider is not
   * enabled in this build." */
  /* 204 */ OrtStatus *(*SessionOptionsAppendExecutionProvider_CUDA_V2)(OrtSessionOptions *options,
                                                                        const OrtCUDAProviderOptionsV2 *cuda);
  /* 205 */ OrtStatus *(*CreateCUDAProviderOptions)(OrtCUDAProviderOptionsV2 **out);
  /* 206 */ OrtStatus *(*UpdateCUDAProviderOptions)(OrtCUDAProviderOptionsV2 *cuda, const char *const *keys,
                                                    const char *const *values, size_t count);
  /* 207 */ OrtStatus *(*GetCUDAProviderOptionsAsString)(const OrtCUDAProviderOptionsV2 *cuda, OrtAllocator *allocator,
                                                         char **out);
  /* 208 */ void (*ReleaseCUDAProviderOptions)(OrtCUDAProviderOptionsV2 *input);
  /* Later members are not declared: the library's table is longer. */
} OrtApi;

/* Each slot at its index (checked against 1.24.3: each CUDA slot answers
 * "CUDA execution provider is not enabled in this build" in the CPU
 * library). */
_Static_assert(offsetof(OrtApi, ReleaseSessionOptions) == 100 * sizeof(void *), "OrtApi layout");
_Static_assert(offsetof(OrtApi, CreateEnvWithGlobalThreadPools) == 119 * sizeof(void *), "OrtApi layout");
_Static_assert(offsetof(OrtApi, AddSessionConfigEntry) == 130 * sizeof(void *), "OrtApi layout");
_Static_assert(offsetof(OrtApi, SetGlobalIntraOpNumThreads) == 147 * sizeof(void *), "OrtApi layout");
_Static_assert(offsetof(OrtApi, AddRunConfigEntry) == 165 * sizeof(void *), "OrtApi layout");
_Static_assert(offsetof(OrtApi, SessionOptionsAppendExecutionProvider_CUDA_V2) == 204 * sizeof(void *),
               "OrtApi layout");
_Static_assert(offsetof(OrtApi, ReleaseCUDAProviderOptions) == 208 * sizeof(void *), "OrtApi layout");

typedef struct OrtApiBase {
  const OrtApi *(*GetApi)(uint32_t version); /* NULL: version not served */
  const char *(*GetVersionString)(void);
} OrtApiBase;

/* The library's one exported entry point, looked up with dlsym:
 * const OrtApiBase *OrtGetApiBase(void); */

#endif /* NEREID_ORT_API_H */
