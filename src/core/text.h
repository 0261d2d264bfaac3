/* A growing text buffer for the Prometheus and statistics writers. */
#ifndef NRD_TEXT_H
#define NRD_TEXT_H

#include <stddef.h>

/* Zero-initialize; the owner frees `p` with free(). Not thread-safe: one
 * writer at a time. */
typedef struct nrd_text {
  char *p;
  size_t len, cap;
} nrd_text;

/* Appends printf-formatted text, growing the buffer (which stays
 * NUL-terminated). Returns 0, or -1 on out-of-memory or a format error,
 * leaving what was written before. */
int nrd_text_appendf(nrd_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
