/* The ModelInferRequest decoder (grpc_unpack.h). Two passes, as
 * protobuf-c makes them: the first walks the whole message, checks that
 * every field is one this decoder handles and counts the repeated ones;
 * only then is anything allocated, so giving up costs no memory, and the
 * second pass cannot meet bad bytes. Field numbers are those of
 * proto/grpc_service.proto. */
#include "grpc_unpack.h"

#include <string.h>

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2 };

/* A cursor over one message's bytes. */
typedef struct rd {
  const uint8_t *p, *end;
} rd;

/* The getters set their outputs even when they fail, so the second pass
 * (which ignores their results) reads nothing uninitialized. */
static inline bool get_varint(rd *r, uint64_t *out) {
  if (r->p < r->end && *r->p < 0x80) { /* tags and short lengths: one byte */
    *out = *r->p++;
    return true;
  }
  uint64_t v = 0;
  *out = 0;
  for (unsigned shift = 0; shift < 70; shift += 7) {
    if (r->p == r->end) return false;
    uint8_t b = *r->p++;
    if (shift < 64) v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *out = v;
      return true;
    }
  }
  return false; /* more than ten bytes */
}

static inline bool get_tag(rd *r, uint32_t *num, unsigned *wt) {
  uint64_t t;
  *num = 0;
  *wt = 0;
  if (!get_varint(r, &t) || (t >> 3) == 0 || (t >> 3) > 0x1fffffff) return false;
  *num = (uint32_t)(t >> 3);
  *wt = (unsigned)(t & 7);
  return true;
}

/* A length-delimited field's bytes. */
static inline bool get_sub(rd *r, rd *sub) {
  uint64_t n;
  sub->p = sub->end = r->p;
  if (!get_varint(r, &n) || n > (uint64_t)(r->end - r->p)) return false;
  sub->p = r->p;
  sub->end = r->p + n;
  r->p += n;
  return true;
}

/* ---- first pass: check and count ------------------------------------------ */

static bool scan_param(rd m) {
  bool seen = false; /* a oneof: one field, once */
  while (m.p < m.end) {
    uint32_t num;
    unsigned wt;
    uint64_t v;
    rd sub;
    if (!get_tag(&m, &num, &wt) || seen) return false;
    seen = true;
    switch (num) {
      case 1: /* bool_param */
      case 2: /* int64_param */
      case 5: /* uint64_param */
        if (wt != WT_VARINT || !get_varint(&m, &v)) return false;
        break;
      case 3: /* string_param */
        if (wt != WT_LEN || !get_sub(&m, &sub)) return false;
        break;
      case 4: /* double_param */
        if (wt != WT_I64 || m.end - m.p < 8) return false;
        m.p += 8;
        break;
      default: return false;
    }
  }
  return true;
}

/* A map<string, InferParameter> entry: key = 1, value = 2. */
static bool scan_entry(rd m) {
  bool key = false, value = false;
  while (m.p < m.end) {
    uint32_t num;
    unsigned wt;
    rd sub;
    if (!get_tag(&m, &num, &wt) || wt != WT_LEN || !get_sub(&m, &sub)) return false;
    if (num == 1 && !key)
      key = true;
    else if (num == 2 && !value && scan_param(sub))
      value = true;
    else
      return false;
  }
  return true;
}

/* Counts the varints of a packed run; false if one is cut short. */
static bool count_packed(rd m, size_t *n) {
  while (m.p < m.end) {
    uint64_t v;
    if (!get_varint(&m, &v)) return false;
    (*n)++;
  }
  return true;
}

/* InferInputTensor: name = 1, datatype = 2, shape = 3, parameters = 4
 * (contents = 5 is left to protobuf-c). */
