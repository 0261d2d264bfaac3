/*
 * Nereid: backend API (TRITONBACKEND_*), source-compatible with Triton's
 * tritonbackend.h at API version 1.19.
 *
 * Two kinds of functions live here:
 *  - functions the server implements and backends call (marked
 *    TRITONBACKEND_DECLSPEC), and
 *  - functions a backend implements and the server looks up with dlsym
 *    (marked TRITONBACKEND_ISPEC), listed in the last two sections.
 *
 * The conventions of tritonserver.h apply: NULL means success, a returned
 * error belongs to the caller, a failed call changes nothing, and pointers
 * returned through out-parameters are borrowed from the object they came
 * from. Thread rules used below:
 *  - "Thread: any" - any thread, any time while the object is alive.
 *  - "Thread: any, one caller per X" - calls on the same X must not overlap.
 *  - "Thread: execute" - only while the backend owns the request, i.e.
 *    from TRITONBACKEND_ModelInstanceExecute or any thread it hands the
 *    request to, until TRITONBACKEND_RequestRelease.
 */
#ifndef TRITON_CORE_TRITONBACKEND_H
#define TRITON_CORE_TRITONBACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "triton/core/tritonserver.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * TRITONBACKEND_DECLSPEC decorates functions the server exports;
 * TRITONBACKEND_ISPEC decorates functions a backend exports. On GCC/Clang
 * both force default visibility so the symbols stay visible when either
 * side is built with -fvisibility=hidden.
 */
#ifndef TRITONBACKEND_DECLSPEC
#if defined(_MSC_VER)
#ifdef _COMPILING_TRITONBACKEND
#define TRITONBACKEND_DECLSPEC __declspec(dllexport)
#else
#define TRITONBACKEND_DECLSPEC __declspec(dllimport)
#endif
#elif defined(__GNUC__)
#define TRITONBACKEND_DECLSPEC __attribute__((__visibility__("default")))
#else
#define TRITONBACKEND_DECLSPEC
#endif
#endif

#ifndef TRITONBACKEND_ISPEC
#if defined(_MSC_VER)
#ifdef _COMPILING_TRITONBACKEND
#define TRITONBACKEND_ISPEC __declspec(dllimport)
#else
#define TRITONBACKEND_ISPEC __declspec(dllexport)
#endif
#elif defined(__GNUC__)
#define TRITONBACKEND_ISPEC __attribute__((__visibility__("default")))
#else
#define TRITONBACKEND_ISPEC
#endif
#endif

/* Opaque handles (never defined publicly). The typedefs declare the struct
 * tags and make the bare names valid in C. */
typedef struct TRITONBACKEND_MemoryManager TRITONBACKEND_MemoryManager;
typedef struct TRITONBACKEND_Input TRITONBACKEND_Input;
typedef struct TRITONBACKEND_Output TRITONBACKEND_Output;
typedef struct TRITONBACKEND_State TRITONBACKEND_State;
typedef struct TRITONBACKEND_Request TRITONBACKEND_Request;
typedef struct TRITONBACKEND_ResponseFactory TRITONBACKEND_ResponseFactory;
typedef struct TRITONBACKEND_Response TRITONBACKEND_Response;
typedef struct TRITONBACKEND_Backend TRITONBACKEND_Backend;
typedef struct TRITONBACKEND_Model TRITONBACKEND_Model;
typedef struct TRITONBACKEND_ModelInstance TRITONBACKEND_ModelInstance;
typedef struct TRITONBACKEND_BackendAttribute TRITONBACKEND_BackendAttribute;
typedef struct TRITONBACKEND_Batcher TRITONBACKEND_Batcher;
typedef struct TRITONBACKEND_ModelInstanceResponseStatistics TRITONBACKEND_ModelInstanceResponseStatistics;

/* ------------------------------------------------------------------------
 * API version
 *
 * A backend built against MAJOR.MINOR runs on a server reporting the same
 * MAJOR and a MINOR at least as large; backends usually check this in
 * TRITONBACKEND_Initialize.
 * ------------------------------------------------------------------------ */

#define TRITONBACKEND_API_VERSION_MAJOR 1
#define TRITONBACKEND_API_VERSION_MINOR 19

/* Writes the backend API version the server implements. Thread: any. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_ApiVersion(uint32_t *major, uint32_t *minor);

/* How a backend's or model's files are made available. FILESYSTEM: as a
 * local directory path. */
typedef enum TRITONBACKEND_artifacttype_enum { TRITONBACKEND_ARTIFACT_FILESYSTEM } TRITONBACKEND_ArtifactType;

/* ------------------------------------------------------------------------
 * Memory manager (server-managed pools usable by backends)
 * ------------------------------------------------------------------------ */

