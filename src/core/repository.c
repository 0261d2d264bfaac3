/* Model repository: scanning folders, version policies, loading and
 * unloading models, polling for changes, the repository index. */
#include "repository.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <time.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "files.h"
#include "log.h"
#include "model_config.h"
#include "model_load.h"
#include "parameter.h"
#include "repo_agent.h"
#include "text.h"

/* ------------------------------------------------------------ helpers */

static bool is_dir(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }
static int cmp_i64_desc(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? 1 : x > y ? -1 : 0;
}

/* Newest modification time (ns) of anything under `path`, for polling. */
static uint64_t newest_mtime(const char *path, int depth) {
  struct stat st;
  if (lstat(path, &st)) return 0;
  uint64_t best = (uint64_t)st.st_mtim.tv_sec * 1000000000u + (uint64_t)st.st_mtim.tv_nsec;
  if (!S_ISDIR(st.st_mode) || depth > 8) return best;
  DIR *d = opendir(path);
  if (!d) return best;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char *sub = nrd_path_join(path, e->d_name);
    if (!sub) continue;
    uint64_t t = newest_mtime(sub, depth + 1);
    if (t > best) best = t;
    free(sub);
  }
  closedir(d);
  return best;
}

static void slot_clear(nrd_version_slot *s) {
  free(s->reason);
  s->reason = NULL;
}

static void slots_free(nrd_version_slot *s, size_t n) {
  for (size_t i = 0; i < n; i++) slot_clear(&s[i]);
  free(s);
}

/* ------------------------------------------------------------ lifetime */

struct nrd_bg_tracker {
  pthread_mutex_t lock;
  pthread_cond_t done;
  unsigned running;
  unsigned refs; /* the repository's and one per running job */
};

static atomic_bool any_abandoned;

bool nrd_repo_any_abandoned(void) { return atomic_load(&any_abandoned); }

static void bg_unref(struct nrd_bg_tracker *t) {
  if (!t) return;
  pthread_mutex_lock(&t->lock);
  bool last = --t->refs == 0;
  pthread_mutex_unlock(&t->lock);
  if (!last) return;
  pthread_mutex_destroy(&t->lock);
  pthread_cond_destroy(&t->done);
  free(t);
}

nrd_repository *nrd_repo_new(TRITONSERVER_Server *server, const nrd_step_resolver *steps, char *const *paths,
                             size_t n_paths, const char *backend_dir, const char *agent_dir, json_t *backend_cmdline,
                             bool auto_complete, const char *config_name, unsigned exit_timeout_s) {
  nrd_repository *r = calloc(1, sizeof(*r));
  if (!r) {
    json_decref(backend_cmdline);
    return NULL;
  }
  r->server = server;
  if (steps) r->steps = *steps;
  r->backend_cmdline = backend_cmdline;
  r->auto_complete = auto_complete;
  atomic_init(&r->exit_timeout_s, exit_timeout_s);
  r->backend_dir = strdup(backend_dir ? backend_dir : "");
  r->config_name = strdup(config_name ? config_name : "");
  r->agent_dir = strdup(agent_dir ? agent_dir : "");
  r->paths = calloc(n_paths ? n_paths : 1, sizeof(char *));
  pthread_rwlock_init(&r->table_lock, NULL);
  pthread_rwlock_init(&r->paths_lock, NULL);
  pthread_mutex_init(&r->op_lock, NULL);
  r->bg = calloc(1, sizeof(*r->bg));
  if (r->bg) {
    pthread_mutex_init(&r->bg->lock, NULL);
    pthread_cond_init(&r->bg->done, NULL);
    r->bg->refs = 1;
  }
  bool ok = r->bg && r->backend_dir && r->agent_dir && r->config_name && r->paths;
  for (size_t i = 0; ok && i < n_paths; i++) {
    r->paths[i] = strdup(paths[i]);
    if (!r->paths[i])
      ok = false;
    else
      r->n_paths++;
  }
  if (!ok) {
    nrd_repo_free(r);
    return NULL;
  }
  return r;
}

static void entry_unload_all(nrd_repository *r, nrd_model_entry *e) {
  for (size_t i = 0; i < e->n_slots; i++) {
    if (e->slots[i].model) {
      TRITONBACKEND_Model *m = e->slots[i].model;
      e->slots[i].model = NULL;
      nrd_model_unload(m, atomic_load(&r->exit_timeout_s));
    }
  }
}

static void mappings_free(nrd_repo_mapping *m, size_t n) {
  for (size_t i = 0; i < n; i++) {
    free(m[i].name);
    free(m[i].repo);
    free(m[i].dir);
  }
}

void nrd_repo_free(nrd_repository *r) {
  if (!r) return;
  if (r->bg && nrd_repo_wait_background(r, atomic_load(&r->exit_timeout_s)))
    NRD_LOG_ERROR("exit timeout (%u s) expired with model unloads still running; abandoning them",
                  atomic_load(&r->exit_timeout_s));
  for (size_t i = 0; i < r->n_models; i++) {
    nrd_model_entry *e = &r->models[i];
    nrd_agent_chain_tell(e->agents, TRITONREPOAGENT_ACTION_UNLOAD);
    entry_unload_all(r, e);
    nrd_agent_chain_free(e->agents);
    slots_free(e->slots, e->n_slots);
    if (e->override_dir) nrd_remove_tree(e->override_dir);
    free(e->override_dir);
    free(e->name);
    free(e->ns);
    free(e->dir);
    free(e->reason);
  }
  free(r->models);
  for (size_t i = 0; i < r->n_paths; i++) free(r->paths[i]);
  free(r->paths);
  mappings_free(r->maps, r->n_maps);
  free(r->maps);
  pthread_rwlock_destroy(&r->paths_lock);
  free(r->backend_dir);
  free(r->agent_dir);
  if (r->override_base) nrd_remove_tree(r->override_base); /* the loads' folders went above */
  free(r->override_base);
  free(r->config_name);
  json_decref(r->backend_cmdline);
  pthread_rwlock_destroy(&r->table_lock);
  pthread_mutex_destroy(&r->op_lock);
  bg_unref(r->bg);
  free(r);
}

/* ------------------------------------------------------------ scanning */

static const nrd_repo_mapping *mapping_named(const nrd_repository *r, const char *name) {
  for (size_t i = 0; i < r->n_maps; i++)
    if (!strcmp(r->maps[i].name, name)) return &r->maps[i];
  return NULL;
}

/* Whether folder `dir` has a mapped name (it is then known by that name only). */
static bool folder_mapped(const nrd_repository *r, const char *dir) {
  for (size_t i = 0; i < r->n_maps; i++)
    if (!strcmp(r->maps[i].dir, dir)) return true;
  return false;
}

/* Adds a copy of `name` to the list unless it is there. 0, or -1 on out-of-memory. */
static int add_name(char ***names, size_t *n, size_t *cap, const char *name) {
  for (size_t i = 0; i < *n; i++)
    if (!strcmp((*names)[i], name)) return 0; /* duplicates are reported at load time */
  if (*n == *cap) {
    size_t c = *cap ? *cap * 2 : 16;
    char **nn = realloc(*names, c * sizeof(char *));
    if (!nn) return -1;
    *names = nn;
    *cap = c;
  }
  if (!((*names)[*n] = strdup(name))) return -1;
  (*n)++;
  return 0;
}

