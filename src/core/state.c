/* Implicit sequence state (see state.h): the declared states, each
 * sequence's current values, and the TRITONBACKEND_State* API a backend
 * uses to give a sequence its next value. */
#include "state.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buffer_attributes.h"
#include "datatype.h"
#include "error.h"
#include "files.h"
#include "model.h"
#include "request.h"

#define STATE_MAX_DIMS 64

/* One immutable value of a state: the full shape the backend reads
 * (batch dimension included when the model batches) and the bytes. */
struct nrd_state_tensor {
  atomic_int refs;
  TRITONSERVER_DataType dtype;
  uint32_t dims;
  int64_t shape[STATE_MAX_DIMS];
  uint64_t size;
  unsigned char data[]; /* `size` bytes */
};

typedef struct state_decl {
  char *input_name, *output_name;
  TRITONSERVER_DataType dtype;
  nrd_state_tensor *initial; /* counted */
  /* use_same_buffer_for_input_output: each sequence owns its value (a copy
   * of `initial` at START), StateBuffer lends that very buffer, and what
   * the backend writes there is the next value, StateUpdate or not. */
  bool same_buffer;
} state_decl;

struct nrd_state_config {
  atomic_int refs;
  state_decl *decls;
  uint32_t n;
};

struct nrd_state_set {
  atomic_int refs;
  nrd_state_config *cfg; /* counted */
  pthread_mutex_t mu; /* guards cur[] */
  nrd_state_tensor **cur; /* counted, one per declared state */
};

/* What TRITONBACKEND_StateNew returns: the next value of one state of the
 * request's sequence, committed by StateUpdate. Owned by the attachment. */
struct TRITONBACKEND_State {
  struct TRITONBACKEND_State *next;
  nrd_seq_attach *attach;
  uint32_t idx; /* which declared state */
  nrd_state_tensor *value; /* made by StateBuffer; NULL before */
  TRITONSERVER_DataType dtype;
  uint32_t dims;
  int64_t shape[STATE_MAX_DIMS];
  bool committed;
  TRITONSERVER_BufferAttributes attrs; /* what StateBufferAttributes lends */
  bool in_place; /* `value` is the sequence's own (same_buffer): already its next value */
};

/* ------------------------------------------------------------ tensors */

static nrd_state_tensor *tensor_new(TRITONSERVER_DataType dt, const int64_t *shape, uint32_t dims, uint64_t size) {
  if (dims > STATE_MAX_DIMS || size > SIZE_MAX - sizeof(nrd_state_tensor)) return NULL;
  nrd_state_tensor *t = calloc(1, sizeof(*t) + (size_t)size);
  if (!t) return NULL;
  atomic_init(&t->refs, 1);
  t->dtype = dt;
  t->dims = dims;
  if (dims) memcpy(t->shape, shape, dims * sizeof(int64_t));
  t->size = size;
  return t;
}

/* A sequence's private copy of `t` (same_buffer states); NULL on out of memory. */
static nrd_state_tensor *tensor_copy(const nrd_state_tensor *t) {
  nrd_state_tensor *c = tensor_new(t->dtype, t->shape, t->dims, t->size);
  if (c && t->size) memcpy(c->data, t->data, (size_t)t->size);
  return c;
}

static nrd_state_tensor *tensor_ref(nrd_state_tensor *t) {
  atomic_fetch_add(&t->refs, 1);
  return t;
}

static void tensor_unref(nrd_state_tensor *t) {
  if (t && atomic_fetch_sub(&t->refs, 1) == 1) free(t);
}

/* ------------------------------------------------------ configuration */

/* An int64 config field: normalized JSON renders some as numbers and some
 * as strings, as Triton does. */
static int64_t jint64(const json_t *v) {
  if (json_is_integer(v)) return (int64_t)json_integer_value(v);
  if (json_is_string(v)) return (int64_t)strtoll(json_string_value(v), NULL, 10);
  return 0;
}

static const char *jstr(const json_t *o, const char *key) {
  const char *s = json_string_value(json_object_get(o, key));
  return s ? s : "";
}

/* <model_dir>/initial_state/<file> into path[n]. */
static TRITONSERVER_Error *initial_path(const TRITONBACKEND_Model *m, const char *input, const char *file, char *path,
                                        size_t n) {
  if (snprintf(path, n, "%s/initial_state/%s", m->model_dir, file) >= (int)n)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "initial_state data_file path of '%s' is too long", input);
  return NULL;
}

