/* Unit tests for the server's arena JSON documents (src/server/http/json_arena.c). */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_arena.h"

#include <jansson.h>
#include <stdlib.h>

static const nrd_srv_json *parse(nrd_srv_json_arena *a, const char *text, size_t len, char *err) {
  return nrd_srv_json_parse(a, text, len, err, 200);
}

Test(json_arena, parses_into_the_arena_and_resets) {
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

Test(json_arena, a_document_larger_than_the_first_block_grows_the_arena) {
  nrd_srv_json_arena *a = nrd_srv_json_arena_new();
  /* About 300 KB of JSON in one array, and 5000 keys in one object: far
   * more than the first block, and past the stack's inline room. */
  size_t n = 20000, cap = n * 24 + 64, len = 0;
  char *text = malloc(cap);
  cr_assert_not_null(text);
  len += (size_t)snprintf(text + len, cap - len, "{\"big\":[");
  for (size_t i = 0; i < n; i++) len += (size_t)snprintf(text + len, cap - len, "%s\"s%zu\"", i ? "," : "", i);
  len += (size_t)snprintf(text + len, cap - len, "],\"keys\":{");
  for (size_t i = 0; i < 5000; i++)
    len += (size_t)snprintf(text + len, cap - len, "%s\"k%zu\":%zu", i ? "," : "", i % 4000, i);
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

Test(json_arena, a_failed_parse_leaves_the_arena_empty) {
  nrd_srv_json_arena *a = nrd_srv_json_arena_new();
  const char *bad = "{\"inputs\":[{\"name\":\"INPUT0\",\"shape\":[1,16]}";
  char err[200] = "";
  cr_assert_null(parse(a, bad, strlen(bad), err));
  cr_assert_eq(nrd_srv_json_arena_used(a), 0);
  cr_assert_neq(err[0], '\0');
  nrd_srv_json_arena_free(a);
}

/* What jansson's parser did, this one must do too. */
Test(json_arena, values_and_escapes_follow_janssons_rules) {
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

Test(json_arena, bad_documents_are_refused_with_a_reason) {
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
      /* what jsmn, the tokenizer, lets through: the walk must refuse it */
      {"{\"a\" 1}", 8, "expected ':'"},
      {"{\"a\":1 \"b\":2}", 14, "expected ',' or '}'"},
      {"[1 2]", 5, "expected ',' or ']'"},
      {"[,1]", 4, "expected a value"},
      {"[1,,2]", 6, "expected a value"},
      {"{\"a\":}", 6, "expected a value"},
      {"{\"a\"}", 5, "expected ':'"},
      {"{1:2}", 5, "string key"},
      {"[{}:1]", 6, "expected ',' or ']'"},
      {"[[1]:2]", 7, "expected ',' or ']'"},
      {"\"a\":1", 5, "trailing"},
      {"1 2", 3, "trailing"},
      {"{}\0", 3, "trailing"},
      {"[\"a\0b\"]", 7, NULL},
      {"[tru]", 5, NULL},
      {"[truex]", 7, NULL},
      {"[-]", 3, NULL},
      {"[1.]", 4, NULL},
      {"[.5]", 4, NULL},
      {"[1e]", 4, NULL},
      {"[+1]", 4, NULL},
      {"[\"\\x\"]", 6, "escape"},
      {"[\"\\ud800\"]", 10, "surrogate"},
      {"[\"\\udc00\"]", 10, "surrogate"},
      {"[\"\\ud800\\u0041\"]", 16, "surrogate"},
      {"[\"\t\"]", 5, "control character"},
      {"[\"\xc0\x80\"]", 6, "UTF-8"},
      {"[\"\xed\xa0\x80\"]", 7, "UTF-8"},
      {"[\"\xf4\x90\x80\x80\"]", 8, "UTF-8"},
      {"[\"abc", 5, "unterminated"},
      {"  ", 2, "empty"},
      {",", 1, NULL},
      {"]", 1, NULL},
      {"[}", 2, NULL},
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

Test(json_arena, nested_containers_keep_their_own_keys) {
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

Test(json_arena, deep_nesting_is_refused_before_the_token_vector_grows) {
  nrd_srv_json_arena *a = nrd_srv_json_arena_new();
  size_t n = 8u << 20; /* 8 MB of '[': one token per byte if nothing stopped it */
  char *text = malloc(n);
  cr_assert_not_null(text);
  memset(text, '[', n);
  char err[200] = "";
  cr_assert_null(parse(a, text, n, err));
  cr_assert_not_null(strstr(err, "nested too deeply"), "%s", err);
  /* refused at the first growth of the vector: within its first few hundred bytes */
  const char *at = strstr(err, "at byte ");
  cr_assert_not_null(at);
  cr_assert_lt(strtoull(at + 8, NULL, 10), 1024, "%s", err);
  free(text);
  nrd_srv_json_arena_free(a);
}

/* ---- differential test: the documented rules are jansson's --------------- */

static json_t *to_jansson(const nrd_srv_json *v) {
  switch (v->type) {
    case NRD_SRV_JSON_NULL: return json_null();
    case NRD_SRV_JSON_TRUE: return json_true();
    case NRD_SRV_JSON_FALSE: return json_false();
    case NRD_SRV_JSON_INT: return json_integer(v->u.i);
    case NRD_SRV_JSON_REAL: return json_real(v->u.d);
    case NRD_SRV_JSON_STRING: return json_stringn(v->u.s, v->n);
    case NRD_SRV_JSON_ARRAY: {
      json_t *arr = json_array();
      for (size_t i = 0; i < v->n; i++) json_array_append_new(arr, to_jansson(&v->u.items[i]));
      return arr;
    }
    case NRD_SRV_JSON_OBJECT: {
      json_t *obj = json_object();
      for (size_t i = 0; i < v->n; i++) {
        cr_assert(json_object_getn(obj, v->u.members[i].key, v->u.members[i].key_len) == NULL,
                  "a repeated key was kept");
        json_object_setn_new(obj, v->u.members[i].key, v->u.members[i].key_len, to_jansson(&v->u.members[i].value));
      }
      return obj;
    }
  }
  return NULL;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15u;
static uint32_t rng(uint32_t below) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (uint32_t)(rng_state % below);
}

/* Accepts and refuses exactly what jansson does (JSON_DECODE_ANY, no NUL)
 * and reads the same values, on realistic headers and on 60,000 random
 * mutations of them (bytes replaced, inserted, dropped, spans repeated,
 * the text cut short). */
Test(json_arena, agrees_with_jansson_on_mutated_headers) {
  static const char *seeds[] = {
      "{\"id\":\"r-1\",\"inputs\":[{\"name\":\"INPUT0\",\"shape\":[1,16],\"datatype\":\"FP32\","
      "\"parameters\":{\"binary_data_size\":64}}],\"outputs\":[{\"name\":\"OUTPUT0\","
      "\"parameters\":{\"binary_data\":true}}]}",
      "{\"inputs\":[{\"name\":\"IN\",\"shape\":[2],\"datatype\":\"BYTES\",\"data\":0}],"
      "\"parameters\":{\"sequence_id\":-9223372036854775808,\"priority\":1e3,\"timeout\":2.5,"
      "\"x\":null,\"sequence_start\":false}}",
      "{\"s\":\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\","
      "\"k\":1,\"k\":[{},[],\"\"],\"n\":[-0,0.5e-3,1E+2,123456789012345678]}",
      "[1,[2,[3,[4,{\"a\":[5]}]]],\"z\",true,false,null]",
      "  \"top\"  ",
      "-12.5e-7",
  };
  const char specials[] = "{}[],:\"\\ \t\n0123456789-+.eEtrufalsn\x00\x01\x1f\x7f\x80\xbf\xc3\xed\xf0\xff";
  nrd_srv_json_arena *a = nrd_srv_json_arena_new();
  char text[1024];
  size_t accepted = 0, refused = 0;
  for (int round = 0; round < 60000; round++) {
    const char *seed = seeds[rng(sizeof seeds / sizeof seeds[0])];
    size_t len = strlen(seed);
    memcpy(text, seed, len);
    int edits = round < 60 ? 0 : 1 + (int)rng(3);
    for (int e = 0; e < edits && len > 0; e++) {
      size_t at = rng((uint32_t)len);
      char c = specials[rng(sizeof specials - 1)];
      switch (rng(5)) {
        case 0: text[at] = c; break;
        case 1:
          if (len + 1 < sizeof text) {
            memmove(text + at + 1, text + at, len - at);
            text[at] = c;
            len++;
          }
          break;
        case 2:
          memmove(text + at, text + at + 1, len - at - 1);
          len--;
          break;
        case 3: {
          size_t n = 1 + rng(8);
          if (at + n <= len && len + n < sizeof text) {
            memmove(text + at + n, text + at, len - at);
            len += n;
          }
          break;
        }
        default: len = at; break;
      }
    }
    char err[200] = "";
    const nrd_srv_json *ours = parse(a, text, len, err);
    json_error_t jerr;
    json_t *theirs = json_loadb(text, len, JSON_DECODE_ANY, &jerr);
    if (memchr(text, '\0', len)) {
      /* never valid JSON; jansson lets one through after a token it reads
       * ahead of (its stream takes the NUL for the end of its own buffer) */
      cr_assert_null(ours, "round %d: a raw NUL byte was accepted", round);
      json_decref(theirs);
      refused++;
      continue;
    }
    cr_assert_eq(ours != NULL, theirs != NULL, "round %d: ours %s, jansson %s (%s) on [%.*s]", round,
                 ours ? "accepts" : err, theirs ? "accepts" : "refuses", jerr.text, (int)len, text);
    if (ours) {
      json_t *mine = to_jansson(ours);
      cr_assert(json_equal(mine, theirs), "round %d: values differ on [%.*s]", round, (int)len, text);
      json_decref(mine);
      accepted++;
    } else {
      cr_assert_not_null(strstr(err, "at byte"), "round %d: %s", round, err);
      cr_assert_eq(nrd_srv_json_arena_used(a), 0);
      refused++;
    }
    json_decref(theirs);
  }
  cr_assert_gt(accepted, 1000, "too few mutations stay valid (%zu) for the test to mean much", accepted);
  cr_assert_gt(refused, 10000);
  nrd_srv_json_arena_free(a);
}

/* The memo: the same bytes again give the kept document; other bytes, a
 * failure or a text too large to keep leave nothing stale behind. */
Test(json_arena, the_memo_reuses_a_document_only_for_the_same_bytes) {
  nrd_srv_json_memo m = {0};
  char err[200] = "";
  char a[] = "{\"inputs\": [{\"name\": \"A\", \"shape\": [1, 16]}]}";
  char b[] = "{\"inputs\": [{\"name\": \"B\", \"shape\": [1, 16]}]}";
  const nrd_srv_json *r1 = nrd_srv_json_memo_parse(&m, a, strlen(a), err, sizeof err);
  cr_assert_not_null(r1, "%s", err);
  /* Same bytes at another address (a new request buffer): the same document. */
  char *copy = strdup(a);
  cr_assert_eq(nrd_srv_json_memo_parse(&m, copy, strlen(copy), err, sizeof err), r1);
  /* One byte different: parsed again, and the content is the new text's. */
  const nrd_srv_json *r2 = nrd_srv_json_memo_parse(&m, b, strlen(b), err, sizeof err);
  cr_assert_not_null(r2, "%s", err);
  const nrd_srv_json *in0 = nrd_srv_json_at(nrd_srv_json_get(r2, "inputs"), 0);
  cr_assert_str_eq(nrd_srv_json_str(nrd_srv_json_get(in0, "name")), "B");
  /* The caller's buffer changing after the parse changes nothing kept. */
  copy[strlen(copy) - 5] = '7';
  const nrd_srv_json *r3 = nrd_srv_json_memo_parse(&m, a, strlen(a), err, sizeof err);
  in0 = nrd_srv_json_at(nrd_srv_json_get(r3, "inputs"), 0);
  cr_assert_str_eq(nrd_srv_json_str(nrd_srv_json_get(in0, "name")), "A");
  free(copy);
  /* A failure keeps nothing: the same bad text fails again with its reason. */
  const char bad[] = "{\"inputs\": [1, 2,]}";
  cr_assert_null(nrd_srv_json_memo_parse(&m, bad, strlen(bad), err, sizeof err));
  cr_assert_null(m.root);
  err[0] = '\0';
  cr_assert_null(nrd_srv_json_memo_parse(&m, bad, strlen(bad), err, sizeof err));
  cr_assert_not_null(strstr(err, "at byte"), "%s", err);
  /* A text over the limit is parsed but not kept. */
  size_t big = NRD_SRV_JSON_MEMO_MAX + 100;
  char *large = malloc(big + 1);
  memset(large, ' ', big);
  memcpy(large, "[1]", 3);
  const nrd_srv_json *r4 = nrd_srv_json_memo_parse(&m, large, big, err, sizeof err);
  cr_assert_not_null(r4, "%s", err);
  cr_assert_eq(nrd_srv_json_size(r4), 1);
  cr_assert_null(m.root);
  free(large);
  /* And a kept text after that is kept again. */
  const nrd_srv_json *r5 = nrd_srv_json_memo_parse(&m, a, strlen(a), err, sizeof err);
  cr_assert_eq(nrd_srv_json_memo_parse(&m, a, strlen(a), err, sizeof err), r5);
  nrd_srv_json_memo_free(&m);
  cr_assert_null(m.root);
  nrd_srv_json_memo_free(&m); /* twice is fine */
}
