/* The sequence batcher: a scheduler (see scheduler.h) for models whose
 * configuration has `sequence_batching`.
 *
 * Requests carry a correlation id (integer or string) and the flags
 * SEQUENCE_START / SEQUENCE_END. From its START request to its END request
 * a sequence is bound to one batch slot of one model instance (Direct
 * strategy): each instance has max(1, max_batch_size) slots and executes
 * at most one request per slot at a time, so the requests of a sequence run
 * in order, one after the other, on the same instance. Sequences that find
 * no free slot wait in a backlog until one frees. The batcher adds the
 * configured control inputs (START/END/READY/CORRID) and implicit state
 * inputs to each request before the backend sees it. A sequence idle for
 * max_sequence_idle_microseconds loses its slot and state; its next
 * request is refused. docs/sequence.md describes the behaviour for users. */
#ifndef NRD_SEQUENCE_BATCHER_H
#define NRD_SEQUENCE_BATCHER_H

#include "scheduler.h"

/* Creates the sequence batcher of `model` from its normalized config
 * (sequence_batching, max_batch_size), giving slots to the non-passive
 * instances of `ex`; the model must outlive the scheduler. Loads the
 * implicit states' initial values. On error (bad state declaration,
 * unreadable initial_state file, out of memory) nothing is kept and *out is
 * untouched. Loader thread, after the instances are created. */
TRITONSERVER_Error *nrd_sequence_batcher_new(TRITONBACKEND_Model *model, const nrd_executor *ex, nrd_scheduler **out);

#endif
