/* Accepting connections from a listening socket that several epoll loops
 * share (EPOLLEXCLUSIVE), without spinning when the process runs out of
 * file descriptors.
 *
 * The listener is level-triggered: while a connection waits in the
 * backlog it stays readable. If accept4 fails for lack of descriptors
 * (EMFILE, ENFILE) or memory, the loop would be woken again at once and
 * spin on both cores. Instead the acceptor takes the listener out of its
 * loop's epoll set for PAUSE_MS; the waiting clients stay in the backlog
 * until descriptors are free again. Both front ends (HTTP, gRPC) use it. */
#ifndef NRD_SRV_ACCEPTOR_H
#define NRD_SRV_ACCEPTOR_H

#include <stdbool.h>
#include <stdint.h>

typedef struct nrd_srv_acceptor {
  int listen_fd; /* borrowed: the front end closes it */
  int epfd; /* borrowed: the loop's epoll set */
  void *tag; /* the listener's epoll data.ptr */
  const char *who; /* "HTTP/REST", "gRPC": for the log line */
  bool paused;
  uint64_t resume_ms; /* monotonic ms at which a pause ends */
} nrd_srv_acceptor;

/* Adds the listener to epfd (EPOLLIN | EPOLLEXCLUSIVE, data.ptr = tag).
 * 0, or -1 with errno set. The loop thread owns *a afterwards. */
int nrd_srv_acceptor_init(nrd_srv_acceptor *a, int listen_fd, int epfd, void *tag, const char *who);

/* The next waiting connection (non-blocking, close-on-exec; the caller
 * owns it), or -1 when there is none for now. Out of descriptors or
 * memory, it pauses accepting (see above) and logs a warning at most
 * every 10 s per process. Loop thread only. */
int nrd_srv_acceptor_next(nrd_srv_acceptor *a);

/* An epoll_wait timeout (ms, -1 for none) shortened so a pause ends on
 * time. Loop thread only. */
int nrd_srv_acceptor_timeout(const nrd_srv_acceptor *a, int timeout_ms);

/* Ends a pause that is over: the listener is watched again. Call after
 * every epoll_wait. Loop thread only. */
void nrd_srv_acceptor_tick(nrd_srv_acceptor *a);

#endif
