/* Parameter lists and TRITONSERVER_Parameter. */
#include "parameter.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"

void nrd_param_clear(nrd_param *param) {
  if (param == NULL) return;
  free(param->name);
  if (param->type == TRITONSERVER_PARAMETER_STRING) free(param->v.s);
  if (param->type == TRITONSERVER_PARAMETER_BYTES) free(param->v.bytes.p);
  memset(param, 0, sizeof(*param));
}

/* Reserves a slot and copies the name; the caller fills type and value. On
 * failure nothing changes. */
static TRITONSERVER_Error *list_reserve(nrd_param_list *list, const char *name, nrd_param **out) {
  if (list == NULL) return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "parameter list is NULL");
  if (name == NULL) return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "parameter name must not be NULL");
  if (list->count == list->cap) {
    size_t cap = list->cap != 0 ? list->cap * 2 : 4;
    nrd_param *items = realloc(list->items, cap * sizeof(*items));
    if (items == NULL) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    list->items = items;
    list->cap = cap;
  }
  char *copy = strdup(name);
  if (copy == NULL) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  nrd_param *p = &list->items[list->count];
  memset(p, 0, sizeof(*p));
  p->name = copy;
  *out = p;
  return NULL;
}

/* Drops a slot obtained from list_reserve that could not be completed. */
static void list_unreserve(nrd_param *p) {
  free(p->name);
  p->name = NULL;
}

TRITONSERVER_Error *nrd_param_list_add_string(nrd_param_list *list, const char *name, const char *value) {
  if (value == NULL)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "value of string parameter '%s' is NULL",
                         name != NULL ? name : "");
  nrd_param *p = NULL;
  NRD_RETURN_IF_ERROR(list_reserve(list, name, &p));
  p->v.s = strdup(value);
  if (p->v.s == NULL) {
    list_unreserve(p);
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  }
  p->type = TRITONSERVER_PARAMETER_STRING;
  list->count++;
  return NULL;
}

TRITONSERVER_Error *nrd_param_list_add_int(nrd_param_list *list, const char *name, int64_t value) {
  nrd_param *p = NULL;
  NRD_RETURN_IF_ERROR(list_reserve(list, name, &p));
  p->type = TRITONSERVER_PARAMETER_INT;
  p->v.i = value;
  list->count++;
  return NULL;
}

TRITONSERVER_Error *nrd_param_list_add_bool(nrd_param_list *list, const char *name, bool value) {
  nrd_param *p = NULL;
  NRD_RETURN_IF_ERROR(list_reserve(list, name, &p));
  p->type = TRITONSERVER_PARAMETER_BOOL;
  p->v.b = value;
  list->count++;
  return NULL;
}

TRITONSERVER_Error *nrd_param_list_add_double(nrd_param_list *list, const char *name, double value) {
  nrd_param *p = NULL;
  NRD_RETURN_IF_ERROR(list_reserve(list, name, &p));
  p->type = TRITONSERVER_PARAMETER_DOUBLE;
  p->v.d = value;
  list->count++;
  return NULL;
}

TRITONSERVER_Error *nrd_param_list_add_bytes(nrd_param_list *list, const char *name, const void *data, size_t n) {
  if (data == NULL && n != 0)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "data of bytes parameter '%s' is NULL",
                         name != NULL ? name : "");
  nrd_param *p = NULL;
  NRD_RETURN_IF_ERROR(list_reserve(list, name, &p));
  /* Always allocate at least one byte so a zero-length value is non-NULL. */
  p->v.bytes.p = malloc(n != 0 ? n : 1);
  if (p->v.bytes.p == NULL) {
    list_unreserve(p);
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  }
  if (n != 0) memcpy(p->v.bytes.p, data, n);
  p->v.bytes.n = n;
  p->type = TRITONSERVER_PARAMETER_BYTES;
  list->count++;
  return NULL;
}

TRITONSERVER_Error *nrd_param_list_add_param(nrd_param_list *list, const TRITONSERVER_Parameter *param) {
  if (param == NULL) return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "parameter is NULL");
  const nrd_param *p = &param->p;
  switch (p->type) {
    case TRITONSERVER_PARAMETER_STRING: return nrd_param_list_add_string(list, p->name, p->v.s);
    case TRITONSERVER_PARAMETER_INT: return nrd_param_list_add_int(list, p->name, p->v.i);
    case TRITONSERVER_PARAMETER_BOOL: return nrd_param_list_add_bool(list, p->name, p->v.b);
    case TRITONSERVER_PARAMETER_DOUBLE: return nrd_param_list_add_double(list, p->name, p->v.d);
    case TRITONSERVER_PARAMETER_BYTES: return nrd_param_list_add_bytes(list, p->name, p->v.bytes.p, p->v.bytes.n);
  }
  return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "parameter '%s' has unknown type %d",
                       p->name != NULL ? p->name : "", (int)p->type);
}

void nrd_param_list_free(nrd_param_list *list) {
  if (list == NULL) return;
  for (size_t i = 0; i < list->count; i++) nrd_param_clear(&list->items[i]);
  free(list->items);
  list->items = NULL;
  list->count = list->cap = 0;
}

const nrd_param *nrd_param_list_find(const nrd_param_list *list, const char *name) {
  if (list == NULL || name == NULL) return NULL;
  for (size_t i = 0; i < list->count; i++)
    if (strcmp(list->items[i].name, name) == 0) return &list->items[i];
  return NULL;
}

TRITONSERVER_Parameter *TRITONSERVER_ParameterNew(const char *name, const TRITONSERVER_ParameterType type,
                                                  const void *value) {
  if (name == NULL || value == NULL) return NULL;
  TRITONSERVER_Parameter *param = calloc(1, sizeof(*param));
  if (param == NULL) return NULL;
  param->p.name = strdup(name);
  if (param->p.name == NULL) goto fail;
  param->p.type = type;
  switch (type) {
    case TRITONSERVER_PARAMETER_STRING:
      param->p.v.s = strdup(value);
      if (param->p.v.s == NULL) goto fail;
      return param;
    case TRITONSERVER_PARAMETER_INT: memcpy(&param->p.v.i, value, sizeof(int64_t)); return param;
    case TRITONSERVER_PARAMETER_BOOL: memcpy(&param->p.v.b, value, sizeof(bool)); return param;
    case TRITONSERVER_PARAMETER_DOUBLE: memcpy(&param->p.v.d, value, sizeof(double)); return param;
    case TRITONSERVER_PARAMETER_BYTES: break; /* must use ParameterBytesNew */
  }
fail:
  free(param->p.name);
  free(param);
  return NULL;
}

TRITONSERVER_Parameter *TRITONSERVER_ParameterBytesNew(const char *name, const void *byte_ptr, const uint64_t size) {
  if (name == NULL || (byte_ptr == NULL && size != 0)) return NULL;
  TRITONSERVER_Parameter *param = calloc(1, sizeof(*param));
  if (param == NULL) return NULL;
  param->p.name = strdup(name);
  if (param->p.name == NULL) {
    free(param);
    return NULL;
  }
  param->p.type = TRITONSERVER_PARAMETER_BYTES;
  param->p.v.bytes.p = (void *)byte_ptr; /* borrowed: the caller keeps it alive */
  param->p.v.bytes.n = (size_t)size;
  param->bytes_borrowed = true;
  return param;
}

void TRITONSERVER_ParameterDelete(TRITONSERVER_Parameter *parameter) {
  if (parameter == NULL) return;
  if (parameter->bytes_borrowed) parameter->p.v.bytes.p = NULL;
  nrd_param_clear(&parameter->p);
  free(parameter);
}
