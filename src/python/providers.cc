#include "python/providers.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ortlite/kernel.h"
#include "ortlite/model.h"
#include "ortlite/provider.h"
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

// Device providers whose library loaded and whose device is present (checked once, on
// first use), then the CPU.
std::vector<std::string> available_providers() {
  return available_provider_names();
}

bool is_known(const std::string& name) {
  for (const char* p : kAllProviders)
    if (name == p) return true;
  return false;
}

// Asking for the CPU alone never loads a device library.
bool is_available(const std::string& name) {
  return provider_available(name);
}

std::string available_text() {
  std::string s;
  for (const std::string& p : available_providers()) s += (s.empty() ? "'" : ", '") + p + "'";
  return s;
}

// Why a known provider cannot be used here.
std::string unavailable_reason(const std::string& name) {
  std::string why;
  provider_available(name, &why);
  return why;
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

// {str: str} of a normalized options dict.
std::map<std::string, std::string> options_map(PyObject* options) {
  std::map<std::string, std::string> m;
  PyObject *k, *v;
  Py_ssize_t pos = 0;
  while (PyDict_Next(options, &pos, &k, &v)) {
    std::string key, value;
    if (!str_to_utf8(k, "provider option", &key) || !str_to_utf8(v, "provider option", &value))
      throw PythonErrorSet{};
    m[key] = value;
  }
  return m;
}

}  // namespace

PyObject* all_providers_list() {
  return string_list(kAllProviders, sizeof(kAllProviders) / sizeof(kAllProviders[0]));
}

PyObject* available_providers_list() {
  const std::vector<std::string> names = available_providers();
  std::vector<const char*> ptrs;
  for (const std::string& n : names) ptrs.push_back(n.c_str());
  return string_list(ptrs.data(), ptrs.size());
}

void provider_config(const ProviderChoice& choice, SessionConfig* config) {
  const Py_ssize_t n = PyList_GET_SIZE(choice.names.get());
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* key = PyList_GET_ITEM(choice.names.get(), i);  // borrowed
    std::string name;
    if (!str_to_utf8(key, "provider name", &name)) throw PythonErrorSet{};
    PyObject* opts = PyDict_GetItem(choice.options.get(), key);  // borrowed
    config->providers.emplace_back(name,
                                   opts ? options_map(opts) : std::map<std::string, std::string>{});
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
    // A known provider that cannot run here is skipped with a warning, as onnxruntime does;
    // when none is left the session runs on the CPU (appended below).
    if (!is_available(name)) {
      if (PyErr_WarnFormat(PyExc_UserWarning, 1,
                           "Specified provider '%s' is not in available provider names."
                           "Available providers: %s (%s: %s)",
                           name.c_str(), available_text().c_str(), name.c_str(),
                           unavailable_reason(name).c_str()) < 0)
        throw PythonErrorSet{};
      continue;
    }
    // The core checks the options (a device_id that names no device is EPFail).
    if (name != kCpuProvider) {
      ProviderOptions po;
      po.values = options_map(options[i].get());
      make_provider(name, po);
    }
    if (PyList_Append(choice.names.get(), key.get()) < 0 ||
        PyDict_SetItem(choice.options.get(), key.get(), options[i].get()) < 0)
      throw PythonErrorSet{};
  }
  // The CPU is always the last resort (onnxruntime appends it too): nodes without a kernel
  // of the chosen providers run there, and it runs everything when none of them is usable.
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

// ---- provider introspection ------------------------------------------------------------

namespace {

constexpr const char* kCudaName = "CUDAExecutionProvider";

// {key: value} of report fields, typed as the field says.
Ref report_dict(const std::vector<ReportField>& fields) {
  Ref d = Ref::steal(PyDict_New());
  if (!d) throw PythonErrorSet{};
  for (const ReportField& f : fields) {
    Ref v;
    switch (f.kind) {
      case ReportField::Kind::kText:
        v = Ref::steal(
            PyUnicode_DecodeUTF8(f.text.data(), static_cast<Py_ssize_t>(f.text.size()), "replace"));
        break;
      case ReportField::Kind::kInt:
        v = Ref::steal(PyLong_FromLongLong(f.ints.at(0)));
        break;
      case ReportField::Kind::kBool:
        v = Ref::borrow(f.ints.at(0) ? Py_True : Py_False);
        break;
      case ReportField::Kind::kInts: {
        v = Ref::steal(PyTuple_New(static_cast<Py_ssize_t>(f.ints.size())));
        if (!v) throw PythonErrorSet{};
        for (size_t i = 0; i < f.ints.size(); ++i) {
          PyObject* x = PyLong_FromLongLong(f.ints[i]);
          if (!x) throw PythonErrorSet{};
          PyTuple_SET_ITEM(v.get(), static_cast<Py_ssize_t>(i), x);
        }
        break;
      }
    }
    if (!v || PyDict_SetItemString(d.get(), f.key.c_str(), v.get()) < 0) throw PythonErrorSet{};
  }
  return d;
}

}  // namespace

PyObject* cuda_info(PyObject* module, PyObject*) {
  ModuleState* st = get_module_state(module);
  try {
    const ProviderReport r = provider_report(kCudaName);
    Ref info = report_dict(r.fields);
    Ref devices = Ref::steal(PyList_New(0));
    if (!devices) throw PythonErrorSet{};
    for (const auto& dev : r.devices) {
      Ref d = report_dict(dev);
      if (PyList_Append(devices.get(), d.get()) < 0) throw PythonErrorSet{};
    }
    if (PyDict_SetItemString(info.get(), "devices", devices.get()) < 0) throw PythonErrorSet{};
    return info.release();
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

PyObject* cuda_memory_stats(PyObject* module, PyObject* arg) {
  ModuleState* st = get_module_state(module);
  const long device = PyLong_AsLong(arg);
  if (device == -1 && PyErr_Occurred()) return nullptr;
  try {
    size_t reserved = 0, in_use = 0;
    provider_for_device("cuda", device)->memory_stats(&reserved, &in_use);
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
    set_provider_option(kCudaName, "allow_tf32", allow ? "1" : "0");
    Py_RETURN_NONE;
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

}  // namespace ortlite::py