static bool scan_input(rd m, size_t *n_shape, size_t *n_params) {
  bool name = false, datatype = false;
  *n_shape = *n_params = 0;
  while (m.p < m.end) {
    uint32_t num;
    unsigned wt;
    uint64_t v;
    rd sub;
    if (!get_tag(&m, &num, &wt)) return false;
    if (num == 3 && wt == WT_VARINT) { /* shape, unpacked */
      if (!get_varint(&m, &v)) return false;
      (*n_shape)++;
      continue;
    }
    if (wt != WT_LEN || !get_sub(&m, &sub)) return false;
    switch (num) {
      case 1:
        if (name) return false;
        name = true;
        break;
      case 2:
        if (datatype) return false;
        datatype = true;
        break;
      case 3:
        if (!count_packed(sub, n_shape)) return false;
        break;
      case 4:
        if (!scan_entry(sub)) return false;
        (*n_params)++;
        break;
      default: return false;
    }
  }
  return true;
}

/* InferRequestedOutputTensor: name = 1, parameters = 2. */
static bool scan_output(rd m, size_t *n_params) {
  bool name = false;
  *n_params = 0;
  while (m.p < m.end) {
    uint32_t num;
    unsigned wt;
    rd sub;
    if (!get_tag(&m, &num, &wt) || wt != WT_LEN || !get_sub(&m, &sub)) return false;
    if (num == 1 && !name)
      name = true;
    else if (num == 2 && scan_entry(sub))
      (*n_params)++;
    else
      return false;
  }
  return true;
}

typedef struct counts {
  size_t params, inputs, outputs, raw;
} counts;

/* ModelInferRequest: model_name = 1, model_version = 2, id = 3,
 * parameters = 4, inputs = 5, outputs = 6, raw_input_contents = 7. */
static bool scan_request(rd m, counts *c) {
  bool seen[4] = {false, false, false, false};
  while (m.p < m.end) {
    uint32_t num;
    unsigned wt;
    rd sub;
    size_t a, b;
    if (!get_tag(&m, &num, &wt) || wt != WT_LEN || !get_sub(&m, &sub)) return false;
    switch (num) {
      case 1:
      case 2:
      case 3:
        if (seen[num]) return false;
        seen[num] = true;
        break;
      case 4:
        if (!scan_entry(sub)) return false;
        c->params++;
        break;
      case 5:
        if (!scan_input(sub, &a, &b)) return false;
        c->inputs++;
        break;
      case 6:
        if (!scan_output(sub, &a)) return false;
        c->outputs++;
        break;
      case 7: c->raw++; break;
      default: return false;
    }
  }
  return true;
}

/* ---- second pass: fill (the bytes are known good) ------------------------- */

static void *take(ProtobufCAllocator *a, size_t n) { return a->alloc(a->allocator_data, n); }

/* n elements of `size`, or NULL for none (as protobuf-c leaves them);
 * *ok turns false when memory runs out. */
static void *take_array(ProtobufCAllocator *a, size_t n, size_t size, bool *ok) {
  if (n == 0) return NULL;
  void *p = take(a, n * size);
  if (p == NULL) *ok = false;
  return p;
}

static char *copy_string(ProtobufCAllocator *a, rd s) {
  size_t n = (size_t)(s.end - s.p);
  char *out = take(a, n + 1);
  if (out == NULL) return NULL;
  if (n) memcpy(out, s.p, n);
  out[n] = '\0';
  return out;
}

/* Bytes: a copy, or data NULL when empty (as protobuf-c leaves them). */
static bool copy_bytes(ProtobufCAllocator *a, rd s, ProtobufCBinaryData *out) {
  out->len = (size_t)(s.end - s.p);
  out->data = NULL;
  if (out->len == 0) return true;
  out->data = take(a, out->len);
  if (out->data == NULL) return false;
  memcpy(out->data, s.p, out->len);
  return true;
}

