/* Ensemble models (platform "ensemble", ensemble_scheduling): a request runs
 * as a graph of requests to other models, each step as soon as its inputs
 * exist, and is answered with the ensemble's outputs. See docs/ensemble.md. */
#ifndef NRD_ENSEMBLE_H
#define NRD_ENSEMBLE_H

#include <stdbool.h>

#include "scheduler.h"

/* Creates the ensemble scheduler of `model` (its configuration already
 * validated). Every composing model must be loaded and READY and agree
 * with the ensemble; otherwise an error says which and why. *decoupled
 * tells whether the ensemble answers like a decoupled model (its outputs
 * come from a decoupled step's responses). The scheduler takes no
 * reference on `model`, which owns it. Loader thread. */
TRITONSERVER_Error *nrd_ensemble_scheduler_new(TRITONBACKEND_Model *model, nrd_scheduler **out, bool *decoupled);

#endif
