/* Opening a framework's library from the backend's folder. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "nereid/backend_utils.h"

/* Tries one dlopen name; appends "name (reason)" to 'tried' on failure,
 * cut to fit: the list is only for an error message. */
static void *open_one(const char *name, char *tried, size_t cap) {
  void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL && cap > 0) {
    size_t used = strlen(tried);
    const char *why = dlerror();
    if (snprintf(tried + used, cap - used, "%s%s (%s)", used > 0 ? "; " : "", name,
                 why != NULL ? why : "unknown error") < 0) {
      tried[used] = '\0';
    }
  }
  return h;
}

void *nrd_bu_dlopen_beside(const char *backend_dir, const char *library, char *path, size_t path_cap, char *tried,
                           size_t tried_cap) {
  if (tried_cap > 0) tried[0] = '\0';
  void *h = NULL;
  if (backend_dir != NULL && backend_dir[0] != '\0') {
    int n = snprintf(path, path_cap, "%s/%s", backend_dir, library);
    if (n > 0 && (size_t)n < path_cap) h = open_one(path, tried, tried_cap);
  }
  if (h == NULL) {
    snprintf(path, path_cap, "%s", library);
    h = open_one(library, tried, tried_cap);
  }
  return h;
}
