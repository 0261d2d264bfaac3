/* The non-inference RPCs of GRPCInferenceService and grpc.health.v1, and
 * the method table. Each handler unpacks its request, asks the core
 * through the public API (JSON messages are read with jansson), packs the
 * response and finishes the call. Model load/unload block in the core, so
 * they run on a short-lived worker thread that posts the result back.
 *
 * Threads: handlers run on the call's loop thread. */
#include "grpc_rpc.h"
#include "error_ignore.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grpc_infer.h"
#include "grpc_service.pb-c.h"
#include "health.pb-c.h"
#include "model_config.pb-c.h"
#include "pb_json.h"

/* ---- helpers -------------------------------------------------------------- */

/* A list of allocations freed together once the response is packed. */
typedef struct arena {
  void **p;
  size_t n, cap;
  bool failed;
} arena;

static void *ar_alloc(arena *a, size_t size) {
  if (a->n == a->cap) {
    size_t cap = a->cap ? a->cap * 2 : 32;
    void **np = realloc(a->p, cap * sizeof *np);
    if (np == NULL) {
      a->failed = true;
      return NULL;
    }
    a->p = np;
    a->cap = cap;
  }
  void *x = calloc(1, size ? size : 1);
  if (x == NULL) {
    a->failed = true;
    return NULL;
  }
  a->p[a->n++] = x;
  return x;
}

static void ar_free(arena *a) {
  for (size_t i = 0; i < a->n; i++) free(a->p[i]);
  free(a->p);
}

static void *unpack(nrd_srv_grpc_call *call, const ProtobufCMessageDescriptor *d, const uint8_t *msg, size_t len) {
  ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, len, msg);
  if (m == NULL) {
    char text[160];
    snprintf(text, sizeof text, "failed to parse the %s message (malformed protobuf)", d->name);
    nrd_srv_grpc_call_finish(call, NRD_GRPC_INVALID_ARGUMENT, text);
  }
  return m;
}

/* Ends the call with err's status when there is an error (err is
 * deleted). Returns whether it did, so a handler can stop there. */
static bool ended_by(nrd_srv_grpc_call *call, TRITONSERVER_Error *err) {
  if (err == NULL) return false;
  nrd_srv_grpc_call_fail(call, err);
  return true;
}

static void done_with(void *m) {
  if (m) protobuf_c_message_free_unpacked(m, NULL);
}

static TRITONSERVER_Error *parse_version(const char *s, int64_t *v) {
  *v = -1;
  if (s == NULL || s[0] == '\0') return NULL;
  char *end = NULL;
  errno = 0;
  long long x = strtoll(s, &end, 10);
  if (errno || *end != '\0' || x < 0) {
    char text[160];
    snprintf(text, sizeof text, "failed to parse model version '%.100s'", s);
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, text);
  }
  *v = x;
  return NULL;
}

/* Parses a TRITONSERVER_Message as JSON and deletes it. */
static TRITONSERVER_Error *message_json(TRITONSERVER_Message *msg, json_t **out) {
  const char *base = NULL;
  size_t size = 0;
  *out = NULL;
  TRITONSERVER_Error *err = TRITONSERVER_MessageSerializeToJson(msg, &base, &size);
  if (err == NULL) {
    json_error_t jerr;
    *out = json_loadb(base, size, 0, &jerr);
    if (*out == NULL) err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "the core returned invalid JSON");
  }
  TRITONSERVER_MessageDelete(msg);
  return err;
}

/* pb_json's allocator: the call's arena. */
static void *arena_alloc(void *a, size_t size) { return ar_alloc(a, size); }

/* Answers `call` with `resp` after filling `into` (resp itself, or the
 * message resp points to) from `j` (released here). The core's JSON uses
 * the protocol's field names, so the descriptor does the rest (pb_json.h). */
static void reply_from_json(nrd_srv_grpc_call *call, json_t *j, ProtobufCMessage *into, const ProtobufCMessage *resp) {
  arena a = {0};
  if (j == NULL || nrd_srv_pb_from_json(into, j, arena_alloc, &a) != 0 || a.failed)
    nrd_srv_grpc_call_finish(call, NRD_GRPC_RESOURCE_EXHAUSTED, "out of memory");
  else
    nrd_srv_grpc_call_reply(call, resp);
  ar_free(&a);
  json_decref(j);
}

/* Ends `call` with `err` (deleted), or answers it as reply_from_json does
 * from the core's JSON message `m` (deleted). */
static void reply_from_message(nrd_srv_grpc_call *call, TRITONSERVER_Error *err, TRITONSERVER_Message *m,
                               ProtobufCMessage *into, const ProtobufCMessage *resp) {
  json_t *j = NULL;
  if (err == NULL) err = message_json(m, &j);
  if (ended_by(call, err)) return;
  reply_from_json(call, j, into, resp);
}

/* ---- health and metadata ----------------------------------------------------- */

