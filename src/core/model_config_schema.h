/* Schema tables describing Triton's model_config.proto (package
 * "inference"): every message, field, enum and map of the ModelConfig tree.
 * The text-format parser, the JSON reader and the JSON renderer are all
 * driven by these tables, so a proto change is a table change here.
 *
 * Fields are listed in declaration order of the .proto file, because that is
 * the order in which protobuf's JSON printer emits them.
 *
 * All tables are immutable static data: every function here may be called
 * from any thread. */
#ifndef NRD_MODEL_CONFIG_SCHEMA_H
#define NRD_MODEL_CONFIG_SCHEMA_H

#include <stddef.h>

typedef enum nrd_field_type {
  NRD_FT_STRING,
  NRD_FT_BOOL,
  NRD_FT_INT32,
  NRD_FT_UINT32,
  NRD_FT_INT64,
  NRD_FT_UINT64,
  NRD_FT_FLOAT,
  NRD_FT_DOUBLE,
  NRD_FT_ENUM,
  NRD_FT_MESSAGE
} nrd_field_type;

typedef enum nrd_field_label {
  NRD_LABEL_SINGULAR,
  NRD_LABEL_REPEATED,
  NRD_LABEL_MAP /* map<key_type, type>; rendered as a JSON object */
} nrd_field_label;

/* Field flags. */
enum {
  /* A 64-bit field that Triton's ModelConfigToJson turns back from the
   * protobuf-JSON string into a JSON number. Other 64-bit fields stay
   * strings in the rendered JSON. */
  NRD_FIELD_JSON_NUMBER = 1u << 0
};

typedef struct nrd_enum_desc {
  const char *name; /* e.g. "DataType" */
  const char *const *names; /* value names, index-aligned with numbers */
  const int *numbers;
  size_t count;
} nrd_enum_desc;

struct nrd_msg_desc;

typedef struct nrd_field_desc {
  const char *name; /* proto field name (snake_case) */
  nrd_field_type type; /* value type (map: the value type) */
  nrd_field_label label;
  nrd_field_type key_type; /* maps only: STRING, INT*, UINT*, BOOL */
  const struct nrd_msg_desc *msg; /* type == NRD_FT_MESSAGE */
  const nrd_enum_desc *enm; /* type == NRD_FT_ENUM */
  const char *oneof; /* name of the containing oneof or NULL */
  unsigned flags; /* NRD_FIELD_* */
} nrd_field_desc;

typedef struct nrd_msg_desc {
  const char *name; /* short name used in messages, e.g. "ModelInput" */
  const nrd_field_desc *fields;
  size_t nfields;
} nrd_msg_desc;

/* Root descriptor: inference.ModelConfig. Static storage, never freed.
 * Any thread. */
const nrd_msg_desc *nrd_schema_model_config(void);

/* Descriptor of enum inference.DataType (static; any thread). */
const nrd_enum_desc *nrd_schema_data_type_enum(void);

/* Finds a field of msg by proto name, or (when camel != 0) also by its
 * lowerCamelCase JSON name. len is the length of name (need not be
 * NUL-terminated). Returns a pointer into static tables or NULL.
 * Any thread. */
const nrd_field_desc *nrd_schema_find_field(const nrd_msg_desc *msg, const char *name, size_t len, int camel);

/* Looks up an enum value by name (exact match, or ASCII case-insensitive
 * when nocase != 0). Returns the index into e->names or -1. Any thread. */
int nrd_schema_enum_index(const nrd_enum_desc *e, const char *name, size_t len, int nocase);

/* Looks up an enum value by number; returns the static name or NULL.
 * Any thread. */
const char *nrd_schema_enum_name(const nrd_enum_desc *e, long long number);

/* Returns the enum number of a value name, or -1 if unknown. Any thread. */
int nrd_schema_enum_number(const nrd_enum_desc *e, const char *name);

/* Human-readable name of a field type ("int32", "string", ...), static.
 * Any thread. */
const char *nrd_schema_type_name(nrd_field_type t);

#endif /* NRD_MODEL_CONFIG_SCHEMA_H */
