/*
 * Nereid: in-process server API (TRITONSERVER_*), source-compatible with
 * Triton's tritonserver.h at API version 1.34.
 *
 * Names, types, enum values and signatures match Triton's so that programs
 * and backends written against Triton compile and link unchanged. The text
 * of this header is Nereid's own.
 *
 * Conventions that hold for every function below unless its comment says
 * otherwise:
 *
 *  - Errors. A function returning TRITONSERVER_Error* returns NULL on
 *    success. A non-NULL result is a new error object owned by the caller,
 *    who releases it with TRITONSERVER_ErrorDelete.
 *  - Failure leaves things as they were. When a call fails, output
 *    arguments are not written, no object is created, and ownership of
 *    every argument stays where it was before the call.
 *  - Borrowed results. Strings, arrays and sub-objects returned through
 *    `const` out-parameters are owned by the object they came from and stay
 *    valid until that object is deleted (or modified, for mutable objects).
 *    The caller never frees them.
 *  - Threads. "Thread: any" means the function may be called from any
 *    thread at any time. "Thread: any, one caller per <object>" means calls
 *    that touch the same object must not overlap; different objects may be
 *    used from different threads concurrently. Callbacks registered with
 *    the server may be invoked on server-owned threads and must be
 *    thread-safe.
 */
#ifndef TRITON_CORE_TRITONSERVER_H
#define TRITON_CORE_TRITONSERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Export/import decoration for functions implemented by the server library.
 * On GCC/Clang it forces default visibility so the symbols are exported even
 * though the library is compiled with -fvisibility=hidden; declaring an
 * imported function with default visibility is harmless for callers.
 */
#ifndef TRITONSERVER_DECLSPEC
#if defined(_MSC_VER)
#ifdef _COMPILING_TRITONSERVER
#define TRITONSERVER_DECLSPEC __declspec(dllexport)
#else
#define TRITONSERVER_DECLSPEC __declspec(dllimport)
#endif
#elif defined(__GNUC__)
#define TRITONSERVER_DECLSPEC __attribute__((__visibility__("default")))
#else
#define TRITONSERVER_DECLSPEC
#endif
#endif

/* Opaque handles (never defined publicly). The typedefs declare the struct
 * tags and make the bare names, e.g. `TRITONSERVER_Error*`, valid in C. */
typedef struct TRITONSERVER_BufferAttributes TRITONSERVER_BufferAttributes;
typedef struct TRITONSERVER_Error TRITONSERVER_Error;
typedef struct TRITONSERVER_InferenceRequest TRITONSERVER_InferenceRequest;
typedef struct TRITONSERVER_InferenceResponse TRITONSERVER_InferenceResponse;
typedef struct TRITONSERVER_InferenceTrace TRITONSERVER_InferenceTrace;
typedef struct TRITONSERVER_Message TRITONSERVER_Message;
typedef struct TRITONSERVER_Metrics TRITONSERVER_Metrics;
typedef struct TRITONSERVER_Parameter TRITONSERVER_Parameter;
typedef struct TRITONSERVER_ResponseAllocator TRITONSERVER_ResponseAllocator;
typedef struct TRITONSERVER_Server TRITONSERVER_Server;
typedef struct TRITONSERVER_ServerOptions TRITONSERVER_ServerOptions;
typedef struct TRITONSERVER_Metric TRITONSERVER_Metric;
typedef struct TRITONSERVER_MetricFamily TRITONSERVER_MetricFamily;
typedef struct TRITONSERVER_MetricArgs TRITONSERVER_MetricArgs;

/* ------------------------------------------------------------------------
 * API version
 *
 * A client built against MAJOR.MINOR works with a library reporting the
 * same MAJOR and a MINOR at least as large.
 * ------------------------------------------------------------------------ */

#define TRITONSERVER_API_VERSION_MAJOR 1
#define TRITONSERVER_API_VERSION_MINOR 34

/* Writes the API version implemented by the loaded library into *major and
 * *minor. Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *TRITONSERVER_ApiVersion(uint32_t *major, uint32_t *minor);

/* ------------------------------------------------------------------------
 * Data types
 * ------------------------------------------------------------------------ */

/* Element types of tensors. */
typedef enum TRITONSERVER_datatype_enum {
  TRITONSERVER_TYPE_INVALID,
  TRITONSERVER_TYPE_BOOL,
  TRITONSERVER_TYPE_UINT8,
  TRITONSERVER_TYPE_UINT16,
  TRITONSERVER_TYPE_UINT32,
  TRITONSERVER_TYPE_UINT64,
  TRITONSERVER_TYPE_INT8,
  TRITONSERVER_TYPE_INT16,
  TRITONSERVER_TYPE_INT32,
  TRITONSERVER_TYPE_INT64,
  TRITONSERVER_TYPE_FP16,
  TRITONSERVER_TYPE_FP32,
  TRITONSERVER_TYPE_FP64,
  TRITONSERVER_TYPE_BYTES,
  TRITONSERVER_TYPE_BF16
} TRITONSERVER_DataType;

/* Name of a data type as used in model configs ("INT32", "BYTES", ...).
 * The result is a static string, never freed; unknown values give
 * "<invalid>". Thread: any. */
TRITONSERVER_DECLSPEC const char *TRITONSERVER_DataTypeString(TRITONSERVER_DataType datatype);

/* Parses a data type name; TRITONSERVER_TYPE_INVALID when `dtype` is not a
 * known name or is NULL. Thread: any. */
TRITONSERVER_DECLSPEC TRITONSERVER_DataType TRITONSERVER_StringToDataType(const char *dtype);

/* Size in bytes of one element; 0 for BYTES (variable length) and for
 * INVALID. Thread: any. */
TRITONSERVER_DECLSPEC uint32_t TRITONSERVER_DataTypeByteSize(TRITONSERVER_DataType datatype);

/* Where a buffer lives. */
typedef enum TRITONSERVER_memorytype_enum {
  TRITONSERVER_MEMORY_CPU,
  TRITONSERVER_MEMORY_CPU_PINNED,
  TRITONSERVER_MEMORY_GPU
} TRITONSERVER_MemoryType;

/* Name of a memory type; static string, never freed. Thread: any. */
TRITONSERVER_DECLSPEC const char *TRITONSERVER_MemoryTypeString(TRITONSERVER_MemoryType memtype);

/* ------------------------------------------------------------------------
 * Parameters (named, typed values attached to requests, responses, loads)
 * ------------------------------------------------------------------------ */

typedef enum TRITONSERVER_parametertype_enum {
  TRITONSERVER_PARAMETER_STRING,
  TRITONSERVER_PARAMETER_INT,
  TRITONSERVER_PARAMETER_BOOL,
  TRITONSERVER_PARAMETER_DOUBLE,
  TRITONSERVER_PARAMETER_BYTES
} TRITONSERVER_ParameterType;

/* Name of a parameter type; static string, never freed. Thread: any. */
TRITONSERVER_DECLSPEC const char *TRITONSERVER_ParameterTypeString(TRITONSERVER_ParameterType paramtype);

/* Creates a parameter holding a copy of `name` and of the value `value`
 * points to (a NUL-terminated string, int64_t, bool or double according to
 * `type`). Returns NULL for TRITONSERVER_PARAMETER_BYTES (use
 * TRITONSERVER_ParameterBytesNew) or on bad input / allocation failure.
 * The caller owns the result and frees it with TRITONSERVER_ParameterDelete.
 * Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Parameter *
TRITONSERVER_ParameterNew(const char *name, const TRITONSERVER_ParameterType type, const void *value);

/* Creates a BYTES parameter. `name` is copied but the bytes are NOT: the
 * caller keeps `byte_ptr` valid until the parameter is deleted. Returns
 * NULL on failure; the caller owns the result. Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Parameter *
TRITONSERVER_ParameterBytesNew(const char *name, const void *byte_ptr, const uint64_t size);

/* Frees a parameter made by ParameterNew/ParameterBytesNew; NULL is a
 * no-op. Thread: any, one caller per parameter. */
