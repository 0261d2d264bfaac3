/* GPU support through the public API, over the stand-in driver
 * (tests/gpu_stub: two devices of compute capability 8.0): KIND_GPU and
 * KIND_AUTO instance groups, instance names, kinds and devices, Triton's
 * errors for GPUs that are missing or below the minimum compute
 * capability. */
#include <dlfcn.h>
#include <jansson.h>

#include "harness.h"

/* NRD_REAL_GPU=1 (scripts/gpu_check.sh): the real driver, and only the
 * tests that do not assume the stand-in's two devices are run. */
static bool real_gpu(void) { return getenv("NRD_REAL_GPU") != NULL; }

__attribute__((constructor)) static void use_fake_driver(void) {
  if (real_gpu()) return;
  setenv("NEREID_CUDA_LIBRARY", NRD_FAKE_CUDA, 1);
  setenv("NEREID_NVML_LIBRARY", NRD_FAKE_CUDA, 1);
  setenv("NRD_FAKE_CUDA_DEVICES", "2", 1);
  setenv("NRD_FAKE_CUDA_CC", "8.0", 1);
  unsetenv("CUDA_VISIBLE_DEVICES");
}

static const char *kIO = "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n"
                         "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n";

/* Writes model `name` of `backend` with instance groups `groups`. */
static void gpu_model(const char *repo, const char *name, const char *backend, const char *groups) {
  char cfg[2048];
  snprintf(cfg, sizeof cfg, "name: \"%s\"\nbackend: \"%s\"\nmax_batch_size: 0\n%s%s", name, backend, kIO, groups);
  h_model(repo, name, cfg, "1");
}

static TRITONSERVER_Server *explicit_server(const char *repo, const char *record, double min_cc) {
  TRITONSERVER_ServerOptions *o = h_options(repo, TRITONSERVER_MODEL_CONTROL_EXPLICIT);
  if (record) H_OK(TRITONSERVER_ServerOptionsSetBackendConfig(o, "recorder", "record_file", record));
  if (min_cc > 0) H_OK(TRITONSERVER_ServerOptionsSetMinSupportedComputeCapability(o, min_cc));
  return h_server_new(o);
}

/* The model's configuration as the server renders it; caller decrefs. */
static json_t *model_config(TRITONSERVER_Server *s, const char *name) {
  TRITONSERVER_Message *m = NULL;
  H_OK(TRITONSERVER_ServerModelConfig(s, name, -1, 1, &m));
  char *text = h_msg_text(m);
  json_t *j = json_loads(text, 0, NULL);
  free(text);
  cr_assert_not_null(j);
  return j;
}

static json_t *group0(json_t *cfg) { return json_array_get(json_object_get(cfg, "instance_group"), 0); }

Test(gpu, kind_gpu_places_count_instances_on_each_listed_gpu) {
  char *repo, *record;
  h_repo_record_new(&repo, &record);
  gpu_model(repo, "rec", "recorder", "instance_group [ { count: 2 kind: KIND_GPU gpus: [ 0, 1 ] } ]\n");
  TRITONSERVER_Server *s = explicit_server(repo, record, 0);
  H_OK(TRITONSERVER_ServerLoadModel(s, "rec"));
  char *text = h_read(record);
  /* Triton's order: for each of count, every listed GPU; the same name on each. */
  const char *want = "ModelInstanceInitialize rec_0_0\nModelInstanceInitialize rec_0_0\n"
                     "ModelInstanceInitialize rec_0_1\nModelInstanceInitialize rec_0_1\n";
  cr_assert_not_null(strstr(text, want), "%s", text);
  free(text);
  H_OK(TRITONSERVER_ServerDelete(s));
  h_repo_record_free(repo, record);
}

