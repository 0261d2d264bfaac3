/* The HTTP routes of Triton's shared memory extensions: system and CUDA
 * regions through the shared registry (shm_registry.h); without an NVIDIA
 * driver CUDA registration fails as in Triton built without GPU support.
 * With --allow-client-shm=false (the default) register and unregister of
 * both kinds are refused. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "http_internal.h"
#include "cuda_ipc.h"
#include "http_json.h"

static int add_region_json(const char *name, const char *key, uint64_t offset, uint64_t byte_size, void *arg) {
  nrd_srv_http_text *t = arg;
  char num[120];
  bool first = t->len == 1; /* only the opening '[' so far */
  int bad = nrd_srv_http_text_add(t, first ? "{\"name\":" : ",{\"name\":", first ? 8 : 9);
  bad |= nrd_srv_http_text_quoted(t, name, strlen(name));
  bad |= nrd_srv_http_text_add(t, ",\"key\":", 7);
  bad |= nrd_srv_http_text_quoted(t, key, strlen(key));
  int n = snprintf(num, sizeof num, ",\"offset\":%llu,\"byte_size\":%llu}", (unsigned long long)offset,
                   (unsigned long long)byte_size);
  bad |= nrd_srv_http_text_add(t, num, (size_t)n);
  return bad;
}

static void shm_register_route(nrd_srv_http *h, nrd_srv_http_req *req, const char *region) {
  json_t *j = NULL;
  if (nrd_srv_http_body_json(req, &j) != 0) return;
  json_t *key = j ? json_object_get(j, "key") : NULL;
  json_t *off = j ? json_object_get(j, "offset") : NULL;
  json_t *size = j ? json_object_get(j, "byte_size") : NULL;
  const char *msg = NULL;
  if (key == NULL)
    msg = "Shared memory register request has no 'key' field";
  else if (!json_is_string(key))
    msg = "Unable to parse 'key': expected a string";
  else if (off && (!json_is_integer(off) || json_integer_value(off) < 0))
    msg = "Unable to parse 'offset': expected an unsigned integer";
  else if (size == NULL)
    msg = "Shared memory register request has no 'byte_size' field";
  else if (!json_is_integer(size) || json_integer_value(size) < 0)
    msg = "Unable to parse 'byte_size': expected an unsigned integer";
  if (msg) {
    json_decref(j);
    return nrd_srv_http_reply_error(req, 400, msg);
  }
  TRITONSERVER_Error *err =
      nrd_srv_shm_register(h->shm, region, json_string_value(key), off ? (uint64_t)json_integer_value(off) : 0,
                           (uint64_t)json_integer_value(size));
  json_decref(j);
  if (err) return nrd_srv_http_reply_tserr(req, err);
  nrd_srv_http_reply_json(req, 200, "", 0);
}

static int add_cuda_region_json(const char *name, int64_t device, uint64_t byte_size, void *arg) {
  nrd_srv_http_text *t = arg;
  char num[120];
  bool first = t->len == 1;
  int bad = nrd_srv_http_text_add(t, first ? "{\"name\":" : ",{\"name\":", first ? 8 : 9);
  bad |= nrd_srv_http_text_quoted(t, name, strlen(name));
  int n = snprintf(num, sizeof num, ",\"device_id\":%lld,\"byte_size\":%llu}", (long long)device,
                   (unsigned long long)byte_size);
  bad |= nrd_srv_http_text_add(t, num, (size_t)n);
  return bad;
}

/* {"raw_handle": {"b64": <handle>}, "device_id": N, "byte_size": N}, with
 * Triton's checks (http_server.cc). */
