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

/* Writes 'msg' into the message area and exchanges it; on success '*reply'
 * is a new JSON reference. Errors come back as TRITONSERVER errors. */
static TRITONSERVER_Error *exchange(nrd_py_instance *st, json_t *msg, uint64_t timeout_ms, json_t **reply) {
  *reply = NULL;
  size_t n = json_dumpb(msg, nrd_py_stub_meta(&st->stub), NRD_PY_META_SIZE, JSON_COMPACT);
  if (n == 0 || n > NRD_PY_META_SIZE) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INVALID_ARG, "python: message for model '%s' too large",
                             st->model->name);
  }
  const char *text = NULL;
  uint32_t len = 0;
  char *why = nrd_py_stub_exchange(&st->stub, (uint32_t)n, timeout_ms, &text, &len);
  if (why != NULL) {
    TRITONSERVER_Error *err = nrd_bu_error_newf(TRITONSERVER_ERROR_UNAVAILABLE, "%s (model '%s', instance '%s')", why,
                                                st->model->name, st->name);
    free(why);
    return err;
  }
  json_error_t jerr;
  *reply = json_loadb(text, len, 0, &jerr);
  if (*reply == NULL) {
    return nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL, "python: unreadable reply from the stub: %s", jerr.text);
  }
  return NULL;
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

/* Describes request 'r' and copies its inputs to the data area from
 * '*off' on. */
