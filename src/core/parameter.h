/* Named, typed parameters: the object behind TRITONSERVER_Parameter and the
 * growable lists that requests and responses carry.
 *
 * A list owns every name, string and byte buffer in it. Lists are not
 * internally locked: the owner of the request/response that holds a list
 * serialises access (one thread at a time). */
#ifndef NRD_PARAMETER_H
#define NRD_PARAMETER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "triton/core/tritonserver.h"

typedef struct nrd_param {
  char *name;
  TRITONSERVER_ParameterType type;
  union {
    int64_t i;
    bool b;
    double d;
    char *s;
    struct {
      void *p;
      size_t n;
    } bytes;
  } v;
} nrd_param;

typedef struct nrd_param_list {
  nrd_param *items;
  size_t count, cap;
} nrd_param_list;

/* A public parameter. `p` holds name and value; for BYTES made with
 * TRITONSERVER_ParameterBytesNew the data is borrowed from the caller
 * (bytes_borrowed), as Triton documents, and never freed here. */
struct TRITONSERVER_Parameter {
  nrd_param p;
  bool bytes_borrowed;
};

/* Appenders: copy `name` (and the string or byte value) into a new item at
 * the end of the list. Duplicates are kept; find returns the first. NULL list
 * or name -> INVALID_ARG; out of memory -> error. On failure the list is
 * unchanged. The caller owns the returned error. */
TRITONSERVER_Error *nrd_param_list_add_string(nrd_param_list *list, const char *name, const char *value);
TRITONSERVER_Error *nrd_param_list_add_int(nrd_param_list *list, const char *name, int64_t value);
TRITONSERVER_Error *nrd_param_list_add_bool(nrd_param_list *list, const char *name, bool value);
TRITONSERVER_Error *nrd_param_list_add_double(nrd_param_list *list, const char *name, double value);
/* Copies `n` bytes from `data` (`data` may be NULL only when n == 0). */
TRITONSERVER_Error *nrd_param_list_add_bytes(nrd_param_list *list, const char *name, const void *data, size_t n);
/* Deep-copies a public parameter (BYTES data included) into the list. */
TRITONSERVER_Error *nrd_param_list_add_param(nrd_param_list *list, const TRITONSERVER_Parameter *param);

/* Frees every item and the array; leaves an empty, reusable list. NULL is a
 * no-op. */
void nrd_param_list_free(nrd_param_list *list);

/* First item named `name`, or NULL. The pointer stays valid until the list is
 * next modified or freed. */
const nrd_param *nrd_param_list_find(const nrd_param_list *list, const char *name);

/* Frees the owned contents of one item (name, string or byte copy) and
 * zeroes it; the item itself is not freed. */
void nrd_param_clear(nrd_param *param);

#endif
