// gguf::Value conversions and gguf::File lookups.
#include <cstring>

#include "gguf/file.h"

namespace gguf {
namespace {

template <class T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Reads one integer element of `type` at p; nullopt if it does not fit in int64.
std::optional<int64_t> load_integer(ValueType type, const uint8_t* p) {
  switch (type) {
    case ValueType::kU8: return load<uint8_t>(p);
    case ValueType::kI8: return load<int8_t>(p);
    case ValueType::kU16: return load<uint16_t>(p);
    case ValueType::kI16: return load<int16_t>(p);
    case ValueType::kU32: return load<uint32_t>(p);
    case ValueType::kI32: return load<int32_t>(p);
    case ValueType::kI64: return load<int64_t>(p);
    case ValueType::kU64: {
      uint64_t v = load<uint64_t>(p);
      if (v > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
      return static_cast<int64_t>(v);
    }
    default: return std::nullopt;
  }
}

std::optional<double> load_number(ValueType type, const uint8_t* p) {
  if (type == ValueType::kF32) return load<float>(p);
  if (type == ValueType::kF64) return load<double>(p);
  if (type == ValueType::kU64) return static_cast<double>(load<uint64_t>(p));
  auto i = load_integer(type, p);
  if (!i) return std::nullopt;
  return static_cast<double>(*i);
}

}  // namespace

std::optional<uint64_t> Value::as_u64() const {
  if (type_ == ValueType::kU64) return load<uint64_t>(raw_.data());
  auto v = as_i64();
  if (!v || *v < 0) return std::nullopt;
  return static_cast<uint64_t>(*v);
}

std::optional<int64_t> Value::as_i64() const {
  if (!is_integer_type(type_)) return std::nullopt;
  return load_integer(type_, raw_.data());
}

std::optional<uint32_t> Value::as_u32() const {
  auto v = as_u64();
  if (!v || *v > UINT32_MAX) return std::nullopt;
  return static_cast<uint32_t>(*v);
}

std::optional<double> Value::as_f64() const {
  if (type_ == ValueType::kString || type_ == ValueType::kArray || type_ == ValueType::kBool) {
    return std::nullopt;
  }
  return load_number(type_, raw_.data());
}

std::optional<bool> Value::as_bool() const {
  if (type_ != ValueType::kBool) return std::nullopt;
  return raw_[0] != 0;
}

std::optional<std::string_view> Value::as_string() const {
  if (type_ != ValueType::kString) return std::nullopt;
  return string_;
}

std::optional<int64_t> Value::array_i64(size_t i) const {
  if (!is_array() || i >= count_ || !is_integer_type(array_type_)) return std::nullopt;
  return load_integer(array_type_, raw_.data() + i * value_type_size(array_type_));
}

std::optional<double> Value::array_f64(size_t i) const {
  if (!is_array() || i >= count_) return std::nullopt;
  if (array_type_ == ValueType::kString || array_type_ == ValueType::kArray ||
      array_type_ == ValueType::kBool) {
    return std::nullopt;
  }
  return load_number(array_type_, raw_.data() + i * value_type_size(array_type_));
}

uint64_t TensorInfo::row_bytes() const {
  const auto& info = tensor_type_info(type);
  return ne[0] / info.block_size * info.block_bytes;
}

const Value* File::find(std::string_view key) const {
  auto it = key_index_.find(key);
  return it == key_index_.end() ? nullptr : &metadata_[it->second].value;
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {
util::Error wrong_type(const std::string& file, std::string_view key, ValueType got, std::string_view want) {
  return util::errorf("gguf: {}: metadata '{}' is {} but {} was expected — the file was written by a "
                      "non-conforming converter", file, key, value_type_name(got), want);
}
}  // namespace

util::Result<std::optional<uint64_t>> File::get_u64(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::optional<uint64_t>{};
  auto x = v->as_u64();
  if (!x) return wrong_type(name_, key, v->type(), "a non-negative integer");
  return std::optional<uint64_t>{*x};
}

util::Result<std::optional<double>> File::get_f64(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::optional<double>{};
  auto x = v->as_f64();
  if (!x) return wrong_type(name_, key, v->type(), "a number");
  return std::optional<double>{*x};
}

util::Result<std::optional<bool>> File::get_bool(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::optional<bool>{};
  auto x = v->as_bool();
  if (!x) return wrong_type(name_, key, v->type(), "a bool");
  return std::optional<bool>{*x};
}

util::Result<std::optional<std::string_view>> File::get_string(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::optional<std::string_view>{};
  auto x = v->as_string();
  if (!x) return wrong_type(name_, key, v->type(), "a string");
  return std::optional<std::string_view>{*x};
}

}  // namespace gguf
