/* The HTTP listener and event loops: one listening socket shared by N
 * epoll loop threads (EPOLLEXCLUSIVE, so one loop takes each connection),
 * tasks posted to a loop from other threads, reply helpers and an orderly
 * stop. Connections themselves are in http_conn.c. */
#include "http_server.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "http_internal.h"
#include "http_json.h"
#include "listener.h"

#define MAX_EVENTS 64

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

void nrd_srv_http_reply_json(nrd_srv_http_req *req, int status, const char *body, size_t len) {
  if (nrd_srv_http_add_header(req, "Content-Type", "application/json") != 0 ||
      nrd_srv_http_add_body(req, body, len) != 0) {
    nrd_srv_http_send(req, 500);
    return;
  }
  nrd_srv_http_send(req, status);
}

void nrd_srv_http_reply_error(nrd_srv_http_req *req, int status, const char *msg) {
  nrd_srv_http_text t = {0};
  if (nrd_srv_http_text_add(&t, "{\"error\":", 9) != 0 || nrd_srv_http_text_error(&t, msg) != 0 ||
      nrd_srv_http_text_add(&t, "}", 1) != 0) {
    free(t.buf);
    nrd_srv_http_send(req, 500);
    return;
  }
  if (nrd_srv_http_add_header(req, "Content-Type", "application/json") != 0 ||
      nrd_srv_http_add_body_ref(req, t.buf, t.len, free, t.buf) != 0) {
    nrd_srv_http_send(req, 500);
    return;
  }
  nrd_srv_http_send(req, status);
}

void nrd_srv_http_reply_tserr(nrd_srv_http_req *req, TRITONSERVER_Error *err) {
  nrd_srv_http_reply_error(req, nrd_srv_http_status(err), TRITONSERVER_ErrorMessage(err));
  TRITONSERVER_ErrorDelete(err);
}

void nrd_srv_http_reply_empty(nrd_srv_http_req *req, int status) { nrd_srv_http_send(req, status); }

/* ---- posting to a loop ------------------------------------------------------ */

void nrd_srv_http_post_task(nrd_srv_http_loop *loop, nrd_srv_http_task *t) {
  nrd_srv_inbox_post(&loop->inbox, &t->link);
}

int nrd_srv_http_post(nrd_srv_http_loop *loop, void (*fn)(void *arg), void *arg) {
  nrd_srv_http_task *t = malloc(sizeof *t);
  if (t == NULL) return -1;
  t->fn = fn;
  t->arg = arg;
  t->heap = true;
  nrd_srv_http_post_task(loop, t);
  return 0;
}

/* Runs the tasks posted so far; false when there was none. */
static bool run_tasks(nrd_srv_http_loop *loop) {
  nrd_srv_inbox_item *it = nrd_srv_inbox_take(&loop->inbox);
  bool ran = it != NULL;
  while (it) {
    nrd_srv_http_task *t = (nrd_srv_http_task *)it;
    it = it->next;
    bool heap = t->heap;
    void (*fn)(void *) = t->fn;
    void *arg = t->arg;
    if (heap) free(t);
    fn(arg); /* may free an embedded t */
  }
  return ran;
}

/* ---- loops ---------------------------------------------------------------- */

static time_t mono_secs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return ts.tv_sec;
}

static void accept_all(nrd_srv_http_loop *loop) {
  for (int i = 0; i < 64; i++) {
    int fd = nrd_srv_acceptor_next(&loop->acceptor);
    if (fd < 0) return;
    if (loop->draining)
      close(fd); /* shutting down: refused at once, not left waiting */
    else
      nrd_srv_http_conn_open(loop, fd);
  }
}

static void *loop_main(void *arg) {
  nrd_srv_http_loop *loop = arg;
  struct epoll_event evs[MAX_EVENTS];
  loop->now = mono_secs();
  time_t last_expire = loop->now;
  while (!atomic_load_explicit(&loop->stop, memory_order_acquire)) {
    bool idle = nrd_srv_inbox_idle(&loop->inbox);
    int n = epoll_wait(loop->epfd, evs, MAX_EVENTS, nrd_srv_acceptor_timeout(&loop->acceptor, idle ? 1000 : 0));
    loop->now = mono_secs();
    nrd_srv_acceptor_tick(&loop->acceptor);
    run_tasks(loop); /* completions first: their replies free the most */
    if (!loop->draining && atomic_load_explicit(&loop->http->draining, memory_order_acquire)) {
      /* Shutdown began: new connections are closed as soon as accepted,
       * idle ones now, busy ones after their reply. */
      loop->draining = true;
      nrd_srv_http_conn_close_idle(loop);
      continue;
    }
    for (int i = 0; i < n; i++) {
      void *tag = evs[i].data.ptr;
      if (tag == &loop->tag_listener)
        accept_all(loop);
      else if (tag != &loop->tag_wake)
        nrd_srv_http_conn_io(tag, evs[i].events);
    }
    nrd_srv_http_conn_resume_all(loop);
    /* Replies posted while these events were handled (a model run inline
     * on this loop answers at once) go out now rather than after one more
     * epoll_wait, a system call; a reply may let pipelined input resume.
     * A few passes at most: what is left waits for the next round. */
    for (int pass = 0; pass < 4 && run_tasks(loop); pass++) nrd_srv_http_conn_resume_all(loop);
    if (loop->now != last_expire) {
      last_expire = loop->now;
      nrd_srv_http_conn_expire(loop, loop->http->client_timeout_secs);
      nrd_srv_http_conn_resume_all(loop);
    }
  }
  return NULL;
}

/* Frees the context of another kind of endpoint. */
static void free_option_copies(nrd_srv_http *h) {
  if (h->endpoint && h->endpoint->free) h->endpoint->free(h->endpoint_ctx);
}

