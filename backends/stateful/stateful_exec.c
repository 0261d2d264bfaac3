/*
 * Execute for the stateful backend: every request of a batch is one step
 * of one sequence. Each sequence owns a slot of the instance's state
 * buffers; a batch stacks its requests' inputs and their sequences' states
 * along the batch (-1) dimension, runs the model once, stores each state
 * output back into its slot and splits the outputs into the responses.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nereid/backend_utils.h"
#include "ort_backend.h"
#include "stateful.h"

typedef struct item {
  TRITONBACKEND_Request *request;
  TRITONBACKEND_Response *response; /* NULL once answered */
  bool start, end;
  long slot; /* -1: none */
  uint64_t id;
  const char *sid; /* borrowed from the request; NULL for integer ids */
  bool known; /* its sequence was read */
} item;

static TRITONSERVER_Error *oom(void) {
  return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, "stateful: out of memory");
}

/* Logs on one of the README's streams when logging_level lets it through. */
static void sf_log(const sf_model *m, int stream, const char *fmt, ...) NRD_BU_PRINTF(3, 4);
static void sf_log(const sf_model *m, int stream, const char *fmt, ...) {
  if (m->log_level < stream || stream == SF_LOG_NONE) return;
  char text[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  nrd_bu_logf(stream == SF_LOG_INFO ? TRITONSERVER_LOG_INFO : TRITONSERVER_LOG_VERBOSE, __FILE__, __LINE__,
              "stateful: model '%s': %s", m->name, text);
}

static void answer(item *it, TRITONSERVER_Error *err) {
  if (it->response == NULL) return;
  nrd_bu_error_log_and_delete(TRITONBACKEND_ResponseSend(it->response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, err),
                              "stateful: cannot send a response");
  it->response = NULL;
}

static const char *id_text(const item *it, char *buf, size_t cap) {
  if (it->sid != NULL) {
    snprintf(buf, cap, "'%s'", it->sid);
  } else {
    snprintf(buf, cap, "%llu", (unsigned long long)it->id);
  }
  return buf;
}

/* ---- slots ----------------------------------------------------------------- */

static uint8_t *slot_data(const sf_instance *inst, long slot) {
  long first = 0;
  for (size_t b = 0; b < inst->buffer_count; b++) {
    if (slot < first + inst->buf_slots[b]) {
      return inst->buffers[b] + (size_t)(slot - first) * inst->slot_bytes;
    }
    first += inst->buf_slots[b];
  }
  return NULL;
}

/* ---- the correlation id index (open addressing, linear probing) -------- */

static size_t key_hash(uint64_t id, const char *sid) {
  uint64_t h;
  if (sid != NULL) {
    h = 1469598103934665603ull; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)sid; *p; p++) {
      h = (h ^ *p) * 1099511628211ull;
    }
  } else {
    h = id + 0x9e3779b97f4a7c15ull; /* splitmix64's finalizer */
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
    h ^= h >> 31;
  }
  return (size_t)h;
}

static bool same_key(const sf_seq *q, uint64_t id, const char *sid) {
  return sid != NULL ? q->sid != NULL && strcmp(q->sid, sid) == 0 : q->sid == NULL && q->id == id;
}

/* The index position holding the sequence, or -1. */
static long index_find(const sf_instance *inst, uint64_t id, const char *sid) {
  size_t mask = inst->index_cap - 1;
  for (size_t i = key_hash(id, sid) & mask, n = 0; n < inst->index_cap; i = (i + 1) & mask, n++) {
    int32_t e = inst->index[i];
    if (e == -1) return -1;
    if (e >= 0 && same_key(&inst->seqs[e], id, sid)) return (long)i;
  }
  return -1;
}

static void index_put(sf_instance *inst, long slot) {
  const sf_seq *q = &inst->seqs[slot];
  size_t mask = inst->index_cap - 1;
  size_t i = key_hash(q->id, q->sid) & mask;
  while (inst->index[i] >= 0) i = (i + 1) & mask;
  if (inst->index[i] == -2) inst->index_removed--;
  inst->index[i] = (int32_t)slot;
}

/* Rebuilds the index when removals have made probes long. */
static void index_compact(sf_instance *inst) {
  if (inst->index_removed < inst->index_cap / 4) return;
  memset(inst->index, 0xff, inst->index_cap * sizeof *inst->index);
  inst->index_removed = 0;
  for (long s = 0; s < inst->total_slots; s++) {
    if (inst->seqs[s].used && !inst->seqs[s].superseded) index_put(inst, s);
  }
}

