/* A gRPC call's sending side, as grpc_call.h promises it to the handlers:
 * the call's accessors and reference count, responses queued for nghttp2,
 * compression, trailers, and ending a call for a transport error. The
 * transport's threads and structures: grpc_internal.h, grpc_server.c. */
#include <nghttp2/nghttp2.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress.h"
#include "fmt.h"
#include "grpc_internal.h"
#include "grpc_values.h"

/* ---- calls --------------------------------------------------------------- */

TRITONSERVER_Server *nrd_srv_grpc_call_server(const nrd_srv_grpc_call *call) { return call->g->server; }

nrd_srv_shm *nrd_srv_grpc_call_shm(const nrd_srv_grpc_call *call) { return call->g->opts.shm; }

bool nrd_srv_grpc_call_draining(const nrd_srv_grpc_call *call) { return call->lp->closing; }

nrd_srv_log_settings *nrd_srv_grpc_call_log(const nrd_srv_grpc_call *call) { return call->g->opts.log; }

nrd_srv_tracer *nrd_srv_grpc_call_tracer(const nrd_srv_grpc_call *call) { return call->g->opts.tracer; }

size_t nrd_srv_grpc_call_forwarded(const nrd_srv_grpc_call *call, char *const **pairs) {
  *pairs = call->forwarded;
  return call->n_forwarded;
}

void nrd_srv_grpc_call_read_times(const nrd_srv_grpc_call *call, uint64_t *start_ns, uint64_t *end_ns) {
  *start_ns = call->read_start_ns;
  *end_ns = call->read_start_ns ? call->read_end_ns : 0;
}

uint64_t nrd_srv_grpc_call_deadline_us(const nrd_srv_grpc_call *call) { return call->deadline_us; }

const char *nrd_srv_grpc_call_traceparent(const nrd_srv_grpc_call *call) {
  return call->traceparent[0] ? call->traceparent : NULL;
}

void nrd_srv_grpc_call_set_state(nrd_srv_grpc_call *call, void *state, void (*free_fn)(void *)) {
  call->state = state;
  call->state_free = free_fn;
}

void *nrd_srv_grpc_call_state(const nrd_srv_grpc_call *call) { return call->state; }

void nrd_srv_grpc_call_ref(nrd_srv_grpc_call *call) { atomic_fetch_add_explicit(&call->refs, 1, memory_order_relaxed); }

static void free_chunks(chunk *c) {
  while (c) {
    chunk *n = c->next;
    free(c->data);
    free(c);
    c = n;
  }
}

void nrd_srv_grpc_call_unref(nrd_srv_grpc_call *call) {
  if (atomic_fetch_sub_explicit(&call->refs, 1, memory_order_acq_rel) != 1) return;
  if (call->state_free) call->state_free(call->state);
  free_chunks(call->out_head);
  free(call->in);
  free(call->status_msg);
  for (size_t i = 0; i < 2 * call->n_forwarded; i++) free(call->forwarded[i]);
  free(call->forwarded);
  nrd_srv_grpc *g = call->g;
  free(call);
  atomic_fetch_sub_explicit(&g->live_calls, 1, memory_order_release);
}

void nrd_srv_grpc_call_post(nrd_srv_grpc_event *ev) {
  ev->due_us = 0;
  nrd_srv_inbox_post(&ev->call->lp->inbox, &ev->link);
}

void nrd_srv_grpc_call_post_at(nrd_srv_grpc_event *ev, uint64_t due_us) {
  ev->due_us = due_us;
  nrd_srv_inbox_post(&ev->call->lp->inbox, &ev->link);
}

uint64_t nrd_srv_grpc_now_us(void) { return now_us(); }

bool nrd_srv_grpc_call_cancelled(const nrd_srv_grpc_call *call) {
  return atomic_load_explicit(&call->cancelled, memory_order_acquire);
}

const nrd_srv_grpc_delays *nrd_srv_grpc_call_delays(const nrd_srv_grpc_call *call) { return &call->g->opts.delays; }

