/* A stand-in for libcuda.so.1 and libnvidia-ml.so.1: the subset of the
 * driver API and NVML the core calls (src/core/gpu_driver.h), backed by
 * host memory, so every GPU path runs in CI under the sanitizers. Device
 * memory is a memfd mapping per allocation, so CUDA IPC handles work
 * across processes (/proc/<pid>/fd/<fd>). Test-only; never installed.
 *
 * Environment, read at cuInit:
 *   NRD_FAKE_CUDA_DEVICES  number of devices (default 2; 0: cuInit says
 *                          CUDA_ERROR_NO_DEVICE)
 *   NRD_FAKE_CUDA_CC       compute capability of every device, "M.m"
 *                          (default 8.0); "M.m,M.m" gives one per device
 *   NRD_FAKE_CUDA_MEM      bytes of memory per device (default 1 GiB)
 *   CUDA_VISIBLE_DEVICES   as the real driver: the listed ordinals only
 * Counters for tests: nrd_fake_cuda_counts(). Every function: any thread. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gpu_driver.h"

#define EXPORT __attribute__((visibility("default")))
#define MAXDEV 8

struct CUctx_st {
  int dev;
};
struct nvmlDevice_st {
  int dev;
};

typedef struct alloc {
  void *p;
  size_t size;
  int fd;
  int dev;
  int kind; /* 0 device, 1 host, 2 IPC mapping */
  struct alloc *next;
} alloc;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int ndev;
static int phys[MAXDEV]; /* visible index -> physical ordinal */
static int cc[MAXDEV][2];
static size_t mem_limit = (size_t)1 << 30;
static size_t used[MAXDEV];
static alloc *allocs;
static struct CUctx_st ctxs[MAXDEV];
static struct nvmlDevice_st nvdevs[MAXDEV];
static atomic_ullong n_alloc, n_host_alloc, n_copy, n_ipc_open;
static _Thread_local int ctx_stack[16];
static _Thread_local int ctx_depth;

/* Calls counted since load: cuMemAlloc, cuMemHostAlloc, cuMemcpy and
 * cuIpcOpenMemHandle, in that order. */
EXPORT void nrd_fake_cuda_counts(unsigned long long out[4]) {
  out[0] = n_alloc, out[1] = n_host_alloc, out[2] = n_copy, out[3] = n_ipc_open;
}

static long env_long(const char *name, long dflt) {
  const char *v = getenv(name);
  if (!v || !*v) return dflt;
  return strtol(v, NULL, 10);
}

EXPORT nrd_cu_result cuInit(unsigned int flags) {
  (void)flags;
  pthread_mutex_lock(&lock);
  long n = env_long("NRD_FAKE_CUDA_DEVICES", 2);
  if (n < 0) n = 0;
  if (n > MAXDEV) n = MAXDEV;
  mem_limit = (size_t)env_long("NRD_FAKE_CUDA_MEM", 1L << 30);
  const char *ccs = getenv("NRD_FAKE_CUDA_CC");
  int cmaj = 8, cmin = 0;
  int pcc[MAXDEV][2];
  for (int i = 0; i < MAXDEV; i++) {
    if (ccs && *ccs) {
      if (sscanf(ccs, "%d.%d", &cmaj, &cmin) != 2) cmaj = 8, cmin = 0;
      const char *comma = strchr(ccs, ',');
      ccs = comma ? comma + 1 : NULL;
    }
    pcc[i][0] = cmaj, pcc[i][1] = cmin;
  }
  const char *vis = getenv("CUDA_VISIBLE_DEVICES");
  ndev = 0;
  if (vis) {
    /* The real driver stops at the first entry it cannot use. */
    for (const char *s = vis; *s && ndev < MAXDEV;) {
      char *end;
      long o = strtol(s, &end, 10);
      if (end == s || o < 0 || o >= n) break;
      phys[ndev++] = (int)o;
      s = *end == ',' ? end + 1 : end;
      if (*end != ',' && *end) break;
    }
  } else {
    for (int i = 0; i < n; i++) phys[ndev++] = i;
  }
  for (int i = 0; i < ndev; i++) {
    cc[i][0] = pcc[phys[i]][0], cc[i][1] = pcc[phys[i]][1];
    ctxs[i].dev = i;
    nvdevs[i].dev = i;
  }
  int rc = ndev == 0 ? NRD_CUDA_ERROR_NO_DEVICE : NRD_CUDA_SUCCESS;
  pthread_mutex_unlock(&lock);
  return rc;
}

