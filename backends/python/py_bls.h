/*
 * Business logic scripting: a model.py's InferenceRequest.exec(), run on the
 * server through the in-process API while the calling model executes.
 */
#ifndef NRD_PY_BLS_H
#define NRD_PY_BLS_H

#include <jansson.h>

#include "py_exec.h"

/*
 * Runs the stub's "bls" message (the request's model, inputs in the shared
 * memory, requested outputs, id, correlation id, flags, timeout,
 * parameters) and waits for every response and the request's release. The
 * responses' outputs are copied into the shared memory from the message's
 * "out_off" on. Returns the answer for the stub (the caller frees it):
 * {"responses": [{"outputs": [...]} or {"error": "..."}]} or {"error": "..."}.
 * The instance thread, while the stub waits for the answer.
 */
json_t *nrd_py_bls_run(nrd_py_instance *st, const json_t *msg);

/* Deletes what BLS calls share (the response allocator). The backend's
 * finalize, once no instance runs. */
void nrd_py_bls_fini(void);

#endif
