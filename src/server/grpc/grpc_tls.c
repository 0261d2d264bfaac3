/* TLS for the gRPC front end on OpenSSL (see grpc_tls.h). A connection's
 * session is OpenSSL's SSL object itself, behind an opaque pointer type.
 *
 * OpenSSL is loaded (dlopen) when TLS is first configured, not linked:
 * linking it costs every nereid about 1.7 MB of resident memory (the
 * pages of libcrypto the loader relocates), TLS or not. Calls go through
 * `ossl`, whose pointers have the types OpenSSL's headers declare. */
#include "grpc_tls.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "fmt.h"

/* The OpenSSL functions used here (macros such as
 * SSL_CTX_set_min_proto_version are spelled out as SSL_CTX_ctrl). */
#define OSSL_FUNCS(X)                                                                                                  \
  X(TLS_server_method)                                                                                                 \
  X(SSL_CTX_new) X(SSL_CTX_free) X(SSL_CTX_ctrl) X(SSL_CTX_set_options) X(SSL_CTX_set_cipher_list)                     \
      X(SSL_CTX_set_alpn_select_cb) X(SSL_CTX_set_session_id_context) X(SSL_CTX_use_certificate_chain_file)            \
          X(SSL_CTX_use_PrivateKey_file) X(SSL_CTX_check_private_key) X(SSL_CTX_load_verify_locations)                 \
              X(SSL_load_client_CA_file) X(SSL_CTX_set_client_CA_list) X(SSL_CTX_set_verify) X(SSL_new) X(SSL_free)    \
                  X(SSL_set_fd) X(SSL_set_accept_state) X(SSL_get_error) X(SSL_do_handshake) X(SSL_read) X(SSL_write)  \
                      X(SSL_has_pending) X(ERR_get_error) X(ERR_peek_last_error) X(ERR_error_string_n)                 \
                          X(ERR_clear_error)

#define OSSL_FIELD(f) __typeof__(f) *f;
static struct { OSSL_FUNCS(OSSL_FIELD) } ossl;
#undef OSSL_FIELD

static pthread_once_t ossl_once = PTHREAD_ONCE_INIT;
static char ossl_error[256]; /* why loading failed; "" when it worked */

/* The library name of Debian 12's OpenSSL 3 (package libssl3); its
 * libcrypto comes with it. */
#define OSSL_LIBRARY "libssl.so.3"

