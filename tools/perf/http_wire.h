/* HTTP/1.1 on the client side, the few pieces nrd_perf needs: connecting,
 * writing a whole buffer, and recognizing one complete response (status,
 * Content-Length or chunked body) in a receive buffer.
 *
 * Threads: pure functions on caller-owned buffers; any thread. */
#ifndef NRD_PERF_HTTP_WIRE_H
#define NRD_PERF_HTTP_WIRE_H

#include <stdbool.h>
#include <stddef.h>

typedef struct nrd_perf_http_resp {
  int status;
  size_t header_len; /* through the blank line */
  size_t body_len; /* raw body length (chunk framing included when chunked) */
  size_t total_len; /* header_len + body_len */
  bool chunked;
  bool close; /* the server said Connection: close */
} nrd_perf_http_resp;

/* Looks for one complete response at the start of buf[0..len). Returns 1
 * (complete, *r filled), 0 (need more bytes) or -1 (not HTTP). */
int nrd_perf_http_parse(const char *buf, size_t len, nrd_perf_http_resp *r);

/* Removes chunk framing from a complete chunked body in place; returns
 * the decoded length. */
size_t nrd_perf_http_dechunk(char *body, size_t len);

/* Splits "host:port" (an optional "http://" prefix and trailing "/" are
 * ignored; port defaults to `default_port`) into host and port buffers.
 * False when malformed. */
bool nrd_perf_http_split_url(const char *url, const char *default_port, char *host, size_t hostlen, char *port,
                             size_t portlen);

/* A blocking TCP connection with TCP_NODELAY, or -1 with err filled. */
int nrd_perf_http_connect(const char *host, const char *port, char *err, size_t errlen);

/* Writes all of buf (blocking, no SIGPIPE); false on an error (errno set). */
bool nrd_perf_http_write_all(int fd, const char *buf, size_t len);

#endif
