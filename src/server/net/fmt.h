/* Formatting for both front ends: decimals for the request paths, where
 * snprintf's format parsing costs more than the digits, and error text. */
#ifndef NRD_SRV_FMT_H
#define NRD_SRV_FMT_H

#include <stddef.h>
#include <stdint.h>

/* Writes v in decimal at o, which has room for 20 digits and a sign (no
 * NUL), and returns the length. Any thread. */
size_t nrd_srv_fmt_u64(char *o, uint64_t v);
size_t nrd_srv_fmt_i64(char *o, int64_t v);

/* printf into the caller's err buffer of errlen bytes (nothing when
 * errlen is 0; cut short to fit). Any thread. */
void nrd_srv_fmt_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
