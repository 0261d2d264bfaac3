/* OTLP/HTTP JSON span exporter with a batch span processor (see
 * otel_exporter.h).
 *
 * Spans wait in a ring buffer under one lock. The export thread wakes
 * every schedule delay, or as soon as a batch is full, takes up to a batch,
 * and POSTs it to the collector on a connection of its own (opened per
 * export: exports are seconds apart). A failed export loses its spans and
 * is logged, at most once a minute, as the SDK does; it never blocks the
 * threads that add spans. */
#include "otel_exporter.h"

#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "fmt.h"

#define DEFAULT_URL "http://localhost:4318/v1/traces"
#define EXPORT_TIMEOUT_MS 10000 /* the SDK's OTLP exporter default */
#define SHUTDOWN_TIMEOUT_MS 2000 /* each last batch's one try */

struct nrd_srv_otel {
  char host[256];
  char port[8];
  char *path;
  json_t *resource; /* the OTLP resource object */
  size_t max_queue, batch;
  int64_t delay_ms;
  pthread_mutex_t mu;
  pthread_cond_t wake;
  json_t **ring; /* max_queue slots */
  size_t head, count;
  bool stopping;
  pthread_t thread;
  atomic_uint_fast64_t exported, dropped, lost;
  uint64_t last_complaint_ns;
};

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void nrd_srv_otel_random_id(char *out, size_t n) {
  unsigned char b[32];
  if (n > sizeof b) n = sizeof b;
  bool zero = true;
  while (zero) {
    if (getrandom(b, n, 0) != (ssize_t)n) {
      /* No entropy source (not seen on Linux): the clock and a counter. */
      static atomic_uint_fast64_t salt;
      uint64_t x = mono_ns() ^ (atomic_fetch_add(&salt, 1) * 0x9E3779B97F4A7C15ull);
      for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        b[i] = (unsigned char)x;
      }
    }
    for (size_t i = 0; i < n; i++) zero = zero && b[i] == 0;
  }
  static const char hex[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = hex[b[i] >> 4];
    out[2 * i + 1] = hex[b[i] & 15];
  }
  out[2 * n] = '\0';
}

/* ------------------------------------------------------------ settings */

/* [http://]host[:port][/path]. */
static int parse_url(nrd_srv_otel *o, const char *url, char *err, size_t errlen) {
  const char *p = url;
  if (!strncasecmp(p, "https://", 8)) {
    nrd_srv_fmt_err(err, errlen,
                    "--trace-config opentelemetry,url=%s: https is not supported (the exporter "
                    "speaks plain HTTP; use http:// or a local collector)",
                    url);
    return -1;
  }
  if (!strncasecmp(p, "http://", 7))
    p += 7;
  else if (strstr(p, "://")) {
    nrd_srv_fmt_err(err, errlen, "--trace-config opentelemetry,url=%s: only http:// URLs are supported", url);
    return -1;
  }
  const char *slash = strchr(p, '/');
  size_t hostport = slash ? (size_t)(slash - p) : strlen(p);
  const char *colon = memchr(p, ':', hostport);
  size_t hlen = colon ? (size_t)(colon - p) : hostport;
  if (hlen == 0 || hlen >= sizeof o->host) {
    nrd_srv_fmt_err(err, errlen, "--trace-config opentelemetry,url=%s: no host", url);
    return -1;
  }
  memcpy(o->host, p, hlen);
  o->host[hlen] = '\0';
  if (colon) {
    size_t plen = hostport - hlen - 1;
    char *end = NULL;
    char digits[8] = "";
    if (plen > 0 && plen < sizeof digits) memcpy(digits, colon + 1, plen);
    long port = plen > 0 && plen < sizeof digits ? strtol(digits, &end, 10) : 0;
    if (port < 1 || port > 65535 || !end || *end) {
      nrd_srv_fmt_err(err, errlen, "--trace-config opentelemetry,url=%s: bad port", url);
      return -1;
    }
    snprintf(o->port, sizeof o->port, "%ld", port);
  } else {
    snprintf(o->port, sizeof o->port, "80");
  }
  o->path = strdup(slash && slash[1] ? slash : "/v1/traces");
  if (!o->path) {
    nrd_srv_fmt_err(err, errlen, "out of memory");
    return -1;
  }
  return 0;
}

