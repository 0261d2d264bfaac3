/* The GPU layer over the dlopen'ed driver and NVML (gpu.h). */
#include "gpu.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "gpu_driver.h"
#include "log.h"

typedef struct gpu_state {
  bool loaded; /* the driver opened and cuInit succeeded (maybe no device) */
  int driver_version;
  nrd_cuda_api cu;
  int n;
  nrd_gpu_device dev[NRD_GPU_MAX];
  nrd_cu_context ctx[NRD_GPU_MAX]; /* retained primary contexts, never released */
  bool nvml;
  nrd_nvml_api nv;
  nrd_nvml_device nvdev[NRD_GPU_MAX]; /* NULL where NVML does not know the device */
} gpu_state;

static gpu_state g;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static bool resolve(void *lib, const char *const *names, void **slots, size_t n, const char *path) {
  for (size_t i = 0; i < n; i++) {
    slots[i] = dlsym(lib, names[i]);
    if (!slots[i]) {
      NRD_LOG_WARN("GPU support off: %s lacks %s", path, names[i]);
      return false;
    }
  }
  return true;
}

#define NRD_GPU_SYM(field, ident, ret, params) #ident,
static const char *const cuda_names[] = {NRD_CUDA_FUNCS(NRD_GPU_SYM)};
static const char *const nvml_names[] = {NRD_NVML_FUNCS(NRD_GPU_SYM)};
#undef NRD_GPU_SYM

static const char *cu_err(nrd_cu_result r) {
  const char *s = NULL;
  if (g.cu.error_string && g.cu.error_string(r, &s) == NRD_CUDA_SUCCESS && s) return s;
  return "unknown CUDA error";
}

static void open_nvml(void) {
  const char *path = getenv("NEREID_NVML_LIBRARY");
  if (!path || !*path) path = "libnvidia-ml.so.1";
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) return; /* no NVML: no GPU metrics, nothing else changes */
  if (!resolve(lib, nvml_names, (void **)&g.nv, sizeof nvml_names / sizeof *nvml_names, path) ||
      g.nv.init() != NRD_NVML_SUCCESS) {
    dlclose(lib);
    memset(&g.nv, 0, sizeof g.nv);
    return;
  }
  g.nvml = true;
  for (int i = 0; i < g.n; i++)
    if (g.nv.by_pci(g.dev[i].pci_bus_id, &g.nvdev[i]) != NRD_NVML_SUCCESS) g.nvdev[i] = NULL;
}

static void open_driver(void) {
  const char *path = getenv("NEREID_CUDA_LIBRARY");
  if (!path || !*path) path = "libcuda.so.1";
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    NRD_LOG_VERBOSE(1, "no NVIDIA driver (%s): GPU support off", dlerror());
    return;
  }
  if (!resolve(lib, cuda_names, (void **)&g.cu, sizeof cuda_names / sizeof *cuda_names, path)) goto off;
  nrd_cu_result r = g.cu.init(0);
  if (r == NRD_CUDA_ERROR_NO_DEVICE) {
    g.loaded = true; /* a driver without devices: Triton's GPU build says "no GPUs are available" */
    NRD_LOG_INFO("NVIDIA driver %s found no CUDA device", path);
    return;
  }
  if (r != NRD_CUDA_SUCCESS) {
    NRD_LOG_WARN("GPU support off: cuInit failed: %s", cu_err(r));
    goto off;
  }
  g.loaded = true;
  if (g.cu.driver_version(&g.driver_version) != NRD_CUDA_SUCCESS) g.driver_version = 0;
  int count = 0;
  if (g.cu.device_count(&count) != NRD_CUDA_SUCCESS) count = 0;
  if (count > NRD_GPU_MAX) count = NRD_GPU_MAX;
  for (int i = 0; i < count; i++) {
    nrd_gpu_device *d = &g.dev[g.n];
    nrd_cu_device cd;
    size_t mem = 0;
    if (g.cu.device_get(&cd, i) != NRD_CUDA_SUCCESS || g.cu.device_name(d->name, sizeof d->name, cd) ||
        g.cu.device_total_mem(&mem, cd) ||
        g.cu.device_attribute(&d->cc_major, NRD_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, cd) ||
        g.cu.device_attribute(&d->cc_minor, NRD_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, cd) ||
        g.cu.device_pci_bus_id(d->pci_bus_id, sizeof d->pci_bus_id, cd) ||
        (r = g.cu.primary_ctx_retain(&g.ctx[g.n], cd)) != NRD_CUDA_SUCCESS) {
      NRD_LOG_WARN("GPU %d skipped: the driver cannot describe it or open its context", i);
      memset(d, 0, sizeof *d);
      continue;
    }
    d->name[sizeof d->name - 1] = '\0';
    d->pci_bus_id[sizeof d->pci_bus_id - 1] = '\0';
    d->id = i;
    d->total_memory = mem;
    NRD_LOG_VERBOSE(1, "GPU %d: %s, compute capability %d.%d, %llu bytes", i, d->name, d->cc_major, d->cc_minor,
                    (unsigned long long)mem);
    g.n++;
  }
  open_nvml();
  return;
