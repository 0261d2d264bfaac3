/* The gRPC front end: Triton's GRPCInferenceService (and grpc.health.v1)
 * over HTTP/2 (cleartext with prior knowledge, or TLS), on nghttp2 and our own gRPC
 * framing. A fixed set of event-loop threads share one listening socket;
 * each connection lives on one loop, and completions from core threads are
 * posted back to that loop. See docs/grpc.md. */
#ifndef NRD_SRV_GRPC_SERVER_H
#define NRD_SRV_GRPC_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grpc_delay.h"
#include "grpc_tls.h"
#include "restrict.h"
#include "trace_hook.h"
#include "compress.h"
#include "log_settings.h"
#include "shm_registry.h"
#include "triton/core/tritonserver.h"

/* gRPC's own server handshake timeout, in seconds. */
#define NRD_SRV_GRPC_HANDSHAKE_TIMEOUT_DEFAULT 120

typedef struct nrd_srv_grpc_options {
  const char *address; /* listen address, e.g. "0.0.0.0" */
  int port; /* 0 picks a free port (see nrd_srv_grpc_port) */
  bool reuse_port; /* bind with SO_REUSEPORT (--reuse-grpc-port) */
  unsigned threads; /* event-loop threads, >= 1 */
  uint32_t max_message_size; /* bytes; larger messages get RESOURCE_EXHAUSTED */
  /* Bytes a compressed message may inflate to (the smaller of this and
   * max_message_size applies); 0: max_message_size alone. */
  uint32_t max_decompressed_size;
  unsigned keepalive_time_ms; /* 0: no server pings */
  unsigned keepalive_timeout_ms; /* close when a ping is unanswered this long */
  /* Ping policy (gRPC's keepalive arguments). A connection "without calls"
   * has no open stream; "data" is a DATA or HEADERS frame the server sent. */
  bool keepalive_permit_without_calls; /* our pings and the client's allowed with no calls */
  unsigned max_pings_without_data; /* our keepalive pings between data; 0: no limit */
  unsigned min_recv_ping_interval_ms; /* client pings closer than this are strikes */
  unsigned max_ping_strikes; /* GOAWAY ENHANCE_YOUR_CALM beyond; 0: no limit */
  /* gRPC's MAX_CONNECTION_AGE(_GRACE): a connection this old gets GOAWAY
   * and closes once its calls end, or when the grace runs out (cancelling
   * what is left). 0: no limit. No jitter, unlike gRPC's +-10%. */
  unsigned max_connection_age_ms;
  unsigned max_connection_age_grace_ms;
  /* Response messages of methods that allow it (ModelInfer,
   * ModelStreamInfer) are compressed with gzip or deflate when the client
   * accepts one (grpc-accept-encoding); NONE: never. */
  nrd_srv_compress_level response_compression;
  /* A connection whose HTTP/2 preface and SETTINGS have not arrived this
   * long after it was accepted is closed; 0: NRD_SRV_GRPC_HANDSHAKE_TIMEOUT_DEFAULT. */
  unsigned handshake_timeout_secs;
  /* Shared with the HTTP front end; borrowed, they must outlive the front end. */
  nrd_srv_shm *shm; /* system shared memory regions */
  nrd_srv_log_settings *log; /* LogSettings */
  nrd_srv_tracer *tracer; /* TraceSetting and tracing (may be NULL) */
  const nrd_srv_restrictions *restricted; /* --grpc-restricted-protocol (may be NULL: all open) */
  const char *header_forward; /* --grpc-header-forward-pattern (NULL: none); compiled at start */
  /* TLS (--grpc-use-ssl); NULL: cleartext HTTP/2 with prior knowledge.
   * Borrowed; read only during nrd_srv_grpc_start. */
  const nrd_srv_tls_options *tls;
  /* Triton's test delay hooks (all zero: none; see grpc_delay.h). */
  nrd_srv_grpc_delays delays;
} nrd_srv_grpc_options;

typedef struct nrd_srv_grpc nrd_srv_grpc;

/* Binds, listens and starts the loop threads. `server` is borrowed and must
 * outlive nrd_srv_grpc_stop. On success the caller owns *out; on failure
 * returns the error (caller owns it), *out is NULL and nothing leaks.
 * Main thread only. */
TRITONSERVER_Error *nrd_srv_grpc_start(TRITONSERVER_Server *server, const nrd_srv_grpc_options *opts,
                                       nrd_srv_grpc **out);

/* The port actually bound. Any thread while g is alive. */
int nrd_srv_grpc_port(const nrd_srv_grpc *g);

/* Graceful stop: stops accepting and sends GOAWAY; calls already open run
 * to their end (a streaming call answers new requests with an error and,
 * once it has nothing in the core, ends with UNAVAILABLE), for at most
 * `wait_secs`. Then
 * closes what is left (cancelling its requests in the core), waits up to
 * 2 s more for the core to hand every request back, joins the loops and
 * frees g. Returns false if requests were
 * still in the core after wait_secs: then g is left running (leaked) so no
 * core thread touches freed memory. NULL is a no-op returning true. Main
 * thread only; call before TRITONSERVER_ServerStop. */
bool nrd_srv_grpc_stop(nrd_srv_grpc *g, unsigned wait_secs);

/* Begins the graceful part of nrd_srv_grpc_stop without waiting, so that
 * several front ends drain at once; stop must still be called. NULL is a
 * no-op. Main thread. */
void nrd_srv_grpc_drain(nrd_srv_grpc *g);

#endif
