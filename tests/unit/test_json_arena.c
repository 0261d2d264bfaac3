/* Unit tests for the server's jansson scratch arenas (src/server/json_arena.c). */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_arena.h"

static void setup(void) { nrd_srv_json_arena_setup(); }

TestSuite(json_arena, .init = setup);

Test(json_arena, parses_into_the_arena_and_resets_on_drop)
{
  nrd_srv_json_arena *a = nrd_srv_json_arena_new();
  cr_assert_not_null(a);
  const char *text = "{\"inputs\":[{\"name\":\"INPUT0\",\"shape\":[1,16]}],\"id\":\"r1\"}";
  for (int round = 0; round < 3; round++) {
    json_error_t err;
    json_t *doc = nrd_srv_json_arena_loadb(a, text, strlen(text), &err);
    cr_assert_not_null(doc, "%s", err.text);
    cr_assert_gt(nrd_srv_json_arena_used(a), 0, "the document's memory came from malloc");
    json_t *in = json_array_get(json_object_get(doc, "inputs"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(in, "name")), "INPUT0");
    cr_assert_eq(json_integer_value(json_array_get(json_object_get(in, "shape"), 1)), 16);
    cr_assert_str_eq(json_string_value(json_object_get(doc, "id")), "r1");
    nrd_srv_json_arena_drop(a, doc);
    cr_assert_eq(nrd_srv_json_arena_used(a), 0);
  }
  nrd_srv_json_arena_free(a);
}

Test(json_arena, a_document_larger_than_the_arena_spills_to_malloc)
{
  nrd_srv_json_arena *a = nrd_srv_json_arena_new();
  cr_assert_not_null(a);
  /* About 300 KB of JSON: far more than one arena holds. */
  size_t n = 20000, cap = n * 16 + 16, len = 0;
  char *text = malloc(cap);
  cr_assert_not_null(text);
  text[len++] = '[';
  for (size_t i = 0; i < n; i++) len += (size_t)snprintf(text + len, cap - len, "%s\"s%zu\"", i ? "," : "", i);
  text[len++] = ']';
  json_error_t err;
  json_t *doc = nrd_srv_json_arena_loadb(a, text, len, &err);
  cr_assert_not_null(doc, "%s", err.text);
  cr_assert_eq(json_array_size(doc), n);
  cr_assert_str_eq(json_string_value(json_array_get(doc, n - 1)), "s19999");
  nrd_srv_json_arena_drop(a, doc); /* the sanitizers check nothing leaks or is freed wrongly */
  cr_assert_eq(nrd_srv_json_arena_used(a), 0);
  free(text);
  nrd_srv_json_arena_free(a);
}

Test(json_arena, a_failed_parse_leaves_the_arena_empty)
{
  nrd_srv_json_arena *a = nrd_srv_json_arena_new();
  const char *bad = "{\"inputs\":[{\"name\":\"INPUT0\",\"shape\":[1,16]}";
  json_error_t err;
  cr_assert_null(nrd_srv_json_arena_loadb(a, bad, strlen(bad), &err));
  cr_assert_eq(nrd_srv_json_arena_used(a), 0);
  cr_assert_neq(err.text[0], '\0');
  nrd_srv_json_arena_free(a);
}

Test(json_arena, other_jansson_use_is_unaffected)
{
  nrd_srv_json_arena *a = nrd_srv_json_arena_new();
  json_t *doc = nrd_srv_json_arena_loadb(a, "{\"k\":1}", 7, NULL);
  /* Built and freed with malloc while an arena document is alive. */
  json_t *o = json_pack("{s:s, s:[i,i]}", "model", "m", "shape", 1, 2);
  char *s = json_dumps(o, JSON_COMPACT);
  cr_assert_str_eq(s, "{\"model\":\"m\",\"shape\":[1,2]}");
  free(s);
  json_decref(o);
  nrd_srv_json_arena_drop(a, doc);
  nrd_srv_json_arena_free(a);
}

