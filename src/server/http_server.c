/* The HTTP listener: one listening socket shared by N event-loop threads,
 * each with its own event_base and evhttp; requests waiting on other
 * threads; reply helpers; orderly stop. */
#include "http_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <event2/thread.h>

#include "http_internal.h"
#include "http_json.h"

/* Idle or stalled connections are closed after this many seconds. */
#define HTTP_TIMEOUT_SECS 120

static TRITONSERVER_Error *errorf(TRITONSERVER_Error_Code code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static TRITONSERVER_Error *errorf(TRITONSERVER_Error_Code code, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return TRITONSERVER_ErrorNew(code, buf);
}

/* ---- reply helpers ------------------------------------------------------- */

int nrd_srv_http_status(TRITONSERVER_Error *err) {
  if (err == NULL) return 200;
  switch (TRITONSERVER_ErrorCode(err)) {
    case TRITONSERVER_ERROR_INTERNAL: return 500;
    case TRITONSERVER_ERROR_NOT_FOUND: return 404;
    case TRITONSERVER_ERROR_UNAVAILABLE: return 503;
    case TRITONSERVER_ERROR_UNSUPPORTED: return 501;
    default: return 400;
  }
}

static const char *reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 413: return "Payload Too Large";
    case 415: return "Unsupported Media Type";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    default: return NULL;
  }
}

void nrd_srv_http_reply_json(struct evhttp_request *req, int status, const char *body, size_t len) {
  struct evbuffer *out = evhttp_request_get_output_buffer(req);
  evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
  evbuffer_add(out, body, len);
  evhttp_send_reply(req, status, reason(status), NULL);
}

void nrd_srv_http_reply_error(struct evhttp_request *req, int status, const char *msg) {
  nrd_srv_http_text t = {0};
  if (nrd_srv_http_text_add(&t, "{\"error\":", 9) != 0 ||
      nrd_srv_http_text_quoted(&t, msg, strlen(msg)) != 0 || nrd_srv_http_text_add(&t, "}", 1) != 0) {
    free(t.buf);
    evhttp_send_reply(req, 500, "Internal Server Error", NULL);
    return;
  }
  nrd_srv_http_reply_json(req, status, t.buf, t.len);
  free(t.buf);
}

void nrd_srv_http_reply_tserr(struct evhttp_request *req, TRITONSERVER_Error *err) {
  nrd_srv_http_reply_error(req, nrd_srv_http_status(err), TRITONSERVER_ErrorMessage(err));
  TRITONSERVER_ErrorDelete(err);
}

void nrd_srv_http_reply_empty(struct evhttp_request *req, int status) {
  evhttp_send_reply(req, status, reason(status), NULL);
}

/* ---- pending requests ---------------------------------------------------- */

/* A connection closed: requests of it still waiting on work either were
 * handed to us by evhttp (detached: we free them) or are about to be freed
 * by evhttp (forget them). Either way the work is told. */
static void on_conn_close(struct evhttp_connection *conn, void *arg) {
  nrd_srv_http_loop *loop = arg;
  for (nrd_srv_http_pending *p = loop->pending; p; p = p->next) {
    if (p->conn != conn || p->req == NULL) continue;
    if (evhttp_request_get_connection(p->req) == NULL) {
      p->detached = true;
    } else {
      evhttp_request_set_on_complete_cb(p->req, NULL, NULL);
      p->req = NULL;
    }
    p->conn = NULL;
    if (p->on_disconnect) p->on_disconnect(p);
  }
}

/* evhttp answered the request itself (a connection error path): forget it. */
static void on_req_complete(struct evhttp_request *req, void *arg) {
  (void)req;
  nrd_srv_http_pending *p = arg;
  p->req = NULL;
  p->conn = NULL;
  if (p->on_disconnect) p->on_disconnect(p);
}

