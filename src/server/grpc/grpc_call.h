/* One gRPC call (one HTTP/2 stream) as the RPC handlers see it: the
 * contract between the transport (grpc_server.c, grpc_call.c,
 * grpc_stream.c) and the handlers (grpc_rpc.c, grpc_infer.c).
 *
 * Threads: functions marked "loop" run only on the event-loop thread that
 * owns the call's connection; "any" functions may run on core and backend
 * threads. Handlers are always invoked on the loop thread. */
#ifndef NRD_SRV_GRPC_CALL_H
#define NRD_SRV_GRPC_CALL_H

#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grpc_delay.h"
#include "inbox.h"
#include "log_settings.h"
#include "restrict.h"
#include "shm_registry.h"
#include "trace_hook.h"
#include "triton/core/tritonserver.h"

/* gRPC status codes. */
enum {
  NRD_GRPC_OK = 0,
  NRD_GRPC_CANCELLED = 1,
  NRD_GRPC_UNKNOWN = 2,
  NRD_GRPC_INVALID_ARGUMENT = 3,
  NRD_GRPC_DEADLINE_EXCEEDED = 4,
  NRD_GRPC_NOT_FOUND = 5,
  NRD_GRPC_ALREADY_EXISTS = 6,
  NRD_GRPC_RESOURCE_EXHAUSTED = 8,
  NRD_GRPC_UNIMPLEMENTED = 12,
  NRD_GRPC_INTERNAL = 13,
  NRD_GRPC_UNAVAILABLE = 14
};

typedef struct nrd_srv_grpc_call nrd_srv_grpc_call;

/* A unit of work posted to a call's loop. The poster allocates it (any
 * subtype embedding this as first member); run() executes on the loop and
 * owns (frees) the event. */
typedef struct nrd_srv_grpc_event {
  nrd_srv_inbox_item link; /* first: the loop's inbox hands back this address */
  nrd_srv_grpc_call *call; /* a reference the event holds; released after run */
  void (*run)(struct nrd_srv_grpc_event *ev, bool call_open);
  uint64_t due_us; /* set by the post functions: run no earlier (nrd_srv_grpc_now_us); 0: at once */
} nrd_srv_grpc_event;

/* A handler for one method. Unary methods: on_message runs once with the
 * whole request after the client half-closed. Streaming methods: on_message
 * runs per message as it arrives, on_end when the client half-closes.
 * on_cancel runs when the stream goes away before the call finished (RST,
 * connection closed, deadline, shutdown). msg is borrowed for the call's
 * duration only. All run on the loop. */
typedef struct nrd_srv_grpc_method {
  const char *path; /* "/inference.GRPCInferenceService/ModelInfer" */
  bool streaming;
  void (*on_message)(nrd_srv_grpc_call *call, const uint8_t *msg, size_t len);
  void (*on_end)(nrd_srv_grpc_call *call);
  void (*on_cancel)(nrd_srv_grpc_call *call);
  /* Responses may be compressed (--grpc-infer-response-compression-level):
   * the handler passes each framed response through
   * nrd_srv_grpc_call_compress. */
  bool compress_responses;
  nrd_srv_api api; /* its access group (--grpc-restricted-protocol) */
} nrd_srv_grpc_method;

/* The server the call serves. Any thread. */
TRITONSERVER_Server *nrd_srv_grpc_call_server(const nrd_srv_grpc_call *call);

/* True once the front end is shutting down: a stream must start no new
 * request. Loop thread. */
bool nrd_srv_grpc_call_draining(const nrd_srv_grpc_call *call);

/* The shared memory registry and log settings the front end was started
 * with (borrowed: valid while the front end runs; never freed by the
 * caller). Any thread. */
nrd_srv_shm *nrd_srv_grpc_call_shm(const nrd_srv_grpc_call *call);
nrd_srv_log_settings *nrd_srv_grpc_call_log(const nrd_srv_grpc_call *call);
nrd_srv_tracer *nrd_srv_grpc_call_tracer(const nrd_srv_grpc_call *call); /* may be NULL */

/* The request headers --grpc-header-forward-pattern matched: *pairs holds
 * name, value, name, value, ... (borrowed: valid while the call is);
 * returns the number of pairs. Any thread once the headers are in. */
size_t nrd_srv_grpc_call_forwarded(const nrd_srv_grpc_call *call, char *const **pairs);

/* When the message being delivered began to arrive and when it was
 * complete (trace clock); both 0 unless tracing was active as it came.
 * Loop thread, inside on_message. */
void nrd_srv_grpc_call_read_times(const nrd_srv_grpc_call *call, uint64_t *start_ns, uint64_t *end_ns);

/* The call's traceparent metadata (W3C trace context), or NULL: kept only
 * when tracing was active as the headers came. Any thread once the
 * headers are in. */
