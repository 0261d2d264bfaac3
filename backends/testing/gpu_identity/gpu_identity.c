/*
 * gpu_identity (test only): an identity model for KIND_GPU instances that
 * keeps every tensor on its GPU, through the driver API only (no kernels,
 * so it builds without nvcc): each input INPUT<x> is gathered into device
 * memory from the backend memory manager's pool (skipped when it is one
 * buffer on a GPU already), its output OUTPUT<x> is asked for in GPU
 * memory on the instance's device, and the bytes go device to device
 * (nrd_bu_copy). With the stand-in driver of tests/gpu_stub every path
 * runs in CI; scripts/gpu_check.sh runs it on a real GPU.
 *
 * Threads: the instance state (device, memory manager) is immutable after
 * ModelInstanceInitialize; Execute runs on the instance's thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nereid/backend_utils.h"

typedef struct gpu_instance {
  int32_t device;
  TRITONBACKEND_MemoryManager *mm;
} gpu_instance;

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_Initialize(TRITONBACKEND_Backend *backend) {
  (void)backend;
  return nrd_bu_api_version_check("gpu_identity");
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance *instance) {
  TRITONSERVER_InstanceGroupKind kind;
  const char *name = NULL;
  TRITONBACKEND_Model *model = NULL;
  TRITONBACKEND_Backend *backend = NULL;
  gpu_instance g = {0};
  TRITONSERVER_Error *err = TRITONBACKEND_ModelInstanceKind(instance, &kind);
  if (err == NULL) err = TRITONBACKEND_ModelInstanceName(instance, &name);
  if (err == NULL) err = TRITONBACKEND_ModelInstanceDeviceId(instance, &g.device);
  if (err == NULL) err = TRITONBACKEND_ModelInstanceModel(instance, &model);
  if (err == NULL) err = TRITONBACKEND_ModelBackend(model, &backend);
  if (err == NULL) err = TRITONBACKEND_BackendMemoryManager(backend, &g.mm);
  if (err != NULL) return err;
  if (kind != TRITONSERVER_INSTANCEGROUPKIND_GPU) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "gpu_identity: instance '%s' must be KIND_GPU, not %s",
                             name, TRITONSERVER_InstanceGroupKindString(kind));
  }
  gpu_instance *state = malloc(sizeof *state);
  if (state == NULL) return nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL, "gpu_identity: out of memory");
  *state = g;
  err = TRITONBACKEND_ModelInstanceSetState(instance, state);
  if (err != NULL) free(state);
  return err;
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance *instance) {
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelInstanceState(instance, &state);
  free(state);
  return err;
}

/* Input `input` gathered on the instance's GPU: *src is either its one GPU
 * buffer or *scratch, pool memory the caller frees. */
static TRITONSERVER_Error *on_device(const gpu_instance *g, TRITONBACKEND_Input *input, uint32_t buffers, uint64_t size,
                                     const void **src, void **scratch) {
  const void *base = NULL;
  uint64_t len = 0;
  TRITONSERVER_MemoryType mt = TRITONSERVER_MEMORY_GPU;
  int64_t id = g->device;
  *scratch = NULL;
  if (buffers == 1) {
    TRITONSERVER_Error *err = TRITONBACKEND_InputBuffer(input, 0, &base, &len, &mt, &id);
    if (err != NULL) return err;
    if (mt == TRITONSERVER_MEMORY_GPU && id == g->device) {
      *src = base;
      return NULL;
    }
  }
  TRITONSERVER_Error *err =
      TRITONBACKEND_MemoryManagerAllocate(g->mm, scratch, TRITONSERVER_MEMORY_GPU, g->device, size);
  uint64_t off = 0;
  for (uint32_t b = 0; err == NULL && b < buffers; ++b) {
    mt = TRITONSERVER_MEMORY_GPU;
    id = g->device;
    err = TRITONBACKEND_InputBuffer(input, b, &base, &len, &mt, &id);
    if (err == NULL && len > size - off) {
      err = nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL, "gpu_identity: input buffers exceed %llu bytes",
                              (unsigned long long)size);
    }
    if (err == NULL) err = nrd_bu_copy((char *)*scratch + off, TRITONSERVER_MEMORY_GPU, g->device, base, mt, id, len);
    off += len;
  }
  if (err != NULL && *scratch != NULL) {
    nrd_bu_error_log_and_delete(TRITONBACKEND_MemoryManagerFree(g->mm, *scratch, TRITONSERVER_MEMORY_GPU, g->device),
                                "gpu_identity: cannot free scratch memory");
    *scratch = NULL;
  }
  *src = *scratch;
  return err;
}