static void server_live(nrd_srv_grpc_call *call, const uint8_t *msg, size_t len) {
  Inference__ServerLiveRequest *req = unpack(call, &inference__server_live_request__descriptor, msg, len);
  if (req == NULL) return;
  done_with(req);
  Inference__ServerLiveResponse r = INFERENCE__SERVER_LIVE_RESPONSE__INIT;
  bool live = false;
  TRITONSERVER_Error *err = TRITONSERVER_ServerIsLive(nrd_srv_grpc_call_server(call), &live);
  if (ended_by(call, err)) return;
  r.live = live;
  nrd_srv_grpc_call_reply(call, &r.base);
}

static void server_ready(nrd_srv_grpc_call *call, const uint8_t *msg, size_t len) {
  Inference__ServerReadyRequest *req = unpack(call, &inference__server_ready_request__descriptor, msg, len);
  if (req == NULL) return;
  done_with(req);
  Inference__ServerReadyResponse r = INFERENCE__SERVER_READY_RESPONSE__INIT;
  bool ready = false;
  TRITONSERVER_Error *err = TRITONSERVER_ServerIsReady(nrd_srv_grpc_call_server(call), &ready);
  if (ended_by(call, err)) return;
  r.ready = ready;
  nrd_srv_grpc_call_reply(call, &r.base);
}

static void model_ready(nrd_srv_grpc_call *call, const uint8_t *msg, size_t len) {
  Inference__ModelReadyRequest *req = unpack(call, &inference__model_ready_request__descriptor, msg, len);
  if (req == NULL) return;
  int64_t v;
  bool ready = false;
  TRITONSERVER_Error *err = parse_version(req->version, &v);
  if (err == NULL) err = TRITONSERVER_ServerModelIsReady(nrd_srv_grpc_call_server(call), req->name, v, &ready);
  done_with(req);
  if (ended_by(call, err)) return;
  Inference__ModelReadyResponse r = INFERENCE__MODEL_READY_RESPONSE__INIT;
  r.ready = ready;
  nrd_srv_grpc_call_reply(call, &r.base);
}

static void server_metadata(nrd_srv_grpc_call *call, const uint8_t *msg, size_t len) {
  Inference__ServerMetadataRequest *req = unpack(call, &inference__server_metadata_request__descriptor, msg, len);
  if (req == NULL) return;
  done_with(req);
  TRITONSERVER_Message *m = NULL;
  TRITONSERVER_Error *err = TRITONSERVER_ServerMetadata(nrd_srv_grpc_call_server(call), &m);
  Inference__ServerMetadataResponse r = INFERENCE__SERVER_METADATA_RESPONSE__INIT;
  reply_from_message(call, err, m, &r.base, &r.base);
}

static void model_metadata(nrd_srv_grpc_call *call, const uint8_t *msg, size_t len) {
  Inference__ModelMetadataRequest *req = unpack(call, &inference__model_metadata_request__descriptor, msg, len);
  if (req == NULL) return;
  int64_t v;
  TRITONSERVER_Message *m = NULL;
  TRITONSERVER_Error *err = parse_version(req->version, &v);
  if (err == NULL) err = TRITONSERVER_ServerModelMetadata(nrd_srv_grpc_call_server(call), req->name, v, &m);
  done_with(req);
  Inference__ModelMetadataResponse r = INFERENCE__MODEL_METADATA_RESPONSE__INIT;
  reply_from_message(call, err, m, &r.base, &r.base);
}

/* ---- model configuration -------------------------------------------------------- */

static void model_config(nrd_srv_grpc_call *call, const uint8_t *msg, size_t len) {
  Inference__ModelConfigRequest *req = unpack(call, &inference__model_config_request__descriptor, msg, len);
  if (req == NULL) return;
  int64_t v;
  TRITONSERVER_Message *m = NULL;
  TRITONSERVER_Error *err = parse_version(req->version, &v);
  if (err == NULL) err = TRITONSERVER_ServerModelConfig(nrd_srv_grpc_call_server(call), req->name, v, 1, &m);
  done_with(req);
  Inference__ModelConfig cfg = INFERENCE__MODEL_CONFIG__INIT;
  Inference__ModelConfigResponse r = INFERENCE__MODEL_CONFIG_RESPONSE__INIT;
  r.config = &cfg;
  reply_from_message(call, err, m, &cfg.base, &r.base);
}

/* ---- statistics -------------------------------------------------------------------- */

static void model_statistics(nrd_srv_grpc_call *call, const uint8_t *msg, size_t len) {
  Inference__ModelStatisticsRequest *req = unpack(call, &inference__model_statistics_request__descriptor, msg, len);
  if (req == NULL) return;
  int64_t v;
  TRITONSERVER_Message *m = NULL;
  TRITONSERVER_Error *err = parse_version(req->version, &v);
  if (err == NULL) err = TRITONSERVER_ServerModelStatistics(nrd_srv_grpc_call_server(call), req->name, v, &m);
  done_with(req);
  Inference__ModelStatisticsResponse r = INFERENCE__MODEL_STATISTICS_RESPONSE__INIT;
  reply_from_message(call, err, m, &r.base, &r.base);
}

/* ---- repository ------------------------------------------------------------------------ */

