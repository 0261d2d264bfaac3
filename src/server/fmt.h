/* Decimal formatting for the request paths of both front ends, where
 * snprintf's format parsing costs more than the digits. */
#ifndef NRD_SRV_FMT_H
#define NRD_SRV_FMT_H

#include <stddef.h>
#include <stdint.h>

/* Writes v in decimal at o, which has room for 20 digits and a sign (no
 * NUL), and returns the length. Any thread. */
size_t nrd_srv_fmt_u64(char *o, uint64_t v);
size_t nrd_srv_fmt_i64(char *o, int64_t v);

#endif
