/*
 * Helpers for writing Nereid backends in C.
 *
 * Everything here is built on the public backend API only
 * (triton/core/tritonbackend.h), so a backend using these helpers still runs
 * in any server that implements that API. The library is static: each backend
 * carries its own copy and no symbol of it is exported from the backend.
 *
 * Naming: every function is nrd_bu_<object>_<verb>. Errors are returned as
 * TRITONSERVER_Error* owned by the caller (delete with
 * TRITONSERVER_ErrorDelete); NULL means success. Unless a function says
 * otherwise, output arguments are left untouched on failure.
 *
 * Threads: no function keeps global state; each may be called from any
 * thread, subject to the backend API's own rules for the objects passed in
 * (for example a request must only be used by one thread at a time).
 */
#ifndef NEREID_BACKEND_UTILS_H
#define NEREID_BACKEND_UTILS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "triton/core/tritonbackend.h"
#include "triton/core/tritonserver.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Marks a backend entry point (TRITONBACKEND_Initialize, ...Execute, ...) as
 * exported. Backends are compiled with -fvisibility=hidden so that only the
 * entry points the server looks up with dlsym are visible.
 */
#define NRD_BACKEND_EXPORT __attribute__((visibility("default")))

#if defined(__GNUC__)
#define NRD_BU_PRINTF(fmt_index, first_arg) __attribute__((format(printf, fmt_index, first_arg)))
#else
#define NRD_BU_PRINTF(fmt_index, first_arg)
#endif

/* ---- errors, logging, time ------------------------------------------- */

/*
 * Creates an error whose message is formatted like printf (messages longer
 * than 1 KiB are truncated). The caller owns the result. Never returns NULL
 * unless the server itself cannot allocate. Any thread.
 */
TRITONSERVER_Error *nrd_bu_error_newf(TRITONSERVER_Error_Code code, const char *fmt, ...) NRD_BU_PRINTF(2, 3);

/*
 * Writes a printf-formatted line to the server log at 'level' if that level
 * is enabled; failures to log are ignored. Any thread.
 */
void nrd_bu_logf(TRITONSERVER_LogLevel level, const char *file, int line, const char *fmt, ...) NRD_BU_PRINTF(4, 5);

/* Logs at 'level' naming the calling source location. */
#define NRD_BU_LOG(level, ...) nrd_bu_logf((level), __FILE__, __LINE__, __VA_ARGS__)

/*
 * Logs the message of 'err' (prefixed by 'what') at error level and deletes
 * 'err'. Does nothing when 'err' is NULL. Use it where an error can only be
 * reported, not returned. Any thread.
 */
void nrd_bu_error_log_and_delete(TRITONSERVER_Error *err, const char *what);

/*
 * Monotonic clock in nanoseconds, the clock the statistics functions
 * (TRITONBACKEND_ModelInstanceReportStatistics, ...) expect. Any thread.
 */
uint64_t nrd_bu_now_ns(void);

/* Sleeps at least 'ms' milliseconds, resuming after signals. Any thread. */
void nrd_bu_sleep_ms(uint64_t ms);

/*
 * Checks that the server's backend API is compatible with the one this
 * backend was compiled against (same major, server minor >= ours). Returns an
 * UNSUPPORTED error naming 'backend_name' otherwise. Call it from
 * TRITONBACKEND_Initialize. Any thread.
 */
TRITONSERVER_Error *nrd_bu_api_version_check(const char *backend_name);

/* ---- configuration ----------------------------------------------------- */

/*
 * Parses a TRITONSERVER_Message holding JSON. On success '*json' is a new
 * reference the caller releases with json_decref. 'what' names the message in
 * errors ("model configuration"). The message stays owned by the caller.
 * Any thread.
 */
TRITONSERVER_Error *nrd_bu_message_parse(TRITONSERVER_Message *message, const char *what, json_t **json);

