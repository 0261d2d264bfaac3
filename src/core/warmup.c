/* Model warmup; see warmup.h.
 *
 * A run builds `batch_size` requests with the core's own constructor (the
 * model is not in the repository yet), hands them to the backend's
 * Execute as one batch and waits on a condition variable until each was
 * released and got its final response, whichever thread the backend
 * answers from. Inputs the model does not declare (sequence control
 * inputs a sample names) are added after validation, as Triton adds them
 * without its request checks. */
#include "warmup.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocator.h"
#include "datatype.h"
#include "error.h"
#include "files.h"
#include "instance.h"
#include "log.h"
#include "model.h"
#include "model_config.h"
#include "request.h"
#include "response.h"

/* The most one warmup input may hold: a configuration asking for more is
 * refused rather than given to malloc. */
#define WARMUP_MAX_BYTES ((uint64_t)1 << 30)

typedef struct warm_input {
  const char *name; /* the configuration's (it outlives the samples) */
  TRITONSERVER_DataType dtype;
  int64_t shape[1 + 64]; /* with the batch dimension when the model batches */
  uint32_t dims;
  const void *data; /* into the sample's zeros, random bytes or file */
  size_t size;
  bool declared; /* a model input (else added like a control input) */
  bool random; /* random bytes (else zeros, unless read from a file) */
} warm_input;

typedef struct warm_sample {
  const char *name;
  size_t index; /* in model_warmup */
  uint32_t batch, count;
  warm_input *in;
  size_t n_in;
  void *zeros, *random; /* shared by the sample's inputs of that kind */
  void **files; /* one per input read from a file */
  size_t n_files;
} warm_sample;

struct nrd_warmup {
  warm_sample *s;
  size_t n;
};

/* ------------------------------------------------------------ preparing */

static int64_t json_i64(const json_t *v) {
  if (json_is_integer(v)) return json_integer_value(v);
  if (json_is_string(v)) return strtoll(json_string_value(v), NULL, 10);
  return 0;
}

/* An INVALID_ARG error: the formatted text, then the position of
 * model_warmup[index] in the model's config.pbtxt. */