/* Allocates `byte_size` bytes of `memory_type` on device `memory_type_id`.
 * UNSUPPORTED means that type/id can never be served; UNAVAILABLE means
 * not right now. The caller owns *buffer and returns it with
 * TRITONBACKEND_MemoryManagerFree. Thread: any. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *
TRITONBACKEND_MemoryManagerAllocate(TRITONBACKEND_MemoryManager *manager, void **buffer,
                                    const TRITONSERVER_MemoryType memory_type, const int64_t memory_type_id,
                                    const uint64_t byte_size);

/* Returns a buffer from TRITONBACKEND_MemoryManagerAllocate; type and id
 * must be the ones used to allocate it. Thread: any. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_MemoryManagerFree(TRITONBACKEND_MemoryManager *manager,
                                                                           void *buffer,
                                                                           const TRITONSERVER_MemoryType memory_type,
                                                                           const int64_t memory_type_id);

/* ------------------------------------------------------------------------
 * Inputs (borrowed from their request; valid until it is released)
 * ------------------------------------------------------------------------ */

/* Describes an input; each out-pointer may be NULL to skip it. *byte_size
 * is the data actually supplied, which the backend must check against the
 * shape. *buffer_count says how many chunks TRITONBACKEND_InputBuffer can
 * return. All results borrowed. Thread: execute. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_InputProperties(TRITONBACKEND_Input *input, const char **name,
                                                                         TRITONSERVER_DataType *datatype,
                                                                         const int64_t **shape, uint32_t *dims_count,
                                                                         uint64_t *byte_size, uint32_t *buffer_count);

/* Like TRITONBACKEND_InputProperties but for the data supplied for host
 * policy `host_policy_name`, falling back to the plain data when there is
 * none (or when the name is NULL). Thread: execute. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *
TRITONBACKEND_InputPropertiesForHostPolicy(TRITONBACKEND_Input *input, const char *host_policy_name, const char **name,
                                           TRITONSERVER_DataType *datatype, const int64_t **shape, uint32_t *dims_count,
                                           uint64_t *byte_size, uint32_t *buffer_count);

/* Chunk `index` (< buffer_count) of the input's data, in place (no copy).
 * memory_type/memory_type_id give the preferred placement in and the
 * actual one out. *buffer is borrowed, read-only, valid until the request
 * is released. Thread: execute. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_InputBuffer(TRITONBACKEND_Input *input, const uint32_t index,
                                                                     const void **buffer, uint64_t *buffer_byte_size,
                                                                     TRITONSERVER_MemoryType *memory_type,
                                                                     int64_t *memory_type_id);

/* Like TRITONBACKEND_InputBuffer for the host-policy-specific data (with
 * the same fallback as InputPropertiesForHostPolicy). Thread: execute. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *
TRITONBACKEND_InputBufferForHostPolicy(TRITONBACKEND_Input *input, const char *host_policy_name, const uint32_t index,
                                       const void **buffer, uint64_t *buffer_byte_size,
                                       TRITONSERVER_MemoryType *memory_type, int64_t *memory_type_id);

/* Chunk `index` of the input together with its attributes object. Both
 * borrowed from the input; do not modify or free. Thread: execute. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *
TRITONBACKEND_InputBufferAttributes(TRITONBACKEND_Input *input, const uint32_t index, const void **buffer,
                                    TRITONSERVER_BufferAttributes **buffer_attributes);

/* ------------------------------------------------------------------------
 * Outputs (borrowed from their response; valid until it is sent/deleted)
 * ------------------------------------------------------------------------ */

/* Gets a writable buffer of `buffer_byte_size` bytes for the output's data,
 * obtained from the client's response allocator; call once per output.
 * memory_type/memory_type_id: preferred placement in, actual out. The
 * buffer belongs to the response. Thread: any, one caller per response. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_OutputBuffer(TRITONBACKEND_Output *output, void **buffer,
                                                                      const uint64_t buffer_byte_size,
                                                                      TRITONSERVER_MemoryType *memory_type,
                                                                      int64_t *memory_type_id);

/* Attributes of the buffer returned by TRITONBACKEND_OutputBuffer (call
 * that first). Borrowed from the output. Thread: any, one caller per
 * response. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *
TRITONBACKEND_OutputBufferAttributes(TRITONBACKEND_Output *output, TRITONSERVER_BufferAttributes **buffer_attributes);

/* ------------------------------------------------------------------------
 * Requests
 *
 * A backend receives requests in TRITONBACKEND_ModelInstanceExecute and
 * owns them until it calls TRITONBACKEND_RequestRelease. Everything
 * returned here is borrowed and becomes invalid at release.
 * ------------------------------------------------------------------------ */

