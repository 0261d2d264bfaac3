/* Whole-batch helpers: gather one input of every request of a batch into
 * one buffer, and scatter one batch output back to each request's
 * response. See the "batches" section of nereid/backend_utils.h. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "nereid/backend_utils.h"

/* Deepest output shape the responder builds on its stack; Triton's own
 * limit on dimensions is far below it. */
#define BU_MAX_DIMS 64

static bool memory_is_host(TRITONSERVER_MemoryType type) {
  return type == TRITONSERVER_MEMORY_CPU || type == TRITONSERVER_MEMORY_CPU_PINNED;
}

void nrd_bu_batch_input_release(nrd_bu_batch_input *input) {
  if (input == NULL) {
    return;
  }
  free(input->owned);
  memset(input, 0, sizeof *input);
}

/* Reads input 'name' of 'request'; errors name the request's index. */
static TRITONSERVER_Error *batch_input_props(TRITONBACKEND_Request *request, uint32_t index, const char *name,
                                             TRITONBACKEND_Input **input, uint64_t *byte_size, uint32_t *buffer_count) {
  TRITONSERVER_Error *err = TRITONBACKEND_RequestInput(request, name, input);
  if (err != NULL || *input == NULL) {
    if (err != NULL) {
      TRITONSERVER_ErrorDelete(err);
    }
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "request %u of the batch has no input '%s'", index, name);
  }
  return TRITONBACKEND_InputProperties(*input, NULL, NULL, NULL, NULL, byte_size, buffer_count);
}

/* Copies every buffer of 'input' to 'dst' (room for exactly 'size'). */
static TRITONSERVER_Error *copy_input(TRITONBACKEND_Input *input, uint32_t index, const char *name,
                                      uint32_t buffer_count, char *dst, uint64_t size) {
  uint64_t offset = 0;
  for (uint32_t b = 0; b < buffer_count; ++b) {
    const void *base = NULL;
    uint64_t len = 0;
    TRITONSERVER_MemoryType type = TRITONSERVER_MEMORY_CPU;
    int64_t type_id = 0;
    TRITONSERVER_Error *err = TRITONBACKEND_InputBuffer(input, b, &base, &len, &type, &type_id);
    if (err != NULL) {
      return err;
    }
    if (len == 0) {
      continue;
    }
    if (base == NULL) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "input '%s' of request %u: buffer %u has no data", name,
                               index, b);
    }
    if (len > size - offset) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL,
                               "input '%s' of request %u: buffers hold more "
                               "than the %" PRIu64 " bytes announced",
                               name, index, size);
    }
    err = nrd_bu_copy(dst + offset, TRITONSERVER_MEMORY_CPU, 0, base, type, type_id, (size_t)len);
    if (err != NULL) {
      return err;
    }
    offset += len;
  }
  if (offset != size) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL,
                             "input '%s' of request %u: buffers hold %" PRIu64 " bytes, the input announces %" PRIu64,
                             name, index, offset, size);
  }
  return NULL;
}

TRITONSERVER_Error *nrd_bu_batch_input_gather(TRITONBACKEND_Request **requests, uint32_t count, const char *name,
                                              void *buffer, uint64_t buffer_size, nrd_bu_batch_input *out) {
  static const char empty[1] = {0};
  memset(out, 0, sizeof *out);
  if (count == 0) {
    out->data = empty;
    return NULL;
  }
  /* First pass: the total size, and the single-buffer case. */
  uint64_t total = 0;
  TRITONBACKEND_Input *first = NULL;
  uint32_t first_buffers = 0;
  for (uint32_t i = 0; i < count; ++i) {
    TRITONBACKEND_Input *input = NULL;
    uint64_t size = 0;
    uint32_t buffers = 0;
    TRITONSERVER_Error *err = batch_input_props(requests[i], i, name, &input, &size, &buffers);
    if (err != NULL) {
      return err;
    }
    if (size > UINT64_MAX - total) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "input '%s': the batch is too large", name);
    }
    total += size;
    if (i == 0) {
      first = input;
      first_buffers = buffers;
    }
  }

  if (count == 1 && first_buffers <= 1) {
    /* Zero copy: the request's own buffer (or nothing at all). */
    if (first_buffers == 0) {
      if (total != 0) {
        return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                                 "input '%s': %" PRIu64 " bytes announced but no data buffer", name, total);
      }
      out->data = empty;
      return NULL;
    }
    const void *base = NULL;
    uint64_t len = 0;
    TRITONSERVER_MemoryType type = TRITONSERVER_MEMORY_CPU;
    int64_t type_id = 0;
    TRITONSERVER_Error *err = TRITONBACKEND_InputBuffer(first, 0, &base, &len, &type, &type_id);
    if (err != NULL) {
      return err;
    }
    if (len != total) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL,
                               "input '%s': buffer holds %" PRIu64 " bytes, the input announces %" PRIu64, name, len,
                               total);
    }
    if (memory_is_host(type)) {
      out->data = base != NULL ? base : empty;
      out->byte_size = total;
      return NULL;
    }
    /* GPU data (a CUDA shared memory region): copied to host below. */
  }

  char *dst = buffer;
  if (dst != NULL && buffer_size < total) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             "input '%s': the batch holds %" PRIu64 " bytes, the buffer given has room for %" PRIu64,
                             name, total, buffer_size);
  }
  if (dst == NULL) {
    if (total > SIZE_MAX - 1) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "input '%s': %" PRIu64 " bytes is too large", name,
                               total);
    }
    out->owned = malloc(total > 0 ? (size_t)total : 1);
    if (out->owned == NULL) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_UNAVAILABLE,
                               "input '%s': cannot allocate %" PRIu64 " bytes for the batch", name, total);
    }
    dst = out->owned;
  }
  uint64_t offset = 0;
  for (uint32_t i = 0; i < count; ++i) {
    TRITONBACKEND_Input *input = NULL;
    uint64_t size = 0;
    uint32_t buffers = 0;
    TRITONSERVER_Error *err = batch_input_props(requests[i], i, name, &input, &size, &buffers);
    if (err == NULL && size > total - offset) {
      err = nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL, "input '%s' changed size during the gather", name);
    }
    if (err == NULL) {
      err = copy_input(input, i, name, buffers, dst + offset, size);
    }
    if (err != NULL) {
      nrd_bu_batch_input_release(out);
      return err;
    }
    offset += size;
  }
  out->data = dst;
  out->byte_size = total;
  return NULL;
}