TRITONSERVER_Error *nrd_repo_scan(nrd_repository *r, char ***names_out, size_t *n_out) {
  char **names = NULL;
  size_t n = 0, cap = 0;
  TRITONSERVER_Error *err = NULL;
  pthread_rwlock_rdlock(&r->paths_lock);
  for (size_t i = 0; i < r->n_maps && !err; i++)
    if (is_dir(r->maps[i].dir) && add_name(&names, &n, &cap, r->maps[i].name) != 0)
      err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory scanning repository");
  for (size_t p = 0; p < r->n_paths && !err; p++) {
    DIR *d = opendir(r->paths[p]);
    if (!d) {
      err = nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "failed to open model repository '%s': %s", r->paths[p],
                          strerror(errno));
      break;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
      if (e->d_name[0] == '.') continue;
      char *full = nrd_path_join(r->paths[p], e->d_name);
      bool dir = full && is_dir(full) && !folder_mapped(r, full);
      free(full);
      if (!dir) continue;
      if (add_name(&names, &n, &cap, e->d_name) != 0) {
        err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory scanning repository");
        break;
      }
    }
    closedir(d);
  }
  pthread_rwlock_unlock(&r->paths_lock);
  if (err) {
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    return err;
  }
  if (n) qsort(names, n, sizeof(char *), cmp_str);
  *names_out = names;
  *n_out = n;
  return NULL;
}

/* The folder of a model: a registered name mapping, or else exactly one
 * repository path holding a folder of that name (mapped folders are known
 * by their mapped name only). *mapped says which. */
static TRITONSERVER_Error *locate_locked(nrd_repository *r, const char *name, char **dir_out, bool *mapped) {
  const nrd_repo_mapping *m = mapping_named(r, name);
  *mapped = m != NULL;
  if (m) {
    if (!is_dir(m->dir))
      return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "failed to load '%s': mapped path '%s' does not exist", name,
                           m->dir);
    *dir_out = strdup(m->dir);
    return *dir_out ? NULL : nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  }
  char *found = NULL;
  for (size_t p = 0; p < r->n_paths; p++) {
    char *d = nrd_path_join(r->paths[p], name);
    if (!d) {
      free(found);
      return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    }
    if (!is_dir(d) || folder_mapped(r, d)) {
      free(d);
      continue;
    }
    if (found) {
      TRITONSERVER_Error *e =
          nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "model '%s' exists in more than one repository ('%s' and '%s')",
                        name, found, d);
      free(d);
      free(found);
      return e;
    }
    found = d;
  }
  if (!found) /* INTERNAL, as Triton's repository manager answers it */
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "failed to load '%s', failed to poll from model repository",
                         name);
  *dir_out = found;
  return NULL;
}

/* Where a load of `name` reads from: one folder, or with namespacing one
 * per repository that has it, each with its namespace. */
typedef struct repo_place {
  char *ns;
  char *dir;
  bool mapped;
} repo_place;

static void places_free(repo_place *p, size_t n) {
  for (size_t i = 0; i < n; i++) {
    free(p[i].ns);
    free(p[i].dir);
  }
  free(p);
}

static TRITONSERVER_Error *locate_all(nrd_repository *r, const char *name, repo_place **out, size_t *n_out) {
  *out = NULL;
  *n_out = 0;
  /* A name is one folder of a repository, never a path out of it. */
  NRD_RETURN_IF_ERROR(nrd_check_model_name(name));
  pthread_rwlock_rdlock(&r->paths_lock);
  repo_place *p = calloc(r->n_paths + 1, sizeof(*p));
  size_t n = 0;
  TRITONSERVER_Error *err = p ? NULL : nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  const nrd_repo_mapping *m = err ? NULL : mapping_named(r, name);
  if (!err && (!r->namespacing || m)) {
    err = locate_locked(r, name, &p[0].dir, &p[0].mapped);
    if (!err) {
      p[0].ns = strdup(r->namespacing && m ? m->repo : "");
      n = 1;
    }
  } else if (!err) {
    /* Every repository is a namespace: each folder of this name is a model. */
    for (size_t i = 0; i < r->n_paths && !err; i++) {
      char *d = nrd_path_join(r->paths[i], name);
      if (d && is_dir(d) && !folder_mapped(r, d)) {
        p[n].dir = d;
        p[n].ns = strdup(r->paths[i]);
        if (!p[n++].ns) err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
      } else {
        if (!d) err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
        free(d);
      }
    }
    if (!err && !n)
      err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "failed to load '%s', failed to poll from model repository",
                          name);
  }
  pthread_rwlock_unlock(&r->paths_lock);
  for (size_t i = 0; !err && i < n; i++)
    if (!p[i].ns) err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  if (err) {
    if (p) places_free(p, n);
    return err;
  }
  *out = p;
  *n_out = n;
  return NULL;
}

TRITONSERVER_Error *nrd_repo_register(nrd_repository *r, const char *path, const char *const *names,
                                      const char *const *folders, size_t n) {
  if (!is_dir(path))
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "failed to register '%s', repository not found", path);
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < i; k++)
      if (!strcmp(names[i], names[k]))
        return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                             "failed to register '%s', there is a conflicting mapping for '%s'", path, names[i]);
  /* Everything new is built before the lock; nothing is half added. */
  char *path_copy = strdup(path);
  nrd_repo_mapping *fresh = calloc(n ? n : 1, sizeof(*fresh));
  bool ok = path_copy && fresh;
  for (size_t i = 0; ok && i < n; i++) {
    fresh[i].name = strdup(names[i]);
    fresh[i].repo = strdup(path);
    fresh[i].dir = nrd_path_join(path, folders[i]);
    ok = fresh[i].name && fresh[i].repo && fresh[i].dir;
  }
  TRITONSERVER_Error *err = ok ? NULL : nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  if (!err) {
    pthread_mutex_lock(&r->op_lock);
    pthread_rwlock_wrlock(&r->paths_lock);
    for (size_t p = 0; p < r->n_paths && !err; p++)
      if (!strcmp(r->paths[p], path))
        err =
            nrd_error_new(TRITONSERVER_ERROR_ALREADY_EXISTS, "model repository '%s' has already been registered", path);
    for (size_t i = 0; i < n && !err; i++)
      if (mapping_named(r, names[i]))
        err = nrd_error_new(TRITONSERVER_ERROR_ALREADY_EXISTS,
                            "failed to register '%s', there is a conflicting mapping for '%s'", path, names[i]);
    if (!err) {
      char **np = realloc(r->paths, (r->n_paths + 1) * sizeof(char *));
      if (np) r->paths = np;
      nrd_repo_mapping *nm = n ? realloc(r->maps, (r->n_maps + n) * sizeof(*nm)) : r->maps;
      if (nm) r->maps = nm;
      if (!np || (n && !nm)) err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    }
    if (!err) {
      r->paths[r->n_paths++] = path_copy;
      path_copy = NULL;
      if (n) memcpy(&r->maps[r->n_maps], fresh, n * sizeof(*fresh));
      r->n_maps += n;
      n = 0; /* the repository owns them now */
    }
    pthread_rwlock_unlock(&r->paths_lock);
    pthread_mutex_unlock(&r->op_lock);
  }
  if (fresh) mappings_free(fresh, n);
  free(fresh);
  free(path_copy);
  if (!err) NRD_LOG_INFO("model repository registered: %s", path);
  return err;
}