TRITONSERVER_DECLSPEC void TRITONSERVER_ParameterDelete(struct TRITONSERVER_Parameter *parameter);

/* ------------------------------------------------------------------------
 * Instance group kinds
 * ------------------------------------------------------------------------ */

typedef enum TRITONSERVER_instancegroupkind_enum {
  TRITONSERVER_INSTANCEGROUPKIND_AUTO,
  TRITONSERVER_INSTANCEGROUPKIND_CPU,
  TRITONSERVER_INSTANCEGROUPKIND_GPU,
  TRITONSERVER_INSTANCEGROUPKIND_MODEL
} TRITONSERVER_InstanceGroupKind;

/* Name of an instance-group kind ("KIND_CPU", ...); static string, never
 * freed. Thread: any. */
TRITONSERVER_DECLSPEC const char *TRITONSERVER_InstanceGroupKindString(TRITONSERVER_InstanceGroupKind kind);

/* ------------------------------------------------------------------------
 * Logging
 * ------------------------------------------------------------------------ */

typedef enum TRITONSERVER_loglevel_enum {
  TRITONSERVER_LOG_INFO,
  TRITONSERVER_LOG_WARN,
  TRITONSERVER_LOG_ERROR,
  TRITONSERVER_LOG_VERBOSE
} TRITONSERVER_LogLevel;

/* Layout of the prefix of each log line: DEFAULT is the glog-like
 * "Lmmdd hh:mm:ss.uuuuuu pid file:line]" form, ISO8601 starts with a
 * "YYYY-MM-DDThh:mm:ssZ L" timestamp. */
typedef enum TRITONSERVER_logformat_enum { TRITONSERVER_LOG_DEFAULT, TRITONSERVER_LOG_ISO8601 } TRITONSERVER_LogFormat;

/* True when messages at `level` are currently written. Lets callers skip
 * building expensive messages. Thread: any. */
TRITONSERVER_DECLSPEC bool TRITONSERVER_LogIsEnabled(TRITONSERVER_LogLevel level);

/* Writes `msg` at `level`, tagged with `filename`:`line`, if that level is
 * enabled. Nothing is retained after the call. Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_LogMessage(TRITONSERVER_LogLevel level, const char *filename, const int line, const char *msg);

/* ------------------------------------------------------------------------
 * Errors
 *
 * NULL means success; a non-NULL error carries a code and a message and is
 * owned by whoever received it.
 * ------------------------------------------------------------------------ */

typedef enum TRITONSERVER_errorcode_enum {
  TRITONSERVER_ERROR_UNKNOWN,
  TRITONSERVER_ERROR_INTERNAL,
  TRITONSERVER_ERROR_NOT_FOUND,
  TRITONSERVER_ERROR_INVALID_ARG,
  TRITONSERVER_ERROR_UNAVAILABLE,
  TRITONSERVER_ERROR_UNSUPPORTED,
  TRITONSERVER_ERROR_ALREADY_EXISTS,
  TRITONSERVER_ERROR_CANCELLED
} TRITONSERVER_Error_Code;

/* Creates an error with a copy of `msg` (NULL is treated as ""). The caller
 * owns the result and frees it with TRITONSERVER_ErrorDelete. Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *TRITONSERVER_ErrorNew(TRITONSERVER_Error_Code code, const char *msg);

/* Frees an error; NULL is a no-op. Thread: any, one caller per error. */
TRITONSERVER_DECLSPEC void TRITONSERVER_ErrorDelete(struct TRITONSERVER_Error *error);

/* Code of `error`. Thread: any. */
TRITONSERVER_DECLSPEC TRITONSERVER_Error_Code TRITONSERVER_ErrorCode(struct TRITONSERVER_Error *error);

/* Human-readable name of the error's code. Borrowed from
 * `error`; do not use after deleting it. Thread: any. */
TRITONSERVER_DECLSPEC const char *TRITONSERVER_ErrorCodeString(struct TRITONSERVER_Error *error);

/* Message of `error`. Borrowed from `error`; valid until it is deleted.
 * Thread: any. */
TRITONSERVER_DECLSPEC const char *TRITONSERVER_ErrorMessage(struct TRITONSERVER_Error *error);

/* ------------------------------------------------------------------------
 * Response allocator: how the server obtains memory for output tensors
 *
 * Per response the server calls start_fn (if set) once, then query_fn (if
 * set) and alloc_fn (then buffer_attributes_fn, if set) once per output.
 * release_fn runs for each buffer when the response is deleted. All
 * callbacks may run on any server or backend thread, concurrently for
 * different requests, and must be thread-safe. A callback that returns an
 * error owns nothing afterwards: the server deletes the error.
 * ------------------------------------------------------------------------ */

/* Allocates `byte_size` bytes for output `tensor_name`, preferring
 * `memory_type`/`memory_type_id`. Must set *buffer, *buffer_userp (opaque,
 * handed back to release_fn) and the actual memory type/id. `userp` is the
 * allocator user pointer given with the request. On error the other outputs
 * are ignored. */
typedef struct TRITONSERVER_Error *(*TRITONSERVER_ResponseAllocatorAllocFn_t)(
    struct TRITONSERVER_ResponseAllocator *allocator, const char *tensor_name, size_t byte_size,
    TRITONSERVER_MemoryType memory_type, int64_t memory_type_id, void *userp, void **buffer, void **buffer_userp,
    TRITONSERVER_MemoryType *actual_memory_type, int64_t *actual_memory_type_id);

/* Called right after alloc_fn so the allocator can fill in
 * `buffer_attributes` (borrowed, owned by the server) for the buffer it
 * just returned. */
typedef struct TRITONSERVER_Error *(*TRITONSERVER_ResponseAllocatorBufferAttributesFn_t)(
    struct TRITONSERVER_ResponseAllocator *allocator, const char *tensor_name,
    struct TRITONSERVER_BufferAttributes *buffer_attributes, void *userp, void *buffer_userp);

/* Asks which memory type/id the allocator would pick. `tensor_name` and
 * `byte_size` may be NULL when not yet known; memory_type and
 * memory_type_id carry the caller's preference in and the answer out. The
 * answer is advisory. */
typedef struct TRITONSERVER_Error *(*TRITONSERVER_ResponseAllocatorQueryFn_t)(
    struct TRITONSERVER_ResponseAllocator *allocator, void *userp, const char *tensor_name, size_t *byte_size,
    TRITONSERVER_MemoryType *memory_type, int64_t *memory_type_id);

/* Returns a buffer obtained from alloc_fn; the server no longer references
 * it. The server never calls release twice for one buffer, even if this
 * returns an error. */
typedef struct TRITONSERVER_Error *(*TRITONSERVER_ResponseAllocatorReleaseFn_t)(
    struct TRITONSERVER_ResponseAllocator *allocator, void *buffer, void *buffer_userp, size_t byte_size,
    TRITONSERVER_MemoryType memory_type, int64_t memory_type_id);

/* Marks the start of a new response: the following alloc_fn calls belong to
 * it. Mainly useful for decoupled models with many responses per request. */
typedef struct TRITONSERVER_Error *(*TRITONSERVER_ResponseAllocatorStartFn_t)(
    struct TRITONSERVER_ResponseAllocator *allocator, void *userp);

