/* Cache plugins; see cache_plugin.h.
 *
 * An entry lives on the stack of one insert or lookup. In an insert it
 * holds the server's bytes as buffer 0 and, once the plugin calls
 * SetBuffer, where to copy them; in a lookup it collects the plugin's
 * buffers and Copy moves them into memory the server owns. */
#include "cache_plugin.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buffer_attributes.h"
#include "error.h"
#include "files.h"
#include "log.h"

typedef TRITONSERVER_Error *(*init_fn)(TRITONCACHE_Cache **, const char *);
typedef TRITONSERVER_Error *(*fini_fn)(TRITONCACHE_Cache *);
typedef TRITONSERVER_Error *(*io_fn)(TRITONCACHE_Cache *, const char *, TRITONCACHE_CacheEntry *,
                                     TRITONCACHE_Allocator *);

struct nrd_cache_plugin {
  char *name;
  void *dl;
  TRITONCACHE_Cache *cache;
  fini_fn finalize;
  io_fn insert, lookup;
};

typedef struct entry_buffer {
  void *base; /* insert: the server's bytes; lookup: the plugin's */
  void *target; /* insert: where the plugin wants them (SetBuffer) */
  size_t size;
  TRITONSERVER_MemoryType mtype;
  int64_t mtype_id;
} entry_buffer;

/* Few buffers ever: one per response, and responses cached are final ones. */
#define ENTRY_MAX_BUFFERS 8

struct TRITONCACHE_CacheEntry {
  size_t n;
  entry_buffer buf[ENTRY_MAX_BUFFERS];
};

typedef enum { COPY_TO_PLUGIN, COPY_FROM_PLUGIN } copy_kind;

struct TRITONCACHE_Allocator {
  copy_kind kind;
  void *owned; /* COPY_FROM_PLUGIN: the copy of buffer 0 */
  size_t owned_len;
  bool copied;
};

/* ------------------------------------------------------ the server's side */

TRITONSERVER_Error *TRITONCACHE_ApiVersion(uint32_t *major, uint32_t *minor) {
  NRD_ARG_CHECK(major && minor, "major and minor must not be NULL");
  *major = TRITONCACHE_API_VERSION_MAJOR;
  *minor = TRITONCACHE_API_VERSION_MINOR;
  return NULL;
}

TRITONSERVER_Error *TRITONCACHE_CacheEntryBufferCount(TRITONCACHE_CacheEntry *entry, size_t *count) {
  NRD_ARG_CHECK(entry && count, "entry and count must not be NULL");
  *count = entry->n;
  return NULL;
}

TRITONSERVER_Error *TRITONCACHE_CacheEntryAddBuffer(TRITONCACHE_CacheEntry *entry, void *base,
                                                    TRITONSERVER_BufferAttributes *attrs) {
  NRD_ARG_CHECK(entry && attrs, "entry and buffer attributes must not be NULL");
  NRD_ARG_CHECK(base || attrs->byte_size == 0, "buffer base must not be NULL");
  if (attrs->memory_type != TRITONSERVER_MEMORY_CPU && attrs->memory_type != TRITONSERVER_MEMORY_CPU_PINNED)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "cache entries take CPU memory only, not %s",
                         TRITONSERVER_MemoryTypeString(attrs->memory_type));
  if (entry->n == ENTRY_MAX_BUFFERS)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "a cache entry holds at most %d buffers", ENTRY_MAX_BUFFERS);
  entry->buf[entry->n++] = (entry_buffer){
      .base = base, .size = attrs->byte_size, .mtype = attrs->memory_type, .mtype_id = attrs->memory_type_id};
  return NULL;
}

TRITONSERVER_Error *TRITONCACHE_CacheEntryGetBuffer(TRITONCACHE_CacheEntry *entry, size_t index, void **base,
                                                    TRITONSERVER_BufferAttributes *attrs) {
  NRD_ARG_CHECK(entry && base && attrs, "entry, base and buffer attributes must not be NULL");
  if (index >= entry->n)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "buffer index %zu out of range (the entry has %zu)", index,
                         entry->n);
  const entry_buffer *b = &entry->buf[index];
  *base = b->base;
  attrs->byte_size = b->size;
  attrs->memory_type = b->mtype;
  attrs->memory_type_id = b->mtype_id;
  return NULL;
}

TRITONSERVER_Error *TRITONCACHE_CacheEntrySetBuffer(TRITONCACHE_CacheEntry *entry, size_t index, void *new_base,
                                                    TRITONSERVER_BufferAttributes *attrs) {
  NRD_ARG_CHECK(entry, "entry must not be NULL");
  if (index >= entry->n)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "buffer index %zu out of range (the entry has %zu)", index,
                         entry->n);
  entry_buffer *b = &entry->buf[index];
  NRD_ARG_CHECK(new_base || b->size == 0, "buffer base must not be NULL");
  if (attrs && attrs->byte_size < b->size)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "buffer %zu holds %zu bytes; %zu is too small", index, b->size,
                         attrs->byte_size);
  b->target = new_base;
  return NULL;
}

