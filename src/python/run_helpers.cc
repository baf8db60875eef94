#include "python/run_helpers.h"

#include <exception>

#include "ortlite/provider.h"
#include "ortlite/status.h"
#include "python/errors.h"
#include "python/gil.h"
#include "python/numpy_bridge.h"
#include "python/ortvalue.h"
#include "python/run_options.h"
#include "python/sparse_tensor.h"

namespace ortlite::py {

namespace {

DataType tensor_elem_type(const TypeInfo* type) {
  return type && type->kind == TypeInfo::Kind::kTensor ? type->elem_type : DataType::kUndefined;
}

// An array fed to a tensor input, checked (element type, rank, static dims) before any
// conversion copies it: a broadcast view of a few bytes may expand to terabytes.
void check_array_feed(PyArrayObject* a, const TypeInfo& type, const std::string& name) {
  const DataType dt = dtype_of_descr(PyArray_DESCR(a));
  if (dt == DataType::kUndefined) return;  // array_to_tensor names the dtype, copying nothing
  const int nd = PyArray_NDIM(a);
  int64_t dims[NPY_MAXDIMS];
  for (int d = 0; d < nd; ++d) dims[d] = static_cast<int64_t>(PyArray_DIMS(a)[d]);
  check_tensor_feed(name, type, dt, dims, static_cast<size_t>(nd));
}

// A sequence element's element type, checked before it is copied (Session::check_run
// checks it again, with the same message).
void check_array_item(PyArrayObject* a, const TypeInfo& seq, const std::string& name) {
  const TypeInfo* elem = seq.elem.get();
  if (!elem || elem->kind != TypeInfo::Kind::kTensor || elem->elem_type == DataType::kUndefined)
    return;
  const DataType dt = dtype_of_descr(PyArray_DESCR(a));
  if (dt != DataType::kUndefined && dt != elem->elem_type) {
    ORTLITE_THROW(kInvalidArgument, "input '", name, "' is a ", seq.to_string(),
                  " but an element has type tensor(", dtype_name(dt), ")");
  }
}

// A Python exception raised while converting an entry of a dict feed becomes the typed
// error, naming the input and what was wrong (the Python message is kept).
[[noreturn]] void map_entry_error(const std::string& name, const char* what, PyObject* obj,
                                  const char* ctype) {
  std::string detail;
  if (PyErr_Occurred()) {
    // Only a conversion's own failures become the typed error; MemoryError,
    // KeyboardInterrupt and the like propagate as they are.
    if (!PyErr_ExceptionMatches(PyExc_TypeError) && !PyErr_ExceptionMatches(PyExc_ValueError) &&
        !PyErr_ExceptionMatches(PyExc_OverflowError))
      throw PythonErrorSet{};
    PyObject *type = nullptr, *val = nullptr, *tb = nullptr;
    PyErr_Fetch(&type, &val, &tb);
    Ref t = Ref::steal(type), v = Ref::steal(val), b = Ref::steal(tb);
    if (v) {
      Ref str = Ref::steal(PyObject_Str(v.get()));
      std::string msg;
      if (str && str_to_utf8(str.get(), "message", &msg)) detail = " (" + msg + ")";
      PyErr_Clear();
    }
  }
  ORTLITE_THROW(kInvalidArgument, "input '", name, "': Unexpected ", what, " type  <class '",
                Py_TYPE(obj)->tp_name, "'>, it cannot be linked to C type ", ctype, detail);
}

// Element type of a dict entry whose declared type is unknown: int -> int64,
// float -> float (values only), anything else -> string.
DataType guess_map_type(PyObject* o, bool key) {
  if (PyLong_Check(o) || PyIndex_Check(o)) return DataType::kInt64;
  if (!key && (PyFloat_Check(o) || PyNumber_Check(o))) return DataType::kFloat;
  return DataType::kString;
}

// Writes one key or value of a dict feed into element i of `t` (int64, float, double or
// string).
void set_map_element(Tensor& t, int64_t i, PyObject* o, const std::string& name, const char* what) {
  switch (t.dtype()) {
    case DataType::kInt64: {
      if (PyUnicode_Check(o) || PyBytes_Check(o) || PyFloat_Check(o))
        map_entry_error(name, what, o, "int64_t");
      Ref idx = Ref::steal(PyNumber_Index(o));
      if (!idx) map_entry_error(name, what, o, "int64_t");
      const long long v = PyLong_AsLongLong(idx.get());
      if (v == -1 && PyErr_Occurred()) map_entry_error(name, what, o, "int64_t");
      t.data<int64_t>()[i] = static_cast<int64_t>(v);
      return;
    }
    case DataType::kFloat:
    case DataType::kDouble: {
      const char* ctype = t.dtype() == DataType::kFloat ? "float" : "double";
      if (PyUnicode_Check(o) || PyBytes_Check(o)) map_entry_error(name, what, o, ctype);
      const double v = PyFloat_AsDouble(o);
      if (v == -1.0 && PyErr_Occurred()) map_entry_error(name, what, o, ctype);
      if (t.dtype() == DataType::kFloat)
        t.data<float>()[i] = static_cast<float>(v);
      else
        t.data<double>()[i] = v;
      return;
    }
    case DataType::kString: {
      std::string* dst = t.data<std::string>() + i;
      if (PyBytes_Check(o)) {
        dst->assign(PyBytes_AS_STRING(o), static_cast<size_t>(PyBytes_GET_SIZE(o)));
        return;
      }
      if (!PyUnicode_Check(o)) map_entry_error(name, what, o, "std::string");
      Py_ssize_t n = 0;
      const char* u = PyUnicode_AsUTF8AndSize(o, &n);
      if (!u) map_entry_error(name, what, o, "std::string");
      dst->assign(u, static_cast<size_t>(n));
      return;
    }
    default:
      ORTLITE_THROW(kNotImplemented, "input '", name, "': map ", what, "s of type ",
                    dtype_name(t.dtype()), " cannot be fed");
  }
}

// A dict fed to a map(K, V) input: the keys and the values as two [C] tensors, in the
// dict's order. The items are snapshot first: converting one may run Python code
// (__index__, __float__) that mutates the dict.
Value dict_to_map(PyObject* dict, const TypeInfo& type, const std::string& name) {
  Ref items = Ref::steal(PyDict_Items(dict));
  if (!items) throw PythonErrorSet{};
  const Py_ssize_t n = PyList_GET_SIZE(items.get());
  DataType kt = type.elem_type;
  DataType vt = type.elem && type.elem->kind == TypeInfo::Kind::kTensor ? type.elem->elem_type
                                                                        : DataType::kUndefined;
  if (n > 0) {
    PyObject* first = PyList_GET_ITEM(items.get(), 0);
    if (kt == DataType::kUndefined) kt = guess_map_type(PyTuple_GET_ITEM(first, 0), true);
    if (vt == DataType::kUndefined) vt = guess_map_type(PyTuple_GET_ITEM(first, 1), false);
  }
  if (kt == DataType::kUndefined) kt = DataType::kInt64;
  if (vt == DataType::kUndefined) vt = DataType::kFloat;
  if (kt != DataType::kInt64 && kt != DataType::kString) {
    ORTLITE_THROW(kNotImplemented, "input '", name, "' is a ", type.to_string(),
                  ": only int64 and string map keys can be fed");
  }
  Tensor keys = Tensor::empty(kt, {static_cast<int64_t>(n)});
  Tensor values = Tensor::empty(vt, {static_cast<int64_t>(n)});
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = PyList_GET_ITEM(items.get(), i);
    set_map_element(keys, i, PyTuple_GET_ITEM(item, 0), name, "key");
    set_map_element(values, i, PyTuple_GET_ITEM(item, 1), name, "value");
  }
  return Value::map(std::move(keys), std::move(values));
}

// Converts one feed. `held` receives what must outlive the run.
Value object_to_value(PyObject* value, const TypeInfo* type, const std::string& name,
                      std::vector<Ref>* held) {
  using K = TypeInfo::Kind;
  while (type && type->kind == K::kOptional) {  // optional(optional(...)) unwrapped in a loop
    if (value == Py_None) return Value::none();
    type = type->elem.get();
  }
  if (type && type->kind == K::kSequence) {
    if (type->elem && type->elem->kind == K::kMap) {
      ORTLITE_THROW(kNotImplemented, "input '", name, "' is a ", type->to_string(),
                    ": feeding maps is not supported");
    }
    if (!PyList_Check(value) && !PyTuple_Check(value)) {
      ORTLITE_THROW(kInvalidArgument, "input '", name, "' is a ", type->to_string(),
                    ": feed a list of arrays, not ", Py_TYPE(value)->tp_name);
    }
    Ref seq = Ref::steal(PySequence_Fast(value, "a sequence input must be a list"));
    if (!seq) throw PythonErrorSet{};
    const DataType elem = type->elem ? tensor_elem_type(type->elem.get()) : DataType::kUndefined;
    std::vector<Tensor> items;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq.get());
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyObject* item = PySequence_Fast_GET_ITEM(seq.get(), i);
      if (PyArray_Check(item))
        check_array_item(reinterpret_cast<PyArrayObject*>(item), *type, name);
      Ref keep;
      items.push_back(object_to_tensor(item, elem, name + "[" + std::to_string(i) + "]", &keep));
      if (keep) held->push_back(std::move(keep));
    }
    DataType seq_elem = elem;
    if (seq_elem == DataType::kUndefined && !items.empty()) seq_elem = items[0].dtype();
    held->push_back(std::move(seq));
    return Value::sequence(std::move(items), seq_elem);
  }
  if (type && type->kind == K::kMap) {
    if (!PyDict_Check(value)) {
      ORTLITE_THROW(kInvalidArgument, "input '", name, "' is a ", type->to_string(),
                    ": feed a dict, not ", Py_TYPE(value)->tp_name);
    }
    return dict_to_map(value, *type, name);
  }
  if (PyDict_Check(value)) {
    ORTLITE_THROW(kInvalidArgument, "Unexpected input data type for input '", name,
                  "'. Actual: (dict) , expected: (", type ? type->to_string() : "tensor",
                  "): a tensor input takes an array, a list or a scalar");
  }
  if (type && type->kind == K::kTensor && PyArray_Check(value))
    check_array_feed(reinterpret_cast<PyArrayObject*>(value), *type, name);
  Ref keep;
  Tensor t = object_to_tensor(value, tensor_elem_type(type), name, &keep);
  if (keep) held->push_back(std::move(keep));
  return t;
}