Test(gpu, kind_gpu_without_gpus_gets_every_gpu_and_auto_resolves) {
  char *repo = h_tmpdir();
  gpu_model(repo, "all", "identity", "instance_group [ { kind: KIND_GPU } ]\n");
  gpu_model(repo, "auto", "identity", "instance_group [ { gpus: [ 1 ] } ]\n");
  gpu_model(repo, "auto_missing", "identity", "instance_group [ { kind: KIND_AUTO gpus: [ 4 ] } ]\n");
  TRITONSERVER_Server *s = explicit_server(repo, NULL, 0);
  H_OK(TRITONSERVER_ServerLoadModel(s, "all"));
  json_t *c = model_config(s, "all");
  json_t *g = group0(c);
  cr_assert_str_eq(json_string_value(json_object_get(g, "kind")), "KIND_GPU");
  cr_assert_eq(json_array_size(json_object_get(g, "gpus")), 2);
  cr_assert_eq(json_integer_value(json_array_get(json_object_get(g, "gpus"), 1)), 1);
  cr_assert_eq(json_integer_value(json_object_get(g, "count")), 1);
  json_decref(c);
  H_OK(TRITONSERVER_ServerLoadModel(s, "auto"));
  c = model_config(s, "auto");
  cr_assert_str_eq(json_string_value(json_object_get(group0(c), "kind")), "KIND_GPU");
  json_decref(c);
  /* A listed id the server lacks makes KIND_AUTO a CPU group, which then
   * may not list GPUs: Triton's message. */
  TRITONSERVER_Error *e = TRITONSERVER_ServerLoadModel(s, "auto_missing");
  cr_assert_not_null(e);
  cr_assert_not_null(strstr(TRITONSERVER_ErrorMessage(e),
                            "instance group auto_missing_0 of model auto_missing has kind KIND_CPU but specifies one "
                            "or more GPUs"),
                     "%s", TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
  H_OK(TRITONSERVER_ServerDelete(s));
  h_rmtree(repo);
  free(repo);
}

Test(gpu, unknown_gpu_ids_and_old_gpus_fail_with_tritons_messages) {
  char *repo = h_tmpdir();
  gpu_model(repo, "bad", "identity", "instance_group [ { kind: KIND_GPU gpus: [ 0, 3 ] } ]\n");
  gpu_model(repo, "any", "identity", "instance_group [ { kind: KIND_GPU } ]\n");
  TRITONSERVER_Server *s = explicit_server(repo, NULL, 0);
  TRITONSERVER_Error *e = TRITONSERVER_ServerLoadModel(s, "bad");
  cr_assert_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_INVALID_ARG);
  cr_assert_not_null(strstr(TRITONSERVER_ErrorMessage(e),
                            "instance group bad_0 of model bad specifies invalid or unsupported gpu id 3. GPUs with "
                            "at least the minimum required CUDA compute compatibility of 6.000000 are: 0, 1"),
                     "%s", TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
  H_OK(TRITONSERVER_ServerDelete(s));
  /* Above every device's compute capability: no GPU is supported. */
  s = explicit_server(repo, NULL, 8.6);
  e = TRITONSERVER_ServerLoadModel(s, "any");
  cr_assert_not_null(e);
  cr_assert_not_null(strstr(TRITONSERVER_ErrorMessage(e),
                            "instance group any_0 of model any has kind KIND_GPU but no GPUs are available"),
                     "%s", TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
  H_OK(TRITONSERVER_ServerDelete(s));
  h_rmtree(repo);
  free(repo);
}

/* --model-load-gpu-limit: after each KIND_GPU instance is made, its GPU's
 * memory in use must be within the fraction (Triton's check and words).
 * GPU 1 holds a 256 MiB pool of the stand-in's 1 GiB: 25 % in use. */
Test(gpu, model_load_gpu_limit_rejects_an_instance_on_a_full_gpu) {
  if (real_gpu()) return;
  char *repo = h_tmpdir();
  gpu_model(repo, "on0", "identity", "instance_group [ { kind: KIND_GPU gpus: [ 0 ] } ]\n");
  gpu_model(repo, "on1", "identity", "instance_group [ { kind: KIND_GPU gpus: [ 1 ] } ]\n");
  gpu_model(repo, "cpu", "identity", "instance_group [ { kind: KIND_CPU } ]\n");
  TRITONSERVER_ServerOptions *o = h_options(repo, TRITONSERVER_MODEL_CONTROL_EXPLICIT);
  H_OK(TRITONSERVER_ServerOptionsSetCudaMemoryPoolByteSize(o, 0, 0));
  H_OK(TRITONSERVER_ServerOptionsSetCudaMemoryPoolByteSize(o, 1, 256u << 20));
  H_OK(TRITONSERVER_ServerOptionsSetModelLoadDeviceLimit(o, TRITONSERVER_INSTANCEGROUPKIND_GPU, 0, 0.1));
  H_OK(TRITONSERVER_ServerOptionsSetModelLoadDeviceLimit(o, TRITONSERVER_INSTANCEGROUPKIND_GPU, 1, 0.2));
  TRITONSERVER_Server *s = h_server_new(o);
  H_OK(TRITONSERVER_ServerLoadModel(s, "on0"));
  H_OK(TRITONSERVER_ServerLoadModel(s, "cpu")); /* no limit on the CPU */
  TRITONSERVER_Error *e = TRITONSERVER_ServerLoadModel(s, "on1");
  cr_assert_not_null(e);
  cr_assert_not_null(strstr(TRITONSERVER_ErrorMessage(e), "can not create model 'on1_0_0': memory limit set for "
                                                          "KIND_GPU 1 has exceeded, model loading is rejected."),
                     "%s", TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
  bool ready = true;
  H_OK(TRITONSERVER_ServerModelIsReady(s, "on1", -1, &ready));
  cr_assert(!ready);
  H_OK(TRITONSERVER_ServerDelete(s));
  /* A limit above what is in use lets it load. */
  o = h_options(repo, TRITONSERVER_MODEL_CONTROL_EXPLICIT);
  H_OK(TRITONSERVER_ServerOptionsSetModelLoadDeviceLimit(o, TRITONSERVER_INSTANCEGROUPKIND_GPU, 1, 0.3));
  s = h_server_new(o);
  H_OK(TRITONSERVER_ServerLoadModel(s, "on1"));
  H_OK(TRITONSERVER_ServerDelete(s));
  h_rmtree(repo);
  free(repo);
}

Test(gpu, instance_reports_its_kind_device_and_host_policy) {
  char *repo = h_tmpdir();
  h_model(repo, "probe",
          "name: \"probe\"\nbackend: \"api_probe\"\nmax_batch_size: 0\n"
          "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n"
          "output [ { name: \"PROBE\" data_type: TYPE_STRING dims: [ 1 ] } ]\n"
          "instance_group [ { kind: KIND_GPU gpus: [ 1 ] } ]\n",
          "1");
  char lib[4200];
  snprintf(lib, sizeof lib, "%s/probe/libtriton_api_probe.so", repo);
  cr_assert_eq(symlink(NRD_TEST_BACKEND_DIR "/api_probe/libtriton_api_probe.so", lib), 0);
  TRITONSERVER_Server *s = h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE));
  float in[2] = {1, 2};
  int64_t shape[1] = {2};
  TRITONSERVER_InferenceRequest *r = h_request(s, "probe");
  h_add_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, shape, 1, in, sizeof in);
  h_call *c = h_infer(s, r);
  cr_assert_null(h_response_error(c, 0));
  h_output out;
  cr_assert(h_find_output(c->responses[0], "PROBE", &out));
  uint32_t len;
  memcpy(&len, out.base, 4);
  json_t *j = json_loadb((const char *)out.base + 4, len, 0, NULL);
  cr_assert_not_null(j);
  cr_assert_str_eq(json_string_value(json_object_get(j, "kind")), "GPU");
  cr_assert_eq(json_integer_value(json_object_get(j, "device_id")), 1);
  cr_assert_not_null(json_object_get(json_object_get(j, "host_policy"), "gpu_1"), "%s", json_dumps(j, 0));
  cr_assert_null(json_object_get(json_object_get(j, "input_buffer"), "cuda_ipc_handle"));
  json_decref(j);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  /* A CUDA IPC handle the client gives with a buffer reaches the backend
   * with that buffer, as in Triton. */
  r = h_request(s, "probe");
  H_OK(TRITONSERVER_InferenceRequestAddInput(r, "INPUT0", TRITONSERVER_TYPE_FP32, shape, 1));
  TRITONSERVER_BufferAttributes *attrs = NULL;
  H_OK(TRITONSERVER_BufferAttributesNew(&attrs));
  unsigned char handle[64];
  memset(handle, 0xab, sizeof handle);
  H_OK(TRITONSERVER_BufferAttributesSetByteSize(attrs, sizeof in));
  H_OK(TRITONSERVER_BufferAttributesSetCudaIpcHandle(attrs, handle));
  H_OK(TRITONSERVER_InferenceRequestAppendInputDataWithBufferAttributes(r, "INPUT0", in, attrs));
  H_OK(TRITONSERVER_BufferAttributesDelete(attrs));
  c = h_infer(s, r);
  cr_assert_null(h_response_error(c, 0));
  cr_assert(h_find_output(c->responses[0], "PROBE", &out));
  memcpy(&len, out.base, 4);
  j = json_loadb((const char *)out.base + 4, len, 0, NULL);
  cr_assert_not_null(j);
  cr_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "input_buffer"), "cuda_ipc_handle")),
                   "abababab", "%s", json_dumps(j, 0));
  json_decref(j);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  H_OK(TRITONSERVER_ServerDelete(s));
  h_rmtree(repo);
  free(repo);
}

