/* Implicit sequence state (sequence_batching { state [...] } and the
 * TRITONBACKEND_State* API).
 *
 * Each declared state has an input name (what the backend reads, added to
 * every request of the sequence like a client input) and an output name
 * (what the backend creates with TRITONBACKEND_StateNew). A sequence owns a
 * state set: the current value of each state, an immutable counted tensor.
 * A request executing for the sequence holds references to the tensors it
 * was given, so TRITONBACKEND_StateUpdate may replace the sequence's value
 * while the backend still reads the old one. Everything here is freed when
 * its last reference goes, so a request released after its model unloaded
 * still finds what it points to. */
#ifndef NRD_STATE_H
#define NRD_STATE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "triton/core/tritonbackend.h"

typedef struct nrd_state_config nrd_state_config;
typedef struct nrd_state_set nrd_state_set;
typedef struct nrd_state_tensor nrd_state_tensor;

/* What the sequence batcher attaches to one request while it executes:
 * the data of the control inputs it added, the state tensors the request
 * reads and the states the backend made for it. Created by the sequence
 * batcher (nrd_state_attach_new); the request frees it at its release
 * through `free` (nrd_state_attach_free), so that request.c does not call
 * this file. */
typedef struct nrd_seq_attach {
  void (*free)(struct nrd_seq_attach *a);
  nrd_state_set *states; /* counted; NULL without implicit state */
  nrd_state_tensor **held; /* counted; the state inputs' values */
  uint32_t n_held;
  struct TRITONBACKEND_State *made; /* states made by the backend (list) */
  unsigned char ctrl[4][8]; /* START, END, READY, CORRID values */
  unsigned char corrid_bytes[4 + 160]; /* a BYTES CORRID element */
} nrd_seq_attach;

/* Reads the model's declared states, checks them as Triton does and loads
 * each initial value (zeros, or <model_dir>/initial_state/<data_file>).
 * *out is NULL when the model declares no state. On error nothing is kept.
 * The result is counted (one reference for the caller). Loader thread. */
TRITONSERVER_Error *nrd_state_config_new(const TRITONBACKEND_Model *m, nrd_state_config **out);

/* Drops a reference to a state configuration (NULL is fine). Any thread. */
void nrd_state_config_unref(nrd_state_config *c);

/* A new sequence's state set, every state at its initial value; holds a
 * reference on `c`. Returns NULL on out-of-memory. Any thread. */
nrd_state_set *nrd_state_set_new(nrd_state_config *c);

/* Puts every state of `s` back to its initial value (a START request);
 * false on out-of-memory (a same-buffer state's copy), which leaves that
 * state as it was. Any thread; takes the set's own lock. */
bool nrd_state_set_reset(nrd_state_set *s);

/* Drops a reference to a state set (NULL is fine). Any thread. */
void nrd_state_set_unref(nrd_state_set *s);

/* Adds one input per state to `req` (name = the state's input_name, the
 * current value, shape as the value was made), holding the values in `a`
 * and a reference on `s` in a->states. On error the inputs added so far
 * stay counted in req->n_core_inputs and `a` holds what was taken: the
 * request's release frees both. Instance thread, before Execute. */
TRITONSERVER_Error *nrd_state_attach_inputs(nrd_state_set *s, TRITONSERVER_InferenceRequest *req, nrd_seq_attach *a);

/* Frees an attachment: its state values, the states the backend made and
 * never committed, the set reference, then `a` itself. Any thread, once,
 * at the request's release. */
void nrd_state_attach_free(nrd_seq_attach *a);

/* A zeroed attachment whose `free` is nrd_state_attach_free; NULL when out
 * of memory. The caller owns it (usually by setting it as a request's
 * `seq`). Any thread. */
nrd_seq_attach *nrd_state_attach_new(void);

#endif