// The N dicts of a kMaps value, {key: float} like onnxruntime's ZipMap output. The key
// objects are made once and shared by every dict.
Ref maps_to_list(const Value& v) {
  const Tensor& keys = v.map_keys();
  const Tensor& values = v.map_values();
  if (values.dtype() != DataType::kFloat || values.rank() != 2 || keys.rank() != 1 ||
      values.dim(1) != keys.dim(0) ||
      (keys.dtype() != DataType::kInt64 && keys.dtype() != DataType::kString)) {
    ORTLITE_THROW(kFail, "malformed ", v.type_string(), " output: keys ",
                  shape_to_string(keys.shape()), ", values ", shape_to_string(values.shape()));
  }
  const int64_t n = values.dim(0), c = keys.dim(0);
  std::vector<Ref> key_objs;
  key_objs.reserve(static_cast<size_t>(c));
  for (int64_t j = 0; j < c; ++j) {
    Ref k =
        Ref::steal(keys.dtype() == DataType::kInt64 ? PyLong_FromLongLong(keys.data<int64_t>()[j])
                                                    : str_from_utf8(keys.data<std::string>()[j]));
    if (!k) throw PythonErrorSet{};
    key_objs.push_back(std::move(k));
  }
  const float* src = values.data<float>();
  Ref list = Ref::steal(PyList_New(static_cast<Py_ssize_t>(n)));
  if (!list) throw PythonErrorSet{};
  for (int64_t i = 0; i < n; ++i) {
    Ref dict = Ref::steal(PyDict_New());
    if (!dict) throw PythonErrorSet{};
    for (int64_t j = 0; j < c; ++j) {
      Ref f = Ref::steal(PyFloat_FromDouble(static_cast<double>(src[i * c + j])));
      if (!f || PyDict_SetItem(dict.get(), key_objs[static_cast<size_t>(j)].get(), f.get()) < 0)
        throw PythonErrorSet{};
    }
    PyList_SET_ITEM(list.get(), static_cast<Py_ssize_t>(i), dict.release());
  }
  return list;
}

