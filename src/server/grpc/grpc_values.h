/* The values of gRPC's own headers, read and written by the transport
 * (grpc_call.c, grpc_stream.c): grpc-message, grpc-timeout and grpc-accept-encoding;
 * grpc-status from a Triton error code is here too (declared in
 * grpc_call.h). Pure functions, any thread. */
#ifndef NRD_SRV_GRPC_VALUES_H
#define NRD_SRV_GRPC_VALUES_H

#include <stddef.h>
#include <stdint.h>

/* The encodings a client accepts, as a mask. */
enum { NRD_SRV_GRPC_ACCEPT_GZIP = 1, NRD_SRV_GRPC_ACCEPT_DEFLATE = 2 };

/* A grpc-message value for `s`: printable ASCII but '%' kept, every other
 * byte %XX, at most NRD_SRV_ERROR_ECHO_MAX bytes of that followed by "..."
 * when s is longer (error_echo.h). Malloc'ed (caller frees); NULL when
 * memory runs out. */
char *nrd_srv_grpc_percent_encode(const char *s);

/* A grpc-timeout value (1-8 digits and a unit of H, M, S, m, u or n) in
 * microseconds, at least 1; 0 when malformed. */
uint64_t nrd_srv_grpc_timeout_us(const uint8_t *v, size_t len);

/* NRD_SRV_GRPC_ACCEPT_* for the encodings a grpc-accept-encoding value
 * lists (any case; others ignored). */
unsigned nrd_srv_grpc_accept_mask(const uint8_t *v, size_t len);

#endif
