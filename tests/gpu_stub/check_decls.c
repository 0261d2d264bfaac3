/* Checks src/core/gpu_driver.h against the CUDA toolkit's cuda.h (and
 * nvml.h when the build found it): every function's type, every constant,
 * and that the symbol we dlsym is the one cuda.h maps its API name to.
 * Compiling is the test; main only reports. */
#include <stddef.h>
#include <cuda.h>
#ifdef NRD_HAVE_NVML_H
#include <nvml.h>
#define NRD_GPU_DECLS_WITH_NVML_H
#endif
#include <stdio.h>
#include <string.h>
#define NRD_GPU_DECLS_WITH_CUDA_H
#include "gpu_driver.h"

#define SAME_FN(field, ident, ret, params)                                                                             \
  _Static_assert(__builtin_types_compatible_p(nrd_cu_##field##_fn, __typeof__(&ident)), #ident " differs from "        \
                                                                                               "cuda.h");
NRD_CUDA_FUNCS(SAME_FN)
#undef SAME_FN

_Static_assert(__builtin_types_compatible_p(nrd_cu_result, CUresult), "CUresult");
_Static_assert(__builtin_types_compatible_p(nrd_cu_device, CUdevice), "CUdevice");
_Static_assert(__builtin_types_compatible_p(nrd_cu_deviceptr, CUdeviceptr), "CUdeviceptr");
_Static_assert(__builtin_types_compatible_p(nrd_cu_context, CUcontext), "CUcontext");
_Static_assert(NRD_CUDA_SUCCESS == CUDA_SUCCESS, "CUDA_SUCCESS");
_Static_assert(NRD_CUDA_ERROR_OUT_OF_MEMORY == CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY");
_Static_assert(NRD_CUDA_ERROR_NO_DEVICE == CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE");
_Static_assert(NRD_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "cc");
_Static_assert(NRD_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "cc");
_Static_assert(NRD_CU_MEMHOSTALLOC_PORTABLE == CU_MEMHOSTALLOC_PORTABLE, "CU_MEMHOSTALLOC_PORTABLE");
_Static_assert(NRD_CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS == CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS, "lazy peer");
_Static_assert(NRD_CU_IPC_HANDLE_SIZE == CU_IPC_HANDLE_SIZE && sizeof(CUipcMemHandle) == CU_IPC_HANDLE_SIZE,
               "CU_IPC_HANDLE_SIZE");

#ifdef NRD_HAVE_NVML_H
#define SAME_NVML(field, ident, ret, params)                                                                           \
  _Static_assert(__builtin_types_compatible_p(nrd_nvml_##field##_fn, __typeof__(&ident)),                              \
                 #ident " differs from nvml.h");
NRD_NVML_FUNCS(SAME_NVML)
#undef SAME_NVML
_Static_assert(__builtin_types_compatible_p(nrd_nvml_return, nvmlReturn_t), "nvmlReturn_t");
_Static_assert(NRD_NVML_SUCCESS == NVML_SUCCESS, "NVML_SUCCESS");
#define SAME_FIELD(ours, theirs, f)                                                                                    \
  _Static_assert(offsetof(struct ours, f) == offsetof(theirs, f) &&                                                    \
                     sizeof(((struct ours *)0)->f) == sizeof(((theirs *)0)->f),                                        \
                 #theirs "." #f " differs from nvml.h");
SAME_FIELD(nrd_nvml_utilization_layout, nvmlUtilization_t, gpu)
SAME_FIELD(nrd_nvml_utilization_layout, nvmlUtilization_t, memory)
SAME_FIELD(nrd_nvml_memory_layout, nvmlMemory_t, total)
SAME_FIELD(nrd_nvml_memory_layout, nvmlMemory_t, free)
SAME_FIELD(nrd_nvml_memory_layout, nvmlMemory_t, used)
#undef SAME_FIELD
_Static_assert(sizeof(struct nrd_nvml_utilization_layout) == sizeof(nvmlUtilization_t), "nvmlUtilization_t's size");
_Static_assert(sizeof(struct nrd_nvml_memory_layout) == sizeof(nvmlMemory_t), "nvmlMemory_t's size");
#endif

/* The API names a user calls map to the symbols we resolve. */
#define STR2(x) #x
#define STR(x) STR2(x)
static const struct {
  const char *api, *ours;
} names[] = {{STR(cuMemAlloc), "cuMemAlloc_v2"},
             {STR(cuMemFree), "cuMemFree_v2"},
             {STR(cuDeviceTotalMem), "cuDeviceTotalMem_v2"},
             {STR(cuCtxPushCurrent), "cuCtxPushCurrent_v2"},
             {STR(cuCtxPopCurrent), "cuCtxPopCurrent_v2"},
             {STR(cuDevicePrimaryCtxRelease), "cuDevicePrimaryCtxRelease_v2"},
             {STR(cuIpcOpenMemHandle), "cuIpcOpenMemHandle_v2"},
             {STR(cuMemGetInfo), "cuMemGetInfo_v2"},
             {STR(cuMemcpy), "cuMemcpy"}};

int main(void) {
  int bad = 0;
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    if (strcmp(names[i].api, names[i].ours) != 0) {
      printf("cuda.h maps to %s, we resolve %s\n", names[i].api, names[i].ours);
      bad = 1;
    }
#ifdef NRD_HAVE_NVML_H
  printf("gpu_driver.h matches cuda.h and nvml.h%s\n", bad ? ": NO" : "");
#else
  printf("gpu_driver.h matches cuda.h%s (nvml.h not found: NVML unchecked)\n", bad ? ": NO" : "");
#endif
  return bad;
}
