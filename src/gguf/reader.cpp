// GGUF v2/v3 parser: validates every count, length, type, offset and extent before trusting it.
//
// The parser is a pure function of a byte span (so it can be fuzzed). Every error names the
// input, the byte offset where the problem was found and what is wrong, on one line.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <type_traits>

#include "gguf/file.h"

namespace gguf {

using util::Error;
using util::Result;
using util::Status;

namespace {

constexpr int kMaxNesting = 8;  // arrays of arrays deeper than this are refused
// Smallest possible encodings, used to refuse counts the remaining bytes cannot hold before
// anything is allocated for them:
//   metadata entry: key length (8), a 1-byte key, value type (4), a u8 value;
//   tensor info: name length (8), a 1-byte name, n_dims (4), one dim (8), type (4), offset (8);
//   nested array: element type (4), count (8).
constexpr uint64_t kMinKvBytes = 14;
constexpr uint64_t kMinTensorInfoBytes = 33;
constexpr uint64_t kMinArrayBytes = 12;
constexpr uint64_t kMaxAlignment = 1u << 20;
constexpr size_t kMaxNameInError = 64;  // longer keys/names are cut in error messages

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

// Error descriptions are either text or a callable that builds it. The callable form keeps the
// success path free of formatting: a 262K-token vocabulary would otherwise format one
// description per string on every open.
template <class Describe>
std::string describe(const Describe& what) {
  if constexpr (std::is_invocable_v<const Describe&>) {
    return what();
  } else {
    return std::string(what);
  }
}

// Keys and tensor names come from the file: escape control and non-ASCII bytes and cut long ones,
// so an error about a hostile name is still one short printable line.
std::string printable(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < kMaxNameInError; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  if (s.size() > kMaxNameInError) out += fmt::format("... ({} bytes)", s.size());
  return out;
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

  template <class T, class Describe>
  Result<T> read_scalar(const Describe& what) {
    if (remaining() < sizeof(T)) return truncated(pos_, describe(what));
    T v = load<T>(bytes_.data() + pos_);
    pos_ += sizeof(T);
    return v;
  }
  template <class Describe>
  Result<uint32_t> read_u32(const Describe& what) {
    return read_scalar<uint32_t>(what);
  }
  template <class Describe>
  Result<uint64_t> read_u64(const Describe& what) {
    return read_scalar<uint64_t>(what);
  }
  template <class Describe>
  Result<std::string_view> read_string(const Describe& what) {
    const uint64_t start = pos_;
    HR_ASSIGN_OR_RETURN(uint64_t length, read_u64(what));
    if (length > remaining()) {
      return fail(start, fmt::format("{} claims {} bytes but only {} remain — the file is "
                                     "truncated or corrupt; re-download or re-convert it",
                                     describe(what), length, remaining()));
    }
    std::string_view s(reinterpret_cast<const char*>(bytes_.data() + pos_), length);
    pos_ += length;
    return s;
  }
  Result<Value> read_value(ValueType type, int depth, std::string_view key);
  Result<Value> read_array(int depth, std::string_view key);
  Status read_tensor_info(File& file, uint64_t index);
  Status check_tensors(File& file);

  std::span<const uint8_t> bytes_;
  std::string_view name_;
  uint64_t pos_ = 0;
  uint64_t held_ = 0;  // bytes the later elements of the enclosing arrays need at the least
};

Result<Value> Parser::read_value(ValueType type, int depth, std::string_view key) {
  Value value;
  value.type_ = type;
  if (type == ValueType::kString) {
    HR_ASSIGN_OR_RETURN(value.string_, read_string([&] {
                          return fmt::format("string value of '{}'", printable(key));
                        }));
    return value;
  }
  if (type == ValueType::kArray) return read_array(depth, key);
  const uint32_t size = value_type_size(type);
  if (remaining() < size) {
    return truncated(pos_, fmt::format("value of '{}'", printable(key)));
  }
  value.raw_ = bytes_.subspan(pos_, size);
  if (type == ValueType::kBool && value.raw_[0] > 1) {
    return fail(pos_, fmt::format("bool value of '{}' is {} (must be 0 or 1) — the file is corrupt",
                                  printable(key), value.raw_[0]));
  }
  pos_ += size;
  return value;
}

Result<Value> Parser::read_array(int depth, std::string_view key) {
  const uint64_t start = pos_;
  if (depth >= kMaxNesting) {
    return fail(start, fmt::format("array '{}' is nested more than {} levels deep — refusing it as "
                                   "corrupt",
                                   printable(key), kMaxNesting));
  }
  HR_ASSIGN_OR_RETURN(uint32_t raw_type,
                      read_u32([&] { return fmt::format("array type of '{}'", printable(key)); }));
  if (!is_known_value_type(raw_type)) {
    return fail(start, fmt::format("array '{}' has unknown element type {} — the file is corrupt "
                                   "or from a newer GGUF version",
                                   printable(key), raw_type));
  }
  const auto elem = static_cast<ValueType>(raw_type);
  HR_ASSIGN_OR_RETURN(uint64_t count, read_u64([&] {
                        return fmt::format("array length of '{}'", printable(key));
                      }));
  // Every element takes at least this many bytes, so the count cannot exceed what is left once
  // the later elements of the enclosing arrays have their minimum. Claims of open arrays thus
  // never add up to more than the file, and neither do the reserves made from them.
  uint64_t min_elem = elem == ValueType::kString  ? 8
                      : elem == ValueType::kArray ? kMinArrayBytes
                                                  : value_type_size(elem);
  const uint64_t available = remaining() > held_ ? remaining() - held_ : 0;
  uint64_t min_total = 0;
  if (mul_overflows(count, min_elem, &min_total) || min_total > available) {
    return fail(start,
                fmt::format("array '{}' claims {} {} elements but only {} bytes are left for it — "
                            "the file is truncated or corrupt",
                            printable(key), count, value_type_name(elem), available));
  }
  Value value;
  value.type_ = ValueType::kArray;
  value.array_type_ = elem;
  value.count_ = count;
  if (elem == ValueType::kString) {
    // A string takes at least 8 bytes and a view 16, so this reserve is at most 2× the file.
    value.strings_.reserve(count);
    for (uint64_t i = 0; i < count; ++i) {
      HR_ASSIGN_OR_RETURN(auto s, read_string([&] {
                            return fmt::format("element {} of '{}'", i, printable(key));
                          }));
      value.strings_.push_back(s);
    }
  } else if (elem == ValueType::kArray) {
    value.nested_.reserve(count);  // at most sizeof(Value) / 12 = 8× the bytes claimed
    const uint64_t outer_held = held_;
    for (uint64_t i = 0; i < count; ++i) {
      held_ = outer_held + (count - i - 1) * kMinArrayBytes;  // cannot overflow: ≤ min_total
      auto nested = read_array(depth + 1, key);
      held_ = outer_held;
      if (!nested) return std::move(nested).error();
      value.nested_.push_back(std::move(nested).value());
    }
  } else {
    value.raw_ = bytes_.subspan(pos_, min_total);
    if (elem == ValueType::kBool) {
      for (uint64_t i = 0; i < count; ++i) {
        if (value.raw_[i] > 1) {
          return fail(pos_ + i,
                      fmt::format("element {} of bool array '{}' is {} (must be 0 or 1) — "
                                  "the file is corrupt",
                                  i, printable(key), value.raw_[i]));
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
  HR_ASSIGN_OR_RETURN(info.name,
                      read_string([&] { return fmt::format("name of tensor {}", index); }));
  const auto name = [&] { return printable(info.name); };
  if (info.name.empty()) {
    return fail(info.info_offset,
                fmt::format("tensor {} has an empty name — the file is corrupt", index));
  }
  if (info.name.size() > kMaxTensorName) {
    return fail(info.info_offset,
                fmt::format("tensor {} name '{}' is longer than {} bytes, which ggml-based tools "
                            "refuse — the file is corrupt",
                            index, name(), kMaxTensorName));
  }
  const uint64_t dims_at = pos_;
  HR_ASSIGN_OR_RETURN(
      info.n_dims, read_u32([&] { return fmt::format("dimension count of tensor '{}'", name()); }));
  if (info.n_dims == 0 || info.n_dims > kMaxDims) {
    return fail(dims_at,
                fmt::format("tensor '{}' has {} dimensions (must be 1 to {}) — the file is "
                            "corrupt",
                            name(), info.n_dims, kMaxDims));
  }
  for (uint32_t d = 0; d < info.n_dims; ++d) {
    const uint64_t at = pos_;
    HR_ASSIGN_OR_RETURN(info.ne[d],
                        read_u64([&] { return fmt::format("shape of tensor '{}'", name()); }));
    if (info.ne[d] > static_cast<uint64_t>(INT64_MAX)) {
      return fail(at,
                  fmt::format("tensor '{}' dimension {} is {} (negative or absurd) — the file is "
                              "corrupt",
                              name(), d, info.ne[d]));
    }
  }
  const uint64_t type_at = pos_;
  HR_ASSIGN_OR_RETURN(uint32_t raw_type,
                      read_u32([&] { return fmt::format("type of tensor '{}'", name()); }));
  auto type_info = tensor_type_info(raw_type);
  if (!type_info) {
    return fail(type_at, fmt::format("tensor '{}' has unknown type id {} — the file uses a tensor "
                                     "type headroom does not know; re-quantize it to a common type "
                                     "(e.g. Q4_K_M or Q8_0)",
                                     name(), raw_type));
  }
  info.type = type_info->type;
  HR_ASSIGN_OR_RETURN(info.offset,
                      read_u64([&] { return fmt::format("data offset of tensor '{}'", name()); }));

  // Element count, refusing overflow. Empty axes count as 1 in the check: [0, 2^40, 2^40] has no
  // elements, but code that multiplies the other axes (n_rows()) must not overflow either.
  uint64_t product = 1;
  bool empty = false;
  for (int d = 0; d < kMaxDims; ++d) {
    empty = empty || info.ne[d] == 0;
    if (mul_overflows(product, std::max<uint64_t>(info.ne[d], 1), &product) ||
        product > static_cast<uint64_t>(INT64_MAX)) {
      return fail(info.info_offset,
                  fmt::format("tensor '{}' shape [{}, {}, {}, {}] overflows 64 bits "
                              "— the file is corrupt",
                              name(), info.ne[0], info.ne[1], info.ne[2], info.ne[3]));
    }
  }
  info.n_elements = empty ? 0 : product;
  if (info.ne[0] % type_info->block_size != 0) {
    return fail(info.info_offset,
                fmt::format("tensor '{}' row length {} is not a multiple of the {} "
                            "block size {} — the file is corrupt",
                            name(), info.ne[0], type_info->name, type_info->block_size));
  }
  uint64_t bytes = 0;
  if (mul_overflows(info.n_elements / type_info->block_size, type_info->block_bytes, &bytes)) {
    return fail(info.info_offset,
                fmt::format("tensor '{}' byte size overflows 64 bits — the file is "
                            "corrupt",
                            name()));
  }
  info.n_bytes = bytes;
  if (!file.tensor_index_.emplace(info.name, file.tensors_.size()).second) {
    return fail(info.info_offset,
                fmt::format("duplicate tensor name '{}' — the file is corrupt", name()));
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
                                             printable(t.name), t.offset, file.alignment_));
    }
    uint64_t begin = 0, end = 0;
    if (add_overflows(data_start, t.offset, &begin) || add_overflows(begin, t.n_bytes, &end) ||
        end > bytes_.size()) {
      // Named relative to the data section: begin may have wrapped around.
      return fail(t.info_offset,
                  fmt::format("tensor '{}' data ({} bytes at offset {} of the data section, which "
                              "starts at {}) ends past the end of the file ({} bytes) — the file "
                              "is truncated; re-download it",
                              printable(t.name), t.n_bytes, t.offset, data_start, bytes_.size()));
    }
    t.data = bytes_.subspan(begin, t.n_bytes);
  }
  // Overlap: in offset order, each non-empty tensor must start at or after the furthest end seen
  // so far. (Comparing only neighbours misses A overlapping C when an empty tensor B sits
  // between them.)
  std::vector<size_t> order(file.tensors_.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return file.tensors_[a].offset < file.tensors_[b].offset; });
  const TensorInfo* furthest = nullptr;
  for (size_t i : order) {
    const auto& cur = file.tensors_[i];
    if (cur.n_bytes == 0) continue;
    if (furthest && furthest->offset + furthest->n_bytes > cur.offset) {
      return fail(cur.info_offset,
                  fmt::format("tensor '{}' data overlaps tensor '{}' — the file is "
                              "corrupt",
                              printable(cur.name), printable(furthest->name)));
    }
    furthest = &cur;  // sorted by offset and not overlapping, so cur ends furthest
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
  const uint32_t swapped = __builtin_bswap32(file.version_);
  if (swapped == 2 || swapped == 3) {
    return fail(4, fmt::format("GGUF version reads as {} — this is a big-endian file and headroom "
                               "reads little-endian files only; use the little-endian conversion",
                               file.version_));
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
    HR_ASSIGN_OR_RETURN(kv.key,
                        read_string([&] { return fmt::format("key of metadata entry {}", i); }));
    if (kv.key.empty()) {
      return fail(kv.file_offset,
                  fmt::format("metadata entry {} has an empty key — the file is corrupt", i));
    }
    const uint64_t type_at = pos_;
    HR_ASSIGN_OR_RETURN(uint32_t raw_type, read_u32([&] {
                          return fmt::format("value type of '{}'", printable(kv.key));
                        }));
    if (!is_known_value_type(raw_type)) {
      return fail(type_at, fmt::format("metadata '{}' has unknown value type {} — the file is "
                                       "corrupt or from a newer GGUF version",
                                       printable(kv.key), raw_type));
    }
    HR_ASSIGN_OR_RETURN(kv.value, read_value(static_cast<ValueType>(raw_type), 0, kv.key));
    if (!file.key_index_.emplace(kv.key, file.metadata_.size()).second) {
      return fail(kv.file_offset, fmt::format("duplicate metadata key '{}' — the file is corrupt",
                                              printable(kv.key)));
    }
    file.metadata_.push_back(std::move(kv));
  }

  if (const Value* align = file.find("general.alignment")) {
    const uint64_t at = file.metadata_[file.key_index_.at("general.alignment")].file_offset;
    // The GGUF specification makes it a u32, and ggml aborts on any other type.
    if (align->type() != ValueType::kU32) {
      return fail(at, fmt::format("general.alignment is a {} (must be u32) — the file is corrupt",
                                  value_type_name(align->type())));
    }
    const uint64_t a = *align->as_u64();
    if (a == 0 || (a & (a - 1)) != 0 || a > kMaxAlignment) {
      return fail(at, fmt::format("general.alignment is {} (must be a power of two up to {}) — the "
                                  "file is corrupt",
                                  a, kMaxAlignment));
    }
    file.alignment_ = a;
  }

  // Checked again now that the metadata is read, so the reserve below is bounded by the bytes
  // that are really left for tensor infos.
  if (n_tensors * kMinTensorInfoBytes > remaining()) {
    return fail(counts_at,
                fmt::format("tensor count {} is impossible: {} tensor infos need at "
                            "least {} bytes but only {} remain after the metadata — the "
                            "file is corrupt",
                            n_tensors, n_tensors, n_tensors * kMinTensorInfoBytes, remaining()));
  }
  file.tensors_.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) HR_TRY(read_tensor_info(file, i));

  // The data section starts at the next multiple of the alignment.
  file.data_offset_ = (pos_ + file.alignment_ - 1) / file.alignment_ * file.alignment_;
  if (n_tensors > 0 && file.data_offset_ > bytes_.size()) {
    return truncated(pos_, "the alignment padding before the tensor data");
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