/* The slot of a request's sequence, or -1. While its id names two
 * sequences, the superseded one's requests are the older, which the
 * sequence batcher hands out first: the first request of an execution
 * goes to the superseded slot, a second one (or a START) to the newer. */
static long find_slot(const sf_instance *inst, const item *it) {
  long at = index_find(inst, it->id, it->sid);
  if (at < 0) return -1;
  long s = inst->index[at];
  long old = inst->seqs[s].older - 1;
  if (!it->start && old >= 0 && inst->seqs[old].claim != inst->exec_no) return old;
  return s;
}

/* Adds a buffer of subsequent_buffer_size slots (fewer at the maximum). */
static void grow(sf_instance *inst) {
  const sf_model *m = inst->m;
  long add = m->lazy.subsequent;
  if (add > m->max_slots - inst->total_slots) add = m->max_slots - inst->total_slots;
  if (add <= 0) return;
  uint8_t **b = realloc(inst->buffers, (inst->buffer_count + 1) * sizeof *b);
  if (b != NULL) inst->buffers = b;
  long *n = realloc(inst->buf_slots, (inst->buffer_count + 1) * sizeof *n);
  if (n != NULL) inst->buf_slots = n;
  uint8_t *data = b != NULL && n != NULL ? calloc((size_t)add, inst->slot_bytes > 0 ? inst->slot_bytes : 1) : NULL;
  if (data == NULL) {
    NRD_BU_LOG(TRITONSERVER_LOG_ERROR,
               "stateful: instance '%s': out of memory adding a state buffer "
               "of %ld slots",
               inst->name, add);
    return;
  }
  inst->buffers[inst->buffer_count] = data;
  inst->buf_slots[inst->buffer_count] = add;
  inst->buffer_count++;
  inst->total_slots += add;
  sf_log(m, SF_LOG_INFO, "instance '%s': state buffer %zu of %ld slots added, %ld slots now", inst->name,
         inst->buffer_count, add, inst->total_slots);
}

static void shrink(sf_instance *inst) {
  for (;;) {
    long last = inst->buf_slots[inst->buffer_count - 1];
    bool idle = true;
    for (long s = inst->total_slots - last; idle && s < inst->total_slots; s++) {
      idle = !inst->seqs[s].used;
    }
    if (!sf_lazy_should_shrink(&inst->m->lazy, inst->total_slots - inst->active, inst->buffer_count, idle)) {
      return;
    }
    inst->buffer_count--;
    free(inst->buffers[inst->buffer_count]);
    inst->total_slots -= last;
    sf_log(inst->m, SF_LOG_INFO,
           "instance '%s': last state buffer (%ld slots) released, %ld slots "
           "now",
           inst->name, last, inst->total_slots);
  }
}

static void free_slot(sf_instance *inst, long s) {
  if (s < 0 || !inst->seqs[s].used) return;
  const sf_seq *q = &inst->seqs[s];
  long at = index_find(inst, q->id, q->sid);
  if (q->superseded) {
    /* The newer sequence of its id no longer has an older one. */
    if (at >= 0 && inst->seqs[inst->index[at]].older == s + 1) inst->seqs[inst->index[at]].older = 0;
  } else if (at >= 0 && q->older > 0) {
    /* A newer sequence ends first (its START failed): the superseded one
     * is its id's sequence again. */
    inst->index[at] = (int32_t)(q->older - 1);
    inst->seqs[q->older - 1].superseded = false;
  } else if (at >= 0) {
    inst->index[at] = -2;
    inst->index_removed++;
  }
  free(inst->seqs[s].sid);
  memset(&inst->seqs[s], 0, sizeof inst->seqs[s]);
  inst->active--;
  index_compact(inst);
}

/* Releases the slots of sequences idle for longer than
 * max_sequence_idle_microseconds: the sequence batcher has dropped them
 * too, and a later request of theirs gets the no-slot error. */
static void reclaim_idle(sf_instance *inst, uint64_t now) {
  for (long s = 0; s < inst->total_slots; s++) {
    sf_seq *q = &inst->seqs[s];
    if (!q->used || now - q->last_ns <= inst->m->idle_ns) continue;
    if (q->sid != NULL) {
      sf_log(inst->m, SF_LOG_INFO,
             "sequence '%s' idle for longer than "
             "max_sequence_idle_microseconds; its slot %ld is released",
             q->sid, s);
    } else {
      sf_log(inst->m, SF_LOG_INFO,
             "sequence %llu idle for longer than "
             "max_sequence_idle_microseconds; its slot %ld is released",
             (unsigned long long)q->id, s);
    }
    free_slot(inst, s);
  }
}

