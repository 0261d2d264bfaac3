/*
 * The part of OpenVINO's C API (libopenvino_c) that the openvino backend
 * uses, declared here so that the backend builds without OpenVINO and opens
 * the library at run time (ov_runtime.h). The types and functions mirror
 * OpenVINO 2025.2's <openvino/c/openvino.h>; tests/unit/test_ov_api.c checks
 * every function resolves in the fetched library and, when the wheel's own
 * headers are at hand, that each prototype, struct layout and enum value
 * here equals theirs.
 *
 * Threads: as OpenVINO documents them: a core, model and compiled model may
 * be used from any thread; an infer request from one thread at a time.
 */
#ifndef NEREID_OV_API_H
#define NEREID_OV_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Opaque handles, with the struct tags OpenVINO gives them. */
typedef struct ov_core nrd_ov_core_t;
typedef struct ov_model nrd_ov_model_t;
typedef struct ov_compiled_model nrd_ov_compiled_model_t;
typedef struct ov_infer_request nrd_ov_infer_request_t;
typedef struct ov_tensor nrd_ov_tensor_t;
typedef struct ov_output_const_port nrd_ov_output_const_port_t;
typedef struct ov_preprocess_prepostprocessor nrd_ov_ppp_t;
typedef struct ov_preprocess_input_info nrd_ov_ppp_input_t;
typedef struct ov_preprocess_input_tensor_info nrd_ov_ppp_input_tensor_t;
typedef struct ov_preprocess_output_info nrd_ov_ppp_output_t;
typedef struct ov_preprocess_output_tensor_info nrd_ov_ppp_output_tensor_t;

/* Value types, laid out as OpenVINO's (ov_dimension_t, ov_partial_shape_t,
 * ov_shape_t, ov_version_t). */
struct nrd_ov_dimension {
  int64_t min;
  int64_t max; /* -1: unbounded; min == max: a static dimension */
};
struct nrd_ov_partial_shape {
  struct nrd_ov_dimension rank; /* rank.min == rank.max: a static rank */
  struct nrd_ov_dimension *dims; /* owned by OpenVINO: ov_partial_shape_free */
};
struct nrd_ov_shape {
  int64_t rank;
  int64_t *dims; /* owned by OpenVINO: ov_shape_free */
};
struct nrd_ov_version {
  const char *build_number;
  const char *description;
};

/* ov_status_e: 0 is OK, failures are negative. */
enum { NRD_OV_OK = 0 };

/* ov_element_type_e, the values the backend maps to Triton's datatypes. */
enum {
  NRD_OV_DYNAMIC = 0,
  NRD_OV_BOOLEAN = 1,
  NRD_OV_BF16 = 2,
  NRD_OV_F16 = 3,
  NRD_OV_F32 = 4,
  NRD_OV_F64 = 5,
  NRD_OV_I8 = 7,
  NRD_OV_I16 = 8,
  NRD_OV_I32 = 9,
  NRD_OV_I64 = 10,
  NRD_OV_U8 = 16,
  NRD_OV_U16 = 17,
  NRD_OV_U32 = 18,
  NRD_OV_U64 = 19,
};

/* The tests compare these names with OpenVINO's own (NRD_OV_WITH_OFFICIAL:
 * included after <openvino/c/openvino.h>); otherwise they are ours. */
#ifdef NRD_OV_WITH_OFFICIAL
typedef ov_status_e nrd_ov_status;
typedef ov_element_type_e nrd_ov_element;
typedef ov_dimension_t nrd_ov_dimension_t;
typedef ov_partial_shape_t nrd_ov_partial_shape_t;
typedef ov_shape_t nrd_ov_shape_t;
typedef ov_version_t nrd_ov_version_t;
#else
typedef int nrd_ov_status;
typedef int nrd_ov_element;
typedef struct nrd_ov_dimension nrd_ov_dimension_t;
typedef struct nrd_ov_partial_shape nrd_ov_partial_shape_t;
typedef struct nrd_ov_shape nrd_ov_shape_t;
typedef struct nrd_ov_version nrd_ov_version_t;
#endif

