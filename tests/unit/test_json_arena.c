/* Unit tests for the server's arena JSON documents (src/server/json_arena.c). */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_arena.h"

static const nrd_srv_json *parse(nrd_srv_json_arena *a, const char *text, size_t len, char *err) {
  return nrd_srv_json_parse(a, text, len, err, 200);
}

Test(json_arena, parses_into_the_arena_and_resets)
{
  nrd_srv_json_arena *a = nrd_srv_json_arena_new();
  cr_assert_not_null(a);
  const char *text = "{\"inputs\":[{\"name\":\"INPUT0\",\"shape\":[1,16]}],\"id\":\"r1\"}";
  for (int round = 0; round < 3; round++) {
    char err[200];
    const nrd_srv_json *doc = parse(a, text, strlen(text), err);
    cr_assert_not_null(doc, "%s", err);
    cr_assert_gt(nrd_srv_json_arena_used(a), 0);
    const nrd_srv_json *in = nrd_srv_json_at(nrd_srv_json_get(doc, "inputs"), 0);
    cr_assert_str_eq(nrd_srv_json_str(nrd_srv_json_get(in, "name")), "INPUT0");
    cr_assert_eq(nrd_srv_json_int(nrd_srv_json_at(nrd_srv_json_get(in, "shape"), 1)), 16);
    cr_assert_str_eq(nrd_srv_json_str(nrd_srv_json_get(doc, "id")), "r1");
    cr_assert_null(nrd_srv_json_get(doc, "outputs"));
    cr_assert_null(nrd_srv_json_get(in, "nam"), "keys match whole");
    nrd_srv_json_arena_reset(a);
    cr_assert_eq(nrd_srv_json_arena_used(a), 0);
  }
  nrd_srv_json_arena_free(a);
}

Test(json_arena, a_document_larger_than_the_first_block_grows_the_arena)
{
  nrd_srv_json_arena *a = nrd_srv_json_arena_new();
  /* About 300 KB of JSON in one array, and 5000 keys in one object: far
   * more than the first block, and past the stack's inline room. */
  size_t n = 20000, cap = n * 24 + 64, len = 0;
  char *text = malloc(cap);
  cr_assert_not_null(text);
  len += (size_t)snprintf(text + len, cap - len, "{\"big\":[");
  for (size_t i = 0; i < n; i++) len += (size_t)snprintf(text + len, cap - len, "%s\"s%zu\"", i ? "," : "", i);
  len += (size_t)snprintf(text + len, cap - len, "],\"keys\":{");
  for (size_t i = 0; i < 5000; i++) len += (size_t)snprintf(text + len, cap - len, "%s\"k%zu\":%zu", i ? "," : "", i % 4000, i);
  len += (size_t)snprintf(text + len, cap - len, "}}");
  char err[200];
  const nrd_srv_json *doc = parse(a, text, len, err);
  cr_assert_not_null(doc, "%s", err);
  const nrd_srv_json *big = nrd_srv_json_get(doc, "big");
  cr_assert_eq(nrd_srv_json_size(big), n);
  cr_assert_str_eq(nrd_srv_json_str(nrd_srv_json_at(big, n - 1)), "s19999");
  const nrd_srv_json *keys = nrd_srv_json_get(doc, "keys");
  cr_assert_eq(nrd_srv_json_size(keys), 4000, "1000 repeated keys keep only their last value");
  cr_assert_eq(nrd_srv_json_int(nrd_srv_json_get(keys, "k17")), 4017);
  cr_assert_eq(nrd_srv_json_int(nrd_srv_json_get(keys, "k3999")), 3999);
  nrd_srv_json_arena_reset(a); /* the sanitizers check nothing leaks */
  cr_assert_eq(nrd_srv_json_arena_used(a), 0);
  free(text);
  nrd_srv_json_arena_free(a);
}

Test(json_arena, a_failed_parse_leaves_the_arena_empty)
{
  nrd_srv_json_arena *a = nrd_srv_json_arena_new();
  const char *bad = "{\"inputs\":[{\"name\":\"INPUT0\",\"shape\":[1,16]}";
  char err[200] = "";
  cr_assert_null(parse(a, bad, strlen(bad), err));
  cr_assert_eq(nrd_srv_json_arena_used(a), 0);
  cr_assert_neq(err[0], '\0');
  nrd_srv_json_arena_free(a);
}