/* Creates an allocator from the callbacks (start_fn may be NULL). The
 * caller owns *allocator and deletes it once no request in flight uses it.
 * Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *TRITONSERVER_ResponseAllocatorNew(
    struct TRITONSERVER_ResponseAllocator **allocator, TRITONSERVER_ResponseAllocatorAllocFn_t alloc_fn,
    TRITONSERVER_ResponseAllocatorReleaseFn_t release_fn, TRITONSERVER_ResponseAllocatorStartFn_t start_fn);

/* Installs (or with NULL removes) the buffer-attributes callback. Set it
 * before the allocator is used. Thread: any, one caller per allocator. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *TRITONSERVER_ResponseAllocatorSetBufferAttributesFunction(
    struct TRITONSERVER_ResponseAllocator *allocator,
    TRITONSERVER_ResponseAllocatorBufferAttributesFn_t buffer_attributes_fn);

/* Installs (or with NULL removes) the query callback. Set it before the
 * allocator is used. Thread: any, one caller per allocator. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ResponseAllocatorSetQueryFunction(struct TRITONSERVER_ResponseAllocator *allocator,
                                               TRITONSERVER_ResponseAllocatorQueryFn_t query_fn);

/* Frees an allocator. The caller guarantees no request still uses it.
 * Thread: any, one caller per allocator. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ResponseAllocatorDelete(struct TRITONSERVER_ResponseAllocator *allocator);

/* ------------------------------------------------------------------------
 * Messages (serialized JSON documents: metadata, config, statistics)
 * ------------------------------------------------------------------------ */

/* Creates a message holding a copy of the `byte_size` bytes of JSON at
 * `base` (need not be NUL-terminated). The text is not validated. The
 * caller owns *message. Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_MessageNewFromSerializedJson(struct TRITONSERVER_Message **message, const char *base, size_t byte_size);

/* Frees a message. Thread: any, one caller per message. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *TRITONSERVER_MessageDelete(struct TRITONSERVER_Message *message);

/* Gives the JSON text of a message. *base is borrowed (valid until the
 * message is deleted) and NUL-terminated; *byte_size excludes the NUL.
 * Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_MessageSerializeToJson(struct TRITONSERVER_Message *message, const char **base, size_t *byte_size);

/* ------------------------------------------------------------------------
 * Metrics snapshot
 * ------------------------------------------------------------------------ */

typedef enum tritonserver_metricformat_enum { TRITONSERVER_METRIC_PROMETHEUS } TRITONSERVER_MetricFormat;

/* Frees a snapshot from TRITONSERVER_ServerMetrics. Thread: any, one caller
 * per snapshot. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *TRITONSERVER_MetricsDelete(struct TRITONSERVER_Metrics *metrics);

/* Renders the snapshot; for PROMETHEUS *base is the text exposition format
 * (borrowed, valid until the snapshot is deleted) and *byte_size its length.
 * Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *TRITONSERVER_MetricsFormatted(struct TRITONSERVER_Metrics *metrics,
                                                                               TRITONSERVER_MetricFormat format,
                                                                               const char **base, size_t *byte_size);

/* ------------------------------------------------------------------------
 * Inference tracing
 * ------------------------------------------------------------------------ */

/* Bit flags selecting what a trace records; combine with '|'. MIN and MAX
 * are old names kept for compatibility. */
typedef enum tritonserver_tracelevel_enum {
  TRITONSERVER_TRACE_LEVEL_DISABLED = 0,
  TRITONSERVER_TRACE_LEVEL_MIN = 1,
  TRITONSERVER_TRACE_LEVEL_MAX = 2,
  TRITONSERVER_TRACE_LEVEL_TIMESTAMPS = 0x4,
  TRITONSERVER_TRACE_LEVEL_TENSORS = 0x8
} TRITONSERVER_InferenceTraceLevel;

/* Name of a trace level; static string, never freed. Thread: any. */
TRITONSERVER_DECLSPEC const char *TRITONSERVER_InferenceTraceLevelString(TRITONSERVER_InferenceTraceLevel level);

/* Points in a request's life that a trace reports. */
typedef enum tritonserver_traceactivity_enum {
  TRITONSERVER_TRACE_REQUEST_START = 0,
  TRITONSERVER_TRACE_QUEUE_START = 1,
  TRITONSERVER_TRACE_COMPUTE_START = 2,
  TRITONSERVER_TRACE_COMPUTE_INPUT_END = 3,
  TRITONSERVER_TRACE_COMPUTE_OUTPUT_START = 4,
  TRITONSERVER_TRACE_COMPUTE_END = 5,
  TRITONSERVER_TRACE_REQUEST_END = 6,
  TRITONSERVER_TRACE_TENSOR_QUEUE_INPUT = 7,
  TRITONSERVER_TRACE_TENSOR_BACKEND_INPUT = 8,
  TRITONSERVER_TRACE_TENSOR_BACKEND_OUTPUT = 9,
  TRITONSERVER_TRACE_CUSTOM_ACTIVITY = 10
} TRITONSERVER_InferenceTraceActivity;

/* Name of a trace activity; static string, never freed. Thread: any. */
TRITONSERVER_DECLSPEC const char *
TRITONSERVER_InferenceTraceActivityString(TRITONSERVER_InferenceTraceActivity activity);

/* Reports a timestamped activity of `trace` (or of a child of it). `trace`
 * is borrowed for the duration of the call only. Runs on server threads. */
typedef void (*TRITONSERVER_InferenceTraceActivityFn_t)(struct TRITONSERVER_InferenceTrace *trace,
                                                        TRITONSERVER_InferenceTraceActivity activity,
                                                        uint64_t timestamp_ns, void *userp);

/* Reports a tensor seen by `trace`; `name`, `base` and `shape` are borrowed
 * for the duration of the call only. Runs on server threads. */
typedef void (*TRITONSERVER_InferenceTraceTensorActivityFn_t)(struct TRITONSERVER_InferenceTrace *trace,
                                                              TRITONSERVER_InferenceTraceActivity activity,
                                                              const char *name, TRITONSERVER_DataType datatype,
                                                              const void *base, size_t byte_size, const int64_t *shape,
                                                              uint64_t dim_count, TRITONSERVER_MemoryType memory_type,
                                                              int64_t memory_type_id, void *userp);

/* Called once per trace (parent and each child) when it has no more
 * activity; ownership of `trace` passes to the callback, which typically
 * deletes it. Runs on server threads. */
typedef void (*TRITONSERVER_InferenceTraceReleaseFn_t)(struct TRITONSERVER_InferenceTrace *trace, void *userp);

