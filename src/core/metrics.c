/* Custom-metric registry and Prometheus text rendering. */
#include "metrics.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "parameter.h"

/* One time series: a label set and its value(s). */
typedef struct series {
  char **keys, **vals; /* sorted by key, owned */
  size_t n_labels;
  size_t refs; /* TRITONSERVER_Metric objects pointing here */
  double value; /* counter and gauge */
  double *bounds; /* histogram upper bounds, strictly increasing */
  uint64_t *counts; /* per bucket (not cumulative), n_bounds entries */
  size_t n_bounds;
  double sum;
  uint64_t count;
} series;

/* A family as registered, possibly shared by several handles. */
typedef struct family_store {
  char *name, *help;
  TRITONSERVER_MetricKind kind;
  size_t handles;
  series **series;
  size_t n_series, cap_series;
} family_store;

struct TRITONSERVER_MetricFamily {
  family_store *store;
  size_t live_metrics; /* metrics created through this handle */
};

struct TRITONSERVER_Metric {
  TRITONSERVER_MetricFamily *family;
  series *s;
};

struct TRITONSERVER_MetricArgs {
  bool is_histogram;
  double *buckets;
  size_t n_buckets;
};

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static family_store **reg; /* guarded by reg_mu, in creation order */
static size_t n_reg, cap_reg;

static TRITONSERVER_Error *oom(void) { return nrd_error_new(TRITONSERVER_ERROR_INTERNAL, "out of memory"); }

static const char *kind_name(TRITONSERVER_MetricKind kind) {
  switch (kind) {
    case TRITONSERVER_METRIC_KIND_COUNTER: return "counter";
    case TRITONSERVER_METRIC_KIND_GAUGE: return "gauge";
    case TRITONSERVER_METRIC_KIND_HISTOGRAM: return "histogram";
  }
  return NULL;
}

static const char *kind_api_name(TRITONSERVER_MetricKind kind) {
  switch (kind) {
    case TRITONSERVER_METRIC_KIND_COUNTER: return "TRITONSERVER_METRIC_KIND_COUNTER";
    case TRITONSERVER_METRIC_KIND_GAUGE: return "TRITONSERVER_METRIC_KIND_GAUGE";
    case TRITONSERVER_METRIC_KIND_HISTOGRAM: return "TRITONSERVER_METRIC_KIND_HISTOGRAM";
  }
  return "unknown kind";
}

