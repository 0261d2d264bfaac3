/* The receiving side of the gRPC transport: the nghttp2 callbacks that
 * turn a stream's request headers into a call (method, encodings,
 * deadline, restrictions, forwarded headers), its DATA into gRPC messages
 * handed to the call's handler (decompressed, size-checked), and a
 * client's PINGs into the ping policy's strikes. The transport's threads
 * and structures: grpc_internal.h, grpc_server.c. */
#include <nghttp2/nghttp2.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress.h"
#include "grpc_internal.h"
#include "grpc_rpc.h"
#include "grpc_values.h"
#include "header_forward.h"

static void srv_log(TRITONSERVER_LogLevel level, const char *msg) {
  TRITONSERVER_Error *e = TRITONSERVER_LogMessage(level, __FILE__, __LINE__, msg);
  if (e) TRITONSERVER_ErrorDelete(e);
}

/* ---- receiving ----------------------------------------------------------- */

/* Inflates a gzip or zlib ("deflate") message into a malloc'ed buffer of at
 * most `max` bytes (the message size limit) and at most `cap` bytes (the
 * decompression limit, 0 for none). Returns 0 with *out (caller frees) and
 * *out_len, or a gRPC status with msg filled (nothing to free). */
static int inflate_message(int enc, const uint8_t *in, size_t len, uint32_t max, uint32_t cap, uint8_t **out,
                           size_t *out_len, char *msg, size_t msglen) {
  const char *algo = enc == ENC_GZIP ? "gzip" : "deflate";
  size_t rest = 0;
  const char *why = NULL;
  bool capped = cap != 0 && cap < max; /* the decompression limit is the one that bites */
  nrd_srv_inflate_result r =
      nrd_srv_decompress(nrd_srv_compress_window_bits(algo), in, len, capped ? cap : max, out, out_len, &rest, &why);
  if (r == NRD_SRV_INFLATE_OK && rest == 0) return NRD_GRPC_OK;
  if (r == NRD_SRV_INFLATE_OK) { /* bytes after the stream: not one message */
    free(*out);
    *out = NULL;
    *out_len = 0;
    why = "trailing data";
  }
  if (r == NRD_SRV_INFLATE_NO_MEMORY) {
    snprintf(msg, msglen, "out of memory decompressing a %s message", algo);
    return NRD_GRPC_RESOURCE_EXHAUSTED;
  }
  if (r == NRD_SRV_INFLATE_TOO_LARGE && capped) {
    /* Triton's sentence for its HTTP decompression limit (server cd0e3a676). */
    snprintf(msg, msglen,
             "Decompressed data size exceeds the maximum allowed value of %u bytes. Use "
             "--grpc-max-decompressed-size to increase the limit.",
             cap);
    return NRD_GRPC_RESOURCE_EXHAUSTED;
  }
  if (r == NRD_SRV_INFLATE_TOO_LARGE) {
    snprintf(msg, msglen, "Received message larger than max when decompressed (more than %u bytes)", max);
    return NRD_GRPC_RESOURCE_EXHAUSTED;
  }
  snprintf(msg, msglen, "failed to decompress a %s message: %s", algo, why ? why : "truncated or corrupt data");
  return NRD_GRPC_INTERNAL;
}

/* A unary request held by one of Triton's test delay hooks (grpc_delay.h):
 * its handler gets it when the time comes, unless the call ended first. */
typedef struct late_message {
  nrd_srv_grpc_event base;
  uint64_t read_start_ns, read_end_ns; /* the message's, for its trace */
  size_t len;
  uint8_t data[];
} late_message;

static void late_message_run(nrd_srv_grpc_event *ev, bool call_open) {
  late_message *lm = (late_message *)ev;
  nrd_srv_grpc_call *call = ev->call;
  if (call_open && !call->done) {
    call->read_start_ns = lm->read_start_ns;
    call->read_end_ns = lm->read_end_ns;
    call->m->on_message(call, lm->data, lm->len);
    call->read_start_ns = 0;
  }
  free(lm);
}

/* Hands a complete request message to the call's handler: at once, or
 * when Triton's test hooks hold it (TRITONSERVER_DELAY_GRPC_PROCESS for
 * ModelInfer, TRITONSERVER_SERVER_DELAY_GRPC_RESPONSE_SEC for the other
 * unary methods) that much later. msg is borrowed. */
