// Row sizes and capability lists of the tensor types.
#include "tensor/dtype.h"

#include <cassert>
#include <cstdint>

#include "tensor/blocks.h"

namespace tensor {

std::string_view dtype_name(DType type) {
  return gguf::tensor_type_name(type);
}

int64_t block_values(DType type) {
  return gguf::tensor_type_info(type).block_size;
}

int64_t row_bytes(DType type, int64_t n) {
  const auto& info = gguf::tensor_type_info(type);
  assert(n >= 0 && n % info.block_size == 0);
  return n / info.block_size * info.block_bytes;
}

util::Status check_row_length(DType type, int64_t n) {
  const auto& info = gguf::tensor_type_info(type);
  if (n < 0) return util::errorf("tensor: row length {} is negative", n);
  if (n % info.block_size != 0) {
    return util::errorf(
        "tensor: a row of {} values is not a whole number of {} blocks ({} values each) — {} "
        "stores only rows whose length is a multiple of {}",
        n, info.name, info.block_size, info.name, info.block_size);
  }
  return {};
}

int64_t block_alignment(DType type) {
  switch (type) {
    case DType::kF32:
    case DType::kI32:
      return alignof(float);
    case DType::kI64:
    case DType::kF64:
      return alignof(double);
    case DType::kQ8_K:
      return alignof(BlockQ8_K);
    case DType::kI8:
    case DType::kMXFP4:
    case DType::kNVFP4:
      return 1;
    default:
      return alignof(uint16_t);  // every other block starts with or holds an f16 scale
  }
}

util::Status check_block_alignment(DType type, const void* data) {
  const auto alignment = static_cast<uintptr_t>(block_alignment(type));
  if (reinterpret_cast<uintptr_t>(data) % alignment != 0) {
    return util::errorf(
        "tensor: {} data at {} is not {}-byte aligned — pass tensor data as GGUF stores it, or "
        "copy it into an aligned buffer",
        dtype_name(type), data, alignment);
  }
  return {};
}

bool can_dequantize(DType type) {
  switch (type) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kQ8_0:
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kQ8_K:
    case DType::kIQ4_NL:
    case DType::kIQ4_XS:
    case DType::kTQ1_0:
    case DType::kTQ2_0:
    case DType::kMXFP4:
    case DType::kNVFP4:
      return true;
    default:
      return false;
  }
}

bool can_quantize(DType type) {
  return can_dequantize(type);  // every type headroom reads, it can also write
}

}  // namespace tensor
