/* Unit tests for the server's jansson scratch arenas (src/server/json_arena.c). */
#include <criterion/criterion.h>
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
    json_t *doc = nrd_srv_json_arena_loadb(a, text, strlen(text), 0, &err);
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
  json_t *doc = nrd_srv_json_arena_loadb(a, text, len, 0, &err);
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
  cr_assert_null(nrd_srv_json_arena_loadb(a, bad, strlen(bad), 0, &err));
  cr_assert_eq(nrd_srv_json_arena_used(a), 0);
  cr_assert_neq(err.text[0], '\0');
  nrd_srv_json_arena_free(a);
}

Test(json_arena, other_jansson_use_is_unaffected)
{
  nrd_srv_json_arena *a = nrd_srv_json_arena_new();
  json_t *doc = nrd_srv_json_arena_loadb(a, "{\"k\":1}", 7, 0, NULL);
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
  json_t *doc = nrd_srv_json_arena_loadb(NULL, "[1,2,3]", 7, 0, NULL);
  cr_assert_eq(json_array_size(doc), 3);
  nrd_srv_json_arena_drop(NULL, doc);
  for (size_t i = 0; i < got; i++) nrd_srv_json_arena_free(arenas[i]);
  nrd_srv_json_arena *again = nrd_srv_json_arena_new();
  cr_assert_not_null(again, "freed arenas are reused");
  nrd_srv_json_arena_free(again);
}
