/* The message every inference answers with, ModelInferResponse (alone, or
 * inside a ModelStreamInferResponse), written by hand: the very bytes
 * protobuf-c's generic packer writes (a unit test compares them), without
 * walking descriptors twice per message, which cost about 2,000
 * instructions of a small call.
 *
 * Threads: any; nothing is kept between calls. */
#ifndef NRD_SRV_GRPC_PACK_H
#define NRD_SRV_GRPC_PACK_H

#include <stddef.h>
#include <stdint.h>

#include "grpc_service.pb-c.h"

/* `r` framed for gRPC (the 5-byte prefix, uncompressed, then the message),
 * in a malloc'ed buffer the caller frees; *len its size. With `stream` set
 * the message is a ModelStreamInferResponse holding `r` and, when not NULL
 * or empty, `error_message`. An output with typed `contents` (which Nereid
 * never sends) goes through protobuf-c instead. NULL when memory runs out.
 * `r` is borrowed. */
uint8_t *nrd_srv_grpc_pack_infer_response(const Inference__ModelInferResponse *r, int stream, const char *error_message,
                                          size_t *len);

#endif
