/* The listening socket of a front end (HTTP, metrics, gRPC). */
#ifndef NRD_SRV_LISTENER_H
#define NRD_SRV_LISTENER_H

#include <stdbool.h>
#include <stddef.h>

/* Resolves address (a host name or a numeric address; port 0 picks a free
 * port) and listens, non-blocking and close-on-exec (with SO_REUSEPORT when
 * reuse_port is set, so several processes may share the port), on the first of its
 * addresses that accepts the bind. Returns 0 with the socket in *fd (the
 * caller closes it) and the bound port in *bound_port; -1 when the
 * address does not resolve, -2 when no address can be bound, each with a
 * message in err. Any thread. */
int nrd_srv_listen(const char *address, int port, bool reuse_port, int *fd, int *bound_port, char *err, size_t errlen);

#endif
