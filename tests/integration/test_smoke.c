/* Smoke test: a server on a repository with identity answers one request. */
#include "harness.h"

Test(smoke, identity_round_trip) {
  char *repo = h_tmpdir();
  h_model(repo, "ident",
          "name: \"ident\"\nbackend: \"identity\"\nmax_batch_size: 0\n"
          "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n"
          "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n",
          "1");
  TRITONSERVER_Server *s = h_server_new(h_options(repo, TRITONSERVER_MODEL_CONTROL_NONE));
  float in[4] = {1, 2, 3, 4};
  int64_t shape[1] = {4};
  TRITONSERVER_InferenceRequest *r = h_request(s, "ident");
  h_add_input(r, "INPUT0", TRITONSERVER_TYPE_FP32, shape, 1, in, sizeof in);
  h_call *c = h_infer(s, r);
  cr_assert_eq(c->n, 1);
  cr_assert_null(h_response_error(c, 0));
  const char *name;
  TRITONSERVER_DataType dt;
  const int64_t *oshape;
  uint64_t dims;
  const void *base;
  size_t size;
  TRITONSERVER_MemoryType mt;
  int64_t mtid;
  void *userp;
  H_OK(TRITONSERVER_InferenceResponseOutput(c->responses[0], 0, &name, &dt, &oshape, &dims, &base, &size, &mt, &mtid,
                                            &userp));
  cr_assert_str_eq(name, "OUTPUT0");
  cr_assert_eq(size, sizeof in);
  cr_assert_eq(memcmp(base, in, sizeof in), 0);
  h_call_free(c);
  H_OK(TRITONSERVER_InferenceRequestDelete(r));
  H_OK(TRITONSERVER_ServerDelete(s));
  h_rmtree(repo);
  free(repo);
}
