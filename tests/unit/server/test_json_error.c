/* Unit tests for Triton's words on a body that is not JSON
 * (src/server/http/json_error.c): RapidJSON's text and offset for each
 * kind of mistake, the nesting limit, and valid bodies left to the caller. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "json_error.h"

static void expect(const char *body, size_t len, const char *want) {
  char out[300] = "untouched";
  int rc = nrd_srv_json_error(body, len, out, sizeof out);
  cr_assert_eq(rc, 0, "'%.*s' was taken as valid", (int)len, body);
  cr_assert_str_eq(out, want, "for '%.*s'", (int)len, body);
}

#define P "failed to parse the request JSON buffer: "

Test(json_error, each_kind_of_mistake_in_rapidjson_words) {
  const struct {
    const char *body, *want;
  } cases[] = {
      {"", P "The document is empty. at 0"},
      {"   \n", P "The document is empty. at 4"},
      {"abc", P "Invalid value. at 0"},
      {"{\"inputs\": [1,]}", P "Invalid value. at 14"},
      {"{\"a\" 1}", P "Missing a colon after a name of object member. at 5"},
      {"{\"a\":1,}", P "Missing a name for object member. at 7"},
      {"{1:2}", P "Missing a name for object member. at 1"},
      {"{\"a\":1 \"b\":2}", P "Missing a comma or '}' after an object member. at 7"},
      {"[1 2]", P "Missing a comma or ']' after an array element. at 3"},
      {"\"ab", P "Missing a closing quotation mark in string. at 3"},
      {"\"a\\qb\"", P "Invalid escape character in string. at 2"},
      {"\"\\u12G4\"", P "Incorrect hex digit after \\u escape in string. at 1"},
      {"\"\\uD800x\"", P "The surrogate pair in string is invalid. at 1"},
      {"\"a\tb\"", P "Invalid encoding in string. at 2"},
      {"1.", P "Miss fraction part in number. at 2"},
      {"1e+", P "Miss exponent in number. at 3"},
      {"-", P "Invalid value. at 1"},
      {"[1e999]", P "Number too big to be stored in double. at 1"},
      {"nul", P "Invalid value. at 3"},
      {"truth", P "Invalid value. at 3"},
      {"true x", P "The document root must not be followed by other values. at 5"},
      {"{} {}", P "The document root must not be followed by other values. at 3"},
      {"01", P "The document root must not be followed by other values. at 1"},
      {"NaN", P "Invalid value. at 0"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    expect(cases[i].body, strlen(cases[i].body), cases[i].want);
}

Test(json_error, a_nul_byte_ends_the_text) {
  expect("{\"a\":1\0}", 8, P "Missing a comma or '}' after an object member. at 6");
  char out[64] = "untouched";
  cr_assert_eq(nrd_srv_json_error("[1]\0 junk", 9, out, sizeof out), -1);
  cr_assert_str_eq(out, "untouched");
}

Test(json_error, nesting_beyond_100_is_refused_with_tritons_sentence) {
  char deep[256];
  for (int depth = 99; depth <= 101; depth++) {
    memset(deep, '[', (size_t)depth);
    memset(deep + depth, ']', (size_t)depth);
    char out[200] = "untouched";
    int rc = nrd_srv_json_error(deep, 2 * (size_t)depth, out, sizeof out);
    if (depth <= NRD_SRV_JSON_MAX_DEPTH) {
      cr_assert_eq(rc, -1, "depth %d is allowed", depth);
    } else {
      cr_assert_eq(rc, 0);
      cr_assert_str_eq(out, "JSON nesting depth exceeds maximum allowed limit (100)");
    }
  }
}

Test(json_error, valid_bodies_are_left_to_the_caller) {
  const char *ok[] = {"{}", " [ ] ", "{\"a\":[1,-0.5e-3,true,false,null,\"\\u00e9\\ud83d\\ude00\"]}",
                      "0",  "\"\"",  "{\"a\":1,\"a\":2}"};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    char out[64] = "untouched";
    cr_assert_eq(nrd_srv_json_error(ok[i], strlen(ok[i]), out, sizeof out), -1, "%s", ok[i]);
    cr_assert_str_eq(out, "untouched");
  }
}