static void cancel_event_run(nrd_srv_grpc_event *ev, bool call_open) {
  (void)call_open;
  ev->call->m->on_cancel(ev->call);
  free(ev);
}

/* The call ended before it finished: marks it cancelled and tells its
 * handler, at once or, under Triton's test hook
 * TRITONSERVER_DELAY_GRPC_NOTIFICATION, that much later (if no memory is
 * left for the wait, at once). Loop thread. */
static void call_notify_cancel(nrd_srv_grpc_call *call) {
  atomic_store_explicit(&call->cancelled, true, memory_order_release);
  if (call->m == NULL || call->m->on_cancel == NULL) return;
  uint64_t delay = call->g->opts.delays.notification_us;
  nrd_srv_grpc_event *ev = delay ? malloc(sizeof *ev) : NULL;
  if (ev == NULL) {
    call->m->on_cancel(call);
    return;
  }
  nrd_srv_grpc_call_ref(call);
  ev->call = call;
  ev->run = cancel_event_run;
  nrd_srv_grpc_call_post_at(ev, now_us() + delay);
}

static ssize_t data_read_cb(nghttp2_session *sess, int32_t id, uint8_t *buf, size_t length, uint32_t *flags,
                            nghttp2_data_source *src, void *user) {
  (void)sess;
  (void)id;
  (void)user;
  nrd_srv_grpc_call *call = src->ptr;
  size_t n = 0;
  while (n < length && call->out_head) {
    chunk *ch = call->out_head;
    size_t take = ch->len - ch->off;
    if (take > length - n) take = length - n;
    memcpy(buf + n, ch->data + ch->off, take);
    ch->off += take;
    n += take;
    if (ch->off == ch->len) {
      call->out_head = ch->next;
      if (call->out_head == NULL) call->out_tail = NULL;
      free(ch->data);
      free(ch);
    }
  }
  call->out_pending -= n < call->out_pending ? n : call->out_pending;
  if (call->c) call->c->out_bytes -= n < call->c->out_bytes ? n : call->c->out_bytes;
  if (call->out_head == NULL && call->done) {
    *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
    char code[24];
    size_t code_len = nrd_srv_fmt_i64(code, call->status);
    bool ok = call->status == 0; /* the usual trailer: a literal, not copied */
    nghttp2_nv tr[2] = {{(uint8_t *)"grpc-status", (uint8_t *)(ok ? "0" : code), 11, code_len,
                         ok ? NV_LITERAL : NGHTTP2_NV_FLAG_NO_COPY_NAME},
                        {(uint8_t *)"grpc-message", (uint8_t *)(call->status_msg ? call->status_msg : ""), 12,
                         call->status_msg ? strlen(call->status_msg) : 0, NGHTTP2_NV_FLAG_NO_COPY_NAME}};
    int rv = nghttp2_submit_trailer(sess, call->id, tr, call->status_msg ? 2 : 1);
    if (rv != 0) return NGHTTP2_ERR_CALLBACK_FAILURE;
    call->ended = true;
    return (ssize_t)n;
  }
  if (n == 0) {
    call->deferred = true;
    return NGHTTP2_ERR_DEFERRED;
  }
  return (ssize_t)n;
}

static void call_submit_headers(nrd_srv_grpc_call *call) {
  const char *enc = call->resp_encoding == ENC_GZIP ? "gzip" : "deflate";
  nghttp2_nv hdrs[4] = {
      {(uint8_t *)":status", (uint8_t *)"200", 7, 3, NV_LITERAL},
      {(uint8_t *)"content-type", (uint8_t *)"application/grpc", 12, 16, NV_LITERAL},
      {(uint8_t *)"grpc-accept-encoding", (uint8_t *)ACCEPT_ENCODING, 20, sizeof ACCEPT_ENCODING - 1, NV_LITERAL},
      {(uint8_t *)"grpc-encoding", (uint8_t *)enc, 13, strlen(enc), NV_LITERAL}};
  size_t n_hdrs = call->resp_encoding != ENC_IDENTITY ? 4 : 3;
  nghttp2_data_provider prd;
  prd.source.ptr = call;
  prd.read_callback = data_read_cb;
  if (nghttp2_submit_response(call->c->sess, call->id, hdrs, n_hdrs, &prd) == 0)
    call->headers_sent = true;
  else
    nghttp2_submit_rst_stream(call->c->sess, NGHTTP2_FLAG_NONE, call->id, NGHTTP2_INTERNAL_ERROR);
}

