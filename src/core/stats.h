/* Per-model inference statistics: what TRITONSERVER_ServerModelStatistics
 * returns and what the nv_inference_* metrics are rendered from.
 * Each model owns one nrd_model_stats guarded by its own lock (no global
 * lock on the request path). All functions: any thread. */
#ifndef NRD_STATS_H
#define NRD_STATS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <jansson.h>

#include "triton/core/tritonserver.h"
#include "text.h"

typedef struct nrd_duration {
  uint64_t count;
  uint64_t ns;
} nrd_duration;

typedef struct nrd_batch_stat {
  uint64_t batch_size;
  nrd_duration compute_input, compute_infer, compute_output;
} nrd_batch_stat;

/* Decoupled response statistics of one response index; the model keeps
 * them in an array indexed by it (indexes are dense: 0, 1, 2, ... per
 * request). */
typedef struct nrd_response_stat {
  bool seen; /* some response of this index was reported */
  nrd_duration compute_infer, compute_output, success, fail, empty_response, cancel;
} nrd_response_stat;

/* Memory a backend reported for the model or one instance (its `owner`). */
typedef struct nrd_mem_usage {
  const void *owner;
  TRITONSERVER_MemoryType type;
  int64_t id;
  uint64_t byte_size;
} nrd_mem_usage;

/* Why a request failed, as the reason label of nv_inference_request_failure
 * says it: REJECTED (its queue timeout expired), CANCELED (cancelled
 * before a backend answered), BACKEND (the backend failed it), OTHER. */
typedef enum nrd_fail_reason {
  NRD_FAIL_REJECTED,
  NRD_FAIL_CANCELED,
  NRD_FAIL_BACKEND,
  NRD_FAIL_OTHER,
  NRD_FAIL_REASONS
} nrd_fail_reason;

/* What a model's KIND_GPU instances on one device reported: the series of
 * the per-model metrics labelled gpu_uuid (Triton gives each GPU instance
 * a metric reporter of its own; the model's other counts stay unlabelled). */
typedef struct nrd_device_stats {
  int32_t device;
  uint64_t inference_count, execution_count;
  nrd_duration success, fail, queue, compute_input, compute_infer, compute_output; /* fail: BACKEND only */
} nrd_device_stats;

typedef struct nrd_model_stats {
  pthread_mutex_t lock;
  uint64_t last_inference_ms;
  uint64_t inference_count;
  uint64_t execution_count;
  nrd_duration success, fail, queue, compute_input, compute_infer, compute_output;
  uint64_t fail_by_reason[NRD_FAIL_REASONS]; /* sums to fail.count */
  uint64_t load_ns; /* how long the load took */
  nrd_duration cache_hit, cache_miss;
  nrd_batch_stat *batch;
  uint32_t n_batch, cap_batch;
  nrd_response_stat *resp; /* resp[i]: response index i */
  uint32_t n_resp, cap_resp; /* n_resp: highest index seen + 1 */
  atomic_int_fast64_t pending; /* requests queued, not yet executing (no lock) */
  nrd_mem_usage *mem;
  uint32_t n_mem;
  nrd_device_stats *by_gpu; /* included in the totals above too */
  uint32_t n_gpu;
  /* summary_latencies: one per nrd_stats_summary_families entry; NULL when off. */
  struct nrd_summary *summaries;
} nrd_model_stats;

/* Monotonic clock in nanoseconds (what backends pass us too). */
uint64_t nrd_now_ns(void);

void nrd_stats_init(nrd_model_stats *s);
void nrd_stats_destroy(nrd_model_stats *s);

/* One successful request: the durations as TRITONBACKEND_ModelInstanceReportStatistics
 * defines them, relative to the request's own start and queue start.
 * `gpu`: the device of the KIND_GPU instance that ran it, else -1 (here
 * and below). */
void nrd_stats_request_success(nrd_model_stats *s, uint64_t request_start_ns, uint64_t queue_start_ns,
                               uint64_t exec_start_ns, uint64_t compute_start_ns, uint64_t compute_end_ns,
                               uint64_t exec_end_ns, int32_t gpu);

/* One failed request (fail count and duration; queue time when known, 0 if not). */
void nrd_stats_request_fail(nrd_model_stats *s, uint64_t request_start_ns, uint64_t queue_start_ns,
                            uint64_t exec_start_ns, uint64_t end_ns, nrd_fail_reason reason, int32_t gpu);