static Inference__InferParameter *fill_param(ProtobufCAllocator *a, rd m) {
  Inference__InferParameter *p = take(a, sizeof *p);
  if (p == NULL) return NULL;
  Inference__InferParameter init = INFERENCE__INFER_PARAMETER__INIT;
  *p = init;
  if (m.p == m.end) return p; /* nothing set */
  uint32_t num;
  unsigned wt;
  uint64_t v = 0;
  rd sub;
  get_tag(&m, &num, &wt);
  switch (num) {
    case 1:
      get_varint(&m, &v);
      p->parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM;
      p->bool_param = v != 0;
      break;
    case 2:
      get_varint(&m, &v);
      p->parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM;
      p->int64_param = (int64_t)v;
      break;
    case 3:
      get_sub(&m, &sub);
      p->parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM;
      if ((p->string_param = copy_string(a, sub)) == NULL) return NULL;
      break;
    case 4:
      p->parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_DOUBLE_PARAM;
      memcpy(&p->double_param, m.p, 8); /* little-endian on the wire and here */
      break;
    default: /* 5 */
      get_varint(&m, &v);
      p->parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_UINT64_PARAM;
      p->uint64_param = v;
      break;
  }
  return p;
}

/* The three parameter map entries share this layout and differ only in
 * their descriptor; each is filled through its own type. */
static bool fill_kv(ProtobufCAllocator *a, rd m, char **key, Inference__InferParameter **value) {
  while (m.p < m.end) {
    uint32_t num;
    unsigned wt;
    rd sub;
    get_tag(&m, &num, &wt);
    get_sub(&m, &sub);
    if (num == 1) {
      if ((*key = copy_string(a, sub)) == NULL) return false;
    } else if ((*value = fill_param(a, sub)) == NULL) {
      return false;
    }
  }
  return true;
}

static Inference__ModelInferRequest__ParametersEntry *fill_request_entry(ProtobufCAllocator *a, rd m) {
  Inference__ModelInferRequest__ParametersEntry *e = take(a, sizeof *e);
  if (e == NULL) return NULL;
  Inference__ModelInferRequest__ParametersEntry init = INFERENCE__MODEL_INFER_REQUEST__PARAMETERS_ENTRY__INIT;
  *e = init;
  return fill_kv(a, m, &e->key, &e->value) ? e : NULL;
}

static Inference__ModelInferRequest__InferInputTensor__ParametersEntry *fill_input_entry(ProtobufCAllocator *a, rd m) {
  Inference__ModelInferRequest__InferInputTensor__ParametersEntry *e = take(a, sizeof *e);
  if (e == NULL) return NULL;
  Inference__ModelInferRequest__InferInputTensor__ParametersEntry init =
      INFERENCE__MODEL_INFER_REQUEST__INFER_INPUT_TENSOR__PARAMETERS_ENTRY__INIT;
  *e = init;
  return fill_kv(a, m, &e->key, &e->value) ? e : NULL;
}

static Inference__ModelInferRequest__InferRequestedOutputTensor__ParametersEntry *
fill_output_entry(ProtobufCAllocator *a, rd m) {
  Inference__ModelInferRequest__InferRequestedOutputTensor__ParametersEntry *e = take(a, sizeof *e);
  if (e == NULL) return NULL;
  Inference__ModelInferRequest__InferRequestedOutputTensor__ParametersEntry init =
      INFERENCE__MODEL_INFER_REQUEST__INFER_REQUESTED_OUTPUT_TENSOR__PARAMETERS_ENTRY__INIT;
  *e = init;
  return fill_kv(a, m, &e->key, &e->value) ? e : NULL;
}

static Inference__ModelInferRequest__InferInputTensor *fill_input(ProtobufCAllocator *a, rd m) {
  size_t n_shape, n_params;
  scan_input(m, &n_shape, &n_params);
  Inference__ModelInferRequest__InferInputTensor *t = take(a, sizeof *t);
  if (t == NULL) return NULL;
  Inference__ModelInferRequest__InferInputTensor init = INFERENCE__MODEL_INFER_REQUEST__INFER_INPUT_TENSOR__INIT;
  *t = init;
  bool ok = true;
  t->shape = take_array(a, n_shape, sizeof *t->shape, &ok);
  t->parameters = take_array(a, n_params, sizeof *t->parameters, &ok);
  if (!ok) return NULL;
  while (m.p < m.end) {
    uint32_t num;
    unsigned wt;
    uint64_t v;
    rd sub;
    get_tag(&m, &num, &wt);
    if (num == 3 && wt == WT_VARINT) {
      get_varint(&m, &v);
      t->shape[t->n_shape++] = (int64_t)v;
      continue;
    }
    get_sub(&m, &sub);
    switch (num) {
      case 1:
        if ((t->name = copy_string(a, sub)) == NULL) return NULL;
        break;
      case 2:
        if ((t->datatype = copy_string(a, sub)) == NULL) return NULL;
        break;
      case 3:
        while (sub.p < sub.end) {
          get_varint(&sub, &v);
          t->shape[t->n_shape++] = (int64_t)v;
        }
        break;
      default: /* 4 */
        if ((t->parameters[t->n_parameters] = fill_input_entry(a, sub)) == NULL) return NULL;
        t->n_parameters++;
        break;
    }
  }
  return t;
}