/* Request id, or NULL/"" when the client gave none. Thread: execute. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_RequestId(TRITONBACKEND_Request *request, const char **id);

/* Whether the client or server asked to cancel this request; a backend
 * should then stop early and answer with a CANCELLED error.
 * Thread: execute. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_RequestIsCancelled(TRITONBACKEND_Request *request,
                                                                            bool *is_cancelled);

/* Same question through a response factory, usable after the request has
 * been released. Thread: any while the factory exists. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *
TRITONBACKEND_ResponseFactoryIsCancelled(TRITONBACKEND_ResponseFactory *factory, bool *is_cancelled);

/* Numeric correlation id (0 = none); fails if the id is a string.
 * Thread: execute. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_RequestCorrelationId(TRITONBACKEND_Request *request,
                                                                              uint64_t *id);

/* Timeout the client set for the request in microseconds (0 = none).
 * Thread: execute. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *
TRITONBACKEND_InferenceRequestTimeoutMicroseconds(TRITONBACKEND_Request *request, uint64_t *timeout);

/* String correlation id ("" = none); fails if the id is numeric. Borrowed.
 * Thread: execute. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_RequestCorrelationIdString(TRITONBACKEND_Request *request,
                                                                                    const char **id);

/* TRITONSERVER_RequestFlag bits of the request (sequence start/end).
 * Thread: execute. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_RequestFlags(TRITONBACKEND_Request *request, uint32_t *flags);

/* Number of request parameters. Thread: execute. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_RequestParameterCount(TRITONBACKEND_Request *request,
                                                                               uint32_t *count);

/* Parameter `index` (< count; order is per request, not stable across
 * requests). *vvalue points to a string, int64_t, bool or double according
 * to *type. Borrowed. Thread: execute. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_RequestParameter(TRITONBACKEND_Request *request,
                                                                          const uint32_t index, const char **key,
                                                                          TRITONSERVER_ParameterType *type,
                                                                          const void **vvalue);

/* Number of inputs in the request. Thread: execute. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_RequestInputCount(TRITONBACKEND_Request *request,
                                                                           uint32_t *count);

/* Name of input `index` (< count). Borrowed. Thread: execute. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *
TRITONBACKEND_RequestInputName(TRITONBACKEND_Request *request, const uint32_t index, const char **input_name);

/* Input called `name`; NOT_FOUND if absent. Borrowed. Thread: execute. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_RequestInput(TRITONBACKEND_Request *request, const char *name,
                                                                      TRITONBACKEND_Input **input);

/* Input `index` (< count; order is per request, not stable across
 * requests). Borrowed. Thread: execute. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *
TRITONBACKEND_RequestInputByIndex(TRITONBACKEND_Request *request, const uint32_t index, TRITONBACKEND_Input **input);

/* Number of outputs the client asked for. Thread: execute. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_RequestOutputCount(TRITONBACKEND_Request *request,
                                                                            uint32_t *count);

/* Name of requested output `index` (< count). Borrowed. Thread: execute. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *
TRITONBACKEND_RequestOutputName(TRITONBACKEND_Request *request, const uint32_t index, const char **output_name);

/* Asks the client's allocator where output `name` would be placed
 * (`name`/`byte_size` may be NULL when unknown). Advisory only;
 * UNAVAILABLE when the allocator cannot say. Thread: execute. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *
TRITONBACKEND_RequestOutputBufferProperties(TRITONBACKEND_Request *request, const char *name, size_t *byte_size,
                                            TRITONSERVER_MemoryType *memory_type, int64_t *memory_type_id);

/* Gives the request back to the server (TRITONSERVER_RequestReleaseFlag:
 * ALL, or RESCHEDULE to run it again). On success the backend must not
 * touch the request or anything borrowed from it again; on error it still
 * owns the request. Thread: execute. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_RequestRelease(TRITONBACKEND_Request *request,
                                                                        uint32_t release_flags);

/* Trace attached to the request, or NULL when it is not traced. Borrowed.
 * Thread: execute. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_RequestTrace(TRITONBACKEND_Request *request,
                                                                      TRITONSERVER_InferenceTrace **trace);

/* ------------------------------------------------------------------------
 * Response factories (send responses after the request is released;
 * required for decoupled models)
 * ------------------------------------------------------------------------ */

/* Creates a factory bound to `request`'s response callback. The backend
 * owns *factory, which outlives the request, and deletes it when done.
 * Thread: execute. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_ResponseFactoryNew(TRITONBACKEND_ResponseFactory **factory,
                                                                            TRITONBACKEND_Request *request);

/* Frees a factory; responses already made from it are unaffected.
 * Thread: any, one caller per factory. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_ResponseFactoryDelete(TRITONBACKEND_ResponseFactory *factory);

/* Delivers only flags (usually COMPLETE_FINAL) to the client, with no
 * response object. Thread: any, one caller per factory. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *
TRITONBACKEND_ResponseFactorySendFlags(TRITONBACKEND_ResponseFactory *factory, const uint32_t send_flags);

/* ------------------------------------------------------------------------
 * Responses
 *
 * For one request, create a response and all of its outputs and output
 * buffers before creating the next response; outputs of one response are
 * created one at a time. Responses of different requests may be built in
 * parallel. Created responses may be sent in any order, or deleted.
 * ------------------------------------------------------------------------ */