static void call_hand_over(nrd_srv_grpc_call *call, const uint8_t *msg, size_t len) {
  const nrd_srv_grpc_delays *d = &call->g->opts.delays;
  uint64_t hold = call->m->streaming ? 0 : call->m->api == NRD_SRV_API_INFERENCE ? d->process_us : d->common_us;
  if (hold == 0) {
    call->m->on_message(call, msg, len);
    return;
  }
  late_message *lm = malloc(sizeof *lm + len);
  if (lm == NULL) {
    nrd_srv_grpc_call_abort(call, NRD_GRPC_RESOURCE_EXHAUSTED, "out of memory");
    return;
  }
  if (len) memcpy(lm->data, msg, len);
  lm->len = len;
  lm->read_start_ns = call->read_start_ns;
  lm->read_end_ns = call->read_end_ns;
  nrd_srv_grpc_call_ref(call);
  lm->base.call = call;
  lm->base.run = late_message_run;
  nrd_srv_grpc_call_post_at(&lm->base, now_us() + hold);
}

void nrd_srv_grpc_call_deliver(nrd_srv_grpc_call *call, bool at_end) {
  size_t off = 0;
  uint32_t max = call->g->opts.max_message_size;
  while (call->c && !call->done && call->in_len - off >= 5) {
    const uint8_t *p = call->in + off;
    uint32_t len = (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | p[4];
    if (len > max) {
      char msg[128];
      snprintf(msg, sizeof msg, "Received message larger than max (%u vs. %u)", len, max);
      nrd_srv_grpc_call_abort(call, NRD_GRPC_RESOURCE_EXHAUSTED, msg);
      off = call->in_len;
      break;
    }
    if (p[0] > 1 || (p[0] == 1 && call->encoding != ENC_GZIP && call->encoding != ENC_DEFLATE)) {
      char msg[160];
      int st = NRD_GRPC_INTERNAL;
      if (p[0] > 1)
        snprintf(msg, sizeof msg, "invalid gRPC message flags 0x%02x", p[0]);
      else if (call->encoding == ENC_UNKNOWN) {
        snprintf(msg, sizeof msg, "grpc-encoding '%s' is not supported (supported: %s)", call->enc_name,
                 ACCEPT_ENCODING);
        st = NRD_GRPC_UNIMPLEMENTED;
      } else
        snprintf(msg, sizeof msg, "compressed message flag set without a grpc-encoding");
      nrd_srv_grpc_call_abort(call, st, msg);
      off = call->in_len;
      break;
    }
    if (call->in_len - off - 5 < len) break;
    if (!at_end && call->c->throttled) break;
    if (!call->m->streaming) {
      if (call->had_message) {
        nrd_srv_grpc_call_abort(call, NRD_GRPC_UNIMPLEMENTED, "unary method received more than one request message");
        off = call->in_len;
        break;
      }
      if (!at_end) break; /* unary: deliver when the client half-closed */
    }
    call->had_message = true;
    off += 5 + len;
    if (call->read_start_ns) call->read_end_ns = nrd_srv_trace_now_ns();
    if (p[0] == 1) {
      uint8_t *plain = NULL;
      size_t plain_len = 0;
      char msg[200];
      int st = inflate_message(call->encoding, p + 5, len, max, call->g->opts.max_decompressed_size, &plain, &plain_len,
                               msg, sizeof msg);
      if (st != NRD_GRPC_OK) {
        nrd_srv_grpc_call_abort(call, st, msg);
        off = call->in_len;
        break;
      }
      call_hand_over(call, plain, plain_len);
      free(plain);
    } else {
      call_hand_over(call, p + 5, len);
    }
    /* The next message's bytes, if any, are already here. */
    call->read_start_ns = 0;
    if (call->in_len > off && nrd_srv_tracer_active(call->g->opts.tracer)) call->read_start_ns = nrd_srv_trace_now_ns();
  }
  if (off > 0 && call->in) {
    memmove(call->in, call->in + off, call->in_len - off);
    call->in_len -= off;
  }
}

static void call_remote_end(nrd_srv_grpc_call *call) {
  if (call->done || call->c == NULL) return;
  if (call->unknown_method || call->m == NULL) return;
  nrd_srv_grpc_call_deliver(call, true);
  if (call->done || call->c == NULL) return;
  if (call->in_len != 0) {
    nrd_srv_grpc_call_abort(call, NRD_GRPC_INTERNAL, "incomplete gRPC message at end of stream");
    return;
  }
  if (!call->m->streaming && !call->had_message) {
    nrd_srv_grpc_call_finish(call, NRD_GRPC_INTERNAL, "no request message received");
    return;
  }
  if (call->m->on_end) call->m->on_end(call);
}

/* The response encoding, as gRPC picks one for a compression level: of
 * the encodings the client accepts, ranked gzip then deflate, low takes
 * the first, medium the middle one and high the last. Loop, once the
 * request headers are complete. */
static void call_choose_encoding(nrd_srv_grpc_call *call) {
  nrd_srv_compress_level level = call->g->opts.response_compression;
  call->resp_encoding = ENC_IDENTITY;
  if (level == NRD_SRV_COMPRESS_NONE || call->m == NULL || !call->m->compress_responses) return;
  int ranked[2], n = 0;
  if (call->accept & NRD_SRV_GRPC_ACCEPT_GZIP) ranked[n++] = ENC_GZIP;
  if (call->accept & NRD_SRV_GRPC_ACCEPT_DEFLATE) ranked[n++] = ENC_DEFLATE;
  if (n == 0) return;
  call->resp_encoding = level == NRD_SRV_COMPRESS_LOW      ? ranked[0]
                        : level == NRD_SRV_COMPRESS_MEDIUM ? ranked[n / 2]
                                                           : ranked[n - 1];
}

/* The call on stream `id` of c, or NULL. */
static nrd_srv_grpc_call *stream_call(conn *c, int32_t id) {
  if (id != 0 && id == c->last_id) return c->last_call;
  nrd_srv_grpc_call *call = nghttp2_session_get_stream_user_data(c->sess, id);
  if (call) {
    c->last_id = id;
    c->last_call = call;
  }
  return call;
}

static int on_begin_headers(nghttp2_session *sess, const nghttp2_frame *frame, void *user) {
  conn *c = user;
  if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
  nrd_srv_grpc_call *call = calloc(1, sizeof *call);
  if (call == NULL) {
    nghttp2_submit_rst_stream(sess, NGHTTP2_FLAG_NONE, frame->hd.stream_id, NGHTTP2_INTERNAL_ERROR);
    return 0;
  }
  atomic_init(&call->refs, 1);
  atomic_init(&call->cancelled, false);
  call->g = c->lp->g;
  call->lp = c->lp;
  call->c = c;
  call->id = frame->hd.stream_id;
  call->next = c->calls;
  if (c->calls) c->calls->prev = call;
  c->calls = call;
  atomic_fetch_add_explicit(&call->g->live_calls, 1, memory_order_relaxed);
  nghttp2_session_set_stream_user_data(sess, call->id, call);
  c->last_id = call->id;
  c->last_call = call;
  return 0;
}

/* What on_header saw of the headers gRPC requires of a request. */
enum {
  HDR_METHOD = 1u << 0, /* :method, any value */
  HDR_POST = 1u << 1, /* :method POST */
  HDR_TE = 1u << 2,
  HDR_TRAILERS = 1u << 3, /* te: trailers */
  HDR_SCHEME = 1u << 4,
  HDR_SCHEME_OK = 1u << 5, /* :scheme http or https */
  HDR_PATH = 1u << 6,
  HDR_AUTHORITY = 1u << 7 /* :authority, or host as its older name */
};

static bool header_is(const uint8_t *v, size_t len, const char *want) {
  return len == strlen(want) && memcmp(v, want, len) == 0;
}

/* Why a request's headers are not a gRPC call, in the words and order of
 * gRPC's own server (status UNKNOWN), or NULL when they are. Loop, once
 * the request headers are complete. */
static const char *call_check_headers(const nrd_srv_grpc_call *call) {
  unsigned h = call->hdrs;
  if (!(h & HDR_METHOD)) return "Missing :method header";
  if (!(h & HDR_POST)) return "Bad method header";
  if (!(h & HDR_TE)) return "Missing :te header";
  if (!(h & HDR_TRAILERS)) return "Bad :te header";
  if (!(h & HDR_SCHEME)) return "Missing :scheme header";
  if (!(h & HDR_SCHEME_OK)) return "Bad :scheme header";
  if (!(h & HDR_PATH)) return "Missing :path header";
  if (!(h & HDR_AUTHORITY)) return "Missing :authority header";
  return NULL;
}

/* --grpc-header-forward-pattern: keeps a matching header for the call's
 * inference requests. Out of memory: the header is dropped (logged). */
static void keep_forwarded(nrd_srv_grpc_call *call, const uint8_t *name, size_t namelen, const uint8_t *value,
                           size_t valuelen) {
  char **grown = realloc(call->forwarded, 2 * (call->n_forwarded + 1) * sizeof(*grown));
  char *n = strndup((const char *)name, namelen), *v = strndup((const char *)value, valuelen);
  if (grown) call->forwarded = grown;
  if (!grown || !n || !v) {
    free(n);
    free(v);
    srv_log(TRITONSERVER_LOG_ERROR, "gRPC: out of memory keeping a forwarded header");
    return;
  }
  call->forwarded[2 * call->n_forwarded] = n;
  call->forwarded[2 * call->n_forwarded + 1] = v;
  call->n_forwarded++;
}

/* --grpc-restricted-protocol: notes the groups whose header this is, when
 * it carries their value. */
static void note_restriction_header(nrd_srv_grpc_call *call, const uint8_t *name, size_t namelen, const uint8_t *value,
                                    size_t valuelen) {
  const nrd_srv_restrictions *r = call->g->opts.restricted;
  for (int api = 0; r && api < NRD_SRV_API_COUNT; api++) {
    const nrd_srv_restriction *x = &r->by_api[api];
    if (x->header && strlen(x->header) == namelen && memcmp(x->header, name, namelen) == 0 &&
        strlen(x->value) == valuelen && memcmp(x->value, value, valuelen) == 0)
      call->restrict_ok |= 1u << api;
  }
}

/* The header the call's group needs when the call did not bring it (with
 * its value); NULL when it may go on. */
static const char *call_missing_restriction(const nrd_srv_grpc_call *call) {
  const char *header = nrd_srv_restriction_header(call->g->opts.restricted, call->m->api);
  return header && !(call->restrict_ok & (1u << call->m->api)) ? header : NULL;
}

static int on_header(nghttp2_session *sess, const nghttp2_frame *frame, const uint8_t *name, size_t namelen,
                     const uint8_t *value, size_t valuelen, uint8_t flags, void *user) {
  (void)flags;
  (void)sess;
  if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
  nrd_srv_grpc_call *call = stream_call(user, frame->hd.stream_id);
  if (call == NULL) return 0;
  if (namelen == 5 && memcmp(name, ":path", 5) == 0) {
    call->m = nrd_srv_grpc_method_find((const char *)value, valuelen);
    call->unknown_method = call->m == NULL;
    call->hdrs |= HDR_PATH;
  } else if (namelen == 7 && memcmp(name, ":method", 7) == 0) {
    call->hdrs = (call->hdrs & ~HDR_POST) | HDR_METHOD | (header_is(value, valuelen, "POST") ? HDR_POST : 0);
  } else if (namelen == 2 && memcmp(name, "te", 2) == 0) {
    call->hdrs = (call->hdrs & ~HDR_TRAILERS) | HDR_TE | (header_is(value, valuelen, "trailers") ? HDR_TRAILERS : 0);
  } else if (namelen == 7 && memcmp(name, ":scheme", 7) == 0) {
    bool ok = header_is(value, valuelen, "http") || header_is(value, valuelen, "https");
    call->hdrs = (call->hdrs & ~HDR_SCHEME_OK) | HDR_SCHEME | (ok ? HDR_SCHEME_OK : 0);
  } else if ((namelen == 10 && memcmp(name, ":authority", 10) == 0) || (namelen == 4 && memcmp(name, "host", 4) == 0)) {
    call->hdrs |= HDR_AUTHORITY;
  } else if (namelen == 12 && memcmp(name, "content-type", 12) == 0) {
    call->bad_content_type = !(valuelen >= 16 && memcmp(value, "application/grpc", 16) == 0);
  } else if (namelen == 13 && memcmp(name, "grpc-encoding", 13) == 0) {
    if (valuelen == 8 && memcmp(value, "identity", 8) == 0)
      call->encoding = ENC_IDENTITY;
    else if (valuelen == 4 && memcmp(value, "gzip", 4) == 0)
      call->encoding = ENC_GZIP;
    else if (valuelen == 7 && memcmp(value, "deflate", 7) == 0)
      call->encoding = ENC_DEFLATE;
    else
      call->encoding = ENC_UNKNOWN;
    size_t n = valuelen < sizeof call->enc_name - 1 ? valuelen : sizeof call->enc_name - 1;
    for (size_t i = 0; i < n; i++) call->enc_name[i] = value[i] >= 0x20 && value[i] < 0x7f ? (char)value[i] : '?';
    call->enc_name[n] = '\0';
  } else if (namelen == 20 && memcmp(name, "grpc-accept-encoding", 20) == 0) {
    call->accept |= nrd_srv_grpc_accept_mask(value, valuelen);
  } else if (namelen == 12 && memcmp(name, "grpc-timeout", 12) == 0) {
    uint64_t t = nrd_srv_grpc_timeout_us(value, valuelen);
    if (t) call->deadline_us = now_us() + t;
  } else if (namelen > 21 && memcmp(name, "triton-grpc-protocol-", 21) == 0) {
    note_restriction_header(call, name, namelen, value, valuelen);
  } else if (namelen == 11 && memcmp(name, "traceparent", 11) == 0 && valuelen < sizeof call->traceparent &&
             nrd_srv_tracer_active(call->g->opts.tracer)) {
    memcpy(call->traceparent, value, valuelen);
    call->traceparent[valuelen] = '\0';
  }
  if (call->g->header_forward && name[0] != ':' &&
      nrd_srv_header_forward_matches(call->g->header_forward, (const char *)name, namelen))
    keep_forwarded(call, name, namelen, value, valuelen);
  return 0;
}

/* A client PING (nghttp2 answers it): as gRPC polices pings, one that
 * comes sooner than the allowed interval after the previous one, with no
 * data sent by us in between, is a strike; past max_ping_strikes the
 * connection gets GOAWAY ENHANCE_YOUR_CALM "too_many_pings" and closes. With
 * no call open and keepalive_permit_without_calls off, the allowed interval
 * is two hours. */
static void conn_police_ping(conn *c) {
  const nrd_srv_grpc_options *o = &c->lp->g->opts;
  uint64_t now = now_us();
  uint64_t interval_us = (uint64_t)o->min_recv_ping_interval_ms * 1000u;
  if (c->calls == NULL && !o->keepalive_permit_without_calls && interval_us < 7200000000u) interval_us = 7200000000u;
  bool strike = c->last_ping_recv_us != 0 && now - c->last_ping_recv_us < interval_us;
  c->last_ping_recv_us = now;
  if (!strike || c->close_after_flush) return;
  c->ping_strikes++;
  if (o->max_ping_strikes == 0 || c->ping_strikes <= o->max_ping_strikes) return;
  static const char debug[] = "too_many_pings";
  nghttp2_submit_goaway(c->sess, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(c->sess),
                        NGHTTP2_ENHANCE_YOUR_CALM, (const uint8_t *)debug, sizeof debug - 1);
  c->close_after_flush = true;
  srv_log(TRITONSERVER_LOG_WARN, "gRPC: closing a connection that sent too many pings (GOAWAY "
                                 "ENHANCE_YOUR_CALM)");
}

/* Sending data or headers resets the ping accounting, as in gRPC.
 *
 * A response's last HEADERS (its trailers, or a trailers-only answer) on
 * a stream whose client is still sending is followed by RST_STREAM with
 * NO_ERROR (RFC 9113 section 8.1), as gRPC's own servers do: grpc-core
 * then holds the stream as ended with the status it got. Left half open,
 * a stream could still be open at the client when the connection closed
 * (graceful stop), and grpc-core cancelled it there ("Socket closed"),
 * dropping responses its application had not read yet (issue 34). */
static int on_frame_send(nghttp2_session *sess, const nghttp2_frame *frame, void *user) {
  conn *c = user;
  if (frame->hd.type == NGHTTP2_DATA || frame->hd.type == NGHTTP2_HEADERS) {
    c->last_ping_recv_us = 0;
    c->ping_strikes = 0;
    c->pings_without_data = 0;
  }
  if (frame->hd.type == NGHTTP2_HEADERS && (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) &&
      nghttp2_session_get_stream_remote_close(sess, frame->hd.stream_id) == 0)
    nghttp2_submit_rst_stream(sess, NGHTTP2_FLAG_NONE, frame->hd.stream_id, NGHTTP2_NO_ERROR);
  return 0;
}

static int on_frame_recv(nghttp2_session *sess, const nghttp2_frame *frame, void *user) {
  (void)sess;
  conn *c = user;
  if (frame->hd.type == NGHTTP2_SETTINGS) c->greeted = true; /* nghttp2 checked the preface */
  if (frame->hd.type == NGHTTP2_PING && (frame->hd.flags & NGHTTP2_FLAG_ACK)) c->ping_sent_us = 0;
  if (frame->hd.type == NGHTTP2_PING && !(frame->hd.flags & NGHTTP2_FLAG_ACK)) conn_police_ping(c);
  nrd_srv_grpc_call *call = stream_call(c, frame->hd.stream_id);
  if (call == NULL) return 0;
  if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
    call_choose_encoding(call);
    const char *bad_header = call_check_headers(call);
    if (bad_header) {
      nrd_srv_grpc_call_abort(call, NRD_GRPC_UNKNOWN, bad_header);
    } else if (call->bad_content_type) {
      nrd_srv_grpc_call_abort(call, NRD_GRPC_UNKNOWN, "content-type must be application/grpc");
    } else if (call->unknown_method || call->m == NULL) {
      nrd_srv_grpc_call_abort(call, NRD_GRPC_UNIMPLEMENTED, "unknown method");
    } else if (call_missing_restriction(call)) {
      char msg[300];
      snprintf(msg, sizeof msg, "This protocol is restricted, expecting header '%.200s'",
               call_missing_restriction(call));
      nrd_srv_grpc_call_abort(call, NRD_GRPC_UNAVAILABLE, msg);
    }
  }
  if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
      (frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
    call_remote_end(call);
  return 0;
}

static int on_data_chunk(nghttp2_session *sess, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
                         void *user) {
  (void)flags;
  conn *c = user;
  nrd_srv_grpc_call *call = stream_call(c, id);
  if (call == NULL || call->ignoring_input || call->done || call->m == NULL || !c->throttled) {
    nghttp2_session_consume(sess, id, len);
  } else {
    call->unconsumed += len;
  }
  if (call == NULL || call->ignoring_input || call->done || call->m == NULL) return 0;
  if (call->in_len + len > call->in_cap) {
    size_t cap = call->in_cap ? call->in_cap : 1024;
    while (cap < call->in_len + len) cap *= 2;
    uint8_t *n = realloc(call->in, cap);
    if (n == NULL) {
      nrd_srv_grpc_call_abort(call, NRD_GRPC_RESOURCE_EXHAUSTED, "out of memory");
      return 0;
    }
    call->in = n;
    call->in_cap = cap;
  }
  if (call->in_len == 0 && call->read_start_ns == 0 && nrd_srv_tracer_active(call->g->opts.tracer))
    call->read_start_ns = nrd_srv_trace_now_ns();
  memcpy(call->in + call->in_len, data, len);
  call->in_len += len;
  /* Check the size prefix early so an oversized message is never buffered
   * whole; streaming methods get each message as soon as it is complete. */
  if (call->in_len >= 5) nrd_srv_grpc_call_deliver(call, false);
  return 0;
}

static int on_stream_close(nghttp2_session *sess, int32_t id, uint32_t error_code, void *user) {
  (void)error_code;
  (void)user;
  nrd_srv_grpc_call *call = nghttp2_session_get_stream_user_data(sess, id);
  if (call == NULL) return 0;
  nghttp2_session_set_stream_user_data(sess, id, NULL);
  nrd_srv_grpc_call_detach(call);
  return 0;
}

void nrd_srv_grpc_stream_callbacks(nghttp2_session_callbacks *cbs) {
  nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
  nghttp2_session_callbacks_set_on_frame_send_callback(cbs, on_frame_send);
}
