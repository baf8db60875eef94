// Internal registration hooks of the tensor-creation kernels (constant.cc, cast.cc, range.cc),
// called by register_tensor_creation_kernels (creation_register.cc).
#pragma once

#include "ortlite/kernel.h"

namespace ortlite {
namespace creation {

void register_constant_kernels(KernelRegistry& r);  // Constant, ConstantOfShape
void register_cast_kernels(KernelRegistry& r);      // Cast, CastLike
void register_range_kernels(KernelRegistry& r);     // Range

// Name of an ONNX TensorProto.DataType number, including the types ortlite cannot hold
// ("float8e4m3fn", "int4", ...); "" for numbers that are no ONNX type.
const char* onnx_type_name(int64_t type);

}  // namespace creation
}  // namespace ortlite