/* Finds the request's slot, or gives a START request a new one. */
static TRITONSERVER_Error *assign_slot(sf_instance *inst, item *it) {
  const sf_model *m = inst->m;
  char idt[160];
  uint64_t now = nrd_bu_now_ns();
  it->slot = find_slot(inst, it);
  long old = -1;
  if (it->slot >= 0 && it->start && inst->seqs[it->slot].claim == inst->exec_no && inst->seqs[it->slot].older == 0) {
    /* Its id's sequence runs a request in this execution: that one has
     * received its END (the batcher starts a new sequence for a START only
     * then), and this START begins a new sequence in a slot of its own. */
    old = it->slot;
    it->slot = -1;
  }
  if (it->slot >= 0) {
    inst->seqs[it->slot].last_ns = now;
    inst->seqs[it->slot].claim = inst->exec_no;
    if (it->start) {
      sf_log(m, SF_LOG_VERBOSE, "sequence %s restarts in slot %ld", id_text(it, idt, sizeof idt), it->slot);
    }
    return NULL;
  }
  if (!it->start) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             "stateful: model '%s': sequence %s has no state slot: it never "
                             "started (no CONTROL_SEQUENCE_START request reached this instance) "
                             "or its slot was released; start it again",
                             m->name, id_text(it, idt, sizeof idt));
  }
  if (inst->active >= m->use_limit) reclaim_idle(inst, now);
  if (inst->active >= m->use_limit) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_UNAVAILABLE,
                             "stateful: model '%s': sequence %s cannot start: %ld sequences are "
                             "active on instance '%s', the most max_candidate_sequence_use_ratio "
                             "allows of max_candidate_sequences %ld",
                             m->name, id_text(it, idt, sizeof idt), inst->active, inst->name, m->max_slots);
  }
  if (inst->active >= inst->total_slots) grow(inst);
  for (long s = 0; s < inst->total_slots; s++) {
    if (inst->seqs[s].used) continue;
    sf_seq *q = &inst->seqs[s];
    if (it->sid != NULL) {
      q->sid = strdup(it->sid);
      if (q->sid == NULL) return oom();
    }
    q->id = it->id;
    q->used = true;
    q->last_ns = now;
    q->claim = inst->exec_no;
    if (old >= 0) {
      inst->index[index_find(inst, it->id, it->sid)] = (int32_t)s;
      inst->seqs[old].superseded = true;
      q->older = old + 1;
    } else {
      index_put(inst, s);
    }
    inst->active++;
    it->slot = s;
    sf_log(m, SF_LOG_VERBOSE, "sequence %s starts in slot %ld", id_text(it, idt, sizeof idt), s);
    if (sf_lazy_should_grow(&m->lazy, inst->total_slots - inst->active, inst->total_slots, m->max_slots)) {
      grow(inst);
    }
    return NULL;
  }
  return nrd_bu_error_newf(TRITONSERVER_ERROR_UNAVAILABLE,
                           "stateful: model '%s': no free state slot for "
                           "sequence %s on instance '%s'",
                           m->name, id_text(it, idt, sizeof idt), inst->name);
}

/* ---- requests ------------------------------------------------------------- */

/* Checks input shapes: [1] (Triton's batch) + dims with 1 at the -1. */
static TRITONSERVER_Error *check_request(const sf_instance *inst, item *it) {
  const sf_model *m = inst->m;
  for (size_t k = 0; k < inst->input_count; k++) {
    const sf_io *io = &inst->inputs[k];
    TRITONBACKEND_Input *input = NULL;
    TRITONSERVER_Error *err = TRITONBACKEND_RequestInput(it->request, io->name, &input);
    if (err != NULL) {
      TRITONSERVER_ErrorDelete(err);
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "stateful: model '%s': input '%s' is missing", m->name,
                               io->name);
    }
    TRITONSERVER_DataType dt;
    const int64_t *shape = NULL;
    uint32_t dims = 0;
    err = TRITONBACKEND_InputProperties(input, NULL, &dt, &shape, &dims, NULL, NULL);
    if (err != NULL) return err;
    bool ok = dt == io->dt && dims == io->rank + 1 && shape[0] == 1;
    for (size_t d = 0; ok && d < io->rank; d++) {
      ok = shape[d + 1] == (d == io->axis ? 1 : io->dims[d]);
    }
    if (!ok) {
      char a[128], b[128];
      int64_t want[SF_MAX_RANK + 1];
      want[0] = 1;
      for (size_t d = 0; d < io->rank; d++) {
        want[d + 1] = d == io->axis ? 1 : io->dims[d];
      }
      return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                               "stateful: model '%s': input '%s' is %s %s; each request is one "
                               "step of one sequence: %s %s",
                               m->name, io->name, TRITONSERVER_DataTypeString(dt),
                               nrd_bu_shape_string(shape, dims, a, sizeof a), TRITONSERVER_DataTypeString(io->dt),
                               nrd_bu_shape_string(want, (uint32_t)io->rank + 1, b, sizeof b));
    }
  }
  return NULL;
}

