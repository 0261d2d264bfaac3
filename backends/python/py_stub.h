/*
 * One stub process (triton_python_backend_stub) and the shared memory the
 * backend exchanges messages with it through (py_ipc.h).
 */
#ifndef NRD_PY_STUB_H
#define NRD_PY_STUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "py_wait.h"

typedef struct nrd_py_stub {
  int fd; /* the memfd */
  uint8_t *base; /* its mapping */
  uint64_t size;
  /* Mappings of the region before it grew: kept until stop. */
  struct nrd_py_old_map {
    void *base;
    uint64_t size;
  } * old;
  size_t n_old;
  pid_t pid; /* 0 once reaped; written with atomic stores (nrd_py_stub_running) */
  uint32_t seen; /* last value of to_server read */
  nrd_py_waiter waiter; /* how long replies took: the spin before a sleep */
  bool spin; /* spin for replies before sleeping (set per batch) */
  /* When nrd_py_stub_alive_lately last asked the kernel; 0 (set by the
   * readiness probe's thread too, atomically) makes it ask. */
  uint64_t alive_checked_ns;
  int exit_status; /* valid once pid is 0 */
} nrd_py_stub;

/*
 * Creates the shared memory ('shm_size' bytes, a memfd named 'shm_name')
 * and starts 'stub_path' with it as descriptor 3, 'python_path' (a
 * ':'-list for sys.path) as argv[1]. With 'env_dir' (an execution
 * environment, py_env.h; NULL: none) the stub starts through bash after
 * sourcing the environment's bin/activate, with its lib/ first in
 * LD_LIBRARY_PATH, and gets 'env_dir' as argv[2], as Triton's stub does.
 * On failure returns a malloc'ed message the caller frees, and nothing is
 * left open. Any thread; the stub then belongs to the caller.
 */
char *nrd_py_stub_start(nrd_py_stub *stub, const char *stub_path, const char *python_path, const char *env_dir,
                        const char *shm_name, uint64_t shm_size, uint64_t shm_growth);

/*
 * Grows the region to hold at least 'need' bytes (by multiples of its
 * growth size) and maps it anew; 'stub->base' may change, the old mapping
 * stays valid. NULL on success (nothing to do included), else a malloc'ed
 * message. Only while the stub waits (before a message, or while it waits
 * for a BLS answer). Owner's thread, or the BLS callback the owner waits
 * for.
 */
char *nrd_py_stub_grow(nrd_py_stub *stub, uint64_t need);

/*
 * Sends the 'len' bytes of JSON already written at the message area
 * (nrd_py_stub_meta) and waits for the reply; on success returns NULL and
 * '*reply' points at the reply's JSON (in the shared memory, '*reply_len'
 * bytes, valid until the next exchange; a region the stub grew is mapped
 * anew first). When the process died or
 * 'timeout_ms' (0: none) passed returns a malloc'ed message the caller
 * frees; the process is then gone (killed and reaped). One exchange at a
 * time per stub (the instance thread).
 */
char *nrd_py_stub_exchange(nrd_py_stub *stub, uint32_t len, uint64_t timeout_ms, const char **reply,
                           uint32_t *reply_len);

/* The message area (NRD_PY_META_SIZE bytes). */
char *nrd_py_stub_meta(nrd_py_stub *stub);

/*
 * Whether the process is running, without reaping it: a readiness probe.
 * Any thread, also while the owner exchanges messages with the stub.
 */
bool nrd_py_stub_running(nrd_py_stub *stub);

/* True while the process runs (not yet seen dead). Owner's thread. */
bool nrd_py_stub_alive(nrd_py_stub *stub);

/* nrd_py_stub_alive, asking the kernel at most every 10 ms (true in
 * between unless the process was already seen dead). Owner's thread. */
bool nrd_py_stub_alive_lately(nrd_py_stub *stub);

/*
 * Stops the process: waits up to 'grace_ms' for it to exit by itself (after
 * a finalize message), then kills it; unmaps and closes the memory. Safe on
 * a stub that never started or already died. Owner's thread.
 */
void nrd_py_stub_stop(nrd_py_stub *stub, uint64_t grace_ms);

#endif