EXPORT nrd_cu_result cuDriverGetVersion(int *v) {
  *v = 12040;
  return 0;
}

EXPORT nrd_cu_result cuGetErrorString(nrd_cu_result e, const char **s) {
  switch (e) {
    case 0: *s = "no error"; return 0;
    case 1: *s = "invalid argument"; return 0;
    case 2: *s = "out of memory"; return 0;
    case 100: *s = "no CUDA-capable device is detected"; return 0;
    case 101: *s = "invalid device ordinal"; return 0;
    case 201: *s = "invalid device context"; return 0;
    default: *s = "unknown error"; return 0;
  }
}

EXPORT nrd_cu_result cuDeviceGetCount(int *n) {
  *n = ndev;
  return 0;
}

EXPORT nrd_cu_result cuDeviceGet(nrd_cu_device *d, int ordinal) {
  if (ordinal < 0 || ordinal >= ndev) return 101;
  *d = ordinal;
  return 0;
}

EXPORT nrd_cu_result cuDeviceGetName(char *name, int len, nrd_cu_device d) {
  if (d < 0 || d >= ndev || len <= 0) return 101;
  snprintf(name, (size_t)len, "Nereid Stand-in GPU %d", phys[d]);
  return 0;
}

EXPORT nrd_cu_result cuDeviceTotalMem_v2(size_t *bytes, nrd_cu_device d) {
  if (d < 0 || d >= ndev) return 101;
  *bytes = mem_limit;
  return 0;
}

EXPORT nrd_cu_result cuDeviceGetAttribute(int *pi, unsigned int attr, nrd_cu_device d) {
  if (d < 0 || d >= ndev) return 101;
  if (attr == NRD_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
    *pi = cc[d][0];
  else if (attr == NRD_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
    *pi = cc[d][1];
  else
    return 1;
  return 0;
}

EXPORT nrd_cu_result cuDeviceGetPCIBusId(char *bus, int len, nrd_cu_device d) {
  if (d < 0 || d >= ndev || len <= 0) return 101;
  snprintf(bus, (size_t)len, "00000000:%02X:00.0", phys[d] + 1);
  return 0;
}

EXPORT nrd_cu_result cuDevicePrimaryCtxRetain(nrd_cu_context *ctx, nrd_cu_device d) {
  if (d < 0 || d >= ndev) return 101;
  *ctx = &ctxs[d];
  return 0;
}

EXPORT nrd_cu_result cuDevicePrimaryCtxRelease_v2(nrd_cu_device d) { return d < 0 || d >= ndev ? 101 : 0; }

EXPORT nrd_cu_result cuCtxPushCurrent_v2(nrd_cu_context c) {
  if (!c || ctx_depth == 16) return 201;
  ctx_stack[ctx_depth++] = c->dev;
  return 0;
}

EXPORT nrd_cu_result cuCtxPopCurrent_v2(nrd_cu_context *c) {
  if (ctx_depth == 0) return 201;
  int d = ctx_stack[--ctx_depth];
  if (c) *c = &ctxs[d];
  return 0;
}

static int current(void) { return ctx_depth ? ctx_stack[ctx_depth - 1] : -1; }

static void *map_new(size_t size, int *fd_out) {
  int fd = memfd_create("nrd-fake-cuda", MFD_CLOEXEC);
  if (fd < 0) return NULL;
  if (ftruncate(fd, (off_t)size) != 0) {
    close(fd);
    return NULL;
  }
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    close(fd);
    return NULL;
  }
  *fd_out = fd;
  return p;
}

static nrd_cu_result track(void *p, size_t size, int fd, int dev, int kind) {
  alloc *a = malloc(sizeof *a);
  if (!a) return 2;
  *a = (alloc){p, size, fd, dev, kind, NULL};
  pthread_mutex_lock(&lock);
  a->next = allocs;
  allocs = a;
  pthread_mutex_unlock(&lock);
  return 0;
}

static alloc *untrack(void *p, int kind) {
  pthread_mutex_lock(&lock);
  alloc **pp = &allocs;
  while (*pp && ((*pp)->p != p || (*pp)->kind != kind)) pp = &(*pp)->next;
  alloc *a = *pp;
  if (a) *pp = a->next;
  if (a && kind == 0) used[a->dev] -= a->size;
  pthread_mutex_unlock(&lock);
  return a;
}

EXPORT nrd_cu_result cuMemAlloc_v2(nrd_cu_deviceptr *dptr, size_t bytes) {
  int d = current();
  if (d < 0) return 201;
  if (bytes == 0) return 1;
  pthread_mutex_lock(&lock);
  bool ok = used[d] + bytes <= mem_limit;
  if (ok) used[d] += bytes;
  pthread_mutex_unlock(&lock);
  if (!ok) return NRD_CUDA_ERROR_OUT_OF_MEMORY;
  atomic_fetch_add(&n_alloc, 1);
  int fd;
  void *p = map_new(bytes, &fd);
  if (!p || track(p, bytes, fd, d, 0) != 0) {
    if (p) munmap(p, bytes), close(fd);
    pthread_mutex_lock(&lock);
    used[d] -= bytes;
    pthread_mutex_unlock(&lock);
    return NRD_CUDA_ERROR_OUT_OF_MEMORY;
  }
  *dptr = (nrd_cu_deviceptr)(uintptr_t)p;
  return 0;
}

EXPORT nrd_cu_result cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes) {
  int d = current();
  if (d < 0) return 201;
  pthread_mutex_lock(&lock);
  *free_bytes = mem_limit - used[d];
  *total_bytes = mem_limit;
  pthread_mutex_unlock(&lock);
  return 0;
}