static TRITONSERVER_Error *copy_one(const gpu_instance *g, TRITONBACKEND_Response *response,
                                    TRITONBACKEND_Input *input) {
  const char *name = NULL;
  TRITONSERVER_DataType dt;
  const int64_t *shape = NULL;
  uint32_t dims = 0, buffers = 0;
  uint64_t size = 0;
  TRITONSERVER_Error *err = TRITONBACKEND_InputProperties(input, &name, &dt, &shape, &dims, &size, &buffers);
  if (err != NULL) return err;
  if (strncmp(name, "INPUT", 5) != 0) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "gpu_identity: input '%s' is not named INPUT<x>", name);
  }
  char out_name[256];
  snprintf(out_name, sizeof out_name, "OUTPUT%s", name + 5);
  const void *src = NULL;
  void *scratch = NULL;
  err = on_device(g, input, buffers, size, &src, &scratch);
  if (err != NULL) return err;
  TRITONBACKEND_Output *output = NULL;
  void *dst = NULL;
  TRITONSERVER_MemoryType mt = TRITONSERVER_MEMORY_GPU; /* what we ask for */
  int64_t id = g->device;
  err = TRITONBACKEND_ResponseOutput(response, &output, out_name, dt, shape, dims);
  if (err == NULL) err = TRITONBACKEND_OutputBuffer(output, &dst, size, &mt, &id);
  if (err == NULL) err = nrd_bu_copy(dst, mt, id, src, TRITONSERVER_MEMORY_GPU, g->device, size);
  if (scratch != NULL) {
    nrd_bu_error_log_and_delete(TRITONBACKEND_MemoryManagerFree(g->mm, scratch, TRITONSERVER_MEMORY_GPU, g->device),
                                "gpu_identity: cannot free scratch memory");
  }
  return err;
}

static void respond(const gpu_instance *g, TRITONBACKEND_Request *request) {
  TRITONBACKEND_Response *response = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ResponseNew(&response, request);
  if (err != NULL) {
    nrd_bu_error_log_and_delete(err, "gpu_identity: cannot create response");
    return;
  }
  uint32_t count = 0;
  err = TRITONBACKEND_RequestInputCount(request, &count);
  for (uint32_t i = 0; err == NULL && i < count; ++i) {
    TRITONBACKEND_Input *input = NULL;
    err = TRITONBACKEND_RequestInputByIndex(request, i, &input);
    if (err == NULL) err = copy_one(g, response, input);
  }
  nrd_bu_error_log_and_delete(TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, err),
                              "gpu_identity: cannot send response");
  if (err != NULL) TRITONSERVER_ErrorDelete(err);
}

NRD_BACKEND_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance *instance,
                                                                          TRITONBACKEND_Request **requests,
                                                                          const uint32_t request_count) {
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelInstanceState(instance, &state);
  if (err != NULL) return err;
  uint64_t start = nrd_bu_now_ns();
  for (uint32_t r = 0; r < request_count; ++r) {
    respond(state, requests[r]);
    uint64_t now = nrd_bu_now_ns();
    nrd_bu_error_log_and_delete(
        TRITONBACKEND_ModelInstanceReportStatistics(instance, requests[r], true, start, start, now, now),
        "gpu_identity: cannot report statistics");
    nrd_bu_request_release(requests[r]);
  }
  return NULL;
}
