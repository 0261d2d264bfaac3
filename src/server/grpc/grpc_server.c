/* The gRPC transport: listening socket, epoll loops, connections and
 * their HTTP/2 sessions (nghttp2), start and stop. A call's sending side
 * is in grpc_call.c, receiving in grpc_stream.c (structures shared through
 * grpc_internal.h); RPC semantics live in grpc_rpc.c and grpc_infer.c.
 *
 * Threads: one listening socket is registered (EPOLLEXCLUSIVE) in every
 * loop; a connection belongs to the loop that accepted it and its nghttp2
 * session is only touched there. Core threads reach a call only through
 * nrd_srv_grpc_call_post, which queues an event in the loop's inbox
 * (inbox.h). A call is reference counted: the transport holds one reference
 * while the stream is open, handlers hold more while the core works. */
#include "grpc_server.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "acceptor.h"
#include "block_cache.h"
#include "grpc_internal.h"
#include "header_forward.h"
#include "listener.h"

/* ---- small helpers ------------------------------------------------------ */

static void srv_log(TRITONSERVER_LogLevel level, const char *msg) {
  TRITONSERVER_Error *e = TRITONSERVER_LogMessage(level, __FILE__, __LINE__, msg);
  if (e) TRITONSERVER_ErrorDelete(e);
}

/* ---- connections ----------------------------------------------------------- */

static void linger_end(conn *c);

/* Closes the socket and the session at once; the memory waits on the
 * graveyard until the loop's batch is over, so an event or dirty-list
 * entry already collected for c still finds it (marked closed). */
static void conn_close(conn *c) {
  if (c->closed) return;
  if (c->linger_until_us) {
    linger_end(c);
    return;
  }
  loop *lp = c->lp;
  while (c->calls) nrd_srv_grpc_call_detach(c->calls);
  c->closed = true;
  c->grave_next = lp->graveyard;
  lp->graveyard = c;
  if (c->prev)
    c->prev->next = c->next;
  else
    lp->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  epoll_ctl(lp->epfd, EPOLL_CTL_DEL, c->fd, NULL);
  nrd_srv_tls_conn_free(c->tls);
  c->tls = NULL;
  close(c->fd);
  /* Streams still in the session get no close callback from session_del;
   * they were detached above. */
  nghttp2_session_del(c->sess);
  c->sess = NULL;
  free(c->wbuf);
  c->wbuf = NULL;
}

/* How long an ended connection reads what its client still sends. */
#define LINGER_US 1000000u

/* Ends c gracefully once everything queued for it is written: the calls
 * and the session go (as conn_close does), our side of the socket is shut
 * and c waits on lp->lingering (see linger_until_us). TLS connections
 * close at once (a TLS close_notify would be needed first). */
static void conn_linger(conn *c) {
  if (c->closed || c->linger_until_us) return;
  if (c->tls) {
    conn_close(c);
    return;
  }
  loop *lp = c->lp;
  while (c->calls) nrd_srv_grpc_call_detach(c->calls);
  if (c->prev)
    c->prev->next = c->next;
  else
    lp->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  c->prev = c->next = NULL;
  nghttp2_session_del(c->sess);
  c->sess = NULL;
  free(c->wbuf);
  c->wbuf = NULL;
  c->wlen = c->woff = c->wcap = 0;
  shutdown(c->fd, SHUT_WR);
  c->linger_until_us = now_us() + LINGER_US;
  c->linger_next = lp->lingering;
  lp->lingering = c;
}

/* Closes a lingering connection's socket; its memory goes to the graveyard. */
static void linger_end(conn *c) {
  loop *lp = c->lp;
  for (conn **p = &lp->lingering; *p; p = &(*p)->linger_next) {
    if (*p == c) {
      *p = c->linger_next;
      break;
    }
  }
  c->linger_until_us = 0;
  c->closed = true;
  c->grave_next = lp->graveyard;
  lp->graveyard = c;
  epoll_ctl(lp->epfd, EPOLL_CTL_DEL, c->fd, NULL);
  /* A close with unread bytes in the receive queue sends a reset, and a
   * reset can make the client's kernel drop responses it has not read
   * yet: empty the queue first (bounded; the socket is non-blocking). */
  uint8_t buf[16384];
  for (int i = 0; i < 64 && read(c->fd, buf, sizeof buf) > 0; i++) {
  }
  close(c->fd);
}

