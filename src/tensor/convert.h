// Row conversions between stored tensor types and f32 (TEMPORARY: replaced by the tensor-formats branch).
#pragma once

#include <cstdint>

#include "tensor/dtype.h"
#include "util/result.h"

namespace tensor {

util::Status dequantize_row(DType type, const void* src, float* dst, int64_t n);
util::Status quantize_row(DType type, const float* src, void* dst, int64_t n);

}  // namespace tensor