/* Sends 'response' with 'err' as its outcome and forgets it. */
static void fail_response(TRITONBACKEND_Response **response, TRITONSERVER_Error *err) {
  nrd_bu_error_log_and_delete(TRITONBACKEND_ResponseSend(*response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, err),
                              "backend_utils: cannot send an error response");
  TRITONSERVER_ErrorDelete(err);
  *response = NULL;
}

TRITONSERVER_Error *nrd_bu_batch_output_scatter(TRITONBACKEND_Response **responses, uint32_t count, const char *name,
                                                TRITONSERVER_DataType datatype, const int64_t *shape,
                                                uint32_t dims_count, const uint64_t *rows, const void *data,
                                                uint64_t byte_size) {
  if (datatype == TRITONSERVER_TYPE_BYTES) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_UNSUPPORTED,
                             "output '%s': BYTES rows have no fixed size, so "
                             "a batch output cannot be split by rows",
                             name);
  }
  if (dims_count == 0 || dims_count > BU_MAX_DIMS) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             "output '%s': a batch output needs 1 to %d "
                             "dimensions, got %u",
                             name, BU_MAX_DIMS, dims_count);
  }
  uint64_t total_rows = 0;
  for (uint32_t i = 0; i < count; ++i) {
    if (rows[i] > UINT64_MAX - total_rows || rows[i] > INT64_MAX) {
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "output '%s': too many rows", name);
    }
    total_rows += rows[i];
  }
  if (total_rows == 0 ? byte_size != 0 : byte_size % total_rows != 0) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             "output '%s': %" PRIu64 " bytes cannot be split into %" PRIu64 " equal rows", name,
                             byte_size, total_rows);
  }
  uint64_t row_bytes = total_rows == 0 ? 0 : byte_size / total_rows;
  int64_t dims[BU_MAX_DIMS];
  memcpy(dims, shape, dims_count * sizeof *dims);

  uint64_t offset = 0;
  for (uint32_t i = 0; i < count; ++i) {
    uint64_t size = rows[i] * row_bytes;
    const char *src = (const char *)data + offset;
    offset += size;
    if (responses[i] == NULL) {
      continue;
    }
    dims[0] = (int64_t)rows[i];
    TRITONBACKEND_Output *output = NULL;
    TRITONSERVER_Error *err = TRITONBACKEND_ResponseOutput(responses[i], &output, name, datatype, dims, dims_count);
    void *dst = NULL;
    TRITONSERVER_MemoryType mem = TRITONSERVER_MEMORY_CPU;
    int64_t mem_id = 0;
    if (err == NULL) {
      err = TRITONBACKEND_OutputBuffer(output, &dst, size, &mem, &mem_id);
    }
    if (err == NULL && size > 0 && dst == NULL) {
      err = nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL, "output '%s': the allocator gave no buffer", name);
    }
    if (err == NULL && size > 0) {
      err = nrd_bu_copy(dst, mem, mem_id, src, TRITONSERVER_MEMORY_CPU, 0, (size_t)size);
    }
    if (err != NULL) {
      fail_response(&responses[i], err);
      continue;
    }
  }
  return NULL;
}
