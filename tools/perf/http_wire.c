/* Client-side HTTP/1.1 framing and sockets. */
#include "http_wire.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

static const char *find_crlfcrlf(const char *buf, size_t len) {
  for (size_t i = 3; i < len; i++)
    if (buf[i] == '\n' && buf[i - 1] == '\r' && buf[i - 2] == '\n' && buf[i - 3] == '\r') return buf + i + 1;
  return NULL;
}

/* The value of header `name` within the header block, or NULL. */
static const char *header(const char *h, size_t hlen, const char *name, size_t *vlen) {
  size_t nlen = strlen(name);
  const char *end = h + hlen;
  const char *line = memchr(h, '\n', hlen); /* skip the status line */
  while (line && line + 1 < end) {
    line++;
    const char *eol = memchr(line, '\n', (size_t)(end - line));
    if (!eol) break;
    if ((size_t)(eol - line) > nlen && line[nlen] == ':' && !strncasecmp(line, name, nlen)) {
      const char *v = line + nlen + 1;
      while (v < eol && (*v == ' ' || *v == '\t')) v++;
      const char *ve = eol;
      while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ')) ve--;
      *vlen = (size_t)(ve - v);
      return v;
    }
    line = eol;
  }
  return NULL;
}

/* Length of a complete chunked body at b[0..len), or 0 if incomplete. */
static size_t chunked_len(const char *b, size_t len) {
  size_t pos = 0;
  for (;;) {
    const char *eol = memchr(b + pos, '\n', len - pos);
    if (!eol) return 0;
    size_t size = strtoul(b + pos, NULL, 16);
    pos = (size_t)(eol - b) + 1;
    if (size == 0) {
      for (;;) { /* trailers end with an empty line */
        const char *e = memchr(b + pos, '\n', len - pos);
        if (!e) return 0;
        bool empty = (size_t)(e - (b + pos)) <= 1;
        pos = (size_t)(e - b) + 1;
        if (empty) return pos;
      }
    }
    if (len - pos < size + 2) return 0;
    pos += size + 2;
  }
}

int nrd_perf_http_parse(const char *buf, size_t len, nrd_perf_http_resp *r) {
  if (len >= 5 && memcmp(buf, "HTTP/", 5)) return -1;
  const char *body = find_crlfcrlf(buf, len);
  if (!body) return len > (1u << 20) ? -1 : 0;
  *r = (nrd_perf_http_resp){0};
  const char *sp = memchr(buf, ' ', (size_t)(body - buf));
  if (!sp) return -1;
  r->status = atoi(sp + 1);
  r->header_len = (size_t)(body - buf);
  size_t vlen = 0;
  const char *v = header(buf, r->header_len, "Connection", &vlen);
  r->close = v && vlen == 5 && !strncasecmp(v, "close", 5);
  v = header(buf, r->header_len, "Transfer-Encoding", &vlen);
  if (v && vlen >= 7 && !strncasecmp(v, "chunked", 7)) {
    r->chunked = true;
    size_t n = chunked_len(body, len - r->header_len);
    if (!n) return 0;
    r->body_len = n;
  } else {
    v = header(buf, r->header_len, "Content-Length", &vlen);
    r->body_len = v ? strtoull(v, NULL, 10) : 0;
    if (len - r->header_len < r->body_len) return 0;
  }
  r->total_len = r->header_len + r->body_len;
  return 1;
}

size_t nrd_perf_http_dechunk(char *b, size_t len) {
  size_t in = 0, out = 0;
  while (in < len) {
    char *eol = memchr(b + in, '\n', len - in);
    if (!eol) break;
    size_t size = strtoul(b + in, NULL, 16);
    in = (size_t)(eol - b) + 1;
    if (size == 0 || in + size > len) break;
    memmove(b + out, b + in, size);
    out += size;
    in += size + 2;
  }
  return out;
}

bool nrd_perf_http_split_url(const char *url, const char *default_port, char *host, size_t hostlen, char *port,
                             size_t portlen) {
  if (!strncmp(url, "http://", 7)) url += 7;
  size_t n = strcspn(url, "/");
  if (n == 0 || n >= 256) return false;
  char tmp[256];
  memcpy(tmp, url, n);
  tmp[n] = 0;
  char *colon = strrchr(tmp, ':');
  if (colon) {
    *colon = 0;
    if (!colon[1] || strspn(colon + 1, "0123456789") != strlen(colon + 1)) return false;
    snprintf(port, portlen, "%s", colon + 1);
  } else {
    snprintf(port, portlen, "%s", default_port);
  }
  if (!tmp[0]) return false;
  snprintf(host, hostlen, "%s", tmp);
  return true;
}

int nrd_perf_http_connect(const char *host, const char *port, char *err, size_t errlen) {
  struct addrinfo hints = {0}, *res = NULL;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  int rc = getaddrinfo(host, port, &hints, &res);
  if (rc) {
    snprintf(err, errlen, "cannot resolve %s: %s", host, gai_strerror(rc));
    return -1;
  }
  int fd = -1, last = 0;
  for (struct addrinfo *a = res; a; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) break;
    last = errno;
    close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  if (fd < 0) {
    snprintf(err, errlen, "cannot connect to %s:%s: %s", host, port, strerror(last ? last : ECONNREFUSED));
    return -1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

bool nrd_perf_http_write_all(int fd, const char *buf, size_t len) {
  while (len) {
    ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    buf += n;
    len -= (size_t)n;
  }
  return true;
}
