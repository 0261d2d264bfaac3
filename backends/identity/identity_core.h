/*
 * The identity behaviour shared by the identity backend and the test-only
 * backends that "answer like identity": every requested output OUTPUT<s> is
 * a byte-for-byte copy (datatype, shape, data) of input INPUT<s>.
 *
 * Compiled into each backend that uses it (object library
 * nrd_identity_core); nothing here is exported from the backend.
 */
#ifndef NRD_IDENTITY_CORE_H
#define NRD_IDENTITY_CORE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "triton/core/tritonbackend.h"

/* Per-model settings read once at ModelInitialize. */
typedef struct nrd_identity_model {
  int64_t max_batch_size; /* > 0: first dimension of each input is batch */
  int64_t execute_delay_ms; /* sleep per Execute call (tests only) */
} nrd_identity_model;

/*
 * Reads max_batch_size and the optional model parameter execute_delay_ms
 * (0..600000) from a model configuration. 'backend' prefixes error messages.
 * The caller keeps ownership of 'config'; on failure 'out' is untouched.
 * Any thread.
 */
TRITONSERVER_Error *nrd_identity_model_read(const json_t *config, const char *backend, nrd_identity_model *out);

/*
 * Creates one response for 'request' holding a copy of INPUT<s> for every
 * requested output OUTPUT<s> (every INPUT<s> when the request names no
 * output) and sends it with 'send_flags'. Any problem (a requested output
 * without its input, non-CPU memory, ...) is sent instead as an error
 * response naming the tensor. The request is NOT released. Returns true when
 * a successful response was sent. Thread: the request's owner (the instance
 * thread inside Execute).
 */
bool nrd_identity_respond(TRITONBACKEND_Request *request, uint32_t send_flags);

/*
 * The outputs nrd_identity_respond would send, added to 'response' (which
 * the caller keeps, to send or delete). Returns the problem that
 * nrd_identity_respond would send as the error response, or NULL; the
 * caller owns it. Same thread rule as nrd_identity_respond.
 */
TRITONSERVER_Error *nrd_identity_fill(TRITONBACKEND_Response *response, TRITONBACKEND_Request *request);

/*
 * Runs a whole Execute batch the identity way: optional delay, one FINAL
 * response per request (a requested output whose input is optional in the
 * configuration and left out of the request is zeros of the configured
 * datatype and dims, as Triton's identity backend answers it),
 * per-request and batch statistics on 'instance', then
 * releases every request. Never fails: after the call the backend owns no
 * request, so Execute returns NULL. Instance thread only.
 */
void nrd_identity_execute(TRITONBACKEND_ModelInstance *instance, const nrd_identity_model *model,
                          TRITONBACKEND_Request **requests, uint32_t count);

#endif /* NRD_IDENTITY_CORE_H */
