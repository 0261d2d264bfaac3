/*
 * Execute for the fil backend: every request of a batch (each of any
 * number of rows: ragged batches are simply concatenated) is checked, the
 * rows of the good ones are gathered into one matrix, Treelite's GTIL
 * predicts them in one call, FIL's post-processing (class ids, thresholds,
 * [1 - p, p] for binary probabilities) turns GTIL's values into output__0,
 * and each request gets its own rows back.
 *
 * Threads: an instance belongs to its instance thread; fil_execute runs
 * only there. Instances of one model share the model read-only.
 */
#ifndef NEREID_FIL_EXECUTE_H
#define NEREID_FIL_EXECUTE_H

#include <stddef.h>

#include "fil_model.h"

/* Buffers an instance reuses from one Execute to the next (grown, never
 * shrunk, freed with the instance). */
typedef struct fil_scratch {
  void *data;
  size_t cap;
} fil_scratch;

typedef struct fil_instance {
  const fil_model *model; /* borrowed from the model state */
  fil_scratch input; /* gathered rows, float32 */
  fil_scratch widened; /* float64 rows for float64 models */
  fil_scratch gtil; /* GTIL's values when post-processed */
  fil_scratch output; /* output__0 of the whole batch, float32 */
} fil_instance;

/*
 * Runs requests[0..count) and answers each with output__0 or an error;
 * every request is released and statistics are reported. Never fails as a
 * whole (an error that concerns every request is sent to each). Thread:
 * the instance thread.
 */
void fil_execute(fil_instance *inst, TRITONBACKEND_ModelInstance *instance, TRITONBACKEND_Request **requests,
                 uint32_t count);

/* Frees an instance's buffers (not the instance itself). */
void fil_instance_release(fil_instance *inst);

#endif /* NEREID_FIL_EXECUTE_H */
