/*
 * Model and instance states and Execute for the python backend.
 */
#include "py_exec.h"
#include "py_bls.h"
#include "py_services.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "py_ipc.h"

#define ALIGN 64u

static uint64_t align_up(uint64_t v) { return (v + ALIGN - 1) & ~(uint64_t)(ALIGN - 1); }

static TRITONSERVER_Error *oom(void) { return nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL, "python: out of memory"); }

static TRITONSERVER_Error *auto_complete(nrd_py_model *m);
typedef struct batch batch;
static TRITONSERVER_Error *converse(nrd_py_instance *st, batch *b, json_t **reply);

TRITONSERVER_Error *nrd_py_model_new(TRITONBACKEND_Model *model, nrd_py_model **out) {
  *out = NULL;
  TRITONBACKEND_Backend *backend = NULL;
  void *bstate = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelBackend(model, &backend);
  if (err == NULL) {
    err = TRITONBACKEND_BackendState(backend, &bstate);
  }
  const char *name = NULL, *repo = NULL;
  uint64_t version = 0;
  TRITONBACKEND_ArtifactType type;
  if (err == NULL) {
    err = TRITONBACKEND_ModelName(model, &name);
  }
  if (err == NULL) {
    err = TRITONBACKEND_ModelVersion(model, &version);
  }
  if (err == NULL) {
    err = TRITONBACKEND_ModelRepository(model, &type, &repo);
  }
  if (err != NULL) {
    return err;
  }
  nrd_py_model *s = calloc(1, sizeof *s);
  if (s == NULL) {
    return oom();
  }
  s->model = model;
  s->backend = bstate;
  s->name = name;
  err = nrd_bu_model_config(model, &s->config);
  if (err != NULL) {
    free(s);
    return err;
  }
  const char *file = json_string_value(json_object_get(s->config, "default_model_filename"));
  if (file == NULL || file[0] == '\0') {
    file = "model.py";
  }
  int n = s->backend->backend_model_file[0]
              ? asprintf(&s->model_file, "%s", s->backend->backend_model_file)
              : asprintf(&s->model_file, "%s/%llu/%s", repo, (unsigned long long)version, file);
  if (n < 0) {
    s->model_file = NULL;
    nrd_py_model_free(s);
    return oom();
  }
  if (access(s->model_file, R_OK) != 0) {
    err = nrd_bu_error_newf(TRITONSERVER_ERROR_NOT_FOUND, "python: model '%s' has no %s", name, s->model_file);
    nrd_py_model_free(s);
    return err;
  }
  /* EXECUTION_ENV_PATH: the Python environment every stub of the model
   * runs in (the auto-complete one too). */
  const char *env = nrd_bu_config_parameter(s->config, "EXECUTION_ENV_PATH");
  if (env != NULL && env[0] != '\0') {
    if ((err = nrd_py_env_resolve(&s->backend->envs, name, repo, env, s->backend->env_outside_model, &s->env_dir)) !=
        NULL) {
      nrd_py_model_free(s);
      return err;
    }
    NRD_BU_LOG(TRITONSERVER_LOG_INFO, "python: model '%s' uses the Python execution environment %s", name, s->env_dir);
  }
  if ((err = auto_complete(s)) != NULL) {
    nrd_py_model_free(s);
    return err;
  }
  char *config_text = json_dumps(s->config, JSON_COMPACT);
  char vbuf[32];
  snprintf(vbuf, sizeof vbuf, "%llu", (unsigned long long)version);
  json_t *args =
      json_pack("{s:s, s:s, s:s, s:s, s:s}", "model_config", config_text ? config_text : "{}", "model_repository", repo,
                "model_version", vbuf, "model_name", name, "model_file", s->model_file);
  free(config_text);
  s->init_args = args ? json_dumps(args, JSON_COMPACT) : NULL;
  json_decref(args);
  if (s->init_args == NULL) {
    nrd_py_model_free(s);
    return oom();
  }
  *out = s;
  return NULL;
}

void nrd_py_model_free(nrd_py_model *s) {
  if (s == NULL) {
    return;
  }
  json_decref(s->config);
  free(s->model_file);
  free(s->init_args);
  free(s->env_dir);
  free(s);
}

/* Exchanges the 'len' bytes already in the message area; on success
 * '*text' is the reply (in the shared memory, '*text_len' bytes, valid
 * until the next exchange). Errors come back as TRITONSERVER errors. */
static TRITONSERVER_Error *exchange_raw(nrd_py_instance *st, uint32_t len, uint64_t timeout_ms, const char **text,
                                       uint32_t *text_len) {
  char *why = nrd_py_stub_exchange(&st->stub, len, timeout_ms, text, text_len);
  if (why != NULL) {
    TRITONSERVER_Error *err = nrd_bu_error_newf(TRITONSERVER_ERROR_UNAVAILABLE, "%s (model '%s', instance '%s')", why,
                                                st->model->name, st->name);
    free(why);
    return err;
  }
  return NULL;
}

/* Writes 'msg' into the message area; its length, or 0 (an error in
 * '*err') when it does not fit. */
static uint32_t put_message(nrd_py_instance *st, const json_t *msg, TRITONSERVER_Error **err) {
  size_t n = json_dumpb(msg, nrd_py_stub_meta(&st->stub), NRD_PY_META_SIZE, JSON_COMPACT);
  if (n == 0 || n > NRD_PY_META_SIZE) {
    *err = nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "python: message for model '%s' too large",
                             st->model->name);
    return 0;
  }
  return (uint32_t)n;
}