static void repository_index(nrd_srv_grpc_call *call, const uint8_t *msg, size_t len) {
  Inference__RepositoryIndexRequest *req = unpack(call, &inference__repository_index_request__descriptor, msg, len);
  if (req == NULL) return;
  uint32_t flags = req->ready ? TRITONSERVER_INDEX_FLAG_READY : 0;
  done_with(req);
  TRITONSERVER_Message *m = NULL;
  json_t *j = NULL;
  TRITONSERVER_Error *err = TRITONSERVER_ServerModelIndex(nrd_srv_grpc_call_server(call), flags, &m);
  if (err == NULL) err = message_json(m, &j);
  if (ended_by(call, err)) return;
  /* The core answers with the bare list. */
  json_t *wrapped = json_object();
  if (wrapped != NULL && json_object_set_new(wrapped, "models", j) != 0) {
    json_decref(wrapped);
    wrapped = NULL;
  } else if (wrapped == NULL) {
    json_decref(j);
  }
  Inference__RepositoryIndexResponse r = INFERENCE__REPOSITORY_INDEX_RESPONSE__INIT;
  reply_from_json(call, wrapped, &r.base, &r.base);
}

/* Load/unload run on a worker thread (the core blocks) and post back.
 * A load keeps its request message until the job ends: BYTES parameters
 * (file overrides) point into it, as TRITONSERVER_ParameterBytesNew does
 * not copy. */
typedef struct repo_job {
  nrd_srv_grpc_event base;
  bool load;
  char *model;
  Inference__RepositoryModelLoadRequest *req; /* owned; NULL for unload */
  TRITONSERVER_Parameter **params;
  size_t n_params;
  bool unload_dependents;
  TRITONSERVER_Error *result;
} repo_job;

static void repo_job_free(repo_job *job) {
  for (size_t i = 0; i < job->n_params; i++) TRITONSERVER_ParameterDelete(job->params[i]);
  free(job->params);
  free(job->model);
  done_with(job->req);
  free(job);
}

static void repo_job_done(nrd_srv_grpc_event *ev, bool open) {
  repo_job *job = (repo_job *)ev;
  if (open) {
    if (job->result) {
      nrd_srv_grpc_call_fail(ev->call, job->result);
      job->result = NULL;
    } else if (job->load) {
      Inference__RepositoryModelLoadResponse r = INFERENCE__REPOSITORY_MODEL_LOAD_RESPONSE__INIT;
      nrd_srv_grpc_call_reply(ev->call, &r.base);
    } else {
      Inference__RepositoryModelUnloadResponse r = INFERENCE__REPOSITORY_MODEL_UNLOAD_RESPONSE__INIT;
      nrd_srv_grpc_call_reply(ev->call, &r.base);
    }
  }
  if (job->result) TRITONSERVER_ErrorDelete(job->result);
  repo_job_free(job);
}

static void *repo_job_main(void *arg) {
  repo_job *job = arg;
  TRITONSERVER_Server *server = nrd_srv_grpc_call_server(job->base.call);
  if (job->load)
    job->result = TRITONSERVER_ServerLoadModelWithParameters(
        server, job->model, (const TRITONSERVER_Parameter **)job->params, job->n_params);
  else if (job->unload_dependents)
    job->result = TRITONSERVER_ServerUnloadModelAndDependents(server, job->model);
  else
    job->result = TRITONSERVER_ServerUnloadModel(server, job->model);
  job->base.run = repo_job_done;
  nrd_srv_grpc_call_post(&job->base);
  return NULL;
}

static void repo_job_start(nrd_srv_grpc_call *call, repo_job *job) {
  nrd_srv_grpc_call_ref(call);
  job->base.call = call;
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int rc = pthread_create(&t, &attr, repo_job_main, job);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    nrd_srv_grpc_call_finish(call, NRD_GRPC_RESOURCE_EXHAUSTED, "cannot start a worker thread");
    nrd_srv_grpc_call_unref(call);
    repo_job_free(job);
  }
}

