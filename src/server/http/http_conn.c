/* HTTP/1.1 connections on the front end's epoll loops: reading requests
 * (keep-alive, pipelining, Content-Length and chunked bodies, Expect:
 * 100-continue, size limits), handing them to the routes one at a time,
 * and writing replies with one sendmsg of the header text and the body
 * pieces, which may reference output tensors (no copy).
 *
 * Buffers: a connection receives into one buffer. The request being handled
 * (its head, headers and body) stays in place there until it is answered,
 * so inference inputs can point into it; the buffer only grows or moves
 * between requests, or while a request's body is still arriving (then the
 * head's pointers are rebased). A body is read straight into a buffer
 * sized for it, with large reads.
 *
 * Threads: everything here runs on the loop thread that owns the
 * connection, holding the connection's lock where a request may be with
 * the core, or on a thread that claimed the connection to answer its
 * request (nrd_srv_http_pending_claim), holding the lock. A claimer never
 * closes the connection or touches the loop's lists: what needs the loop
 * (closing, resuming pipelined input, a failed write) it hands back by
 * asking for EPOLLOUT, which wakes the loop into flush(). Connections are
 * freed only between event batches (see graveyard), so an event already
 * collected never sees freed memory. */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <netinet/in.h>
#include <netinet/tcp.h>

#include "http_internal.h"
#include "http_json.h"
#include "fmt.h"

#define HEAD_MAX (64 * 1024) /* request line + headers */
#define RBUF_MIN (16 * 1024) /* first receive buffer */
#define RBUF_KEEP (256 * 1024) /* larger buffers are dropped once idle */
#define WQ_MAX (4 * 1024 * 1024) /* queued reply bytes before we stop parsing */
#define IOV_MAX_BATCH 64
#define LINGER_MAX (16 * 1024 * 1024) /* input dropped after an early answer */
#define LINGER_SECS 2

typedef enum conn_state {
  ST_HEAD, /* waiting for a complete request head */
  ST_BODY, /* Content-Length body arriving */
  ST_CHUNKED, /* chunked body arriving, decoded in place */
  ST_BUSY, /* a request is with the routes or the core */
  ST_SKIP /* answered early (too large): reading is over, close after writing */
} conn_state;

typedef enum chunk_state { CH_SIZE, CH_DATA, CH_DATA_END, CH_TRAILER } chunk_state;

struct nrd_srv_http_conn {
  nrd_srv_http_loop *loop;
  nrd_srv_http_conn *prev, *next; /* loop->conns while open */
  nrd_srv_http_conn *resume_next; /* loop->resume */
  bool on_resume;
  int fd;
  uint32_t events; /* epoll interest now */
  conn_state state;
  char *rbuf;
  size_t rcap, rlen; /* bytes [0, rlen) received */
  size_t scan; /* where the search for the end of the head resumes */
  size_t head_end; /* the body starts here */
  size_t body_need; /* Content-Length */
  size_t next_pos; /* the next pipelined request starts here */
  /* chunked decoding: decoded body is [head_end, cw), raw input from cr */
  size_t cw, cr;
  uint64_t chunk_left;
  uint32_t chunks; /* non-empty chunks of this body so far (MAX_CHUNKS) */
  chunk_state cstate;
  bool expect_continue;
  nrd_srv_http_req req;
  /* write queue */
  nrd_srv_http_seg *wq;
  size_t wq_head, wq_n, wq_cap, woff, wq_bytes;
  bool close_after_write;
  bool in_process; /* process() is on the stack: it will pick up what comes */
  char head_buf[384]; /* the reply head, when nothing else is queued */
  bool dead; /* socket closed */
  bool claimed; /* held by a claimer (the lock is taken) */
  pthread_mutex_t mu; /* the loop holds it around its work on the connection; a claimer, throughout */
  bool wr_shut; /* lingering close: writes shut down, input dropped */
  size_t skipped; /* bytes dropped after an early answer */
  time_t last; /* last progress, loop->now */
  time_t head_since; /* the current request head's first byte (or the connection's start) */
  uint64_t recv_start_ns; /* the same on the trace clock, kept only while tracing is active */
  time_t wr_last; /* queued output: when it last moved (or was queued) */
  time_t linger_since; /* wr_shut: when; the close follows LINGER_SECS later, input or not */
};

static void conn_close(nrd_srv_http_conn *c);
static void process(nrd_srv_http_conn *c);

/* ---- small helpers -------------------------------------------------------- */

