/* Model and backend configuration access (JSON via jansson). */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nereid/backend_utils.h"

/* jansson holds integers as int64: a model configuration's uint64 field
 * above INT64_MAX (priority_levels: 18446744073709551615) would not
 * parse. Returns a copy of the JSON text (caller frees) where each such
 * unsigned literal is written as the int64 with the same bits, which is
 * how the core holds uint64 fields (read them back with a cast to
 * uint64_t); NULL when there is none or out of memory. */
static char *big_uints_as_int64(const char *base, size_t size) {
  char *out = malloc(size * 2 + 1);
  if (out == NULL) return NULL;
  size_t o = 0;
  bool changed = false, in_string = false;
  for (size_t i = 0; i < size;) {
    char c = base[i];
    if (in_string) {
      out[o++] = c;
      i++;
      if (c == '\\' && i < size)
        out[o++] = base[i++];
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    bool starts_number =
        c >= '0' && c <= '9' &&
        (i == 0 || !((base[i - 1] >= '0' && base[i - 1] <= '9') || base[i - 1] == '-' || base[i - 1] == '.'));
    if (!starts_number) {
      out[o++] = c;
      i++;
      continue;
    }
    size_t j = i;
    while (j < size && base[j] >= '0' && base[j] <= '9') j++;
    bool plain = j == size || (base[j] != '.' && base[j] != 'e' && base[j] != 'E');
    char digits[32];
    uint64_t v = 0;
    if (plain && j - i < sizeof digits) {
      memcpy(digits, base + i, j - i);
      digits[j - i] = '\0';
      errno = 0;
      v = strtoull(digits, NULL, 10);
      plain = errno == 0 && v > (uint64_t)INT64_MAX;
    } else {
      plain = false;
    }
    if (plain) {
      o += (size_t)snprintf(out + o, 24, "%" PRId64, (int64_t)v);
      changed = true;
    } else {
      memcpy(out + o, base + i, j - i);
      o += j - i;
    }
    i = j;
  }
  out[o] = '\0';
  if (!changed) {
    free(out);
    return NULL;
  }
  return out;
}

TRITONSERVER_Error *nrd_bu_message_parse(TRITONSERVER_Message *message, const char *what, json_t **json) {
  const char *base = NULL;
  size_t size = 0;
  TRITONSERVER_Error *err = TRITONSERVER_MessageSerializeToJson(message, &base, &size);
  if (err != NULL) {
    return err;
  }
  json_error_t jerr;
  json_t *root = json_loadb(base, size, JSON_REJECT_DUPLICATES, &jerr);
  if (root == NULL) {
    char *fixed = big_uints_as_int64(base, size);
    if (fixed != NULL) root = json_loads(fixed, JSON_REJECT_DUPLICATES, &jerr);
    free(fixed);
  }
  if (root == NULL) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "%s is not valid JSON: line %d column %d: %s", what,
                             jerr.line, jerr.column, jerr.text);
  }
  if (!json_is_object(root)) {
    json_decref(root);
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "%s is not a JSON object", what);
  }
  *json = root;
  return NULL;
}

TRITONSERVER_Error *nrd_bu_model_config(TRITONBACKEND_Model *model, json_t **config) {
  TRITONSERVER_Message *message = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelConfig(model, 1, &message);
  if (err != NULL) {
    return err;
  }
  err = nrd_bu_message_parse(message, "model configuration", config);
  TRITONSERVER_Error *del = TRITONSERVER_MessageDelete(message);
  if (del != NULL) {
    TRITONSERVER_ErrorDelete(del);
  }
  return err;
}

TRITONSERVER_Error *nrd_bu_backend_config(TRITONBACKEND_Backend *backend, json_t **config) {
  /* The backend configuration message is owned by the server. */
  TRITONSERVER_Message *message = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_BackendConfig(backend, &message);
  if (err != NULL) {
    return err;
  }
  return nrd_bu_message_parse(message, "backend configuration", config);
}

