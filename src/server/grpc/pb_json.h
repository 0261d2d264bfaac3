/* A protobuf-c message filled from its JSON form, walking the message's
 * descriptor: the core answers in Triton's JSON (proto field names, enums
 * by name, 64-bit integers as numbers or strings, maps as objects), and a
 * gRPC answer is the same document as protobuf. Driven by the descriptor,
 * a field added to the .proto file needs no code here.
 *
 * Threads: any thread; nothing is kept between calls. */
#ifndef NRD_SRV_PB_JSON_H
#define NRD_SRV_PB_JSON_H

#include <jansson.h>
#include <protobuf-c/protobuf-c.h>
#include <stddef.h>

/* Zeroed memory of `size` bytes that stays valid until the caller's owner
 * frees it all at once, or NULL when memory runs out. */
typedef void *(*nrd_srv_pb_alloc_fn)(void *ctx, size_t size);

/* Fills `msg` (already initialised with its descriptor's init) from JSON
 * object `j`. Keys with no field of that name are skipped, and so is a
 * value of the wrong JSON type for its field (the field keeps its
 * default); bytes fields are left empty. Strings point into `j`, so `j`
 * must outlive `msg`; everything else comes from `alloc(ctx, size)`, never
 * freed here. Returns 0, or -1 when `alloc` fails (msg is then partly
 * filled: pack nothing from it). */
int nrd_srv_pb_from_json(ProtobufCMessage *msg, const json_t *j, nrd_srv_pb_alloc_fn alloc, void *ctx);

#endif