TRITONSERVER_Error *nrd_repo_unregister(nrd_repository *r, const char *path) {
  pthread_mutex_lock(&r->op_lock);
  pthread_rwlock_wrlock(&r->paths_lock);
  size_t at = r->n_paths;
  for (size_t p = 0; p < r->n_paths; p++)
    if (!strcmp(r->paths[p], path)) at = p;
  TRITONSERVER_Error *err = NULL;
  if (at == r->n_paths) {
    err = nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "failed to unregister '%s', repository not found", path);
  } else {
    free(r->paths[at]);
    memmove(&r->paths[at], &r->paths[at + 1], (r->n_paths - at - 1) * sizeof(char *));
    r->n_paths--;
    size_t kept = 0;
    for (size_t i = 0; i < r->n_maps; i++) {
      if (!strcmp(r->maps[i].repo, path))
        mappings_free(&r->maps[i], 1);
      else
        r->maps[kept++] = r->maps[i];
    }
    r->n_maps = kept;
  }
  pthread_rwlock_unlock(&r->paths_lock);
  pthread_mutex_unlock(&r->op_lock);
  if (!err) NRD_LOG_INFO("model repository unregistered: %s", path);
  return err;
}

/* Guesses a backend from the files of a model without config.pbtxt. */
static const char *guess_backend(const char *dir) {
  static const char *const by_file[][2] = {
      {"model.onnx", "onnxruntime"},
      {"model.py", "python"},
      {"model.pt", "pytorch"},
      {"model.plan", "tensorrt"},
      {"model.savedmodel", "tensorflow"},
      {"model.graphdef", "tensorflow"},
  };
  DIR *d = opendir(dir);
  if (!d) return NULL;
  const char *hit = NULL;
  struct dirent *e;
  while (!hit && (e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char *sub = nrd_path_join(dir, e->d_name);
    if (!sub) continue;
    for (size_t i = 0; !hit && i < sizeof by_file / sizeof by_file[0]; i++) {
      char *f = nrd_path_join(sub, by_file[i][0]);
      if (f && access(f, F_OK) == 0) hit = by_file[i][1];
      free(f);
    }
    free(sub);
  }
  closedir(d);
  return hit;
}

/* Reads the configuration of a model folder (or an override). */
static TRITONSERVER_Error *read_config(nrd_repository *r, const char *name, const char *dir, const char *override,
                                       json_t **out) {
  char *msg = NULL;
  if (override) {
    json_t *cfg = nrd_model_config_from_json(override, strlen(override), &msg);
    if (!cfg) {
      /* Triton's sentence (its poll fails on the override), then why. */
      TRITONSERVER_Error *e = nrd_error_new(TRITONSERVER_ERROR_INTERNAL,
                                            "failed to load '%s', failed to poll from model repository; "
                                            "invalid config override: %s",
                                            name, msg ? msg : "");
      free(msg);
      return e;
    }
    *out = cfg;
    return NULL;
  }
  char *path;
  if (*r->config_name) {
    char rel[PATH_MAX];
    snprintf(rel, sizeof rel, "configs/%s.pbtxt", r->config_name);
    path = nrd_path_join(dir, rel);
    if (path && access(path, F_OK) != 0) {
      free(path);
      path = nrd_path_join(dir, "config.pbtxt");
    }
  } else {
    path = nrd_path_join(dir, "config.pbtxt");
  }
  if (!path) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  char *text = NULL;
  size_t len = 0;
  TRITONSERVER_Error *err = nrd_read_file(path, &text, &len);
  if (err && TRITONSERVER_ErrorCode(err) == TRITONSERVER_ERROR_NOT_FOUND) {
    TRITONSERVER_ErrorDelete(err);
    err = NULL;
    if (!r->auto_complete) {
      err = nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                          "model '%s': '%s' not found and auto-complete is disabled (--disable-auto-complete-config)",
                          name, path);
    } else {
      const char *backend = guess_backend(dir);
      if (!backend)
        err = nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                            "model '%s': '%s' not found and its backend cannot be told from its files", name, path);
      else
        *out = json_pack("{s:s,s:s}", "name", name, "backend", backend);
    }
    free(path);
    return err;
  }
  if (err) {
    free(path);
    return err;
  }
  json_t *cfg = nrd_model_config_parse(text, len, path, &msg);
  free(text);
  free(path);
  if (!cfg) {
    err = nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "%s", msg ? msg : "invalid config.pbtxt");
    free(msg);
    return err;
  }
  *out = cfg;
  return NULL;
}

/* Numeric version folders selected by the version policy, highest first. */
static TRITONSERVER_Error *select_versions(const char *name, const char *dir, const json_t *cfg, int64_t **out,
                                           size_t *n_out) {
  int64_t *all = NULL;
  size_t n = 0, cap = 0;
  DIR *d = opendir(dir);
  if (!d)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "cannot open model folder '%s': %s", dir, strerror(errno));
  struct dirent *e;
  while ((e = readdir(d))) {
    const char *s = e->d_name;
    if (!*s || s[0] == '.') continue;
    bool digits = true;
    for (const char *c = s; *c; c++) digits &= *c >= '0' && *c <= '9';
    if (!digits || strlen(s) > 18 || (s[0] == '0' && s[1])) continue;
    char *full = nrd_path_join(dir, s);
    bool ok = full && is_dir(full);
    free(full);
    if (!ok) continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 8;
      int64_t *na = realloc(all, cap * sizeof(int64_t));
      if (!na) {
        closedir(d);
        free(all);
        return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
      }
      all = na;
    }
    all[n++] = strtoll(s, NULL, 10);
  }
  closedir(d);
  if (n) qsort(all, n, sizeof(int64_t), cmp_i64_desc);

  const json_t *policy = json_object_get(cfg, "version_policy");
  const json_t *specific = json_object_get(policy, "specific");
  size_t keep = 0;
  if (json_object_get(policy, "all")) {
    keep = n;
  } else if (specific) {
    const json_t *want = json_object_get(specific, "versions");
    for (size_t i = 0; i < n; i++) {
      bool wanted = false;
      for (size_t w = 0; w < json_array_size(want); w++)
        wanted |= (int64_t)json_integer_value(json_array_get(want, w)) == all[i];
      if (wanted) all[keep++] = all[i];
    }
    for (size_t w = 0; w < json_array_size(want); w++) {
      int64_t v = (int64_t)json_integer_value(json_array_get(want, w));
      bool have = false;
      for (size_t i = 0; i < keep; i++) have |= all[i] == v;
      if (!have) {
        free(all);
        return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                             "model '%s': version %" PRId64 " named by version_policy.specific has no folder in '%s'",
                             name, v, dir);
      }
    }
  } else {
    const json_t *latest = json_object_get(policy, "latest");
    int64_t want = latest ? (int64_t)json_integer_value(json_object_get(latest, "num_versions")) : 1;
    if (want < 1) want = 1;
    keep = n < (size_t)want ? n : (size_t)want;
  }
  if (!keep) {
    free(all);
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "model '%s': no version folder in '%s' is selected by its version policy", name, dir);
  }
  *out = all;
  *n_out = keep;
  return NULL;
}

/* The private root of the file-override folders: one mkdtemp folder
 * (mode 0700) under $TMPDIR (absolute) or /tmp, made at the first
 * override, removed with the repository. Caller holds op_lock. */
static TRITONSERVER_Error *override_base(nrd_repository *r, const char **out) {
  if (!r->override_base) {
    const char *tmp = getenv("TMPDIR");
    char *tmpl = NULL;
    if (asprintf(&tmpl, "%s/nereid-overrides-XXXXXX", tmp && tmp[0] == '/' ? tmp : "/tmp") < 0)
      return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    if (!mkdtemp(tmpl)) {
      TRITONSERVER_Error *e =
          nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "cannot create a folder for file overrides: %s", strerror(errno));
      free(tmpl);
      return e;
    }
    r->override_base = tmpl;
  }
  *out = r->override_base;
  return NULL;
}

