/* The request's name indexes: duplicate input and output names found
 * through a hash index once a request has many (request_names.h). Below
 * request.c and request_validate.c: both call down into it. */
#include "request_names.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "request.h"



/* Open addressing over positions in the request's array of names. */
struct nrd_name_index {
  uint32_t n; /* names covered: positions [0, n) when it was last synced */
  size_t mask; /* slots - 1 */
  uint32_t slot[]; /* position + 1; 0 is empty */
};

typedef const char *(*name_at_fn)(const TRITONSERVER_InferenceRequest *r, uint32_t i);
static const char *input_name_at(const TRITONSERVER_InferenceRequest *r, uint32_t i) { return r->inputs[i].name; }
static const char *output_name_at(const TRITONSERVER_InferenceRequest *r, uint32_t i) { return r->outputs[i]; }

static size_t name_hash(const char *s) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return (size_t)h;
}

static void name_index_put(nrd_name_index *idx, const char *name, uint32_t pos) {
  size_t h = name_hash(name) & idx->mask;
  while (idx->slot[h]) h = (h + 1) & idx->mask;
  idx->slot[h] = pos + 1;
}

/* Makes *pidx cover the request's names [0, n) with room for one more;
 * rebuilt when it covers another count (names were removed since). False
 * when memory runs out (*pidx is then NULL and callers scan). */
static bool name_index_sync(nrd_name_index **pidx, const TRITONSERVER_InferenceRequest *r, uint32_t n, name_at_fn at) {
  nrd_name_index *idx = *pidx;
  size_t need = 2 * ((size_t)n + 1);
  if (idx && idx->n == n && idx->mask + 1 >= need) return true;
  size_t slots = 64;
  while (slots < need) slots *= 2;
  if (!idx || idx->mask + 1 != slots) {
    free(idx);
    idx = *pidx = malloc(sizeof *idx + slots * sizeof idx->slot[0]);
    if (!idx) return false;
    idx->mask = slots - 1;
  }
  memset(idx->slot, 0, slots * sizeof idx->slot[0]);
  for (uint32_t i = 0; i < n; i++) name_index_put(idx, at(r, i), i);
  idx->n = n;
  return true;
}

/* Whether `name` is among the request's first n names (n: the count now),
 * through the index from NRD_NAME_INDEX_MIN names on. On false with an index,
 * the caller appends the name at position n and calls name_index_added. */
static bool names_contain(nrd_name_index **pidx, const TRITONSERVER_InferenceRequest *r, uint32_t n, name_at_fn at,
                          const char *name) {
  if (n < NRD_NAME_INDEX_MIN || !name_index_sync(pidx, r, n, at)) {
    for (uint32_t i = 0; i < n; i++)
      if (!strcmp(at(r, i), name)) return true;
    return false;
  }
  const nrd_name_index *idx = *pidx;
  for (size_t h = name_hash(name) & idx->mask; idx->slot[h]; h = (h + 1) & idx->mask)
    if (!strcmp(at(r, idx->slot[h] - 1), name)) return true;
  return false;
}

bool nrd_request_names_has_input(TRITONSERVER_InferenceRequest *r, const char *name) {
  return names_contain(&r->in_index, r, r->n_inputs, input_name_at, name);
}

bool nrd_request_names_has_output(TRITONSERVER_InferenceRequest *r, const char *name) {
  return names_contain(&r->out_index, r, r->n_outputs, output_name_at, name);
}

nrd_input *nrd_request_find_input_indexed(TRITONSERVER_InferenceRequest *r, const char *name) {
  const nrd_name_index *idx = r->in_index;
  if (idx->n != r->n_inputs) { /* stale (inputs went since): scan */
    for (uint32_t i = 0; i < r->n_inputs; i++)
      if (!strcmp(r->inputs[i].name, name)) return &r->inputs[i];
    return NULL;
  }
  for (size_t h = name_hash(name) & idx->mask; idx->slot[h]; h = (h + 1) & idx->mask)
    if (!strcmp(r->inputs[idx->slot[h] - 1].name, name)) return &r->inputs[idx->slot[h] - 1];
  return NULL;
}

/* The name at position pos was appended after names_contain said no. */
void nrd_name_index_added(nrd_name_index *idx, const char *name, uint32_t pos) {
  if (!idx || idx->n != pos) return; /* no index, or a stale one: synced on the next add */
  name_index_put(idx, name, pos);
  idx->n = pos + 1;
}