static TRITONSERVER_Error *read_sequence(const sf_instance *inst, item *it) {
  uint32_t flags = 0;
  TRITONSERVER_Error *err = TRITONBACKEND_RequestFlags(it->request, &flags);
  if (err != NULL) return err;
  it->start = (flags & TRITONSERVER_REQUEST_FLAG_SEQUENCE_START) != 0;
  it->end = (flags & TRITONSERVER_REQUEST_FLAG_SEQUENCE_END) != 0;
  if (inst->m->corrid_string) {
    err = TRITONBACKEND_RequestCorrelationIdString(it->request, &it->sid);
    if (err == NULL) return NULL;
    TRITONSERVER_ErrorDelete(err);
    it->sid = NULL;
  }
  err = TRITONBACKEND_RequestCorrelationId(it->request, &it->id);
  if (err != NULL && !inst->m->corrid_string) {
    TRITONSERVER_ErrorDelete(err);
    err = TRITONBACKEND_RequestCorrelationIdString(it->request, &it->sid);
  }
  return err;
}

/* ---- one run ----------------------------------------------------------------- */

/* Copies row 'row' of a batch of 'rows' along io's axis from/to 'one'. */
static void put_row(const sf_io *io, uint8_t *batch, int64_t rows, int64_t row, const uint8_t *one, size_t elem) {
  size_t inner = (size_t)io->inner * elem;
  for (int64_t o = 0; o < io->outer; o++) {
    memcpy(batch + ((size_t)o * (size_t)rows + (size_t)row) * inner, one + (size_t)o * inner, inner);
  }
}

static void get_row(const sf_io *io, const uint8_t *batch, int64_t rows, int64_t row, uint8_t *one, size_t elem) {
  size_t inner = (size_t)io->inner * elem;
  for (int64_t o = 0; o < io->outer; o++) {
    memcpy(one + (size_t)o * inner, batch + ((size_t)o * (size_t)rows + (size_t)row) * inner, inner);
  }
}

static bool half_stored(const sf_instance *inst, const sf_io *io) {
  return inst->m->fp16_states && io->dt == TRITONSERVER_TYPE_FP32;
}

/* Writes 'on' as one element of the reset input's type. */
static void put_flag(ONNXTensorElementDataType et, uint8_t *dst, size_t i, bool on) {
  switch (et) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: {
      float v = on ? 1.0f : 0.0f;
      memcpy(dst + i * 4, &v, 4);
      break;
    }
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE: {
      double v = on ? 1.0 : 0.0;
      memcpy(dst + i * 8, &v, 8);
      break;
    }
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16: {
      uint16_t v = on ? 0x3c00u : 0;
      memcpy(dst + i * 2, &v, 2);
      break;
    }
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16: {
      uint16_t v = on;
      memcpy(dst + i * 2, &v, 2);
      break;
    }
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32: {
      uint32_t v = on;
      memcpy(dst + i * 4, &v, 4);
      break;
    }
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64: {
      uint64_t v = on;
      memcpy(dst + i * 8, &v, 8);
      break;
    }
    default: dst[i] = on; break;
  }
}

