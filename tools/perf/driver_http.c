/* The HTTP transport: KServe v2 REST over HTTP/1.1 keep-alive, one
 * connection per request slot, one epoll thread reading every response.
 * Requests are rendered once (JSON data, or the binary tensor extension
 * with --http-binary) and written by whichever thread sends.
 *
 * Threads: `send` runs on the pacer thread or on the loop thread (a
 * completion re-sending); the loop thread reads responses and calls the
 * completion callback without holding any lock. A slot's mutex guards its
 * socket against a send racing the loop closing an idle connection. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "driver.h"
#include "http_wire.h"

#define RX_INITIAL 4096

typedef struct http_driver http_driver;

typedef struct http_slot {
  pthread_mutex_t mu; /* guards fd against send vs. the loop closing it */
  int fd; /* -1: not connected */
  bool awaiting; /* a request was written, its response not yet read */
  char *rx;
  size_t rx_len, rx_cap;
} http_slot;

struct http_driver {
  nrd_perf_driver base; /* first member */
  const nrd_perf_opts *o;
  char host[256], port[16];
  char path[512]; /* /v2/models/{m}[/versions/{v}] */
  char *request; /* the whole rendered request, shared by every slot */
  size_t request_len;
  http_slot *slots;
  int nslots;
  nrd_perf_done_fn done;
  void *ctx;
  int epfd, stopfd;
  pthread_t loop;
  bool loop_running;
};

/* ---- one-shot requests (metadata, config, statistics) ---- */

/* GET d->path + suffix on a fresh connection. Returns the parsed JSON body
 * (caller owns) or NULL with err. */
static json_t *get_json(http_driver *d, const char *suffix, char *err, size_t errlen) {
  int fd = nrd_perf_http_connect(d->host, d->port, err, errlen);
  if (fd < 0) return NULL;
  char req[1024];
  int n = snprintf(req, sizeof req, "GET %s%s HTTP/1.1\r\nHost: %s:%s\r\nConnection: close\r\n\r\n", d->path, suffix,
                   d->host, d->port);
  json_t *j = NULL;
  char *buf = NULL;
  size_t len = 0, cap = 0;
  if (!nrd_perf_http_write_all(fd, req, (size_t)n)) {
    snprintf(err, errlen, "GET %s%s: %s", d->path, suffix, strerror(errno));
    goto out;
  }
  nrd_perf_http_resp r;
  int st = 0;
  for (;;) {
    if (len + 4096 > cap) {
      cap = cap ? cap * 2 : 65536;
      char *p = realloc(buf, cap);
      if (!p) goto out;
      buf = p;
    }
    ssize_t got = recv(fd, buf + len, cap - len - 1, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got > 0) len += (size_t)got;
    st = nrd_perf_http_parse(buf, len, &r);
    if (st != 0 || got <= 0) break;
  }
  if (st != 1) {
    snprintf(err, errlen, "GET %s%s: no complete HTTP response from %s:%s", d->path, suffix, d->host, d->port);
    goto out;
  }
  char *body = buf + r.header_len;
  size_t blen = r.chunked ? nrd_perf_http_dechunk(body, r.body_len) : r.body_len;
  if (r.status != 200) {
    snprintf(err, errlen, "GET %s%s: HTTP %d: %.*s", d->path, suffix, r.status, (int)(blen < 300 ? blen : 300), body);
    goto out;
  }
  json_error_t jerr;
  j = json_loadb(body, blen, 0, &jerr);
  if (!j) snprintf(err, errlen, "GET %s%s: bad JSON: %s", d->path, suffix, jerr.text);
out:
  free(buf);
  close(fd);
  return j;
}

static json_t *h_metadata(nrd_perf_driver *base, char *err, size_t errlen) {
  return get_json((http_driver *)base, "", err, errlen);
}

static json_t *h_config(nrd_perf_driver *base, char *err, size_t errlen) {
  return get_json((http_driver *)base, "/config", err, errlen);
}

static json_t *h_statistics(nrd_perf_driver *base, char *err, size_t errlen) {
  return get_json((http_driver *)base, "/stats", err, errlen);
}

/* ---- the request every slot sends ---- */

