/*
 * Nereid: response cache plugin API (TRITONCACHE_*), source-compatible with
 * Triton's tritoncache.h at API version 0.1.
 *
 * A cache plugin is a shared library libtritoncache_<name>.so in
 * <cache directory>/<name>/; `--cache-config <name>,<key>=<value>` selects
 * it. Two kinds of functions live here:
 *  - functions the server implements and the plugin calls
 *    (TRITONCACHE_DECLSPEC), and
 *  - functions the plugin implements and the server finds with dlsym
 *    (TRITONCACHE_ISPEC); all four are required.
 *
 * The conventions of tritonserver.h apply: NULL means success and a
 * returned error belongs to the caller.
 *
 * An entry holds buffers, each a base address with buffer attributes (byte
 * size, memory type; CPU memory only). The server serializes a response
 * into one buffer; what the bytes mean is the server's business, the
 * plugin stores and returns them as they are.
 */
#ifndef TRITON_CORE_TRITONCACHE_H
#define TRITON_CORE_TRITONCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "triton/core/tritonserver.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifndef TRITONCACHE_DECLSPEC
#if defined(__GNUC__)
#define TRITONCACHE_DECLSPEC __attribute__((__visibility__("default")))
#else
#define TRITONCACHE_DECLSPEC
#endif
#endif

#ifndef TRITONCACHE_ISPEC
#if defined(__GNUC__)
#define TRITONCACHE_ISPEC __attribute__((__visibility__("default")))
#else
#define TRITONCACHE_ISPEC
#endif
#endif

struct TRITONCACHE_Cache;
struct TRITONCACHE_CacheEntry;
struct TRITONCACHE_Allocator;
typedef struct TRITONCACHE_Cache TRITONCACHE_Cache;
typedef struct TRITONCACHE_CacheEntry TRITONCACHE_CacheEntry;
typedef struct TRITONCACHE_Allocator TRITONCACHE_Allocator;

/* The API version this header describes. A plugin built against it works
 * with a server whose major version is equal and minor version is not
 * lower. */
#define TRITONCACHE_API_VERSION_MAJOR 0
#define TRITONCACHE_API_VERSION_MINOR 1

/* ------------------------------------------------ implemented by the server */

/* The API version the server implements. Thread: any. */
TRITONCACHE_DECLSPEC TRITONSERVER_Error *TRITONCACHE_ApiVersion(uint32_t *major, uint32_t *minor);

/* How many buffers `entry` holds. Thread: the one the server called the
 * plugin on, during that call. */
TRITONCACHE_DECLSPEC TRITONSERVER_Error *TRITONCACHE_CacheEntryBufferCount(TRITONCACHE_CacheEntry *entry,
                                                                           size_t *count);

/* Appends a buffer to `entry` (in a lookup: the cached bytes). The entry
 * borrows `base` until the call the server made returns; the attributes'
 * byte size and memory type are read now, the caller keeps the attributes
 * object. CPU memory only. */
TRITONCACHE_DECLSPEC TRITONSERVER_Error *
TRITONCACHE_CacheEntryAddBuffer(TRITONCACHE_CacheEntry *entry, void *base,
                                TRITONSERVER_BufferAttributes *buffer_attributes);

/* Buffer `index` of `entry` (in an insert: the bytes to store). *base is
 * borrowed until the server's call returns; the server fills the caller's
 * attributes object (byte size, memory type and id). */
TRITONCACHE_DECLSPEC TRITONSERVER_Error *
TRITONCACHE_CacheEntryGetBuffer(TRITONCACHE_CacheEntry *entry, size_t index, void **base,
                                TRITONSERVER_BufferAttributes *buffer_attributes);

/* In an insert: where TRITONCACHE_Copy should put buffer `index` (memory
 * the plugin owns, at least the buffer's byte size). `buffer_attributes`
 * may be NULL; when given, only its byte size is checked against the
 * buffer's. */
TRITONCACHE_DECLSPEC TRITONSERVER_Error *
TRITONCACHE_CacheEntrySetBuffer(TRITONCACHE_CacheEntry *entry, size_t index, void *new_base,
                                TRITONSERVER_BufferAttributes *buffer_attributes);

/* Copies with the allocator the server passed: in an insert, every buffer
 * given a place with TRITONCACHE_CacheEntrySetBuffer is copied there; in a
 * lookup, the buffers added to `entry` are copied into the server's own
 * memory, so the plugin may let go of them once this returns. */
TRITONCACHE_DECLSPEC TRITONSERVER_Error *TRITONCACHE_Copy(TRITONCACHE_Allocator *allocator,
                                                          TRITONCACHE_CacheEntry *entry);

/* ------------------------------------------------ implemented by the plugin */

/* Creates the cache from `config` (a JSON object of the --cache-config
 * settings, values as strings). The server owns *cache until
 * TRITONCACHE_CacheFinalize. Called once, at server start. */
TRITONCACHE_ISPEC TRITONSERVER_Error *TRITONCACHE_CacheInitialize(TRITONCACHE_Cache **cache, const char *config);

/* Destroys the cache. Called once, when the server goes. */
TRITONCACHE_ISPEC TRITONSERVER_Error *TRITONCACHE_CacheFinalize(TRITONCACHE_Cache *cache);

/* Stores `entry` under `key`. ALREADY_EXISTS when the key is there (the
 * server takes that as success). Thread: any; calls may overlap. */
TRITONCACHE_ISPEC TRITONSERVER_Error *TRITONCACHE_CacheInsert(TRITONCACHE_Cache *cache, const char *key,
                                                              TRITONCACHE_CacheEntry *entry,
                                                              TRITONCACHE_Allocator *allocator);

/* Fills `entry` with what is stored under `key` (AddBuffer, then Copy);
 * NOT_FOUND when nothing is. Thread: any; calls may overlap. */
TRITONCACHE_ISPEC TRITONSERVER_Error *TRITONCACHE_CacheLookup(TRITONCACHE_Cache *cache, const char *key,
                                                              TRITONCACHE_CacheEntry *entry,
                                                              TRITONCACHE_Allocator *allocator);

#ifdef __cplusplus
}
#endif

#endif
