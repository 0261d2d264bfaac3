/* ModelInferResponse by hand. Sizes are computed first (protobuf needs each
 * nested message's length before its bytes), then the bytes written in
 * field-number order, as protobuf-c does: proto3 strings only when not
 * empty, oneof members whenever set, every element of a repeated field,
 * packed shapes. */
#include "grpc_pack.h"

#include <stdlib.h>
#include <string.h>

#include "grpc_call.h"

enum { WIRE_VARINT = 0, WIRE_FIXED64 = 1, WIRE_LEN = 2 };

static size_t varint_size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    n++;
  }
  return n;
}

static uint8_t *put_varint(uint8_t *p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *p++ = (uint8_t)v;
  return p;
}

/* Field numbers here are below 16: a tag is one byte. */
static uint8_t *put_tag(uint8_t *p, unsigned field, unsigned wire) {
  *p++ = (uint8_t)(field << 3 | wire);
  return p;
}

static size_t len_field_size(size_t payload) { return 1 + varint_size(payload) + payload; }

static uint8_t *put_bytes(uint8_t *p, unsigned field, const void *data, size_t n) {
  p = put_tag(p, field, WIRE_LEN);
  p = put_varint(p, n);
  if (n) memcpy(p, data, n);
  return p + n;
}

static size_t string_size(const char *s) { return s && *s ? len_field_size(strlen(s)) : 0; }

static uint8_t *put_string(uint8_t *p, unsigned field, const char *s) {
  return s && *s ? put_bytes(p, field, s, strlen(s)) : p;
}

static size_t param_size(const Inference__InferParameter *v) {
  switch (v->parameter_choice_case) {
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM: return 2;
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM: return 1 + varint_size((uint64_t)v->int64_param);
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM:
      return len_field_size(v->string_param ? strlen(v->string_param) : 0);
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_DOUBLE_PARAM: return 9;
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_UINT64_PARAM: return 1 + varint_size(v->uint64_param);
    default: return 0;
  }
}

static uint8_t *put_param(uint8_t *p, const Inference__InferParameter *v) {
  switch (v->parameter_choice_case) {
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM:
      p = put_tag(p, 1, WIRE_VARINT);
      *p++ = v->bool_param ? 1 : 0;
      return p;
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM:
      return put_varint(put_tag(p, 2, WIRE_VARINT), (uint64_t)v->int64_param);
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM: {
      const char *s = v->string_param ? v->string_param : "";
      return put_bytes(p, 3, s, strlen(s));
    }
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_DOUBLE_PARAM:
      p = put_tag(p, 4, WIRE_FIXED64);
      memcpy(p, &v->double_param, 8); /* little-endian hosts only, as the rest of the server */
      return p + 8;
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_UINT64_PARAM:
      return put_varint(put_tag(p, 5, WIRE_VARINT), v->uint64_param);
    default: return p;
  }
}

/* A map<string, InferParameter> entry: key (1) when not empty, value (2)
 * when present. The two map types share the layout. */
static size_t entry_size(const char *key, const Inference__InferParameter *value) {
  return string_size(key) + (value ? len_field_size(param_size(value)) : 0);
}

static uint8_t *put_entry(uint8_t *p, unsigned field, const char *key, const Inference__InferParameter *value) {
  p = put_tag(p, field, WIRE_LEN);
  p = put_varint(p, entry_size(key, value));
  p = put_string(p, 1, key);
  if (value) {
    p = put_tag(p, 2, WIRE_LEN);
    p = put_varint(p, param_size(value));
    p = put_param(p, value);
  }
  return p;
}

static size_t shape_payload(const Inference__ModelInferResponse__InferOutputTensor *t) {
  size_t n = 0;
  for (size_t i = 0; i < t->n_shape; i++) n += varint_size((uint64_t)t->shape[i]);
  return n;
}

static size_t tensor_size(const Inference__ModelInferResponse__InferOutputTensor *t) {
  size_t n = string_size(t->name) + string_size(t->datatype);
  if (t->n_shape) n += len_field_size(shape_payload(t));
  for (size_t i = 0; i < t->n_parameters; i++)
    n += len_field_size(entry_size(t->parameters[i]->key, t->parameters[i]->value));
  return n;
}