/*
 * Fetches the model configuration (format version 1) as JSON. On success
 * '*config' is a new reference the caller releases with json_decref; on
 * failure nothing is allocated. Meant for TRITONBACKEND_ModelInitialize and
 * other non-hot paths (it parses the whole configuration). Any thread.
 */
TRITONSERVER_Error *nrd_bu_model_config(TRITONBACKEND_Model *model, json_t **config);

/*
 * Fetches the backend configuration ({"cmdline": {...}}) as JSON. Same
 * ownership as nrd_bu_model_config. Any thread.
 */
TRITONSERVER_Error *nrd_bu_backend_config(TRITONBACKEND_Backend *backend, json_t **config);

/*
 * Returns the value of a "cmdline" setting of a backend configuration
 * (--backend-config=<backend>,<key>=<value>) or NULL when absent or not a
 * string. The string is borrowed from 'backend_config' and lives as long as
 * it does. Any thread.
 */
const char *nrd_bu_backend_setting(const json_t *backend_config, const char *key);

/*
 * Returns the string_value of model configuration parameter 'key'
 * (parameters { key: "k" value { string_value: "v" } }), or NULL when the
 * parameter is absent or malformed. The string is borrowed from 'config' and
 * lives as long as it does. Any thread.
 */
const char *nrd_bu_config_parameter(const json_t *config, const char *key);

/*
 * Reads an integer that may be a JSON integer or a string holding a decimal
 * integer (the model configuration JSON carries 64-bit fields either way).
 * 'what' names the field in the INVALID_ARG error returned for anything
 * else, including out-of-range values and NULL 'value'. Any thread.
 */
TRITONSERVER_Error *nrd_bu_json_int(const json_t *value, const char *what, int64_t *out);

/*
 * Reads model parameter 'key' as a decimal integer within [min, max]. When
 * the parameter is absent '*out' is set to 'dflt'. Errors name the parameter
 * and the offending text. Any thread.
 */
TRITONSERVER_Error *nrd_bu_config_parameter_int(const json_t *config, const char *key, int64_t dflt, int64_t min,
                                                int64_t max, int64_t *out);

/*
 * Reads "max_batch_size" from a model configuration; absent means 0 (no
 * batching). Errors for negative or non-integer values. Any thread.
 */
TRITONSERVER_Error *nrd_bu_config_max_batch_size(const json_t *config, int64_t *out);

/*
 * Reports whether model_transaction_policy.decoupled is true in a model
 * configuration (false when absent). Any thread.
 */
bool nrd_bu_config_decoupled(const json_t *config);

/*
 * Finds the entry named 'name' in the "input" or "output" array ('section')
 * of a model configuration. Returns a borrowed object or NULL. Any thread.
 */
const json_t *nrd_bu_config_tensor(const json_t *config, const char *section, const char *name);

/* ---- model and instance state -------------------------------------------
 *
 * The common layout: ModelInitialize reads the configuration into a settings
 * struct and stores a malloc'ed copy as the model state
 * (nrd_bu_model_state_set); each ModelInstanceInitialize points its instance
 * state at it (nrd_bu_instance_share_model_state) so Execute makes a single
 * lookup (nrd_bu_instance_state); ModelInstanceFinalize clears the instance
 * state; ModelFinalize frees the copy (nrd_bu_model_state_free). 'backend'
 * names the backend in the errors these return. A backend with mutable or
 * per-instance state (locks, threads) manages it itself.
 */

/*
 * Stores a malloc'ed copy of the 'size' bytes at 'settings' as the model
 * state; 'settings' stays the caller's. On failure (UNAVAILABLE
 * "<backend>: out of memory", or the server's error) no state is set and
 * nothing stays allocated. Thread: the ModelInitialize caller.
 */
TRITONSERVER_Error *nrd_bu_model_state_set(TRITONBACKEND_Model *model, const void *settings, size_t size,
                                           const char *backend);

