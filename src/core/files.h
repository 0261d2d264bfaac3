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

/* Checks a model name given to a load (any caller: HTTP, gRPC, the C
 * API, ensemble steps) as Triton does: trimmed of white space it must not
 * be empty, be "..", or hold a '/'. We also refuse "." (the repository
 * folder itself). NULL when it is fine, else an INVALID_ARG the caller
 * owns. Any thread. */
TRITONSERVER_Error *nrd_check_model_name(const char *name);

/* Whether `child` (absolute, or relative to the working folder) stays
 * inside folder `parent` once "..", "." and symbolic links are resolved:
 * the longest existing leading part of `child` goes through realpath(3),
 * the rest is normalised as text, and the result must be `parent`'s
 * realpath or lie under it. *inside is false for anything that cannot be
 * resolved. Returns NULL, or an INVALID_ARG (the caller owns it) when
 * `parent` itself cannot be resolved. Any thread. */
TRITONSERVER_Error *nrd_path_inside(const char *child, const char *parent, bool *inside);

/* The canonical form of `path` as nrd_path_inside computes it (realpath of
 * the longest existing part, the rest normalised): a new string the
 * caller frees, NULL when it cannot be computed. Any thread. */
char *nrd_path_weakly_canonical(const char *path);

#endif
