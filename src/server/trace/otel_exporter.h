/* The OpenTelemetry span exporter of --trace-config mode=opentelemetry:
 * OTLP over HTTP with JSON bodies, behind a batch span processor as the
 * OpenTelemetry SDK has one (a bounded queue, exports every
 * schedule delay or when a batch is full, from a thread of its own).
 * See docs/tracing.md, "OpenTelemetry". */
#ifndef NRD_SRV_OTEL_EXPORTER_H
#define NRD_SRV_OTEL_EXPORTER_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* Where and how to export. Values < 0 take the OTEL_BSP_* environment
 * variable, else the SDK's default. */
typedef struct nrd_srv_otel_config {
  const char *url; /* [http://]host[:port][/path]; NULL: http://localhost:4318/v1/traces */
  const char *const *resource; /* "key=value" resource attributes (borrowed), after OTEL_RESOURCE_ATTRIBUTES */
  size_t n_resource;
  int64_t max_queue_size; /* spans held at most; more are dropped (default 2048) */
  int64_t schedule_delay_ms; /* between exports (default 5000) */
  int64_t max_export_batch_size; /* spans per export, <= max_queue_size (default 512) */
} nrd_srv_otel_config;

typedef struct nrd_srv_otel nrd_srv_otel;

/* Checks the configuration and starts the export thread. On error returns
 * NULL with a one-line message naming the setting in err. The caller owns
 * the result (nrd_srv_otel_free). */
nrd_srv_otel *nrd_srv_otel_new(const nrd_srv_otel_config *cfg, char *err, size_t errlen);

/* Exports what is queued (each batch gets one try, with a short timeout),
 * stops the thread and frees. NULL is a no-op. Call once nothing adds
 * spans any more. */
void nrd_srv_otel_free(nrd_srv_otel *o);

/* Queues one span, an OTLP JSON span object (taken: the exporter owns the
 * reference). Dropped, and counted, when the queue is full. Any thread. */
void nrd_srv_otel_add(nrd_srv_otel *o, json_t *span);

/* Spans exported, dropped (queue full) and lost (the collector failed or
 * could not be reached) so far. Any thread. */
void nrd_srv_otel_counts(nrd_srv_otel *o, uint64_t *exported, uint64_t *dropped, uint64_t *lost);

/* n random bytes as 2n lowercase hex digits and a NUL in out: new trace
 * (n = 16) and span (n = 8) ids, never all zero. Any thread. */
void nrd_srv_otel_random_id(char *out, size_t n);

#endif
