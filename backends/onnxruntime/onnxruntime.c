/*
 * onnxruntime backend: runs ONNX models (platform onnxruntime_onnx) on the
 * CPU with ONNX Runtime, as Triton's backend of that name does, including
 * implicit state for sequence models (sequence_batching.state): the state
 * input arrives as an ordinary request input and the state output becomes
 * the sequence's next state.
 *
 * ONNX Runtime is loaded with dlopen from the backend's directory or the
 * loader's search path (ort_runtime.h); the entry points are the shared ones
 * of backends/common_ort (ort_backend.h), which call the functions of this
 * table. One session per model instance.
 *
 * Threads: the backend state (the runtime) is immutable between Initialize
 * and Finalize; model state is read-only after ModelInitialize; instance
 * state belongs to the instance thread.
 */
#include "ort_backend.h"
#include "ort_model.h"

const ort_backend_ops ort_backend = {
    .name = "onnxruntime",
    .model_new = ort_model_new,
    .model_free = ort_model_free,
    .instance_new = ort_instance_new,
    .instance_free = ort_instance_free,
    .instance_execute = ort_instance_execute,
};
