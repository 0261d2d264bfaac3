/* Responses and the delivery context they travel through.
 *
 * A delivery is created when a request enters the core and holds everything
 * needed to hand responses to the client: the allocator, the completion
 * callback, the model. Requests, response factories and responses each hold
 * a counted reference, so a decoupled backend may keep sending after the
 * request was released. When the last reference goes and no final response
 * was ever sent, the core sends one itself (an INTERNAL error), so a client
 * never waits forever on a backend that forgot. */
#ifndef NRD_RESPONSE_H
#define NRD_RESPONSE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "triton/core/tritonbackend.h"
#include "parameter.h"
#include "response_cache.h"

/* The cancellation flag of one submission. The delivery and the client's
 * request handle share it: a decoupled backend may release the request long
 * before its last response, and the client may cancel until then. It lives
 * inside its delivery's block (nrd_delivery.cancel_flag), which the last
 * unref of the flag frees; the delivery holds one count on it itself. */
typedef struct nrd_cancel_flag {
  atomic_int refs;
  atomic_bool set;
} nrd_cancel_flag;

/* Drops one reference; NULL is ignored. Any thread. */
void nrd_cancel_flag_unref(nrd_cancel_flag *f);

/* One output tensor; TRITONBACKEND_Output is a pointer to this. The buffer
 * comes from the client's allocator and goes back to it on response delete. */
typedef struct nrd_output {
  struct nrd_delivery *delivery; /* of the owning response (not counted) */
  char *name;
  TRITONSERVER_DataType dtype;
  int64_t *shape;
  uint32_t dims_count;
  void *buffer;
  void *buffer_userp;
  size_t byte_size;
  TRITONSERVER_MemoryType mtype;
  int64_t mtype_id;
  bool allocated;
  struct TRITONSERVER_BufferAttributes *attrs; /* lazily made by OutputBufferAttributes */
} nrd_output;

/* Inline room in a response. A response is made on an instance thread and
 * freed on a front-end thread, where malloc's per-thread caches miss, so
 * the first output pointers and one output with a short name and a few
 * dimensions live inside the response. Outputs never move once made
 * (TRITONBACKEND_Output points at them); only the pointer array does. */
#define NRD_RESPONSE_OUTPUTS_INLINE 2
#define NRD_OUTPUT_NAME_INLINE 32 /* bytes, with the terminating NUL */
#define NRD_OUTPUT_DIMS_INLINE 4

struct TRITONSERVER_InferenceResponse {
  struct nrd_delivery *delivery; /* counted reference */
  TRITONSERVER_Error *error; /* owned; NULL on success */
  nrd_output **outputs; /* outputs_inline until it outgrows it */
  uint32_t n_outputs, cap_outputs;
  nrd_param_list params;
  nrd_output *outputs_inline[NRD_RESPONSE_OUTPUTS_INLINE];
  bool output_inline_used; /* output_inline is taken */
  nrd_output output_inline;
  int64_t output_inline_shape[NRD_OUTPUT_DIMS_INLINE];
  char output_inline_name[NRD_OUTPUT_NAME_INLINE];
};

typedef struct nrd_delivery {
  atomic_int refs;
  TRITONBACKEND_Model *model; /* counted reference */
  const TRITONSERVER_ResponseAllocator *allocator;
  void *alloc_userp;
  TRITONSERVER_InferenceResponseCompleteFn_t response_fn;
  void *response_userp;
  char *request_id; /* NULL or request_id_buf */
  nrd_cancel_flag *cancel; /* counted reference, never NULL: &cancel_flag */
  atomic_bool final_sent;
  atomic_uint responses_sent;
  atomic_uint responses_reported; /* index for response statistics */
  bool decoupled;
  bool no_stats; /* a null request's (sequence batch padding) */
  uint64_t start_ns; /* when the core took the request */
  /* Called with the final response of a non-decoupled model before it is
   * handed to the client (NULL: none). Installed by the server when the
   * response cache missed (nrd_cache_store_final), so that this file does
   * not call the cache. The response must not be changed. */
  void (*on_final)(struct nrd_delivery *d, const TRITONSERVER_InferenceResponse *r);
  /* Set when the response cache missed: the final response is stored
   * under `cache_key`; the lookup took cache_lookup_ns. */
  struct nrd_response_cache *cache;
  nrd_cache_key cache_key;
  uint64_t cache_lookup_ns;
  /* The request's trace (NULL when untraced): responses report their
   * outputs into it, and the delivery hands it back when it is freed. Set
   * before the request is queued, read-only afterwards. */
  TRITONSERVER_InferenceTrace *trace;
  /* One allocation rather than three: the flag and the id share the block,
   * which outlives the delivery's last reference while a request still
   * holds the flag. */
  nrd_cancel_flag cancel_flag;
  /* Room for the first response, taken by whoever makes it first. Most
   * requests get exactly one response, and the delivery is made and freed
   * on the front-end thread, while a response of its own would be made on
   * the instance thread and freed on the front-end thread. Fields from here
   * on are not zeroed at creation. */
  atomic_bool response_inline_taken;
  struct TRITONSERVER_InferenceResponse response_inline;
  char request_id_buf[];
} nrd_delivery;

/* Response factories are thin handles on a delivery. */
struct TRITONBACKEND_ResponseFactory {
  nrd_delivery *delivery; /* counted reference */
};

/* Creates a delivery for a request entering the core: copies the callbacks
 * and id, takes a model reference. Returns NULL on out-of-memory. Any thread. */
nrd_delivery *nrd_delivery_new(TRITONSERVER_InferenceRequest *req);

/* Reference counting; the last unref may send the core's own final error
 * response (see above) and then frees. Any thread. */
void nrd_delivery_ref(nrd_delivery *d);
void nrd_delivery_unref(nrd_delivery *d);

/* Triton's test hook TRITONSERVER_DELAY_RESPONSE_COMPLETION=N (ms): the
 * thread that completes a response (or sends response flags) sleeps N ms
 * before the client's response callback runs. Reads the environment (0,
 * with a warning, when it is not a whole number of ms up to an hour) and
 * sets the delay for the process. Called by TRITONSERVER_ServerNew; any
 * thread. */
void nrd_response_delay_init(void);

/* Sends an error-only final response through `d`, consuming `err`.
 * Does nothing (but free `err`) if a final response was already sent.
 * Any thread. */
void nrd_delivery_send_error(nrd_delivery *d, TRITONSERVER_Error *err);

/* Adds an output to a response with 'shape' taken as is: what
 * TRITONBACKEND_ResponseOutput does after the configuration's output
 * reshape, for callers whose shapes are already the client's (the response
 * cache replaying a stored response). Same ownership and errors; the
 * response's owner thread. */
TRITONSERVER_Error *nrd_response_output_new(TRITONBACKEND_Response *response, TRITONBACKEND_Output **output,
                                            const char *name, TRITONSERVER_DataType datatype, const int64_t *shape,
                                            uint32_t dims_count);

/* Most dimensions an output reshape produces. */
#define NRD_MAX_DIMS 64

#endif