/* Whether `rel` (an override's file name after "file:") names a file
 * below the model folder: relative, no empty, "." or ".." component. */
static bool override_name_ok(const char *rel) {
  if (!*rel || rel[0] == '/') return false;
  for (const char *p = rel;;) {
    size_t len = strcspn(p, "/");
    if (len == 0 || (len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.')) return false;
    p += len;
    if (!*p) return true;
    p++;
  }
}

/* Writes LoadModelWithParameters "file:" overrides into a fresh mkdtemp
 * folder under the repository's private root: *root_out (that folder,
 * removed with the load) and *model_dir_out (the model's folder in it).
 * Every file must resolve inside the model folder. Caller holds op_lock. */
static TRITONSERVER_Error *write_overrides(nrd_repository *r, const char *name, const TRITONSERVER_Parameter **files,
                                           size_t n_files, char **root_out, char **model_dir_out) {
  const char *base = NULL;
  NRD_RETURN_IF_ERROR(override_base(r, &base));
  char *root = nrd_path_join(base, "load-XXXXXX");
  if (!root) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  if (!mkdtemp(root)) {
    TRITONSERVER_Error *e =
        nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "cannot create a folder for file overrides: %s", strerror(errno));
    free(root);
    return e;
  }
  char *mdir = nrd_path_join(root, name);
  char *path = NULL;
  TRITONSERVER_Error *err = NULL;
  if (!mdir || mkdir(mdir, 0700)) {
    err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "cannot create a folder for file overrides");
    goto fail;
  }
  for (size_t i = 0; i < n_files; i++) {
    const nrd_param *p = &((const struct TRITONSERVER_Parameter *)files[i])->p;
    const char *rel = p->name + 5; /* after "file:" */
    path = nrd_path_join(mdir, rel);
    if (!path) {
      err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
      goto fail;
    }
    for (char *c = path + strlen(mdir) + 1; override_name_ok(rel) && *c; c++) {
      if (*c != '/') continue;
      *c = '\0';
      if (mkdir(path, 0700) && errno != EEXIST) {
        err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "cannot create the folder of file override '%s': %s", p->name,
                            strerror(errno));
        goto fail;
      }
      *c = '/';
    }
    bool inside = false;
    if (override_name_ok(rel)) err = nrd_path_inside(path, mdir, &inside);
    if (err) goto fail;
    if (!inside) {
      /* An absolute name is shown as it is: joined it would read as inside. */
      char *norm = rel[0] == '/' ? nrd_path_weakly_canonical(rel) : nrd_path_weakly_canonical(path);
      err = nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                          "Invalid file parameter '%s' with normalized path '%s' must stay within model directory.",
                          p->name, norm ? norm : path);
      free(norm);
      goto fail;
    }
    /* A fresh private folder holds no links; O_NOFOLLOW says so again. */
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f && fd >= 0) close(fd);
    bool ok = f && fwrite(p->v.bytes.p, 1, p->v.bytes.n, f) == p->v.bytes.n;
    if (f) ok &= fclose(f) == 0;
    if (!ok) {
      err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "cannot write file override '%s'", p->name);
      goto fail;
    }
    free(path);
    path = NULL;
  }
  *root_out = root;
  *model_dir_out = mdir;
  return NULL;
fail:
  free(path);
  nrd_remove_tree(root);
  free(root);
  free(mdir);
  return err;
}

/* ------------------------------------------------------------ the table */

/* The entry of `name` in namespace `ns`; caller holds the table lock. */
static nrd_model_entry *find_entry(nrd_repository *r, const char *ns, const char *name) {
  for (size_t i = 0; i < r->n_models; i++)
    if (!strcmp(r->models[i].name, name) && !strcmp(r->models[i].ns, ns)) return &r->models[i];
  return NULL;
}

/* Whether the table has an entry of `name` outside any namespace; takes
 * the table lock for reading. */
static bool entry_known(nrd_repository *r, const char *name) {
  pthread_rwlock_rdlock(&r->table_lock);
  bool known = find_entry(r, "", name) != NULL;
  pthread_rwlock_unlock(&r->table_lock);
  return known;
}

/* The entry a name alone means: without namespacing the only one; with
 * it, the one loaded entry of that name (else any entry of it, for its
 * reasons). More than one loaded: NULL and an INVALID_ARG in *err, as
 * Triton answers. Caller holds the table lock. */
static nrd_model_entry *named_entry(nrd_repository *r, const char *name, TRITONSERVER_Error **err) {
  *err = NULL;
  if (!r->namespacing) return find_entry(r, "", name);
  nrd_model_entry *loaded = NULL, *any = NULL;
  size_t n_loaded = 0;
  for (size_t i = 0; i < r->n_models; i++) {
    nrd_model_entry *e = &r->models[i];
    if (strcmp(e->name, name)) continue;
    if (!any) any = e;
    if (e->attempted && n_loaded++ == 0) loaded = e;
  }
  if (n_loaded > 1) {
    *err = nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "There are %zu identifiers of model '%s' (one per repository namespace): model namespace "
                         "must be provided to resolve ambiguity",
                         n_loaded, name);
    return NULL;
  }
  return loaded ? loaded : any;
}

/* Finds or adds an entry; caller holds the table write lock. */
static nrd_model_entry *entry_for(nrd_repository *r, const char *ns, const char *name) {
  nrd_model_entry *e = find_entry(r, ns, name);
  if (e) return e;
  if (r->n_models == r->cap_models) {
    size_t cap = r->cap_models ? r->cap_models * 2 : 16;
    nrd_model_entry *nm = realloc(r->models, cap * sizeof(*nm));
    if (!nm) return NULL;
    r->models = nm;
    r->cap_models = cap;
  }
  e = &r->models[r->n_models];
  memset(e, 0, sizeof(*e));
  if (!(e->name = strdup(name))) return NULL;
  if (!(e->ns = strdup(ns))) {
    free(e->name);
    return NULL;
  }
  r->n_models++;
  return e;
}

static void set_reason(char **slot, const char *why) {
  free(*slot);
  *slot = why ? strdup(why) : NULL;
}

void nrd_repo_ensemble_steps(nrd_repository *r, const char *name, char ***steps, size_t *n) {
  *steps = NULL;
  *n = 0;
  repo_place *places = NULL;
  size_t n_places = 0, cap = 0;
  pthread_mutex_lock(&r->op_lock);
  TRITONSERVER_Error *err = locate_all(r, name, &places, &n_places);
  if (err) TRITONSERVER_ErrorDelete(err);
  /* With namespacing a name may be an ensemble in several repositories:
   * the steps of all of them. */
  for (size_t p = 0; p < n_places; p++) {
    json_t *cfg = NULL;
    err = read_config(r, name, places[p].dir, NULL, &cfg);
    if (err) TRITONSERVER_ErrorDelete(err);
    const json_t *platform = json_object_get(cfg, "platform");
    const json_t *list = json_object_get(json_object_get(cfg, "ensemble_scheduling"), "step");
    if (json_is_string(platform) && !strcmp(json_string_value(platform), NRD_ENSEMBLE_PLATFORM)) {
      for (size_t i = 0; i < json_array_size(list); i++) {
        const char *m = json_string_value(json_object_get(json_array_get(list, i), "model_name"));
        if (m && add_name(steps, n, &cap, m) != 0) break;
      }
    }
    json_decref(cfg);
  }
  pthread_mutex_unlock(&r->op_lock);
  places_free(places, n_places);
}