const char *nrd_bu_backend_setting(const json_t *backend_config, const char *key) {
  const json_t *cmdline = json_object_get(backend_config, "cmdline");
  return json_string_value(json_object_get(cmdline, key));
}

const char *nrd_bu_config_parameter(const json_t *config, const char *key) {
  const json_t *params = json_object_get(config, "parameters");
  const json_t *param = json_object_get(params, key);
  if (json_is_string(param)) {
    /* Tolerate the flat form {"key": "value"}. */
    return json_string_value(param);
  }
  return json_string_value(json_object_get(param, "string_value"));
}

/* Parses a whole string as a base-10 int64; false on any junk or overflow. */
static bool parse_decimal(const char *s, int64_t *out) {
  if (s == NULL || *s == '\0') {
    return false;
  }
  const char *p = s;
  if (*p == '-' || *p == '+') {
    ++p;
  }
  if (*p < '0' || *p > '9') {
    return false;
  }
  errno = 0;
  char *end = NULL;
  long long v = strtoll(s, &end, 10);
  if (errno != 0 || end == NULL || *end != '\0') {
    return false;
  }
  *out = (int64_t)v;
  return true;
}

TRITONSERVER_Error *nrd_bu_json_int(const json_t *value, const char *what, int64_t *out) {
  if (json_is_integer(value)) {
    *out = (int64_t)json_integer_value(value);
    return NULL;
  }
  if (json_is_real(value)) {
    double d = json_real_value(value);
    if (d >= -9.2e18 && d <= 9.2e18 && (double)(int64_t)d == d) {
      *out = (int64_t)d;
      return NULL;
    }
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "%s: expected an integer, got %g", what, d);
  }
  if (json_is_string(value)) {
    const char *s = json_string_value(value);
    if (parse_decimal(s, out)) {
      return NULL;
    }
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "%s: expected a decimal integer, got \"%s\"", what, s);
  }
  return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "%s: expected an integer", what);
}

TRITONSERVER_Error *nrd_bu_config_parameter_int(const json_t *config, const char *key, int64_t dflt, int64_t min,
                                                int64_t max, int64_t *out) {
  const char *text = nrd_bu_config_parameter(config, key);
  if (text == NULL) {
    *out = dflt;
    return NULL;
  }
  int64_t v = 0;
  if (!parse_decimal(text, &v)) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             "model parameter '%s': expected a decimal integer, got \"%s\"", key, text);
  }
  if (v < min || v > max) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG,
                             "model parameter '%s': %" PRId64 " is outside [%" PRId64 ", %" PRId64 "]", key, v, min,
                             max);
  }
  *out = v;
  return NULL;
}

TRITONSERVER_Error *nrd_bu_config_max_batch_size(const json_t *config, int64_t *out) {
  const json_t *v = json_object_get(config, "max_batch_size");
  if (v == NULL) {
    *out = 0;
    return NULL;
  }
  int64_t mbs = 0;
  TRITONSERVER_Error *err = nrd_bu_json_int(v, "max_batch_size", &mbs);
  if (err != NULL) {
    return err;
  }
  if (mbs < 0) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "max_batch_size: must be >= 0, got %" PRId64, mbs);
  }
  *out = mbs;
  return NULL;
}

bool nrd_bu_config_decoupled(const json_t *config) {
  const json_t *policy = json_object_get(config, "model_transaction_policy");
  return json_is_true(json_object_get(policy, "decoupled"));
}

const json_t *nrd_bu_config_tensor(const json_t *config, const char *section, const char *name) {
  const json_t *list = json_object_get(config, section);
  size_t i;
  const json_t *entry;
  json_array_foreach(list, i, entry) {
    const char *n = json_string_value(json_object_get(entry, "name"));
    if (n != NULL && strcmp(n, name) == 0) {
      return entry;
    }
  }
  return NULL;
}
