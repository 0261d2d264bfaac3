/* Model warmup (`model_warmup` in config.pbtxt): sample requests each
 * model instance runs through its backend's Execute before the model is
 * READY, as Triton does. A failing sample fails the load.
 *
 * The samples' data is made once per load (nrd_warmup_prepare, on the
 * loader thread: zeros, random bytes or a file under <model>/warmup/) and
 * read by every instance; each instance thread runs them
 * (nrd_warmup_run) before it takes its first batch. */
#ifndef NRD_WARMUP_H
#define NRD_WARMUP_H

#include "triton/core/tritonbackend.h"

typedef struct nrd_warmup nrd_warmup;

/* Reads `m`'s model_warmup and makes every sample's input data. *out is
 * NULL when there is nothing to run. Errors (INVALID_ARG) name the sample
 * and input: a variable dimension, no data kind, a file that is missing,
 * outside the warmup folder or too short, a batch size the model cannot
 * take. The caller frees *out with nrd_warmup_free once every instance
 * has run it. Loader thread. */
TRITONSERVER_Error *nrd_warmup_prepare(TRITONBACKEND_Model *m, nrd_warmup **out);

/* Runs every sample `count` times on `inst`: `batch_size` requests per
 * Execute, each waited for until released with its final response. The
 * requests bypass the scheduler and record no statistics. An error
 * response or a failed Execute fails the run with Triton's message
 * ("failed to run warmup sample '<name>': ..."). `execute` runs a batch
 * on the calling thread (nrd_instance_execute, given by the instance so
 * that this file does not call back into instance.c). The instance's
 * thread, before it serves. */
typedef void nrd_warmup_execute_fn(TRITONBACKEND_ModelInstance *inst, TRITONSERVER_InferenceRequest **reqs, uint32_t n);
TRITONSERVER_Error *nrd_warmup_run(const nrd_warmup *w, TRITONBACKEND_ModelInstance *inst,
                                   nrd_warmup_execute_fn *execute);

/* NULL is a no-op. */
void nrd_warmup_free(nrd_warmup *w);

#endif