/* Reads <model_dir>/initial_state/<file> into `t`, which must be at least
 * t->size bytes long (as Triton checks; extra bytes are ignored). */
static TRITONSERVER_Error *read_initial_file(const TRITONBACKEND_Model *m, const char *input, const char *file,
                                             nrd_state_tensor *t) {
  char path[4096];
  NRD_RETURN_IF_ERROR(initial_path(m, input, file, path, sizeof path));
  FILE *f = fopen(path, "rb");
  if (!f)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "failed to open initial_state file '%s' for state '%s': %s",
                         path, input, strerror(errno));
  size_t got = t->size ? fread(t->data, 1, (size_t)t->size, f) : 0;
  fclose(f);
  if (got < t->size)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "initial_state setting expects %" PRIu64 " bytes, but the data provided from %s only has %zu "
                         "bytes",
                         t->size, file, got);
  return NULL;
}

/* Replaces *t (a BYTES state's zero lengths) with the whole of
 * <model_dir>/initial_state/<file>, which must hold exactly `elems`
 * elements, each a 4-byte little-endian length and that many bytes. */
static TRITONSERVER_Error *read_initial_bytes(const TRITONBACKEND_Model *m, const char *input, const char *file,
                                              uint64_t elems, nrd_state_tensor **t) {
  char path[4096];
  NRD_RETURN_IF_ERROR(initial_path(m, input, file, path, sizeof path));
  char *data = NULL;
  size_t size = 0;
  TRITONSERVER_Error *err = nrd_read_file(path, &data, &size);
  if (err) {
    TRITONSERVER_Error *e =
        nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "failed to read initial_state file '%s' for state '%s': %s", path,
                      input, TRITONSERVER_ErrorMessage(err));
    TRITONSERVER_ErrorDelete(err);
    return e;
  }
  uint64_t seen = 0;
  size_t at = 0;
  while (at + 4 <= size && seen < elems) {
    uint32_t len;
    memcpy(&len, data + at, 4);
    if (len > size - at - 4) break;
    at += 4u + len;
    seen++;
  }
  if (seen != elems || at != size) {
    free(data);
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "initial_state file '%s' for BYTES state '%s' must hold exactly %" PRIu64
                         " length-prefixed elements",
                         file, input, elems);
  }
  nrd_state_tensor *n = tensor_new((*t)->dtype, (*t)->shape, (*t)->dims, size);
  if (n && size) memcpy(n->data, data, size);
  free(data);
  if (!n) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory for state '%s'", input);
  tensor_unref(*t);
  *t = n;
  return NULL;
}

/* Builds a state's initial value: the initial_state entry's dims (which
 * must be fixed and match the state's), else the state's dims with any
 * variable dimension taken as 1, as Triton does; zeros unless a data_file
 * is given (for BYTES: every element the empty string, a zero length). */
