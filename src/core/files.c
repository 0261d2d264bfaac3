/* File-system helpers; see files.h. */
#include "files.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"

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
      if (!lstat(sub, &st) && S_ISDIR(st.st_mode))
        nrd_remove_tree(sub);
      else
        unlink(sub);
      free(sub);
    }
    closedir(d);
  }
  rmdir(path);
}

TRITONSERVER_Error *nrd_read_file(const char *path, char **text, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return nrd_error_new(errno == ENOENT ? TRITONSERVER_ERROR_NOT_FOUND : TRITONSERVER_ERROR_INVALID_ARG,
                         "cannot read '%s': %s", path, strerror(errno));
  char *buf = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (n + 4096 > cap) {
      cap = cap ? cap * 2 : 8192;
      if (cap > (64u << 20)) {
        free(buf);
        fclose(f);
        return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "'%s' is larger than 64 MB", path);
      }
      char *nb = realloc(buf, cap);
      if (!nb) {
        free(buf);
        fclose(f);
        return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory reading '%s'", path);
      }
      buf = nb;
    }
    size_t got = fread(buf + n, 1, cap - n - 1, f);
    n += got;
    if (got == 0) break;
  }
  fclose(f);
  buf[n] = '\0';
  *text = buf;
  *len = n;
  return NULL;
}

bool nrd_plain_name(const char *name) {
  return *name && !strchr(name, '/') && strcmp(name, "..") != 0 && strcmp(name, ".") != 0;
}
