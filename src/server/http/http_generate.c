/* The generate extension: POST /v2/models/{m}[/versions/{v}]/generate and
 * .../generate_stream. The request is one JSON object: a top-level field
 * named like a model input becomes that input (shape from the model
 * configuration, the batch dimension 1), "parameters" and every other
 * scalar field become request parameters. Each response becomes one JSON
 * object: model_name, model_version and one field per output (a scalar
 * when the output has one element, else a flat array).
 *
 * /generate answers with the single response of the request;
 * /generate_stream answers with Server-Sent Events, one `data: {...}`
 * event per response, sent as soon as the core sends the response, and
 * ends after the final one. A failed response is an event {"error": ...}.
 *
 * Threads: the handler, the draining of events and the end of the reply
 * run on the loop thread that owns the connection. The core's response
 * callback (a core thread) encodes each response there and queues the
 * text under the context's mutex, then posts a drain to the loop. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "http_internal.h"
#include "error_ignore.h"
#include "http_json.h"
#include "response_output.h"

typedef struct gen_event {
  struct gen_event *next;
  char *text; /* JSON object */
  size_t len;
  int status; /* 200, or the HTTP status of an error response */
} gen_event;

typedef struct gen_ctx {
  nrd_srv_http_pending pending; /* first member */
  nrd_srv_http_loop *loop;
  bool stream;
  bool started; /* streaming reply headers sent (loop thread) */
  bool overflowed; /* the client stopped reading: cancelled, events dropped (under mu) */
  pthread_mutex_t mu; /* guards the event queue, queued and overflowed */
  size_t queued; /* text bytes in the event queue */
  /* Kept until the context is freed (not just until its release) so a
   * client that leaves or stops reading can still cancel a decoupled
   * model's responses. */
  TRITONSERVER_InferenceRequest *ireq;
  gen_event *head, *tail; /* queued by core threads, sent by the loop */
  size_t n_events; /* responses seen (non-streaming check) */
  atomic_int remaining; /* release + final response */
  void **bufs;
  size_t n_bufs;
  nrd_srv_trace *trace; /* NULL unless this request is traced */
} gen_ctx;

static void ctx_free(gen_ctx *c) {
  if (c->ireq) TRITONSERVER_InferenceRequestDelete(c->ireq);
  for (gen_event *e = c->head, *n; e; e = n) {
    n = e->next;
    free(e->text);
    free(e);
  }
  for (size_t i = 0; i < c->n_bufs; i++) free(c->bufs[i]);
  free(c->bufs);
  pthread_mutex_destroy(&c->mu);
  nrd_srv_trace_done(c->trace);
  free(c);
}

/* ---- response encoding (core threads) -------------------------------------- */

static int add(nrd_srv_http_text *t, const char *s) { return nrd_srv_http_text_add(t, s, strlen(s)); }

/* Encodes one response as a JSON object; on an error response, as
 * {"error": ...} with *status its HTTP status. Returns 0 or -1 (OOM). */
static int encode(TRITONSERVER_InferenceResponse *resp, nrd_srv_http_text *t, int *status) {
  *status = 200;
  TRITONSERVER_Error *err = TRITONSERVER_InferenceResponseError(resp);
  const char *model = "";
  int64_t version = 0;
  uint32_t n_out = 0;
  if (!err) err = TRITONSERVER_InferenceResponseModel(resp, &model, &version);
  if (!err) err = TRITONSERVER_InferenceResponseOutputCount(resp, &n_out);
  if (err) {
    *status = nrd_srv_http_status(err);
    int bad = add(t, "{\"error\":");
    bad |= nrd_srv_http_text_error(t, TRITONSERVER_ErrorMessage(err));
    bad |= add(t, "}");
    TRITONSERVER_ErrorDelete(err); /* ours: ResponseError returns a copy */
    return bad ? -1 : 0;
  }
  char num[64];
  int bad = add(t, "{\"model_name\":");
  bad |= nrd_srv_http_text_quoted(t, model, strlen(model));
  snprintf(num, sizeof num, ",\"model_version\":\"%lld\"", (long long)version);
  bad |= add(t, num);
  for (uint32_t i = 0; i < n_out && !bad; i++) {
    nrd_srv_output o;
    err = nrd_srv_output_get(resp, i, &o);
    if (err) {
      TRITONSERVER_ErrorDelete(err);
      continue;
    }
    uint64_t count = 1;
    for (uint64_t d = 0; d < o.dims; d++) count *= (uint64_t)(o.shape[d] < 0 ? 0 : o.shape[d]);
    bad |= add(t, ",");
    bad |= nrd_srv_http_text_quoted(t, o.name, strlen(o.name));
    bad |= add(t, ":");
    size_t at = t->len;
    if (nrd_srv_http_json_write_data(t, o.datatype, o.base, o.byte_size) != 0) return -1;
    if (count == 1 && t->len >= at + 2 && t->buf[at] == '[') {
      /* One element: the value itself, without the brackets. */
      memmove(t->buf + at, t->buf + at + 1, t->len - at - 2);
      t->len -= 2;
    }
  }
  bad |= add(t, "}");
  return bad ? -1 : 0;
}