static void repository_model_load(nrd_srv_grpc_call *call, const uint8_t *msg, size_t len) {
  Inference__RepositoryModelLoadRequest *req =
      unpack(call, &inference__repository_model_load_request__descriptor, msg, len);
  if (req == NULL) return;
  repo_job *job = calloc(1, sizeof *job);
  if (job == NULL) {
    done_with(req);
    nrd_srv_grpc_call_finish(call, NRD_GRPC_RESOURCE_EXHAUSTED, "out of memory");
    return;
  }
  job->load = true;
  job->req = req; /* freed with the job */
  job->model = strdup(req->model_name);
  job->params = calloc(req->n_parameters ? req->n_parameters : 1, sizeof *job->params);
  if (job->model == NULL || job->params == NULL) {
    repo_job_free(job);
    nrd_srv_grpc_call_finish(call, NRD_GRPC_RESOURCE_EXHAUSTED, "out of memory");
    return;
  }
  for (size_t i = 0; i < req->n_parameters; i++) {
    const char *key = req->parameters[i]->key;
    const Inference__ModelRepositoryParameter *p = req->parameters[i]->value;
    TRITONSERVER_Parameter *tp = NULL;
    if (p && p->parameter_choice_case == INFERENCE__MODEL_REPOSITORY_PARAMETER__PARAMETER_CHOICE_STRING_PARAM)
      tp = TRITONSERVER_ParameterNew(key, TRITONSERVER_PARAMETER_STRING, p->string_param);
    else if (p && p->parameter_choice_case == INFERENCE__MODEL_REPOSITORY_PARAMETER__PARAMETER_CHOICE_BYTES_PARAM)
      tp = TRITONSERVER_ParameterBytesNew(key, p->bytes_param.data, p->bytes_param.len);
    else if (p && p->parameter_choice_case == INFERENCE__MODEL_REPOSITORY_PARAMETER__PARAMETER_CHOICE_INT64_PARAM)
      tp = TRITONSERVER_ParameterNew(key, TRITONSERVER_PARAMETER_INT, &p->int64_param);
    else if (p && p->parameter_choice_case == INFERENCE__MODEL_REPOSITORY_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM) {
      bool b = p->bool_param;
      tp = TRITONSERVER_ParameterNew(key, TRITONSERVER_PARAMETER_BOOL, &b);
    }
    if (tp == NULL) {
      char text[200];
      snprintf(text, sizeof text, "load parameter '%.100s' has no usable value", key);
      repo_job_free(job);
      nrd_srv_grpc_call_finish(call, NRD_GRPC_INVALID_ARGUMENT, text);
      return;
    }
    job->params[job->n_params++] = tp;
  }
  repo_job_start(call, job);
}

static void repository_model_unload(nrd_srv_grpc_call *call, const uint8_t *msg, size_t len) {
  Inference__RepositoryModelUnloadRequest *req =
      unpack(call, &inference__repository_model_unload_request__descriptor, msg, len);
  if (req == NULL) return;
  repo_job *job = calloc(1, sizeof *job);
  if (job) job->model = strdup(req->model_name);
  for (size_t i = 0; job && i < req->n_parameters; i++) {
    const Inference__ModelRepositoryParameter *p = req->parameters[i]->value;
    if (strcmp(req->parameters[i]->key, "unload_dependents") == 0 && p &&
        p->parameter_choice_case == INFERENCE__MODEL_REPOSITORY_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM)
      job->unload_dependents = p->bool_param;
  }
  done_with(req);
  if (job == NULL || job->model == NULL) {
    if (job) repo_job_free(job);
    nrd_srv_grpc_call_finish(call, NRD_GRPC_RESOURCE_EXHAUSTED, "out of memory");
    return;
  }
  repo_job_start(call, job);
}

/* ---- shared memory, trace, log ----------------------------------------------------------- */

/* Collects regions for SystemSharedMemoryStatus into an arena. */
typedef struct shm_status_acc {
  arena *a;
  Inference__SystemSharedMemoryStatusResponse__RegionsEntry **entries;
  size_t n, cap;
} shm_status_acc;

static char *ar_strdup(arena *a, const char *s) {
  size_t n = strlen(s) + 1;
  char *d = ar_alloc(a, n);
  if (d) memcpy(d, s, n);
  return d;
}

static int shm_status_visit(const char *name, const char *key, uint64_t offset, uint64_t byte_size, void *arg) {
  shm_status_acc *acc = arg;
  if (acc->n == acc->cap) {
    size_t cap = acc->cap ? acc->cap * 2 : 8;
    void *np = ar_alloc(acc->a, cap * sizeof *acc->entries);
    if (np == NULL) return -1;
    if (acc->n) memcpy(np, acc->entries, acc->n * sizeof *acc->entries);
    acc->entries = np;
    acc->cap = cap;
  }
  Inference__SystemSharedMemoryStatusResponse__RegionsEntry *e = ar_alloc(acc->a, sizeof *e);
  Inference__SystemSharedMemoryStatusResponse__RegionStatus *st = ar_alloc(acc->a, sizeof *st);
  if (e == NULL || st == NULL) return -1;
  inference__system_shared_memory_status_response__regions_entry__init(e);
  inference__system_shared_memory_status_response__region_status__init(st);
  st->name = ar_strdup(acc->a, name);
  st->key = ar_strdup(acc->a, key);
  st->offset = offset;
  st->byte_size = byte_size;
  e->key = st->name;
  e->value = st;
  if (st->name == NULL || st->key == NULL) return -1;
  acc->entries[acc->n++] = e;
  return 0;
}

static void shm_status(nrd_srv_grpc_call *call, const uint8_t *msg, size_t len) {
  Inference__SystemSharedMemoryStatusRequest *req =
      unpack(call, &inference__system_shared_memory_status_request__descriptor, msg, len);
  if (req == NULL) return;
  arena a = {0};
  shm_status_acc acc = {.a = &a};
  TRITONSERVER_Error *err = nrd_srv_shm_status(nrd_srv_grpc_call_shm(call),
                                               req->name && req->name[0] ? req->name : NULL, shm_status_visit, &acc);
  done_with(req);
  if (err) {
    nrd_srv_grpc_call_fail(call, err);
  } else {
    Inference__SystemSharedMemoryStatusResponse r = INFERENCE__SYSTEM_SHARED_MEMORY_STATUS_RESPONSE__INIT;
    r.n_regions = acc.n;
    r.regions = acc.entries;
    nrd_srv_grpc_call_reply(call, &r.base);
  }
  ar_free(&a);
}

