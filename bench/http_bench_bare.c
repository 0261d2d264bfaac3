/* The practical limit of the HTTP front end for one request shape: Nereid's
 * own HTTP/1.1 layer (src/server/http/http_server.c and http_conn.c: the same
 * loops, parsing, keep-alive and sendmsg) answering every POST with the
 * bytes a small binary identity_fp32 inference returns (the same
 * Inference-Header-Content-Length, JSON header and 64-byte tail), with no
 * core and no inference; anything else gets 200 "{}" as the health route
 * does. The client's work per request is then the same as against nereid,
 * so the two throughputs compare the servers alone. bench/http_bench.sh
 * runs it beside nereid.
 *
 *   nrd_bench_http_bare PORT [THREADS]   (stops on SIGINT/SIGTERM) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bare_main.h"
#include "http_internal.h"

static const char kHeader[] =
    "{\"model_name\":\"identity_fp32\",\"model_version\":\"1\",\"outputs\":[{\"name\":\"OUTPUT0\","
    "\"datatype\":\"FP32\",\"shape\":[1,16],\"parameters\":{\"binary_data_size\":64}}]}";
static float g_tail[16];
static char g_header_len[16];

/* Replaces http_routes.c: one canned answer. */
void nrd_srv_http_route(nrd_srv_http_loop *loop, nrd_srv_http_req *req) {
  (void)loop;
  int fail = 0;
  if (req->method == NRD_SRV_HTTP_POST) {
    fail |= nrd_srv_http_add_header(req, "Inference-Header-Content-Length", g_header_len);
    fail |= nrd_srv_http_add_header(req, "Content-Type", "application/octet-stream");
    fail |= nrd_srv_http_add_body_ref(req, kHeader, sizeof kHeader - 1, NULL, NULL);
    fail |= nrd_srv_http_add_body_ref(req, g_tail, sizeof g_tail, NULL, NULL);
  } else {
    fail |= nrd_srv_http_add_header(req, "Content-Type", "application/json");
    fail |= nrd_srv_http_add_body_ref(req, "{}", 2, NULL, NULL);
  }
  nrd_srv_http_send(req, fail ? 500 : 200);
}

/* Replace http_infer.c's: this server has no core, so no output blocks. */
TRITONSERVER_Error *nrd_srv_http_allocator_new(TRITONSERVER_ResponseAllocator **out) {
  *out = NULL;
  return NULL;
}

void nrd_srv_http_blocks_free(nrd_srv_http *h) { (void)h; }

int main(int argc, char **argv) {
  sigset_t stop;
  int bad = nrd_bench_bare_start(argc, argv, &stop);
  if (bad) return bad;
  for (int i = 0; i < 16; i++) g_tail[i] = (float)i;
  snprintf(g_header_len, sizeof g_header_len, "%zu", sizeof kHeader - 1);

  nrd_srv_http_options o = {.address = "127.0.0.1",
                            .port = atoi(argv[1]),
                            .threads = argc > 2 ? atoi(argv[2]) : 2,
                            .max_input_size = 64 * 1024 * 1024,
                            .metrics_only = 1}; /* no allocator, no shared memory */
  nrd_srv_http *h = NULL;
  TRITONSERVER_Error *err = nrd_srv_http_start(NULL, &o, &h);
  if (nrd_bench_bare_serve("nrd_bench_http_bare", err, err ? 0 : nrd_srv_http_port(h), &stop) != 0) return 1;
  nrd_srv_http_stop(h, 5);
  return 0;
}
