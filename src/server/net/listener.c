/* The listening socket of a front end (see listener.h). */
#include "listener.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int nrd_srv_listen(const char *address, int port, bool reuse_port, int *out_fd, int *bound_port, char *err,
                   size_t errlen) {
  struct addrinfo hints = {0}, *res = NULL;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  char portstr[16];
  snprintf(portstr, sizeof portstr, "%d", port);
  int rc = getaddrinfo(address, portstr, &hints, &res);
  if (rc != 0) {
    snprintf(err, errlen, "cannot resolve address '%s': %s", address, gai_strerror(rc));
    return -1;
  }
  int fd = -1, saved = 0;
  for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      saved = errno;
      continue;
    }
    int one = 1; /* a restarted server binds at once, past TIME_WAIT */
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (reuse_port && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0) {
      saved = errno;
      close(fd);
      fd = -1;
      continue;
    }
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 1024) == 0) break;
    saved = errno;
    close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  if (fd < 0) {
    snprintf(err, errlen, "cannot listen on %s:%d: %s", address, port, strerror(saved));
    return -2;
  }
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  *bound_port = port;
  if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
    if (ss.ss_family == AF_INET)
      *bound_port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    else if (ss.ss_family == AF_INET6)
      *bound_port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
  }
  *out_fd = fd;
  return 0;
}