/* Drops what the client of a lingering connection sent; closes it at the
 * client's end of stream or on an error. More than 16 buffers at once:
 * the (level-triggered) epoll reports the rest. */
static void linger_read(conn *c) {
  uint8_t buf[16384];
  for (int i = 0; i < 16; i++) {
    ssize_t n = read(c->fd, buf, sizeof buf);
    if (n > 0) continue;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    linger_end(c);
    return;
  }
}

/* Closes the lingering connections whose time is over (all with `all`). */
static void linger_sweep(loop *lp, uint64_t now, bool all) {
  for (conn *c = lp->lingering, *next; c; c = next) {
    next = c->linger_next;
    if (all || now >= c->linger_until_us) linger_end(c);
  }
}

/* After the batch: nothing refers to closed connections any more (the
 * dirty list was emptied first). */
static void loop_bury(loop *lp) {
  while (lp->graveyard) {
    conn *c = lp->graveyard;
    lp->graveyard = c->grave_next;
    free(c);
  }
}

/* Enters or leaves the throttled state; leaving acknowledges the data held
 * back and starts the stream messages that waited. Returns true if it
 * queued frames. */
static bool conn_update_throttle(conn *c) {
  bool t = c->out_bytes > CONN_OUT_HIGH || (c->throttled && c->out_bytes > CONN_OUT_LOW);
  if (t == c->throttled) return false;
  c->throttled = t;
  if (t) return false;
  for (nrd_srv_grpc_call *call = c->calls; call;) {
    nrd_srv_grpc_call *next = call->next; /* delivery may finish the call, not detach it */
    if (call->unconsumed) {
      nghttp2_session_consume(c->sess, call->id, call->unconsumed);
      call->unconsumed = 0;
    }
    if (call->m && call->m->streaming && !call->done && call->in_len >= 5) nrd_srv_grpc_call_deliver(call, false);
    call = next;
  }
  return true;
}

