/* The startup model status table, in the shape tritonserver prints it:
 *
 *   +--------+---------+--------------------------------+
 *   | Model  | Version | Status                         |
 *   +--------+---------+--------------------------------+
 *   | simple | 1       | READY                          |
 *   | broken | 1       | UNAVAILABLE: <why it failed>   |
 *   +--------+---------+--------------------------------+
 *
 * built from TRITONSERVER_ServerModelIndex only (public API). */
#ifndef NRD_SRV_MODEL_TABLE_H
#define NRD_SRV_MODEL_TABLE_H

#include <stddef.h>
#include <stdio.h>

#include "triton/core/tritonserver.h"

/* Counts from one rendering of the table. */
typedef struct nrd_srv_model_counts {
  size_t listed; /* rows printed (models the server tried to load) */
  size_t ready; /* rows whose state is READY */
  size_t not_loaded; /* models in the repositories never loaded (explicit mode) */
} nrd_srv_model_counts;

/* Writes the table for `server` (borrowed) to `out`, then, if any model in
 * the repositories was never loaded, one line naming them. Multi-line
 * reasons are folded onto one line. On success fills *counts (may be NULL).
 * Returns an error the caller owns if the index cannot be read or parsed;
 * nothing is written then. Thread: any thread that may call the server. */
TRITONSERVER_Error *nrd_srv_model_table_print(TRITONSERVER_Server *server, FILE *out, nrd_srv_model_counts *counts);

/* Writes one line per model that is in the index with a state other than
 * READY ("nereid: model 'x' version 1: UNAVAILABLE: <reason>"), so the
 * reasons also reach the error stream. Returns an error the caller owns if
 * the index cannot be read. Thread: any thread that may call the server. */
TRITONSERVER_Error *nrd_srv_model_table_print_failures(TRITONSERVER_Server *server, FILE *out);

#endif
