/* Implicit state (TRITONBACKEND_State*). States belong to sequences, which
 * only the sequence batcher tracks; until it exists every model answers that
 * it has no state to give, naming the reason. */
#include <string.h>

#include "error.h"
#include "model.h"
#include "request.h"

/* Whether the model's sequence_batching declares a state called `name`. */
static bool declares_state(const TRITONBACKEND_Model *m, const char *name) {
  const json_t *states = json_object_get(json_object_get(m->config, "sequence_batching"), "state");
  for (size_t i = 0; i < json_array_size(states); i++) {
    const char *in = json_string_value(json_object_get(json_array_get(states, i), "input_name"));
    const char *out = json_string_value(json_object_get(json_array_get(states, i), "output_name"));
    if ((in && !strcmp(in, name)) || (out && !strcmp(out, name))) return true;
  }
  return false;
}

TRITONSERVER_Error *TRITONBACKEND_StateNew(TRITONBACKEND_State **state, TRITONBACKEND_Request *request,
                                           const char *name, const TRITONSERVER_DataType datatype,
                                           const int64_t *shape, const uint32_t dims_count) {
  (void)datatype;
  (void)shape;
  (void)dims_count;
  if (!state || !request || !name)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "state, request and name must not be NULL");
  const TRITONBACKEND_Model *m = ((TRITONSERVER_InferenceRequest *)request)->model;
  if (!declares_state(m, name))
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "state '%s' is not a valid state name: model '%s' declares no such sequence_batching state",
                         name, m->name);
  return nrd_error_new(TRITONSERVER_ERROR_UNSUPPORTED,
                       "state '%s' of model '%s': implicit state needs the sequence batcher, which this build "
                       "does not have yet",
                       name, m->name);
}

TRITONSERVER_Error *TRITONBACKEND_StateUpdate(TRITONBACKEND_State *state) {
  (void)state;
  return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "no implicit state object can exist in this build");
}

TRITONSERVER_Error *TRITONBACKEND_StateBuffer(TRITONBACKEND_State *state, void **buffer, const uint64_t buffer_byte_size,
                                              TRITONSERVER_MemoryType *memory_type, int64_t *memory_type_id) {
  (void)state;
  (void)buffer;
  (void)buffer_byte_size;
  (void)memory_type;
  (void)memory_type_id;
  return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "no implicit state object can exist in this build");
}

TRITONSERVER_Error *TRITONBACKEND_StateBufferAttributes(TRITONBACKEND_State *state,
                                                        TRITONSERVER_BufferAttributes **buffer_attributes) {
  (void)state;
  (void)buffer_attributes;
  return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "no implicit state object can exist in this build");
}