/* ---- loop side ---------------------------------------------------------------- */

static void start_stream(gen_ctx *c, nrd_srv_http_req *req) {
  nrd_srv_http_add_header(req, "Content-Type", "text/event-stream; charset=utf-8");
  nrd_srv_http_add_header(req, "Cache-Control", "no-cache");
  nrd_srv_http_send_start(req, 200);
  c->started = true;
}

/* A streamed reply may hold this much unsent before the request is
 * cancelled (as gRPC's CALL_OUT_MAX): a client that stops reading must not
 * make the server buffer a decoupled model's every response. */
#define GEN_UNSENT_MAX (64u << 20)

/* GEN_UNSENT_MAX, or less where the environment says
 * NEREID_GENERATE_UNSENT_MAX=BYTES (4096 and up; other values are
 * ignored): tests reach the limit without a sanitizer build producing
 * 64 MB of events first. Any thread. */
static size_t unsent_max(void) {
  static atomic_size_t cached;
  size_t v = atomic_load_explicit(&cached, memory_order_relaxed);
  if (v) return v;
  v = GEN_UNSENT_MAX;
  const char *text = getenv("NEREID_GENERATE_UNSENT_MAX");
  if (text && *text) {
    char *end = NULL;
    unsigned long long n = strtoull(text, &end, 10);
    if (*end == '\0' && n >= 4096 && n < GEN_UNSENT_MAX) v = (size_t)n;
  }
  atomic_store_explicit(&cached, v, memory_order_relaxed);
  return v;
}

static void cancel_request(gen_ctx *c) {
  NRD_SRV_IGNORE(TRITONSERVER_InferenceRequestCancel(c->ireq), "cancelling a request the core may have finished");
}

/* The client is not taking the stream: cancels the request once (its
 * backend stops) and has the events that still come dropped. Returns
 * whether this call did it (to log once). Takes c->mu. */
static bool overflow(gen_ctx *c) {
  pthread_mutex_lock(&c->mu);
  bool first = !c->overflowed;
  c->overflowed = true;
  pthread_mutex_unlock(&c->mu);
  if (first) {
    cancel_request(c);
    fprintf(stderr,
            "nereid: a generate_stream client is not reading (more than %zu bytes waiting): request "
            "cancelled\n",
            unsent_max());
  }
  return first;
}

static void send_events(gen_ctx *c, nrd_srv_http_req *req) {
  pthread_mutex_lock(&c->mu);
  gen_event *list = c->head;
  c->head = c->tail = NULL;
  size_t bytes = c->queued;
  c->queued = 0;
  bool dropping = c->overflowed;
  pthread_mutex_unlock(&c->mu);
  if (req && !dropping && nrd_srv_http_unsent(req) > unsent_max()) dropping = true, overflow(c);
  if (dropping) req = NULL; /* drop what comes until the final */
  size_t n_events = 0;
  for (gen_event *e = list; e; e = e->next) n_events++;
  /* All of them in one chunk ("data: " + text + blank line each): one
   * write however many responses came since the last drain, so the loop
   * keeps up with a fast model. */
  char *b = req ? malloc(bytes + 8 * n_events + 1) : NULL;
  size_t at = 0;
  for (gen_event *e = list, *n; e; e = n) {
    n = e->next;
    if (b) {
      memcpy(b + at, "data: ", 6);
      memcpy(b + at + 6, e->text, e->len);
      memcpy(b + at + 6 + e->len, "\n\n", 2);
      at += e->len + 8;
    }
    free(e->text);
    free(e);
  }
  if (req && !c->started) start_stream(c, req);
  if (b && at) nrd_srv_http_send_chunk(req, b, at);
  free(b);
}

/* The request as long as it can still be answered, else NULL. */
static nrd_srv_http_req *live_req(gen_ctx *c) { return nrd_srv_http_pending_req(&c->pending); }

static void drain(void *arg) {
  gen_ctx *c = arg;
  send_events(c, live_req(c));
}

