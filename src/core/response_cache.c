/* The local response cache (response_cache.h).
 *
 * Entries live in a chained hash table keyed by 128 bits of hash and on one
 * LRU list, both guarded by the cache's lock. An entry is one allocation:
 * the header, its output records, then names, shapes and data. Readers take
 * a reference under the lock and copy outside it, so a client's allocator
 * is never called with the lock held; an evicted entry is freed by its last
 * reader. The bytes an entry counts against the size are its allocation. */
#include "response_cache.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cache_plugin.h"
#include "error.h"
#include "log.h"
#include "model.h"
#include "request.h"
#include "response.h"

typedef struct cached_output {
  const char *name;
  TRITONSERVER_DataType dtype;
  uint32_t dims;
  const int64_t *shape;
  const void *data;
  uint64_t size;
} cached_output;

struct nrd_cache_entry {
  nrd_cache_key key;
  atomic_int refs; /* the cache's own while linked, plus readers' */
  nrd_cache_entry *chain;
  nrd_cache_entry *newer, *older;
  size_t bytes;
  uint32_t n;
  cached_output out[];
};

struct nrd_response_cache {
  nrd_cache_plugin *plugin; /* set: a plugin's cache, the table unused */
  pthread_mutex_t lock;
  nrd_cache_entry **buckets;
  size_t n_buckets; /* a power of two */
  size_t n_entries;
  size_t capacity, used; /* bytes */
  nrd_cache_entry *newest, *oldest;
  uint64_t lookups, hits, misses, evictions;
};

static nrd_cache_entry *plugin_lookup(nrd_response_cache *c, const nrd_cache_key *key);
static TRITONSERVER_Error *plugin_insert(nrd_response_cache *c, const nrd_cache_key *key,
                                         const TRITONSERVER_InferenceResponse *resp);

/* ------------------------------------------------------------ the config */

#define INIT_ERROR(...) nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "Failed to initialize LocalCache: " __VA_ARGS__)

/* "size" of a local cache config, as Triton's local cache reads it. */
static TRITONSERVER_Error *parse_size(const char *config, size_t *size) {
  json_error_t jerr;
  json_t *j = json_loads(config, JSON_REJECT_DUPLICATES, &jerr);
  if (!j || !json_is_object(j)) {
    json_decref(j);
    return INIT_ERROR("the config is not a JSON object (%s)", j ? "not an object" : jerr.text);
  }
  const json_t *s = json_object_get(j, "size");
  TRITONSERVER_Error *err = NULL;
  unsigned long long v = 0;
  if (!s) {
    err = INIT_ERROR("config didn't contain a valid 'size' field.");
  } else if (json_is_string(s)) {
    const char *t = json_string_value(s);
    char *end = NULL;
    v = strtoull(t, &end, 10);
    if (t[0] < '0' || t[0] > '9' || *end != '\0') err = INIT_ERROR("'size' must be a number of bytes, got '%s'", t);
  } else if (json_is_integer(s) && json_integer_value(s) >= 0) {
    v = (unsigned long long)json_integer_value(s);
  } else {
    err = INIT_ERROR("'size' config must be a string or uint type");
  }
  json_decref(j);
  if (!err && v == 0) err = INIT_ERROR("'size' must be at least 1 byte");
  if (!err && v > SIZE_MAX / 2) err = INIT_ERROR("'size' is too large for this machine");
  *size = (size_t)v;
  return err;
}