/* Creates a trace at `level` (parent_id 0 means no parent). Activity of the
 * trace and of its children goes to activity_fn, and release_fn gets each of
 * them back; `trace_userp` is passed to both. The caller owns *trace until
 * it hands it to TRITONSERVER_ServerInferAsync. Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceTraceNew(struct TRITONSERVER_InferenceTrace **trace, TRITONSERVER_InferenceTraceLevel level,
                               uint64_t parent_id, TRITONSERVER_InferenceTraceActivityFn_t activity_fn,
                               TRITONSERVER_InferenceTraceReleaseFn_t release_fn, void *trace_userp);

/* Like TRITONSERVER_InferenceTraceNew, and tensor activity additionally
 * goes to tensor_activity_fn. Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceTraceTensorNew(struct TRITONSERVER_InferenceTrace **trace, TRITONSERVER_InferenceTraceLevel level,
                                     uint64_t parent_id, TRITONSERVER_InferenceTraceActivityFn_t activity_fn,
                                     TRITONSERVER_InferenceTraceTensorActivityFn_t tensor_activity_fn,
                                     TRITONSERVER_InferenceTraceReleaseFn_t release_fn, void *trace_userp);

/* Records a user-named activity (reported as CUSTOM_ACTIVITY) at
 * `timestamp` ns; `activity_name` is copied. Used by backends. Thread: any,
 * one caller per trace. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceTraceReportActivity(struct TRITONSERVER_InferenceTrace *trace, uint64_t timestamp,
                                          const char *activity_name);

/* Frees a trace the caller owns (never one still in flight). Thread: any,
 * one caller per trace. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceTraceDelete(struct TRITONSERVER_InferenceTrace *trace);

/* Id of the trace, unique within the server process. Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceTraceId(struct TRITONSERVER_InferenceTrace *trace, uint64_t *id);

/* Id of the parent trace, 0 when there is none. Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceTraceParentId(struct TRITONSERVER_InferenceTrace *trace, uint64_t *parent_id);

/* Name of the traced model; borrowed from the trace. Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceTraceModelName(struct TRITONSERVER_InferenceTrace *trace, const char **model_name);

/* Version of the traced model. Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceTraceModelVersion(struct TRITONSERVER_InferenceTrace *trace, int64_t *model_version);

/* Id of the traced request ("" if none); borrowed from the trace.
 * Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceTraceRequestId(struct TRITONSERVER_InferenceTrace *trace, const char **request_id);

/* Creates a child of `trace` sharing its callbacks. The caller owns
 * *child_trace until passing it to TRITONSERVER_ServerInferAsync.
 * Thread: any, one caller per trace. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceTraceSpawnChildTrace(struct TRITONSERVER_InferenceTrace *trace,
                                           struct TRITONSERVER_InferenceTrace **child_trace);

/* Replaces the opaque context string (e.g. propagation headers as JSON)
 * carried by the trace; the string is copied. Thread: any, one caller per
 * trace. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceTraceSetContext(struct TRITONSERVER_InferenceTrace *trace, const char *trace_context);

/* Context string of the trace (NULL if never set); borrowed from the trace
 * and valid until it is changed or the trace deleted. Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceTraceContext(struct TRITONSERVER_InferenceTrace *trace, const char **trace_context);

/* ------------------------------------------------------------------------
 * Inference requests
 *
 * A request is built by the caller, handed to TRITONSERVER_ServerInferAsync
 * (which borrows it until the release callback gives it back) and may then
 * be reused or deleted. While in flight, the caller must not touch it.
 * ------------------------------------------------------------------------ */

/* Request flags (bit values). */
typedef enum tritonserver_requestflag_enum {
  TRITONSERVER_REQUEST_FLAG_SEQUENCE_START = 1,
  TRITONSERVER_REQUEST_FLAG_SEQUENCE_END = 2
} TRITONSERVER_RequestFlag;

/* Flags passed to the request release callback (bit values). */
typedef enum tritonserver_requestreleaseflag_enum {
  TRITONSERVER_REQUEST_RELEASE_ALL = 1,
  TRITONSERVER_REQUEST_RELEASE_RESCHEDULE = 2
} TRITONSERVER_RequestReleaseFlag;

/* Flags passed to the response complete callback (bit values). */
typedef enum tritonserver_responsecompleteflag_enum {
  TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1
} TRITONSERVER_ResponseCompleteFlag;

/* Gives a request back to its owner. With RELEASE_ALL set, ownership of
 * `request` and of all input buffers returns to the callback and the server
 * will not touch them again. RESCHEDULE is handled inside the server and is
 * not delivered here. Runs on a server or backend thread. */
typedef void (*TRITONSERVER_InferenceRequestReleaseFn_t)(struct TRITONSERVER_InferenceRequest *request,
                                                         const uint32_t flags, void *userp);

/* Delivers one response (ownership passes to the callback, which deletes
 * it) or, with `response` NULL, only flags. COMPLETE_FINAL marks the last
 * call for the request. Runs on a server or backend thread. */
typedef void (*TRITONSERVER_InferenceResponseCompleteFn_t)(struct TRITONSERVER_InferenceResponse *response,
                                                           const uint32_t flags, void *userp);

/* Creates an empty request for `model_name` at `model_version` (-1 lets
 * the server's version policy choose). The caller owns
 * *inference_request. Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceRequestNew(struct TRITONSERVER_InferenceRequest **inference_request,
                                 struct TRITONSERVER_Server *server, const char *model_name,
                                 const int64_t model_version);

/* Frees a request that is not in flight (never sent, or already released).
 * Input buffers are not freed: they belong to the caller. Thread: any, one
 * caller per request. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceRequestDelete(struct TRITONSERVER_InferenceRequest *inference_request);

/* Id of the request ("" if unset); borrowed from the request.
 * Thread: any, one caller per request. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceRequestId(struct TRITONSERVER_InferenceRequest *inference_request, const char **id);

/* Sets the request id (copied). Thread: any, one caller per request. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceRequestSetId(struct TRITONSERVER_InferenceRequest *inference_request, const char *id);

/* Current TRITONSERVER_RequestFlag bits. Thread: any, one caller per
 * request. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceRequestFlags(struct TRITONSERVER_InferenceRequest *inference_request, uint32_t *flags);

/* Replaces the TRITONSERVER_RequestFlag bits. Thread: any, one caller per
 * request. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceRequestSetFlags(struct TRITONSERVER_InferenceRequest *inference_request, uint32_t flags);

/* Numeric correlation (sequence) id; 0 means none. Fails with
 * INVALID_ARG if the id was set as a string. Thread: any, one caller per
 * request. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceRequestCorrelationId(struct TRITONSERVER_InferenceRequest *inference_request,
                                           uint64_t *correlation_id);

/* String correlation id; "" means none. Fails if the id was set as a
 * number. The string is borrowed from the request. Thread: any, one caller
 * per request. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceRequestCorrelationIdString(struct TRITONSERVER_InferenceRequest *inference_request,
                                                 const char **correlation_id);

/* Sets a numeric correlation id, replacing any string one. Thread: any,
 * one caller per request. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceRequestSetCorrelationId(struct TRITONSERVER_InferenceRequest *inference_request,
                                              uint64_t correlation_id);

/* Sets a string correlation id (copied), replacing any numeric one.
 * Thread: any, one caller per request. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceRequestSetCorrelationIdString(struct TRITONSERVER_InferenceRequest *inference_request,
                                                    const char *correlation_id);

/* Asks, best effort, that an in-flight request stop early. The flag is
 * cleared when the request is (re)submitted, so cancelling before
 * ServerInferAsync has no effect. Thread: any (safe while in flight). */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceRequestCancel(struct TRITONSERVER_InferenceRequest *inference_request);

/* Whether cancellation was requested. Thread: any (safe while in flight). */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceRequestIsCancelled(struct TRITONSERVER_InferenceRequest *inference_request, bool *is_cancelled);