void nrd_srv_http_pending_add(nrd_srv_http_loop *loop, nrd_srv_http_pending *p,
                              struct evhttp_request *req) {
  p->req = req;
  p->detached = false;
  p->conn = evhttp_request_get_connection(req);
  p->prev = NULL;
  p->next = loop->pending;
  if (loop->pending) loop->pending->prev = p;
  loop->pending = p;
  atomic_fetch_add(&loop->http->in_flight, 1);
  if (p->conn) evhttp_connection_set_closecb(p->conn, on_conn_close, loop);
  evhttp_request_set_on_complete_cb(req, on_req_complete, p);
}

struct evhttp_request *nrd_srv_http_pending_finish(nrd_srv_http_loop *loop, nrd_srv_http_pending *p) {
  if (p->prev) p->prev->next = p->next;
  else loop->pending = p->next;
  if (p->next) p->next->prev = p->prev;
  p->prev = p->next = NULL;
  atomic_fetch_sub(&loop->http->in_flight, 1);
  struct evhttp_request *req = p->req;
  p->req = NULL;
  if (req == NULL) return NULL;
  evhttp_request_set_on_complete_cb(req, NULL, NULL);
  if (p->detached) {
    evhttp_request_free(req);
    return NULL;
  }
  return req;
}

typedef struct post_tramp {
  void (*fn)(void *);
  void *arg;
} post_tramp;

static void post_run(evutil_socket_t fd, short events, void *arg) {
  (void)fd;
  (void)events;
  post_tramp t = *(post_tramp *)arg;
  free(arg);
  t.fn(t.arg);
}

int nrd_srv_http_post(nrd_srv_http_loop *loop, void (*fn)(void *arg), void *arg) {
  post_tramp *t = malloc(sizeof *t);
  if (t == NULL) return -1;
  t->fn = fn;
  t->arg = arg;
  if (event_base_once(loop->base, -1, EV_TIMEOUT, post_run, t, NULL) != 0) {
    free(t);
    return -1;
  }
  return 0;
}

/* ---- loops ---------------------------------------------------------------- */

static void on_request(struct evhttp_request *req, void *arg) {
  nrd_srv_http_route(arg, req);
}

static void *loop_main(void *arg) {
  nrd_srv_http_loop *loop = arg;
  event_base_loop(loop->base, EVLOOP_NO_EXIT_ON_EMPTY);
  return NULL;
}

static int make_listener(const char *address, int port, int *out_fd, int *out_port, char *err,
                         size_t errlen) {
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  char portstr[16];
  snprintf(portstr, sizeof portstr, "%d", port);
  int rc = getaddrinfo(address, portstr, &hints, &res);
  if (rc != 0) {
    snprintf(err, errlen, "cannot resolve address '%s': %s", address, gai_strerror(rc));
    return -1;
  }
  int fd = -1;
  int saved = 0;
  for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      saved = errno;
      continue;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 1024) == 0) break;
    saved = errno;
    close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  if (fd < 0) {
    snprintf(err, errlen, "cannot listen on %s:%d: %s", address, port, strerror(saved));
    return -1;
  }
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  *out_port = port;
  if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
    if (ss.ss_family == AF_INET) *out_port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    else if (ss.ss_family == AF_INET6) *out_port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
  }
  *out_fd = fd;
  return 0;
}

/* Lets other threads wake a loop (event_base_once from core threads). */
static void init_threads(void) { evthread_use_pthreads(); }

static void free_http(nrd_srv_http *h) {
  for (int i = 0; i < h->n_loops; i++) {
    nrd_srv_http_loop *l = &h->loops[i];
    if (l->evh) evhttp_free(l->evh);
    if (l->base) event_base_free(l->base);
  }
  free(h->loops);
  if (h->fd >= 0) close(h->fd);
  if (h->allocator) TRITONSERVER_ResponseAllocatorDelete(h->allocator);
  free(h);
}

static void stop_loops(nrd_srv_http *h) {
  for (int i = 0; i < h->n_loops; i++) {
    nrd_srv_http_loop *l = &h->loops[i];
    if (!l->started) continue;
    event_base_loopbreak(l->base);
    pthread_join(l->thread, NULL);
    l->started = false;
  }
}

