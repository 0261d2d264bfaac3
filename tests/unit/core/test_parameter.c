/* Unit tests for parameter.c: public parameters and internal lists. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "parameter.h"

Test(parameter, new_of_every_scalar_type) {
  int64_t i = -42;
  bool b = true;
  double d = 2.5;
  TRITONSERVER_Parameter *ps = TRITONSERVER_ParameterNew("s", TRITONSERVER_PARAMETER_STRING, "hello");
  TRITONSERVER_Parameter *pi = TRITONSERVER_ParameterNew("i", TRITONSERVER_PARAMETER_INT, &i);
  TRITONSERVER_Parameter *pb = TRITONSERVER_ParameterNew("b", TRITONSERVER_PARAMETER_BOOL, &b);
  TRITONSERVER_Parameter *pd = TRITONSERVER_ParameterNew("d", TRITONSERVER_PARAMETER_DOUBLE, &d);
  cr_assert(ps && pi && pb && pd);
  cr_assert_str_eq(ps->p.name, "s");
  cr_assert_str_eq(ps->p.v.s, "hello");
  cr_assert_eq(pi->p.v.i, -42);
  cr_assert_eq(pb->p.v.b, true);
  cr_assert_eq(pd->p.v.d, 2.5);
  cr_assert_eq(pd->p.type, TRITONSERVER_PARAMETER_DOUBLE);
  TRITONSERVER_ParameterDelete(ps);
  TRITONSERVER_ParameterDelete(pi);
  TRITONSERVER_ParameterDelete(pb);
  TRITONSERVER_ParameterDelete(pd);
}

Test(parameter, new_rejects_bytes_and_nulls) {
  int64_t i = 1;
  cr_assert_null(TRITONSERVER_ParameterNew("x", TRITONSERVER_PARAMETER_BYTES, &i));
  cr_assert_null(TRITONSERVER_ParameterNew(NULL, TRITONSERVER_PARAMETER_INT, &i));
  cr_assert_null(TRITONSERVER_ParameterNew("x", TRITONSERVER_PARAMETER_INT, NULL));
  cr_assert_null(TRITONSERVER_ParameterNew("x", (TRITONSERVER_ParameterType)77, &i));
  TRITONSERVER_ParameterDelete(NULL);
}

Test(parameter, bytes_new_borrows_data) {
  char data[4] = {1, 2, 3, 4};
  TRITONSERVER_Parameter *p = TRITONSERVER_ParameterBytesNew("blob", data, sizeof(data));
  cr_assert_not_null(p);
  cr_assert_eq(p->p.type, TRITONSERVER_PARAMETER_BYTES);
  cr_assert_eq(p->p.v.bytes.p, data);
  cr_assert_eq(p->p.v.bytes.n, 4);
  TRITONSERVER_ParameterDelete(p); /* must not free `data` (ASan would catch it) */
  cr_assert_null(TRITONSERVER_ParameterBytesNew("blob", NULL, 3));
  p = TRITONSERVER_ParameterBytesNew("empty", NULL, 0);
  cr_assert_not_null(p);
  TRITONSERVER_ParameterDelete(p);
}

Test(parameter, list_add_find_free) {
  nrd_param_list l = {0};
  const char raw[3] = {'a', '\0', 'b'};
  cr_assert_null(nrd_param_list_add_string(&l, "s", "v"));
  cr_assert_null(nrd_param_list_add_int(&l, "i", INT64_MIN));
  cr_assert_null(nrd_param_list_add_bool(&l, "b", false));
  cr_assert_null(nrd_param_list_add_double(&l, "d", -0.125));
  cr_assert_null(nrd_param_list_add_bytes(&l, "r", raw, sizeof(raw)));
  cr_assert_null(nrd_param_list_add_bytes(&l, "z", NULL, 0));
  cr_assert_null(nrd_param_list_add_int(&l, "i", 5)); /* duplicate kept */
  cr_assert_eq(l.count, 7);
  cr_assert_str_eq(nrd_param_list_find(&l, "s")->v.s, "v");
  cr_assert_eq(nrd_param_list_find(&l, "i")->v.i, INT64_MIN);
  cr_assert_eq(nrd_param_list_find(&l, "b")->v.b, false);
  cr_assert_eq(nrd_param_list_find(&l, "d")->v.d, -0.125);
  const nrd_param *r = nrd_param_list_find(&l, "r");
  cr_assert_eq(r->type, TRITONSERVER_PARAMETER_BYTES);
  cr_assert_eq(r->v.bytes.n, 3);
  cr_assert_neq(r->v.bytes.p, (void *)raw);
  cr_assert_eq(memcmp(r->v.bytes.p, raw, 3), 0);
  cr_assert_not_null(nrd_param_list_find(&l, "z")->v.bytes.p);
  cr_assert_null(nrd_param_list_find(&l, "missing"));
  cr_assert_null(nrd_param_list_find(&l, NULL));
  nrd_param_list_free(&l);
  cr_assert_eq(l.count, 0);
  cr_assert_null(l.items);
  /* reusable after free */
  cr_assert_null(nrd_param_list_add_int(&l, "again", 1));
  nrd_param_list_free(&l);
  nrd_param_list_free(NULL);
}