/* Deprecated 32-bit form of TRITONSERVER_InferenceRequestPriorityUInt64;
 * 0 means the model's default priority. Thread: any, one caller per
 * request. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceRequestPriority(struct TRITONSERVER_InferenceRequest *inference_request, uint32_t *priority);

/* Scheduling priority; 0 means the model's default. Thread: any, one
 * caller per request. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceRequestPriorityUInt64(struct TRITONSERVER_InferenceRequest *inference_request,
                                            uint64_t *priority);

/* Deprecated 32-bit form of TRITONSERVER_InferenceRequestSetPriorityUInt64.
 * Thread: any, one caller per request. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceRequestSetPriority(struct TRITONSERVER_InferenceRequest *inference_request, uint32_t priority);

/* Sets the scheduling priority (0 = model default). Thread: any, one
 * caller per request. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceRequestSetPriorityUInt64(struct TRITONSERVER_InferenceRequest *inference_request,
                                               uint64_t priority);

/* Timeout in microseconds; 0 means none. Thread: any, one caller per
 * request. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceRequestTimeoutMicroseconds(struct TRITONSERVER_InferenceRequest *inference_request,
                                                 uint64_t *timeout_us);

/* Sets the timeout in microseconds (0 = none). Thread: any, one caller
 * per request. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceRequestSetTimeoutMicroseconds(struct TRITONSERVER_InferenceRequest *inference_request,
                                                    uint64_t timeout_us);

/* Declares input `name` with its type and shape (`dim_count` entries of
 * `shape`); name and shape are copied. Fails with ALREADY_EXISTS for a
 * duplicate name. Thread: any, one caller per request. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceRequestAddInput(struct TRITONSERVER_InferenceRequest *inference_request, const char *name,
                                      const TRITONSERVER_DataType datatype, const int64_t *shape, uint64_t dim_count);

/* Declares the request's only input as "raw": its model-side name, type
 * and shape come from the model config. `name` (copied) only identifies it
 * in later calls. Thread: any, one caller per request. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceRequestAddRawInput(struct TRITONSERVER_InferenceRequest *inference_request, const char *name);

/* Removes input `name` and forgets its data buffers (which stay the
 * caller's). Thread: any, one caller per request. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceRequestRemoveInput(struct TRITONSERVER_InferenceRequest *inference_request, const char *name);

/* Removes every input. Thread: any, one caller per request. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceRequestRemoveAllInputs(struct TRITONSERVER_InferenceRequest *inference_request);

/* Appends a data chunk to input `name`. The bytes are not copied: the
 * caller keeps them valid and unchanged until the request is released,
 * deleted, or the input's data is removed. Thread: any, one caller per
 * request. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceRequestAppendInputData(struct TRITONSERVER_InferenceRequest *inference_request, const char *name,
                                             const void *base, size_t byte_size, TRITONSERVER_MemoryType memory_type,
                                             int64_t memory_type_id);

/* Like AppendInputData, but the chunk is used only by instances running
 * under host policy `host_policy_name`; others use the plain data. Same
 * lifetime rule for the bytes. Thread: any, one caller per request. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *TRITONSERVER_InferenceRequestAppendInputDataWithHostPolicy(
    struct TRITONSERVER_InferenceRequest *inference_request, const char *name, const void *base, size_t byte_size,
    TRITONSERVER_MemoryType memory_type, int64_t memory_type_id, const char *host_policy_name);

/* Like AppendInputData with size and memory placement taken from
 * `buffer_attributes` (read during the call, still owned by the caller).
 * Same lifetime rule for the bytes. Thread: any, one caller per request. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *TRITONSERVER_InferenceRequestAppendInputDataWithBufferAttributes(
    struct TRITONSERVER_InferenceRequest *inference_request, const char *name, const void *base,
    struct TRITONSERVER_BufferAttributes *buffer_attributes);

/* Drops every data chunk of input `name` (the input stays declared); the
 * request stops referencing those buffers. Thread: any, one caller per
 * request. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceRequestRemoveAllInputData(struct TRITONSERVER_InferenceRequest *inference_request,
                                                const char *name);

/* Asks for output `name` (copied). With no requested output, every model
 * output is returned. Thread: any, one caller per request. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceRequestAddRequestedOutput(struct TRITONSERVER_InferenceRequest *inference_request,
                                                const char *name);

/* Withdraws the request for output `name`. Thread: any, one caller per
 * request. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceRequestRemoveRequestedOutput(struct TRITONSERVER_InferenceRequest *inference_request,
                                                   const char *name);

/* Withdraws all requested outputs. Thread: any, one caller per request. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceRequestRemoveAllRequestedOutputs(struct TRITONSERVER_InferenceRequest *inference_request);

/* Sets the callback that returns the request to its owner once the server
 * is done with it (required before ServerInferAsync). Thread: any, one
 * caller per request. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceRequestSetReleaseCallback(struct TRITONSERVER_InferenceRequest *inference_request,
                                                TRITONSERVER_InferenceRequestReleaseFn_t request_release_fn,
                                                void *request_release_userp);

/* Sets the allocator for outputs and the callback that receives responses
 * (required before ServerInferAsync). The allocator is borrowed and must
 * outlive the request; both user pointers may be freed after the
 * COMPLETE_FINAL callback. Thread: any, one caller per request. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *TRITONSERVER_InferenceRequestSetResponseCallback(
    struct TRITONSERVER_InferenceRequest *inference_request, struct TRITONSERVER_ResponseAllocator *response_allocator,
    void *response_allocator_userp, TRITONSERVER_InferenceResponseCompleteFn_t response_fn, void *response_userp);

/* Adds or replaces a string parameter (key and value copied). Thread: any,
 * one caller per request. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceRequestSetStringParameter(struct TRITONSERVER_InferenceRequest *request, const char *key,
                                                const char *value);

/* Adds or replaces an integer parameter (key copied). Thread: any, one
 * caller per request. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceRequestSetIntParameter(struct TRITONSERVER_InferenceRequest *request, const char *key,
                                             const int64_t value);

/* Adds or replaces a boolean parameter (key copied). Thread: any, one
 * caller per request. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceRequestSetBoolParameter(struct TRITONSERVER_InferenceRequest *request, const char *key,
                                              const bool value);

/* Adds or replaces a double parameter (key copied). Thread: any, one
 * caller per request. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceRequestSetDoubleParameter(struct TRITONSERVER_InferenceRequest *request, const char *key,
                                                const double value);

/* ------------------------------------------------------------------------
 * Inference responses
 *
 * Responses are immutable once delivered; every getter is read-only and
 * may be called from any thread. Everything returned is borrowed from the
 * response and valid until TRITONSERVER_InferenceResponseDelete.
 * ------------------------------------------------------------------------ */

/* Frees a response and releases its output buffers through the
 * allocator's release_fn. Thread: any, one caller per response. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceResponseDelete(struct TRITONSERVER_InferenceResponse *inference_response);

/* NULL if the inference succeeded, else a new copy of the failure, which
 * the caller owns and deletes with TRITONSERVER_ErrorDelete (each call makes
 * a fresh copy, as Triton's implementation does). Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceResponseError(struct TRITONSERVER_InferenceResponse *inference_response);

/* Name and version of the model that produced the response (borrowed).
 * Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceResponseModel(struct TRITONSERVER_InferenceResponse *inference_response, const char **model_name,
                                    int64_t *model_version);

/* Id of the originating request ("" if none; borrowed). Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceResponseId(struct TRITONSERVER_InferenceResponse *inference_response, const char **request_id);

/* Number of parameters the backend attached. Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceResponseParameterCount(struct TRITONSERVER_InferenceResponse *inference_response,
                                             uint32_t *count);

/* Parameter at `index` (< count). *vvalue points to a NUL-terminated
 * string, an int64_t, a bool or a double according to *type. All borrowed.
 * Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceResponseParameter(struct TRITONSERVER_InferenceResponse *inference_response, const uint32_t index,
                                        const char **name, TRITONSERVER_ParameterType *type, const void **vvalue);

/* Number of output tensors. Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceResponseOutputCount(struct TRITONSERVER_InferenceResponse *inference_response, uint32_t *count);

/* Everything about output `index` (< count): name, type, shape, data,
 * placement and the buffer_userp the allocator returned. All borrowed.
 * Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceResponseOutput(struct TRITONSERVER_InferenceResponse *inference_response, const uint32_t index,
                                     const char **name, TRITONSERVER_DataType *datatype, const int64_t **shape,
                                     uint64_t *dim_count, const void **base, size_t *byte_size,
                                     TRITONSERVER_MemoryType *memory_type, int64_t *memory_type_id, void **userp);

/* Label for class `class_index` of output `index`, from the model's label
 * file; *label is NULL when there is none. Borrowed. Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_InferenceResponseOutputClassificationLabel(struct TRITONSERVER_InferenceResponse *inference_response,
                                                        const uint32_t index, const size_t class_index,
                                                        const char **label);

/* ------------------------------------------------------------------------
 * Buffer attributes (size and placement of a memory buffer)
 * ------------------------------------------------------------------------ */

