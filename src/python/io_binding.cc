// ortlite.SessionIOBinding: onnxruntime's IOBinding over one InferenceSession.
//
// Ownership: the binding holds a strong reference to its session, and for each bound input
// the Python objects whose memory the bound tensor borrows (the ndarray of bind_cpu_input,
// or its contiguous copy; the OrtValue of bind_ortvalue_input), until the input is rebound,
// cleared or the binding dies. A raw pointer (bind_input, bind_output with buffer_ptr) is
// the caller's memory, as in onnxruntime: the caller keeps it alive while it is bound, and
// what the binding hands back over it is copied before numpy sees it. Outputs of a run are
// OrtValues the binding keeps until the next run or clear_binding_outputs.
#include "python/io_binding.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include <structmember.h>

#include "ortlite/provider.h"
#include "ortlite/session.h"
#include "ortlite/status.h"
#include "python/errors.h"
#include "python/gil.h"
#include "python/numpy_bridge.h"
#include "python/ortvalue.h"
#include "python/run_options.h"
#include "python/session.h"
#include "python/util.h"

namespace ortlite::py {

namespace {

// Where an output goes.
struct OutputBinding {
  enum class Kind { kAllocate, kOrtValue, kPointer };
  std::string name;
  Kind kind = Kind::kAllocate;
  Device device;  // kAllocate: where the result is put
  Tensor target;  // kOrtValue / kPointer: the memory the result is copied into
};

struct BindingState {
  std::vector<std::pair<std::string, Tensor>> inputs;  // in binding order
  std::vector<OutputBinding> outputs;                  // in binding order
};

struct IOBindingObject {
  PyObject_HEAD BindingState* state;
  PyObject* session;      // the InferenceSession (strong)
  PyObject* input_refs;   // dict: input name -> tuple of the objects its tensor borrows
  PyObject* output_refs;  // dict: output name -> the bound OrtValue (bind_ortvalue_output)
  PyObject* results;      // list of OrtValues of the last run, one per bound output
  PyObject* weakreflist;
};

IOBindingObject* as_iob(PyObject* o) {
  return reinterpret_cast<IOBindingObject*>(o);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return s;
}

// device_type ("cpu", "cuda" / "gpu", any case) and device_id of a bind_* call. A device
// type ortlite has no provider for is InvalidArgument; CUDA without a usable device EPFail.
Device parse_device(PyObject* device_type, PyObject* device_id) {
  std::string dev;
  if (!str_to_utf8(device_type, "device_type", &dev)) throw PythonErrorSet{};
  if (!PyLong_Check(device_id) || PyBool_Check(device_id)) {
    PyErr_Format(PyExc_TypeError, "device_id must be int, not %.100s", Py_TYPE(device_id)->tp_name);
    throw PythonErrorSet{};
  }
  const long long id = PyLong_AsLongLong(device_id);
  if (id == -1 && PyErr_Occurred()) throw PythonErrorSet{};
  dev = lower(dev);
  if (dev == "cpu") return Device{DeviceType::kCPU, 0};
  if (dev != "cuda" && dev != "gpu")
    ORTLITE_THROW(kInvalidArgument, "Unsupported device type: ", dev,
                  " (ortlite binds 'cpu' and 'cuda' memory)");
  if (id < 0 || id > (1 << 20)) ORTLITE_THROW(kInvalidArgument, "device_id ", id, " is not valid");
  // EPFail saying why when CUDA cannot be used here.
  provider_for_device("cuda", id);
  return Device{DeviceType::kCUDA, static_cast<int>(id)};
}

Shape parse_shape(PyObject* shape_obj) {
  if (PyUnicode_Check(shape_obj) || PyBytes_Check(shape_obj)) {
    PyErr_SetString(PyExc_TypeError, "shape must be a sequence of int");
    throw PythonErrorSet{};
  }
  Ref seq = Ref::steal(PySequence_Fast(shape_obj, "shape must be a sequence of int"));
  if (!seq) throw PythonErrorSet{};
  Shape shape;
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq.get()); ++i) {
    PyObject* d = PySequence_Fast_GET_ITEM(seq.get(), i);
    if (!PyLong_Check(d) || PyBool_Check(d)) {
      PyErr_Format(PyExc_TypeError, "shape must be a sequence of int, not of %.100s",
                   Py_TYPE(d)->tp_name);
      throw PythonErrorSet{};
    }
    const long long v = PyLong_AsLongLong(d);
    if (v == -1 && PyErr_Occurred()) throw PythonErrorSet{};
    if (v < 0) ORTLITE_THROW(kInvalidArgument, "shape has a negative dimension: ", v);
    shape.push_back(static_cast<int64_t>(v));
  }
  return shape;
}

