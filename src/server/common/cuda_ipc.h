/* CUDA IPC for the front ends' CUDA shared memory regions: the NVIDIA
 * driver opened with dlopen on first need (NEREID_CUDA_LIBRARY names
 * another library, as for the core), handles opened in the device's
 * primary context. Any thread. */
#ifndef NRD_SRV_CUDA_IPC_H
#define NRD_SRV_CUDA_IPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "triton/core/tritonserver.h"

#define NRD_SRV_CUDA_IPC_HANDLE_SIZE 64

/* Whether the driver is there (opens it on first call). */
bool nrd_srv_cuda_available(void);

/* Maps the allocation `handle` (NRD_SRV_CUDA_IPC_HANDLE_SIZE bytes) names
 * on GPU `device`; close with nrd_srv_cuda_ipc_close. On error (INVALID_ARG,
 * "failed to open CUDA IPC handle: <driver's words>") *ptr is NULL. */
TRITONSERVER_Error *nrd_srv_cuda_ipc_open(int64_t device, const void *handle, void **ptr);
void nrd_srv_cuda_ipc_close(int64_t device, void *ptr);

#endif