/* Creates a response for `request`. The backend owns *response until it
 * sends or deletes it. Thread: execute. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_ResponseNew(TRITONBACKEND_Response **response,
                                                                     TRITONBACKEND_Request *request);

/* Creates a response through a factory; works after the request was
 * released. The backend owns *response until it sends or deletes it.
 * Thread: any, one caller per factory. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_ResponseNewFromFactory(TRITONBACKEND_Response **response,
                                                                                TRITONBACKEND_ResponseFactory *factory);

/* Discards an unsent response and its outputs. Thread: any, one caller per
 * response. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_ResponseDelete(TRITONBACKEND_Response *response);

/* Adds a string parameter to the response (name and value copied).
 * Thread: any, one caller per response. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *
TRITONBACKEND_ResponseSetStringParameter(TRITONBACKEND_Response *response, const char *name, const char *value);

/* Adds an integer parameter (name copied). Thread: any, one caller per
 * response. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_ResponseSetIntParameter(TRITONBACKEND_Response *response,
                                                                                 const char *name, const int64_t value);

/* Adds a boolean parameter (name copied). Thread: any, one caller per
 * response. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_ResponseSetBoolParameter(TRITONBACKEND_Response *response,
                                                                                  const char *name, const bool value);

/* Adds a double parameter (name copied). Thread: any, one caller per
 * response. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *
TRITONBACKEND_ResponseSetDoubleParameter(TRITONBACKEND_Response *response, const char *name, const double value);

/* Adds output `name` with its type and shape (copied) to the response;
 * *output is borrowed from the response. Thread: any, one caller per
 * response. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *
TRITONBACKEND_ResponseOutput(TRITONBACKEND_Response *response, TRITONBACKEND_Output **output, const char *name,
                             const TRITONSERVER_DataType datatype, const int64_t *shape, const uint32_t dims_count);

/* Sends the response with TRITONSERVER_ResponseCompleteFlag bits, failing
 * it with `error` if non-NULL. Always consumes `response`, even on failure.
 * `error` is only read: the caller still owns and deletes it. Thread: any,
 * one caller per response. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *
TRITONBACKEND_ResponseSend(TRITONBACKEND_Response *response, const uint32_t send_flags, TRITONSERVER_Error *error);

/* ------------------------------------------------------------------------
 * Implicit sequence state (sequence batcher "state" entries)
 * ------------------------------------------------------------------------ */

/* Creates the next value of state `name` (declared in the model's sequence
 * batching config) for `request`'s sequence. *state is owned by the
 * request and valid until TRITONBACKEND_StateUpdate or release. Fails when
 * the model has no such state. Thread: execute. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_StateNew(TRITONBACKEND_State **state,
                                                                  TRITONBACKEND_Request *request, const char *name,
                                                                  const TRITONSERVER_DataType datatype,
                                                                  const int64_t *shape, const uint32_t dims_count);

/* Commits `state` as the sequence's value for its next request; `state`
 * and its buffer are invalid afterwards. Without this call the state keeps
 * its previous value. Thread: execute. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_StateUpdate(TRITONBACKEND_State *state);

/* Gets a writable buffer of `buffer_byte_size` bytes for the state's data
 * (fill it before StateUpdate). Placement: preferred in, actual out. Owned
 * by the state. Thread: execute. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_StateBuffer(TRITONBACKEND_State *state, void **buffer,
                                                                     const uint64_t buffer_byte_size,
                                                                     TRITONSERVER_MemoryType *memory_type,
                                                                     int64_t *memory_type_id);

/* Attributes of the state's buffer; borrowed from the state.
 * Thread: execute. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *
TRITONBACKEND_StateBufferAttributes(TRITONBACKEND_State *state, TRITONSERVER_BufferAttributes **buffer_attributes);

/* ------------------------------------------------------------------------
 * Backend object (one per loaded backend library)
 * ------------------------------------------------------------------------ */

/* BLOCKING: Execute on an instance returns only when that instance can take
 * another batch (the default). DEVICE_BLOCKING: the server waits for an
 * instance's Execute to return before calling Execute on another instance
 * of the same device. */
typedef enum TRITONBACKEND_execpolicy_enum {
  TRITONBACKEND_EXECUTION_BLOCKING,
  TRITONBACKEND_EXECUTION_DEVICE_BLOCKING
} TRITONBACKEND_ExecutionPolicy;