// A tensor over caller memory at `buffer_ptr` (bind_input / bind_output with a pointer).
Tensor pointer_tensor(const std::string& what, const Device& device, PyObject* element_type,
                      PyObject* shape_obj, PyObject* buffer_ptr) {
  const DataType dt = dtype_from_python(element_type);
  if (dt == DataType::kString)
    ORTLITE_THROW(kInvalidArgument, what,
                  ": only binding non-string tensors by address is supported (a string "
                  "tensor's memory holds Python objects); bind an array with bind_cpu_input "
                  "or an OrtValue instead");
  const size_t esize = dtype_size(dt);
  if (esize == 0)
    ORTLITE_THROW(kNotImplemented, what, ": binding tensor(", dtype_name(dt),
                  ") memory by address is not supported");
  const Shape shape = parse_shape(shape_obj);
  if (!PyLong_Check(buffer_ptr) || PyBool_Check(buffer_ptr)) {
    PyErr_Format(PyExc_TypeError, "buffer_ptr must be int, not %.100s",
                 Py_TYPE(buffer_ptr)->tp_name);
    throw PythonErrorSet{};
  }
  const unsigned long long addr = PyLong_AsUnsignedLongLong(buffer_ptr);
  if (addr == static_cast<unsigned long long>(-1) && PyErr_Occurred()) throw PythonErrorSet{};
  int64_t numel = 1;
  for (int64_t d : shape) {
    if (d != 0 && numel > (int64_t{1} << 50) / d)
      ORTLITE_THROW(kInvalidArgument, what, ": shape ", shape_to_string(shape), " is too large");
    numel *= d;
  }
  const size_t nbytes = static_cast<size_t>(numel) * esize;
  if (addr == 0 && nbytes > 0) ORTLITE_THROW(kInvalidArgument, what, ": buffer_ptr is null");
  if (addr % esize != 0)
    ORTLITE_THROW(kInvalidArgument, what, ": buffer_ptr ", addr,
                  " is not aligned to the element size (", esize, " bytes)");
  if (device.type != DeviceType::kCPU)
    ORTLITE_THROW(kNotImplemented, what,
                  ": binding CUDA memory by address is not supported; bind an OrtValue made "
                  "with OrtValue.ortvalue_from_numpy(arr, 'cuda', id) or "
                  "ortvalue_from_shape_and_type(..., 'cuda', id) instead");
  void* p = reinterpret_cast<void*>(static_cast<uintptr_t>(addr));
  BufferPtr buf = BufferPtr::adopt(Buffer::wrap(p, nbytes, BufferKind::kBorrowed, {}));
  return Tensor(dt, shape, std::move(buf));
}

// The declaration of input `name`, which must be a tensor the session may be fed.
const ValueInfo& bound_input_decl(const Session& sess, const std::string& name) {
  const ValueInfo* vi = sess.find_feedable(name);
  if (!vi) {
    std::string names;
    for (const ValueInfo& i : sess.inputs()) names += (names.empty() ? "" : ", ") + i.name;
    ORTLITE_THROW(kInvalidArgument, "Failed to find NodeArg with name: ", name,
                  " in the def list (the model's inputs: ", names, ")");
  }
  if (vi->type.kind != TypeInfo::Kind::kTensor && vi->type.kind != TypeInfo::Kind::kUnknown)
    ORTLITE_THROW(kNotImplemented, "input '", name, "' is a ", vi->type.to_string(),
                  "; IOBinding binds tensors only (use run())");
  return *vi;
}

void check_output_name(const Session& sess, const std::string& name) {
  if (!sess.has_output(name)) {
    std::string names;
    for (const ValueInfo& o : sess.outputs()) names += (names.empty() ? "" : ", ") + o.name;
    ORTLITE_THROW(kInvalidArgument, "Invalid output name: ", name, " (the model's outputs: ", names,
                  ")");
  }
}

std::shared_ptr<const Session> session_of(PyObject* self) {
  return session_shared(as_iob(self)->session);
}