Test(json_arena, without_an_arena_parsing_still_works)
{
  nrd_srv_json_arena *arenas[80];
  size_t got = 0;
  while (got < 80 && (arenas[got] = nrd_srv_json_arena_new()) != NULL) got++;
  cr_assert_lt(got, 80, "arenas are a bounded resource");
  json_t *doc = nrd_srv_json_arena_loadb(NULL, "[1,2,3]", 7, NULL);
  cr_assert_eq(json_array_size(doc), 3);
  nrd_srv_json_arena_drop(NULL, doc);
  for (size_t i = 0; i < got; i++) nrd_srv_json_arena_free(arenas[i]);
  nrd_srv_json_arena *again = nrd_srv_json_arena_new();
  cr_assert_not_null(again, "freed arenas are reused");
  nrd_srv_json_arena_free(again);
}

/* What jansson's own parser did, the yajl-driven one must do too. */
Test(json_arena, values_and_escapes_come_out_as_jansson_gives_them)
{
  nrd_srv_json_arena *a = nrd_srv_json_arena_new();
  const char *text = "{\"s\":\"a\\\"b\\u00e9\\n\",\"i\":-9223372036854775808,\"d\":2.5e-3,"
                     "\"t\":true,\"f\":false,\"n\":null,\"e\":{},\"arr\":[[],[1]],\"k\":1,\"k\":2}";
  json_error_t err;
  json_t *doc = nrd_srv_json_arena_loadb(a, text, strlen(text), &err);
  cr_assert_not_null(doc, "%s", err.text);
  cr_assert_str_eq(json_string_value(json_object_get(doc, "s")), "a\"b\xc3\xa9\n");
  cr_assert_eq(json_integer_value(json_object_get(doc, "i")), INT64_MIN);
  cr_assert_float_eq(json_real_value(json_object_get(doc, "d")), 2.5e-3, 1e-12);
  cr_assert(json_is_true(json_object_get(doc, "t")) && json_is_false(json_object_get(doc, "f")));
  cr_assert(json_is_null(json_object_get(doc, "n")));
  cr_assert_eq(json_object_size(json_object_get(doc, "e")), 0);
  cr_assert_eq(json_array_size(json_array_get(json_object_get(doc, "arr"), 1)), 1);
  cr_assert_eq(json_integer_value(json_object_get(doc, "k")), 2, "a repeated key keeps its last value");
  cr_assert_eq(json_object_size(doc), 9);
  nrd_srv_json_arena_drop(a, doc);
  json_t *top = nrd_srv_json_arena_loadb(a, " 7 ", 3, &err);
  cr_assert_eq(json_integer_value(top), 7, "any value may stand at the top");
  nrd_srv_json_arena_drop(a, top);
  nrd_srv_json_arena_free(a);
}

Test(json_arena, bad_documents_are_refused_with_a_reason)
{
  nrd_srv_json_arena *a = nrd_srv_json_arena_new();
  char deep[600];
  memset(deep, '[', 300);
  memset(deep + 300, ']', 300);
  struct {
    const char *text;
    size_t len;
    const char *says; /* part of the message, or NULL: any */
  } cases[] = {
      {"", 0, NULL},
      {"{\"a\":1", 6, NULL},
      {"{\"a\":1} x", 9, NULL},
      {"{a:1}", 5, NULL},
      {"[1,]", 4, NULL},
      {"{\"a\":\"x\\u0000y\"}", 16, "u0000"},
      {"{\"a\\u0000\":1}", 13, "u0000"},
      {"[\"\xff\xfe\"]", 6, NULL},
      {"[99999999999999999999999]", 25, NULL},
      {"[1e999]", 7, NULL},
      {"[01]", 4, NULL},
      {"[NaN]", 5, NULL},
      {deep, sizeof deep, "deep"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    json_error_t err;
    json_t *doc = nrd_srv_json_arena_loadb(a, cases[i].text, cases[i].len, &err);
    cr_assert_null(doc, "case %zu was accepted", i);
    cr_assert_neq(err.text[0], '\0', "case %zu: no reason", i);
    cr_assert_not_null(strstr(err.text, "at byte"), "case %zu: %s", i, err.text);
    if (cases[i].says) cr_assert_not_null(strstr(err.text, cases[i].says), "case %zu: %s", i, err.text);
    cr_assert_eq(nrd_srv_json_arena_used(a), 0, "case %zu left the arena in use", i);
  }
  nrd_srv_json_arena_free(a);
}