static const char *reason(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 415: return "Unsupported Media Type";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

static void set_events(nrd_srv_http_conn *c, uint32_t events) {
  if (c->dead || c->events == events) return;
  struct epoll_event ev = {.events = events, .data.ptr = c};
  if (epoll_ctl(c->loop->epfd, EPOLL_CTL_MOD, c->fd, &ev) == 0) c->events = events;
}

/* A claimer's way to leave work to the loop: EPOLLOUT fires at once on a
 * writable socket, and the loop's flush() finishes what is left. */
static void hand_back(nrd_srv_http_conn *c) { set_events(c, c->events | EPOLLOUT); }

static void want_resume(nrd_srv_http_conn *c) {
  if (c->claimed) {
    hand_back(c);
    return;
  }
  if (c->on_resume || c->dead) return;
  c->on_resume = true;
  c->resume_next = c->loop->resume;
  c->loop->resume = c;
}

/* Conns closed this batch, freed by nrd_srv_http_conn_resume_all. */
static __thread nrd_srv_http_conn *graveyard;

static void conn_free(nrd_srv_http_conn *c) {
  pthread_mutex_destroy(&c->mu);
  free(c->rbuf);
  free(c->wq);
  free(c);
}

/* ---- write queue ------------------------------------------------------------ */

static void seg_release(nrd_srv_http_seg *s) {
  if (s->release) s->release(s->arg);
  s->release = NULL;
}

static void wq_drop(nrd_srv_http_conn *c) {
  for (size_t i = 0; i < c->wq_n; i++) seg_release(&c->wq[(c->wq_head + i) % c->wq_cap]);
  c->wq_head = c->wq_n = c->woff = c->wq_bytes = 0;
}

static int wq_push(nrd_srv_http_conn *c, nrd_srv_http_seg s) {
  if (c->wq_n == c->wq_cap) {
    size_t cap = c->wq_cap ? c->wq_cap * 2 : 16;
    nrd_srv_http_seg *n = malloc(cap * sizeof *n);
    if (n == NULL) {
      seg_release(&s);
      return -1;
    }
    for (size_t i = 0; i < c->wq_n; i++) n[i] = c->wq[(c->wq_head + i) % c->wq_cap];
    free(c->wq);
    c->wq = n;
    c->wq_cap = cap;
    c->wq_head = 0;
  }
  if (c->wq_n == 0) c->wr_last = c->loop->now; /* the reader's time starts now */
  c->wq[(c->wq_head + c->wq_n) % c->wq_cap] = s;
  c->wq_n++;
  c->wq_bytes += s.len;
  return 0;
}

/* Writes as much of the queue as the socket takes. */
static void flush(nrd_srv_http_conn *c) {
  while (c->wq_n > 0 && !c->dead) {
    struct iovec iov[IOV_MAX_BATCH];
    int n = 0;
    for (size_t i = 0; i < c->wq_n && n < IOV_MAX_BATCH; i++) {
      nrd_srv_http_seg *s = &c->wq[(c->wq_head + i) % c->wq_cap];
      size_t off = i == 0 ? c->woff : 0;
      if (s->len == off) continue;
      iov[n].iov_base = (void *)(s->data + off);
      iov[n].iov_len = s->len - off;
      n++;
    }
    ssize_t w = 0;
    if (n > 0) {
      struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
      w = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
      if (w < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        if (c->claimed) {
          hand_back(c); /* the loop's flush meets the error again and closes */
          return;
        }
        conn_close(c);
        return;
      }
      c->last = c->loop->now;
      if (w > 0) c->wr_last = c->loop->now;
    }
    size_t left = (size_t)w;
    while (c->wq_n > 0) {
      nrd_srv_http_seg *s = &c->wq[c->wq_head];
      size_t rest = s->len - c->woff;
      if (left < rest) {
        c->woff += left;
        c->wq_bytes -= left;
        break;
      }
      left -= rest;
      c->wq_bytes -= rest;
      seg_release(s);
      c->wq_head = (c->wq_head + 1) % c->wq_cap;
      c->wq_n--;
      c->woff = 0;
    }
  }
  if (c->dead) return;
  uint32_t ev = c->events & ~(uint32_t)EPOLLOUT;
  if (c->wq_n > 0) ev |= EPOLLOUT;
  set_events(c, ev);
  if (c->wq_n == 0 && c->close_after_write) {
    if (c->claimed) {
      hand_back(c);
      return;
    }
    if (c->state == ST_SKIP && !c->wr_shut) {
      /* Lingering close: a close() with unread input would reset the
       * connection and could destroy the answer before the client reads
       * it, so stop writing and read what is still coming, briefly. */
      shutdown(c->fd, SHUT_WR);
      c->wr_shut = true;
      c->linger_since = c->loop->now;
      return;
    }
    conn_close(c);
    return;
  }
  /* Parsing paused for a full queue may go on now. */
  if (c->wq_bytes < WQ_MAX && c->state != ST_BUSY && c->rlen > 0 && !c->in_process) want_resume(c);
}

/* Queues a small text (copied). */
static int wq_text(nrd_srv_http_conn *c, const char *s, size_t len) {
  char *copy = malloc(len ? len : 1);
  if (copy == NULL) return -1;
  memcpy(copy, s, len);
  return wq_push(c, (nrd_srv_http_seg){copy, len, free, copy});
}

/* Answers a request we could not parse (or too large) and closes. */
/* The sentence for a body over the body bound (`size`: its length as far
 * as it is known; `limit`: 4 x --http-max-input-size). Triton r25.07 has
 * no body bound, only its per-input sentences (http_infer.c), so this one
 * is ours; answered 400 as Triton answered its older body check.
 * The text lives in the loop thread's buffer until the next call. */
static const char *too_large(uint64_t size, size_t limit) {
  static _Thread_local char text[200];
  snprintf(text, sizeof text,
           "request body of %" PRIu64 " bytes exceeds the body limit of %zu bytes (4 x --http-max-input-size). Use "
           "--http-max-input-size to increase the limit.",
           size, limit);
  return text;
}

static void reject(nrd_srv_http_conn *c, int status, const char *msg) {
  char buf[512];
  char body[300];
  int blen = snprintf(body, sizeof body, "{\"error\":\"%s\"}", msg);
  int n = snprintf(buf, sizeof buf,
                   "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                   "Connection: close\r\n\r\n%s",
                   status, reason(status), blen, body);
  c->state = ST_SKIP;
  c->close_after_write = true;
  c->rlen = 0; /* whatever else arrives is read and dropped */
  if (wq_text(c, buf, (size_t)n) != 0) {
    conn_close(c);
    return;
  }
  set_events(c, c->events | EPOLLIN);
  flush(c);
}

/* ---- receive buffer ---------------------------------------------------------- */

/* Points the head's pointers at the buffer's new place. Only pointers into
 * the old buffer move: the path and query may also be constant strings
 * ("/" for an absolute-form target without a path, "" for no query). */
static void rebase(nrd_srv_http_conn *c, uintptr_t old, size_t old_cap, char *now) {
  nrd_srv_http_req *r = &c->req;
#define REBASE(p)                                                                                                      \
  if ((uintptr_t)(p)-old < old_cap) (p) = now + ((uintptr_t)(p)-old)
  if (r->path) REBASE(r->path);
  if (r->query) REBASE(r->query);
  for (size_t i = 0; i < r->n_headers; i++) {
    REBASE(r->headers[i].name);
    REBASE(r->headers[i].value);
  }
#undef REBASE
}

/* Makes room for `total` bytes in the buffer. Returns 0 or -1. */
static int reserve(nrd_srv_http_conn *c, size_t total) {
  if (total <= c->rcap) return 0;
  size_t cap = c->rcap ? c->rcap : RBUF_MIN;
  while (cap < total) cap = cap > SIZE_MAX / 2 ? total : cap * 2;
  uintptr_t old = (uintptr_t)c->rbuf;
  char *n = realloc(c->rbuf, cap);
  if (n == NULL) return -1;
  if (old && (uintptr_t)n != old && c->state != ST_HEAD) rebase(c, old, c->rcap, n);
  c->rbuf = n;
  c->rcap = cap;
  return 0;
}

/* Moves what follows the answered request to the front of the buffer. */
static void compact(nrd_srv_http_conn *c) {
  size_t rest = c->rlen - c->next_pos;
  if (rest > 0 && c->next_pos > 0) memmove(c->rbuf, c->rbuf + c->next_pos, rest);
  c->rlen = rest;
  c->next_pos = 0;
  c->scan = 0;
}

/* A large buffer is kept while its client keeps sending large requests
 * and given back once the connection has been idle a little. */
static void shrink_if_idle(nrd_srv_http_conn *c) {
  if (c->rlen == 0 && c->rcap > RBUF_KEEP && c->state == ST_HEAD && c->loop->now - c->last >= 2) {
    free(c->rbuf);
    c->rbuf = NULL;
    c->rcap = 0;
  }
}

/* ---- request head ------------------------------------------------------------- */

static nrd_srv_http_method parse_method(const char *m) {
  if (strcmp(m, "GET") == 0) return NRD_SRV_HTTP_GET;
  if (strcmp(m, "POST") == 0) return NRD_SRV_HTTP_POST;
  if (strcmp(m, "HEAD") == 0) return NRD_SRV_HTTP_HEAD;
  if (strcmp(m, "PUT") == 0) return NRD_SRV_HTTP_PUT;
  if (strcmp(m, "DELETE") == 0) return NRD_SRV_HTTP_DELETE;
  return NRD_SRV_HTTP_OTHER;
}

/* RFC 9110 tchar: visible ASCII except the delimiters "(),/:;<=>?@[\]{}. */
static bool is_token_char(unsigned char ch) {
  static const uint32_t tchar[8] = {
      0x00000000u, 0x03ff6cfau, 0xc7fffffeu, 0x57ffffffu, 0, 0, 0, 0,
  };
  return (tchar[ch >> 5] >> (ch & 31)) & 1u;
}

/* Does the comma-separated header value list `v` hold `token`? */
static bool has_token(const char *v, const char *token) {
  size_t tl = strlen(token);
  while (v && *v) {
    while (*v == ' ' || *v == '\t' || *v == ',') v++;
    const char *e = v;
    while (*e && *e != ',') e++;
    const char *t = e;
    while (t > v && (t[-1] == ' ' || t[-1] == '\t')) t--;
    if ((size_t)(t - v) == tl && strncasecmp(v, token, tl) == 0) return true;
    v = e;
  }
  return false;
}

/* Records a header the server reads on every request (the first of each
 * name; Content-Length counted, since two of them are an error). One
 * comparison at most: the length picks the candidate. */
static void note_known(nrd_srv_http_req *r, const char *name, size_t len, size_t index) {
  nrd_srv_http_known k;
  const char *want;
  switch (len) {
    case 6: k = NRD_SRV_H_EXPECT, want = "Expect"; break;
    case 10: k = NRD_SRV_H_CONNECTION, want = "Connection"; break;
    case 14: k = NRD_SRV_H_CONTENT_LENGTH, want = "Content-Length"; break;
    case 15: k = NRD_SRV_H_ACCEPT_ENCODING, want = "Accept-Encoding"; break;
    case 16: k = NRD_SRV_H_CONTENT_ENCODING, want = "Content-Encoding"; break;
    case 17: k = NRD_SRV_H_TRANSFER_ENCODING, want = "Transfer-Encoding"; break;
    case 31: k = NRD_SRV_H_INFERENCE_HEADER_CONTENT_LENGTH, want = "Inference-Header-Content-Length"; break;
    default: return;
  }
  if (strcasecmp(name, want) != 0) return;
  if (k == NRD_SRV_H_CONTENT_LENGTH) r->n_content_length++;
  if (r->known[k] == 0) r->known[k] = (uint8_t)(index + 1);
}

/* Parses the head [0, head_end) in place (NUL-terminating its parts) into
 * c->req and works out how the body comes. Returns 0, or an HTTP status
 * with msg for a request we refuse. */
static int parse_head(nrd_srv_http_conn *c, const char **msg) {
  nrd_srv_http_req *r = &c->req;
  char *p = c->rbuf;
  char *end = c->rbuf + c->head_end;
  *msg = "malformed request";
  if (memchr(p, '\0', c->head_end)) return 400;
  /* request line */
  char *eol = memchr(p, '\n', (size_t)(end - p));
  if (eol == NULL) return 400;
  char *line_end = eol > p && eol[-1] == '\r' ? eol - 1 : eol;
  *line_end = '\0';
  char *sp1 = strchr(p, ' ');
  if (sp1 == NULL || sp1 == p) return 400;
  *sp1 = '\0';
  for (char *m = p; *m; m++)
    if (!is_token_char((unsigned char)*m)) return 400;
  r->method = parse_method(p);
  char *target = sp1 + 1;
  char *sp2 = strchr(target, ' ');
  if (sp2 == NULL || sp2 == target) return 400;
  *sp2 = '\0';
  const char *version = sp2 + 1;
  if (strcmp(version, "HTTP/1.1") == 0) {
    r->http10 = false;
  } else if (strcmp(version, "HTTP/1.0") == 0) {
    r->http10 = true;
  } else {
    *msg = "only HTTP/1.0 and HTTP/1.1 are served";
    return strncmp(version, "HTTP/", 5) == 0 ? 505 : 400;
  }
  if (strncmp(target, "http://", 7) == 0 || strncmp(target, "https://", 8) == 0) {
    char *slash = strchr(strstr(target, "//") + 2, '/');
    target = slash ? slash : (char *)"/";
  }
  if (*target != '/' && strcmp(target, "*") != 0) return 400;
  char *q = strchr(target, '?');
  r->query = "";
  if (q) {
    *q = '\0';
    r->query = q + 1;
  }
  char *hash = strchr(target, '#');
  if (hash) *hash = '\0';
  r->path = target;
  /* headers */
  r->n_headers = 0;
  p = eol + 1;
  while (p < end) {
    eol = memchr(p, '\n', (size_t)(end - p));
    if (eol == NULL) return 400;
    line_end = eol > p && eol[-1] == '\r' ? eol - 1 : eol;
    if (line_end == p) break; /* the blank line */
    if (*p == ' ' || *p == '\t') {
      *msg = "folded header lines are not accepted";
      return 400;
    }
    *line_end = '\0';
    char *colon = strchr(p, ':');
    if (colon == NULL || colon == p) return 400;
    for (char *h = p; h < colon; h++)
      if (!is_token_char((unsigned char)*h)) return 400;
    *colon = '\0';
    char *v = colon + 1;
    while (*v == ' ' || *v == '\t') v++;
    char *ve = line_end;
    while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t')) ve--;
    *ve = '\0';
    if (r->n_headers == NRD_SRV_HTTP_MAX_HEADERS) {
      *msg = "too many request headers";
      return 431;
    }
    note_known(r, p, (size_t)(colon - p), r->n_headers);
    r->headers[r->n_headers++] = (nrd_srv_http_header){p, v};
    p = eol + 1;
  }
  /* connection persistence */
  const char *conn = nrd_srv_http_header_known(r, NRD_SRV_H_CONNECTION);
  r->keep_alive = r->http10 ? has_token(conn, "keep-alive") : !has_token(conn, "close");
  /* body framing */
  const char *te = nrd_srv_http_header_known(r, NRD_SRV_H_TRANSFER_ENCODING);
  const char *cl = nrd_srv_http_header_known(r, NRD_SRV_H_CONTENT_LENGTH);
  size_t n_cl = r->n_content_length;
  const char *expect = nrd_srv_http_header_known(r, NRD_SRV_H_EXPECT);
  c->expect_continue = !r->http10 && expect && strcasecmp(expect, "100-continue") == 0;
  size_t limit = c->loop->http->max_body;
  if (te) {
    if (cl) {
      *msg = "both Content-Length and Transfer-Encoding given";
      return 400;
    }
    if (strcasecmp(te, "chunked") != 0) {
      *msg = "unsupported Transfer-Encoding (only chunked is accepted)";
      return 501;
    }
    c->state = ST_CHUNKED;
    c->cw = c->cr = c->head_end;
    c->cstate = CH_SIZE;
    c->chunk_left = 0;
    c->chunks = 0;
    return 0;
  }
  uint64_t len = 0;
  if (cl) {
    if (n_cl > 1 || *cl == '\0') {
      *msg = "bad Content-Length";
      return 400;
    }
    for (const char *d = cl; *d; d++) {
      if (*d < '0' || *d > '9') {
        *msg = "bad Content-Length";
        return 400;
      }
      if (len > (UINT64_MAX - 9) / 10) {
        len = UINT64_MAX;
        break;
      }
      len = len * 10 + (uint64_t)(*d - '0');
    }
  }
  if (len > limit) {
    *msg = too_large(len, limit);
    return 400;
  }
  c->body_need = (size_t)len;
  c->state = ST_BODY;
  return 0;
}

/* ---- dispatch --------------------------------------------------------------- */

static void reset_req(nrd_srv_http_req *r, nrd_srv_http_conn *c) {
  if (r->out_headers != r->out_headers_inline) free(r->out_headers);
  free(r->body_owned);
  for (size_t i = 0; i < r->n_segs; i++) seg_release(&r->segs[i]);
  if (r->segs != r->segs_inline) free(r->segs);
  /* The header table and inline buffers need no clearing. */
  memset(r, 0, offsetof(nrd_srv_http_req, headers));
  r->n_headers = 0;
  r->body = NULL;
  r->body_len = 0;
  r->body_owned = NULL;
  r->out_headers = r->out_headers_inline;
  r->out_headers_len = 0;
  r->out_headers_cap = sizeof r->out_headers_inline;
  r->segs = r->segs_inline;
  r->n_segs = 0;
  r->cap_segs = sizeof r->segs_inline / sizeof r->segs_inline[0];
  r->out_len = 0;
  r->answered = false;
  r->pending = NULL;
  r->recv_start_ns = r->recv_end_ns = 0;
  r->conn = c;
}

static void dispatch(nrd_srv_http_conn *c, char *body, size_t body_len, size_t next_pos) {
  nrd_srv_http_req *r = &c->req;
  r->body = body;
  r->body_len = body_len;
  if (c->recv_start_ns) {
    r->recv_start_ns = c->recv_start_ns;
    r->recv_end_ns = nrd_srv_trace_now_ns();
    c->recv_start_ns = 0;
  }
  c->next_pos = next_pos;
  c->state = ST_BUSY;
  c->expect_continue = false;
  nrd_srv_http_route(c->loop, r);
}

/* More of a chunked body is needed: drops the framing already decoded
 * (moving what is not yet parsed next to the decoded body), so the buffer
 * holds little more than the body however small the chunks. Returns 0. */
static int chunk_wait(nrd_srv_http_conn *c) {
  size_t rest = c->rlen - c->cr;
  if (c->cr != c->cw && rest > 0) memmove(c->rbuf + c->cw, c->rbuf + c->cr, rest);
  c->rlen = c->cw + rest;
  c->cr = c->cw;
  return 0;
}

/* Triton's cap on the non-empty chunks of one body (server 13480cbf3).
 * Decoding here is in place and costs nothing per chunk, but a client
 * that sends a body in 1-byte chunks gets Triton's answer from us too. */
#define MAX_CHUNKS 65536u

/* Decodes as much of a chunked body as has arrived. Returns 1 when the
 * body is complete, 0 when more is needed, or an HTTP status. */
static int dechunk(nrd_srv_http_conn *c, const char **msg) {
  char *b = c->rbuf;
  size_t limit = c->loop->http->max_body;
  *msg = "malformed chunked body";
  for (;;) {
    switch (c->cstate) {
      case CH_SIZE:
      case CH_TRAILER: {
        char *nl = memchr(b + c->cr, '\n', c->rlen - c->cr);
        if (nl == NULL) return c->rlen - c->cr > 1024 ? 400 : chunk_wait(c);
        char *line = b + c->cr;
        size_t ll = (size_t)(nl - line);
        if (ll > 0 && line[ll - 1] == '\r') ll--;
        c->cr = (size_t)(nl - b) + 1;
        if (c->cstate == CH_TRAILER) {
          if (ll == 0) return 1;
          continue;
        }
        uint64_t n = 0;
        size_t i = 0;
        for (; i < ll; i++) {
          char ch = line[i];
          int v = ch >= '0' && ch <= '9'   ? ch - '0'
                  : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                  : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                           : -1;
          if (v < 0) break;
          if (n > (UINT64_MAX >> 4)) {
            *msg = too_large(UINT64_MAX, limit);
            return 400;
          }
          n = (n << 4) | (uint64_t)v;
        }
        if (i == 0 || (i < ll && line[i] != ';' && line[i] != ' ' && line[i] != '\t')) return 400;
        if (n > limit || (c->cw - c->head_end) + n > limit) {
          *msg = too_large((c->cw - c->head_end) + n, limit);
          return 400;
        }
        if (n != 0 && ++c->chunks > MAX_CHUNKS) {
          *msg = "Chunked request body exceeds maximum of 65536 non-empty chunks. Send fewer or larger HTTP chunks.";
          return 400;
        }
        c->chunk_left = n;
        c->cstate = n == 0 ? CH_TRAILER : CH_DATA;
        continue;
      }
      case CH_DATA: {
        size_t avail = c->rlen - c->cr;
        if (avail == 0) return chunk_wait(c);
        size_t take = avail < c->chunk_left ? avail : (size_t)c->chunk_left;
        if (c->cw != c->cr) memmove(b + c->cw, b + c->cr, take);
        c->cw += take;
        c->cr += take;
        c->chunk_left -= take;
        if (c->chunk_left == 0) c->cstate = CH_DATA_END;
        continue;
      }
      case CH_DATA_END: {
        size_t avail = c->rlen - c->cr;
        if (avail == 0) return chunk_wait(c);
        if (b[c->cr] == '\n') {
          c->cr++;
        } else if (b[c->cr] == '\r') {
          if (avail < 2) return chunk_wait(c);
          if (b[c->cr + 1] != '\n') return 400;
          c->cr += 2;
        } else {
          return 400;
        }
        c->cstate = CH_SIZE;
        continue;
      }
    }
  }
}

/* Finds, parses and dispatches complete requests in the buffer, until one
 * is with the core, more input is needed, or the write queue is full. */
/* The end of the head in buf[from, len): just past its first blank line,
 * a line end (LF, CR optional before it) followed by CRLF or a bare LF.
 * 0 when the head is not complete yet. */
static size_t head_end(const char *buf, size_t from, size_t len) {
  const char *p = buf + from, *stop = buf + len;
  while ((p = memchr(p, '\n', (size_t)(stop - p))) != NULL) {
    p++;
    if (p < stop && *p == '\n') return (size_t)(p + 1 - buf);
    if (stop - p >= 2 && p[0] == '\r' && p[1] == '\n') return (size_t)(p + 2 - buf);
    if (stop - p < 2) break; /* the rest may still come */
  }
  return 0;
}

static void process(nrd_srv_http_conn *c) {
  c->in_process = true;
  while (!c->dead && c->wq_bytes < WQ_MAX) {
    const char *msg = NULL;
    if (c->state == ST_HEAD) {
      if (c->rlen == 0) break;
      size_t from = c->scan > 3 ? c->scan - 3 : 0;
      size_t end = head_end(c->rbuf, from, c->rlen);
      if (end == 0) {
        c->scan = c->rlen;
        if (c->rlen > HEAD_MAX) reject(c, 431, "request head is too large");
        break;
      }
      if (end > HEAD_MAX) {
        reject(c, 431, "request head is too large");
        break;
      }
      reset_req(&c->req, c);
      c->head_end = end;
      int st = parse_head(c, &msg);
      if (st) {
        c->state = ST_HEAD;
        reject(c, st, msg);
        break;
      }
    }
    if (c->state == ST_BODY) {
      size_t have = c->rlen - c->head_end;
      if (have >= c->body_need) {
        dispatch(c, c->rbuf + c->head_end, c->body_need, c->head_end + c->body_need);
      } else {
        if (reserve(c, c->head_end + c->body_need) != 0) {
          reject(c, 500, "out of memory for the request body");
          break;
        }
        if (c->expect_continue) {
          c->expect_continue = false;
          static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
          wq_push(c, (nrd_srv_http_seg){cont, sizeof cont - 1, NULL, NULL});
          flush(c);
        }
        break;
      }
    } else if (c->state == ST_CHUNKED) {
      if (c->expect_continue) {
        c->expect_continue = false;
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        wq_push(c, (nrd_srv_http_seg){cont, sizeof cont - 1, NULL, NULL});
        flush(c);
        if (c->dead) break;
      }
      int st = dechunk(c, &msg);
      if (st == 0) break;
      if (st != 1) {
        reject(c, st, msg);
        break;
      }
      dispatch(c, c->rbuf + c->head_end, c->cw - c->head_end, c->cr);
    }
    if (c->state == ST_BUSY) break; /* with the core: resumed when answered */
    if (c->state != ST_HEAD) break;
  }
  c->in_process = false;
}

/* The request was answered: prepare for the next one on the connection. */
static void request_done(nrd_srv_http_conn *c) {
  nrd_srv_http_req *r = &c->req;
  /* Draining: also a reply begun before shutdown (a stream) is the last. */
  bool keep = r->keep_alive && !c->loop->draining;
  reset_req(r, c);
  if (c->dead) return;
  c->state = ST_HEAD;
  if (!keep) {
    c->close_after_write = true;
    set_events(c, c->events & ~(uint32_t)EPOLLIN);
    if (c->wq_n == 0) {
      if (c->claimed)
        hand_back(c);
      else
        conn_close(c);
    }
    return;
  }
  compact(c);
  c->head_since = c->loop->now; /* a pipelined head's time starts when it is its turn */
  if (c->rlen > 0 && nrd_srv_tracer_active(c->loop->http->tracer)) c->recv_start_ns = nrd_srv_trace_now_ns();
  set_events(c, c->events | EPOLLIN);
  if (!c->in_process && c->rlen > 0) want_resume(c);
}

/* ---- socket events -------------------------------------------------------------- */

static void do_read(nrd_srv_http_conn *c) {
  for (int rounds = 0; rounds < 4 && !c->dead; rounds++) {
    if (c->state == ST_SKIP && c->rcap == 0 && reserve(c, RBUF_MIN) != 0) {
      conn_close(c);
      return;
    }
    bool busy = c->state == ST_BUSY || c->state == ST_SKIP || c->wq_bytes >= WQ_MAX;
    if (c->rlen == c->rcap) {
      if (busy) {
        /* No room and the buffer must not move: wait until answered. */
        set_events(c, c->events & ~(uint32_t)EPOLLIN);
        return;
      }
      size_t want = c->rcap ? c->rcap * 2 : RBUF_MIN;
      size_t most = c->loop->http->max_body + HEAD_MAX + 2 * RBUF_MIN;
      if (want > most) want = most;
      if (want <= c->rcap) {
        if (c->state == ST_HEAD)
          reject(c, 431, "request head is too large");
        else
          reject(c, 400, too_large(c->rlen, c->loop->http->max_body));
        return;
      }
      if (reserve(c, want) != 0) {
        conn_close(c);
        return;
      }
    }
    if (c->state == ST_HEAD && c->rlen == 0) c->head_since = c->loop->now;
    ssize_t n = read(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen);
    if (n == 0) {
      conn_close(c); /* the client went away: a pending request is cancelled */
      return;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) conn_close(c);
      return;
    }
    if (c->state == ST_HEAD && c->rlen == 0 && nrd_srv_tracer_active(c->loop->http->tracer))
      c->recv_start_ns = nrd_srv_trace_now_ns();
    c->rlen += (size_t)n;
    c->last = c->loop->now;
    if (c->state == ST_SKIP) {
      c->skipped += (size_t)n;
      c->rlen = 0; /* discarded */
      if (c->skipped > LINGER_MAX) {
        conn_close(c);
        return;
      }
      continue;
    }
    if (!busy) process(c);
    /* A short read emptied the socket; a full one may have more behind it. */
    if (c->rlen < c->rcap) return;
  }
}

