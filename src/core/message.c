/* Serialized-JSON messages. */
#include "message.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"

TRITONSERVER_Message *nrd_message_from_string(char *json, size_t len) {
  if (json == NULL) return NULL;
  TRITONSERVER_Message *msg = malloc(sizeof(*msg));
  if (msg == NULL) {
    free(json);
    return NULL;
  }
  msg->json = json;
  msg->len = len;
  return msg;
}

TRITONSERVER_Message *nrd_message_from_json(json_t *obj) {
  if (obj == NULL) return NULL;
  char *text = json_dumps(obj, JSON_COMPACT | JSON_ENCODE_ANY);
  json_decref(obj);
  if (text == NULL) return NULL;
  return nrd_message_from_string(text, strlen(text));
}

TRITONSERVER_Error *TRITONSERVER_MessageNewFromSerializedJson(TRITONSERVER_Message **message, const char *base,
                                                              size_t byte_size) {
  if (message == NULL) return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "message must not be NULL");
  *message = NULL;
  if (base == NULL && byte_size != 0)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "serialized JSON base must not be NULL");
  json_error_t jerr;
  json_t *doc = json_loadb(base != NULL ? base : "", byte_size, JSON_DECODE_ANY, &jerr);
  if (doc == NULL)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "failed to parse the message as JSON: %s at line %d, column %d", jerr.text, jerr.line,
                         jerr.column);
  json_decref(doc);
  /* Keep the caller's exact bytes: they are valid JSON and may carry
   * formatting or number spellings the caller relies on. */
  char *copy = malloc(byte_size + 1);
  if (copy == NULL) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  if (byte_size != 0) memcpy(copy, base, byte_size);
  copy[byte_size] = '\0';
  *message = nrd_message_from_string(copy, byte_size);
  if (*message == NULL) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_MessageDelete(TRITONSERVER_Message *message) {
  if (message == NULL) return NULL;
  free(message->json);
  free(message);
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_MessageSerializeToJson(TRITONSERVER_Message *message, const char **base,
                                                        size_t *byte_size) {
  if (message == NULL || base == NULL || byte_size == NULL)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "message, base and byte_size must not be NULL");
  *base = message->json;
  *byte_size = message->len;
  return NULL;
}
