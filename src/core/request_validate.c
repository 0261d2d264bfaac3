/* Request validation (nrd_request_validate): the checks ServerInferAsync
 * makes against the model's configuration before a request is queued
 * (inputs present and declared, types, shapes, byte sizes, reshape, batch
 * size). The builder API is request.c, the backend's view
 * request_backend.c. */
#include "request.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "buffer_attributes.h"
#include "datatype.h"
#include "error.h"
#include "log.h"
#include "model.h"
#include "response.h"
#include "stats.h"
#include "trace.h"

static int64_t elem_count(const int64_t *shape, uint32_t n) {
  int64_t c = 1;
  for (uint32_t i = 0; i < n; i++) {
    if (shape[i] < 0) return -1;
    if (shape[i] && c > INT64_MAX / shape[i]) return -2;
    c *= shape[i];
  }
  return c;
}

static void shape_str(const int64_t *s, uint32_t n, char *buf, size_t cap) {
  size_t o = 0;
  o += (size_t)snprintf(buf + o, cap - o, "[");
  for (uint32_t i = 0; i < n && o < cap; i++)
    o += (size_t)snprintf(buf + o, cap - o, i ? ",%" PRId64 : "%" PRId64, s[i]);
  if (o < cap) snprintf(buf + o, cap - o, "]");
}

/* Walks the length-prefixed BYTES elements across all buffers. */
static TRITONSERVER_Error *check_bytes(const TRITONBACKEND_Model *m, const nrd_input *in, int64_t expect) {
  int64_t count = 0;
  uint8_t len_bytes[4];
  uint32_t have_len = 0; /* bytes of the current length prefix seen */
  uint64_t skip = 0; /* element bytes still to skip */
  for (uint32_t b = 0; b < in->nbufs; b++) {
    const uint8_t *p = in->bufs[b].base;
    size_t n = in->bufs[b].size;
    while (n) {
      if (skip) {
        size_t k = skip < n ? (size_t)skip : n;
        p += k;
        n -= k;
        skip -= k;
        continue;
      }
      len_bytes[have_len++] = *p++;
      n--;
      if (have_len == 4) {
        skip = (uint64_t)len_bytes[0] | (uint64_t)len_bytes[1] << 8 | (uint64_t)len_bytes[2] << 16 |
               (uint64_t)len_bytes[3] << 24;
        have_len = 0;
        count++;
      }
    }
  }
  if (have_len || skip)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "input '%s' of model '%s': BYTES data ends inside element %" PRId64
                         " (a 4-byte length prefix or its string is cut short)",
                         in->name, m->name, count);
  if (count != expect)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "input '%s' of model '%s': expected %" PRId64 " BYTES elements for its shape, got %" PRId64,
                         in->name, m->name, expect, count);
  return NULL;
}

/* ---- input storage the request builder (request.c) shares ---- */

/* Room for one more buffer in `in`; false when out of memory. */
bool nrd_input_bufs_reserve(nrd_input *in) {
  if (in->nbufs < in->capbufs) return true;
  uint32_t cap = in->capbufs * 2;
  nrd_buffer *nb;
  if (in->inl & NRD_INL_BUFS) {
    nb = malloc(cap * sizeof(*nb));
    if (nb) memcpy(nb, in->bufs, in->nbufs * sizeof(*nb));
  } else {
    nb = realloc(in->bufs, cap * sizeof(*nb));
  }
  if (!nb) return false;
  in->bufs = nb;
  in->capbufs = cap;
  in->inl &= (uint8_t)~NRD_INL_BUFS;
  return true;
}

TRITONSERVER_Error *nrd_input_prepend(nrd_input *in, nrd_buffer b) {
  if (!nrd_input_bufs_reserve(in)) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory adding input data");
  memmove(in->bufs + 1, in->bufs, in->nbufs * sizeof(*in->bufs));
  in->bufs[0] = b;
  in->nbufs++;
  in->byte_size += b.size;
  free(in->attrs);
  in->attrs = NULL;
  in->n_attrs = 0;
  return NULL;
}

TRITONSERVER_Error *nrd_input_rename(nrd_input *in, const char *name) {
  size_t nlen = strlen(name) + 1;
  char *heap = NULL;
  if (nlen > sizeof in->name_inline && !(heap = strdup(name)))
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory renaming input '%s'", in->name);
  if (!(in->inl & NRD_INL_NAME)) free(in->name);
  if (heap) {
    in->name = heap;
    in->inl &= (uint8_t)~NRD_INL_NAME;
  } else {
    in->name = memcpy(in->name_inline, name, nlen);
    in->inl |= NRD_INL_NAME;
  }
  return NULL;
}

/* A raw input (TRITONSERVER_InferenceRequestAddRawInput: an HTTP body
 * with no JSON header) stands for the model's only input, as in Triton:
 * the request has no other input and the configuration has one, whose
 * name it takes. One named after an input of the configuration is that
 * input, beside any others (ours: Triton refuses the request; see
 * docs/differences.md). */
