#include "python/providers.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "providers/cuda/provider.h"
#include "ortlite/kernel.h"
#include "ortlite/model.h"
#include "ortlite/status.h"
#include "python/errors.h"
#include "python/gil.h"
#include "python/numpy_bridge.h"
#include "python/ortvalue.h"

namespace ortlite::py {

namespace {

// onnxruntime's list, in its order.
const char* const kAllProviders[] = {
    "NvTensorRTRTXExecutionProvider", "TensorrtExecutionProvider", "CUDAExecutionProvider",
    "MIGraphXExecutionProvider",      "ROCMExecutionProvider",     "OpenVINOExecutionProvider",
    "DnnlExecutionProvider",          "VitisAIExecutionProvider",  "QNNExecutionProvider",
    "NnapiExecutionProvider",         "VSINPUExecutionProvider",   "JsExecutionProvider",
    "CoreMLExecutionProvider",        "ArmNNExecutionProvider",    "ACLExecutionProvider",
    "DmlExecutionProvider",           "RknpuExecutionProvider",    "WebNNExecutionProvider",
    "WebGpuExecutionProvider",        "XnnpackExecutionProvider",  "CANNExecutionProvider",
    "AzureExecutionProvider",         "CPUExecutionProvider",
};

// CUDA when its library loaded and a device is present (checked once, on first use), then
// the CPU.
std::vector<const char*> available_providers() {
  std::vector<const char*> v;
  if (cuda::available()) v.push_back(cuda::kCudaProvider);
  v.push_back(kCpuProvider);
  return v;
}

bool is_known(const std::string& name) {
  for (const char* p : kAllProviders)
    if (name == p) return true;
  return false;
}

// Asking for the CPU alone never loads the CUDA library.
bool is_available(const std::string& name) {
  if (name == kCpuProvider) return true;
  if (name == cuda::kCudaProvider) return cuda::available();
  return false;
}

std::string available_text() {
  std::string s;
  for (const char* p : available_providers()) s += (s.empty() ? "'" : ", '") + std::string(p) + "'";
  return s;
}

// Why a known provider cannot be used here.
std::string unavailable_reason(const std::string& name) {
  if (name == cuda::kCudaProvider) return cuda::load_status().error;
  return "this build of ortlite does not include it";
}

PyObject* string_list(const char* const* names, size_t n) {
  PyObject* list = PyList_New(static_cast<Py_ssize_t>(n));
  if (!list) return nullptr;
  for (size_t i = 0; i < n; ++i) {
    PyObject* s = PyUnicode_FromString(names[i]);
    if (!s) {
      Py_DECREF(list);
      return nullptr;
    }
    PyList_SET_ITEM(list, static_cast<Py_ssize_t>(i), s);
  }
  return list;
}

// {str(k): str(v)} of an options dict.
Ref normalized_options(PyObject* options) {
  Ref out = Ref::steal(PyDict_New());
  if (!out) throw PythonErrorSet{};
  Ref items = Ref::steal(PyDict_Items(options));
  if (!items) throw PythonErrorSet{};
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(items.get()); ++i) {
    PyObject* kv = PyList_GET_ITEM(items.get(), i);
    Ref k = Ref::steal(PyObject_Str(PyTuple_GET_ITEM(kv, 0)));
    Ref v = Ref::steal(PyObject_Str(PyTuple_GET_ITEM(kv, 1)));
    if (!k || !v || PyDict_SetItem(out.get(), k.get(), v.get()) < 0) throw PythonErrorSet{};
  }
  return out;
}

[[noreturn]] void value_error(const char* message) {
  PyErr_SetString(PyExc_ValueError, message);
  throw PythonErrorSet{};
}

// CUDAExecutionProvider options (already str -> str). device_id must name a present device;
// the others onnxruntime knows (gpu_mem_limit, cudnn_conv_algo_search, ...) are accepted
// and have no effect yet.
void check_cuda_options(PyObject* options) {
  PyObject* v = PyDict_GetItemString(options, "device_id");  // borrowed
  if (!v) return;
  std::string text;
  if (!str_to_utf8(v, "device_id", &text)) throw PythonErrorSet{};
  char* end = nullptr;
  const long id = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || id < 0 || id > 1 << 20)
    ORTLITE_THROW(kEPFail, "CUDAExecutionProvider option device_id = '", text,
                  "' is not a device number");
  cuda::check_device(static_cast<int>(id));
}

}  // namespace

