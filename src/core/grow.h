/* Growing an array that starts in storage inside its owner (the inline
 * room of requests and responses, see request.h and response.h). */
#ifndef NRD_GROW_H
#define NRD_GROW_H

#include <stdlib.h>
#include <string.h>

/* A buffer of `cap` elements of `elem` bytes holding the first `n` of
 * `cur`, or NULL when out of memory (then `cur` is unchanged). `cur` is
 * reallocated, or copied when it is the owner's `inline_room` (which stays
 * the owner's). The caller stores the result. Any thread. */
static inline void *nrd_grow(void *cur, const void *inline_room, size_t n, size_t cap, size_t elem) {
  if (cur != inline_room) return realloc(cur, cap * elem);
  void *p = malloc(cap * elem);
  if (p) memcpy(p, cur, n * elem);
  return p;
}

#endif