/* Sends output 'io' of one request: 'rows' (1, or 0 for an empty one). */
static TRITONSERVER_Error *respond_output(item *it, const sf_io *io, const uint8_t *batch, int64_t total, int64_t row,
                                          int64_t rows) {
  int64_t shape[SF_MAX_RANK + 1];
  shape[0] = 1;
  for (size_t d = 0; d < io->rank; d++) {
    shape[d + 1] = d == io->axis ? rows : io->dims[d];
  }
  uint64_t bytes = (uint64_t)(io->outer * io->inner * rows) * io->elem;
  TRITONBACKEND_Output *out = NULL;
  void *buf = NULL;
  TRITONSERVER_MemoryType mt = TRITONSERVER_MEMORY_CPU;
  int64_t mt_id = 0;
  TRITONSERVER_Error *err =
      TRITONBACKEND_ResponseOutput(it->response, &out, io->name, io->dt, shape, (uint32_t)io->rank + 1);
  if (err == NULL) err = TRITONBACKEND_OutputBuffer(out, &buf, bytes, &mt, &mt_id);
  if (err != NULL || rows == 0) return err;
  if (mt != TRITONSERVER_MEMORY_GPU) {
    get_row(io, batch, total, row, buf, io->elem);
    return NULL;
  }
  /* A client's CUDA shared memory region: the row goes through a host
   * block and the driver's copy. */
  uint8_t *host = malloc((size_t)bytes);
  if (host == NULL) return oom();
  get_row(io, batch, total, row, host, io->elem);
  err = nrd_bu_copy(buf, mt, mt_id, host, TRITONSERVER_MEMORY_CPU, 0, (size_t)bytes);
  free(host);
  return err;
}

/* ---- the Run's tensors, kept across executions ---------------------------- */

/* Bytes of 'rows' rows of a tensor. */
static size_t rows_bytes(const sf_io *io, int64_t rows) { return (size_t)(io->outer * io->inner * rows) * io->elem; }

static TRITONSERVER_Error *tensor_init(sf_tensor *t, const sf_io *io, int64_t max_rows) {
  t->io = io;
  size_t bytes = rows_bytes(io, max_rows);
  t->data = calloc(bytes > 0 ? bytes : 1, 1);
  t->values = calloc((size_t)max_rows, sizeof *t->values);
  return t->data == NULL || t->values == NULL ? oom() : NULL;
}

static void tensor_free(const ort_runtime *rt, sf_tensor *t, int64_t max_rows) {
  for (int64_t r = 0; t->values != NULL && r < max_rows; r++) {
    if (t->values[r] != NULL) rt->api->ReleaseValue(t->values[r]);
  }
  free(t->values);
  free(t->data);
}

/* The tensor of 'rows' rows over t's buffer, made on first use. */
static TRITONSERVER_Error *tensor_value(const ort_runtime *rt, sf_tensor *t, int64_t rows, OrtValue **out) {
  OrtValue **v = &t->values[rows - 1];
  if (*v == NULL) {
    const sf_io *io = t->io;
    int64_t shape[SF_MAX_RANK];
    memcpy(shape, io->dims, io->rank * sizeof *shape);
    shape[io->axis] = rows;
    TRITONSERVER_Error *err = ort_runtime_error(
        rt, rt->api->CreateTensorWithDataAsOrtValue(rt->cpu, t->data, rows_bytes(io, rows), shape, io->rank, io->et, v),
        "cannot create a tensor");
    if (err != NULL) return err;
  }
  *out = *v;
  return NULL;
}

TRITONSERVER_Error *sf_run_prepare(sf_instance *inst) {
  const sf_model *m = inst->m;
  sf_run *r = &inst->run;
  r->max_rows = m->max_batch_size;
  r->in_count = inst->input_count + m->pair_count + 1;
  r->out_count = inst->output_count + m->pair_count;
  r->in_names = calloc(r->in_count, sizeof *r->in_names);
  r->out_names = calloc(r->out_count, sizeof *r->out_names);
  r->in = calloc(r->in_count, sizeof *r->in);
  r->out = calloc(r->out_count, sizeof *r->out);
  r->in_values = calloc(r->in_count, sizeof *r->in_values);
  r->out_values = calloc(r->out_count, sizeof *r->out_values);
  if (r->in_names == NULL || r->out_names == NULL || r->in == NULL || r->out == NULL || r->in_values == NULL ||
      r->out_values == NULL) {
    return oom();
  }
  TRITONSERVER_Error *err = NULL;
  for (size_t k = 0; err == NULL && k < r->in_count; k++) {
    const sf_io *io = k < inst->input_count                   ? &inst->inputs[k]
                      : k < inst->input_count + m->pair_count ? &inst->state_in[k - inst->input_count]
                                                              : &inst->reset;
    r->in_names[k] = io->name;
    err = tensor_init(&r->in[k], io, r->max_rows);
  }
  for (size_t k = 0; err == NULL && k < r->out_count; k++) {
    const sf_io *io = k < inst->output_count ? &inst->outputs[k] : &inst->state_out[k - inst->output_count];
    r->out_names[k] = io->name;
    err = tensor_init(&r->out[k], io, r->max_rows);
  }
  return err;
}

