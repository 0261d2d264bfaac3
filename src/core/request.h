/* Inference requests: the object behind both TRITONSERVER_InferenceRequest
 * (what a client builds) and TRITONBACKEND_Request (what a backend sees).
 *
 * Ownership: the client owns a request until TRITONSERVER_ServerInferAsync
 * succeeds; from then the core (and, during Execute, the backend) owns it
 * until the release callback hands it back. Input data is never copied: the
 * request keeps the client's pointers, valid until release. */
#ifndef NRD_REQUEST_H
#define NRD_REQUEST_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "triton/core/tritonbackend.h"
#include "parameter.h"
#include "response.h"
#include "stats.h"

struct nrd_delivery;

/* One contiguous piece of an input tensor, owned by the client. */
typedef struct nrd_buffer {
  const void *base;
  size_t size;
  TRITONSERVER_MemoryType mtype;
  int64_t mtype_id;
} nrd_buffer;

/* Inline room for the common small case. A request is built on a front-end
 * thread and its pieces are freed on another, where glibc's per-thread caches
 * miss; a short name, a few dimensions and one buffer therefore live inside
 * the input (and the first inputs and requested outputs inside the request)
 * instead of in their own allocations. Anything larger goes to the heap. */
#define NRD_NAME_INLINE 32 /* bytes, with the terminating NUL */
#define NRD_DIMS_INLINE 4
#define NRD_REQUEST_INPUTS_INLINE 2
#define NRD_REQUEST_OUTPUTS_INLINE 2

/* Bits of nrd_input.inl: which pointers point at the input's own room. */
#define NRD_INL_NAME 1u
#define NRD_INL_SHAPE 2u
#define NRD_INL_BUFS 4u

/* Data of an input given for one host policy
 * (AppendInputDataWithHostPolicy): backends asking for that policy get it
 * instead of the input's own data. */
typedef struct nrd_policy_data {
  char *policy;
  nrd_buffer *bufs;
  uint32_t nbufs;
  uint64_t byte_size;
} nrd_policy_data;

/* A client's CUDA IPC handle for buffer `index` of an input. */
typedef struct nrd_client_ipc {
  uint32_t index;
  unsigned char handle[64]; /* NRD_CUDA_IPC_HANDLE_SIZE */
} nrd_client_ipc;

/* One input tensor. TRITONBACKEND_Input is a pointer to this. Entries of
 * the inputs array may move while the client builds the request (growth,
 * RemoveInput) and when the core appends its inputs before Execute, never
 * while a backend holds them; whoever moves them re-points the inline
 * pointers by the `inl` bits (input_moved in request.c). */
typedef struct nrd_input {
  char *name;
  TRITONSERVER_DataType dtype;
  int64_t *shape; /* as the client gave it */
  uint32_t dims_count;
  int64_t *backend_shape; /* after reshape (heap); NULL when none applies */
  uint32_t backend_dims_count;
  nrd_buffer *bufs;
  uint32_t nbufs, capbufs;
  uint64_t byte_size; /* sum of bufs[i].size */
  bool is_raw; /* added with AddRawInput: shape from the config */
  bool raw_prefixed; /* a raw BYTES input: bufs[0] is raw_len */
  uint32_t raw_len; /* that element's length (little-endian on the hosts we build for) */
  uint8_t inl; /* NRD_INL_* */
  struct TRITONSERVER_BufferAttributes *attrs; /* lazily made by InputBufferAttributes */
  uint32_t n_attrs;
  nrd_policy_data *policies; /* heap; NULL when no data was given per host policy */
  uint32_t n_policies;
  /* CUDA IPC handles the client gave with its buffers
   * (AppendInputDataWithBufferAttributes): what InputBufferAttributes
   * hands the backend for those buffers, as Triton does. Heap; rare. */
  struct nrd_client_ipc *client_ipc;
  uint32_t n_client_ipc;
  nrd_buffer buf_inline;
  int64_t shape_inline[NRD_DIMS_INLINE];
  char name_inline[NRD_NAME_INLINE];
} nrd_input;

struct TRITONSERVER_InferenceRequest {
  TRITONSERVER_Server *server;
  TRITONBACKEND_Model *model; /* counted reference, taken at New */
  int64_t requested_version; /* as given to New (-1: latest) */
  char *id; /* NULL, id_inline or the heap */
  uint32_t flags;
  uint64_t corr_id;
  char *corr_id_str; /* non-NULL when the correlation id is a string */
  uint64_t priority;
  uint64_t timeout_us;

  nrd_input *inputs; /* inputs_inline until it outgrows it */
  uint32_t n_inputs, cap_inputs;
  char **outputs; /* requested output names; outputs_inline at first */
  uint32_t n_outputs, cap_outputs;
  /* Hash indexes of the input and requested output names, made only when
   * a request has many (request.c, NAME_INDEX_MIN), so that adding
   * thousands of names costs linear time, not quadratic; NULL otherwise. */
  struct nrd_name_index *in_index, *out_index;
  nrd_param_list params;

