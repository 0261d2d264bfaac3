/* Fuzz target: raw bytes to nereid's HTTP port, as one client connection.
 *
 * The input is sent as it is, in 512-byte writes, so a request can straddle
 * reads. Replies are read and dropped until the server closes or stays
 * quiet for 10 ms (a request still waiting for bytes); then the client
 * half-closes, and the server must close the connection within 5 s, or the
 * target aborts (a connection the server keeps after its client left).
 * With NRD_FUZZ_SHOW set, the replies are copied to stderr. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int fd = nrd_fuzz_connect(nrd_fuzz_http_port);
  if (fd < 0) {
    fprintf(stderr, "fuzz: cannot connect to the HTTP port\n");
    abort();
  }
  static uint8_t buf[1 << 16];
  if (nrd_fuzz_send(fd, data, size, 512) == 0) {
    long n;
    bool show = getenv("NRD_FUZZ_SHOW") != NULL;
    while ((n = nrd_fuzz_recv(fd, buf, sizeof buf, 10)) > 0)
      if (show) fwrite(buf, 1, (size_t)n, stderr);
    if (n == -1) {
      shutdown(fd, SHUT_WR);
      while ((n = nrd_fuzz_recv(fd, buf, sizeof buf, 5000)) > 0) {
      }
      if (n == -1) {
        fprintf(stderr, "fuzz: the server kept a half-closed connection open for 5 s\n");
        abort();
      }
    }
  }
  close(fd);
  return 0;
}
