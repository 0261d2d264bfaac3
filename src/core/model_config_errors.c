/* Model configuration messages: our detail after Triton's sentence
 * (model_config_int.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_config.h"
#include "model_config_int.h"

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

/* Formats our detail (field, value) into v->detail and returns it. */
const char *nrd_mcv_detail(nrd_mcv_ctx *v, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(v->detail, sizeof v->detail, fmt, ap);
  va_end(ap);
  return v->detail;
}

/* Records the error: Triton's sentence (`fmt`) whole, then ours in
 * parentheses: the file and `detail` (NULL: none). Returns -1. */
int nrd_mcv_error(nrd_mcv_ctx *v, const char *detail, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  int has_detail = detail != NULL && *detail != '\0';
  if (v->file != NULL && has_detail)
    v->err = nrd_mc_strdupf("%s (%s: %s)", msg, v->file, detail);
  else if (v->file != NULL)
    v->err = nrd_mc_strdupf("%s (%s)", msg, v->file);
  else if (has_detail)
    v->err = nrd_mc_strdupf("%s (%s)", msg, detail);
  else
    v->err = nrd_mc_strdupf("%s", msg);
  return -1;
}