TRITONSERVER_Error *nrd_response_cache_new(const nrd_option_triples *configs, const char *cache_dir,
                                           nrd_response_cache **out) {
  *out = NULL;
  if (!configs || configs->count == 0) return NULL;
  const char *name = configs->items[0].group;
  for (size_t i = 1; i < configs->count; i++)
    if (strcmp(configs->items[i].group, name) != 0)
      return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                           "found multiple cache configurations, but only a single cache is currently supported");
  const char *config = nrd_option_triples_find(configs, name, "config");
  if (strcmp(name, "local") != 0) {
    nrd_response_cache *c = calloc(1, sizeof(*c));
    if (!c) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory creating the response cache");
    TRITONSERVER_Error *err = nrd_cache_plugin_open(cache_dir, name, config, &c->plugin);
    if (err) {
      free(c);
      return err;
    }
    pthread_mutex_init(&c->lock, NULL);
    *out = c;
    NRD_LOG_INFO("response cache: '%s' from %s", name, cache_dir);
    return NULL;
  }
  size_t size = 0;
  NRD_RETURN_IF_ERROR(parse_size(config ? config : "{}", &size));
  nrd_response_cache *c = calloc(1, sizeof(*c));
  if (c) c->buckets = calloc(64, sizeof(*c->buckets));
  if (!c || !c->buckets) {
    free(c);
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory creating the response cache");
  }
  pthread_mutex_init(&c->lock, NULL);
  c->n_buckets = 64;
  c->capacity = size;
  *out = c;
  NRD_LOG_INFO("response cache: local, %zu bytes", size);
  return NULL;
}

static void entry_unref(nrd_cache_entry *e) {
  if (atomic_fetch_sub_explicit(&e->refs, 1, memory_order_acq_rel) == 1) free(e);
}

void nrd_cache_entry_release(nrd_cache_entry *e) {
  if (e) entry_unref(e);
}

void nrd_response_cache_free(nrd_response_cache *c) {
  if (!c) return;
  nrd_cache_plugin_close(c->plugin);
  for (nrd_cache_entry *e = c->newest, *next; e; e = next) {
    next = e->older;
    entry_unref(e);
  }
  free(c->buckets);
  pthread_mutex_destroy(&c->lock);
  free(c);
}

/* ------------------------------------------------------------ the key */

/* A streaming 2 x 64-bit hash: bytes are gathered into words, so how the
 * data is split into buffers does not change the key. Not cryptographic;
 * 128 bits make an accidental collision negligible. */
typedef struct hasher {
  uint64_t a, b, word, len;
  unsigned fill;
} hasher;

static inline uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static inline uint64_t fmix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

static inline void mix_word(hasher *h, uint64_t w) {
  h->a = rotl64(h->a ^ (w * 0x87c37b91114253d5ull), 31) * 0x4cf5ad432745937full + 0x52dce729u;
  h->b = rotl64(h->b + (w ^ 0x9e3779b97f4a7c15ull) * 0xc2b2ae3d27d4eb4full, 27) * 0x165667b19e3779f9ull + 0x38495ab5u;
}

static void hash_bytes(hasher *h, const void *p, size_t n) {
  const unsigned char *s = p;
  h->len += n;
  while (n && h->fill) {
    h->word |= (uint64_t)*s++ << (8 * h->fill);
    n--;
    if (++h->fill == 8) {
      mix_word(h, h->word);
      h->word = 0;
      h->fill = 0;
    }
  }
  for (; n >= 8; n -= 8, s += 8) {
    uint64_t w;
    memcpy(&w, s, 8);
    mix_word(h, w);
  }
  for (; n; n--) h->word |= (uint64_t)*s++ << (8 * h->fill++);
}

static void hash_u64(hasher *h, uint64_t v) { hash_bytes(h, &v, sizeof(v)); }

static void hash_str(hasher *h, const char *s) {
  size_t n = strlen(s);
  hash_u64(h, n);
  hash_bytes(h, s, n);
}

static nrd_cache_key hash_final(hasher *h) {
  if (h->fill) mix_word(h, h->word);
  mix_word(h, h->len);
  uint64_t a = fmix64(h->a + h->b), b = fmix64(h->b ^ rotl64(h->a, 17));
  return (nrd_cache_key){a, b};
}

/* Sorts `idx` (n small) by the strings it indexes. */
static void sort_by_name(uint32_t *idx, uint32_t n, const char *(*name)(const void *, uint32_t), const void *ctx) {
  for (uint32_t i = 1; i < n; i++) {
    uint32_t v = idx[i], j = i;
    for (; j > 0 && strcmp(name(ctx, idx[j - 1]), name(ctx, v)) > 0; j--) idx[j] = idx[j - 1];
    idx[j] = v;
  }
}

static const char *input_name(const void *req, uint32_t i) {
  return ((const TRITONSERVER_InferenceRequest *)req)->inputs[i].name;
}

