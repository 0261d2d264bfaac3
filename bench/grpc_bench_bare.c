/* The practical limit of the gRPC front end: Nereid's own gRPC transport
 * (src/server/grpc/grpc_server.c, grpc_call.c, grpc_stream.c: same loops,
 * framing and nghttp2 sessions)
 * answering every ModelInfer with the same canned response bytes an
 * identity_fp32 16 x FP32 inference returns, with no core and no inference.
 * bench/grpc_bench.py compares nereid against it.
 *
 *   nrd_bench_grpc_bare PORT [THREADS [--grpc-server-cert=PEM --grpc-server-key=PEM]]
 *
 * (stops on SIGINT/SIGTERM); with the certificate and key it serves TLS,
 * as nereid --grpc-use-ssl does (grpc_bench.py --tls). */
#include <protobuf-c/protobuf-c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bare_main.h"
#include "grpc_call.h"
#include "grpc_rpc.h"
#include "grpc_server.h"
#include "grpc_service.pb-c.h"

static uint8_t *g_canned;
static size_t g_canned_len;

static void bare_infer(nrd_srv_grpc_call *call, const uint8_t *msg, size_t len) {
  (void)msg;
  (void)len;
  uint8_t *b = malloc(g_canned_len);
  if (b) memcpy(b, g_canned, g_canned_len);
  nrd_srv_grpc_call_send_framed(call, b, g_canned_len);
  nrd_srv_grpc_call_finish(call, NRD_GRPC_OK, NULL);
}

static const nrd_srv_grpc_method bare_method = {
    .path = "/inference.GRPCInferenceService/ModelInfer",
    .on_message = bare_infer,
    .api = NRD_SRV_API_INFERENCE,
};

/* Replaces grpc_rpc.c's table: only ModelInfer exists here. */
const nrd_srv_grpc_method *nrd_srv_grpc_method_find(const char *path, size_t len) {
  if (len == strlen(bare_method.path) && memcmp(path, bare_method.path, len) == 0) return &bare_method;
  return NULL;
}

int main(int argc, char **argv) {
  sigset_t stop;
  int bad = nrd_bench_bare_start(argc, argv, &stop);
  if (bad) return bad;

  float data[16];
  for (int i = 0; i < 16; i++) data[i] = (float)i;
  int64_t shape[2] = {1, 16};
  Inference__ModelInferResponse__InferOutputTensor out = INFERENCE__MODEL_INFER_RESPONSE__INFER_OUTPUT_TENSOR__INIT;
  out.name = "OUTPUT0";
  out.datatype = "FP32";
  out.n_shape = 2;
  out.shape = shape;
  Inference__ModelInferResponse__InferOutputTensor *outp = &out;
  ProtobufCBinaryData raw = {sizeof data, (uint8_t *)data};
  Inference__ModelInferResponse r = INFERENCE__MODEL_INFER_RESPONSE__INIT;
  r.model_name = "identity_fp32";
  r.model_version = "1";
  r.n_outputs = 1;
  r.outputs = &outp;
  r.n_raw_output_contents = 1;
  r.raw_output_contents = &raw;
  g_canned = nrd_srv_grpc_frame(&r.base, &g_canned_len);
  if (g_canned == NULL) return 1;

  nrd_srv_tls_options tls = {0};
  for (int i = 3; i < argc; i++) {
    if (!strncmp(argv[i], "--grpc-server-cert=", 19))
      tls.cert = argv[i] + 19;
    else if (!strncmp(argv[i], "--grpc-server-key=", 18))
      tls.key = argv[i] + 18;
  }
  nrd_srv_grpc_options o = {.address = "127.0.0.1",
                            .port = atoi(argv[1]),
                            .threads = argc > 2 ? (unsigned)atoi(argv[2]) : 2,
                            .max_message_size = 0x7fffffff,
                            .tls = tls.cert ? &tls : NULL};
  nrd_srv_grpc *g = NULL;
  TRITONSERVER_Error *err = nrd_srv_grpc_start(NULL, &o, &g);
  if (nrd_bench_bare_serve("nrd_bench_grpc_bare", err, err ? 0 : nrd_srv_grpc_port(g), &stop) != 0) {
    free(g_canned);
    return 1;
  }
  nrd_srv_grpc_stop(g, 5);
  free(g_canned);
  return 0;
}
