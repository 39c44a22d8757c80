// gguf::File — a parsed, fully validated GGUF v2/v3 file whose values point into the mapping.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "gguf/types.h"
#include "util/mapped_file.h"
#include "util/result.h"

namespace gguf {

// One metadata value. Strings and numeric array elements are views into the file bytes;
// nested arrays and string arrays are indexed once at parse time.
class Value {
 public:
  ValueType type() const { return type_; }

  // Scalars. Integer getters accept any integer type whose value fits; as_f64 any number.
  std::optional<uint64_t> as_u64() const;
  std::optional<int64_t> as_i64() const;
  std::optional<uint32_t> as_u32() const;
  std::optional<double> as_f64() const;
  std::optional<bool> as_bool() const;
  std::optional<std::string_view> as_string() const;

  // Arrays.
  bool is_array() const { return type_ == ValueType::kArray; }
  ValueType array_type() const { return array_type_; }
  uint64_t array_size() const { return count_; }
  std::string_view array_string(size_t i) const { return strings_[i]; }
  const std::vector<std::string_view>& array_strings() const { return strings_; }
  const Value& array_nested(size_t i) const { return nested_[i]; }
  // Raw little-endian bytes of a numeric/bool array (count × element size).
  std::span<const uint8_t> array_raw() const { return raw_; }
  // Element i of a numeric array converted, or nullopt if it does not fit / is not numeric.
  std::optional<int64_t> array_i64(size_t i) const;
  std::optional<double> array_f64(size_t i) const;
  // Whole numeric array converted; nullopt if any element does not fit T or the array is not
  // numeric. Accepts signed and unsigned element types alike (files differ, see spec §9).
  template <class T>
  std::optional<std::vector<T>> array_as() const;

  // The raw bytes of a scalar value as stored (1–8 bytes); used by the writer to round-trip.
  std::span<const uint8_t> scalar_raw() const { return raw_; }

 private:
  friend class Parser;
  ValueType type_ = ValueType::kU8;
  ValueType array_type_ = ValueType::kU8;
  uint64_t count_ = 0;
  std::span<const uint8_t> raw_;           // scalar bytes, or numeric array bytes
  std::string_view string_;                // string scalar
  std::vector<std::string_view> strings_;  // string array
  std::vector<Value> nested_;              // array of arrays
};

struct KeyValue {
  std::string_view key;
  Value value;
  uint64_t file_offset;  // where this entry starts, for error messages
};

struct TensorInfo {
  std::string_view name;
  uint32_t n_dims = 0;
  std::array<uint64_t, kMaxDims> ne{1, 1, 1, 1};  // ne[0] is the contiguous (row) axis
  TensorType type = TensorType::kF32;
  uint64_t offset = 0;       // relative to the start of the data section
  uint64_t n_elements = 0;
  uint64_t n_bytes = 0;
  uint64_t info_offset = 0;  // where this tensor's info starts in the file
  std::span<const uint8_t> data;  // n_bytes bytes inside the file

  uint64_t row_bytes() const;  // bytes of one ne[0]-long row
  uint64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
};

class File {
 public:
  // Maps and parses `path`. Keeps the mapping alive as long as the File lives.
  static util::Result<File> open(const std::string& path);
  // Parses bytes that stay alive elsewhere. `display_name` names the input in errors.
  static util::Result<File> parse(std::span<const uint8_t> bytes, std::string_view display_name);

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // start of the tensor data section
  std::span<const uint8_t> bytes() const { return bytes_; }
  const std::string& name() const { return name_; }

  const std::vector<KeyValue>& metadata() const { return metadata_; }
  const Value* find(std::string_view key) const;
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;

  // Typed lookups: nullopt when absent; an Error when present with the wrong type.
  util::Result<std::optional<uint64_t>> get_u64(std::string_view key) const;
  util::Result<std::optional<double>> get_f64(std::string_view key) const;
  util::Result<std::optional<bool>> get_bool(std::string_view key) const;
  util::Result<std::optional<std::string_view>> get_string(std::string_view key) const;

  // The mapping (if opened from a path), e.g. for prefetch hints.
  const util::MappedFile* mapping() const { return mapping_.get(); }

 private:
  friend class Parser;
  std::shared_ptr<util::MappedFile> mapping_;
  std::span<const uint8_t> bytes_;
  std::string name_;
  uint32_t version_ = 0;
  uint64_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<KeyValue> metadata_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string_view, size_t> key_index_;
  std::unordered_map<std::string_view, size_t> tensor_index_;
};

template <class T>
std::optional<std::vector<T>> Value::array_as() const {
  if (!is_array()) return std::nullopt;
  std::vector<T> out;
  out.reserve(count_);
  for (size_t i = 0; i < count_; ++i) {
    if constexpr (std::is_floating_point_v<T>) {
      auto v = array_f64(i);
      if (!v) return std::nullopt;
      out.push_back(static_cast<T>(*v));
    } else if constexpr (std::is_same_v<T, bool>) {
      if (array_type_ != ValueType::kBool) return std::nullopt;
      out.push_back(raw_[i] != 0);
    } else {
      auto v = array_i64(i);
      if (!v) return std::nullopt;
      if constexpr (std::is_signed_v<T>) {
        if (*v < std::numeric_limits<T>::min() || *v > std::numeric_limits<T>::max()) return std::nullopt;
      } else {
        if (*v < 0 || static_cast<uint64_t>(*v) > std::numeric_limits<T>::max()) return std::nullopt;
      }
      out.push_back(static_cast<T>(*v));
    }
  }
  return out;
}

}  // namespace gguf