bool nrd_repo_is_ensemble(nrd_repository *r, const char *name) {
  char **steps = NULL;
  size_t n = 0;
  nrd_repo_ensemble_steps(r, name, &steps, &n);
  for (size_t i = 0; i < n; i++) free(steps[i]);
  free(steps);
  return n > 0;
}

typedef struct reread_ctx {
  nrd_repository *r;
  const char *name;
} reread_ctx;

/* The configuration a load would read in `dir`, for an agent after one
 * that moved the model; NULL when there is none to read. */
static json_t *reread_config(void *ctx, const char *dir) {
  reread_ctx *c = ctx;
  json_t *cfg = NULL;
  TRITONSERVER_Error *err = read_config(c->r, c->name, dir, NULL, &cfg);
  if (err) {
    NRD_LOG_WARN("model '%s': no configuration for the next repo agent in '%s': %s", c->name, dir,
                 TRITONSERVER_ErrorMessage(err));
    TRITONSERVER_ErrorDelete(err);
    return NULL;
  }
  return cfg;
}

/* Loads the model `name` of namespace `ns` from `dir` (a temporary
 * `override_root` holds it for file overrides) into its entry, or records
 * `err` there when the load could not even start. Takes `dir`,
 * `override_root` and `err`. The caller holds op_lock. */
static TRITONSERVER_Error *load_at(nrd_repository *r, const char *ns, const char *name, char *dir, bool mapped,
                                   char *override_root, const char *config_override, TRITONSERVER_Error *err) {
  json_t *cfg = NULL;
  int64_t *versions = NULL;
  size_t n_versions = 0;
  nrd_version_slot *slots = NULL;

  if (!err) err = read_config(r, name, dir, config_override, &cfg);
  /* A mapped model takes its mapped name, whatever its configuration says. */
  if (!err && mapped && json_object_set_new(cfg, "name", json_string(name)) != 0)
    err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  /* Repository agents may give another folder to load the versions from;
   * `dir` stays the repository's (polling watches it). */
  nrd_agent_chain *agents = NULL;
  const char *load_dir = dir;
  reread_ctx rc = {r, name};
  if (!err) err = nrd_agent_chain_load(r->agent_dir, name, cfg, dir, reread_config, &rc, &agents, &load_dir);
  if (!err) err = select_versions(name, load_dir, cfg, &versions, &n_versions);
  uint64_t stamp = dir ? newest_mtime(dir, 0) : 0;

  if (!err) {
    slots = calloc(n_versions, sizeof(*slots));
    if (!slots) err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  }
  /* Load every selected version while the old ones keep serving. */
  TRITONSERVER_Error *first_fail = NULL;
  nrd_text fail_text = {0}; /* every failed version's reason, as Triton lists them */
  for (size_t i = 0; !err && i < n_versions; i++) {
    bool whole_model = false;
    nrd_model_load_args a = {
        r->server,          name,     ns, versions[i], load_dir, cfg, r->auto_complete, r->backend_dir,
        r->backend_cmdline, &r->steps, &whole_model};
    slots[i].version = versions[i];
    TRITONSERVER_Error *e = nrd_model_load(&a, &slots[i].model);
    for (unsigned t = 1; e && t <= r->load_retries; t++) {
      NRD_LOG_WARN("failed to load '%s' version %" PRId64 ": %s; retrying (%u of %u)", name, versions[i],
                   TRITONSERVER_ErrorMessage(e), t, r->load_retries);
      TRITONSERVER_ErrorDelete(e);
      slots[i].model = NULL;
      e = nrd_model_load(&a, &slots[i].model);
    }
    if (e) {
      /* Triton's state reason is the status as text: "Invalid argument: ...". */
      char *why = NULL;
      if (asprintf(&why, "%s: %s", TRITONSERVER_ErrorCodeString(e), TRITONSERVER_ErrorMessage(e)) < 0) why = NULL;
      NRD_LOG_ERROR("failed to load '%s' version %" PRId64 ": %s", name, versions[i],
                    why ? why : TRITONSERVER_ErrorMessage(e));
      slots[i].state = NRD_MODEL_UNAVAILABLE;
      set_reason(&slots[i].reason, why ? why : TRITONSERVER_ErrorMessage(e));
      if (whole_model && !fail_text.p)
        nrd_text_appendf(&fail_text, "%s", TRITONSERVER_ErrorMessage(e));
      else if (why && !whole_model)
        nrd_text_appendf(&fail_text, "version %" PRId64 " is at UNAVAILABLE state: %s;", versions[i], why);
      free(why);
      if (!first_fail)
        first_fail = e;
      else
        TRITONSERVER_ErrorDelete(e);
    } else {
      slots[i].state = NRD_MODEL_READY;
      set_reason(&slots[i].reason, "");
    }
  }
  /* Triton loads a model all or nothing: one failed version fails the load. */
  if (first_fail) {
    for (size_t i = 0; i < n_versions; i++) {
      if (slots[i].model) {
        nrd_model_unload(slots[i].model, atomic_load(&r->exit_timeout_s));
        slots[i].model = NULL;
        slots[i].state = NRD_MODEL_UNAVAILABLE;
        if (!slots[i].reason || !*slots[i].reason)
          set_reason(&slots[i].reason, "another version of the model failed to load");
      }
    }
  }

  /* Swap the new versions in; the old ones are unloaded below. */
  nrd_version_slot *old = NULL;
  size_t n_old = 0;
  char *old_override = NULL;
  nrd_agent_chain *old_agents = NULL;
  bool loaded = false; /* the new versions replaced the old ones */
  pthread_rwlock_wrlock(&r->table_lock);
  nrd_model_entry *e = entry_for(r, ns, name);
  if (!e) {
    pthread_rwlock_unlock(&r->table_lock);
    if (!err) err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  } else {
    e->attempted = true;
    if (err) {
      /* Nothing new was loaded: keep serving what we had, note why. */
      set_reason(&e->reason, TRITONSERVER_ErrorMessage(err));
    } else if (first_fail && e->n_slots && e->slots[0].model) {
      /* A failed reload keeps the old versions serving. */
      set_reason(&e->reason, TRITONSERVER_ErrorMessage(first_fail));
      old = slots;
      n_old = n_versions;
      slots = NULL;
    } else {
      old = e->slots;
      n_old = e->n_slots;
      e->slots = slots;
      e->n_slots = n_versions;
      slots = NULL;
      set_reason(&e->reason, first_fail ? TRITONSERVER_ErrorMessage(first_fail) : "");
      free(e->dir);
      e->dir = dir;
      dir = NULL;
      e->stamp = stamp;
      old_override = e->override_dir;
      /* Overridden files that failed to load go now, not at the unload. */
      e->override_dir = first_fail ? NULL : override_root;
      if (!first_fail) override_root = NULL;
      old_agents = e->agents;
      e->agents = first_fail ? NULL : agents;
      loaded = !first_fail;
    }
    pthread_rwlock_unlock(&r->table_lock);
  }
  /* The agents hear how the load ended before the old versions go. */
  if (loaded) {
    nrd_agent_chain_tell(agents, TRITONREPOAGENT_ACTION_LOAD_COMPLETE);
  } else {
    nrd_agent_chain_tell(agents, TRITONREPOAGENT_ACTION_LOAD_FAIL);
    nrd_agent_chain_free(agents);
  }
  nrd_agent_chain_tell(old_agents, TRITONREPOAGENT_ACTION_UNLOAD);
  for (size_t i = 0; i < n_old; i++)
    if (old[i].model) nrd_model_unload(old[i].model, atomic_load(&r->exit_timeout_s));
  nrd_agent_chain_free(old_agents);
  slots_free(old, n_old);
  if (old_override) nrd_remove_tree(old_override);
  free(old_override);

  if (override_root) nrd_remove_tree(override_root);
  free(override_root);
  slots_free(slots, slots ? n_versions : 0);
  free(versions);
  json_decref(cfg);
  free(dir);
  if (err) {
    NRD_LOG_ERROR("failed to load '%s': %s", name, TRITONSERVER_ErrorMessage(err));
    if (first_fail) TRITONSERVER_ErrorDelete(first_fail);
    return err;
  }
  if (first_fail) {
    /* Triton's repository manager: INVALID_ARG whatever the versions said,
     * each failed version's reason, and a newline. */
    err = nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "load failed for model '%s': %s\n", name,
                        fail_text.p ? fail_text.p : TRITONSERVER_ErrorMessage(first_fail));
    TRITONSERVER_ErrorDelete(first_fail);
  }
  free(fail_text.p);
  return err;
}

