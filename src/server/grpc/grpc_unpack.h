/* A ModelInferRequest decoder for the messages clients send (names,
 * shapes, parameters, requested outputs, raw_input_contents), written for
 * speed: protobuf-c's table-driven unpack spent about 2,000 instructions
 * on a small request. It fills protobuf-c's own structs, so the result is
 * used exactly like inference__model_infer_request__unpack's, and it
 * gives up (leaving the message to protobuf-c) on anything it does not
 * decode itself: typed `contents`, unknown fields, a singular field or a
 * oneof seen twice, unexpected wire types, and malformed bytes. */
#ifndef NRD_SRV_GRPC_UNPACK_H
#define NRD_SRV_GRPC_UNPACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grpc_service.pb-c.h"

/* Decodes data[0..len) with every block taken from `a` (strings and bytes
 * are copied: data is borrowed for the call only). NULL with *fallback
 * true: decode it with protobuf-c instead (nothing was allocated); NULL
 * with *fallback false: `a` ran out of memory. The result is freed with
 * whatever frees `a`'s blocks. Thread-safe (no shared state). */
Inference__ModelInferRequest *nrd_srv_grpc_unpack_infer_request(ProtobufCAllocator *a, const uint8_t *data, size_t len,
                                                                bool *fallback);

#endif
