/*
 * Lifecycle recording for the test-only backends (recorder, failing).
 *
 * A record file gets one line per backend API call, e.g. "Initialize",
 * "ModelInitialize simple v1", "ModelInstanceExecute simple_0 3". The file
 * comes from the backend configuration (--backend-config=<backend>,
 * record_file=PATH) for backend-level lines, and from the model parameter
 * record_file (falling back to the backend's file) for model-level lines.
 */
#ifndef NRD_TESTING_RECORD_H
#define NRD_TESTING_RECORD_H

#include <jansson.h>

#include "nereid/backend_utils.h"

/*
 * Appends one formatted line (a newline is added) to 'path' in append mode
 * with a single write, so lines from concurrent callers never interleave.
 * A NULL 'path' records nothing. Failures are logged, never returned.
 * Any thread.
 */
void nrd_record_line(const char *path, const char *fmt, ...) NRD_BU_PRINTF(2, 3);

/*
 * For TRITONBACKEND_Initialize: reads record_file from the backend
 * configuration, stores a copy as the backend state (NULL when not set) and
 * records 'line'. On failure no state is set and nothing is left allocated.
 * Thread: the server's backend-initialize caller.
 */
TRITONSERVER_Error *nrd_record_backend_init(TRITONBACKEND_Backend *backend, const char *line);

/*
 * For TRITONBACKEND_Finalize: records 'line' and frees the state stored by
 * nrd_record_backend_init. Thread: the backend-finalize caller.
 */
TRITONSERVER_Error *nrd_record_backend_fini(TRITONBACKEND_Backend *backend, const char *line);

/*
 * Returns the backend-level record file (borrowed from the backend state,
 * valid until nrd_record_backend_fini), or NULL. Any thread.
 */
const char *nrd_record_backend_file(TRITONBACKEND_Backend *backend);

/*
 * Returns a malloc'ed copy of the record file for a model: its parameter
 * record_file, else the backend-level file, else NULL. The caller frees it.
 * Any thread.
 */
char *nrd_record_model_file(TRITONBACKEND_Model *model, const json_t *config);

/*
 * Returns the model's name, or "?" when it cannot be read. Borrowed from the
 * model. Any thread.
 */
const char *nrd_record_model_name(TRITONBACKEND_Model *model);

/*
 * Returns the instance's name, or "?" when it cannot be read. Borrowed from
 * the instance. Any thread.
 */
const char *nrd_record_instance_name(TRITONBACKEND_ModelInstance *instance);

#endif /* NRD_TESTING_RECORD_H */
