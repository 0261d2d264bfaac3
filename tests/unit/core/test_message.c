/* Unit tests for message.c. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "message.h"

Test(message, serialized_round_trip_keeps_bytes) {
  const char *doc = "{\"name\": \"simple\", \"versions\": [\"1\"]}";
  TRITONSERVER_Message *m = NULL;
  cr_assert_null(TRITONSERVER_MessageNewFromSerializedJson(&m, doc, strlen(doc)));
  const char *base;
  size_t n;
  cr_assert_null(TRITONSERVER_MessageSerializeToJson(m, &base, &n));
  cr_assert_eq(n, strlen(doc));
  cr_assert_eq(memcmp(base, doc, n), 0);
  cr_assert_eq(base[n], '\0');
  cr_assert_null(TRITONSERVER_MessageDelete(m));
}

Test(message, unterminated_input_uses_byte_size) {
  const char doc[] = "[1,2]garbage";
  TRITONSERVER_Message *m = NULL;
  cr_assert_null(TRITONSERVER_MessageNewFromSerializedJson(&m, doc, 5));
  const char *base;
  size_t n;
  cr_assert_null(TRITONSERVER_MessageSerializeToJson(m, &base, &n));
  cr_assert_str_eq(base, "[1,2]");
  TRITONSERVER_MessageDelete(m);
}

Test(message, invalid_json_is_invalid_arg) {
  const char *bad[] = {"{", "{\"a\":}", "", "nul", "{\"a\":1}}"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    TRITONSERVER_Message *m = (TRITONSERVER_Message *)0x1;
    TRITONSERVER_Error *e = TRITONSERVER_MessageNewFromSerializedJson(&m, bad[i], strlen(bad[i]));
    cr_assert_not_null(e, "accepted '%s'", bad[i]);
    cr_assert_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_INVALID_ARG);
    cr_assert_null(m);
    TRITONSERVER_ErrorDelete(e);
  }
}

Test(message, null_arguments) {
  TRITONSERVER_Message *m;
  TRITONSERVER_Error *e = TRITONSERVER_MessageNewFromSerializedJson(NULL, "{}", 2);
  cr_assert_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_INVALID_ARG);
  TRITONSERVER_ErrorDelete(e);
  e = TRITONSERVER_MessageNewFromSerializedJson(&m, NULL, 2);
  cr_assert_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_INVALID_ARG);
  TRITONSERVER_ErrorDelete(e);
  const char *base;
  size_t n;
  e = TRITONSERVER_MessageSerializeToJson(NULL, &base, &n);
  cr_assert_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_INVALID_ARG);
  TRITONSERVER_ErrorDelete(e);
  cr_assert_null(TRITONSERVER_MessageDelete(NULL));
}

Test(message, from_json_is_compact_and_ordered) {
  json_t *o = json_object();
  json_object_set_new(o, "name", json_string("m"));
  json_object_set_new(o, "a", json_integer(1));
  json_object_set_new(o, "list", json_pack("[i,s]", 2, "x"));
  TRITONSERVER_Message *m = nrd_message_from_json(o);
  cr_assert_not_null(m);
  const char *base;
  size_t n;
  TRITONSERVER_MessageSerializeToJson(m, &base, &n);
  cr_assert_str_eq(base, "{\"name\":\"m\",\"a\":1,\"list\":[2,\"x\"]}");
  cr_assert_eq(n, strlen(base));
  TRITONSERVER_MessageDelete(m);
  cr_assert_null(nrd_message_from_json(NULL));
}

Test(message, from_string_takes_ownership) {
  char *s = strdup("{\"k\":true}");
  TRITONSERVER_Message *m = nrd_message_from_string(s, strlen(s));
  cr_assert_not_null(m);
  const char *base;
  size_t n;
  TRITONSERVER_MessageSerializeToJson(m, &base, &n);
  cr_assert_eq(base, s);
  TRITONSERVER_MessageDelete(m); /* frees s; ASan would flag a leak otherwise */
  cr_assert_null(nrd_message_from_string(NULL, 0));
}
