/* Limiting endpoint access (restrict.h). */
#include "restrict.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "fmt.h"

/* The names the flags use, indexed by nrd_srv_api. */
static const char *const api_names[NRD_SRV_API_COUNT] = {"health",        "metadata",     "inference",
                                                         "shared-memory", "model-config", "model-repository",
                                                         "statistics",    "trace",        "logging"};

static int api_by_name(const char *s, size_t n) {
  for (int i = 0; i < NRD_SRV_API_COUNT; i++)
    if (strlen(api_names[i]) == n && strncmp(api_names[i], s, n) == 0) return i;
  return -1;
}

int nrd_srv_restrictions_add(nrd_srv_restrictions *r, const char *flag, const char *arg, const char *prefix, char *err,
                             size_t errlen) {
  const char *colon = strrchr(arg, ':');
  const char *eq = colon ? strchr(colon, '=') : NULL;
  if (!colon || !eq || colon == arg) {
    nrd_srv_fmt_err(err, errlen, "--%s=%s: expected <api>,<api>,...:<key>=<value>", flag, arg);
    return -1;
  }
  size_t klen = (size_t)(eq - colon - 1);
  if (klen == 0) {
    nrd_srv_fmt_err(err, errlen, "--%s=%s: the header key is empty", flag, arg);
    return -1;
  }
  bool pick[NRD_SRV_API_COUNT] = {false};
  for (const char *s = arg; s < colon;) {
    const char *e = memchr(s, ',', (size_t)(colon - s));
    if (!e) e = colon;
    int api = api_by_name(s, (size_t)(e - s));
    if (api < 0) {
      nrd_srv_fmt_err(err, errlen,
                      "--%s=%s: unknown API '%.*s' (expected health, metadata, inference, shared-memory, "
                      "model-config, model-repository, statistics, trace, logging)",
                      flag, arg, (int)(e - s), s);
      return -1;
    }
    if (r->by_api[api].header) {
      nrd_srv_fmt_err(err, errlen, "--%s=%s: '%s' is already in another restricted group", flag, arg, api_names[api]);
      return -1;
    }
    pick[api] = true;
    s = e + (e < colon);
  }
  size_t plen = strlen(prefix);
  for (int api = 0; api < NRD_SRV_API_COUNT; api++) {
    if (!pick[api]) continue;
    char *header = malloc(plen + klen + 1), *value = strdup(eq + 1);
    if (!header || !value) {
      free(header);
      free(value);
      nrd_srv_fmt_err(err, errlen, "--%s: out of memory", flag);
      return -1; /* groups added so far stay; the caller stops anyway */
    }
    memcpy(header, prefix, plen);
    for (size_t i = 0; i < klen; i++) header[plen + i] = (char)tolower((unsigned char)colon[1 + i]);
    header[plen + klen] = '\0';
    r->by_api[api] = (nrd_srv_restriction){header, value};
  }
  return 0;
}

void nrd_srv_restrictions_free(nrd_srv_restrictions *r) {
  if (!r) return;
  for (int i = 0; i < NRD_SRV_API_COUNT; i++) {
    free(r->by_api[i].header);
    free(r->by_api[i].value);
    r->by_api[i] = (nrd_srv_restriction){NULL, NULL};
  }
}

bool nrd_srv_restriction_matches(const nrd_srv_restriction *x, const char *got) {
  return got && strcmp(got, x->value) == 0;
}
