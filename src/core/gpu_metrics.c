/* GPU metrics from NVML in Prometheus text (gpu_metrics.h). */
#include "gpu_metrics.h"

#include <string.h>

#include "log.h"
#include "stats.h"

static void sample(nrd_gpu_metrics *g, uint64_t now) {
  for (int i = 0; i < g->n; i++) {
    nrd_gpu_sample s;
    if (nrd_gpu_sample_get(g->ids[i], &s)) g->s[i] = s;
  }
  g->sampled_ns = now;
}

bool nrd_gpu_metrics_init(nrd_gpu_metrics *g, uint64_t interval_ms) {
  memset(g, 0, sizeof *g);
  for (int id = 0; id < NRD_GPU_MAX && g->n < NRD_GPU_MAX; id++) {
    nrd_gpu_sample s;
    if (!nrd_gpu_device_get(id) || !nrd_gpu_sample_get(id, &s)) continue;
    g->ids[g->n] = id;
    g->s[g->n] = s;
    g->energy_start[g->n] = s.energy;
    g->n++;
    NRD_LOG_INFO("Collecting metrics for GPU %d: %s", id, nrd_gpu_device_get(id)->name); /* Triton's line */
  }
  if (g->n == 0) return false;
  pthread_mutex_init(&g->lock, NULL);
  g->interval_ns = (interval_ms > 86400000u ? 86400000u : interval_ms) * 1000000u;
  g->sampled_ns = nrd_now_ns();
  return true;
}

void nrd_gpu_metrics_destroy(nrd_gpu_metrics *g) { pthread_mutex_destroy(&g->lock); }

typedef struct family {
  const char *name, *help, *type;
} family;

/* Triton's families, names and help texts (metrics.cc). */
static const family kFamilies[] = {
    {"nv_gpu_utilization", "GPU utilization rate [0.0 - 1.0)", "gauge"},
    {"nv_gpu_memory_total_bytes", "GPU total memory, in bytes", "gauge"},
    {"nv_gpu_memory_used_bytes", "GPU used memory, in bytes", "gauge"},
    {"nv_gpu_power_usage", "GPU power usage in watts", "gauge"},
    {"nv_gpu_power_limit", "GPU power management limit in watts", "gauge"},
    {"nv_energy_consumption", "GPU energy consumption in joules since the Triton Server started", "counter"},
};

static double value(const nrd_gpu_metrics *g, int i, int f) {
  const nrd_gpu_sample *s = &g->s[i];
  switch (f) {
    case 0: return s->utilization;
    case 1: return s->memory_total;
    case 2: return s->memory_used;
    case 3: return s->power_usage;
    case 4: return s->power_limit;
    default: return s->energy < 0 ? -1 : s->energy - g->energy_start[i];
  }
}

int nrd_gpu_metrics_prometheus(nrd_gpu_metrics *g, nrd_text *out) {
  pthread_mutex_lock(&g->lock);
  uint64_t now = nrd_now_ns();
  if (now - g->sampled_ns >= g->interval_ns) sample(g, now);
  int rc = 0;
  for (int f = 0; f < (int)(sizeof kFamilies / sizeof *kFamilies) && rc == 0; f++) {
    rc = nrd_text_appendf(out, "# HELP %s %s\n# TYPE %s %s\n", kFamilies[f].name, kFamilies[f].help, kFamilies[f].name,
                          kFamilies[f].type);
    for (int i = 0; i < g->n && rc == 0; i++) {
      double v = value(g, i, f);
      if (v < 0) continue; /* NVML could not read it on this GPU */
      rc = nrd_text_appendf(out, "%s{gpu_uuid=\"%s\"} %.16g\n", kFamilies[f].name, g->s[i].uuid, v);
    }
  }
  pthread_mutex_unlock(&g->lock);
  return rc;
}

void nrd_gpu_metrics_uuids(nrd_gpu_metrics *g, char uuid[NRD_GPU_MAX][96]) {
  memset(uuid, 0, NRD_GPU_MAX * sizeof uuid[0]);
  pthread_mutex_lock(&g->lock);
  for (int i = 0; i < g->n; i++) memcpy(uuid[g->ids[i]], g->s[i].uuid, sizeof uuid[0]);
  pthread_mutex_unlock(&g->lock);
}
