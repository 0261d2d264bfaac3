/* The classification extension, shared by the HTTP and gRPC front ends: a
 * requested output with a class count k is replaced by its top k classes,
 * a BYTES tensor of "value:index" or "value:index:label" strings (labels
 * from the model's label file, through the public API), as Triton does.
 * How k reaches us is the protocol's business; everything after is here.
 *
 * Threads: any thread; nothing here keeps state between calls. */
#ifndef NRD_SRV_CLASSIFY_H
#define NRD_SRV_CLASSIFY_H

#include <stddef.h>
#include <stdint.h>

#include "triton/core/tritonserver.h"

/* The most elements an output may have to be classified, as Triton's
 * kMaxClassificationElements; a larger one is refused with INVALID_ARG
 * "classification output tensor too large". */
#define NRD_SRV_CLASSIFY_MAX_ELEMENTS 1000000u

/* A classification result: a BYTES tensor in Triton's binary layout. */
typedef struct nrd_srv_classes {
  char *data; /* per element a 4-byte little-endian length, then the string */
  size_t size; /* bytes in data */
  int64_t shape[2]; /* [batch, k'] or [k'] (k' = min(k, classes)) */
  uint64_t dims; /* 1 or 2 */
} nrd_srv_classes;

/* The top `k` (>= 1) classes of output `index` of `resp`. When the model
 * batches (TRITONSERVER_BATCH_FIRST_DIM) and the output has dimensions,
 * the first one is the batch and each row is classified on its own
 * (shape [batch, min(k, classes per row)]); otherwise the whole output is
 * one row (shape [min(k, elements)]). Values print as Triton prints them
 * ("%f" for floating point, integers as integers); ties keep index order.
 * `server` and `resp` are borrowed. On success returns NULL and out->data
 * is malloc'ed (never NULL; the caller frees it). On failure returns the
 * error (the caller owns it): INVALID_ARG for an output that cannot be
 * classified (BYTES, BOOL, more than NRD_SRV_CLASSIFY_MAX_ELEMENTS), INTERNAL when memory runs out or the output's
 * size does not match its shape; *out then holds nothing to free. Any
 * thread, while resp is alive. */
TRITONSERVER_Error *nrd_srv_classify(TRITONSERVER_Server *server, TRITONSERVER_InferenceResponse *resp, uint32_t index,
                                     uint32_t k, nrd_srv_classes *out);

#endif
