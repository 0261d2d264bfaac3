// The C interface of pt_torch.h over libtorch's C++ API: the one file of
// the pytorch backend that is C++. No exception leaves a function here.

#include "pt_torch.h"

#include <ATen/Parallel.h>
#include <torch/csrc/jit/passes/tensorexpr_fuser.h>
#include <torch/csrc/jit/python/update_graph_executor_opt.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/script.h>
#include <torch/version.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

struct pt_module {
  std::shared_ptr<torch::jit::Module> module;
};

struct pt_args {
  std::vector<c10::IValue> slots;
  bool dict = false;
  c10::Dict<std::string, at::Tensor> entries;
};

struct pt_result {
  struct item {
    at::Tensor tensor; // contiguous, CPU
    std::vector<std::string> strings;
    bool is_strings = false;
  };
  std::vector<item> items;
};

namespace {

TRITONSERVER_Error *error(TRITONSERVER_Error_Code code, const std::string &text) {
  return TRITONSERVER_ErrorNew(code, text.c_str());
}

// The reason of the exception in flight, without libtorch's C++ backtrace.
std::string reason() {
  try {
    throw;
  } catch (const c10::Error &e) {
    return e.what_without_backtrace();
  } catch (const std::exception &e) {
    return e.what();
  } catch (...) {
    return "unknown exception";
  }
}

bool to_torch(TRITONSERVER_DataType dt, at::ScalarType *out) {
  switch (dt) {
    case TRITONSERVER_TYPE_BOOL: *out = at::kBool; return true;
    case TRITONSERVER_TYPE_UINT8: *out = at::kByte; return true;
    case TRITONSERVER_TYPE_INT8: *out = at::kChar; return true;
    case TRITONSERVER_TYPE_INT16: *out = at::kShort; return true;
    case TRITONSERVER_TYPE_INT32: *out = at::kInt; return true;
    case TRITONSERVER_TYPE_INT64: *out = at::kLong; return true;
    case TRITONSERVER_TYPE_FP16: *out = at::kHalf; return true;
    case TRITONSERVER_TYPE_FP32: *out = at::kFloat; return true;
    case TRITONSERVER_TYPE_FP64: *out = at::kDouble; return true;
    default: return false;
  }
}

TRITONSERVER_DataType to_triton(at::ScalarType t) {
  switch (t) {
    case at::kBool: return TRITONSERVER_TYPE_BOOL;
    case at::kByte: return TRITONSERVER_TYPE_UINT8;
    case at::kChar: return TRITONSERVER_TYPE_INT8;
    case at::kShort: return TRITONSERVER_TYPE_INT16;
    case at::kInt: return TRITONSERVER_TYPE_INT32;
    case at::kLong: return TRITONSERVER_TYPE_INT64;
    case at::kHalf: return TRITONSERVER_TYPE_FP16;
    case at::kFloat: return TRITONSERVER_TYPE_FP32;
    case at::kDouble: return TRITONSERVER_TYPE_FP64;
    default: return TRITONSERVER_TYPE_INVALID;
  }
}

char *copy(const std::string &s) {
  char *p = static_cast<char *>(std::malloc(s.size() + 1));
  if (p != nullptr) std::memcpy(p, s.c_str(), s.size() + 1);
  return p;
}

pt_arg_kind kind_of(const c10::TypePtr &type) {
  switch (type->kind()) {
    case c10::TypeKind::TensorType: return PT_ARG_TENSOR;
    case c10::TypeKind::ListType: return PT_ARG_LIST;
    case c10::TypeKind::DictType: return PT_ARG_DICT;
    default: return PT_ARG_OTHER;
  }
}

// One element of forward()'s result as an output: a Tensor or a List[str].
void add_output(pt_result *r, const c10::IValue &v, const std::string &where) {
  pt_result::item it;
  if (v.isTensor()) {
    at::Tensor t = v.toTensor();
    if (!t.device().is_cpu()) t = t.to(at::kCPU);
    it.tensor = t.contiguous();
  } else if (v.isList()) {
    c10::List<c10::IValue> list = v.toList();
    if (list.elementType()->kind() != c10::TypeKind::StringType) {
      throw std::invalid_argument(where + " must be of type Tensor or List[str], received List[" +
                                  list.elementType()->str() + "]");
    }
    it.is_strings = true;
    it.strings.reserve(list.size());
    for (size_t i = 0; i < list.size(); i++) it.strings.push_back(list.get(i).toStringRef());
  } else {
    throw std::invalid_argument("output must be of type Tensor, List[str] or Tuple containing one of these two "
                                "types. It should not be a List / Dictionary of Tensors or a Scalar");
  }
  r->items.push_back(std::move(it));
}

} // namespace

