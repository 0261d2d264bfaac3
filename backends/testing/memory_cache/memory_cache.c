/* A response cache plugin for the tests (libtritoncache_memory.so): keys
 * and bytes in a list under one lock, written only against
 * triton/core/tritoncache.h as a plugin built for Triton would be.
 *
 * Config (JSON, string values): "fail_init": "true" fails initialization;
 * "corrupt": "true" answers lookups with bytes that are no response;
 * "truncate": "true" answers with the first half of what was stored;
 * "no_copy": "true" adds its buffer in a lookup without calling
 * TRITONCACHE_Copy. */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "triton/core/tritoncache.h"

typedef struct item {
  struct item *next;
  char *key;
  void *bytes;
  size_t len;
} item;

struct TRITONCACHE_Cache {
  pthread_mutex_t lock;
  item *items;
  bool corrupt, truncate, no_copy;
};

static bool flag(const json_t *cfg, const char *key) {
  const char *v = json_string_value(json_object_get(cfg, key));
  return v && !strcmp(v, "true");
}

TRITONCACHE_ISPEC TRITONSERVER_Error *TRITONCACHE_CacheInitialize(TRITONCACHE_Cache **cache, const char *config) {
  uint32_t major = 0, minor = 0;
  TRITONSERVER_Error *err = TRITONCACHE_ApiVersion(&major, &minor);
  if (err) return err;
  if (major != TRITONCACHE_API_VERSION_MAJOR || minor < TRITONCACHE_API_VERSION_MINOR)
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNSUPPORTED, "cache API version not supported");
  json_t *cfg = json_loads(config, 0, NULL);
  if (!json_is_object(cfg)) {
    json_decref(cfg);
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "memory cache: the config is not a JSON object");
  }
  if (flag(cfg, "fail_init")) {
    json_decref(cfg);
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "memory cache: asked to fail");
  }
  TRITONCACHE_Cache *c = calloc(1, sizeof(*c));
  if (!c) {
    json_decref(cfg);
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  }
  pthread_mutex_init(&c->lock, NULL);
  c->corrupt = flag(cfg, "corrupt");
  c->no_copy = flag(cfg, "no_copy");
  c->truncate = flag(cfg, "truncate");
  json_decref(cfg);
  *cache = c;
  return NULL;
}

TRITONCACHE_ISPEC TRITONSERVER_Error *TRITONCACHE_CacheFinalize(TRITONCACHE_Cache *cache) {
  for (item *i = cache->items, *next; i; i = next) {
    next = i->next;
    free(i->key);
    free(i->bytes);
    free(i);
  }
  pthread_mutex_destroy(&cache->lock);
  free(cache);
  return NULL;
}

static item *find(TRITONCACHE_Cache *c, const char *key) {
  for (item *i = c->items; i; i = i->next)
    if (!strcmp(i->key, key)) return i;
  return NULL;
}

/* As Triton's local cache does: learn the size, give the server a place,
 * let it copy there. */
TRITONCACHE_ISPEC TRITONSERVER_Error *TRITONCACHE_CacheInsert(TRITONCACHE_Cache *cache, const char *key,
                                                              TRITONCACHE_CacheEntry *entry,
                                                              TRITONCACHE_Allocator *allocator) {
  size_t n = 0;
  TRITONSERVER_Error *err = TRITONCACHE_CacheEntryBufferCount(entry, &n);
  if (err) return err;
  if (n != 1) return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "memory cache: one buffer per entry");
  TRITONSERVER_BufferAttributes *attrs = NULL;
  if ((err = TRITONSERVER_BufferAttributesNew(&attrs))) return err;
  void *base = NULL;
  size_t size = 0;
  err = TRITONCACHE_CacheEntryGetBuffer(entry, 0, &base, attrs);
  if (!err) err = TRITONSERVER_BufferAttributesByteSize(attrs, &size);
  TRITONSERVER_BufferAttributesDelete(attrs);
  if (err) return err;
  pthread_mutex_lock(&cache->lock);
  if (find(cache, key)) {
    pthread_mutex_unlock(&cache->lock);
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_ALREADY_EXISTS, "memory cache: key exists");
  }
  item *i = calloc(1, sizeof(*i));
  if (i) i->key = strdup(key);
  if (i) i->bytes = malloc(size ? size : 1);
  if (!i || !i->key || !i->bytes) {
    pthread_mutex_unlock(&cache->lock);
    if (i) free(i->key), free(i->bytes);
    free(i);
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  }
  i->len = size;
  err = TRITONCACHE_CacheEntrySetBuffer(entry, 0, i->bytes, NULL);
  if (!err) err = TRITONCACHE_Copy(allocator, entry);
  if (err) {
    pthread_mutex_unlock(&cache->lock);
    free(i->key), free(i->bytes), free(i);
    return err;
  }
  i->next = cache->items;
  cache->items = i;
  pthread_mutex_unlock(&cache->lock);
  return NULL;
}

TRITONCACHE_ISPEC TRITONSERVER_Error *TRITONCACHE_CacheLookup(TRITONCACHE_Cache *cache, const char *key,
                                                              TRITONCACHE_CacheEntry *entry,
                                                              TRITONCACHE_Allocator *allocator) {
  static char garbage[] = "not a response at all";
  pthread_mutex_lock(&cache->lock);
  item *i = find(cache, key);
  if (!i) {
    pthread_mutex_unlock(&cache->lock);
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_NOT_FOUND, "memory cache: no such key");
  }
  TRITONSERVER_BufferAttributes *attrs = NULL;
  TRITONSERVER_Error *err = TRITONSERVER_BufferAttributesNew(&attrs);
  void *base = cache->corrupt ? (void *)garbage : i->bytes;
  size_t len = cache->corrupt ? sizeof garbage : cache->truncate ? i->len / 2 : i->len;
  if (!err) err = TRITONSERVER_BufferAttributesSetByteSize(attrs, len);
  if (!err) err = TRITONSERVER_BufferAttributesSetMemoryType(attrs, TRITONSERVER_MEMORY_CPU);
  if (!err) err = TRITONCACHE_CacheEntryAddBuffer(entry, base, attrs);
  if (!err && !cache->no_copy) err = TRITONCACHE_Copy(allocator, entry);
  TRITONSERVER_BufferAttributesDelete(attrs);
  pthread_mutex_unlock(&cache->lock);
  return err;
}