/* ------------------------------------------------ GPU data end to end */

/* The driver a client using CUDA has (the stand-in, or libcuda.so.1 with
 * NRD_REAL_GPU): device memory and copies to and from it. */
typedef struct client_driver {
  unsigned (*init)(unsigned);
  unsigned (*retain)(void **, int);
  unsigned (*push)(void *);
  unsigned (*pop)(void **);
  unsigned (*alloc)(unsigned long long *, size_t);
  unsigned (*htod)(unsigned long long, const void *, size_t);
  unsigned (*dtoh)(void *, unsigned long long, size_t);
} client_driver;

static client_driver *drv(void) {
  static client_driver d;
  if (d.init) return &d;
  void *lib = dlopen(real_gpu() ? "libcuda.so.1" : NRD_FAKE_CUDA, RTLD_NOW);
  cr_assert_not_null(lib);
  *(void **)&d.retain = dlsym(lib, "cuDevicePrimaryCtxRetain");
  *(void **)&d.push = dlsym(lib, "cuCtxPushCurrent_v2");
  *(void **)&d.pop = dlsym(lib, "cuCtxPopCurrent_v2");
  *(void **)&d.alloc = dlsym(lib, "cuMemAlloc_v2");
  *(void **)&d.htod = dlsym(lib, "cuMemcpyHtoD_v2");
  *(void **)&d.dtoh = dlsym(lib, "cuMemcpyDtoH_v2");
  *(void **)&d.init = dlsym(lib, "cuInit");
  cr_assert(d.init && d.retain && d.push && d.pop && d.alloc && d.htod && d.dtoh);
  cr_assert_eq(d.init(0), 0);
  return &d;
}

