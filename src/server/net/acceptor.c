/* Accepting without spinning when out of descriptors (see acceptor.h). */
#include "acceptor.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>

#include "triton/core/tritonserver.h"

#define PAUSE_MS 100
#define LOG_EVERY_MS 10000

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int watch(nrd_srv_acceptor *a) {
  struct epoll_event ev = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.ptr = a->tag};
  return epoll_ctl(a->epfd, EPOLL_CTL_ADD, a->listen_fd, &ev);
}

int nrd_srv_acceptor_init(nrd_srv_acceptor *a, int listen_fd, int epfd, void *tag, const char *who) {
  *a = (nrd_srv_acceptor){.listen_fd = listen_fd, .epfd = epfd, .tag = tag, .who = who};
  return watch(a);
}

/* One warning per LOG_EVERY_MS for the whole process: every loop of both
 * front ends hits the limit at about the same time. */
static void warn(const nrd_srv_acceptor *a, int err, uint64_t now) {
  static _Atomic uint64_t next_log_ms;
  uint64_t due = atomic_load_explicit(&next_log_ms, memory_order_relaxed);
  if (now < due || !atomic_compare_exchange_strong_explicit(&next_log_ms, &due, now + LOG_EVERY_MS,
                                                            memory_order_relaxed, memory_order_relaxed))
    return;
  char msg[256];
  snprintf(msg, sizeof msg,
           "%s: cannot accept connections: %s; new clients wait until descriptors are free "
           "(raise the open files limit, ulimit -n)",
           a->who, strerror(err));
  TRITONSERVER_Error *e = TRITONSERVER_LogMessage(TRITONSERVER_LOG_WARN, __FILE__, __LINE__, msg);
  if (e) TRITONSERVER_ErrorDelete(e);
}

int nrd_srv_acceptor_next(nrd_srv_acceptor *a) {
  if (a->paused) return -1;
  for (;;) {
    int fd = accept4(a->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) return fd;
    switch (errno) {
      case EINTR:
      case ECONNABORTED: /* that client gave up: try the next one */ continue;
      case EMFILE:
      case ENFILE:
      case ENOBUFS:
      case ENOMEM: {
        int err = errno;
        uint64_t now = now_ms();
        /* Not watched, the listener cannot wake this loop again and again. */
        if (epoll_ctl(a->epfd, EPOLL_CTL_DEL, a->listen_fd, NULL) == 0) {
          a->paused = true;
          a->resume_ms = now + PAUSE_MS;
        }
        warn(a, err, now);
        return -1;
      }
      default: /* EAGAIN: nobody waiting; anything else the next accept sees again */ return -1;
    }
  }
}

int nrd_srv_acceptor_timeout(const nrd_srv_acceptor *a, int timeout_ms) {
  if (!a->paused) return timeout_ms;
  uint64_t now = now_ms();
  int left = a->resume_ms > now ? (int)(a->resume_ms - now) : 0;
  return timeout_ms < 0 || left < timeout_ms ? left : timeout_ms;
}

void nrd_srv_acceptor_tick(nrd_srv_acceptor *a) {
  if (!a->paused || now_ms() < a->resume_ms) return;
  if (watch(a) == 0)
    a->paused = false;
  else
    a->resume_ms = now_ms() + PAUSE_MS; /* out of memory for the epoll entry: later */
}
