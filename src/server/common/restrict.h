/* Limiting endpoint access as tritonserver does (--http-restricted-api,
 * --grpc-restricted-protocol): each group of APIs answers only requests
 * that carry a given header with a given value. Shared by both front ends;
 * the HTTP header is the key itself, the gRPC one is the key prefixed with
 * "triton-grpc-protocol-". */
#ifndef NRD_SRV_RESTRICT_H
#define NRD_SRV_RESTRICT_H

#include <stdbool.h>
#include <stddef.h>

/* Triton's API groups, in its order. */
typedef enum nrd_srv_api {
  NRD_SRV_API_HEALTH,
  NRD_SRV_API_METADATA,
  NRD_SRV_API_INFERENCE,
  NRD_SRV_API_SHARED_MEMORY,
  NRD_SRV_API_MODEL_CONFIG,
  NRD_SRV_API_MODEL_REPOSITORY,
  NRD_SRV_API_STATISTICS,
  NRD_SRV_API_TRACE,
  NRD_SRV_API_LOGGING,
  NRD_SRV_API_COUNT
} nrd_srv_api;

/* Which header a group needs; header NULL: the group is open. */
typedef struct nrd_srv_restriction {
  char *header; /* lower case */
  char *value;
} nrd_srv_restriction;

typedef struct nrd_srv_restrictions {
  nrd_srv_restriction by_api[NRD_SRV_API_COUNT];
} nrd_srv_restrictions;

/* Adds one flag value "<api>,<api>,...:<key>=<value>" (`flag` names the
 * flag in errors); `prefix` goes in front of the key ("" or
 * "triton-grpc-protocol-"). Returns 0, or -1 with err filled (an unknown
 * API, one already in another group, an empty key, a malformed value);
 * nothing is added then. Not thread-safe (start-up). */
int nrd_srv_restrictions_add(nrd_srv_restrictions *r, const char *flag, const char *arg, const char *prefix, char *err,
                             size_t errlen);

/* Frees what the groups own; the struct can be reused. NULL is a no-op. */
void nrd_srv_restrictions_free(nrd_srv_restrictions *r);

/* The group's header (NULL when open), for lookups and messages. Any
 * thread. */
static inline const char *nrd_srv_restriction_header(const nrd_srv_restrictions *r, nrd_srv_api api) {
  return r ? r->by_api[api].header : NULL;
}

/* Whether `got` (NULL: the header was absent) is the group's value. */
bool nrd_srv_restriction_matches(const nrd_srv_restriction *x, const char *got);

/* Whether a request to `api` that carried `got` (NULL: absent) as the
 * group's header may go on. `r` NULL: everything is open. Any thread. */
static inline bool nrd_srv_restriction_allows(const nrd_srv_restrictions *r, nrd_srv_api api, const char *got) {
  return !r || !r->by_api[api].header || nrd_srv_restriction_matches(&r->by_api[api], got);
}

#endif
