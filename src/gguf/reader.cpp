// GGUF v2/v3 parser: validates every count, length, type, offset and extent before trusting it.
//
// The parser is a pure function of a byte span (so it can be fuzzed). Every error names the
// input, the byte offset where the problem was found and what is wrong, on one line.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "gguf/file.h"

namespace gguf {

using util::Error;
using util::Result;
using util::Status;

namespace {

constexpr int kMaxNesting = 8;        // arrays of arrays deeper than this are refused
constexpr uint64_t kMinKvBytes = 13;  // key length (8) + value type (4) + smallest value (1)
constexpr uint64_t kMinTensorInfoBytes = 32;  // name length, n_dims, one dim, type, offset
constexpr uint64_t kMaxAlignment = 1u << 20;

bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out) {
  return __builtin_mul_overflow(a, b, out);
}
bool add_overflows(uint64_t a, uint64_t b, uint64_t* out) {
  return __builtin_add_overflow(a, b, out);
}

template <class T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

class Parser {
 public:
  Parser(std::span<const uint8_t> bytes, std::string_view name) : bytes_(bytes), name_(name) {}

  Result<File> run();

 private:
  Error fail(uint64_t offset, std::string_view what) const {
    return util::errorf("gguf: {}: offset {}: {}", name_, offset, what);
  }
  Error truncated(uint64_t offset, std::string_view what) const {
    return fail(offset, fmt::format("{} runs past the end of the file ({} bytes) — the file is "
                                    "truncated; re-download or re-convert it",
                                    what, bytes_.size()));
  }
  uint64_t remaining() const { return bytes_.size() - pos_; }

  Result<uint32_t> read_u32(std::string_view what);
  Result<uint64_t> read_u64(std::string_view what);
  Result<std::string_view> read_string(std::string_view what);
  Result<Value> read_value(ValueType type, int depth, std::string_view key);
  Result<Value> read_array(int depth, std::string_view key);
  Status read_tensor_info(File& file, uint64_t index);
  Status check_tensors(File& file);

