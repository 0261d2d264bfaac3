/* Protobuf text-format reader driven by a schema (model_config_schema.h).
 *
 * The result is a jansson tree shaped like the message's protobuf JSON with
 * proto field names: messages are objects, repeated fields arrays, maps
 * objects keyed by the key's text (integer keys in decimal), enums their value
 * names, strings UTF-8 strings, bools booleans, every integer type a JSON
 * integer, float/double reals (non-finite ones as the protobuf-JSON strings
 * "NaN", "Infinity", "-Infinity"). uint64 values above INT64_MAX are stored
 * as the same 64-bit pattern in a json_int_t: read them back with
 * (uint64_t)json_integer_value(). Only fields present in the text appear.
 *
 * The reader never trusts its input: every syntax or schema violation is
 * reported as "FILE:LINE:COL: message" (1-based line and column). */
#ifndef NRD_PBTXT_H
#define NRD_PBTXT_H

#include <jansson.h>
#include <stddef.h>

#include "model_config_schema.h"

/* Parses text[0..len) (need not be NUL-terminated; NUL bytes are rejected)
 * as a text-format message of type root. filename is only used in error
 * messages (NULL means "<input>").
 * Returns a new reference the caller must json_decref(); on failure returns
 * NULL and sets *err to a malloc'd message the caller must free() (err may
 * be NULL if the caller does not want it). Nothing leaks on any path.
 * Any thread; no shared state. */
json_t *nrd_pbtxt_parse(const nrd_msg_desc *root, const char *text, size_t len, const char *filename, char **err);

/* As nrd_pbtxt_parse, and when positions != NULL also sets *positions to a
 * new object (caller json_decref()s it; NULL on failure, or when out of
 * memory while recording) mapping the path of every field and element
 * read to where it starts, for nrd_pbtxt_position. Paths: "a.b" for a
 * field (its name's position, first occurrence), "a.b[2]" for element 2
 * of a repeated field (its first token; for a message written as `b {`
 * outside a list, the name), "a.m[key]" for a map entry (its key, or the
 * entry's '{' when the key is omitted), keys as map_key_text renders them.
 * Any thread. */
json_t *nrd_pbtxt_parse_pos(const nrd_msg_desc *root, const char *text, size_t len, const char *filename,
                            json_t **positions, char **err);

/* Looks `path` up in a table from nrd_pbtxt_parse_pos: returns 1 and sets
 * *line and *col (1-based), or 0 when the path has no position. Any
 * thread (read-only). */
int nrd_pbtxt_position(const json_t *positions, const char *path, int *line, int *col);

/* Returns 1 when s[0..len) is well-formed UTF-8 (no overlongs, no
 * surrogates, at most U+10FFFF), else 0. Any thread. */
int nrd_pbtxt_utf8_valid(const char *s, size_t len);

#endif /* NRD_PBTXT_H */