static void conn_update_events(conn *c, bool want_out) {
  if (want_out == c->want_out) return;
  c->want_out = want_out;
  struct epoll_event ev = {.events = EPOLLIN | (want_out ? (uint32_t)EPOLLOUT : 0u), .data.ptr = c};
  epoll_ctl(c->lp->epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

/* Writes what nghttp2 has to send. Returns false if the connection closed. */
static bool conn_flush(conn *c) {
  if (c->tls && !c->tls_ready) return true; /* the handshake flushes when it is done */
  conn_update_throttle(c);
  for (;;) {
    while (c->woff < c->wlen) {
      bool want_out = true;
      ssize_t w = c->tls ? nrd_srv_tls_write(c->tls, c->wbuf + c->woff, c->wlen - c->woff, &want_out)
                         : write(c->fd, c->wbuf + c->woff, c->wlen - c->woff);
      if (w < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
          /* TLS may need the peer's bytes first: the next read retries. */
          conn_update_events(c, want_out || c->tls_read_wants_out);
          return true;
        }
        conn_close(c);
        return false;
      }
      c->woff += (size_t)w;
    }
    c->woff = c->wlen = 0;
    /* Gather frames into one write. */
    while (c->wlen < (256u << 10)) {
      const uint8_t *data = NULL;
      ssize_t n = nghttp2_session_mem_send(c->sess, &data);
      if (n < 0) {
        conn_close(c);
        return false;
      }
      if (n == 0) break;
      if (c->wlen + (size_t)n > c->wcap) {
        size_t cap = c->wcap ? c->wcap : 16384;
        while (cap < c->wlen + (size_t)n) cap *= 2;
        uint8_t *nb = realloc(c->wbuf, cap);
        if (nb == NULL) {
          conn_close(c);
          return false;
        }
        c->wbuf = nb;
        c->wcap = cap;
      }
      memcpy(c->wbuf + c->wlen, data, (size_t)n);
      c->wlen += (size_t)n;
    }
    if (c->wlen == 0) {
      if (conn_update_throttle(c)) continue; /* WINDOW_UPDATEs to send */
      break;
    }
  }
  conn_update_events(c, c->tls_read_wants_out);
  if (c->close_after_flush || (!nghttp2_session_want_read(c->sess) && !nghttp2_session_want_write(c->sess))) {
    conn_linger(c); /* everything is written */
    return false;
  }
  return true;
}

static void conn_read(conn *c) {
  uint8_t buf[65536];
  if (c->tls_read_wants_out) {
    c->tls_read_wants_out = false;
    conn_update_events(c, false); /* conn_flush asks again if it has bytes waiting */
  }
  /* At most 16 reads, so one busy connection cannot starve the loop's
   * others; but bytes TLS already took off the socket are read now, since
   * epoll would not announce them again. */
  for (int i = 0; i < 16 || (c->tls && nrd_srv_tls_pending(c->tls)); i++) {
    bool want_out = false;
    ssize_t n = c->tls ? nrd_srv_tls_read(c->tls, buf, sizeof buf, &want_out) : read(c->fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        if (want_out) {
          c->tls_read_wants_out = true;
          conn_update_events(c, true);
        }
        break;
      }
      conn_close(c);
      return;
    }
    if (n == 0) {
      conn_close(c);
      return;
    }
    c->last_activity_us = now_us();
    ssize_t rv = nghttp2_session_mem_recv(c->sess, buf, (size_t)n);
    if (rv < 0) {
      /* Protocol error: nghttp2 queued GOAWAY; try to send it, then close. */
      if (conn_flush(c)) conn_close(c);
      return;
    }
    if (c->close_after_flush) {
      /* GOAWAY queued: discard what the client already sent, so closing
       * the socket does not reset the connection before it reads GOAWAY. */
      while (read(c->fd, buf, sizeof buf) > 0) {
      }
      break;
    }
    /* A short read emptied the socket; TLS returns one record at a time. */
    if (!c->tls && (size_t)n < sizeof buf) break;
  }
  conn_mark_dirty(c);
}

static void conn_new(loop *lp, int fd) {
  conn *c = calloc(1, sizeof *c);
  if (c == NULL) {
    close(fd);
    return;
  }
  c->kind = KIND_CONN;
  c->lp = lp;
  c->fd = fd;
  c->last_activity_us = c->accepted_us = now_us();
  if (lp->g->tls && (c->tls = nrd_srv_tls_conn_new(lp->g->tls, fd)) == NULL) {
    free(c);
    close(fd);
    return;
  }
  nghttp2_session_callbacks *cbs = NULL;
  if (nghttp2_session_callbacks_new(&cbs) != 0) {
    free(c);
    close(fd);
    return;
  }
  nrd_srv_grpc_stream_callbacks(cbs);
  nghttp2_option *opt = NULL;
  int rv = nghttp2_option_new(&opt);
  if (rv == 0) {
    /* We acknowledge received data ourselves (backpressure, see above). */
    nghttp2_option_set_no_auto_window_update(opt, 1);
    /* The request headers are checked as gRPC checks them (on_header,
     * call_check_headers), not by nghttp2's HTTP rules: gRPC's own
     * statuses, and 9% fewer instructions per small call. */
    nghttp2_option_set_no_http_messaging(opt, 1);
    nghttp2_mem mem = {&lp->blocks, nrd_srv_block_malloc, nrd_srv_block_free, nrd_srv_block_calloc,
                       nrd_srv_block_realloc};
    rv = nghttp2_session_server_new3(&c->sess, cbs, c, opt, &mem);
    nghttp2_option_del(opt);
  }
  nghttp2_session_callbacks_del(cbs);
  if (rv != 0) {
    nrd_srv_tls_conn_free(c->tls);
    free(c);
    close(fd);
    return;
  }
  nghttp2_settings_entry iv[4] = {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 1000},
                                  {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1u << 20},
                                  {NGHTTP2_SETTINGS_MAX_FRAME_SIZE, 1u << 16},
                                  {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1}};
  nghttp2_submit_settings(c->sess, NGHTTP2_FLAG_NONE, iv, 4);
  nghttp2_session_set_local_window_size(c->sess, NGHTTP2_FLAG_NONE, 0, 16 << 20);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
  if (epoll_ctl(lp->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
    nghttp2_session_del(c->sess);
    nrd_srv_tls_conn_free(c->tls);
    free(c);
    close(fd);
    return;
  }
  c->next = lp->conns;
  if (lp->conns) lp->conns->prev = c;
  lp->conns = c;
  conn_mark_dirty(c);
}

