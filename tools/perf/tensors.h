/* The input tensors nrd_perf sends: built once from the model's metadata
 * (KServe v2 JSON, the same for the in-process API and HTTP) and the
 * options, then shared read-only by every request of the run.
 *
 * Threads: built on the main thread before any load; afterwards read-only,
 * so any thread may read it. */
#ifndef NRD_PERF_TENSORS_H
#define NRD_PERF_TENSORS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "options.h"

typedef struct nrd_perf_tensor {
  char *name;
  char datatype[16]; /* "FP32", "BYTES", ... */
  int64_t shape[NRD_PERF_MAX_DIMS + 1];
  int ndims; /* batch dimension included when batching */
  int64_t elements;
  unsigned char *data; /* raw bytes; BYTES: 4-byte little-endian length + bytes each */
  size_t bytes;
} nrd_perf_tensor;

typedef struct nrd_perf_tensors {
  nrd_perf_tensor *inputs;
  int ninputs;
  char **outputs; /* output names from the metadata */
  int noutputs;
  int64_t max_batch_size; /* from the config; 0 = no batching */
} nrd_perf_tensors;

/* Builds `t` from `metadata` (v2 model metadata object) and `config` (the
 * model configuration JSON; may be NULL, then max_batch_size is 0). On
 * failure returns false with a message in err (t is left empty, nothing to
 * free). On success the caller frees with nrd_perf_tensors_free. */
bool nrd_perf_tensors_build(nrd_perf_tensors *t, json_t *metadata, json_t *config, const nrd_perf_opts *o, char *err,
                            size_t errlen);

void nrd_perf_tensors_free(nrd_perf_tensors *t);

/* Element size of a fixed-size datatype; 0 for BYTES or an unknown name. */
size_t nrd_perf_datatype_size(const char *datatype);

/* Sets *out to a new JSON array (flat, row-major) of tensor `in`'s data;
 * the caller owns it. Returns false (nothing allocated) when the datatype
 * has no JSON form here (FP16, BF16) or memory runs out. */
bool nrd_perf_tensor_json_data(const nrd_perf_tensor *in, json_t **out);

#endif
