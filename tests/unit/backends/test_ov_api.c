/* The openvino backend's declarations of OpenVINO's C API
 * (backends/openvino/ov_api.h) against the library they describe: every
 * function resolves in the fetched libopenvino_c and a few answer as
 * declared. ov_api_official.c, compiled into the same test where the
 * wheel's own headers are at hand, checks the declarations against them. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ov_api.h"

static const char kLibrary[] = NRD_OV_LIBRARY_DIR "/libopenvino_c.so.2520";

/* The library, or NULL (with a note) when scripts/fetch_pypi.sh has not
 * fetched it: then there is nothing to check against. */
static void *open_library(void) {
  if (access(kLibrary, R_OK) != 0) {
    fprintf(stderr, "test_ov_api: %s is missing (scripts/fetch_pypi.sh); nothing checked\n", kLibrary);
    return NULL;
  }
  void *h = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  cr_assert_not_null(h, "dlopen %s: %s", kLibrary, dlerror());
  return h;
}

#define NRD_OV_NAME(ret, name, params) #name,
static const char *const kNames[] = {NRD_OV_FUNCTIONS(NRD_OV_NAME)};
#undef NRD_OV_NAME

Test(ov_api, every_declared_function_resolves) {
  void *h = open_library();
  if (h == NULL) return;
  for (size_t i = 0; i < sizeof kNames / sizeof kNames[0]; i++) {
    cr_expect_not_null(dlsym(h, kNames[i]), "%s is not exported by %s", kNames[i], kLibrary);
  }
}

Test(ov_api, functions_answer_as_declared) {
  void *h = open_library();
  if (h == NULL) return;
  nrd_ov_api api;
#define NRD_OV_LOAD(ret, name, params) *(void **)&api.name = dlsym(h, #name);
  NRD_OV_FUNCTIONS(NRD_OV_LOAD)
#undef NRD_OV_LOAD
  nrd_ov_version_t v;
  memset(&v, 0, sizeof v);
  cr_assert_eq(api.ov_get_openvino_version(&v), NRD_OV_OK);
  cr_assert(strncmp(v.build_number, "2025.2", 6) == 0, "version %s", v.build_number);
  api.ov_version_free(&v);

  nrd_ov_dimension_t dims[2] = {{2, 2}, {-1, -1}};
  nrd_ov_partial_shape_t ps;
  cr_assert_eq(api.ov_partial_shape_create(2, dims, &ps), NRD_OV_OK);
  cr_assert_eq(ps.rank.min, 2);
  cr_assert_eq(ps.rank.max, 2);
  cr_assert_eq(ps.dims[0].max, 2);
  api.ov_partial_shape_free(&ps);

  int64_t sd[3] = {1, 2, 3};
  float data[6] = {0};
  nrd_ov_shape_t shape;
  cr_assert_eq(api.ov_shape_create(3, sd, &shape), NRD_OV_OK);
  nrd_ov_tensor_t *t = NULL;
  cr_assert_eq(api.ov_tensor_create_from_host_ptr(NRD_OV_F32, shape, data, &t), NRD_OV_OK);
  size_t bytes = 0;
  nrd_ov_element et = NRD_OV_DYNAMIC;
  void *p = NULL;
  cr_assert_eq(api.ov_tensor_get_byte_size(t, &bytes), NRD_OV_OK);
  cr_assert_eq(api.ov_tensor_get_element_type(t, &et), NRD_OV_OK);
  cr_assert_eq(api.ov_tensor_data(t, &p), NRD_OV_OK);
  cr_assert_eq(bytes, sizeof data);
  cr_assert_eq(et, NRD_OV_F32);
  cr_assert_eq(p, (void *)data);
  api.ov_tensor_free(t);
  api.ov_shape_free(&shape);

  /* A failing call: a status below zero and a message naming the file. */
  nrd_ov_core_t *core = NULL;
  cr_assert_eq(api.ov_core_create(&core), NRD_OV_OK);
  nrd_ov_model_t *model = NULL;
  nrd_ov_status st = api.ov_core_read_model(core, "/nonexistent/model.xml", NULL, &model);
  cr_assert_lt(st, 0);
  const char *msg = api.ov_get_last_err_msg();
  cr_assert_not_null(msg);
  cr_expect(strstr(msg, "/nonexistent/model.xml") != NULL, "%s", msg);
  api.ov_free(msg);
  cr_assert_not_null(api.ov_get_error_info(st));
  api.ov_core_free(core);
}