// One element of a kMap key or value tensor as a Python object.
Ref map_element(const Tensor& t, int64_t i) {
  PyObject* o = nullptr;
  switch (t.dtype()) {
    case DataType::kInt64:
      o = PyLong_FromLongLong(t.data<int64_t>()[i]);
      break;
    case DataType::kFloat:
      o = PyFloat_FromDouble(static_cast<double>(t.data<float>()[i]));
      break;
    case DataType::kDouble:
      o = PyFloat_FromDouble(t.data<double>()[i]);
      break;
    case DataType::kString:
      o = str_from_utf8(t.data<std::string>()[i]);
      break;
    default:
      ORTLITE_THROW(kNotImplemented, "a map of ", dtype_name(t.dtype()),
                    " cannot be returned to Python");
  }
  if (!o) throw PythonErrorSet{};
  return Ref::steal(o);
}

// A kMap value as a dict.
Ref map_to_dict(const Value& v) {
  const Tensor& keys = v.map_keys();
  const Tensor& values = v.map_values();
  if (keys.rank() != 1 || values.rank() != 1 || keys.dim(0) != values.dim(0)) {
    ORTLITE_THROW(kFail, "malformed ", v.type_string(), " output: keys ",
                  shape_to_string(keys.shape()), ", values ", shape_to_string(values.shape()));
  }
  Ref dict = Ref::steal(PyDict_New());
  if (!dict) throw PythonErrorSet{};
  for (int64_t j = 0; j < keys.dim(0); ++j) {
    Ref k = map_element(keys, j), val = map_element(values, j);
    if (PyDict_SetItem(dict.get(), k.get(), val.get()) < 0) throw PythonErrorSet{};
  }
  return dict;
}

