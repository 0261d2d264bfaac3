/*
 * The pytorch backend's model and instance states: the configuration read
 * once (parameters, tensors, naming convention, states), the TorchScript
 * module each instance runs, and how the configuration's tensors map onto
 * forward()'s arguments and results (Triton's pytorch backend's rules).
 *
 * Threads: a pt_model is written in ModelInitialize and only read after,
 * except its shared module slot (ENABLE_WEIGHT_SHARING), which instances
 * fill and read under 'lock' (instances may initialize in parallel). A
 * pt_instance belongs to its instance thread.
 */
#ifndef NEREID_PT_MODEL_H
#define NEREID_PT_MODEL_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "nereid/backend_utils.h"
#include "pt_torch.h"
#include "triton/core/tritonbackend.h"

/* One tensor of the configuration that forward() takes or gives. */
typedef struct pt_io {
  char *name; /* owned */
  TRITONSERVER_DataType datatype;
  bool ragged; /* allow_ragged_batch */
  bool requested_always; /* a state output: produced whether asked or not */
  bool is_output; /* an output of the "output" section (sent when asked) */
  bool batch_input; /* a batch_input target: made by the backend */
  nrd_bu_batch_input_kind batch_kind; /* batch inputs: what to compute */
  char *source; /* owned; batch inputs and batch outputs: the source
                  input's name */
  int index; /* outputs: result position; controls, states: forward()'s
                argument; -1 for configured inputs (bound per instance) */
} pt_io;

typedef struct pt_model {
  char *name; /* owned */
  char *path; /* owned: the TorchScript file */
  int64_t max_batch_size;
  pt_exec_options options;
  bool weight_sharing;
  bool has_states; /* sequence_batching.state is not empty */
  /* Inputs: the configuration's inputs, then batch inputs (one per
   * target name), then control inputs, then state inputs. Outputs: the configuration's outputs, then state outputs not
   * also listed there. */
  pt_io *inputs; /* owned */
  size_t input_count;
  size_t config_input_count; /* the "input" section's, which choose the naming */
  pt_io *outputs; /* owned */
  size_t output_count;
  pthread_mutex_t lock; /* guards 'shared' */
  pt_module *shared; /* owned; weight sharing only */
} pt_model;

typedef struct pt_instance {
  const pt_model *model; /* borrowed */
  char *name; /* owned */
  pt_module *module; /* owned handle */
  bool dict; /* forward() takes one Dict[str, Tensor] */
  int *arg_index; /* owned; per model input: forward()'s slot (-1: dict) */
  size_t arg_count; /* forward()'s arguments after self */
} pt_instance;

/*
 * Reads and checks the configuration into '*out' (a pt_model the caller
 * frees with pt_model_free): model file, parameters, inputs, outputs,
 * sequence controls and states. Errors name the model, field and file,
 * Triton's sentence first. Thread: ModelInitialize.
 */
TRITONSERVER_Error *pt_model_new(TRITONBACKEND_Model *model, pt_model **out);

/* Frees a pt_model and its shared module; NULL is fine. */
void pt_model_free(pt_model *model);

/*
 * Loads (or, with weight sharing, shares) the module for an instance and
 * checks the configuration against forward()'s signature. '*out' is owned
 * by the caller (pt_instance_free). KIND_GPU is refused until the backend
 * can run on a GPU. Thread: instance initialization.
 */
TRITONSERVER_Error *pt_instance_new(TRITONBACKEND_ModelInstance *instance, pt_model *model, pt_instance **out);

/* Frees a pt_instance; NULL is fine. */
void pt_instance_free(pt_instance *instance);

/*
 * Runs a batch of requests and answers every one of them; the requests
 * are released before it returns. Thread: the instance thread.
 */
void pt_instance_execute(pt_instance *instance, TRITONBACKEND_ModelInstance *triton_instance,
                         TRITONBACKEND_Request **requests, uint32_t count);

/* Finds the input of 'model' named 'name', or NULL. Any thread. */
const pt_io *pt_model_input(const pt_model *model, const char *name);

#endif /* NEREID_PT_MODEL_H */