TRITONSERVER_Error *nrd_repo_load(nrd_repository *r, const char *name, const char *config_override,
                                  const TRITONSERVER_Parameter **files, size_t n_files) {
  /* Every way in (clients, --load-model, ensemble steps) meets this. */
  TRITONSERVER_Error *bad = nrd_check_model_name(name);
  if (bad) return bad;
  if (n_files && !config_override)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "failed to load '%s': file overrides need a 'config' parameter as well", name);
  pthread_mutex_lock(&r->op_lock);
  TRITONSERVER_Error *err = NULL;
  if (n_files) {
    /* Overridden files make a model of no repository: namespace "". */
    char *dir = NULL, *override_root = NULL;
    err = write_overrides(r, name, files, n_files, &override_root, &dir);
    err = load_at(r, "", name, dir, false, override_root, config_override, err);
  } else {
    repo_place *places = NULL;
    size_t n = 0;
    err = locate_all(r, name, &places, &n);
    if (err && r->namespacing) {
      /* Found nowhere: no namespace to note it in. */
      NRD_LOG_ERROR("failed to load '%s': %s", name, TRITONSERVER_ErrorMessage(err));
    } else if (err && TRITONSERVER_ErrorCode(err) == TRITONSERVER_ERROR_INTERNAL && !entry_known(r, name)) {
      /* A name no repository has, never loaded: nothing to record, as in
       * Triton (no index entry, the server stays ready). */
      NRD_LOG_ERROR("failed to load '%s': %s", name, TRITONSERVER_ErrorMessage(err));
    } else if (err) {
      err = load_at(r, "", name, NULL, false, NULL, config_override, err);
    }
    for (size_t i = 0; i < n; i++) {
      TRITONSERVER_Error *e =
          load_at(r, places[i].ns, name, places[i].dir, places[i].mapped, NULL, config_override, NULL);
      places[i].dir = NULL; /* taken */
      if (e && !err)
        err = e;
      else
        NRD_ERROR_IGNORE(e, "a later failure; the first one is returned");
    }
    places_free(places, n);
  }
  pthread_mutex_unlock(&r->op_lock);
  return err;
}

/* Versions taken out of the table, to be drained and finalized. */
typedef struct unload_job {
  struct nrd_bg_tracker *bg; /* counted while the job runs in the background */
  unsigned timeout_s;
  nrd_version_slot *old;
  size_t n_old;
  char *override_dir;
  nrd_agent_chain *agents;
} unload_job;

static void unload_job_run(unload_job *j) {
  nrd_agent_chain_tell(j->agents, TRITONREPOAGENT_ACTION_UNLOAD);
  for (size_t i = 0; i < j->n_old; i++)
    if (j->old[i].model) nrd_model_unload(j->old[i].model, j->timeout_s);
  nrd_agent_chain_free(j->agents); /* UNLOAD_COMPLETE, then finalize */
  slots_free(j->old, j->n_old);
  if (j->override_dir) nrd_remove_tree(j->override_dir);
  free(j->override_dir);
  free(j);
}

static void *unload_job_main(void *arg) {
  unload_job *j = arg;
  struct nrd_bg_tracker *t = j->bg;
  unload_job_run(j);
  pthread_mutex_lock(&t->lock);
  t->running--;
  pthread_cond_broadcast(&t->done);
  pthread_mutex_unlock(&t->lock);
  bg_unref(t);
  return NULL;
}

unsigned nrd_repo_wait_background(nrd_repository *r, unsigned timeout_s) {
  struct nrd_bg_tracker *t = r->bg;
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += timeout_s;
  pthread_mutex_lock(&t->lock);
  while (t->running)
    if (pthread_cond_timedwait(&t->done, &t->lock, &until) == ETIMEDOUT) break;
  unsigned left = t->running;
  pthread_mutex_unlock(&t->lock);
  if (left) atomic_store(&any_abandoned, true);
  return left;
}

/* Unloads the model `name` of namespace `ns` (see nrd_repo_unload). */
static TRITONSERVER_Error *unload_entry(nrd_repository *r, const char *ns, const char *name, bool wait) {
  unload_job *j = calloc(1, sizeof(*j));
  if (!j) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  j->timeout_s = atomic_load(&r->exit_timeout_s);
  pthread_mutex_lock(&r->op_lock);
  pthread_rwlock_wrlock(&r->table_lock);
  nrd_model_entry *e = find_entry(r, ns, name);
  if (e) {
    j->old = e->slots;
    j->n_old = e->n_slots;
    /* Keep the versions listed as unavailable in the index. */
    e->slots = calloc(j->n_old ? j->n_old : 1, sizeof(*e->slots));
    e->n_slots = e->slots ? j->n_old : 0;
    for (size_t i = 0; i < e->n_slots; i++) {
      e->slots[i].version = j->old[i].version;
      e->slots[i].state = NRD_MODEL_UNAVAILABLE;
      e->slots[i].reason = strdup("unloaded");
    }
    e->attempted = false;
    set_reason(&e->reason, "unloaded");
    j->override_dir = e->override_dir;
    e->override_dir = NULL;
    j->agents = e->agents;
    e->agents = NULL;
    /* No new request may reach these versions from now on. */
    for (size_t i = 0; i < j->n_old; i++)
      if (j->old[i].model) atomic_store(&j->old[i].model->state, NRD_MODEL_UNLOADING);
  }
  pthread_rwlock_unlock(&r->table_lock);
  pthread_mutex_unlock(&r->op_lock);
  if (!wait) {
    pthread_t t;
    struct nrd_bg_tracker *bg = r->bg;
    pthread_mutex_lock(&bg->lock);
    bg->running++;
    bg->refs++;
    pthread_mutex_unlock(&bg->lock);
    j->bg = bg;
    if (pthread_create(&t, NULL, unload_job_main, j) == 0) {
      pthread_detach(t);
      return NULL;
    }
    pthread_mutex_lock(&bg->lock);
    bg->running--;
    bg->refs--;
    pthread_mutex_unlock(&bg->lock);
    j->bg = NULL;
  }
  unload_job_run(j);
  return NULL;
}