/* Creates attributes describing 0 bytes of CPU memory, device 0, no IPC
 * handle. The caller owns *buffer_attributes. Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_BufferAttributesNew(struct TRITONSERVER_BufferAttributes **buffer_attributes);

/* Frees attributes the caller owns. Thread: any, one caller per object. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_BufferAttributesDelete(struct TRITONSERVER_BufferAttributes *buffer_attributes);

/* Sets the device id. Thread: any, one caller per object. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_BufferAttributesSetMemoryTypeId(struct TRITONSERVER_BufferAttributes *buffer_attributes,
                                             int64_t memory_type_id);

/* Sets the memory type. Thread: any, one caller per object. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_BufferAttributesSetMemoryType(struct TRITONSERVER_BufferAttributes *buffer_attributes,
                                           TRITONSERVER_MemoryType memory_type);

/* Stores an opaque CUDA IPC handle pointer (not copied, not freed).
 * Thread: any, one caller per object. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_BufferAttributesSetCudaIpcHandle(struct TRITONSERVER_BufferAttributes *buffer_attributes,
                                              void *cuda_ipc_handle);

/* Sets the byte size. Thread: any, one caller per object. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_BufferAttributesSetByteSize(struct TRITONSERVER_BufferAttributes *buffer_attributes, size_t byte_size);

/* Reads the device id. Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_BufferAttributesMemoryTypeId(struct TRITONSERVER_BufferAttributes *buffer_attributes,
                                          int64_t *memory_type_id);

/* Reads the memory type. Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_BufferAttributesMemoryType(struct TRITONSERVER_BufferAttributes *buffer_attributes,
                                        TRITONSERVER_MemoryType *memory_type);

/* Reads the CUDA IPC handle pointer (NULL if none). Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_BufferAttributesCudaIpcHandle(struct TRITONSERVER_BufferAttributes *buffer_attributes,
                                           void **cuda_ipc_handle);

/* Reads the byte size. Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_BufferAttributesByteSize(struct TRITONSERVER_BufferAttributes *buffer_attributes, size_t *byte_size);

/* ------------------------------------------------------------------------
 * Server options
 *
 * Filled in by the caller, read once by TRITONSERVER_ServerNew. Every
 * string argument is copied. Setters: Thread: any, one caller per options
 * object.
 * ------------------------------------------------------------------------ */

typedef enum tritonserver_modelcontrolmode_enum {
  TRITONSERVER_MODEL_CONTROL_NONE,
  TRITONSERVER_MODEL_CONTROL_POLL,
  TRITONSERVER_MODEL_CONTROL_EXPLICIT
} TRITONSERVER_ModelControlMode;

typedef enum tritonserver_ratelimitmode_enum {
  TRITONSERVER_RATE_LIMIT_OFF,
  TRITONSERVER_RATE_LIMIT_EXEC_COUNT
} TRITONSERVER_RateLimitMode;

/* Creates options with default values. The caller owns *options.
 * Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerOptionsNew(struct TRITONSERVER_ServerOptions **options);

/* Frees options; a server created from them keeps its own copy.
 * Thread: any, one caller per options object. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerOptionsDelete(struct TRITONSERVER_ServerOptions *options);

/* Sets the server id reported in metadata. Thread: see section. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerOptionsSetServerId(struct TRITONSERVER_ServerOptions *options, const char *server_id);

/* Adds a model repository (absolute path); may be called several times.
 * A model name found in two repositories is unavailable. Thread: see
 * section. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerOptionsSetModelRepositoryPath(struct TRITONSERVER_ServerOptions *options,
                                                 const char *model_repository_path);

/* NONE: load all at start, then ignore changes; POLL: load all at start and
 * rescan on TRITONSERVER_ServerPollModelRepository; EXPLICIT: load only
 * startup models and on request. Thread: see section. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerOptionsSetModelControlMode(struct TRITONSERVER_ServerOptions *options,
                                              TRITONSERVER_ModelControlMode mode);

/* Adds a model to load at startup in EXPLICIT mode ("*" means all); may be
 * called several times. Thread: see section. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerOptionsSetStartupModel(struct TRITONSERVER_ServerOptions *options, const char *model_name);

/* When true, models need a complete config file (no auto-completion).
 * Thread: see section. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerOptionsSetStrictModelConfig(struct TRITONSERVER_ServerOptions *options, bool strict);

/* Config file name to look for under configs/ in each model directory
 * before falling back to config.pbtxt; "" means always the default.
 * Thread: see section. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerOptionsSetModelConfigName(struct TRITONSERVER_ServerOptions *options, const char *model_config_name);

/* Chooses whether executions are gated by the rate limiter (EXEC_COUNT) or
 * run as soon as an instance is free (OFF). Thread: see section. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerOptionsSetRateLimiterMode(struct TRITONSERVER_ServerOptions *options,
                                             TRITONSERVER_RateLimitMode mode);

/* Declares `resource_count` units of rate-limiter resource `resource_name`
 * on `device` (-1 = on every device; ignored for global resources).
 * Thread: see section. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerOptionsAddRateLimiterResource(struct TRITONSERVER_ServerOptions *options, const char *resource_name,
                                                 const size_t resource_count, const int device);

/* Size of the pinned host memory pool shared with backends. Thread: see
 * section. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerOptionsSetPinnedMemoryPoolByteSize(struct TRITONSERVER_ServerOptions *options, uint64_t size);

/* Size of the CUDA memory pool on `gpu_device`. Accepted and stored; a
 * CPU-only build has no such pool. Thread: see section. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerOptionsSetCudaMemoryPoolByteSize(struct TRITONSERVER_ServerOptions *options, int gpu_device,
                                                    uint64_t size);

/* Size of the CUDA virtual address range reserved on `gpu_device` for
 * growable implicit state. Thread: see section. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerOptionsSetCudaVirtualAddressSize(struct TRITONSERVER_ServerOptions *options, int gpu_device,
                                                    size_t cuda_virtual_address_size);

/* Deprecated: size of the built-in local response cache; prefer
 * TRITONSERVER_ServerOptionsSetCacheConfig. Thread: see section. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerOptionsSetResponseCacheByteSize(struct TRITONSERVER_ServerOptions *options, uint64_t size);

/* Configures response cache implementation `cache_name` with the JSON text
 * `config_json`; the implementation is looked up under the cache
 * directory. Thread: see section. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerOptionsSetCacheConfig(struct TRITONSERVER_ServerOptions *options, const char *cache_name,
                                         const char *config_json);

/* Directory holding cache implementations (<dir>/<name>/...). Thread: see
 * section. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerOptionsSetCacheDirectory(struct TRITONSERVER_ServerOptions *options, const char *cache_dir);

/* Lowest CUDA compute capability a GPU must have to be used. Thread: see
 * section. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerOptionsSetMinSupportedComputeCapability(struct TRITONSERVER_ServerOptions *options, double cc);

/* When true, ServerNew fails if any startup model fails to load.
 * Thread: see section. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerOptionsSetExitOnError(struct TRITONSERVER_ServerOptions *options, bool exit);

/* When true, the server reports ready only if every model is ready.
 * Thread: see section. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerOptionsSetStrictReadiness(struct TRITONSERVER_ServerOptions *options, bool strict);

/* Seconds ServerStop waits for in-flight work before giving up.
 * Thread: see section. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerOptionsSetExitTimeout(struct TRITONSERVER_ServerOptions *options, unsigned int timeout);

/* Number of threads used for buffer copies. Thread: see section. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerOptionsSetBufferManagerThreadCount(struct TRITONSERVER_ServerOptions *options,
                                                      unsigned int thread_count);

/* Number of models that may load concurrently. Thread: see section. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerOptionsSetModelLoadThreadCount(struct TRITONSERVER_ServerOptions *options,
                                                  unsigned int thread_count);

/* How many times a failed model load is retried. Thread: see section. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerOptionsSetModelLoadRetryCount(struct TRITONSERVER_ServerOptions *options, unsigned int retry_count);

/* When true, models with the same name may coexist if they come from
 * different repositories (namespaces). Thread: see section. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerOptionsSetModelNamespacing(struct TRITONSERVER_ServerOptions *options, bool enable_namespace);

/* Whether to try enabling GPU peer-to-peer access (best effort).
 * Thread: see section. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerOptionsSetEnablePeerAccess(struct TRITONSERVER_ServerOptions *options, bool enable_peer_access);

/* Log file path; "" logs to the console. Thread: see section. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerOptionsSetLogFile(struct TRITONSERVER_ServerOptions *options, const char *file);

/* Enables or disables INFO logging. Thread: see section. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerOptionsSetLogInfo(struct TRITONSERVER_ServerOptions *options, bool log);

/* Enables or disables WARN logging. Thread: see section. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerOptionsSetLogWarn(struct TRITONSERVER_ServerOptions *options, bool log);

/* Enables or disables ERROR logging. Thread: see section. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerOptionsSetLogError(struct TRITONSERVER_ServerOptions *options, bool log);

/* Chooses the log line prefix format. Thread: see section. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerOptionsSetLogFormat(struct TRITONSERVER_ServerOptions *options, const TRITONSERVER_LogFormat format);

/* Verbose log level; 0 turns verbose logging off. Thread: see section. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerOptionsSetLogVerbose(struct TRITONSERVER_ServerOptions *options, int level);

/* Enables or disables metric collection as a whole. Thread: see section. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerOptionsSetMetrics(struct TRITONSERVER_ServerOptions *options, bool metrics);

/* Enables GPU metrics (only effective when metrics are on). Thread: see
 * section. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerOptionsSetGpuMetrics(struct TRITONSERVER_ServerOptions *options, bool gpu_metrics);

/* Enables CPU metrics (only effective when metrics are on). Thread: see
 * section. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerOptionsSetCpuMetrics(struct TRITONSERVER_ServerOptions *options, bool cpu_metrics);

/* Period of periodic metric refreshes in ms (default 2000). Thread: see
 * section. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerOptionsSetMetricsInterval(struct TRITONSERVER_ServerOptions *options, uint64_t metrics_interval_ms);

/* Directory searched last for backend `be` as <dir>/be/libtriton_be.so.
 * Thread: see section. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerOptionsSetBackendDirectory(struct TRITONSERVER_ServerOptions *options, const char *backend_dir);

/* Directory searched for repository agents as
 * <dir>/ra/libtritonrepoagent_ra.so. Thread: see section. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerOptionsSetRepoAgentDirectory(struct TRITONSERVER_ServerOptions *options, const char *repoagent_dir);

/* Refuses model loads on device (`kind`, `device_id`) once its memory use
 * exceeds `fraction` (0..1). Only GPU kinds are meaningful. Thread: see
 * section. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerOptionsSetModelLoadDeviceLimit(struct TRITONSERVER_ServerOptions *options,
                                                  const TRITONSERVER_InstanceGroupKind kind, const int device_id,
                                                  const double fraction);

/* Adds `setting`=`value` to the command-line config given to backend
 * `backend_name` (see TRITONBACKEND_BackendConfig). Thread: see section. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerOptionsSetBackendConfig(struct TRITONSERVER_ServerOptions *options, const char *backend_name,
                                           const char *setting, const char *value);

/* Adds `setting`=`value` to host policy `policy_name`. Thread: see
 * section. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerOptionsSetHostPolicy(struct TRITONSERVER_ServerOptions *options, const char *policy_name,
                                        const char *setting, const char *value);

/* Adds `setting`=`value` to metrics config group `name` ("" = global).
 * Thread: see section. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerOptionsSetMetricsConfig(struct TRITONSERVER_ServerOptions *options, const char *name,
                                           const char *setting, const char *value);

/* ------------------------------------------------------------------------
 * Server
 *
 * A server object is internally synchronized: unless noted, its functions
 * may be called from any thread concurrently. Messages returned through
 * out-parameters are owned by the caller (TRITONSERVER_MessageDelete).
 * ------------------------------------------------------------------------ */