off:
  memset(&g.cu, 0, sizeof g.cu);
  dlclose(lib);
}

static void gpu_open(void) { open_driver(); }

int nrd_gpu_count(void) {
  pthread_once(&g_once, gpu_open);
  return g.n;
}

bool nrd_gpu_driver_loaded(void) {
  pthread_once(&g_once, gpu_open);
  return g.loaded;
}

int nrd_gpu_driver_version(void) {
  pthread_once(&g_once, gpu_open);
  return g.driver_version;
}

/* Devices are kept in ordinal order; a skipped one leaves a gap. */
static int slot_of(int id) {
  pthread_once(&g_once, gpu_open);
  for (int i = 0; i < g.n; i++)
    if (g.dev[i].id == id) return i;
  return -1;
}

const nrd_gpu_device *nrd_gpu_device_get(int id) {
  int s = slot_of(id);
  return s < 0 ? NULL : &g.dev[s];
}

static TRITONSERVER_Error *no_device(int device) {
  return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "GPU %d is not available (%d CUDA device%s found)", device, g.n,
                       g.n == 1 ? "" : "s");
}

static TRITONSERVER_Error *push(int s) {
  nrd_cu_result r = g.cu.ctx_push(g.ctx[s]);
  if (r != NRD_CUDA_SUCCESS)
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "cannot make GPU %d's context current: %s", g.dev[s].id,
                         cu_err(r));
  return NULL;
}

static void pop(void) {
  nrd_cu_context c;
  (void)g.cu.ctx_pop(&c);
}

TRITONSERVER_Error *nrd_gpu_alloc(int device, size_t bytes, void **ptr) {
  *ptr = NULL;
  int s = slot_of(device);
  if (s < 0) return no_device(device);
  TRITONSERVER_Error *e = push(s);
  if (e) return e;
  nrd_cu_deviceptr d = 0;
  nrd_cu_result r = g.cu.mem_alloc(&d, bytes ? bytes : 1);
  pop();
  if (r != NRD_CUDA_SUCCESS)
    return nrd_error_new(r == NRD_CUDA_ERROR_OUT_OF_MEMORY ? TRITONSERVER_ERROR_UNAVAILABLE
                                                           : TRITONSERVER_ERROR_INTERNAL,
                         "failed to allocate %zu bytes on GPU %d: %s", bytes, device, cu_err(r));
  *ptr = (void *)(uintptr_t)d;
  return NULL;
}

TRITONSERVER_Error *nrd_gpu_mem_info(int device, size_t *free_bytes, size_t *total_bytes) {
  int s = slot_of(device);
  if (s < 0) return no_device(device);
  TRITONSERVER_Error *e = push(s);
  if (e) return e;
  nrd_cu_result r = g.cu.mem_get_info(free_bytes, total_bytes);
  pop();
  if (r != NRD_CUDA_SUCCESS)
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "failed to read the memory of GPU %d: %s", device, cu_err(r));
  return NULL;
}

void nrd_gpu_free(int device, void *ptr) {
  int s = slot_of(device);
  if (s < 0 || !ptr || push(s) != NULL) return;
  nrd_cu_result r = g.cu.mem_free((nrd_cu_deviceptr)(uintptr_t)ptr);
  pop();
  if (r != NRD_CUDA_SUCCESS) NRD_LOG_ERROR("cuMemFree on GPU %d failed: %s", device, cu_err(r));
}

TRITONSERVER_Error *nrd_gpu_host_alloc(size_t bytes, void **ptr) {
  *ptr = NULL;
  if (nrd_gpu_count() == 0)
    return nrd_error_new(TRITONSERVER_ERROR_UNAVAILABLE, "pinned memory needs a CUDA device; none was found");
  TRITONSERVER_Error *e = push(0);
  if (e) return e;
  nrd_cu_result r = g.cu.mem_host_alloc(ptr, bytes ? bytes : 1, NRD_CU_MEMHOSTALLOC_PORTABLE);
  pop();
  if (r != NRD_CUDA_SUCCESS) {
    *ptr = NULL;
    return nrd_error_new(TRITONSERVER_ERROR_UNAVAILABLE, "failed to allocate %zu bytes of pinned memory: %s", bytes,
                         cu_err(r));
  }
  return NULL;
}

