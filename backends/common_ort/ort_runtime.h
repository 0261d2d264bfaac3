/*
 * ONNX Runtime, loaded at run time: the library, its API table, one
 * environment and the CPU memory description every tensor uses.
 *
 * The backend never links libonnxruntime: TRITONBACKEND_Initialize opens it
 * with dlopen (ort_runtime_open), so the backend builds without ONNX Runtime
 * and a server without ONNX models never maps it.
 *
 * Threads: an ort_runtime is immutable once opened; ONNX Runtime's own API
 * functions are thread-safe for the objects used here (one session per model
 * instance, Run called by that instance's thread only).
 */
#ifndef NEREID_ORT_RUNTIME_H
#define NEREID_ORT_RUNTIME_H

#include <stdbool.h>

#include "ort_api.h"
#include "triton/core/tritonserver.h"

typedef struct ort_runtime {
  void *library; /* dlopen handle */
  const OrtApi *api; /* owned by the library */
  OrtEnv *env; /* ReleaseEnv */
  OrtMemoryInfo *cpu; /* ReleaseMemoryInfo */
  OrtAllocator *allocator; /* the library's default; never released */
  char path[4096]; /* where the library was found */
  char version[64]; /* ONNX Runtime's version string */
  bool cuda; /* the library has the CUDA execution provider */
  bool global_threads; /* sessions share the environment's thread pools */
} ort_runtime;

/* Triton's global thread pools (backend settings enable-global-threadpool,
 * intra_op_thread_count and inter_op_thread_count): one pair of pools in
 * the environment that every session uses, instead of a pair per session.
 * Counts of 0 leave ONNX Runtime's defaults. */
typedef struct ort_global_threads {
  bool enabled;
  int intra, inter;
} ort_global_threads;

/*
 * Opens libonnxruntime.so.1, first from 'backend_dir' (where a backend's own
 * libraries live, as in Triton's layout; may be NULL), then through the
 * dynamic loader's search path, with its environment logging at 'level'
 * and, when 'threads' (may be NULL) is enabled, global thread pools.
 * On failure the error names every place tried and nothing stays open. The
 * caller owns '*out' and closes it with ort_runtime_close. Thread:
 * TRITONBACKEND_Initialize.
 */
TRITONSERVER_Error *ort_runtime_open(const char *backend_dir, OrtLoggingLevel level, const ort_global_threads *threads,
                                     ort_runtime *out);

/* Releases what ort_runtime_open made; safe on a zeroed struct. */
void ort_runtime_close(ort_runtime *rt);

/*
 * Turns an OrtStatus into a server error "onnxruntime: <what>: <message>"
 * and releases the status. NULL status gives NULL. Any thread.
 */
TRITONSERVER_Error *ort_runtime_error(const ort_runtime *rt, OrtStatus *status, const char *what);

/*
 * The element type of a Triton datatype, or ONNX_TENSOR_ELEMENT_DATA_TYPE_
 * UNDEFINED when ONNX has none. Any thread.
 */
ONNXTensorElementDataType ort_element_type(TRITONSERVER_DataType dt);

/* The Triton datatype of an element type, or TRITONSERVER_TYPE_INVALID. */
TRITONSERVER_DataType ort_triton_type(ONNXTensorElementDataType et);

#endif /* NEREID_ORT_RUNTIME_H */