/* Prometheus metric names: [a-zA-Z_:][a-zA-Z0-9_:]* */
static bool valid_metric_name(const char *s) {
  if (s == NULL || s[0] == '\0') return false;
  for (size_t i = 0; s[i] != '\0'; i++) {
    char c = s[i];
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' || (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

/* Prometheus label names: [a-zA-Z_][a-zA-Z0-9_]*, "__" prefix reserved. */
static bool valid_label_name(const char *s) {
  if (s == NULL || s[0] == '\0' || strncmp(s, "__", 2) == 0) return false;
  for (size_t i = 0; s[i] != '\0'; i++) {
    char c = s[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

static void series_free(series *s) {
  if (s == NULL) return;
  for (size_t i = 0; i < s->n_labels; i++) {
    free(s->keys[i]);
    free(s->vals[i]);
  }
  free(s->keys);
  free(s->vals);
  free(s->bounds);
  free(s->counts);
  free(s);
}

static void store_free(family_store *f) {
  for (size_t i = 0; i < f->n_series; i++) series_free(f->series[i]);
  free(f->series);
  free(f->name);
  free(f->help);
  free(f);
}

/* Index of `f` in the registry; caller holds reg_mu. */
static void registry_remove(family_store *f) {
  for (size_t i = 0; i < n_reg; i++) {
    if (reg[i] == f) {
      memmove(&reg[i], &reg[i + 1], (n_reg - i - 1) * sizeof(*reg));
      n_reg--;
      return;
    }
  }
}

TRITONSERVER_Error *TRITONSERVER_MetricFamilyNew(TRITONSERVER_MetricFamily **family, const TRITONSERVER_MetricKind kind,
                                                 const char *name, const char *description) {
  if (family == NULL) return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "metric family must not be NULL");
  *family = NULL;
  if (kind_name(kind) == NULL)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "unsupported metric kind %d", (int)kind);
  if (name == NULL || !valid_metric_name(name))
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "invalid metric family name '%s': it must match [a-zA-Z_:][a-zA-Z0-9_:]*",
                         name != NULL ? name : "(null)");
  if (description == NULL)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "description of metric family '%s' must not be NULL", name);

  TRITONSERVER_MetricFamily *handle = calloc(1, sizeof(*handle));
  if (handle == NULL) return oom();

  TRITONSERVER_Error *err = NULL;
  pthread_mutex_lock(&reg_mu);
  family_store *f = NULL;
  for (size_t i = 0; i < n_reg; i++)
    if (strcmp(reg[i]->name, name) == 0) f = reg[i];
  if (f != NULL) {
    if (f->kind != kind || strcmp(f->help, description) != 0) {
      err = nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                          "metric family '%s' already exists as a %s with a %s description", name, kind_name(f->kind),
                          strcmp(f->help, description) != 0 ? "different" : "same");
      goto out;
    }
  } else {
    if (n_reg == cap_reg) {
      size_t cap = cap_reg != 0 ? cap_reg * 2 : 8;
      family_store **grown = realloc(reg, cap * sizeof(*grown));
      if (grown == NULL) {
        err = oom();
        goto out;
      }
      reg = grown;
      cap_reg = cap;
    }
    f = calloc(1, sizeof(*f));
    if (f == NULL) {
      err = oom();
      goto out;
    }
    f->name = strdup(name);
    f->help = strdup(description);
    f->kind = kind;
    if (f->name == NULL || f->help == NULL) {
      store_free(f);
      err = oom();
      goto out;
    }
    reg[n_reg++] = f;
  }
  f->handles++;
  handle->store = f;
out:
  pthread_mutex_unlock(&reg_mu);
  if (err != NULL) {
    free(handle);
    return err;
  }
  *family = handle;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_MetricFamilyDelete(TRITONSERVER_MetricFamily *family) {
  if (family == NULL) return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "metric family must not be NULL");
  pthread_mutex_lock(&reg_mu);
  if (family->live_metrics > 0) {
    size_t live = family->live_metrics;
    pthread_mutex_unlock(&reg_mu);
    return nrd_error_new(TRITONSERVER_ERROR_INTERNAL,
                         "metric family '%s' still has %zu metric(s): delete every metric with "
                         "TRITONSERVER_MetricDelete before deleting its family",
                         family->store->name, live);
  }
  family_store *f = family->store;
  if (--f->handles == 0) {
    registry_remove(f);
    store_free(f);
  }
  pthread_mutex_unlock(&reg_mu);
  free(family);
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_GetMetricFamilyKind(TRITONSERVER_MetricFamily *family, TRITONSERVER_MetricKind *kind) {
  if (family == NULL || kind == NULL)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "metric family and kind must not be NULL");
  *kind = family->store->kind; /* immutable after creation */
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_MetricArgsNew(TRITONSERVER_MetricArgs **args) {
  if (args == NULL) return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "metric args must not be NULL");
  *args = calloc(1, sizeof(**args));
  return *args != NULL ? NULL : oom();
}