static void conn_io(nrd_srv_http_conn *c, uint32_t events) {
  if (c->dead) return;
  if (events & EPOLLOUT) flush(c);
  if (c->dead) return;
  if (events & EPOLLIN) do_read(c);
  if (c->dead) return;
  if (events & (EPOLLERR | EPOLLHUP)) {
    conn_close(c);
    return;
  }
  if ((events & EPOLLRDHUP) && !(c->events & EPOLLIN)) conn_close(c);
}

void nrd_srv_http_conn_io(nrd_srv_http_conn *c, uint32_t events) {
  pthread_mutex_lock(&c->mu);
  conn_io(c, events);
  pthread_mutex_unlock(&c->mu);
}

void nrd_srv_http_conn_open(nrd_srv_http_loop *loop, int fd) {
  nrd_srv_http_conn *c = calloc(1, sizeof *c);
  if (c == NULL) {
    close(fd);
    return;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  c->loop = loop;
  c->fd = fd;
  pthread_mutex_init(&c->mu, NULL);
  c->state = ST_HEAD;
  reset_req(&c->req, c);
  c->last = loop->now;
  c->head_since = loop->now;
  c->events = EPOLLIN | EPOLLRDHUP;
  struct epoll_event ev = {.events = c->events, .data.ptr = c};
  if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
    close(fd);
    pthread_mutex_destroy(&c->mu);
    free(c);
    return;
  }
  c->next = loop->conns;
  if (loop->conns) loop->conns->prev = c;
  loop->conns = c;
  atomic_fetch_add_explicit(&loop->http->open_conns, 1, memory_order_relaxed);
}