/* Name of the backend; borrowed from it. Thread: any. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_BackendName(TRITONBACKEND_Backend *backend, const char **name);

/* Backend configuration as JSON, {"cmdline":{"<setting>":"<value>",...}}.
 * The message is owned by the server: do not delete it. Thread: any. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_BackendConfig(TRITONBACKEND_Backend *backend,
                                                                       TRITONSERVER_Message **backend_config);

/* Current execution policy (default BLOCKING). Thread: any. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_BackendExecutionPolicy(TRITONBACKEND_Backend *backend,
                                                                                TRITONBACKEND_ExecutionPolicy *policy);

/* Chooses the execution policy; only honoured when called from
 * TRITONBACKEND_Initialize, and sequence-batched models always use
 * BLOCKING. Thread: inside TRITONBACKEND_Initialize. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *
TRITONBACKEND_BackendSetExecutionPolicy(TRITONBACKEND_Backend *backend, TRITONBACKEND_ExecutionPolicy policy);

/* Where the backend's files are: for FILESYSTEM, *location is the
 * directory holding the shared library. Borrowed. Thread: any. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_BackendArtifacts(TRITONBACKEND_Backend *backend,
                                                                          TRITONBACKEND_ArtifactType *artifact_type,
                                                                          const char **location);

/* Memory manager the backend may allocate from; borrowed, lives as long
 * as the backend. Thread: any. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_BackendMemoryManager(TRITONBACKEND_Backend *backend,
                                                                              TRITONBACKEND_MemoryManager **manager);

/* Backend-defined state pointer (NULL if never set). The server never
 * interprets or frees it. Thread: any. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_BackendState(TRITONBACKEND_Backend *backend, void **state);

/* Stores a backend-defined state pointer; the backend keeps ownership.
 * Thread: any; the backend synchronizes with its own readers. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_BackendSetState(TRITONBACKEND_Backend *backend, void *state);

/* ------------------------------------------------------------------------
 * Model object (one per loaded model version)
 * ------------------------------------------------------------------------ */

/* Model name; borrowed. Thread: any. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_ModelName(TRITONBACKEND_Model *model, const char **name);

/* Model version number. Thread: any. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_ModelVersion(TRITONBACKEND_Model *model, uint64_t *version);

/* Where the model's files are: for FILESYSTEM, *location is the model's
 * directory in the repository. Borrowed. Thread: any. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_ModelRepository(TRITONBACKEND_Model *model,
                                                                         TRITONBACKEND_ArtifactType *artifact_type,
                                                                         const char **location);

/* The model's (normalized) configuration as JSON in format
 * `config_version` (only 1 exists). Available from ModelInitialize on.
 * The caller owns *model_config (TRITONSERVER_MessageDelete). Thread: any. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_ModelConfig(TRITONBACKEND_Model *model,
                                                                     const uint32_t config_version,
                                                                     TRITONSERVER_Message **model_config);

/* Whether the backend is expected to complete a partial configuration
 * (inputs, outputs, max_batch_size) and report it with
 * TRITONBACKEND_ModelSetConfig. Thread: any. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_ModelAutoCompleteConfig(TRITONBACKEND_Model *model,
                                                                                 bool *auto_complete_config);

/* Replaces the model config with `model_config` (JSON, format 1); only
 * inputs, outputs, max_batch_size and an unset scheduling choice are taken.
 * Does not take ownership of the message. Re-read the result with
 * TRITONBACKEND_ModelConfig. Thread: inside TRITONBACKEND_ModelInitialize
 * only. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_ModelSetConfig(TRITONBACKEND_Model *model,
                                                                        const uint32_t config_version,
                                                                        TRITONSERVER_Message *model_config);

/* Server serving the model; borrowed (valid while the model is loaded), so
 * backends can issue nested inference. Thread: any. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_ModelServer(TRITONBACKEND_Model *model,
                                                                     TRITONSERVER_Server **server);

/* Backend implementing the model; borrowed. Thread: any. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_ModelBackend(TRITONBACKEND_Model *model,
                                                                      TRITONBACKEND_Backend **backend);

/* Backend-defined per-model state pointer (NULL if never set); never
 * interpreted or freed by the server. Thread: any. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_ModelState(TRITONBACKEND_Model *model, void **state);

/* Stores the per-model state pointer; the backend keeps ownership and
 * frees it in ModelFinalize. Thread: any; the backend synchronizes. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_ModelSetState(TRITONBACKEND_Model *model, void *state);

/* Reports memory held by the model itself: `usage_size` entries, one per
 * memory type/device, each giving total bytes. The array is read during
 * the call only. Thread: between ModelInitialize and ModelFinalize. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_ModelReportMemoryUsage(TRITONBACKEND_Model *model,
                                                                                TRITONSERVER_BufferAttributes **usage,
                                                                                uint32_t usage_size);

/* ------------------------------------------------------------------------
 * Model instance object (one per instance of each instance_group)
 * ------------------------------------------------------------------------ */