void nrd_gpu_host_free(void *ptr) {
  if (!ptr || nrd_gpu_count() == 0) return;
  nrd_cu_result r = g.cu.mem_free_host(ptr);
  if (r != NRD_CUDA_SUCCESS) NRD_LOG_ERROR("cuMemFreeHost failed: %s", cu_err(r));
}

TRITONSERVER_Error *nrd_gpu_copy(void *dst, const void *src, size_t bytes, int device) {
  if (bytes == 0) return NULL;
  int s = slot_of(device);
  if (s < 0) return no_device(device);
  TRITONSERVER_Error *e = push(s);
  if (e) return e;
  nrd_cu_result r = g.cu.copy((nrd_cu_deviceptr)(uintptr_t)dst, (nrd_cu_deviceptr)(uintptr_t)src, bytes);
  pop();
  if (r != NRD_CUDA_SUCCESS)
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "failed to copy %zu bytes (GPU %d): %s", bytes, device,
                         cu_err(r));
  return NULL;
}

TRITONSERVER_Error *nrd_gpu_ipc_handle(int device, void *ptr, char handle[NRD_GPU_IPC_HANDLE_SIZE]) {
  int s = slot_of(device);
  if (s < 0) return no_device(device);
  TRITONSERVER_Error *e = push(s);
  if (e) return e;
  nrd_cu_ipc_handle h;
  nrd_cu_result r = g.cu.ipc_get(&h, (nrd_cu_deviceptr)(uintptr_t)ptr);
  pop();
  if (r != NRD_CUDA_SUCCESS)
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "cannot get the CUDA IPC handle on GPU %d: %s", device,
                         cu_err(r));
  memcpy(handle, h.reserved, NRD_GPU_IPC_HANDLE_SIZE);
  return NULL;
}

TRITONSERVER_Error *nrd_gpu_ipc_open(int device, const char handle[NRD_GPU_IPC_HANDLE_SIZE], void **ptr) {
  *ptr = NULL;
  int s = slot_of(device);
  if (s < 0) return no_device(device);
  TRITONSERVER_Error *e = push(s);
  if (e) return e;
  nrd_cu_ipc_handle h;
  memcpy(h.reserved, handle, NRD_GPU_IPC_HANDLE_SIZE);
  nrd_cu_deviceptr d = 0;
  nrd_cu_result r = g.cu.ipc_open(&d, h, NRD_CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
  pop();
  if (r != NRD_CUDA_SUCCESS)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "cannot open the CUDA IPC handle on GPU %d: %s", device,
                         cu_err(r));
  *ptr = (void *)(uintptr_t)d;
  return NULL;
}

void nrd_gpu_ipc_close(int device, void *ptr) {
  int s = slot_of(device);
  if (s < 0 || !ptr || push(s) != NULL) return;
  nrd_cu_result r = g.cu.ipc_close((nrd_cu_deviceptr)(uintptr_t)ptr);
  pop();
  if (r != NRD_CUDA_SUCCESS) NRD_LOG_ERROR("cuIpcCloseMemHandle on GPU %d failed: %s", device, cu_err(r));
}

bool nrd_gpu_sample_get(int id, nrd_gpu_sample *out) {
  int s = slot_of(id);
  if (s < 0 || !g.nvml || !g.nvdev[s]) return false;
  nrd_nvml_device d = g.nvdev[s];
  memset(out, 0, sizeof *out);
  if (g.nv.uuid(d, out->uuid, sizeof out->uuid) != NRD_NVML_SUCCESS)
    snprintf(out->uuid, sizeof out->uuid, "GPU-%d", id);
  out->uuid[sizeof out->uuid - 1] = '\0';
  nrd_nvml_utilization u;
  out->utilization = g.nv.utilization(d, &u) == NRD_NVML_SUCCESS ? u.gpu / 100.0 : -1;
  nrd_nvml_memory m;
  if (g.nv.memory(d, &m) == NRD_NVML_SUCCESS)
    out->memory_total = (double)m.total, out->memory_used = (double)m.used;
  else
    out->memory_total = out->memory_used = -1;
  unsigned int mw;
  out->power_usage = g.nv.power_usage(d, &mw) == NRD_NVML_SUCCESS ? mw / 1000.0 : -1;
  out->power_limit = g.nv.power_limit(d, &mw) == NRD_NVML_SUCCESS ? mw / 1000.0 : -1;
  unsigned long long mj;
  out->energy = g.nv.energy(d, &mj) == NRD_NVML_SUCCESS ? (double)mj / 1000.0 : -1;
  return true;
}