/* Parses a JSON reply into '*reply' (a new reference). */
static TRITONSERVER_Error *parse_reply(const char *text, uint32_t len, json_t **reply) {
  json_error_t jerr;
  *reply = json_loadb(text, len, 0, &jerr);
  if (*reply == NULL) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL, "python: unreadable reply from the stub: %s", jerr.text);
  }
  return NULL;
}

/* Writes 'msg' into the message area and exchanges it; on success '*reply'
 * is a new JSON reference. Errors come back as TRITONSERVER errors. */
static TRITONSERVER_Error *exchange(nrd_py_instance *st, json_t *msg, uint64_t timeout_ms, json_t **reply) {
  *reply = NULL;
  TRITONSERVER_Error *err = NULL;
  uint32_t n = put_message(st, msg, &err);
  const char *text = NULL;
  uint32_t len = 0;
  if (err == NULL) {
    err = exchange_raw(st, n, timeout_ms, &text, &len);
  }
  return err != NULL ? err : parse_reply(text, len, reply);
}

/* The reply's "error" as a TRITONSERVER error, or NULL. */
static TRITONSERVER_Error *reply_error(const json_t *reply) {
  const char *e = json_string_value(json_object_get(reply, "error"));
  if (e == NULL) {
    return NULL;
  }
  json_int_t code = json_integer_value(json_object_get(reply, "code"));
  return TRITONSERVER_ErrorNew(code > 0 ? (TRITONSERVER_Error_Code)code : TRITONSERVER_ERROR_INTERNAL, e);
}

/* Starts a stub for 'm' with sys.path holding the model's directory and
 * the backend's. */
static TRITONSERVER_Error *start_stub(nrd_py_model *m, nrd_py_stub *stub) {
  const nrd_py_backend *b = m->backend;
  char stub_path[PATH_MAX + 64];
  snprintf(stub_path, sizeof stub_path, "%s/triton_python_backend_stub", b->dir);
  char *pypath = NULL;
  char *mdir = strdup(m->model_file);
  char *slash = mdir ? strrchr(mdir, '/') : NULL;
  if (slash != NULL) {
    *slash = '\0';
  }
  if (mdir == NULL || asprintf(&pypath, "%s:%s", mdir, b->dir) < 0) {
    free(mdir);
    return oom();
  }
  free(mdir);
  char shm_name[192];
  snprintf(shm_name, sizeof shm_name, "%s%u", b->shm_prefix,
           __atomic_add_fetch(&m->backend->regions, 1u, __ATOMIC_RELAXED));
  char *why = nrd_py_stub_start(stub, stub_path, pypath, m->env_dir, shm_name, b->shm_size, b->shm_growth);
  free(pypath);
  if (why != NULL) {
    TRITONSERVER_Error *err = nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL, "%s", why);
    free(why);
    return err;
  }
  return NULL;
}

/* Asks model.py's auto_complete_config (in a stub of its own) to complete
 * the configuration, and gives the result to the core. */
static TRITONSERVER_Error *auto_complete(nrd_py_model *m) {
  bool wanted = false;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelAutoCompleteConfig(m->model, &wanted);
  if (err != NULL || !wanted) {
    return err;
  }
  nrd_py_instance tmp = {.model = m, .name = "auto-complete"};
  if ((err = start_stub(m, &tmp.stub)) != NULL) {
    return err;
  }
  json_t *msg = json_pack("{s:s, s:O, s:s}", "type", "auto_complete", "config", m->config, "model_file", m->model_file);
  json_t *reply = NULL;
  err = exchange(&tmp, msg, m->backend->stub_timeout_ms ? m->backend->stub_timeout_ms : 300000u, &reply);
  json_decref(msg);
  nrd_py_stub_stop(&tmp.stub, 2000);
  if (err == NULL) {
    err = reply_error(reply);
  }
  char *text = err == NULL ? json_dumps(json_object_get(reply, "config"), JSON_COMPACT) : NULL;
  json_decref(reply);
  if (err != NULL) {
    return err;
  }
  if (text == NULL) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL,
                             "python: auto_complete_config of '%s' returned no configuration", m->name);
  }
  TRITONSERVER_Message *message = NULL;
  err = TRITONSERVER_MessageNewFromSerializedJson(&message, text, strlen(text));
  free(text);
  if (err == NULL) {
    err = TRITONBACKEND_ModelSetConfig(m->model, 1, message);
    TRITONSERVER_MessageDelete(message);
  }
  if (err == NULL) {
    json_decref(m->config);
    m->config = NULL;
    err = nrd_bu_model_config(m->model, &m->config);
  }
  return err;
}

/* Starts the instance's stub and runs initialize() in it; on failure the
 * stub is stopped again. The instance's init thread, or its execute thread
 * when a stub that died is started again. */
static TRITONSERVER_Error *boot(nrd_py_instance *s) {
  const nrd_py_backend *b = s->model->backend;
  TRITONSERVER_Error *err = start_stub(s->model, &s->stub);
  if (err != NULL) {
    return err;
  }
  json_error_t jerr;
  json_t *args = json_loads(s->model->init_args, 0, &jerr);
  char dbuf[16];
  snprintf(dbuf, sizeof dbuf, "%d", s->device);
  json_object_set_new(args, "model_instance_name", json_string(s->name));
  json_object_set_new(args, "model_instance_kind", json_string(TRITONSERVER_InstanceGroupKindString(s->kind)));
  json_object_set_new(args, "model_instance_device_id", json_string(dbuf));
  json_t *msg = json_pack("{s:s, s:o}", "type", "init", "args", args);
  json_t *reply = NULL;
  /* Importing numpy and the model takes a while on a loaded machine. */
  err = exchange(s, msg, b->stub_timeout_ms ? b->stub_timeout_ms : 300000u, &reply);
  json_decref(msg);
  if (err == NULL) {
    err = converse(s, NULL, &reply);
  }
  if (err == NULL) {
    err = reply_error(reply);
  }
  json_decref(reply);
  if (err != NULL) {
    nrd_py_stub_stop(&s->stub, 0);
    nrd_py_services_free(s);
  }
  return err;
}