Test(parameter, list_copies_strings) {
  nrd_param_list l = {0};
  char name[] = "key", value[] = "val";
  cr_assert_null(nrd_param_list_add_string(&l, name, value));
  name[0] = value[0] = 'X';
  cr_assert_str_eq(l.items[0].name, "key");
  cr_assert_str_eq(l.items[0].v.s, "val");
  nrd_param_list_free(&l);
}

Test(parameter, list_bad_arguments) {
  nrd_param_list l = {0};
  TRITONSERVER_Error *e = nrd_param_list_add_int(NULL, "x", 1);
  cr_assert_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_INVALID_ARG);
  TRITONSERVER_ErrorDelete(e);
  e = nrd_param_list_add_int(&l, NULL, 1);
  cr_assert_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_INVALID_ARG);
  TRITONSERVER_ErrorDelete(e);
  e = nrd_param_list_add_string(&l, "s", NULL);
  cr_assert_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_INVALID_ARG);
  cr_assert_not_null(strstr(TRITONSERVER_ErrorMessage(e), "'s'"));
  TRITONSERVER_ErrorDelete(e);
  e = nrd_param_list_add_bytes(&l, "b", NULL, 5);
  cr_assert_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_INVALID_ARG);
  TRITONSERVER_ErrorDelete(e);
  e = nrd_param_list_add_param(&l, NULL);
  cr_assert_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_INVALID_ARG);
  TRITONSERVER_ErrorDelete(e);
  cr_assert_eq(l.count, 0);
  nrd_param_list_free(&l);
}

Test(parameter, add_param_deep_copies_every_type) {
  int64_t i = 9;
  bool b = true;
  double d = 1e300;
  char blob[2] = {7, 8};
  TRITONSERVER_Parameter *ps[5] = {
      TRITONSERVER_ParameterNew("s", TRITONSERVER_PARAMETER_STRING, "str"),
      TRITONSERVER_ParameterNew("i", TRITONSERVER_PARAMETER_INT, &i),
      TRITONSERVER_ParameterNew("b", TRITONSERVER_PARAMETER_BOOL, &b),
      TRITONSERVER_ParameterNew("d", TRITONSERVER_PARAMETER_DOUBLE, &d),
      TRITONSERVER_ParameterBytesNew("y", blob, sizeof(blob)),
  };
  nrd_param_list l = {0};
  for (int k = 0; k < 5; k++) {
    cr_assert_null(nrd_param_list_add_param(&l, ps[k]));
    TRITONSERVER_ParameterDelete(ps[k]);
  }
  blob[0] = 0;
  cr_assert_str_eq(nrd_param_list_find(&l, "s")->v.s, "str");
  cr_assert_eq(nrd_param_list_find(&l, "i")->v.i, 9);
  cr_assert_eq(nrd_param_list_find(&l, "b")->v.b, true);
  cr_assert_eq(nrd_param_list_find(&l, "d")->v.d, 1e300);
  const nrd_param *y = nrd_param_list_find(&l, "y");
  cr_assert_eq(((char *)y->v.bytes.p)[0], 7);
  cr_assert_eq(y->v.bytes.n, 2);
  nrd_param_list_free(&l);
}

Test(parameter, many_items_grow) {
  nrd_param_list l = {0};
  char name[16];
  for (int k = 0; k < 1000; k++) {
    snprintf(name, sizeof(name), "p%d", k);
    cr_assert_null(nrd_param_list_add_int(&l, name, k));
  }
  cr_assert_eq(nrd_param_list_find(&l, "p999")->v.i, 999);
  nrd_param_list_free(&l);
}