/* Instance name (e.g. "<model>_0_0"); borrowed. Thread: any. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_ModelInstanceName(TRITONBACKEND_ModelInstance *instance,
                                                                           const char **name);

/* Instance kind (CPU, GPU, MODEL). Thread: any. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_ModelInstanceKind(TRITONBACKEND_ModelInstance *instance,
                                                                           TRITONSERVER_InstanceGroupKind *kind);

/* Device id of the instance (0 for CPU). Thread: any. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_ModelInstanceDeviceId(TRITONBACKEND_ModelInstance *instance,
                                                                               int32_t *device_id);

/* Host policy of the instance as JSON, {"<policy>":{"<setting>":"<value>"}}.
 * The message is owned by the server: do not delete it. Thread: any. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_ModelInstanceHostPolicy(TRITONBACKEND_ModelInstance *instance,
                                                                                 TRITONSERVER_Message **host_policy);

/* Whether the instance is passive (loaded but never scheduled).
 * Thread: any. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_ModelInstanceIsPassive(TRITONBACKEND_ModelInstance *instance,
                                                                                bool *is_passive);

/* Number of optimization profiles configured for the instance.
 * Thread: any. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *
TRITONBACKEND_ModelInstanceProfileCount(TRITONBACKEND_ModelInstance *instance, uint32_t *count);

/* Name of profile `index` (< count); borrowed. Thread: any. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_ModelInstanceProfileName(TRITONBACKEND_ModelInstance *instance,
                                                                                  const uint32_t index,
                                                                                  const char **profile_name);

/* Number of secondary devices configured for the instance. Thread: any. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *
TRITONBACKEND_ModelInstanceSecondaryDeviceCount(TRITONBACKEND_ModelInstance *instance, uint32_t *count);

/* Kind name and id of secondary device `index` (< count); *kind borrowed.
 * Thread: any. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *
TRITONBACKEND_ModelInstanceSecondaryDeviceProperties(TRITONBACKEND_ModelInstance *instance, uint32_t index,
                                                     const char **kind, int64_t *id);

/* Model the instance belongs to; borrowed. Thread: any. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_ModelInstanceModel(TRITONBACKEND_ModelInstance *instance,
                                                                            TRITONBACKEND_Model **model);

/* Backend-defined per-instance state pointer (NULL if never set); never
 * interpreted or freed by the server. Thread: any. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_ModelInstanceState(TRITONBACKEND_ModelInstance *instance,
                                                                            void **state);

/* Stores the per-instance state pointer; the backend keeps ownership and
 * frees it in ModelInstanceFinalize. Thread: any; the backend
 * synchronizes. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_ModelInstanceSetState(TRITONBACKEND_ModelInstance *instance,
                                                                               void *state);

/* Reports memory held by this instance (same format as
 * TRITONBACKEND_ModelReportMemoryUsage; array read during the call only).
 * Thread: between ModelInstanceInitialize and ModelInstanceFinalize. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *
TRITONBACKEND_ModelInstanceReportMemoryUsage(TRITONBACKEND_ModelInstance *instance,
                                             TRITONSERVER_BufferAttributes **usage, uint32_t usage_size);

/* Records per-request statistics. With `success` true the four steady-clock
 * timestamps (ns: exec start, compute start, compute end, exec end) must be
 * non-zero; with false they are ignored. Must be called before the request
 * is released. Thread: execute. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *
TRITONBACKEND_ModelInstanceReportStatistics(TRITONBACKEND_ModelInstance *instance, TRITONBACKEND_Request *request,
                                            const bool success, const uint64_t exec_start_ns,
                                            const uint64_t compute_start_ns, const uint64_t compute_end_ns,
                                            const uint64_t exec_end_ns);

/* Creates an empty per-response statistics record (all fields zero/NULL).
 * The caller owns *response_statistics and frees it with
 * TRITONBACKEND_ModelInstanceResponseStatisticsDelete. Thread: any. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *
TRITONBACKEND_ModelInstanceResponseStatisticsNew(TRITONBACKEND_ModelInstanceResponseStatistics **response_statistics);

/* Frees a statistics record; objects it points to are not touched.
 * Thread: any, one caller per record. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *
TRITONBACKEND_ModelInstanceResponseStatisticsDelete(TRITONBACKEND_ModelInstanceResponseStatistics *response_statistics);

/* Sets the instance the response is accounted to (borrowed). Thread: any,
 * one caller per record. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_ModelInstanceResponseStatisticsSetModelInstance(
    TRITONBACKEND_ModelInstanceResponseStatistics *response_statistics, TRITONBACKEND_ModelInstance *model_instance);

/* Sets the factory the response was sent through (borrowed; identifies
 * the request and the response's index within it). Thread: any, one caller
 * per record. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_ModelInstanceResponseStatisticsSetResponseFactory(
    TRITONBACKEND_ModelInstanceResponseStatistics *response_statistics,
    TRITONBACKEND_ResponseFactory *response_factory);

/* Sets when work on this response began (steady-clock ns). Thread: any,
 * one caller per record. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_ModelInstanceResponseStatisticsSetResponseStart(
    TRITONBACKEND_ModelInstanceResponseStatistics *response_statistics, uint64_t response_start);

/* Sets when output extraction began (steady-clock ns); 0 marks a response
 * that carried no outputs. Thread: any, one caller per record. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_ModelInstanceResponseStatisticsSetComputeOutputStart(
    TRITONBACKEND_ModelInstanceResponseStatistics *response_statistics, uint64_t compute_output_start);

/* Sets when the response was finished (steady-clock ns). Thread: any, one
 * caller per record. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_ModelInstanceResponseStatisticsSetResponseEnd(
    TRITONBACKEND_ModelInstanceResponseStatistics *response_statistics, uint64_t response_end);

/* Sets the error the response was sent with (NULL = success). The error is
 * not taken: the caller keeps it alive until the report is made and then
 * deletes it. Thread: any, one caller per record. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_ModelInstanceResponseStatisticsSetError(
    TRITONBACKEND_ModelInstanceResponseStatistics *response_statistics, TRITONSERVER_Error *error);

/* Adds one decoupled response, described by `response_statistics` (read
 * only, still owned by the caller), to the instance's response statistics.
 * Call after TRITONBACKEND_ResponseSend (or in place of it for an empty
 * response). Thread: any while the factory exists. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_ModelInstanceReportResponseStatistics(
    const TRITONBACKEND_ModelInstanceResponseStatistics *response_statistics);

/* Records statistics for one executed batch; `batch_size` is the sum of the
 * batch sizes of its requests. Timestamps are non-zero steady-clock ns.
 * Thread: inside TRITONBACKEND_ModelInstanceExecute (or its helpers). */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *
