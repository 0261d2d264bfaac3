/* The dynamic batcher: a scheduler (see scheduler.h) that combines queued
 * requests into batches for models whose configuration has
 * `dynamic_batching` and a max_batch_size above 0.
 *
 * Requests wait in one queue per priority level, each with its queue policy
 * (size limit, timeout and what a timeout does). An idle instance thread
 * forms a batch in priority order, FIFO within a level, bounded by
 * max_batch_size in batch rows and by input-shape compatibility, and either
 * takes it at once (a preferred size is reached, the batch cannot grow, the
 * queue delay is over) or waits for more requests. With preserve_ordering
 * the responses reach clients in the order their requests left the queue.
 * A backend's custom batching hooks (TRITONBACKEND_ModelBatch*) may end a
 * batch early. docs/batching.md describes the knobs for users. */
#ifndef NRD_DYNAMIC_BATCHER_H
#define NRD_DYNAMIC_BATCHER_H

#include "scheduler.h"

/* Creates the dynamic batcher of `model`, reading its normalized config
 * (dynamic_batching, max_batch_size, inputs, parameters), which must not
 * change afterwards; the model must outlive the scheduler. Finds the
 * model's custom batching hooks (strategy library or the backend's own) and
 * calls TRITONBACKEND_ModelBatcherInitialize; destroy calls
 * ModelBatcherFinalize. On error (out of memory, priority_levels too large,
 * a bad strategy library, the backend's BatcherInitialize error as is)
 * nothing is kept and *out is untouched. Loader thread. */
TRITONSERVER_Error *nrd_dynamic_batcher_new(TRITONBACKEND_Model *model, nrd_scheduler **out);

#endif
