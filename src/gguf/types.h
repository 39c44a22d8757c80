// GGUF file-format facts: metadata value types and the tensor type table (ids, block sizes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace gguf {

// Metadata value types, numbered as in the GGUF specification.
enum class ValueType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

std::string_view value_type_name(ValueType type);
bool is_known_value_type(uint32_t raw);
// Bytes one scalar of this type occupies in the file (0 for string/array).
uint32_t value_type_size(ValueType type);
bool is_integer_type(ValueType type);

// Tensor storage types, numbered as ggml numbers them (the id written in the file).
enum class TensorType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
  kNVFP4 = 40,
};

// How a tensor type is laid out: `block_size` values are stored in `block_bytes` bytes.
struct TensorTypeInfo {
  TensorType type;
  std::string_view name;  // "Q4_K", as ggml and llama.cpp print it
  uint32_t block_size;    // values per block (1 for plain float/int types)
  uint32_t block_bytes;   // bytes per block
};

// The layout of a raw type id, or nullopt for ids no GGUF file may carry.
std::optional<TensorTypeInfo> tensor_type_info(uint32_t raw_type);
const TensorTypeInfo& tensor_type_info(TensorType type);
std::string_view tensor_type_name(TensorType type);
// "Q4_K" → type (case-insensitive); nullopt if no such name.
std::optional<TensorType> tensor_type_from_name(std::string_view name);

// Bits per weight of a type (e.g. 4.5 for Q4_K).
double bits_per_weight(TensorType type);

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as little-endian u32
constexpr uint64_t kDefaultAlignment = 32;
constexpr int kMaxDims = 4;
// ggml's limit (GGML_MAX_NAME - 1): ggml-based tools refuse longer tensor names, so the reader
// refuses them and the writer never writes them.
constexpr size_t kMaxTensorName = 63;

}  // namespace gguf
