/* Request bodies of the control routes (index, repository, logging,
 * trace, shared memory, generate, the cloud endpoints) read as JSON, the
 * way Triton's EVBufferToJson reads them. Below every route file: they all
 * call down into it. */
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "http_internal.h"
#include "json_error.h"

int nrd_srv_http_body_json(nrd_srv_http_req *req, json_t **out) {
  *out = NULL;
  size_t len = 0;
  const char *b = nrd_srv_http_body(req, &len);
  if (len == 0) return 0;
  char msg[300];
  /* Text RapidJSON refuses: Triton's words and its status (its parser's
   * error is INTERNAL, 500; the nesting bound is a 400). Checked first, so
   * that nesting too deep is refused whatever jansson would take. */
  if (nrd_srv_json_error(b, len, msg, sizeof msg) == 0) {
    nrd_srv_http_reply_error(req, nrd_srv_json_error_status(msg), msg);
    return -1;
  }
  json_error_t jerr;
  json_t *j = json_loadb(b, len, JSON_REJECT_DUPLICATES, &jerr);
  if (j == NULL) { /* what only our parser refuses: duplicate keys (docs/differences.md) */
    snprintf(msg, sizeof msg, "failed to parse the request JSON buffer: %s at line %d, column %d", jerr.text,
             jerr.line, jerr.column);
    nrd_srv_http_reply_error(req, 400, msg);
    return -1;
  }
  /* Valid JSON that is not an object holds none of the settings a route
   * looks for: as Triton, the request goes on with none. */
  if (!json_is_object(j)) {
    json_decref(j);
    return 0;
  }
  *out = j;
  return 0;
}