static TRITONSERVER_Error *describe_request(nrd_py_instance *st, TRITONBACKEND_Request *r, uint64_t *off,
                                            json_t **out) {
  json_t *j = json_object();
  *out = j;
  const char *id = "";
  TRITONSERVER_Error *err = TRITONBACKEND_RequestId(r, &id);
  if (err != NULL) {
    return err;
  }
  json_object_set_new(j, "id", json_string(id ? id : ""));
  uint64_t corr = 0;
  err = TRITONBACKEND_RequestCorrelationId(r, &corr);
  if (err != NULL) {
    TRITONSERVER_ErrorDelete(err);
    const char *cs = "";
    err = TRITONBACKEND_RequestCorrelationIdString(r, &cs);
    if (err != NULL) {
      TRITONSERVER_ErrorDelete(err);
    } else {
      json_object_set_new(j, "correlation_id", json_string(cs ? cs : ""));
    }
  } else {
    json_object_set_new(j, "correlation_id", json_integer((json_int_t)corr));
  }
  uint32_t flags = 0;
  if ((err = TRITONBACKEND_RequestFlags(r, &flags)) != NULL) {
    return err;
  }
  json_object_set_new(j, "flags", json_integer(flags));
  uint64_t timeout = 0;
  if ((err = TRITONBACKEND_InferenceRequestTimeoutMicroseconds(r, &timeout)) != NULL) {
    TRITONSERVER_ErrorDelete(err);
    timeout = 0;
  }
  json_object_set_new(j, "timeout", json_integer((json_int_t)timeout));
  json_t *params = request_parameters(r);
  char *ptext = json_object_size(params) ? json_dumps(params, JSON_COMPACT) : NULL;
  json_decref(params);
  json_object_set_new(j, "parameters", json_string(ptext ? ptext : "{}"));
  free(ptext);

  json_t *requested = json_array();
  json_object_set_new(j, "requested", requested);
  uint32_t n = 0;
  if ((err = TRITONBACKEND_RequestOutputCount(r, &n)) != NULL) {
    return err;
  }
  for (uint32_t i = 0; i < n; i++) {
    const char *name = NULL;
    if ((err = TRITONBACKEND_RequestOutputName(r, i, &name)) != NULL) {
      return err;
    }
    json_array_append_new(requested, json_string(name));
  }

  json_t *inputs = json_array();
  json_object_set_new(j, "inputs", inputs);
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
    json_t *shp = json_array();
    for (uint32_t d = 0; d < dims; d++) {
      json_array_append_new(shp, json_integer(shape[d]));
    }
    json_array_append_new(inputs, json_pack("{s:s, s:s, s:o, s:I, s:I}", "name", name, "dtype",
                                            TRITONSERVER_DataTypeString(dtype), "shape", shp, "off", (json_int_t)*off,
                                            "size", (json_int_t)size));
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

/* Builds and sends the response to request 'r' from reply entry 'rj',
 * with 'flags'; from 'factory' when one is given (a response sender's),
 * else as the request's one response. An error the stub reported is
 * returned unsent: the caller answers it. */
static TRITONSERVER_Error *respond(nrd_py_instance *st, TRITONBACKEND_Request *r,
                                   TRITONBACKEND_ResponseFactory *factory, const json_t *rj, uint32_t flags) {
  TRITONSERVER_Error *err = reply_error(rj);
  if (err != NULL) {
    return err;
  }
  const json_t *outs = json_object_get(rj, "outputs");
  uint32_t n = 0;
  if ((err = TRITONBACKEND_RequestOutputCount(r, &n)) != NULL) {
    return err;
  }
  /* As Triton's Python backend does, a requested output the model did
   * not make is left out of the response (not an error), and an output's
   * datatype is not checked against the configuration: Triton 2.51
   * answers an INT32 output made as int64 with INT64. */
  size_t k;
  const json_t *o;
  TRITONBACKEND_Response *resp = NULL;
  err = factory ? TRITONBACKEND_ResponseNewFromFactory(&resp, factory) : TRITONBACKEND_ResponseNew(&resp, r);
  if (err != NULL) {
    return err;
  }
  /* InferenceResponse(parameters=...): bool, int and str (the stub
   * checked them). */
  const char *key;
  json_t *v;
  json_object_foreach(json_object_get(rj, "parameters"), key, v) {
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
  json_array_foreach(outs, k, o) {
    const char *name = json_string_value(json_object_get(o, "name"));
    bool requested = n == 0;
    for (uint32_t i = 0; i < n && !requested; i++) {
      const char *want = NULL;
      if (TRITONBACKEND_RequestOutputName(r, i, &want) == NULL && strcmp(want, name) == 0) {
        requested = true;
      }
    }
    if (!requested) {
      continue;
    }
    const json_t *shp = json_object_get(o, "shape");
    int64_t shape[64];
    size_t dims = json_array_size(shp);
    if (dims > 64) {
      dims = 64;
    }
    for (size_t d = 0; d < dims; d++) {
      shape[d] = json_integer_value(json_array_get(shp, d));
    }
    uint64_t off = (uint64_t)json_integer_value(json_object_get(o, "off"));
    uint64_t size = (uint64_t)json_integer_value(json_object_get(o, "size"));
    TRITONBACKEND_Output *out = NULL;
    void *buf = NULL;
    TRITONSERVER_MemoryType mt = TRITONSERVER_MEMORY_CPU;
    int64_t mid = 0;
    err = TRITONBACKEND_ResponseOutput(resp, &out, name,
                                       TRITONSERVER_StringToDataType(json_string_value(json_object_get(o, "dtype"))),
                                       shape, (uint32_t)dims);
    if (err == NULL && off + size > st->stub.size) {
      err = nrd_bu_error_newf(TRITONSERVER_ERROR_INTERNAL, "python: bad output offset");
    }
    if (err == NULL && size > 0) {
      err = TRITONBACKEND_OutputBuffer(out, &buf, size, &mt, &mid);
      if (err == NULL) {
        memcpy(buf, st->stub.base + off, size);
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

/* One batch's conversation with the stub: the response senders' factories
 * (made at a sender's first use) and which requests have had their final
 * response. */
struct batch {
  TRITONBACKEND_Request **requests;
  uint32_t count;
  TRITONBACKEND_ResponseFactory **factories;
  bool *finished;
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
    TRITONSERVER_Error *err = exchange(st, ack, st->model->backend->stub_timeout_ms, reply);
    json_decref(ack);
    if (err != NULL) return err;
  }
}

void nrd_py_execute(nrd_py_instance *st, TRITONBACKEND_Request **requests, uint32_t count, bool caller_waits) {
  uint64_t start = nrd_bu_now_ns();
  st->caller_waits = caller_waits;
  json_t *list = json_array();
  json_t *msg = json_pack("{s:s, s:o}", "type", "execute", "requests", list);
  uint64_t off = NRD_PY_DATA_OFFSET;
  TRITONSERVER_Error *err = NULL;
  batch b = {requests, count, calloc(count ? count : 1, sizeof *b.factories),
             calloc(count ? count : 1, sizeof *b.finished)};
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
  for (uint32_t i = 0; i < count && err == NULL; i++) {
    json_t *rj = NULL;
    err = describe_request(st, requests[i], &off, &rj);
    json_array_append_new(list, rj);
  }
  json_object_set_new(msg, "out_off", json_integer((json_int_t)align_up(off)));
  json_t *reply = NULL;
  st->stub.spin = caller_waits; /* after a restart, which clears it */
  if (err == NULL) {
    err = exchange(st, msg, st->model->backend->stub_timeout_ms, &reply);
  }
  json_decref(msg);
  if (err == NULL) err = converse(st, &b, &reply);
  if (err == NULL) {
    err = reply_error(reply);
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
  json_decref(reply);
}
