/* Part of unit.test_ov_api, compiled where the OpenVINO wheel's own C
 * headers are at hand (tests/unit/CMakeLists.txt): every prototype, struct
 * layout and enum value of backends/openvino/ov_api.h equals OpenVINO's, at
 * compile time; a difference fails the build. */
#include <openvino/c/openvino.h>
#include <stddef.h>

#define NRD_OV_WITH_OFFICIAL
#include "ov_api.h"

/* Each function's type in our table is the type OpenVINO declares. */
#define NRD_OV_SAME_TYPE(ret, name, params)                                                    \
  _Static_assert(__builtin_types_compatible_p(__typeof__(&name), __typeof__(((nrd_ov_api *)0)->name)), \
                 #name " differs from OpenVINO's declaration");
NRD_OV_FUNCTIONS(NRD_OV_SAME_TYPE)
#undef NRD_OV_SAME_TYPE

/* Our structs are laid out as OpenVINO's (what the backend builds with). */
#define NRD_OV_SAME_FIELD(ours, theirs, a, b)                                                   \
  _Static_assert(offsetof(struct ours, a) == offsetof(theirs, b), #ours "." #a " is misplaced"); \
  _Static_assert(sizeof(((struct ours *)0)->a) == sizeof(((theirs *)0)->b), #ours "." #a " has the wrong size");
_Static_assert(sizeof(struct nrd_ov_dimension) == sizeof(ov_dimension_t), "ov_dimension_t");
NRD_OV_SAME_FIELD(nrd_ov_dimension, ov_dimension_t, min, min)
NRD_OV_SAME_FIELD(nrd_ov_dimension, ov_dimension_t, max, max)
_Static_assert(sizeof(struct nrd_ov_partial_shape) == sizeof(ov_partial_shape_t), "ov_partial_shape_t");
NRD_OV_SAME_FIELD(nrd_ov_partial_shape, ov_partial_shape_t, rank, rank)
NRD_OV_SAME_FIELD(nrd_ov_partial_shape, ov_partial_shape_t, dims, dims)
_Static_assert(sizeof(struct nrd_ov_shape) == sizeof(ov_shape_t), "ov_shape_t");
NRD_OV_SAME_FIELD(nrd_ov_shape, ov_shape_t, rank, rank)
NRD_OV_SAME_FIELD(nrd_ov_shape, ov_shape_t, dims, dims)
_Static_assert(sizeof(struct nrd_ov_version) == sizeof(ov_version_t), "ov_version_t");
NRD_OV_SAME_FIELD(nrd_ov_version, ov_version_t, build_number, buildNumber)
NRD_OV_SAME_FIELD(nrd_ov_version, ov_version_t, description, description)
#undef NRD_OV_SAME_FIELD

/* The enums travel as int: same size, signed status codes, same values. */
_Static_assert(sizeof(ov_status_e) == sizeof(int) && (ov_status_e)-1 < 0, "ov_status_e is not an int");
_Static_assert(sizeof(ov_element_type_e) == sizeof(int), "ov_element_type_e is not an int");
#define NRD_OV_SAME(ours, theirs) ((int)(ours) == (int)(theirs))
_Static_assert(NRD_OV_SAME(NRD_OV_OK, OK), "OK");
_Static_assert(NRD_OV_SAME(NRD_OV_DYNAMIC, DYNAMIC) && NRD_OV_SAME(NRD_OV_BOOLEAN, BOOLEAN) &&
                   NRD_OV_SAME(NRD_OV_BF16, BF16) && NRD_OV_SAME(NRD_OV_F16, F16) && NRD_OV_SAME(NRD_OV_F32, F32) &&
                   NRD_OV_SAME(NRD_OV_F64, F64) && NRD_OV_SAME(NRD_OV_I8, I8) && NRD_OV_SAME(NRD_OV_I16, I16) &&
                   NRD_OV_SAME(NRD_OV_I32, I32) && NRD_OV_SAME(NRD_OV_I64, I64) && NRD_OV_SAME(NRD_OV_U8, U8) &&
                   NRD_OV_SAME(NRD_OV_U16, U16) && NRD_OV_SAME(NRD_OV_U32, U32) && NRD_OV_SAME(NRD_OV_U64, U64),
               "an element type differs from OpenVINO's");
#undef NRD_OV_SAME

/* ISO C wants a declaration in every translation unit. */
extern int nrd_ov_api_official_checked;
int nrd_ov_api_official_checked = 1;