/* Batching properties of a model (bit values). */
typedef enum tritonserver_batchflag_enum {
  TRITONSERVER_BATCH_UNKNOWN = 1,
  TRITONSERVER_BATCH_FIRST_DIM = 2
} TRITONSERVER_ModelBatchFlag;

/* Filters for TRITONSERVER_ServerModelIndex (bit values). */
typedef enum tritonserver_modelindexflag_enum { TRITONSERVER_INDEX_FLAG_READY = 1 } TRITONSERVER_ModelIndexFlag;

/* Response pattern of a model (bit values). */
typedef enum tritonserver_txn_property_flag_enum {
  TRITONSERVER_TXN_ONE_TO_ONE = 1,
  TRITONSERVER_TXN_DECOUPLED = 2
} TRITONSERVER_ModelTxnPropertyFlag;

/* Starts a server configured by `options` (borrowed; may be deleted after
 * the call) and loads its startup models. The caller owns *server and
 * frees it with TRITONSERVER_ServerDelete. Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *TRITONSERVER_ServerNew(struct TRITONSERVER_Server **server,
                                                                        struct TRITONSERVER_ServerOptions *options);

/* Stops the server if needed and frees it. No other call on this server
 * may be running or follow. Thread: any, last caller only. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *TRITONSERVER_ServerDelete(struct TRITONSERVER_Server *server);

/* Unloads all models (waiting up to the exit timeout for in-flight work)
 * and rejects further inference; a stopped server cannot be restarted.
 * Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *TRITONSERVER_ServerStop(struct TRITONSERVER_Server *server);

/* Changes the exit timeout of a running server. Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *TRITONSERVER_ServerSetExitTimeout(struct TRITONSERVER_Server *server,
                                                                                   unsigned int timeout);

/* Adds a model repository at run time (EXPLICIT mode only). Each parameter
 * in `name_mapping` (borrowed, `mapping_count` entries) maps a directory
 * name (key) to the model name to use (string value). Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerRegisterModelRepository(struct TRITONSERVER_Server *server, const char *repository_path,
                                           const struct TRITONSERVER_Parameter **name_mapping,
                                           const uint32_t mapping_count);

/* Removes a repository added at startup or at run time, with its name
 * mappings; its loaded models stay loaded (EXPLICIT mode only). Thread:
 * any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerUnregisterModelRepository(struct TRITONSERVER_Server *server, const char *repository_path);

/* Rescans the repositories and loads/unloads/reloads models to match
 * (POLL mode only). Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerPollModelRepository(struct TRITONSERVER_Server *server);

/* Whether the server is alive. Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *TRITONSERVER_ServerIsLive(struct TRITONSERVER_Server *server,
                                                                           bool *live);

/* Whether the server is ready for inference. Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *TRITONSERVER_ServerIsReady(struct TRITONSERVER_Server *server,
                                                                            bool *ready);

/* Whether the model (version -1 = per version policy) is ready.
 * Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *TRITONSERVER_ServerModelIsReady(struct TRITONSERVER_Server *server,
                                                                                 const char *model_name,
                                                                                 const int64_t model_version,
                                                                                 bool *ready);

/* TRITONSERVER_ModelBatchFlag bits of a model; *voidp (if non-NULL) is set
 * to NULL for both defined flags. Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerModelBatchProperties(struct TRITONSERVER_Server *server, const char *model_name,
                                        const int64_t model_version, uint32_t *flags, void **voidp);

/* TRITONSERVER_ModelTxnPropertyFlag bits of a model; *voidp (if non-NULL)
 * is set to NULL. Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerModelTransactionProperties(struct TRITONSERVER_Server *server, const char *model_name,
                                              const int64_t model_version, uint32_t *txn_flags, void **voidp);

/* Server metadata (name, version, extensions) as JSON; the caller owns
 * *server_metadata. Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerMetadata(struct TRITONSERVER_Server *server, struct TRITONSERVER_Message **server_metadata);

/* Model metadata (versions, inputs, outputs) as JSON; the caller owns
 * *model_metadata. Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerModelMetadata(struct TRITONSERVER_Server *server, const char *model_name,
                                 const int64_t model_version, struct TRITONSERVER_Message **model_metadata);

/* Statistics of one model, or of every model when `model_name` is "", as
 * JSON; the caller owns *model_stats. Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerModelStatistics(struct TRITONSERVER_Server *server, const char *model_name,
                                   const int64_t model_version, struct TRITONSERVER_Message **model_stats);

/* Effective model configuration as JSON in format `config_version` (only 1
 * exists); the caller owns *model_config. Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerModelConfig(struct TRITONSERVER_Server *server, const char *model_name, const int64_t model_version,
                               const uint32_t config_version, struct TRITONSERVER_Message **model_config);

/* Index of the models in all repositories as a JSON array, filtered by
 * TRITONSERVER_ModelIndexFlag bits; the caller owns *model_index.
 * Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerModelIndex(struct TRITONSERVER_Server *server, uint32_t flags,
                              struct TRITONSERVER_Message **model_index);

/* Loads, or reloads, a model and returns when it is ready or has failed.
 * Thread: any (blocks). */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *TRITONSERVER_ServerLoadModel(struct TRITONSERVER_Server *server,
                                                                              const char *model_name);

