/* Fast parsing of short-lived JSON documents on the request path.
 *
 * jansson's own parser spent about 32,000 instructions on a 150-byte
 * inference header (callgrind), nearly half of a small request's work in
 * the front end, plus some fifty malloc and free calls. Here yajl parses
 * (its lexer is far cheaper) and its events build an ordinary jansson
 * document, whose memory comes from a bump arena that dropping the
 * document resets. Callers keep jansson's API for reading the document.
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

/* Parses len bytes of JSON text (any value at the top; a repeated key
 * keeps its last value, as jansson does; NUL in strings is refused) into a
 * jansson document whose memory comes from `a` (NULL: malloc). NULL on
 * error, with err->text (may be NULL) saying why and at which byte.
 * Release the result with nrd_srv_json_arena_drop before the next parse
 * through `a`. One thread at a time per arena; the document must not be
 * changed (json_object_set and the like) while it lives. */
json_t *nrd_srv_json_arena_loadb(nrd_srv_json_arena *a, const char *buf, size_t len,
                                 json_error_t *err);

/* Drops a document from nrd_srv_json_arena_loadb (NULL is ignored) and
 * makes the arena's memory reusable. */
void nrd_srv_json_arena_drop(nrd_srv_json_arena *a, json_t *doc);

/* Bytes of the arena in use now (0 once its document is dropped). */
size_t nrd_srv_json_arena_used(const nrd_srv_json_arena *a);

#endif