void parse_output_names(PyObject* output_names, std::vector<std::string>* out) {
  out->clear();
  if (output_names != Py_None) {
    if (PyUnicode_Check(output_names) || PyBytes_Check(output_names) ||
        !PySequence_Check(output_names)) {
      PyErr_Format(PyExc_TypeError, "output_names must be a list of str or None, not %.100s",
                   Py_TYPE(output_names)->tp_name);
      throw PythonErrorSet{};
    }
    Ref seq = Ref::steal(PySequence_Fast(output_names, "output_names must be a list of str"));
    if (!seq) throw PythonErrorSet{};
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq.get());
    for (Py_ssize_t i = 0; i < n; ++i) {
      std::string name;
      if (!str_to_utf8(PySequence_Fast_GET_ITEM(seq.get(), i), "each output name", &name))
        throw PythonErrorSet{};
      out->push_back(std::move(name));
    }
  }
}

// The feeds of a run with active LoRA adapters (ortlite.RunOptions.add_active_adapter,
// ortlite/_adapter.py): a new dict of input_feed plus every adapter parameter, by name, so
// that they override the initializers of those names for this run. Empty when there are
// no active adapters. A name both fed and set by an adapter is InvalidArgument.
Ref with_adapter_feeds(PyObject* input_feed, PyObject* run_options) {
  if (!run_options || run_options == Py_None) return Ref();
  Ref adapters = Ref::steal(PyObject_GetAttrString(run_options, "_active_adapters"));
  if (!adapters) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) throw PythonErrorSet{};
    PyErr_Clear();
    return Ref();
  }
  Ref seq = Ref::steal(PySequence_Fast(adapters.get(), "_active_adapters must be a list"));
  if (!seq) throw PythonErrorSet{};
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq.get());
  if (n == 0) return Ref();
  Ref merged = Ref::steal(PyDict_Copy(input_feed));
  if (!merged) throw PythonErrorSet{};
  for (Py_ssize_t i = 0; i < n; ++i) {
    Ref params =
        Ref::steal(PyObject_GetAttrString(PySequence_Fast_GET_ITEM(seq.get(), i), "_parameters"));
    if (!params) throw PythonErrorSet{};
    if (!PyDict_Check(params.get())) {
      PyErr_SetString(PyExc_TypeError, "an active adapter's _parameters must be a dict");
      throw PythonErrorSet{};
    }
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(params.get(), &pos, &key, &value)) {
      const int has = PyDict_Contains(merged.get(), key);
      if (has < 0) throw PythonErrorSet{};
      if (has) {
        std::string name;
        if (!str_to_utf8(key, "an adapter parameter name", &name)) throw PythonErrorSet{};
        ORTLITE_THROW(kInvalidArgument, "input '", name,
                      "' is both fed and set by an active LoRA adapter");
      }
      if (PyDict_SetItem(merged.get(), key, value) < 0) throw PythonErrorSet{};
    }
  }
  return merged;
}

}  // namespace