TRITONSERVER_Error *nrd_py_instance_new(TRITONBACKEND_ModelInstance *instance, nrd_py_instance **out) {
  *out = NULL;
  TRITONBACKEND_Model *model = NULL;
  void *mstate = NULL;
  const char *name = NULL;
  TRITONSERVER_InstanceGroupKind kind;
  int32_t device = 0;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelInstanceModel(instance, &model);
  if (err == NULL) {
    err = TRITONBACKEND_ModelState(model, &mstate);
  }
  if (err == NULL) {
    err = TRITONBACKEND_ModelInstanceName(instance, &name);
  }
  if (err == NULL) {
    err = TRITONBACKEND_ModelInstanceKind(instance, &kind);
  }
  if (err == NULL) {
    err = TRITONBACKEND_ModelInstanceDeviceId(instance, &device);
  }
  if (err != NULL) {
    return err;
  }
  nrd_py_instance *s = calloc(1, sizeof *s);
  if (s == NULL) {
    return oom();
  }
  s->model = mstate;
  s->instance = instance;
  s->stub.fd = -1;
  s->name = strdup(name);
  s->kind = kind;
  s->device = device;
  err = boot(s);
  if (err != NULL) {
    free(s->name);
    free(s);
    return err;
  }
  *out = s;
  return NULL;
}

TRITONSERVER_Error *nrd_py_instance_ready(nrd_py_instance *s) {
  if (s != NULL && nrd_py_stub_running(&s->stub)) {
    return NULL;
  }
  return nrd_bu_error_newf(TRITONSERVER_ERROR_UNAVAILABLE, "Stub process '%s' is not healthy.",
                           s != NULL && s->name != NULL ? s->name : "");
}

void nrd_py_instance_free(nrd_py_instance *s) {
  if (s == NULL) {
    return;
  }
  if (s->stub.base != NULL && nrd_py_stub_alive(&s->stub)) {
    json_t *msg = json_pack("{s:s}", "type", "finalize");
    json_t *reply = NULL;
    TRITONSERVER_Error *err = exchange(s, msg, 30000, &reply);
    json_decref(msg);
    if (err == NULL) {
      err = converse(s, NULL, &reply);
    }
    if (err == NULL) {
      err = reply_error(reply);
    }
    if (err != NULL) {
      nrd_bu_error_log_and_delete(err, "python: finalize");
    }
    json_decref(reply);
  }
  nrd_py_stub_stop(&s->stub, 2000);
  nrd_py_services_free(s);
  free(s->name);
  free(s);
}

/* ---- Execute ------------------------------------------------------------ */

static json_t *request_parameters(TRITONBACKEND_Request *r) {
  json_t *p = json_object();
  uint32_t n = 0;
  if (TRITONBACKEND_RequestParameterCount(r, &n) != NULL) {
    return p;
  }
  for (uint32_t i = 0; i < n; i++) {
    const char *key = NULL;
    TRITONSERVER_ParameterType type;
    const void *v = NULL;
    TRITONSERVER_Error *err = TRITONBACKEND_RequestParameter(r, i, &key, &type, &v);
    if (err != NULL) {
      TRITONSERVER_ErrorDelete(err);
      continue;
    }
    switch (type) {
      case TRITONSERVER_PARAMETER_STRING: json_object_set_new(p, key, json_string((const char *)v)); break;
      case TRITONSERVER_PARAMETER_INT: json_object_set_new(p, key, json_integer(*(const int64_t *)v)); break;
      case TRITONSERVER_PARAMETER_BOOL: json_object_set_new(p, key, json_boolean(*(const bool *)v)); break;
      case TRITONSERVER_PARAMETER_DOUBLE: json_object_set_new(p, key, json_real(*(const double *)v)); break;
      default: break;
    }
  }
  return p;
}

/* The execute message is written straight into the message area, as
 * JSON the stub reads, without building a jansson tree first (the tree
 * and its allocations were a tenth of the server's CPU per request). */
typedef struct wbuf {
  char *p;
  size_t n, cap;
  bool full; /* something did not fit: the message is refused */
} wbuf;

static void w_raw(wbuf *w, const char *s, size_t len) {
  if (w->full || len > w->cap - w->n) {
    w->full = true;
    return;
  }
  memcpy(w->p + w->n, s, len);
  w->n += len;
}

static void w_lit(wbuf *w, const char *s) { w_raw(w, s, strlen(s)); }

static void w_int(wbuf *w, int64_t v) {
  char t[32];
  int k = snprintf(t, sizeof t, "%lld", (long long)v);
  w_raw(w, t, (size_t)k);
}

static void w_uint(wbuf *w, uint64_t v) {
  char t[32];
  int k = snprintf(t, sizeof t, "%llu", (unsigned long long)v);
  w_raw(w, t, (size_t)k);
}