/*
 * Frees the model state with free() (so it must come from malloc, e.g.
 * nrd_bu_model_state_set; NULL is fine) and clears it. When the state cannot
 * be read nothing is freed and that error is returned. Thread: the
 * ModelFinalize caller.
 */
TRITONSERVER_Error *nrd_bu_model_state_free(TRITONBACKEND_Model *model);

/*
 * Sets '*state' to the state of the model 'instance' belongs to, borrowed
 * from the model (valid until ModelFinalize). A NULL state is an INTERNAL
 * error "<backend>: model state missing". Any thread (the model state is
 * set before instances exist and cleared after they are gone).
 */
TRITONSERVER_Error *nrd_bu_instance_model_state(TRITONBACKEND_ModelInstance *instance, const char *backend,
                                                void **state);

/*
 * Makes the instance state point at the model state (borrowed: the
 * instance never frees it), with the errors of nrd_bu_instance_model_state.
 * Thread: the ModelInstanceInitialize caller.
 */
TRITONSERVER_Error *nrd_bu_instance_share_model_state(TRITONBACKEND_ModelInstance *instance, const char *backend);

/*
 * Sets '*state' to the instance state, still owned by whoever set it. A
 * NULL state is an INTERNAL error "<backend>: instance state missing"; the
 * error touches no request, so Execute can return it as is. Thread: the
 * instance thread.
 */
TRITONSERVER_Error *nrd_bu_instance_state(TRITONBACKEND_ModelInstance *instance, const char *backend, void **state);

/* ---- memory ----------------------------------------------------------- */

/*
 * Copies 'bytes' from 'src' (of memory type 'src_type', device 'src_id') to
 * 'dst' (of 'dst_type', 'dst_id'): memcpy between CPU and pinned memory,
 * the NVIDIA driver (opened with dlopen on first need, in the GPU's primary
 * context) when either side is GPU memory; returns when the copy is done.
 * UNSUPPORTED without a driver. Any thread.
 */
TRITONSERVER_Error *nrd_bu_copy(void *dst, TRITONSERVER_MemoryType dst_type, int64_t dst_id, const void *src,
                                TRITONSERVER_MemoryType src_type, int64_t src_id, size_t bytes);

/* ---- request inputs ---------------------------------------------------- */

/*
 * One input tensor of a request with its data made contiguous in CPU memory.
 * 'name' and 'shape' are borrowed from the request. 'data' points either into
 * the request's own buffer (zero copy, 'owned' is NULL) or at 'owned', a
 * malloc'ed copy that nrd_bu_tensor_release frees. Nothing in it may be used
 * after the request is released.
 */
typedef struct nrd_bu_tensor {
  const char *name;
  TRITONSERVER_DataType datatype;
  const int64_t *shape;
  uint32_t dims_count;
  const void *data;
  uint64_t byte_size;
  void *owned;
} nrd_bu_tensor;

/*
 * Fills 'out' for input 'input'. When the input is a single CPU (or pinned)
 * buffer no copy is made; several buffers, or GPU data, are copied into one
 * malloc'ed block owned by 'out' (GPU data with nrd_bu_copy). On failure 'out'
 * holds nothing to release (it is reset). Thread: the thread that owns the
 * request (normally the instance thread inside Execute).
 */
TRITONSERVER_Error *nrd_bu_input_read(TRITONBACKEND_Input *input, nrd_bu_tensor *out);

/*
 * Like nrd_bu_input_read for the input named 'name' of 'request'; a missing
 * input gives an INVALID_ARG error naming it.
 */
TRITONSERVER_Error *nrd_bu_request_input(TRITONBACKEND_Request *request, const char *name, nrd_bu_tensor *out);

/*
 * Frees the copy a tensor may own and resets it. Safe on a reset or zeroed
 * tensor and safe to call twice. Same thread rule as nrd_bu_input_read.
 */