EXPORT nrd_cu_result cuMemFree_v2(nrd_cu_deviceptr dptr) {
  alloc *a = untrack((void *)(uintptr_t)dptr, 0);
  if (!a) return 1;
  munmap(a->p, a->size);
  close(a->fd);
  free(a);
  return 0;
}

EXPORT nrd_cu_result cuMemHostAlloc(void **pp, size_t bytes, unsigned int flags) {
  (void)flags;
  if (current() < 0) return 201;
  atomic_fetch_add(&n_host_alloc, 1);
  void *p = malloc(bytes ? bytes : 1);
  if (!p) return 2;
  if (track(p, bytes, -1, 0, 1) != 0) {
    free(p);
    return 2;
  }
  *pp = p;
  return 0;
}

EXPORT nrd_cu_result cuMemFreeHost(void *p) {
  alloc *a = untrack(p, 1);
  if (!a) return 1;
  free(a->p);
  free(a);
  return 0;
}

EXPORT nrd_cu_result cuMemcpy(nrd_cu_deviceptr dst, nrd_cu_deviceptr src, size_t bytes) {
  if (current() < 0) return 201;
  atomic_fetch_add(&n_copy, 1);
  memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, bytes);
  return 0;
}

/* The directed copies clients use (tests' own data, not the core's). */
EXPORT nrd_cu_result cuMemcpyHtoD_v2(nrd_cu_deviceptr dst, const void *src, size_t bytes) {
  return cuMemcpy(dst, (nrd_cu_deviceptr)(uintptr_t)src, bytes);
}

EXPORT nrd_cu_result cuMemcpyDtoH_v2(void *dst, nrd_cu_deviceptr src, size_t bytes) {
  return cuMemcpy((nrd_cu_deviceptr)(uintptr_t)dst, src, bytes);
}

EXPORT nrd_cu_result cuMemcpyDtoD_v2(nrd_cu_deviceptr dst, nrd_cu_deviceptr src, size_t bytes) {
  return cuMemcpy(dst, src, bytes);
}

EXPORT nrd_cu_result cuCtxSynchronize(void) { return current() < 0 ? 201 : 0; }

/* The handle: a tag, then the owner's pid, the memfd and the size. */
typedef struct fake_handle {
  char tag[8];
  int32_t pid, fd;
  uint64_t size;
} fake_handle;

EXPORT nrd_cu_result cuIpcGetMemHandle(nrd_cu_ipc_handle *h, nrd_cu_deviceptr dptr) {
  pthread_mutex_lock(&lock);
  alloc *a = allocs;
  while (a && (a->kind != 0 || (uintptr_t)a->p != dptr)) a = a->next;
  fake_handle fh = {"NRDFAKE", (int32_t)getpid(), a ? a->fd : -1, a ? a->size : 0};
  pthread_mutex_unlock(&lock);
  if (!a) return 1;
  memset(h, 0, sizeof *h);
  memcpy(h->reserved, &fh, sizeof fh);
  return 0;
}