static void shm_register(nrd_srv_grpc_call *call, const uint8_t *msg, size_t len) {
  Inference__SystemSharedMemoryRegisterRequest *req =
      unpack(call, &inference__system_shared_memory_register_request__descriptor, msg, len);
  if (req == NULL) return;
  TRITONSERVER_Error *err = NULL;
  if (!nrd_srv_shm_client_allowed(nrd_srv_grpc_call_shm(call)))
    err = nrd_srv_shm_disabled_error(); /* --allow-client-shm=false: first, as Triton */
  else if (req->name == NULL || req->name[0] == '\0')
    err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG,
                                "'name' is necessary to register system shared memory region");
  else if (req->key == NULL || req->key[0] == '\0')
    err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG,
                                "'key' is necessary to register system shared memory region");
  else
    err = nrd_srv_shm_register(nrd_srv_grpc_call_shm(call), req->name, req->key, req->offset, req->byte_size);
  done_with(req);
  if (ended_by(call, err)) return;
  Inference__SystemSharedMemoryRegisterResponse r = INFERENCE__SYSTEM_SHARED_MEMORY_REGISTER_RESPONSE__INIT;
  nrd_srv_grpc_call_reply(call, &r.base);
}

static void shm_unregister(nrd_srv_grpc_call *call, const uint8_t *msg, size_t len) {
  Inference__SystemSharedMemoryUnregisterRequest *req =
      unpack(call, &inference__system_shared_memory_unregister_request__descriptor, msg, len);
  if (req == NULL) return;
  /* An empty name unregisters every region; an unknown name is not an error.
   * With --allow-client-shm=false nothing is unregistered. */
  nrd_srv_shm *shm = nrd_srv_grpc_call_shm(call);
  TRITONSERVER_Error *err = !nrd_srv_shm_client_allowed(shm)
                                ? nrd_srv_shm_disabled_error()
                                : nrd_srv_shm_unregister(shm, req->name && req->name[0] ? req->name : NULL);
  done_with(req);
  if (ended_by(call, err)) return;
  Inference__SystemSharedMemoryUnregisterResponse r = INFERENCE__SYSTEM_SHARED_MEMORY_UNREGISTER_RESPONSE__INIT;
  nrd_srv_grpc_call_reply(call, &r.base);
}

/* CUDA shared memory: regions in the shared registry, opened by their
 * CUDA IPC handle; without an NVIDIA driver registering fails as in
 * Triton built without GPUs, and no region exists. */
typedef struct cuda_status_acc {
  arena *a;
  Inference__CudaSharedMemoryStatusResponse__RegionsEntry **entries;
  size_t n, cap;
} cuda_status_acc;

static int cuda_status_visit(const char *name, int64_t device, uint64_t byte_size, void *arg) {
  cuda_status_acc *acc = arg;
  if (acc->n == acc->cap) {
    size_t cap = acc->cap ? acc->cap * 2 : 8;
    void *np = ar_alloc(acc->a, cap * sizeof *acc->entries);
    if (np == NULL) return -1;
    if (acc->n) memcpy(np, acc->entries, acc->n * sizeof *acc->entries);
    acc->entries = np;
    acc->cap = cap;
  }
  Inference__CudaSharedMemoryStatusResponse__RegionsEntry *e = ar_alloc(acc->a, sizeof *e);
  Inference__CudaSharedMemoryStatusResponse__RegionStatus *st = ar_alloc(acc->a, sizeof *st);
  if (e == NULL || st == NULL) return -1;
  inference__cuda_shared_memory_status_response__regions_entry__init(e);
  inference__cuda_shared_memory_status_response__region_status__init(st);
  st->name = ar_strdup(acc->a, name);
  st->device_id = (uint64_t)device;
  st->byte_size = byte_size;
  e->key = st->name;
  e->value = st;
  if (st->name == NULL) return -1;
  acc->entries[acc->n++] = e;
  return 0;
}

static void cuda_status(nrd_srv_grpc_call *call, const uint8_t *msg, size_t len) {
  Inference__CudaSharedMemoryStatusRequest *req =
      unpack(call, &inference__cuda_shared_memory_status_request__descriptor, msg, len);
  if (req == NULL) return;
  arena a = {0};
  cuda_status_acc acc = {.a = &a};
  TRITONSERVER_Error *err = nrd_srv_shm_status_cuda(
      nrd_srv_grpc_call_shm(call), req->name && req->name[0] ? req->name : NULL, cuda_status_visit, &acc);
  done_with(req);
  if (err) {
    nrd_srv_grpc_call_fail(call, err);
  } else {
    Inference__CudaSharedMemoryStatusResponse r = INFERENCE__CUDA_SHARED_MEMORY_STATUS_RESPONSE__INIT;
    r.n_regions = acc.n;
    r.regions = acc.entries;
    nrd_srv_grpc_call_reply(call, &r.base);
  }
  ar_free(&a);
}