// Records input `name` as `t`, borrowing from `refs` (a tuple, may be empty).
void set_input(PyObject* self, const std::string& name, Tensor t, Ref refs) {
  IOBindingObject* b = as_iob(self);
  Ref key = Ref::steal(str_from_utf8(name));
  if (!key) throw PythonErrorSet{};
  if (!refs) {
    refs = Ref::steal(PyTuple_New(0));
    if (!refs) throw PythonErrorSet{};
  }
  // The tensor is replaced first: it must never outlive the memory it borrows.
  auto& inputs = b->state->inputs;
  bool found = false;
  for (auto& in : inputs) {
    if (in.first == name) {
      in.second = std::move(t);
      found = true;
    }
  }
  if (!found) inputs.emplace_back(name, std::move(t));
  if (PyDict_SetItem(b->input_refs, key.get(), refs.get()) < 0) throw PythonErrorSet{};
}

void set_output(PyObject* self, OutputBinding o, PyObject* ortvalue) {
  IOBindingObject* b = as_iob(self);
  Ref key = Ref::steal(str_from_utf8(o.name));
  if (!key) throw PythonErrorSet{};
  const std::string name = o.name;
  auto& outputs = b->state->outputs;
  bool found = false;
  for (auto& out : outputs) {
    if (out.name == name) {
      out = std::move(o);
      found = true;
    }
  }
  if (!found) outputs.push_back(std::move(o));
  if (ortvalue) {
    if (PyDict_SetItem(b->output_refs, key.get(), ortvalue) < 0) throw PythonErrorSet{};
  } else if (PyDict_DelItem(b->output_refs, key.get()) < 0) {
    if (!PyErr_ExceptionMatches(PyExc_KeyError)) throw PythonErrorSet{};
    PyErr_Clear();
  }
}

// Copies the run's `result` into a bound output's memory, which must have its element type
// and shape (onnxruntime's messages).
void copy_into(const std::string& name, const Tensor& result, const Tensor& target) {
  if (result.dtype() != target.dtype())
    ORTLITE_THROW(kInvalidArgument, "Unexpected output data type. Actual: (tensor(",
                  dtype_name(target.dtype()), ")) , expected: (tensor(", dtype_name(result.dtype()),
                  ")) for output '", name, "'");
  if (result.shape() != target.shape()) {
    std::string bad;
    if (result.rank() != target.rank()) {
      ORTLITE_THROW(kInvalidArgument, "Invalid rank for output: ", name, " Got: ", target.rank(),
                    " Expected: ", result.rank(),
                    " Please fix either the inputs/outputs or the model.");
    }
    for (size_t d = 0; d < result.rank(); ++d) {
      if (result.dim(d) != target.dim(d))
        bad += " index: " + std::to_string(d) + " Got: " + std::to_string(target.dim(d)) +
               " Expected: " + std::to_string(result.dim(d));
    }
    ORTLITE_THROW(kInvalidArgument, "Got invalid dimensions for output: ", name,
                  " for the following indices", bad,
                  " Please fix either the inputs/outputs or the model.");
  }
  const Tensor host =
      cpu_provider().holds(result) ? result : provider_of(result)->to_host(result, nullptr);
  if (!cpu_provider().holds(target)) {
    provider_of(target)->write_from_host(target, host.raw_data(), target.nbytes());
  } else if (target.dtype() == DataType::kString) {
    const std::string* s = host.data<std::string>();
    std::string* d = target.data<std::string>();
    for (int64_t i = 0; i < target.numel(); ++i) d[i] = s[i];
  } else if (target.nbytes() && target.raw_data() != host.raw_data()) {
    std::memmove(target.raw_data(), host.raw_data(), target.nbytes());
  }
}

// --- type slots -----------------------------------------------------------------------------

PyObject* iob_alloc(PyTypeObject* tp, ModuleState* st) {
  PyObject* self = tp->tp_alloc(tp, 0);
  if (!self) return nullptr;
  IOBindingObject* b = as_iob(self);
  try {
    b->input_refs = PyDict_New();
    b->output_refs = PyDict_New();
    b->results = PyList_New(0);
    if (!b->input_refs || !b->output_refs || !b->results) throw PythonErrorSet{};
    b->state = new BindingState();
  } catch (...) {
    set_current_error(st);
    Py_DECREF(self);
    return nullptr;
  }
  return self;
}