TRITONSERVER_Error *nrd_repo_unload(nrd_repository *r, const char *name, bool wait) {
  if (!name) return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "model name must not be NULL");
  if (!r->namespacing) return unload_entry(r, "", name, wait);
  /* Every namespace's model of that name. */
  pthread_rwlock_rdlock(&r->table_lock);
  char **spaces = calloc(r->n_models + 1, sizeof(char *));
  size_t n = 0;
  for (size_t i = 0; spaces && i < r->n_models; i++)
    if (!strcmp(r->models[i].name, name) && (spaces[n] = strdup(r->models[i].ns))) n++;
  pthread_rwlock_unlock(&r->table_lock);
  if (!spaces) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  TRITONSERVER_Error *err = NULL;
  for (size_t i = 0; i < n; i++) {
    TRITONSERVER_Error *e = unload_entry(r, spaces[i], name, wait);
    if (e && !err)
      err = e;
    else
      NRD_ERROR_IGNORE(e, "a later failure; the first one is returned");
    free(spaces[i]);
  }
  free(spaces);
  return err;
}

/* Whether the model of `name` in namespace `ns` is new or changed on disk. */
static bool entry_changed(nrd_repository *r, const char *ns, const char *name) {
  pthread_rwlock_rdlock(&r->table_lock);
  nrd_model_entry *e = find_entry(r, ns, name);
  bool loaded = e && e->attempted;
  char *dir = e && e->dir ? strdup(e->dir) : NULL;
  uint64_t stamp = e ? e->stamp : 0;
  bool overridden = e && e->override_dir;
  pthread_rwlock_unlock(&r->table_lock);
  bool changed = !loaded || (dir && !overridden && newest_mtime(dir, 0) != stamp);
  free(dir);
  return changed;
}

/* Whether a poll must load `name`: some folder of it (one per namespace
 * with namespacing) is new or changed. */
static bool needs_load(nrd_repository *r, const char *name) {
  if (!r->namespacing) return entry_changed(r, "", name);
  repo_place *places = NULL;
  size_t n = 0;
  TRITONSERVER_Error *err = locate_all(r, name, &places, &n);
  bool changed = err != NULL; /* the load will say why */
  if (err) TRITONSERVER_ErrorDelete(err);
  for (size_t i = 0; i < n && !changed; i++) changed = entry_changed(r, places[i].ns, name);
  places_free(places, n);
  return changed;
}

TRITONSERVER_Error *nrd_repo_poll(nrd_repository *r) {
  char **names = NULL;
  size_t n = 0;
  NRD_RETURN_IF_ERROR(nrd_repo_scan(r, &names, &n));
  TRITONSERVER_Error *first = NULL;
  /* New or changed models; ensembles last, so that the step models they
   * find (in their own repository first) are the ones of this poll. */
  enum { SKIP, PLAIN, ENSEMBLE };
  unsigned char *what = calloc(n ? n : 1, 1); /* only what must load is read further */
  for (size_t i = 0; what && i < n; i++)
    what[i] = !needs_load(r, names[i]) ? SKIP : nrd_repo_is_ensemble(r, names[i]) ? ENSEMBLE : PLAIN;
  for (int pass = 0; what && pass < 2; pass++) {
    for (size_t i = 0; i < n; i++) {
      if (what[i] != (pass ? ENSEMBLE : PLAIN)) continue;
      TRITONSERVER_Error *err = nrd_repo_load(r, names[i], NULL, NULL, 0);
      if (err && !first)
        first = err;
      else
        NRD_ERROR_IGNORE(err, "a later failure; the first one is returned (each was logged by its load)");
    }
  }
  if (!what) first = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory polling the repository");
  free(what);
  /* Removed models: with namespacing, per namespace (its folder is gone). */
  pthread_rwlock_rdlock(&r->table_lock);
  size_t nm = r->n_models;
  char **gone = calloc(nm ? 2 * nm : 1, sizeof(char *)); /* name, namespace */
  size_t n_gone = 0;
  for (size_t i = 0; gone && i < nm; i++) {
    nrd_model_entry *e = &r->models[i];
    if (!e->attempted || e->override_dir) continue;
    bool present = false;
    for (size_t k = 0; k < n; k++) present |= !strcmp(names[k], e->name);
    if (present && r->namespacing && *e->ns) present = e->dir && is_dir(e->dir);
    if (!present) {
      gone[2 * n_gone] = strdup(e->name);
      gone[2 * n_gone++ + 1] = strdup(e->ns);
    }
  }
  pthread_rwlock_unlock(&r->table_lock);
  for (size_t i = 0; i < n_gone; i++) {
    if (gone[2 * i] && gone[2 * i + 1]) {
      NRD_ERROR_IGNORE(unload_entry(r, gone[2 * i + 1], gone[2 * i], true),
                       "poll: unloading a model whose folder is gone");
    }
    free(gone[2 * i]);
    free(gone[2 * i + 1]);
  }
  free(gone);
  for (size_t i = 0; i < n; i++) free(names[i]);
  free(names);
  return first;
}

/* nrd_repo_get on the entry `e` (NULL: none), table lock held. */
static TRITONSERVER_Error *get_locked(nrd_model_entry *e, const char *name, int64_t version,
                                      TRITONBACKEND_Model **out) {
  TRITONSERVER_Error *err = NULL;
  TRITONBACKEND_Model *m = NULL;
  if (e) {
    for (size_t i = 0; i < e->n_slots; i++) {
      nrd_version_slot *s = &e->slots[i];
      if (!s->model || atomic_load(&s->model->state) != NRD_MODEL_READY) continue;
      if (version == -1 ? (!m || s->version > m->version) : s->version == version) m = s->model;
    }
  }
  if (m) {
    nrd_model_ref(m);
    *out = m;
  } else if (!e || !e->attempted) {
    err = nrd_error_new(TRITONSERVER_ERROR_NOT_FOUND, "Request for unknown model: '%s' is not found", name);
  } else if (version == -1) {
    err = nrd_error_new(TRITONSERVER_ERROR_UNAVAILABLE, "Request for unknown model: '%s' has no available versions",
                        name);
  } else {
    err = nrd_error_new(TRITONSERVER_ERROR_NOT_FOUND,
                        "Request for unknown model: '%s' version %" PRId64 " is not found", name, version);
  }
  return err;
}

TRITONSERVER_Error *nrd_repo_get(nrd_repository *r, const char *name, int64_t version, TRITONBACKEND_Model **out) {
  pthread_rwlock_rdlock(&r->table_lock);
  TRITONSERVER_Error *err = NULL;
  nrd_model_entry *e = named_entry(r, name, &err);
  if (!err) err = get_locked(e, name, version, out);
  pthread_rwlock_unlock(&r->table_lock);
  return err;
}

TRITONSERVER_Error *nrd_repo_get_in(nrd_repository *r, const char *ns, const char *name, int64_t version,
                                    TRITONBACKEND_Model **out) {
  if (!r->namespacing || !ns || !*ns) return nrd_repo_get(r, name, version, out);
  pthread_rwlock_rdlock(&r->table_lock);
  TRITONSERVER_Error *err = NULL;
  nrd_model_entry *e = find_entry(r, ns, name);
  if (!e || !e->attempted) e = named_entry(r, name, &err);
  if (!err) err = get_locked(e, name, version, out);
  pthread_rwlock_unlock(&r->table_lock);
  return err;
}

static bool any_entry_named(nrd_repository *r, const char *name) {
  for (size_t i = 0; i < r->n_models; i++)
    if (!strcmp(r->models[i].name, name)) return true;
  return false;
}

static const char *state_name(nrd_model_state s) {
  switch (s) {
    case NRD_MODEL_LOADING: return "LOADING";
    case NRD_MODEL_READY: return "READY";
    case NRD_MODEL_UNLOADING: return "UNLOADING";
    default: return "UNAVAILABLE";
  }
}

