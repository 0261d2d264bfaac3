/*
 * Opening a session and describing its inputs and outputs.
 */
#include "ort_session.h"

#include <stdlib.h>
#include <string.h>

#include "nereid/backend_utils.h"

static TRITONSERVER_Error *oom(void) {
  return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, "onnxruntime: out of memory");
}

/* Fills 'info' from a type description; non-tensors keep type UNDEFINED. */
static TRITONSERVER_Error *describe(const ort_runtime *rt, OrtTypeInfo *type, ort_tensor_info *info) {
  const OrtApi *api = rt->api;
  enum ONNXType kind = ONNX_TYPE_UNKNOWN;
  TRITONSERVER_Error *err = ort_runtime_error(rt, api->GetOnnxTypeFromTypeInfo(type, &kind), "cannot read a type");
  if (err != NULL || kind != ONNX_TYPE_TENSOR) {
    return err;
  }
  const OrtTensorTypeAndShapeInfo *tensor = NULL;
  err = ort_runtime_error(rt, api->CastTypeInfoToTensorInfo(type, &tensor), "cannot read a tensor type");
  if (err == NULL) {
    err = ort_runtime_error(rt, api->GetTensorElementType(tensor, &info->type), "cannot read an element type");
  }
  if (err == NULL) {
    err = ort_runtime_error(rt, api->GetDimensionsCount(tensor, &info->rank), "cannot read a rank");
  }
  if (err == NULL) {
    info->dims = calloc(info->rank > 0 ? info->rank : 1, sizeof(int64_t));
    if (info->dims == NULL) return oom();
    err = ort_runtime_error(rt, api->GetDimensions(tensor, info->dims, info->rank), "cannot read dimensions");
  }
  /* Symbolic dimensions come back as -1 already; anything negative is
   * dynamic. */
  for (size_t i = 0; err == NULL && i < info->rank; i++) {
    if (info->dims[i] < 0) info->dims[i] = -1;
  }
  return err;
}

typedef OrtStatus *(*count_fn)(const OrtSession *, size_t *);
typedef OrtStatus *(*name_fn)(const OrtSession *, size_t, OrtAllocator *, char **);
typedef OrtStatus *(*type_fn)(const OrtSession *, size_t, OrtTypeInfo **);

static TRITONSERVER_Error *describe_all(const ort_runtime *rt, const OrtSession *session, count_fn count, name_fn name,
                                        type_fn type, size_t *n_out, ort_tensor_info **out) {
  size_t n = 0;
  TRITONSERVER_Error *err = ort_runtime_error(rt, count(session, &n), "cannot count tensors");
  if (err != NULL) return err;
  ort_tensor_info *list = calloc(n > 0 ? n : 1, sizeof *list);
  if (list == NULL) return oom();
  *out = list;
  *n_out = n;
  for (size_t i = 0; i < n && err == NULL; i++) {
    char *ort_name = NULL;
    err = ort_runtime_error(rt, name(session, i, rt->allocator, &ort_name), "cannot read a tensor name");
    if (err != NULL) break;
    list[i].name = strdup(ort_name);
    ort_runtime_error(rt, rt->api->AllocatorFree(rt->allocator, ort_name), "cannot free a name");
    if (list[i].name == NULL) return oom();
    OrtTypeInfo *info = NULL;
    err = ort_runtime_error(rt, type(session, i, &info), "cannot read a tensor type");
    if (err == NULL) {
      err = describe(rt, info, &list[i]);
      rt->api->ReleaseTypeInfo(info);
    }
  }
  return err;
}

static void free_infos(ort_tensor_info *list, size_t n) {
  for (size_t i = 0; list != NULL && i < n; i++) {
    free(list[i].name);
    free(list[i].dims);
  }
  free(list);
}

