/* Minimal h2o (libh2o-evloop) server: one evloop thread, every request
 * gets 200 with a fixed 2-byte body. Baseline for docs/http.md. */
#define _GNU_SOURCE /* h2o headers need POSIX/GNU declarations under -std=c17 */
#define H2O_USE_LIBUV 0
#include <h2o.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

static h2o_globalconf_t config;
static h2o_context_t ctx;
static h2o_accept_ctx_t accept_ctx;

static int on_req(h2o_handler_t *self, h2o_req_t *req) {
  static h2o_generator_t generator = {NULL, NULL};
  static h2o_iovec_t body = {"OK", 2};
  (void)self;
  req->res.status = 200;
  req->res.reason = "OK";
  req->res.content_length = body.len;
  h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, H2O_STRLIT("text/plain"));
  h2o_start_response(req, &generator);
  h2o_send(req, &body, 1, H2O_SEND_STATE_FINAL);
  return 0;
}

static void on_accept(h2o_socket_t *listener, const char *err) {
  h2o_socket_t *sock;
  if (err != NULL) return;
  if ((sock = h2o_evloop_socket_accept(listener)) == NULL) return;
  h2o_accept(&accept_ctx, sock);
}

int main(int argc, char **argv) {
  int port = argc > 1 ? atoi(argv[1]) : 18082;
  int fd, one = 1;
  struct sockaddr_in addr = {0};
  h2o_hostconf_t *hostconf;
  h2o_pathconf_t *pathconf;
  h2o_handler_t *handler;
  h2o_socket_t *sock;

  h2o_config_init(&config);
  hostconf = h2o_config_register_host(&config, h2o_iovec_init(H2O_STRLIT("default")), 65535);
  pathconf = h2o_config_register_path(hostconf, "/", 0);
  handler = h2o_create_handler(pathconf, sizeof(*handler));
  handler->on_req = on_req;

  h2o_context_init(&ctx, h2o_evloop_create(), &config);
  accept_ctx.ctx = &ctx;
  accept_ctx.hosts = config.hosts;

  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(0x7f000001);
  addr.sin_port = htons((uint16_t)port);
  if ((fd = socket(AF_INET, SOCK_STREAM, 0)) == -1 ||
      setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
      bind(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0 || listen(fd, SOMAXCONN) != 0) {
    perror("listen");
    return 1;
  }
  sock = h2o_evloop_socket_create(ctx.loop, fd, H2O_SOCKET_FLAG_DONT_READ);
  h2o_socket_read_start(sock, on_accept);
  for (;;) /* returns -1 on EINTR (e.g. a debugger attaching): keep going */
    h2o_evloop_run(ctx.loop, INT32_MAX);
}