PyObject* all_providers_list() {
  return string_list(kAllProviders, sizeof(kAllProviders) / sizeof(kAllProviders[0]));
}

PyObject* available_providers_list() {
  const std::vector<const char*> names = available_providers();
  return string_list(names.data(), names.size());
}

void provider_config(const ProviderChoice& choice, SessionConfig* config) {
  const Py_ssize_t n = PyList_GET_SIZE(choice.names.get());
  for (Py_ssize_t i = 0; i < n; ++i) {
    std::string name;
    if (!str_to_utf8(PyList_GET_ITEM(choice.names.get(), i), "provider name", &name))
      throw PythonErrorSet{};
    config->providers.push_back(name);
    if (name != cuda::kCudaProvider) continue;
    PyObject* opts = PyDict_GetItemString(choice.options.get(), name.c_str());  // borrowed
    PyObject* v = opts ? PyDict_GetItemString(opts, "device_id") : nullptr;     // borrowed
    std::string text;
    if (v && str_to_utf8(v, "device_id", &text)) {
      config->cuda_device_id = static_cast<int>(std::strtol(text.c_str(), nullptr, 10));
    } else if (PyErr_Occurred()) {
      throw PythonErrorSet{};
    }
  }
}

ProviderChoice choose_providers(ModuleState*, PyObject* providers, PyObject* provider_options) {
  // (name, options) pairs as given.
  std::vector<std::string> names;
  std::vector<Ref> options;
  if (providers != Py_None) {
    if (PyUnicode_Check(providers) || !PySequence_Check(providers))
      value_error("'providers' should be a sequence.");
    Ref seq = Ref::steal(PySequence_Fast(providers, "'providers' should be a sequence."));
    if (!seq) throw PythonErrorSet{};
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq.get());
    Ref opt_seq;
    if (provider_options != Py_None) {
      if (PyUnicode_Check(provider_options) || !PySequence_Check(provider_options))
        value_error("'provider_options' should be a sequence.");
      opt_seq =
          Ref::steal(PySequence_Fast(provider_options, "'provider_options' should be a sequence."));
      if (!opt_seq) throw PythonErrorSet{};
      if (PySequence_Fast_GET_SIZE(opt_seq.get()) != n)
        value_error(
            "'providers' and 'provider_options' should be the same length if both are given.");
    }
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyObject* p = PySequence_Fast_GET_ITEM(seq.get(), i);
      PyObject* name = nullptr;
      PyObject* opts = nullptr;
      if (opt_seq) {
        if (!PyUnicode_Check(p))
          value_error(
              "Only string values for 'providers' are supported if 'provider_options' is given.");
        name = p;
        opts = PySequence_Fast_GET_ITEM(opt_seq.get(), i);
        if (!PyDict_Check(opts)) value_error("'provider_options' values must be dicts.");
      } else if (PyUnicode_Check(p)) {
        name = p;
      } else if (PyTuple_Check(p) && PyTuple_GET_SIZE(p) == 2 &&
                 PyUnicode_Check(PyTuple_GET_ITEM(p, 0)) && PyDict_Check(PyTuple_GET_ITEM(p, 1))) {
        name = PyTuple_GET_ITEM(p, 0);
        opts = PyTuple_GET_ITEM(p, 1);
      } else {
        value_error("'providers' values must be either strings or (string, dict) tuples.");
      }
      std::string s;
      if (!str_to_utf8(name, "provider name", &s)) throw PythonErrorSet{};
      names.push_back(s);
      if (opts) {
        options.push_back(normalized_options(opts));
      } else {
        Ref empty = Ref::steal(PyDict_New());
        if (!empty) throw PythonErrorSet{};
        options.push_back(std::move(empty));
      }
    }
  }

  ProviderChoice choice;
  choice.names = Ref::steal(PyList_New(0));
  choice.options = Ref::steal(PyDict_New());
  if (!choice.names || !choice.options) throw PythonErrorSet{};
  std::vector<std::string> unavailable;
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string& name = names[i];
    if (!is_known(name)) {
      PyErr_Format(PyExc_ValueError, "Unknown execution provider '%s'. Available providers: %s",
                   name.c_str(), available_text().c_str());
      throw PythonErrorSet{};
    }
    Ref key = Ref::steal(PyUnicode_FromString(name.c_str()));
    if (!key) throw PythonErrorSet{};
    const int dup = PyDict_Contains(choice.options.get(), key.get());
    if (dup < 0) throw PythonErrorSet{};
    if (dup) {
      if (PyErr_WarnFormat(PyExc_UserWarning, 1, "Duplicate provider '%s' encountered, ignoring.",
                           name.c_str()) < 0)
        throw PythonErrorSet{};
      continue;
    }
    if (!is_available(name)) {
      unavailable.push_back(name);
      if (PyErr_WarnFormat(PyExc_UserWarning, 1,
                           "Specified provider '%s' is not in available provider names."
                           "Available providers: %s (%s: %s)",
                           name.c_str(), available_text().c_str(), name.c_str(),
                           unavailable_reason(name).c_str()) < 0)
        throw PythonErrorSet{};
      continue;
    }
    if (name == cuda::kCudaProvider) check_cuda_options(options[i].get());
    if (PyList_Append(choice.names.get(), key.get()) < 0 ||
        PyDict_SetItem(choice.options.get(), key.get(), options[i].get()) < 0)
      throw PythonErrorSet{};
  }
  if (PyList_GET_SIZE(choice.names.get()) == 0) {
    if (!unavailable.empty()) {
      std::string requested, why;
      for (const std::string& u : unavailable) {
        requested += (requested.empty() ? "'" : ", '") + u + "'";
        why += "; " + u + ": " + unavailable_reason(u);
      }
      ORTLITE_THROW(kEPFail, "None of the requested execution providers (", requested,
                    ") is available", why, ". Available providers: ", available_text(),
                    ". Add 'CPUExecutionProvider' to providers to run on the CPU.");
    }
  }
  // The CPU is always the last resort (onnxruntime appends it too): nodes without a kernel
  // of the chosen providers run there.
  Ref cpu = Ref::steal(PyUnicode_FromString(kCpuProvider));
  if (!cpu) throw PythonErrorSet{};
  const int has_cpu = PyDict_Contains(choice.options.get(), cpu.get());
  if (has_cpu < 0) throw PythonErrorSet{};
  if (!has_cpu) {
    Ref empty = Ref::steal(PyDict_New());
    if (!empty || PyList_Append(choice.names.get(), cpu.get()) < 0 ||
        PyDict_SetItem(choice.options.get(), cpu.get(), empty.get()) < 0)
      throw PythonErrorSet{};
  }
  return choice;
}