static TRITONSERVER_Error *claim_raw(TRITONSERVER_InferenceRequest *r) {
  const TRITONBACKEND_Model *m = r->model;
  nrd_input *raw = NULL;
  for (uint32_t i = 0; i < r->n_inputs && !raw; i++)
    if (r->inputs[i].is_raw) raw = &r->inputs[i];
  if (!raw || nrd_model_find_input(m, raw->name)) return NULL;
  if (r->n_inputs != 1 || m->n_inputs != 1)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "Raw request must only have 1 input (found %" PRIu32 ") to be deduced but got %" PRIu32
                         " inputs in '%s' model configuration",
                         r->n_inputs, m->n_inputs, m->name);
  if (strcmp(raw->name, m->inputs[0].name) != 0) return nrd_input_rename(raw, m->inputs[0].name);
  return NULL;
}

/* Fills in a raw input's datatype and shape from the configuration, as
 * Triton deduces them: at most one variable-size dimension, taken from the
 * byte size; a BYTES input must have shape [1] and the whole body is its
 * one element (its 4-byte length is put before the data, once). */
static TRITONSERVER_Error *resolve_raw(const TRITONBACKEND_Model *m, const nrd_io *io, nrd_input *in) {
  int wild = -1;
  int64_t known = 1;
  for (uint32_t i = 0; i < io->ndims; i++) {
    if (io->dims[i] >= 0) {
      known *= io->dims[i];
    } else if (wild >= 0) {
      return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                           "The shape of the raw input '%s' can not be deduced because there are more than one "
                           "variable-sized dimension",
                           io->name);
    } else {
      wild = (int)i;
    }
  }
  size_t esz = nrd_datatype_byte_size(io->dtype);
  if (io->dtype == TRITONSERVER_TYPE_BYTES) {
    if (wild >= 0 || known != 1)
      return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                           "For BYTE datatype raw input '%s', the model must have input shape [1]", io->name);
    if (!in->raw_prefixed) {
      if (in->byte_size > UINT32_MAX)
        return nrd_error_new(
            TRITONSERVER_ERROR_INVALID_ARG,
            "raw input '%s' of model '%s': a BYTES element holds at most 4294967295 bytes, got %" PRIu64, io->name,
            m->name, in->byte_size);
      in->raw_len = (uint32_t)in->byte_size;
      NRD_RETURN_IF_ERROR(
          nrd_input_prepend(in, (nrd_buffer){&in->raw_len, sizeof in->raw_len, TRITONSERVER_MEMORY_CPU, 0}));
      in->raw_prefixed = true;
    }
  } else if (wild >= 0 && (!esz || !known || in->byte_size % (esz * (uint64_t)known))) {
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "raw input '%s' of model '%s': cannot deduce its shape from %" PRIu64
                         " bytes (not a whole number of %" PRIu64 "-byte rows)",
                         io->name, m->name, in->byte_size, (uint64_t)esz * (uint64_t)known);
  }
  in->dtype = io->dtype;
  uint32_t nd = io->ndims + (m->max_batch_size > 0 ? 1 : 0);
  int64_t small[NRD_DIMS_INLINE];
  int64_t *s = nd <= NRD_DIMS_INLINE ? small : malloc(nd * sizeof(int64_t));
  if (!s) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  uint32_t o = 0;
  if (m->max_batch_size > 0) s[o++] = 1;
  for (uint32_t i = 0; i < io->ndims; i++) s[o++] = io->dims[i];
  if (wild >= 0) s[wild + (m->max_batch_size > 0 ? 1 : 0)] = (int64_t)(in->byte_size / (esz * (uint64_t)known));
  /* A reshape from an earlier send of this request has its own copy. */
  free(in->backend_shape);
  in->backend_shape = NULL;
  if (!(in->inl & NRD_INL_SHAPE)) free(in->shape);
  if (s == small) {
    in->shape = memcpy(in->shape_inline, small, nd * sizeof(int64_t));
    in->inl |= NRD_INL_SHAPE;
  } else {
    in->shape = s;
    in->inl &= (uint8_t)~NRD_INL_SHAPE;
  }
  in->dims_count = in->backend_dims_count = nd;
  return NULL;
}