/* Adds or replaces attribute key=value (len bytes of "key=value"). */
static int put_attribute(json_t *attrs, const char *kv, size_t len) {
  const char *eq = memchr(kv, '=', len);
  if (!eq || eq == kv) return -1;
  char *key = strndup(kv, (size_t)(eq - kv)), *val = strndup(eq + 1, len - (size_t)(eq - kv) - 1);
  if (!key || !val) {
    free(key);
    free(val);
    return -1;
  }
  size_t i;
  json_t *a;
  json_array_foreach(attrs, i, a) {
    if (!strcmp(json_string_value(json_object_get(a, "key")), key)) {
      json_array_remove(attrs, i);
      break;
    }
  }
  json_array_append_new(attrs, json_pack("{s:s,s:{s:s}}", "key", key, "value", "stringValue", val));
  free(key);
  free(val);
  return 0;
}

static int build_resource(nrd_srv_otel *o, const nrd_srv_otel_config *cfg, char *err, size_t errlen) {
  json_t *attrs = json_array();
  if (!attrs) return -1;
  put_attribute(attrs, "service.name=triton-inference-server", 36);
  const char *env = getenv("OTEL_RESOURCE_ATTRIBUTES");
  for (const char *p = env; p && *p;) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    if (len && put_attribute(attrs, p, len) != 0) {
      nrd_srv_fmt_err(err, errlen, "OTEL_RESOURCE_ATTRIBUTES: '%.*s' is not key=value", (int)len, p);
      json_decref(attrs);
      return -1;
    }
    p = comma ? comma + 1 : p + len;
  }
  for (size_t i = 0; i < cfg->n_resource; i++) {
    if (put_attribute(attrs, cfg->resource[i], strlen(cfg->resource[i])) != 0) {
      nrd_srv_fmt_err(err, errlen, "--trace-config opentelemetry,resource=%s: expected <key>=<value>",
                      cfg->resource[i]);
      json_decref(attrs);
      return -1;
    }
  }
  o->resource = json_pack("{s:o}", "attributes", attrs);
  return o->resource ? 0 : -1;
}

/* A batch setting: the flag's value, else its environment variable, else
 * the default. */
static int bsp_value(int64_t given, const char *env_name, int64_t dflt, int64_t *out, const char *flag, char *err,
                     size_t errlen) {
  *out = dflt;
  if (given >= 0) {
    *out = given;
  } else if (getenv(env_name) && getenv(env_name)[0]) {
    char *end = NULL;
    long long v = strtoll(getenv(env_name), &end, 10);
    if (*end || v < 0) {
      nrd_srv_fmt_err(err, errlen, "%s: expected a number, got '%s'", env_name, getenv(env_name));
      return -1;
    }
    *out = v;
  }
  if (*out < 1 || *out > 1000000000) {
    nrd_srv_fmt_err(err, errlen, "--trace-config opentelemetry,%s must be between 1 and 1000000000", flag);
    return -1;
  }
  return 0;
}

/* ------------------------------------------------------------ HTTP */

/* Connects to host:port within timeout_ms; -1 with the reason in why. */
static int dial(const nrd_srv_otel *o, int timeout_ms, char *why, size_t whylen) {
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
  int rc = getaddrinfo(o->host, o->port, &hints, &res);
  if (rc != 0) {
    snprintf(why, whylen, "cannot resolve %s: %s", o->host, gai_strerror(rc));
    return -1;
  }
  int fd = -1;
  snprintf(why, whylen, "cannot connect to %s:%s", o->host, o->port);
  for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
      snprintf(why, whylen, "cannot connect to %s:%s: %s", o->host, o->port, strerror(errno));
      close(fd);
      fd = -1;
      continue;
    }
    struct pollfd pf = {.fd = fd, .events = POLLOUT};
    int soerr = 0;
    socklen_t sl = sizeof soerr;
    if (poll(&pf, 1, timeout_ms) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0 || soerr) {
      snprintf(why, whylen, "cannot connect to %s:%s: %s", o->host, o->port, soerr ? strerror(soerr) : "timed out");
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  return fd;
}

/* Waits for fd to be ready for `events` until the deadline. */
static bool ready(int fd, short events, uint64_t deadline_ns) {
  uint64_t now = mono_ns();
  if (now >= deadline_ns) return false;
  struct pollfd pf = {.fd = fd, .events = events};
  int ms = (int)((deadline_ns - now) / 1000000u) + 1;
  return poll(&pf, 1, ms) == 1;
}

