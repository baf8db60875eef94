// register_tensor_creation_kernels: Constant, ConstantOfShape, Cast, CastLike, Range.
#include "providers/cpu/tensor/creation_kernels.h"
#include "providers/cpu/tensor/tensor_kernels.h"

namespace ortlite {

namespace creation {

const char* onnx_type_name(int64_t type) {
  switch (type) {
    case 1:
      return "float";
    case 2:
      return "uint8";
    case 3:
      return "int8";
    case 4:
      return "uint16";
    case 5:
      return "int16";
    case 6:
      return "int32";
    case 7:
      return "int64";
    case 8:
      return "string";
    case 9:
      return "bool";
    case 10:
      return "float16";
    case 11:
      return "double";
    case 12:
      return "uint32";
    case 13:
      return "uint64";
    case 14:
      return "complex64";
    case 15:
      return "complex128";
    case 16:
      return "bfloat16";
    case 17:
      return "float8e4m3fn";
    case 18:
      return "float8e4m3fnuz";
    case 19:
      return "float8e5m2";
    case 20:
      return "float8e5m2fnuz";
    case 21:
      return "uint4";
    case 22:
      return "int4";
    case 23:
      return "float4e2m1";
    case 24:
      return "float8e8m0";
    default:
      return "";
  }
}

}  // namespace creation

void register_tensor_creation_kernels(KernelRegistry& r) {
  creation::register_constant_kernels(r);
  creation::register_cast_kernels(r);
  creation::register_range_kernels(r);
}

}  // namespace ortlite