/* Length of the valid UTF-8 sequence at 's' (0: not one). */
static size_t utf8_len(const unsigned char *s) {
  unsigned c = s[0];
  size_t k = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
  for (size_t i = 1; i < k; i++) {
    if ((s[i] & 0xc0) != 0x80) {
      return 0;
    }
  }
  if ((k == 3 && ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] >= 0xa0))) ||
      (k == 4 && ((c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] >= 0x90)))) {
    return 0; /* overlong, a surrogate, past U+10FFFF */
  }
  return k;
}

/* A JSON string: quotes, backslashes and control characters escaped, a
 * byte that is not valid UTF-8 as U+FFFD (the stub decodes UTF-8). */
static void w_str(wbuf *w, const char *s) {
  w_raw(w, "\"", 1);
  const unsigned char *u = (const unsigned char *)(s ? s : "");
  size_t run = 0; /* plain bytes not yet written */
  for (size_t i = 0;; i++) {
    unsigned c = u[i];
    if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
      run++;
      continue;
    }
    w_raw(w, (const char *)u + i - run, run);
    run = 0;
    if (c == 0) {
      break;
    }
    if (c >= 0x80) {
      size_t k = utf8_len(u + i);
      if (k == 0) {
        w_lit(w, "\\ufffd");
      } else {
        w_raw(w, (const char *)u + i, k);
        i += k - 1;
      }
    } else if (c == '"' || c == '\\') {
      char e[2] = {'\\', (char)c};
      w_raw(w, e, 2);
    } else {
      char e[8];
      snprintf(e, sizeof e, "\\u%04x", c);
      w_raw(w, e, 6);
    }
  }
  w_raw(w, "\"", 1);
}

/* The request's parameters as JSON object text (malloc'ed), or NULL for
 * none ("{}"). */
static char *parameters_text(TRITONBACKEND_Request *r) {
  uint32_t n = 0;
  TRITONSERVER_Error *err = TRITONBACKEND_RequestParameterCount(r, &n);
  if (err != NULL) {
    TRITONSERVER_ErrorDelete(err);
    return NULL;
  }
  if (n == 0) {
    return NULL;
  }
  json_t *params = request_parameters(r);
  char *text = json_object_size(params) ? json_dumps(params, JSON_COMPACT) : NULL;
  json_decref(params);
  return text;
}

/* Describes request 'r' into 'w' (one entry of the execute message's
 * "requests") and copies its inputs to the data area from '*off' on. */
static TRITONSERVER_Error *describe_request(nrd_py_instance *st, TRITONBACKEND_Request *r, uint64_t *off, wbuf *w) {
  const char *id = "";
  TRITONSERVER_Error *err = TRITONBACKEND_RequestId(r, &id);
  if (err != NULL) {
    return err;
  }
  w_lit(w, "{\"id\":");
  w_str(w, id);
  uint64_t corr = 0;
  err = TRITONBACKEND_RequestCorrelationId(r, &corr);
  if (err != NULL) {
    TRITONSERVER_ErrorDelete(err);
    const char *cs = "";
    err = TRITONBACKEND_RequestCorrelationIdString(r, &cs);
    if (err != NULL) {
      TRITONSERVER_ErrorDelete(err);
      err = NULL;
    } else {
      w_lit(w, ",\"correlation_id\":");
      w_str(w, cs);
    }
  } else {
    w_lit(w, ",\"correlation_id\":");
    w_uint(w, corr);
  }
  uint32_t flags = 0;
  if ((err = TRITONBACKEND_RequestFlags(r, &flags)) != NULL) {
    return err;
  }
  w_lit(w, ",\"flags\":");
  w_uint(w, flags);
  uint64_t timeout = 0;
  if ((err = TRITONBACKEND_InferenceRequestTimeoutMicroseconds(r, &timeout)) != NULL) {
    TRITONSERVER_ErrorDelete(err);
    timeout = 0;
  }
  w_lit(w, ",\"timeout\":");
  w_uint(w, timeout);
  char *ptext = parameters_text(r);
  w_lit(w, ",\"parameters\":");
  w_str(w, ptext ? ptext : "{}");
  free(ptext);

  w_lit(w, ",\"requested\":[");
  uint32_t n = 0;
  if ((err = TRITONBACKEND_RequestOutputCount(r, &n)) != NULL) {
    return err;
  }
  for (uint32_t i = 0; i < n; i++) {
    const char *name = NULL;
    if ((err = TRITONBACKEND_RequestOutputName(r, i, &name)) != NULL) {
      return err;
    }
    if (i > 0) {
      w_raw(w, ",", 1);
    }
    w_str(w, name);
  }
  w_lit(w, "],\"inputs\":[");
  if ((err = TRITONBACKEND_RequestInputCount(r, &n)) != NULL) {
    return err;
  }
  for (uint32_t i = 0; i < n; i++) {
    TRITONBACKEND_Input *in = NULL;
    const char *name = NULL;
    TRITONSERVER_DataType dtype;
    const int64_t *shape = NULL;
    uint32_t dims = 0, buffers = 0;
    uint64_t size = 0;
    if ((err = TRITONBACKEND_RequestInputByIndex(r, i, &in)) != NULL ||
        (err = TRITONBACKEND_InputProperties(in, &name, &dtype, &shape, &dims, &size, &buffers)) != NULL) {
      return err;
    }
    *off = align_up(*off);
    if (*off + size > st->stub.size) {
      /* The stub waits for this message: grow the region now (by
       * shm-growth-byte-size steps), as Triton grows its pool. */
      char *why = nrd_py_stub_grow(&st->stub, *off + size);
      if (why != NULL) {
        err = nrd_bu_error_newf(TRITONSERVER_ERROR_UNAVAILABLE,
                                "python: the inputs of model '%s' need %llu bytes of shared memory: %s",
                                st->model->name, (unsigned long long)(*off + size), why);
        free(why);
        return err;
      }
    }
    uint8_t *base = st->stub.base;
    w_lit(w, i > 0 ? ",{\"name\":" : "{\"name\":");
    w_str(w, name);
    w_lit(w, ",\"dtype\":");
    w_str(w, TRITONSERVER_DataTypeString(dtype));
    w_lit(w, ",\"shape\":[");
    for (uint32_t d = 0; d < dims; d++) {
      if (d > 0) {
        w_raw(w, ",", 1);
      }
      w_int(w, shape[d]);
    }
    w_lit(w, "],\"off\":");
    w_uint(w, *off);
    w_lit(w, ",\"size\":");
    w_uint(w, size);
    w_raw(w, "}", 1);
    uint64_t at = *off;
    for (uint32_t b = 0; b < buffers; b++) {
      const void *p = NULL;
      uint64_t bsize = 0;
      TRITONSERVER_MemoryType mt = TRITONSERVER_MEMORY_CPU;
      int64_t mid = 0;
      if ((err = TRITONBACKEND_InputBuffer(in, b, &p, &bsize, &mt, &mid)) != NULL) {
        return err;
      }
      if (at + bsize > *off + size) {
        bsize = *off + size - at;
      }
      memcpy(base + at, p, bsize);
      at += bsize;
    }
    *off += size;
  }
  w_lit(w, "]}");
  return NULL;
}

