/*
 * SageMaker multi-model endpoints on the SageMaker endpoint
 * (--allow-sagemaker), as tritonserver serves them: models are loaded from
 * a folder SageMaker names (POST /models), listed (GET /models,
 * GET /models/<name>), invoked (POST /models/<name>/invoke) and unloaded
 * (DELETE /models/<name>). Each load registers the folder as a model
 * repository, so the server must run with --model-control-mode=explicit.
 */
#ifndef NEREID_SAGEMAKER_MME_H
#define NEREID_SAGEMAKER_MME_H

#include "cloud_endpoints.h"
#include "http_internal.h"

/* The loaded models of one endpoint. Created with the endpoint, freed
 * after its loops have stopped (nrd_srv_sagemaker_mme_free; NULL is fine).
 * Any thread (a mutex guards it). */
typedef struct nrd_srv_sagemaker_mme nrd_srv_sagemaker_mme;

nrd_srv_sagemaker_mme *nrd_srv_sagemaker_mme_new(void);
void nrd_srv_sagemaker_mme_free(nrd_srv_sagemaker_mme *mme);

/* Answers a request whose path is /models or starts with /models/, with
 * the endpoint's table `mme`. Loads and unloads run on a thread of their
 * own and answer through the loop. Loop thread; req is answered (now or
 * later). */
void nrd_srv_sagemaker_mme_route(nrd_srv_http_loop *loop, nrd_srv_http_req *req, nrd_srv_sagemaker_mme *mme);

#endif /* NEREID_SAGEMAKER_MME_H */