  TRITONSERVER_InferenceRequestReleaseFn_t release_fn;
  void *release_userp;
  const TRITONSERVER_ResponseAllocator *allocator;
  void *alloc_userp;
  TRITONSERVER_InferenceResponseCompleteFn_t response_fn;
  void *response_userp;

  /* Set while the core owns the request (InferAsync .. release). */
  struct nrd_delivery *delivery;
  /* Cancellation flag of the latest submission (counted); kept after the
   * release so Cancel still reaches a decoupled backend's factories.
   * Atomic: the core's own callers (ensembles) may cancel a request while
   * another thread submits it (nrd_request_cancel). */
  struct nrd_cancel_flag *_Atomic cancel;
  /* Set by nrd_request_cancel before the first submission has a flag; the
   * submission starts cancelled. */
  atomic_bool cancel_asked;
  uint64_t batch_size; /* rows in the batch dimension, 0 without one */
  uint64_t queue_start_ns;
  uint64_t deadline_ns; /* 0 = none */
  bool in_flight;
  /* Counted in the model's pending gauge: queued and not yet executing
   * (set at enqueue, cleared by nrd_request_pending_done). */
  bool pending;
  /* The client's trace while in flight (InferAsync .. release); NULL when
   * untraced. The core reports into it and hands it back at release. */
  TRITONSERVER_InferenceTrace *trace;
  /* A Direct sequence batcher's padding (nrd_request_new_null): its own
   * inputs' data, no requested outputs, no statistics, answers dropped. */
  bool is_null;
  /* Made by the core (null requests, model warmup): no statistics. */
  bool no_stats;
  /* An ensemble step or a rescheduled request: never run inline inside
   * another execution (scheduler.c), where only a call the executing
   * model waits for (BLS) may. */
  bool no_nested_inline;
  /* Sequence batcher only (NULL and 0 for every other model): what it
   * attached for this execution, and how many inputs at the end of
   * `inputs` it added (control and state inputs). Both go away before the
   * release callback, so the client gets back the request it built. */
  struct nrd_seq_attach *seq;
  uint32_t n_core_inputs;

  struct TRITONSERVER_InferenceRequest *next; /* scheduler queue link */

  /* Inline room (see NRD_NAME_INLINE); the request itself never moves, so
   * pointers into it stay valid. A requested output name lives in
   * output_names_inline[k] while bit k of output_names_used is set. The
   * room (from inputs_inline on) is not zeroed at New. */
  uint8_t output_names_used;
  nrd_input inputs_inline[NRD_REQUEST_INPUTS_INLINE];
  char *outputs_inline[NRD_REQUEST_OUTPUTS_INLINE];
  char output_names_inline[NRD_REQUEST_OUTPUTS_INLINE][NRD_NAME_INLINE];
  char id_inline[NRD_NAME_INLINE];
};

/* An INVALID_ARG-style error about request `r` with Triton's request
 * prefix: "[request id: <id>] " (or "<id_unknown>" when it has none), then
 * the printf-formatted message. Never NULL (the out-of-memory sentinel on
 * failure); the caller owns the result. The thread that owns the request. */
TRITONSERVER_Error *nrd_request_error(const TRITONSERVER_InferenceRequest *r, TRITONSERVER_Error_Code code,
                                      const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Checks the request against its model's configuration (names, datatypes,
 * shapes, batch size, byte sizes, BYTES framing, requested outputs) and
 * computes batch_size and backend shapes. Errors are INVALID_ARG naming the
 * input. Caller thread; the request is not yet shared. */
TRITONSERVER_Error *nrd_request_validate(TRITONSERVER_InferenceRequest *req);

/* Appends an input the core made (a sequence control or state input) to a
 * core-owned request: `data` (`size` bytes, CPU) must stay valid until the
 * release, which removes the input again. On error nothing is added.
 * The thread that owns the request (instance thread, before Execute). */
TRITONSERVER_Error *nrd_request_add_core_input(TRITONSERVER_InferenceRequest *req, const char *name,
                                               TRITONSERVER_DataType dtype, const int64_t *shape, uint32_t dims,
                                               const void *data, uint64_t size);

/* Removes the inputs added by nrd_request_add_core_input and frees the
 * sequence attachment. Idempotent; the thread that owns the request. */
void nrd_request_detach_core(TRITONSERVER_InferenceRequest *req);

/* A "null" request, as Triton's Direct sequence batcher pads a batch with
 * so that every sequence keeps its batch index: `from`'s client inputs
 * (names, datatypes, shapes, byte sizes; not the core's control and state
 * inputs) over zeroed data, with flags, correlation id and requested
 * outputs all empty (so TRITONBACKEND_RequestOutputCount says 0). It is
 * already in flight: output allocation fails as in Triton, its responses
 * are dropped, it records no statistics, and its release (by the backend,
 * or nrd_request_release) frees it. It holds a model reference and an
 * in-flight count, so an unload waits for it. NULL when out of memory.
 * The thread that owns `from` (instance thread, before Execute). */
