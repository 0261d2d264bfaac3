// Proves the public headers are valid C++17 and keep Triton's shapes when
// seen from C++ (most backends are C++). Every function is only named in
// unevaluated contexts, so this program needs nothing at link time.
#include "triton/core/tritonbackend.h"
#include "triton/core/tritoncache.h"
#include "triton/core/tritonrepoagent.h"
#include "triton/core/tritonserver.h"

#include <cstdint>
#include <type_traits>

// Upstream C++ code spells handles without `struct`; that must work.
static_assert(
    std::is_same<
        decltype(&TRITONSERVER_ErrorNew),
        TRITONSERVER_Error* (*)(TRITONSERVER_Error_Code, const char*)>::value,
    "TRITONSERVER_ErrorNew signature");
static_assert(
    std::is_same<
        decltype(&TRITONSERVER_ErrorDelete),
        void (*)(TRITONSERVER_Error*)>::value,
    "TRITONSERVER_ErrorDelete signature");
static_assert(
    std::is_same<
        decltype(&TRITONSERVER_ServerInferAsync),
        TRITONSERVER_Error* (*)(TRITONSERVER_Server*,
                                TRITONSERVER_InferenceRequest*,
                                TRITONSERVER_InferenceTrace*)>::value,
    "TRITONSERVER_ServerInferAsync signature");
static_assert(
    std::is_same<
        decltype(&TRITONSERVER_MetricNewWithArgs),
        TRITONSERVER_Error* (*)(TRITONSERVER_Metric**,
                                TRITONSERVER_MetricFamily*,
                                const TRITONSERVER_Parameter**, uint64_t,
                                const TRITONSERVER_MetricArgs*)>::value,
    "TRITONSERVER_MetricNewWithArgs signature");
static_assert(
    std::is_same<
        decltype(&TRITONBACKEND_ModelInstanceExecute),
        TRITONSERVER_Error* (*)(TRITONBACKEND_ModelInstance*,
                                TRITONBACKEND_Request**, uint32_t)>::value,
    "TRITONBACKEND_ModelInstanceExecute signature");
static_assert(
    std::is_same<
        decltype(&TRITONBACKEND_ResponseOutput),
        TRITONSERVER_Error* (*)(TRITONBACKEND_Response*,
                                TRITONBACKEND_Output**, const char*,
                                TRITONSERVER_DataType, const int64_t*,
                                uint32_t)>::value,
    "TRITONBACKEND_ResponseOutput signature");
static_assert(
    std::is_same<
        decltype(&TRITONBACKEND_GetBackendAttribute),
        TRITONSERVER_Error* (*)(TRITONBACKEND_Backend*,
                                TRITONBACKEND_BackendAttribute*)>::value,
    "TRITONBACKEND_GetBackendAttribute signature");

static_assert(
    std::is_same<
        decltype(&TRITONBACKEND_ModelInstanceResponseStatisticsSetError),
        TRITONSERVER_Error* (*)(TRITONBACKEND_ModelInstanceResponseStatistics*,
                                TRITONSERVER_Error*)>::value,
    "TRITONBACKEND_ModelInstanceResponseStatisticsSetError signature");

static_assert(
    std::is_same<
        decltype(&TRITONREPOAGENT_ModelRepositoryUpdate),
        TRITONSERVER_Error* (*)(TRITONREPOAGENT_Agent*,
                                TRITONREPOAGENT_AgentModel*,
                                const TRITONREPOAGENT_ArtifactType,
                                const char*)>::value,
    "TRITONREPOAGENT_ModelRepositoryUpdate signature");
static_assert(
    TRITONREPOAGENT_ACTION_UNLOAD_COMPLETE == 4 &&
        TRITONREPOAGENT_ARTIFACT_REMOTE_FILESYSTEM == 1,
    "TRITONREPOAGENT enum values");

// Callback typedefs must accept ordinary C++ functions of the right shape.
static void
on_release(TRITONSERVER_InferenceRequest*, const uint32_t, void*)
{
}
static void
on_complete(TRITONSERVER_InferenceResponse*, const uint32_t, void*)
{
}

int
main()
{
  TRITONSERVER_InferenceRequestReleaseFn_t release_fn = on_release;
  TRITONSERVER_InferenceResponseCompleteFn_t complete_fn = on_complete;
  TRITONSERVER_DataType dtype = TRITONSERVER_TYPE_FP32;
  TRITONSERVER_MemoryType mtype = TRITONSERVER_MEMORY_CPU;
  TRITONBACKEND_ExecutionPolicy policy = TRITONBACKEND_EXECUTION_BLOCKING;
  uint32_t flags = TRITONSERVER_RESPONSE_COMPLETE_FINAL |
                   TRITONSERVER_REQUEST_RELEASE_ALL;
  const bool ok = release_fn != nullptr && complete_fn != nullptr &&
                  dtype == 11 && mtype == 0 && policy == 0 && flags == 1 &&
                  TRITONSERVER_API_VERSION_MINOR == 34 &&
                  TRITONBACKEND_API_VERSION_MINOR == 19;
  return ok ? 0 : 1;
}