void sf_run_release(sf_instance *inst) {
  sf_run *r = &inst->run;
  const ort_runtime *rt = inst->m->rt;
  for (size_t k = 0; r->in != NULL && k < r->in_count; k++) tensor_free(rt, &r->in[k], r->max_rows);
  for (size_t k = 0; r->out != NULL && k < r->out_count; k++) tensor_free(rt, &r->out[k], r->max_rows);
  free(r->in);
  free(r->out);
  free(r->in_names);
  free(r->out_names);
  free(r->in_values);
  free(r->out_values);
  memset(r, 0, sizeof *r);
}

/* Zeroes row 'row' of a batch of 'rows' along io's axis. */
static void zero_row(const sf_io *io, uint8_t *batch, int64_t rows, int64_t row) {
  size_t inner = (size_t)io->inner * io->elem;
  for (int64_t o = 0; o < io->outer; o++) {
    memset(batch + ((size_t)o * (size_t)rows + (size_t)row) * inner, 0, inner);
  }
}

/* Copies a stored state into row 'row', widening half-precision storage. */
static void put_state(const sf_instance *inst, const sf_io *io, uint8_t *batch, int64_t rows, int64_t row,
                      const uint8_t *stored) {
  if (!half_stored(inst, io)) {
    put_row(io, batch, rows, row, stored, io->elem);
    return;
  }
  size_t inner = (size_t)io->inner;
  for (int64_t o = 0; o < io->outer; o++) {
    float *dst = (float *)(void *)(batch + ((size_t)o * (size_t)rows + (size_t)row) * inner * 4);
    const uint8_t *src = stored + (size_t)o * inner * 2;
    for (size_t e = 0; e < inner; e++) {
      uint16_t h;
      memcpy(&h, src + e * 2, 2);
      dst[e] = sf_half_to_float(h);
    }
  }
}

/* Stores row 'row' of a state output, narrowing to half precision. */
static void get_state(const sf_instance *inst, const sf_io *io, const uint8_t *batch, int64_t rows, int64_t row,
                      uint8_t *stored) {
  if (!half_stored(inst, io)) {
    get_row(io, batch, rows, row, stored, io->elem);
    return;
  }
  size_t inner = (size_t)io->inner;
  for (int64_t o = 0; o < io->outer; o++) {
    const uint8_t *src = batch + ((size_t)o * (size_t)rows + (size_t)row) * inner * 4;
    uint8_t *dst = stored + (size_t)o * inner * 2;
    for (size_t e = 0; e < inner; e++) {
      float f;
      memcpy(&f, src + e * 4, 4);
      uint16_t h = sf_half_from_float(f);
      memcpy(dst + e * 2, &h, 2);
    }
  }
}

/* Stacks inputs, states and the reset flags of 'n' items ('rows' with
 * padding) into the Run's input buffers. */
static TRITONSERVER_Error *make_inputs(sf_instance *inst, item **items, size_t n, int64_t rows) {
  sf_run *r = &inst->run;
  const sf_model *m = inst->m;
  TRITONSERVER_Error *err = NULL;
  size_t k = 0;
  for (; err == NULL && k < inst->input_count; k++) {
    const sf_io *io = &inst->inputs[k];
    uint8_t *dst = r->in[k].data;
    uint64_t want = (uint64_t)(io->outer * io->inner) * io->elem;
    for (size_t i = 0; err == NULL && i < n; i++) {
      nrd_bu_tensor t;
      err = nrd_bu_request_input(items[i]->request, io->name, &t);
      if (err != NULL) break;
      if (t.byte_size != want) {
        err = nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                                "stateful: model '%s': input '%s' holds %llu "
                                "bytes, its shape needs %llu",
                                m->name, io->name, (unsigned long long)t.byte_size, (unsigned long long)want);
      } else {
        put_row(io, dst, rows, (int64_t)i, t.data, io->elem);
      }
      nrd_bu_tensor_release(&t);
    }
    for (int64_t i = (int64_t)n; i < rows; i++) zero_row(io, dst, rows, i);
  }
  for (size_t p = 0; err == NULL && p < m->pair_count; p++, k++) {
    const sf_io *io = &inst->state_in[p];
    uint8_t *dst = r->in[k].data;
    for (size_t i = 0; i < n; i++) {
      /* A START row gets zeros: the model resets it anyway. */
      if (items[i]->start) {
        zero_row(io, dst, rows, (int64_t)i);
      } else {
        put_state(inst, io, dst, rows, (int64_t)i, slot_data(inst, items[i]->slot) + inst->state_off[p]);
      }
    }
    for (int64_t i = (int64_t)n; i < rows; i++) zero_row(io, dst, rows, i);
  }
  if (err == NULL) {
    const sf_io *io = &inst->reset;
    uint8_t *dst = r->in[k].data;
    for (int64_t o = 0; o < io->outer; o++) {
      for (int64_t i = 0; i < rows; i++) {
        bool on = (size_t)i >= n || items[i]->start; /* padding resets */
        for (int64_t e = 0; e < io->inner; e++) {
          put_flag(io->et, dst, (size_t)((o * rows + i) * io->inner + e), on);
        }
      }
    }
  }
  return err;
}