/* Moves the TLS handshake on when the socket is ready. Once it is done,
 * our SETTINGS go out and whatever the client sent after its handshake is
 * read. A failed handshake closes the connection (logged verbosely: port
 * scanners and clients without TLS are not the server's errors). */
static void conn_tls_handshake(conn *c) {
  bool want_out = false;
  char why[256];
  int r = nrd_srv_tls_handshake(c->tls, &want_out, why, sizeof why);
  if (r < 0) {
    char msg[320];
    snprintf(msg, sizeof msg, "gRPC: TLS handshake failed: %s", why);
    srv_log(TRITONSERVER_LOG_VERBOSE, msg);
    conn_close(c);
    return;
  }
  if (r == 0) {
    conn_update_events(c, want_out);
    return;
  }
  c->tls_ready = true;
  conn_update_events(c, false);
  conn_read(c);
  if (!c->closed) conn_mark_dirty(c);
}

/* ---- loops ----------------------------------------------------------------- */

static void loop_run_event(nrd_srv_grpc_event *ev) {
  nrd_srv_grpc_call *call = ev->call;
  ev->run(ev, call->c != NULL);
  nrd_srv_grpc_call_unref(call);
}

/* Keeps an event until its due time: after those due no later, so events
 * due together run in the order they came. */
static void loop_add_timer(loop *lp, nrd_srv_grpc_event *ev) {
  nrd_srv_inbox_item **pp = &lp->timers;
  while (*pp && ((nrd_srv_grpc_event *)*pp)->due_us <= ev->due_us) pp = &(*pp)->next;
  ev->link.next = *pp;
  *pp = &ev->link;
}

/* Runs the waiting events that are due (all of them once the stop gave up
 * waiting: their calls are closed by then). */
static void loop_run_timers(loop *lp, uint64_t now) {
  while (lp->timers && (lp->aborted || ((nrd_srv_grpc_event *)lp->timers)->due_us <= now)) {
    nrd_srv_grpc_event *ev = (nrd_srv_grpc_event *)lp->timers;
    lp->timers = ev->link.next;
    loop_run_event(ev);
  }
}

/* How long the loop may wait for I/O (ms) when it would wait `wait_ms`:
 * less when an event falls due sooner. */
static int loop_wait_ms(const loop *lp, int wait_ms) {
  if (lp->timers == NULL || wait_ms == 0) return wait_ms;
  uint64_t now = now_us(), due = ((const nrd_srv_grpc_event *)lp->timers)->due_us;
  if (due <= now) return 0;
  uint64_t ms = (due - now + 999) / 1000;
  return ms < (uint64_t)wait_ms ? (int)ms : wait_ms;
}

