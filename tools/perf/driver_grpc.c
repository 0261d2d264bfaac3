/* The gRPC transport: KServe v2 GRPCInferenceService over HTTP/2 (nghttp2;
 * cleartext with prior knowledge, or TLS with --ssl-grpc-use-ssl: one TLS
 * context built from the options at creation and used by every
 * connection), one connection per request slot, one epoll
 * thread reading every response. The ModelInferRequest (inputs in
 * raw_input_contents, as tritonclient sends them) is framed once and
 * shared by every slot. Unary mode: one ModelInfer call per request.
 * --streaming: one ModelStreamInfer stream per slot, kept open, one request
 * in flight on it, sent with triton_enable_empty_final_response; the
 * response whose triton_final_response is true (or that carries no such
 * parameter) ends the request, so decoupled models work too.
 *
 * Metadata, config and statistics are one-shot unary calls on fresh
 * connections, translated to the JSON the rest of nrd_perf reads (config:
 * only max_batch_size).
 *
 * Threads: `send` runs on the pacer thread or on the loop thread (a
 * completion re-sending); the loop thread reads responses and calls the
 * completion callback without holding any lock. A slot's mutex guards its
 * connection (nghttp2 session and socket). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "driver.h"
#include "grpc_service.pb-c.h"
#include "grpc_wire.h"
#include "http_wire.h"

#define SVC "/inference.GRPCInferenceService/"

typedef struct grpc_slot {
  pthread_mutex_t mu; /* guards conn and awaiting */
  nrd_perf_grpc_conn conn;
  bool awaiting; /* a request was sent, its final response not yet read */
} grpc_slot;

typedef struct grpc_driver {
  nrd_perf_driver base; /* first member */
  const nrd_perf_opts *o;
  char host[256], port[16];
  char version[32]; /* "" = the server's version policy */
  nrd_perf_grpc_tls *tls; /* NULL: cleartext */
  uint8_t *request; /* the framed ModelInferRequest shared by every slot */
  size_t request_len;
  grpc_slot *slots;
  int nslots;
  nrd_perf_done_fn done;
  void *ctx;
  int epfd, stopfd;
  pthread_t loop;
  bool loop_running;
} grpc_driver;

/* ---- one-shot RPCs ---- */

static json_t *g_metadata(nrd_perf_driver *base, char *err, size_t errlen) {
  grpc_driver *d = (grpc_driver *)base;
  Inference__ModelMetadataRequest req = INFERENCE__MODEL_METADATA_REQUEST__INIT;
  req.name = (char *)d->o->model;
  req.version = d->version;
  uint8_t *buf;
  size_t len;
  if (!nrd_perf_grpc_unary(d->tls, d->host, d->port, SVC "ModelMetadata", &req, &buf, &len, err, errlen)) return NULL;
  Inference__ModelMetadataResponse *r = inference__model_metadata_response__unpack(NULL, len, buf);
  free(buf);
  if (!r) {
    snprintf(err, errlen, "ModelMetadata: undecodable response");
    return NULL;
  }
  json_t *j = json_object(), *vers = json_array();
  json_object_set_new(j, "name", json_string(r->name));
  for (size_t i = 0; i < r->n_versions; i++) json_array_append_new(vers, json_string(r->versions[i]));
  json_object_set_new(j, "versions", vers);
  json_object_set_new(j, "platform", json_string(r->platform));
  for (int io = 0; io < 2; io++) {
    size_t n = io ? r->n_outputs : r->n_inputs;
    Inference__ModelMetadataResponse__TensorMetadata **ts = io ? r->outputs : r->inputs;
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
      json_t *e = json_object(), *shape = json_array();
      json_object_set_new(e, "name", json_string(ts[i]->name));
      json_object_set_new(e, "datatype", json_string(ts[i]->datatype));
      for (size_t k = 0; k < ts[i]->n_shape; k++) json_array_append_new(shape, json_integer(ts[i]->shape[k]));
      json_object_set_new(e, "shape", shape);
      json_array_append_new(arr, e);
    }
    json_object_set_new(j, io ? "outputs" : "inputs", arr);
  }
  inference__model_metadata_response__free_unpacked(r, NULL);
  return j;
}

