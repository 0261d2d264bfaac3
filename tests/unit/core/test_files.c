/* Unit tests for files.c: model-name checks and whether a path stays
 * inside a folder once "..", absolute paths and symbolic links are
 * resolved (security issue 53). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files.h"

static char g_root[64];

static void setup(void) {
  snprintf(g_root, sizeof g_root, "/tmp/nrd-files-XXXXXX");
  cr_assert_not_null(mkdtemp(g_root));
}

static void teardown(void) { nrd_remove_tree(g_root); }

TestSuite(files, .init = setup, .fini = teardown, .timeout = 30);

static char *at(const char *rel) {
  char *p = nrd_path_join(g_root, rel);
  cr_assert_not_null(p);
  return p;
}

static bool inside(const char *child_rel, const char *parent_rel) {
  char *c = at(child_rel), *p = at(parent_rel);
  bool in = false;
  TRITONSERVER_Error *e = nrd_path_inside(c, p, &in);
  cr_assert_null(e, "%s", e ? TRITONSERVER_ErrorMessage(e) : "");
  free(c);
  free(p);
  return in;
}

Test(files, model_names_as_triton_checks_them) {
  const char *good[] = {"m", "model..", "...", "..m", "a b", "m.onnx"};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
    cr_assert_null(nrd_check_model_name(good[i]), "%s", good[i]);
  const char *bad[] = {"..", " ..", ".. ", "\t..\n", ".", "a/b", "/", "../x", "x/..", "", " ", "\t\n", NULL};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    TRITONSERVER_Error *e = nrd_check_model_name(bad[i]);
    cr_assert_not_null(e, "%s", bad[i] ? bad[i] : "(null)");
    cr_assert_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_INVALID_ARG);
    TRITONSERVER_ErrorDelete(e);
  }
}

Test(files, text_dots_and_prefixes) {
  char *m = at("model");
  cr_assert_eq(mkdir(m, 0700), 0);
  free(m);
  char *sib = at("model_dir");
  cr_assert_eq(mkdir(sib, 0700), 0);
  free(sib);
  cr_assert(inside("model", "model"));
  cr_assert(inside("model/a/b/c", "model")); /* not there yet: normalised as text */
  cr_assert(inside("model/./x/../y", "model"));
  cr_assert(!inside("model/..", "model"));
  cr_assert(!inside("model/../secret", "model"));
  cr_assert(!inside("model/x/../../secret", "model"));
  cr_assert(!inside("model_dir/x", "model")); /* a prefix that is no folder boundary */
  cr_assert(!inside("model/none/../../secret", "model"));
}

Test(files, symbolic_links_are_followed) {
  char *m = at("model"), *out = at("outside");
  cr_assert_eq(mkdir(m, 0700), 0);
  cr_assert_eq(mkdir(out, 0700), 0);
  char *l1 = at("model/up"), *l2 = at("model/in"), *l3 = at("model/dangling"), *l4 = at("model/loop");
  cr_assert_eq(symlink(out, l1), 0);
  cr_assert_eq(symlink(".", l2), 0);
  cr_assert_eq(symlink("/nonexistent/x", l3), 0);
  cr_assert_eq(symlink("loop", l4), 0);
  cr_assert(!inside("model/up", "model"));
  cr_assert(!inside("model/up/file", "model"));
  cr_assert(inside("model/in/file", "model"));
  cr_assert(!inside("model/in/../file", "model")); /* ".." after the link is taken from where it leads */
  cr_assert(!inside("model/dangling", "model")); /* cannot tell where it leads: not inside */
  cr_assert(!inside("model/loop/x", "model"));
  /* The parent itself through a link: compared by where it leads. */
  char *lm = at("alias");
  cr_assert_eq(symlink(m, lm), 0);
  cr_assert(inside("model/x", "alias"));
  cr_assert(inside("alias/x", "model"));
  free(m);
  free(out);
  free(l1);
  free(l2);
  free(l3);
  free(l4);
  free(lm);
}

Test(files, missing_parent_is_an_error) {
  bool in = true;
  TRITONSERVER_Error *e = nrd_path_inside("/tmp/x", "/nonexistent/folder", &in);
  cr_assert_not_null(e);
  cr_assert(!in);
  TRITONSERVER_ErrorDelete(e);
  char *c = nrd_path_weakly_canonical("/a/./b/../c//d");
  cr_assert_str_eq(c, "/a/c/d");
  free(c);
  cr_assert_null(nrd_path_weakly_canonical(""));
}
