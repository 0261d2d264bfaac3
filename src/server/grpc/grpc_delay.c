/* Reading Triton's gRPC test delay hooks from the environment (see
 * grpc_delay.h). */
#include "grpc_delay.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "triton/core/tritonserver.h"

static void delay_log(TRITONSERVER_LogLevel level, const char *msg) {
  TRITONSERVER_Error *e = TRITONSERVER_LogMessage(level, __FILE__, __LINE__, msg);
  if (e) TRITONSERVER_ErrorDelete(e);
}

/* The variable `name` as microseconds (its value counts `unit_us` each, at
 * most `max`), or 0 when unset, empty, zero or not a whole number in range
 * (warned). */
static uint64_t delay_read(const char *name, uint64_t unit_us, unsigned long max, const char *unit) {
  const char *v = getenv(name);
  if (v == NULL || *v == '\0') return 0;
  char *end;
  errno = 0;
  unsigned long n = strtoul(v, &end, 10);
  char msg[256];
  if (errno || *end != '\0' || *v == '-' || *v == '+' || n > max) {
    snprintf(msg, sizeof msg, "%s='%.32s' is not a whole number of %s from 0 to %lu: not delaying", name, v, unit, max);
    delay_log(TRITONSERVER_LOG_WARN, msg);
    return 0;
  }
  if (n) {
    snprintf(msg, sizeof msg, "%s=%lu: test hook on, delaying by %lu %s", name, n, n, unit);
    delay_log(TRITONSERVER_LOG_INFO, msg);
  }
  return (uint64_t)n * unit_us;
}

void nrd_srv_grpc_delays_from_env(nrd_srv_grpc_delays *d) {
  memset(d, 0, sizeof *d);
  d->common_us = delay_read("TRITONSERVER_SERVER_DELAY_GRPC_RESPONSE_SEC", 1000000u, 3600, "s");
  d->process_us = delay_read("TRITONSERVER_DELAY_GRPC_PROCESS", 1000u, 3600000, "ms");
  d->response_us = delay_read("TRITONSERVER_DELAY_GRPC_RESPONSE", 1000u, 3600000, "ms");
  d->notification_us = delay_read("TRITONSERVER_DELAY_GRPC_NOTIFICATION", 1000u, 3600000, "ms");
  d->enqueue_us = delay_read("TRITONSERVER_DELAY_GRPC_ENQUEUE", 1000u, 3600000, "ms");
}