static void conn_close(nrd_srv_http_conn *c) {
  assert(!c->claimed);
  if (c->dead) return;
  c->dead = true;
  nrd_srv_http_loop *loop = c->loop;
  /* Out of epoll before the close: a process forked meanwhile (a Python
   * stub, before its exec) may still hold the socket, and epoll forgets a
   * socket only when its last holder closes it; it would then report
   * events for this freed connection. */
  epoll_ctl(loop->epfd, EPOLL_CTL_DEL, c->fd, NULL);
  close(c->fd);
  c->fd = -1;
  atomic_fetch_sub_explicit(&loop->http->open_conns, 1, memory_order_release);
  wq_drop(c);
  if (c->prev)
    c->prev->next = c->next;
  else if (loop->conns == c)
    loop->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  c->prev = c->next = NULL;
  nrd_srv_http_pending *p = c->req.pending;
  if (p && !c->req.answered) {
    /* The work still points at the request: the connection is freed when it
     * finishes (nrd_srv_http_pending_finish). */
    p->gone = true;
    if (p->on_disconnect) p->on_disconnect(p);
    return;
  }
  reset_req(&c->req, c);
  if (!c->on_resume) {
    c->resume_next = graveyard;
    graveyard = c;
    c->on_resume = true; /* parked: never queued twice */
  }
}