/* Sends 'resp' as failed with 'err' (taken); NULL: nothing left to answer. */
static TRITONSERVER_Error *send_failed(TRITONBACKEND_Response *resp, uint32_t flags, TRITONSERVER_Error *err) {
  TRITONSERVER_Error *e2 = TRITONBACKEND_ResponseSend(resp, flags, err);
  TRITONSERVER_ErrorDelete(err);
  if (e2 != NULL) {
    nrd_bu_error_log_and_delete(e2, "python: sending a response");
  }
  return NULL;
}

/* One output of a reply: where the stub put it in the shared memory. */
typedef struct out_desc {
  const char *name; /* NUL-terminated, in the reply */
  TRITONSERVER_DataType dtype;
  uint32_t dims;
  int64_t shape[64];
  uint64_t off, size;
} out_desc;

/* Builds and sends the response to request 'r' from its outputs 'outs'
 * (and response parameters 'params', a JSON object or NULL), with
 * 'flags'; from 'factory' when one is given (a response sender's), else
 * as the request's one response. */
static TRITONSERVER_Error *respond_outputs(nrd_py_instance *st, TRITONBACKEND_Request *r,
                                           TRITONBACKEND_ResponseFactory *factory, const json_t *params,
                                           const out_desc *outs, size_t n_outs, uint32_t flags) {
  uint32_t n = 0;
  TRITONSERVER_Error *err = TRITONBACKEND_RequestOutputCount(r, &n);
  if (err != NULL) {
    return err;
  }
  /* As Triton's Python backend does, a requested output the model did
   * not make is left out of the response (not an error), and an output's
   * datatype is not checked against the configuration: Triton 2.51
   * answers an INT32 output made as int64 with INT64. */
  TRITONBACKEND_Response *resp = NULL;
  err = factory ? TRITONBACKEND_ResponseNewFromFactory(&resp, factory) : TRITONBACKEND_ResponseNew(&resp, r);
  if (err != NULL) {
    return err;
  }
  /* InferenceResponse(parameters=...): bool, int and str (the stub
   * checked them). */
  const char *key;
  json_t *v;
  json_object_foreach((json_t *)params, key, v) {
    if (json_is_string(v)) {
      err = TRITONBACKEND_ResponseSetStringParameter(resp, key, json_string_value(v));
    } else if (json_is_boolean(v)) {
      err = TRITONBACKEND_ResponseSetBoolParameter(resp, key, json_is_true(v));
    } else if (json_is_integer(v)) {
      err = TRITONBACKEND_ResponseSetIntParameter(resp, key, json_integer_value(v));
    }
    if (err != NULL) {
      return send_failed(resp, flags, err);
    }
  }
  for (size_t k = 0; k < n_outs; k++) {
    const out_desc *o = &outs[k];
    bool requested = n == 0;
    for (uint32_t i = 0; i < n && !requested; i++) {
      const char *want = NULL;
      if (TRITONBACKEND_RequestOutputName(r, i, &want) == NULL && strcmp(want, o->name) == 0) {
        requested = true;
      }
    }
    if (!requested) {
      continue;
    }
    TRITONBACKEND_Output *out = NULL;
    void *buf = NULL;
    TRITONSERVER_MemoryType mt = TRITONSERVER_MEMORY_CPU;
    int64_t mid = 0;
    err = TRITONBACKEND_ResponseOutput(resp, &out, o->name, o->dtype, o->shape, o->dims);
    if (err == NULL && (o->off > st->stub.size || o->size > st->stub.size - o->off)) {
      err = nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL, "python: bad output offset");
    }
    if (err == NULL && o->size > 0) {
      err = TRITONBACKEND_OutputBuffer(out, &buf, o->size, &mt, &mid);
      if (err == NULL) {
        memcpy(buf, st->stub.base + o->off, o->size);
      }
    }
    if (err != NULL) {
      return send_failed(resp, flags, err);
    }
  }
  err = TRITONBACKEND_ResponseSend(resp, flags, NULL);
  if (err != NULL) {
    nrd_bu_error_log_and_delete(err, "python: sending a response");
  }
  return NULL;
}

