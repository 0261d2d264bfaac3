/*
 * stateful backend: serves model repositories written for Triton's Stateful
 * Backend (backend: "stateful", parameters state_pairs, ...) on ONNX
 * Runtime's CPU execution provider. The backend keeps the state tensors of
 * every active sequence in per-instance buffers and feeds them back into
 * the model, so clients never send state (docs/stateful.md).
 *
 * ONNX Runtime is loaded with dlopen and the entry points are the shared
 * ones of backends/common_ort (ort_backend.h, shared with the onnxruntime
 * backend), which call the functions of this table; the environment logs
 * at --backend-config=stateful,ort-logging-level=N (default 2, warning), as
 * the original backend reads it. One session per model instance.
 *
 * Threads: the backend state (the runtime) is immutable between Initialize
 * and Finalize; model state is read-only after ModelInitialize; instance
 * state (session, state buffers, sequence slots) belongs to the instance
 * thread.
 */
#include "ort_backend.h"
#include "stateful.h"

const ort_backend_ops ort_backend = {
    .name = "stateful",
    .logging_level_setting = true,
    .model_new = sf_model_new,
    .model_free = sf_model_free,
    .instance_new = sf_instance_new,
    .instance_free = sf_instance_free,
    .instance_execute = sf_instance_execute,
};
