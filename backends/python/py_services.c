/*
 * Model control and custom metrics for model.py files (py_services.h).
 * Metric families and metrics live as long as the instance that made them;
 * the stub names them by their index + 1.
 */
#include "py_services.h"

#include <stdlib.h>
#include <string.h>

static json_t *fail(TRITONSERVER_Error *err) {
  json_t *ack = json_pack("{s:s}", "error", TRITONSERVER_ErrorMessage(err));
  TRITONSERVER_ErrorDelete(err);
  return ack;
}

static json_t *fail_text(const char *text) { return json_pack("{s:s}", "error", text); }

/* Appends p to *arr (n entries); false when out of memory. */
static bool push(void ***arr, size_t *n, void *p) {
  void **grown = realloc(*arr, (*n + 1) * sizeof *grown);
  if (grown == NULL) return false;
  grown[(*n)++] = p;
  *arr = grown;
  return true;
}

static json_t *load_model(TRITONSERVER_Server *server, const json_t *msg) {
  const char *name = json_string_value(json_object_get(msg, "name"));
  const char *config = json_string_value(json_object_get(msg, "config"));
  const json_t *files = json_object_get(msg, "files");
  if (name == NULL) return fail_text("python: load_model needs a model name");
  size_t n = json_object_size(files) + 1;
  TRITONSERVER_Parameter **params = calloc(n, sizeof *params);
  /* A bytes parameter points at its bytes: they live until the load ends. */
  unsigned char **contents = calloc(n, sizeof *contents);
  if (params == NULL || contents == NULL) {
    free(params);
    free(contents);
    return fail_text("out of memory");
  }
  size_t count = 0;
  json_t *ack = NULL;
  if (config != NULL && config[0]) {
    params[count] = TRITONSERVER_ParameterNew("config", TRITONSERVER_PARAMETER_STRING, config);
    if (params[count] != NULL) count++;
  }
  /* files: {"file:<path>": "<contents as latin-1 text>"}, as the stub sends
   * bytes (each byte one code point below 256). */
  const char *key;
  json_t *v;
  json_object_foreach((json_t *)files, key, v) {
    const char *text = json_string_value(v);
    size_t len = json_string_length(v);
    unsigned char *bytes = malloc(len ? len : 1);
    size_t m = 0;
    for (size_t i = 0; bytes != NULL && i < len;) {
      unsigned char c = (unsigned char)text[i];
      if (c < 0x80) {
        bytes[m++] = c;
        i++;
      } else if ((c & 0xE0) == 0xC0 && i + 1 < len) {
        bytes[m++] = (unsigned char)(((c & 0x1F) << 6) | ((unsigned char)text[i + 1] & 0x3F));
        i += 2;
      } else {
        free(bytes);
        bytes = NULL;
      }
    }
    if (bytes == NULL) {
      ack = fail_text("python: load_model: file contents must be bytes");
      break;
    }
    params[count] = TRITONSERVER_ParameterBytesNew(key, bytes, m);
    if (params[count] != NULL)
      contents[count++] = bytes;
    else
      free(bytes);
  }
  if (ack == NULL) {
    TRITONSERVER_Error *err =
        TRITONSERVER_ServerLoadModelWithParameters(server, name, (const TRITONSERVER_Parameter **)params, count);
    ack = err ? fail(err) : json_object();
  }
  for (size_t i = 0; i < count; i++) {
    TRITONSERVER_ParameterDelete(params[i]);
    free(contents[i]);
  }
  free(params);
  free(contents);
  return ack;
}

static json_t *model_control(TRITONSERVER_Server *server, const char *type, const json_t *msg) {
  const char *name = json_string_value(json_object_get(msg, "name"));
  if (name == NULL) return fail_text("python: a model name is needed");
  TRITONSERVER_Error *err = NULL;
  if (strcmp(type, "load_model") == 0) return load_model(server, msg);
  if (strcmp(type, "unload_model") == 0) {
    err = json_is_true(json_object_get(msg, "unload_dependents"))
              ? TRITONSERVER_ServerUnloadModelAndDependents(server, name)
              : TRITONSERVER_ServerUnloadModel(server, name);
    return err ? fail(err) : json_object();
  }
  /* is_model_ready: an unknown model is simply not ready. */
  const char *version = json_string_value(json_object_get(msg, "version"));
  int64_t v = version && version[0] ? strtoll(version, NULL, 10) : -1;
  bool ready = false;
  err = TRITONSERVER_ServerModelIsReady(server, name, v, &ready);
  if (err != NULL) TRITONSERVER_ErrorDelete(err);
  return json_pack("{s:b}", "ready", ready && err == NULL);
}

static json_t *metric_family(nrd_py_instance *st, const json_t *msg) {
  const char *name = json_string_value(json_object_get(msg, "name"));
  const char *desc = json_string_value(json_object_get(msg, "description"));
  json_int_t kind = json_integer_value(json_object_get(msg, "kind"));
  if (name == NULL || kind < TRITONSERVER_METRIC_KIND_COUNTER || kind > TRITONSERVER_METRIC_KIND_HISTOGRAM)
    return fail_text("python: MetricFamily needs a name and a kind (COUNTER, GAUGE or HISTOGRAM)");
  TRITONSERVER_MetricFamily *f = NULL;
  TRITONSERVER_Error *err = TRITONSERVER_MetricFamilyNew(&f, (TRITONSERVER_MetricKind)kind, name, desc ? desc : "");
  if (err != NULL) return fail(err);
  if (!push((void ***)&st->families, &st->n_families, f)) {
    TRITONSERVER_Error *e2 = TRITONSERVER_MetricFamilyDelete(f);
    if (e2 != NULL) TRITONSERVER_ErrorDelete(e2);
    return fail_text("out of memory");
  }
  return json_pack("{s:I}", "id", (json_int_t)st->n_families);
}

