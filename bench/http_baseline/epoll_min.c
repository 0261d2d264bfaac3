/* Hand-written HTTP/1.1 keep-alive server on epoll: one thread, every
 * request gets 200 with a fixed 2-byte body. Shows the floor (kernel +
 * syscalls) under evhttp and h2o. Parses the request line and headers only
 * far enough to find the end of the head and Content-Length; pipelined
 * requests are answered in one write. Baseline for docs/http.md. */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUFSZ 16384

static const char RESP[] = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nOK";
#define RESPLEN (sizeof(RESP) - 1)

struct conn {
  int fd;
  size_t in_len; /* bytes in in[] */
  size_t skip; /* body bytes still to discard */
  size_t out_len, out_off;
  char in[BUFSZ];
  char out[BUFSZ];
};

static void conn_close(int ep, struct conn *c) {
  epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
  close(c->fd);
  free(c);
}

/* Consume complete requests from c->in, append responses to c->out.
 * Returns -1 on a malformed or oversized request. */
static int parse(struct conn *c) {
  size_t pos = 0;
  for (;;) {
    if (c->skip) { /* discard the body, then answer */
      size_t n = c->in_len - pos < c->skip ? c->in_len - pos : c->skip;
      pos += n;
      c->skip -= n;
      if (c->skip) break;
      if (c->out_len + RESPLEN > BUFSZ) return -1;
      memcpy(c->out + c->out_len, RESP, RESPLEN);
      c->out_len += RESPLEN;
    }
    char *head = c->in + pos;
    size_t avail = c->in_len - pos;
    char *end = memmem(head, avail, "\r\n\r\n", 4);
    if (!end) {
      if (avail == BUFSZ) return -1;
      break;
    }
    if (avail < 14 || !memchr(head, ' ', avail)) return -1;
    /* headers: look for Content-Length */
    size_t body = 0;
    for (char *l = memchr(head, '\n', (size_t)(end - head)); l && l < end; l = memchr(l + 1, '\n', (size_t)(end - l))) {
      if ((size_t)(end - l) > 16 && strncasecmp(l + 1, "content-length:", 15) == 0) body = strtoul(l + 16, NULL, 10);
    }
    pos += (size_t)(end + 4 - head);
    c->skip = body;
    if (body) continue;
    if (c->out_len + RESPLEN > BUFSZ) return -1;
    memcpy(c->out + c->out_len, RESP, RESPLEN);
    c->out_len += RESPLEN;
  }
  memmove(c->in, c->in + pos, c->in_len - pos);
  c->in_len -= pos;
  return 0;
}

/* Returns 1 if everything was written, 0 if the socket is full, -1 on error. */
static int flush(struct conn *c) {
  while (c->out_off < c->out_len) {
    ssize_t n = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);
    if (n < 0) return errno == EAGAIN ? 0 : -1;
    c->out_off += (size_t)n;
  }
  c->out_len = c->out_off = 0;
  return 1;
}

int main(int argc, char **argv) {
  int port = argc > 1 ? atoi(argv[1]) : 18083;
  int one = 1, lfd, ep;
  struct sockaddr_in addr = {0};
  struct epoll_event ev, evs[256];

  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(0x7f000001);
  addr.sin_port = htons((uint16_t)port);
  if ((lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0)) == -1 ||
      setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
      bind(lfd, (struct sockaddr *)&addr, sizeof(addr)) != 0 || listen(lfd, SOMAXCONN) != 0 ||
      (ep = epoll_create1(0)) == -1) {
    perror("listen");
    return 1;
  }
  ev.events = EPOLLIN;
  ev.data.ptr = NULL;
  epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);

  for (;;) {
    int n = epoll_wait(ep, evs, 256, -1);
    for (int i = 0; i < n; i++) {
      struct conn *c = evs[i].data.ptr;
      if (!c) {
        int fd;
        while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
          setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
          c = calloc(1, sizeof(*c));
          if (!c) {
            close(fd);
            continue;
          }
          c->fd = fd;
          ev.events = EPOLLIN;
          ev.data.ptr = c;
          epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
        }
        continue;
      }
      if (evs[i].events & EPOLLOUT) {
        int r = flush(c);
        if (r < 0) {
          conn_close(ep, c);
          continue;
        }
        if (r == 0) continue;
        ev.events = EPOLLIN;
        ev.data.ptr = c;
        epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
      }
      if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
        if (c->out_len) continue; /* wait for the peer to read first */
        ssize_t r = read(c->fd, c->in + c->in_len, BUFSZ - c->in_len);
        if (r <= 0) {
          if (r < 0 && errno == EAGAIN) continue;
          conn_close(ep, c);
          continue;
        }
        c->in_len += (size_t)r;
        if (parse(c) < 0) {
          conn_close(ep, c);
          continue;
        }
        int w = flush(c);
        if (w < 0) {
          conn_close(ep, c);
          continue;
        }
        if (w == 0) {
          ev.events = EPOLLOUT;
          ev.data.ptr = c;
          epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
        }
      }
    }
  }
}
