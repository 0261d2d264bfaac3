/* The values of gRPC's own headers (see grpc_values.h). */
#include "grpc_values.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "error_echo.h"
#include "grpc_call.h"

int nrd_srv_grpc_status_from_code(TRITONSERVER_Error_Code code) {
  switch (code) {
    case TRITONSERVER_ERROR_UNKNOWN: return NRD_GRPC_UNKNOWN;
    case TRITONSERVER_ERROR_INTERNAL: return NRD_GRPC_INTERNAL;
    case TRITONSERVER_ERROR_NOT_FOUND: return NRD_GRPC_NOT_FOUND;
    case TRITONSERVER_ERROR_INVALID_ARG: return NRD_GRPC_INVALID_ARGUMENT;
    case TRITONSERVER_ERROR_UNAVAILABLE: return NRD_GRPC_UNAVAILABLE;
    case TRITONSERVER_ERROR_UNSUPPORTED: return NRD_GRPC_UNIMPLEMENTED;
    case TRITONSERVER_ERROR_ALREADY_EXISTS: return NRD_GRPC_ALREADY_EXISTS;
    case TRITONSERVER_ERROR_CANCELLED: return NRD_GRPC_CANCELLED;
  }
  return NRD_GRPC_UNKNOWN;
}

/* grpc-message value: printable ASCII except '%' kept, the rest %XX; at
 * most NRD_SRV_ERROR_ECHO_MAX bytes of it, then "..." when cut. */
char *nrd_srv_grpc_percent_encode(const char *s) {
  size_t n = strlen(s);
  size_t cap = n < NRD_SRV_ERROR_ECHO_MAX ? n * 3 : NRD_SRV_ERROR_ECHO_MAX;
  char *out = malloc(cap + sizeof NRD_SRV_ERROR_ECHO_CUT);
  if (out == NULL) return NULL;
  static const char hex[] = "0123456789ABCDEF";
  size_t j = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)s[i];
    bool plain = ch >= 0x20 && ch <= 0x7e && ch != '%';
    if (j + (plain ? 1 : 3) > cap) { /* only when the message is too long */
      memcpy(out + j, NRD_SRV_ERROR_ECHO_CUT, sizeof NRD_SRV_ERROR_ECHO_CUT - 1);
      j += sizeof NRD_SRV_ERROR_ECHO_CUT - 1;
      break;
    }
    if (plain) {
      out[j++] = (char)ch;
    } else {
      out[j++] = '%';
      out[j++] = hex[ch >> 4];
      out[j++] = hex[ch & 15];
    }
  }
  out[j] = '\0';
  return out;
}

/* grpc-timeout: 1-8 digits and a unit (H M S m u n). 0 if malformed. */
uint64_t nrd_srv_grpc_timeout_us(const uint8_t *v, size_t len) {
  if (len < 2 || len > 9) return 0;
  uint64_t n = 0;
  for (size_t i = 0; i + 1 < len; i++) {
    if (v[i] < '0' || v[i] > '9') return 0;
    n = n * 10 + (uint64_t)(v[i] - '0');
  }
  switch (v[len - 1]) {
    case 'H': return n * 3600u * 1000000u;
    case 'M': return n * 60u * 1000000u;
    case 'S': return n * 1000000u;
    case 'm': return n * 1000u;
    case 'u': return n;
    case 'n': return n / 1000u ? n / 1000u : 1;
    default: return 0;
  }
}

/* NRD_SRV_GRPC_ACCEPT_* for the encodings a grpc-accept-encoding value lists
 * ("identity,deflate,gzip", any spacing). */
unsigned nrd_srv_grpc_accept_mask(const uint8_t *v, size_t len) {
  unsigned mask = 0;
  size_t i = 0;
  while (i < len) {
    while (i < len && (v[i] == ' ' || v[i] == '\t' || v[i] == ',')) i++;
    size_t start = i;
    while (i < len && v[i] != ',' && v[i] != ' ' && v[i] != '\t') i++;
    size_t n = i - start;
    if (n == 4 && strncasecmp((const char *)v + start, "gzip", 4) == 0) mask |= NRD_SRV_GRPC_ACCEPT_GZIP;
    if (n == 7 && strncasecmp((const char *)v + start, "deflate", 7) == 0) mask |= NRD_SRV_GRPC_ACCEPT_DEFLATE;
  }
  return mask;
}
