/*
 * Loading OpenVINO's C library and the type mapping (ov_runtime.h).
 */
#include "ov_runtime.h"

#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "nereid/backend_utils.h"

/* Every function of ov_api.h: its symbol and where its pointer goes. */
#define NRD_OV_ENTRY(ret, name, params) {#name, offsetof(nrd_ov_api, name)},
static const struct {
  const char *symbol;
  size_t offset;
} kFunctions[] = {NRD_OV_FUNCTIONS(NRD_OV_ENTRY)};
#undef NRD_OV_ENTRY

/* Fills the table by name; the first missing name fails it. */
static TRITONSERVER_Error *resolve(ov_runtime *rt) {
  for (size_t i = 0; i < sizeof kFunctions / sizeof kFunctions[0]; i++) {
    void *f = dlsym(rt->library, kFunctions[i].symbol);
    if (f == NULL) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_UNAVAILABLE,
                               "openvino: %s has no function %s (OpenVINO 2025.2 or a later 2025 release is needed)",
                               rt->path, kFunctions[i].symbol);
    }
    /* POSIX: a data pointer from dlsym converts to a function pointer. */
    memcpy((char *)&rt->api + kFunctions[i].offset, &f, sizeof f);
  }
  return NULL;
}

TRITONSERVER_Error *ov_runtime_open(const char *backend_dir, ov_runtime *out) {
  memset(out, 0, sizeof *out);
  ov_runtime rt;
  memset(&rt, 0, sizeof rt);
  char tried[2048];
  rt.library = nrd_bu_dlopen_beside(backend_dir, NRD_OV_LIBRARY, rt.path, sizeof rt.path, tried, sizeof tried);
  if (rt.library == NULL) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_UNAVAILABLE,
                             "openvino: cannot load OpenVINO (scripts/fetch_pypi.sh installs it); tried %s", tried);
  }
  TRITONSERVER_Error *err = resolve(&rt);
  if (err != NULL) {
    dlclose(rt.library);
    return err;
  }
  /* Pinned where OpenVINO looks for them: beside the library found. A
   * missing one is OpenVINO's to report when a model needs it. */
  static const char *const kPinned[] = {"libopenvino_intel_cpu_plugin.so", "libopenvino_ir_frontend.so.2520",
                                        "libopenvino_onnx_frontend.so.2520"};
  const char *slash = strrchr(rt.path, '/');
  for (size_t i = 0; slash != NULL && i < sizeof kPinned / sizeof kPinned[0]; i++) {
    char pin[sizeof rt.path];
    int n = snprintf(pin, sizeof pin, "%.*s/%s", (int)(slash - rt.path), rt.path, kPinned[i]);
    if (n > 0 && (size_t)n < sizeof pin) rt.pinned[i] = dlopen(pin, RTLD_NOW | RTLD_LOCAL);
  }
  nrd_ov_version_t v;
  memset(&v, 0, sizeof v);
  if (rt.api.ov_get_openvino_version(&v) == NRD_OV_OK) {
    snprintf(rt.version, sizeof rt.version, "%s", v.build_number != NULL ? v.build_number : "?");
    rt.api.ov_version_free(&v);
  }
  *out = rt;
  return NULL;
}

void ov_runtime_close(ov_runtime *rt) { memset(rt, 0, sizeof *rt); }

TRITONSERVER_Error *ov_runtime_error(const ov_runtime *rt, nrd_ov_status status, TRITONSERVER_Error_Code code,
                                     const char *what) {
  if (status == NRD_OV_OK) return NULL;
  const char *msg = rt->api.ov_get_last_err_msg();
  const char *name = rt->api.ov_get_error_info(status);
  TRITONSERVER_Error *err = nrd_bu_error_newf(code, "openvino error in %s : %s", what,
                                              msg != NULL && msg[0] != '\0' ? msg
                                              : name != NULL                  ? name
                                                                              : "unknown OpenVINO error");
  if (msg != NULL) rt->api.ov_free(msg);
  return err;
}

/* The datatypes Triton's openvino backend serves (no FP64, BF16, BYTES). */
static const struct {
  TRITONSERVER_DataType triton;
  nrd_ov_element ov;
} kTypes[] = {
    {TRITONSERVER_TYPE_BOOL, NRD_OV_BOOLEAN}, {TRITONSERVER_TYPE_UINT8, NRD_OV_U8},
    {TRITONSERVER_TYPE_UINT16, NRD_OV_U16},   {TRITONSERVER_TYPE_UINT32, NRD_OV_U32},
    {TRITONSERVER_TYPE_UINT64, NRD_OV_U64},   {TRITONSERVER_TYPE_INT8, NRD_OV_I8},
    {TRITONSERVER_TYPE_INT16, NRD_OV_I16},    {TRITONSERVER_TYPE_INT32, NRD_OV_I32},
    {TRITONSERVER_TYPE_INT64, NRD_OV_I64},    {TRITONSERVER_TYPE_FP16, NRD_OV_F16},
    {TRITONSERVER_TYPE_FP32, NRD_OV_F32},
};

nrd_ov_element ov_element_of(TRITONSERVER_DataType dt) {
  for (size_t i = 0; i < sizeof kTypes / sizeof kTypes[0]; i++) {
    if (kTypes[i].triton == dt) return kTypes[i].ov;
  }
  return NRD_OV_DYNAMIC;
}

TRITONSERVER_DataType ov_triton_type_of(nrd_ov_element et) {
  for (size_t i = 0; i < sizeof kTypes / sizeof kTypes[0]; i++) {
    if (kTypes[i].ov == et) return kTypes[i].triton;
  }
  return TRITONSERVER_TYPE_INVALID;
}
