/* Forwarding request headers to models (header_forward.h). */
#include "header_forward.h"

#include <regex.h>
#include <stdlib.h>
#include <string.h>

#include "fmt.h"

struct nrd_srv_header_forward {
  regex_t re;
};

nrd_srv_header_forward *nrd_srv_header_forward_new(const char *pattern, bool icase, char *err, size_t errlen) {
  nrd_srv_header_forward *f = malloc(sizeof(*f));
  if (!f) {
    nrd_srv_fmt_err(err, errlen, "out of memory");
    return NULL;
  }
  const char *given = pattern;
  /* RE2's leading "(?i)", common in Triton command lines, as POSIX's flag. */
  if (strncmp(pattern, "(?i)", 4) == 0) {
    pattern += 4;
    icase = true;
  }
  int rc = regcomp(&f->re, pattern, REG_EXTENDED | REG_NOSUB | (icase ? REG_ICASE : 0));
  if (rc != 0) {
    char why[200];
    regerror(rc, &f->re, why, sizeof why);
    nrd_srv_fmt_err(err, errlen, "'%s' is not a regular expression: %s", given, why);
    free(f);
    return NULL;
  }
  return f;
}

void nrd_srv_header_forward_free(nrd_srv_header_forward *f) {
  if (!f) return;
  regfree(&f->re);
  free(f);
}

bool nrd_srv_header_forward_matches(const nrd_srv_header_forward *f, const char *name, size_t len) {
  if (!f) return false;
  char small[256], *s = len < sizeof small ? small : malloc(len + 1);
  if (!s) return false;
  memcpy(s, name, len);
  s[len] = '\0';
  bool hit = regexec(&f->re, s, 0, NULL, 0) == 0;
  if (s != small) free(s);
  return hit;
}

bool nrd_srv_header_forward_reserved(const char *name, size_t len) {
  static const char *const keys[] = {"sequence_id", "sequence_start", "sequence_end",      "priority",
                                     "timeout",     "headers",        "binary_data_output"};
  if (len >= 7 && memcmp(name, "triton_", 7) == 0) return true;
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
    if (strlen(keys[i]) == len && memcmp(keys[i], name, len) == 0) return true;
  return false;
}