/* POSTs body; the HTTP status, or -1 with the reason in why. */
static int post(const nrd_srv_otel *o, const char *body, size_t len, int timeout_ms, char *why, size_t whylen) {
  int fd = dial(o, timeout_ms, why, whylen);
  if (fd < 0) return -1;
  uint64_t deadline = mono_ns() + (uint64_t)timeout_ms * 1000000u;
  char head[512];
  int hn = snprintf(head, sizeof head,
                    "POST %s HTTP/1.1\r\nHost: %s:%s\r\nContent-Type: application/json\r\n"
                    "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                    o->path, o->host, o->port, len);
  if (hn < 0 || (size_t)hn >= sizeof head) {
    close(fd);
    snprintf(why, whylen, "the URL path is too long");
    return -1;
  }
  const char *parts[2] = {head, body};
  size_t sizes[2] = {(size_t)hn, len};
  for (int k = 0; k < 2; k++) {
    size_t off = 0;
    while (off < sizes[k]) {
      ssize_t w = send(fd, parts[k] + off, sizes[k] - off, MSG_NOSIGNAL);
      if (w > 0) {
        off += (size_t)w;
      } else if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
        if (!ready(fd, POLLOUT, deadline)) {
          close(fd);
          snprintf(why, whylen, "timed out sending to %s:%s", o->host, o->port);
          return -1;
        }
      } else {
        snprintf(why, whylen, "sending to %s:%s: %s", o->host, o->port, strerror(errno));
        close(fd);
        return -1;
      }
    }
  }
  /* The status line is all we need. */
  char resp[256];
  size_t got = 0;
  while (got < sizeof resp - 1 && !memchr(resp, '\n', got)) {
    ssize_t r = recv(fd, resp + got, sizeof resp - 1 - got, 0);
    if (r > 0) {
      got += (size_t)r;
    } else if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (!ready(fd, POLLIN, deadline)) break;
    } else {
      break;
    }
  }
  close(fd);
  resp[got] = '\0';
  int status = 0;
  if (sscanf(resp, "HTTP/%*d.%*d %d", &status) != 1) {
    snprintf(why, whylen, "no HTTP answer from %s:%s", o->host, o->port);
    return -1;
  }
  snprintf(why, whylen, "%s:%s%s answered HTTP %d", o->host, o->port, o->path, status);
  return status;
}

/* ------------------------------------------------------------ thread */

static void complain(nrd_srv_otel *o, const char *why, size_t n) {
  uint64_t now = mono_ns();
  if (o->last_complaint_ns && now - o->last_complaint_ns < 60000000000ull) return;
  o->last_complaint_ns = now;
  fprintf(stderr,
          "nereid: warning: OpenTelemetry export of %zu spans failed: %s (further failures are "
          "reported once a minute)\n",
          n, why);
}

static void export_batch(nrd_srv_otel *o, json_t **spans, size_t n, int timeout_ms) {
  json_t *list = json_array();
  for (size_t i = 0; i < n; i++) json_array_append_new(list, spans[i]);
  json_t *req = json_pack("{s:[{s:O,s:[{s:{s:s},s:o}]}]}", "resourceSpans", "resource", o->resource, "scopeSpans",
                          "scope", "name", "nereid", "spans", list);
  char *body = req ? json_dumps(req, JSON_COMPACT) : NULL;
  json_decref(req);
  char why[300] = "out of memory";
  int status = body ? post(o, body, strlen(body), timeout_ms, why, sizeof why) : -1;
  free(body);
  if (status >= 200 && status < 300) {
    atomic_fetch_add(&o->exported, n);
  } else {
    atomic_fetch_add(&o->lost, n);
    complain(o, why, n);
  }
}

static void *export_main(void *arg) {
  nrd_srv_otel *o = arg;
  json_t **batch = malloc(o->batch * sizeof *batch);
  bool give_up = false; /* at shutdown, after a failed last try */
  pthread_mutex_lock(&o->mu);
  for (;;) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    uint64_t ns = (uint64_t)until.tv_nsec + (uint64_t)o->delay_ms * 1000000u;
    until.tv_sec += (time_t)(ns / 1000000000u);
    until.tv_nsec = (long)(ns % 1000000000u);
    while (!o->stopping && o->count < o->batch)
      if (pthread_cond_timedwait(&o->wake, &o->mu, &until) != 0) break;
    size_t n = o->count < o->batch ? o->count : o->batch;
    for (size_t i = 0; i < n; i++) {
      json_t *s = o->ring[(o->head + i) % o->max_queue];
      if (batch)
        batch[i] = s;
      else
        json_decref(s);
    }
    o->head = (o->head + n) % o->max_queue;
    o->count -= n;
    bool stopping = o->stopping;
    pthread_mutex_unlock(&o->mu);
    if (n && batch) {
      if (give_up) {
        for (size_t i = 0; i < n; i++) json_decref(batch[i]);
        atomic_fetch_add(&o->lost, n);
      } else {
        uint64_t lost = atomic_load(&o->lost);
        export_batch(o, batch, n, stopping ? SHUTDOWN_TIMEOUT_MS : EXPORT_TIMEOUT_MS);
        give_up = stopping && atomic_load(&o->lost) != lost;
      }
    } else if (n) {
      atomic_fetch_add(&o->lost, n);
    }
    pthread_mutex_lock(&o->mu);
    if (o->stopping && o->count == 0) break;
  }
  pthread_mutex_unlock(&o->mu);
  free(batch);
  return NULL;
}