static void loop_run_events(loop *lp) {
  nrd_srv_inbox_item *it = nrd_srv_inbox_take(&lp->inbox);
  while (it) {
    nrd_srv_grpc_event *ev = (nrd_srv_grpc_event *)it;
    it = it->next;
    if (ev->due_us && !lp->aborted) {
      loop_add_timer(lp, ev); /* even when due: after those due before it */
      continue;
    }
    loop_run_event(ev);
  }
  if (lp->timers) loop_run_timers(lp, now_us());
}

/* Keepalive: after keepalive_time of silence from the client send a PING
 * (only while a call is open unless keepalive_permit_without_calls, and at
 * most max_pings_without_data of them between data frames we send); close
 * the connection if it is not acknowledged within keepalive_timeout. */
static void loop_check_keepalive(loop *lp, uint64_t now) {
  const nrd_srv_grpc_options *o = &lp->g->opts;
  if (o->keepalive_time_ms == 0) return;
  for (conn *c = lp->conns; c;) {
    conn *next = c->next;
    if (c->ping_sent_us && now - c->ping_sent_us > (uint64_t)o->keepalive_timeout_ms * 1000u) {
      conn_close(c);
    } else if (!c->ping_sent_us && now - c->last_activity_us > (uint64_t)o->keepalive_time_ms * 1000u &&
               (c->calls || o->keepalive_permit_without_calls) &&
               (o->max_pings_without_data == 0 || c->pings_without_data < o->max_pings_without_data)) {
      if (nghttp2_submit_ping(c->sess, NGHTTP2_FLAG_NONE, NULL) == 0) {
        c->ping_sent_us = now;
        c->pings_without_data++;
        conn_mark_dirty(c);
      }
    }
    c = next;
  }
}

/* A connection that has not sent its preface and SETTINGS within the
 * handshake timeout is closed, as gRPC's server does: a client that only
 * opens connections cannot hold descriptors for ever. */
static void loop_check_handshakes(loop *lp, uint64_t now) {
  uint64_t limit = (uint64_t)lp->g->opts.handshake_timeout_secs * 1000000u;
  for (conn *c = lp->conns, *next; c; c = next) {
    next = c->next;
    if (!c->greeted && now - c->accepted_us > limit) conn_close(c);
  }
}

/* Whether every call of c has handed its last frame to nghttp2. */
static bool conn_calls_ended(const conn *c) {
  for (const nrd_srv_grpc_call *call = c->calls; call; call = call->next)
    if (!call->ended) return false;
  return true;
}

static void conn_end(conn *c);

/* max_connection_age: GOAWAY once a connection is that old (the client's
 * open calls go on, new ones go to a new connection), close it when its
 * calls have ended, or when the grace is over, ending what is left. */
static void loop_check_age(loop *lp, uint64_t now) {
  const nrd_srv_grpc_options *o = &lp->g->opts;
  if (o->max_connection_age_ms == 0) return;
  for (conn *c = lp->conns, *next; c; c = next) {
    next = c->next;
    if (!c->aged_us) {
      if (now - c->accepted_us < (uint64_t)o->max_connection_age_ms * 1000u) continue;
      c->aged_us = now;
      nghttp2_submit_goaway(c->sess, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(c->sess),
                            NGHTTP2_NO_ERROR, NULL, 0);
      conn_mark_dirty(c);
    }
    if (o->max_connection_age_grace_ms && now - c->aged_us >= (uint64_t)o->max_connection_age_grace_ms * 1000u) {
      conn_end(c); /* cancels what is still in the core */
    } else if (conn_calls_ended(c) && !c->close_after_flush) {
      c->close_after_flush = true;
      conn_mark_dirty(c);
    }
  }
}

static void loop_check_deadlines(loop *lp, uint64_t now) {
  for (conn *c = lp->conns; c; c = c->next) {
    for (nrd_srv_grpc_call *call = c->calls; call; call = call->next) {
      if (call->deadline_us && !call->done && now >= call->deadline_us) {
        nrd_srv_grpc_call_abort(call, NRD_GRPC_DEADLINE_EXCEEDED, "Deadline Exceeded");
      }
    }
  }
}

