/* TLS for the gRPC front end (--grpc-use-ssl, --grpc-use-ssl-mutual,
 * --grpc-server-cert, --grpc-server-key, --grpc-root-cert): one OpenSSL
 * server context built at start, and non-blocking handshakes, reads and
 * writes on each connection. HTTP/2 over TLS as gRPC clients speak it:
 * TLS 1.2 or later, ALPN "h2". See docs/grpc.md, "TLS". */
#ifndef NRD_SRV_GRPC_TLS_H
#define NRD_SRV_GRPC_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct nrd_srv_tls_options {
  const char *cert; /* PEM certificate, or the chain with ours first (--grpc-server-cert) */
  const char *key; /* PEM private key of cert (--grpc-server-key) */
  const char *root; /* PEM CA certificates client certificates must chain to; NULL: none */
  bool mutual; /* require a client certificate that chains to root */
} nrd_srv_tls_options;

typedef struct nrd_srv_tls nrd_srv_tls;
typedef struct nrd_srv_tls_conn nrd_srv_tls_conn;

/* Loads the files and builds the context. On failure returns NULL with a
 * one-line message in err naming the flag and file. The caller owns the
 * result (nrd_srv_tls_free). Call from one thread; afterwards the context
 * is read-only and any loop thread may make connections from it. */
nrd_srv_tls *nrd_srv_tls_new(const nrd_srv_tls_options *o, char *err, size_t errlen);

/* Frees t once no connection made from it is left. NULL is a no-op. */
void nrd_srv_tls_free(nrd_srv_tls *t);

/* A server-side TLS session on the connected, non-blocking socket fd (not
 * taken over: the caller still closes it). NULL when out of memory. The
 * caller owns it (nrd_srv_tls_conn_free); one thread at a time. */
nrd_srv_tls_conn *nrd_srv_tls_conn_new(nrd_srv_tls *t, int fd);
void nrd_srv_tls_conn_free(nrd_srv_tls_conn *s);

/* The calls below never block. When they cannot go on, *want_write says
 * which readiness of the socket to wait for: true for writable, false for
 * readable. */

/* Advances the handshake: 1 done, 0 wait and call again, -1 failed (the
 * reason goes to why, for the log; close the connection). */
int nrd_srv_tls_handshake(nrd_srv_tls_conn *s, bool *want_write, char *why, size_t whylen);

/* As read(2) and write(2): bytes moved (> 0); 0 from read when the peer
 * closed; -1 with errno EAGAIN to wait as *want_write says, or with
 * another errno when the connection failed. write may move fewer bytes
 * than asked; pass the rest again later (the buffer may move). */
ssize_t nrd_srv_tls_read(nrd_srv_tls_conn *s, void *buf, size_t n, bool *want_write);
ssize_t nrd_srv_tls_write(nrd_srv_tls_conn *s, const void *buf, size_t n, bool *want_write);

/* Whether bytes already taken off the socket wait inside the session, so
 * that the socket's readiness would not announce them. */
bool nrd_srv_tls_pending(const nrd_srv_tls_conn *s);

#endif