static const char *output_name(const void *req, uint32_t i) {
  return ((const TRITONSERVER_InferenceRequest *)req)->outputs[i];
}

static bool host_memory(TRITONSERVER_MemoryType t) {
  return t == TRITONSERVER_MEMORY_CPU || t == TRITONSERVER_MEMORY_CPU_PINNED;
}

TRITONSERVER_Error *nrd_cache_key_of(const TRITONSERVER_InferenceRequest *req, nrd_cache_key *key) {
  uint32_t n = req->n_inputs > req->n_outputs ? req->n_inputs : req->n_outputs;
  uint32_t stack[16], *idx = n <= 16 ? stack : malloc(n * sizeof(*idx));
  if (!idx) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  hasher h = {0x6e65726569642d31ull, 0x726573706f6e7365ull, 0, 0, 0};
  hash_str(&h, req->model->name);
  hash_u64(&h, (uint64_t)req->model->version);
  hash_u64(&h, req->n_inputs);
  for (uint32_t i = 0; i < req->n_inputs; i++) idx[i] = i;
  sort_by_name(idx, req->n_inputs, input_name, req);
  TRITONSERVER_Error *err = NULL;
  for (uint32_t k = 0; k < req->n_inputs && !err; k++) {
    const nrd_input *in = &req->inputs[idx[k]];
    hash_str(&h, in->name);
    hash_u64(&h, (uint64_t)in->dtype);
    hash_u64(&h, in->dims_count);
    for (uint32_t d = 0; d < in->dims_count; d++) hash_u64(&h, (uint64_t)in->shape[d]);
    hash_u64(&h, in->byte_size);
    for (uint32_t b = 0; b < in->nbufs; b++) {
      if (!host_memory(in->bufs[b].mtype)) {
        err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL,
                            "input '%s' is not in CPU memory; the response cache hashes CPU memory only", in->name);
        break;
      }
      hash_bytes(&h, in->bufs[b].base, in->bufs[b].size);
    }
  }
  hash_u64(&h, req->n_outputs);
  for (uint32_t i = 0; i < req->n_outputs; i++) idx[i] = i;
  sort_by_name(idx, req->n_outputs, output_name, req);
  for (uint32_t k = 0; k < req->n_outputs; k++) hash_str(&h, req->outputs[idx[k]]);
  if (idx != stack) free(idx);
  if (!err) *key = hash_final(&h);
  return err;
}

/* ------------------------------------------------------------ the table */

static nrd_cache_entry **bucket(nrd_response_cache *c, const nrd_cache_key *key) {
  return &c->buckets[key->a & (c->n_buckets - 1)];
}

static void lru_unlink(nrd_response_cache *c, nrd_cache_entry *e) {
  if (e->newer)
    e->newer->older = e->older;
  else
    c->newest = e->older;
  if (e->older)
    e->older->newer = e->newer;
  else
    c->oldest = e->newer;
  e->newer = e->older = NULL;
}

static void lru_push(nrd_response_cache *c, nrd_cache_entry *e) {
  e->older = c->newest;
  e->newer = NULL;
  if (c->newest) c->newest->newer = e;
  c->newest = e;
  if (!c->oldest) c->oldest = e;
}

/* Unlinks `e` from both structures; the caller drops the cache's reference
 * once the lock is released. */
static void table_remove(nrd_response_cache *c, nrd_cache_entry *e) {
  nrd_cache_entry **p = bucket(c, &e->key);
  while (*p != e) p = &(*p)->chain;
  *p = e->chain;
  lru_unlink(c, e);
  c->n_entries--;
  c->used -= e->bytes;
}

/* Doubles the table when it holds more entries than buckets; on
 * out-of-memory the chains just grow longer. */
static void table_grow(nrd_response_cache *c) {
  size_t n = c->n_buckets * 2;
  nrd_cache_entry **b = calloc(n, sizeof(*b));
  if (!b) return;
  for (size_t i = 0; i < c->n_buckets; i++)
    for (nrd_cache_entry *e = c->buckets[i], *next; e; e = next) {
      next = e->chain;
      nrd_cache_entry **slot = &b[e->key.a & (n - 1)];
      e->chain = *slot;
      *slot = e;
    }
  free(c->buckets);
  c->buckets = b;
  c->n_buckets = n;
}

