// Tensors <-> numpy arrays, under the ownership rules of DESIGN.md "Buffers and ownership":
//  - a feed becomes a kBorrowed tensor over the array's memory (or over a C-contiguous,
//    aligned, native-order copy); the caller keeps the returned `keepalive` reference for
//    as long as the tensor is used. Buffers never hold Python references.
//  - an output is a zero-copy view only over memory ortlite owns (a kOwned CPU buffer,
//    kept alive by a BufferOwner base object); anything else is copied.
// Functions here throw ortlite::Error or PythonErrorSet (Python exception already set);
// callers translate at their C entry point. All need the GIL.
#pragma once

#include <string>
#include <vector>

#include "ortlite/tensor.h"
#include "python/module_state.h"
#include "python/numpy_api.h"
#include "python/util.h"

namespace ortlite::py {

// DataType of a numpy dtype, by kind and item size; kString for str, bytes and object;
// ml_dtypes' bfloat16, float8, float4, int4 and int2 dtypes by identity; kUndefined for
// anything ortlite cannot hold.
DataType dtype_of_descr(PyArray_Descr* descr);
// numpy type number of a DataType (kString: NPY_OBJECT); -1 when numpy has none.
int npy_type_of(DataType t);
// True when t has a numpy dtype: numpy's own or, for bfloat16 and the narrow types,
// ml_dtypes' (then converting needs ml_dtypes installed; NotImplemented says so otherwise).
bool has_numpy_dtype(DataType t);
// DataType from a numpy dtype-like (np.float32, np.dtype('int64'), 'float16', ...) or an
// ONNX TensorProto element type number. Throws on anything else.
DataType dtype_from_python(PyObject* element_type);

// A feed for input `name` (used in messages). ndarrays keep their dtype; other objects
// (lists, scalars) are converted with numpy to `want` (numpy's choice when kUndefined).
// *keepalive receives the array whose memory the tensor borrows (empty when the tensor
// owns its memory, e.g. strings).
Tensor object_to_tensor(PyObject* obj, DataType want, const std::string& name, Ref* keepalive);

// The copy of `t` as a new numpy array (strings: an object array of str).
Ref tensor_to_numpy_copy(const Tensor& t);
// A view of `t` whose base is `base` (stolen, even on failure). The caller guarantees
// that `base` keeps the memory alive and that the view is allowed (see can_view).
Ref tensor_to_numpy_view(const Tensor& t, PyObject* base, bool writeable);
// A view of `t` with a new BufferOwner base that holds a reference to t's buffer.
Ref tensor_to_numpy_owned(ModuleState* st, const Tensor& t);
// True when numpy can view t's memory directly: CPU, numeric, non-empty, aligned.
bool can_view(const Tensor& t);

// For each output of a run: true when it may become a zero-copy numpy view. That is
// when its buffer is kOwned CPU memory that nothing but `outs` references (so not a
// session weight and not a feed) and no earlier output uses the same buffer.
std::vector<bool> exclusive_outputs(const std::vector<Tensor>& outs);
// The same test for output i of n outputs given as pointers (no vector is made).
bool exclusive_output(const Tensor* const* outs, size_t n, size_t i);

}  // namespace ortlite::py