void prepare_run(ModuleState* st, const Session& sess, PyObject* output_names, PyObject* input_feed,
                 PyObject* run_options, bool ortvalues_only, bool check_now, RunInputs* in) {
  if (!PyDict_Check(input_feed)) {
    PyErr_Format(PyExc_TypeError, "input_feed must be a dict of input name to value, not %.100s",
                 Py_TYPE(input_feed)->tp_name);
    throw PythonErrorSet{};
  }
  Ref adapter_feed = with_adapter_feeds(input_feed, run_options);
  if (adapter_feed) input_feed = adapter_feed.get();
  // A snapshot with strong references: converting values may run Python code that
  // changes the dict. (Cheaper than PyDict_Items, which builds a tuple per entry.) Up to
  // kInline feeds live on the stack.
  struct Item {
    Ref key, value;
    std::string name;
    const ValueInfo* declared = nullptr;  // null for an unknown name
  };
  constexpr size_t kInline = 8;
  Item inline_items[kInline];
  std::vector<Item> many;
  const size_t n = static_cast<size_t>(PyDict_GET_SIZE(input_feed));
  if (n > kInline) many.resize(n);
  Item* items = n > kInline ? many.data() : inline_items;
  {
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    size_t i = 0;
    while (i < n && PyDict_Next(input_feed, &pos, &key, &value)) {
      items[i].key = Ref::borrow(key);
      items[i].value = Ref::borrow(value);
      ++i;
    }
  }
  // Each feed's declaration, for the conversion (an unknown name converts as given; the
  // core refuses it).
  for (size_t i = 0; i < n; ++i) {
    if (!str_to_utf8(items[i].key.get(), "each input name", &items[i].name)) throw PythonErrorSet{};
    items[i].declared = sess.find_feedable(items[i].name, nullptr, i);
  }

  parse_output_names(output_names, &in->output_names);

  in->run_config.reset();
  if (run_options && run_options != Py_None) {
    if (!run_options_check(st, run_options)) {
      PyErr_Format(PyExc_TypeError, "run_options must be a RunOptions or None, not %.100s",
                   Py_TYPE(run_options)->tp_name);
      throw PythonErrorSet{};
    }
    in->run_config = run_options_config(run_options);
  }

  in->feeds.clear();
  in->feeds.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    PyObject* value = items[i].value.get();
    const std::string& name = items[i].name;
    if (!items[i].declared) {
      // Not converted: the core refuses the name (Session::check_run).
      in->feeds.emplace_back(name, Value());
      continue;
    }
    if (ortvalue_check(st, value)) {
      in->held.push_back(Ref::borrow(value));
      if (PyObject* sparse = ortvalue_sparse(value)) {
        // The run path takes dense tensors: a sparse feed of an input declared sparse runs
        // in its dense form. Elsewhere ortvalue_raw_tensor below refuses it.
        if (items[i].declared->type.kind == TypeInfo::Kind::kSparseTensor) {
          in->feeds.emplace_back(name, sparse_tensor_densify(sparse, name));
          continue;
        }
      }
      // Device tensors go to the core as they are: the plan copies what a node needs.
      in->feeds.emplace_back(name, ortvalue_raw_tensor(value));
      continue;
    }
    if (ortvalues_only) {
      PyErr_Format(PyExc_TypeError, "input '%s' must be an OrtValue, not %.100s", name.c_str(),
                   Py_TYPE(value)->tp_name);
      throw PythonErrorSet{};
    }
    const TypeInfo* type = items[i].declared ? &items[i].declared->type : nullptr;
    in->feeds.emplace_back(name, object_to_value(value, type, name, &in->held));
  }

  // An async run is checked when it is called (errors raise there, not in the callback).
  if (check_now) sess.check_run(in->feeds, in->output_names);
}

std::vector<Value> run_without_gil(const Session& sess, RunInputs& in, bool device_outputs) {
  std::vector<Value> outs;
  without_gil([&] {
    outs = sess.run(std::move(in.feeds), in.output_names, in.run_config.get(), device_outputs);
  });
  return outs;
}

