/*
 * The openvino backend's model and instance states.
 *
 * A model owns one OpenVINO core (the CPU properties of its configuration
 * are set on it) and one compiled model, made in ModelInitialize; each
 * instance owns one infer request on that compiled model.
 *
 * Threads: an ov_model is written in ModelInitialize and only read after
 * (OpenVINO's compiled model may be used from any thread); an ov_instance
 * belongs to its instance thread.
 */
#ifndef NEREID_OV_MODEL_H
#define NEREID_OV_MODEL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "ov_runtime.h"
#include "triton/core/tritonbackend.h"

/* One configured input or output. */
typedef struct ov_io {
  char *name; /* owned */
  TRITONSERVER_DataType datatype;
} ov_io;

typedef struct ov_model {
  const ov_runtime *rt; /* borrowed from the backend state */
  char *name; /* owned */
  int64_t max_batch_size;
  bool skip_dynamic_batch; /* SKIP_OV_DYNAMIC_BATCHSIZE */
  bool batch_padding; /* ENABLE_BATCH_PADDING */
  bool reshape_io; /* RESHAPE_IO_LAYERS */
  nrd_ov_core_t *core; /* owned */
  nrd_ov_compiled_model_t *compiled; /* owned */
  ov_io *inputs; /* owned, input_count entries, in configuration order */
  size_t input_count;
  ov_io *outputs; /* owned, output_count entries */
  size_t output_count;
} ov_model;

typedef struct ov_instance {
  const ov_model *model; /* borrowed */
  char *name; /* owned */
  nrd_ov_infer_request_t *request; /* owned */
} ov_instance;

/*
 * Reads the model file and the configuration, completes the configuration's
 * missing inputs and outputs from the model when the server allows it,
 * checks one against the other,
 * applies the parameters (docs/openvino.md) and compiles the model for the
 * CPU. '*out' is owned by the caller (ov_model_free), also NULL on failure.
 * Errors name the model, the parameter, tensor or file. Thread:
 * ModelInitialize.
 */
TRITONSERVER_Error *ov_model_new(TRITONBACKEND_Model *model, const ov_runtime *rt, ov_model **out);

/* Frees an ov_model; NULL is fine. Thread: ModelFinalize. */
void ov_model_free(ov_model *m);

/*
 * Checks the instance runs on the CPU and creates its infer request. '*out'
 * is owned by the caller (ov_instance_free), NULL on failure. Thread:
 * instance initialization.
 */
TRITONSERVER_Error *ov_instance_new(TRITONBACKEND_ModelInstance *instance, const ov_model *m, ov_instance **out);

/* Frees an ov_instance; NULL is fine. */
void ov_instance_free(ov_instance *inst);

/*
 * Runs a batch of requests and answers every one of them; the requests are
 * released before it returns. Thread: the instance thread.
 */
void ov_instance_execute(ov_instance *inst, TRITONBACKEND_ModelInstance *instance, TRITONBACKEND_Request **requests,
                         uint32_t count);

#endif /* NEREID_OV_MODEL_H */