void nrd_bu_tensor_release(nrd_bu_tensor *tensor);

/*
 * Number of elements of a shape (1 for zero dimensions). Returns -1 when a
 * dimension is negative or the product overflows int64. Any thread.
 */
int64_t nrd_bu_shape_elements(const int64_t *shape, uint32_t dims_count);

/*
 * Writes a shape as "[d0,d1,...]" into 'buf' (always NUL-terminated, cut
 * with "..." when 'cap' is too small) and returns 'buf'. Any thread.
 */
const char *nrd_bu_shape_string(const int64_t *shape, uint32_t dims_count, char *buf, size_t cap);

/*
 * The batch size a request adds to TRITONBACKEND_ModelInstanceReportBatch-
 * Statistics for a model that batches (max_batch_size > 0): the first
 * dimension of input 'input_name' (NULL: the request's first input), or 1
 * when that input is missing, unreadable or has no positive first dimension.
 * Thread: the request's owner.
 */
uint64_t nrd_bu_request_batch_size(TRITONBACKEND_Request *request, const char *input_name);

/* ---- responses ----------------------------------------------------------- */

/*
 * Sends one error response with the FINAL flag for 'request' (which is NOT
 * released). 'err' stays owned by the caller. Returns false (after logging)
 * when no response could be sent. Thread: the request's owner.
 */
bool nrd_bu_request_respond_error(TRITONBACKEND_Request *request, TRITONSERVER_Error *err);

/*
 * Answers every request of a batch with an error response carrying the code
 * and message of 'err', reports failed statistics for each when 'instance' is
 * not NULL, then releases all requests (TRITONSERVER_REQUEST_RELEASE_ALL).
 * 'err' is always consumed (deleted), and the requests are always released:
 * after this call the backend owns none of them, so Execute must return NULL.
 * Thread: the Execute caller (instance thread).
 */
void nrd_bu_requests_fail(TRITONBACKEND_ModelInstance *instance, TRITONBACKEND_Request **requests, uint32_t count,
                          TRITONSERVER_Error *err);

/*
 * Releases a request with TRITONSERVER_REQUEST_RELEASE_ALL, logging (not
 * returning) a failure. Thread: the request's owner.
 */
void nrd_bu_request_release(TRITONBACKEND_Request *request);

/* ---- batches -------------------------------------------------------------
 *
 * For a backend that computes a whole Execute batch in one pass: gather an
 * input of every request into one buffer (rows in request order), compute,
 * then scatter each batch output back, one slice of rows per request.
 */

/*
 * One input of a whole batch, contiguous in CPU memory. 'data' points into
 * the single request's own buffer (zero copy, 'owned' NULL), into the
 * caller's buffer, or at 'owned', a malloc'ed block that
 * nrd_bu_batch_input_release frees. Nothing in it may be used after the
 * requests are released.
 */
typedef struct nrd_bu_batch_input {
  const void *data;
  uint64_t byte_size;
  void *owned;
} nrd_bu_batch_input;

/*
 * Gathers input 'name' of requests[0..count) into one buffer, request after
 * request, each request's buffers in order. No copy when there is a single
 * request holding the input in a single host buffer; otherwise the bytes go
 * to 'buffer' when it is not NULL (at least 'buffer_size' bytes, too small
 * is an INVALID_ARG error; it stays the caller's) or to a block owned by
 * 'out'. Shapes are not compared: ragged inputs are simply concatenated.
 * GPU data is copied to host memory (nrd_bu_copy). A request without the
 * input is an error; on error 'out' holds nothing to release. Thread: the Execute caller (owner of the
 * requests).
 */
TRITONSERVER_Error *nrd_bu_batch_input_gather(TRITONBACKEND_Request **requests, uint32_t count, const char *name,
                                              void *buffer, uint64_t buffer_size, nrd_bu_batch_input *out);