TRITONBACKEND_ModelInstanceReportBatchStatistics(TRITONBACKEND_ModelInstance *instance, const uint64_t batch_size,
                                                 const uint64_t exec_start_ns, const uint64_t compute_start_ns,
                                                 const uint64_t compute_end_ns, const uint64_t exec_end_ns);

/* ------------------------------------------------------------------------
 * Entry points a backend implements
 *
 * The server looks these up by name in the backend library. Only
 * TRITONBACKEND_ModelInstanceExecute is required; the others are optional.
 * An error returned by one of them is owned (and deleted) by the server.
 * ------------------------------------------------------------------------ */

/* Called once when the backend library is loaded, before any model uses
 * it; set the execution policy and backend state here. A failure rejects
 * the backend. Thread: a server loader thread. */
TRITONBACKEND_ISPEC TRITONSERVER_Error *TRITONBACKEND_Initialize(TRITONBACKEND_Backend *backend);

/* Called once before the backend is unloaded (at process exit for
 * Nereid); free the backend state and join backend threads.
 * Thread: a server thread; no other entry point runs concurrently. */
TRITONBACKEND_ISPEC TRITONSERVER_Error *TRITONBACKEND_Finalize(TRITONBACKEND_Backend *backend);

/* Called once per model load; validate the config, set model state. A
 * failure makes the model fail to load. Thread: a server loader thread. */
TRITONBACKEND_ISPEC TRITONSERVER_Error *TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model *model);

/* Called once when the model is unloaded, after all its instances are
 * finalized; free model state and join model threads. Thread: a server
 * loader thread. */
TRITONBACKEND_ISPEC TRITONSERVER_Error *TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model *model);

/* Called once per instance after ModelInitialize; set instance state.
 * Serial per backend unless the backend opts into parallel loading.
 * Thread: a server loader thread. */
TRITONBACKEND_ISPEC TRITONSERVER_Error *TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance *instance);

/* Called once per instance before ModelFinalize; free instance state and
 * join instance threads. Thread: a server loader thread. */
TRITONBACKEND_ISPEC TRITONSERVER_Error *TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance *instance);

/* Runs a batch of `request_count` requests (required). Never called twice
 * at once for one instance. On success the backend owns every request and
 * must answer and release each; the `requests` array itself is the
 * server's and is only valid during the call. On error the server keeps the
 * requests and the backend must not touch them. Thread: the instance's
 * execution thread. */
TRITONBACKEND_ISPEC TRITONSERVER_Error *TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance *instance,
                                                                           TRITONBACKEND_Request **requests,
                                                                           const uint32_t request_count);

/* Optional. Asked whenever a client checks the model's readiness
 * (TRITONSERVER_ServerModelIsReady, /v2/models/<name>/ready): NULL when
 * this instance can serve, an error (owned and deleted by the server) when
 * it cannot; one failing instance makes the model not ready. Any thread,
 * also while the instance executes; keep it cheap and non-blocking. */
TRITONBACKEND_ISPEC TRITONSERVER_Error *TRITONBACKEND_ModelInstanceReady(TRITONBACKEND_ModelInstance *instance);

