/* Unit tests for gpu.c over the stand-in driver (tests/gpu_stub): device
 * discovery, device and pinned memory, copies, CUDA IPC, NVML samples. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "gpu.h"

__attribute__((constructor)) static void use_fake_driver(void) {
  setenv("NEREID_CUDA_LIBRARY", NRD_FAKE_CUDA, 1);
  setenv("NEREID_NVML_LIBRARY", NRD_FAKE_CUDA, 1);
  setenv("NRD_FAKE_CUDA_DEVICES", "2", 1);
  setenv("NRD_FAKE_CUDA_CC", "8.0,5.2", 1);
  unsetenv("CUDA_VISIBLE_DEVICES");
}

Test(gpu, discovers_devices) {
  cr_assert(nrd_gpu_driver_loaded());
  cr_assert_eq(nrd_gpu_count(), 2);
  const nrd_gpu_device *d = nrd_gpu_device_get(1);
  cr_assert_not_null(d);
  cr_assert_eq(d->id, 1);
  cr_assert_eq(d->cc_major, 5);
  cr_assert_eq(d->cc_minor, 2);
  cr_assert_eq(d->total_memory, (uint64_t)1 << 30);
  cr_assert_not_null(strstr(d->name, "Stand-in"));
  cr_assert_eq(nrd_gpu_device_get(0)->cc_major, 8);
  cr_assert_null(nrd_gpu_device_get(2));
  cr_assert_null(nrd_gpu_device_get(-1));
  cr_assert_gt(nrd_gpu_driver_version(), 0);
}

Test(gpu, device_memory_and_copies) {
  void *d = NULL, *h = NULL;
  cr_assert_null(nrd_gpu_alloc(1, 4096, &d));
  cr_assert_null(nrd_gpu_host_alloc(4096, &h));
  char src[4096], back[4096];
  for (size_t i = 0; i < sizeof src; i++) src[i] = (char)(i * 7);
  cr_assert_null(nrd_gpu_copy(d, src, sizeof src, 1)); /* host to device */
  cr_assert_null(nrd_gpu_copy(h, d, sizeof src, 1)); /* device to pinned */
  cr_assert_null(nrd_gpu_copy(back, h, sizeof src, 0)); /* pinned to host */
  cr_assert_eq(memcmp(src, back, sizeof src), 0);
  cr_assert_null(nrd_gpu_copy(back, src, 0, 5)); /* nothing to copy: no device needed */
  nrd_gpu_free(1, d);
  nrd_gpu_host_free(h);
}

Test(gpu, bad_device_and_out_of_memory) {
  void *d = (void *)1;
  TRITONSERVER_Error *e = nrd_gpu_alloc(7, 16, &d);
  cr_assert_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_INVALID_ARG);
  cr_assert_str_eq(TRITONSERVER_ErrorMessage(e), "GPU 7 is not available (2 CUDA devices found)");
  cr_assert_null(d);
  TRITONSERVER_ErrorDelete(e);
  e = nrd_gpu_alloc(0, (size_t)2 << 30, &d);
  cr_assert_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_UNAVAILABLE);
  cr_assert_not_null(strstr(TRITONSERVER_ErrorMessage(e), "out of memory"), "%s", TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
  nrd_gpu_free(0, NULL); /* harmless */
  nrd_gpu_free(9, (void *)16);
}

Test(gpu, ipc_handles_round_trip) {
  void *d = NULL, *mapped = NULL;
  cr_assert_null(nrd_gpu_alloc(0, 256, &d));
  cr_assert_null(nrd_gpu_copy(d, "hello, device", 14, 0));
  char h[NRD_GPU_IPC_HANDLE_SIZE];
  cr_assert_null(nrd_gpu_ipc_handle(0, d, h));
  cr_assert_null(nrd_gpu_ipc_open(0, h, &mapped));
  cr_assert_neq(mapped, d);
  char out[14];
  cr_assert_null(nrd_gpu_copy(out, mapped, 14, 0));
  cr_assert_str_eq(out, "hello, device");
  nrd_gpu_ipc_close(0, mapped);
  char junk[NRD_GPU_IPC_HANDLE_SIZE] = {0};
  TRITONSERVER_Error *e = nrd_gpu_ipc_open(0, junk, &mapped);
  cr_assert_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_INVALID_ARG);
  cr_assert_null(mapped);
  TRITONSERVER_ErrorDelete(e);
  nrd_gpu_free(0, d);
}

Test(gpu, nvml_samples) {
  nrd_gpu_sample s;
  cr_assert(nrd_gpu_sample_get(1, &s));
  cr_assert_str_eq(s.uuid, "GPU-00000000-0000-0000-0000-000000000001");
  cr_assert_float_eq(s.utilization, 0.35, 1e-9);
  cr_assert_float_eq(s.memory_total, 1073741824.0, 1e-3);
  cr_assert_float_eq(s.power_usage, 75.5, 1e-9);
  cr_assert_float_eq(s.power_limit, 300.0, 1e-9);
  cr_assert_gt(s.energy, 0);
  cr_assert_not(nrd_gpu_sample_get(3, &s));
}
