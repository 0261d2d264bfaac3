/*
 * Loading ONNX Runtime and the type mapping between it and Triton.
 */
#include "ort_runtime.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "nereid/backend_utils.h"

static const char kLibrary[] = "libonnxruntime.so.1";

TRITONSERVER_Error *ort_runtime_error(const ort_runtime *rt, OrtStatus *status, const char *what) {
  if (status == NULL) {
    return NULL;
  }
  TRITONSERVER_Error *err =
      nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL, "onnxruntime: %s: %s", what, rt->api->GetErrorMessage(status));
  rt->api->ReleaseStatus(status);
  return err;
}

static TRITONSERVER_Error *open_library(const char *backend_dir, ort_runtime *rt) {
  char tried[2048];
  rt->library = nrd_bu_dlopen_beside(backend_dir, kLibrary, rt->path, sizeof rt->path, tried, sizeof tried);
  if (rt->library == NULL) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_UNAVAILABLE,
                             "onnxruntime: cannot load ONNX Runtime (scripts/fetch_pypi.sh "
                             "installs it); tried %s",
                             tried);
  }
  return NULL;
}

/* The environment: with global thread pools when asked (Triton's loader). */
static TRITONSERVER_Error *make_env(ort_runtime *rt, OrtLoggingLevel level, const ort_global_threads *threads) {
  const OrtApi *api = rt->api;
  if (threads == NULL || !threads->enabled) {
    return ort_runtime_error(rt, api->CreateEnv(level, "nereid", &rt->env), "cannot create the environment");
  }
  OrtThreadingOptions *tp = NULL;
  TRITONSERVER_Error *err = ort_runtime_error(rt, api->CreateThreadingOptions(&tp), "cannot make threading options");
  if (err == NULL && threads->intra > 0) {
    err = ort_runtime_error(rt, api->SetGlobalIntraOpNumThreads(tp, threads->intra), "intra_op_thread_count");
  }
  if (err == NULL && threads->inter > 0) {
    err = ort_runtime_error(rt, api->SetGlobalInterOpNumThreads(tp, threads->inter), "inter_op_thread_count");
  }
  if (err == NULL) {
    err = ort_runtime_error(rt, api->CreateEnvWithGlobalThreadPools(level, "nereid", tp, &rt->env),
                            "cannot create the environment with global thread pools");
  }
  if (tp != NULL) api->ReleaseThreadingOptions(tp);
  rt->global_threads = err == NULL;
  return err;
}

TRITONSERVER_Error *ort_runtime_open(const char *backend_dir, OrtLoggingLevel level, const ort_global_threads *threads,
                                     ort_runtime *out) {
  ort_runtime rt;
  memset(&rt, 0, sizeof rt);
  TRITONSERVER_Error *err = open_library(backend_dir, &rt);
  if (err != NULL) {
    return err;
  }
  const OrtApiBase *(*get_base)(void) = NULL;
  *(void **)&get_base = dlsym(rt.library, "OrtGetApiBase");
  const OrtApiBase *base = get_base != NULL ? get_base() : NULL;
  if (base == NULL) {
    dlclose(rt.library);
    return nrd_bu_error_newf(TRITONSERVER_ERROR_UNAVAILABLE, "onnxruntime: %s has no OrtGetApiBase", rt.path);
  }
  snprintf(rt.version, sizeof rt.version, "%s", base->GetVersionString());
  rt.api = base->GetApi(NRD_ORT_API_VERSION);
  if (rt.api == NULL) {
    dlclose(rt.library);
    return nrd_bu_error_newf(TRITONSERVER_ERROR_UNAVAILABLE,
                             "onnxruntime: %s (version %s) does not offer API version %d", rt.path, rt.version,
                             NRD_ORT_API_VERSION);
  }
  err = make_env(&rt, level, threads);
  if (err == NULL) {
    err = ort_runtime_error(&rt, rt.api->CreateCpuMemoryInfo(OrtArenaAllocator, OrtMemTypeDefault, &rt.cpu),
                            "cannot describe CPU memory");
  }
  if (err == NULL) {
    err = ort_runtime_error(&rt, rt.api->GetAllocatorWithDefaultOptions(&rt.allocator),
                            "cannot get the default allocator");
  }
  if (err != NULL) {
    ort_runtime_close(&rt);
    return err;
  }
  /* Whether the library has the CUDA provider: a CPU-only one refuses to
   * make its options ("CUDA execution provider is not enabled in this
   * build."). */
  OrtCUDAProviderOptionsV2 *cuda = NULL;
  OrtStatus *st = rt.api->CreateCUDAProviderOptions(&cuda);
  rt.cuda = st == NULL;
  if (st != NULL) rt.api->ReleaseStatus(st);
  if (cuda != NULL) rt.api->ReleaseCUDAProviderOptions(cuda);
  *out = rt;
  return NULL;
}

void ort_runtime_close(ort_runtime *rt) {
  if (rt->api != NULL) {
    if (rt->cpu != NULL) rt->api->ReleaseMemoryInfo(rt->cpu);
    if (rt->env != NULL) rt->api->ReleaseEnv(rt->env);
  }
  /* The library stays mapped: ONNX Runtime keeps process-wide state (its
   * default allocator, registered schemas) that must outlive every session,
   * and backends are finalized only at process exit anyway. */
  memset(rt, 0, sizeof *rt);
}

static const struct {
  TRITONSERVER_DataType triton;
  ONNXTensorElementDataType onnx;
} kTypes[] = {
    {TRITONSERVER_TYPE_BOOL, ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL},
    {TRITONSERVER_TYPE_UINT8, ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8},
    {TRITONSERVER_TYPE_UINT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16},
    {TRITONSERVER_TYPE_UINT32, ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32},
    {TRITONSERVER_TYPE_UINT64, ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64},
    {TRITONSERVER_TYPE_INT8, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8},
    {TRITONSERVER_TYPE_INT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16},
    {TRITONSERVER_TYPE_INT32, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32},
    {TRITONSERVER_TYPE_INT64, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64},
    {TRITONSERVER_TYPE_FP16, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16},
    {TRITONSERVER_TYPE_FP32, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT},
    {TRITONSERVER_TYPE_FP64, ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE},
    {TRITONSERVER_TYPE_BYTES, ONNX_TENSOR_ELEMENT_DATA_TYPE_STRING},
    {TRITONSERVER_TYPE_BF16, ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16},
};

ONNXTensorElementDataType ort_element_type(TRITONSERVER_DataType dt) {
  for (size_t i = 0; i < sizeof kTypes / sizeof kTypes[0]; i++) {
    if (kTypes[i].triton == dt) return kTypes[i].onnx;
  }
  return ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
}

TRITONSERVER_DataType ort_triton_type(ONNXTensorElementDataType et) {
  for (size_t i = 0; i < sizeof kTypes / sizeof kTypes[0]; i++) {
    if (kTypes[i].onnx == et) return kTypes[i].triton;
  }
  return TRITONSERVER_TYPE_INVALID;
}
