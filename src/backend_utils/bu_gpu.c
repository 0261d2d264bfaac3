/* Copies between memory types for backends (nrd_bu_copy): memcpy between
 * host types, else the NVIDIA driver's cuMemcpy in the device's primary
 * context, the driver opened with dlopen on first need (NEREID_CUDA_LIBRARY
 * names another library, as for the core) so backends need no CUDA
 * toolkit to build. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../core/gpu_driver.h"
#include "nereid/backend_utils.h"

typedef struct bu_cuda {
  nrd_cu_init_fn init;
  nrd_cu_device_get_fn device_get;
  nrd_cu_primary_ctx_retain_fn retain;
  nrd_cu_primary_ctx_release_fn release;
  nrd_cu_ctx_push_fn push;
  nrd_cu_ctx_pop_fn pop;
  nrd_cu_copy_fn copy;
  bool ok;
} bu_cuda;

static bu_cuda cu;
static pthread_once_t cu_once = PTHREAD_ONCE_INIT;

static void cu_open(void) {
  const char *path = getenv("NEREID_CUDA_LIBRARY");
  void *lib = dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    return;
  }
  *(void **)&cu.init = dlsym(lib, "cuInit");
  *(void **)&cu.device_get = dlsym(lib, "cuDeviceGet");
  *(void **)&cu.retain = dlsym(lib, "cuDevicePrimaryCtxRetain");
  *(void **)&cu.release = dlsym(lib, "cuDevicePrimaryCtxRelease_v2");
  *(void **)&cu.push = dlsym(lib, "cuCtxPushCurrent_v2");
  *(void **)&cu.pop = dlsym(lib, "cuCtxPopCurrent_v2");
  *(void **)&cu.copy = dlsym(lib, "cuMemcpy");
  cu.ok = cu.init && cu.device_get && cu.retain && cu.release && cu.push && cu.pop && cu.copy &&
          cu.init(0) == NRD_CUDA_SUCCESS;
}

static bool on_host(TRITONSERVER_MemoryType t) { return t != TRITONSERVER_MEMORY_GPU; }

TRITONSERVER_Error *nrd_bu_copy(void *dst, TRITONSERVER_MemoryType dst_type, int64_t dst_id, const void *src,
                                TRITONSERVER_MemoryType src_type, int64_t src_id, size_t bytes) {
  if (bytes == 0) {
    return NULL;
  }
  if (on_host(dst_type) && on_host(src_type)) {
    memcpy(dst, src, bytes);
    return NULL;
  }
  pthread_once(&cu_once, cu_open);
  int64_t id = src_type == TRITONSERVER_MEMORY_GPU ? src_id : dst_id;
  if (!cu.ok) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_UNSUPPORTED, "cannot copy GPU memory: no NVIDIA driver");
  }
  nrd_cu_device dev;
  nrd_cu_context ctx;
  if (id < 0 || id > 1 << 20 || cu.device_get(&dev, (int)id) != NRD_CUDA_SUCCESS ||
      cu.retain(&ctx, dev) != NRD_CUDA_SUCCESS) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "cannot copy GPU memory: GPU %lld is not available",
                             (long long)id);
  }
  nrd_cu_result r = cu.push(ctx);
  if (r == NRD_CUDA_SUCCESS) {
    r = cu.copy((nrd_cu_deviceptr)(uintptr_t)dst, (nrd_cu_deviceptr)(uintptr_t)src, bytes);
    nrd_cu_context popped;
    (void)cu.pop(&popped);
  }
  (void)cu.release(dev);
  if (r != NRD_CUDA_SUCCESS) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL,
                             "cannot copy %zu bytes of GPU memory (GPU %lld): CUDA error %u", bytes, (long long)id, r);
  }
  return NULL;
}