static TRITONSERVER_Error *located_error(const TRITONBACKEND_Model *m, size_t index, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static TRITONSERVER_Error *located_error(const TRITONBACKEND_Model *m, size_t index, const char *fmt, ...) {
  char what[4096 + 1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  char path[64];
  snprintf(path, sizeof path, "model_warmup[%zu]", index);
  char *where = nrd_model_config_where(m->config, path);
  TRITONSERVER_Error *e = nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "%s%s", what, where ? where : "");
  free(where);
  return e;
}

static TRITONSERVER_Error *sample_error(const TRITONBACKEND_Model *m, const warm_sample *s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static TRITONSERVER_Error *sample_error(const TRITONBACKEND_Model *m, const warm_sample *s, const char *fmt, ...) {
  char what[4096 + 512]; /* room for a path */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  /* Triton's sentence first (`fmt`), then which model and sample, then
   * where the sample is in config.pbtxt. */
  return located_error(m, s->index, "%s (model '%s', warmup sample '%s')", what, m->name, s->name);
}

/* True when `rel` is a relative path with no ".." component. */
static bool stays_inside(const char *rel) {
  if (!*rel || rel[0] == '/') return false;
  for (const char *c = rel; c; c = strchr(c, '/') ? strchr(c, '/') + 1 : NULL)
    if (!strncmp(c, "..", 2) && (c[2] == '/' || c[2] == '\0')) return false;
  return true;
}

/* Reads <model dir>/warmup/<file>: at least `want` bytes for fixed-size
 * types (the first `want` are used), all of it for BYTES. */
static TRITONSERVER_Error *read_sample_file(const TRITONBACKEND_Model *m, warm_sample *s, const char *input,
                                            const char *file, bool bytes, size_t want, warm_input *in) {
  if (!stays_inside(file))
    return sample_error(m, s, "input '%s': input_data_file '%s' must name a file inside the model's warmup folder",
                        input, file);
  char *dir = nrd_path_join(m->model_dir, "warmup");
  char *path = dir ? nrd_path_join(dir, file) : NULL;
  void **files = realloc(s->files, (s->n_files + 1) * sizeof(*files));
  free(dir);
  if (files) s->files = files;
  if (!path || !files) {
    free(path);
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  }
  /* The text stays inside; a symbolic link must not lead out either. */
  bool inside = false;
  TRITONSERVER_Error *le = nrd_path_inside(path, m->model_dir, &inside);
  if (le || !inside) {
    if (le) TRITONSERVER_ErrorDelete(le);
    free(path);
    return sample_error(m, s, "input '%s': input_data_file '%s' must name a file inside the model's warmup folder",
                        input, file);
  }
  char *buf = NULL;
  size_t n = 0;
  TRITONSERVER_Error *e = nrd_read_file(path, &buf, &n);
  TRITONSERVER_Error *err = NULL;
  if (e) {
    err = nrd_error_new(TRITONSERVER_ErrorCode(e), "model '%s', warmup sample '%s': input '%s': %s", m->name, s->name,
                        input, TRITONSERVER_ErrorMessage(e));
    TRITONSERVER_ErrorDelete(e);
  } else if (!bytes && n < want) {
    err = sample_error(m, s,
                       "warmup setting expects %zu bytes, but the data provided from %s only has %zu bytes "
                       "(input '%s')",
                       want, path, n, input);
  }
  free(path);
  if (err) {
    free(buf);
    return err;
  }
  s->files[s->n_files++] = buf;
  in->data = buf;
  in->size = bytes ? n : want;
  return NULL;
}

static void fill_random(uint8_t *p, size_t n) {
  static atomic_uint_fast64_t seed = 0x9e3779b97f4a7c15u;
  uint64_t x = atomic_fetch_add(&seed, 0x632be59bd9b4e019u) + 0x632be59bd9b4e019u;
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    p[i] = (uint8_t)x;
  }
}

static TRITONSERVER_Error *prepare_sample(TRITONBACKEND_Model *m, const json_t *cfg, size_t index, warm_sample *s) {
  s->name = json_string_value(json_object_get(cfg, "name"));
  if (!s->name) s->name = "";
  s->index = index;
  s->batch = (uint32_t)json_i64(json_object_get(cfg, "batch_size"));
  int64_t count = json_i64(json_object_get(cfg, "count"));
  s->count = count < 1 ? 1 : (uint32_t)count;
  if (s->batch == 0) return NULL; /* Triton skips it */
  if (m->max_batch_size > 0 && s->batch > (uint32_t)m->max_batch_size)
    return located_error(m, index,
                         "model '%s': model_warmup[%zu].batch_size %" PRIu32 " is more than max_batch_size %d", m->name,
                         index, s->batch, (int)m->max_batch_size);
  if (m->max_batch_size <= 0 && s->batch != 1)
    return located_error(m, index,
                         "model '%s': model_warmup[%zu].batch_size must be 1 for a model that does not batch "
                         "(max_batch_size 0), not %" PRIu32,
                         m->name, index, s->batch);
  const json_t *inputs = json_object_get(cfg, "inputs");
  size_t n = json_object_size(inputs);
  s->in = calloc(n ? n : 1, sizeof(*s->in));
  if (!s->in) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  /* Sizes first, so one zero and one random buffer serve every input. */
  size_t zeros = 1, random = 1;
  const char *key;
  const json_t *v;
  json_object_foreach((json_t *)inputs, key, v) {
    warm_input *in = &s->in[s->n_in++];
    in->name = key;
    const char *dt = json_string_value(json_object_get(v, "data_type"));
    in->dtype = nrd_datatype_from_config(dt ? dt : "");
    if (in->dtype == TRITONSERVER_TYPE_INVALID) return sample_error(m, s, "input '%s' has no valid data_type", key);
    in->declared = nrd_model_find_input(m, key) != NULL;
    const json_t *dims = json_object_get(v, "dims");
    if (json_array_size(dims) > 64) return sample_error(m, s, "input '%s' has too many dims", key);
    if (m->max_batch_size > 0) in->shape[in->dims++] = 1;
    uint64_t elems = 1;
    for (size_t d = 0; d < json_array_size(dims); d++) {
      int64_t x = json_i64(json_array_get(dims, d));
      if (x < 0)
        return sample_error(m, s, "warmup setting expects all variable-size dimensions are specified for input '%s'",
                            key);
      if (x > 0 && elems > WARMUP_MAX_BYTES / (uint64_t)x)
        return sample_error(m, s, "input '%s' is larger than warmup data may be (1 GiB)", key);
      elems *= (uint64_t)x;
      in->shape[in->dims++] = x;
    }
    bool bytes = in->dtype == TRITONSERVER_TYPE_BYTES;
    uint64_t esize = bytes ? 4 : nrd_datatype_byte_size(in->dtype);
    if (esize && elems > WARMUP_MAX_BYTES / esize)
      return sample_error(m, s, "input '%s' is larger than warmup data may be (1 GiB)", key);
    size_t size = (size_t)(elems * esize);
    in->size = size;
    const json_t *file = json_object_get(v, "input_data_file");
    /* Random BYTES are zeros (empty strings), as in Triton. */
    if (json_is_true(json_object_get(v, "zero_data")) || (bytes && json_is_true(json_object_get(v, "random_data")))) {
      if (size > zeros) zeros = size;
    } else if (json_is_true(json_object_get(v, "random_data"))) {
      in->random = true;
      if (size > random) random = size;
    } else if (json_is_string(file) && *json_string_value(file)) {
      TRITONSERVER_Error *e = read_sample_file(m, s, key, json_string_value(file), bytes, size, in);
      if (e) return e;
    } else {
      return sample_error(m, s, "warmup setting expects input '%s' to have input_data_type set", key);
    }
  }
  /* One buffer of each kind, as large as the largest input of that kind;
   * zeros read as empty strings for BYTES (each length prefix is 0). */
  if (!(s->zeros = calloc(1, zeros)) || !(s->random = malloc(random)))
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  fill_random(s->random, random);
  for (size_t i = 0; i < s->n_in; i++)
    if (!s->in[i].data) s->in[i].data = s->in[i].random ? s->random : s->zeros;
  return NULL;
}

void nrd_warmup_free(nrd_warmup *w) {
  if (!w) return;
  for (size_t i = 0; i < w->n; i++) {
    warm_sample *s = &w->s[i];
    free(s->in);
    free(s->zeros);
    free(s->random);
    for (size_t k = 0; k < s->n_files; k++) free(s->files[k]);
    free(s->files);
  }
  free(w->s);
  free(w);
}

TRITONSERVER_Error *nrd_warmup_prepare(TRITONBACKEND_Model *m, nrd_warmup **out) {
  *out = NULL;
  const json_t *list = json_object_get(m->config, "model_warmup");
  size_t n = json_array_size(list);
  if (!n) return NULL;
  nrd_warmup *w = calloc(1, sizeof(*w));
  if (!w || !(w->s = calloc(n, sizeof(*w->s)))) {
    free(w);
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  }
  w->n = n;
  for (size_t i = 0; i < n; i++) {
    TRITONSERVER_Error *e = prepare_sample(m, json_array_get(list, i), i, &w->s[i]);
    if (e) {
      nrd_warmup_free(w);
      return e;
    }
  }
  *out = w;
  return NULL;
}

/* ------------------------------------------------------------ running */

typedef struct warm_run {
  pthread_mutex_t lock;
  pthread_cond_t done;
  uint32_t released, finals;
  char errors[1024]; /* "<err1>; <err2>; " as Triton joins them */
} warm_run;

static void add_error(warm_run *run, const char *msg) {
  size_t at = strlen(run->errors);
  if (at + 1 < sizeof run->errors) snprintf(run->errors + at, sizeof run->errors - at, "%s; ", msg);
}

static TRITONSERVER_Error *warm_alloc(TRITONSERVER_ResponseAllocator *allocator, const char *tensor_name,
                                      size_t byte_size, TRITONSERVER_MemoryType memory_type, int64_t memory_type_id,
                                      void *userp, void **buffer, void **buffer_userp,
                                      TRITONSERVER_MemoryType *actual_memory_type, int64_t *actual_memory_type_id) {
  (void)allocator, (void)memory_type, (void)memory_type_id, (void)userp;
  *buffer = malloc(byte_size ? byte_size : 1);
  *buffer_userp = NULL;
  *actual_memory_type = TRITONSERVER_MEMORY_CPU;
  *actual_memory_type_id = 0;
  if (!*buffer)
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory for warmup output '%s'",
                         tensor_name ? tensor_name : "");
  return NULL;
}

