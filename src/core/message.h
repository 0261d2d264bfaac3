/* TRITONSERVER_Message: an immutable, serialized JSON document (server and
 * model metadata, configs, statistics, indexes). Once built a message is
 * read-only, so it may be read from any thread; it is deleted once. */
#ifndef NRD_MESSAGE_H
#define NRD_MESSAGE_H

#include <jansson.h>
#include <stddef.h>

#include "triton/core/tritonserver.h"

struct TRITONSERVER_Message {
  char *json; /* NUL-terminated serialized JSON, owned */
  size_t len; /* bytes before the NUL */
};

/* Serializes `obj` compactly (keys in insertion order) into a new message.
 * Always consumes the caller's reference to `obj`, even on failure. Returns
 * NULL when `obj` is NULL or memory runs out. Caller owns the message and
 * frees it with TRITONSERVER_MessageDelete. Any thread. */
TRITONSERVER_Message *nrd_message_from_json(json_t *obj);

/* Wraps an already-serialized document without copying. Takes ownership of
 * `json` (a malloc'd buffer of at least len + 1 bytes with json[len] == '\0')
 * even on failure, when it is freed. Returns NULL on out-of-memory or a NULL
 * `json`. The content is not re-validated. Any thread. */
TRITONSERVER_Message *nrd_message_from_string(char *json, size_t len);

#endif
