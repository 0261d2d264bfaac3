/* Triton's GPU metrics from NVML (gpu.h): utilization, memory, power and
 * energy per GPU, labelled gpu_uuid, sampled when /metrics is read and at
 * most once per --metrics-interval-ms, as the CPU metrics are. */
#ifndef NRD_GPU_METRICS_H
#define NRD_GPU_METRICS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "gpu.h"
#include "text.h"

typedef struct nrd_gpu_metrics {
  pthread_mutex_t lock;
  uint64_t interval_ns;
  uint64_t sampled_ns; /* 0: never */
  int n; /* GPUs NVML knows */
  int ids[NRD_GPU_MAX];
  double energy_start[NRD_GPU_MAX]; /* joules at creation: the counter starts at 0 */
  nrd_gpu_sample s[NRD_GPU_MAX];
} nrd_gpu_metrics;

/* Fills `g` for every GPU NVML reports; returns false (and `g` needs no
 * destroy) when there is none, or no NVML. Loader thread. */
bool nrd_gpu_metrics_init(nrd_gpu_metrics *g, uint64_t interval_ms);
void nrd_gpu_metrics_destroy(nrd_gpu_metrics *g);

/* Appends the families in Prometheus text; samples first when the last
 * sample is older than the interval. Returns 0, -1 on out of memory. Any
 * thread. */
int nrd_gpu_metrics_prometheus(nrd_gpu_metrics *g, nrd_text *out);

/* Copies each GPU's UUID into uuid[id] (id < NRD_GPU_MAX; "" for a device
 * NVML does not report): the gpu_uuid label of the model metrics of
 * KIND_GPU instances. Any thread. */
void nrd_gpu_metrics_uuids(nrd_gpu_metrics *g, char uuid[NRD_GPU_MAX][96]);

#endif