static TRITONSERVER_Error *make_initial(const TRITONBACKEND_Model *m, const json_t *st, state_decl *d) {
  const json_t *inits = json_object_get(st, "initial_state");
  if (json_array_size(inits) > 1)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "initial_state field for state input '%s' must contain exactly one or zero element. Found "
                         "'%zu' elements.",
                         d->input_name, json_array_size(inits));
  const json_t *init = json_array_get(inits, 0);
  const json_t *sdims = json_object_get(st, "dims");
  const json_t *dims = init ? json_object_get(init, "dims") : sdims;
  if (init) {
    if (nrd_datatype_from_config(jstr(init, "data_type")) != d->dtype)
      return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                           "The data type used for 'initial_state' field of state '%s' does not match the state data "
                           "type.",
                           d->input_name);
    if (!*jstr(init, "name"))
      return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                           "Field 'name' must be set when using initial_state for state input '%s'.", d->input_name);
    if (json_array_size(dims) != json_array_size(sdims))
      return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                           "Number of dimensions in 'initial_state' doesn't match the size of 'state' dimensions for "
                           "state input '%s'. %zu != %zu",
                           d->input_name, json_array_size(dims), json_array_size(sdims));
  }
  int64_t shape[STATE_MAX_DIMS];
  uint32_t nd = 0;
  if (m->max_batch_size > 0) shape[nd++] = 1;
  if (json_array_size(dims) + nd > STATE_MAX_DIMS)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "state '%s' has too many dimensions", d->input_name);
  uint64_t elems = 1;
  for (size_t i = 0; i < json_array_size(dims); i++) {
    int64_t v = jint64(json_array_get(dims, i));
    if (init) {
      int64_t sv = jint64(json_array_get(sdims, i));
      if (v < 0)
        return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                             "'initial_state' field for state input name '%s' contains variable dimensions.",
                             d->input_name);
      if (sv >= 0 && sv != v)
        return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                             "'initial_state' dim for input name '%s' doesn't match 'state' dim description. %" PRId64
                             " != %" PRId64,
                             d->input_name, v, sv);
    }
    if (v < 0) v = 1;
    if (v && elems > UINT64_MAX / (uint64_t)v)
      return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "state '%s' is too large", d->input_name);
    elems *= (uint64_t)v;
    shape[nd++] = v;
  }
  bool bytes = d->dtype == TRITONSERVER_TYPE_BYTES;
  size_t esize = bytes ? 4 : nrd_datatype_byte_size(d->dtype); /* BYTES: each element's length, 0 */
  if (!esize)
    return nrd_error_new(TRITONSERVER_ERROR_UNSUPPORTED,
                         "state '%s': data type %s is not supported for implicit state in this build", d->input_name,
                         nrd_datatype_config_name(d->dtype));
  if (elems > (UINT64_MAX >> 8) / esize)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "state '%s' is too large", d->input_name);
  d->initial = tensor_new(d->dtype, shape, nd, elems * esize);
  if (!d->initial) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory for state '%s'", d->input_name);
  const char *file = init ? jstr(init, "data_file") : "";
  if (!*file) return NULL;
  if (bytes) return read_initial_bytes(m, d->input_name, file, elems, &d->initial);
  return read_initial_file(m, d->input_name, file, d->initial);
}

static void config_free(nrd_state_config *c) {
  for (uint32_t i = 0; i < c->n; i++) {
    free(c->decls[i].input_name);
    free(c->decls[i].output_name);
    tensor_unref(c->decls[i].initial);
  }
  free(c->decls);
  free(c);
}

TRITONSERVER_Error *nrd_state_config_new(const TRITONBACKEND_Model *m, nrd_state_config **out) {
  const json_t *states = json_object_get(json_object_get(m->config, "sequence_batching"), "state");
  *out = NULL;
  size_t n = json_array_size(states);
  if (!n) return NULL;
  TRITONSERVER_Error *err = NULL;
  nrd_state_config *c = calloc(1, sizeof(*c));
  if (!c || !(c->decls = calloc(n, sizeof(*c->decls)))) {
    free(c);
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory reading the states of '%s'", m->name);
  }
  atomic_init(&c->refs, 1);
  for (size_t i = 0; i < n; i++) {
    const json_t *st = json_array_get(states, i);
    state_decl *d = &c->decls[c->n++];
    d->input_name = strdup(jstr(st, "input_name"));
    d->output_name = strdup(jstr(st, "output_name"));
    d->dtype = nrd_datatype_from_config(jstr(st, "data_type"));
    if (!d->input_name || !d->output_name) {
      err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory reading the states of '%s'", m->name);
      goto fail;
    }
    if (!*d->input_name || !*d->output_name || d->dtype == TRITONSERVER_TYPE_INVALID) {
      err = nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                          "model '%s': sequence_batching state %zu needs input_name, output_name and data_type",
                          m->name, i);
      goto fail;
    }
    for (uint32_t j = 0; j + 1 < c->n; j++)
      if (!strcmp(c->decls[j].input_name, d->input_name)) {
        err = nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "State input name '%s' specified more than once.",
                            d->input_name);
        goto fail;
      }
    d->same_buffer = json_is_true(json_object_get(st, "use_same_buffer_for_input_output"));
    if (json_is_true(json_object_get(st, "use_growable_memory"))) {
      /* Triton's two checks, made at load rather than at the first request. */
      err = !d->same_buffer
                ? nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                                "In order to 'use_growable_memory', you must also enable "
                                "'use_same_buffer_for_input_output' for state input name '%s'.",
                                d->input_name)
                : nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                                "'use_growable_memory' can only work with KIND_GPU model instances (state input "
                                "name '%s'); this build has no GPU support.",
                                d->input_name);
      goto fail;
    }
    if ((err = make_initial(m, st, d))) goto fail;
  }
  *out = c;
  return NULL;
fail:
  config_free(c);
  return err;
}