/* Writes what it can of c's output, then closes it (lingering when all
 * of it was written). */
static void conn_end(conn *c) {
  nghttp2_session_terminate_session(c->sess, NGHTTP2_NO_ERROR);
  if (conn_flush(c)) conn_close(c); /* false: closed or lingering already */
}

/* The loop's last act: lets the lingering connections see their clients
 * close (LINGER_US at most), then closes what is left. New connections
 * are refused meanwhile. */
static void loop_linger_out(loop *lp) {
  struct epoll_event evs[64];
  while (lp->lingering) {
    uint64_t now = now_us();
    linger_sweep(lp, now, false);
    if (!lp->lingering) break;
    int n = epoll_wait(lp->epfd, evs, 64, 20);
    for (int i = 0; i < n; i++) {
      void *tag = evs[i].data.ptr;
      if (tag == &lp->kind_listener) {
        for (int fd; (fd = nrd_srv_acceptor_next(&lp->acceptor)) >= 0;) close(fd);
      } else if (tag != &lp->kind_wake) {
        conn *c = tag;
        if (c->linger_until_us) linger_read(c);
      }
    }
    nrd_srv_inbox_awake(&lp->inbox);
    loop_run_events(lp); /* events of calls already gone: dropped */
  }
}

/* Shutdown, graceful part. A streaming call with nothing left in the core
 * and no part of a message waiting ends with UNAVAILABLE (a message its
 * client sends before that gets an error response: see grpc_infer.c), and
 * a connection whose calls have all handed their last frame to nghttp2
 * closes once its output is written. Unary calls run to their end. */
static void loop_drain(loop *lp) {
  for (conn *c = lp->conns; c; c = c->next) {
    bool open = false;
    for (nrd_srv_grpc_call *call = c->calls; call; call = call->next) {
      if (!call->done && call->m && call->m->streaming && call->in_len == 0 && atomic_load(&call->refs) == 1)
        nrd_srv_grpc_call_finish(call, NRD_GRPC_UNAVAILABLE, "Server is stopping");
      if (!call->ended) open = true;
    }
    if (!open && !c->close_after_flush) {
      c->close_after_flush = true;
      conn_mark_dirty(c);
    }
  }
}