TRITONSERVER_Error *TRITONCACHE_Copy(TRITONCACHE_Allocator *allocator, TRITONCACHE_CacheEntry *entry) {
  NRD_ARG_CHECK(allocator && entry, "allocator and entry must not be NULL");
  if (allocator->kind == COPY_TO_PLUGIN) {
    for (size_t i = 0; i < entry->n; i++) {
      entry_buffer *b = &entry->buf[i];
      if (!b->target)
        return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                             "buffer %zu has no place to copy to: call TRITONCACHE_CacheEntrySetBuffer first", i);
      if (b->size && b->target != b->base) memcpy(b->target, b->base, b->size);
    }
    allocator->copied = true;
    return NULL;
  }
  /* From the plugin: a stored response is one buffer. */
  if (entry->n != 1)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "a cached response is one buffer, the entry has %zu",
                         entry->n);
  void *copy = malloc(entry->buf[0].size ? entry->buf[0].size : 1);
  if (!copy) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory copying a cached response");
  if (entry->buf[0].size) memcpy(copy, entry->buf[0].base, entry->buf[0].size);
  free(allocator->owned);
  allocator->owned = copy;
  allocator->owned_len = entry->buf[0].size;
  allocator->copied = true;
  return NULL;
}

/* ------------------------------------------------------ loading */

static void *required(nrd_cache_plugin *p, const char *path, const char *symbol, TRITONSERVER_Error **err) {
  void *f = dlsym(p->dl, symbol);
  if (!f && !*err)
    *err = nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "cache library '%s' does not define %s", path, symbol);
  return f;
}

TRITONSERVER_Error *nrd_cache_plugin_open(const char *cache_dir, const char *name, const char *config,
                                          nrd_cache_plugin **out) {
  *out = NULL;
  if (!nrd_plain_name(name)) return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "invalid cache name '%s'", name);
  size_t n = strlen(cache_dir) + 2 * strlen(name) + 32;
  char *path = malloc(n);
  nrd_cache_plugin *p = calloc(1, sizeof(*p));
  if (!path || !p || !(p->name = strdup(name))) {
    free(path);
    if (p) free(p->name);
    free(p);
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory loading cache '%s'", name);
  }
  snprintf(path, n, "%s/%s/libtritoncache_%s.so", cache_dir, name, name);
  TRITONSERVER_Error *err = NULL;
  p->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!p->dl) {
    const char *why = dlerror();
    err = nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                        "unable to load cache '%s' from '%s': %s (set --cache-directory to the folder holding "
                        "%s/libtritoncache_%s.so)",
                        name, path, why ? why : "unknown dlopen error", name, name);
  }
  init_fn init = NULL;
  if (!err) {
    init = (init_fn)required(p, path, "TRITONCACHE_CacheInitialize", &err);
    p->finalize = (fini_fn)required(p, path, "TRITONCACHE_CacheFinalize", &err);
    p->insert = (io_fn)required(p, path, "TRITONCACHE_CacheInsert", &err);
    p->lookup = (io_fn)required(p, path, "TRITONCACHE_CacheLookup", &err);
  }
  if (!err) {
    TRITONSERVER_Error *e = init(&p->cache, config ? config : "{}");
    if (e) {
      err = nrd_error_new(TRITONSERVER_ErrorCode(e), "cache '%s' failed to initialize: %s", name,
                          TRITONSERVER_ErrorMessage(e));
      TRITONSERVER_ErrorDelete(e);
    } else if (!p->cache) {
      err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "cache '%s' initialized without returning a cache", name);
    }
  }
  free(path);
  if (err) {
    p->cache = NULL; /* nothing to finalize */
    nrd_cache_plugin_close(p);
    return err;
  }
  *out = p;
  return NULL;
}

void nrd_cache_plugin_close(nrd_cache_plugin *p) {
  if (!p) return;
  if (p->cache) {
    TRITONSERVER_Error *e = p->finalize(p->cache);
    if (e) {
      NRD_LOG_ERROR("cache '%s' failed to finalize: %s", p->name, TRITONSERVER_ErrorMessage(e));
      TRITONSERVER_ErrorDelete(e);
    }
  }
  if (p->dl) dlclose(p->dl);
  free(p->name);
  free(p);
}

const char *nrd_cache_plugin_name(const nrd_cache_plugin *p) { return p->name; }

/* ------------------------------------------------------ insert and lookup */

TRITONSERVER_Error *nrd_cache_plugin_insert(nrd_cache_plugin *p, const char *key, const void *bytes, size_t len) {
  TRITONCACHE_CacheEntry entry = {.n = 1};
  entry.buf[0] = (entry_buffer){.base = (void *)bytes, .size = len, .mtype = TRITONSERVER_MEMORY_CPU};
  TRITONCACHE_Allocator alloc = {.kind = COPY_TO_PLUGIN};
  TRITONSERVER_Error *e = p->insert(p->cache, key, &entry, &alloc);
  if (e && TRITONSERVER_ErrorCode(e) == TRITONSERVER_ERROR_ALREADY_EXISTS) {
    TRITONSERVER_ErrorDelete(e);
    return NULL;
  }
  return e;
}

TRITONSERVER_Error *nrd_cache_plugin_lookup(nrd_cache_plugin *p, const char *key, void **bytes, size_t *len) {
  *bytes = NULL;
  *len = 0;
  TRITONCACHE_CacheEntry entry = {.n = 0};
  TRITONCACHE_Allocator alloc = {.kind = COPY_FROM_PLUGIN};
  TRITONSERVER_Error *e = p->lookup(p->cache, key, &entry, &alloc);
  if (e && TRITONSERVER_ErrorCode(e) == TRITONSERVER_ERROR_NOT_FOUND) {
    TRITONSERVER_ErrorDelete(e);
    free(alloc.owned);
    return NULL;
  }
  /* A plugin that added its buffers but never called Copy: they are still
   * valid while the entry is, so copy them now. */
  if (!e && !alloc.copied && entry.n) e = TRITONCACHE_Copy(&alloc, &entry);
  if (e) {
    free(alloc.owned);
    return e;
  }
  if (!alloc.copied) return NULL; /* success with nothing in it: a miss */
  *bytes = alloc.owned;
  *len = alloc.owned_len;
  return NULL;
}
