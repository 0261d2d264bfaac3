/* The in-process nereid the wire fuzzers talk to (see wire.h). */
#include "wire.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
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

/* nereid listens on ports the kernel picks (a port chosen here and passed
 * in could be taken by another test's socket first) and prints them. Its
 * stdout is a pipe until its ready line: a relay thread copies the pipe to
 * the real stdout and takes the ports from the start-up lines; it goes on
 * relaying for the processes nereid started meanwhile (python backend
 * stubs), which keep the pipe as their stdout. */
static pthread_mutex_t start_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t start_cv = PTHREAD_COND_INITIALIZER;
static bool start_seen; /* guarded by start_mu: the ready line, or the pipe's end */
static int start_http, start_grpc; /* guarded by start_mu */

typedef struct relay {
  int in, out;
} relay;

static void *server_main(void *unused) {
  (void)unused;
  char *argv[32] = {"nereid",
                    "--model-repository=" NRD_FUZZ_MODELS,
                    "--backend-directory=" NRD_FUZZ_BACKENDS,
                    "--http-address=127.0.0.1",
                    "--grpc-address=127.0.0.1",
                    "--http-port=0",
                    "--grpc-port=0",
                    "--metrics-port=0",
                    "--allow-metrics=false",
                    "--log-info=false",
                    "--log-warning=false",
                    "--log-error=false",
                    "--exit-timeout-secs=5",
                    /* Client shared memory is off by default; the corpora
                     * register regions, so keep those paths fuzzed. */
                    "--allow-client-shm=true"};
  int argc = 14;
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

/* The port of a "nereid: <what> listening on <address>:<port> ..." line,
 * or 0. */
static int listening_port(const char *line, const char *what) {
  char head[64];
  int n = snprintf(head, sizeof head, "nereid: %s listening on ", what);
  if (strncmp(line, head, (size_t)n) != 0) return 0;
  const char *p = line + n;
  p += strcspn(p, " ");
  while (p > line + n && p[-1] >= '0' && p[-1] <= '9') p--;
  return atoi(p);
}

static void start_seen_now(void) {
  pthread_mutex_lock(&start_mu);
  start_seen = true;
  pthread_cond_broadcast(&start_cv);
  pthread_mutex_unlock(&start_mu);
}

/* The relay thread: copies r->in to r->out until the pipe's end; reads
 * the ports from the lines before the ready line. Owns r. */
static void *relay_main(void *arg) {
  relay *r = arg;
  char buf[8192];
  size_t used = 0;
  bool ready = false;
  for (;;) {
    ssize_t n = read(r->in, buf + used, sizeof buf - 1 - used);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (ssize_t off = 0; off < n;) {
      ssize_t w = write(r->out, buf + used + off, (size_t)(n - off));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) break;
      off += w;
    }
    if (ready) continue;
    used += (size_t)n;
    buf[used] = '\0';
    char *line = buf, *nl;
    while (!ready && (nl = strchr(line, '\n')) != NULL) {
      *nl = '\0';
      int http = listening_port(line, "HTTP/REST"), grpc = listening_port(line, "gRPC endpoint");
      pthread_mutex_lock(&start_mu);
      if (http) start_http = http;
      if (grpc) start_grpc = grpc;
      pthread_mutex_unlock(&start_mu);
      ready = strncmp(line, "nereid: server ", 15) == 0;
      line = nl + 1;
    }
    used = ready ? 0 : used - (size_t)(line - buf);
    memmove(buf, line, used);
    if (used == sizeof buf - 1) used = 0; /* a line this long is none of ours */
    if (ready) start_seen_now();
  }
  if (!ready) start_seen_now();
  close(r->in);
  close(r->out);
  free(r);
  return NULL;
}

/* Waits until the ready line came (or the pipe ended, or 60 s went by);
 * then makes fd 1 the real stdout again. Returns 0 once both ports are
 * known. */
static int wait_start_up(int saved_stdout) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 60;
  pthread_mutex_lock(&start_mu);
  while (!start_seen && pthread_cond_timedwait(&start_cv, &start_mu, &until) == 0) {
  }
  nrd_fuzz_http_port = start_http;
  nrd_fuzz_grpc_port = start_grpc;
  pthread_mutex_unlock(&start_mu);
  fflush(stdout);
  dup2(saved_stdout, STDOUT_FILENO);
  return nrd_fuzz_http_port && nrd_fuzz_grpc_port ? 0 : -1;
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
  int pipefd[2];
  relay *r = malloc(sizeof *r);
  fflush(stdout);
  if (r == NULL || pipe2(pipefd, O_CLOEXEC) != 0) {
    perror("fuzz: a pipe for nereid's stdout");
    exit(1);
  }
  r->in = pipefd[0];
  int real_stdout = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
  r->out = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
  pthread_t relay_thread;
  if (real_stdout < 0 || r->out < 0 || dup2(pipefd[1], STDOUT_FILENO) < 0 ||
      pthread_create(&relay_thread, NULL, relay_main, r) != 0) {
    perror("fuzz: relaying nereid's stdout");
    exit(1);
  }
  pthread_detach(relay_thread); /* it ends when the last writer of the pipe does */
  close(pipefd[1]);
  if (pthread_create(&server_thread, NULL, server_main, NULL) != 0) {
    fprintf(stderr, "fuzz: cannot start the server thread\n");
    exit(1);
  }
  int started = wait_start_up(real_stdout);
  close(real_stdout);
  if (started != 0) {
    fprintf(stderr, "fuzz: nereid printed no ready line with both ports within 60 s\n");
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
