/*
 * ONNX Runtime's CUDA execution provider for KIND_GPU instances: the
 * options Triton's onnxruntime backend takes for it, checked, and the
 * provider appended to a session's options.
 *
 * Options come from the model configuration as Triton's backend reads them:
 * optimization.execution_accelerators.gpu_execution_accelerator entries
 * named "cuda" (their parameters are ONNX Runtime's CUDA provider options),
 * then the older model parameters cudnn_conv_algo_search, gpu_mem_limit,
 * arena_extend_strategy and do_copy_in_default_stream, which override them
 * (read only when the configuration has parameters, as Triton does).
 *
 * Threads: an ort_cuda_options is immutable once read; any thread.
 */
#ifndef NEREID_ORT_CUDA_H
#define NEREID_ORT_CUDA_H

#include <jansson.h>
#include <stddef.h>

#include "ort_runtime.h"

#define ORT_CUDA_MAX_OPTIONS 32

typedef struct ort_cuda_options {
  size_t count;
  char keys[ORT_CUDA_MAX_OPTIONS][48];
  char values[ORT_CUDA_MAX_OPTIONS][64];
} ort_cuda_options;

/*
 * Reads and checks the CUDA provider options of 'config' for the backend
 * 'backend' (error prefix) and model 'model'. Errors (INVALID_ARG) give
 * Triton's sentence first where it has one, then the field. Nothing to
 * free; '*out' is zeroed first.
 */
TRITONSERVER_Error *ort_cuda_options_read(const json_t *config, const char *backend, const char *model,
                                          ort_cuda_options *out);

/*
 * Appends ONNX Runtime's CUDA provider on GPU 'device' with 'options' to
 * 'so'. On failure (a library without the provider, bad options) the error
 * is Triton's "onnx runtime error <code>: <ONNX Runtime's message>", then
 * the backend, instance, device and library; 'so' is then the caller's to
 * release as always. Thread: instance initialization.
 */
TRITONSERVER_Error *ort_cuda_append(const ort_runtime *rt, OrtSessionOptions *so, const ort_cuda_options *options,
                                    int device, const char *backend, const char *instance);

#endif /* NEREID_ORT_CUDA_H */