// ---- CUDA introspection and the kernel test entry ---------------------------------------

namespace {

PyObject* device_dict(int device) {
  const OrtliteCudaDeviceProps p = cuda::device_props(device);
  return Py_BuildValue("{s:i,s:s,s:K,s:(ii),s:i,s:O}", "id", device, "name", p.name, "total_memory",
                       static_cast<unsigned long long>(p.total_memory), "compute_capability",
                       p.major, p.minor, "multiprocessor_count", p.multiprocessor_count,
                       "memory_pools", p.memory_pools_supported ? Py_True : Py_False);
}

// A CUDA event pair timing work queued on a stream.
struct EventTimer {
  OrtliteCudaEvent* start = nullptr;
  OrtliteCudaEvent* end = nullptr;
  explicit EventTimer(int device) {
    const OrtliteCudaApi& a = cuda::api();
    cuda::check(a.event_create(device, 1, &start), "CUDA event");
    cuda::check(a.event_create(device, 1, &end), "CUDA event");
  }
  ~EventTimer() {
    cuda::api().event_destroy(start);
    cuda::api().event_destroy(end);
  }
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
};

}  // namespace

PyObject* cuda_info(PyObject* module, PyObject*) {
  ModuleState* st = get_module_state(module);
  try {
    const cuda::LoadStatus& ls = cuda::load_status();
    Ref devices = Ref::steal(PyList_New(0));
    if (!devices) throw PythonErrorSet{};
    for (int d = 0; d < ls.device_count; ++d) {
      Ref dev = Ref::steal(device_dict(d));
      if (!dev || PyList_Append(devices.get(), dev.get()) < 0) throw PythonErrorSet{};
    }
    return Py_BuildValue("{s:s,s:O,s:i,s:s,s:O,s:i}", "library", ls.library.c_str(), "loaded",
                         ls.loaded ? Py_True : Py_False, "device_count", ls.device_count, "error",
                         ls.error.c_str(), "devices", devices.get(), "abi_version",
                         ORTLITE_CUDA_ABI_VERSION);
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

PyObject* cuda_memory_stats(PyObject* module, PyObject* arg) {
  ModuleState* st = get_module_state(module);
  const long device = PyLong_AsLong(arg);
  if (device == -1 && PyErr_Occurred()) return nullptr;
  try {
    size_t reserved = 0, in_use = 0;
    cuda::memory_stats(static_cast<int>(device), &reserved, &in_use);
    return Py_BuildValue("(KK)", static_cast<unsigned long long>(reserved),
                         static_cast<unsigned long long>(in_use));
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

PyObject* cuda_set_allow_tf32(PyObject* module, PyObject* arg) {
  ModuleState* st = get_module_state(module);
  const int allow = PyObject_IsTrue(arg);
  if (allow < 0) return nullptr;
  try {
    cuda::check(cuda::api().set_allow_tf32(allow), "set_allow_tf32");
    Py_RETURN_NONE;
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

// _cuda_run_node(model, feeds, device_id=0, return_ortvalues=False, repeat=1): runs the one
// node of `model` (serialized ModelProto) with its CUDA kernel, on a stream of its own, and
// returns the outputs as numpy arrays (copied from the device) or as OrtValues (on the
// device). Feeds (dict: input name -> array or OrtValue) and initializers are copied to the
// device, except the inputs the kernel reads on the host. repeat > 1 runs the kernel that
// many times and returns (outputs, milliseconds per run, timed with CUDA events).
PyObject* cuda_run_node(PyObject* module, PyObject* args, PyObject* kwds) {
  ModuleState* st = get_module_state(module);
  static const char* kwlist[] = {"model",  "feeds", "device_id", "return_ortvalues",
                                 "repeat", nullptr};
  Py_buffer model{};
  PyObject* feeds = nullptr;
  int device = 0;
  int return_ortvalues = 0;
  int repeat = 1;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "y*O!|ipi:_cuda_run_node",
                                   const_cast<char**>(kwlist), &model, &PyDict_Type, &feeds,
                                   &device, &return_ortvalues, &repeat))
    return nullptr;
  struct Release {
    Py_buffer* b;
    ~Release() { PyBuffer_Release(b); }
  } release{&model};
  try {
    if (repeat < 1) ORTLITE_THROW(kInvalidArgument, "repeat must be >= 1, got ", repeat);
    cuda::check_device(device);
    BufferPtr bytes = BufferPtr::adopt(Buffer::allocate(static_cast<size_t>(model.len)));
    if (model.len) std::memcpy(bytes->data(), model.buf, static_cast<size_t>(model.len));
    const Model m = load_model_from_buffer(bytes, "");
    if (m.graph.nodes.size() != 1)
      ORTLITE_THROW(kInvalidArgument, "_cuda_run_node expects a model with one node, got ",
                    m.graph.nodes.size());
    const Node& node = m.graph.nodes[0];
    int64_t opset = 0;
    for (const OpsetImport& o : m.opset_imports)
      if (o.domain.empty() || o.domain == "ai.onnx") opset = o.version;
    const KernelFactory* factory =
        KernelRegistry::instance().find(node.domain, node.op_type, opset, cuda::kCudaProvider);
    if (!factory)
      ORTLITE_THROW(kNotImplemented, node.op_type, " (opset ", opset, ") has no CUDA kernel");
    std::map<std::string, Tensor> inits;
    for (const auto& kv : m.graph.initializers) inits[kv.first] = kv.second;
    KernelInfo info(node, opset, [&](const std::string& name) -> const Tensor* {
      auto it = inits.find(name);
      return it == inits.end() ? nullptr : &it->second;
    });
    std::unique_ptr<Kernel> kernel = (*factory)(info);

    cuda::Stream stream(device);
    std::vector<Value> values(node.inputs.size());
    std::vector<const Value*> ptrs(node.inputs.size(), nullptr);
    std::vector<Ref> held;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const std::string& name = node.inputs[i];
      if (name.empty()) continue;
      Tensor t;
      auto it = inits.find(name);
      if (it != inits.end()) {
        t = it->second;
      } else {
        PyObject* v = PyDict_GetItemString(feeds, name.c_str());  // borrowed
        if (!v) ORTLITE_THROW(kInvalidArgument, "input '", name, "' is missing from the feeds");
        if (ortvalue_check(st, v)) {
          t = reinterpret_cast<OrtValueObject*>(v)->tensor;
        } else {
          Ref keep;
          t = object_to_tensor(v, DataType::kUndefined, name, &keep);
          if (keep) held.push_back(std::move(keep));
        }
      }
      const bool host = cuda::input_on_host(node.op_type, opset, i);
      if (host && cuda::is_cuda(t)) t = cuda::to_host(t, nullptr);
      if (!host && !cuda::is_cuda(t)) t = cuda::to_device(t, device, stream.get());
      values[i] = std::move(t);
      ptrs[i] = &values[i];
    }

    std::vector<Value> outs;
    double ms = 0;
    without_gil([&] {
      cuda::StreamScope scope(stream.get());
      std::unique_ptr<EventTimer> timer;
      if (repeat > 1) {
        timer = std::make_unique<EventTimer>(device);
        cuda::check(cuda::api().event_record(timer->start, stream.get()), "CUDA event");
      }
      for (int r = 0; r < repeat; ++r) {
        outs.assign(node.outputs.size(), Value());
        KernelContext ctx(node, ptrs.data(), ptrs.size(), outs.data(), outs.size(), nullptr);
        kernel->compute(ctx);
      }
      if (timer) cuda::check(cuda::api().event_record(timer->end, stream.get()), "CUDA event");
      stream.sync();
      if (timer) {
        float total = 0;
        cuda::check(cuda::api().event_elapsed_ms(timer->start, timer->end, &total), "CUDA event");
        ms = static_cast<double>(total) / repeat;
      }
    });

    Ref list = Ref::steal(PyList_New(0));
    if (!list) throw PythonErrorSet{};
    for (Value& v : outs) {
      Ref item;
      if (!v.is_tensor() || !v.tensor().defined()) {
        item = Ref::borrow(Py_None);
      } else if (return_ortvalues) {
        item = ortvalue_new(st, v.tensor(), nullptr);
      } else {
        const Tensor host =
            cuda::is_cuda(v.tensor()) ? cuda::to_host(v.tensor(), nullptr) : v.tensor().clone();
        item = can_view(host) ? tensor_to_numpy_owned(st, host) : tensor_to_numpy_copy(host);
      }
      if (PyList_Append(list.get(), item.get()) < 0) throw PythonErrorSet{};
    }
    if (repeat > 1) return Py_BuildValue("(Od)", list.get(), ms);
    return list.release();
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

}  // namespace ortlite::py