/* Builds and sends the response to request 'r' from reply entry 'rj' (its
 * JSON), as respond_outputs. An error the stub reported is returned
 * unsent: the caller answers it. */
static TRITONSERVER_Error *respond(nrd_py_instance *st, TRITONBACKEND_Request *r,
                                   TRITONBACKEND_ResponseFactory *factory, const json_t *rj, uint32_t flags) {
  TRITONSERVER_Error *err = reply_error(rj);
  if (err != NULL) {
    return err;
  }
  const json_t *outs = json_object_get(rj, "outputs");
  size_t n = json_array_size(outs);
  out_desc one, *d = n <= 1 ? &one : calloc(n, sizeof *d);
  if (d == NULL) {
    return oom();
  }
  for (size_t k = 0; k < n; k++) {
    const json_t *o = json_array_get(outs, k);
    const char *name = json_string_value(json_object_get(o, "name"));
    d[k].name = name ? name : "";
    d[k].dtype = TRITONSERVER_StringToDataType(json_string_value(json_object_get(o, "dtype")));
    const json_t *shp = json_object_get(o, "shape");
    d[k].dims = (uint32_t)(json_array_size(shp) > 64 ? 64 : json_array_size(shp));
    for (uint32_t i = 0; i < d[k].dims; i++) {
      d[k].shape[i] = json_integer_value(json_array_get(shp, i));
    }
    d[k].off = (uint64_t)json_integer_value(json_object_get(o, "off"));
    d[k].size = (uint64_t)json_integer_value(json_object_get(o, "size"));
  }
  err = respond_outputs(st, r, factory, json_object_get(rj, "parameters"), d, n, flags);
  if (d != &one) {
    free(d);
  }
  return err;
}

/* Reads one response's outputs from the binary execute reply (py_ipc.h)
 * at '*at' of 'len' bytes into '*outs' (grown as needed, '*cap' entries;
 * the caller frees it); false when the reply is malformed. */
static bool read_binary_response(const char *text, uint32_t len, size_t *at, out_desc **outs, size_t *cap,
                                 size_t *n_outs) {
  uint32_t n = 0;
  if (len - *at < 4) {
    return false;
  }
  memcpy(&n, text + *at, 4);
  *at += 4;
  if (n > (len - *at) / NRD_PY_REPLY_OUT_BYTES) {
    return false;
  }
  if (n > *cap) {
    out_desc *grown = realloc(*outs, n * sizeof *grown);
    if (grown == NULL) {
      return false;
    }
    *outs = grown;
    *cap = n;
  }
  for (uint32_t k = 0; k < n; k++) {
    out_desc *o = &(*outs)[k];
    if (len - *at < NRD_PY_REPLY_OUT_BYTES) {
      return false;
    }
    const uint8_t *p = (const uint8_t *)text + *at;
    uint16_t name_len = 0;
    memcpy(&name_len, p + 2, 2);
    memcpy(&o->off, p + 8, 8);
    memcpy(&o->size, p + 16, 8);
    o->dtype = (TRITONSERVER_DataType)p[0];
    o->dims = p[1];
    *at += NRD_PY_REPLY_OUT_BYTES;
    if (o->dims > 64 || name_len == 0 || (len - *at) / 8 < o->dims || len - *at - 8u * o->dims < name_len) {
      return false;
    }
    memcpy(o->shape, text + *at, 8u * o->dims);
    *at += 8u * o->dims;
    o->name = text + *at;
    if (o->name[name_len - 1] != '\0') {
      return false;
    }
    *at += name_len;
  }
  *n_outs = n;
  return true;
}

/* One batch's conversation with the stub: the response senders' factories
 * (made at a sender's first use) and which requests have had their final
 * response. */
struct batch {
  TRITONBACKEND_Request **requests;
  uint32_t count;
  TRITONBACKEND_ResponseFactory **factories;
  bool *finished;
  /* The stub's reply in binary (py_ipc.h), in the shared memory; NULL
   * when it came as JSON. */
  const char *bin;
  uint32_t bin_len;
};

/* The stub's "response" message: a response sender's send(response,
 * flags). Returns the acknowledgement (its "error" when refused). */
static json_t *sender_send(nrd_py_instance *st, batch *b, const json_t *msg) {
  json_int_t i = json_integer_value(json_object_get(msg, "request"));
  if (i < 0 || (uint64_t)i >= b->count) return json_pack("{s:s}", "error", "python: no such request");
  if (b->finished[i])
    return json_pack("{s:s}", "error",
                     "python: the response sender of this request is closed (its final flag was sent)");
  TRITONSERVER_Error *err = NULL;
  if (b->factories[i] == NULL) err = TRITONBACKEND_ResponseFactoryNew(&b->factories[i], b->requests[i]);
  bool final = json_is_true(json_object_get(msg, "final"));
  uint32_t flags = final ? TRITONSERVER_RESPONSE_COMPLETE_FINAL : 0;
  const json_t *rj = json_object_get(msg, "response");
  if (err == NULL && json_is_object(rj)) {
    err = respond(st, b->requests[i], b->factories[i], rj, flags);
    if (err != NULL) {
      /* The model's error (or a bad output) answers this response. */
      TRITONBACKEND_Response *resp = NULL;
      TRITONSERVER_Error *e2 = TRITONBACKEND_ResponseNewFromFactory(&resp, b->factories[i]);
      if (e2 == NULL) e2 = TRITONBACKEND_ResponseSend(resp, flags, err);
      if (e2 != NULL) nrd_bu_error_log_and_delete(e2, "python: sending an error response");
      TRITONSERVER_ErrorDelete(err);
      err = NULL;
    }
  } else if (err == NULL && final && !json_is_true(json_object_get(msg, "answered"))) {
    /* "answered": a model that is not decoupled sent its one response
     * (which the core made final) and now the final flag alone, as
     * Triton's Python backend allows: nothing more to send. */
    err = TRITONBACKEND_ResponseFactorySendFlags(b->factories[i], TRITONSERVER_RESPONSE_COMPLETE_FINAL);
  }
  if (err != NULL) {
    json_t *ack = json_pack("{s:s}", "error", TRITONSERVER_ErrorMessage(err));
    TRITONSERVER_ErrorDelete(err);
    return ack;
  }
  if (final) b->finished[i] = true;
  return json_object();
}