void nrd_state_config_unref(nrd_state_config *c) {
  if (c && atomic_fetch_sub(&c->refs, 1) == 1) config_free(c);
}

/* ---------------------------------------------------------- state sets */

nrd_state_set *nrd_state_set_new(nrd_state_config *c) {
  nrd_state_set *s = calloc(1, sizeof(*s));
  if (!s || !(s->cur = calloc(c->n, sizeof(*s->cur)))) {
    free(s);
    return NULL;
  }
  atomic_init(&s->refs, 1);
  atomic_fetch_add(&c->refs, 1);
  s->cfg = c;
  pthread_mutex_init(&s->mu, NULL);
  if (nrd_state_set_reset(s)) return s;
  nrd_state_set_unref(s);
  return NULL;
}

bool nrd_state_set_reset(nrd_state_set *s) {
  bool ok = true;
  pthread_mutex_lock(&s->mu);
  for (uint32_t i = 0; i < s->cfg->n; i++) {
    const state_decl *d = &s->cfg->decls[i];
    nrd_state_tensor *v = d->same_buffer ? tensor_copy(d->initial) : tensor_ref(d->initial);
    if (!v) { /* keeps the old value, rather than none */
      ok = false;
      continue;
    }
    tensor_unref(s->cur[i]);
    s->cur[i] = v;
  }
  pthread_mutex_unlock(&s->mu);
  return ok;
}

void nrd_state_set_unref(nrd_state_set *s) {
  if (!s || atomic_fetch_sub(&s->refs, 1) != 1) return;
  for (uint32_t i = 0; i < s->cfg->n; i++) tensor_unref(s->cur[i]);
  free(s->cur);
  pthread_mutex_destroy(&s->mu);
  nrd_state_config_unref(s->cfg);
  free(s);
}

TRITONSERVER_Error *nrd_state_attach_inputs(nrd_state_set *s, TRITONSERVER_InferenceRequest *req, nrd_seq_attach *a) {
  uint32_t n = s->cfg->n;
  a->held = calloc(n, sizeof(*a->held));
  if (!a->held) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory attaching sequence state");
  atomic_fetch_add(&s->refs, 1);
  a->states = s;
  pthread_mutex_lock(&s->mu);
  for (uint32_t i = 0; i < n; i++) a->held[i] = tensor_ref(s->cur[i]);
  pthread_mutex_unlock(&s->mu);
  a->n_held = n;
  for (uint32_t i = 0; i < n; i++) {
    const nrd_state_tensor *t = a->held[i];
    TRITONSERVER_Error *err =
        nrd_request_add_core_input(req, s->cfg->decls[i].input_name, t->dtype, t->shape, t->dims, t->data, t->size);
    if (err) return err;
  }
  return NULL;
}

nrd_seq_attach *nrd_state_attach_new(void) {
  nrd_seq_attach *a = calloc(1, sizeof(*a));
  if (a) a->free = nrd_state_attach_free;
  return a;
}

void nrd_state_attach_free(nrd_seq_attach *a) {
  if (!a) return;
  for (uint32_t i = 0; i < a->n_held; i++) tensor_unref(a->held[i]);
  free(a->held);
  while (a->made) {
    struct TRITONBACKEND_State *st = a->made;
    a->made = st->next;
    tensor_unref(st->value);
    free(st);
  }
  nrd_state_set_unref(a->states);
  free(a);
}

/* ---------------------------------------------------------- public API */

/* Which declared state `name` is: its output name (what Triton's backends
 * pass) or, as a convenience, its input name. UINT32_MAX when neither. */
static uint32_t find_state(const nrd_state_config *c, const char *name) {
  for (uint32_t i = 0; i < c->n; i++)
    if (!strcmp(c->decls[i].output_name, name)) return i;
  for (uint32_t i = 0; i < c->n; i++)
    if (!strcmp(c->decls[i].input_name, name)) return i;
  return UINT32_MAX;
}

