/* Response cache plugins (TRITONCACHE_*, include/triton/core/tritoncache.h):
 * loading <cache dir>/<name>/libtritoncache_<name>.so, and the entry and
 * copy functions the server gives plugins. response_cache.c decides what
 * bytes to store; this file only moves them to and from the plugin. */
#ifndef NRD_CACHE_PLUGIN_H
#define NRD_CACHE_PLUGIN_H

#include <stddef.h>

#include "triton/core/tritoncache.h"

typedef struct nrd_cache_plugin nrd_cache_plugin;

/* Opens the plugin `name` under `cache_dir` and initializes it with
 * `config` (JSON text). Errors name the library path, the missing symbol
 * or carry the plugin's own message. The caller owns *out and closes it
 * with nrd_cache_plugin_close. Thread: server start. */
TRITONSERVER_Error *nrd_cache_plugin_open(const char *cache_dir, const char *name, const char *config,
                                          nrd_cache_plugin **out);
/* Finalizes the cache and unloads the library. NULL is a no-op. */
void nrd_cache_plugin_close(nrd_cache_plugin *p);

/* Stores `len` bytes under `key` (a key already there counts as stored).
 * The bytes are the caller's. Any thread. */
TRITONSERVER_Error *nrd_cache_plugin_insert(nrd_cache_plugin *p, const char *key, const void *bytes, size_t len);

/* On a hit, *bytes is a malloc'd copy of what is stored under `key` (the
 * caller frees it) and *len its size; on a miss, *bytes is NULL and the
 * result NULL. Other failures are errors. Any thread. */
TRITONSERVER_Error *nrd_cache_plugin_lookup(nrd_cache_plugin *p, const char *key, void **bytes, size_t *len);

/* The plugin's name, as in --cache-config. */
const char *nrd_cache_plugin_name(const nrd_cache_plugin *p);

#endif