/*
 * Frees the block a batch input may own and resets it; safe on a zeroed or
 * released one. Same thread rule as nrd_bu_batch_input_gather.
 */
void nrd_bu_batch_input_release(nrd_bu_batch_input *input);

/*
 * Splits a batch output 'data' ('byte_size' bytes, rows in request order,
 * every row the same size) between responses[0..count): response i gets
 * output 'name' of 'datatype' with 'shape' (dims_count >= 1) whose first
 * dimension is replaced by rows[i], holding its rows[i] rows. A response
 * that fails (output creation, allocation, non-CPU buffer) is sent at once
 * as a FINAL error response and set to NULL in 'responses'; NULL entries
 * are skipped (their rows still count). Returns an error, touching no
 * response, only for arguments that cannot work: BYTES (rows of no fixed
 * size), a 'byte_size' not divisible into the total rows, bad dims.
 * 'data' and 'rows' stay the caller's. Thread: the owner of the responses.
 */
TRITONSERVER_Error *nrd_bu_batch_output_scatter(TRITONBACKEND_Response **responses, uint32_t count, const char *name,
                                                TRITONSERVER_DataType datatype, const int64_t *shape,
                                                uint32_t dims_count, const uint64_t *rows, const void *data,
                                                uint64_t byte_size);

/*
 * Triton's batch inputs (`batch_input` in the model configuration, for
 * ragged batching): a tensor computed from the shape of a source input in
 * each request of the batch.
 */
typedef enum nrd_bu_batch_input_kind {
  NRD_BU_BATCH_ELEMENT_COUNT, /* [requests]: each request's element count */
  NRD_BU_BATCH_ACCUMULATED_ELEMENT_COUNT, /* [requests]: running sums of those */
  NRD_BU_BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO, /* [requests + 1]: 0, then the sums */
  NRD_BU_BATCH_MAX_ELEMENT_COUNT_AS_SHAPE, /* [largest count]: the shape is the value (data zero) */
  NRD_BU_BATCH_ITEM_SHAPE, /* [batch items, rank - 1]: each item's shape without the batch dimension */
  NRD_BU_BATCH_ITEM_SHAPE_FLATTEN /* the same values, one dimension */
} nrd_bu_batch_input_kind;

/* The kind a configuration names (its `kind` string); false when unknown. */
bool nrd_bu_batch_input_kind_from(const char *name, nrd_bu_batch_input_kind *kind);

/*
 * Makes batch input `kind` of `datatype` (TYPE_INT32 or TYPE_FP32) over
 * requests[0..count) from input `source`, as Triton's backend input
 * collector does: its shape in shape[0..*dims) (1 or 2 dimensions) and its
 * values in *data, a malloc'ed block of *byte_size bytes the caller frees
 * (NULL on error). Errors: another datatype, a request without `source`,
 * item shapes of requests whose ranks differ. Thread: the Execute caller.
 */
TRITONSERVER_Error *nrd_bu_batch_input_make(TRITONBACKEND_Request **requests, uint32_t count,
                                            nrd_bu_batch_input_kind kind, TRITONSERVER_DataType datatype,
                                            const char *source, int64_t shape[2], uint32_t *dims, void **data,
                                            size_t *byte_size);

/* Opens a framework's shared library `library` from `backend_dir` (the
 * backend's folder, where the install puts it; skipped when NULL or
 * empty), else by name through the loader's search path, RTLD_NOW |
 * RTLD_LOCAL. Returns the handle (the caller dlcloses it) with the name
 * opened in `path` (path_cap bytes), or NULL with each attempt and
 * dlerror's reason in `tried` (tried_cap bytes, for an error message).
 * Any thread. */
void *nrd_bu_dlopen_beside(const char *backend_dir, const char *library, char *path, size_t path_cap, char *tried,
                           size_t tried_cap);

#ifdef __cplusplus
}
#endif

#endif /* NEREID_BACKEND_UTILS_H */