void nrd_srv_http_conn_resume_all(nrd_srv_http_loop *loop) {
  while (loop->resume) {
    nrd_srv_http_conn *list = loop->resume;
    loop->resume = NULL;
    while (list) {
      nrd_srv_http_conn *c = list;
      list = c->resume_next;
      c->on_resume = false;
      if (c->dead) {
        if (c->req.pending == NULL) {
          c->resume_next = graveyard;
          graveyard = c;
          c->on_resume = true;
        }
        continue;
      }
      pthread_mutex_lock(&c->mu);
      process(c);
      pthread_mutex_unlock(&c->mu);
    }
  }
  while (graveyard) {
    nrd_srv_http_conn *c = graveyard;
    graveyard = c->resume_next;
    conn_free(c);
  }
}

static void expire_one(nrd_srv_http_conn *c, time_t now, time_t secs) {
  bool with_core = c->state == ST_BUSY && !c->req.answered && c->req.pending;
  if (c->wr_shut) {
    if (now - c->linger_since >= LINGER_SECS) conn_close(c);
  } else if (c->wq_n > 0 && now - c->wr_last > secs) {
    conn_close(c); /* the client stopped reading; what it asked the core is cancelled */
  } else if (with_core || c->wq_n > 0) {
    shrink_if_idle(c); /* a reply is on its way or being written */
  } else if (c->state == ST_HEAD && c->rlen > 0 && now - c->head_since > secs) {
    reject(c, 408, "request head not received in time (--http-client-timeout-secs)");
  } else if ((c->state == ST_BODY || c->state == ST_CHUNKED) && now - c->last > secs) {
    reject(c, 408, "request body stalled (--http-client-timeout-secs)");
  } else if (now - c->last > secs) {
    conn_close(c); /* idle between requests, or no progress of any kind */
  } else {
    shrink_if_idle(c);
  }
}

