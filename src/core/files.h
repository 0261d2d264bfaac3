/* Small file-system helpers shared by the repository and the agents. */
#ifndef NRD_FILES_H
#define NRD_FILES_H

#include <stdbool.h>
#include <stddef.h>

#include "triton/core/tritonserver.h"

/* "a/b" in a new string the caller frees; NULL on out-of-memory. */
char *nrd_path_join(const char *a, const char *b);

/* Deletes `path` and everything under it, following no symbolic link
 * (a link is removed, not what it points at). Failures are ignored: what
 * cannot be deleted stays. */
void nrd_remove_tree(const char *path);

/* Reads a whole file of at most 64 MB into *text (NUL-terminated, the
 * caller frees it), its length in *len. Errors name the path: NOT_FOUND
 * when it does not exist, INVALID_ARG when it cannot be read or is too
 * large. */
TRITONSERVER_Error *nrd_read_file(const char *path, char **text, size_t *len);

/* True when `name` can be one folder name of a plug-in layout
 * (<dir>/<name>/lib..._<name>.so): not empty, no '/', not "." or "..". */
bool nrd_plain_name(const char *name);

#endif
