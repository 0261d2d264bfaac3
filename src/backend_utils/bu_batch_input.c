/* Triton's batch inputs (model configuration `batch_input`): tensors the
 * backend makes from the shapes of a source input across the requests of
 * an Execute batch, for ragged batching. See nereid/backend_utils.h. */
#include <stdlib.h>
#include <string.h>

#include "nereid/backend_utils.h"

static const struct {
  const char *name;
  nrd_bu_batch_input_kind kind;
} kKinds[] = {
    {"BATCH_ELEMENT_COUNT", NRD_BU_BATCH_ELEMENT_COUNT},
    {"BATCH_ACCUMULATED_ELEMENT_COUNT", NRD_BU_BATCH_ACCUMULATED_ELEMENT_COUNT},
    {"BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO", NRD_BU_BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO},
    {"BATCH_MAX_ELEMENT_COUNT_AS_SHAPE", NRD_BU_BATCH_MAX_ELEMENT_COUNT_AS_SHAPE},
    {"BATCH_ITEM_SHAPE", NRD_BU_BATCH_ITEM_SHAPE},
    {"BATCH_ITEM_SHAPE_FLATTEN", NRD_BU_BATCH_ITEM_SHAPE_FLATTEN},
};

bool nrd_bu_batch_input_kind_from(const char *name, nrd_bu_batch_input_kind *kind) {
  for (size_t i = 0; name != NULL && i < sizeof kKinds / sizeof kKinds[0]; i++) {
    if (strcmp(name, kKinds[i].name) == 0) {
      *kind = kKinds[i].kind;
      return true;
    }
  }
  return false;
}

/* The source input's shape in request i. */
static TRITONSERVER_Error *source_shape(TRITONBACKEND_Request *request, uint32_t i, const char *source,
                                        const int64_t **shape, uint32_t *dims) {
  TRITONBACKEND_Input *input = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_RequestInput(request, source, &input);
  if (err == NULL) err = TRITONBACKEND_InputProperties(input, NULL, NULL, shape, dims, NULL, NULL);
  if (err != NULL) {
    TRITONSERVER_Error *e =
        nrd_bu_error_newf(TRITONSERVER_ErrorCode(err), "batch input: request %u: source input '%s': %s", i, source,
                          TRITONSERVER_ErrorMessage(err));
    TRITONSERVER_ErrorDelete(err);
    return e;
  }
  return NULL;
}

static void put(void *data, bool fp32, size_t at, int64_t v) {
  if (fp32) {
    ((float *)data)[at] = (float)v;
  } else {
    ((int32_t *)data)[at] = (int32_t)v;
  }
}

TRITONSERVER_Error *nrd_bu_batch_input_make(TRITONBACKEND_Request **requests, uint32_t count,
                                            nrd_bu_batch_input_kind kind, TRITONSERVER_DataType datatype,
                                            const char *source, int64_t shape[2], uint32_t *dims, void **data,
                                            size_t *byte_size) {
  *data = NULL;
  *byte_size = 0;
  *dims = 1;
  shape[0] = shape[1] = 0;
  if (datatype != TRITONSERVER_TYPE_INT32 && datatype != TRITONSERVER_TYPE_FP32) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             "batch input from '%s' must be TYPE_INT32 or TYPE_FP32, not %s", source,
                             TRITONSERVER_DataTypeString(datatype));
  }
  bool fp32 = datatype == TRITONSERVER_TYPE_FP32;
  /* First pass: the tensor's shape (Triton's BatchInputShape). */
  uint32_t item_rank = 0;
  for (uint32_t i = 0; i < count; i++) {
    const int64_t *s = NULL;
    uint32_t n = 0;
    TRITONSERVER_Error *err = source_shape(requests[i], i, source, &s, &n);
    if (err != NULL) return err;
    int64_t elements = nrd_bu_shape_elements(s, n);
    switch (kind) {
      case NRD_BU_BATCH_ELEMENT_COUNT:
      case NRD_BU_BATCH_ACCUMULATED_ELEMENT_COUNT: shape[0] = count; break;
      case NRD_BU_BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO: shape[0] = (int64_t)count + 1; break;
      case NRD_BU_BATCH_MAX_ELEMENT_COUNT_AS_SHAPE:
        if (elements > shape[0]) shape[0] = elements;
        break;
      case NRD_BU_BATCH_ITEM_SHAPE:
      case NRD_BU_BATCH_ITEM_SHAPE_FLATTEN:
        /* The first dimension is the batch: each of its items has the
         * shape of the others. */
        if (n == 0 || (i > 0 && n - 1 != item_rank)) {
          return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                                   "batch input from '%s': request %u has %u dimensions, %s", source, i, n,
                                   n == 0 ? "needs a batch dimension" : "the first request has another count");
        }
        item_rank = n - 1;
        shape[0] += s[0];
        break;
    }
  }
  if (kind == NRD_BU_BATCH_ITEM_SHAPE) {
    shape[1] = item_rank;
    *dims = 2;
  } else if (kind == NRD_BU_BATCH_ITEM_SHAPE_FLATTEN) {
    shape[0] *= item_rank;
  }
  size_t elements = (size_t)(*dims == 2 ? shape[0] * shape[1] : shape[0]);
  *byte_size = elements * 4;
  *data = calloc(elements > 0 ? elements : 1, 4);
  if (*data == NULL) return nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL, "out of memory for a batch input");
  /* Second pass: the values (Triton's ProcessBatchInput). The largest
   * element count is told by the shape alone: its data stays zero. */
  int64_t sum = 0;
  size_t at = kind == NRD_BU_BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO ? 1 : 0; /* [0] is 0 */
  for (uint32_t i = 0; i < count && kind != NRD_BU_BATCH_MAX_ELEMENT_COUNT_AS_SHAPE; i++) {
    const int64_t *s = NULL;
    uint32_t n = 0;
    TRITONSERVER_Error *err = source_shape(requests[i], i, source, &s, &n);
    if (err != NULL) {
      free(*data);
      *data = NULL;
      return err;
    }
    int64_t elements_i = nrd_bu_shape_elements(s, n);
    sum += elements_i;
    if (kind == NRD_BU_BATCH_ITEM_SHAPE || kind == NRD_BU_BATCH_ITEM_SHAPE_FLATTEN) {
      for (int64_t item = 0; item < s[0]; item++) {
        for (uint32_t d = 1; d < n; d++) put(*data, fp32, at++, s[d]);
      }
    } else {
      put(*data, fp32, at++, kind == NRD_BU_BATCH_ELEMENT_COUNT ? elements_i : sum);
    }
  }
  return NULL;
}