static json_t *g_config(nrd_perf_driver *base, char *err, size_t errlen) {
  grpc_driver *d = (grpc_driver *)base;
  Inference__ModelConfigRequest req = INFERENCE__MODEL_CONFIG_REQUEST__INIT;
  req.name = (char *)d->o->model;
  req.version = d->version;
  uint8_t *buf;
  size_t len;
  if (!nrd_perf_grpc_unary(d->tls, d->host, d->port, SVC "ModelConfig", &req, &buf, &len, err, errlen)) return NULL;
  Inference__ModelConfigResponse *r = inference__model_config_response__unpack(NULL, len, buf);
  free(buf);
  if (!r) {
    snprintf(err, errlen, "ModelConfig: undecodable response");
    return NULL;
  }
  json_t *j = json_object();
  json_object_set_new(j, "max_batch_size", json_integer(r->config ? r->config->max_batch_size : 0));
  inference__model_config_response__free_unpacked(r, NULL);
  return j;
}

static void duration(json_t *parent, const char *key, const Inference__StatisticDuration *s) {
  json_t *e = json_object();
  json_object_set_new(e, "count", json_integer(s ? (json_int_t)s->count : 0));
  json_object_set_new(e, "ns", json_integer(s ? (json_int_t)s->ns : 0));
  json_object_set_new(parent, key, e);
}

static json_t *g_statistics(nrd_perf_driver *base, char *err, size_t errlen) {
  grpc_driver *d = (grpc_driver *)base;
  Inference__ModelStatisticsRequest req = INFERENCE__MODEL_STATISTICS_REQUEST__INIT;
  req.name = (char *)d->o->model;
  req.version = d->version;
  uint8_t *buf;
  size_t len;
  if (!nrd_perf_grpc_unary(d->tls, d->host, d->port, SVC "ModelStatistics", &req, &buf, &len, err, errlen)) return NULL;
  Inference__ModelStatisticsResponse *r = inference__model_statistics_response__unpack(NULL, len, buf);
  free(buf);
  if (!r) {
    snprintf(err, errlen, "ModelStatistics: undecodable response");
    return NULL;
  }
  json_t *j = json_object(), *arr = json_array();
  for (size_t i = 0; i < r->n_model_stats; i++) {
    const Inference__ModelStatistics *m = r->model_stats[i];
    json_t *e = json_object();
    json_object_set_new(e, "name", json_string(m->name));
    json_object_set_new(e, "version", json_string(m->version));
    json_object_set_new(e, "inference_count", json_integer((json_int_t)m->inference_count));
    json_object_set_new(e, "execution_count", json_integer((json_int_t)m->execution_count));
    if (m->inference_stats) {
      const Inference__InferStatistics *s = m->inference_stats;
      json_t *inf = json_object();
      duration(inf, "success", s->success);
      duration(inf, "fail", s->fail);
      duration(inf, "queue", s->queue);
      duration(inf, "compute_input", s->compute_input);
      duration(inf, "compute_infer", s->compute_infer);
      duration(inf, "compute_output", s->compute_output);
      json_object_set_new(e, "inference_stats", inf);
    }
    json_array_append_new(arr, e);
  }
  json_object_set_new(j, "model_stats", arr);
  inference__model_statistics_response__free_unpacked(r, NULL);
  return j;
}

/* ---- the request every slot sends ---- */

