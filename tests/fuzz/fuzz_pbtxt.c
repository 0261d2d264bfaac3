/* libFuzzer entry point for the config.pbtxt reader (and, for inputs that
 * parse, normalization, validation and rendering). Build and run it with
 * tests/fuzz/run.sh pbtxt [SECONDS] (docs/fuzzing.md). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *err = NULL;
  json_t *cfg = nrd_model_config_parse((const char *)data, size, "fuzz.pbtxt", &err);
  if (cfg == NULL) {
    if (err == NULL || strncmp(err, "fuzz.pbtxt:", 11) != 0) abort();
    free(err);
    return 0;
  }
  if (nrd_model_config_normalize(cfg, NULL, 0, &err) == 0) {
    if (nrd_model_config_validate(cfg, "fuzz.pbtxt", 0, &err) != 0) free(err);
    char *out = nrd_model_config_render(cfg);
    if (out == NULL) abort();
    /* The rendered JSON must read back and render identically. */
    json_t *back = nrd_model_config_from_json(out, strlen(out), &err);
    if (back == NULL) abort();
    char *out2 = nrd_model_config_render(back);
    if (out2 == NULL || strcmp(out, out2) != 0) abort();
    free(out2);
    json_decref(back);
    free(out);
  } else {
    free(err);
  }
  json_decref(cfg);
  return 0;
}