static TRITONSERVER_Error *warm_release(TRITONSERVER_ResponseAllocator *allocator, void *buffer, void *buffer_userp,
                                        size_t byte_size, TRITONSERVER_MemoryType memory_type, int64_t memory_type_id) {
  (void)allocator, (void)buffer_userp, (void)byte_size, (void)memory_type, (void)memory_type_id;
  free(buffer);
  return NULL;
}

static const struct TRITONSERVER_ResponseAllocator warm_allocator = {.alloc_fn = warm_alloc,
                                                                     .release_fn = warm_release};

static void warm_response(TRITONSERVER_InferenceResponse *response, const uint32_t flags, void *userp) {
  warm_run *run = userp;
  pthread_mutex_lock(&run->lock);
  if (response) {
    TRITONSERVER_Error *e = TRITONSERVER_InferenceResponseError(response); /* a copy, ours */
    if (e) add_error(run, TRITONSERVER_ErrorMessage(e));
    TRITONSERVER_ErrorDelete(e);
  }
  if (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) run->finals++;
  pthread_cond_broadcast(&run->done);
  pthread_mutex_unlock(&run->lock);
  if (response) TRITONSERVER_InferenceResponseDelete(response);
}

static void warm_released(TRITONSERVER_InferenceRequest *req, const uint32_t flags, void *userp) {
  (void)flags;
  warm_run *run = userp;
  TRITONSERVER_InferenceRequestDelete(req);
  pthread_mutex_lock(&run->lock);
  run->released++;
  pthread_cond_broadcast(&run->done);
  pthread_mutex_unlock(&run->lock);
}