static nrd_cache_entry *table_find(nrd_response_cache *c, const nrd_cache_key *key) {
  for (nrd_cache_entry *e = *bucket(c, key); e; e = e->chain)
    if (e->key.a == key->a && e->key.b == key->b) return e;
  return NULL;
}

nrd_cache_entry *nrd_cache_lookup(nrd_response_cache *c, const nrd_cache_key *key) {
  if (c->plugin) return plugin_lookup(c, key);
  pthread_mutex_lock(&c->lock);
  c->lookups++;
  nrd_cache_entry *e = table_find(c, key);
  if (e) {
    c->hits++;
    lru_unlink(c, e);
    lru_push(c, e);
    atomic_fetch_add_explicit(&e->refs, 1, memory_order_relaxed);
  } else {
    c->misses++;
  }
  pthread_mutex_unlock(&c->lock);
  return e;
}

static size_t align8(size_t n) { return (n + 7) & ~(size_t)7; }

/* One entry holding copies of `n` outputs (the views point at the data to
 * copy), or an error when it would not fit in `capacity` bytes. */
static TRITONSERVER_Error *entry_build(const cached_output *v, uint32_t n, size_t capacity, nrd_cache_entry **out) {
  size_t head = align8(sizeof(nrd_cache_entry) + n * sizeof(cached_output)), bytes = head;
  for (uint32_t i = 0; i < n; i++)
    bytes += align8(strlen(v[i].name) + 1) + v[i].dims * sizeof(int64_t) + align8(v[i].size);
  if (bytes > capacity)
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "Requested byte_size: %zu is greater than total cache size: %zu",
                         bytes, capacity);
  nrd_cache_entry *e = malloc(bytes);
  if (!e) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  memset(e, 0, sizeof(*e));
  e->bytes = bytes;
  e->n = n;
  char *p = (char *)e + head;
  for (uint32_t i = 0; i < n; i++) {
    cached_output *c = &e->out[i];
    c->dtype = v[i].dtype;
    c->dims = v[i].dims;
    c->size = v[i].size;
    size_t nl = strlen(v[i].name) + 1;
    c->name = memcpy(p, v[i].name, nl);
    p += align8(nl);
    c->shape = (const int64_t *)p;
    if (v[i].dims) memcpy(p, v[i].shape, v[i].dims * sizeof(int64_t));
    p += v[i].dims * sizeof(int64_t);
    c->data = p;
    if (v[i].size) memcpy(p, v[i].data, v[i].size);
    p += align8(v[i].size);
  }
  atomic_init(&e->refs, 1);
  *out = e;
  return NULL;
}

/* Views of the outputs of `r` (in *views, malloc'd), or an error when one
 * is not in CPU memory. */
static TRITONSERVER_Error *views_of(const TRITONSERVER_InferenceResponse *r, cached_output **views) {
  cached_output *v = malloc((r->n_outputs ? r->n_outputs : 1) * sizeof(*v));
  if (!v) return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  for (uint32_t i = 0; i < r->n_outputs; i++) {
    const nrd_output *o = r->outputs[i];
    if (o->byte_size && !host_memory(o->mtype)) {
      free(v);
      return nrd_error_new(TRITONSERVER_ERROR_INTERNAL,
                           "output '%s' is not in CPU memory; the response cache keeps CPU memory only", o->name);
    }
    v[i] = (cached_output){o->name, o->dtype, o->dims_count, o->shape, o->buffer, o->byte_size};
  }
  *views = v;
  return NULL;
}

/* A copy of the outputs of `r` as one entry, or an error. */
static TRITONSERVER_Error *entry_from(const TRITONSERVER_InferenceResponse *r, size_t capacity, nrd_cache_entry **out) {
  cached_output *v = NULL;
  NRD_RETURN_IF_ERROR(views_of(r, &v));
  TRITONSERVER_Error *err = entry_build(v, r->n_outputs, capacity, out);
  free(v);
  return err;
}

