/* Unit tests for datatype.c: every name, size and round trip. */
#include <criterion/criterion.h>
#include <string.h>

#include "datatype.h"

static const struct {
  TRITONSERVER_DataType dtype;
  const char *wire, *config;
  size_t size;
} all[] = {
    {TRITONSERVER_TYPE_BOOL, "BOOL", "TYPE_BOOL", 1},       {TRITONSERVER_TYPE_UINT8, "UINT8", "TYPE_UINT8", 1},
    {TRITONSERVER_TYPE_UINT16, "UINT16", "TYPE_UINT16", 2}, {TRITONSERVER_TYPE_UINT32, "UINT32", "TYPE_UINT32", 4},
    {TRITONSERVER_TYPE_UINT64, "UINT64", "TYPE_UINT64", 8}, {TRITONSERVER_TYPE_INT8, "INT8", "TYPE_INT8", 1},
    {TRITONSERVER_TYPE_INT16, "INT16", "TYPE_INT16", 2},    {TRITONSERVER_TYPE_INT32, "INT32", "TYPE_INT32", 4},
    {TRITONSERVER_TYPE_INT64, "INT64", "TYPE_INT64", 8},    {TRITONSERVER_TYPE_FP16, "FP16", "TYPE_FP16", 2},
    {TRITONSERVER_TYPE_FP32, "FP32", "TYPE_FP32", 4},       {TRITONSERVER_TYPE_FP64, "FP64", "TYPE_FP64", 8},
    {TRITONSERVER_TYPE_BYTES, "BYTES", "TYPE_STRING", 0},   {TRITONSERVER_TYPE_BF16, "BF16", "TYPE_BF16", 2},
};

Test(datatype, enum_values_match_triton) {
  cr_assert_eq(TRITONSERVER_TYPE_INVALID, 0);
  cr_assert_eq(TRITONSERVER_TYPE_BOOL, 1);
  cr_assert_eq(TRITONSERVER_TYPE_FP32, 11);
  cr_assert_eq(TRITONSERVER_TYPE_BYTES, 13);
  cr_assert_eq(TRITONSERVER_TYPE_BF16, 14);
}

Test(datatype, every_type_round_trips) {
  for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
    cr_assert_str_eq(TRITONSERVER_DataTypeString(all[i].dtype), all[i].wire);
    cr_assert_eq(TRITONSERVER_StringToDataType(all[i].wire), all[i].dtype);
    cr_assert_eq(nrd_datatype_from_string(all[i].wire), all[i].dtype);
    cr_assert_str_eq(nrd_datatype_config_name(all[i].dtype), all[i].config);
    cr_assert_eq(nrd_datatype_from_config(all[i].config), all[i].dtype);
    cr_assert_eq(nrd_datatype_byte_size(all[i].dtype), all[i].size);
    cr_assert_eq(TRITONSERVER_DataTypeByteSize(all[i].dtype), (uint32_t)all[i].size);
  }
}

Test(datatype, invalid_and_unknown) {
  cr_assert_str_eq(TRITONSERVER_DataTypeString(TRITONSERVER_TYPE_INVALID), "<invalid>");
  cr_assert_str_eq(TRITONSERVER_DataTypeString((TRITONSERVER_DataType)99), "<invalid>");
  cr_assert_eq(TRITONSERVER_StringToDataType(NULL), TRITONSERVER_TYPE_INVALID);
  cr_assert_eq(TRITONSERVER_StringToDataType("fp32"), TRITONSERVER_TYPE_INVALID);
  cr_assert_eq(TRITONSERVER_StringToDataType("STRING"), TRITONSERVER_TYPE_INVALID);
  cr_assert_eq(TRITONSERVER_StringToDataType(""), TRITONSERVER_TYPE_INVALID);
  cr_assert_eq(nrd_datatype_from_config("TYPE_BYTES"), TRITONSERVER_TYPE_INVALID);
  cr_assert_eq(nrd_datatype_from_config("TYPE_INVALID"), TRITONSERVER_TYPE_INVALID);
  cr_assert_eq(nrd_datatype_from_config(NULL), TRITONSERVER_TYPE_INVALID);
  cr_assert_str_eq(nrd_datatype_config_name(TRITONSERVER_TYPE_INVALID), "TYPE_INVALID");
  cr_assert_eq(TRITONSERVER_DataTypeByteSize(TRITONSERVER_TYPE_INVALID), 0);
  cr_assert_eq(nrd_datatype_byte_size((TRITONSERVER_DataType)-1), 0);
}

Test(datatype, other_enum_names) {
  cr_assert_str_eq(TRITONSERVER_MemoryTypeString(TRITONSERVER_MEMORY_CPU), "CPU");
  cr_assert_str_eq(TRITONSERVER_MemoryTypeString(TRITONSERVER_MEMORY_CPU_PINNED), "CPU_PINNED");
  cr_assert_str_eq(TRITONSERVER_MemoryTypeString(TRITONSERVER_MEMORY_GPU), "GPU");
  cr_assert_str_eq(TRITONSERVER_MemoryTypeString((TRITONSERVER_MemoryType)7), "<invalid>");
  cr_assert_str_eq(TRITONSERVER_ParameterTypeString(TRITONSERVER_PARAMETER_STRING), "STRING");
  cr_assert_str_eq(TRITONSERVER_ParameterTypeString(TRITONSERVER_PARAMETER_INT), "INT");
  cr_assert_str_eq(TRITONSERVER_ParameterTypeString(TRITONSERVER_PARAMETER_BOOL), "BOOL");
  cr_assert_str_eq(TRITONSERVER_ParameterTypeString(TRITONSERVER_PARAMETER_DOUBLE), "DOUBLE");
  cr_assert_str_eq(TRITONSERVER_ParameterTypeString(TRITONSERVER_PARAMETER_BYTES), "BYTES");
  cr_assert_str_eq(TRITONSERVER_ParameterTypeString((TRITONSERVER_ParameterType)9), "<invalid>");
  cr_assert_str_eq(TRITONSERVER_InstanceGroupKindString(TRITONSERVER_INSTANCEGROUPKIND_AUTO), "AUTO");
  cr_assert_str_eq(TRITONSERVER_InstanceGroupKindString(TRITONSERVER_INSTANCEGROUPKIND_CPU), "CPU");
  cr_assert_str_eq(TRITONSERVER_InstanceGroupKindString(TRITONSERVER_INSTANCEGROUPKIND_GPU), "GPU");
  cr_assert_str_eq(TRITONSERVER_InstanceGroupKindString(TRITONSERVER_INSTANCEGROUPKIND_MODEL), "MODEL");
  cr_assert_str_eq(TRITONSERVER_InstanceGroupKindString((TRITONSERVER_InstanceGroupKind)9), "<invalid>");
}