/* Lets the backend fill `backend_attributes` (borrowed) with preferences
 * such as default instance groups. On error all settings made during the
 * call are discarded. May be called several times between Initialize and
 * Finalize. Thread: a server loader thread. */
TRITONBACKEND_ISPEC TRITONSERVER_Error *
TRITONBACKEND_GetBackendAttribute(TRITONBACKEND_Backend *backend, TRITONBACKEND_BackendAttribute *backend_attributes);

/* ------------------------------------------------------------------------
 * Backend attributes (server functions, used from
 * TRITONBACKEND_GetBackendAttribute)
 * ------------------------------------------------------------------------ */

/* Appends a preferred instance group used when a model config has none:
 * `count` instances (0 = server default) on each of the `id_count` devices
 * in `device_ids` (NULL = server default). Earlier calls have higher
 * priority. Thread: inside TRITONBACKEND_GetBackendAttribute. */
TRITONSERVER_DECLSPEC TRITONSERVER_Error *
TRITONBACKEND_BackendAttributeAddPreferredInstanceGroup(TRITONBACKEND_BackendAttribute *backend_attributes,
                                                        const TRITONSERVER_InstanceGroupKind kind, const uint64_t count,
                                                        const uint64_t *device_ids, const uint64_t id_count);

/* Declares whether ModelInstanceInitialize/Finalize are thread-safe so the
 * server may call them concurrently (default false: serial).
 * Thread: inside TRITONBACKEND_GetBackendAttribute. */
TRITONSERVER_DECLSPEC TRITONSERVER_Error *
TRITONBACKEND_BackendAttributeSetParallelModelInstanceLoading(TRITONBACKEND_BackendAttribute *backend_attributes,
                                                              bool enabled);

/* ------------------------------------------------------------------------
 * Custom batching entry points a backend may implement
 *
 * Optional, but all five or none. They add a backend-defined condition to
 * the dynamic batcher's decision to grow a batch.
 * ------------------------------------------------------------------------ */

/* Called at model load to create the backend's read-only batching data in
 * *batcher (owned by the backend, freed in ModelBatcherFinalize).
 * Thread: a server loader thread. */
TRITONBACKEND_ISPEC TRITONSERVER_Error *TRITONBACKEND_ModelBatcherInitialize(TRITONBACKEND_Batcher **batcher,
                                                                             TRITONBACKEND_Model *model);

/* Called at model unload to free what ModelBatcherInitialize created.
 * Thread: a server loader thread. */
TRITONBACKEND_ISPEC TRITONSERVER_Error *TRITONBACKEND_ModelBatcherFinalize(TRITONBACKEND_Batcher *batcher);

/* Decides whether `request` joins the batch being formed; `userp` is the
 * per-batch scratch from ModelBatchInitialize, updated by the backend.
 * The request is only inspected, not owned. Thread: the model's scheduler
 * thread. */
TRITONBACKEND_ISPEC TRITONSERVER_Error *TRITONBACKEND_ModelBatchIncludeRequest(TRITONBACKEND_Request *request,
                                                                               void *userp, bool *should_include);

/* Called when the batcher starts forming a batch; the backend allocates
 * per-batch scratch into *userp. Thread: the model's scheduler thread. */
TRITONBACKEND_ISPEC TRITONSERVER_Error *TRITONBACKEND_ModelBatchInitialize(const TRITONBACKEND_Batcher *batcher,
                                                                           void **userp);

/* Called when the batch is complete; the backend frees `userp`.
 * Thread: the model's scheduler thread. */
TRITONBACKEND_ISPEC TRITONSERVER_Error *TRITONBACKEND_ModelBatchFinalize(void *userp);

/* ------------------------------------------------------------------------
 * Response inspection (server functions)
 * ------------------------------------------------------------------------ */

/* Type and shape of output `name` already added to `response`; NOT_FOUND if
 * absent. All borrowed until the response is sent or deleted. Declared with
 * TRITONBACKEND_DECLSPEC because the server implements it. Thread: any, one
 * caller per response. */
TRITONBACKEND_DECLSPEC TRITONSERVER_Error *TRITONBACKEND_InferenceResponseOutputByName(TRITONBACKEND_Response *response,
                                                                                       const char *name,
                                                                                       TRITONSERVER_DataType *datatype,
                                                                                       const int64_t **shape,
                                                                                       uint64_t *dim_count);

/* Name, type and shape of output `index` (< number of outputs added) of
 * `response`. All borrowed until the response is sent or deleted.
 * Thread: any, one caller per response. */
TRITONSERVER_DECLSPEC TRITONSERVER_Error *
TRITONBACKEND_InferenceResponseOutput(TRITONBACKEND_Response *response, const uint32_t index, const char **name,
                                      TRITONSERVER_DataType *datatype, const int64_t **shape, uint64_t *dim_count);

#ifdef __cplusplus
}
#endif

#endif /* TRITON_CORE_TRITONBACKEND_H */
