/*
 * What the backends on ONNX Runtime (onnxruntime, stateful) share above the
 * runtime and the session: the TRITONBACKEND_* entry points themselves and
 * the steps of model and instance setup that do not depend on the backend.
 *
 * The entry points (ort_backend.c) are compiled into each backend and
 * exported from it; they open the runtime, keep it as the backend state and
 * hand models and instances to the backend through the table 'ort_backend'
 * that each backend defines once.
 *
 * Threads: the table is constant. The helpers are called by the thread that
 * runs the entry point they serve (model or instance initialization).
 */
#ifndef NEREID_ORT_BACKEND_H
#define NEREID_ORT_BACKEND_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "ort_runtime.h"
#include "ort_session.h"
#include "triton/core/tritonbackend.h"

typedef struct ort_backend_ops {
  const char *name; /* the backend's name: prefix of errors and logs */
  /* Reads --backend-config=<name>,ort-logging-level=N (0 verbose .. 4
   * fatal) for the runtime's environment; otherwise WARNING. */
  bool logging_level_setting;
  /* Model state: '*out' owned by the caller until model_free. */
  TRITONSERVER_Error *(*model_new)(TRITONBACKEND_Model *model, const ort_runtime *rt, void **out);
  void (*model_free)(void *model_state); /* NULL is fine */
  /* Instance state over the model state: owned until instance_free. */
  TRITONSERVER_Error *(*instance_new)(TRITONBACKEND_ModelInstance *instance, const void *model_state, void **out);
  void (*instance_free)(void *instance_state); /* NULL is fine */
  /* Answers and releases every request. Thread: the instance thread. */
  void (*instance_execute)(void *instance_state, TRITONBACKEND_ModelInstance *instance,
                           TRITONBACKEND_Request **requests, uint32_t count);
} ort_backend_ops;

/* Each backend linking common_ort defines this table (hidden symbol). */
extern const ort_backend_ops ort_backend;

/*
 * The path of the model's ONNX file, "<repository>/<version>/<file>" ('file'
 * NULL or empty: default_model_filename, then model.onnx); a directory of
 * that name holding model.onnx is taken as Triton does. 'field' names where
 * the file name came from in the error when the file does not exist. The
 * caller owns '*out' (free).
 */
TRITONSERVER_Error *ort_model_file(TRITONBACKEND_Model *model, const json_t *config, const char *model_name,
                                   const char *file, const char *field, char **out);

/*
 * Session settings from the configuration: intra_op_thread_count,
 * inter_op_thread_count, execution_mode and optimization.graph.level
 * (mapped as Triton's onnxruntime backend maps it). Errors name the field.
 */
TRITONSERVER_Error *ort_session_options_read(const json_t *config, ort_session_options *out);

/* Triton's ParseBoolValue: true/on/1 and false/off/0, any case; otherwise
 * "failed to convert '<text>' to boolean" with `what` after it. */
TRITONSERVER_Error *ort_parse_bool(const char *text, const char *what, bool *out);

/*
 * The common start of instance initialization: the model's configuration
 * into '*config', a copy of the instance's name into '*name' and its
 * session opened from 'path' into '*session' (the caller owns all three,
 * also after an error: free, ort_session_close, json_decref). KIND_CPU
 * instances run ONNX Runtime's CPU provider; KIND_GPU ones the provider
 * options->gpu_ep names: the CUDA provider on the instance's device with
 * the configuration's CUDA options (ort_cuda.h), or the CPU provider, or
 * a refusal (TensorRT).
 */
TRITONSERVER_Error *ort_instance_open(TRITONBACKEND_ModelInstance *instance, const ort_runtime *rt, const char *path,
                                      const ort_session_options *options, char **name, ort_session *session,
                                      json_t **config);

/* Whether 'request' asks for output 'name'; false when it cannot tell. */
bool ort_output_requested(TRITONBACKEND_Request *request, const char *name);

/* The file part of a path, for errors. */
const char *ort_file_of(const char *path);

#endif /* NEREID_ORT_BACKEND_H */