/* Answers the stub's messages sent while it handles one of ours (a
 * response sender's send, is_cancelled, BLS, model control, metrics) until
 * its reply comes: '*reply' is then that reply. 'b' is the executing batch,
 * NULL outside execute. */
static TRITONSERVER_Error *converse(nrd_py_instance *st, batch *b, json_t **reply) {
  for (;;) {
    const char *type = json_string_value(json_object_get(*reply, "type"));
    json_t *ack = NULL;
    if (type != NULL && b == NULL && (strcmp(type, "response") == 0 || strcmp(type, "is_cancelled") == 0)) {
      ack = json_pack("{s:s}", "error", "python: no request is executing");
    } else if (type != NULL && strcmp(type, "response") == 0) {
      ack = sender_send(st, b, *reply);
    } else if (type != NULL && strcmp(type, "bls") == 0) {
      ack = nrd_py_bls_run(st, *reply);
    } else if (nrd_py_service(st, *reply, &ack)) {
      /* model control or a custom metric */
    } else if (type != NULL && strcmp(type, "is_cancelled") == 0) {
      json_int_t i = json_integer_value(json_object_get(*reply, "request"));
      bool cancelled = false;
      if (i >= 0 && (uint64_t)i < b->count) {
        TRITONSERVER_Error *err = TRITONBACKEND_RequestIsCancelled(b->requests[i], &cancelled);
        if (err != NULL) nrd_bu_error_log_and_delete(err, "python: is_cancelled");
      }
      ack = json_pack("{s:b}", "cancelled", cancelled);
    } else {
      return NULL; /* the reply to "execute" */
    }
    json_decref(*reply);
    *reply = NULL;
    TRITONSERVER_Error *err = NULL;
    uint32_t n = put_message(st, ack, &err);
    json_decref(ack);
    const char *text = NULL;
    uint32_t len = 0;
    if (err == NULL) err = exchange_raw(st, n, st->model->backend->stub_timeout_ms, &text, &len);
    if (err != NULL) return err;
    if (b != NULL && len > 0 && text[0] == NRD_PY_REPLY_BINARY) {
      b->bin = text; /* the binary reply to "execute" */
      b->bin_len = len;
      return NULL;
    }
    if ((err = parse_reply(text, len, reply)) != NULL) return err;
  }
}

