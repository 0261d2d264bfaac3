/* nrd_perf command line: the options of one run and their parser.
 *
 * Threads: everything here runs on the main thread, before any load. */
#ifndef NRD_PERF_OPTIONS_H
#define NRD_PERF_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define NRD_PERF_MAX_SHAPES 32
#define NRD_PERF_MAX_DIMS 16

typedef enum nrd_perf_service {
  NRD_PERF_SERVICE_INPROCESS,
  NRD_PERF_SERVICE_HTTP,
  NRD_PERF_SERVICE_GRPC
} nrd_perf_service;
typedef enum nrd_perf_data { NRD_PERF_DATA_ZERO, NRD_PERF_DATA_RANDOM } nrd_perf_data;

/* A --shape NAME:d1,d2 override (dims without the batch dimension). */
typedef struct nrd_perf_shape {
  const char *name; /* points into argv */
  size_t name_len;
  int64_t dims[NRD_PERF_MAX_DIMS];
  int ndims;
} nrd_perf_shape;

/* A start:end:step range of concurrencies or request rates. */
typedef struct nrd_perf_range {
  double start, end, step;
} nrd_perf_range;

typedef struct nrd_perf_opts {
  const char *model; /* -m, required */
  int64_t version; /* -x, -1 = the version policy chooses */
  nrd_perf_service service; /* --service-kind */
  const char *url; /* -u host:port */
  const char *repository; /* --model-repository (inprocess) */
  const char *backend_dir; /* --backend-directory (inprocess) */
  bool rate_mode; /* --request-rate-range given */
  nrd_perf_range concurrency; /* --concurrency-range, default 1:1:1 */
  nrd_perf_range rate; /* --request-rate-range */
  int window_ms; /* --measurement-interval, default 5000 */
  double stability_pct; /* --stability-percentage, default 10 */
  int max_trials; /* --max-trials, default 10 */
  nrd_perf_shape shapes[NRD_PERF_MAX_SHAPES];
  int nshapes;
  nrd_perf_data data; /* --input-data, default random */
  int64_t batch; /* -b, default 1 */
  const char *csv_path; /* -f */
  const char *json_path; /* --json */
  int percentile; /* --percentile, 0 = p50 (the default) */
  bool http_binary; /* --http-binary */
  bool streaming; /* --streaming: grpc ModelStreamInfer */
  int max_outstanding; /* --max-outstanding: request slots in rate mode */
  unsigned seed; /* --seed for random data */
  bool verbose; /* -v: server log in inprocess mode */
  /* gRPC over TLS (grpc only; the files need ssl_grpc) */
  bool ssl_grpc; /* --ssl-grpc-use-ssl[=true|false] */
  const char *ssl_root_file; /* --ssl-grpc-root-certifications-file: CA PEM; NULL = default paths */
  const char *ssl_key_file; /* --ssl-grpc-private-key-file: client key PEM (with the chain) */
  const char *ssl_chain_file; /* --ssl-grpc-certificate-chain-file: client certificate PEM (with the key) */
} nrd_perf_opts;

typedef enum nrd_perf_parse_result {
  NRD_PERF_PARSE_OK,
  NRD_PERF_PARSE_HELP,
  NRD_PERF_PARSE_ERROR
} nrd_perf_parse_result;

/* Fills `o` from argv. On NRD_PERF_PARSE_ERROR one line naming the offending
 * flag is written to `err`; the caller prints it with the usage. Strings in
 * `o` point into argv (owned by the caller, must outlive `o`). */
nrd_perf_parse_result nrd_perf_opts_parse(int argc, char **argv, nrd_perf_opts *o, FILE *err);

/* Writes the usage text to `f`. */
void nrd_perf_opts_usage(FILE *f, const char *argv0);

/* The service name as given on the command line ("inprocess", ...). Static
 * storage. */
const char *nrd_perf_service_name(nrd_perf_service s);

#endif