/* ------------------------------------------------- bytes for a plugin
 *
 * A plugin stores opaque bytes. Ours: "NRDRESP1", u32 output count, u32 0,
 * then per output u32 name length, u32 datatype, u32 dims, u32 0, u64 byte
 * size, the name, dims x i64 shape, the data; host byte order, unpadded.
 * What comes back is checked as untrusted input: a shared store may hold
 * anything under a key. */
static const char resp_magic[8] = {'N', 'R', 'D', 'R', 'E', 'S', 'P', '1'};

static TRITONSERVER_Error *serialize(const TRITONSERVER_InferenceResponse *r, unsigned char **out, size_t *len) {
  cached_output *v = NULL;
  NRD_RETURN_IF_ERROR(views_of(r, &v));
  size_t n = 16;
  for (uint32_t i = 0; i < r->n_outputs; i++) n += 24 + strlen(v[i].name) + v[i].dims * 8 + v[i].size;
  unsigned char *b = malloc(n), *p = b;
  if (!b) {
    free(v);
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  }
  uint32_t hdr[2] = {r->n_outputs, 0};
  memcpy(p, resp_magic, 8);
  memcpy(p + 8, hdr, 8);
  p += 16;
  for (uint32_t i = 0; i < r->n_outputs; i++) {
    uint32_t f[4] = {(uint32_t)strlen(v[i].name), (uint32_t)v[i].dtype, v[i].dims, 0};
    uint64_t size = v[i].size;
    memcpy(p, f, 16);
    memcpy(p + 16, &size, 8);
    p += 24;
    memcpy(p, v[i].name, f[0]);
    p += f[0];
    if (v[i].dims) memcpy(p, v[i].shape, v[i].dims * 8);
    p += v[i].dims * 8;
    if (size) memcpy(p, v[i].data, size);
    p += size;
  }
  free(v);
  *out = b;
  *len = n;
  return NULL;
}

#define NRD_CACHE_MAX_DIMS 64

/* The entry the bytes describe; an error naming what is wrong otherwise. */
static TRITONSERVER_Error *deserialize(const unsigned char *b, size_t len, nrd_cache_entry **out) {
#define BAD(what) nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "the cached bytes are not a Nereid response: %s", what)
  if (len < 16 || memcmp(b, resp_magic, 8) != 0) return BAD("no header");
  uint32_t hdr[2];
  memcpy(hdr, b + 8, 8);
  uint32_t n = hdr[0];
  if (n > (len - 16) / 24) return BAD("more outputs than bytes");
  cached_output *v = calloc(n ? n : 1, sizeof(*v));
  char **names = calloc(n ? n : 1, sizeof(char *));
  int64_t *shapes = calloc((size_t)(n ? n : 1) * NRD_CACHE_MAX_DIMS, sizeof(int64_t));
  TRITONSERVER_Error *err = (v && names && shapes) ? NULL : nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  size_t at = 16;
  for (uint32_t i = 0; i < n && !err; i++) {
    uint32_t f[4];
    uint64_t size;
    if (len - at < 24) {
      err = BAD("an output header runs past the end");
      break;
    }
    memcpy(f, b + at, 16);
    memcpy(&size, b + at + 16, 8);
    at += 24;
    if (f[2] > NRD_CACHE_MAX_DIMS)
      err = BAD("too many dimensions");
    else if (f[1] == TRITONSERVER_TYPE_INVALID || f[1] > TRITONSERVER_TYPE_BF16)
      err = BAD("an unknown datatype");
    else if (f[0] == 0 || f[0] > len - at || memchr(b + at, 0, f[0]))
      err = BAD("a bad output name");
    else if ((size_t)f[2] * 8 > len - at - f[0] || size > len - at - f[0] - (size_t)f[2] * 8)
      err = BAD("an output runs past the end");
    if (err) break;
    if (!(names[i] = strndup((const char *)b + at, f[0]))) {
      err = nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory");
      break;
    }
    at += f[0];
    int64_t *shape = shapes + (size_t)i * NRD_CACHE_MAX_DIMS;
    if (f[2]) memcpy(shape, b + at, (size_t)f[2] * 8);
    at += (size_t)f[2] * 8;
    v[i] = (cached_output){names[i], (TRITONSERVER_DataType)f[1], f[2], shape, b + at, size};
    at += size;
  }
  if (!err && at != len) err = BAD("bytes left over");
  if (!err) err = entry_build(v, n, SIZE_MAX, out);
  for (uint32_t i = 0; names && i < n; i++) free(names[i]);
  free(names);
  free(shapes);
  free(v);
  return err;
#undef BAD
}

