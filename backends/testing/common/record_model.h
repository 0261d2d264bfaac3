/*
 * The model lifecycle shared by the recording test backends (recorder,
 * failing): identity settings plus a record file, with each lifecycle call
 * recorded as described in record.h.
 *
 * The model state of such a backend is an nrd_record_model, or a struct
 * whose first member is one, allocated with malloc or calloc; these
 * functions use only that part. Instances borrow the model state.
 */
#ifndef NRD_TESTING_RECORD_MODEL_H
#define NRD_TESTING_RECORD_MODEL_H

#include <jansson.h>
#include <stdint.h>

#include "../../identity/identity_core.h"
#include "nereid/backend_utils.h"

typedef struct nrd_record_model {
  nrd_identity_model identity;
  char *record_file; /* malloc'ed; NULL: record nothing */
} nrd_record_model;

/*
 * For ModelInitialize: finds the model's record file (nrd_record_model_file),
 * records "ModelInitialize <model> v<version>" and reads the identity
 * settings ('backend' prefixes their errors) into 'out'. On success
 * out->record_file is the caller's (nrd_record_model_finalize frees it); on
 * failure nothing stays allocated. 'config' stays the caller's.
 * Thread: the ModelInitialize caller.
 */
TRITONSERVER_Error *nrd_record_model_init(TRITONBACKEND_Model *model, const json_t *config, const char *backend,
                                          nrd_record_model *out);

/*
 * For ModelFinalize: records "ModelFinalize <model>", frees the record file
 * and the state itself, and clears the state (a NULL state only clears).
 * Thread: the ModelFinalize caller.
 */
TRITONSERVER_Error *nrd_record_model_finalize(TRITONBACKEND_Model *model);

/*
 * For ModelInstanceInitialize: sets '*state' to the model state (borrowed;
 * errors of nrd_bu_instance_model_state) and records
 * "ModelInstanceInitialize <instance>". It does not set the instance state:
 * the caller does once it accepts the instance.
 * Thread: the ModelInstanceInitialize caller.
 */
TRITONSERVER_Error *nrd_record_instance_init(TRITONBACKEND_ModelInstance *instance, const char *backend, void **state);

/*
 * For ModelInstanceFinalize: records "ModelInstanceFinalize <instance>" when
 * the instance has a state, then clears it (borrowed, so not freed).
 * Thread: the ModelInstanceFinalize caller.
 */
TRITONSERVER_Error *nrd_record_instance_finalize(TRITONBACKEND_ModelInstance *instance);

/*
 * For Execute: sets '*state' to the instance state (errors of
 * nrd_bu_instance_state, which touch no request) and records
 * "ModelInstanceExecute <instance> <request_count>". Instance thread only.
 */
TRITONSERVER_Error *nrd_record_execute(TRITONBACKEND_ModelInstance *instance, const char *backend,
                                       uint32_t request_count, void **state);

#endif /* NRD_TESTING_RECORD_MODEL_H */