static void cuda_register(nrd_srv_grpc_call *call, const uint8_t *msg, size_t len) {
  Inference__CudaSharedMemoryRegisterRequest *req =
      unpack(call, &inference__cuda_shared_memory_register_request__descriptor, msg, len);
  if (req == NULL) return;
  nrd_srv_shm *shm = nrd_srv_grpc_call_shm(call);
  TRITONSERVER_Error *err = NULL;
  if (!nrd_srv_shm_client_allowed(shm))
    err = nrd_srv_shm_disabled_error(); /* Triton with GPU support refuses first (546a78766) */
  else
    err = nrd_srv_shm_register_cuda(shm, req->name ? req->name : "", req->raw_handle.data, req->raw_handle.len,
                                    req->device_id, req->byte_size);
  done_with(req);
  if (ended_by(call, err)) return;
  Inference__CudaSharedMemoryRegisterResponse r = INFERENCE__CUDA_SHARED_MEMORY_REGISTER_RESPONSE__INIT;
  nrd_srv_grpc_call_reply(call, &r.base);
}

static void cuda_unregister(nrd_srv_grpc_call *call, const uint8_t *msg, size_t len) {
  Inference__CudaSharedMemoryUnregisterRequest *req =
      unpack(call, &inference__cuda_shared_memory_unregister_request__descriptor, msg, len);
  if (req == NULL) return;
  nrd_srv_shm *shm = nrd_srv_grpc_call_shm(call);
  TRITONSERVER_Error *err = !nrd_srv_shm_client_allowed(shm)
                                ? nrd_srv_shm_disabled_error()
                                : nrd_srv_shm_unregister_cuda(shm, req->name && req->name[0] ? req->name : NULL);
  done_with(req);
  if (ended_by(call, err)) return;
  Inference__CudaSharedMemoryUnregisterResponse r = INFERENCE__CUDA_SHARED_MEMORY_UNREGISTER_RESPONSE__INIT;
  nrd_srv_grpc_call_reply(call, &r.base);
}

/* The trace extension: an empty settings map reads, others update; a
 * setting with no value resets it (JSON null over HTTP). */
static void trace_setting(nrd_srv_grpc_call *call, const uint8_t *msg, size_t len) {
  Inference__TraceSettingRequest *req = unpack(call, &inference__trace_setting_request__descriptor, msg, len);
  if (req == NULL) return;
  TRITONSERVER_Error *err = NULL;
  json_t *body = req->n_settings ? json_object() : NULL, *out = NULL;
  for (size_t i = 0; !err && i < req->n_settings; i++) {
    const Inference__TraceSettingRequest__SettingsEntry *e = req->settings[i];
    size_t n = e->value ? e->value->n_value : 0;
    json_t *v = NULL;
    if (n == 0) {
      v = json_null();
    } else if (!strcmp(e->key, "trace_level")) {
      v = json_array();
      for (size_t k = 0; v && k < n; k++) json_array_append_new(v, json_string(e->value->value[k]));
    } else if (n > 1) {
      char text[300];
      snprintf(text, sizeof text, "expect only 1 value for '%s'", e->key);
      err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, text);
    } else {
      v = json_string(e->value->value[0]);
    }
    if (!err && (!body || !v || json_object_set_new(body, e->key, v) != 0))
      err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  }
  nrd_srv_tracer *t = nrd_srv_grpc_call_tracer(call);
  if (!err)
    err = body ? nrd_srv_tracer_update(t, req->model_name, body, &out) : nrd_srv_tracer_get(t, req->model_name, &out);
  json_decref(body);
  done_with(req);
  if (ended_by(call, err)) return;
  arena a = {0};
  size_t n = json_object_size(out), k = 0;
  Inference__TraceSettingResponse__SettingsEntry **ep = ar_alloc(&a, (n ? n : 1) * sizeof(*ep));
  const char *key;
  json_t *v;
  json_object_foreach(out, key, v) {
    Inference__TraceSettingResponse__SettingsEntry *e = ar_alloc(&a, sizeof(*e));
    Inference__TraceSettingResponse__SettingValue *sv = ar_alloc(&a, sizeof(*sv));
    size_t nv = json_is_array(v) ? json_array_size(v) : 1;
    char **vals = ar_alloc(&a, nv * sizeof(char *));
    if (!ep || !e || !sv || !vals) break;
    inference__trace_setting_response__settings_entry__init(e);
    inference__trace_setting_response__setting_value__init(sv);
    for (size_t i = 0; i < nv; i++) vals[i] = (char *)json_string_value(json_is_array(v) ? json_array_get(v, i) : v);
    sv->n_value = nv;
    sv->value = vals;
    e->key = (char *)key;
    e->value = sv;
    ep[k++] = e;
  }
  if (a.failed || k != n) {
    nrd_srv_grpc_call_finish(call, NRD_GRPC_RESOURCE_EXHAUSTED, "out of memory");
  } else {
    Inference__TraceSettingResponse r = INFERENCE__TRACE_SETTING_RESPONSE__INIT;
    r.n_settings = k;
    r.settings = ep;
    nrd_srv_grpc_call_reply(call, &r.base);
  }
  ar_free(&a);
  json_decref(out);
}

