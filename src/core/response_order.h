/* preserve_ordering for the dynamic batcher and the Oldest sequence
 * batcher: the responses of the requests a batcher dequeues reach their
 * clients in dequeue order, whatever order the instances finish in. A
 * request's responses are held until every request dequeued before it has
 * sent its final one. */
#ifndef NRD_RESPONSE_ORDER_H
#define NRD_RESPONSE_ORDER_H

#include "triton/core/tritonserver.h"

typedef struct nrd_response_order nrd_response_order;

/* A new order with one reference (the batcher's); NULL when out of memory. */
nrd_response_order *nrd_response_order_new(void);

/* Drops a reference: the batcher's at destroy; each request's when its
 * final response is out (so responses after unload still find it). NULL is
 * a no-op. Any thread. */
void nrd_response_order_unref(nrd_response_order *o);

/* Gives `r` its place, after every request added before it, by routing its
 * delivery's responses through the order. Call with the batcher's lock
 * held, in dequeue order, before the backend can see the request. A
 * request already placed (rescheduled by the backend) keeps its place; one
 * without a response callback (padding) has none. */
void nrd_response_order_add(nrd_response_order *o, TRITONSERVER_InferenceRequest *r);

#endif
