/* Schema tables for Triton's model_config.proto, written from the field list
 * of the proto (names, types, labels, oneofs, declaration order). */
#include "model_config_schema.h"

#include <string.h>

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* Table-building shorthands (data only, no control flow). */
#define FIELD(n, t, l, m, e, o, f)                                                                                     \
  { (n), (t), (l), NRD_FT_STRING, (m), (e), (o), (f) }
#define SCALAR(n, t) FIELD(n, t, NRD_LABEL_SINGULAR, NULL, NULL, NULL, 0)
#define SCALAR_F(n, t, f) FIELD(n, t, NRD_LABEL_SINGULAR, NULL, NULL, NULL, f)
#define REP(n, t) FIELD(n, t, NRD_LABEL_REPEATED, NULL, NULL, NULL, 0)
#define REP_F(n, t, f) FIELD(n, t, NRD_LABEL_REPEATED, NULL, NULL, NULL, f)
#define ENUMF(n, e) FIELD(n, NRD_FT_ENUM, NRD_LABEL_SINGULAR, NULL, &(e), NULL, 0)
#define MSG(n, m) FIELD(n, NRD_FT_MESSAGE, NRD_LABEL_SINGULAR, &(m), NULL, NULL, 0)
#define MSG_ONEOF(n, m, o) FIELD(n, NRD_FT_MESSAGE, NRD_LABEL_SINGULAR, &(m), NULL, o, 0)
#define REP_MSG(n, m) FIELD(n, NRD_FT_MESSAGE, NRD_LABEL_REPEATED, &(m), NULL, NULL, 0)
#define MAP_STR(n, k)                                                                                                  \
  { (n), NRD_FT_STRING, NRD_LABEL_MAP, (k), NULL, NULL, NULL, 0 }
#define MAP_MSG(n, k, m)                                                                                               \
  { (n), NRD_FT_MESSAGE, NRD_LABEL_MAP, (k), &(m), NULL, NULL, 0 }
#define MESSAGE(var, nm, fields) static const nrd_msg_desc var = {nm, fields, NELEM(fields)}
#define ENUM(var, nm, names, nums) static const nrd_enum_desc var = {nm, names, nums, NELEM(names)}

/* ---- enums ---- */

static const char *const data_type_names[] = {"TYPE_INVALID", "TYPE_BOOL", "TYPE_UINT8", "TYPE_UINT16", "TYPE_UINT32",
                                              "TYPE_UINT64",  "TYPE_INT8", "TYPE_INT16", "TYPE_INT32",  "TYPE_INT64",
                                              "TYPE_FP16",    "TYPE_FP32", "TYPE_FP64",  "TYPE_STRING", "TYPE_BF16"};