/* Like TRITONSERVER_ServerLoadModel with load parameters (borrowed), e.g.
 * a string "config" holding a JSON model config to use instead of the
 * file. Thread: any (blocks). */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerLoadModelWithParameters(struct TRITONSERVER_Server *server, const char *model_name,
                                           const struct TRITONSERVER_Parameter **parameters,
                                           const uint64_t parameter_count);

/* Starts unloading a model and returns without waiting; unloading a model
 * that is not loaded succeeds. Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *TRITONSERVER_ServerUnloadModel(struct TRITONSERVER_Server *server,
                                                                                const char *model_name);

/* Like TRITONSERVER_ServerUnloadModel, also unloading models that were
 * loaded because this one depends on them (e.g. ensemble steps).
 * Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerUnloadModelAndDependents(struct TRITONSERVER_Server *server, const char *model_name);

/* Takes a snapshot of the server's metrics; the caller owns *metrics and
 * frees it with TRITONSERVER_MetricsDelete. Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *TRITONSERVER_ServerMetrics(struct TRITONSERVER_Server *server,
                                                                            struct TRITONSERVER_Metrics **metrics);

/* Queues `inference_request` for execution and returns immediately. On
 * success the server borrows the request until its release callback runs;
 * on failure the caller still owns it. `trace` (may be NULL) is always
 * taken, success or not, and comes back through its release callback.
 * Responses arrive through the request's response callback. Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_ServerInferAsync(struct TRITONSERVER_Server *server,
                              struct TRITONSERVER_InferenceRequest *inference_request,
                              struct TRITONSERVER_InferenceTrace *trace);

/* ------------------------------------------------------------------------
 * Custom metrics (families and metrics created by applications/backends)
 *
 * Metrics are internally synchronized: update and read functions may be
 * called from any thread concurrently.
 * ------------------------------------------------------------------------ */

typedef enum TRITONSERVER_metrickind_enum {
  TRITONSERVER_METRIC_KIND_COUNTER,
  TRITONSERVER_METRIC_KIND_GAUGE,
  TRITONSERVER_METRIC_KIND_HISTOGRAM
} TRITONSERVER_MetricKind;

/* Creates a metric family of `kind` exported as `name` with help text
 * `description` (both copied). The caller owns *family and deletes it after
 * all of its metrics. Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *TRITONSERVER_MetricFamilyNew(struct TRITONSERVER_MetricFamily **family,
                                                                              const TRITONSERVER_MetricKind kind,
                                                                              const char *name,
                                                                              const char *description);

/* Frees a family. Fails, leaving it intact, while metrics of the family
 * still exist. Thread: any, one caller per family. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_MetricFamilyDelete(struct TRITONSERVER_MetricFamily *family);

/* Kind of a metric family. Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_GetMetricFamilyKind(struct TRITONSERVER_MetricFamily *family, TRITONSERVER_MetricKind *kind);

/* Creates an empty metric-arguments object; the caller owns *args and
 * frees it with TRITONSERVER_MetricArgsDelete. Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *TRITONSERVER_MetricArgsNew(struct TRITONSERVER_MetricArgs **args);

/* Makes `args` describe a histogram with the `buckets_count` upper bounds
 * at `buckets` (copied). Thread: any, one caller per args object. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_MetricArgsSetHistogram(struct TRITONSERVER_MetricArgs *args, const double *buckets,
                                    const uint64_t buckets_count);

/* Frees metric arguments; metrics created from them are unaffected.
 * Thread: any, one caller per args object. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *TRITONSERVER_MetricArgsDelete(struct TRITONSERVER_MetricArgs *args);

/* Creates a counter or gauge in `family` with the given labels (string
 * parameters, borrowed for the call only). The caller owns *metric and
 * frees it with TRITONSERVER_MetricDelete. Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *TRITONSERVER_MetricNew(struct TRITONSERVER_Metric **metric,
                                                                        struct TRITONSERVER_MetricFamily *family,
                                                                        const struct TRITONSERVER_Parameter **labels,
                                                                        const uint64_t label_count);

/* Like TRITONSERVER_MetricNew, with kind-specific arguments (required for
 * histograms; borrowed for the call only). Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *
TRITONSERVER_MetricNewWithArgs(struct TRITONSERVER_Metric **metric, struct TRITONSERVER_MetricFamily *family,
                               const struct TRITONSERVER_Parameter **labels, const uint64_t label_count,
                               const struct TRITONSERVER_MetricArgs *args);

/* Frees a metric (do this before deleting its family). Thread: any, one
 * caller per metric. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *TRITONSERVER_MetricDelete(struct TRITONSERVER_Metric *metric);

/* Current value of a counter or gauge; UNSUPPORTED for other kinds.
 * Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *TRITONSERVER_MetricValue(struct TRITONSERVER_Metric *metric,
                                                                          double *value);

/* Adds `value` to a gauge, or a non-negative `value` to a counter
 * (INVALID_ARG if negative); UNSUPPORTED for other kinds. Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *TRITONSERVER_MetricIncrement(struct TRITONSERVER_Metric *metric,
                                                                              double value);

/* Sets a gauge to `value`; UNSUPPORTED for other kinds. Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *TRITONSERVER_MetricSet(struct TRITONSERVER_Metric *metric,
                                                                        double value);

/* Records one observation in a histogram; UNSUPPORTED for other kinds.
 * Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *TRITONSERVER_MetricObserve(struct TRITONSERVER_Metric *metric,
                                                                            double value);

/* Kind of a metric (that of its family). Thread: any. */
TRITONSERVER_DECLSPEC struct TRITONSERVER_Error *TRITONSERVER_GetMetricKind(struct TRITONSERVER_Metric *metric,
                                                                            TRITONSERVER_MetricKind *kind);

#ifdef __cplusplus
}
#endif

#endif /* TRITON_CORE_TRITONSERVER_H */
