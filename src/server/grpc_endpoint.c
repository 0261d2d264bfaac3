/* The gRPC endpoint's lifecycle glue between the command line and the
 * transport (grpc_server.c) and inference module (grpc_infer.c). */
#include "grpc_endpoint.h"

#include <stdio.h>

#include "grpc_infer.h"

int nrd_srv_grpc_endpoint_start(TRITONSERVER_Server *server, const nrd_srv_cli *cli, nrd_srv_shm *shm,
                                nrd_srv_log_settings *log, nrd_srv_tracer *tracer, nrd_srv_grpc **out) {
  *out = NULL;
  if (!cli->allow_grpc) return 0;
  TRITONSERVER_Error *err = nrd_srv_grpc_infer_init();
  if (err == NULL) {
    nrd_srv_tls_options tls = {
        .cert = cli->grpc_server_cert,
        .key = cli->grpc_server_key,
        .root = cli->grpc_root_cert,
        .mutual = cli->grpc_use_ssl_mutual,
    };
    nrd_srv_grpc_options o = {
        .address = cli->grpc_address,
        .port = cli->grpc_port,
        .reuse_port = cli->reuse_grpc_port,
        .threads = (unsigned)cli->grpc_thread_count,
        .max_message_size = (uint32_t)cli->grpc_max_message_size,
        .max_decompressed_size = (uint32_t)cli->grpc_max_decompressed_size,
        .keepalive_time_ms = (unsigned)cli->grpc_keepalive_time_ms,
        .keepalive_timeout_ms = (unsigned)cli->grpc_keepalive_timeout_ms,
        .keepalive_permit_without_calls = cli->grpc_keepalive_permit_without_calls,
        .max_pings_without_data = (unsigned)cli->grpc_http2_max_pings_without_data,
        .min_recv_ping_interval_ms = (unsigned)cli->grpc_http2_min_recv_ping_interval_ms,
        .max_ping_strikes = (unsigned)cli->grpc_http2_max_ping_strikes,
        .max_connection_age_ms = (unsigned)cli->grpc_max_connection_age_ms,
        .max_connection_age_grace_ms = (unsigned)cli->grpc_max_connection_age_grace_ms,
        .response_compression = cli->grpc_infer_response_compression,
        .handshake_timeout_secs = (unsigned)cli->grpc_handshake_timeout_secs,
        .shm = shm,
        .log = log,
        .tracer = tracer,
        .restricted = &cli->grpc_restricted,
        .header_forward = cli->grpc_header_forward,
        .tls = cli->grpc_use_ssl ? &tls : NULL,
    };
    nrd_srv_grpc_delays_from_env(&o.delays); /* Triton's test hooks */
    err = nrd_srv_grpc_start(server, &o, out);
  }
  if (err) {
    fprintf(stderr, "nereid: error: starting the gRPC endpoint: %s - %s\n", TRITONSERVER_ErrorCodeString(err),
            TRITONSERVER_ErrorMessage(err));
    TRITONSERVER_ErrorDelete(err);
    nrd_srv_grpc_infer_fini();
    return -1;
  }
  printf("nereid: gRPC endpoint listening on %s:%d (%d threads%s)\n", cli->grpc_address, nrd_srv_grpc_port(*out),
         cli->grpc_thread_count,
         !cli->grpc_use_ssl         ? ""
         : cli->grpc_use_ssl_mutual ? ", TLS with client certificates"
                                    : ", TLS");
  return 0;
}

void nrd_srv_grpc_endpoint_drain(nrd_srv_grpc *g) { nrd_srv_grpc_drain(g); }

bool nrd_srv_grpc_endpoint_stop(nrd_srv_grpc *g, unsigned wait_secs) {
  if (g == NULL) return true;
  if (!nrd_srv_grpc_stop(g, wait_secs)) return false;
  nrd_srv_grpc_infer_fini();
  return true;
}
