/* The system shared memory registry shared by the HTTP and gRPC front
 * ends (Triton's shared memory extension, system regions). */
#include "shm_registry.h"
#include "cuda_ipc.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct nrd_srv_shm_region {
  nrd_srv_shm_region *next; /* in the registry's list (registry mutex) */
  atomic_int refs; /* the registry's + one per acquire */
  char *name, *key;
  uint64_t offset, byte_size;
  void *map; /* start of the mapping (page aligned) */
  size_t map_len;
  char *base; /* the region's first byte, inside the mapping */
  bool cuda; /* a CUDA region: base is device memory opened by IPC, map NULL */
  int64_t device; /* its GPU */
};

struct nrd_srv_shm {
  pthread_mutex_t mu;
  nrd_srv_shm_region *regions;
  bool allow_client; /* --allow-client-shm; never changes after creation */
};

static TRITONSERVER_Error *shm_error(TRITONSERVER_Error_Code code, const char *fmt, const char *a, const char *b) {
  char msg[600];
  snprintf(msg, sizeof msg, fmt, a, b ? b : "");
  return TRITONSERVER_ErrorNew(code, msg);
}

nrd_srv_shm *nrd_srv_shm_new(bool allow_client) {
  nrd_srv_shm *s = calloc(1, sizeof *s);
  if (s) {
    pthread_mutex_init(&s->mu, NULL);
    s->allow_client = allow_client;
  }
  return s;
}

bool nrd_srv_shm_client_allowed(const nrd_srv_shm *s) { return s != NULL && s->allow_client; }

TRITONSERVER_Error *nrd_srv_shm_disabled_error(void) {
  return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNSUPPORTED, NRD_SRV_SHM_DISABLED_MSG);
}

static void region_unref(nrd_srv_shm_region *r) {
  if (atomic_fetch_sub(&r->refs, 1) != 1) return;
  if (r->cuda)
    nrd_srv_cuda_ipc_close(r->device, r->base);
  else
    munmap(r->map, r->map_len);
  free(r->name);
  free(r->key);
  free(r);
}

void nrd_srv_shm_free(nrd_srv_shm *s) {
  if (s == NULL) return;
  nrd_srv_shm_unregister(s, NULL);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

static nrd_srv_shm_region *find(nrd_srv_shm *s, const char *name) {
  for (nrd_srv_shm_region *r = s->regions; r; r = r->next)
    if (strcmp(r->name, name) == 0) return r;
  return NULL;
}

TRITONSERVER_Error *nrd_srv_shm_register(nrd_srv_shm *s, const char *name, const char *key, uint64_t offset,
                                         uint64_t byte_size) {
  /* The front ends check first, in Triton's order; this keeps any other
   * caller from filling a registry that is switched off. */
  if (!s->allow_client) return nrd_srv_shm_disabled_error();
  pthread_mutex_lock(&s->mu);
  TRITONSERVER_Error *err = NULL;
  int fd = -1;
  nrd_srv_shm_region *r = NULL;
  if (find(s, name)) {
    err = shm_error(TRITONSERVER_ERROR_ALREADY_EXISTS, "shared memory region '%s' already in manager", name, NULL);
    goto done;
  }
  fd = shm_open(key, O_RDWR, 0);
  if (fd < 0) {
    err = shm_error(TRITONSERVER_ERROR_INTERNAL, "Unable to open shared memory region: '%s': %s", key, strerror(errno));
    goto done;
  }
  struct stat st = {0};
  if (fstat(fd, &st) != 0 || byte_size == 0 || offset > (uint64_t)st.st_size ||
      byte_size > (uint64_t)st.st_size - offset) {
    char range[200];
    snprintf(range, sizeof range, "offset %llu + byte_size %llu does not fit in the object of %lld bytes",
             (unsigned long long)offset, (unsigned long long)byte_size, (long long)st.st_size);
    /* Triton's sentence (shared_memory_manager.cc), then our detail. */
    err = shm_error(TRITONSERVER_ERROR_INVALID_ARG, "failed to register shared memory region '%s': invalid args (%s)",
                    name, range);
    goto done;
  }
  long page = sysconf(_SC_PAGESIZE);
  uint64_t map_off = offset - offset % (uint64_t)page;
  r = calloc(1, sizeof *r);
  if (r == NULL || (r->name = strdup(name)) == NULL || (r->key = strdup(key)) == NULL) {
    err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    goto done;
  }
  r->map_len = (size_t)(byte_size + (offset - map_off));
  r->map = mmap(NULL, r->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)map_off);
  if (r->map == MAP_FAILED) {
    r->map = NULL;
    err = shm_error(TRITONSERVER_ERROR_INVALID_ARG, "failed to register shared memory region '%s': %s", name,
                    strerror(errno));
    goto done;
  }
  r->base = (char *)r->map + (offset - map_off);
  r->offset = offset;
  r->byte_size = byte_size;
  atomic_init(&r->refs, 1);
  r->next = s->regions;
  s->regions = r;
  r = NULL;
done:
  if (r) {
    free(r->name);
    free(r->key);
    free(r);
  }
  if (fd >= 0) close(fd);
  pthread_mutex_unlock(&s->mu);
  return err;
}