void nrd_py_execute(nrd_py_instance *st, TRITONBACKEND_Request **requests, uint32_t count, bool caller_waits) {
  uint64_t start = nrd_bu_now_ns();
  st->caller_waits = caller_waits;
  uint64_t off = NRD_PY_DATA_OFFSET;
  TRITONSERVER_Error *err = NULL;
  batch b = {requests, count, calloc(count ? count : 1, sizeof *b.factories),
             calloc(count ? count : 1, sizeof *b.finished), NULL, 0};
  if (b.factories == NULL || b.finished == NULL) err = nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  if (err == NULL && !nrd_py_stub_alive_lately(&st->stub)) {
    /* As Triton's Python backend does: a stub that died (its batch has
     * failed already) is started again, and initialize() run again, for
     * the next batch. */
    NRD_BU_LOG(TRITONSERVER_LOG_WARN, "python: the stub process of model '%s' instance '%s' is gone; starting it again",
               st->model->name, st->name);
    nrd_py_stub_stop(&st->stub, 0);
    nrd_py_services_free(st);
    TRITONSERVER_Error *berr = boot(st);
    if (berr != NULL) {
      err = nrd_bu_error_newf(TRITONSERVER_ERROR_UNAVAILABLE,
                              "python: the stub process of model '%s' instance '%s' is gone and could not be "
                              "started again: %s",
                              st->model->name, st->name, TRITONSERVER_ErrorMessage(berr));
      TRITONSERVER_ErrorDelete(berr);
    }
  }
  wbuf w = {nrd_py_stub_meta(&st->stub), 0, NRD_PY_META_SIZE, false};
  w_lit(&w, "{\"type\":\"execute\",\"requests\":[");
  for (uint32_t i = 0; i < count && err == NULL; i++) {
    if (i > 0) w_raw(&w, ",", 1);
    err = describe_request(st, requests[i], &off, &w);
  }
  w_lit(&w, "],\"out_off\":");
  w_uint(&w, align_up(off));
  w_raw(&w, "}", 1);
  if (err == NULL && w.full) {
    err = nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "python: message for model '%s' too large",
                            st->model->name);
  }
  json_t *reply = NULL;
  st->stub.spin = caller_waits; /* after a restart, which clears it */
  if (err == NULL) {
    const char *text = NULL;
    uint32_t len = 0;
    err = exchange_raw(st, (uint32_t)w.n, st->model->backend->stub_timeout_ms, &text, &len);
    if (err == NULL && len > 0 && text[0] == NRD_PY_REPLY_BINARY) {
      b.bin = text;
      b.bin_len = len;
    } else if (err == NULL && (err = parse_reply(text, len, &reply)) == NULL) {
      err = converse(st, &b, &reply);
    }
  }
  if (err == NULL && b.bin == NULL) {
    err = reply_error(reply);
  }
  /* The binary reply: its header, then each request's outputs. */
  size_t bin_at = 8;
  out_desc *outs = NULL;
  size_t outs_cap = 0;
  if (err == NULL && b.bin != NULL) {
    uint32_t n = 0;
    if (b.bin_len >= 8) memcpy(&n, b.bin + 4, 4);
    if (b.bin_len < 8 || n != count) {
      err = nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL, "python: unreadable reply from the stub: %u responses",
                              (unsigned)n);
    }
  }
  const json_t *responses = err == NULL ? json_object_get(reply, "responses") : NULL;
  const json_t *release = err == NULL ? json_object_get(reply, "release") : NULL;
  uint64_t end = nrd_bu_now_ns();
  /* The batch's statistics, as Triton's Python backend reports them: each
   * request adds its batch size (its first input's first dimension when
   * the model batches, else 1). Read before the requests are released. */
  int64_t mbs = 0;
  nrd_bu_error_log_and_delete(nrd_bu_config_max_batch_size(st->model->config, &mbs), "python: max_batch_size");
  uint64_t total_batch = 0;
  for (uint32_t i = 0; i < count; i++) total_batch += mbs > 0 ? nrd_bu_request_batch_size(requests[i], NULL) : 1;
  for (uint32_t i = 0; i < count; i++) {
    TRITONSERVER_Error *rerr = NULL;
    if (json_integer_value(json_array_get(release, i)) == TRITONSERVER_REQUEST_RELEASE_RESCHEDULE &&
        !(b.finished != NULL && b.finished[i])) {
      /* set_release_flags(RESCHEDULE): back to the scheduler for another
       * batch, unanswered (an iterative sequence). */
      if (b.factories != NULL && b.factories[i] != NULL) {
        TRITONSERVER_Error *ferr = TRITONBACKEND_ResponseFactoryDelete(b.factories[i]);
        if (ferr != NULL) nrd_bu_error_log_and_delete(ferr, "python: deleting a response factory");
        b.factories[i] = NULL;
      }
      TRITONSERVER_Error *rel = TRITONBACKEND_RequestRelease(requests[i], TRITONSERVER_REQUEST_RELEASE_RESCHEDULE);
      if (rel == NULL) continue;
      rerr = rel; /* could not be rescheduled: answered with the reason */
    }
    if (rerr != NULL) {
      /* answered below */
    } else if (b.finished != NULL && b.finished[i]) {
      /* answered through its response sender */
    } else if (err != NULL) {
      rerr = nrd_bu_error_newf(TRITONSERVER_ErrorCode(err), "%s", TRITONSERVER_ErrorMessage(err));
    } else if (b.bin != NULL) {
      size_t n_outs = 0;
      if (!read_binary_response(b.bin, b.bin_len, &bin_at, &outs, &outs_cap, &n_outs)) {
        rerr = nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL, "python: unreadable reply from the stub");
        bin_at = b.bin_len; /* the rest is unreadable too */
      } else {
        rerr = respond_outputs(st, requests[i], NULL, NULL, outs, n_outs, TRITONSERVER_RESPONSE_COMPLETE_FINAL);
      }
    } else if (responses == NULL) {
      rerr = nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL,
                               "python: model '%s' returned no response for a request and did not close its "
                               "response sender",
                               st->model->name);
    } else {
      rerr = respond(st, requests[i], NULL, json_array_get(responses, i), TRITONSERVER_RESPONSE_COMPLETE_FINAL);
    }
    bool ok = rerr == NULL;
    if (rerr != NULL) {
      if (b.factories != NULL && b.factories[i] != NULL) {
        TRITONBACKEND_Response *resp = NULL;
        TRITONSERVER_Error *e2 = TRITONBACKEND_ResponseNewFromFactory(&resp, b.factories[i]);
        if (e2 == NULL) e2 = TRITONBACKEND_ResponseSend(resp, TRITONSERVER_RESPONSE_COMPLETE_FINAL, rerr);
        if (e2 != NULL) nrd_bu_error_log_and_delete(e2, "python: sending an error response");
      } else {
        nrd_bu_request_respond_error(requests[i], rerr);
      }
      TRITONSERVER_ErrorDelete(rerr);
    }
    if (b.factories != NULL && b.factories[i] != NULL) {
      TRITONSERVER_Error *ferr = TRITONBACKEND_ResponseFactoryDelete(b.factories[i]);
      if (ferr != NULL) nrd_bu_error_log_and_delete(ferr, "python: deleting a response factory");
    }
    TRITONSERVER_Error *serr =
        TRITONBACKEND_ModelInstanceReportStatistics(st->instance, requests[i], ok, start, start, end, nrd_bu_now_ns());
    if (serr != NULL) {
      TRITONSERVER_ErrorDelete(serr);
    }
    nrd_bu_request_release(requests[i]);
  }
  if (count > 0)
    nrd_bu_error_log_and_delete(
        TRITONBACKEND_ModelInstanceReportBatchStatistics(st->instance, total_batch, start, start, end, nrd_bu_now_ns()),
        "python: reporting batch statistics");
  if (err != NULL) TRITONSERVER_ErrorDelete(err);
  free(b.factories);
  free(b.finished);
  free(outs);
  json_decref(reply);
}
