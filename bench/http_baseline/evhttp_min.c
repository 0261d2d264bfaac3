/* Minimal libevent evhttp server: one event loop thread, every request
 * gets 200 with a fixed 2-byte body. Baseline for docs/http.md. */
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <stdlib.h>

static void on_req(struct evhttp_request *req, void *arg) {
  struct evbuffer *out = arg;
  evbuffer_drain(out, evbuffer_get_length(out));
  evbuffer_add_reference(out, "OK", 2, NULL, NULL);
  evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "text/plain");
  evhttp_send_reply(req, 200, "OK", out);
}

int main(int argc, char **argv) {
  int port = argc > 1 ? atoi(argv[1]) : 18081;
  struct event_base *base = event_base_new();
  struct evhttp *http = evhttp_new(base);
  struct evbuffer *out = evbuffer_new();
  if (!base || !http || !out) return 1;
  evhttp_set_gencb(http, on_req, out);
  if (!evhttp_bind_socket_with_handle(http, "127.0.0.1", (ev_uint16_t)port)) {
    fprintf(stderr, "bind failed\n");
    return 1;
  }
  event_base_dispatch(base);
  return 0;
}