/* The key as the text a plugin takes: 32 hex digits. */
static void key_text(const nrd_cache_key *key, char out[33]) {
  snprintf(out, 33, "%016" PRIx64 "%016" PRIx64, key->a, key->b);
}

/* A plugin's hit as an entry of our own (not in the table, freed by its
 * last release), or NULL on a miss. A plugin failure or bytes that are not
 * a response count as a miss, logged. */
static nrd_cache_entry *plugin_lookup(nrd_response_cache *c, const nrd_cache_key *key) {
  char k[33];
  key_text(key, k);
  void *bytes = NULL;
  size_t len = 0;
  nrd_cache_entry *e = NULL;
  TRITONSERVER_Error *err = nrd_cache_plugin_lookup(c->plugin, k, &bytes, &len);
  if (!err && bytes) err = deserialize(bytes, len, &e);
  free(bytes);
  if (err) {
    NRD_LOG_ERROR("response cache '%s': lookup of %s failed, answering from the model: %s",
                  nrd_cache_plugin_name(c->plugin), k, TRITONSERVER_ErrorMessage(err));
    TRITONSERVER_ErrorDelete(err);
  }
  pthread_mutex_lock(&c->lock);
  c->lookups++;
  if (e)
    c->hits++;
  else
    c->misses++;
  pthread_mutex_unlock(&c->lock);
  return e;
}

static TRITONSERVER_Error *plugin_insert(nrd_response_cache *c, const nrd_cache_key *key,
                                         const TRITONSERVER_InferenceResponse *resp) {
  unsigned char *bytes = NULL;
  size_t len = 0;
  NRD_RETURN_IF_ERROR(serialize(resp, &bytes, &len));
  char k[33];
  key_text(key, k);
  TRITONSERVER_Error *err = nrd_cache_plugin_insert(c->plugin, k, bytes, len);
  free(bytes);
  return err;
}

TRITONSERVER_Error *nrd_cache_insert(nrd_response_cache *c, const nrd_cache_key *key,
                                     const TRITONSERVER_InferenceResponse *resp) {
  if (c->plugin) return plugin_insert(c, key, resp);
  nrd_cache_entry *e = NULL;
  NRD_RETURN_IF_ERROR(entry_from(resp, c->capacity, &e));
  e->key = *key;
  nrd_cache_entry *evicted = NULL; /* chained through `chain` once unlinked */
  pthread_mutex_lock(&c->lock);
  if (table_find(c, key)) {
    pthread_mutex_unlock(&c->lock);
    free(e);
    return NULL;
  }
  while (c->used + e->bytes > c->capacity && c->oldest) {
    nrd_cache_entry *old = c->oldest;
    table_remove(c, old);
    old->chain = evicted;
    evicted = old;
    c->evictions++;
  }
  nrd_cache_entry **slot = bucket(c, key);
  e->chain = *slot;
  *slot = e;
  lru_push(c, e);
  c->n_entries++;
  c->used += e->bytes;
  if (c->n_entries > c->n_buckets) table_grow(c);
  pthread_mutex_unlock(&c->lock);
  while (evicted) {
    nrd_cache_entry *next = evicted->chain;
    entry_unref(evicted);
    evicted = next;
  }
  return NULL;
}

/* ------------------------------------------------------------ answering */