static void call_kick(nrd_srv_grpc_call *call) {
  if (call->c == NULL) return;
  if (!call->headers_sent) {
    call_submit_headers(call);
  } else if (call->deferred) {
    call->deferred = false;
    nghttp2_session_resume_data(call->c->sess, call->id);
  }
  conn_mark_dirty(call->c);
}

/* Ends the call for a transport-level reason (bad message, deadline, a
 * client that does not read): finishes it with status, ignores the rest of
 * its input, and cancels in the core whatever it had started, since no
 * response can reach the client any more. Loop thread. */
void nrd_srv_grpc_call_abort(nrd_srv_grpc_call *call, int status, const char *message) {
  bool was_done = call->done;
  nrd_srv_grpc_call_finish(call, status, message);
  call->ignoring_input = true;
  if (!was_done) call_notify_cancel(call);
}

/* Frees queued output nghttp2 has not started on (a partly sent first chunk
 * stays, so the message framing on the wire remains intact). */
static void call_drop_unsent(nrd_srv_grpc_call *call) {
  chunk **pp = &call->out_head;
  if (*pp && (*pp)->off > 0) pp = &(*pp)->next;
  chunk *drop = *pp;
  *pp = NULL;
  call->out_tail = NULL;
  for (chunk *x = call->out_head; x; x = x->next) call->out_tail = x;
  size_t n = 0;
  for (chunk *x = drop; x; x = x->next) n += x->len - x->off;
  free_chunks(drop);
  call->out_pending -= n < call->out_pending ? n : call->out_pending;
  if (call->c) call->c->out_bytes -= n < call->c->out_bytes ? n : call->c->out_bytes;
}

void nrd_srv_grpc_call_send_framed(nrd_srv_grpc_call *call, uint8_t *buf, size_t len) {
  if (call->c == NULL || call->done || buf == NULL) {
    free(buf);
    return;
  }
  chunk *ch = malloc(sizeof *ch);
  if (ch == NULL) {
    free(buf);
    nrd_srv_grpc_call_finish(call, NRD_GRPC_RESOURCE_EXHAUSTED, "out of memory");
    return;
  }
  ch->next = NULL;
  ch->data = buf;
  ch->len = len;
  ch->off = 0;
  if (call->out_tail)
    call->out_tail->next = ch;
  else
    call->out_head = ch;
  call->out_tail = ch;
  call->c->out_bytes += len;
  call->out_pending += len;
  if (call->out_pending > CALL_OUT_MAX) {
    call_drop_unsent(call);
    char msg[160];
    snprintf(msg, sizeof msg, "the client is not reading responses (more than %u bytes waiting); call cancelled",
             CALL_OUT_MAX);
    nrd_srv_grpc_call_abort(call, NRD_GRPC_RESOURCE_EXHAUSTED, msg);
    return;
  }
  call_kick(call);
}

uint8_t *nrd_srv_grpc_call_compress(const nrd_srv_grpc_call *call, uint8_t *framed, size_t *len) {
  if (call->resp_encoding == ENC_IDENTITY || framed == NULL || *len < 5 || framed[0] != 0) return framed;
  nrd_srv_compress_piece body = {framed + 5, *len - 5};
  uint8_t *out = NULL;
  size_t n = 0;
  int wb = call->resp_encoding == ENC_GZIP ? 15 + 16 : 15;
  int level = nrd_srv_compress_zlib_level(call->g->opts.response_compression);
  if (nrd_srv_compress(wb, level, &body, 1, 5, &out, &n) != 0) return framed;
  if (n >= body.len) { /* no gain: sent as it is, flag 0 */
    free(out);
    return framed;
  }
  out[0] = 1;
  out[1] = (uint8_t)(n >> 24);
  out[2] = (uint8_t)(n >> 16);
  out[3] = (uint8_t)(n >> 8);
  out[4] = (uint8_t)n;
  free(framed);
  *len = 5 + n;
  return out;
}

