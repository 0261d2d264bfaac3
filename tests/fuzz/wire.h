/* Fuzzing nereid over its sockets: the whole server (front ends, core,
 * shipped backends) runs in this process, started from its own main(), and
 * each input is sent over a fresh loopback connection.
 *
 * Built two ways (tests/fuzz/CMakeLists.txt): with clang's libFuzzer when
 * NRD_FUZZ is on, and otherwise with replay_main.c as a plain program that
 * sends every file of a corpus once and then shuts the server down, so
 * LeakSanitizer sees a clean exit. Single-threaded use only: one input at
 * a time. */
#ifndef NRD_FUZZ_WIRE_H
#define NRD_FUZZ_WIRE_H

#include <stddef.h>
#include <stdint.h>

/* The ports the in-process server listens on (0 until started). */
extern int nrd_fuzz_http_port;
extern int nrd_fuzz_grpc_port;

/* Starts nereid on the example repository (NRD_FUZZ_MODELS, backends from
 * NRD_FUZZ_BACKENDS: paths CMake compiles in) on loopback ports the kernel
 * picks (read from its start-up lines) and waits until both front ends
 * accept. Exits the process with a message if the server does not come up. Blocks SIGINT and SIGTERM in the caller, as
 * nereid's main expects of every thread. */
void nrd_fuzz_server_start(void);

/* Sends SIGINT to the server, waits for its orderly shutdown and returns
 * its exit status. */
int nrd_fuzz_server_stop(void);

/* A connected, blocking TCP socket to 127.0.0.1:port (caller closes), or
 * -1. */
int nrd_fuzz_connect(int port);

/* Writes all of data, in pieces of at most `piece` bytes. Returns 0, or -1
 * when the server closed the connection first (not an error for a fuzzer). */
int nrd_fuzz_send(int fd, const uint8_t *data, size_t size, size_t piece);

/* Waits at most `ms` for readable data and reads it into buf. Returns the
 * byte count, 0 at end of stream, -1 on timeout, -2 when the connection
 * failed (reset by the server, say). */
long nrd_fuzz_recv(int fd, uint8_t *buf, size_t cap, int ms);

/* The fuzz target each harness defines (libFuzzer's entry point). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* libFuzzer's start-up hook, defined in wire.c for every wire fuzzer:
 * starts the server. */
int LLVMFuzzerInitialize(int *argc, char ***argv);

#endif