Ref outputs_to_numpy(ModuleState* st, std::vector<Value> outs,
                     const std::function<std::string(size_t)>& label) {
  // Converts output i's tensor t; an error names the output.
  auto array_of = [&](size_t i, const Tensor& t, bool view) -> Ref {
    try {
      return view ? tensor_to_numpy_owned(st, t) : tensor_to_numpy_copy(t);
    } catch (const Error& e) {
      throw Error(e.code(), (label ? label(i) : "output #" + std::to_string(i)) + ": " + e.what());
    }
  };
  // The common case, every output a tensor and not too many: judged and converted in place,
  // without the bookkeeping vectors below.
  constexpr size_t kInline = 16;
  bool all_tensors = outs.size() <= kInline;
  for (const Value& v : outs) all_tensors = all_tensors && v.is_tensor();
  if (all_tensors) {
    const size_t n = outs.size();
    const Tensor* ptrs[kInline];
    bool view[kInline];
    for (size_t i = 0; i < n; ++i) ptrs[i] = &outs[i].tensor();
    for (size_t i = 0; i < n; ++i) view[i] = exclusive_output(ptrs, n, i);
    Ref list = Ref::steal(PyList_New(static_cast<Py_ssize_t>(n)));
    if (!list) throw PythonErrorSet{};
    for (size_t i = 0; i < n; ++i) {
      Ref item = array_of(i, outs[i].tensor(), view[i]);
      PyList_SET_ITEM(list.get(), static_cast<Py_ssize_t>(i), item.release());
    }
    return list;
  }
  // Exclusivity is judged on buffer refcounts, so `outs` must not keep references: tensors
  // are moved out, and each sequence's list is dropped below once its items are in `flat`.
  std::vector<Tensor> flat;
  for (Value& v : outs) {
    if (v.is_tensor()) flat.push_back(std::move(v.tensor()));
    for (const Tensor& t : v.items()) flat.push_back(t);
  }
  std::vector<Value::Kind> kinds;
  std::vector<size_t> seq_sizes;
  std::vector<Value> maps;  // always converted to Python objects, so kept as they are
  for (Value& v : outs) {
    kinds.push_back(v.kind());
    seq_sizes.push_back(v.items().size());
    if (v.is_maps() || v.is_map()) maps.push_back(std::move(v));
    v = Value();  // drops this list's references to sequence items
  }
  const std::vector<bool> view = exclusive_outputs(flat);
  size_t k = 0;
  auto next_array = [&](size_t output) -> Ref {
    const size_t i = k++;
    return array_of(output, flat[i], view[i]);
  };
  size_t next_maps = 0;
  Ref list = Ref::steal(PyList_New(static_cast<Py_ssize_t>(outs.size())));
  if (!list) throw PythonErrorSet{};
  for (size_t i = 0; i < outs.size(); ++i) {
    Ref item;
    if (kinds[i] == Value::Kind::kTensor) {
      item = next_array(i);
    } else if (kinds[i] == Value::Kind::kNone) {
      item = Ref::borrow(Py_None);
    } else if (kinds[i] == Value::Kind::kMaps) {
      item = maps_to_list(maps[next_maps++]);
    } else if (kinds[i] == Value::Kind::kMap) {
      item = map_to_dict(maps[next_maps++]);
    } else {
      const size_t n = seq_sizes[i];
      item = Ref::steal(PyList_New(static_cast<Py_ssize_t>(n)));
      if (!item) throw PythonErrorSet{};
      for (size_t j = 0; j < n; ++j)
        PyList_SET_ITEM(item.get(), static_cast<Py_ssize_t>(j), next_array(i).release());
    }
    PyList_SET_ITEM(list.get(), static_cast<Py_ssize_t>(i), item.release());
  }
  return list;
}

Ref outputs_to_ortvalues(ModuleState* st, std::vector<Value> outs,
                         const std::vector<std::string>& sparse_names) {
  std::vector<Tensor> tensors;
  for (const Value& v : outs) {
    if (!v.is_tensor()) {
      ORTLITE_THROW(kNotImplemented, "an output is a ", v.type_string(),
                    "; run_with_ort_values returns tensors only (use run())");
    }
    tensors.push_back(v.tensor());
  }
  const std::vector<bool> keep = exclusive_outputs(tensors);
  Ref list = Ref::steal(PyList_New(static_cast<Py_ssize_t>(tensors.size())));
  if (!list) throw PythonErrorSet{};
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (i < sparse_names.size() && !sparse_names[i].empty()) {
      Ref ov = sparse_coo_ortvalue_from_dense(st, tensors[i], sparse_names[i]);
      PyList_SET_ITEM(list.get(), static_cast<Py_ssize_t>(i), ov.release());
      continue;
    }
    Tensor t = keep[i] ? tensors[i] : provider_of(tensors[i])->copy(tensors[i]);
    Ref ov = ortvalue_new(st, std::move(t), nullptr);
    PyList_SET_ITEM(list.get(), static_cast<Py_ssize_t>(i), ov.release());
  }
  return list;
}

}  // namespace ortlite::py