static bool build_request(grpc_driver *d, const nrd_perf_tensors *t, char *err, size_t errlen) {
  bool ok = false;
  Inference__ModelInferRequest req = INFERENCE__MODEL_INFER_REQUEST__INIT;
  size_t nin = (size_t)t->ninputs, nout = (size_t)t->noutputs;
  Inference__ModelInferRequest__InferInputTensor *ins = calloc(nin ? nin : 1, sizeof *ins);
  Inference__ModelInferRequest__InferInputTensor **inp = calloc(nin ? nin : 1, sizeof *inp);
  Inference__ModelInferRequest__InferRequestedOutputTensor *outs = calloc(nout ? nout : 1, sizeof *outs);
  Inference__ModelInferRequest__InferRequestedOutputTensor **outp = calloc(nout ? nout : 1, sizeof *outp);
  ProtobufCBinaryData *raw = calloc(nin ? nin : 1, sizeof *raw);
  if (!ins || !inp || !outs || !outp || !raw) goto out;
  req.model_name = (char *)d->o->model;
  req.model_version = d->version;
  for (size_t i = 0; i < nin; i++) {
    const nrd_perf_tensor *in = &t->inputs[i];
    inference__model_infer_request__infer_input_tensor__init(&ins[i]);
    ins[i].name = in->name;
    ins[i].datatype = (char *)in->datatype;
    ins[i].n_shape = (size_t)in->ndims;
    ins[i].shape = (int64_t *)in->shape;
    inp[i] = &ins[i];
    raw[i].data = in->data;
    raw[i].len = in->bytes;
  }
  for (size_t i = 0; i < nout; i++) {
    inference__model_infer_request__infer_requested_output_tensor__init(&outs[i]);
    outs[i].name = t->outputs[i];
    outp[i] = &outs[i];
  }
  req.n_inputs = nin, req.inputs = inp;
  req.n_outputs = nout, req.outputs = outp;
  req.n_raw_input_contents = nin, req.raw_input_contents = raw;
  /* Streaming: ask for the flags-only final response of a decoupled model
   * too, as perf_analyzer does, so that every request has an end. */
  Inference__InferParameter final_value = INFERENCE__INFER_PARAMETER__INIT;
  final_value.parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM;
  final_value.bool_param = 1;
  Inference__ModelInferRequest__ParametersEntry final_entry = INFERENCE__MODEL_INFER_REQUEST__PARAMETERS_ENTRY__INIT;
  final_entry.key = "triton_enable_empty_final_response";
  final_entry.value = &final_value;
  Inference__ModelInferRequest__ParametersEntry *params[1] = {&final_entry};
  if (d->o->streaming) req.n_parameters = 1, req.parameters = params;
  d->request = nrd_perf_grpc_frame(&req, &d->request_len);
  ok = d->request != NULL;
out:
  if (!ok) snprintf(err, errlen, "out of memory");
  free(ins);
  free(inp);
  free(outs);
  free(outp);
  free(raw);
  return ok;
}

/* ---- the loop thread ---- */

/* Closes slot's connection. Caller holds s->mu. */
static void drop_connection(grpc_driver *d, grpc_slot *s) {
  if (s->conn.fd < 0) return;
  epoll_ctl(d->epfd, EPOLL_CTL_DEL, s->conn.fd, NULL);
  nrd_perf_grpc_conn_close(&s->conn);
}

/* True when a stream response ends its request; sets *error (into msg)
 * when it carries an error. */
static bool stream_response_final(const uint8_t *m, size_t len, const char **error, char *msg, size_t msglen) {
  Inference__ModelStreamInferResponse *r = inference__model_stream_infer_response__unpack(NULL, len, m);
  if (!r) {
    *error = "undecodable ModelStreamInferResponse";
    return true;
  }
  bool final = true;
  if (r->error_message && r->error_message[0]) {
    snprintf(msg, msglen, "%s", r->error_message);
    *error = msg;
  } else if (r->infer_response) {
    for (size_t i = 0; i < r->infer_response->n_parameters; i++) {
      const Inference__ModelInferResponse__ParametersEntry *p = r->infer_response->parameters[i];
      if (p->key && !strcmp(p->key, "triton_final_response") && p->value &&
          p->value->parameter_choice_case == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM)
        final = p->value->bool_param;
    }
  }
  inference__model_stream_infer_response__free_unpacked(r, NULL);
  return final;
}