void nrd_srv_grpc_call_send(nrd_srv_grpc_call *call, const ProtobufCMessage *msg) {
  if (call->c == NULL || call->done) return;
  size_t len = 0;
  uint8_t *buf = nrd_srv_grpc_frame(msg, &len);
  if (buf == NULL) {
    nrd_srv_grpc_call_finish(call, NRD_GRPC_RESOURCE_EXHAUSTED, "out of memory");
    return;
  }
  nrd_srv_grpc_call_send_framed(call, buf, len);
}

void nrd_srv_grpc_call_finish(nrd_srv_grpc_call *call, int status, const char *message) {
  if (call->c == NULL || call->done) return;
  call->done = true;
  call->status = status;
  call->status_msg = message && message[0] ? nrd_srv_grpc_percent_encode(message) : NULL;
  if (!call->headers_sent && call->out_head == NULL) {
    /* Trailers-Only response: one HEADERS frame ending the stream. */
    char code[24];
    size_t code_len = nrd_srv_fmt_i64(code, status);
    nghttp2_nv hdrs[5] = {{(uint8_t *)":status", (uint8_t *)"200", 7, 3, NGHTTP2_NV_FLAG_NONE},
                          {(uint8_t *)"content-type", (uint8_t *)"application/grpc", 12, 16, NGHTTP2_NV_FLAG_NONE},
                          {(uint8_t *)"grpc-accept-encoding", (uint8_t *)ACCEPT_ENCODING, 20,
                           sizeof ACCEPT_ENCODING - 1, NGHTTP2_NV_FLAG_NONE},
                          {(uint8_t *)"grpc-status", (uint8_t *)code, 11, code_len, NGHTTP2_NV_FLAG_NONE},
                          {(uint8_t *)"grpc-message", (uint8_t *)(call->status_msg ? call->status_msg : ""), 12,
                           call->status_msg ? strlen(call->status_msg) : 0, NGHTTP2_NV_FLAG_NONE}};
    call->headers_sent = true;
    call->ended = true;
    nghttp2_submit_response(call->c->sess, call->id, hdrs, call->status_msg ? 5 : 4, NULL);
    conn_mark_dirty(call->c);
    return;
  }
  call_kick(call);
}

void nrd_srv_grpc_call_reply(nrd_srv_grpc_call *call, const ProtobufCMessage *msg) {
  nrd_srv_grpc_call_send(call, msg);
  nrd_srv_grpc_call_finish(call, NRD_GRPC_OK, NULL);
}

void nrd_srv_grpc_call_fail(nrd_srv_grpc_call *call, TRITONSERVER_Error *err) {
  nrd_srv_grpc_call_finish(call, nrd_srv_grpc_status_from_code(TRITONSERVER_ErrorCode(err)),
                           TRITONSERVER_ErrorMessage(err));
  TRITONSERVER_ErrorDelete(err);
}

/* The stream is gone (closed, reset, connection lost): detach, tell the
 * handler if the call had not finished, drop the transport's reference. */
void nrd_srv_grpc_call_detach(nrd_srv_grpc_call *call) {
  conn *c = call->c;
  if (c == NULL) return;
  if (c->last_call == call) {
    c->last_call = NULL;
    c->last_id = 0;
  }
  if (call->prev)
    call->prev->next = call->next;
  else
    c->calls = call->next;
  if (call->next) call->next->prev = call->prev;
  c->out_bytes -= call->out_pending < c->out_bytes ? call->out_pending : c->out_bytes;
  if (call->unconsumed) nghttp2_session_consume_connection(c->sess, call->unconsumed);
  call->unconsumed = 0;
  bool was_done = call->done;
  call->c = NULL;
  call->closed = true;
  if (!was_done) call_notify_cancel(call);
  nrd_srv_grpc_call_unref(call);
}