static void free_http(nrd_srv_http *h) {
  for (int i = 0; i < h->n_loops; i++) {
    nrd_srv_http_loop *l = &h->loops[i];
    nrd_srv_http_conn_close_all(l);
    if (l->has_inbox) {
      run_tasks(l); /* heap tasks nobody ran (none once in_flight is 0) */
      nrd_srv_inbox_destroy(&l->inbox);
    }
    if (l->epfd >= 0) close(l->epfd);
    nrd_srv_json_memo_free(&l->headers);
  }
  free(h->loops);
  nrd_srv_http_blocks_free(h);
  pthread_mutex_destroy(&h->blocks_mu);
  if (h->fd >= 0) close(h->fd);
  if (h->allocator) TRITONSERVER_ResponseAllocatorDelete(h->allocator);
  nrd_srv_header_forward_free(h->header_forward);
  free_option_copies(h);
  free(h);
}

static void stop_loops(nrd_srv_http *h) {
  for (int i = 0; i < h->n_loops; i++) {
    nrd_srv_http_loop *l = &h->loops[i];
    if (!l->started) continue;
    atomic_store_explicit(&l->stop, true, memory_order_release);
    nrd_srv_inbox_wake(&l->inbox);
    pthread_join(l->thread, NULL);
    l->started = false;
  }
}

TRITONSERVER_Error *nrd_srv_http_start(TRITONSERVER_Server *server, const nrd_srv_http_options *opts,
                                       nrd_srv_http **out) {
  *out = NULL;
  nrd_srv_http *h = calloc(1, sizeof *h);
  if (h == NULL) {
    if (opts->endpoint && opts->endpoint->free) opts->endpoint->free(opts->endpoint_ctx);
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  }
  h->endpoint = opts->endpoint;
  h->endpoint_ctx = opts->endpoint_ctx;
  if (opts->threads < 1 || opts->threads > 256) {
    free_option_copies(h);
    free(h);
    return errorf(TRITONSERVER_ERROR_INVALID_ARG, "HTTP thread count must be 1..256, got %d", opts->threads);
  }
  h->server = server;
  h->fd = -1;
  h->max_input = opts->max_input_size;
  /* Triton r25.07 checks each input's data against the limit and reads any
   * body; Nereid still bounds the body, at room for JSON text of inputs at
   * the limit (docs/http.md). Saturates. */
  h->max_body = opts->max_input_size > SIZE_MAX / 4 ? SIZE_MAX : opts->max_input_size * 4;
  h->client_timeout_secs =
      opts->client_timeout_secs > 0 ? opts->client_timeout_secs : NRD_SRV_HTTP_CLIENT_TIMEOUT_DEFAULT;
  h->metrics_only = opts->metrics_only != 0;
  h->binary_mime = h->endpoint ? h->endpoint->binary_mime : NULL;
  atomic_init(&h->in_flight, 0);
  atomic_init(&h->open_conns, 0);
  atomic_init(&h->draining, false);
  pthread_mutex_init(&h->blocks_mu, NULL);
  h->shm = opts->shm;
  h->log = opts->log;
  h->tracer = opts->tracer;
  h->restricted = opts->restricted;
  TRITONSERVER_Error *err = NULL;
  char msg[512];
  if (opts->header_forward &&
      !(h->header_forward = nrd_srv_header_forward_new(opts->header_forward, true, msg, sizeof msg))) {
    err = errorf(TRITONSERVER_ERROR_INVALID_ARG, "--http-header-forward-pattern: %s", msg);
    goto fail;
  }
  if (nrd_srv_listen(opts->address, opts->port, opts->reuse_port, &h->fd, &h->port, msg, sizeof msg) != 0) {
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
    atomic_init(&l->stop, false);
    l->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (l->epfd >= 0 && nrd_srv_inbox_init(&l->inbox, l->epfd, &l->tag_wake) == 0) l->has_inbox = true;
    if (!l->has_inbox || nrd_srv_acceptor_init(&l->acceptor, h->fd, l->epfd, &l->tag_listener,
                                               h->metrics_only ? "metrics"
                                               : h->endpoint   ? h->endpoint->name
                                                               : "HTTP/REST") != 0) {
      err = errorf(TRITONSERVER_ERROR_INTERNAL, "cannot create an HTTP event loop: %s", strerror(errno));
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

void nrd_srv_http_drain(nrd_srv_http *h) {
  if (h == NULL) return;
  atomic_store_explicit(&h->draining, true, memory_order_release);
  for (int i = 0; i < h->n_loops; i++)
    if (h->loops[i].started) nrd_srv_inbox_wake(&h->loops[i].inbox);
}

bool nrd_srv_http_stop(nrd_srv_http *h, unsigned wait_secs) {
  if (h == NULL) return true;
  /* Drain: the loops stop accepting and close each connection once it has
   * no request left; requests already received are answered. Up to
   * wait_secs for that, so that completions find a live loop. */
  nrd_srv_http_drain(h);
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  while (atomic_load(&h->in_flight) > 0 || atomic_load(&h->open_conns) > 0) {
    clock_gettime(CLOCK_MONOTONIC, &now);
    if ((unsigned)(now.tv_sec - start.tv_sec) >= wait_secs) break;
    struct timespec ms = {0, 10 * 1000 * 1000};
    nanosleep(&ms, NULL);
  }
  stop_loops(h);
  if (atomic_load(&h->in_flight) > 0) {
    /* Work still holds pointers into the loops: leak them rather than let
     * a late completion touch freed memory. */
    fprintf(stderr, "nereid: %ld HTTP requests still in flight at shutdown\n", (long)atomic_load(&h->in_flight));
    return false;
  }
  free_http(h);
  return true;
}