static void *loop_main(void *arg) {
  loop *lp = arg;
  nrd_srv_grpc *g = lp->g;
  struct epoll_event evs[64];
  uint64_t next_sweep = now_us() + 100000;
  for (;;) {
    if (atomic_load(&g->stopping) && !lp->closing) {
      lp->closing = true;
      for (conn *c = lp->conns; c; c = c->next) {
        /* Streams the client opened so far go on; it must not open more. */
        nghttp2_submit_goaway(c->sess, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(c->sess),
                              NGHTTP2_NO_ERROR, NULL, 0);
        conn_mark_dirty(c);
      }
      /* Messages sent before the signal may still wait in the sockets:
       * read them before the first loop_drain, which would otherwise end
       * their streams as idle and drop them unseen. */
      for (conn *c = lp->conns, *next; c; c = next) {
        next = c->next;
        if (!c->tls || c->tls_ready) conn_read(c);
      }
    }
    if (lp->closing && !lp->aborted && atomic_load(&g->aborting)) {
      lp->aborted = true;
      while (lp->conns) conn_end(lp->conns); /* cancels what is in the core */
    }
    if (lp->closing) {
      loop_run_events(lp);
      if (atomic_load(&g->live_calls) == 0) {
        while (lp->conns) conn_end(lp->conns); /* no calls left: only their last bytes */
        loop_linger_out(lp);
        break;
      }
      loop_drain(lp);
    }
    bool idle = nrd_srv_inbox_idle(&lp->inbox);
    int n = epoll_wait(lp->epfd, evs, 64, nrd_srv_acceptor_timeout(&lp->acceptor, loop_wait_ms(lp, idle ? 100 : 0)));
    nrd_srv_inbox_awake(&lp->inbox); /* events run below; posts meanwhile need no wake-up */
    nrd_srv_acceptor_tick(&lp->acceptor);
    for (int i = 0; i < n; i++) {
      void *tag = evs[i].data.ptr;
      if (tag == &lp->kind_listener) {
        for (int k = 0; k < 64; k++) {
          int fd = nrd_srv_acceptor_next(&lp->acceptor);
          if (fd < 0) break;
          if (lp->closing)
            close(fd); /* shutting down: refused at once, not left waiting */
          else
            conn_new(lp, fd);
        }
      } else if (tag == &lp->kind_wake) {
        /* the inbox: loop_run_events below */
      } else {
        conn *c = tag;
        if (c->linger_until_us) {
          linger_read(c);
        } else if (c->closed) {
          /* closed earlier in this batch */
        } else if (c->tls && !c->tls_ready) {
          conn_tls_handshake(c);
        } else if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR) || c->tls_read_wants_out) {
          conn_read(c);
        } else if (evs[i].events & EPOLLOUT) {
          conn_mark_dirty(c);
        }
      }
    }
    loop_run_events(lp);
    uint64_t now = now_us();
    if (now >= next_sweep) {
      loop_check_deadlines(lp, now);
      loop_check_keepalive(lp, now);
      loop_check_handshakes(lp, now);
      loop_check_age(lp, now);
      linger_sweep(lp, now, false);
      next_sweep = now + 100000;
    }
    while (lp->dirty) {
      conn *c = lp->dirty;
      lp->dirty = c->dirty_next;
      c->is_dirty = false;
      if (!c->closed && !c->linger_until_us) conn_flush(c);
    }
    loop_bury(lp);
  }
  lp->dirty = NULL; /* only closed connections can be left on it */
  loop_bury(lp);
  return NULL;
}

/* ---- start / stop ------------------------------------------------------------- */

static void grpc_free(nrd_srv_grpc *g) {
  nrd_srv_header_forward_free(g->header_forward);
  nrd_srv_tls_free(g->tls);
  free(g);
}

static void loops_free(nrd_srv_grpc *g) {
  for (unsigned i = 0; i < g->n_loops; i++) {
    loop *lp = &g->loops[i];
    if (lp->has_inbox) nrd_srv_inbox_destroy(&lp->inbox);
    if (lp->epfd >= 0) close(lp->epfd);
    nrd_srv_block_cache_destroy(&lp->blocks); /* its sessions are gone */
  }
  free(g->loops);
}