static const int data_type_nums[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
ENUM(e_data_type, "DataType", data_type_names, data_type_nums);

static const char *const ig_kind_names[] = {"KIND_AUTO", "KIND_GPU", "KIND_CPU", "KIND_MODEL"};
static const int ig_kind_nums[] = {0, 1, 2, 3};
ENUM(e_ig_kind, "ModelInstanceGroup.Kind", ig_kind_names, ig_kind_nums);

static const char *const sd_kind_names[] = {"KIND_NVDLA"};
static const int sd_kind_nums[] = {0};
ENUM(e_sd_kind, "ModelInstanceGroup.SecondaryDevice.SecondaryDeviceKind", sd_kind_names, sd_kind_nums);

static const char *const format_names[] = {"FORMAT_NONE", "FORMAT_NHWC", "FORMAT_NCHW"};
static const int format_nums[] = {0, 1, 2};
ENUM(e_format, "ModelInput.Format", format_names, format_nums);

static const char *const bi_kind_names[] = {"BATCH_ELEMENT_COUNT",
                                            "BATCH_ACCUMULATED_ELEMENT_COUNT",
                                            "BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO",
                                            "BATCH_MAX_ELEMENT_COUNT_AS_SHAPE",
                                            "BATCH_ITEM_SHAPE",
                                            "BATCH_ITEM_SHAPE_FLATTEN"};
static const int bi_kind_nums[] = {0, 1, 2, 3, 4, 5};
ENUM(e_bi_kind, "BatchInput.Kind", bi_kind_names, bi_kind_nums);

static const char *const bo_kind_names[] = {"BATCH_SCATTER_WITH_INPUT_SHAPE"};
static const int bo_kind_nums[] = {0};
ENUM(e_bo_kind, "BatchOutput.Kind", bo_kind_names, bo_kind_nums);

static const char *const priority_names[] = {"PRIORITY_DEFAULT", "PRIORITY_MAX", "PRIORITY_MIN"};
static const int priority_nums[] = {0, 1, 2};
ENUM(e_priority, "ModelOptimizationPolicy.ModelPriority", priority_names, priority_nums);

static const char *const timeout_names[] = {"REJECT", "DELAY"};
static const int timeout_nums[] = {0, 1};
ENUM(e_timeout, "ModelQueuePolicy.TimeoutAction", timeout_names, timeout_nums);

static const char *const control_kind_names[] = {"CONTROL_SEQUENCE_START", "CONTROL_SEQUENCE_READY",
                                                 "CONTROL_SEQUENCE_END", "CONTROL_SEQUENCE_CORRID"};
static const int control_kind_nums[] = {0, 1, 2, 3};
ENUM(e_control_kind, "ModelSequenceBatching.Control.Kind", control_kind_names, control_kind_nums);

/* ---- ModelInstanceGroup ---- */

static const nrd_field_desc f_resource[] = {
    SCALAR("name", NRD_FT_STRING),
    SCALAR("global", NRD_FT_BOOL),
    SCALAR("count", NRD_FT_UINT32),
};
MESSAGE(m_resource, "ModelRateLimiter.Resource", f_resource);

static const nrd_field_desc f_rate_limiter[] = {
    REP_MSG("resources", m_resource),
    SCALAR("priority", NRD_FT_UINT32),
};
MESSAGE(m_rate_limiter, "ModelRateLimiter", f_rate_limiter);

static const nrd_field_desc f_secondary_device[] = {
    ENUMF("kind", e_sd_kind),
    SCALAR("device_id", NRD_FT_INT64),
};
MESSAGE(m_secondary_device, "ModelInstanceGroup.SecondaryDevice", f_secondary_device);

static const nrd_field_desc f_instance_group[] = {
    SCALAR("name", NRD_FT_STRING),
    ENUMF("kind", e_ig_kind),
    SCALAR("count", NRD_FT_INT32),
    MSG("rate_limiter", m_rate_limiter),
    REP("gpus", NRD_FT_INT32),
    REP_MSG("secondary_devices", m_secondary_device),
    REP("profile", NRD_FT_STRING),
    SCALAR("passive", NRD_FT_BOOL),
    SCALAR("host_policy", NRD_FT_STRING),
};
MESSAGE(m_instance_group, "ModelInstanceGroup", f_instance_group);

/* ---- inputs / outputs ---- */

static const nrd_field_desc f_reshape[] = {
    REP_F("shape", NRD_FT_INT64, NRD_FIELD_JSON_NUMBER),
};
MESSAGE(m_reshape, "ModelTensorReshape", f_reshape);

static const nrd_field_desc f_input[] = {
    SCALAR("name", NRD_FT_STRING),
    ENUMF("data_type", e_data_type),
    ENUMF("format", e_format),
    REP_F("dims", NRD_FT_INT64, NRD_FIELD_JSON_NUMBER),
    MSG("reshape", m_reshape),
    SCALAR("is_shape_tensor", NRD_FT_BOOL),
    SCALAR("allow_ragged_batch", NRD_FT_BOOL),
    SCALAR("optional", NRD_FT_BOOL),
    SCALAR("is_non_linear_format_io", NRD_FT_BOOL),
};
MESSAGE(m_input, "ModelInput", f_input);

static const nrd_field_desc f_output[] = {
    SCALAR("name", NRD_FT_STRING),
    ENUMF("data_type", e_data_type),
    REP_F("dims", NRD_FT_INT64, NRD_FIELD_JSON_NUMBER),
    MSG("reshape", m_reshape),
    SCALAR("label_filename", NRD_FT_STRING),
    SCALAR("is_shape_tensor", NRD_FT_BOOL),
    SCALAR("is_non_linear_format_io", NRD_FT_BOOL),
};
MESSAGE(m_output, "ModelOutput", f_output);

static const nrd_field_desc f_batch_input[] = {
    ENUMF("kind", e_bi_kind),
    REP("target_name", NRD_FT_STRING),
    ENUMF("data_type", e_data_type),
    REP("source_input", NRD_FT_STRING),
};
MESSAGE(m_batch_input, "BatchInput", f_batch_input);

static const nrd_field_desc f_batch_output[] = {
    REP("target_name", NRD_FT_STRING),
    ENUMF("kind", e_bo_kind),
    REP("source_input", NRD_FT_STRING),
};
MESSAGE(m_batch_output, "BatchOutput", f_batch_output);

/* ---- version policy ---- */

static const nrd_field_desc f_vp_latest[] = {
    SCALAR("num_versions", NRD_FT_UINT32),
};
MESSAGE(m_vp_latest, "ModelVersionPolicy.Latest", f_vp_latest);

static const nrd_msg_desc m_vp_all = {"ModelVersionPolicy.All", NULL, 0};

static const nrd_field_desc f_vp_specific[] = {
    REP_F("versions", NRD_FT_INT64, NRD_FIELD_JSON_NUMBER),
};
MESSAGE(m_vp_specific, "ModelVersionPolicy.Specific", f_vp_specific);

static const nrd_field_desc f_version_policy[] = {
    MSG_ONEOF("latest", m_vp_latest, "policy_choice"),
    MSG_ONEOF("all", m_vp_all, "policy_choice"),
    MSG_ONEOF("specific", m_vp_specific, "policy_choice"),
};
MESSAGE(m_version_policy, "ModelVersionPolicy", f_version_policy);

/* ---- optimization ---- */

static const nrd_field_desc f_graph[] = {
    SCALAR("level", NRD_FT_INT32),
};
MESSAGE(m_graph, "ModelOptimizationPolicy.Graph", f_graph);

static const nrd_field_desc f_shape[] = {
    REP("dim", NRD_FT_INT64),
};
MESSAGE(m_shape, "ModelOptimizationPolicy.Cuda.GraphSpec.Shape", f_shape);

static const nrd_field_desc f_lower_bound[] = {
    SCALAR("batch_size", NRD_FT_INT32),
    MAP_MSG("input", NRD_FT_STRING, m_shape),
};
MESSAGE(m_lower_bound, "ModelOptimizationPolicy.Cuda.GraphSpec.LowerBound", f_lower_bound);

static const nrd_field_desc f_graph_spec[] = {
    SCALAR("batch_size", NRD_FT_INT32),
    MAP_MSG("input", NRD_FT_STRING, m_shape),
    MSG("graph_lower_bound", m_lower_bound),
};
MESSAGE(m_graph_spec, "ModelOptimizationPolicy.Cuda.GraphSpec", f_graph_spec);

static const nrd_field_desc f_cuda[] = {
    SCALAR("graphs", NRD_FT_BOOL),
    SCALAR("busy_wait_events", NRD_FT_BOOL),
    REP_MSG("graph_spec", m_graph_spec),
    SCALAR("output_copy_stream", NRD_FT_BOOL),
};
MESSAGE(m_cuda, "ModelOptimizationPolicy.Cuda", f_cuda);

static const nrd_field_desc f_accelerator[] = {
    SCALAR("name", NRD_FT_STRING),
    MAP_STR("parameters", NRD_FT_STRING),
};
MESSAGE(m_accelerator, "ModelOptimizationPolicy.ExecutionAccelerators.Accelerator", f_accelerator);

static const nrd_field_desc f_exec_acc[] = {
    REP_MSG("gpu_execution_accelerator", m_accelerator),
    REP_MSG("cpu_execution_accelerator", m_accelerator),
};
MESSAGE(m_exec_acc, "ModelOptimizationPolicy.ExecutionAccelerators", f_exec_acc);

static const nrd_field_desc f_pinned[] = {
    SCALAR("enable", NRD_FT_BOOL),
};
MESSAGE(m_pinned, "ModelOptimizationPolicy.PinnedMemoryBuffer", f_pinned);

static const nrd_field_desc f_optimization[] = {
    MSG("graph", m_graph),
    ENUMF("priority", e_priority),
    MSG("cuda", m_cuda),
    MSG("execution_accelerators", m_exec_acc),
    MSG("input_pinned_memory", m_pinned),
    MSG("output_pinned_memory", m_pinned),
    SCALAR("gather_kernel_buffer_threshold", NRD_FT_UINT32),
    SCALAR("eager_batching", NRD_FT_BOOL),
};
MESSAGE(m_optimization, "ModelOptimizationPolicy", f_optimization);

/* ---- dynamic batching ---- */

static const nrd_field_desc f_queue_policy[] = {
    ENUMF("timeout_action", e_timeout),
    SCALAR_F("default_timeout_microseconds", NRD_FT_UINT64, NRD_FIELD_JSON_NUMBER),
    SCALAR("allow_timeout_override", NRD_FT_BOOL),
    SCALAR("max_queue_size", NRD_FT_UINT32),
};
MESSAGE(m_queue_policy, "ModelQueuePolicy", f_queue_policy);

static const nrd_field_desc f_dynamic_batching[] = {
    REP("preferred_batch_size", NRD_FT_INT32),
    SCALAR_F("max_queue_delay_microseconds", NRD_FT_UINT64, NRD_FIELD_JSON_NUMBER),
    SCALAR("preserve_ordering", NRD_FT_BOOL),
    SCALAR_F("priority_levels", NRD_FT_UINT64, NRD_FIELD_JSON_NUMBER),
    SCALAR_F("default_priority_level", NRD_FT_UINT64, NRD_FIELD_JSON_NUMBER),
    MSG("default_queue_policy", m_queue_policy),
    MAP_MSG("priority_queue_policy", NRD_FT_UINT64, m_queue_policy),
};
MESSAGE(m_dynamic_batching, "ModelDynamicBatching", f_dynamic_batching);

/* ---- sequence batching ---- */

static const nrd_field_desc f_control[] = {
    ENUMF("kind", e_control_kind),       REP("int32_false_true", NRD_FT_INT32), REP("fp32_false_true", NRD_FT_FLOAT),
    REP("bool_false_true", NRD_FT_BOOL), ENUMF("data_type", e_data_type),
};
MESSAGE(m_control, "ModelSequenceBatching.Control", f_control);

static const nrd_field_desc f_control_input[] = {
    SCALAR("name", NRD_FT_STRING),
    REP_MSG("control", m_control),
};
MESSAGE(m_control_input, "ModelSequenceBatching.ControlInput", f_control_input);

static const nrd_field_desc f_initial_state[] = {
    ENUMF("data_type", e_data_type),
    REP("dims", NRD_FT_INT64),
    FIELD("zero_data", NRD_FT_BOOL, NRD_LABEL_SINGULAR, NULL, NULL, "state_data", 0),
    FIELD("data_file", NRD_FT_STRING, NRD_LABEL_SINGULAR, NULL, NULL, "state_data", 0),
    SCALAR("name", NRD_FT_STRING),
};
MESSAGE(m_initial_state, "ModelSequenceBatching.InitialState", f_initial_state);

static const nrd_field_desc f_state[] = {
    SCALAR("input_name", NRD_FT_STRING),
    SCALAR("output_name", NRD_FT_STRING),
    ENUMF("data_type", e_data_type),
    REP_F("dims", NRD_FT_INT64, NRD_FIELD_JSON_NUMBER),
    REP_MSG("initial_state", m_initial_state),
    SCALAR("use_same_buffer_for_input_output", NRD_FT_BOOL),
    SCALAR("use_growable_memory", NRD_FT_BOOL),
};
MESSAGE(m_state, "ModelSequenceBatching.State", f_state);

static const nrd_field_desc f_direct[] = {
    SCALAR_F("max_queue_delay_microseconds", NRD_FT_UINT64, NRD_FIELD_JSON_NUMBER),
    SCALAR("minimum_slot_utilization", NRD_FT_FLOAT),
};
MESSAGE(m_direct, "ModelSequenceBatching.StrategyDirect", f_direct);

static const nrd_field_desc f_oldest[] = {
    SCALAR("max_candidate_sequences", NRD_FT_INT32),
    REP("preferred_batch_size", NRD_FT_INT32),
    SCALAR_F("max_queue_delay_microseconds", NRD_FT_UINT64, NRD_FIELD_JSON_NUMBER),
    SCALAR("preserve_ordering", NRD_FT_BOOL),
};
MESSAGE(m_oldest, "ModelSequenceBatching.StrategyOldest", f_oldest);

static const nrd_field_desc f_sequence_batching[] = {
    MSG_ONEOF("direct", m_direct, "strategy_choice"),
    MSG_ONEOF("oldest", m_oldest, "strategy_choice"),
    SCALAR_F("max_sequence_idle_microseconds", NRD_FT_UINT64, NRD_FIELD_JSON_NUMBER),
    REP_MSG("control_input", m_control_input),
    REP_MSG("state", m_state),
    SCALAR("iterative_sequence", NRD_FT_BOOL),
};
MESSAGE(m_sequence_batching, "ModelSequenceBatching", f_sequence_batching);

/* ---- ensemble ---- */

static const nrd_field_desc f_step[] = {
    SCALAR("model_name", NRD_FT_STRING),      SCALAR_F("model_version", NRD_FT_INT64, NRD_FIELD_JSON_NUMBER),
    MAP_STR("input_map", NRD_FT_STRING),      MAP_STR("output_map", NRD_FT_STRING),
    SCALAR("model_namespace", NRD_FT_STRING),
};
MESSAGE(m_step, "ModelEnsembling.Step", f_step);

static const nrd_field_desc f_ensemble[] = {
    REP_MSG("step", m_step),
    SCALAR("max_inflight_requests", NRD_FT_UINT32),
};
MESSAGE(m_ensemble, "ModelEnsembling", f_ensemble);

/* ---- misc ---- */

static const nrd_field_desc f_parameter[] = {
    SCALAR("string_value", NRD_FT_STRING),
};
MESSAGE(m_parameter, "ModelParameter", f_parameter);

static const nrd_field_desc f_warmup_input[] = {
    ENUMF("data_type", e_data_type),
    REP_F("dims", NRD_FT_INT64, NRD_FIELD_JSON_NUMBER),
    FIELD("zero_data", NRD_FT_BOOL, NRD_LABEL_SINGULAR, NULL, NULL, "input_data_type", 0),
    FIELD("random_data", NRD_FT_BOOL, NRD_LABEL_SINGULAR, NULL, NULL, "input_data_type", 0),
    FIELD("input_data_file", NRD_FT_STRING, NRD_LABEL_SINGULAR, NULL, NULL, "input_data_type", 0),
};
MESSAGE(m_warmup_input, "ModelWarmup.Input", f_warmup_input);

static const nrd_field_desc f_warmup[] = {
    SCALAR("name", NRD_FT_STRING),
    SCALAR("batch_size", NRD_FT_UINT32),
    MAP_MSG("inputs", NRD_FT_STRING, m_warmup_input),
    SCALAR("count", NRD_FT_UINT32),
};
MESSAGE(m_warmup, "ModelWarmup", f_warmup);

static const nrd_field_desc f_operations[] = {
    REP("op_library_filename", NRD_FT_STRING),
};
MESSAGE(m_operations, "ModelOperations", f_operations);

static const nrd_field_desc f_transaction[] = {
    SCALAR("decoupled", NRD_FT_BOOL),
};
MESSAGE(m_transaction, "ModelTransactionPolicy", f_transaction);

static const nrd_field_desc f_agent[] = {
    SCALAR("name", NRD_FT_STRING),
    MAP_STR("parameters", NRD_FT_STRING),
};
MESSAGE(m_agent, "ModelRepositoryAgents.Agent", f_agent);

static const nrd_field_desc f_agents[] = {
    REP_MSG("agents", m_agent),
};
MESSAGE(m_agents, "ModelRepositoryAgents", f_agents);

static const nrd_field_desc f_response_cache[] = {
    SCALAR("enable", NRD_FT_BOOL),
};
MESSAGE(m_response_cache, "ModelResponseCache", f_response_cache);

static const nrd_field_desc f_metric_id[] = {
    SCALAR("family", NRD_FT_STRING),
};
MESSAGE(m_metric_id, "ModelMetrics.MetricControl.MetricIdentifier", f_metric_id);

static const nrd_field_desc f_histogram[] = {
    REP("buckets", NRD_FT_DOUBLE),
};
MESSAGE(m_histogram, "ModelMetrics.MetricControl.HistogramOptions", f_histogram);

static const nrd_field_desc f_metric_control[] = {
    MSG("metric_identifier", m_metric_id),
    MSG_ONEOF("histogram_options", m_histogram, "metric_options"),
};
MESSAGE(m_metric_control, "ModelMetrics.MetricControl", f_metric_control);

static const nrd_field_desc f_metrics[] = {
    REP_MSG("metric_control", m_metric_control),
};
MESSAGE(m_metrics, "ModelMetrics", f_metrics);

/* ---- root ---- */

static const nrd_field_desc f_model_config[] = {
    SCALAR("name", NRD_FT_STRING),
    SCALAR("platform", NRD_FT_STRING),
    SCALAR("backend", NRD_FT_STRING),
    SCALAR("runtime", NRD_FT_STRING),
    MSG("version_policy", m_version_policy),
    SCALAR("max_batch_size", NRD_FT_INT32),
    REP_MSG("input", m_input),
    REP_MSG("output", m_output),
    REP_MSG("batch_input", m_batch_input),
    REP_MSG("batch_output", m_batch_output),
    MSG("optimization", m_optimization),
    MSG_ONEOF("dynamic_batching", m_dynamic_batching, "scheduling_choice"),
    MSG_ONEOF("sequence_batching", m_sequence_batching, "scheduling_choice"),
    MSG_ONEOF("ensemble_scheduling", m_ensemble, "scheduling_choice"),
    REP_MSG("instance_group", m_instance_group),
    SCALAR("default_model_filename", NRD_FT_STRING),
    MAP_STR("cc_model_filenames", NRD_FT_STRING),
    MAP_STR("metric_tags", NRD_FT_STRING),
    MAP_MSG("parameters", NRD_FT_STRING, m_parameter),
    REP_MSG("model_warmup", m_warmup),
    MSG("model_operations", m_operations),
    MSG("model_transaction_policy", m_transaction),
    MSG("model_repository_agents", m_agents),
    MSG("response_cache", m_response_cache),
    MSG("model_metrics", m_metrics),
};
MESSAGE(m_model_config, "ModelConfig", f_model_config);

const nrd_msg_desc *nrd_schema_model_config(void) { return &m_model_config; }

const nrd_enum_desc *nrd_schema_data_type_enum(void) { return &e_data_type; }

/* Compares a snake_case proto name with a lowerCamelCase spelling. */
static int camel_equals(const char *proto, const char *name, size_t len) {
  size_t j = 0;
  for (size_t i = 0; proto[i] != '\0'; i++) {
    char c = proto[i];
    if (c == '_' && proto[i + 1] != '\0') {
      c = proto[++i];
      if (c >= 'a' && c <= 'z') c = (char)(c - 'a' + 'A');
    }
    if (j >= len || name[j] != c) return 0;
    j++;
  }
  return j == len;
}

const nrd_field_desc *nrd_schema_find_field(const nrd_msg_desc *msg, const char *name, size_t len, int camel) {
  for (size_t i = 0; i < msg->nfields; i++) {
    const char *fn = msg->fields[i].name;
    if (strlen(fn) == len && memcmp(fn, name, len) == 0) return &msg->fields[i];
  }
  if (camel) {
    for (size_t i = 0; i < msg->nfields; i++) {
      if (camel_equals(msg->fields[i].name, name, len)) return &msg->fields[i];
    }
  }
  return NULL;
}

static int ascii_lower(int c) { return (c >= 'A' && c <= 'Z') ? c - 'A' + 'a' : c; }

int nrd_schema_enum_index(const nrd_enum_desc *e, const char *name, size_t len, int nocase) {
  for (size_t i = 0; i < e->count; i++) {
    const char *n = e->names[i];
    if (strlen(n) != len) continue;
    size_t k = 0;
    for (; k < len; k++) {
      int a = (unsigned char)n[k], b = (unsigned char)name[k];
      if (nocase) {
        a = ascii_lower(a);
        b = ascii_lower(b);
      }
      if (a != b) break;
    }
    if (k == len) return (int)i;
  }
  return -1;
}

const char *nrd_schema_enum_name(const nrd_enum_desc *e, long long number) {
  for (size_t i = 0; i < e->count; i++) {
    if (e->numbers[i] == number) return e->names[i];
  }
  return NULL;
}

int nrd_schema_enum_number(const nrd_enum_desc *e, const char *name) {
  int i = nrd_schema_enum_index(e, name, strlen(name), 0);
  return i < 0 ? -1 : e->numbers[i];
}

const char *nrd_schema_type_name(nrd_field_type t) {
  switch (t) {
    case NRD_FT_STRING: return "string";
    case NRD_FT_BOOL: return "bool";
    case NRD_FT_INT32: return "int32";
    case NRD_FT_UINT32: return "uint32";
    case NRD_FT_INT64: return "int64";
    case NRD_FT_UINT64: return "uint64";
    case NRD_FT_FLOAT: return "float";
    case NRD_FT_DOUBLE: return "double";
    case NRD_FT_ENUM: return "enum";
    case NRD_FT_MESSAGE: return "message";
  }
  return "?";
}
