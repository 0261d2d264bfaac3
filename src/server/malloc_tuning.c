/* Why: a loop thread takes a burst of requests (16 streams' worth, say)
 * and makes the same handful of blocks for each before any comes back.
 * glibc's per-thread cache keeps 7 freed blocks per size by default, so
 * most of a burst went through the arena's slow path: about 5% of a small
 * gRPC call's instructions with 16 streams (bench/instructions.sh). 64
 * covers the bursts a loop sees. */
#include "malloc_tuning.h"

#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

void nrd_srv_malloc_tuning_apply(char **argv) {
  /* Set by the user, or by us before the exec: either way, leave it. */
  if (getenv("GLIBC_TUNABLES") != NULL || argv == NULL || argv[0] == NULL) return;
  /* The path, not /proc/self/exe itself: under valgrind that link names
   * the tool, while readlink on it answers the program's path. */
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return;
  self[n] = '\0';
  if (setenv("GLIBC_TUNABLES", NRD_SRV_MALLOC_TUNABLES, 1) != 0) return;
  execv(self, argv);
  unsetenv("GLIBC_TUNABLES"); /* no exec: the variable would only mislead children */
}