static TRITONSERVER_Error *fill_response(TRITONBACKEND_Response *resp, const nrd_cache_entry *e) {
  for (uint32_t i = 0; i < e->n; i++) {
    const cached_output *c = &e->out[i];
    TRITONBACKEND_Output *out = NULL;
    /* Stored shapes are the client's already: no second output reshape. */
    NRD_RETURN_IF_ERROR(nrd_response_output_new(resp, &out, c->name, c->dtype, c->shape, c->dims));
    void *buf = NULL;
    TRITONSERVER_MemoryType mt = TRITONSERVER_MEMORY_CPU;
    int64_t id = 0;
    NRD_RETURN_IF_ERROR(TRITONBACKEND_OutputBuffer(out, &buf, c->size, &mt, &id));
    if (c->size && !host_memory(mt))
      return nrd_error_new(TRITONSERVER_ERROR_INTERNAL,
                           "the response allocator gave %s memory for output '%s'; cached responses are copied "
                           "to CPU memory only",
                           TRITONSERVER_MemoryTypeString(mt), c->name);
    if (c->size) memcpy(buf, c->data, c->size);
  }
  return NULL;
}

void nrd_cache_answer(TRITONSERVER_InferenceRequest *req, const nrd_cache_entry *e, uint64_t lookup_start_ns) {
  TRITONBACKEND_Response *resp = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ResponseNew(&resp, (TRITONBACKEND_Request *)req);
  if (!err) err = fill_response(resp, e);
  if (err) {
    if (resp) TRITONBACKEND_ResponseDelete(resp);
    nrd_request_fail(req, err, NRD_FAIL_OTHER);
    return;
  }
  nrd_stats_cache_hit(&req->model->stats, req->queue_start_ns, lookup_start_ns, nrd_now_ns());
  NRD_ERROR_IGNORE(TRITONBACKEND_ResponseSend(resp, TRITONSERVER_RESPONSE_COMPLETE_FINAL, NULL),
                   "cache hit: the stored response could not be sent");
  nrd_request_release(req, TRITONSERVER_REQUEST_RELEASE_ALL);
}

/* ------------------------------------------------------------ metrics */

int nrd_response_cache_prometheus(nrd_response_cache *c, nrd_text *out) {
  /* A plugin's own gauges, if any, are its custom metrics (as in Triton). */
  if (c->plugin) return 0;
  pthread_mutex_lock(&c->lock);
  uint64_t entries = c->n_entries, lookups = c->lookups, hits = c->hits, misses = c->misses, evictions = c->evictions;
  double util = c->capacity ? (double)c->used / (double)c->capacity : 0.0;
  pthread_mutex_unlock(&c->lock);
  static const char *const fam[][2] = {
      {"nv_cache_num_entries", "Responses held in the response cache"},
      {"nv_cache_num_lookups", "Response cache lookups"},
      {"nv_cache_num_hits", "Response cache lookups that found a response"},
      {"nv_cache_num_misses", "Response cache lookups that found none"},
      {"nv_cache_num_evictions", "Responses evicted from the response cache to make room"},
  };
  const uint64_t v[] = {entries, lookups, hits, misses, evictions};
  int rc = 0;
  for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
    rc |= nrd_text_appendf(out, "# HELP %s %s\n# TYPE %s gauge\n%s %" PRIu64 "\n", fam[i][0], fam[i][1], fam[i][0],
                           fam[i][0], v[i]);
  rc |= nrd_text_appendf(out,
                         "# HELP nv_cache_util Share of the response cache's bytes in use (0 to 1)\n"
                         "# TYPE nv_cache_util gauge\nnv_cache_util %.6f\n",
                         util);
  return rc;
}

/* The final response of a request the response cache missed: stores its
 * outputs when it succeeded and counts the miss (lookup plus insertion). */
void nrd_cache_store_final(nrd_delivery *d, const TRITONSERVER_InferenceResponse *r) {
  uint64_t ns = d->cache_lookup_ns;
  if (!r->error) {
    uint64_t start = nrd_now_ns();
    TRITONSERVER_Error *e = nrd_cache_insert(d->cache, &d->cache_key, r);
    ns += nrd_now_ns() - start;
    if (e) {
      NRD_LOG_VERBOSE(1, "response of model '%s' not cached: %s", d->model->name, TRITONSERVER_ErrorMessage(e));
      TRITONSERVER_ErrorDelete(e);
    }
  }
  d->cache = NULL;
  d->on_final = NULL;
  nrd_stats_cache_miss(&d->model->stats, ns);
}
