/* A growing text buffer (text.h). */
#include "text.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

int nrd_text_appendf(nrd_text *t, const char *fmt, ...) {
  for (;;) {
    size_t room = t->cap - t->len;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->p ? t->p + t->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n < 0) return -1;
    if ((size_t)n < room) {
      t->len += (size_t)n;
      return 0;
    }
    size_t cap = t->cap ? t->cap * 2 : 1024;
    while (cap - t->len <= (size_t)n) cap *= 2;
    char *np = realloc(t->p, cap);
    if (!np) return -1;
    t->p = np;
    t->cap = cap;
  }
}
