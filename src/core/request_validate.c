/* Request validation (nrd_request_validate): the checks ServerInferAsync
 * makes against the model's configuration before a request is queued
 * (inputs present and declared, types, shapes, byte sizes, reshape, batch
 * size). The builder API is request.c, the backend's view
 * request_backend.c. */
#include "request.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "buffer_attributes.h"
#include "datatype.h"
#include "error.h"
#include "gpu_memory.h"
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

/* Walks the length-prefixed BYTES elements across all buffers, with
 * Triton's sentences (core 70b908c, ValidateBytesInputs). Unlike Triton we
 * accept a length prefix split across buffers, and refuse an element cut
 * short at the end of the data (Triton leaves that to the backend). */
static TRITONSERVER_Error *check_bytes(const TRITONSERVER_InferenceRequest *r, const char *key, const nrd_input *in,
                                       int64_t expect) {
  const TRITONBACKEND_Model *m = r->model;
  int64_t count = 0;
  uint8_t len_bytes[4];
  uint32_t have_len = 0; /* bytes of the current length prefix seen */
  uint64_t skip = 0; /* element bytes still to skip */
  for (uint32_t b = 0; b < in->nbufs; b++) {
    const uint8_t *p = in->bufs[b].base;
    size_t n = in->bufs[b].size;
    uint8_t *host = NULL; /* GPU data is read from a host copy */
    if (in->bufs[b].mtype == TRITONSERVER_MEMORY_GPU && n) {
      if (!(host = malloc(n))) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
      TRITONSERVER_Error *e =
          nrd_copy(host, TRITONSERVER_MEMORY_CPU, 0, p, TRITONSERVER_MEMORY_GPU, in->bufs[b].mtype_id, n);
      if (e) {
        free(host);
        return e;
      }
      p = host;
    }
    while (n) {
      if (skip) {
        size_t k = skip < n ? (size_t)skip : n;
        p += k;
        n -= k;
        skip -= k;
        continue;
      }
      if (have_len == 0 && count == expect) {
        free(host);
        return nrd_request_error(r, TRITONSERVER_ERROR_INVALID_ARG,
                                 "unexpected number of string elements %" PRId64
                                 " for inference input '%s' for model '%s', expecting %" PRId64,
                                 count + 1, key, m->name, expect);
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
    free(host);
  }
  if (have_len)
    return nrd_request_error(r, TRITONSERVER_ERROR_INVALID_ARG,
                             "incomplete string length indicator for inference input '%s' for model '%s', expecting "
                             "4 bytes but only %" PRIu32
                             " bytes available. Please make sure the string length indicator is in one buffer.",
                             key, m->name, have_len);
  if (count != expect)
    return nrd_request_error(r, TRITONSERVER_ERROR_INVALID_ARG,
                             "expected %" PRId64
                             " string elements for inference input '%s' for model '%s', got %" PRId64,
                             expect, key, m->name, count);
  if (skip)
    return nrd_request_error(r, TRITONSERVER_ERROR_INVALID_ARG,
                             "input '%s' of model '%s': BYTES data ends inside element %" PRId64
                             " (its string is cut short)",
                             key, m->name, count);
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
    return nrd_request_error(r, TRITONSERVER_ERROR_INVALID_ARG,
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
static TRITONSERVER_Error *resolve_raw(const TRITONSERVER_InferenceRequest *r, const nrd_io *io, nrd_input *in) {
  const TRITONBACKEND_Model *m = r->model;
  int wild = -1;
  int64_t known = 1;
  for (uint32_t i = 0; i < io->ndims; i++) {
    if (io->dims[i] >= 0) {
      known *= io->dims[i];
    } else if (wild >= 0) {
      return nrd_request_error(r, TRITONSERVER_ERROR_INVALID_ARG,
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
      return nrd_request_error(r, TRITONSERVER_ERROR_INVALID_ARG,
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
  } else if (wild >= 0 && (!esz || !known)) {
    /* Triton would divide by zero here. A byte count that is not a whole
     * number of rows rounds down, as in Triton, and the byte size check
     * names the difference. */
    return nrd_request_error(r, TRITONSERVER_ERROR_INVALID_ARG,
                             "raw input '%s' of model '%s': cannot deduce its shape from %" PRIu64
                             " bytes (a dimension of the configuration is 0)",
                             io->name, m->name, in->byte_size);
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

TRITONSERVER_Error *nrd_request_error(const TRITONSERVER_InferenceRequest *r, TRITONSERVER_Error_Code code,
                                      const char *fmt, ...) {
  char small[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) return nrd_error_new(code, "[request id: %s] ", r->id && *r->id ? r->id : "<id_unknown>");
  char *msg = small;
  if ((size_t)n >= sizeof small) {
    if (!(msg = malloc((size_t)n + 1))) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    va_start(ap, fmt);
    vsnprintf(msg, (size_t)n + 1, fmt, ap);
    va_end(ap);
  }
  TRITONSERVER_Error *err = nrd_error_new(code, "[request id: %s] %s", r->id && *r->id ? r->id : "<id_unknown>", msg);
  if (msg != small) free(msg);
  return err;
}

/* The request's i-th input in the order Triton's core visits its inputs
 * (an unordered_map filled in the client's order, which libstdc++ walks
 * newest first while it has few entries): the last added comes first. */
static nrd_input *visit(TRITONSERVER_InferenceRequest *r, uint32_t i) { return &r->inputs[r->n_inputs - 1 - i]; }

/* Triton's "expected N inputs but got M ..." sentence (core 70b908c,
 * InferenceRequest::ValidateRequestInputs), with its lists as it writes
 * them: the inputs given, newest first, and the required ones missing. */
static TRITONSERVER_Error *count_error(TRITONSERVER_InferenceRequest *r, uint32_t required) {
  const TRITONBACKEND_Model *m = r->model;
  size_t gcap = 3, mcap = 3;
  for (uint32_t i = 0; i < r->n_inputs; i++) gcap += strlen(r->inputs[i].name) + 3;
  for (uint32_t i = 0; i < m->n_inputs; i++) mcap += strlen(m->inputs[i].name) + 3;
  char *got = malloc(gcap), *missing = malloc(mcap);
  TRITONSERVER_Error *err = NULL;
  if (!got || !missing) {
    err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    goto fail;
  }
  size_t g = 0, k = 0;
  got[g++] = '[';
  for (uint32_t i = 0; i < r->n_inputs; i++)
    g += (size_t)snprintf(got + g, gcap - g, i ? ",'%s'" : "'%s'", visit(r, i)->name);
  got[g++] = ']';
  got[g] = '\0';
  /* Triton drops the list's last character before closing it: with
   * nothing missing, its opening bracket. */
  bool any = false;
  missing[k++] = '[';
  for (uint32_t i = 0; i < m->n_inputs; i++) {
    const nrd_io *io = &m->inputs[i];
    if (io->optional || nrd_request_find_input(r, io->name)) continue;
    k += (size_t)snprintf(missing + k, mcap - k, any ? ",'%s'" : "'%s'", io->name);
    any = true;
  }
  if (!any) k = 0;
  missing[k++] = ']';
  missing[k] = '\0';
  if (required == m->n_inputs)
    err = nrd_request_error(r, TRITONSERVER_ERROR_INVALID_ARG,
                            "expected %u inputs but got %u inputs for model '%s'. Got input(s) %s, but missing "
                            "required input(s) %s. Please provide all required input(s).",
                            m->n_inputs, r->n_inputs, m->name, got, missing);
  else
    err = nrd_request_error(r, TRITONSERVER_ERROR_INVALID_ARG,
                            "expected number of inputs between %u and %u but got %u inputs for model '%s'. Got "
                            "input(s) %s, but missing required input(s) %s. Please provide all required input(s).",
                            required, m->n_inputs, r->n_inputs, m->name, got, missing);
fail:
  free(got);
  free(missing);
  return err;
}

/* The checks of Triton's InferenceRequest::Normalize (core 70b908c), in its
 * order and with its sentences: the raw input, the requested outputs, the
 * number of inputs, each input's batch dimension, the batch size, then per
 * input its datatype, shape, reshape and byte size. Our own checks (a
 * required input missing beside an optional one, a batch of 0 rows) come
 * after Triton's. */
TRITONSERVER_Error *nrd_request_validate(TRITONSERVER_InferenceRequest *r) {
  const TRITONBACKEND_Model *m = r->model;
  bool batched = m->max_batch_size > 0;
  /* Triton keeps the batch size in 32 unsigned bits: a dimension of -1
   * reads as 4294967295, compared with the others as it was given. */
  uint32_t batch = 0;
  char got[256], want[256];
  char raw_key[NRD_NAME_INLINE * 4] = ""; /* the raw input's name as given, for messages */

  for (uint32_t i = 0; i < r->n_inputs; i++)
    if (r->inputs[i].is_raw) snprintf(raw_key, sizeof raw_key, "%s", r->inputs[i].name);
  NRD_RETURN_IF_ERROR(claim_raw(r));
  for (uint32_t i = 0; i < r->n_inputs; i++) {
    nrd_input *in = &r->inputs[i];
    if (!in->is_raw) continue;
    const nrd_io *io = nrd_model_find_input(m, in->name);
    if (io) NRD_RETURN_IF_ERROR(resolve_raw(r, io, in));
  }

  for (uint32_t i = 0; i < r->n_outputs; i++)
    if (!nrd_model_find_output(m, r->outputs[i]))
      return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "unexpected inference output '%s' for model '%s'",
                           r->outputs[i], m->name);

  uint32_t required = 0;
  for (uint32_t i = 0; i < m->n_inputs; i++) required += !m->inputs[i].optional;
  if (r->n_inputs > m->n_inputs || r->n_inputs < required) return count_error(r, required);

  /* Each input's configuration, found once for the passes below (the
   * first IO_CACHE of them; later ones are looked up again). */
  enum { IO_CACHE = 16 };
  const nrd_io *ios[IO_CACHE];
  for (uint32_t i = 0; i < r->n_inputs; i++) {
    nrd_input *in = visit(r, i);
    const nrd_io *io = nrd_model_find_input(m, in->name);
    if (!io)
      return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "unexpected inference input '%s' for model '%s'", in->name,
                           m->name);
    if (i < IO_CACHE) ios[i] = io;
    if (!batched) continue;
    if (in->dims_count < 1)
      return nrd_request_error(r, TRITONSERVER_ERROR_INVALID_ARG,
                               "input '%s' has no shape but model requires batch dimension for '%s'", in->name,
                               m->name);
    if (batch == 0)
      batch = (uint32_t)in->shape[0];
    else if (in->shape[0] != (int64_t)batch && !io->allow_ragged_batch)
      return nrd_request_error(r, TRITONSERVER_ERROR_INVALID_ARG,
                               "input '%s' batch size does not match other inputs for '%s'", in->name, m->name);
  }
  if (batched && (int64_t)batch > m->max_batch_size)
    return nrd_request_error(r, TRITONSERVER_ERROR_INVALID_ARG,
                             "inference request batch-size must be <= %d for '%s', got %" PRIu32, m->max_batch_size,
                             m->name, batch);

  for (uint32_t i = 0; i < r->n_inputs; i++) {
    nrd_input *in = visit(r, i);
    const nrd_io *io = i < IO_CACHE ? ios[i] : nrd_model_find_input(m, in->name);
    const char *key = in->is_raw && raw_key[0] ? raw_key : in->name; /* Triton names a raw input by its key */
    if (in->dtype != io->dtype)
      return nrd_request_error(r, TRITONSERVER_ERROR_INVALID_ARG,
                               "inference input '%s' data-type is '%s', but model '%s' expects '%s'", key,
                               TRITONSERVER_DataTypeString(in->dtype), m->name, TRITONSERVER_DataTypeString(io->dtype));
    const int64_t *dims = in->shape + (batched ? 1 : 0);
    uint32_t nd = in->dims_count - (batched ? 1 : 0);
    bool ok = nd == io->ndims;
    for (uint32_t d = 0; ok && d < nd; d++) {
      if (dims[d] == -1) {
        shape_str(in->shape, in->dims_count, got, sizeof got);
        return nrd_request_error(r, TRITONSERVER_ERROR_INVALID_ARG,
                                 "All input dimensions should be specified for input '%s' for model '%s', got %s", key,
                                 m->name, got);
      }
      if (dims[d] < 0 || (io->dims[d] >= 0 && io->dims[d] != dims[d])) ok = false;
    }
    if (!ok) {
      shape_str(in->shape, in->dims_count, got, sizeof got);
      int64_t full[65];
      uint32_t fn = 0;
      if (batched) full[fn++] = -1;
      for (uint32_t d = 0; d < io->ndims && fn < 65; d++) full[fn++] = io->dims[d];
      shape_str(full, fn, want, sizeof want);
      return nrd_request_error(
          r, TRITONSERVER_ERROR_INVALID_ARG, "unexpected shape for input '%s' for model '%s'. Expected %s, got %s. %s",
          key, m->name, want, got,
          batched ? "NOTE: Setting a non-zero max_batch_size in the model config requires a batch dimension to be "
                    "prepended to each input shape. If you want to specify the full shape including the batch dim "
                    "in your input dims config, try setting max_batch_size to zero. See the model configuration "
                    "docs for more info on max_batch_size."
                  : "");
    }
    /* Triton sizes the data by the request's batch size and the input's
     * other dimensions (by those alone while the batch size is 0). A
     * ragged input (ours: Triton holds it to the batch size too) by its
     * own shape. */
    int64_t count = elem_count(dims, nd);
    if (batched && io->allow_ragged_batch)
      count = elem_count(in->shape, in->dims_count);
    else if (batched && count > 0 && batch > 0)
      count = count > INT64_MAX / batch ? -2 : count * (int64_t)batch;
    if (count < 0) {
      shape_str(in->shape, in->dims_count, got, sizeof got);
      return nrd_request_error(r, TRITONSERVER_ERROR_INVALID_ARG,
                               count == -1 ? "input '%s' of model '%s': shape %s has a negative dimension"
                                           : "input '%s' of model '%s': shape %s has too many elements",
                               key, m->name, got);
    }
    if (io->reshape) NRD_RETURN_IF_ERROR(apply_reshape(m, io, in));
    if (in->dtype == TRITONSERVER_TYPE_BYTES) {
      NRD_RETURN_IF_ERROR(check_bytes(r, key, in, count));
    } else {
      uint64_t expect = (uint64_t)count * nrd_datatype_byte_size(in->dtype);
      if (in->byte_size != expect)
        return nrd_request_error(r, TRITONSERVER_ERROR_INVALID_ARG,
                                 "input byte size mismatch for input '%s' for model '%s'. Expected %" PRIu64
                                 ", got %" PRIu64,
                                 key, m->name, expect, in->byte_size);
    }
  }

  /* Ours: Triton counts the inputs but does not look for each required
   * one, so an optional input can stand in for a missing required one. */
  for (uint32_t i = 0; i < m->n_inputs; i++) {
    const nrd_io *io = &m->inputs[i];
    if (!io->optional && !nrd_request_find_input(r, io->name)) return count_error(r, required);
  }

  if (batched) {
    if (r->n_inputs == 0) batch = 1; /* no inputs at all: one row */
    /* Ours: Triton lets an input of 0 rows visited first stand beside
     * inputs of more. */
    for (uint32_t i = 0; i < r->n_inputs; i++) {
      const nrd_input *in = &r->inputs[i];
      const nrd_io *io = nrd_model_find_input(m, in->name);
      if (in->shape[0] != (int64_t)batch && !io->allow_ragged_batch)
        return nrd_request_error(r, TRITONSERVER_ERROR_INVALID_ARG,
                                 "input '%s' batch size does not match other inputs for '%s'", in->name, m->name);
    }
    /* Ours: Triton runs a batch of 0 rows whose data matches the shape
     * without its batch dimension; a backend sees no row to read. */
    if (batch < 1)
      return nrd_request_error(r, TRITONSERVER_ERROR_INVALID_ARG,
                               "inference request batch-size must be <= %d for '%s', got %" PRIu32
                               " (a request needs at least one row)",
                               m->max_batch_size, m->name, batch);
    r->batch_size = (uint64_t)batch;
  } else {
    r->batch_size = 0;
  }
  return NULL;
}
