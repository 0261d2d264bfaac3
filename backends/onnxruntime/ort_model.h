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

#include "nereid/backend_utils.h"
#include "ort_runtime.h"
#include "ort_session.h"
#include "triton/core/tritonbackend.h"

/* One implicit state of sequence_batching: model input and output names. */
typedef struct ort_state {
  char *input; /* owned */
  char *output; /* owned */
} ort_state;

/* One target of a configured batch_input (Triton's ragged batching). */
typedef struct ort_batch_input {
  char *target; /* owned: the model input it feeds */
  char *source; /* owned: the request input whose shapes it is made from */
  nrd_bu_batch_input_kind kind;
  TRITONSERVER_DataType datatype;
} ort_batch_input;

typedef struct ort_model {
  const ort_runtime *rt; /* borrowed from the backend state */
  char *name; /* owned */
  char *path; /* owned: the .onnx file */
  int64_t max_batch_size;
  ort_session_options options;
  ort_state *states; /* owned */
  size_t state_count;
  ort_batch_input *batch_inputs; /* owned */
  size_t batch_input_count;
  char **ragged; /* owned: inputs with allow_ragged_batch, fed flattened */
  size_t ragged_count;
  /* batch_output BATCH_SCATTER_WITH_INPUT_SHAPE: pairs (target output,
   * source input), owned; the output is split by the source's shapes. */
  char **scatter;
  size_t scatter_count;
} ort_model;

/* The source input of batch output `name` (BATCH_SCATTER_WITH_INPUT_SHAPE),
 * or NULL when `name` is not one. */
const char *ort_model_batch_output_source(const ort_model *m, const char *name);

/* The batch input feeding model input `name`, or NULL. */
const ort_batch_input *ort_model_batch_input(const ort_model *m, const char *name);

/* Whether input `name` allows ragged batches (fed as one flat [-1]). */
bool ort_model_input_ragged(const ort_model *m, const char *name);

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
 * it. Errors name the model, the field and the file. '*out' is an
 * ort_model. Thread: ModelInitialize.
 */
TRITONSERVER_Error *ort_model_new(TRITONBACKEND_Model *model, const ort_runtime *rt, void **out);

/* Frees an ort_model; NULL is fine. Thread: ModelFinalize. */
void ort_model_free(void *model_state);

/*
 * Opens the instance's session and checks the configuration against the
 * model it loaded: every configured input, output and state must exist
 * with the configured datatype and compatible dimensions. 'model_state'
 * is the ort_model; '*out' an ort_instance. Thread: instance init.
 */
TRITONSERVER_Error *ort_instance_new(TRITONBACKEND_ModelInstance *instance, const void *model_state, void **out);

/* Closes an ort_instance's session and frees it; NULL is fine. */
void ort_instance_free(void *instance_state);

/*
 * Runs a batch of requests and answers every one of them; the requests are
 * released before it returns. Thread: the instance thread.
 */
void ort_instance_execute(void *instance_state, TRITONBACKEND_ModelInstance *instance, TRITONBACKEND_Request **requests,
                          uint32_t count);

#endif /* NEREID_ORT_MODEL_H */
