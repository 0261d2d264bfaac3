/* Renders the repository index as a text table. The index is JSON (an array
 * of {name, version?, state?, reason?}); entries without a state are models
 * the server has not tried to load, listed apart so that the table shows
 * only what startup actually did. */
#include "model_table.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

typedef struct row {
  const char *model;
  const char *version;
  char *status; /* owned: "READY" or "<STATE>: <reason>" on one line */
} row;

static const char *str_field(const json_t *obj, const char *key) {
  const char *s = json_string_value(json_object_get(obj, key));
  return s ? s : "";
}

/* "<state>" or "<state>: <reason>", newlines and tabs folded to spaces. */
static char *status_text(const char *state, const char *reason) {
  size_t n = strlen(state) + 2 + strlen(reason) + 1;
  char *s = malloc(n);
  if (s == NULL) return NULL;
  if (reason[0])
    snprintf(s, n, "%s: %s", state, reason);
  else
    snprintf(s, n, "%s", state);
  for (char *p = s; *p; p++)
    if (*p == '\n' || *p == '\r' || *p == '\t') *p = ' ';
  return s;
}

static void rule(FILE *out, const size_t w[3]) {
  for (int c = 0; c < 3; c++) {
    fputc('+', out);
    for (size_t i = 0; i < w[c] + 2; i++) fputc('-', out);
  }
  fputs("+\n", out);
}

static void line(FILE *out, const size_t w[3], const char *a, const char *b, const char *c) {
  fprintf(out, "| %-*s | %-*s | %-*s |\n", (int)w[0], a, (int)w[1], b, (int)w[2], c);
}

/* The repository index as a JSON array the caller owns (json_decref). */
static TRITONSERVER_Error *load_index(TRITONSERVER_Server *server, json_t **index) {
  *index = NULL;
  TRITONSERVER_Message *msg = NULL;
  TRITONSERVER_Error *err = TRITONSERVER_ServerModelIndex(server, 0, &msg);
  if (err) return err;
  const char *base = NULL;
  size_t size = 0;
  err = TRITONSERVER_MessageSerializeToJson(msg, &base, &size);
  if (err == NULL) {
    json_error_t jerr;
    *index = json_loadb(base, size, 0, &jerr);
    if (!json_is_array(*index)) {
      json_decref(*index);
      *index = NULL;
      err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "the model index is not a JSON array");
    }
  }
  TRITONSERVER_MessageDelete(msg);
  return err;
}

TRITONSERVER_Error *nrd_srv_model_table_print(TRITONSERVER_Server *server, FILE *out, nrd_srv_model_counts *counts) {
  json_t *index = NULL;
  row *rows = NULL;
  size_t n_rows = 0;
  nrd_srv_model_counts c = {0, 0, 0};
  TRITONSERVER_Error *err = load_index(server, &index);
  if (err) return err;
  rows = calloc(json_array_size(index) + 1, sizeof(*rows));
  if (rows == NULL) {
    err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory printing model table");
    goto done;
  }
  size_t w[3] = {strlen("Model"), strlen("Version"), strlen("Status")};
  size_t i;
  json_t *entry;
  json_array_foreach(index, i, entry) {
    if (json_object_get(entry, "state") == NULL) {
      c.not_loaded++;
      continue;
    }
    row *r = &rows[n_rows];
    r->model = str_field(entry, "name");
    r->version = str_field(entry, "version");
    if (r->version[0] == '\0') r->version = "-";
    const char *state = str_field(entry, "state");
    r->status = status_text(state, str_field(entry, "reason"));
    if (r->status == NULL) {
      err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory printing model table");
      goto done;
    }
    n_rows++;
    if (strcmp(state, "READY") == 0) c.ready++;
    size_t lens[3] = {strlen(r->model), strlen(r->version), strlen(r->status)};
    for (int k = 0; k < 3; k++)
      if (lens[k] > w[k]) w[k] = lens[k];
  }
  c.listed = n_rows;

  rule(out, w);
  line(out, w, "Model", "Version", "Status");
  rule(out, w);
  for (size_t k = 0; k < n_rows; k++) line(out, w, rows[k].model, rows[k].version, rows[k].status);
  rule(out, w);
  if (c.not_loaded) {
    fputs("Not loaded:", out);
    const char *sep = " ";
    json_array_foreach(index, i, entry) {
      if (json_object_get(entry, "state") != NULL) continue;
      fprintf(out, "%s%s", sep, str_field(entry, "name"));
      sep = ", ";
    }
    fputc('\n', out);
  }
  fflush(out);
  if (counts) *counts = c;

done:
  for (size_t k = 0; k < n_rows; k++) free(rows[k].status);
  free(rows);
  json_decref(index);
  return err;
}

TRITONSERVER_Error *nrd_srv_model_table_print_failures(TRITONSERVER_Server *server, FILE *out) {
  json_t *index = NULL;
  TRITONSERVER_Error *err = load_index(server, &index);
  if (err) return err;
  size_t i;
  json_t *entry;
  json_array_foreach(index, i, entry) {
    const char *state = str_field(entry, "state");
    if (state[0] == '\0' || strcmp(state, "READY") == 0) continue;
    char *status = status_text(state, str_field(entry, "reason"));
    fprintf(out, "nereid: model '%s' version %s: %s\n", str_field(entry, "name"),
            str_field(entry, "version")[0] ? str_field(entry, "version") : "-", status ? status : state);
    free(status);
  }
  fflush(out);
  json_decref(index);
  return NULL;
}