  std::span<const uint8_t> bytes_;
  std::string_view name_;
  uint64_t pos_ = 0;
};

Result<uint32_t> Parser::read_u32(std::string_view what) {
  if (remaining() < 4) return truncated(pos_, what);
  uint32_t v = load<uint32_t>(bytes_.data() + pos_);
  pos_ += 4;
  return v;
}

Result<uint64_t> Parser::read_u64(std::string_view what) {
  if (remaining() < 8) return truncated(pos_, what);
  uint64_t v = load<uint64_t>(bytes_.data() + pos_);
  pos_ += 8;
  return v;
}

Result<std::string_view> Parser::read_string(std::string_view what) {
  const uint64_t start = pos_;
  HR_ASSIGN_OR_RETURN(uint64_t length, read_u64(what));
  if (length > remaining()) {
    return fail(start, fmt::format("{} claims {} bytes but only {} remain — the file is truncated "
                                   "or corrupt; re-download or re-convert it",
                                   what, length, remaining()));
  }
  std::string_view s(reinterpret_cast<const char*>(bytes_.data() + pos_), length);
  pos_ += length;
  return s;
}

Result<Value> Parser::read_value(ValueType type, int depth, std::string_view key) {
  Value value;
  value.type_ = type;
  if (type == ValueType::kString) {
    HR_ASSIGN_OR_RETURN(value.string_, read_string(fmt::format("string value of '{}'", key)));
    return value;
  }
  if (type == ValueType::kArray) return read_array(depth, key);
  const uint32_t size = value_type_size(type);
  if (remaining() < size) return truncated(pos_, fmt::format("value of '{}'", key));
  value.raw_ = bytes_.subspan(pos_, size);
  if (type == ValueType::kBool && value.raw_[0] > 1) {
    return fail(pos_, fmt::format("bool value of '{}' is {} (must be 0 or 1) — the file is corrupt",
                                  key, value.raw_[0]));
  }
  pos_ += size;
  return value;
}

Result<Value> Parser::read_array(int depth, std::string_view key) {
  const uint64_t start = pos_;
  if (depth >= kMaxNesting) {
    return fail(start, fmt::format("array '{}' is nested more than {} levels deep — refusing it as "
                                   "corrupt",
                                   key, kMaxNesting));
  }
  HR_ASSIGN_OR_RETURN(uint32_t raw_type, read_u32(fmt::format("array type of '{}'", key)));
  if (!is_known_value_type(raw_type)) {
    return fail(start, fmt::format("array '{}' has unknown element type {} — the file is corrupt "
                                   "or from a newer GGUF version",
                                   key, raw_type));
  }
  const auto elem = static_cast<ValueType>(raw_type);
  HR_ASSIGN_OR_RETURN(uint64_t count, read_u64(fmt::format("array length of '{}'", key)));
  // Every element takes at least this many bytes, so the count cannot exceed what is left.
  uint64_t min_elem = elem == ValueType::kString  ? 8
                      : elem == ValueType::kArray ? 12
                                                  : value_type_size(elem);
  uint64_t min_total = 0;
  if (mul_overflows(count, min_elem, &min_total) || min_total > remaining()) {
    return fail(start,
                fmt::format("array '{}' claims {} {} elements but only {} bytes remain — the "
                            "file is truncated or corrupt",
                            key, count, value_type_name(elem), remaining()));
  }
  Value value;
  value.type_ = ValueType::kArray;
  value.array_type_ = elem;
  value.count_ = count;
  if (elem == ValueType::kString) {
    value.strings_.reserve(count);
    for (uint64_t i = 0; i < count; ++i) {
      HR_ASSIGN_OR_RETURN(auto s, read_string(fmt::format("element {} of '{}'", i, key)));
      value.strings_.push_back(s);
    }
  } else if (elem == ValueType::kArray) {
    value.nested_.reserve(count);
    for (uint64_t i = 0; i < count; ++i) {
      HR_ASSIGN_OR_RETURN(auto nested, read_array(depth + 1, key));
      value.nested_.push_back(std::move(nested));
    }
  } else {
    value.raw_ = bytes_.subspan(pos_, min_total);
    if (elem == ValueType::kBool) {
      for (uint64_t i = 0; i < count; ++i) {
        if (value.raw_[i] > 1) {
          return fail(pos_ + i,
                      fmt::format("element {} of bool array '{}' is {} (must be 0 or 1) — "
                                  "the file is corrupt",
                                  i, key, value.raw_[i]));
        }
      }
    }
    pos_ += min_total;
  }
  return value;
}

Status Parser::read_tensor_info(File& file, uint64_t index) {
  TensorInfo info;
  info.info_offset = pos_;
  HR_ASSIGN_OR_RETURN(info.name, read_string(fmt::format("name of tensor {}", index)));
  if (info.name.empty())
    return fail(info.info_offset,
                fmt::format("tensor {} has an empty name — the file is corrupt", index));
  const uint64_t dims_at = pos_;
  HR_ASSIGN_OR_RETURN(info.n_dims,
                      read_u32(fmt::format("dimension count of tensor '{}'", info.name)));
  if (info.n_dims == 0 || info.n_dims > kMaxDims) {
    return fail(dims_at,
                fmt::format("tensor '{}' has {} dimensions (must be 1 to {}) — the file is "
                            "corrupt",
                            info.name, info.n_dims, kMaxDims));
  }
  for (uint32_t d = 0; d < info.n_dims; ++d) {
    const uint64_t at = pos_;
    HR_ASSIGN_OR_RETURN(info.ne[d], read_u64(fmt::format("shape of tensor '{}'", info.name)));
    if (info.ne[d] > static_cast<uint64_t>(INT64_MAX)) {
      return fail(at,
                  fmt::format("tensor '{}' dimension {} is {} (negative or absurd) — the file is "
                              "corrupt",
                              info.name, d, info.ne[d]));
    }
  }
  const uint64_t type_at = pos_;
  HR_ASSIGN_OR_RETURN(uint32_t raw_type, read_u32(fmt::format("type of tensor '{}'", info.name)));
  auto type_info = tensor_type_info(raw_type);
  if (!type_info) {
    return fail(type_at, fmt::format("tensor '{}' has unknown type id {} — the file uses a tensor "
                                     "type headroom does not know; re-quantize it to a common type "
                                     "(e.g. Q4_K_M or Q8_0)",
                                     info.name, raw_type));
  }
  info.type = type_info->type;
  HR_ASSIGN_OR_RETURN(info.offset, read_u64(fmt::format("data offset of tensor '{}'", info.name)));

  // Element count and byte size, refusing any overflow.
  uint64_t n = 1;
  for (int d = 0; d < kMaxDims; ++d) {
    if (mul_overflows(n, info.ne[d], &n) || n > static_cast<uint64_t>(INT64_MAX)) {
      return fail(info.info_offset,
                  fmt::format("tensor '{}' shape [{}, {}, {}, {}] overflows 64 bits "
                              "— the file is corrupt",
                              info.name, info.ne[0], info.ne[1], info.ne[2], info.ne[3]));
    }
  }
  info.n_elements = n;
  if (info.ne[0] % type_info->block_size != 0) {
    return fail(info.info_offset,
                fmt::format("tensor '{}' row length {} is not a multiple of the {} "
                            "block size {} — the file is corrupt",
                            info.name, info.ne[0], type_info->name, type_info->block_size));
  }
  uint64_t bytes = 0;
  if (mul_overflows(n / type_info->block_size, type_info->block_bytes, &bytes)) {
    return fail(info.info_offset,
                fmt::format("tensor '{}' byte size overflows 64 bits — the file is "
                            "corrupt",
                            info.name));
  }
  info.n_bytes = bytes;
  if (!file.tensor_index_.emplace(info.name, file.tensors_.size()).second) {
    return fail(info.info_offset,
                fmt::format("duplicate tensor name '{}' — the file is corrupt", info.name));
  }
  file.tensors_.push_back(info);
  return {};
}

Status Parser::check_tensors(File& file) {
  const uint64_t data_start = file.data_offset_;
  for (auto& t : file.tensors_) {
    if (t.offset % file.alignment_ != 0) {
      return fail(t.info_offset, fmt::format("tensor '{}' data offset {} is not a multiple of the "
                                             "alignment {} — the file is corrupt",
                                             t.name, t.offset, file.alignment_));
    }
    uint64_t begin = 0, end = 0;
    if (add_overflows(data_start, t.offset, &begin) || add_overflows(begin, t.n_bytes, &end) ||
        end > bytes_.size()) {
      return fail(t.info_offset,
                  fmt::format("tensor '{}' data ({} bytes at file offset {}) ends "
                              "past the end of the file ({} bytes) — the file is "
                              "truncated; re-download it",
                              t.name, t.n_bytes, data_start + t.offset, bytes_.size()));
    }
    t.data = bytes_.subspan(begin, t.n_bytes);
  }
  // Overlap: sort by offset, then each tensor must end before the next begins.
  std::vector<size_t> order(file.tensors_.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return file.tensors_[a].offset < file.tensors_[b].offset; });
  for (size_t i = 1; i < order.size(); ++i) {
    const auto& prev = file.tensors_[order[i - 1]];
    const auto& cur = file.tensors_[order[i]];
    if (prev.n_bytes > 0 && cur.n_bytes > 0 && prev.offset + prev.n_bytes > cur.offset) {
      return fail(cur.info_offset,
                  fmt::format("tensor '{}' data overlaps tensor '{}' — the file is "
                              "corrupt",
                              cur.name, prev.name));
    }
  }
  return {};
}

