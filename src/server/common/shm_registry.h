/* Shared memory regions registered by clients (Triton's shared memory
 * extensions): a system region's name maps to [offset, offset+byte_size)
 * of a POSIX shared memory object, mapped into our address space; a CUDA
 * region's to device memory another process shares by its CUDA IPC
 * handle, opened through the driver (cuda_ipc.h). Both share one name
 * space, as in Triton. Inference inputs
 * read straight from a mapping and outputs are written straight into one.
 *
 * Threads: every function may be called from any thread; the registry is
 * guarded by its own mutex. A region in use by a request stays mapped
 * until that request lets go of it, even if it is unregistered meanwhile. */
#ifndef NRD_SRV_SHM_REGISTRY_H
#define NRD_SRV_SHM_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "triton/core/tritonserver.h"

typedef struct nrd_srv_shm nrd_srv_shm;
typedef struct nrd_srv_shm_region nrd_srv_shm_region;

/* Triton's answer (UNSUPPORTED) to a client's shared memory register or
 * unregister while --allow-client-shm is false (its default). */
#define NRD_SRV_SHM_DISABLED_MSG \
  "Client shared memory is disabled. Start the server with '--allow-client-shm=true' to enable."

/* Creates an empty registry; the caller frees it with nrd_srv_shm_free.
 * `allow_client` is --allow-client-shm: when false no region can ever be
 * registered (nrd_srv_shm_register answers NRD_SRV_SHM_DISABLED_MSG) and
 * the front ends refuse register and unregister calls. Returns NULL when
 * memory runs out. */
nrd_srv_shm *nrd_srv_shm_new(bool allow_client);

/* Whether clients may register, unregister and use regions
 * (--allow-client-shm); false for NULL. Any thread (set once at creation). */
bool nrd_srv_shm_client_allowed(const nrd_srv_shm *shm);

/* A new UNSUPPORTED error with NRD_SRV_SHM_DISABLED_MSG; the caller owns
 * it. Any thread. */
TRITONSERVER_Error *nrd_srv_shm_disabled_error(void);

/* Unmaps every region no request holds and frees the registry. Regions
 * still held are freed by their last nrd_srv_shm_release. NULL: no-op. */
void nrd_srv_shm_free(nrd_srv_shm *shm);

/* Maps `byte_size` bytes at `offset` of the POSIX shared memory object
 * `key` (shm_open name) under `name` (copied). Errors: UNSUPPORTED
 * (NRD_SRV_SHM_DISABLED_MSG) when client shared memory is off, ALREADY_EXISTS for
 * a name in use, INTERNAL when the object cannot be opened, INVALID_ARG
 * when the range does not fit in the object. Caller owns the error. */
TRITONSERVER_Error *nrd_srv_shm_register(nrd_srv_shm *shm, const char *name, const char *key, uint64_t offset,
                                         uint64_t byte_size);

/* Forgets region `name`, or every region when name is NULL. An unknown
 * name is not an error (as Triton). Returns NULL. */
TRITONSERVER_Error *nrd_srv_shm_unregister(nrd_srv_shm *shm, const char *name);

/* Called once per region by nrd_srv_shm_status, under the registry's lock
 * (it must not call back into the registry). The strings are valid only
 * during the call. Returns 0, or non-zero to stop (out of memory). */
typedef int (*nrd_srv_shm_visit_fn)(const char *name, const char *key, uint64_t offset, uint64_t byte_size, void *arg);

/* Calls fn for region `name`, or for every region when name is NULL.
 * NOT_FOUND for an unknown name; INTERNAL when fn returned non-zero.
 * Caller owns the error. */
TRITONSERVER_Error *nrd_srv_shm_status(nrd_srv_shm *shm, const char *name, nrd_srv_shm_visit_fn fn, void *arg);

/* Looks up [offset, offset+byte_size) of region `name`: on success *region
 * holds a reference (release it with nrd_srv_shm_release) and *addr points
 * at the bytes, valid until then. NOT_FOUND for an unknown region,
 * INVALID_ARG for a range outside it; nothing is held on error. */
TRITONSERVER_Error *nrd_srv_shm_acquire(nrd_srv_shm *shm, const char *name, uint64_t offset, uint64_t byte_size,
                                        nrd_srv_shm_region **region, void **addr);

/* Checks that an output of `need` bytes fits the `have` bytes a request set
 * aside for output `name` in a region: NULL, or INVALID_ARG saying so
 * (caller owns it). Any thread. */
TRITONSERVER_Error *nrd_srv_shm_check_output(const char *name, uint64_t have, size_t need);

/* Opens the CUDA IPC handle `handle` (handle_len bytes; 64 expected) on
 * GPU `device` as region `name` (copied) of `byte_size` bytes. Errors:
 * UNSUPPORTED (NRD_SRV_SHM_DISABLED_MSG) when client shared memory is off,
 * INVALID_ARG "... GPUs not supported" without an NVIDIA driver,
 * ALREADY_EXISTS for a name in use (of either kind), INVALID_ARG "failed
 * to register CUDA shared memory region '<name>': failed to open CUDA IPC
 * handle: ..." when the driver refuses the handle. Caller owns the error. */
TRITONSERVER_Error *nrd_srv_shm_register_cuda(nrd_srv_shm *shm, const char *name, const void *handle,
                                              size_t handle_len, int64_t device, uint64_t byte_size);

/* As nrd_srv_shm_unregister, for CUDA regions only (nrd_srv_shm_unregister
 * and nrd_srv_shm_status see system regions only). */
TRITONSERVER_Error *nrd_srv_shm_unregister_cuda(nrd_srv_shm *shm, const char *name);

typedef int (*nrd_srv_shm_cuda_visit_fn)(const char *name, int64_t device, uint64_t byte_size, void *arg);

/* As nrd_srv_shm_status for CUDA regions ("Unable to find cuda shared
 * memory region: '<name>'" when unknown). */
TRITONSERVER_Error *nrd_srv_shm_status_cuda(nrd_srv_shm *shm, const char *name, nrd_srv_shm_cuda_visit_fn fn,
                                            void *arg);

/* Where an acquired region's bytes live: CPU for a system region, GPU and
 * its device for a CUDA one. Any thread. */
void nrd_srv_shm_region_memory(const nrd_srv_shm_region *region, TRITONSERVER_MemoryType *type, int64_t *id);

/* Drops a reference taken by nrd_srv_shm_acquire; NULL is a no-op. */
void nrd_srv_shm_release(nrd_srv_shm_region *region);

#endif
