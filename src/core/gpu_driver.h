/* Our own declarations of the slice of the NVIDIA driver API (libcuda.so.1)
 * and NVML (libnvidia-ml.so.1) that the core calls through dlopen, so that
 * no CUDA header or library is needed to build. Each function is named by
 * the exported symbol it resolves to (the _v2 names cuda.h maps to).
 * tests/unit/core/test_gpu_decls.c checks every type, constant and symbol
 * name here against the toolkit's cuda.h (and nvml.h) when they exist. */
#ifndef NRD_GPU_DRIVER_H
#define NRD_GPU_DRIVER_H

#include <stddef.h>

/* Driver API: enums are 32-bit unsigned in cuda.h's ABI. */
typedef unsigned int nrd_cu_result;
typedef int nrd_cu_device;
typedef unsigned long long nrd_cu_deviceptr;
typedef struct CUctx_st *nrd_cu_context;

#define NRD_CUDA_SUCCESS 0u
#define NRD_CUDA_ERROR_OUT_OF_MEMORY 2u
#define NRD_CUDA_ERROR_NO_DEVICE 100u
#define NRD_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75u
#define NRD_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76u
#define NRD_CU_MEMHOSTALLOC_PORTABLE 0x01u
#define NRD_CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS 0x1u
#define NRD_CU_IPC_HANDLE_SIZE 64

/* CUipcMemHandle: 64 opaque bytes, passed by value to cuIpcOpenMemHandle. */
#ifdef NRD_GPU_DECLS_WITH_CUDA_H /* the declaration test, after cuda.h */
typedef CUipcMemHandle nrd_cu_ipc_handle;
#else
typedef struct nrd_cu_ipc_handle {
  char reserved[NRD_CU_IPC_HANDLE_SIZE];
} nrd_cu_ipc_handle;
#endif

/* One X-macro row per driver function: (field, exported symbol as
 * cuda.h declares it, return type, parameter list). */
#define NRD_CUDA_FUNCS(X)                                                                                              \
  X(init, cuInit, nrd_cu_result, (unsigned int flags))                                                                 \
  X(driver_version, cuDriverGetVersion, nrd_cu_result, (int *version))                                                 \
  X(error_string, cuGetErrorString, nrd_cu_result, (nrd_cu_result error, const char **str))                            \
  X(device_count, cuDeviceGetCount, nrd_cu_result, (int *count))                                                       \
  X(device_get, cuDeviceGet, nrd_cu_result, (nrd_cu_device * device, int ordinal))                                     \
  X(device_name, cuDeviceGetName, nrd_cu_result, (char *name, int len, nrd_cu_device dev))                             \
  X(device_total_mem, cuDeviceTotalMem_v2, nrd_cu_result, (size_t * bytes, nrd_cu_device dev))                         \
  X(device_attribute, cuDeviceGetAttribute, nrd_cu_result, (int *pi, unsigned int attrib, nrd_cu_device dev))          \
  X(device_pci_bus_id, cuDeviceGetPCIBusId, nrd_cu_result, (char *bus_id, int len, nrd_cu_device dev))                 \
  X(primary_ctx_retain, cuDevicePrimaryCtxRetain, nrd_cu_result, (nrd_cu_context * ctx, nrd_cu_device dev))            \
  X(primary_ctx_release, cuDevicePrimaryCtxRelease_v2, nrd_cu_result, (nrd_cu_device dev))                             \
  X(ctx_push, cuCtxPushCurrent_v2, nrd_cu_result, (nrd_cu_context ctx))                                                \
  X(ctx_pop, cuCtxPopCurrent_v2, nrd_cu_result, (nrd_cu_context * ctx))                                                \
  X(mem_alloc, cuMemAlloc_v2, nrd_cu_result, (nrd_cu_deviceptr * dptr, size_t bytes))                                  \
  X(mem_free, cuMemFree_v2, nrd_cu_result, (nrd_cu_deviceptr dptr))                                                    \
  X(mem_get_info, cuMemGetInfo_v2, nrd_cu_result, (size_t * free_bytes, size_t * total_bytes))                         \
  X(mem_host_alloc, cuMemHostAlloc, nrd_cu_result, (void **pp, size_t bytes, unsigned int flags))                      \
  X(mem_free_host, cuMemFreeHost, nrd_cu_result, (void *p))                                                            \
  X(copy, cuMemcpy, nrd_cu_result, (nrd_cu_deviceptr dst, nrd_cu_deviceptr src, size_t bytes))                         \
  X(ipc_get, cuIpcGetMemHandle, nrd_cu_result, (nrd_cu_ipc_handle * handle, nrd_cu_deviceptr dptr))                    \
  X(ipc_open, cuIpcOpenMemHandle_v2, nrd_cu_result,                                                                    \
    (nrd_cu_deviceptr * dptr, nrd_cu_ipc_handle handle, unsigned int flags))                                           \
  X(ipc_close, cuIpcCloseMemHandle, nrd_cu_result, (nrd_cu_deviceptr dptr))