PyObject* iob_new(PyTypeObject* tp, PyObject* args, PyObject* kwds) {
  ModuleState* st = state_from_type(tp);
  if (!st) return nullptr;
  static const char* kwlist[] = {"session", nullptr};
  PyObject* session = nullptr;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "O:SessionIOBinding", const_cast<char**>(kwlist),
                                   &session))
    return nullptr;
  if (!session_check(st, session)) {
    PyErr_Format(PyExc_TypeError, "SessionIOBinding expects an InferenceSession, not %.100s",
                 Py_TYPE(session)->tp_name);
    return nullptr;
  }
  try {
    session_shared(session);  // NoModel before a binding exists
  }
  ORTLITE_PY_CATCH(st, nullptr)
  PyObject* self = iob_alloc(tp, st);
  if (!self) return nullptr;
  as_iob(self)->session = Py_NewRef(session);
  return self;
}

int iob_traverse(PyObject* self, visitproc visit, void* arg) {
  IOBindingObject* b = as_iob(self);
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(b->session);
  Py_VISIT(b->input_refs);
  Py_VISIT(b->output_refs);
  Py_VISIT(b->results);
  return 0;
}

int iob_clear(PyObject* self) {
  IOBindingObject* b = as_iob(self);
  // Tensors first: they must never outlive the memory they borrow.
  if (b->state) {
    b->state->inputs.clear();
    b->state->outputs.clear();
  }
  Py_CLEAR(b->results);
  Py_CLEAR(b->input_refs);
  Py_CLEAR(b->output_refs);
  Py_CLEAR(b->session);
  return 0;
}

void iob_dealloc(PyObject* self) {
  PyTypeObject* tp = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  if (as_iob(self)->weakreflist) PyObject_ClearWeakRefs(self);
  iob_clear(self);
  delete std::exchange(as_iob(self)->state, nullptr);
  tp->tp_free(self);
  Py_DECREF(tp);
}

// After tp_clear (a reference cycle collected) the binding is empty and unusable.
bool usable(PyObject* self) {
  if (as_iob(self)->session && as_iob(self)->input_refs) return true;
  PyErr_SetString(PyExc_RuntimeError, "the SessionIOBinding was cleared");
  return false;
}

// --- methods --------------------------------------------------------------------------------

