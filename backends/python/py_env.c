/*
 * EXECUTION_ENV_PATH: directories as they are, archives unpacked with
 * tar(1) into the backend's cache, once per archive version.
 */
#include "py_env.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef NRD_PY_VERSION
#error "NRD_PY_VERSION (the embedded Python's X.Y) must be defined"
#endif

#define KEYWORD "$$TRITON_MODEL_DIRECTORY"

extern char **environ;

void nrd_py_env_cache_init(nrd_py_env_cache *cache) {
  pthread_mutex_init(&cache->lock, NULL);
  cache->dir[0] = '\0';
}

static int open_up(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)ftw;
  if (flag == FTW_D && !S_ISLNK(st->st_mode)) {
    chmod(path, 0700); /* an archive's read-only folder must be emptied */
  }
  return 0;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  remove(path);
  return 0;
}

/* Removes 'dir' and everything under it, never following links. */
static void remove_tree(const char *dir) {
  nftw(dir, open_up, 16, FTW_PHYS);
  nftw(dir, remove_one, 16, FTW_PHYS | FTW_DEPTH);
}

void nrd_py_env_cache_fini(nrd_py_env_cache *cache) {
  pthread_mutex_lock(&cache->lock);
  if (cache->dir[0] != '\0') {
    remove_tree(cache->dir);
    cache->dir[0] = '\0';
  }
  pthread_mutex_unlock(&cache->lock);
  pthread_mutex_destroy(&cache->lock);
}

/* 'value' with every "$$TRITON_MODEL_DIRECTORY" replaced by 'model_dir';
 * NULL when out of memory. */
static char *substitute(const char *value, const char *model_dir) {
  size_t klen = strlen(KEYWORD), dlen = strlen(model_dir), n = 0;
  for (const char *p = strstr(value, KEYWORD); p != NULL; p = strstr(p + klen, KEYWORD)) {
    n++;
  }
  char *out = malloc(strlen(value) + n * dlen + 1);
  if (out == NULL) {
    return NULL;
  }
  char *w = out;
  for (const char *p = value;;) {
    const char *k = strstr(p, KEYWORD);
    if (k == NULL) {
      strcpy(w, p);
      break;
    }
    memcpy(w, p, (size_t)(k - p));
    w += k - p;
    memcpy(w, model_dir, dlen);
    w += dlen;
    p = k + klen;
  }
  return out;
}

static uint64_t fnv(uint64_t h, const void *data, size_t n) {
  const unsigned char *p = data;
  for (size_t i = 0; i < n; i++) {
    h = (h ^ p[i]) * 0x100000001b3ull;
  }
  return h;
}

/* Runs tar to unpack 'archive' into the existing directory 'into'. On
 * failure returns a malloc'ed reason (tar's own words). */