extern "C" {

const char *pt_version(void) { return TORCH_VERSION; }

TRITONSERVER_Error *pt_set_inter_op_threads(int count) {
  try {
    if (at::get_num_interop_threads() == static_cast<size_t>(count)) return nullptr;
    at::set_num_interop_threads(count);
    return nullptr;
  } catch (...) {
    std::string why = reason();
    return error(TRITONSERVER_ERROR_INVALID_ARG,
                 "libtorch's inter-op thread pool already has " + std::to_string(at::get_num_interop_threads()) +
                     " threads and cannot be resized to " + std::to_string(count) + " (" + why + ")");
  }
}

TRITONSERVER_Error *pt_module_load(const char *path, bool inference_mode, pt_module **out) {
  try {
    c10::InferenceMode guard(inference_mode);
    auto m = std::make_unique<pt_module>();
    m->module = std::make_shared<torch::jit::Module>(torch::jit::load(std::string(path), c10::Device(c10::kCPU)));
    *out = m.release();
    return nullptr;
  } catch (...) {
    return error(TRITONSERVER_ERROR_INTERNAL, reason());
  }
}

pt_module *pt_module_share(const pt_module *module) {
  pt_module *m = new (std::nothrow) pt_module;
  if (m != nullptr) m->module = module->module;
  return m;
}

void pt_module_free(pt_module *module) { delete module; }

TRITONSERVER_Error *pt_module_arguments(const pt_module *module, pt_arg_info **out, size_t *count) {
  try {
    auto method = module->module->find_method("forward");
    if (!method) {
      return error(TRITONSERVER_ERROR_NOT_FOUND, "the TorchScript module has no forward() method");
    }
    const std::vector<c10::Argument> &args = method->function().getSchema().arguments();
    size_t start = !args.empty() && args[0].type()->kind() == c10::TypeKind::ClassType ? 1 : 0;
    size_t n = args.size() - start;
    pt_arg_info *infos = static_cast<pt_arg_info *>(std::calloc(n > 0 ? n : 1, sizeof *infos));
    if (infos == nullptr) return error(TRITONSERVER_ERROR_UNAVAILABLE, "pytorch: out of memory");
    for (size_t i = 0; i < n; i++) {
      const c10::Argument &a = args[start + i];
      infos[i].name = copy(a.name());
      infos[i].type = copy(a.type()->str());
      infos[i].kind = kind_of(a.type());
      if (infos[i].name == nullptr || infos[i].type == nullptr) {
        pt_arg_infos_free(infos, n);
        return error(TRITONSERVER_ERROR_UNAVAILABLE, "pytorch: out of memory");
      }
    }
    *out = infos;
    *count = n;
    return nullptr;
  } catch (...) {
    return error(TRITONSERVER_ERROR_INTERNAL, reason());
  }
}

void pt_arg_infos_free(pt_arg_info *infos, size_t count) {
  if (infos == nullptr) return;
  for (size_t i = 0; i < count; i++) {
    std::free(infos[i].name);
    std::free(infos[i].type);
  }
  std::free(infos);
}

pt_args *pt_args_new(size_t count, bool dict) {
  try {
    auto a = std::make_unique<pt_args>();
    a->dict = dict;
    a->slots.resize(dict ? 0 : count);
    return a.release();
  } catch (...) {
    return nullptr;
  }
}

void pt_args_free(pt_args *args) { delete args; }

static TRITONSERVER_Error *set_slot(pt_args *args, size_t index, const char *key, c10::IValue value) {
  if (args->dict) {
    if (!value.isTensor()) {
      return error(TRITONSERVER_ERROR_INVALID_ARG,
                   std::string("input '") + key + "': a Dict[str, Tensor] argument takes tensors only");
    }
    args->entries.insert_or_assign(std::string(key), value.toTensor());
    return nullptr;
  }
  if (index >= args->slots.size()) {
    return error(TRITONSERVER_ERROR_INTERNAL, std::string("input '") + key + "': argument index " +
                                                  std::to_string(index) + " is beyond forward()'s " +
                                                  std::to_string(args->slots.size()) + " arguments");
  }
  args->slots[index] = std::move(value);
  return nullptr;
}

TRITONSERVER_Error *pt_args_set_tensor(pt_args *args, size_t index, const char *key, const void *data,
                                       TRITONSERVER_DataType datatype, const int64_t *shape, uint32_t dims_count) {
  at::ScalarType type;
  if (!to_torch(datatype, &type)) {
    return error(TRITONSERVER_ERROR_INVALID_ARG, std::string("input '") + key + "': datatype " +
                                                     TRITONSERVER_DataTypeString(datatype) +
                                                     " has no libtorch equivalent");
  }
  try {
    std::vector<int64_t> dims(shape, shape + dims_count);
    auto options = at::TensorOptions().dtype(type).device(at::kCPU);
    int64_t elements = 1;
    for (int64_t d : dims) elements *= d;
    // from_blob over no bytes is not allowed: an empty tensor instead.
    at::Tensor t = elements == 0 ? at::zeros(dims, options) : at::from_blob(const_cast<void *>(data), dims, options);
    return set_slot(args, index, key, c10::IValue(std::move(t)));
  } catch (...) {
    return error(TRITONSERVER_ERROR_INTERNAL, std::string("input '") + key + "': " + reason());
  }
}

TRITONSERVER_Error *pt_args_set_strings(pt_args *args, size_t index, const char *key, const char *const *strings,
                                        const uint32_t *lengths, size_t count) {
  try {
    c10::List<std::string> list;
    list.reserve(count);
    for (size_t i = 0; i < count; i++) list.push_back(std::string(strings[i], lengths[i]));
    return set_slot(args, index, key, c10::IValue(std::move(list)));
  } catch (...) {
    return error(TRITONSERVER_ERROR_INTERNAL, std::string("input '") + key + "': " + reason());
  }
}

TRITONSERVER_Error *pt_module_forward(pt_module *module, pt_args *args, const pt_exec_options *o, pt_result **out) {
  // at::set_num_threads holds for the calling thread (OpenMP): each
  // instance thread sets it once, before its first forward().
  static thread_local int intra_threads = 0;
  try {
    if (o->intra_op_threads > 0 && intra_threads != o->intra_op_threads) {
      at::set_num_threads(o->intra_op_threads);
      intra_threads = o->intra_op_threads;
    }
    torch::jit::setGraphExecutorOptimize(o->optimized);
    c10::InferenceMode guard(o->inference_mode);
    // Process-wide flags (plain fields in libtorch): written only when they
    // change, so that instances agreeing on them do not race.
    at::Context &ctx = at::globalContext();
    if (ctx.userEnabledCuDNN() != o->cudnn) ctx.setUserEnabledCuDNN(o->cudnn);
    if (ctx.deterministicAlgorithms() != o->deterministic || ctx.deterministicAlgorithmsWarnOnly()) {
      ctx.setDeterministicAlgorithms(o->deterministic, false);
    }
    if (o->jit_profiling >= 0) torch::jit::getProfilingMode() = o->jit_profiling != 0;
    if (o->jit_executor >= 0) torch::jit::getExecutorMode() = o->jit_executor != 0;
    if (o->tensor_fuser >= 0) torch::jit::setTensorExprFuserEnabled(o->tensor_fuser != 0);
    torch::NoGradGuard no_grad;

    c10::IValue value;
    if (args->dict) {
      std::vector<c10::IValue> one{c10::IValue(args->entries)};
      value = module->module->forward(std::move(one));
    } else {
      value = module->module->forward(args->slots);
    }
    auto r = std::make_unique<pt_result>();
    if (value.isTuple()) {
      const auto &elements = value.toTupleRef().elements();
      for (size_t i = 0; i < elements.size(); i++) {
        add_output(r.get(), elements[i], "output at index " + std::to_string(i));
      }
    } else {
      add_output(r.get(), value, "output");
    }
    *out = r.release();
    return nullptr;
  } catch (...) {
    return error(TRITONSERVER_ERROR_INTERNAL, "PyTorch execute failure: " + reason());
  }
}

size_t pt_result_count(const pt_result *result) { return result->items.size(); }

void pt_result_output(const pt_result *result, size_t index, pt_output *out) {
  const pt_result::item &it = result->items[index];
  std::memset(out, 0, sizeof *out);
  out->is_strings = it.is_strings;
  if (it.is_strings) {
    out->string_count = it.strings.size();
    out->datatype = TRITONSERVER_TYPE_BYTES;
    out->torch_type = "str";
    return;
  }
  const at::Tensor &t = it.tensor;
  out->datatype = to_triton(t.scalar_type());
  out->torch_type = c10::toString(t.scalar_type());
  out->shape = t.sizes().data();
  out->dims_count = static_cast<uint32_t>(t.dim());
  out->data = t.data_ptr();
  out->byte_size = static_cast<uint64_t>(t.nbytes());
}

void pt_result_string(const pt_result *result, size_t index, size_t element, const char **data, size_t *length) {
  const std::string &s = result->items[index].strings[element];
  *data = s.data();
  *length = s.size();
}

void pt_result_free(pt_result *result) { delete result; }

} // extern "C"
