/* Request inputs as contiguous CPU buffers, and shape helpers. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nereid/backend_utils.h"

static bool memory_is_host(TRITONSERVER_MemoryType type) {
  return type == TRITONSERVER_MEMORY_CPU || type == TRITONSERVER_MEMORY_CPU_PINNED;
}

void nrd_bu_tensor_release(nrd_bu_tensor *tensor) {
  if (tensor == NULL) {
    return;
  }
  free(tensor->owned);
  memset(tensor, 0, sizeof *tensor);
}

TRITONSERVER_Error *nrd_bu_input_read(TRITONBACKEND_Input *input, nrd_bu_tensor *out) {
  memset(out, 0, sizeof *out);
  uint32_t buffer_count = 0;
  TRITONSERVER_Error *err = TRITONBACKEND_InputProperties(input, &out->name, &out->datatype, &out->shape,
                                                          &out->dims_count, &out->byte_size, &buffer_count);
  if (err != NULL) {
    memset(out, 0, sizeof *out);
    return err;
  }
  const char *name = out->name != NULL ? out->name : "?";
  static const char empty[1] = {0};

  if (buffer_count == 0) {
    if (out->byte_size != 0) {
      err = nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                              "input '%s': %" PRIu64 " bytes announced but no data buffer", name, out->byte_size);
      goto fail;
    }
    out->data = empty;
    return NULL;
  }

  if (buffer_count == 1) {
    const void *base = NULL;
    uint64_t size = 0;
    TRITONSERVER_MemoryType type = TRITONSERVER_MEMORY_CPU;
    int64_t type_id = 0;
    err = TRITONBACKEND_InputBuffer(input, 0, &base, &size, &type, &type_id);
    if (err != NULL) {
      goto fail;
    }
    if (size != out->byte_size) {
      err = nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL,
                              "input '%s': buffer holds %" PRIu64 " bytes, the input announces %" PRIu64, name, size,
                              out->byte_size);
      goto fail;
    }
    if (memory_is_host(type)) {
      out->data = (base != NULL) ? base : empty;
      return NULL;
    }
    /* GPU data: copied below like several buffers. */
  }

  /* Several buffers: gather them into one block owned by 'out'. */
  if (out->byte_size > SIZE_MAX - 1) {
    err = nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "input '%s': %" PRIu64 " bytes is too large", name,
                            out->byte_size);
    goto fail;
  }
  out->owned = malloc(out->byte_size > 0 ? (size_t)out->byte_size : 1);
  if (out->owned == NULL) {
    err = nrd_bu_error_newf(TRITONSERVER_ERROR_UNAVAILABLE, "input '%s': cannot allocate %" PRIu64 " bytes", name,
                            out->byte_size);
    goto fail;
  }
  uint64_t offset = 0;
  for (uint32_t i = 0; i < buffer_count; ++i) {
    const void *base = NULL;
    uint64_t size = 0;
    TRITONSERVER_MemoryType type = TRITONSERVER_MEMORY_CPU;
    int64_t type_id = 0;
    err = TRITONBACKEND_InputBuffer(input, i, &base, &size, &type, &type_id);
    if (err != NULL) {
      goto fail;
    }
    if (size > out->byte_size - offset) {
      err =
          nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL,
                            "input '%s': buffers hold more than the %" PRIu64 " bytes announced", name, out->byte_size);
      goto fail;
    }
    if (size > 0) {
      err = nrd_bu_copy((char *)out->owned + offset, TRITONSERVER_MEMORY_CPU, 0, base, type, type_id, (size_t)size);
      if (err != NULL) {
        goto fail;
      }
      offset += size;
    }
  }
  if (offset != out->byte_size) {
    err = nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL,
                            "input '%s': buffers hold %" PRIu64 " bytes, the input announces %" PRIu64, name, offset,
                            out->byte_size);
    goto fail;
  }
  out->data = out->owned;
  return NULL;

fail:
  nrd_bu_tensor_release(out);
  return err;
}

TRITONSERVER_Error *nrd_bu_request_input(TRITONBACKEND_Request *request, const char *name, nrd_bu_tensor *out) {
  memset(out, 0, sizeof *out);
  TRITONBACKEND_Input *input = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_RequestInput(request, name, &input);
  if (err != NULL || input == NULL) {
    if (err != NULL) {
      TRITONSERVER_ErrorDelete(err);
    }
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "request has no input '%s'", name);
  }
  return nrd_bu_input_read(input, out);
}

int64_t nrd_bu_shape_elements(const int64_t *shape, uint32_t dims_count) {
  int64_t n = 1;
  for (uint32_t i = 0; i < dims_count; ++i) {
    if (shape[i] < 0) {
      return -1;
    }
    if (shape[i] != 0 && n > INT64_MAX / shape[i]) {
      return -1;
    }
    n *= shape[i];
  }
  return n;
}

const char *nrd_bu_shape_string(const int64_t *shape, uint32_t dims_count, char *buf, size_t cap) {
  if (cap == 0) {
    return buf;
  }
  size_t len = 0;
  buf[0] = '\0';
  int n = snprintf(buf, cap, "[");
  len = (n > 0) ? (size_t)n : 0;
  for (uint32_t i = 0; i < dims_count && len < cap; ++i) {
    n = snprintf(buf + len, cap - len, "%s%" PRId64, i ? "," : "", shape[i]);
    if (n < 0) {
      break;
    }
    len += (size_t)n;
  }
  if (len < cap) {
    n = snprintf(buf + len, cap - len, "]");
    if (n > 0) {
      len += (size_t)n;
    }
  }
  if (len >= cap) {
    /* Truncated: mark it so the reader does not trust a partial shape. */
    if (cap >= 4) {
      memcpy(buf + cap - 4, "...", 4);
    } else {
      buf[cap - 1] = '\0';
    }
  }
  return buf;
}

uint64_t nrd_bu_request_batch_size(TRITONBACKEND_Request *request, const char *input_name) {
  TRITONBACKEND_Input *input = NULL;
  const int64_t *shape = NULL;
  uint32_t dims = 0;
  TRITONSERVER_Error *err = input_name != NULL ? TRITONBACKEND_RequestInput(request, input_name, &input)
                                               : TRITONBACKEND_RequestInputByIndex(request, 0, &input);
  if (err == NULL) {
    err = TRITONBACKEND_InputProperties(input, NULL, NULL, &shape, &dims, NULL, NULL);
  }
  if (err != NULL) {
    /* Only statistics depend on it: count the request as one. */
    TRITONSERVER_ErrorDelete(err);
    return 1;
  }
  return (dims > 0 && shape[0] > 0) ? (uint64_t)shape[0] : 1;
}
