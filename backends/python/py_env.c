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

/* Runs tar with 'argv' (stdin /dev/null, C locale) and collects what it
 * writes on stdout and stderr, at most 'cap' bytes (the rest is drained),
 * into a malloc'ed NUL-terminated '*said' the caller frees. Returns 0 when
 * tar exited 0, 1 when it failed, -1 when it could not run ('*said' then
 * holds the reason). */
static int run_tar(char *const argv[], size_t cap, char **said) {
  *said = NULL;
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) {
    if (asprintf(said, "pipe: %s", strerror(errno)) < 0) *said = NULL;
    return -1;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
  posix_spawn_file_actions_adddup2(&fa, pipefd[1], 2);
  /* The listing is parsed: dates and quoting as the C locale writes them. */
  size_t n_env = 0;
  while (environ[n_env] != NULL) n_env++;
  char **env = calloc(n_env + 2, sizeof(char *));
  size_t k = 0;
  for (size_t i = 0; env != NULL && i < n_env; i++) {
    if (strncmp(environ[i], "LC_ALL=", 7) != 0 && strncmp(environ[i], "TAR_OPTIONS=", 12) != 0) env[k++] = environ[i];
  }
  if (env != NULL) env[k++] = "LC_ALL=C";
  pid_t pid = 0;
  int rc = env == NULL ? ENOMEM : posix_spawnp(&pid, "tar", &fa, NULL, argv, env);
  free(env);
  posix_spawn_file_actions_destroy(&fa);
  close(pipefd[1]);
  if (rc != 0) {
    close(pipefd[0]);
    if (asprintf(said, "cannot run tar: %s", strerror(rc)) < 0) *said = NULL;
    return -1;
  }
  char *buf = malloc(cap + 1);
  size_t len = 0;
  for (;;) {
    char sink[4096];
    bool keep = buf != NULL && len < cap;
    ssize_t r = keep ? read(pipefd[0], buf + len, cap - len) : read(pipefd[0], sink, sizeof sink);
    if (r < 0 && errno == EINTR) {
      continue;
    }
    if (r <= 0) {
      break;
    }
    if (keep) {
      len += (size_t)r; /* past 'cap' the rest is drained so tar never blocks */
    }
  }
  close(pipefd[0]);
  if (buf != NULL) {
    buf[len] = '\0';
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  *said = buf;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

/* Runs tar to unpack 'archive' into the existing directory 'into'. On
 * failure returns a malloc'ed reason (tar's own words). */
static char *untar(const char *archive, const char *into) {
  char *argv[] = {"tar", "--no-same-owner", "-xf", (char *)archive, "-C", (char *)into, NULL};
  char *said = NULL;
  int rc = run_tar(argv, 1023, &said);
  if (rc == 0) {
    free(said);
    return NULL;
  }
  if (rc < 0) {
    return said;
  }
  size_t len = said ? strlen(said) : 0;
  while (len > 0 && (said[len - 1] == '\n' || said[len - 1] == ' ')) {
    said[--len] = '\0';
  }
  for (char *c = said; c && *c; c++) {
    if (*c == '\n') *c = ' ';
  }
  char *m = NULL;
  if (asprintf(&m, "tar failed (%s)", len ? said : "no message") < 0) m = NULL;
  free(said);
  return m;
}

/* 'name' (an archive member as tar lists it) without leading "./", "."
 * components, repeated or trailing slashes, in place. */
static void tidy_member(char *name) {
  char *w = name;
  const char *p = name;
  while (*p) {
    while (*p == '/') p++;
    size_t len = strcspn(p, "/");
    if (len == 0) break;
    if (!(len == 1 && p[0] == '.')) {
      if (w != name) *w++ = '/';
      memmove(w, p, len);
      w += len;
    }
    p += len;
  }
  *w = '\0';
}

/* Why member 'name' may not be unpacked, as libarchive's secure
 * extraction says it (Triton's python backend unpacks with it): an
 * absolute path, or a ".." component. NULL when it is fine. */
static const char *member_escapes(const char *name) {
  if (name[0] == '/') {
    return "Path is absolute";
  }
  for (const char *p = name;;) {
    size_t len = strcspn(p, "/");
    if (len == 2 && p[0] == '.' && p[1] == '.') {
      return "Path contains '..'";
    }
    p += len;
    if (*p == '\0') {
      return NULL;
    }
    p++;
  }
}

/* The double-quoted string at *p (tar's C quoting; escapes stay as they
 * are, which leaves '/' and '.' as they were), NUL-terminated in place;
 * *p moves past it. NULL when *p holds no whole quoted string. */
static char *quoted(char **p) {
  char *s = *p;
  if (*s != '"') {
    return NULL;
  }
  char *start = ++s;
  while (*s != '\0' && *s != '"') {
    if (*s == '\\' && s[1] != '\0') {
      s++;
    }
    s++;
  }
  if (*s != '"') {
    return NULL;
  }
  *s = '\0';
  *p = s + 1;
  return start;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Lists 'archive' and refuses it when a member would land outside the
 * folder it is unpacked into: an absolute name, a ".." component (in a
 * name or a hard link's target), or a member under another member that
 * is a symbolic link (it would be written through the link). NULL when
 * every member stays inside, else a malloc'ed reason naming the member. */
static char *check_members(const char *archive) {
  /* --absolute-names: the names and link targets as stored (tar would
   * otherwise show them with a leading "/" or "../" taken off);
   * --quoting-style=c: each in double quotes, so a name holding " -> "
   * or a newline cannot pass for another. */
  char *argv[] = {"tar", "--absolute-names", "--numeric-owner", "--quoting-style=c", "-tvf", (char *)archive, NULL};
  char *said = NULL;
  int rc = run_tar(argv, (size_t)256 << 20, &said);
  if (rc != 0) {
    char *m = NULL;
    if (rc < 0) return said;
    if (asprintf(&m, "tar cannot list it (%.300s)", said ? said : "no message") < 0) m = NULL;
    free(said);
    return m;
  }
  /* One member a line: perms owner/group size date time "name", then
   * -> "target" for a symbolic link, link to "target" for a hard link. */
  size_t n = 0;
  for (const char *c = said; c && *c; c++) n += *c == '\n';
  typedef struct member {
    char type;
    char *name;
    char *target;
  } member;
  member *all = calloc(n + 1, sizeof(member));
  char **links = calloc(n + 1, sizeof(char *));
  size_t n_all = 0, n_links = 0;
  char *why = NULL;
  if (all == NULL || links == NULL) {
    why = strdup("out of memory");
  }
  for (char *line = said; why == NULL && line && *line;) {
    char *eol = strchr(line, '\n');
    if (eol) *eol = '\0';
    if (strncmp(line, "tar: ", 5) == 0 || line[0] == '\0') { /* a warning of tar's, not a member */
      line = eol ? eol + 1 : NULL;
      continue;
    }
    member *m = &all[n_all++];
    m->type = line[0];
    char *p = line;
    for (int field = 0; field < 5 && *p; field++) {
      p += strcspn(p, " ");
      p += strspn(p, " ");
    }
    m->name = quoted(&p);
    if ((m->type == 'l' || m->type == 'h') && m->name != NULL) {
      while (*p != '\0' && *p != '"') p++;
      m->target = quoted(&p);
    }
    if (m->name == NULL || ((m->type == 'l' || m->type == 'h') && m->target == NULL)) {
      if (asprintf(&why, "tar's listing has a line it cannot read: %.300s", line) < 0) why = NULL;
      if (why == NULL) why = strdup("tar's listing has a line it cannot read");
    }
    line = eol ? eol + 1 : NULL;
  }
  for (size_t i = 0; why == NULL && i < n_all; i++) {
    const char *which = all[i].name;
    const char *bad = member_escapes(which);
    if (bad == NULL && all[i].type == 'h' && all[i].target != NULL && (bad = member_escapes(all[i].target)) != NULL) {
      which = all[i].target;
    }
    if (bad != NULL && asprintf(&why, "member '%s': %s", which, bad) < 0) why = strdup(bad);
    tidy_member(all[i].name);
    if (all[i].type == 'l' && all[i].name[0] != '\0') links[n_links++] = all[i].name;
  }
  if (n_links > 1) qsort(links, n_links, sizeof(char *), cmp_str);
  for (size_t i = 0; why == NULL && n_links > 0 && i < n_all; i++) {
    /* Every leading folder of the member: is it a link in the archive? */
    /* (A copy: the names in 'links' are the members' own strings.) */
    const char *name = all[i].name;
    char *lead = strdup(name);
    if (lead == NULL) {
      why = strdup("out of memory");
      break;
    }
    for (char *slash = strchr(lead, '/'); slash != NULL && why == NULL; slash = strchr(slash + 1, '/')) {
      *slash = '\0';
      const char *key = lead;
      bool through = bsearch(&key, links, n_links, sizeof(char *), cmp_str) != NULL;
      if (through && asprintf(&why, "member '%s': Cannot extract through symlink %s", name, lead) < 0)
        why = strdup("Cannot extract through symlink");
      *slash = '/';
    }
    free(lead);
  }
  free(all);
  free(links);
  free(said);
  return why;
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
  char *why = check_members(real);
  if (why != NULL) {
    free(work);
    free(dest);
    return why;
  }
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
                                       const char *value, bool allow_outside, char **env_dir) {
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
  if (!allow_outside) {
    /* Only what the model folder holds (and $$TRITON_MODEL_DIRECTORY
     * names) may become its environment: a client's config override must
     * not point a model at any folder or archive of the machine. */
    char home[PATH_MAX];
    size_t hn = 0;
    bool inside = realpath(model_dir, home) != NULL && (hn = strlen(home)) > 0 && strncmp(real, home, hn) == 0 &&
                  (real[hn] == '/' || real[hn] == '\0' || hn == 1);
    if (!inside) {
      TRITONSERVER_Error *err = nrd_bu_error_newf(
          TRITONSERVER_ERROR_INVALID_ARG,
          "python: model '%s' parameter EXECUTION_ENV_PATH '%s': %s is outside the model directory %s "
          "(--backend-config=python,execution-env-outside-model=true allows it)",
          model, value, real, model_dir);
      free(path);
      return err;
    }
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