/*
 * Every function used: X(return type, name, (parameters)). The names are
 * OpenVINO's exported symbols; ov_runtime_open fills an nrd_ov_api with them.
 */
#define NRD_OV_FUNCTIONS(X)                                                                                        \
  X(nrd_ov_status, ov_get_openvino_version, (nrd_ov_version_t * version))                                         \
  X(void, ov_version_free, (nrd_ov_version_t * version))                                                          \
  X(const char *, ov_get_error_info, (nrd_ov_status status))                                                      \
  X(const char *, ov_get_last_err_msg, (void))                                                                    \
  X(void, ov_free, (const char *content))                                                                         \
  X(nrd_ov_status, ov_core_create, (nrd_ov_core_t * *core))                                                       \
  X(void, ov_core_free, (nrd_ov_core_t * core))                                                                   \
  X(nrd_ov_status, ov_core_read_model,                                                                            \
    (const nrd_ov_core_t *core, const char *model_path, const char *bin_path, nrd_ov_model_t **model))            \
  X(nrd_ov_status, ov_core_add_extension, (const nrd_ov_core_t *core, const char *path))                          \
  X(nrd_ov_status, ov_core_set_property, (const nrd_ov_core_t *core, const char *device_name, ...))               \
  X(nrd_ov_status, ov_core_compile_model,                                                                         \
    (const nrd_ov_core_t *core, const nrd_ov_model_t *model, const char *device_name,                             \
     const size_t property_args_size, nrd_ov_compiled_model_t **compiled_model, ...))                             \
  X(void, ov_model_free, (nrd_ov_model_t * model))                                                                \
  X(nrd_ov_status, ov_model_inputs_size, (const nrd_ov_model_t *model, size_t *size))                             \
  X(nrd_ov_status, ov_model_outputs_size, (const nrd_ov_model_t *model, size_t *size))                            \
  X(nrd_ov_status, ov_model_const_input_by_index,                                                                 \
    (const nrd_ov_model_t *model, const size_t index, nrd_ov_output_const_port_t **port))                         \
  X(nrd_ov_status, ov_model_const_output_by_index,                                                                \
    (const nrd_ov_model_t *model, const size_t index, nrd_ov_output_const_port_t **port))                         \
  X(nrd_ov_status, ov_model_reshape,                                                                              \
    (const nrd_ov_model_t *model, const char **tensor_names, const nrd_ov_partial_shape_t *partial_shapes,        \
     size_t size))                                                                                                \
  X(nrd_ov_status, ov_port_get_any_name, (const nrd_ov_output_const_port_t *port, char **tensor_name))           \
  X(nrd_ov_status, ov_port_get_partial_shape,                                                                     \
    (const nrd_ov_output_const_port_t *port, nrd_ov_partial_shape_t *partial_shape))                              \
  X(nrd_ov_status, ov_port_get_element_type, (const nrd_ov_output_const_port_t *port, nrd_ov_element *type))     \
  X(void, ov_output_const_port_free, (nrd_ov_output_const_port_t * port))                                         \
  X(nrd_ov_status, ov_partial_shape_create,                                                                       \
    (const int64_t rank, const nrd_ov_dimension_t *dims, nrd_ov_partial_shape_t *partial_shape))                  \
  X(void, ov_partial_shape_free, (nrd_ov_partial_shape_t * partial_shape))                                        \
  X(nrd_ov_status, ov_shape_create, (const int64_t rank, const int64_t *dims, nrd_ov_shape_t *shape))             \
  X(nrd_ov_status, ov_shape_free, (nrd_ov_shape_t * shape))                                                       \
  X(nrd_ov_status, ov_preprocess_prepostprocessor_create, (const nrd_ov_model_t *model, nrd_ov_ppp_t **ppp))      \
  X(void, ov_preprocess_prepostprocessor_free, (nrd_ov_ppp_t * ppp))                                              \
  X(nrd_ov_status, ov_preprocess_prepostprocessor_get_input_info_by_name,                                         \
    (const nrd_ov_ppp_t *ppp, const char *tensor_name, nrd_ov_ppp_input_t **info))                                \
  X(void, ov_preprocess_input_info_free, (nrd_ov_ppp_input_t * info))                                             \
  X(nrd_ov_status, ov_preprocess_input_info_get_tensor_info,                                                      \
    (const nrd_ov_ppp_input_t *info, nrd_ov_ppp_input_tensor_t **tensor_info))                                    \
  X(void, ov_preprocess_input_tensor_info_free, (nrd_ov_ppp_input_tensor_t * tensor_info))                        \
  X(nrd_ov_status, ov_preprocess_input_tensor_info_set_element_type,                                              \
    (nrd_ov_ppp_input_tensor_t * tensor_info, const nrd_ov_element element_type))                                \
  X(nrd_ov_status, ov_preprocess_prepostprocessor_get_output_info_by_name,                                        \
    (const nrd_ov_ppp_t *ppp, const char *tensor_name, nrd_ov_ppp_output_t **info))                               \
  X(void, ov_preprocess_output_info_free, (nrd_ov_ppp_output_t * info))                                           \
  X(nrd_ov_status, ov_preprocess_output_info_get_tensor_info,                                                     \
    (const nrd_ov_ppp_output_t *info, nrd_ov_ppp_output_tensor_t **tensor_info))                                  \
  X(void, ov_preprocess_output_tensor_info_free, (nrd_ov_ppp_output_tensor_t * tensor_info))                      \
  X(nrd_ov_status, ov_preprocess_output_set_element_type,                                                         \
    (nrd_ov_ppp_output_tensor_t * tensor_info, const nrd_ov_element element_type))                                \
  X(nrd_ov_status, ov_preprocess_prepostprocessor_build, (const nrd_ov_ppp_t *ppp, nrd_ov_model_t **model))      \
  X(void, ov_compiled_model_free, (nrd_ov_compiled_model_t * compiled_model))                                     \
  X(nrd_ov_status, ov_compiled_model_create_infer_request,                                                        \
    (const nrd_ov_compiled_model_t *compiled_model, nrd_ov_infer_request_t **request))                            \
  X(nrd_ov_status, ov_infer_request_set_tensor,                                                                   \
    (nrd_ov_infer_request_t * request, const char *tensor_name, const nrd_ov_tensor_t *tensor))                   \
  X(nrd_ov_status, ov_infer_request_get_tensor,                                                                   \
    (const nrd_ov_infer_request_t *request, const char *tensor_name, nrd_ov_tensor_t **tensor))                   \
  X(nrd_ov_status, ov_infer_request_infer, (nrd_ov_infer_request_t * request))                                    \
  X(void, ov_infer_request_free, (nrd_ov_infer_request_t * request))                                              \
  X(nrd_ov_status, ov_tensor_create_from_host_ptr,                                                                \
    (const nrd_ov_element type, const nrd_ov_shape_t shape, void *host_ptr, nrd_ov_tensor_t **tensor))            \
  X(nrd_ov_status, ov_tensor_get_shape, (const nrd_ov_tensor_t *tensor, nrd_ov_shape_t *shape))                   \
  X(nrd_ov_status, ov_tensor_get_element_type, (const nrd_ov_tensor_t *tensor, nrd_ov_element *type))             \
  X(nrd_ov_status, ov_tensor_get_byte_size, (const nrd_ov_tensor_t *tensor, size_t *byte_size))                   \
  X(nrd_ov_status, ov_tensor_data, (const nrd_ov_tensor_t *tensor, void **data))                                  \
  X(void, ov_tensor_free, (nrd_ov_tensor_t * tensor))

/* The table of those functions, one pointer per name. */
#define NRD_OV_MEMBER(ret, name, params) ret(*name) params;
typedef struct nrd_ov_api {
  NRD_OV_FUNCTIONS(NRD_OV_MEMBER)
} nrd_ov_api;
#undef NRD_OV_MEMBER

#endif /* NEREID_OV_API_H */
