/* The in-process nereid the wire fuzzers talk to (see wire.h). */
#include "wire.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* nereid's main(), renamed when main.c is compiled into a fuzzer. */
int nrd_nereid_main(int argc, char **argv);

int nrd_fuzz_http_port;
int nrd_fuzz_grpc_port;

static pthread_t server_thread;
static int server_status = -1;

/* A port nothing listens on right now (the kernel's pick for port 0). */
static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
    perror("fuzz: free port");
    exit(1);
  }
  close(fd);
  return ntohs(a.sin_port);
}

static char arg_http[32], arg_grpc[32], arg_metrics[32];

static void *server_main(void *unused) {
  (void)unused;
  char *argv[32] = {"nereid",
                    "--model-repository=" NRD_FUZZ_MODELS,
                    "--backend-directory=" NRD_FUZZ_BACKENDS,
                    "--http-address=127.0.0.1",
                    "--grpc-address=127.0.0.1",
                    arg_http,
                    arg_grpc,
                    arg_metrics,
                    "--allow-metrics=false",
                    "--log-info=false",
                    "--log-warning=false",
                    "--log-error=false",
                    "--exit-timeout-secs=5"};
  int argc = 13;
  /* NRD_FUZZ_EXPLICIT=1 lets inputs load (with config overrides) and
   * unload models; the default keeps the model set fixed, so that an
   * input behaves the same whatever ran before it. */
  const char *explicit = getenv("NRD_FUZZ_EXPLICIT");
  if (explicit && strcmp(explicit, "1") == 0) {
    argv[argc++] = "--model-control-mode=explicit";
    argv[argc++] = "--load-model=*";
  }
  argv[argc] = NULL;
  server_status = nrd_nereid_main(argc, argv);
  return NULL;
}

/* One connection attempt; errno tells why it failed. */
static int connect_once(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct sockaddr_in a = {
      .sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  int rc = connect(fd, (struct sockaddr *)&a, sizeof a);
  if (rc != 0 && errno == EINTR) {
    /* A signal (libFuzzer's timers) cut the wait short; the connection
     * goes on being made: wait for it and read its outcome. */
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    while (poll(&p, 1, 5000) < 0 && errno == EINTR) {
    }
    int err = ETIMEDOUT;
    socklen_t len = sizeof err;
    if (p.revents) getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    rc = err ? -1 : 0;
    errno = err;
  }
  if (rc != 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

int nrd_fuzz_connect(int port) {
  /* Hundreds of short connections a second can run the client out of
   * local ports for a moment (EADDRNOTAVAIL): that is the machine, not the
   * server, so it is retried for up to a second. */
  for (int i = 0; i < 20; i++) {
    int fd = connect_once(port);
    if (fd >= 0 || errno != EADDRNOTAVAIL) {
      if (fd < 0) fprintf(stderr, "fuzz: connect to port %d: %s\n", port, strerror(errno));
      return fd;
    }
    nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
  }
  fprintf(stderr, "fuzz: connect to port %d: no local port free for 1 s\n", port);
  return -1;
}

static int wait_accepting(int port) {
  for (int i = 0; i < 600; i++) {
    int fd = connect_once(port);
    if (fd >= 0) {
      close(fd);
      return 0;
    }
    nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
  }
  return -1;
}

void nrd_fuzz_server_start(void) {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, NULL);
  signal(SIGPIPE, SIG_IGN);
  nrd_fuzz_http_port = free_port();
  nrd_fuzz_grpc_port = free_port();
  snprintf(arg_http, sizeof arg_http, "--http-port=%d", nrd_fuzz_http_port);
  snprintf(arg_grpc, sizeof arg_grpc, "--grpc-port=%d", nrd_fuzz_grpc_port);
  snprintf(arg_metrics, sizeof arg_metrics, "--metrics-port=%d", free_port());
  if (pthread_create(&server_thread, NULL, server_main, NULL) != 0) {
    fprintf(stderr, "fuzz: cannot start the server thread\n");
    exit(1);
  }
  if (wait_accepting(nrd_fuzz_http_port) != 0 || wait_accepting(nrd_fuzz_grpc_port) != 0) {
    fprintf(stderr, "fuzz: nereid did not start listening within 30 s\n");
    exit(1);
  }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  nrd_fuzz_server_start();
  return 0;
}

int nrd_fuzz_server_stop(void) {
  kill(getpid(), SIGINT);
  pthread_join(server_thread, NULL);
  return server_status;
}

int nrd_fuzz_send(int fd, const uint8_t *data, size_t size, size_t piece) {
  while (size > 0) {
    size_t n = size < piece ? size : piece;
    ssize_t w = send(fd, data, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    data += w;
    size -= (size_t)w;
  }
  return 0;
}

long nrd_fuzz_recv(int fd, uint8_t *buf, size_t cap, int ms) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  int r;
  while ((r = poll(&p, 1, ms)) < 0 && errno == EINTR) {
  }
  if (r < 0) return -2;
  if (r == 0) return -1;
  ssize_t n;
  while ((n = recv(fd, buf, cap, 0)) < 0 && errno == EINTR) {
  }
  return n < 0 ? -2 : (long)n;
}
