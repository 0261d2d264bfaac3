/* File-system helpers; see files.h. */
#include "files.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
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

TRITONSERVER_Error *nrd_check_model_name(const char *name) {
  if (!name) name = "";
  const char *ws = " \t\n\v\f\r";
  const char *b = name + strspn(name, ws);
  size_t n = strlen(b);
  while (n > 0 && strchr(ws, b[n - 1])) n--;
  if (n == 0)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "Model name cannot be empty. Please enter a valid name to deploy.");
  bool dots = (n == 2 && !strncmp(b, "..", 2)) || (n == 1 && b[0] == '.');
  if (dots || memchr(b, '/', n))
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "invalid model name '%s', model name must not contain path traversal characters", name);
  return NULL;
}

/* Drops the last component of the absolute path in buf (never the root). */
static void drop_last(char *buf) {
  char *s = strrchr(buf, '/');
  if (s == buf)
    buf[1] = '\0';
  else if (s)
    *s = '\0';
}

char *nrd_path_weakly_canonical(const char *path) {
  if (!path || !*path) return NULL;
  char *cur = malloc(PATH_MAX);
  if (!cur) return NULL;
  if (path[0] == '/') {
    strcpy(cur, "/");
  } else if (!getcwd(cur, PATH_MAX)) {
    free(cur);
    return NULL;
  }
  bool exists = true; /* cur is a resolved, existing path so far */
  const char *p = path;
  while (*p) {
    while (*p == '/') p++;
    size_t len = strcspn(p, "/");
    if (len == 0) break;
    if (len == 1 && p[0] == '.') {
      /* nothing */
    } else if (len == 2 && p[0] == '.' && p[1] == '.') {
      drop_last(cur);
      struct stat st;
      exists = lstat(cur, &st) == 0; /* back in the part that exists */
    } else {
      size_t used = strlen(cur);
      if (used + len + 2 > PATH_MAX) {
        free(cur);
        return NULL;
      }
      if (cur[used - 1] != '/') cur[used++] = '/';
      memcpy(cur + used, p, len);
      cur[used + len] = '\0';
      struct stat st;
      if (exists && lstat(cur, &st) == 0) {
        char *real = realpath(cur, NULL);
        if (!real) { /* a dangling link or no permission: cannot tell where it leads */
          free(cur);
          return NULL;
        }
        snprintf(cur, PATH_MAX, "%s", real);
        free(real);
      } else {
        exists = false;
      }
    }
    p += len;
  }
  return cur;
}

TRITONSERVER_Error *nrd_path_inside(const char *child, const char *parent, bool *inside) {
  *inside = false;
  char *rp = realpath(parent, NULL);
  if (!rp) return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "cannot resolve '%s': %s", parent, strerror(errno));
  char *rc = nrd_path_weakly_canonical(child);
  if (rc) {
    size_t n = strlen(rp);
    if (n == 1) /* parent is "/" */
      *inside = true;
    else
      *inside = !strncmp(rc, rp, n) && (rc[n] == '\0' || rc[n] == '/');
  }
  free(rc);
  free(rp);
  return NULL;
}