/* NVML: nvmlReturn_t is a 32-bit enum too. */
typedef unsigned int nrd_nvml_return;
typedef struct nvmlDevice_st *nrd_nvml_device;
/* nvmlUtilization_t and nvmlMemory_t as we lay them out (the declaration
 * test compares them with nvml.h's, field by field). */
struct nrd_nvml_utilization_layout {
  unsigned int gpu; /* percent of the last sample period a kernel ran */
  unsigned int memory;
};
struct nrd_nvml_memory_layout {
  unsigned long long total, free, used;
};
#ifdef NRD_GPU_DECLS_WITH_NVML_H /* the declaration test, after nvml.h */
typedef nvmlUtilization_t nrd_nvml_utilization;
typedef nvmlMemory_t nrd_nvml_memory;
#else
typedef struct nrd_nvml_utilization_layout nrd_nvml_utilization;
typedef struct nrd_nvml_memory_layout nrd_nvml_memory;
#endif

#define NRD_NVML_SUCCESS 0u

#define NRD_NVML_FUNCS(X)                                                                                              \
  X(init, nvmlInit_v2, nrd_nvml_return, (void))                                                                        \
  X(shutdown, nvmlShutdown, nrd_nvml_return, (void))                                                                   \
  X(by_pci, nvmlDeviceGetHandleByPciBusId_v2, nrd_nvml_return, (const char *bus_id, nrd_nvml_device *dev))             \
  X(uuid, nvmlDeviceGetUUID, nrd_nvml_return, (nrd_nvml_device dev, char *uuid, unsigned int len))                     \
  X(utilization, nvmlDeviceGetUtilizationRates, nrd_nvml_return, (nrd_nvml_device dev, nrd_nvml_utilization * util))   \
  X(memory, nvmlDeviceGetMemoryInfo, nrd_nvml_return, (nrd_nvml_device dev, nrd_nvml_memory * mem))                    \
  X(power_usage, nvmlDeviceGetPowerUsage, nrd_nvml_return, (nrd_nvml_device dev, unsigned int *mw))                    \
  X(power_limit, nvmlDeviceGetPowerManagementLimit, nrd_nvml_return, (nrd_nvml_device dev, unsigned int *mw))          \
  X(energy, nvmlDeviceGetTotalEnergyConsumption, nrd_nvml_return, (nrd_nvml_device dev, unsigned long long *mj))

#define NRD_GPU_FN_TYPE(field, ident, ret, params) typedef ret(*nrd_cu_##field##_fn) params;
NRD_CUDA_FUNCS(NRD_GPU_FN_TYPE)
#undef NRD_GPU_FN_TYPE
#define NRD_GPU_FN_TYPE(field, ident, ret, params) typedef ret(*nrd_nvml_##field##_fn) params;
NRD_NVML_FUNCS(NRD_GPU_FN_TYPE)
#undef NRD_GPU_FN_TYPE

/* The resolved tables (gpu.c fills them once; every entry non-NULL when
 * the library was accepted). */
#define NRD_GPU_FN_FIELD(field, ident, ret, params) nrd_cu_##field##_fn field;
typedef struct nrd_cuda_api {
  NRD_CUDA_FUNCS(NRD_GPU_FN_FIELD)
} nrd_cuda_api;
#undef NRD_GPU_FN_FIELD
#define NRD_GPU_FN_FIELD(field, ident, ret, params) nrd_nvml_##field##_fn field;
typedef struct nrd_nvml_api {
  NRD_NVML_FUNCS(NRD_GPU_FN_FIELD)
} nrd_nvml_api;
#undef NRD_GPU_FN_FIELD

#endif