static void ossl_load(void) {
  void *lib = dlopen(OSSL_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    snprintf(ossl_error, sizeof ossl_error, "cannot load OpenSSL (%s): %s", OSSL_LIBRARY, dlerror());
    return;
  }
  /* Stored through a void * (POSIX's way to take a function from dlsym). */
#define OSSL_LOAD(f)                                                                                                   \
  if (!(*(void **)&ossl.f = dlsym(lib, #f))) {                                                                         \
    snprintf(ossl_error, sizeof ossl_error, "OpenSSL (%s) has no %s", OSSL_LIBRARY, #f);                               \
    return;                                                                                                            \
  }
  OSSL_FUNCS(OSSL_LOAD)
#undef OSSL_LOAD
  /* Kept loaded for the life of the process. */
}

struct nrd_srv_tls {
  SSL_CTX *ctx;
};

static SSL *ssl_of(nrd_srv_tls_conn *s) { return (SSL *)(void *)s; }
static const SSL *const_ssl_of(const nrd_srv_tls_conn *s) { return (const SSL *)(const void *)s; }

/* The oldest error OpenSSL queued on this thread, as text; empties the
 * queue (it is per thread and would confuse the next call's result). */
static void take_reason(char *buf, size_t len, const char *fallback) {
  unsigned long e = ossl.ERR_get_error();
  if (len == 0) return;
  if (e != 0)
    ossl.ERR_error_string_n(e, buf, len);
  else
    snprintf(buf, len, "%s", fallback);
  ossl.ERR_clear_error();
}

/* HTTP/2 over TLS is chosen by ALPN: pick "h2" from the client's list. A
 * client that offers protocols but not h2 cannot talk to us; one that
 * offers none (older clients) is let through to send the HTTP/2 preface. */
static int select_h2(SSL *ssl, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
                     unsigned inlen, void *arg) {
  (void)ssl;
  (void)arg;
  for (unsigned i = 0; i < inlen;) {
    unsigned n = in[i];
    if (i + 1 + n > inlen) break;
    if (n == 2 && memcmp(in + i + 1, "h2", 2) == 0) {
      *out = in + i + 1;
      *outlen = 2;
      return SSL_TLSEXT_ERR_OK;
    }
    i += 1 + n;
  }
  return SSL_TLSEXT_ERR_ALERT_FATAL;
}

/* Checks that path names a readable file, so the error says so plainly
 * instead of in OpenSSL's words. */
static int check_file(const char *flag, const char *path, char *err, size_t errlen) {
  if (path == NULL || path[0] == '\0') {
    nrd_srv_fmt_err(err, errlen, "TLS for gRPC needs --%s", flag);
    return -1;
  }
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    nrd_srv_fmt_err(err, errlen, "--%s '%s': %s", flag, path, strerror(errno));
    return -1;
  }
  fclose(f);
  return 0;
}

nrd_srv_tls *nrd_srv_tls_new(const nrd_srv_tls_options *o, char *err, size_t errlen) {
  pthread_once(&ossl_once, ossl_load);
  if (ossl_error[0]) {
    nrd_srv_fmt_err(err, errlen, "TLS for gRPC: %s", ossl_error);
    return NULL;
  }
  if (check_file("grpc-server-cert", o->cert, err, errlen) != 0 ||
      check_file("grpc-server-key", o->key, err, errlen) != 0)
    return NULL;
  if (o->mutual && (o->root == NULL || o->root[0] == '\0')) {
    nrd_srv_fmt_err(err, errlen,
                    "--grpc-use-ssl-mutual needs --grpc-root-cert (the CA that client "
                    "certificates must chain to)");
    return NULL;
  }
  if (o->root && o->root[0] && check_file("grpc-root-cert", o->root, err, errlen) != 0) return NULL;
  nrd_srv_tls *t = calloc(1, sizeof *t);
  char why[256];
  ossl.ERR_clear_error();
  if (t == NULL || (t->ctx = ossl.SSL_CTX_new(ossl.TLS_server_method())) == NULL) {
    take_reason(why, sizeof why, "out of memory");
    nrd_srv_fmt_err(err, errlen, "cannot create the TLS context: %s", why);
    free(t);
    return NULL;
  }
  SSL_CTX *ctx = t->ctx;
  /* HTTP/2 needs TLS 1.2 or later, and forbids renegotiation and TLS
   * compression; for TLS 1.2 only its allowed (ephemeral, AEAD) suites. */
  ossl.SSL_CTX_ctrl(ctx, SSL_CTRL_SET_MIN_PROTO_VERSION, TLS1_2_VERSION, NULL);
  ossl.SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | SSL_OP_IGNORE_UNEXPECTED_EOF);
  ossl.SSL_CTX_set_cipher_list(ctx, "ECDHE+AESGCM:ECDHE+CHACHA20:DHE+AESGCM:DHE+CHACHA20");
  /* Partial writes: our write buffer is large and may be reallocated
   * between a short write and its retry. Idle connections give their
   * record buffers back. */
  ossl.SSL_CTX_ctrl(ctx, SSL_CTRL_MODE,
                    SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS,
                    NULL);
  ossl.SSL_CTX_set_alpn_select_cb(ctx, select_h2, NULL);
  static const unsigned char sid_ctx[] = "nereid-grpc";
  ossl.SSL_CTX_set_session_id_context(ctx, sid_ctx, sizeof sid_ctx - 1);
  if (ossl.SSL_CTX_use_certificate_chain_file(ctx, o->cert) != 1) {
    take_reason(why, sizeof why, "not a PEM certificate");
    nrd_srv_fmt_err(err, errlen, "--grpc-server-cert '%s': %s", o->cert, why);
    goto fail;
  }
  bool key_ok = ossl.SSL_CTX_use_PrivateKey_file(ctx, o->key, SSL_FILETYPE_PEM) == 1;
  if (!key_ok && ERR_GET_REASON(ossl.ERR_peek_last_error()) != X509_R_KEY_VALUES_MISMATCH) {
    take_reason(why, sizeof why, "not a PEM private key");
    nrd_srv_fmt_err(err, errlen, "--grpc-server-key '%s': %s", o->key, why);
    goto fail;
  }
  if (!key_ok || ossl.SSL_CTX_check_private_key(ctx) != 1) {
    ossl.ERR_clear_error();
    nrd_srv_fmt_err(err, errlen, "--grpc-server-key '%s' is not the key of --grpc-server-cert '%s'", o->key, o->cert);
    goto fail;
  }
  if (o->root && o->root[0]) {
    if (ossl.SSL_CTX_load_verify_locations(ctx, o->root, NULL) != 1) {
      take_reason(why, sizeof why, "no PEM certificates in it");
      nrd_srv_fmt_err(err, errlen, "--grpc-root-cert '%s': %s", o->root, why);
      goto fail;
    }
    if (o->mutual) {
      STACK_OF(X509_NAME) *names = ossl.SSL_load_client_CA_file(o->root);
      if (names == NULL) {
        take_reason(why, sizeof why, "no PEM certificates in it");
        nrd_srv_fmt_err(err, errlen, "--grpc-root-cert '%s': %s", o->root, why);
        goto fail;
      }
      ossl.SSL_CTX_set_client_CA_list(ctx, names); /* takes names */
      ossl.SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    }
  }
  ossl.ERR_clear_error();
  return t;
fail:
  ossl.ERR_clear_error();
  nrd_srv_tls_free(t);
  return NULL;
}

void nrd_srv_tls_free(nrd_srv_tls *t) {
  if (t == NULL) return;
  ossl.SSL_CTX_free(t->ctx);
  free(t);
}

nrd_srv_tls_conn *nrd_srv_tls_conn_new(nrd_srv_tls *t, int fd) {
  SSL *ssl = ossl.SSL_new(t->ctx);
  if (ssl == NULL || ossl.SSL_set_fd(ssl, fd) != 1) {
    ossl.SSL_free(ssl);
    ossl.ERR_clear_error();
    return NULL;
  }
  ossl.SSL_set_accept_state(ssl);
  return (nrd_srv_tls_conn *)(void *)ssl;
}

void nrd_srv_tls_conn_free(nrd_srv_tls_conn *s) {
  if (s) ossl.SSL_free(ssl_of(s));
}

/* Maps the result r of an SSL_* call that did not succeed: 0 when it must
 * wait (direction in *want_write), else -1 with errno set and OpenSSL's
 * queue emptied. */
static int classify(SSL *ssl, int r, bool *want_write) {
  int saved = errno;
  switch (ossl.SSL_get_error(ssl, r)) {
    case SSL_ERROR_WANT_READ:
      *want_write = false;
      errno = EAGAIN;
      return 0;
    case SSL_ERROR_WANT_WRITE:
      *want_write = true;
      errno = EAGAIN;
      return 0;
    case SSL_ERROR_SYSCALL:
      ossl.ERR_clear_error();
      errno = saved != 0 ? saved : ECONNRESET;
      return -1;
    case SSL_ERROR_ZERO_RETURN:
      ossl.ERR_clear_error();
      errno = EPIPE;
      return -1;
    default:
      ossl.ERR_clear_error();
      errno = EPROTO;
      return -1;
  }
}

int nrd_srv_tls_handshake(nrd_srv_tls_conn *s, bool *want_write, char *why, size_t whylen) {
  SSL *ssl = ssl_of(s);
  ossl.ERR_clear_error();
  errno = 0;
  int r = ossl.SSL_do_handshake(ssl);
  if (r == 1) return 1;
  int e = ossl.SSL_get_error(ssl, r);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
    *want_write = e == SSL_ERROR_WANT_WRITE;
    return 0;
  }
  if (e == SSL_ERROR_SYSCALL || e == SSL_ERROR_ZERO_RETURN)
    take_reason(why, whylen, errno ? strerror(errno) : "the client closed the connection");
  else
    take_reason(why, whylen, "protocol error");
  return -1;
}

ssize_t nrd_srv_tls_read(nrd_srv_tls_conn *s, void *buf, size_t n, bool *want_write) {
  SSL *ssl = ssl_of(s);
  ossl.ERR_clear_error();
  errno = 0;
  int r = ossl.SSL_read(ssl, buf, n > INT_MAX ? INT_MAX : (int)n);
  if (r > 0) return r;
  if (ossl.SSL_get_error(ssl, r) == SSL_ERROR_ZERO_RETURN) return 0; /* close_notify, or EOF (see options) */
  classify(ssl, r, want_write);
  return -1;
}

ssize_t nrd_srv_tls_write(nrd_srv_tls_conn *s, const void *buf, size_t n, bool *want_write) {
  SSL *ssl = ssl_of(s);
  ossl.ERR_clear_error();
  errno = 0;
  int r = ossl.SSL_write(ssl, buf, n > INT_MAX ? INT_MAX : (int)n);
  if (r > 0) return r;
  classify(ssl, r, want_write);
  return -1;
}

bool nrd_srv_tls_pending(const nrd_srv_tls_conn *s) { return ossl.SSL_has_pending(const_ssl_of(s)) == 1; }
