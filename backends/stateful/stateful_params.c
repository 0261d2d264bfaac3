/* The stateful backend's configuration strings (stateful_params.h). */
#include "stateful_params.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool is_sep(char c) { return c == ',' || isspace((unsigned char)c); }

/* A copy of [b, e) without surrounding spaces; NULL when empty or no memory. */
static char *trimmed(const char *b, const char *e) {
  while (b < e && isspace((unsigned char)*b)) b++;
  while (e > b && isspace((unsigned char)e[-1])) e--;
  if (e == b) return NULL;
  for (const char *p = b; p < e; p++) {
    if (isspace((unsigned char)*p) || *p == ',' || *p == '<' || *p == '>') {
      return NULL;
    }
  }
  char *s = malloc((size_t)(e - b) + 1);
  if (s != NULL) {
    memcpy(s, b, (size_t)(e - b));
    s[e - b] = '\0';
  }
  return s;
}

void sf_state_pairs_free(sf_state_pair *pairs, size_t count) {
  for (size_t i = 0; pairs != NULL && i < count; i++) {
    free(pairs[i].input);
    free(pairs[i].output);
  }
  free(pairs);
}

bool sf_state_pairs_parse(const char *text, sf_state_pair **out, size_t *count, char *err, size_t err_size) {
  *out = NULL;
  *count = 0;
  sf_state_pair *pairs = NULL;
  size_t n = 0;
  const char *p = text == NULL ? "" : text;
  for (;;) {
    while (is_sep(*p)) p++;
    if (*p == '\0') break;
    const char *close = strncmp(p, "<<<", 3) == 0 ? strstr(p + 3, ">>>") : NULL;
    const char *comma = close != NULL ? memchr(p + 3, ',', (size_t)(close - p - 3)) : NULL;
    char *in = comma != NULL ? trimmed(p + 3, comma) : NULL;
    char *o = comma != NULL ? trimmed(comma + 1, close) : NULL;
    sf_state_pair *grown = in != NULL && o != NULL ? realloc(pairs, (n + 1) * sizeof *pairs) : NULL;
    if (grown == NULL) {
      snprintf(err, err_size, "state_pairs: expected '<<<Input, Output>>>' at '%.40s' in '%s'", p, text);
      free(in);
      free(o);
      sf_state_pairs_free(pairs, n);
      return false;
    }
    pairs = grown;
    pairs[n].input = in;
    pairs[n].output = o;
    n++;
    p = close + 3;
    if (*p != '\0' && !is_sep(*p)) {
      snprintf(err, err_size,
               "state_pairs: entries must be separated by spaces or commas "
               "at '%.40s' in '%s'",
               p, text);
      sf_state_pairs_free(pairs, n);
      return false;
    }
  }
  if (n == 0) {
    snprintf(err, err_size, "state_pairs: no '<<<Input, Output>>>' entry in '%s'", text == NULL ? "" : text);
    return false;
  }
  for (size_t i = 0; i < n; i++) {
    for (size_t j = 0; j < n; j++) {
      const char *a[2] = {pairs[i].input, pairs[i].output};
      const char *b[2] = {pairs[j].input, pairs[j].output};
      for (int x = 0; x < 2; x++) {
        for (int y = 0; y < 2; y++) {
          if ((i != j || x != y) && strcmp(a[x], b[y]) == 0) {
            snprintf(err, err_size, "state_pairs: tensor '%s' named twice", a[x]);
            sf_state_pairs_free(pairs, n);
            return false;
          }
        }
      }
    }
  }
  *out = pairs;
  *count = n;
  return true;
}

/* Reads a whole number parameter; false with a message naming 'key'. */
static bool whole(const char *key, const char *text, long min, long *out, char *err, size_t err_size) {
  char *end = NULL;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < min) {
    snprintf(err, err_size, "%s: expected a whole number of at least %ld, got '%s'", key, min, text);
    return false;
  }
  *out = v;
  return true;
}

bool sf_lazy_parse(const char *initial, const char *subsequent, const char *alloc_threshold,
                   const char *dealloc_threshold, long max_slots, sf_lazy *out, char *err, size_t err_size) {
  memset(out, 0, sizeof *out);
  const char *keys[4] = {"initial_buffer_size", "subsequent_buffer_size", "buffer_alloc_threshold",
                         "buffer_dealloc_threshold"};
  const char *vals[4] = {initial, subsequent, alloc_threshold, dealloc_threshold};
  int present = 0;
  for (int i = 0; i < 4; i++) present += vals[i] != NULL;
  if (present == 0) return true;
  if (present != 4) {
    for (int i = 0; i < 4; i++) {
      if (vals[i] == NULL) {
        snprintf(err, err_size,
                 "%s: missing; lazy buffers need all four of initial_buffer_size, "
                 "subsequent_buffer_size, buffer_alloc_threshold and "
                 "buffer_dealloc_threshold, or none",
                 keys[i]);
        return false;
      }
    }
  }
  long *dst[4] = {&out->initial, &out->subsequent, &out->alloc_threshold, &out->dealloc_threshold};
  for (int i = 0; i < 4; i++) {
    if (!whole(keys[i], vals[i], i < 2 ? 1 : 0, dst[i], err, err_size)) {
      return false;
    }
  }
  if (out->initial > max_slots) {
    snprintf(err, err_size, "initial_buffer_size: %ld is more than max_candidate_sequences (%ld)", out->initial,
             max_slots);
    return false;
  }
  if (out->alloc_threshold >= out->dealloc_threshold) {
    snprintf(err, err_size, "buffer_alloc_threshold: %ld must be below buffer_dealloc_threshold (%ld)",
             out->alloc_threshold, out->dealloc_threshold);
    return false;
  }
  out->enabled = true;
  return true;
}

bool sf_lazy_should_grow(const sf_lazy *l, long free_slots, long total_slots, long max_slots) {
  return l->enabled && free_slots < l->alloc_threshold && total_slots < max_slots;
}

bool sf_lazy_should_shrink(const sf_lazy *l, long free_slots, size_t buffers, bool last_buffer_idle) {
  return l->enabled && buffers > 1 && free_slots > l->dealloc_threshold && last_buffer_idle;
}

/* ---- half precision ------------------------------------------------------ */

uint16_t sf_half_from_float(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t exp = (x >> 23) & 0xffu;
  uint32_t man = x & 0x7fffffu;
  if (exp == 0xffu) return (uint16_t)(sign | 0x7c00u | (man ? 0x200u : 0));
  int32_t e = (int32_t)exp - 127 + 15;
  if (e >= 31) return (uint16_t)(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return (uint16_t)sign;
    man |= 0x800000u;
    uint32_t shift = (uint32_t)(14 - e);
    uint32_t h = man >> shift;
    uint32_t rest = man & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rest > half || (rest == half && (h & 1u))) h++;
    return (uint16_t)(sign | h);
  }
  uint32_t h = ((uint32_t)e << 10) | (man >> 13);
  uint32_t rest = man & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++;
  return (uint16_t)(sign | h); /* a carry into the exponent is correct */
}

float sf_half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  uint32_t x;
  if (exp == 0) {
    if (man == 0) {
      x = sign;
    } else {
      int e = -1;
      do {
        e++;
        man <<= 1;
      } while ((man & 0x400u) == 0);
      x = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    x = sign | 0x7f800000u | (man << 13);
  } else {
    x = sign | ((exp - 15 + 127) << 23) | (man << 13);
  }
  float f;
  memcpy(&f, &x, 4);
  return f;
}
