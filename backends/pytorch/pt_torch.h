/*
 * The pytorch backend's only door to libtorch: a small C interface over
 * TorchScript modules, written in C++ in pt_torch.cpp. Everything else of
 * the backend is C.
 *
 * Errors are TRITONSERVER_Error* owned by the caller; a C++ exception never
 * crosses this interface. Messages carry libtorch's text without its C++
 * backtrace.
 *
 * Threads: a pt_module may run forward() on several threads at once (what
 * weight sharing does, as in Triton); pt_args and pt_result belong to the
 * thread that made them. The settings functions change process-wide state
 * (libtorch's thread pools, JIT modes) and may be called from any thread.
 */
#ifndef NEREID_PT_TORCH_H
#define NEREID_PT_TORCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "triton/core/tritonserver.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A loaded TorchScript module; several handles may share one module. */
typedef struct pt_module pt_module;
/* The arguments of one forward() call being built. */
typedef struct pt_args pt_args;
/* What one forward() call returned. */
typedef struct pt_result pt_result;

/* What a forward() argument is, as Triton's pytorch backend sorts them. */
typedef enum pt_arg_kind { PT_ARG_TENSOR, PT_ARG_LIST, PT_ARG_DICT, PT_ARG_OTHER } pt_arg_kind;

/* One argument of forward() (self excluded). */
typedef struct pt_arg_info {
  char *name; /* owned by the array (pt_arg_infos_free) */
  char *type; /* TorchScript's spelling of its type, owned likewise */
  pt_arg_kind kind;
} pt_arg_info;

/* How forward() runs (the model's parameters). A JIT setting of -1 leaves
 * libtorch's process-wide default alone, as Triton does when a parameter
 * is absent. */
typedef struct pt_exec_options {
  bool optimized; /* !DISABLE_OPTIMIZED_EXECUTION */
  bool inference_mode; /* INFERENCE_MODE */
  bool cudnn; /* !DISABLE_CUDNN */
  bool deterministic; /* ENABLE_DETERMINISTIC_ALGORITHMS */
  int jit_profiling; /* ENABLE_JIT_PROFILING: -1, 0, 1 */
  int jit_executor; /* ENABLE_JIT_EXECUTOR */
  int tensor_fuser; /* ENABLE_TENSOR_FUSER */
  int intra_op_threads; /* INTRA_OP_THREAD_COUNT; <= 0: libtorch's default */
} pt_exec_options;

/* One output of a result. Pointers are borrowed from the pt_result and live
 * until pt_result_free. */
typedef struct pt_output {
  bool is_strings; /* a List[str]: read it with pt_result_string */
  size_t string_count;
  TRITONSERVER_DataType datatype; /* INVALID for a dtype Triton lacks */
  const char *torch_type; /* libtorch's name of the dtype ("Float") */
  const int64_t *shape;
  uint32_t dims_count;
  const void *data; /* contiguous, in CPU memory */
  uint64_t byte_size;
} pt_output;

/* libtorch's version ("2.8.0"), a static string. Any thread. */
const char *pt_version(void);

/*
 * Sets the size of libtorch's inter-op thread pool (process-wide). libtorch
 * allows it only once, before the pool starts: a later call with another
 * size is an INVALID_ARG error naming both. Any thread.
 */
TRITONSERVER_Error *pt_set_inter_op_threads(int count);

/*
 * Loads the TorchScript file at 'path' onto the CPU (under InferenceMode
 * when 'inference_mode'). On success '*out' is a new handle the caller
 * frees with pt_module_free; on failure nothing is allocated and the error
 * (INTERNAL) carries libtorch's reason only (the caller names the model).
 * Any thread.
 */
TRITONSERVER_Error *pt_module_load(const char *path, bool inference_mode, pt_module **out);

/* Another handle on the same module (weight sharing); NULL when out of
 * memory. The caller frees it with pt_module_free. Any thread. */
pt_module *pt_module_share(const pt_module *module);

/* Frees a handle; the module goes with its last handle. NULL is fine. */
void pt_module_free(pt_module *module);

/*
 * Lists forward()'s arguments after self. On success '*out' is an array of
 * '*count' entries the caller frees with pt_arg_infos_free; a module without
 * forward() is a NOT_FOUND error. Any thread.
 */
TRITONSERVER_Error *pt_module_arguments(const pt_module *module, pt_arg_info **out, size_t *count);

/* Frees what pt_module_arguments returned; NULL is fine. */
void pt_arg_infos_free(pt_arg_info *infos, size_t count);

/*
 * New arguments for forward(): 'count' positional slots (unset slots pass
 * None), or, with 'dict', one Dict[str, Tensor] argument filled by key.
 * NULL when out of memory. Freed with pt_args_free.
 */
pt_args *pt_args_new(size_t count, bool dict);

/* Frees arguments (the data they point at stays the caller's). NULL is fine. */
void pt_args_free(pt_args *args);

/*
 * Sets slot 'index' (or dict key 'key' for dict arguments) to a tensor over
 * 'data' without a copy: 'data' must stay valid and unchanged until
 * pt_args_free (forward() may write into it, as in Triton). A datatype
 * libtorch does not take is an INVALID_ARG error. Thread: the args' owner.
 */
TRITONSERVER_Error *pt_args_set_tensor(pt_args *args, size_t index, const char *key, const void *data,
                                       TRITONSERVER_DataType datatype, const int64_t *shape, uint32_t dims_count);

/*
 * Sets slot 'index' (or key 'key') to a List[str] of 'count' strings, copied
 * from 'strings'/'lengths' (which stay the caller's). Thread: the owner.
 */
TRITONSERVER_Error *pt_args_set_strings(pt_args *args, size_t index, const char *key, const char *const *strings,
                                        const uint32_t *lengths, size_t count);

/*
 * Runs forward() with 'args' under 'options'. The result must be a Tensor,
 * a List[str] or a tuple of those; anything else, and any exception thrown
 * by the model, is an INTERNAL error "PyTorch execute failure: <reason>"
 * (Triton's sentence). On success '*out' is owned by the caller
 * (pt_result_free). 'args' stays the caller's. Thread: the args' owner.
 */
TRITONSERVER_Error *pt_module_forward(pt_module *module, pt_args *args, const pt_exec_options *options,
                                      pt_result **out);

/* Number of outputs in a result (the tuple's size, or 1). */
size_t pt_result_count(const pt_result *result);

/* Describes output 'index' (< pt_result_count) in '*out'. */
void pt_result_output(const pt_result *result, size_t index, pt_output *out);

/* String 'element' of List[str] output 'index': '*data' and '*length' are
 * borrowed from the result. */
void pt_result_string(const pt_result *result, size_t index, size_t element, const char **data, size_t *length);

/* Frees a result; NULL is fine. */
void pt_result_free(pt_result *result);

#ifdef __cplusplus
}
#endif

#endif /* NEREID_PT_TORCH_H */