TRITONSERVER_Error *nrd_srv_grpc_start(TRITONSERVER_Server *server, const nrd_srv_grpc_options *opts,
                                       nrd_srv_grpc **out) {
  *out = NULL;
  if (opts->threads < 1 || opts->threads > 256)
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "gRPC thread count must be between 1 and 256");
  nrd_srv_grpc *g = calloc(1, sizeof *g);
  if (g == NULL) return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  g->server = server;
  g->opts = *opts;
  if (g->opts.handshake_timeout_secs == 0) g->opts.handshake_timeout_secs = NRD_SRV_GRPC_HANDSHAKE_TIMEOUT_DEFAULT;
  atomic_init(&g->live_calls, 0);
  atomic_init(&g->stopping, false);
  atomic_init(&g->aborting, false);
  char msg[512];
  if (opts->header_forward &&
      !(g->header_forward = nrd_srv_header_forward_new(opts->header_forward, false, msg, sizeof msg))) {
    grpc_free(g);
    char full[600];
    snprintf(full, sizeof full, "--grpc-header-forward-pattern: %s", msg);
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, full);
  }
  if (opts->tls && (g->tls = nrd_srv_tls_new(opts->tls, msg, sizeof msg)) == NULL) {
    grpc_free(g);
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, msg);
  }
  int rc = nrd_srv_listen(opts->address, opts->port, opts->reuse_port, &g->listen_fd, &g->port, msg, sizeof msg);
  if (rc != 0) {
    grpc_free(g);
    return TRITONSERVER_ErrorNew(rc == -1 ? TRITONSERVER_ERROR_INVALID_ARG : TRITONSERVER_ERROR_UNAVAILABLE, msg);
  }
  TRITONSERVER_Error *err = NULL;
  g->loops = calloc(opts->threads, sizeof *g->loops);
  if (g->loops == NULL) {
    close(g->listen_fd);
    grpc_free(g);
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  }
  g->n_loops = opts->threads;
  for (unsigned i = 0; i < g->n_loops; i++) g->loops[i].epfd = -1; /* loops_free after a break */
  for (unsigned i = 0; i < g->n_loops; i++) {
    loop *lp = &g->loops[i];
    lp->g = g;
    lp->kind_listener = KIND_LISTENER;
    lp->kind_wake = KIND_WAKE;
    lp->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (lp->epfd >= 0 && nrd_srv_inbox_init(&lp->inbox, lp->epfd, &lp->kind_wake) == 0) lp->has_inbox = true;
    if (!lp->has_inbox ||
        nrd_srv_acceptor_init(&lp->acceptor, g->listen_fd, lp->epfd, &lp->kind_listener, "gRPC") != 0) {
      err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "cannot create the gRPC event loop (epoll/eventfd)");
      break;
    }
  }
  for (unsigned i = 0; err == NULL && i < g->n_loops; i++) {
    if (pthread_create(&g->loops[i].thread, NULL, loop_main, &g->loops[i]) != 0)
      err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "cannot start a gRPC loop thread");
    else
      g->loops[i].started = true;
  }
  if (err) {
    atomic_store(&g->stopping, true);
    for (unsigned i = 0; i < g->n_loops; i++) {
      if (!g->loops[i].started) continue;
      nrd_srv_inbox_wake(&g->loops[i].inbox);
      pthread_join(g->loops[i].thread, NULL);
    }
    loops_free(g);
    close(g->listen_fd);
    grpc_free(g);
    return err;
  }
  *out = g;
  return NULL;
}

int nrd_srv_grpc_port(const nrd_srv_grpc *g) { return g->port; }

void nrd_srv_grpc_drain(nrd_srv_grpc *g) {
  if (g == NULL) return;
  atomic_store(&g->stopping, true);
  for (unsigned i = 0; i < g->n_loops; i++) nrd_srv_inbox_wake(&g->loops[i].inbox);
}

bool nrd_srv_grpc_stop(nrd_srv_grpc *g, unsigned wait_secs) {
  if (g == NULL) return true;
  nrd_srv_grpc_drain(g);
  uint64_t until = now_us() + (uint64_t)wait_secs * 1000000u;
  while (atomic_load(&g->live_calls) > 0 && now_us() < until) usleep(10000);
  if (atomic_load(&g->live_calls) > 0) {
    /* Time is up: close what is left, cancelling its requests in the core,
     * and give the core a moment to hand them back. */
    atomic_store(&g->aborting, true);
    for (unsigned i = 0; i < g->n_loops; i++) nrd_srv_inbox_wake(&g->loops[i].inbox);
    uint64_t grace = now_us() + 2000000u;
    while (atomic_load(&g->live_calls) > 0 && now_us() < grace) usleep(10000);
  }
  if (atomic_load(&g->live_calls) > 0) {
    /* The core still holds requests: leave the loops running (they own the
     * calls) rather than free memory a core thread may still post to. */
    srv_log(TRITONSERVER_LOG_WARN, "gRPC front end: requests still in the core at shutdown; not waiting longer");
    /* Nobody will join them now: they end on their own, or with the process. */
    for (unsigned i = 0; i < g->n_loops; i++) pthread_detach(g->loops[i].thread);
    return false;
  }
  for (unsigned i = 0; i < g->n_loops; i++) pthread_join(g->loops[i].thread, NULL);
  loops_free(g);
  close(g->listen_fd);
  grpc_free(g);
  return true;
}
