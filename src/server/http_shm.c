/* The system shared memory registry and the HTTP routes of Triton's
 * shared memory extension (system regions; CUDA regions answer as Triton
 * built without GPU support does). */
#include "http_shm.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/http.h>
#include <jansson.h>

#include "http_internal.h"

struct nrd_srv_shm_region {
  nrd_srv_shm_region *next; /* in the registry's list (registry mutex) */
  atomic_int refs;          /* the registry's + one per acquire */
  char *name, *key;
  uint64_t offset, byte_size;
  void *map;      /* start of the mapping (page aligned) */
  size_t map_len;
  char *base;     /* the region's first byte, inside the mapping */
};

struct nrd_srv_shm {
  pthread_mutex_t mu;
  nrd_srv_shm_region *regions;
};

static TRITONSERVER_Error *shm_error(TRITONSERVER_Error_Code code, const char *fmt, const char *a,
                                     const char *b) {
  char msg[600];
  snprintf(msg, sizeof msg, fmt, a, b ? b : "");
  return TRITONSERVER_ErrorNew(code, msg);
}

nrd_srv_shm *nrd_srv_shm_new(void) {
  nrd_srv_shm *s = calloc(1, sizeof *s);
  if (s) pthread_mutex_init(&s->mu, NULL);
  return s;
}

static void region_unref(nrd_srv_shm_region *r) {
  if (atomic_fetch_sub(&r->refs, 1) != 1) return;
  munmap(r->map, r->map_len);
  free(r->name);
  free(r->key);
  free(r);
}

void nrd_srv_shm_free(nrd_srv_shm *s) {
  if (s == NULL) return;
  nrd_srv_shm_unregister(s, NULL);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

static nrd_srv_shm_region *find(nrd_srv_shm *s, const char *name) {
  for (nrd_srv_shm_region *r = s->regions; r; r = r->next)
    if (strcmp(r->name, name) == 0) return r;
  return NULL;
}

TRITONSERVER_Error *nrd_srv_shm_register(nrd_srv_shm *s, const char *name, const char *key,
                                         uint64_t offset, uint64_t byte_size) {
  pthread_mutex_lock(&s->mu);
  TRITONSERVER_Error *err = NULL;
  int fd = -1;
  nrd_srv_shm_region *r = NULL;
  if (find(s, name)) {
    err = shm_error(TRITONSERVER_ERROR_ALREADY_EXISTS, "shared memory region '%s' already in manager",
                    name, NULL);
    goto done;
  }
  fd = shm_open(key, O_RDWR, 0);
  if (fd < 0) {
    err = shm_error(TRITONSERVER_ERROR_INTERNAL, "Unable to open shared memory region: '%s': %s", key,
                    strerror(errno));
    goto done;
  }
  struct stat st = {0};
  if (fstat(fd, &st) != 0 || byte_size == 0 || offset > (uint64_t)st.st_size ||
      byte_size > (uint64_t)st.st_size - offset) {
    char range[200];
    snprintf(range, sizeof range, "offset %llu + byte_size %llu does not fit in the object of %lld bytes",
             (unsigned long long)offset, (unsigned long long)byte_size, (long long)st.st_size);
    err = shm_error(TRITONSERVER_ERROR_INVALID_ARG, "failed to register shared memory region '%s': %s",
                    name, range);
    goto done;
  }
  long page = sysconf(_SC_PAGESIZE);
  uint64_t map_off = offset - offset % (uint64_t)page;
  r = calloc(1, sizeof *r);
  if (r == NULL || (r->name = strdup(name)) == NULL || (r->key = strdup(key)) == NULL) {
    err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    goto done;
  }
  r->map_len = (size_t)(byte_size + (offset - map_off));
  r->map = mmap(NULL, r->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)map_off);
  if (r->map == MAP_FAILED) {
    r->map = NULL;
    err = shm_error(TRITONSERVER_ERROR_INVALID_ARG, "failed to register shared memory region '%s': %s",
                    name, strerror(errno));
    goto done;
  }
  r->base = (char *)r->map + (offset - map_off);
  r->offset = offset;
  r->byte_size = byte_size;
  atomic_init(&r->refs, 1);
  r->next = s->regions;
  s->regions = r;
  r = NULL;
done:
  if (r) {
    free(r->name);
    free(r->key);
    free(r);
  }
  if (fd >= 0) close(fd);
  pthread_mutex_unlock(&s->mu);
  return err;
}