const char *nrd_srv_grpc_call_traceparent(const nrd_srv_grpc_call *call);

/* Deadline from grpc-timeout as CLOCK_MONOTONIC microseconds, 0 if none.
 * Any thread. */
uint64_t nrd_srv_grpc_call_deadline_us(const nrd_srv_grpc_call *call);

/* Handler-owned per-call state: set once, freed with free_fn when the last
 * reference to the call goes. Loop to set; get from any thread. */
void nrd_srv_grpc_call_set_state(nrd_srv_grpc_call *call, void *state, void (*free_fn)(void *));
void *nrd_srv_grpc_call_state(const nrd_srv_grpc_call *call);

/* Reference counting: a handler that answers later (from a core thread)
 * holds a reference until its event ran. Any thread. */
void nrd_srv_grpc_call_ref(nrd_srv_grpc_call *call);
void nrd_srv_grpc_call_unref(nrd_srv_grpc_call *call);

/* Queues ev on the call's loop; ev->call must be a reference the caller
 * hands over. Never fails; run() gets call_open false if the stream is
 * already gone (then it only frees). Any thread. */
void nrd_srv_grpc_call_post(nrd_srv_grpc_event *ev);

/* As nrd_srv_grpc_call_post, but ev runs no earlier than due_us (a time
 * of nrd_srv_grpc_now_us). Events of one call due at the same time run in
 * the order they were posted; when the front end's stop gives up waiting,
 * what is still waiting runs at once (with call_open false). Any thread. */
void nrd_srv_grpc_call_post_at(nrd_srv_grpc_event *ev, uint64_t due_us);

/* CLOCK_MONOTONIC in microseconds, the clock of due times and deadlines.
 * Any thread. */
uint64_t nrd_srv_grpc_now_us(void);

/* True once the call ended before it finished (client cancel or reset,
 * connection lost, deadline, a transport error): what gRPC calls a
 * cancelled call. Set before on_cancel runs, whether or not a delay hook
 * holds on_cancel back. Any thread. */
bool nrd_srv_grpc_call_cancelled(const nrd_srv_grpc_call *call);

/* Triton's test delay hooks the front end was started with (grpc_delay.h;
 * borrowed, read-only while the front end runs). Any thread. */
const nrd_srv_grpc_delays *nrd_srv_grpc_call_delays(const nrd_srv_grpc_call *call);

/* Packs msg and sends it as one gRPC message (response headers first if not
 * sent yet). No-op once the call finished or closed. Loop. */
void nrd_srv_grpc_call_send(nrd_srv_grpc_call *call, const ProtobufCMessage *msg);

/* Sends an already framed gRPC message (5-byte prefix + body); takes
 * ownership of buf (malloc'ed) in every case. Loop. */
void nrd_srv_grpc_call_send_framed(nrd_srv_grpc_call *call, uint8_t *buf, size_t len);

/* Ends the call with trailers grpc-status/grpc-message (message may be
 * NULL; it is percent-encoded here). Later sends are dropped. Loop. */
void nrd_srv_grpc_call_finish(nrd_srv_grpc_call *call, int status, const char *message);

/* Unary helper: send msg then finish OK. Loop. */
void nrd_srv_grpc_call_reply(nrd_srv_grpc_call *call, const ProtobufCMessage *msg);

/* Finish with the status mapped from err (as Triton maps TRITONSERVER
 * error codes) and its message; deletes err. Loop. */
void nrd_srv_grpc_call_fail(nrd_srv_grpc_call *call, TRITONSERVER_Error *err);

/* The gRPC status for a TRITONSERVER error code. Any thread. */
int nrd_srv_grpc_status_from_code(TRITONSERVER_Error_Code code);

/* Compresses a framed response (5-byte prefix + body, flag 0) when the
 * call compresses responses: the method allows it, the server was started
 * with a response compression level and the client's grpc-accept-encoding
 * lists gzip or deflate. Returns the compressed framed message (flag 1)
 * and frees `framed`, or returns `framed` itself when the call does not
 * compress, compression fails or would not make it smaller (as gRPC sends
 * such a message). Takes ownership of `framed`; the caller owns the
 * result and *len is updated. Any thread, from the call's first
 * on_message on (the encoding is chosen when the request headers arrive). */
uint8_t *nrd_srv_grpc_call_compress(const nrd_srv_grpc_call *call, uint8_t *framed, size_t *len);

/* Frames a packed message: returns a malloc'ed buffer of 5 + size bytes
 * with the message packed after the prefix, or NULL when out of memory.
 * Any thread. */
uint8_t *nrd_srv_grpc_frame(const ProtobufCMessage *msg, size_t *len);

#endif