/* A request answered from the response cache: success (request start to
 * lookup end), queue (to lookup start) and cache_hit (the lookup and the
 * copy into the response), as Triton counts them; no execution, no
 * inference count. */
void nrd_stats_cache_hit(nrd_model_stats *s, uint64_t request_start_ns, uint64_t lookup_start_ns,
                         uint64_t lookup_end_ns);

/* A cache miss that took `ns` (lookup plus insertion), also added to the
 * request's success duration, as Triton does. */
void nrd_stats_cache_miss(nrd_model_stats *s, uint64_t ns);

/* One execution of `batch_size` rows. */
void nrd_stats_batch(nrd_model_stats *s, uint64_t batch_size, uint64_t exec_start_ns, uint64_t compute_start_ns,
                     uint64_t compute_end_ns, uint64_t exec_end_ns, int32_t gpu);

/* Response indexes at or past this are not given statistics of their
 * own: each index costs about 100 bytes for the model's lifetime, and a
 * client asking a decoupled model for millions of responses must not make
 * the server hold gigabytes (Triton keeps every index). */
#define NRD_STATS_MAX_RESPONSE_INDEX 65536u

/* How a decoupled response ended, as Triton sorts them: success (outputs,
 * no error), empty (neither), cancel (a CANCELLED error), fail (another). */
typedef enum nrd_response_kind { NRD_RESPONSE_SUCCESS, NRD_RESPONSE_EMPTY, NRD_RESPONSE_CANCEL, NRD_RESPONSE_FAIL } nrd_response_kind;

/* One decoupled response (TRITONBACKEND_ModelInstanceReportResponseStatistics);
 * indexes past NRD_STATS_MAX_RESPONSE_INDEX are not recorded. Any thread. */
void nrd_stats_response(nrd_model_stats *s, uint64_t index, uint64_t response_start_ns,
                        uint64_t compute_output_start_ns, uint64_t response_end_ns, nrd_response_kind kind);

void nrd_stats_pending_add(nrd_model_stats *s, int64_t delta);

/* Gives device `gpu` its (zero) metric series before anything is counted
 * on it; out of memory is retried at the first count. */
void nrd_stats_device_add(nrd_model_stats *s, int32_t gpu);

/* Replaces what `owner` (the model or one of its instances) reported before
 * with `n` buffer attributes (memory type, id and byte size are read; the
 * caller keeps them). Statistics show the sum per memory type and id.
 * On error (bad arguments, out-of-memory) nothing changes. */
TRITONSERVER_Error *nrd_stats_memory_report(nrd_model_stats *s, const void *owner,
                                            TRITONSERVER_BufferAttributes **usage, uint32_t n);

/* The model_stats[] entry of Triton's statistics JSON. New reference. */
json_t *nrd_stats_json(nrd_model_stats *s, const char *model, int64_t version);

/* Appends this model's nv_inference_* sample lines (no HELP/TYPE lines; see
 * nrd_stats_prometheus_header) to a growing text buffer. `gpu_uuid[d]`
 * (d < n_uuid; NULL entries and a NULL array allowed): the label of device
 * d's series, which then leave the unlabelled one (Triton labels GPU
 * instances only while it collects GPU metrics). Returns 0 or -1 on
 * out-of-memory. */
int nrd_stats_prometheus(nrd_model_stats *s, const char *model, int64_t version, const char *family,
                         const char *const *gpu_uuid, int n_uuid, nrd_text *out);
/* Names, HELP and TYPE of the per-model families, in rendering order; the
 * nv_cache_* ones are for models with the response cache enabled only. */
extern const char *const nrd_stats_families[][3];
extern const unsigned nrd_stats_family_count;

/* The summaries of summary_latencies, as Triton names them: name, help. */
extern const char *const nrd_stats_summary_families[][2];
extern const unsigned nrd_stats_summary_family_count;

/* Turns the summaries on for this model (before it serves). 0, or -1 when
 * memory runs out. */
int nrd_stats_enable_summaries(nrd_model_stats *s);

/* Appends summary `family` (an index into nrd_stats_summary_families) of
 * this model in Prometheus text; nothing when its summaries are off.
 * Non-zero: out of memory. Any thread. */
int nrd_stats_prometheus_summary(nrd_model_stats *s, const char *model, int64_t version, unsigned family,
                                 const double *quantiles, size_t n_quantiles, nrd_text *out);

#endif