static uint8_t *put_tensor(uint8_t *p, const Inference__ModelInferResponse__InferOutputTensor *t) {
  p = put_tag(p, 5, WIRE_LEN);
  p = put_varint(p, tensor_size(t));
  p = put_string(p, 1, t->name);
  p = put_string(p, 2, t->datatype);
  if (t->n_shape) {
    p = put_tag(p, 3, WIRE_LEN);
    p = put_varint(p, shape_payload(t));
    for (size_t i = 0; i < t->n_shape; i++) p = put_varint(p, (uint64_t)t->shape[i]);
  }
  for (size_t i = 0; i < t->n_parameters; i++) p = put_entry(p, 4, t->parameters[i]->key, t->parameters[i]->value);
  return p;
}

static size_t response_size(const Inference__ModelInferResponse *r) {
  size_t n = string_size(r->model_name) + string_size(r->model_version) + string_size(r->id);
  for (size_t i = 0; i < r->n_parameters; i++)
    n += len_field_size(entry_size(r->parameters[i]->key, r->parameters[i]->value));
  for (size_t i = 0; i < r->n_outputs; i++) n += len_field_size(tensor_size(r->outputs[i]));
  for (size_t i = 0; i < r->n_raw_output_contents; i++) n += len_field_size(r->raw_output_contents[i].len);
  return n;
}

static uint8_t *put_response(uint8_t *p, const Inference__ModelInferResponse *r) {
  p = put_string(p, 1, r->model_name);
  p = put_string(p, 2, r->model_version);
  p = put_string(p, 3, r->id);
  for (size_t i = 0; i < r->n_parameters; i++) p = put_entry(p, 4, r->parameters[i]->key, r->parameters[i]->value);
  for (size_t i = 0; i < r->n_outputs; i++) p = put_tensor(p, r->outputs[i]);
  for (size_t i = 0; i < r->n_raw_output_contents; i++)
    p = put_bytes(p, 6, r->raw_output_contents[i].data, r->raw_output_contents[i].len);
  return p;
}

/* The 5-byte gRPC prefix of an uncompressed message of `size` bytes. */
static uint8_t *frame_prefix(uint8_t *buf, size_t size) {
  buf[0] = 0;
  buf[1] = (uint8_t)(size >> 24);
  buf[2] = (uint8_t)(size >> 16);
  buf[3] = (uint8_t)(size >> 8);
  buf[4] = (uint8_t)size;
  return buf + 5;
}

uint8_t *nrd_srv_grpc_frame(const ProtobufCMessage *msg, size_t *len) {
  size_t size = protobuf_c_message_get_packed_size(msg);
  uint8_t *buf = malloc(5 + size);
  if (buf == NULL) return NULL;
  protobuf_c_message_pack(msg, frame_prefix(buf, size));
  *len = 5 + size;
  return buf;
}

uint8_t *nrd_srv_grpc_pack_infer_response(const Inference__ModelInferResponse *r, int stream, const char *error_message,
                                          size_t *len) {
  for (size_t i = 0; i < r->n_outputs; i++) {
    if (r->outputs[i]->contents) { /* not written here */
      if (!stream) return nrd_srv_grpc_frame(&r->base, len);
      Inference__ModelStreamInferResponse s = INFERENCE__MODEL_STREAM_INFER_RESPONSE__INIT;
      s.error_message = (char *)(error_message ? error_message : "");
      s.infer_response = (Inference__ModelInferResponse *)r;
      return nrd_srv_grpc_frame(&s.base, len);
    }
  }
  size_t inner = response_size(r);
  size_t size = stream ? string_size(error_message) + len_field_size(inner) : inner;
  uint8_t *buf = malloc(5 + size);
  if (buf == NULL) return NULL;
  uint8_t *p = frame_prefix(buf, size);
  if (stream) {
    p = put_string(p, 1, error_message);
    p = put_tag(p, 2, WIRE_LEN);
    p = put_varint(p, inner);
  }
  put_response(p, r);
  *len = 5 + size;
  return buf;
}