TRITONSERVER_Error *nrd_srv_shm_unregister(nrd_srv_shm *s, const char *name) {
  pthread_mutex_lock(&s->mu);
  nrd_srv_shm_region **pp = &s->regions;
  while (*pp) {
    nrd_srv_shm_region *r = *pp;
    if (name == NULL || strcmp(r->name, name) == 0) {
      *pp = r->next;
      region_unref(r);
    } else {
      pp = &r->next;
    }
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

static int add_region_json(nrd_srv_http_text *t, const nrd_srv_shm_region *r, bool first) {
  char num[120];
  int bad = nrd_srv_http_text_add(t, first ? "{\"name\":" : ",{\"name\":", first ? 8 : 9);
  bad |= nrd_srv_http_text_quoted(t, r->name, strlen(r->name));
  bad |= nrd_srv_http_text_add(t, ",\"key\":", 7);
  bad |= nrd_srv_http_text_quoted(t, r->key, strlen(r->key));
  int n = snprintf(num, sizeof num, ",\"offset\":%llu,\"byte_size\":%llu}", (unsigned long long)r->offset,
                   (unsigned long long)r->byte_size);
  bad |= nrd_srv_http_text_add(t, num, (size_t)n);
  return bad;
}

TRITONSERVER_Error *nrd_srv_shm_status(nrd_srv_shm *s, const char *name, nrd_srv_http_text *out) {
  pthread_mutex_lock(&s->mu);
  TRITONSERVER_Error *err = NULL;
  int bad = nrd_srv_http_text_add(out, "[", 1);
  if (name) {
    nrd_srv_shm_region *r = find(s, name);
    if (r == NULL)
      err = shm_error(TRITONSERVER_ERROR_NOT_FOUND, "Unable to find system shared memory region: '%s'",
                      name, NULL);
    else
      bad |= add_region_json(out, r, true);
  } else {
    bool first = true;
    for (nrd_srv_shm_region *r = s->regions; r; r = r->next, first = false)
      bad |= add_region_json(out, r, first);
  }
  bad |= nrd_srv_http_text_add(out, "]", 1);
  pthread_mutex_unlock(&s->mu);
  if (err == NULL && bad) err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  return err;
}

TRITONSERVER_Error *nrd_srv_shm_acquire(nrd_srv_shm *s, const char *name, uint64_t offset,
                                        uint64_t byte_size, nrd_srv_shm_region **region,
                                        void **addr) {
  *region = NULL;
  *addr = NULL;
  pthread_mutex_lock(&s->mu);
  nrd_srv_shm_region *r = find(s, name);
  TRITONSERVER_Error *err = NULL;
  if (r == NULL) {
    err = shm_error(TRITONSERVER_ERROR_NOT_FOUND, "Unable to find shared memory region: '%s'", name,
                    NULL);
  } else if (offset > r->byte_size || byte_size > r->byte_size - offset) {
    err = shm_error(TRITONSERVER_ERROR_INVALID_ARG,
                    "Invalid offset + byte size for shared memory region: '%s'", name, NULL);
  } else {
    atomic_fetch_add(&r->refs, 1);
    *region = r;
    *addr = r->base + offset;
  }
  pthread_mutex_unlock(&s->mu);
  return err;
}

void nrd_srv_shm_release(nrd_srv_shm_region *r) {
  if (r) region_unref(r);
}

/* ---- HTTP routes ---------------------------------------------------------- */

static void shm_register_route(nrd_srv_http *h, struct evhttp_request *req, const char *region) {
  json_t *j = NULL;
  if (nrd_srv_http_body_json(req, &j) != 0) return;
  json_t *key = j ? json_object_get(j, "key") : NULL;
  json_t *off = j ? json_object_get(j, "offset") : NULL;
  json_t *size = j ? json_object_get(j, "byte_size") : NULL;
  const char *msg = NULL;
  if (key == NULL) msg = "Shared memory register request has no 'key' field";
  else if (!json_is_string(key)) msg = "Unable to parse 'key': expected a string";
  else if (off && (!json_is_integer(off) || json_integer_value(off) < 0))
    msg = "Unable to parse 'offset': expected an unsigned integer";
  else if (size == NULL) msg = "Shared memory register request has no 'byte_size' field";
  else if (!json_is_integer(size) || json_integer_value(size) < 0)
    msg = "Unable to parse 'byte_size': expected an unsigned integer";
  if (msg) {
    json_decref(j);
    return nrd_srv_http_reply_error(req, 400, msg);
  }
  TRITONSERVER_Error *err =
      nrd_srv_shm_register(h->shm, region, json_string_value(key),
                           off ? (uint64_t)json_integer_value(off) : 0, (uint64_t)json_integer_value(size));
  json_decref(j);
  if (err) return nrd_srv_http_reply_tserr(req, err);
  nrd_srv_http_reply_json(req, 200, "", 0);
}

void nrd_srv_http_shm_route(nrd_srv_http *h, struct evhttp_request *req, const char *rest, bool cuda) {
  /* rest: "/status", "/unregister", "/region/{r}/{action}" */
  char region[256] = "";
  const char *action = NULL;
  if (strncmp(rest, "/region/", 8) == 0) {
    const char *r = rest + 8;
    const char *slash = strchr(r, '/');
    if (slash == NULL || slash == r || (size_t)(slash - r) >= sizeof region)
      return nrd_srv_http_reply_error(req, 404, "Not Found");
    memcpy(region, r, (size_t)(slash - r));
    region[slash - r] = '\0';
    action = slash + 1;
  } else if (rest[0] == '/') {
    action = rest + 1;
  } else {
    return nrd_srv_http_reply_error(req, 404, "Not Found");
  }
  bool status = strcmp(action, "status") == 0;
  bool reg = strcmp(action, "register") == 0;
  bool unreg = strcmp(action, "unregister") == 0;
  if (!status && !reg && !unreg) return nrd_srv_http_reply_error(req, 404, "Not Found");
  enum evhttp_cmd_type m = evhttp_request_get_command(req);
  if (status ? (m != EVHTTP_REQ_GET && m != EVHTTP_REQ_HEAD) : m != EVHTTP_REQ_POST)
    return nrd_srv_http_reply_error(req, 405, "Method Not Allowed");
  const char *name = region[0] ? region : NULL;
  char msg[400];
  if (reg && name == NULL) {
    snprintf(msg, sizeof msg, "'region name' is necessary to register %s shared memory region",
             cuda ? "cuda" : "system");
    return nrd_srv_http_reply_error(req, 400, msg);
  }
  if (cuda) {
    /* No GPU support: no CUDA region can exist. */
    if (status && name == NULL) return nrd_srv_http_reply_json(req, 200, "[]", 2);
    if (status) {
      snprintf(msg, sizeof msg, "Unable to find cuda shared memory region: '%s'", name);
      return nrd_srv_http_reply_error(req, 404, msg);
    }
    if (reg) {
      snprintf(msg, sizeof msg,
               "failed to register CUDA shared memory region: '%s', GPUs not supported", name);
      return nrd_srv_http_reply_error(req, 400, msg);
    }
    return nrd_srv_http_reply_json(req, 200, "", 0);
  }
  if (reg) return shm_register_route(h, req, name);
  if (unreg) {
    TRITONSERVER_Error *err = nrd_srv_shm_unregister(h->shm, name);
    if (err) return nrd_srv_http_reply_tserr(req, err);
    return nrd_srv_http_reply_json(req, 200, "", 0);
  }
  nrd_srv_http_text t = {0};
  TRITONSERVER_Error *err = nrd_srv_shm_status(h->shm, name, &t);
  if (err) {
    free(t.buf);
    return nrd_srv_http_reply_tserr(req, err);
  }
  nrd_srv_http_reply_json(req, 200, t.buf, t.len);
  free(t.buf);
}