static bool render_request(http_driver *d, const nrd_perf_tensors *t, char *err, size_t errlen) {
  bool binary = d->o->http_binary;
  json_t *root = json_object(), *ins = json_array(), *outs = json_array();
  json_object_set_new(root, "inputs", ins);
  json_object_set_new(root, "outputs", outs);
  size_t tail = 0;
  for (int i = 0; i < t->ninputs; i++) {
    const nrd_perf_tensor *in = &t->inputs[i];
    json_t *e = json_object(), *shape = json_array();
    json_object_set_new(e, "name", json_string(in->name));
    for (int k = 0; k < in->ndims; k++) json_array_append_new(shape, json_integer(in->shape[k]));
    json_object_set_new(e, "shape", shape);
    json_object_set_new(e, "datatype", json_string(in->datatype));
    if (binary) {
      json_t *p = json_object();
      json_object_set_new(p, "binary_data_size", json_integer((json_int_t)in->bytes));
      json_object_set_new(e, "parameters", p);
      tail += in->bytes;
    } else {
      json_t *data = NULL;
      if (!nrd_perf_tensor_json_data(in, &data)) {
        snprintf(err, errlen, "input '%s': %s data has no JSON form here; use --http-binary", in->name, in->datatype);
        json_decref(e);
        json_decref(root);
        return false;
      }
      json_object_set_new(e, "data", data);
    }
    json_array_append_new(ins, e);
  }
  for (int i = 0; i < t->noutputs; i++) {
    json_t *e = json_object(), *p = json_object();
    json_object_set_new(e, "name", json_string(t->outputs[i]));
    json_object_set_new(p, "binary_data", json_boolean(binary));
    json_object_set_new(e, "parameters", p);
    json_array_append_new(outs, e);
  }
  char *js = json_dumps(root, JSON_COMPACT);
  json_decref(root);
  if (!js) goto oom;
  size_t jlen = strlen(js);
  char head[1024];
  int hn;
  if (binary)
    hn = snprintf(head, sizeof head,
                  "POST %s/infer HTTP/1.1\r\nHost: %s:%s\r\nContent-Type: application/octet-stream\r\n"
                  "Inference-Header-Content-Length: %zu\r\nContent-Length: %zu\r\n\r\n",
                  d->path, d->host, d->port, jlen, jlen + tail);
  else
    hn = snprintf(head, sizeof head,
                  "POST %s/infer HTTP/1.1\r\nHost: %s:%s\r\nContent-Type: application/json\r\n"
                  "Content-Length: %zu\r\n\r\n",
                  d->path, d->host, d->port, jlen);
  d->request_len = (size_t)hn + jlen + tail;
  d->request = malloc(d->request_len);
  if (!d->request) {
    free(js);
    goto oom;
  }
  char *p = d->request;
  memcpy(p, head, (size_t)hn);
  p += hn;
  memcpy(p, js, jlen);
  p += jlen;
  free(js);
  for (int i = 0; binary && i < t->ninputs; i++) {
    memcpy(p, t->inputs[i].data, t->inputs[i].bytes);
    p += t->inputs[i].bytes;
  }
  return true;
oom:
  snprintf(err, errlen, "out of memory");
  return false;
}

/* ---- the loop thread ---- */

/* Closes slot's connection. Caller holds s->mu. */
static void drop_connection(http_driver *d, http_slot *s) {
  if (s->fd < 0) return;
  epoll_ctl(d->epfd, EPOLL_CTL_DEL, s->fd, NULL);
  close(s->fd);
  s->fd = -1;
}