TRITONSERVER_Error *TRITONBACKEND_StateNew(TRITONBACKEND_State **state, TRITONBACKEND_Request *request,
                                           const char *name, const TRITONSERVER_DataType datatype, const int64_t *shape,
                                           const uint32_t dims_count) {
  if (!state || !request || !name || (dims_count && !shape))
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "state, request, name and shape must not be NULL");
  TRITONSERVER_InferenceRequest *r = (TRITONSERVER_InferenceRequest *)request;
  nrd_seq_attach *a = r->seq;
  if (!a || !a->states)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "state '%s' is not a valid state name: request of model '%s' belongs to no sequence with "
                         "implicit state",
                         name, r->model->name);
  const nrd_state_config *c = a->states->cfg;
  uint32_t idx = find_state(c, name);
  if (idx == UINT32_MAX)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "state '%s' is not a valid state name.", name);
  if (datatype != c->decls[idx].dtype)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "state '%s' has data type %s, but %s was given", name,
                         nrd_datatype_config_name(c->decls[idx].dtype), nrd_datatype_config_name(datatype));
  if (dims_count > STATE_MAX_DIMS)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "state '%s' has more than %d dimensions", name,
                         STATE_MAX_DIMS);
  for (uint32_t i = 0; i < dims_count; i++)
    if (shape[i] < 0) return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "state '%s' has a negative dimension", name);
  struct TRITONBACKEND_State *st = calloc(1, sizeof(*st));
  if (!st) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory creating state '%s'", name);
  st->attach = a;
  st->idx = idx;
  st->dtype = datatype;
  st->dims = dims_count;
  if (dims_count) memcpy(st->shape, shape, dims_count * sizeof(int64_t));
  st->next = a->made;
  a->made = st;
  *state = st;
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_StateBuffer(TRITONBACKEND_State *state, void **buffer,
                                              const uint64_t buffer_byte_size, TRITONSERVER_MemoryType *memory_type,
                                              int64_t *memory_type_id) {
  if (!state || !buffer || !memory_type || !memory_type_id)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "state, buffer and memory type must not be NULL");
  if (state->committed)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "state was already committed with TRITONBACKEND_StateUpdate");
  nrd_state_set *s = state->attach->states;
  nrd_state_tensor *t = NULL;
  if (s->cfg->decls[state->idx].same_buffer) {
    /* The sequence's own buffer when size and shape agree; else, as in
     * Triton, a new one (contents not kept) that is the value from now on. */
    pthread_mutex_lock(&s->mu);
    nrd_state_tensor *cur = s->cur[state->idx];
    if (cur->size == buffer_byte_size && cur->dims == state->dims &&
        !memcmp(cur->shape, state->shape, state->dims * sizeof(int64_t))) {
      t = tensor_ref(cur);
    } else if ((t = tensor_new(state->dtype, state->shape, state->dims, buffer_byte_size))) {
      s->cur[state->idx] = tensor_ref(t);
      tensor_unref(cur);
    }
    pthread_mutex_unlock(&s->mu);
    state->in_place = true;
  } else {
    /* A second call replaces the buffer, as if the first was never asked. */
    t = tensor_new(state->dtype, state->shape, state->dims, buffer_byte_size);
  }
  if (!t)
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory for a %" PRIu64 "-byte state buffer",
                         buffer_byte_size);
  tensor_unref(state->value);
  state->value = t;
  *buffer = t->data;
  *memory_type = TRITONSERVER_MEMORY_CPU; /* CPU-only build: the only placement */
  *memory_type_id = 0;
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_StateBufferAttributes(TRITONBACKEND_State *state,
                                                        TRITONSERVER_BufferAttributes **buffer_attributes) {
  if (!state || !buffer_attributes)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "state and buffer attributes must not be NULL");
  if (!state->value)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "state has no buffer yet: call TRITONBACKEND_StateBuffer first");
  /* Owned by the state: valid until StateUpdate or the request's release. */
  nrd_buffer_attributes_init(&state->attrs);
  state->attrs.byte_size = (size_t)state->value->size;
  *buffer_attributes = &state->attrs;
  return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_StateUpdate(TRITONBACKEND_State *state) {
  if (!state) return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "state must not be NULL");
  if (state->committed)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "state was already committed with TRITONBACKEND_StateUpdate");
  if (!state->value)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "state has no buffer: call TRITONBACKEND_StateBuffer before TRITONBACKEND_StateUpdate");
  nrd_state_set *s = state->attach->states;
  nrd_state_tensor *old = state->value; /* in place: the value already is the sequence's */
  if (!state->in_place) {
    pthread_mutex_lock(&s->mu);
    old = s->cur[state->idx];
    s->cur[state->idx] = state->value;
    pthread_mutex_unlock(&s->mu);
  }
  tensor_unref(old);
  state->value = NULL;
  state->committed = true;
  return NULL;
}
