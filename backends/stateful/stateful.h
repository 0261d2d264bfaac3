/*
 * The stateful backend's model and instance states (docs/stateful.md).
 *
 * Threads: an sf_model is written in ModelInitialize and only read after;
 * an sf_instance (its session, state buffers and slot table) belongs to
 * its instance thread.
 */
#ifndef NEREID_STATEFUL_H
#define NEREID_STATEFUL_H

#include <stdbool.h>
#include <stdint.h>

#include "ort_runtime.h"
#include "ort_session.h"
#include "stateful_params.h"
#include "triton/core/tritonbackend.h"

#define SF_MAX_RANK 16

/* Log streams of the README's logging parameters. */
enum { SF_LOG_NONE = 0, SF_LOG_INFO = 1, SF_LOG_VERBOSE = 2 };

typedef struct sf_model {
  const ort_runtime *rt; /* borrowed from the backend state */
  char *name; /* owned */
  char *path; /* owned: the .onnx file */
  int64_t max_batch_size;
  ort_session_options options;
  sf_state_pair *pairs; /* owned (sf_state_pairs_free) */
  size_t pair_count;
  char *start_name; /* owned: control input of CONTROL_SEQUENCE_START */
  bool corrid_string; /* CONTROL_SEQUENCE_CORRID is TYPE_STRING */
  long max_slots; /* oldest.max_candidate_sequences */
  long use_limit; /* sequences admitted: ratio * max_slots */
  uint64_t idle_ns; /* max_sequence_idle_microseconds */
  bool fp16_states, infer_end, pad_to_max;
  sf_lazy lazy;
  int64_t metric_seconds, error_inject_rate;
  int log_level, batch_info_level, detailed_level;
} sf_model;

/* A tensor of the session with its one batch (-1) dimension. */
typedef struct sf_io {
  const char *name; /* borrowed from the session */
  TRITONSERVER_DataType dt;
  ONNXTensorElementDataType et;
  int64_t dims[SF_MAX_RANK]; /* the model's dims; -1 at 'axis' */
  size_t rank, axis;
  int64_t outer, inner; /* elements before / after the axis */
  size_t elem; /* bytes per element */
} sf_io;

/* One tensor of the Run: a buffer for max_rows rows, kept across
 * executions, and the ONNX Runtime tensors over it, one per row count. */
typedef struct sf_tensor {
  const sf_io *io; /* borrowed from the instance */
  uint8_t *data; /* owned */
  OrtValue **values; /* owned (ReleaseValue); [rows - 1], NULL until used */
} sf_tensor;

/* What every Run feeds and fetches: inputs (configured, states, the reset
 * control) and outputs (configured, states). */
typedef struct sf_run {
  int64_t max_rows; /* max_batch_size */
  size_t in_count, out_count;
  const char **in_names, **out_names; /* owned arrays of borrowed names */
  sf_tensor *in, *out; /* owned */
  OrtValue **in_values, **out_values; /* owned arrays; borrowed values */
} sf_run;

/* A sequence's slot. A correlation id names at most two sequences at
 * once: one that received its END request but still has requests to run
 * ('superseded', out of the index) and a newer one started with the same
 * id (in the index, 'older' naming the first). */
typedef struct sf_seq {
  bool used;
  bool superseded;
  uint64_t id;
  char *sid; /* owned; string correlation id, or NULL */
  uint64_t last_ns; /* when its last request ran */
  uint64_t claim; /* the execution that last ran one of its requests */
  long older; /* 1 + the superseded slot of the same id; 0: none */
} sf_seq;

typedef struct sf_instance {
  const sf_model *m; /* borrowed */
  char *name; /* owned */
  ort_session session;
  sf_io *inputs; /* owned; configured inputs, fed by requests */
  size_t input_count;
  sf_io *outputs; /* owned; configured outputs */
  size_t output_count;
  sf_io *state_in, *state_out; /* owned; one per pair */
  size_t *state_off; /* owned; offset of each state in a slot */
  size_t slot_bytes; /* bytes of one sequence's states */
  sf_io reset; /* the START control input of the model */
  uint8_t **buffers; /* owned; buffer k holds buf_slots[k] slots */
  long *buf_slots;
  size_t buffer_count;
  long total_slots, active;
  sf_seq *seqs; /* owned; max_slots entries */
  int32_t *index; /* owned; open addressing: slot, -1 empty,
                                * -2 removed; index_cap entries */
  size_t index_cap, index_removed;
  uint64_t exec_no; /* executions so far (sf_seq.claim) */
  sf_run run; /* the Run's tensors (sf_run_prepare) */
  void *scratch; /* owned; Execute's per-request records */
  size_t scratch_bytes;
  unsigned inject_seed; /* error_inject_rate's generator (test builds) */
  /* metrics (metric_logging_frequency_seconds) */
  uint64_t metric_start_ns, metric_runs, metric_rows, metric_max;
} sf_instance;

/* Reads and checks the configuration; errors name the parameter. The caller
 * owns '*out', an sf_model (sf_model_free). Thread: ModelInitialize. */
TRITONSERVER_Error *sf_model_new(TRITONBACKEND_Model *model, const ort_runtime *rt, void **out);
/* Frees a model state and what it owns; NULL is fine. Thread: ModelFinalize. */
void sf_model_free(void *model_state);

/* Opens the session, checks it against the configuration (errors name the
 * tensor) and allocates the state buffers. Thread: instance init. */
TRITONSERVER_Error *sf_instance_new(TRITONBACKEND_ModelInstance *instance, const void *model_state, void **out);
/* Closes the session and frees the buffers and slots (every sequence's
 * state goes with them); NULL is fine. Thread: instance finalization. */
void sf_instance_free(void *instance_state);

/* Allocates the Run's buffers for max_batch_size rows once the instance's
 * tensors are known; sf_run_release frees them (also after a failure).
 * Thread: instance init and finalization. */
TRITONSERVER_Error *sf_run_prepare(sf_instance *inst);
void sf_run_release(sf_instance *inst);

/* Runs a batch and answers and releases every request. Thread: the
 * instance thread. */
void sf_instance_execute(void *instance_state, TRITONBACKEND_ModelInstance *instance, TRITONBACKEND_Request **requests,
                         uint32_t count);

#endif /* NEREID_STATEFUL_H */