static void cuda_register_route(nrd_srv_http *h, nrd_srv_http_req *req, const char *region) {
  if (!nrd_srv_cuda_available()) { /* Triton without GPU support: before the body */
    char msg[400];
    snprintf(msg, sizeof msg, "failed to register CUDA shared memory region: '%.300s', GPUs not supported", region);
    return nrd_srv_http_reply_error(req, 400, msg);
  }
  json_t *j = NULL;
  if (nrd_srv_http_body_json(req, &j) != 0) return;
  json_t *raw = j ? json_object_get(j, "raw_handle") : NULL;
  json_t *b64 = json_is_object(raw) ? json_object_get(raw, "b64") : NULL;
  json_t *dev = j ? json_object_get(j, "device_id") : NULL;
  json_t *size = j ? json_object_get(j, "byte_size") : NULL;
  const char *msg = NULL;
  if (raw == NULL)
    msg = "Shared memory register request has no 'raw_handle' field";
  else if (!json_is_string(b64))
    msg = "Unable to parse 'b64': expected a string";
  else if (size == NULL)
    msg = "Shared memory register request has no 'byte_size' field";
  else if (!json_is_integer(size) || json_integer_value(size) < 0)
    msg = "Unable to parse 'byte_size': expected an unsigned integer";
  else if (dev == NULL)
    msg = "Shared memory register request has no 'device_id' field";
  else if (!json_is_integer(dev) || json_integer_value(dev) < 0)
    msg = "Unable to parse 'device_id': expected an unsigned integer";
  unsigned char *handle = NULL;
  size_t handle_len = 0;
  if (!msg && nrd_srv_http_b64_decode(json_string_value(b64), json_string_length(b64), &handle, &handle_len) != 0)
    msg = "'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t";
  if (!msg && handle_len != 64) msg = "'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t";
  if (msg) {
    free(handle);
    json_decref(j);
    return nrd_srv_http_reply_error(req, 400, msg);
  }
  TRITONSERVER_Error *err = nrd_srv_shm_register_cuda(h->shm, region, handle, handle_len, json_integer_value(dev),
                                                      (uint64_t)json_integer_value(size));
  free(handle);
  json_decref(j);
  if (err) return nrd_srv_http_reply_tserr(req, err);
  nrd_srv_http_reply_json(req, 200, "", 0);
}

void nrd_srv_http_shm_route(nrd_srv_http *h, nrd_srv_http_req *req, const char *rest, bool cuda) {
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
  nrd_srv_http_method m = req->method;
  if (status ? (m != NRD_SRV_HTTP_GET && m != NRD_SRV_HTTP_HEAD) : m != NRD_SRV_HTTP_POST)
    return nrd_srv_http_reply_error(req, 405, "Method Not Allowed");
  const char *name = region[0] ? region : NULL;
  char msg[400];
  /* --allow-client-shm=false (the default): register and unregister are
   * refused before anything else is looked at, as Triton 26.x does
   * (546a78766); status still answers, and lists nothing. */
  if ((reg || unreg) && !nrd_srv_shm_client_allowed(h->shm))
    return nrd_srv_http_reply_tserr(req, nrd_srv_shm_disabled_error());
  if (reg && name == NULL) {
    snprintf(msg, sizeof msg, "'region name' is necessary to register %s shared memory region",
             cuda ? "cuda" : "system");
    return nrd_srv_http_reply_error(req, 400, msg);
  }
  if (cuda) {
    if (reg) return cuda_register_route(h, req, name);
    if (unreg) {
      TRITONSERVER_Error *err = nrd_srv_shm_unregister_cuda(h->shm, name);
      if (err) return nrd_srv_http_reply_tserr(req, err);
      return nrd_srv_http_reply_json(req, 200, "", 0);
    }
    nrd_srv_http_text t = {0};
    TRITONSERVER_Error *err = NULL;
    if (nrd_srv_http_text_add(&t, "[", 1) != 0)
      err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    if (err == NULL) err = nrd_srv_shm_status_cuda(h->shm, name, add_cuda_region_json, &t);
    if (err == NULL && nrd_srv_http_text_add(&t, "]", 1) != 0)
      err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    if (err) {
      free(t.buf);
      return nrd_srv_http_reply_tserr(req, err);
    }
    nrd_srv_http_reply_json(req, 200, t.buf, t.len);
    free(t.buf);
    return;
  }
  if (reg) return shm_register_route(h, req, name);
  if (unreg) {
    TRITONSERVER_Error *err = nrd_srv_shm_unregister(h->shm, name);
    if (err) return nrd_srv_http_reply_tserr(req, err);
    return nrd_srv_http_reply_json(req, 200, "", 0);
  }
  nrd_srv_http_text t = {0};
  TRITONSERVER_Error *err = NULL;
  if (nrd_srv_http_text_add(&t, "[", 1) != 0) err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  if (err == NULL) err = nrd_srv_shm_status(h->shm, name, add_region_json, &t);
  if (err == NULL && nrd_srv_http_text_add(&t, "]", 1) != 0)
    err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  if (err) {
    free(t.buf);
    return nrd_srv_http_reply_tserr(req, err);
  }
  nrd_srv_http_reply_json(req, 200, t.buf, t.len);
  free(t.buf);
}
