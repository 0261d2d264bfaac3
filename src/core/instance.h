/* Model instances: TRITONBACKEND_ModelInstance, one thread each. */
#ifndef NRD_INSTANCE_H
#define NRD_INSTANCE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "triton/core/tritonbackend.h"

/* The loader's count of instance threads still running model warmup;
 * each thread takes one off (keeping the first error) when it is done. */
typedef struct nrd_warmup_wait {
  pthread_mutex_t lock;
  pthread_cond_t done;
  uint32_t pending;
  TRITONSERVER_Error *first_err;
} nrd_warmup_wait;

struct nrd_warmup;

struct TRITONBACKEND_ModelInstance {
  TRITONBACKEND_Model *model; /* not counted: the model outlives its instances */
  char *name;
  char *group_name;
  TRITONSERVER_InstanceGroupKind kind;
  int32_t device_id;
  bool passive;
  char **profiles;
  uint32_t n_profiles;
  void *state; /* the backend's */
  bool initialized; /* InstanceInitialize succeeded */
  char *host_policy_name; /* its group's host_policy, else "cpu" or "model" */
  TRITONSERVER_Message *host_policy; /* made on first HostPolicy call */
  struct nrd_rl_client *rl; /* its rate limiter handle; NULL when not limited */
  pthread_t thread;
  bool thread_started;
  bool sched_batch; /* run the thread under SCHED_BATCH (instance.c) */
  /* Set by the loader before the thread starts: the samples it runs first
   * and where it reports; NULL when there is no warmup. */
  const struct nrd_warmup *warmup;
  nrd_warmup_wait *warmup_wait;
  atomic_bool warming; /* its batch statistics are not counted meanwhile */
};

/* Allocates an instance description (no backend call). Returns NULL on
 * out-of-memory. The model owns the result. */
TRITONBACKEND_ModelInstance *nrd_instance_new(TRITONBACKEND_Model *model, const char *name, const char *group_name,
                                              TRITONSERVER_InstanceGroupKind kind, int32_t device_id, bool passive);

/* Calls the backend's ModelInstanceInitialize (when it has one). Loader
 * thread; never concurrently for one instance. */
TRITONSERVER_Error *nrd_instance_init(TRITONBACKEND_ModelInstance *inst);

/* Starts the execution thread, which runs the instance's warmup (when
 * `warmup` is set) and then pulls batches from the model's scheduler until
 * it stops. Loader thread. */
TRITONSERVER_Error *nrd_instance_start(TRITONBACKEND_ModelInstance *inst);

/* Waits for the execution thread to finish (after the scheduler stopped). */
void nrd_instance_join(TRITONBACKEND_ModelInstance *inst);

/* Calls ModelInstanceFinalize when Initialize had succeeded, then frees. */
void nrd_instance_finalize_and_free(TRITONBACKEND_ModelInstance *inst);

/* Runs one batch through the backend's Execute; when Execute fails the core
 * answers and releases every request with that error. The instance's
 * thread, or a caller's thread the default scheduler lent the idle
 * instance to (inline execution, through its nrd_executor); never two at
 * once for one instance. */
void nrd_instance_execute(TRITONBACKEND_ModelInstance *inst, TRITONSERVER_InferenceRequest **reqs, uint32_t n);

#endif
