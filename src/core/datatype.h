/* Tensor data types, memory types, parameter types and instance-group kinds:
 * their names on the wire (KServe v2: "FP32", "BYTES"), in model
 * configurations ("TYPE_FP32", "TYPE_STRING") and their element sizes.
 * Every function here is pure and safe from any thread; returned strings are
 * static and never freed. */
#ifndef NRD_DATATYPE_H
#define NRD_DATATYPE_H

#include <stddef.h>

#include "triton/core/tritonserver.h"

/* Bytes per element; 0 for BYTES (variable size) and INVALID or unknown. */
size_t nrd_datatype_byte_size(TRITONSERVER_DataType dtype);

/* Maps a model-config name ("TYPE_FP32", "TYPE_STRING" -> BYTES, "TYPE_BF16")
 * to a data type; INVALID for NULL, "TYPE_INVALID" or anything unknown. */
TRITONSERVER_DataType nrd_datatype_from_config(const char *config_name);

/* The model-config name of a data type ("TYPE_STRING" for BYTES);
 * "TYPE_INVALID" for INVALID or unknown values. */
const char *nrd_datatype_config_name(TRITONSERVER_DataType dtype);

/* Maps a wire name ("FP32", "BYTES", "BOOL", "BF16") to a data type; INVALID
 * for NULL or unknown names (matching is exact and case-sensitive). */
TRITONSERVER_DataType nrd_datatype_from_string(const char *wire_name);

/* The wire name of a data type; "<invalid>" for INVALID or unknown values. */
const char *nrd_datatype_name(TRITONSERVER_DataType dtype);

#endif