static void ctx_push(int dev) {
  void *ctx = NULL;
  cr_assert_eq(drv()->retain(&ctx, dev), 0);
  cr_assert_eq(drv()->push(ctx), 0);
}

static void ctx_pop(void) {
  void *ctx = NULL;
  cr_assert_eq(drv()->pop(&ctx), 0);
}

static void *fake_device_alloc(int dev, size_t n) {
  unsigned long long d = 0;
  ctx_push(dev);
  cr_assert_eq(drv()->alloc(&d, n), 0);
  ctx_pop();
  return (void *)(uintptr_t)d;
}

static void dev_write(int dev, void *dst, const void *src, size_t n) {
  ctx_push(dev);
  cr_assert_eq(drv()->htod((uintptr_t)dst, src, n), 0);
  ctx_pop();
}

static void dev_read(int dev, void *dst, const void *src, size_t n) {
  ctx_push(dev);
  cr_assert_eq(drv()->dtoh(dst, (uintptr_t)src, n), 0);
  ctx_pop();
}

/* The second GPU of the stand-in; the only one a real machine surely has. */
static int gpu_b(void) { return real_gpu() ? 0 : 1; }

/* Output buffers in GPU memory on device 0, one 4 KiB region per call. */
static TRITONSERVER_Error *gpu_alloc(TRITONSERVER_ResponseAllocator *a, const char *name, size_t size,
                                     TRITONSERVER_MemoryType mt, int64_t mt_id, void *userp, void **buffer,
                                     void **buffer_userp, TRITONSERVER_MemoryType *actual_mt, int64_t *actual_id) {
  (void)a, (void)name, (void)mt, (void)mt_id;
  cr_assert_leq(size, 4096);
  *buffer = userp;
  *buffer_userp = NULL;
  *actual_mt = TRITONSERVER_MEMORY_GPU;
  *actual_id = 0;
  return NULL;
}

static TRITONSERVER_Error *gpu_release(TRITONSERVER_ResponseAllocator *a, void *buffer, void *buffer_userp, size_t size,
                                       TRITONSERVER_MemoryType mt, int64_t mt_id) {
  (void)a, (void)buffer, (void)buffer_userp, (void)size, (void)mt, (void)mt_id;
  return NULL;
}

