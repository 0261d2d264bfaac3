/* The GPU layer: the NVIDIA driver (libcuda.so.1) and NVML opened with
 * dlopen at run time, the devices found, and the few driver operations the
 * core needs (device and pinned allocation, copies, CUDA IPC). Process
 * wide, like the driver itself: opened once on first use and kept until
 * exit. Without a driver every query says "no GPU" and the server behaves
 * as a CPU-only build.
 *
 * NEREID_CUDA_LIBRARY and NEREID_NVML_LIBRARY name other libraries to open
 * instead (the test suite's stand-in driver); CUDA_VISIBLE_DEVICES is
 * applied by the driver. Every function here: any thread. */
#ifndef NRD_GPU_H
#define NRD_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "triton/core/tritonserver.h"

#define NRD_GPU_MAX 64
#define NRD_GPU_IPC_HANDLE_SIZE 64

typedef struct nrd_gpu_device {
  int id; /* CUDA ordinal, as CUDA_VISIBLE_DEVICES leaves them */
  char name[128];
  char pci_bus_id[32];
  uint64_t total_memory; /* bytes */
  int cc_major, cc_minor;
} nrd_gpu_device;

/* Opens the driver on first call and returns the number of devices (0
 * without a driver or when it reports none). Never fails. */
int nrd_gpu_count(void);

/* Whether a driver library was opened and initialized (even with no
 * device): Triton's GPU build behaviour applies then. */
bool nrd_gpu_driver_loaded(void);

/* Device `id`'s description, or NULL when there is no such device. The
 * result lives until exit. */
const nrd_gpu_device *nrd_gpu_device_get(int id);

/* The driver's version as cuDriverGetVersion gives it (e.g. 12040), or 0. */
int nrd_gpu_driver_version(void);

/* Allocates `bytes` of device memory on `device` (in its primary context).
 * The caller frees with nrd_gpu_free. On error *ptr is NULL. */
TRITONSERVER_Error *nrd_gpu_alloc(int device, size_t bytes, void **ptr);
void nrd_gpu_free(int device, void *ptr);

/* Free and total bytes of `device`'s memory as the driver sees them now
 * (cuMemGetInfo in its primary context). */
TRITONSERVER_Error *nrd_gpu_mem_info(int device, size_t *free_bytes, size_t *total_bytes);

/* Page-locked host memory usable by every device; freed with
 * nrd_gpu_host_free. On error *ptr is NULL. */
TRITONSERVER_Error *nrd_gpu_host_alloc(size_t bytes, void **ptr);
void nrd_gpu_host_free(void *ptr);

/* Copies `bytes` between any two of host, pinned and device memory
 * (unified addressing picks the copy kind), in `device`'s primary context
 * (the device of whichever side is GPU memory; 0 when neither). Returns
 * when the copy is complete. */
TRITONSERVER_Error *nrd_gpu_copy(void *dst, const void *src, size_t bytes, int device);

/* The CUDA IPC handle of device memory `ptr` (the start of an allocation). */
TRITONSERVER_Error *nrd_gpu_ipc_handle(int device, void *ptr, char handle[NRD_GPU_IPC_HANDLE_SIZE]);

/* Maps another process's device memory from its IPC handle on `device`;
 * the caller closes it with nrd_gpu_ipc_close. On error *ptr is NULL. */
TRITONSERVER_Error *nrd_gpu_ipc_open(int device, const char handle[NRD_GPU_IPC_HANDLE_SIZE], void **ptr);
void nrd_gpu_ipc_close(int device, void *ptr);

/* NVML's view of device `id` for metrics. Returns false when NVML is not
 * there or the device is unknown to it; fields it cannot read are -1. */
typedef struct nrd_gpu_sample {
  char uuid[96];
  double utilization; /* 0..1 */
  double memory_total, memory_used; /* bytes */
  double power_usage, power_limit; /* watts */
  double energy; /* joules since NVML's counter began */
} nrd_gpu_sample;
bool nrd_gpu_sample_get(int id, nrd_gpu_sample *out);

#endif
