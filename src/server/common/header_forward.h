/* --http-header-forward-pattern and --grpc-header-forward-pattern: request
 * headers whose names match a regular expression are passed to the model
 * as string parameters of each inference request, as tritonserver does.
 * POSIX extended syntax (Triton's RE2 shares its common part), plus RE2's
 * leading "(?i)" for ignoring case; a match anywhere in the name counts,
 * as RE2's PartialMatch. */
#ifndef NRD_SRV_HEADER_FORWARD_H
#define NRD_SRV_HEADER_FORWARD_H

#include <stdbool.h>
#include <stddef.h>

typedef struct nrd_srv_header_forward nrd_srv_header_forward;

/* Compiles `pattern` (copied), ignoring case when `icase` (HTTP header
 * names; gRPC metadata keys are lower case already). NULL with err filled
 * when it does not compile or memory runs out. Free with _free. */
nrd_srv_header_forward *nrd_srv_header_forward_new(const char *pattern, bool icase, char *err, size_t errlen);

/* NULL is a no-op. */
void nrd_srv_header_forward_free(nrd_srv_header_forward *f);

/* Whether the header `name` (not NUL-terminated, `len` bytes) is to be
 * forwarded; false for a NULL `f`. Any thread (the compiled expression is
 * only read). */
bool nrd_srv_header_forward_matches(const nrd_srv_header_forward *f, const char *name, size_t len);

/* Whether a header `name` (`len` bytes) that matched may not be forwarded
 * because Triton keeps its name for itself (69987b7b0): its reserved
 * parameter keys (sequence_id, sequence_start, sequence_end, priority,
 * timeout, headers, binary_data_output) and any name starting with
 * "triton_", compared byte for byte as Triton does. The front ends then
 * refuse the request with NRD_SRV_HEADER_RESERVED_FMT. Any thread. */
bool nrd_srv_header_forward_reserved(const char *name, size_t len);

/* Triton's sentence for a reserved header; one %.*s takes its name. */
#define NRD_SRV_HEADER_RESERVED_FMT "Header '%.*s' is reserved for Triton usage and cannot be forwarded."

#endif