void nrd_srv_http_conn_expire(nrd_srv_http_loop *loop, time_t secs) {
  time_t now = loop->now;
  for (nrd_srv_http_conn *c = loop->conns, *next; c; c = next) {
    next = c->next;
    pthread_mutex_lock(&c->mu);
    expire_one(c, now, secs);
    pthread_mutex_unlock(&c->mu);
  }
}

/* Whether the client's bytes wait in the socket, not read yet. */
static bool conn_has_unread(const nrd_srv_http_conn *c) {
  char b;
  return recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

void nrd_srv_http_conn_close_idle(nrd_srv_http_loop *loop) {
  for (nrd_srv_http_conn *c = loop->conns, *next; c; c = next) {
    next = c->next;
    pthread_mutex_lock(&c->mu);
    /* No request in progress, and none sent before the signal still in the
     * socket: a request that arrived is read and answered (its reply is
     * the connection's last), not dropped with the connection. */
    if (c->state == ST_HEAD && c->rlen == 0 && !conn_has_unread(c)) {
      if (c->wq_n == 0)
        conn_close(c);
      else
        c->close_after_write = true; /* its last reply is still being written */
    }
    pthread_mutex_unlock(&c->mu);
  }
  nrd_srv_http_conn_resume_all(loop);
}

void nrd_srv_http_conn_close_all(nrd_srv_http_loop *loop) {
  while (loop->conns) {
    nrd_srv_http_conn *c = loop->conns;
    pthread_mutex_lock(&c->mu);
    conn_close(c);
    pthread_mutex_unlock(&c->mu);
  }
  nrd_srv_http_conn_resume_all(loop);
}

/* ---- pending requests ------------------------------------------------------------ */

void nrd_srv_http_pending_add(nrd_srv_http_loop *loop, nrd_srv_http_pending *p, nrd_srv_http_req *req) {
  p->req = req;
  p->gone = false;
  req->pending = p;
  atomic_fetch_add_explicit(&loop->http->in_flight, 1, memory_order_relaxed);
}

nrd_srv_http_req *nrd_srv_http_pending_req(nrd_srv_http_pending *p) {
  return p->gone || p->req == NULL ? NULL : p->req;
}

nrd_srv_http_req *nrd_srv_http_pending_finish(nrd_srv_http_loop *loop, nrd_srv_http_pending *p) {
  atomic_fetch_sub_explicit(&loop->http->in_flight, 1, memory_order_relaxed);
  nrd_srv_http_req *r = p->req;
  p->req = NULL;
  if (r == NULL) return NULL;
  r->pending = NULL;
  if (!p->gone) return r;
  nrd_srv_http_conn *c = r->conn;
  reset_req(r, c);
  if (!c->on_resume) {
    c->resume_next = graveyard;
    graveyard = c;
    c->on_resume = true;
  }
  return NULL;
}

nrd_srv_http_req *nrd_srv_http_pending_claim(nrd_srv_http_pending *p) {
  nrd_srv_http_req *r = p->req; /* set before the work began; cleared only by its finisher */
  if (r == NULL) return NULL;
  nrd_srv_http_conn *c = r->conn; /* kept while the request is pending */
  /* Only when the post would wake the loop: an awake loop answers soon
   * and cheaply, and keeps the reply's work off the core's threads. */
  if (!nrd_srv_inbox_asleep(&c->loop->inbox)) return NULL;
  if (pthread_mutex_trylock(&c->mu) != 0) return NULL; /* the loop is at it */
  if (p->gone || c->dead) {
    pthread_mutex_unlock(&c->mu);
    return NULL;
  }
  p->req = NULL;
  r->pending = NULL;
  c->claimed = true;
  return r;
}

void nrd_srv_http_conn_unclaim(nrd_srv_http_conn *c) {
  c->claimed = false;
  pthread_mutex_unlock(&c->mu);
}

void nrd_srv_http_pending_done(nrd_srv_http *h) { atomic_fetch_sub_explicit(&h->in_flight, 1, memory_order_release); }

/* ---- request and reply API ---------------------------------------------------------- */

const char *nrd_srv_http_header_get(const nrd_srv_http_req *req, const char *name) {
  for (size_t i = 0; i < req->n_headers; i++)
    if (strcasecmp(req->headers[i].name, name) == 0) return req->headers[i].value;
  return NULL;
}

const char *nrd_srv_http_body(const nrd_srv_http_req *req, size_t *len) {
  *len = req->body_len;
  return req->body_len ? req->body : "";
}

void nrd_srv_http_set_body(nrd_srv_http_req *req, char *buf, size_t len) {
  free(req->body_owned);
  req->body_owned = buf;
  req->body = buf;
  req->body_len = len;
}

int nrd_srv_http_add_header(nrd_srv_http_req *req, const char *name, const char *value) {
  size_t nl = strlen(name), vl = strlen(value);
  size_t need = req->out_headers_len + nl + vl + 4;
  if (need > req->out_headers_cap) {
    size_t cap = need * 2;
    char *n = malloc(cap);
    if (n == NULL) return -1;
    memcpy(n, req->out_headers, req->out_headers_len);
    if (req->out_headers != req->out_headers_inline) free(req->out_headers);
    req->out_headers = n;
    req->out_headers_cap = cap;
  }
  char *p = req->out_headers + req->out_headers_len;
  memcpy(p, name, nl);
  p[nl] = ':';
  p[nl + 1] = ' ';
  memcpy(p + nl + 2, value, vl);
  p[nl + 2 + vl] = '\r';
  p[nl + 3 + vl] = '\n';
  req->out_headers_len = need;
  return 0;
}

static int push_seg(nrd_srv_http_req *req, nrd_srv_http_seg s) {
  if (req->n_segs == req->cap_segs) {
    size_t cap = req->cap_segs * 2;
    nrd_srv_http_seg *n = malloc(cap * sizeof *n);
    if (n == NULL) {
      seg_release(&s);
      return -1;
    }
    memcpy(n, req->segs, req->n_segs * sizeof *n);
    if (req->segs != req->segs_inline) free(req->segs);
    req->segs = n;
    req->cap_segs = cap;
  }
  req->segs[req->n_segs++] = s;
  req->out_len += s.len;
  return 0;
}

int nrd_srv_http_add_body(nrd_srv_http_req *req, const void *data, size_t len) {
  if (len == 0) return 0;
  char *copy = malloc(len);
  if (copy == NULL) return -1;
  memcpy(copy, data, len);
  return push_seg(req, (nrd_srv_http_seg){copy, len, free, copy});
}

int nrd_srv_http_add_body_ref(nrd_srv_http_req *req, const void *data, size_t len, void (*release)(void *arg),
                              void *arg) {
  return push_seg(req, (nrd_srv_http_seg){data, len, release, arg});
}

void nrd_srv_http_clear_body(nrd_srv_http_req *req) {
  for (size_t i = 0; i < req->n_segs; i++) seg_release(&req->segs[i]);
  req->n_segs = 0;
  req->out_len = 0;
  req->out_headers_len = 0;
}

/* Appends n bytes at *o if they fit before end; false when they do not. */
static bool put(char **o, const char *end, const char *s, size_t n) {
  if ((size_t)(end - *o) < n) return false;
  memcpy(*o, s, n);
  *o += n;
  return true;
}
#define PUT_LIT(o, end, lit) put((o), (end), (lit), sizeof(lit) - 1)

/* Writes the status line and headers into buf (cap bytes). Returns the
 * length, or 0 when it does not fit. (No snprintf: this runs per reply.) */
static size_t format_head(const nrd_srv_http_req *req, int status, bool chunked, char *buf, size_t cap) {
  char *o = buf;
  const char *end = buf + cap;
  const char *why = reason(status);
  char num[24];
  bool ok = PUT_LIT(&o, end, "HTTP/1.1 ");
  ok = ok && put(&o, end, num, nrd_srv_fmt_u64(num, (uint64_t)(status > 0 ? status : 0)));
  ok = ok && PUT_LIT(&o, end, " ") && put(&o, end, why, strlen(why)) && PUT_LIT(&o, end, "\r\n");
  ok = ok && put(&o, end, req->out_headers, req->out_headers_len);
  if (!chunked) {
    ok = ok && PUT_LIT(&o, end, "Content-Length: ");
    ok = ok && put(&o, end, num, nrd_srv_fmt_u64(num, req->out_len)) && PUT_LIT(&o, end, "\r\n");
  } else {
    ok = ok && PUT_LIT(&o, end, "Transfer-Encoding: chunked\r\n");
  }
  if (!req->keep_alive)
    ok = ok && PUT_LIT(&o, end, "Connection: close\r\n");
  else if (req->http10)
    ok = ok && PUT_LIT(&o, end, "Connection: keep-alive\r\n");
  ok = ok && PUT_LIT(&o, end, "\r\n");
  return ok ? (size_t)(o - buf) : 0;
}

static int queue_head(nrd_srv_http_req *req, int status, bool chunked) {
  nrd_srv_http_conn *c = req->conn;
  if (c->loop->draining) req->keep_alive = false; /* shutting down: this reply is the last */
  if (c->wq_n == 0) {
    /* Nothing queued: the previous head is out, so its buffer is free. */
    size_t n = format_head(req, status, chunked, c->head_buf, sizeof c->head_buf);
    if (n) return wq_push(c, (nrd_srv_http_seg){c->head_buf, n, NULL, NULL});
  }
  char stack[512];
  size_t need = req->out_headers_len + 256;
  char *buf = need <= sizeof stack ? stack : malloc(need);
  if (buf == NULL) return -1;
  size_t n = format_head(req, status, chunked, buf, need <= sizeof stack ? sizeof stack : need);
  int rc = n ? wq_text(c, buf, n) : -1;
  if (buf != stack) free(buf);
  return rc;
}

void nrd_srv_http_send(nrd_srv_http_req *req, int status) {
  nrd_srv_http_conn *c = req->conn;
  req->answered = true;
  if (c->dead) {
    reset_req(req, c);
    return;
  }
  if (queue_head(req, status, false) != 0) {
    conn_close(c);
    return;
  }
  bool head_only = req->method == NRD_SRV_HTTP_HEAD;
  for (size_t i = 0; i < req->n_segs; i++) {
    if (head_only) {
      seg_release(&req->segs[i]);
      continue;
    }
    if (wq_push(c, req->segs[i]) != 0) {
      for (size_t k = i + 1; k < req->n_segs; k++) seg_release(&req->segs[k]);
      req->n_segs = 0;
      conn_close(c);
      return;
    }
  }
  req->n_segs = 0;
  flush(c);
  request_done(c);
}

void nrd_srv_http_send_start(nrd_srv_http_req *req, int status) {
  nrd_srv_http_conn *c = req->conn;
  if (c->dead) return;
  /* HTTP/1.0 has no chunked encoding: stream raw and close at the end. */
  if (req->http10) req->keep_alive = false;
  if (queue_head(req, status, !req->http10) != 0)
    conn_close(c);
  else
    flush(c);
}

size_t nrd_srv_http_unsent(const nrd_srv_http_req *req) { return req->conn->dead ? 0 : req->conn->wq_bytes; }

void nrd_srv_http_send_chunk(nrd_srv_http_req *req, const void *data, size_t len) {
  nrd_srv_http_conn *c = req->conn;
  if (c->dead || len == 0) return;
  size_t extra = req->http10 ? 0 : 32;
  char *buf = malloc(len + extra);
  if (buf == NULL) {
    conn_close(c);
    return;
  }
  size_t n = 0;
  if (!req->http10) n = (size_t)snprintf(buf, 32, "%zx\r\n", len);
  memcpy(buf + n, data, len);
  n += len;
  if (!req->http10) {
    buf[n++] = '\r';
    buf[n++] = '\n';
  }
  if (wq_push(c, (nrd_srv_http_seg){buf, n, free, buf}) != 0)
    conn_close(c);
  else
    flush(c);
}

void nrd_srv_http_send_end(nrd_srv_http_req *req) {
  nrd_srv_http_conn *c = req->conn;
  req->answered = true;
  if (c->dead) {
    reset_req(req, c);
    return;
  }
  if (!req->http10) {
    static const char last[] = "0\r\n\r\n";
    if (wq_push(c, (nrd_srv_http_seg){last, sizeof last - 1, NULL, NULL}) != 0) {
      conn_close(c);
      return;
    }
  }
  flush(c);
  request_done(c);
}