static int cmp_index_entry(const void *a, const void *b) {
  const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
  int c =
      strcmp(json_string_value(json_object_get(x, "name")) ?: "", json_string_value(json_object_get(y, "name")) ?: "");
  if (c) return c;
  long long vx = atoll(json_string_value(json_object_get(x, "version")) ?: "0");
  long long vy = atoll(json_string_value(json_object_get(y, "version")) ?: "0");
  return (vx > vy) - (vx < vy);
}

/* By name, then version, whatever order the models were loaded in. */
static void sort_index(json_t *arr) {
  size_t n = json_array_size(arr);
  json_t **items = n ? malloc(n * sizeof(*items)) : NULL;
  if (!items) return;
  for (size_t i = 0; i < n; i++) items[i] = json_incref(json_array_get(arr, i));
  qsort(items, n, sizeof(*items), cmp_index_entry);
  json_array_clear(arr);
  for (size_t i = 0; i < n; i++) json_array_append_new(arr, items[i]);
  free(items);
}

json_t *nrd_repo_index(nrd_repository *r, bool ready_only) {
  json_t *arr = json_array();
  char **names = NULL;
  size_t n = 0;
  TRITONSERVER_Error *err = nrd_repo_scan(r, &names, &n);
  if (err) TRITONSERVER_ErrorDelete(err);
  pthread_rwlock_rdlock(&r->table_lock);
  for (size_t i = 0; i < r->n_models; i++) {
    nrd_model_entry *e = &r->models[i];
    for (size_t k = 0; k < e->n_slots; k++) {
      nrd_version_slot *s = &e->slots[k];
      nrd_model_state st = s->model ? atomic_load(&s->model->state) : s->state;
      if (ready_only && st != NRD_MODEL_READY) continue;
      char v[32];
      snprintf(v, sizeof v, "%" PRId64, s->version);
      /* "reason" only when there is one, as Triton writes the index. */
      json_t *row = json_pack("{s:s,s:s,s:s}", "name", e->name, "version", v, "state", state_name(st));
      if (row && s->reason && *s->reason) json_object_set_new(row, "reason", json_string(s->reason));
      json_array_append_new(arr, row);
    }
    if (!e->n_slots && !ready_only && e->attempted)
      json_array_append_new(arr, json_pack("{s:s,s:s,s:s}", "name", e->name, "state", "UNAVAILABLE", "reason",
                                           e->reason ? e->reason : ""));
  }
  /* Models on disk that were never loaded. */
  for (size_t i = 0; !ready_only && i < n; i++)
    if (!any_entry_named(r, names[i])) json_array_append_new(arr, json_pack("{s:s}", "name", names[i]));
  pthread_rwlock_unlock(&r->table_lock);
  for (size_t i = 0; i < n; i++) free(names[i]);
  free(names);
  sort_index(arr);
  return arr;
}

bool nrd_repo_all_ready(nrd_repository *r) {
  bool ok = true;
  pthread_rwlock_rdlock(&r->table_lock);
  for (size_t i = 0; i < r->n_models; i++) {
    nrd_model_entry *e = &r->models[i];
    if (!e->attempted) continue;
    if (!e->n_slots) ok = false;
    for (size_t k = 0; k < e->n_slots; k++)
      if (!e->slots[k].model || atomic_load(&e->slots[k].model->state) != NRD_MODEL_READY) ok = false;
  }
  pthread_rwlock_unlock(&r->table_lock);
  return ok;
}

TRITONSERVER_Error *nrd_repo_stats(nrd_repository *r, const char *name, int64_t version, json_t **out) {
  json_t *arr = json_array();
  bool all = !name || !*name;
  bool found = false;
  pthread_rwlock_rdlock(&r->table_lock);
  TRITONSERVER_Error *which = NULL;
  nrd_model_entry *only = all ? NULL : named_entry(r, name, &which);
  if (which) {
    pthread_rwlock_unlock(&r->table_lock);
    json_decref(arr);
    return which;
  }
  for (size_t i = 0; i < r->n_models; i++) {
    nrd_model_entry *e = &r->models[i];
    if (!all && e != only) continue;
    for (size_t k = 0; k < e->n_slots; k++) {
      nrd_version_slot *s = &e->slots[k];
      if (!s->model || atomic_load(&s->model->state) != NRD_MODEL_READY) continue;
      if (!all && version != -1 && s->version != version) continue;
      found = true;
      json_array_append_new(arr, nrd_stats_json(&s->model->stats, e->name, s->version));
    }
  }
  pthread_rwlock_unlock(&r->table_lock);
  if (!all && !found) {
    json_decref(arr);
    if (version == -1)
      return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "requested model '%s' is not available", name);
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "requested model version is not available for model '%s'",
                         name);
  }
  sort_index(arr); /* by name and version, as Triton lists them */
  *out = json_pack("{s:o}", "model_stats", arr);
  return NULL;
}

int nrd_repo_prometheus(nrd_repository *r, bool latencies, const double *quantiles, size_t n_quantiles,
                        const char *const *gpu_uuid, int n_uuid, nrd_text *out) {
  int rc = 0;
  pthread_rwlock_rdlock(&r->table_lock);
  bool any_cache = false;
  for (size_t i = 0; i < r->n_models; i++)
    for (size_t k = 0; k < r->models[i].n_slots; k++)
      if (r->models[i].slots[k].model && r->models[i].slots[k].model->response_cache) any_cache = true;
  for (unsigned f = 0; f < nrd_stats_family_count && !rc; f++) {
    bool cache_family = !strncmp(nrd_stats_families[f][0], "nv_cache_", 9);
    if (cache_family && !any_cache) continue;
    /* counter_latencies=false drops the duration counters (not the load-time gauge). */
    if (!latencies && strstr(nrd_stats_families[f][0], "_duration_") && !strcmp(nrd_stats_families[f][2], "counter"))
      continue;
    rc |= nrd_text_appendf(out, "# HELP %s %s\n# TYPE %s %s\n", nrd_stats_families[f][0], nrd_stats_families[f][1],
                           nrd_stats_families[f][0], nrd_stats_families[f][2]);
    for (size_t i = 0; i < r->n_models && !rc; i++) {
      nrd_model_entry *e = &r->models[i];
      for (size_t k = 0; k < e->n_slots && !rc; k++)
        if (e->slots[k].model && (!cache_family || e->slots[k].model->response_cache))
          rc |= nrd_stats_prometheus(&e->slots[k].model->stats, e->name, e->slots[k].version, nrd_stats_families[f][0],
                                     gpu_uuid, n_uuid, out);
    }
  }
  /* summary_latencies (n_quantiles 0: off). */
  for (unsigned f = 0; n_quantiles && f < nrd_stats_summary_family_count && !rc; f++) {
    bool cache_family = !strncmp(nrd_stats_summary_families[f][0], "nv_cache_", 9);
    if (cache_family && !any_cache) continue;
    rc |= nrd_text_appendf(out, "# HELP %s %s\n# TYPE %s summary\n", nrd_stats_summary_families[f][0],
                           nrd_stats_summary_families[f][1], nrd_stats_summary_families[f][0]);
    for (size_t i = 0; i < r->n_models && !rc; i++) {
      nrd_model_entry *e = &r->models[i];
      for (size_t k = 0; k < e->n_slots && !rc; k++)
        if (e->slots[k].model && (!cache_family || e->slots[k].model->response_cache))
          rc |= nrd_stats_prometheus_summary(&e->slots[k].model->stats, e->name, e->slots[k].version, f, quantiles,
                                             n_quantiles, out);
    }
  }
  pthread_rwlock_unlock(&r->table_lock);
  return rc;
}