#ifdef NRD_STATEFUL_ERROR_INJECT
static bool inject(sf_instance *inst) {
  return inst->m->error_inject_rate > 0 && (long)(rand_r(&inst->inject_seed) % 100) < inst->m->error_inject_rate;
}
#else
static bool inject(sf_instance *inst) {
  (void)inst;
  return false;
}
#endif

/* Runs 'n' items together; on success their states and outputs are
 * stored and written; on failure every item is answered with the error
 * and no state changes. The tensors are the instance's own (sf_run): no
 * allocation here once every row count has been seen. */
static void run_items(sf_instance *inst, item **items, size_t n) {
  const sf_model *m = inst->m;
  const ort_runtime *rt = m->rt;
  sf_run *r = &inst->run;
  int64_t rows = (int64_t)n;
  if (m->pad_to_max && rows < m->max_batch_size) rows = m->max_batch_size;
  TRITONSERVER_Error *err = NULL;
  if (rows > r->max_rows) {
    err = nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL,
                            "stateful: model '%s': %zu requests in one execution, more than "
                            "max_batch_size %lld",
                            m->name, n, (long long)r->max_rows);
  }
  if (err == NULL) err = make_inputs(inst, items, n, rows);
  for (size_t k = 0; err == NULL && k < r->in_count; k++) {
    err = tensor_value(rt, &r->in[k], rows, &r->in_values[k]);
  }
  for (size_t k = 0; err == NULL && k < r->out_count; k++) {
    err = tensor_value(rt, &r->out[k], rows, &r->out_values[k]);
  }
  if (err == NULL && inject(inst)) {
    err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "stateful: injected error (error_inject_rate)");
  }
  /* The outputs are written into the instance's buffers: ONNX Runtime
   * fails the Run if an output's shape is not the one they give. */
  if (err == NULL) {
    err = ort_runtime_error(rt,
                            rt->api->Run(inst->session.session, inst->session.run_options, r->in_names,
                                         (const OrtValue *const *)r->in_values, r->in_count, r->out_names, r->out_count,
                                         r->out_values),
                            "Run failed");
  }
  if (err == NULL) {
    for (size_t p = 0; p < m->pair_count; p++) {
      const sf_io *io = &inst->state_out[p];
      const uint8_t *batch = r->out[inst->output_count + p].data;
      for (size_t i = 0; i < n; i++) {
        get_state(inst, io, batch, rows, (int64_t)i, slot_data(inst, items[i]->slot) + inst->state_off[p]);
      }
    }
    for (size_t i = 0; i < n; i++) {
      for (size_t k = 0; k < inst->output_count; k++) {
        if (items[i]->response == NULL || !ort_output_requested(items[i]->request, inst->outputs[k].name)) {
          continue;
        }
        TRITONSERVER_Error *oerr = respond_output(items[i], &inst->outputs[k], r->out[k].data, rows, (int64_t)i, 1);
        if (oerr != NULL) {
          answer(items[i], oerr);
          TRITONSERVER_ErrorDelete(oerr);
        }
      }
    }
  }
  for (size_t i = 0; i < n; i++) {
    if (err != NULL) {
      answer(items[i], err);
      /* A sequence whose first step failed has no valid state. */
      if (items[i]->start) free_slot(inst, items[i]->slot);
    }
  }
  TRITONSERVER_ErrorDelete(err);
  inst->metric_runs++;
  inst->metric_rows += (uint64_t)n;
  if ((uint64_t)n > inst->metric_max) inst->metric_max = (uint64_t)n;
  sf_log(m, m->batch_info_level, "instance '%s': ran %zu sequences (%lld rows), %ld active", inst->name, n,
         (long long)rows, inst->active);
}

