/* One table drives every data-type mapping so the names cannot drift apart. */
#include "datatype.h"

#include <string.h>

typedef struct dtype_info {
  TRITONSERVER_DataType dtype;
  const char *wire;
  const char *config;
  size_t size;
} dtype_info;

static const dtype_info dtypes[] = {
    {TRITONSERVER_TYPE_BOOL, "BOOL", "TYPE_BOOL", 1},       {TRITONSERVER_TYPE_UINT8, "UINT8", "TYPE_UINT8", 1},
    {TRITONSERVER_TYPE_UINT16, "UINT16", "TYPE_UINT16", 2}, {TRITONSERVER_TYPE_UINT32, "UINT32", "TYPE_UINT32", 4},
    {TRITONSERVER_TYPE_UINT64, "UINT64", "TYPE_UINT64", 8}, {TRITONSERVER_TYPE_INT8, "INT8", "TYPE_INT8", 1},
    {TRITONSERVER_TYPE_INT16, "INT16", "TYPE_INT16", 2},    {TRITONSERVER_TYPE_INT32, "INT32", "TYPE_INT32", 4},
    {TRITONSERVER_TYPE_INT64, "INT64", "TYPE_INT64", 8},    {TRITONSERVER_TYPE_FP16, "FP16", "TYPE_FP16", 2},
    {TRITONSERVER_TYPE_FP32, "FP32", "TYPE_FP32", 4},       {TRITONSERVER_TYPE_FP64, "FP64", "TYPE_FP64", 8},
    {TRITONSERVER_TYPE_BYTES, "BYTES", "TYPE_STRING", 0},   {TRITONSERVER_TYPE_BF16, "BF16", "TYPE_BF16", 2},
};

#define N_DTYPES (sizeof(dtypes) / sizeof(dtypes[0]))

static const dtype_info *find_dtype(TRITONSERVER_DataType dtype) {
  for (size_t i = 0; i < N_DTYPES; i++)
    if (dtypes[i].dtype == dtype) return &dtypes[i];
  return NULL;
}

size_t nrd_datatype_byte_size(TRITONSERVER_DataType dtype) {
  const dtype_info *d = find_dtype(dtype);
  return d != NULL ? d->size : 0;
}

TRITONSERVER_DataType nrd_datatype_from_config(const char *config_name) {
  if (config_name == NULL) return TRITONSERVER_TYPE_INVALID;
  for (size_t i = 0; i < N_DTYPES; i++)
    if (strcmp(dtypes[i].config, config_name) == 0) return dtypes[i].dtype;
  return TRITONSERVER_TYPE_INVALID;
}

const char *nrd_datatype_config_name(TRITONSERVER_DataType dtype) {
  const dtype_info *d = find_dtype(dtype);
  return d != NULL ? d->config : "TYPE_INVALID";
}

TRITONSERVER_DataType nrd_datatype_from_string(const char *wire_name) {
  if (wire_name == NULL) return TRITONSERVER_TYPE_INVALID;
  for (size_t i = 0; i < N_DTYPES; i++) /* first letters first: this runs per request */
    if (dtypes[i].wire[0] == wire_name[0] && strcmp(dtypes[i].wire, wire_name) == 0) return dtypes[i].dtype;
  return TRITONSERVER_TYPE_INVALID;
}

const char *nrd_datatype_name(TRITONSERVER_DataType dtype) {
  const dtype_info *d = find_dtype(dtype);
  return d != NULL ? d->wire : "<invalid>";
}

const char *TRITONSERVER_DataTypeString(TRITONSERVER_DataType datatype) { return nrd_datatype_name(datatype); }

TRITONSERVER_DataType TRITONSERVER_StringToDataType(const char *dtype) { return nrd_datatype_from_string(dtype); }

uint32_t TRITONSERVER_DataTypeByteSize(TRITONSERVER_DataType datatype) {
  return (uint32_t)nrd_datatype_byte_size(datatype);
}

const char *TRITONSERVER_MemoryTypeString(TRITONSERVER_MemoryType memtype) {
  switch (memtype) {
    case TRITONSERVER_MEMORY_CPU: return "CPU";
    case TRITONSERVER_MEMORY_CPU_PINNED: return "CPU_PINNED";
    case TRITONSERVER_MEMORY_GPU: return "GPU";
  }
  return "<invalid>";
}

const char *TRITONSERVER_ParameterTypeString(TRITONSERVER_ParameterType paramtype) {
  switch (paramtype) {
    case TRITONSERVER_PARAMETER_STRING: return "STRING";
    case TRITONSERVER_PARAMETER_INT: return "INT";
    case TRITONSERVER_PARAMETER_BOOL: return "BOOL";
    case TRITONSERVER_PARAMETER_DOUBLE: return "DOUBLE";
    case TRITONSERVER_PARAMETER_BYTES: return "BYTES";
  }
  return "<invalid>";
}

const char *TRITONSERVER_InstanceGroupKindString(TRITONSERVER_InstanceGroupKind kind) {
  switch (kind) {
    case TRITONSERVER_INSTANCEGROUPKIND_AUTO: return "AUTO";
    case TRITONSERVER_INSTANCEGROUPKIND_CPU: return "CPU";
    case TRITONSERVER_INSTANCEGROUPKIND_GPU: return "GPU";
    case TRITONSERVER_INSTANCEGROUPKIND_MODEL: return "MODEL";
  }
  return "<invalid>";
}
