/*
 * One ONNX Runtime inference session and the description of its inputs and
 * outputs (names, element types, dimensions).
 *
 * Threads: a session is opened and closed by one thread (instance
 * initialization and finalization) and run only by its instance's thread.
 */
#ifndef NEREID_ORT_SESSION_H
#define NEREID_ORT_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "ort_cuda.h"
#include "ort_runtime.h"

typedef struct ort_tensor_info {
  char *name; /* owned copy */
  ONNXTensorElementDataType type; /* UNDEFINED when not a tensor */
  int64_t *dims; /* owned; -1 for a dynamic dimension */
  size_t rank;
} ort_tensor_info;

typedef struct ort_session {
  OrtSession *session;
  size_t input_count, output_count;
  ort_tensor_info *inputs, *outputs;
  OrtRunOptions *run_options; /* for Run; NULL: ONNX Runtime's defaults */
} ort_session;

/* Session settings, taken from the model configuration's parameters. */
typedef struct ort_session_options {
  int intra_op_threads; /* 0: ONNX Runtime's default */
  int inter_op_threads; /* 0: ONNX Runtime's default */
  int parallel; /* execution_mode 1: ORT_PARALLEL */
  int optimization; /* a GraphOptimizationLevel value */
  int mem_arena, mem_pattern; /* enable_mem_arena, enable_mem_pattern: 1, 0, -1 unset */
  /* session.use_device_allocator_for_initializers, passed on as given ("" unset). */
  char device_allocator_for_initializers[16];
  /* memory.enable_memory_arena_shrinkage, a run option ("" unset). */
  char arena_shrinkage[128];
  /* The provider of KIND_GPU instances (ort_instance_open), set by the
   * backend: ONNX Runtime's CUDA provider by default. */
  enum { ORT_GPU_EP_CUDA = 0, ORT_GPU_EP_CPU, ORT_GPU_EP_TENSORRT } gpu_ep;
  /* Set by ort_instance_open for a CUDA instance, else NULL/0: the CUDA
   * provider with these options on GPU 'device' (borrowed). */
  const ort_cuda_options *cuda;
  int device;
  const char *backend, *instance; /* for errors and logs (borrowed) */
} ort_session_options;

/*
 * Opens the model at 'path' and reads its inputs and outputs. Errors name
 * the file and ONNX Runtime's reason; on failure nothing stays allocated.
 * The caller owns '*out' (ort_session_close).
 */
TRITONSERVER_Error *ort_session_open(const ort_runtime *rt, const char *path, const ort_session_options *options,
                                     ort_session *out);

/* Releases the session and its descriptions; safe on a zeroed struct. */
void ort_session_close(const ort_runtime *rt, ort_session *s);

/* The input or output named 'name' of a session, or NULL. */
const ort_tensor_info *ort_session_find(const ort_tensor_info *list, size_t count, const char *name);

#endif /* NEREID_ORT_SESSION_H */