/* What jansson's parser did, this one must do too. */
Test(json_arena, values_and_escapes_follow_janssons_rules)
{
  nrd_srv_json_arena *a = nrd_srv_json_arena_new();
  const char *text = "{\"s\":\"a\\\"b\\u00e9\\n\",\"i\":-9223372036854775808,\"d\":2.5e-3,\"w\":2.0,"
                     "\"t\":true,\"f\":false,\"n\":null,\"e\":{},\"arr\":[[],[1]],\"k\":1,\"k\":2,"
                     "\"esc\\u005fkey\":3}";
  char err[200];
  const nrd_srv_json *doc = parse(a, text, strlen(text), err);
  cr_assert_not_null(doc, "%s", err);
  cr_assert_str_eq(nrd_srv_json_str(nrd_srv_json_get(doc, "s")), "a\"b\xc3\xa9\n");
  cr_assert_eq(nrd_srv_json_get(doc, "s")->n, 6);
  cr_assert_eq(nrd_srv_json_int(nrd_srv_json_get(doc, "i")), INT64_MIN);
  cr_assert_float_eq(nrd_srv_json_real(nrd_srv_json_get(doc, "d")), 2.5e-3, 1e-12);
  cr_assert(nrd_srv_json_is_real(nrd_srv_json_get(doc, "w")), "2.0 is a real, as in jansson");
  cr_assert(nrd_srv_json_is_true(nrd_srv_json_get(doc, "t")));
  cr_assert(nrd_srv_json_is(nrd_srv_json_get(doc, "f"), NRD_SRV_JSON_FALSE));
  cr_assert(nrd_srv_json_is_bool(nrd_srv_json_get(doc, "f")) && !nrd_srv_json_is_bool(nrd_srv_json_get(doc, "n")));
  cr_assert(nrd_srv_json_is(nrd_srv_json_get(doc, "n"), NRD_SRV_JSON_NULL));
  cr_assert(nrd_srv_json_is_object(nrd_srv_json_get(doc, "e")));
  cr_assert_eq(nrd_srv_json_size(nrd_srv_json_get(doc, "e")), 0);
  cr_assert_eq(nrd_srv_json_size(nrd_srv_json_at(nrd_srv_json_get(doc, "arr"), 1)), 1);
  cr_assert_null(nrd_srv_json_at(nrd_srv_json_get(doc, "arr"), 2));
  cr_assert_eq(nrd_srv_json_int(nrd_srv_json_get(doc, "k")), 2, "a repeated key keeps its last value");
  cr_assert_eq(nrd_srv_json_int(nrd_srv_json_get(doc, "esc_key")), 3, "keys are unescaped");
  cr_assert_eq(nrd_srv_json_size(doc), 11);
  /* Wrong types read as nothing. */
  cr_assert_null(nrd_srv_json_str(nrd_srv_json_get(doc, "i")));
  cr_assert_eq(nrd_srv_json_int(nrd_srv_json_get(doc, "s")), 0);
  cr_assert_null(nrd_srv_json_get(nrd_srv_json_get(doc, "arr"), "x"));
  cr_assert_null(nrd_srv_json_get(NULL, "x"));
  const nrd_srv_json *top = parse(a, " 7 ", 3, err);
  cr_assert_eq(nrd_srv_json_int(top), 7, "any value may stand at the top");
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
      {"[99999999999999999999999]", 25, "too big integer"},
      {"[-99999999999999999999999]", 26, "too big negative integer"},
      {"[1e999]", 7, "overflow"},
      {"[01]", 4, NULL},
      {"[NaN]", 5, NULL},
      {deep, sizeof deep, "deep"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char err[200] = "";
    const nrd_srv_json *doc = parse(a, cases[i].text, cases[i].len, err);
    cr_assert_null(doc, "case %zu was accepted", i);
    cr_assert_neq(err[0], '\0', "case %zu: no reason", i);
    cr_assert_not_null(strstr(err, "at byte"), "case %zu: %s", i, err);
    if (cases[i].says) cr_assert_not_null(strstr(err, cases[i].says), "case %zu: %s", i, err);
    cr_assert_eq(nrd_srv_json_arena_used(a), 0, "case %zu left the arena in use", i);
  }
  nrd_srv_json_arena_free(a);
}

Test(json_arena, nested_containers_keep_their_own_keys)
{
  nrd_srv_json_arena *a = nrd_srv_json_arena_new();
  const char *text = "{\"a\":{\"b\":{\"c\":[1,{\"d\":\"x\"}],\"e\":2},\"f\":[]},\"g\":3}";
  char err[200];
  const nrd_srv_json *doc = parse(a, text, strlen(text), err);
  cr_assert_not_null(doc, "%s", err);
  const nrd_srv_json *b = nrd_srv_json_get(nrd_srv_json_get(doc, "a"), "b");
  cr_assert_eq(nrd_srv_json_int(nrd_srv_json_get(b, "e")), 2);
  const nrd_srv_json *c = nrd_srv_json_get(b, "c");
  cr_assert_str_eq(nrd_srv_json_str(nrd_srv_json_get(nrd_srv_json_at(c, 1), "d")), "x");
  cr_assert(nrd_srv_json_is_array(nrd_srv_json_get(nrd_srv_json_get(doc, "a"), "f")));
  cr_assert_eq(nrd_srv_json_int(nrd_srv_json_get(doc, "g")), 3);
  cr_assert_str_eq(doc->u.members[0].key, "a");
  cr_assert_str_eq(doc->u.members[1].key, "g");
  nrd_srv_json_arena_free(a);
}
