/* The floor under every HTTP figure on this machine: the least a server
 * can do per request with the kernel's TCP and epoll. Each thread runs one
 * epoll loop on its own SO_REUSEPORT listener, reads whatever a
 * connection sent, and for every complete request (headers plus
 * Content-Length bytes) writes the bytes a small binary identity_fp32
 * inference answers; GETs get 200 "{}". No HTTP library, no routing, no
 * allocation per request: what this server costs per request at one
 * connection is wake-ups and system calls, which no server that sleeps
 * between requests can avoid. bench/http_bench.sh runs it beside nereid.
 *
 *   nrd_bench_http_floor PORT [THREADS]   (stops on SIGINT/SIGTERM) */
#include <stdbool.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define CONN_BUF 65536

static const char kHeader[] =
    "{\"model_name\":\"identity_fp32\",\"model_version\":\"1\",\"outputs\":[{\"name\":\"OUTPUT0\","
    "\"datatype\":\"FP32\",\"shape\":[1,16],\"parameters\":{\"binary_data_size\":64}}]}";
static char g_post[1024], g_get[256];
static size_t g_post_len, g_get_len;
static int g_port;

typedef struct conn {
  int fd;
  size_t used;
  char buf[CONN_BUF];
} conn;

/* Bytes of the first complete request in c->buf, 0 when incomplete, -1
 * when it can never complete here (too large for the buffer). *post says
 * whether it was a POST. */
static long complete_request(const conn *c, int *post) {
  const char *end = memmem(c->buf, c->used, "\r\n\r\n", 4);
  if (!end) return c->used == CONN_BUF ? -1 : 0;
  size_t head = (size_t)(end - c->buf) + 4, body = 0;
  for (const char *p = c->buf; p < end; p++) {
    if ((p == c->buf || p[-1] == '\n') && !strncasecmp(p, "content-length:", 15)) body = strtoul(p + 15, NULL, 10);
  }
  if (head + body > CONN_BUF) return -1;
  *post = c->buf[0] == 'P';
  return head + body <= c->used ? (long)(head + body) : 0;
}

/* Reads what is there and answers every complete request. False: close. */
static bool serve(conn *c) {
  for (;;) {
    ssize_t n = read(c->fd, c->buf + c->used, CONN_BUF - c->used);
    if (n == 0) return false;
    if (n < 0) return errno == EAGAIN || errno == EINTR;
    c->used += (size_t)n;
    long len;
    int post = 0;
    while ((len = complete_request(c, &post)) > 0) {
      const char *ans = post ? g_post : g_get;
      size_t ans_len = post ? g_post_len : g_get_len;
      if (write(c->fd, ans, ans_len) != (ssize_t)ans_len) return false; /* a full socket buffer: give up */
      memmove(c->buf, c->buf + len, c->used - (size_t)len);
      c->used -= (size_t)len;
    }
    if (len < 0) return false;
    if ((size_t)n < CONN_BUF) return true; /* drained; the next event brings more */
  }
}

static int listen_on(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
  struct sockaddr_in a = {
      .sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) ||
      bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, 1024)) {
    perror("nrd_bench_http_floor: listen");
    exit(1);
  }
  return fd;
}

static void *loop_main(void *arg) {
  int lfd = (int)(intptr_t)arg, ep = epoll_create1(0), one = 1;
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
  epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
  for (;;) {
    struct epoll_event evs[64];
    int n = epoll_wait(ep, evs, 64, -1);
    for (int i = 0; i < n; i++) {
      conn *c = evs[i].data.ptr;
      if (!c) {
        int fd;
        while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
          conn *nc = malloc(sizeof *nc);
          if (!nc) {
            close(fd);
            continue;
          }
          nc->fd = fd;
          nc->used = 0;
          setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          struct epoll_event e = {.events = EPOLLIN, .data.ptr = nc};
          epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
        }
      } else if (!serve(c)) {
        close(c->fd); /* also leaves the epoll set */
        free(c);
      }
    }
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s PORT [THREADS]\n", argv[0]);
    return 2;
  }
  g_port = atoi(argv[1]);
  int threads = argc > 2 ? atoi(argv[2]) : 2;
  if (threads < 1) threads = 1;
  float tail[16];
  for (int i = 0; i < 16; i++) tail[i] = (float)i;
  g_post_len = (size_t)snprintf(g_post, sizeof g_post,
                                "HTTP/1.1 200 OK\r\nInference-Header-Content-Length: %zu\r\n"
                                "Content-Type: application/octet-stream\r\nContent-Length: %zu\r\n\r\n%s",
                                sizeof kHeader - 1, sizeof kHeader - 1 + sizeof tail, kHeader);
  memcpy(g_post + g_post_len, tail, sizeof tail);
  g_post_len += sizeof tail;
  g_get_len = (size_t)snprintf(g_get, sizeof g_get,
                               "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}");
  signal(SIGPIPE, SIG_IGN);
  for (int t = 0; t < threads; t++) {
    pthread_t th;
    if (pthread_create(&th, NULL, loop_main, (void *)(intptr_t)listen_on(g_port))) return 1;
    pthread_detach(th);
  }
  printf("nrd_bench_http_floor: ready on 127.0.0.1:%d\n", g_port);
  fflush(stdout);
  pause(); /* SIGINT/SIGTERM end the process */
  return 0;
}
