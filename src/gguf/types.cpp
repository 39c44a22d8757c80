// GGUF value types and the tensor type table.
#include "gguf/types.h"

#include <array>
#include <cctype>

namespace gguf {
namespace {

// Block layouts as ggml defines them (ggml-common.h); sizes are fixed by the file format.
constexpr std::array<TensorTypeInfo, 33> kTensorTypes = {{
    {TensorType::kF32, "F32", 1, 4},
    {TensorType::kF16, "F16", 1, 2},
    {TensorType::kQ4_0, "Q4_0", 32, 18},
    {TensorType::kQ4_1, "Q4_1", 32, 20},
    {TensorType::kQ5_0, "Q5_0", 32, 22},
    {TensorType::kQ5_1, "Q5_1", 32, 24},
    {TensorType::kQ8_0, "Q8_0", 32, 34},
    {TensorType::kQ8_1, "Q8_1", 32, 36},
    {TensorType::kQ2_K, "Q2_K", 256, 84},
    {TensorType::kQ3_K, "Q3_K", 256, 110},
    {TensorType::kQ4_K, "Q4_K", 256, 144},
    {TensorType::kQ5_K, "Q5_K", 256, 176},
    {TensorType::kQ6_K, "Q6_K", 256, 210},
    {TensorType::kQ8_K, "Q8_K", 256, 292},
    {TensorType::kIQ2_XXS, "IQ2_XXS", 256, 66},
    {TensorType::kIQ2_XS, "IQ2_XS", 256, 74},
    {TensorType::kIQ3_XXS, "IQ3_XXS", 256, 98},
    {TensorType::kIQ1_S, "IQ1_S", 256, 50},
    {TensorType::kIQ4_NL, "IQ4_NL", 32, 18},
    {TensorType::kIQ3_S, "IQ3_S", 256, 110},
    {TensorType::kIQ2_S, "IQ2_S", 256, 82},
    {TensorType::kIQ4_XS, "IQ4_XS", 256, 136},
    {TensorType::kI8, "I8", 1, 1},
    {TensorType::kI16, "I16", 1, 2},
    {TensorType::kI32, "I32", 1, 4},
    {TensorType::kI64, "I64", 1, 8},
    {TensorType::kF64, "F64", 1, 8},
    {TensorType::kIQ1_M, "IQ1_M", 256, 56},
    {TensorType::kBF16, "BF16", 1, 2},
    {TensorType::kTQ1_0, "TQ1_0", 256, 54},
    {TensorType::kTQ2_0, "TQ2_0", 256, 66},
    {TensorType::kMXFP4, "MXFP4", 32, 17},
    {TensorType::kNVFP4, "NVFP4", 64, 36},
}};

}  // namespace

std::string_view value_type_name(ValueType type) {
  switch (type) {
    case ValueType::kU8: return "u8";
    case ValueType::kI8: return "i8";
    case ValueType::kU16: return "u16";
    case ValueType::kI16: return "i16";
    case ValueType::kU32: return "u32";
    case ValueType::kI32: return "i32";
    case ValueType::kF32: return "f32";
    case ValueType::kBool: return "bool";
    case ValueType::kString: return "string";
    case ValueType::kArray: return "array";
    case ValueType::kU64: return "u64";
    case ValueType::kI64: return "i64";
    case ValueType::kF64: return "f64";
  }
  return "?";
}

bool is_known_value_type(uint32_t raw) { return raw <= static_cast<uint32_t>(ValueType::kF64); }

uint32_t value_type_size(ValueType type) {
  switch (type) {
    case ValueType::kU8:
    case ValueType::kI8:
    case ValueType::kBool: return 1;
    case ValueType::kU16:
    case ValueType::kI16: return 2;
    case ValueType::kU32:
    case ValueType::kI32:
    case ValueType::kF32: return 4;
    case ValueType::kU64:
    case ValueType::kI64:
    case ValueType::kF64: return 8;
    case ValueType::kString:
    case ValueType::kArray: return 0;
  }
  return 0;
}

bool is_integer_type(ValueType type) {
  switch (type) {
    case ValueType::kU8:
    case ValueType::kI8:
    case ValueType::kU16:
    case ValueType::kI16:
    case ValueType::kU32:
    case ValueType::kI32:
    case ValueType::kU64:
    case ValueType::kI64: return true;
    default: return false;
  }
}

std::optional<TensorTypeInfo> tensor_type_info(uint32_t raw_type) {
  for (const auto& info : kTensorTypes) {
    if (static_cast<uint32_t>(info.type) == raw_type) return info;
  }
  return std::nullopt;
}

const TensorTypeInfo& tensor_type_info(TensorType type) {
  for (const auto& info : kTensorTypes) {
    if (info.type == type) return info;
  }
  return kTensorTypes[0];  // unreachable for valid enum values
}

std::string_view tensor_type_name(TensorType type) { return tensor_type_info(type).name; }

std::optional<TensorType> tensor_type_from_name(std::string_view name) {
  for (const auto& info : kTensorTypes) {
    if (info.name.size() != name.size()) continue;
    bool equal = true;
    for (size_t i = 0; i < name.size() && equal; ++i) {
      equal = std::toupper(static_cast<unsigned char>(name[i])) == info.name[i];
    }
    if (equal) return info.type;
  }
  return std::nullopt;
}

double bits_per_weight(TensorType type) {
  const auto& info = tensor_type_info(type);
  return 8.0 * info.block_bytes / info.block_size;
}

}  // namespace gguf