TRITONSERVER_Error *TRITONSERVER_MetricArgsSetHistogram(TRITONSERVER_MetricArgs *args, const double *buckets,
                                                        const uint64_t buckets_count) {
  if (args == NULL) return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "metric args must not be NULL");
  if (buckets == NULL && buckets_count != 0)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "histogram buckets must not be NULL");
  if (buckets_count > SIZE_MAX / sizeof(double))
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "too many histogram buckets");
  double *copy = NULL;
  if (buckets_count != 0) {
    copy = malloc((size_t)buckets_count * sizeof(double));
    if (copy == NULL) return oom();
    memcpy(copy, buckets, (size_t)buckets_count * sizeof(double));
  }
  free(args->buckets);
  args->buckets = copy;
  args->n_buckets = (size_t)buckets_count;
  args->is_histogram = true;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_MetricArgsDelete(TRITONSERVER_MetricArgs *args) {
  if (args == NULL) return NULL;
  free(args->buckets);
  free(args);
  return NULL;
}

/* Builds an unshared series from labels and args (already validated). */
static TRITONSERVER_Error *series_build(const TRITONSERVER_Parameter **labels, size_t n,
                                        const TRITONSERVER_MetricArgs *args, series **out) {
  series *s = calloc(1, sizeof(*s));
  if (s == NULL) return oom();
  if (n != 0) {
    s->keys = calloc(n, sizeof(char *));
    s->vals = calloc(n, sizeof(char *));
    if (s->keys == NULL || s->vals == NULL) goto fail;
  }
  for (size_t i = 0; i < n; i++) {
    const nrd_param *p = &labels[i]->p;
    /* A repeated label name keeps its last value. */
    size_t j = 0;
    while (j < s->n_labels && strcmp(s->keys[j], p->name) != 0) j++;
    char *v = strdup(p->v.s);
    if (v == NULL) goto fail;
    if (j < s->n_labels) {
      free(s->vals[j]);
      s->vals[j] = v;
      continue;
    }
    s->keys[j] = strdup(p->name);
    s->vals[j] = v;
    s->n_labels++;
    if (s->keys[j] == NULL) goto fail;
  }
  /* Insertion sort by key: label sets are small. */
  for (size_t i = 1; i < s->n_labels; i++) {
    for (size_t j = i; j > 0 && strcmp(s->keys[j - 1], s->keys[j]) > 0; j--) {
      char *k = s->keys[j], *v = s->vals[j];
      s->keys[j] = s->keys[j - 1];
      s->vals[j] = s->vals[j - 1];
      s->keys[j - 1] = k;
      s->vals[j - 1] = v;
    }
  }
  if (args != NULL && args->is_histogram && args->n_buckets != 0) {
    s->bounds = malloc(args->n_buckets * sizeof(double));
    s->counts = calloc(args->n_buckets, sizeof(uint64_t));
    if (s->bounds == NULL || s->counts == NULL) goto fail;
    memcpy(s->bounds, args->buckets, args->n_buckets * sizeof(double));
    s->n_bounds = args->n_buckets;
  }
  *out = s;
  return NULL;
fail:
  series_free(s);
  return oom();
}

static bool same_labels(const series *a, const series *b) {
  if (a->n_labels != b->n_labels) return false;
  for (size_t i = 0; i < a->n_labels; i++)
    if (strcmp(a->keys[i], b->keys[i]) != 0 || strcmp(a->vals[i], b->vals[i]) != 0) return false;
  return true;
}

