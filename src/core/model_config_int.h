/* Internals shared by the model_config*.c files (not part of the core's
 * interface): formatting, read-only accessors of the in-memory form
 * described in model_config.h, and the validation context. */
#ifndef NRD_MODEL_CONFIG_INT_H
#define NRD_MODEL_CONFIG_INT_H

#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* printf into a new malloc'd string the caller frees; NULL when out of
 * memory. Any thread. */
char *nrd_mc_strdupf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Accessors: a missing member or one of another JSON type reads as the
 * proto3 default. Any thread (read-only). */
static inline const char *get_str(const json_t *o, const char *k) {
  const json_t *v = json_object_get(o, k);
  return json_is_string(v) ? json_string_value(v) : "";
}

static inline long long get_int(const json_t *o, const char *k) {
  const json_t *v = json_object_get(o, k);
  return json_is_integer(v) ? (long long)json_integer_value(v) : 0;
}

static inline uint64_t get_uint(const json_t *o, const char *k) { return (uint64_t)get_int(o, k); }

static inline double get_real(const json_t *o, const char *k) {
  const json_t *v = json_object_get(o, k);
  if (json_is_number(v)) return json_number_value(v);
  if (json_is_string(v)) {
    const char *s = json_string_value(v);
    if (strcmp(s, "Infinity") == 0) return INFINITY;
    if (strcmp(s, "-Infinity") == 0) return -INFINITY;
    if (strcmp(s, "NaN") == 0) return NAN;
  }
  return 0.0;
}

static inline int get_bool(const json_t *o, const char *k) { return json_is_true(json_object_get(o, k)); }

static inline const json_t *get_obj(const json_t *o, const char *k) {
  const json_t *v = json_object_get(o, k);
  return json_is_object(v) ? v : NULL;
}

static inline size_t arr_size(const json_t *o, const char *k) {
  const json_t *v = json_object_get(o, k);
  return json_is_array(v) ? json_array_size(v) : 0;
}

static inline const json_t *arr_get(const json_t *o, const char *k, size_t i) {
  return json_array_get(json_object_get(o, k), i);
}

static inline size_t map_size(const json_t *o, const char *k) {
  const json_t *v = json_object_get(o, k);
  return json_is_object(v) ? json_object_size(v) : 0;
}

/* Whether the array member `arr` of cfg has an element named `name`. */
static inline int nrd_mc_has_name(const json_t *cfg, const char *arr, const char *name) {
  for (size_t i = 0; i < arr_size(cfg, arr); i++)
    if (strcmp(get_str(arr_get(cfg, arr, i), "name"), name) == 0) return 1;
  return 0;
}

/* Validation context: one per nrd_model_config_validate* call, on its
 * caller's stack. */
typedef struct nrd_mcv_ctx {
  const char *file;
  const char *name; /* model name */
  char *err;
  const json_t *cfg; /* the configuration checked (its positions) */
  char path[256]; /* nrd_mcv_path's buffer */
  char detail[256]; /* nrd_mcv_detail's buffer */
  int early; /* before the backend's auto-complete: see validate_early */
} nrd_mcv_ctx;

/* The helpers below live in model_config_errors.c; they touch only the
 * context they are given: any thread, one context per thread. */

/* Sets the path of the offending field (as nrd_pbtxt_parse_pos writes
 * it: "input[0].dims[1]") into v->path and returns it. */
const char *nrd_mcv_path(nrd_mcv_ctx *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Formats the offending value into v->detail and returns it. */
const char *nrd_mcv_detail(nrd_mcv_ctx *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Records the error in v->err: Triton's sentence (`fmt`) whole, then ours
 * as nrd_mc_where writes it for `path` (NULL: none) and `value` (NULL:
 * none). Returns -1. */
int nrd_mcv_error(nrd_mcv_ctx *v, const char *path, const char *value, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Our detail after Triton's sentence: " (FILE:LINE:COL: field 'PATH',
 * value VALUE)", with the position of `path` (or of the nearest enclosing
 * field that has one) from cfg's NRD_MODEL_CONFIG_POSITIONS and the file
 * they came from; without them, `filename` (NULL: none) and no position.
 * Parts that do not apply are left out; "" when none does. Returns a
 * malloc'd string the caller frees, NULL when out of memory. Any thread. */
char *nrd_mc_where(const json_t *cfg, const char *filename, const char *path, const char *value);

/* Scheduler checks (model_config_validate_sched.c); each returns 0, or -1
 * with v->err set. */
int nrd_mcv_dynamic(nrd_mcv_ctx *v, const json_t *cfg, const json_t *db);
int nrd_mcv_sequence(nrd_mcv_ctx *v, const json_t *cfg, const json_t *sb);
int nrd_mcv_ensemble(nrd_mcv_ctx *v, const json_t *cfg);

#endif /* NRD_MODEL_CONFIG_INT_H */