PyObject* iob_bind_cpu_input(PyObject* self, PyObject* args) {
  ModuleState* st = state_of(self);
  if (!st || !usable(self)) return nullptr;
  PyObject* name_obj = nullptr;
  PyObject* value = nullptr;
  if (!PyArg_ParseTuple(args, "OO:bind_cpu_input", &name_obj, &value)) return nullptr;
  try {
    std::string name;
    if (!str_to_utf8(name_obj, "name", &name)) throw PythonErrorSet{};
    const ValueInfo& vi = bound_input_decl(*session_of(self), name);
    if (ortvalue_check(st, value)) {
      PyErr_SetString(PyExc_TypeError,
                      "bind_cpu_input takes a numpy array; bind an OrtValue with "
                      "bind_ortvalue_input");
      throw PythonErrorSet{};
    }
    if (PyArray_Check(value) && vi.type.kind == TypeInfo::Kind::kTensor) {
      // Checked before a conversion copies anything (a broadcast view may expand).
      PyArrayObject* a = reinterpret_cast<PyArrayObject*>(value);
      const DataType dt = dtype_of_descr(PyArray_DESCR(a));
      if (dt != DataType::kUndefined) {
        int64_t dims[NPY_MAXDIMS];
        for (int d = 0; d < PyArray_NDIM(a); ++d) dims[d] = PyArray_DIMS(a)[d];
        check_tensor_feed(name, vi.type, dt, dims, static_cast<size_t>(PyArray_NDIM(a)));
      }
    }
    Ref keep;
    const DataType want =
        vi.type.kind == TypeInfo::Kind::kTensor ? vi.type.elem_type : DataType::kUndefined;
    Tensor t = object_to_tensor(value, want, name, &keep);
    Ref refs = Ref::steal(keep ? PyTuple_Pack(1, keep.get()) : PyTuple_New(0));
    if (!refs) throw PythonErrorSet{};
    set_input(self, name, std::move(t), std::move(refs));
    Py_RETURN_NONE;
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

PyObject* iob_bind_input(PyObject* self, PyObject* args, PyObject* kwds) {
  ModuleState* st = state_of(self);
  if (!st || !usable(self)) return nullptr;
  static const char* kwlist[] = {"name",  "device_type", "device_id", "element_type",
                                 "shape", "buffer_ptr",  nullptr};
  PyObject *name_obj, *device_type, *device_id, *element_type, *shape, *buffer_ptr;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOOO:bind_input", const_cast<char**>(kwlist),
                                   &name_obj, &device_type, &device_id, &element_type, &shape,
                                   &buffer_ptr))
    return nullptr;
  try {
    std::string name;
    if (!str_to_utf8(name_obj, "name", &name)) throw PythonErrorSet{};
    bound_input_decl(*session_of(self), name);
    const Device device = parse_device(device_type, device_id);
    Tensor t =
        pointer_tensor("bind_input('" + name + "')", device, element_type, shape, buffer_ptr);
    set_input(self, name, std::move(t), Ref());
    Py_RETURN_NONE;
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

PyObject* iob_bind_ortvalue_input(PyObject* self, PyObject* args) {
  ModuleState* st = state_of(self);
  if (!st || !usable(self)) return nullptr;
  PyObject* name_obj = nullptr;
  PyObject* value = nullptr;
  if (!PyArg_ParseTuple(args, "OO:bind_ortvalue_input", &name_obj, &value)) return nullptr;
  try {
    std::string name;
    if (!str_to_utf8(name_obj, "name", &name)) throw PythonErrorSet{};
    if (!ortvalue_check(st, value)) {
      PyErr_Format(PyExc_TypeError, "bind_ortvalue_input expects an OrtValue, not %.100s",
                   Py_TYPE(value)->tp_name);
      throw PythonErrorSet{};
    }
    bound_input_decl(*session_of(self), name);
    const Tensor& t = ortvalue_raw_tensor(value);
    if (!t.defined()) ORTLITE_THROW(kInvalidArgument, "the OrtValue holds no value");
    Ref refs = Ref::steal(PyTuple_Pack(1, value));
    if (!refs) throw PythonErrorSet{};
    set_input(self, name, t, std::move(refs));
    Py_RETURN_NONE;
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

PyObject* iob_bind_output(PyObject* self, PyObject* args, PyObject* kwds) {
  ModuleState* st = state_of(self);
  if (!st || !usable(self)) return nullptr;
  static const char* kwlist[] = {"name",  "device_type", "device_id", "element_type",
                                 "shape", "buffer_ptr",  nullptr};
  PyObject* name_obj = nullptr;
  PyObject* device_type = nullptr;
  PyObject* device_id = nullptr;
  PyObject* element_type = Py_None;
  PyObject* shape = Py_None;
  PyObject* buffer_ptr = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|OOOOO:bind_output", const_cast<char**>(kwlist),
                                   &name_obj, &device_type, &device_id, &element_type, &shape,
                                   &buffer_ptr))
    return nullptr;
  try {
    std::string name;
    if (!str_to_utf8(name_obj, "name", &name)) throw PythonErrorSet{};
    check_output_name(*session_of(self), name);
    Ref cpu = Ref::steal(PyUnicode_FromString("cpu"));
    Ref zero = Ref::steal(PyLong_FromLong(0));
    if (!cpu || !zero) throw PythonErrorSet{};
    OutputBinding o;
    o.name = name;
    o.device =
        parse_device(device_type ? device_type : cpu.get(), device_id ? device_id : zero.get());
    if (buffer_ptr != Py_None) {
      if (element_type == Py_None || shape == Py_None) {
        PyErr_SetString(PyExc_ValueError,
                        "`element_type` and `shape` are to be provided if pre-allocated memory "
                        "is provided");
        throw PythonErrorSet{};
      }
      o.kind = OutputBinding::Kind::kPointer;
      o.target =
          pointer_tensor("bind_output('" + name + "')", o.device, element_type, shape, buffer_ptr);
    }
    set_output(self, std::move(o), nullptr);
    Py_RETURN_NONE;
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

PyObject* iob_bind_ortvalue_output(PyObject* self, PyObject* args) {
  ModuleState* st = state_of(self);
  if (!st || !usable(self)) return nullptr;
  PyObject* name_obj = nullptr;
  PyObject* value = nullptr;
  if (!PyArg_ParseTuple(args, "OO:bind_ortvalue_output", &name_obj, &value)) return nullptr;
  try {
    std::string name;
    if (!str_to_utf8(name_obj, "name", &name)) throw PythonErrorSet{};
    if (!ortvalue_check(st, value)) {
      PyErr_Format(PyExc_TypeError, "bind_ortvalue_output expects an OrtValue, not %.100s",
                   Py_TYPE(value)->tp_name);
      throw PythonErrorSet{};
    }
    check_output_name(*session_of(self), name);
    const Tensor& t = ortvalue_raw_tensor(value);
    if (!t.defined()) ORTLITE_THROW(kInvalidArgument, "the OrtValue holds no value");
    OutputBinding o;
    o.name = name;
    o.kind = OutputBinding::Kind::kOrtValue;
    o.target = t;
    set_output(self, std::move(o), value);
    Py_RETURN_NONE;
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

PyObject* iob_noop(PyObject* self, PyObject*) {
  if (!usable(self)) return nullptr;
  // Copies to and from a device complete before ortlite returns: nothing is pending.
  Py_RETURN_NONE;
}

PyObject* iob_get_outputs(PyObject* self, PyObject*) {
  if (!usable(self)) return nullptr;
  return PySequence_List(as_iob(self)->results);
}

PyObject* iob_copy_outputs_to_cpu(PyObject* self, PyObject*) {
  ModuleState* st = state_of(self);
  if (!st || !usable(self)) return nullptr;
  try {
    PyObject* results = as_iob(self)->results;
    Ref list = Ref::steal(PyList_New(PyList_GET_SIZE(results)));
    if (!list) throw PythonErrorSet{};
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(results); ++i) {
      const Tensor& t = ortvalue_raw_tensor(PyList_GET_ITEM(results, i));
      const Tensor host = cpu_provider().holds(t) ? t : provider_of(t)->to_host(t, nullptr);
      PyList_SET_ITEM(list.get(), i, tensor_to_numpy_copy(host).release());
    }
    return list.release();
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

PyObject* iob_clear_binding_inputs(PyObject* self, PyObject*) {
  if (!usable(self)) return nullptr;
  as_iob(self)->state->inputs.clear();
  PyDict_Clear(as_iob(self)->input_refs);
  Py_RETURN_NONE;
}

PyObject* iob_clear_binding_outputs(PyObject* self, PyObject*) {
  if (!usable(self)) return nullptr;
  as_iob(self)->state->outputs.clear();
  PyDict_Clear(as_iob(self)->output_refs);
  Ref empty = Ref::steal(PyList_New(0));
  if (!empty) return nullptr;
  Py_SETREF(as_iob(self)->results, empty.release());
  Py_RETURN_NONE;
}

PyMethodDef iob_methods[] = {
    {"bind_cpu_input", as_cfunc(iob_bind_cpu_input), METH_VARARGS,
     PyDoc_STR("bind_cpu_input($self, name, arr_on_cpu, /)\n--\n\n"
               "Binds input `name` to a numpy array (or anything numpy.asarray accepts). A\n"
               "C-contiguous, aligned, native-order array is used in place (later changes to it\n"
               "are seen by the next run) and kept alive by the binding until the input is\n"
               "rebound or cleared; other objects are copied once, here.")},
    {"bind_input", as_cfunc(iob_bind_input), METH_VARARGS | METH_KEYWORDS,
     PyDoc_STR("bind_input($self, name, device_type, device_id, element_type, shape, "
               "buffer_ptr)\n--\n\n"
               "Binds input `name` to memory at address `buffer_ptr` (an int) holding a tensor\n"
               "of `element_type` (numpy type or ONNX element type number) and `shape`. The\n"
               "caller keeps that memory alive while it is bound. 'cpu' only; string tensors\n"
               "cannot be bound by address (InvalidArgument).")},
    {"bind_ortvalue_input", as_cfunc(iob_bind_ortvalue_input), METH_VARARGS,
     PyDoc_STR("bind_ortvalue_input($self, name, ortvalue, /)\n--\n\n"
               "Binds input `name` to an OrtValue (on the CPU or a CUDA device), kept alive by\n"
               "the binding.")},
    {"bind_output", as_cfunc(iob_bind_output), METH_VARARGS | METH_KEYWORDS,
     PyDoc_STR("bind_output($self, name, device_type='cpu', device_id=0, element_type=None, "
               "shape=None, buffer_ptr=None)\n--\n\n"
               "Binds output `name`. Without buffer_ptr, each run makes a new OrtValue on the\n"
               "device. With buffer_ptr (CPU memory the caller keeps alive; element_type and\n"
               "shape then required), the result is copied there and must match them.")},
    {"bind_ortvalue_output", as_cfunc(iob_bind_ortvalue_output), METH_VARARGS,
     PyDoc_STR("bind_ortvalue_output($self, name, ortvalue, /)\n--\n\n"
               "Binds output `name` to an OrtValue the result is copied into (its element type\n"
               "and shape must match); get_outputs() then returns that same OrtValue.")},
    {"synchronize_inputs", as_cfunc(iob_noop), METH_NOARGS,
     PyDoc_STR("synchronize_inputs($self, /)\n--\n\nNothing to wait for: copies are synchronous.")},
    {"synchronize_outputs", as_cfunc(iob_noop), METH_NOARGS,
     PyDoc_STR("synchronize_outputs($self, /)\n--\n\nNothing to wait for: copies are "
               "synchronous.")},
    {"get_outputs", as_cfunc(iob_get_outputs), METH_NOARGS,
     PyDoc_STR("get_outputs($self, /)\n--\n\n"
               "The outputs of the last run_with_iobinding, as a list of OrtValues in binding\n"
               "order ([] before a run or after clear_binding_outputs).")},
    {"copy_outputs_to_cpu", as_cfunc(iob_copy_outputs_to_cpu), METH_NOARGS,
     PyDoc_STR("copy_outputs_to_cpu($self, /)\n--\n\n"
               "Copies of the last run's outputs as numpy arrays (arrays that own their data).")},
    {"clear_binding_inputs", as_cfunc(iob_clear_binding_inputs), METH_NOARGS,
     PyDoc_STR("clear_binding_inputs($self, /)\n--\n\nUnbinds every input (and lets go of the "
               "arrays and OrtValues they held).")},
    {"clear_binding_outputs", as_cfunc(iob_clear_binding_outputs), METH_NOARGS,
     PyDoc_STR("clear_binding_outputs($self, /)\n--\n\nUnbinds every output and drops the last "
               "run's outputs.")},
    {nullptr, nullptr, 0, nullptr},
};

PyMemberDef iob_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(IOBindingObject, weakreflist), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr},
};

PyType_Slot iob_slots[] = {
    {Py_tp_new, as_slot(iob_new)},
    {Py_tp_dealloc, as_slot(iob_dealloc)},
    {Py_tp_traverse, as_slot(iob_traverse)},
    {Py_tp_clear, as_slot(iob_clear)},
    {Py_tp_methods, iob_methods},
    {Py_tp_members, iob_members},
    {Py_tp_doc,
     const_cast<char*>("SessionIOBinding(session)\n--\n\n"
                       "Inputs and outputs bound ahead of InferenceSession.run_with_iobinding\n"
                       "(InferenceSession.io_binding() makes one). Also available as IOBinding.")},
    {0, nullptr},
};

PyType_Spec iob_spec = {
    "ortlite.SessionIOBinding",
    sizeof(IOBindingObject),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE,
    iob_slots,
};

}  // namespace

PyObject* io_binding_new(ModuleState* st, PyObject* session) {
  Ref args = Ref::steal(PyTuple_Pack(1, session));
  if (!args) throw PythonErrorSet{};
  PyObject* b = iob_new(st->io_binding_type, args.get(), nullptr);
  if (!b) throw PythonErrorSet{};
  return b;
}

void io_binding_run(ModuleState* st, PyObject* session, PyObject* binding, PyObject* run_options) {
  if (!io_binding_check(st, binding)) {
    PyErr_Format(PyExc_TypeError, "run_with_iobinding expects a SessionIOBinding, not %.100s",
                 Py_TYPE(binding)->tp_name);
    throw PythonErrorSet{};
  }
  if (!usable(binding)) throw PythonErrorSet{};
  IOBindingObject* b = as_iob(binding);
  if (b->session != session)
    ORTLITE_THROW(kInvalidArgument, "the SessionIOBinding was made for another InferenceSession");
  std::shared_ptr<RunConfig> run_config;
  if (run_options && run_options != Py_None) {
    if (!run_options_check(st, run_options)) {
      PyErr_Format(PyExc_TypeError, "run_options must be a RunOptions or None, not %.100s",
                   Py_TYPE(run_options)->tp_name);
      throw PythonErrorSet{};
    }
    run_config = run_options_config(run_options);
  }
  std::shared_ptr<const Session> sess = session_shared(session);
  const std::vector<OutputBinding> outputs = b->state->outputs;  // a snapshot
  if (outputs.empty()) ORTLITE_THROW(kInvalidArgument, "At least one output should be requested.");
  Feeds feeds;
  for (const auto& in : b->state->inputs) feeds.emplace_back(in.first, in.second);
  std::vector<std::string> names;
  bool device_outputs = false;
  for (const OutputBinding& o : outputs) {
    names.push_back(o.name);
    device_outputs = device_outputs || (o.kind == OutputBinding::Kind::kAllocate &&
                                        o.device.type != DeviceType::kCPU);
  }
  // What the feeds and targets borrow stays alive through the run even if another thread
  // rebinds or clears while the GIL is released.
  Ref held_in = Ref::steal(PyDict_Copy(b->input_refs));
  Ref held_out = Ref::steal(PyDict_Copy(b->output_refs));
  Ref hold_run_options = Ref::borrow(run_options);
  if (!held_in || !held_out) throw PythonErrorSet{};
  std::vector<Value> outs;
  without_gil([&] { outs = sess->run(std::move(feeds), names, run_config.get(), device_outputs); });
  std::vector<Tensor> tensors;
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!outs[i].is_tensor())
      ORTLITE_THROW(kNotImplemented, "output '", names[i], "' is a ", outs[i].type_string(),
                    "; IOBinding returns tensors only (use run())");
    tensors.push_back(std::move(outs[i].tensor()));
  }
  outs.clear();
  const std::vector<bool> exclusive = exclusive_outputs(tensors);
  Ref results = Ref::steal(PyList_New(static_cast<Py_ssize_t>(tensors.size())));
  if (!results) throw PythonErrorSet{};
  for (size_t i = 0; i < tensors.size(); ++i) {
    const OutputBinding& o = outputs[i];
    Ref ov;
    if (o.kind == OutputBinding::Kind::kAllocate) {
      Tensor t = tensors[i];
      const bool on_host = cpu_provider().holds(t);
      if (o.device.type == DeviceType::kCPU) {
        if (!on_host) {
          t = provider_of(t)->to_host(t, nullptr);
        } else if (!exclusive[i]) {
          t = cpu_provider().copy(t);  // a feed or a weight: never handed out in place
        }
      } else {
        const auto dev = provider_for_device("cuda", o.device.id);
        if (on_host) {
          t = dev->to_device(t, nullptr);
        } else if (!(t.buffer()->device() == o.device)) {
          t = dev->to_device(provider_of(t)->to_host(t, nullptr), nullptr);
        } else if (!exclusive[i]) {
          t = dev->copy(t);
        }
      }
      ov = ortvalue_new(st, std::move(t), nullptr);
    } else {
      copy_into(o.name, tensors[i], o.target);
      if (o.kind == OutputBinding::Kind::kOrtValue) {
        Ref key = Ref::steal(str_from_utf8(o.name));
        if (!key) throw PythonErrorSet{};
        ov = Ref::borrow(PyDict_GetItemWithError(held_out.get(), key.get()));
        if (!ov) {
          if (PyErr_Occurred()) throw PythonErrorSet{};
          ORTLITE_THROW(kFail, "the OrtValue bound to output '", o.name, "' is missing");
        }
      } else {
        // An OrtValue over the caller's memory: numpy() on it copies.
        ov = ortvalue_new(st, o.target, nullptr);
      }
    }
    PyList_SET_ITEM(results.get(), static_cast<Py_ssize_t>(i), ov.release());
  }
  Py_SETREF(b->results, results.release());
}

int io_binding_setup_types(PyObject* module) {
  ModuleState* st = get_module_state(module);
  st->io_binding_type =
      reinterpret_cast<PyTypeObject*>(PyType_FromModuleAndSpec(module, &iob_spec, nullptr));
  if (!st->io_binding_type) return -1;
  if (PyModule_AddType(module, st->io_binding_type) < 0) return -1;
  // onnxruntime's Python name for the same object.
  return PyModule_AddObjectRef(module, "IOBinding",
                               reinterpret_cast<PyObject*>(st->io_binding_type));
}

}  // namespace ortlite::py