TRITONSERVER_Error *nrd_srv_http_start(TRITONSERVER_Server *server,
                                       const nrd_srv_http_options *opts, nrd_srv_http **out) {
  *out = NULL;
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, init_threads);
  if (opts->threads < 1 || opts->threads > 256)
    return errorf(TRITONSERVER_ERROR_INVALID_ARG, "HTTP thread count must be 1..256, got %d",
                  opts->threads);
  nrd_srv_http *h = calloc(1, sizeof *h);
  if (h == NULL) return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  h->server = server;
  h->fd = -1;
  h->max_input = opts->max_input_size;
  h->metrics_only = opts->metrics_only != 0;
  atomic_init(&h->in_flight, 0);
  h->shm = opts->shm;
  h->log = opts->log;
  TRITONSERVER_Error *err = NULL;
  char msg[512];
  if (make_listener(opts->address, opts->port, &h->fd, &h->port, msg, sizeof msg) != 0) {
    err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, msg);
    goto fail;
  }
  if (!h->metrics_only && (err = nrd_srv_http_allocator_new(&h->allocator))) goto fail;
  h->loops = calloc((size_t)opts->threads, sizeof *h->loops);
  if (h->loops == NULL) {
    err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    goto fail;
  }
  for (int i = 0; i < opts->threads; i++) {
    nrd_srv_http_loop *l = &h->loops[i];
    h->n_loops = i + 1;
    l->http = h;
    l->base = event_base_new();
    l->evh = l->base ? evhttp_new(l->base) : NULL;
    if (l->evh == NULL) {
      err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "cannot create an HTTP event loop");
      goto fail;
    }
    evhttp_set_max_body_size(l->evh, (ev_ssize_t)(opts->max_input_size > (size_t)INT64_MAX / 2
                                                      ? (size_t)INT64_MAX / 2
                                                      : opts->max_input_size));
    evhttp_set_max_headers_size(l->evh, 64 * 1024);
    evhttp_set_timeout(l->evh, HTTP_TIMEOUT_SECS);
    evhttp_set_allowed_methods(l->evh, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
                                           EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE);
    evhttp_set_gencb(l->evh, on_request, l);
    /* The socket is shared by every loop and closed by us, not by libevent. */
    struct evconnlistener *lst =
        evconnlistener_new(l->base, NULL, NULL, LEV_OPT_CLOSE_ON_EXEC, -1, h->fd);
    if (lst == NULL || evhttp_bind_listener(l->evh, lst) == NULL) {
      if (lst) evconnlistener_free(lst);
      err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "cannot attach the HTTP listener");
      goto fail;
    }
  }
  for (int i = 0; i < h->n_loops; i++) {
    nrd_srv_http_loop *l = &h->loops[i];
    int rc = pthread_create(&l->thread, NULL, loop_main, l);
    if (rc != 0) {
      err = errorf(TRITONSERVER_ERROR_INTERNAL, "cannot start an HTTP thread: %s", strerror(rc));
      goto fail;
    }
    l->started = true;
  }
  *out = h;
  return NULL;
fail:
  stop_loops(h);
  free_http(h);
  return err;
}

int nrd_srv_http_port(const nrd_srv_http *http) { return http ? http->port : 0; }

void nrd_srv_http_stop(nrd_srv_http *h, unsigned wait_secs) {
  if (h == NULL) return;
  /* Requests already with the core get up to wait_secs to finish so their
   * completions find a live loop. */
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  while (atomic_load(&h->in_flight) > 0) {
    clock_gettime(CLOCK_MONOTONIC, &now);
    if ((unsigned)(now.tv_sec - start.tv_sec) >= wait_secs) break;
    struct timespec ms = {0, 10 * 1000 * 1000};
    nanosleep(&ms, NULL);
  }
  stop_loops(h);
  if (atomic_load(&h->in_flight) > 0) {
    /* Work still holds pointers into the loops: leak them rather than let
     * a late completion touch freed memory. */
    fprintf(stderr, "nereid: %ld HTTP requests still in flight at shutdown\n",
            (long)atomic_load(&h->in_flight));
    return;
  }
  free_http(h);
}
