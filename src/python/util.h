// Small helpers shared by the binding's files: an owning PyObject reference, method-table
// casts, string conversion. Everything here needs the GIL.
#pragma once

#include <Python.h>

#include <map>
#include <string>
#include <utility>

namespace ortlite::py {

// Owns one strong reference; drops it when destroyed (with the GIL held).
class Ref {
 public:
  Ref() = default;
  static Ref steal(PyObject* o) {
    Ref r;
    r.p_ = o;
    return r;
  }
  static Ref borrow(PyObject* o) {
    Py_XINCREF(o);
    return steal(o);
  }
  Ref(Ref&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  Ref& operator=(Ref&& o) noexcept {
    PyObject* old = p_;
    p_ = std::exchange(o.p_, nullptr);
    Py_XDECREF(old);
    return *this;
  }
  Ref(const Ref&) = delete;
  Ref& operator=(const Ref&) = delete;
  ~Ref() { Py_XDECREF(p_); }

  PyObject* get() const { return p_; }
  // Hands the reference to the caller.
  PyObject* release() { return std::exchange(p_, nullptr); }
  explicit operator bool() const { return p_ != nullptr; }

 private:
  PyObject* p_ = nullptr;
};

// Thrown by helpers that run inside a C++ try block after they set a Python exception;
// the error translation leaves that exception as it is.
struct PythonErrorSet {};

// Method-table entries take PyCFunction; the detour through void(*)(void) is the
// documented way to cast other signatures without -Wcast-function-type.
template <typename F>
inline PyCFunction as_cfunc(F f) {
  return reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(f));
}
template <typename F>
inline void* as_slot(F f) {
  return reinterpret_cast<void*>(f);
}

// UTF-8 bytes of a str; sets TypeError naming `what` when `o` is not a str.
inline bool str_to_utf8(PyObject* o, const char* what, std::string* out) {
  if (!PyUnicode_Check(o)) {
    PyErr_Format(PyExc_TypeError, "%s must be str, not %.100s", what, Py_TYPE(o)->tp_name);
    return false;
  }
  Py_ssize_t n = 0;
  const char* s = PyUnicode_AsUTF8AndSize(o, &n);
  if (!s) return false;
  out->assign(s, static_cast<size_t>(n));
  return true;
}

inline PyObject* str_from_utf8(const std::string& s) {
  return PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "surrogateescape");
}

// Arguments of add_*_config_entry(config_key, config_value) and, with value == nullptr,
// get_*_config_entry(config_key): both str. False with a Python exception set. `format`
// is "OO:name" or "O:name".
inline bool parse_config_args(PyObject* args, PyObject* kwds, const char* format, std::string* key,
                              std::string* value) {
  static const char* add_kwlist[] = {"config_key", "config_value", nullptr};
  static const char* get_kwlist[] = {"config_key", nullptr};
  PyObject* k = nullptr;
  PyObject* v = nullptr;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, format,
                                   const_cast<char**>(value ? add_kwlist : get_kwlist), &k, &v))
    return false;
  return str_to_utf8(k, "config_key", key) && (!value || str_to_utf8(v, "config_value", value));
}

// entries[key] as a str, or NULL with `missing` set: the caller raises the typed error.
inline PyObject* config_entry_str(const std::map<std::string, std::string>& entries,
                                  const std::string& key, bool* missing) {
  auto it = entries.find(key);
  *missing = it == entries.end();
  return *missing ? nullptr : str_from_utf8(it->second);
}

// A new dict of str -> str with the entries of `entries`; NULL with an exception set.
inline PyObject* str_map_to_dict(const std::map<std::string, std::string>& entries) {
  Ref d = Ref::steal(PyDict_New());
  if (!d) return nullptr;
  for (const auto& [k, v] : entries) {
    Ref key = Ref::steal(str_from_utf8(k));
    Ref value = Ref::steal(str_from_utf8(v));
    if (!key || !value || PyDict_SetItem(d.get(), key.get(), value.get()) < 0) return nullptr;
  }
  return d.release();
}

}  // namespace ortlite::py
