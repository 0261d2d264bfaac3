/*
 * What a model.py asks of the server besides its responses: model control
 * (pb_utils.load_model, unload_model, is_model_ready) and custom metrics
 * (pb_utils.MetricFamily, Metric), answered on the instance's thread while
 * the stub waits.
 */
#ifndef NRD_PY_SERVICES_H
#define NRD_PY_SERVICES_H

#include <jansson.h>
#include <stdbool.h>

#include "py_exec.h"

/*
 * Answers the stub's message when it is a service request: *ack is then the
 * answer (the caller frees it; "error" names what failed) and true is
 * returned; false for any other message. The instance's thread.
 */
bool nrd_py_service(nrd_py_instance *st, const json_t *msg, json_t **ack);

/* Deletes the instance's metrics and metric families (its finalize). */
void nrd_py_services_free(nrd_py_instance *st);

#endif
