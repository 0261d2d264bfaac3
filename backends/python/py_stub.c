/*
 * The stub process and its shared memory: start, one exchange at a time
 * (py_wait.h), death detection, stop.
 */
#include "py_stub.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "py_ipc.h"
#include "py_wait.h"

extern char **environ;

static char *msgf(const char *fmt, const char *a, int err) {
  char *out = NULL;
  if (asprintf(&out, fmt, a, strerror(err)) < 0) {
    return NULL;
  }
  return out;
}

static nrd_py_shm_header *header(nrd_py_stub *stub) { return (nrd_py_shm_header *)stub->base; }

/* Sources the environment's activate script ($1), puts its lib/ ($2)
 * first for the dynamic linker, then becomes the stub ($3, $4 its
 * sys.path entries, $2 the environment). */
static const char ENV_SCRIPT[] =
    "source \"$1\" && export LD_LIBRARY_PATH=\"$2/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\" "
    "&& exec \"$3\" \"$4\" \"$2\"";

char *nrd_py_stub_start(nrd_py_stub *stub, const char *stub_path, const char *python_path, const char *env_dir,
                        const char *shm_name, uint64_t shm_size, uint64_t shm_growth) {
  memset(stub, 0, sizeof *stub);
  stub->fd = -1;
  if (shm_size < NRD_PY_DATA_OFFSET + (1u << 20)) {
    shm_size = NRD_PY_DATA_OFFSET + (1u << 20);
  }
  stub->fd = memfd_create(shm_name != NULL && shm_name[0] ? shm_name : "nereid-python", MFD_CLOEXEC);
  if (stub->fd < 0) {
    return msgf("python: memfd_create%s: %s", "", errno);
  }
  if (ftruncate(stub->fd, (off_t)shm_size) != 0) {
    char *m = msgf("python: sizing shared memory%s: %s", "", errno);
    close(stub->fd);
    return m;
  }
  stub->base = mmap(NULL, shm_size, PROT_READ | PROT_WRITE, MAP_SHARED, stub->fd, 0);
  if (stub->base == MAP_FAILED) {
    char *m = msgf("python: mapping shared memory%s: %s", "", errno);
    close(stub->fd);
    stub->base = NULL;
    return m;
  }
  stub->size = shm_size;
  header(stub)->size = shm_size;
  header(stub)->growth = shm_growth;

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, stub->fd, NRD_PY_SHM_FD);
  /* The model's print() goes to the log (stderr), never the server's
   * stdout. */
  posix_spawn_file_actions_adddup2(&fa, 2, 1);
  int rc = 0;
  pid_t pid = 0;
  if (env_dir == NULL) {
    char *argv[] = {(char *)stub_path, (char *)python_path, NULL};
    rc = posix_spawn(&pid, stub_path, &fa, NULL, argv, environ);
  } else {
    char activate[PATH_MAX + 16];
    snprintf(activate, sizeof activate, "%s/bin/activate", env_dir);
    char *argv[] = {"bash",
                    "-c",
                    (char *)ENV_SCRIPT,
                    "nereid-python-env",
                    activate,
                    (char *)env_dir,
                    (char *)stub_path,
                    (char *)python_path,
                    NULL};
    rc = posix_spawnp(&pid, "bash", &fa, NULL, argv, environ);
  }
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    char *m = msgf("python: cannot start the stub %s: %s", stub_path, rc);
    munmap(stub->base, stub->size);
    close(stub->fd);
    stub->base = NULL;
    __atomic_store_n(&stub->pid, 0, __ATOMIC_RELEASE);
    return m;
  }
  __atomic_store_n(&stub->pid, pid, __ATOMIC_RELEASE);
  return NULL;
}

char *nrd_py_stub_meta(nrd_py_stub *stub) { return (char *)stub->base + NRD_PY_META_OFFSET; }

/* Maps the region (already 'size' bytes) anew, keeping the old mapping. */
static char *remap(nrd_py_stub *stub, uint64_t size) {
  struct nrd_py_old_map *old = realloc(stub->old, (stub->n_old + 1) * sizeof *old);
  if (old == NULL) {
    return msgf("python: growing the shared memory%s: %s", "", ENOMEM);
  }
  stub->old = old;
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, stub->fd, 0);
  if (p == MAP_FAILED) {
    return msgf("python: mapping the grown shared memory%s: %s", "", errno);
  }
  stub->old[stub->n_old++] = (struct nrd_py_old_map){stub->base, stub->size};
  stub->base = p;
  stub->size = size;
  return NULL;
}

char *nrd_py_stub_grow(nrd_py_stub *stub, uint64_t need) {
  if (need <= stub->size) {
    return NULL;
  }
  uint64_t growth = header(stub)->growth ? header(stub)->growth : (64u << 20);
  uint64_t steps = (need - stub->size + growth - 1) / growth;
  if (steps > (UINT64_MAX - stub->size) / growth || stub->size + steps * growth > (uint64_t)INT64_MAX) {
    return msgf("python: cannot grow the shared memory%s: %s", "", EOVERFLOW);
  }
  uint64_t size = stub->size + steps * growth;
  if (ftruncate(stub->fd, (off_t)size) != 0) {
    return msgf("python: growing the shared memory%s: %s", "", errno);
  }
  char *why = remap(stub, size);
  if (why == NULL) {
    __atomic_store_n(&header(stub)->size, size, __ATOMIC_RELEASE);
  }
  return why;
}