/* Turns a LogSettingsRequest into an update, checking each setting's type
 * as Triton's gRPC front end does (INVALID_ARG naming the setting). */
static TRITONSERVER_Error *log_update_from(const Inference__LogSettingsRequest *req, nrd_srv_log_update *u) {
  static const char *bools[] = {"log_info", "log_warning", "log_error"};
  bool *has[] = {&u->has_info, &u->has_warning, &u->has_error};
  bool *val[] = {&u->info, &u->warning, &u->error};
  char text[200];
  memset(u, 0, sizeof *u);
  for (size_t i = 0; i < req->n_settings; i++) {
    const char *key = req->settings[i]->key;
    const Inference__LogSettingsRequest__SettingValue *v = req->settings[i]->value;
    int c = v ? (int)v->parameter_choice_case : 0;
    if (strcmp(key, "log_file") == 0) {
      u->has_file = true;
      continue;
    }
    for (int k = 0; k < 3; k++) {
      if (strcmp(key, bools[k]) != 0) continue;
      if (c != INFERENCE__LOG_SETTINGS_REQUEST__SETTING_VALUE__PARAMETER_CHOICE_BOOL_PARAM) {
        snprintf(text, sizeof text, "expect boolean for '%s'", key);
        return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, text);
      }
      *has[k] = true;
      *val[k] = v->bool_param;
    }
    if (strcmp(key, "log_verbose_level") == 0) {
      if (c != INFERENCE__LOG_SETTINGS_REQUEST__SETTING_VALUE__PARAMETER_CHOICE_UINT32_PARAM)
        return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "expect int32 for 'log_verbose_level'");
      if (v->uint32_param > INT32_MAX)
        return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "'log_verbose_level' must be at most 2147483647");
      u->has_verbose_level = true;
      u->verbose_level = v->uint32_param;
    } else if (strcmp(key, "log_format") == 0) {
      if (c != INFERENCE__LOG_SETTINGS_REQUEST__SETTING_VALUE__PARAMETER_CHOICE_STRING_PARAM)
        return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "expect string for 'log_format'");
      const char *f = v->string_param ? v->string_param : "";
      if (strcmp(f, "default") != 0 && strcmp(f, "ISO8601") != 0) {
        snprintf(text, sizeof text, "invalid argument for log_format, got: %.100s", f);
        return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, text);
      }
      u->has_format = true;
      u->format = f;
    }
  }
  return NULL;
}

/* Applies the update (all or nothing) and answers the settings in force:
 * log_file and log_format as string_param, the switches as bool_param,
 * log_verbose_level as uint32_param (Triton's types). */
static void log_settings(nrd_srv_grpc_call *call, const uint8_t *msg, size_t len) {
  Inference__LogSettingsRequest *req = unpack(call, &inference__log_settings_request__descriptor, msg, len);
  if (req == NULL) return;
  nrd_srv_log_settings *ls = nrd_srv_grpc_call_log(call);
  nrd_srv_log_update u;
  TRITONSERVER_Error *err = log_update_from(req, &u);
  if (err == NULL && req->n_settings > 0) err = nrd_srv_log_settings_update(ls, &u);
  done_with(req); /* u.format pointed into req: not used past here */
  if (ended_by(call, err)) return;
  nrd_srv_log_snapshot snap;
  if (nrd_srv_log_settings_get(ls, &snap) != 0) {
    nrd_srv_grpc_call_finish(call, NRD_GRPC_RESOURCE_EXHAUSTED, "out of memory");
    return;
  }
  enum { N = 6 };
  static const char *keys[N] = {"log_file", "log_info", "log_warning", "log_error", "log_verbose_level", "log_format"};
  Inference__LogSettingsResponse__SettingsEntry e[N];
  Inference__LogSettingsResponse__SettingsEntry *ep[N];
  Inference__LogSettingsResponse__SettingValue v[N];
  for (int i = 0; i < N; i++) {
    inference__log_settings_response__settings_entry__init(&e[i]);
    inference__log_settings_response__setting_value__init(&v[i]);
    e[i].key = (char *)keys[i];
    e[i].value = &v[i];
    ep[i] = &e[i];
  }
  const int STR = INFERENCE__LOG_SETTINGS_RESPONSE__SETTING_VALUE__PARAMETER_CHOICE_STRING_PARAM;
  const int BOOL = INFERENCE__LOG_SETTINGS_RESPONSE__SETTING_VALUE__PARAMETER_CHOICE_BOOL_PARAM;
  v[0].parameter_choice_case = STR;
  v[0].string_param = snap.file;
  v[1].parameter_choice_case = BOOL;
  v[1].bool_param = snap.info;
  v[2].parameter_choice_case = BOOL;
  v[2].bool_param = snap.warning;
  v[3].parameter_choice_case = BOOL;
  v[3].bool_param = snap.error;
  v[4].parameter_choice_case = INFERENCE__LOG_SETTINGS_RESPONSE__SETTING_VALUE__PARAMETER_CHOICE_UINT32_PARAM;
  v[4].uint32_param = snap.verbose_level;
  v[5].parameter_choice_case = STR;
  v[5].string_param = snap.format == TRITONSERVER_LOG_ISO8601 ? "ISO8601" : "default";
  Inference__LogSettingsResponse r = INFERENCE__LOG_SETTINGS_RESPONSE__INIT;
  r.n_settings = N;
  r.settings = ep;
  nrd_srv_grpc_call_reply(call, &r.base);
  free(snap.file);
}