/* Reads what slot i has; completes its request when its final response
 * (or an error) arrived. */
static void on_readable(grpc_driver *d, int i) {
  grpc_slot *s = &d->slots[i];
  nrd_perf_grpc_conn *c = &s->conn;
  const char *error = NULL;
  char msg[512];
  bool finish = false, drop = false;
  pthread_mutex_lock(&s->mu);
  if (c->fd < 0) goto unlock;
  int rd = nrd_perf_grpc_conn_read(c);
  if (d->o->streaming) {
    const uint8_t *m;
    size_t len;
    while (!finish && nrd_perf_grpc_conn_next_message(c, &m, &len))
      finish = s->awaiting && stream_response_final(m, len, &error, msg, sizeof msg);
    if (!finish && c->closed) {
      if (nrd_perf_grpc_conn_call_ok(c, msg, sizeof msg)) snprintf(msg, sizeof msg, "gRPC status 0");
      snprintf(msg + strlen(msg), sizeof msg - strlen(msg), " (the stream ended before the final response)");
      error = msg, finish = s->awaiting;
      nrd_perf_grpc_conn_reset_call(c);
    }
  } else if (c->closed) {
    if (!nrd_perf_grpc_conn_call_ok(c, msg, sizeof msg)) error = msg;
    finish = s->awaiting;
    nrd_perf_grpc_conn_reset_call(c);
  }
  if (rd < 0 || c->failed) {
    drop = true;
    if (!finish && s->awaiting) {
      snprintf(msg, sizeof msg, "the gRPC connection failed before a complete response%s%s",
               c->tls_error[0] ? ": " : "", c->tls_error);
      error = msg, finish = true;
    }
  } else if (!nrd_perf_grpc_conn_flush(c)) {
    drop = true; /* window updates could not be written */
  }
  if (drop) drop_connection(d, s);
  if (finish) s->awaiting = false;
unlock:
  pthread_mutex_unlock(&s->mu);
  if (finish) d->done(d->ctx, i, error);
}

