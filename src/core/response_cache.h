/* The response cache (`--cache-config local,size=N` and a model's
 * `response_cache { enable: true }`): a bounded map from a request's key to
 * the outputs of its successful response, evicted least recently used
 * first. A request whose key is there is answered from the copy without
 * reaching the model's queue. See docs/response-cache.md. */
#ifndef NRD_RESPONSE_CACHE_H
#define NRD_RESPONSE_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "stats.h"
#include "triton/core/tritonbackend.h"
#include "server_options.h"

typedef struct nrd_response_cache nrd_response_cache;
typedef struct nrd_cache_entry nrd_cache_entry;

/* 128 bits of hash over what makes two requests the same question. */
typedef struct nrd_cache_key {
  uint64_t a, b;
} nrd_cache_key;

/* The cache the server options ask for: NULL in *out when they name none.
 * "local" is built in; its JSON config needs "size" (bytes, a string or an
 * unsigned number, at least 1). Any other name is a plugin,
 * <cache_dir>/<name>/libtritoncache_<name>.so (cache_plugin.h), given the
 * JSON config as it is. Errors name the cache and the problem. The caller
 * frees with nrd_response_cache_free once no request can reach it. */
TRITONSERVER_Error *nrd_response_cache_new(const nrd_option_triples *configs, const char *cache_dir,
                                           nrd_response_cache **out);
void nrd_response_cache_free(nrd_response_cache *c);

/* The key of `req` (model name and version, then every input in name
 * order: name, datatype, shape and bytes, then the requested output names
 * in order). Fails when input data is not in CPU memory. Any thread; reads
 * `req`, which must not change meanwhile. */
TRITONSERVER_Error *nrd_cache_key_of(const TRITONSERVER_InferenceRequest *req, nrd_cache_key *key);

/* The entry for `key` with a reference for the caller (release with
 * nrd_cache_entry_release), or NULL; a hit makes it the most recently used.
 * Any thread. */
nrd_cache_entry *nrd_cache_lookup(nrd_response_cache *c, const nrd_cache_key *key);
void nrd_cache_entry_release(nrd_cache_entry *e);

/* Stores a copy of the outputs of `resp` under `key`, evicting the least
 * recently used entries to make room. Fails (nothing stored) when an output
 * is not in CPU memory or the copy is larger than the whole cache; a key
 * already present is left as it is. Any thread. */
TRITONSERVER_Error *nrd_cache_insert(nrd_response_cache *c, const nrd_cache_key *key,
                                     const TRITONSERVER_InferenceResponse *resp);

/* Answers `req` (in flight, with its delivery) with the outputs of `e`:
 * makes the response through the request's allocator, sends it as the
 * final one, records the hit in the model's statistics (request_start_ns
 * and lookup_start_ns as taken by the caller) and releases the request.
 * The request belongs to its client again afterwards, as after any
 * release. Any thread. */
void nrd_cache_answer(TRITONSERVER_InferenceRequest *req, const nrd_cache_entry *e, uint64_t lookup_start_ns);

/* Appends the cache's own gauges (nv_cache_*: entries, lookups, hits,
 * misses, evictions, utilization) in Prometheus text. Returns 0 or -1 on
 * out-of-memory. Any thread. */
int nrd_response_cache_prometheus(nrd_response_cache *c, nrd_text *out);

/* The delivery's on_final hook while the response cache missed
 * (response.h): stores the final response `r` of `d` under d->cache_key
 * when it succeeded, counts the miss in the model's statistics and clears
 * the hook. Called once, by the thread sending that response. */
struct nrd_delivery;
void nrd_cache_store_final(struct nrd_delivery *d, const TRITONSERVER_InferenceResponse *r);

#endif
