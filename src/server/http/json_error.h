/* Why a request body is not JSON, in the words Triton's HTTP front end
 * uses (RapidJSON's error text and the byte offset where its parser
 * stops), so that a client or a script that reads Triton's messages reads
 * ours the same way. Our parsers find that a body is bad; this finds the
 * words, on the error path only.
 *
 * Threads: pure functions; any thread. */
#ifndef NRD_SRV_JSON_ERROR_H
#define NRD_SRV_JSON_ERROR_H

#include <stddef.h>

/* The deepest nesting Triton accepts in a request body. */
#define NRD_SRV_JSON_MAX_DEPTH 100

/* Writes into out (always terminated) the reason `buf[0..len)` is not
 * valid JSON: "failed to parse the request JSON buffer: <RapidJSON's
 * text> at <offset>", or "JSON nesting depth exceeds maximum allowed limit
 * (100)". Returns 0 with that text, or -1 (out untouched) when the body
 * is valid JSON as RapidJSON reads it: the caller then keeps its own
 * message. A NUL byte ends the text, as it ends it for RapidJSON. */
int nrd_srv_json_error(const char *buf, size_t len, char *out, size_t outlen);

/* The HTTP status Triton answers a nrd_srv_json_error text with: 400 for
 * nesting too deep (INVALID_ARG), 500 for a parse error (its JSON
 * parser's INTERNAL). */
int nrd_srv_json_error_status(const char *msg);

#endif