static char *untar(const char *archive, const char *into) {
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) {
    char *m = NULL;
    return asprintf(&m, "pipe: %s", strerror(errno)) < 0 ? NULL : m;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
  posix_spawn_file_actions_adddup2(&fa, pipefd[1], 2);
  char *argv[] = {"tar", "--no-same-owner", "-xf", (char *)archive, "-C", (char *)into, NULL};
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, "tar", &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(pipefd[1]);
  if (rc != 0) {
    close(pipefd[0]);
    char *m = NULL;
    return asprintf(&m, "cannot run tar: %s", strerror(rc)) < 0 ? NULL : m;
  }
  char said[1024];
  size_t len = 0;
  for (;;) {
    ssize_t r = read(pipefd[0], said + len, sizeof said - 1 - len);
    if (r < 0 && errno == EINTR) {
      continue;
    }
    if (r <= 0) {
      break;
    }
    len += (size_t)r;
    if (len == sizeof said - 1) {
      char sink[512]; /* keep draining so tar never blocks */
      while (read(pipefd[0], sink, sizeof sink) > 0) {
      }
      break;
    }
  }
  said[len] = '\0';
  close(pipefd[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    return NULL;
  }
  while (len > 0 && (said[len - 1] == '\n' || said[len - 1] == ' ')) {
    said[--len] = '\0';
  }
  for (char *c = said; *c; c++) {
    if (*c == '\n') *c = ' ';
  }
  char *m = NULL;
  return asprintf(&m, "tar failed (%s)", len ? said : "no message") < 0 ? NULL : m;
}

/* Unpacks 'real' (stat 'st') into the cache unless done already; '*out'
 * is the tree. Called with the cache lock held. */
static char *unpack(nrd_py_env_cache *cache, const char *real, const struct stat *st, char **out) {
  if (cache->dir[0] == '\0') {
    const char *tmp = getenv("TMPDIR");
    snprintf(cache->dir, sizeof cache->dir, "%s/nereid_python_env_XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (mkdtemp(cache->dir) == NULL) {
      char *m = NULL;
      int e = errno;
      int n = asprintf(&m, "cannot make a cache directory %s: %s", cache->dir, strerror(e));
      cache->dir[0] = '\0';
      return n < 0 ? NULL : m;
    }
  }
  uint64_t h = 0xcbf29ce484222325ull;
  h = fnv(h, real, strlen(real) + 1);
  h = fnv(h, &st->st_mtim, sizeof st->st_mtim);
  h = fnv(h, &st->st_size, sizeof st->st_size);
  h = fnv(h, &st->st_ino, sizeof st->st_ino);
  char *dest = NULL;
  if (asprintf(&dest, "%s/%016llx", cache->dir, (unsigned long long)h) < 0) {
    return NULL;
  }
  struct stat ds;
  if (stat(dest, &ds) == 0 && S_ISDIR(ds.st_mode)) {
    *out = dest; /* unpacked before: this archive, this version */
    return NULL;
  }
  char *work = NULL;
  if (asprintf(&work, "%s/unpacking.XXXXXX", cache->dir) < 0) {
    free(dest);
    return NULL;
  }
  char *why = NULL;
  if (mkdtemp(work) == NULL) {
    why = NULL;
    if (asprintf(&why, "cannot make %s: %s", work, strerror(errno)) < 0) why = NULL;
  } else if ((why = untar(real, work)) == NULL && rename(work, dest) != 0) {
    if (asprintf(&why, "cannot rename %s: %s", work, strerror(errno)) < 0) why = NULL;
  }
  if (why != NULL) {
    remove_tree(work);
    free(work);
    free(dest);
    return why;
  }
  free(work);
  NRD_BU_LOG(TRITONSERVER_LOG_INFO, "python: unpacked the Python execution environment %s into %s", real, dest);
  *out = dest;
  return NULL;
}

TRITONSERVER_Error *nrd_py_env_resolve(nrd_py_env_cache *cache, const char *model, const char *model_dir,
                                       const char *value, char **env_dir) {
  *env_dir = NULL;
  char *path = substitute(value, model_dir);
  if (path == NULL) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL, "python: out of memory");
  }
  char real[PATH_MAX];
  struct stat st;
  if (realpath(path, real) == NULL || stat(real, &st) != 0) {
    /* Triton's sentence first, then which parameter and why. */
    TRITONSERVER_Error *err =
        nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                          "Failed to get the canonical path for %s. (python: model '%s' parameter "
                          "EXECUTION_ENV_PATH '%s': %s)",
                          path, model, value, strerror(errno));
    free(path);
    return err;
  }
  char *dir = NULL;
  if (S_ISDIR(st.st_mode)) {
    dir = strdup(real);
  } else {
    pthread_mutex_lock(&cache->lock);
    char *why = unpack(cache, real, &st, &dir);
    pthread_mutex_unlock(&cache->lock);
    if (why != NULL || dir == NULL) {
      TRITONSERVER_Error *err =
          nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                            "python: model '%s' parameter EXECUTION_ENV_PATH '%s': cannot unpack %s as a tar "
                            "archive: %s",
                            model, value, real, why ? why : "out of memory");
      free(why);
      free(path);
      return err;
    }
  }
  free(path);
  if (dir == NULL) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL, "python: out of memory");
  }
  char check[PATH_MAX + 64];
  snprintf(check, sizeof check, "%s/bin/activate", dir);
  if (access(check, R_OK) != 0) {
    TRITONSERVER_Error *err = nrd_bu_error_newf(
        TRITONSERVER_ERROR_INVALID_ARG,
        "Path %s does not exist. The Python environment should contain an 'activate' script. (python: model "
        "'%s' parameter EXECUTION_ENV_PATH '%s')",
        check, model, value);
    free(dir);
    return err;
  }
  snprintf(check, sizeof check, "%s/lib/python%s", dir, NRD_PY_VERSION);
  if (access(check, R_OK | X_OK) != 0) {
    TRITONSERVER_Error *err =
        nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                          "python: model '%s' parameter EXECUTION_ENV_PATH '%s': the environment has no "
                          "lib/python%s; its Python must be the stub's (Python %s)",
                          model, value, NRD_PY_VERSION, NRD_PY_VERSION);
    free(dir);
    return err;
  }
  *env_dir = dir;
  return NULL;
}