static void unregister_kind(nrd_srv_shm *s, const char *name, bool cuda) {
  pthread_mutex_lock(&s->mu);
  nrd_srv_shm_region **pp = &s->regions;
  while (*pp) {
    nrd_srv_shm_region *r = *pp;
    if (r->cuda == cuda && (name == NULL || strcmp(r->name, name) == 0)) {
      *pp = r->next;
      region_unref(r);
    } else {
      pp = &r->next;
    }
  }
  pthread_mutex_unlock(&s->mu);
}

TRITONSERVER_Error *nrd_srv_shm_unregister(nrd_srv_shm *s, const char *name) {
  unregister_kind(s, name, false);
  return NULL;
}

TRITONSERVER_Error *nrd_srv_shm_unregister_cuda(nrd_srv_shm *s, const char *name) {
  unregister_kind(s, name, true);
  return NULL;
}

TRITONSERVER_Error *nrd_srv_shm_register_cuda(nrd_srv_shm *s, const char *name, const void *handle, size_t handle_len,
                                              int64_t device, uint64_t byte_size) {
  if (!s->allow_client) return nrd_srv_shm_disabled_error();
  if (!nrd_srv_cuda_available())
    return shm_error(TRITONSERVER_ERROR_INVALID_ARG,
                     "failed to register CUDA shared memory region: '%s', GPUs not supported", name, NULL);
  pthread_mutex_lock(&s->mu);
  TRITONSERVER_Error *err = NULL;
  nrd_srv_shm_region *r = NULL;
  void *base = NULL;
  if (find(s, name)) {
    err = shm_error(TRITONSERVER_ERROR_ALREADY_EXISTS, "shared memory region '%s' already in manager", name, NULL);
    goto done;
  }
  if (handle_len != NRD_SRV_CUDA_IPC_HANDLE_SIZE)
    err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "failed to open CUDA IPC handle: invalid argument");
  else
    err = nrd_srv_cuda_ipc_open(device, handle, &base);
  if (err) {
    /* Triton's sentence around the driver's (shared_memory_manager.cc). */
    char msg[700];
    snprintf(msg, sizeof msg, "failed to register CUDA shared memory region '%s': %s", name,
             TRITONSERVER_ErrorMessage(err));
    TRITONSERVER_ErrorDelete(err);
    err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, msg);
    goto done;
  }
  r = calloc(1, sizeof *r);
  if (r == NULL || (r->name = strdup(name)) == NULL || (r->key = strdup("")) == NULL) {
    err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    goto done;
  }
  r->cuda = true;
  r->device = device;
  r->base = base;
  r->byte_size = byte_size;
  atomic_init(&r->refs, 1);
  r->next = s->regions;
  s->regions = r;
  r = NULL;
  base = NULL;
