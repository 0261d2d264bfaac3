/* Model configuration messages: our detail after Triton's sentence, with
 * the position of the offending field (model_config_int.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_config.h"
#include "model_config_int.h"
#include "pbtxt.h"

char *nrd_mc_strdupf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) return NULL;
  char *s = malloc((size_t)n + 1);
  if (s == NULL) return NULL;
  va_start(ap, fmt);
  vsnprintf(s, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return s;
}

const char *nrd_mcv_path(nrd_mcv_ctx *v, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(v->path, sizeof v->path, fmt, ap);
  va_end(ap);
  return v->path;
}

const char *nrd_mcv_detail(nrd_mcv_ctx *v, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(v->detail, sizeof v->detail, fmt, ap);
  va_end(ap);
  return v->detail;
}

/* The position of `path`, or of the nearest enclosing field or element
 * that has one ("input[0].dims[2]", then "input[0].dims", "input[0]",
 * "input"): what normalization or auto-complete added has none. */
static int find_position(const json_t *at, const char *path, int *line, int *col) {
  char buf[256];
  if (at == NULL || path == NULL || (size_t)snprintf(buf, sizeof buf, "%s", path) >= sizeof buf) return 0;
  for (;;) {
    if (nrd_pbtxt_position(at, buf, line, col)) return 1;
    size_t n = strlen(buf);
    char *cut = n > 0 && buf[n - 1] == ']' ? strrchr(buf, '[') : strrchr(buf, '.');
    if (cut == NULL || cut == buf) return 0;
    *cut = '\0';
  }
}

char *nrd_mc_where(const json_t *cfg, const char *filename, const char *path, const char *value) {
  const json_t *pos = json_is_object(cfg) ? json_object_get(cfg, NRD_MODEL_CONFIG_POSITIONS) : NULL;
  const char *file = filename;
  int line = 0, col = 0, found = 0;
  if (json_is_object(pos)) {
    file = json_string_value(json_object_get(pos, "file"));
    found = find_position(json_object_get(pos, "at"), path, &line, &col);
  }
  char loc[320] = "";
  if (file != NULL && found)
    snprintf(loc, sizeof loc, "%s:%d:%d", file, line, col);
  else if (file != NULL)
    snprintf(loc, sizeof loc, "%s", file);
  char fld[384] = "";
  if (path != NULL && value != NULL)
    snprintf(fld, sizeof fld, "field '%s', value %s", path, value);
  else if (path != NULL)
    snprintf(fld, sizeof fld, "field '%s'", path);
  if (*loc && *fld) return nrd_mc_strdupf(" (%s: %s)", loc, fld);
  if (*loc || *fld) return nrd_mc_strdupf(" (%s)", *loc ? loc : fld);
  return nrd_mc_strdupf("%s", "");
}

char *nrd_model_config_where(const json_t *cfg, const char *path) { return nrd_mc_where(cfg, NULL, path, NULL); }

int nrd_mcv_error(nrd_mcv_ctx *v, const char *path, const char *value, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  char *where = nrd_mc_where(v->cfg, v->file, path, value);
  v->err = where != NULL ? nrd_mc_strdupf("%s%s", msg, where) : NULL;
  free(where);
  return -1;
}
