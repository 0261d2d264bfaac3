/* CUDA IPC through the dlopen'ed driver (cuda_ipc.h). */
#include "cuda_ipc.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/gpu_driver.h"

static struct {
  nrd_cu_init_fn init;
  nrd_cu_error_string_fn error_string;
  nrd_cu_device_get_fn device_get;
  nrd_cu_primary_ctx_retain_fn retain;
  nrd_cu_primary_ctx_release_fn release;
  nrd_cu_ctx_push_fn push;
  nrd_cu_ctx_pop_fn pop;
  nrd_cu_ipc_open_fn open;
  nrd_cu_ipc_close_fn close;
  bool ok;
} cu;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void cu_load(void) {
  const char *path = getenv("NEREID_CUDA_LIBRARY");
  void *lib = dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return;
  *(void **)&cu.init = dlsym(lib, "cuInit");
  *(void **)&cu.error_string = dlsym(lib, "cuGetErrorString");
  *(void **)&cu.device_get = dlsym(lib, "cuDeviceGet");
  *(void **)&cu.retain = dlsym(lib, "cuDevicePrimaryCtxRetain");
  *(void **)&cu.release = dlsym(lib, "cuDevicePrimaryCtxRelease_v2");
  *(void **)&cu.push = dlsym(lib, "cuCtxPushCurrent_v2");
  *(void **)&cu.pop = dlsym(lib, "cuCtxPopCurrent_v2");
  *(void **)&cu.open = dlsym(lib, "cuIpcOpenMemHandle_v2");
  *(void **)&cu.close = dlsym(lib, "cuIpcCloseMemHandle");
  cu.ok = cu.init && cu.error_string && cu.device_get && cu.retain && cu.release && cu.push && cu.pop && cu.open &&
          cu.close && cu.init(0) == NRD_CUDA_SUCCESS;
}

bool nrd_srv_cuda_available(void) {
  pthread_once(&once, cu_load);
  return cu.ok;
}

static TRITONSERVER_Error *cu_error(nrd_cu_result r) {
  const char *s = NULL;
  if (cu.error_string(r, &s) != NRD_CUDA_SUCCESS || !s) s = "unknown error";
  char msg[300];
  snprintf(msg, sizeof msg, "failed to open CUDA IPC handle: %s", s);
  return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, msg);
}

TRITONSERVER_Error *nrd_srv_cuda_ipc_open(int64_t device, const void *handle, void **ptr) {
  *ptr = NULL;
  if (!nrd_srv_cuda_available())
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNSUPPORTED, "failed to open CUDA IPC handle: no NVIDIA driver");
  nrd_cu_device dev;
  nrd_cu_context ctx;
  nrd_cu_result r = device < 0 || device > INT32_MAX ? 101u : cu.device_get(&dev, (int)device);
  if (r != NRD_CUDA_SUCCESS) return cu_error(r);
  if ((r = cu.retain(&ctx, dev)) != NRD_CUDA_SUCCESS) return cu_error(r);
  if ((r = cu.push(ctx)) == NRD_CUDA_SUCCESS) {
    nrd_cu_ipc_handle h;
    memcpy(&h, handle, sizeof h);
    nrd_cu_deviceptr d = 0;
    r = cu.open(&d, h, NRD_CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    if (r == NRD_CUDA_SUCCESS) *ptr = (void *)(uintptr_t)d;
    nrd_cu_context popped;
    (void)cu.pop(&popped);
  }
  /* The primary context stays retained while the mapping lives. */
  if (r != NRD_CUDA_SUCCESS) {
    (void)cu.release(dev);
    return cu_error(r);
  }
  return NULL;
}

void nrd_srv_cuda_ipc_close(int64_t device, void *ptr) {
  if (!ptr || !nrd_srv_cuda_available()) return;
  nrd_cu_device dev;
  nrd_cu_context ctx;
  if (cu.device_get(&dev, (int)device) != NRD_CUDA_SUCCESS || cu.retain(&ctx, dev) != NRD_CUDA_SUCCESS) return;
  if (cu.push(ctx) == NRD_CUDA_SUCCESS) {
    (void)cu.close((nrd_cu_deviceptr)(uintptr_t)ptr);
    nrd_cu_context popped;
    (void)cu.pop(&popped);
  }
  (void)cu.release(dev); /* this call's retain */
  (void)cu.release(dev); /* the open's */
}