static void health_check(nrd_srv_grpc_call *call, const uint8_t *msg, size_t len) {
  Grpc__Health__V1__HealthCheckRequest *req =
      unpack(call, &grpc__health__v1__health_check_request__descriptor, msg, len);
  if (req == NULL) return;
  done_with(req);
  bool ready = false;
  NRD_SRV_IGNORE(TRITONSERVER_ServerIsReady(nrd_srv_grpc_call_server(call), &ready),
                 "server readiness unknown: counted as not ready");
  Grpc__Health__V1__HealthCheckResponse r = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
  r.status = ready ? GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING
                   : GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING;
  nrd_srv_grpc_call_reply(call, &r.base);
}

/* ---- table ---------------------------------------------------------------------------------- */

#define SVC "/inference.GRPCInferenceService/"
/* Unary calls answered in one handler, uncompressed. */
static const nrd_srv_grpc_method methods[] = {
    {.path = SVC "ServerLive", .on_message = server_live, .api = NRD_SRV_API_HEALTH},
    {.path = SVC "ServerReady", .on_message = server_ready, .api = NRD_SRV_API_HEALTH},
    {.path = SVC "ModelReady", .on_message = model_ready, .api = NRD_SRV_API_HEALTH},
    {.path = SVC "ServerMetadata", .on_message = server_metadata, .api = NRD_SRV_API_METADATA},
    {.path = SVC "ModelMetadata", .on_message = model_metadata, .api = NRD_SRV_API_METADATA},
    {.path = SVC "ModelConfig", .on_message = model_config, .api = NRD_SRV_API_MODEL_CONFIG},
    {.path = SVC "ModelStatistics", .on_message = model_statistics, .api = NRD_SRV_API_STATISTICS},
    {.path = SVC "RepositoryIndex", .on_message = repository_index, .api = NRD_SRV_API_MODEL_REPOSITORY},
    {.path = SVC "RepositoryModelLoad", .on_message = repository_model_load, .api = NRD_SRV_API_MODEL_REPOSITORY},
    {.path = SVC "RepositoryModelUnload", .on_message = repository_model_unload, .api = NRD_SRV_API_MODEL_REPOSITORY},
    {.path = SVC "SystemSharedMemoryStatus", .on_message = shm_status, .api = NRD_SRV_API_SHARED_MEMORY},
    {.path = SVC "SystemSharedMemoryRegister", .on_message = shm_register, .api = NRD_SRV_API_SHARED_MEMORY},
    {.path = SVC "SystemSharedMemoryUnregister", .on_message = shm_unregister, .api = NRD_SRV_API_SHARED_MEMORY},
    {.path = SVC "CudaSharedMemoryStatus", .on_message = cuda_status, .api = NRD_SRV_API_SHARED_MEMORY},
    {.path = SVC "CudaSharedMemoryRegister", .on_message = cuda_register, .api = NRD_SRV_API_SHARED_MEMORY},
    {.path = SVC "CudaSharedMemoryUnregister", .on_message = cuda_unregister, .api = NRD_SRV_API_SHARED_MEMORY},
    {.path = SVC "TraceSetting", .on_message = trace_setting, .api = NRD_SRV_API_TRACE},
    {.path = SVC "LogSettings", .on_message = log_settings, .api = NRD_SRV_API_LOGGING},
    {.path = "/grpc.health.v1.Health/Check", .on_message = health_check, .api = NRD_SRV_API_HEALTH},
};

const nrd_srv_grpc_method *nrd_srv_grpc_method_find(const char *path, size_t len) {
  if (len == strlen(nrd_srv_grpc_model_infer_method.path) &&
      memcmp(path, nrd_srv_grpc_model_infer_method.path, len) == 0)
    return &nrd_srv_grpc_model_infer_method;
  if (len == strlen(nrd_srv_grpc_model_stream_infer_method.path) &&
      memcmp(path, nrd_srv_grpc_model_stream_infer_method.path, len) == 0)
    return &nrd_srv_grpc_model_stream_infer_method;
  for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
    if (strlen(methods[i].path) == len && memcmp(methods[i].path, path, len) == 0) return &methods[i];
  return NULL;
}