Test(gpu, identity_reads_gpu_inputs_and_writes_gpu_outputs) {
  char *repo = h_tmpdir();
  char groups[100];
  snprintf(groups, sizeof groups, "instance_group [ { kind: KIND_GPU gpus: [ %d ] } ]\n", gpu_b());
  gpu_model(repo, "id", "identity", groups);
  TRITONSERVER_Server *s = h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE));
  float host_in[4] = {1.5f, -2, 3, 4};
  float *dev_in = fake_device_alloc(gpu_b(), sizeof host_in);
  dev_write(gpu_b(), dev_in, host_in, sizeof host_in);
  void *dev_out = fake_device_alloc(0, 4096);
  TRITONSERVER_ResponseAllocator *alloc = NULL;
  H_OK(TRITONSERVER_ResponseAllocatorNew(&alloc, gpu_alloc, gpu_release, NULL));
  int64_t shape[1] = {4};
  TRITONSERVER_InferenceRequest *r = h_request(s, "id");
  H_OK(TRITONSERVER_InferenceRequestAddInput(r, "INPUT0", TRITONSERVER_TYPE_FP32, shape, 1));
  /* A GPU the server lacks is refused at once. */
  TRITONSERVER_Error *e =
      TRITONSERVER_InferenceRequestAppendInputData(r, "INPUT0", dev_in, sizeof host_in, TRITONSERVER_MEMORY_GPU, 7);
  cr_assert_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_INVALID_ARG);
  cr_assert_str_eq(TRITONSERVER_ErrorMessage(e), "input 'INPUT0': GPU 7 is not available");
  TRITONSERVER_ErrorDelete(e);
  H_OK(TRITONSERVER_InferenceRequestAppendInputData(r, "INPUT0", dev_in, sizeof host_in, TRITONSERVER_MEMORY_GPU,
                                                    gpu_b()));
  h_call *c = h_call_new();
  h_bind(r, c);
  H_OK(TRITONSERVER_InferenceRequestSetResponseCallback(r, alloc, dev_out, h_on_response, c));
  H_OK(TRITONSERVER_ServerInferAsync(s, r, NULL));
  cr_assert(h_wait(c, 10000));
  cr_assert_null(h_response_error(c, 0));
  const char *oname;
  TRITONSERVER_DataType dt;
  const int64_t *oshape;
  uint64_t dims, size;
  const void *base;
  TRITONSERVER_MemoryType mt;
  int64_t mt_id;
  void *userp;
  H_OK(TRITONSERVER_InferenceResponseOutput(c->responses[0], 0, &oname, &dt, &oshape, &dims, &base, &size, &mt, &mt_id,
                                            &userp));
  cr_assert_eq(mt, TRITONSERVER_MEMORY_GPU);
  cr_assert_eq(base, dev_out);
  float back[4];
  dev_read(0, back, dev_out, sizeof back);
  cr_assert_eq(memcmp(back, host_in, sizeof host_in), 0);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  H_OK(TRITONSERVER_ResponseAllocatorDelete(alloc));
  H_OK(TRITONSERVER_ServerDelete(s));
  h_rmtree(repo);
  free(repo);
}