static void *loop_main(void *arg) {
  grpc_driver *d = arg;
  struct epoll_event ev[64];
  for (;;) {
    int n = epoll_wait(d->epfd, ev, 64, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return NULL;
    for (int k = 0; k < n; k++) {
      if (ev[k].data.u32 == UINT32_MAX) return NULL; /* stop */
      on_readable(d, (int)ev[k].data.u32);
    }
  }
}

/* ---- driver functions ---- */

static bool g_prepare(nrd_perf_driver *base, const nrd_perf_tensors *t, int nslots, nrd_perf_done_fn done, void *ctx,
                      char *err, size_t errlen) {
  grpc_driver *d = (grpc_driver *)base;
  d->done = done, d->ctx = ctx;
  if (!build_request(d, t, err, errlen)) return false;
  d->slots = calloc((size_t)nslots, sizeof *d->slots);
  if (!d->slots) {
    snprintf(err, errlen, "out of memory");
    return false;
  }
  for (int i = 0; i < nslots; i++) {
    pthread_mutex_init(&d->slots[i].mu, NULL);
    d->slots[i].conn.fd = -1;
    d->nslots++;
  }
  int rc = pthread_create(&d->loop, NULL, loop_main, d);
  if (rc) {
    snprintf(err, errlen, "cannot start the gRPC loop thread: %s", strerror(rc));
    return false;
  }
  d->loop_running = true;
  return true;
}

/* Sends the request on s's connection. Caller holds s->mu. */
static bool send_locked(grpc_driver *d, grpc_slot *s) {
  nrd_perf_grpc_conn *c = &s->conn;
  if (!d->o->streaming)
    return nrd_perf_grpc_conn_start(c, SVC "ModelInfer", d->request, d->request_len, true) &&
           nrd_perf_grpc_conn_flush(c);
  bool ok = c->stream_id ? nrd_perf_grpc_conn_write(c, d->request, d->request_len)
                         : nrd_perf_grpc_conn_start(c, SVC "ModelStreamInfer", d->request, d->request_len, false);
  return ok && nrd_perf_grpc_conn_flush(c);
}

static bool g_send(nrd_perf_driver *base, int i, char *err, size_t errlen) {
  grpc_driver *d = (grpc_driver *)base;
  grpc_slot *s = &d->slots[i];
  pthread_mutex_lock(&s->mu);
  bool ok = false;
  for (int attempt = 0; attempt < 2 && !ok; attempt++) {
    bool fresh = false;
    if (s->conn.fd < 0) {
      if (!nrd_perf_grpc_conn_open(&s->conn, d->tls, d->host, d->port, err, errlen)) break;
      struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
      if (epoll_ctl(d->epfd, EPOLL_CTL_ADD, s->conn.fd, &ev)) {
        snprintf(err, errlen, "epoll_ctl: %s", strerror(errno));
        drop_connection(d, s);
        break;
      }
      fresh = true;
    }
    s->awaiting = true;
    ok = send_locked(d, s);
    if (!ok) {
      snprintf(err, errlen, "sending to %s:%s: %s", d->host, d->port,
               s->conn.tls_error[0] ? s->conn.tls_error : strerror(errno));
      s->awaiting = false;
      drop_connection(d, s);
      if (fresh) break; /* an idle connection may have been closed: retry once on a new one */
    }
  }
  pthread_mutex_unlock(&s->mu);
  return ok;
}

static void g_destroy(nrd_perf_driver *base) {
  grpc_driver *d = (grpc_driver *)base;
  if (d->loop_running) {
    uint64_t one = 1;
    if (write(d->stopfd, &one, sizeof one) < 0) perror("nrd_perf: eventfd");
    pthread_join(d->loop, NULL);
  }
  for (int i = 0; i < d->nslots; i++) {
    nrd_perf_grpc_conn_close(&d->slots[i].conn);
    pthread_mutex_destroy(&d->slots[i].mu);
  }
  free(d->slots);
  nrd_perf_grpc_tls_free(d->tls); /* after every connection closed */
  free(d->request);
  if (d->stopfd >= 0) close(d->stopfd);
  if (d->epfd >= 0) close(d->epfd);
  free(d);
}

static const nrd_perf_driver_ops grpc_ops = {g_metadata, g_config, g_statistics, g_prepare, g_send, g_destroy};

nrd_perf_driver *nrd_perf_driver_grpc_new(const nrd_perf_opts *o, char *err, size_t errlen) {
  grpc_driver *d = calloc(1, sizeof *d);
  if (!d) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  d->base.ops = &grpc_ops;
  d->o = o;
  d->epfd = d->stopfd = -1;
  if (!nrd_perf_http_split_url(o->url, "8001", d->host, sizeof d->host, d->port, sizeof d->port)) {
    snprintf(err, errlen, "-u %s: expected HOST:PORT", o->url);
    goto fail;
  }
  if (o->version >= 0) snprintf(d->version, sizeof d->version, "%lld", (long long)o->version);
  if (o->ssl_grpc) {
    d->tls = nrd_perf_grpc_tls_new(o->ssl_root_file, o->ssl_key_file, o->ssl_chain_file, err, errlen);
    if (!d->tls) goto fail;
  }
  d->epfd = epoll_create1(EPOLL_CLOEXEC);
  d->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  struct epoll_event ev = {.events = EPOLLIN, .data.u32 = UINT32_MAX};
  if (d->epfd < 0 || d->stopfd < 0 || epoll_ctl(d->epfd, EPOLL_CTL_ADD, d->stopfd, &ev)) {
    snprintf(err, errlen, "epoll: %s", strerror(errno));
    goto fail;
  }
  return &d->base;
fail:
  g_destroy(&d->base);
  return NULL;
}
