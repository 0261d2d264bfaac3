/* Lifecycle recording for test-only backends. */
#include "record.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void nrd_record_line(const char *path, const char *fmt, ...) {
  if (path == NULL) {
    return;
  }
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line - 1, fmt, ap);
  va_end(ap);
  if (n < 0) {
    return;
  }
  size_t len = (size_t)n < sizeof line - 1 ? (size_t)n : sizeof line - 2;
  line[len++] = '\n';
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    NRD_BU_LOG(TRITONSERVER_LOG_ERROR, "cannot open record file '%s': %s", path, strerror(errno));
    return;
  }
  ssize_t w = write(fd, line, len);
  if (w < 0 || (size_t)w != len) {
    NRD_BU_LOG(TRITONSERVER_LOG_ERROR, "cannot write record file '%s': %s", path,
               w < 0 ? strerror(errno) : "short write");
  }
  close(fd);
}

TRITONSERVER_Error *nrd_record_backend_init(TRITONBACKEND_Backend *backend, const char *line) {
  json_t *config = NULL;
  TRITONSERVER_Error *err = nrd_bu_backend_config(backend, &config);
  if (err != NULL) {
    return err;
  }
  char *path = NULL;
  const char *setting = nrd_bu_backend_setting(config, "record_file");
  if (setting != NULL && setting[0] != '\0') {
    path = strdup(setting);
    if (path == NULL) {
      json_decref(config);
      return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, "out of memory");
    }
  }
  json_decref(config);
  err = TRITONBACKEND_BackendSetState(backend, path);
  if (err != NULL) {
    free(path);
    return err;
  }
  nrd_record_line(path, "%s", line);
  return NULL;
}

const char *nrd_record_backend_file(TRITONBACKEND_Backend *backend) {
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_BackendState(backend, &state);
  if (err != NULL) {
    TRITONSERVER_ErrorDelete(err);
    return NULL;
  }
  return state;
}

TRITONSERVER_Error *nrd_record_backend_fini(TRITONBACKEND_Backend *backend, const char *line) {
  void *state = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_BackendState(backend, &state);
  if (err != NULL) {
    return err;
  }
  nrd_record_line(state, "%s", line);
  free(state);
  return TRITONBACKEND_BackendSetState(backend, NULL);
}

char *nrd_record_model_file(TRITONBACKEND_Model *model, const json_t *config) {
  const char *path = nrd_bu_config_parameter(config, "record_file");
  if (path == NULL || path[0] == '\0') {
    TRITONBACKEND_Backend *backend = NULL;
    TRITONSERVER_Error *err = TRITONBACKEND_ModelBackend(model, &backend);
    if (err != NULL) {
      TRITONSERVER_ErrorDelete(err);
      return NULL;
    }
    path = nrd_record_backend_file(backend);
  }
  return path != NULL ? strdup(path) : NULL;
}

const char *nrd_record_model_name(TRITONBACKEND_Model *model) {
  const char *name = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelName(model, &name);
  if (err != NULL) {
    TRITONSERVER_ErrorDelete(err);
    return "?";
  }
  return name != NULL ? name : "?";
}

const char *nrd_record_instance_name(TRITONBACKEND_ModelInstance *instance) {
  const char *name = NULL;
  TRITONSERVER_Error *err = TRITONBACKEND_ModelInstanceName(instance, &name);
  if (err != NULL) {
    TRITONSERVER_ErrorDelete(err);
    return "?";
  }
  return name != NULL ? name : "?";
}