Test(gpu, gpu_identity_keeps_tensors_on_the_gpu) {
  char *repo = h_tmpdir();
  char cfg[1024];
  snprintf(cfg, sizeof cfg,
           "name: \"gid\"\nbackend: \"gpu_identity\"\nmax_batch_size: 0\n"
           "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n"
           "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n"
           "instance_group [ { kind: KIND_GPU gpus: [ %d ] } ]\n",
           gpu_b());
  h_model(repo, "gid", cfg, "1");
  h_model(repo, "gid_cpu",
          "name: \"gid_cpu\"\nbackend: \"gpu_identity\"\nmax_batch_size: 0\n"
          "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n"
          "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n"
          "instance_group [ { kind: KIND_CPU } ]\n",
          "1");
  TRITONSERVER_Server *s = explicit_server(repo, NULL, 0);
  TRITONSERVER_Error *e = TRITONSERVER_ServerLoadModel(s, "gid_cpu");
  cr_assert_not_null(e);
  cr_assert_not_null(
      strstr(TRITONSERVER_ErrorMessage(e), "gpu_identity: instance 'gid_cpu_0_0' must be KIND_GPU, not CPU"), "%s",
      TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
  H_OK(TRITONSERVER_ServerLoadModel(s, "gid"));
  void *dev_out = fake_device_alloc(0, 4096);
  TRITONSERVER_ResponseAllocator *alloc = NULL;
  H_OK(TRITONSERVER_ResponseAllocatorNew(&alloc, gpu_alloc, gpu_release, NULL));
  /* Host data in two buffers, then one GPU buffer: both end in GPU memory. */
  float host_in[6] = {1, 2, 3, 4, 5, 6};
  float *dev_in = fake_device_alloc(gpu_b(), sizeof host_in);
  dev_write(gpu_b(), dev_in, host_in, sizeof host_in);
  const float zeros[6] = {0};
  for (int round = 0; round < 2; round++) {
    dev_write(0, dev_out, zeros, sizeof zeros);
    int64_t shape[1] = {6};
    TRITONSERVER_InferenceRequest *r = h_request(s, "gid");
    H_OK(TRITONSERVER_InferenceRequestAddInput(r, "INPUT0", TRITONSERVER_TYPE_FP32, shape, 1));
    if (round == 0) {
      H_OK(TRITONSERVER_InferenceRequestAppendInputData(r, "INPUT0", host_in, 8, TRITONSERVER_MEMORY_CPU, 0));
      H_OK(TRITONSERVER_InferenceRequestAppendInputData(r, "INPUT0", host_in + 2, 16, TRITONSERVER_MEMORY_CPU, 0));
    } else {
      H_OK(TRITONSERVER_InferenceRequestAppendInputData(r, "INPUT0", dev_in, sizeof host_in, TRITONSERVER_MEMORY_GPU,
                                                        gpu_b()));
    }
    h_call *c = h_call_new();
    h_bind(r, c);
    H_OK(TRITONSERVER_InferenceRequestSetResponseCallback(r, alloc, dev_out, h_on_response, c));
    H_OK(TRITONSERVER_ServerInferAsync(s, r, NULL));
    cr_assert(h_wait(c, 10000));
    cr_assert_null(h_response_error(c, 0));
    float back[6];
    dev_read(0, back, dev_out, sizeof back);
    cr_assert_eq(memcmp(back, host_in, sizeof host_in), 0, "round %d", round);
    h_call_free(c);
    H_OK(TRITONSERVER_InferenceRequestDelete(r));
  }
  H_OK(TRITONSERVER_ResponseAllocatorDelete(alloc));
  H_OK(TRITONSERVER_ServerDelete(s));
  h_rmtree(repo);
  free(repo);
}

/* Triton's qa/L0_rate_limiter on KIND_GPU instances: a per-device resource
 * counts on the instance's GPU, so a pool given for another device leaves
 * it 0. The stand-in's second GPU: not on a one-GPU machine. */
static TRITONSERVER_Error *load_limited(const char *repo, int64_t count, int device) {
  TRITONSERVER_ServerOptions *o = h_options(repo, TRITONSERVER_MODEL_CONTROL_EXPLICIT);
  H_OK(TRITONSERVER_ServerOptionsSetRateLimiterMode(o, TRITONSERVER_RATE_LIMIT_EXEC_COUNT));
  H_OK(TRITONSERVER_ServerOptionsAddRateLimiterResource(o, "resource1", (size_t)count, device));
  TRITONSERVER_Server *s = h_server_new(o);
  TRITONSERVER_Error *e = TRITONSERVER_ServerLoadModel(s, "limited");
  H_OK(TRITONSERVER_ServerDelete(s));
  return e;
}

Test(gpu, rate_limiter_resources_count_on_the_instances_gpu, .timeout = 60) {
  if (real_gpu()) return;
  char *repo = h_tmpdir();
  gpu_model(repo, "limited", "identity",
            "instance_group [ { kind: KIND_GPU count: 1 gpus: [ 1 ] "
            "rate_limiter { resources [ { name: \"resource1\" count: 4 } ] } } ]\n");
  const char *want = "Resource count for \"resource1\" is limited to 0 which will prevent scheduling of one or "
                     "more model instances, the minimum required count is 4";
  /* Given only for device 10 (Triton's case), or only for device 0. */
  int other[2] = {10, 0};
  for (int i = 0; i < 2; i++) {
    TRITONSERVER_Error *e = load_limited(repo, 10, other[i]);
    cr_assert_not_null(e, "loaded with resource1 only on device %d", other[i]);
    cr_expect_not_null(strstr(TRITONSERVER_ErrorMessage(e), want), "%s", TRITONSERVER_ErrorMessage(e));
    TRITONSERVER_ErrorDelete(e);
  }
  /* On the instance's GPU, or on every device: it loads. */
  H_OK(load_limited(repo, 4, 1));
  H_OK(load_limited(repo, 4, -1));
  h_rmtree(repo);
  free(repo);
}