static json_t *metric_new(nrd_py_instance *st, const json_t *msg) {
  json_int_t fid = json_integer_value(json_object_get(msg, "family"));
  if (fid < 1 || (size_t)fid > st->n_families) return fail_text("python: no such metric family");
  const json_t *labels = json_object_get(msg, "labels");
  size_t n = json_object_size(labels);
  const TRITONSERVER_Parameter **params = calloc(n ? n : 1, sizeof *params);
  if (params == NULL) return fail_text("out of memory");
  size_t count = 0;
  const char *key;
  json_t *v;
  json_object_foreach((json_t *)labels, key, v) {
    const char *text = json_string_value(v);
    params[count] = TRITONSERVER_ParameterNew(key, TRITONSERVER_PARAMETER_STRING, text ? text : "");
    if (params[count] != NULL) count++;
  }
  TRITONSERVER_MetricArgs *args = NULL;
  TRITONSERVER_Error *err = NULL;
  const json_t *buckets = json_object_get(msg, "buckets");
  if (json_is_array(buckets)) {
    size_t nb = json_array_size(buckets);
    double *b = calloc(nb ? nb : 1, sizeof *b);
    if (b == NULL) {
      err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    } else {
      for (size_t i = 0; i < nb; i++) b[i] = json_number_value(json_array_get(buckets, i));
      err = TRITONSERVER_MetricArgsNew(&args);
      if (err == NULL) err = TRITONSERVER_MetricArgsSetHistogram(args, b, nb);
      free(b);
    }
  }
  TRITONSERVER_Metric *m = NULL;
  if (err == NULL)
    err = args ? TRITONSERVER_MetricNewWithArgs(&m, st->families[fid - 1], params, count, args)
               : TRITONSERVER_MetricNew(&m, st->families[fid - 1], params, count);
  for (size_t i = 0; i < count; i++) TRITONSERVER_ParameterDelete((TRITONSERVER_Parameter *)params[i]);
  free(params);
  if (args != NULL) {
    TRITONSERVER_Error *e2 = TRITONSERVER_MetricArgsDelete(args);
    if (e2 != NULL) TRITONSERVER_ErrorDelete(e2);
  }
  if (err != NULL) return fail(err);
  if (!push((void ***)&st->metrics, &st->n_metrics, m)) {
    TRITONSERVER_Error *e2 = TRITONSERVER_MetricDelete(m);
    if (e2 != NULL) TRITONSERVER_ErrorDelete(e2);
    return fail_text("out of memory");
  }
  return json_pack("{s:I}", "id", (json_int_t)st->n_metrics);
}

static json_t *metric_op(nrd_py_instance *st, const json_t *msg) {
  json_int_t id = json_integer_value(json_object_get(msg, "metric"));
  const char *op = json_string_value(json_object_get(msg, "op"));
  if (id < 1 || (size_t)id > st->n_metrics || op == NULL) return fail_text("python: no such metric");
  TRITONSERVER_Metric *m = st->metrics[id - 1];
  double x = json_number_value(json_object_get(msg, "value"));
  TRITONSERVER_Error *err = NULL;
  if (strcmp(op, "increment") == 0)
    err = TRITONSERVER_MetricIncrement(m, x);
  else if (strcmp(op, "set") == 0)
    err = TRITONSERVER_MetricSet(m, x);
  else if (strcmp(op, "observe") == 0)
    err = TRITONSERVER_MetricObserve(m, x);
  else if (strcmp(op, "value") != 0)
    return fail_text("python: unknown metric operation");
  if (err != NULL) return fail(err);
  double value = 0;
  if ((err = TRITONSERVER_MetricValue(m, &value)) != NULL) {
    TRITONSERVER_ErrorDelete(err); /* a histogram has no single value */
    value = 0;
  }
  return json_pack("{s:f}", "value", value);
}

bool nrd_py_service(nrd_py_instance *st, const json_t *msg, json_t **ack) {
  const char *type = json_string_value(json_object_get(msg, "type"));
  if (type == NULL) return false;
  if (strcmp(type, "load_model") == 0 || strcmp(type, "unload_model") == 0 || strcmp(type, "is_model_ready") == 0) {
    TRITONSERVER_Server *server = NULL;
    TRITONSERVER_Error *err = TRITONBACKEND_ModelServer(st->model->model, &server);
    *ack = err ? fail(err) : model_control(server, type, msg);
    return true;
  }
  if (strcmp(type, "metric_family") == 0)
    *ack = metric_family(st, msg);
  else if (strcmp(type, "metric") == 0)
    *ack = metric_new(st, msg);
  else if (strcmp(type, "metric_op") == 0)
    *ack = metric_op(st, msg);
  else
    return false;
  return true;
}

void nrd_py_services_free(nrd_py_instance *st) {
  for (size_t i = 0; i < st->n_metrics; i++) {
    TRITONSERVER_Error *err = TRITONSERVER_MetricDelete(st->metrics[i]);
    if (err != NULL) nrd_bu_error_log_and_delete(err, "python: deleting a metric");
  }
  for (size_t i = 0; i < st->n_families; i++) {
    TRITONSERVER_Error *err = TRITONSERVER_MetricFamilyDelete(st->families[i]);
    if (err != NULL) nrd_bu_error_log_and_delete(err, "python: deleting a metric family");
  }
  free(st->metrics);
  free(st->families);
  st->metrics = NULL;
  st->families = NULL;
  st->n_metrics = st->n_families = 0;
}