/* ------------------------------------------------------------ API */

nrd_srv_otel *nrd_srv_otel_new(const nrd_srv_otel_config *cfg, char *err, size_t errlen) {
  nrd_srv_otel *o = calloc(1, sizeof *o);
  if (!o) {
    nrd_srv_fmt_err(err, errlen, "out of memory");
    return NULL;
  }
  int64_t q = 0, d = 0, b = 0;
  if (parse_url(o, cfg->url && cfg->url[0] ? cfg->url : DEFAULT_URL, err, errlen) != 0 ||
      build_resource(o, cfg, err, errlen) != 0 ||
      bsp_value(cfg->max_queue_size, "OTEL_BSP_MAX_QUEUE_SIZE", 2048, &q, "bsp_max_queue_size", err, errlen) != 0 ||
      bsp_value(cfg->schedule_delay_ms, "OTEL_BSP_SCHEDULE_DELAY", 5000, &d, "bsp_schedule_delay", err, errlen) != 0 ||
      bsp_value(cfg->max_export_batch_size, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512, &b, "bsp_max_export_batch_size", err,
                errlen) != 0)
    goto fail;
  if (b > q) {
    nrd_srv_fmt_err(err, errlen,
                    "--trace-config opentelemetry,bsp_max_export_batch_size (%" PRId64 ") must not "
                    "exceed bsp_max_queue_size (%" PRId64 ")",
                    b, q);
    goto fail;
  }
  o->max_queue = (size_t)q;
  o->batch = (size_t)b;
  o->delay_ms = d;
  o->ring = calloc(o->max_queue, sizeof *o->ring);
  if (!o->ring) {
    nrd_srv_fmt_err(err, errlen, "out of memory for %zu queued spans", o->max_queue);
    goto fail;
  }
  pthread_mutex_init(&o->mu, NULL);
  pthread_cond_init(&o->wake, NULL);
  if (pthread_create(&o->thread, NULL, export_main, o) != 0) {
    nrd_srv_fmt_err(err, errlen, "cannot start the OpenTelemetry export thread");
    pthread_cond_destroy(&o->wake);
    pthread_mutex_destroy(&o->mu);
    goto fail;
  }
  return o;
fail:
  free(o->ring);
  free(o->path);
  json_decref(o->resource);
  free(o);
  return NULL;
}

void nrd_srv_otel_free(nrd_srv_otel *o) {
  if (!o) return;
  pthread_mutex_lock(&o->mu);
  o->stopping = true;
  pthread_cond_signal(&o->wake);
  pthread_mutex_unlock(&o->mu);
  pthread_join(o->thread, NULL);
  pthread_cond_destroy(&o->wake);
  pthread_mutex_destroy(&o->mu);
  free(o->ring);
  free(o->path);
  json_decref(o->resource);
  free(o);
}

void nrd_srv_otel_add(nrd_srv_otel *o, json_t *span) {
  if (!span) return;
  pthread_mutex_lock(&o->mu);
  if (o->count == o->max_queue || o->stopping) {
    pthread_mutex_unlock(&o->mu);
    json_decref(span);
    atomic_fetch_add(&o->dropped, 1);
    return;
  }
  o->ring[(o->head + o->count) % o->max_queue] = span;
  o->count++;
  if (o->count == o->batch) pthread_cond_signal(&o->wake);
  pthread_mutex_unlock(&o->mu);
}

void nrd_srv_otel_counts(nrd_srv_otel *o, uint64_t *exported, uint64_t *dropped, uint64_t *lost) {
  *exported = atomic_load(&o->exported);
  *dropped = atomic_load(&o->dropped);
  *lost = atomic_load(&o->lost);
}