static void finish(void *arg) {
  gen_ctx *c = arg;
  if (c->stream) send_events(c, live_req(c));
  nrd_srv_http_req *req = nrd_srv_http_pending_finish(c->loop, &c->pending);
  if (req == NULL) return ctx_free(c);
  nrd_srv_trace_mark(c->trace, "HTTP_SEND_START", 0);
  if (c->stream) {
    if (!c->started) start_stream(c, req); /* no response at all: an empty event stream */
    nrd_srv_http_send_end(req);
    nrd_srv_trace_mark(c->trace, "HTTP_SEND_END", 0);
    return ctx_free(c);
  }
  gen_event *e = c->head;
  if (c->n_events > 1) {
    /* Stopped at the second response (see on_response). */
    nrd_srv_http_reply_error(req, 400,
                             "the model sent more than one response; use generate_stream for models that send "
                             "more than one");
  } else if (e == NULL) {
    nrd_srv_http_reply_error(req, 500, "the model sent no response");
  } else {
    nrd_srv_http_reply_json(req, e->status, e->text, e->len);
  }
  nrd_srv_trace_mark(c->trace, "HTTP_SEND_END", 0);
  ctx_free(c);
}

/* ---- core callbacks ------------------------------------------------------------ */

static void count_down(gen_ctx *c) {
  if (atomic_fetch_sub(&c->remaining, 1) != 1) return;
  if (nrd_srv_http_post(c->loop, finish, c) != 0)
    fprintf(stderr, "nereid: cannot post a generate result to the HTTP loop\n");
}

static void on_release(TRITONSERVER_InferenceRequest *request, const uint32_t flags, void *userp) {
  (void)flags, (void)request; /* deleted with the context */
  count_down(userp);
}

static void on_response(TRITONSERVER_InferenceResponse *response, const uint32_t flags, void *userp) {
  gen_ctx *c = userp;
  if (response) {
    nrd_srv_http_text t = {0};
    int status = 200;
    gen_event *e = calloc(1, sizeof *e);
    if (e == NULL || encode(response, &t, &status) != 0) {
      free(t.buf);
      t = (nrd_srv_http_text){0};
      nrd_srv_http_text_add(&t, "{\"error\":\"out of memory encoding a response\"}", 45);
      status = 500;
    }
    TRITONSERVER_InferenceResponseDelete(response);
    if (e && t.buf) {
      e->text = t.buf;
      e->len = t.len;
      e->status = status;
      pthread_mutex_lock(&c->mu);
      c->n_events++;
      /* Kept: every event of a stream the client takes; of a plain
       * generate only the first (more than one is an error anyway). */
      bool keep = c->stream ? !c->overflowed && c->queued + t.len <= unsent_max() : c->n_events == 1;
      bool was_empty = c->head == NULL;
      if (keep) {
        if (c->tail)
          c->tail->next = e;
        else
          c->head = e;
        c->tail = e;
        c->queued += t.len;
      }
      bool over = c->stream && !keep && !c->overflowed;
      size_t n_events = c->n_events;
      pthread_mutex_unlock(&c->mu);
      if (!keep) {
        free(e->text);
        free(e);
      }
      if (over) overflow(c);
      if (!c->stream && n_events == 2) cancel_request(c); /* the answer is an error now: spare the backend */
      if (keep && c->stream && was_empty && !(flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) &&
          nrd_srv_http_post(c->loop, drain, c) != 0)
        fprintf(stderr, "nereid: cannot post a generate event to the HTTP loop\n");
    } else {
      free(e);
      free(t.buf);
    }
  }
  if (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) {
    nrd_srv_trace_mark(c->trace, "INFER_RESPONSE_COMPLETE", 0);
    count_down(c);
  }
}

static void on_disconnect(nrd_srv_http_pending *p) { cancel_request((gen_ctx *)p); }

/* ---- request building (loop thread) ---------------------------------------------- */

static int64_t json_dim(json_t *v) {
  if (json_is_integer(v)) return json_integer_value(v);
  if (json_is_string(v)) return strtoll(json_string_value(v), NULL, 10);
  return -1;
}

static uint64_t count_elements(json_t *v) {
  if (!json_is_array(v)) return 1;
  uint64_t n = 0;
  for (size_t i = 0; i < json_array_size(v); i++) n += count_elements(json_array_get(v, i));
  return n;
}