static TRITONSERVER_Error *apply_reshape(const TRITONBACKEND_Model *m, const nrd_io *io, nrd_input *in) {
  bool batched = m->max_batch_size > 0;
  uint32_t nd = io->nreshape + (batched ? 1 : 0);
  int64_t *s = malloc((nd ? nd : 1) * sizeof(int64_t));
  if (!s) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  uint32_t o = 0;
  if (batched) s[o++] = in->shape[0];
  int64_t total = elem_count(in->shape + (batched ? 1 : 0), in->dims_count - (batched ? 1 : 0));
  int64_t known = 1;
  int wild = -1;
  for (uint32_t i = 0; i < io->nreshape; i++) {
    s[o] = io->reshape[i];
    if (s[o] < 0)
      wild = (int)o;
    else
      known *= s[o];
    o++;
  }
  if (wild >= 0) s[wild] = known ? total / known : 0;
  free(in->backend_shape);
  in->backend_shape = s;
  in->backend_dims_count = nd;
  return NULL;
}

TRITONSERVER_Error *nrd_request_validate(TRITONSERVER_InferenceRequest *r) {
  const TRITONBACKEND_Model *m = r->model;
  bool batched = m->max_batch_size > 0;
  int64_t batch = -1;
  char got[256], want[256];

  NRD_RETURN_IF_ERROR(claim_raw(r));
  for (uint32_t i = 0; i < r->n_inputs; i++) {
    nrd_input *in = &r->inputs[i];
    const nrd_io *io = nrd_model_find_input(m, in->name);
    if (!io)
      return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "unexpected inference input '%s' for model '%s'", in->name,
                           m->name);
    if (in->is_raw) NRD_RETURN_IF_ERROR(resolve_raw(m, io, in));
    if (in->dtype != io->dtype)
      return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                           "inference input '%s' data-type is '%s', but model '%s' expects '%s'", in->name,
                           TRITONSERVER_DataTypeString(in->dtype), m->name, TRITONSERVER_DataTypeString(io->dtype));
    const int64_t *dims = in->shape;
    uint32_t nd = in->dims_count;
    if (batched) {
      if (nd < 1)
        return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                             "input '%s' of model '%s' has no batch dimension; the model supports "
                             "batching (max_batch_size %d), so the first dimension is the batch size",
                             in->name, m->name, m->max_batch_size);
      if (batch < 0)
        batch = dims[0];
      else if (dims[0] != batch && !io->allow_ragged_batch)
        return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                             "input '%s' of model '%s' has batch size %" PRId64 " but other inputs have %" PRId64,
                             in->name, m->name, dims[0], batch);
      dims++;
      nd--;
    }
    bool ok = nd == io->ndims;
    for (uint32_t d = 0; ok && d < nd; d++)
      if (dims[d] < 0 || (io->dims[d] >= 0 && io->dims[d] != dims[d])) ok = false;
    if (!ok) {
      shape_str(in->shape, in->dims_count, got, sizeof got);
      int64_t full[65];
      uint32_t fn = 0;
      if (batched) full[fn++] = -1;
      for (uint32_t d = 0; d < io->ndims && fn < 65; d++) full[fn++] = io->dims[d];
      shape_str(full, fn, want, sizeof want);
      return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                           "unexpected shape for input '%s' for model '%s'. Expected %s, got %s", in->name, m->name,
                           want, got);
    }
    int64_t count = elem_count(in->shape, in->dims_count);
    if (count < 0) {
      shape_str(in->shape, in->dims_count, got, sizeof got);
      return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                           count == -1 ? "input '%s' of model '%s': shape %s has a negative dimension"
                                       : "input '%s' of model '%s': shape %s has too many elements",
                           in->name, m->name, got);
    }
    if (in->dtype == TRITONSERVER_TYPE_BYTES) {
      NRD_RETURN_IF_ERROR(check_bytes(m, in, count));
    } else {
      uint64_t expect = (uint64_t)count * nrd_datatype_byte_size(in->dtype);
      if (in->byte_size != expect)
        return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                             "input byte size mismatch for input '%s' for model '%s'. Expected %" PRIu64
                             ", got %" PRIu64,
                             in->name, m->name, expect, in->byte_size);
    }
    if (io->reshape) NRD_RETURN_IF_ERROR(apply_reshape(m, io, in));
  }

  /* Every required input present. */
  for (uint32_t i = 0; i < m->n_inputs; i++) {
    const nrd_io *io = &m->inputs[i];
    if (io->optional || nrd_request_find_input(r, io->name)) continue;
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "expected %u inputs but got %u inputs for model '%s': missing required input '%s'",
                         m->n_inputs, r->n_inputs, m->name, io->name);
  }
  for (uint32_t i = 0; i < r->n_outputs; i++)
    if (!nrd_model_find_output(m, r->outputs[i]))
      return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "unexpected inference output '%s' for model '%s'",
                           r->outputs[i], m->name);

  if (batched) {
    if (batch < 0) batch = 1; /* no inputs at all: one row */
    if (batch < 1 || batch > m->max_batch_size)
      return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                           "inference request batch-size must be <= %d for '%s', got %" PRId64, m->max_batch_size,
                           m->name, batch);
    r->batch_size = (uint64_t)batch;
  } else {
    r->batch_size = 0;
  }
  return NULL;
}
