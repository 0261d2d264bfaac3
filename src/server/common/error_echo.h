/* How much of an error message the front ends send back. A message may
 * echo what the client sent (a model name, an input name), and that can
 * be megabytes: in gRPC's grpc-message header it would not fit in an
 * HTTP/2 header block (nghttp2 then cannot send the trailers and the call
 * never ends), and in an HTTP error body it is memory spent on an attack.
 * Both front ends send at most NRD_SRV_ERROR_ECHO_MAX bytes of a message,
 * its start (so Triton's sentence stays whole), then "...".
 *
 * Threads: pure functions; any thread. */
#ifndef NRD_SRV_ERROR_ECHO_H
#define NRD_SRV_ERROR_ECHO_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

/* The most bytes of a message sent back (gRPC: after percent-encoding). */
#define NRD_SRV_ERROR_ECHO_MAX 4096u

/* What marks a message that was cut. */
#define NRD_SRV_ERROR_ECHO_CUT "..."

/* The length of the part of msg[0..len) to send: len when it fits, else
 * at most `max` bytes ending on a UTF-8 character boundary. */
static inline size_t nrd_srv_error_echo_len(const char *msg, size_t len, size_t max) {
  if (len <= max) return len;
  size_t n = max;
  /* Do not cut a UTF-8 sequence: back off over continuation bytes. */
  while (n > 0 && ((unsigned char)msg[n] & 0xC0) == 0x80) n--;
  return n;
}

#endif
