/* Scratch memory for short-lived jansson documents on the request path.
 *
 * Parsing a small inference header with jansson costs some fifty malloc and
 * free calls (objects, hashtables, keys, strings). A document parsed through
 * an arena takes that memory from a bump allocator instead, and dropping
 * the document resets the arena. jansson still does all the parsing.
 *
 * How: nrd_srv_json_arena_setup installs allocation hooks in jansson that
 * behave like malloc/free except while an arena parse is under way on the
 * calling thread; memory inside the arenas' reserved region is never passed
 * to free. Documents not parsed through an arena are untouched. */
#ifndef NRD_SRV_JSON_ARENA_H
#define NRD_SRV_JSON_ARENA_H

#include <stddef.h>

#include <jansson.h>

typedef struct nrd_srv_json_arena nrd_srv_json_arena;

/* Installs the hooks in jansson. Call once, before any other thread uses
 * jansson (at the start of main). */
void nrd_srv_json_arena_setup(void);

/* A new arena, or NULL when none is left (then pass NULL below: plain
 * jansson). Free with nrd_srv_json_arena_free. Any thread. */
nrd_srv_json_arena *nrd_srv_json_arena_new(void);

/* Returns the arena's memory for reuse. No document of it may be alive.
 * NULL is ignored. */
void nrd_srv_json_arena_free(nrd_srv_json_arena *a);

/* Like json_loadb, with the document's memory from `a` (NULL: malloc).
 * Release the result with nrd_srv_json_arena_drop before the next parse
 * through `a`. One thread at a time per arena; the document must not be
 * changed (json_object_set and the like) while it lives. */
json_t *nrd_srv_json_arena_loadb(nrd_srv_json_arena *a, const char *buf, size_t len, size_t flags,
                                 json_error_t *err);

/* Drops a document from nrd_srv_json_arena_loadb (NULL is ignored) and
 * makes the arena's memory reusable. */
void nrd_srv_json_arena_drop(nrd_srv_json_arena *a, json_t *doc);

/* Bytes of the arena in use now (0 once its document is dropped). */
size_t nrd_srv_json_arena_used(const nrd_srv_json_arena *a);

#endif