/* Adds model input `io` (from the configuration) with the JSON value v. */
static int add_input(gen_ctx *c, TRITONSERVER_InferenceRequest *ireq, json_t *io, json_t *v, bool batched, char *msg,
                     size_t msglen) {
  const char *name = json_string_value(json_object_get(io, "name"));
  const char *ctype = json_string_value(json_object_get(io, "data_type"));
  if (name == NULL || ctype == NULL) {
    snprintf(msg, msglen, "cannot read the model configuration's inputs");
    return -1;
  }
  if (strncmp(ctype, "TYPE_", 5) == 0) ctype += 5;
  TRITONSERVER_DataType dt =
      strcmp(ctype, "STRING") == 0 ? TRITONSERVER_TYPE_BYTES : TRITONSERVER_StringToDataType(ctype);
  json_t *jdims = json_object_get(io, "dims");
  size_t nd = json_array_size(jdims);
  if (nd > 32) nd = 32;
  int64_t shape[33];
  size_t o = 0;
  if (batched) shape[o++] = 1;
  uint64_t count = count_elements(v), known = 1;
  int wild = -1;
  for (size_t d = 0; d < nd; d++) {
    int64_t x = json_dim(json_array_get(jdims, d));
    if (x < 0) {
      if (wild < 0) wild = (int)o;
      x = 1;
    } else {
      known *= (uint64_t)x;
    }
    shape[o++] = x;
  }
  if (wild >= 0 && known > 0) shape[wild] = (int64_t)(count / known);
  TRITONSERVER_Error *err = TRITONSERVER_InferenceRequestAddInput(ireq, name, dt, shape, o);
  char *text = err ? NULL : json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
  if (err == NULL && text == NULL) {
    snprintf(msg, msglen, "out of memory");
    return -1;
  }
  void *buf = NULL;
  size_t size = 0;
  if (err == NULL && count > 0) {
    int rc;
    if (json_is_array(v)) {
      rc = nrd_srv_http_json_parse_data(text, strlen(text), dt, count, name, &buf, &size, msg, msglen);
    } else {
      size_t n = strlen(text);
      char *wrapped = malloc(n + 3);
      if (wrapped == NULL) {
        free(text);
        snprintf(msg, msglen, "out of memory");
        return -1;
      }
      wrapped[0] = '[';
      memcpy(wrapped + 1, text, n);
      wrapped[n + 1] = ']';
      wrapped[n + 2] = '\0';
      rc = nrd_srv_http_json_parse_data(wrapped, n + 2, dt, count, name, &buf, &size, msg, msglen);
      free(wrapped);
    }
    free(text);
    if (rc != 0) return -1;
    void **g = realloc(c->bufs, (c->n_bufs + 1) * sizeof *g);
    if (g == NULL) {
      free(buf);
      snprintf(msg, msglen, "out of memory");
      return -1;
    }
    c->bufs = g;
    g[c->n_bufs++] = buf;
  } else {
    free(text);
  }
  if (err == NULL)
    err = TRITONSERVER_InferenceRequestAppendInputData(ireq, name, buf, size, TRITONSERVER_MEMORY_CPU, 0);
  if (err) {
    snprintf(msg, msglen, "%s", TRITONSERVER_ErrorMessage(err));
    TRITONSERVER_ErrorDelete(err);
    return -1;
  }
  return 0;
}

static TRITONSERVER_Error *add_parameter(TRITONSERVER_InferenceRequest *ireq, const char *key, json_t *v) {
  if (json_is_string(v)) return TRITONSERVER_InferenceRequestSetStringParameter(ireq, key, json_string_value(v));
  if (json_is_integer(v)) return TRITONSERVER_InferenceRequestSetIntParameter(ireq, key, json_integer_value(v));
  if (json_is_boolean(v)) return TRITONSERVER_InferenceRequestSetBoolParameter(ireq, key, json_is_true(v));
  if (json_is_real(v)) return TRITONSERVER_InferenceRequestSetDoubleParameter(ireq, key, json_real_value(v));
  char msg[200];
  snprintf(msg, sizeof msg, "parameter '%.100s' must be a string, number or boolean", key);
  return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, msg);
}

/* Builds c->ireq from the body j and the model configuration. Returns 0,
 * or an HTTP status with msg. */
