/* File-system helpers; see files.h. */
#include "files.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *nrd_path_join(const char *a, const char *b) {
  size_t n = strlen(a) + strlen(b) + 2;
  char *p = malloc(n);
  if (p) snprintf(p, n, "%s/%s", a, b);
  return p;
}

void nrd_remove_tree(const char *path) {
  DIR *d = opendir(path);
  if (d) {
    struct dirent *e;
    while ((e = readdir(d))) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
      char *sub = nrd_path_join(path, e->d_name);
      if (!sub) continue;
      struct stat st;
      if (!lstat(sub, &st) && S_ISDIR(st.st_mode)) nrd_remove_tree(sub);
      else unlink(sub);
      free(sub);
    }
    closedir(d);
  }
  rmdir(path);
}
