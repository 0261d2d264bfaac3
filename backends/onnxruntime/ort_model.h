/*
 * The onnxruntime backend's model and instance states.
 *
 * Threads: an ort_model is written in ModelInitialize and only read after;
 * an ort_instance belongs to its instance thread.
 */
#ifndef NEREID_ORT_MODEL_H
#define NEREID_ORT_MODEL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "ort_runtime.h"
#include "ort_session.h"
#include "triton/core/tritonbackend.h"

/* One implicit state of sequence_batching: model input and output names. */
typedef struct ort_state {
  char *input; /* owned */
  char *output; /* owned */
} ort_state;

typedef struct ort_model {
  const ort_runtime *rt; /* borrowed from the backend state */
  char *name; /* owned */
  char *path; /* owned: the .onnx file */
  int64_t max_batch_size;
  ort_session_options options;
  ort_state *states; /* owned */
  size_t state_count;
} ort_model;

typedef struct ort_instance {
  const ort_model *model; /* borrowed */
  char *name; /* owned */
  ort_session session;
  /* Per output of the session: whether it is the output of a state. */
  bool *output_is_state; /* owned, session.output_count entries */
} ort_instance;

/*
 * Reads the configuration into '*out' (owned by the caller, freed with
 * ort_model_free): model file, batching, session parameters, states. The
 * configuration is completed from the model first when the server allows
 * it. Errors name the model, the field and the file.
 */
TRITONSERVER_Error *ort_model_new(TRITONBACKEND_Model *model, const ort_runtime *rt, ort_model **out);

void ort_model_free(ort_model *m);

/*
 * Opens the instance's session and checks the configuration against the
 * model it loaded: every configured input, output and state must exist
 * with the configured datatype and compatible dimensions.
 */
TRITONSERVER_Error *ort_instance_new(TRITONBACKEND_ModelInstance *instance, const ort_model *m, ort_instance **out);

void ort_instance_free(ort_instance *inst);

/*
 * Runs a batch of requests and answers every one of them; the requests are
 * released before it returns. Thread: the instance thread.
 */
void ort_instance_execute(ort_instance *inst, TRITONBACKEND_ModelInstance *instance, TRITONBACKEND_Request **requests,
                          uint32_t count);

#endif /* NEREID_ORT_MODEL_H */