done:
  if (r) {
    free(r->name);
    free(r->key);
    free(r);
  }
  if (base) nrd_srv_cuda_ipc_close(device, base);
  pthread_mutex_unlock(&s->mu);
  return err;
}

TRITONSERVER_Error *nrd_srv_shm_status_cuda(nrd_srv_shm *s, const char *name, nrd_srv_shm_cuda_visit_fn fn, void *arg) {
  pthread_mutex_lock(&s->mu);
  TRITONSERVER_Error *err = NULL;
  int bad = 0;
  if (name) {
    nrd_srv_shm_region *r = find(s, name);
    if (r == NULL || !r->cuda)
      err = shm_error(TRITONSERVER_ERROR_NOT_FOUND, "Unable to find cuda shared memory region: '%s'", name, NULL);
    else
      bad = fn(r->name, r->device, r->byte_size, arg);
  } else {
    for (nrd_srv_shm_region *r = s->regions; r && !bad; r = r->next)
      if (r->cuda) bad = fn(r->name, r->device, r->byte_size, arg);
  }
  pthread_mutex_unlock(&s->mu);
  if (err == NULL && bad) err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  return err;
}

void nrd_srv_shm_region_memory(const nrd_srv_shm_region *r, TRITONSERVER_MemoryType *type, int64_t *id) {
  *type = r && r->cuda ? TRITONSERVER_MEMORY_GPU : TRITONSERVER_MEMORY_CPU;
  *id = r && r->cuda ? r->device : 0;
}

TRITONSERVER_Error *nrd_srv_shm_status(nrd_srv_shm *s, const char *name, nrd_srv_shm_visit_fn fn, void *arg) {
  pthread_mutex_lock(&s->mu);
  TRITONSERVER_Error *err = NULL;
  int bad = 0;
  if (name) {
    nrd_srv_shm_region *r = find(s, name);
    if (r == NULL || r->cuda)
      err = shm_error(TRITONSERVER_ERROR_NOT_FOUND, "Unable to find system shared memory region: '%s'", name, NULL);
    else
      bad = fn(r->name, r->key, r->offset, r->byte_size, arg);
  } else {
    for (nrd_srv_shm_region *r = s->regions; r && !bad; r = r->next)
      if (!r->cuda) bad = fn(r->name, r->key, r->offset, r->byte_size, arg);
  }
  pthread_mutex_unlock(&s->mu);
  if (err == NULL && bad) err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  return err;
}

TRITONSERVER_Error *nrd_srv_shm_acquire(nrd_srv_shm *s, const char *name, uint64_t offset, uint64_t byte_size,
                                        nrd_srv_shm_region **region, void **addr) {
  *region = NULL;
  *addr = NULL;
  pthread_mutex_lock(&s->mu);
  nrd_srv_shm_region *r = find(s, name);
  TRITONSERVER_Error *err = NULL;
  if (r == NULL) {
    err = shm_error(TRITONSERVER_ERROR_NOT_FOUND, "Unable to find shared memory region: '%s'", name, NULL);
  } else if (offset > r->byte_size || byte_size > r->byte_size - offset) {
    err = shm_error(TRITONSERVER_ERROR_INVALID_ARG, "Invalid offset + byte size for shared memory region: '%s'", name,
                    NULL);
  } else {
    atomic_fetch_add(&r->refs, 1);
    *region = r;
    *addr = r->base + offset;
  }
  pthread_mutex_unlock(&s->mu);
  return err;
}

void nrd_srv_shm_release(nrd_srv_shm_region *r) {
  if (r) region_unref(r);
}

TRITONSERVER_Error *nrd_srv_shm_check_output(const char *name, uint64_t have, size_t need) {
  if (need <= have) return NULL;
  char msg[400];
  snprintf(msg, sizeof msg,
           "shared memory size specified with the request for output '%.100s' (%llu bytes) should be "
           "at least %zu bytes to hold the results",
           name, (unsigned long long)have, need);
  return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, msg); /* Triton's code: INTERNAL */
}
