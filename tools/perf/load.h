/* Load generation: keeps N requests outstanding (each slot re-sends as
 * soon as its request completes) or sends at a constant rate (open loop,
 * a pacer thread), and records every completion's latency.
 *
 * Threads: every function here is for the main thread, except that the
 * completion callback the driver receives (internal) runs on transport
 * threads. The recorded samples are handed over with nrd_perf_load_take. */
#ifndef NRD_PERF_LOAD_H
#define NRD_PERF_LOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "driver.h"

typedef struct nrd_perf_load nrd_perf_load;

/* What completed between two nrd_perf_load_take calls. `lat_ns` is malloc'd
 * and owned by the receiver (free it). */
typedef struct nrd_perf_samples {
  uint64_t *lat_ns;
  size_t n;
  uint64_t errors;
  uint64_t delayed; /* rate mode: sends that found no free slot on time */
  uint64_t t_start, t_end; /* CLOCK_MONOTONIC ns of the interval */
} nrd_perf_samples;

/* Prepares `nslots` requests of `t` on driver `d` (both must outlive the
 * load). NULL with a message in err on failure. */
nrd_perf_load *nrd_perf_load_new(nrd_perf_driver *d, const nrd_perf_tensors *t, int nslots, char *err, size_t errlen);

/* Starts `n` (<= nslots) closed-loop clients, or an open loop at `rps`
 * requests per second. Only when stopped. False with a message in err if
 * a first send failed (the load is then stopped). */
bool nrd_perf_load_start_concurrency(nrd_perf_load *l, int n, char *err, size_t errlen);
bool nrd_perf_load_start_rate(nrd_perf_load *l, double rps, char *err, size_t errlen);

/* Stops sending and waits up to timeout_ms for requests in flight. False
 * when some are still in flight (then the load must not be freed). */
bool nrd_perf_load_stop(nrd_perf_load *l, int timeout_ms);

/* Takes the samples recorded since the previous take (or start). */
void nrd_perf_load_take(nrd_perf_load *l, nrd_perf_samples *out);

/* Completions recorded since the last take. Main thread. */
size_t nrd_perf_load_count(nrd_perf_load *l);

/* Requests in flight now. Any thread. */
int nrd_perf_load_in_flight(nrd_perf_load *l);

/* The first error message seen (a copy into buf); "" if none. */
void nrd_perf_load_first_error(nrd_perf_load *l, char *buf, size_t len);

/* Frees the load; it must be stopped. */
void nrd_perf_load_free(nrd_perf_load *l);

/* CLOCK_MONOTONIC in ns. Any thread. */
uint64_t nrd_perf_now_ns(void);

#endif
