/* Name indexes of a request (request_names.c): from NRD_NAME_INDEX_MIN
 * inputs (or requested outputs) on, duplicate names are found through a
 * hash index instead of a scan: a client that sends 200,000 distinct
 * output names would otherwise hold a core thread for minutes (Triton
 * keeps them in a std::set). Below it callers scan, the quickest for a
 * few names. Every function: the thread that owns the request. */
#ifndef NRD_CORE_REQUEST_NAMES_H
#define NRD_CORE_REQUEST_NAMES_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "triton/core/tritonserver.h"

#define NRD_NAME_INDEX_MIN 32u

typedef struct nrd_name_index nrd_name_index;

/* Whether the request has an input (a requested output) named `name`,
 * through its index (built or rebuilt here; owned by the request, freed by
 * nrd_name_index_drop). On false the caller may append the name at the
 * position of the current count and then call nrd_name_index_added. */
bool nrd_request_names_has_input(TRITONSERVER_InferenceRequest *r, const char *name);
bool nrd_request_names_has_output(TRITONSERVER_InferenceRequest *r, const char *name);

/* The name at position pos was appended after a "has" call said no. */
void nrd_name_index_added(nrd_name_index *idx, const char *name, uint32_t pos);

/* Names were removed or moved: the index goes (freed), rebuilt when
 * needed. */
static inline void nrd_name_index_drop(nrd_name_index **pidx) {
  if (*pidx == NULL) return; /* the usual case: skip free()'s own checks */
  free(*pidx);
  *pidx = NULL;
}

#endif