static TRITONSERVER_Error *make_options(const ort_runtime *rt, const ort_session_options *o, OrtSessionOptions **out) {
  const OrtApi *api = rt->api;
  OrtSessionOptions *so = NULL;
  TRITONSERVER_Error *err = ort_runtime_error(rt, api->CreateSessionOptions(&so), "cannot create session options");
  if (err == NULL && o->intra_op_threads > 0 && !rt->global_threads) {
    err = ort_runtime_error(rt, api->SetIntraOpNumThreads(so, o->intra_op_threads), "intra_op_thread_count");
  }
  if (err == NULL && o->inter_op_threads > 0 && !rt->global_threads) {
    err = ort_runtime_error(rt, api->SetInterOpNumThreads(so, o->inter_op_threads), "inter_op_thread_count");
  }
  if (err == NULL) {
    err = ort_runtime_error(rt, api->SetSessionExecutionMode(so, o->parallel ? ORT_PARALLEL : ORT_SEQUENTIAL),
                            "execution_mode");
  }
  if (err == NULL) {
    err = ort_runtime_error(rt, api->SetSessionGraphOptimizationLevel(so, (GraphOptimizationLevel)o->optimization),
                            "optimization level");
  }
  if (err == NULL && o->mem_arena >= 0) {
    err = ort_runtime_error(rt, o->mem_arena ? api->EnableCpuMemArena(so) : api->DisableCpuMemArena(so),
                            "enable_mem_arena");
  }
  if (err == NULL && o->mem_pattern >= 0) {
    err = ort_runtime_error(rt, o->mem_pattern ? api->EnableMemPattern(so) : api->DisableMemPattern(so),
                            "enable_mem_pattern");
  }
  if (err == NULL && o->device_allocator_for_initializers[0] != '\0') {
    err = ort_runtime_error(rt,
                            api->AddSessionConfigEntry(so, "session.use_device_allocator_for_initializers",
                                                       o->device_allocator_for_initializers),
                            "session.use_device_allocator_for_initializers");
  }
  /* With global thread pools the sessions use the environment's. */
  if (err == NULL && rt->global_threads) {
    err = ort_runtime_error(rt, api->DisablePerSessionThreads(so), "cannot use the global thread pools");
  }
  if (err == NULL && o->cuda != NULL) {
    err = ort_cuda_append(rt, so, o->cuda, o->device, o->backend, o->instance);
  }
  if (err != NULL) {
    if (so != NULL) api->ReleaseSessionOptions(so);
    return err;
  }
  *out = so;
  return NULL;
}

TRITONSERVER_Error *ort_session_open(const ort_runtime *rt, const char *path, const ort_session_options *options,
                                     ort_session *out) {
  const OrtApi *api = rt->api;
  ort_session s;
  memset(&s, 0, sizeof s);
  OrtSessionOptions *so = NULL;
  TRITONSERVER_Error *err = make_options(rt, options, &so);
  if (err != NULL) return err;
  OrtStatus *st = api->CreateSession(rt->env, path, so, &s.session);
  api->ReleaseSessionOptions(so);
  if (st != NULL) {
    err = nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "onnxruntime: cannot load '%s': %s", path,
                            api->GetErrorMessage(st));
    api->ReleaseStatus(st);
    return err;
  }
  err = describe_all(rt, s.session, api->SessionGetInputCount, api->SessionGetInputName, api->SessionGetInputTypeInfo,
                     &s.input_count, &s.inputs);
  if (err == NULL && options->arena_shrinkage[0] != '\0') {
    err = ort_runtime_error(rt, api->CreateRunOptions(&s.run_options), "cannot create run options");
    if (err == NULL) {
      err = ort_runtime_error(
          rt, api->AddRunConfigEntry(s.run_options, "memory.enable_memory_arena_shrinkage", options->arena_shrinkage),
          "memory.enable_memory_arena_shrinkage");
    }
  }
  if (err == NULL) {
    err = describe_all(rt, s.session, api->SessionGetOutputCount, api->SessionGetOutputName,
                       api->SessionGetOutputTypeInfo, &s.output_count, &s.outputs);
  }
  if (err != NULL) {
    ort_session_close(rt, &s);
    return err;
  }
  *out = s;
  return NULL;
}

void ort_session_close(const ort_runtime *rt, ort_session *s) {
  if (s->session != NULL) rt->api->ReleaseSession(s->session);
  if (s->run_options != NULL) rt->api->ReleaseRunOptions(s->run_options);
  free_infos(s->inputs, s->input_count);
  free_infos(s->outputs, s->output_count);
  memset(s, 0, sizeof *s);
}

const ort_tensor_info *ort_session_find(const ort_tensor_info *list, size_t count, const char *name) {
  for (size_t i = 0; i < count; i++) {
    if (strcmp(list[i].name, name) == 0) return &list[i];
  }
  return NULL;
}