static Inference__ModelInferRequest__InferRequestedOutputTensor *fill_output(ProtobufCAllocator *a, rd m) {
  size_t n_params;
  scan_output(m, &n_params);
  Inference__ModelInferRequest__InferRequestedOutputTensor *t = take(a, sizeof *t);
  if (t == NULL) return NULL;
  Inference__ModelInferRequest__InferRequestedOutputTensor init =
      INFERENCE__MODEL_INFER_REQUEST__INFER_REQUESTED_OUTPUT_TENSOR__INIT;
  *t = init;
  bool ok = true;
  t->parameters = take_array(a, n_params, sizeof *t->parameters, &ok);
  if (!ok) return NULL;
  while (m.p < m.end) {
    uint32_t num;
    unsigned wt;
    rd sub;
    get_tag(&m, &num, &wt);
    get_sub(&m, &sub);
    if (num == 1) {
      if ((t->name = copy_string(a, sub)) == NULL) return NULL;
    } else {
      if ((t->parameters[t->n_parameters] = fill_output_entry(a, sub)) == NULL) return NULL;
      t->n_parameters++;
    }
  }
  return t;
}

Inference__ModelInferRequest *nrd_srv_grpc_unpack_infer_request(ProtobufCAllocator *a, const uint8_t *data, size_t len,
                                                                bool *fallback) {
  rd m = {data, data + len};
  counts c = {0, 0, 0, 0};
  *fallback = !scan_request(m, &c);
  if (*fallback) return NULL;
  Inference__ModelInferRequest *r = take(a, sizeof *r);
  if (r == NULL) return NULL;
  Inference__ModelInferRequest init = INFERENCE__MODEL_INFER_REQUEST__INIT;
  *r = init;
  bool ok = true;
  r->parameters = take_array(a, c.params, sizeof *r->parameters, &ok);
  r->inputs = take_array(a, c.inputs, sizeof *r->inputs, &ok);
  r->outputs = take_array(a, c.outputs, sizeof *r->outputs, &ok);
  r->raw_input_contents = take_array(a, c.raw, sizeof *r->raw_input_contents, &ok);
  if (!ok) return NULL;
  while (m.p < m.end) {
    uint32_t num;
    unsigned wt;
    rd sub;
    get_tag(&m, &num, &wt);
    get_sub(&m, &sub);
    switch (num) {
      case 1:
        if ((r->model_name = copy_string(a, sub)) == NULL) return NULL;
        break;
      case 2:
        if ((r->model_version = copy_string(a, sub)) == NULL) return NULL;
        break;
      case 3:
        if ((r->id = copy_string(a, sub)) == NULL) return NULL;
        break;
      case 4:
        if ((r->parameters[r->n_parameters] = fill_request_entry(a, sub)) == NULL) return NULL;
        r->n_parameters++;
        break;
      case 5:
        if ((r->inputs[r->n_inputs] = fill_input(a, sub)) == NULL) return NULL;
        r->n_inputs++;
        break;
      case 6:
        if ((r->outputs[r->n_outputs] = fill_output(a, sub)) == NULL) return NULL;
        r->n_outputs++;
        break;
      default: /* 7 */
        if (!copy_bytes(a, sub, &r->raw_input_contents[r->n_raw_input_contents])) return NULL;
        r->n_raw_input_contents++;
        break;
    }
  }
  return r;
}