/* Checks the labels and kind-specific args of a new metric. */
static TRITONSERVER_Error *check_new_metric(TRITONSERVER_MetricKind kind, const TRITONSERVER_Parameter **labels,
                                            uint64_t n, const TRITONSERVER_MetricArgs *args) {
  if (labels == NULL && n != 0)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "labels must not be NULL when label_count is %llu",
                         (unsigned long long)n);
  for (uint64_t i = 0; i < n; i++) {
    if (labels[i] == NULL)
      return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "label %llu is NULL", (unsigned long long)i);
    const nrd_param *p = &labels[i]->p;
    if (p->type != TRITONSERVER_PARAMETER_STRING)
      return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                           "label '%s' must have type TRITONSERVER_PARAMETER_STRING, not %s", p->name,
                           TRITONSERVER_ParameterTypeString(p->type));
    if (!valid_label_name(p->name))
      return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                           "invalid label name '%s': it must match [a-zA-Z_][a-zA-Z0-9_]* and not "
                           "start with \"__\"",
                           p->name);
  }
  if (kind != TRITONSERVER_METRIC_KIND_HISTOGRAM) {
    if (args != NULL && args->is_histogram)
      return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "histogram args are not allowed for a %s metric",
                           kind_name(kind));
    return NULL;
  }
  if (args == NULL || !args->is_histogram)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "a histogram metric needs bucket boundaries: pass metric args set with "
                         "TRITONSERVER_MetricArgsSetHistogram");
  size_t i = nrd_metrics_bad_bound(args->buckets, args->n_buckets);
  if (i == args->n_buckets) return NULL;
  if (!isfinite(args->buckets[i]))
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "histogram bucket %zu is not finite", i);
  return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                       "histogram buckets must be strictly increasing (bucket %zu: %g after %g)", i, args->buckets[i],
                       args->buckets[i - 1]);
}

size_t nrd_metrics_bad_bound(const double *bounds, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!isfinite(bounds[i]) || (i > 0 && !(bounds[i] > bounds[i - 1]))) return i;
  return n;
}

TRITONSERVER_Error *TRITONSERVER_MetricNewWithArgs(TRITONSERVER_Metric **metric, TRITONSERVER_MetricFamily *family,
                                                   const TRITONSERVER_Parameter **labels, const uint64_t label_count,
                                                   const TRITONSERVER_MetricArgs *args) {
  if (metric == NULL) return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "metric must not be NULL");
  *metric = NULL;
  if (family == NULL) return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "metric family must not be NULL");
  family_store *f = family->store;
  NRD_RETURN_IF_ERROR(check_new_metric(f->kind, labels, label_count, args));

  TRITONSERVER_Metric *m = calloc(1, sizeof(*m));
  if (m == NULL) return oom();
  series *fresh = NULL;
  TRITONSERVER_Error *err = series_build(labels, (size_t)label_count, args, &fresh);
  if (err != NULL) {
    free(m);
    return err;
  }

  pthread_mutex_lock(&reg_mu);
  series *s = NULL;
  for (size_t i = 0; i < f->n_series && s == NULL; i++)
    if (same_labels(f->series[i], fresh)) s = f->series[i];
  if (s != NULL) {
    series_free(fresh); /* an existing series with these labels is shared */
  } else {
    if (f->n_series == f->cap_series) {
      size_t cap = f->cap_series != 0 ? f->cap_series * 2 : 4;
      series **grown = realloc(f->series, cap * sizeof(*grown));
      if (grown == NULL) {
        pthread_mutex_unlock(&reg_mu);
        series_free(fresh);
        free(m);
        return oom();
      }
      f->series = grown;
      f->cap_series = cap;
    }
    s = fresh;
    f->series[f->n_series++] = s;
  }
  s->refs++;
  family->live_metrics++;
  pthread_mutex_unlock(&reg_mu);

  m->family = family;
  m->s = s;
  *metric = m;
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_MetricNew(TRITONSERVER_Metric **metric, TRITONSERVER_MetricFamily *family,
                                           const TRITONSERVER_Parameter **labels, const uint64_t label_count) {
  return TRITONSERVER_MetricNewWithArgs(metric, family, labels, label_count, NULL);
}

TRITONSERVER_Error *TRITONSERVER_MetricDelete(TRITONSERVER_Metric *metric) {
  if (metric == NULL) return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "metric must not be NULL");
  pthread_mutex_lock(&reg_mu);
  family_store *f = metric->family->store;
  metric->family->live_metrics--;
  if (--metric->s->refs == 0) {
    for (size_t i = 0; i < f->n_series; i++) {
      if (f->series[i] == metric->s) {
        memmove(&f->series[i], &f->series[i + 1], (f->n_series - i - 1) * sizeof(*f->series));
        f->n_series--;
        break;
      }
    }
    series_free(metric->s);
  }
  pthread_mutex_unlock(&reg_mu);
  free(metric);
  return NULL;
}

