// DLPack exchange for ortlite.OrtValue: from_dlpack, __dlpack__, __dlpack_device__,
// to_dlpack (docs/ownership.md "DLPack"). The C structs are DLPack's ABI (v0.8 legacy
// "dltensor" capsules), declared here so no third-party header is needed.
#pragma once

#include <Python.h>

#include <cstdint>

namespace ortlite::py {

namespace dl {

enum DeviceType : int32_t { kCPU = 1, kCUDA = 2, kCUDAHost = 3 };
enum TypeCode : uint8_t { kInt = 0, kUInt = 1, kFloat = 2, kBfloat = 4, kComplex = 5, kBool = 6 };

struct Device {
  int32_t device_type;
  int32_t device_id;
};

struct DataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};

struct Tensor {
  void* data;
  Device device;
  int32_t ndim;
  DataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; NULL means C-contiguous
  uint64_t byte_offset;
};

struct ManagedTensor {
  Tensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(ManagedTensor* self);
};

}  // namespace dl

// Method implementations registered in ortvalue.cc's method table.
PyObject* ortvalue_from_dlpack(PyTypeObject* cls, PyObject* args, PyObject* kwds);
PyObject* ortvalue_dunder_dlpack(PyObject* self, PyObject* args, PyObject* kwds);
PyObject* ortvalue_to_dlpack(PyObject* self, PyObject* unused);
PyObject* ortvalue_dlpack_device(PyObject* self, PyObject* unused);

}  // namespace ortlite::py
