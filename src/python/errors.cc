#include "python/errors.h"

#include <new>
#include <string>

#include "python/util.h"

namespace ortlite::py {

namespace {

struct ErrorClass {
  StatusCode code;
  const char* name;  // attribute name in the module
  const char* doc;
};

// onnxruntime's exception names, one per core status code.
constexpr ErrorClass kErrorClasses[] = {
    {StatusCode::kFail, "Fail", "A generic failure."},
    {StatusCode::kInvalidArgument, "InvalidArgument",
     "A bad argument: an unknown input or output name, a wrong element type, rank or shape."},
    {StatusCode::kNoSuchFile, "NoSuchFile", "The model file does not exist."},
    {StatusCode::kNoModel, "NoModel", "The session has no model loaded."},
    {StatusCode::kEngineError, "EngineError", "An internal error of the engine."},
    {StatusCode::kRuntimeException, "RuntimeException", "A failure while running the model."},
    {StatusCode::kInvalidProtobuf, "InvalidProtobuf",
     "The model bytes are not a valid ONNX model."},
    {StatusCode::kModelLoaded, "ModelLoaded", "A model is already loaded in this session."},
    {StatusCode::kNotImplemented, "NotImplemented",
     "An operator, opset or element type ortlite does not implement."},
    {StatusCode::kInvalidGraph, "InvalidGraph", "The model's graph is malformed."},
    {StatusCode::kEPFail, "EPFail", "An execution provider failed or is not available."},
};

void set_runtime_exception(ModuleState* st, const char* message) {
  PyObject* cls = st ? st->errors[static_cast<int>(StatusCode::kRuntimeException)] : nullptr;
  PyErr_SetString(cls ? cls : PyExc_RuntimeError, message);
}

// The exception class for a status code (borrowed; ortlite.Fail for unknown codes).
PyObject* exception_for_code(ModuleState* st, StatusCode code) {
  const int i = static_cast<int>(code);
  PyObject* cls = nullptr;
  if (st && i > 0 && i < kNumStatusCodes) cls = st->errors[i];
  if (!cls && st) cls = st->errors[static_cast<int>(StatusCode::kFail)];
  return cls ? cls : PyExc_RuntimeError;
}

}  // namespace

namespace {
// A new list of str, or nullptr with an exception set.
PyObject* string_list_or_null(const std::vector<std::string>& v) {
  PyObject* list = PyList_New(static_cast<Py_ssize_t>(v.size()));
  if (!list) return nullptr;
  for (size_t i = 0; i < v.size(); ++i) {
    PyObject* s =
        PyUnicode_DecodeUTF8(v[i].data(), static_cast<Py_ssize_t>(v[i].size()), "replace");
    if (!s) {
      Py_DECREF(list);
      return nullptr;
    }
    PyList_SET_ITEM(list, static_cast<Py_ssize_t>(i), s);
  }
  return list;
}
}  // namespace

void set_error(ModuleState* st, std::exception_ptr e) noexcept {
  try {
    std::rethrow_exception(e);
  } catch (const PythonErrorSet&) {
    if (!PyErr_Occurred()) set_runtime_exception(st, "internal error: lost Python exception");
  } catch (const MissingInputsError& err) {
    // onnxruntime's Python API raises ValueError here, with the lists as Python prints them.
    PyObject* missing = string_list_or_null(err.missing());
    PyObject* fed = missing ? string_list_or_null(err.fed()) : nullptr;
    if (fed)
      PyErr_Format(PyExc_ValueError, "Required inputs (%R) are missing from input feed (%R).",
                   missing, fed);
    Py_XDECREF(missing);
    Py_XDECREF(fed);
  } catch (const Error& err) {
    PyErr_SetString(exception_for_code(st, err.code()), err.what());
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
  } catch (const std::exception& ex) {
    set_runtime_exception(st, ex.what());
  } catch (...) {
    set_runtime_exception(st, "unknown C++ exception");
  }
}

void set_current_error(ModuleState* st) noexcept {
  set_error(st, std::current_exception());
}

PyObject* error_object(ModuleState* st, std::exception_ptr e) noexcept {
  // For PythonErrorSet the pending Python exception is the error; otherwise set_error
  // replaces whatever is pending.
  set_error(st, e);
  PyObject* type = nullptr;
  PyObject* value = nullptr;
  PyObject* tb = nullptr;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  if (value && tb) PyException_SetTraceback(value, tb);
  Py_XDECREF(type);
  Py_XDECREF(tb);
  return value;
}

int errors_setup(PyObject* module) {
  ModuleState* st = get_module_state(module);
  st->error_base = PyErr_NewExceptionWithDoc(
      "ortlite.OrtliteError", "Base class of every error ortlite raises from its engine.",
      PyExc_RuntimeError, nullptr);
  if (!st->error_base) return -1;
  if (PyModule_AddObjectRef(module, "OrtliteError", st->error_base) < 0) return -1;
  for (const ErrorClass& ec : kErrorClasses) {
    const std::string qualified = std::string("ortlite.") + ec.name;
    PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), ec.doc, st->error_base, nullptr);
    if (!cls) return -1;
    st->errors[static_cast<int>(ec.code)] = cls;
    if (PyModule_AddObjectRef(module, ec.name, cls) < 0) return -1;
  }
  return 0;
}

}  // namespace ortlite::py
