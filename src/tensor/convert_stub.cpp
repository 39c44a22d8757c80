// TEMPORARY F32-only conversions until the tensor-formats branch lands (it deletes this file).
#include <cstring>

#include "tensor/convert.h"

namespace tensor {

util::Status dequantize_row(DType type, const void* src, float* dst, int64_t n) {
  if (type != DType::kF32) return util::errorf("dequantize: {} not supported yet", gguf::tensor_type_name(type));
  std::memcpy(dst, src, n * sizeof(float));
  return {};
}

util::Status quantize_row(DType type, const float* src, void* dst, int64_t n) {
  if (type != DType::kF32) return util::errorf("quantize: {} not supported yet", gguf::tensor_type_name(type));
  std::memcpy(dst, src, n * sizeof(float));
  return {};
}

}  // namespace tensor