Result<File> Parser::run() {
  File file;
  file.bytes_ = bytes_;
  file.name_ = std::string(name_);

  if (bytes_.size() < 4) return truncated(0, "the GGUF magic");
  if (load<uint32_t>(bytes_.data()) != kMagic) {
    return fail(0,
                "bad magic (expected 'GGUF') — this is not a GGUF file; convert the model to "
                "GGUF first");
  }
  pos_ = 4;
  HR_ASSIGN_OR_RETURN(file.version_, read_u32("the version"));
  if (file.version_ == 1) {
    return fail(4,
                "GGUF version 1 is not supported (32-bit counts) — re-convert with a current "
                "converter to get version 3");
  }
  if (file.version_ != 2 && file.version_ != 3) {
    return fail(4,
                fmt::format("unsupported GGUF version {} (headroom reads 2 and 3)", file.version_));
  }
  const uint64_t counts_at = pos_;
  HR_ASSIGN_OR_RETURN(uint64_t n_tensors, read_u64("the tensor count"));
  HR_ASSIGN_OR_RETURN(uint64_t n_kv, read_u64("the metadata count"));
  uint64_t min_bytes = 0;
  if (mul_overflows(n_kv, kMinKvBytes, &min_bytes) || min_bytes > remaining()) {
    return fail(counts_at + 8,
                fmt::format("metadata count {} is impossible for a file of {} bytes — "
                            "the file is corrupt",
                            n_kv, bytes_.size()));
  }
  if (mul_overflows(n_tensors, kMinTensorInfoBytes, &min_bytes) || min_bytes > remaining()) {
    return fail(counts_at, fmt::format("tensor count {} is impossible for a file of {} bytes — the "
                                       "file is corrupt",
                                       n_tensors, bytes_.size()));
  }

  file.metadata_.reserve(n_kv);
  for (uint64_t i = 0; i < n_kv; ++i) {
    KeyValue kv;
    kv.file_offset = pos_;
    HR_ASSIGN_OR_RETURN(kv.key, read_string(fmt::format("key of metadata entry {}", i)));
    if (kv.key.empty())
      return fail(kv.file_offset,
                  fmt::format("metadata entry {} has an empty key — the file is corrupt", i));
    const uint64_t type_at = pos_;
    HR_ASSIGN_OR_RETURN(uint32_t raw_type, read_u32(fmt::format("value type of '{}'", kv.key)));
    if (!is_known_value_type(raw_type)) {
      return fail(type_at, fmt::format("metadata '{}' has unknown value type {} — the file is "
                                       "corrupt or from a newer GGUF version",
                                       kv.key, raw_type));
    }
    HR_ASSIGN_OR_RETURN(kv.value, read_value(static_cast<ValueType>(raw_type), 0, kv.key));
    if (!file.key_index_.emplace(kv.key, file.metadata_.size()).second) {
      return fail(kv.file_offset,
                  fmt::format("duplicate metadata key '{}' — the file is corrupt", kv.key));
    }
    file.metadata_.push_back(std::move(kv));
  }

  if (const Value* align = file.find("general.alignment")) {
    auto a = align->as_u64();
    const uint64_t at = file.metadata_[file.key_index_.at("general.alignment")].file_offset;
    if (!a || !is_integer_type(align->type())) {
      return fail(at, "general.alignment is not an unsigned integer — the file is corrupt");
    }
    if (*a == 0 || (*a & (*a - 1)) != 0 || *a > kMaxAlignment) {
      return fail(at, fmt::format("general.alignment is {} (must be a power of two up to {}) — the "
                                  "file is corrupt",
                                  *a, kMaxAlignment));
    }
    file.alignment_ = *a;
  }

  file.tensors_.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) HR_TRY(read_tensor_info(file, i));

  // The data section starts at the next multiple of the alignment.
  file.data_offset_ = (pos_ + file.alignment_ - 1) / file.alignment_ * file.alignment_;
  if (n_tensors > 0 && file.data_offset_ > bytes_.size()) {
    return truncated(pos_, "the tensor data section");
  }
  HR_TRY(check_tensors(file));
  return file;
}

Result<File> File::parse(std::span<const uint8_t> bytes, std::string_view display_name) {
  return Parser(bytes, display_name).run();
}

Result<File> File::open(const std::string& path) {
  HR_ASSIGN_OR_RETURN(auto mapped, util::MappedFile::open(path));
  auto mapping = std::make_shared<util::MappedFile>(std::move(mapped));
  HR_ASSIGN_OR_RETURN(File file, parse(mapping->bytes(), path));
  file.mapping_ = std::move(mapping);
  return file;
}

}  // namespace gguf