static TRITONSERVER_Error *not_supported(TRITONSERVER_MetricKind kind, const char *op) {
  return nrd_error_new(TRITONSERVER_ERROR_UNSUPPORTED, "%s does not support %s", kind_api_name(kind), op);
}

static TRITONSERVER_Error *null_metric(void) {
  return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "metric must not be NULL");
}

TRITONSERVER_Error *TRITONSERVER_MetricValue(TRITONSERVER_Metric *metric, double *value) {
  if (metric == NULL || value == NULL) return null_metric();
  TRITONSERVER_MetricKind kind = metric->family->store->kind;
  if (kind == TRITONSERVER_METRIC_KIND_HISTOGRAM) return not_supported(kind, "Value");
  pthread_mutex_lock(&reg_mu);
  *value = metric->s->value;
  pthread_mutex_unlock(&reg_mu);
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_MetricIncrement(TRITONSERVER_Metric *metric, double value) {
  if (metric == NULL) return null_metric();
  TRITONSERVER_MetricKind kind = metric->family->store->kind;
  if (kind == TRITONSERVER_METRIC_KIND_HISTOGRAM) return not_supported(kind, "Increment");
  if (kind == TRITONSERVER_METRIC_KIND_COUNTER && !(value >= 0.0))
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG,
                         "TRITONSERVER_METRIC_KIND_COUNTER can only be incremented by a "
                         "non-negative value, got %g",
                         value);
  pthread_mutex_lock(&reg_mu);
  metric->s->value += value;
  pthread_mutex_unlock(&reg_mu);
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_MetricSet(TRITONSERVER_Metric *metric, double value) {
  if (metric == NULL) return null_metric();
  TRITONSERVER_MetricKind kind = metric->family->store->kind;
  if (kind != TRITONSERVER_METRIC_KIND_GAUGE) return not_supported(kind, "Set");
  pthread_mutex_lock(&reg_mu);
  metric->s->value = value;
  pthread_mutex_unlock(&reg_mu);
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_MetricObserve(TRITONSERVER_Metric *metric, double value) {
  if (metric == NULL) return null_metric();
  TRITONSERVER_MetricKind kind = metric->family->store->kind;
  if (kind != TRITONSERVER_METRIC_KIND_HISTOGRAM) return not_supported(kind, "Observe");
  pthread_mutex_lock(&reg_mu);
  series *s = metric->s;
  /* Bucket i counts values <= bounds[i] not counted by an earlier bucket;
   * values above every bound only show in the +Inf bucket (count). */
  for (size_t i = 0; i < s->n_bounds; i++) {
    if (value <= s->bounds[i]) {
      s->counts[i]++;
      break;
    }
  }
  s->sum += value;
  s->count++;
  pthread_mutex_unlock(&reg_mu);
  return NULL;
}

TRITONSERVER_Error *TRITONSERVER_GetMetricKind(TRITONSERVER_Metric *metric, TRITONSERVER_MetricKind *kind) {
  if (metric == NULL || kind == NULL)
    return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "metric and kind must not be NULL");
  *kind = metric->family->store->kind;
  return NULL;
}

/* ---- rendering ---------------------------------------------------------- */

typedef struct strbuf {
  char *p;
  size_t len, cap;
  bool failed;
} strbuf;

static void sb_put(strbuf *b, const char *s, size_t n) {
  if (b->failed) return;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap != 0 ? b->cap : 1024;
    while (cap < b->len + n + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (p == NULL) {
      b->failed = true;
      return;
    }
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = '\0';
}

static void sb_str(strbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_printf(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(strbuf *b, const char *fmt, ...) {
  char tmp[64];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof(tmp)) {
    b->failed = true;
    return;
  }
  sb_put(b, tmp, (size_t)n);
}

static void sb_double(strbuf *b, double v) {
  if (isnan(v))
    sb_str(b, "NaN");
  else if (isinf(v))
    sb_str(b, v > 0 ? "+Inf" : "-Inf");
  else
    sb_printf(b, "%.16g", v);
}

/* Escapes backslash and newline, plus the double quote inside label values. */
static void sb_escaped(strbuf *b, const char *s, bool quote) {
  for (; *s != '\0'; s++) {
    if (*s == '\\')
      sb_str(b, "\\\\");
    else if (*s == '\n')
      sb_str(b, "\\n");
    else if (quote && *s == '"')
      sb_str(b, "\\\"");
    else
      sb_put(b, s, 1);
  }
}

/* Writes `<name><suffix>{labels[,le="..."]} ` (the value follows). */
static void sb_head(strbuf *b, const char *name, const char *suffix, const series *s, const double *le, bool le_inf) {
  sb_str(b, name);
  sb_str(b, suffix);
  bool has_le = le != NULL || le_inf;
  if (s->n_labels != 0 || has_le) {
    sb_str(b, "{");
    for (size_t i = 0; i < s->n_labels; i++) {
      if (i != 0) sb_str(b, ",");
      sb_str(b, s->keys[i]);
      sb_str(b, "=\"");
      sb_escaped(b, s->vals[i], true);
      sb_str(b, "\"");
    }
    if (has_le) {
      if (s->n_labels != 0) sb_str(b, ",");
      sb_str(b, "le=\"");
      if (le_inf)
        sb_str(b, "+Inf");
      else
        sb_double(b, *le);
      sb_str(b, "\"");
    }
    sb_str(b, "}");
  }
  sb_str(b, " ");
}

static void render_family(strbuf *b, const family_store *f) {
  if (f->help[0] != '\0') {
    sb_str(b, "# HELP ");
    sb_str(b, f->name);
    sb_str(b, " ");
    sb_escaped(b, f->help, false);
    sb_str(b, "\n");
  }
  sb_str(b, "# TYPE ");
  sb_str(b, f->name);
  sb_str(b, " ");
  sb_str(b, kind_name(f->kind));
  sb_str(b, "\n");
  for (size_t i = 0; i < f->n_series; i++) {
    const series *s = f->series[i];
    if (f->kind != TRITONSERVER_METRIC_KIND_HISTOGRAM) {
      sb_head(b, f->name, "", s, NULL, false);
      sb_double(b, s->value);
      sb_str(b, "\n");
      continue;
    }
    sb_head(b, f->name, "_count", s, NULL, false);
    sb_printf(b, "%llu\n", (unsigned long long)s->count);
    sb_head(b, f->name, "_sum", s, NULL, false);
    sb_double(b, s->sum);
    sb_str(b, "\n");
    uint64_t cumulative = 0;
    for (size_t j = 0; j < s->n_bounds; j++) {
      cumulative += s->counts[j];
      sb_head(b, f->name, "_bucket", s, &s->bounds[j], false);
      sb_printf(b, "%llu\n", (unsigned long long)cumulative);
    }
    sb_head(b, f->name, "_bucket", s, NULL, true);
    sb_printf(b, "%llu\n", (unsigned long long)s->count);
  }
}

TRITONSERVER_Error *nrd_metrics_render(char **out, size_t *len) {
  if (out == NULL || len == NULL) return nrd_error_new(TRITONSERVER_ERROR_INVALID_ARG, "out and len must not be NULL");
  *out = NULL;
  *len = 0;
  strbuf b = {0};
  sb_put(&b, "", 0);
  pthread_mutex_lock(&reg_mu);
  for (size_t i = 0; i < n_reg; i++)
    if (reg[i]->n_series != 0) render_family(&b, reg[i]);
  pthread_mutex_unlock(&reg_mu);
  if (b.failed || b.p == NULL) {
    free(b.p);
    return oom();
  }
  *out = b.p;
  *len = b.len;
  return NULL;
}
