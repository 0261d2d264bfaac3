/* Small file-system helpers shared by the repository and the agents. */
#ifndef NRD_FILES_H
#define NRD_FILES_H

/* "a/b" in a new string the caller frees; NULL on out-of-memory. */
char *nrd_path_join(const char *a, const char *b);

/* Deletes `path` and everything under it, following no symbolic link
 * (a link is removed, not what it points at). Failures are ignored: what
 * cannot be deleted stays. */
void nrd_remove_tree(const char *path);

#endif