TRITONSERVER_InferenceRequest *nrd_request_new_null(const TRITONSERVER_InferenceRequest *from);

/* The request TRITONSERVER_InferenceRequestNew makes once the server found
 * the model: takes the caller's reference on `m` (dropped on failure too);
 * `model_version` is the version asked for (-1: the highest). The caller
 * owns the request (TRITONSERVER_InferenceRequestDelete). Any thread. */
TRITONSERVER_Error *nrd_request_new_for(TRITONSERVER_InferenceRequest **inference_request, TRITONSERVER_Server *server,
                                        TRITONBACKEND_Model *m, int64_t model_version);

/* A request for `m` that the core makes itself (model warmup): like one
 * from TRITONSERVER_InferenceRequestNew, but bound to `m` without looking
 * it up (it need not be in the repository yet); takes a model reference.
 * The caller builds it with the public calls and then starts it with
 * nrd_request_begin_internal. NULL when out of memory. Any thread. */
TRITONSERVER_InferenceRequest *nrd_request_new_internal(TRITONSERVER_Server *server, TRITONBACKEND_Model *m);

/* Validates an internal request and puts it in flight without a
 * scheduler: the caller then hands it to the backend itself. Its
 * responses and release go to its callbacks; it records no statistics.
 * On error it stays the caller's, not in flight. */
TRITONSERVER_Error *nrd_request_begin_internal(TRITONSERVER_InferenceRequest *req);

/* Gives the submission starting on `req` the flag `f` (takes a reference
 * on `f`, drops the one on the previous submission's flag). A cancel asked
 * with nrd_request_cancel before the first submission sets it. The thread
 * that submits `req`. */
void nrd_request_adopt_cancel(TRITONSERVER_InferenceRequest *req, struct nrd_cancel_flag *f);

/* Cancels `req` for a caller inside the core that may race with its
 * submission (an ensemble cancelling its steps): a request not yet
 * submitted starts cancelled. Any thread, while `req` is not deleted. */
void nrd_request_cancel(TRITONSERVER_InferenceRequest *req);

/* Hands a request that the core owns back to its client through the release
 * callback. The delivery reference is dropped first, so responses sent
 * afterwards still reach the client through their own references.
 * Any thread; exactly once per InferAsync. */
void nrd_request_release(TRITONSERVER_InferenceRequest *req, uint32_t flags);

/* Reports the client's inputs (not those the core added) to the request's
 * trace when it asks for tensors; an input in several buffers is joined in
 * a temporary copy. No-op otherwise. The thread that holds the request. */
void nrd_request_trace_inputs(TRITONSERVER_InferenceRequest *req, TRITONSERVER_InferenceTraceActivity activity);

/* Answers a core-owned request with `err` (a final error response, consuming
 * `err`) and releases it, counting the failure under `reason`. Used when the
 * backend's Execute fails, the request timed out or was cancelled, or the
 * model is going away. Any thread. */
void nrd_request_fail(TRITONSERVER_InferenceRequest *req, TRITONSERVER_Error *err, nrd_fail_reason reason);

/* Takes `r` out of its model's pending-request gauge if it is still
 * counted there (it starts executing, or leaves without running). The
 * thread that owns the request. */
void nrd_request_pending_done(TRITONSERVER_InferenceRequest *r);

/* True when the submission `r` is part of was cancelled
 * (TRITONSERVER_InferenceRequestCancel); false when it is not in flight.
 * Inline: schedulers ask for every request they hand out. Any thread. */
static inline bool nrd_request_is_cancelled(const TRITONSERVER_InferenceRequest *r) {
  return r->delivery && atomic_load(&r->delivery->cancel->set);
}

/* Room for one more buffer in `in` (request_validate.c, where the raw
 * input's prefix needs it too); false when out of memory. */
bool nrd_input_bufs_reserve(nrd_input *in);

/* Gives `in` a copy of `name`; on failure (out of memory) the old name
 * stays. The request must not be in flight. */
TRITONSERVER_Error *nrd_input_rename(nrd_input *in, const char *name);

/* Puts `b` (borrowed, like appended data) before the input's other
 * buffers and counts its size. The request must not be in flight. */
TRITONSERVER_Error *nrd_input_prepend(nrd_input *in, nrd_buffer b);

/* The input named `name` through the request's name index (request_names.c),
 * for requests with many inputs; NULL when there is none. Same thread
 * rule as the request. */
nrd_input *nrd_request_find_input_indexed(TRITONSERVER_InferenceRequest *r, const char *name);

/* The input of `r` named `name`, or NULL. Inline: validation looks up
 * every input. Valid until the request's inputs change; the thread that
 * owns the request. */
static inline nrd_input *nrd_request_find_input(TRITONSERVER_InferenceRequest *r, const char *name) {
  if (r->in_index) return nrd_request_find_input_indexed(r, name);
  for (uint32_t i = 0; i < r->n_inputs; i++)
    if (!strcmp(r->inputs[i].name, name)) return &r->inputs[i];
  return NULL;
}

#endif