/* Reads what slot i has; completes its request when a response is whole. */
static void on_readable(http_driver *d, int i) {
  http_slot *s = &d->slots[i];
  const char *error = NULL;
  char msg[512];
  bool eof = false;
  pthread_mutex_lock(&s->mu);
  for (;;) {
    if (s->rx_cap - s->rx_len < 4096) {
      size_t cap = s->rx_cap * 2;
      char *p = realloc(s->rx, cap);
      if (!p) {
        error = "out of memory reading a response";
        break;
      }
      s->rx = p, s->rx_cap = cap;
    }
    ssize_t n = s->fd < 0 ? 0 : recv(s->fd, s->rx + s->rx_len, s->rx_cap - s->rx_len, MSG_DONTWAIT);
    if (n > 0) {
      s->rx_len += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    eof = true; /* 0 = closed by the server, <0 = reset */
    break;
  }
  bool complete = false;
  nrd_perf_http_resp r;
  if (!error && s->awaiting) {
    int st = nrd_perf_http_parse(s->rx, s->rx_len, &r);
    if (st < 0) {
      error = "malformed HTTP response";
    } else if (st == 1) {
      complete = true;
      if (r.status != 200) {
        char *body = s->rx + r.header_len;
        size_t blen = r.chunked ? nrd_perf_http_dechunk(body, r.body_len) : r.body_len;
        snprintf(msg, sizeof msg, "HTTP %d: %.*s", r.status, (int)(blen < 400 ? blen : 400), body);
        error = msg;
      }
      if (r.close) eof = true;
    } else if (eof) {
      error = "the server closed the connection before a complete response";
    }
  }
  bool finish = s->awaiting && (complete || error);
  if (finish) {
    s->awaiting = false;
    s->rx_len = 0;
  }
  if (eof || error) drop_connection(d, s);
  pthread_mutex_unlock(&s->mu);
  if (finish) d->done(d->ctx, i, error);
}

static void *loop_main(void *arg) {
  http_driver *d = arg;
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

static bool h_prepare(nrd_perf_driver *base, const nrd_perf_tensors *t, int nslots, nrd_perf_done_fn done, void *ctx,
                      char *err, size_t errlen) {
  http_driver *d = (http_driver *)base;
  d->done = done, d->ctx = ctx;
  if (!render_request(d, t, err, errlen)) return false;
  d->slots = calloc((size_t)nslots, sizeof *d->slots);
  if (!d->slots) goto oom;
  for (int i = 0; i < nslots; i++) {
    http_slot *s = &d->slots[i];
    pthread_mutex_init(&s->mu, NULL);
    s->fd = -1;
    d->nslots++;
    s->rx = malloc(RX_INITIAL);
    if (!s->rx) goto oom;
    s->rx_cap = RX_INITIAL;
  }
  int rc = pthread_create(&d->loop, NULL, loop_main, d);
  if (rc) {
    snprintf(err, errlen, "cannot start the HTTP loop thread: %s", strerror(rc));
    return false;
  }
  d->loop_running = true;
  return true;
oom:
  snprintf(err, errlen, "out of memory");
  return false;
}

static bool h_send(nrd_perf_driver *base, int i, char *err, size_t errlen) {
  http_driver *d = (http_driver *)base;
  http_slot *s = &d->slots[i];
  pthread_mutex_lock(&s->mu);
  bool ok = false;
  for (int attempt = 0; attempt < 2 && !ok; attempt++) {
    bool fresh = false;
    if (s->fd < 0) {
      s->fd = nrd_perf_http_connect(d->host, d->port, err, errlen);
      if (s->fd < 0) break;
      struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
      if (epoll_ctl(d->epfd, EPOLL_CTL_ADD, s->fd, &ev)) {
        snprintf(err, errlen, "epoll_ctl: %s", strerror(errno));
        drop_connection(d, s);
        break;
      }
      fresh = true;
    }
    s->awaiting = true;
    s->rx_len = 0;
    ok = nrd_perf_http_write_all(s->fd, d->request, d->request_len);
    if (!ok) {
      snprintf(err, errlen, "sending to %s:%s: %s", d->host, d->port, strerror(errno));
      s->awaiting = false;
      drop_connection(d, s);
      if (fresh) break; /* a kept-alive connection may have been closed: retry once on a new one */
    }
  }
  pthread_mutex_unlock(&s->mu);
  return ok;
}

static void h_destroy(nrd_perf_driver *base) {
  http_driver *d = (http_driver *)base;
  if (d->loop_running) {
    uint64_t one = 1;
    if (write(d->stopfd, &one, sizeof one) < 0) perror("nrd_perf: eventfd");
    pthread_join(d->loop, NULL);
  }
  for (int i = 0; i < d->nslots; i++) {
    if (d->slots[i].fd >= 0) close(d->slots[i].fd);
    free(d->slots[i].rx);
    pthread_mutex_destroy(&d->slots[i].mu);
  }
  free(d->slots);
  free(d->request);
  if (d->stopfd >= 0) close(d->stopfd);
  if (d->epfd >= 0) close(d->epfd);
  free(d);
}

static const nrd_perf_driver_ops http_ops = {h_metadata, h_config, h_statistics, h_prepare, h_send, h_destroy};

nrd_perf_driver *nrd_perf_driver_http_new(const nrd_perf_opts *o, char *err, size_t errlen) {
  http_driver *d = calloc(1, sizeof *d);
  if (!d) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  d->base.ops = &http_ops;
  d->o = o;
  d->epfd = d->stopfd = -1;
  if (!nrd_perf_http_split_url(o->url, "8000", d->host, sizeof d->host, d->port, sizeof d->port)) {
    snprintf(err, errlen, "-u %s: expected HOST:PORT", o->url);
    goto fail;
  }
  if (o->version >= 0)
    snprintf(d->path, sizeof d->path, "/v2/models/%s/versions/%lld", o->model, (long long)o->version);
  else
    snprintf(d->path, sizeof d->path, "/v2/models/%s", o->model);
  d->epfd = epoll_create1(EPOLL_CLOEXEC);
  d->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  struct epoll_event ev = {.events = EPOLLIN, .data.u32 = UINT32_MAX};
  if (d->epfd < 0 || d->stopfd < 0 || epoll_ctl(d->epfd, EPOLL_CTL_ADD, d->stopfd, &ev)) {
    snprintf(err, errlen, "epoll: %s", strerror(errno));
    goto fail;
  }
  return &d->base;
fail:
  h_destroy(&d->base);
  return NULL;
}