static void metrics(sf_instance *inst) {
  const sf_model *m = inst->m;
  if (m->metric_seconds <= 0) return;
  uint64_t now = nrd_bu_now_ns();
  if (now - inst->metric_start_ns < (uint64_t)m->metric_seconds * 1000000000u) {
    return;
  }
  if (inst->metric_runs > 0) {
    sf_log(m, SF_LOG_INFO,
           "instance '%s': average batch size %.2f, max %llu over %llu "
           "executions",
           inst->name, (double)inst->metric_rows / (double)inst->metric_runs, (unsigned long long)inst->metric_max,
           (unsigned long long)inst->metric_runs);
    sf_log(m, m->detailed_level, "instance '%s': %ld active sequences, %ld slots in %zu buffers", inst->name,
           inst->active, inst->total_slots, inst->buffer_count);
  }
  inst->metric_start_ns = now;
  inst->metric_runs = inst->metric_rows = inst->metric_max = 0;
}

void sf_instance_execute(void *instance_state, TRITONBACKEND_ModelInstance *instance, TRITONBACKEND_Request **requests,
                         uint32_t count) {
  sf_instance *inst = instance_state;
  inst->exec_no++;
  uint64_t exec_start = nrd_bu_now_ns();
  /* The per-request records live in the instance's scratch, grown to the
   * largest execution seen: items, then group, then the ok flags. */
  size_t cap = count > 0 ? count : 1;
  size_t need = cap * (sizeof(item) + sizeof(item *) + sizeof(bool));
  if (need > inst->scratch_bytes) {
    void *grown = realloc(inst->scratch, need);
    if (grown == NULL) {
      nrd_bu_requests_fail(instance, requests, count, oom());
      return;
    }
    inst->scratch = grown;
    inst->scratch_bytes = need;
  }
  memset(inst->scratch, 0, need);
  item *items = inst->scratch;
  item **group = (item **)(void *)(items + cap);
  bool *ok = (bool *)(void *)(group + cap);
  size_t n = 0;
  for (uint32_t i = 0; i < count; i++) {
    item *it = &items[i];
    it->request = requests[i];
    it->slot = -1;
    TRITONSERVER_Error *err = TRITONBACKEND_ResponseNew(&it->response, it->request);
    if (err != NULL) {
      nrd_bu_error_log_and_delete(err, "stateful: cannot create a response");
      it->response = NULL;
      continue;
    }
    err = read_sequence(inst, it);
    it->known = err == NULL;
    if (err == NULL) err = check_request(inst, it);
    if (err == NULL) err = assign_slot(inst, it);
    if (err != NULL) {
      answer(it, err);
      TRITONSERVER_ErrorDelete(err);
      continue;
    }
    if (it->end && !inst->m->infer_end) {
      /* infer_end_requests 0: no inference, empty outputs, slot freed. */
      for (size_t k = 0; k < inst->output_count && it->response != NULL; k++) {
        if (!ort_output_requested(it->request, inst->outputs[k].name)) continue;
        TRITONSERVER_Error *oerr = respond_output(it, &inst->outputs[k], NULL, 0, 0, 0);
        if (oerr != NULL) {
          answer(it, oerr);
          TRITONSERVER_ErrorDelete(oerr);
        }
      }
      continue;
    }
    group[n++] = it;
  }
  uint64_t compute_start = nrd_bu_now_ns();
  if (n > 0) run_items(inst, group, n);
  uint64_t compute_end = nrd_bu_now_ns();
  for (uint32_t i = 0; i < count; i++) {
    item *it = &items[i];
    ok[i] = it->response != NULL;
    /* END frees the slot, even when the request itself failed. */
    if (it->end && it->slot < 0 && it->known) it->slot = find_slot(inst, it);
    if (it->end) free_slot(inst, it->slot);
  }
  if (inst->m->lazy.enabled && inst->buffer_count > 1) shrink(inst);
  metrics(inst);
  /* As Triton's backends do, the execution ends when the outputs are
   * written; sending the responses comes after. */
  uint64_t exec_end = nrd_bu_now_ns();
  for (uint32_t i = 0; i < count; i++) answer(&items[i], NULL);
  for (uint32_t i = 0; i < count; i++) {
    nrd_bu_error_log_and_delete(TRITONBACKEND_ModelInstanceReportStatistics(instance, requests[i], ok[i], exec_start,
                                                                            compute_start, compute_end, exec_end),
                                "stateful: cannot report statistics");
  }
  if (n > 0) {
    nrd_bu_error_log_and_delete(TRITONBACKEND_ModelInstanceReportBatchStatistics(instance, (uint64_t)n, exec_start,
                                                                                 compute_start, compute_end, exec_end),
                                "stateful: cannot report batch statistics");
  }
  for (uint32_t i = 0; i < count; i++) nrd_bu_request_release(requests[i]);
}