/* Reaps the process if it exited; true when it is gone. */
static bool reap(nrd_py_stub *stub, int options) {
  if (stub->pid == 0) {
    return true;
  }
  int status = 0;
  pid_t r = waitpid(stub->pid, &status, options);
  if (r == stub->pid || (r < 0 && errno == ECHILD)) {
    stub->exit_status = status;
    __atomic_store_n(&stub->pid, 0, __ATOMIC_RELEASE);
    return true;
  }
  return false;
}

bool nrd_py_stub_alive(nrd_py_stub *stub) { return !reap(stub, WNOHANG); }

/* A waitpid per request cost two syscalls of the server's 8-connection
 * hot path (strace: wait4 twice per request). A death the readiness probe
 * saw is asked about at once; another one found up to 10 ms late only
 * fails the batch sent meanwhile (its exchange notices the death). */
#define ALIVE_CHECK_NS 10000000u

bool nrd_py_stub_alive_lately(nrd_py_stub *stub) {
  if (stub->pid == 0) {
    return false;
  }
  uint64_t now = nrd_py_now_ns();
  if (now - __atomic_load_n(&stub->alive_checked_ns, __ATOMIC_RELAXED) < ALIVE_CHECK_NS) {
    return true;
  }
  __atomic_store_n(&stub->alive_checked_ns, now, __ATOMIC_RELAXED);
  return nrd_py_stub_alive(stub);
}

bool nrd_py_stub_running(nrd_py_stub *stub) {
  pid_t pid = __atomic_load_n(&stub->pid, __ATOMIC_ACQUIRE);
  if (pid == 0) {
    return false;
  }
  /* WNOWAIT leaves a dead process to the owner's reap. A pid the owner
   * reaped meanwhile is no child any more (ECHILD): not running either. */
  siginfo_t info;
  memset(&info, 0, sizeof info);
  bool running = waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == 0;
  if (!running) {
    /* The owner's next nrd_py_stub_alive_lately asks the kernel. */
    __atomic_store_n(&stub->alive_checked_ns, 0, __ATOMIC_RELAXED);
  }
  return running;
}

static char *died(nrd_py_stub *stub) {
  char *out = NULL;
  int st = stub->exit_status;
  int n = WIFSIGNALED(st) ? asprintf(&out, "python: the stub process died (signal %d)", WTERMSIG(st))
                          : asprintf(&out, "python: the stub process exited (status %d)", WEXITSTATUS(st));
  return n < 0 ? NULL : out;
}

char *nrd_py_stub_exchange(nrd_py_stub *stub, uint32_t len, uint64_t timeout_ms, const char **reply,
                           uint32_t *reply_len) {
  if (!nrd_py_stub_alive_lately(stub)) {
    return died(stub);
  }
  nrd_py_shm_header *h = header(stub);
  h->msg_len = len;
  stub->seen = __atomic_load_n(&h->to_server, __ATOMIC_ACQUIRE);
  nrd_py_post(&h->to_stub, &h->stub_sleepers);
  uint64_t t0 = nrd_py_now_ns();
  /* Spin as long as recent replies took (py_wait.h) when the caller waits
   * for this batch, then sleep in slices that let a dead process or the
   * timeout be noticed. */
  if (!(stub->spin ? nrd_py_spin(&stub->waiter, &h->to_server, stub->seen, t0)
                   : __atomic_load_n(&h->to_server, __ATOMIC_ACQUIRE) != stub->seen)) {
    for (;;) {
      nrd_py_sleep(&h->to_server, &h->server_sleepers, stub->seen, 100);
      if (__atomic_load_n(&h->to_server, __ATOMIC_ACQUIRE) != stub->seen) {
        break;
      }
      if (!nrd_py_stub_alive(stub)) {
        return died(stub);
      }
      uint64_t ms = (nrd_py_now_ns() - t0) / 1000000u;
      if (timeout_ms != 0 && ms > timeout_ms) {
        kill(stub->pid, SIGKILL);
        reap(stub, 0);
        char *out = NULL;
        return asprintf(&out, "python: the stub did not answer within %llu ms", (unsigned long long)timeout_ms) < 0
                   ? NULL
                   : out;
      }
    }
  }
  nrd_py_waited(&stub->waiter, nrd_py_now_ns() - t0);
  stub->seen = __atomic_load_n(&h->to_server, __ATOMIC_ACQUIRE);
  uint64_t grown = __atomic_load_n(&h->size, __ATOMIC_ACQUIRE);
  if (grown > stub->size) {
    /* The stub grew the region for its outputs. */
    char *why = remap(stub, grown);
    if (why != NULL) {
      return why;
    }
  }
  *reply = nrd_py_stub_meta(stub);
  *reply_len = h->msg_len;
  if (*reply_len > NRD_PY_META_SIZE) {
    *reply_len = 0;
  }
  return NULL;
}

void nrd_py_stub_stop(nrd_py_stub *stub, uint64_t grace_ms) {
  if (stub->pid != 0) {
    for (uint64_t waited = 0; waited < grace_ms; waited += 5) {
      if (reap(stub, WNOHANG)) {
        break;
      }
      usleep(5000);
    }
    if (stub->pid != 0) {
      kill(stub->pid, SIGKILL);
      reap(stub, 0);
    }
  }
  if (stub->base != NULL) {
    munmap(stub->base, stub->size);
    stub->base = NULL;
  }
  for (size_t i = 0; i < stub->n_old; i++) {
    munmap(stub->old[i].base, stub->old[i].size);
  }
  free(stub->old);
  stub->old = NULL;
  stub->n_old = 0;
  if (stub->fd >= 0) {
    close(stub->fd);
    stub->fd = -1;
  }
}
