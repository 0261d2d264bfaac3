/* Formatting for both front ends (see fmt.h). */
#include "fmt.h"

#include <stdarg.h>
#include <stdio.h>

size_t nrd_srv_fmt_u64(char *o, uint64_t v) {
  char tmp[24];
  size_t n = 0;
  do {
    tmp[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  for (size_t i = 0; i < n; i++) o[i] = tmp[n - 1 - i];
  return n;
}

size_t nrd_srv_fmt_i64(char *o, int64_t v) {
  if (v < 0) {
    o[0] = '-';
    return 1 + nrd_srv_fmt_u64(o + 1, (uint64_t)0 - (uint64_t)v);
  }
  return nrd_srv_fmt_u64(o, (uint64_t)v);
}

void nrd_srv_fmt_err(char *err, size_t errlen, const char *fmt, ...) {
  if (errlen == 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}
