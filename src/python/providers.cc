#include "python/providers.h"

#include <string>
#include <vector>

#include "ortlite/kernel.h"
#include "ortlite/status.h"

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

const char* const kAvailableProviders[] = {kCpuProvider};

bool is_known(const std::string& name) {
  for (const char* p : kAllProviders)
    if (name == p) return true;
  return false;
}

bool is_available(const std::string& name) {
  for (const char* p : kAvailableProviders)
    if (name == p) return true;
  return false;
}

std::string available_text() {
  std::string s;
  for (const char* p : kAvailableProviders) s += (s.empty() ? "'" : ", '") + std::string(p) + "'";
  return s;
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

}  // namespace

PyObject* all_providers_list() {
  return string_list(kAllProviders, sizeof(kAllProviders) / sizeof(kAllProviders[0]));
}

PyObject* available_providers_list() {
  return string_list(kAvailableProviders,
                     sizeof(kAvailableProviders) / sizeof(kAvailableProviders[0]));
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
                           "Available providers: %s",
                           name.c_str(), available_text().c_str()) < 0)
        throw PythonErrorSet{};
      continue;
    }
    if (PyList_Append(choice.names.get(), key.get()) < 0 ||
        PyDict_SetItem(choice.options.get(), key.get(), options[i].get()) < 0)
      throw PythonErrorSet{};
  }
  if (PyList_GET_SIZE(choice.names.get()) == 0) {
    if (!unavailable.empty()) {
      std::string requested;
      for (const std::string& u : unavailable)
        requested += (requested.empty() ? "'" : ", '") + u + "'";
      ORTLITE_THROW(
          kEPFail, "None of the requested execution providers (", requested,
          ") is available in this build of ortlite. Available providers: ", available_text(),
          ". Add 'CPUExecutionProvider' to providers to run on the CPU.");
    }
    Ref cpu = Ref::steal(PyUnicode_FromString(kCpuProvider));
    Ref empty = Ref::steal(PyDict_New());
    if (!cpu || !empty || PyList_Append(choice.names.get(), cpu.get()) < 0 ||
        PyDict_SetItem(choice.options.get(), cpu.get(), empty.get()) < 0)
      throw PythonErrorSet{};
  }
  return choice;
}

}  // namespace ortlite::py
