/* The HTTP endpoints of the nereid binary, from its command line. */
#include "http_endpoints.h"

#include <stdio.h>
#include <string.h>

static int start_one(TRITONSERVER_Server *server, const char *what, const char *address, int port,
                     bool reuse_port, int threads, size_t max_input, int metrics_only, int timeout_secs,
                     nrd_srv_shm *shm, nrd_srv_log_settings *log, nrd_srv_tracer *tracer,
                     const nrd_srv_restrictions *restricted, const char *header_forward, nrd_srv_http **out) {
  nrd_srv_http_options o = {.address = address, .port = port, .reuse_port = reuse_port, .threads = threads,
                            .max_input_size = max_input, .metrics_only = metrics_only,
                            .client_timeout_secs = timeout_secs, .shm = shm, .log = log, .tracer = tracer,
                            .restricted = restricted, .header_forward = header_forward};
  TRITONSERVER_Error *err = nrd_srv_http_start(server, &o, out);
  if (err) {
    fprintf(stderr, "nereid: error: starting the %s endpoint: %s\n", what, TRITONSERVER_ErrorMessage(err));
    TRITONSERVER_ErrorDelete(err);
    return -1;
  }
  printf("nereid: %s listening on %s:%d\n", what, address, nrd_srv_http_port(*out));
  return 0;
}

int nrd_srv_http_endpoints_start(TRITONSERVER_Server *server, const nrd_srv_cli *cli,
                                 nrd_srv_shm *shm, nrd_srv_log_settings *log, nrd_srv_tracer *tracer,
                                 nrd_srv_http_endpoints *ep) {
  memset(ep, 0, sizeof *ep);
  if (cli->allow_http &&
      start_one(server, "HTTP/REST", cli->http_address, cli->http_port, cli->reuse_http_port, cli->http_thread_count,
                (size_t)cli->http_max_input_size, 0, cli->http_client_timeout_secs, shm, log, tracer,
                &cli->http_restricted, cli->http_header_forward, &ep->api) != 0)
    return -1;
  if (cli->allow_metrics &&
      start_one(server, "metrics", cli->metrics_address ? cli->metrics_address : cli->http_address,
                cli->metrics_port, false, 1, 64 * 1024, 1, cli->http_client_timeout_secs, NULL, NULL, NULL, NULL,
                NULL, &ep->metrics) != 0) {
    nrd_srv_http_endpoints_stop(ep, 0);
    return -1;
  }
  return 0;
}

void nrd_srv_http_endpoints_drain(nrd_srv_http_endpoints *ep) {
  nrd_srv_http_drain(ep->api);
  nrd_srv_http_drain(ep->metrics);
}

bool nrd_srv_http_endpoints_stop(nrd_srv_http_endpoints *ep, unsigned wait_secs) {
  bool clean = nrd_srv_http_stop(ep->api, wait_secs);
  clean &= nrd_srv_http_stop(ep->metrics, wait_secs);
  memset(ep, 0, sizeof *ep);
  return clean;
}