/* One request of `s`, in flight; NULL with *err on failure. */
static TRITONSERVER_InferenceRequest *warm_request(const warm_sample *s, TRITONBACKEND_Model *m, warm_run *run,
                                                   TRITONSERVER_Error **err) {
  TRITONSERVER_InferenceRequest *r = nrd_request_new_internal(m->server, m);
  if (!r) {
    *err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    return NULL;
  }
  TRITONSERVER_Error *e = NULL;
  for (size_t i = 0; !e && i < s->n_in; i++) {
    const warm_input *in = &s->in[i];
    if (!in->declared) continue;
    e = TRITONSERVER_InferenceRequestAddInput(r, in->name, in->dtype, in->shape, in->dims);
    if (!e)
      e = TRITONSERVER_InferenceRequestAppendInputData(r, in->name, in->data, in->size, TRITONSERVER_MEMORY_CPU, 0);
  }
  if (!e) e = TRITONSERVER_InferenceRequestSetReleaseCallback(r, warm_released, run);
  if (!e)
    e = TRITONSERVER_InferenceRequestSetResponseCallback(r, (TRITONSERVER_ResponseAllocator *)&warm_allocator, NULL,
                                                         warm_response, run);
  if (!e) e = nrd_request_begin_internal(r);
  if (e) {
    TRITONSERVER_InferenceRequestDelete(r);
    *err = e;
    return NULL;
  }
  /* In flight from here: failures answer and release it. */
  for (size_t i = 0; !e && i < s->n_in; i++) {
    const warm_input *in = &s->in[i];
    if (!in->declared) e = nrd_request_add_core_input(r, in->name, in->dtype, in->shape, in->dims, in->data, in->size);
  }
  if (e) {
    nrd_request_fail(r, e, NRD_FAIL_OTHER);
    return NULL; /* counted by the callbacks; *err stays NULL */
  }
  return r;
}

static TRITONSERVER_Error *run_sample(const warm_sample *s, TRITONBACKEND_ModelInstance *inst,
                                      nrd_warmup_execute_fn *execute) {
  TRITONBACKEND_Model *m = inst->model;
  TRITONSERVER_InferenceRequest **reqs = calloc(s->batch, sizeof(*reqs));
  warm_run run = {.released = 0};
  if (!reqs) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  pthread_mutex_init(&run.lock, NULL);
  pthread_cond_init(&run.done, NULL);
  TRITONSERVER_Error *err = NULL;
  for (uint32_t round = 0; !err && round < s->count && !run.errors[0]; round++) {
    uint32_t n = 0, started = 0;
    pthread_mutex_lock(&run.lock);
    run.released = run.finals = 0;
    pthread_mutex_unlock(&run.lock);
    for (uint32_t i = 0; !err && i < s->batch; i++) {
      TRITONSERVER_InferenceRequest *r = warm_request(s, m, &run, &err);
      if (r) reqs[n++] = r;
      if (r || !err) started++;
    }
    if (n) execute(inst, reqs, n);
    pthread_mutex_lock(&run.lock);
    while (run.released < started || run.finals < started) pthread_cond_wait(&run.done, &run.lock);
    pthread_mutex_unlock(&run.lock);
  }
  if (!err && run.errors[0])
    err = nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "failed to run warmup sample '%s': %s", s->name, run.errors);
  else if (err) {
    TRITONSERVER_Error *wrapped = nrd_error_new(TRITONSERVER_ErrorCode(err), "failed to run warmup sample '%s': %s",
                                                s->name, TRITONSERVER_ErrorMessage(err));
    TRITONSERVER_ErrorDelete(err);
    err = wrapped;
  }
  pthread_cond_destroy(&run.done);
  pthread_mutex_destroy(&run.lock);
  free(reqs);
  return err;
}

TRITONSERVER_Error *nrd_warmup_run(const nrd_warmup *w, TRITONBACKEND_ModelInstance *inst,
                                   nrd_warmup_execute_fn *execute) {
  for (size_t i = 0; w && i < w->n; i++) {
    if (!w->s[i].batch) {
      NRD_LOG_VERBOSE(1, "model '%s': warmup sample '%s' has batch_size 0; skipped", inst->model->name, w->s[i].name);
      continue;
    }
    NRD_LOG_VERBOSE(1, "model '%s', instance '%s': warmup sample '%s' (%" PRIu32 " x %" PRIu32 ")", inst->model->name,
                    inst->name, w->s[i].name, w->s[i].count, w->s[i].batch);
    NRD_RETURN_IF_ERROR(run_sample(&w->s[i], inst, execute));
  }
  return NULL;
}