static int build(gen_ctx *c, json_t *j, const char *model, int64_t version, char *msg, size_t msglen) {
  nrd_srv_http *h = c->loop->http;
  TRITONSERVER_Message *m = NULL;
  TRITONSERVER_Error *err = TRITONSERVER_ServerModelConfig(h->server, model, version, 1, &m);
  const char *base = NULL;
  size_t size = 0;
  json_t *cfg = NULL;
  if (!err && !(err = TRITONSERVER_MessageSerializeToJson(m, &base, &size))) cfg = json_loadb(base, size, 0, NULL);
  if (m) TRITONSERVER_MessageDelete(m);
  if (!err) err = TRITONSERVER_InferenceRequestNew(&c->ireq, h->server, model, version);
  if (err) {
    snprintf(msg, msglen, "%s", TRITONSERVER_ErrorMessage(err));
    int status = nrd_srv_http_status(err);
    TRITONSERVER_ErrorDelete(err);
    json_decref(cfg);
    return status;
  }
  int status = 400;
  json_t *inputs = json_object_get(cfg, "input");
  json_t *mbs = json_object_get(cfg, "max_batch_size");
  bool batched = json_dim(mbs) > 0;
  const char *key;
  json_t *v;
  json_object_foreach(j, key, v) {
    json_t *io = NULL;
    for (size_t i = 0; i < json_array_size(inputs) && io == NULL; i++) {
      const char *n = json_string_value(json_object_get(json_array_get(inputs, i), "name"));
      if (n && strcmp(n, key) == 0) io = json_array_get(inputs, i);
    }
    if (io) {
      if (add_input(c, c->ireq, io, v, batched, msg, msglen) != 0) goto done;
      continue;
    }
    if (strcmp(key, "id") == 0 && json_is_string(v)) {
      err = TRITONSERVER_InferenceRequestSetId(c->ireq, json_string_value(v));
    } else if (strcmp(key, "parameters") == 0 && json_is_object(v)) {
      const char *pk;
      json_t *pv;
      json_object_foreach(v, pk, pv) {
        if ((err = add_parameter(c->ireq, pk, pv))) break;
      }
    } else {
      err = add_parameter(c->ireq, key, v);
    }
    if (err) {
      snprintf(msg, msglen, "%s", TRITONSERVER_ErrorMessage(err));
      status = nrd_srv_http_status(err);
      TRITONSERVER_ErrorDelete(err);
      goto done;
    }
  }
  status = 0;
done:
  json_decref(cfg);
  return status;
}

void nrd_srv_http_generate(nrd_srv_http_loop *loop, nrd_srv_http_req *req, const char *model, int64_t version,
                           bool stream) {
  nrd_srv_http *h = loop->http;
  char msg[512];
  int status = nrd_srv_http_decode_body(req, h->max_input, msg, sizeof msg);
  if (status) return nrd_srv_http_reply_error(req, status, msg);
  json_t *j = NULL;
  if (nrd_srv_http_body_json(req, &j) != 0) return;
  if (j == NULL) return nrd_srv_http_reply_error(req, 400, "the request body is empty: expected a JSON object");
  gen_ctx *c = calloc(1, sizeof *c);
  if (c == NULL) {
    json_decref(j);
    return nrd_srv_http_reply_error(req, 500, "out of memory");
  }
  c->loop = loop;
  c->stream = stream;
  pthread_mutex_init(&c->mu, NULL);
  atomic_init(&c->remaining, 2);
  c->pending.on_disconnect = on_disconnect;
  status = build(c, j, model, version, msg, sizeof msg);
  json_decref(j);
  TRITONSERVER_Error *err = NULL;
  if (status == 0 &&
      ((err = nrd_srv_http_forward_headers(h, req, c->ireq)) ||
       (err = TRITONSERVER_InferenceRequestSetReleaseCallback(c->ireq, on_release, c)) ||
       (err = TRITONSERVER_InferenceRequestSetResponseCallback(c->ireq, h->allocator, NULL, on_response, c)))) {
    snprintf(msg, sizeof msg, "%s", TRITONSERVER_ErrorMessage(err));
    status = nrd_srv_http_status(err);
    TRITONSERVER_ErrorDelete(err);
  }
  if (status) {
    ctx_free(c);
    return nrd_srv_http_reply_error(req, status, msg);
  }
  nrd_srv_http_pending_add(loop, &c->pending, req);
  c->trace = nrd_srv_tracer_sample(
      h->tracer, model, nrd_srv_tracer_active(h->tracer) ? nrd_srv_http_header_get(req, "traceparent") : NULL);
  if (c->trace && req->recv_start_ns) {
    nrd_srv_trace_mark(c->trace, "HTTP_RECV_START", req->recv_start_ns);
    nrd_srv_trace_mark(c->trace, "HTTP_RECV_END", req->recv_end_ns);
  }
  err = TRITONSERVER_ServerInferAsync(h->server, c->ireq, nrd_srv_trace_core(c->trace));
  if (err) {
    nrd_srv_http_req *r = nrd_srv_http_pending_finish(loop, &c->pending);
    ctx_free(c);
    if (r)
      nrd_srv_http_reply_tserr(r, err);
    else
      TRITONSERVER_ErrorDelete(err);
  }
}