EXPORT nrd_cu_result cuIpcOpenMemHandle_v2(nrd_cu_deviceptr *dptr, nrd_cu_ipc_handle h, unsigned int flags) {
  (void)flags;
  if (current() < 0) return 201;
  fake_handle fh;
  memcpy(&fh, h.reserved, sizeof fh);
  if (memcmp(fh.tag, "NRDFAKE", 8) != 0 || fh.size == 0) return 1;
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)fh.pid, (int)fh.fd);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return 1;
  void *p = mmap(NULL, fh.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return 1;
  if (track(p, fh.size, -1, current(), 2) != 0) {
    munmap(p, fh.size);
    return 2;
  }
  atomic_fetch_add(&n_ipc_open, 1);
  *dptr = (nrd_cu_deviceptr)(uintptr_t)p;
  return 0;
}

EXPORT nrd_cu_result cuIpcCloseMemHandle(nrd_cu_deviceptr dptr) {
  alloc *a = untrack((void *)(uintptr_t)dptr, 2);
  if (!a) return 1;
  munmap(a->p, a->size);
  free(a);
  return 0;
}

/* Not called by Nereid: ONNX Runtime's CUDA provider library (onnxruntime-gpu)
 * links this one driver function directly, so it loads only where the
 * process finds a libcuda.so.1 that has it. With the stand-in reachable
 * under that name, the provider loads and the CUDA runtime under it meets
 * the stand-in's driver (tests/integration/test_onnxruntime.py). No
 * tensor maps here: CUDA_ERROR_NOT_SUPPORTED. */
EXPORT nrd_cu_result cuTensorMapEncodeTiled(void *map, int type, unsigned rank, void *global, const uint64_t *dims,
                                            const uint64_t *strides, const unsigned *box, const unsigned *steps,
                                            int interleave, int swizzle, int promotion, int fill) {
  (void)map, (void)type, (void)rank, (void)global, (void)dims, (void)strides;
  (void)box, (void)steps, (void)interleave, (void)swizzle, (void)promotion, (void)fill;
  return 801;
}

/* ------------------------------------------------------------ NVML */

static atomic_ullong energy_mj;

EXPORT nrd_nvml_return nvmlInit_v2(void) { return 0; }
EXPORT nrd_nvml_return nvmlShutdown(void) { return 0; }

EXPORT nrd_nvml_return nvmlDeviceGetHandleByPciBusId_v2(const char *bus, nrd_nvml_device *dev) {
  for (int i = 0; i < ndev; i++) {
    char b[32];
    snprintf(b, sizeof b, "00000000:%02X:00.0", phys[i] + 1);
    if (strcmp(b, bus) == 0) {
      *dev = &nvdevs[i];
      return 0;
    }
  }
  return 6; /* NVML_ERROR_NOT_FOUND */
}

EXPORT nrd_nvml_return nvmlDeviceGetUUID(nrd_nvml_device d, char *uuid, unsigned int len) {
  snprintf(uuid, len, "GPU-00000000-0000-0000-0000-%012d", phys[d->dev]);
  return 0;
}

EXPORT nrd_nvml_return nvmlDeviceGetUtilizationRates(nrd_nvml_device d, nrd_nvml_utilization *u) {
  u->gpu = 25u + 10u * (unsigned)d->dev;
  u->memory = 10;
  return 0;
}

EXPORT nrd_nvml_return nvmlDeviceGetMemoryInfo(nrd_nvml_device d, nrd_nvml_memory *m) {
  pthread_mutex_lock(&lock);
  m->total = mem_limit;
  m->used = used[d->dev];
  m->free = mem_limit - used[d->dev];
  pthread_mutex_unlock(&lock);
  return 0;
}

EXPORT nrd_nvml_return nvmlDeviceGetPowerUsage(nrd_nvml_device d, unsigned int *mw) {
  (void)d;
  *mw = 75500;
  return 0;
}

EXPORT nrd_nvml_return nvmlDeviceGetPowerManagementLimit(nrd_nvml_device d, unsigned int *mw) {
  (void)d;
  *mw = 300000;
  return 0;
}

EXPORT nrd_nvml_return nvmlDeviceGetTotalEnergyConsumption(nrd_nvml_device d, unsigned long long *mj) {
  (void)d;
  *mj = atomic_fetch_add(&energy_mj, 1500) + 1500;
  return 0;
}
