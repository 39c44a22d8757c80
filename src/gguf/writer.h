// gguf::Writer — writes GGUF v3 (or v2) files; streams tensor data straight into the output.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "gguf/file.h"
#include "util/result.h"

namespace gguf {

// An owned metadata value for writing. Build with the named constructors.
struct MetaValue {
  ValueType type = ValueType::kU32;
  std::vector<uint8_t> raw;  // scalar bytes, or numeric/bool array bytes
  std::string str;           // string scalar
  ValueType array_type = ValueType::kU8;
  uint64_t count = 0;                // array length
  std::vector<std::string> strings;  // string array
  std::vector<MetaValue> nested;     // array of arrays

  static MetaValue u8(uint8_t v);
  static MetaValue i32(int32_t v);
  static MetaValue u32(uint32_t v);
  static MetaValue u64(uint64_t v);
  static MetaValue f32(float v);
  static MetaValue f64(double v);
  static MetaValue boolean(bool v);
  static MetaValue string(std::string v);
  static MetaValue array_i32(std::span<const int32_t> v);
  static MetaValue array_u32(std::span<const uint32_t> v);
  static MetaValue array_f32(std::span<const float> v);
  static MetaValue array_bool(const std::vector<bool>& v);
  static MetaValue array_strings(std::vector<std::string> v);
  // A deep copy of a parsed value, preserving its exact type.
  static MetaValue from(const Value& value);

  // Same type and same bytes (floats compare as stored, so NaN equals itself).
  bool operator==(const MetaValue&) const = default;
};

// Fills the tensor's bytes (exactly its byte size) in place in the output.
using TensorFill = std::function<util::Status(std::span<uint8_t> out)>;

class Writer {
 public:
  explicit Writer(uint32_t version = 3) : version_(version) {}

  // Sets a key (replacing an earlier value in its original position).
  void set(const std::string& key, MetaValue value);
  // Adds a tensor whose bytes are copied from `data` (must stay alive until write()).
  void add_tensor(const std::string& name, TensorType type, std::vector<uint64_t> ne,
                  std::span<const uint8_t> data);
  // Adds a tensor whose bytes are produced by `fill` during write(), so no copy is held.
  void add_tensor(const std::string& name, TensorType type, std::vector<uint64_t> ne,
                  TensorFill fill);

  // A writer holding every key and tensor of `file` with their original data offsets, so that
  // writing it reproduces a conforming file byte for byte.
  static Writer copy_of(const File& file);

  // Writes the file under a temporary name beside `path`, then renames it: an error leaves no
  // file behind (and an existing `path` untouched). Tensor data goes to the file one tensor at a
  // time (fills run on a mapping of just their tensor), so memory stays bounded by one tensor.
  util::Status write(const std::string& path) const;
  util::Result<std::vector<uint8_t>> write_to_memory() const;

  uint64_t alignment() const;
  size_t n_tensors() const { return tensors_.size(); }

 private:
  struct PendingTensor {
    std::string name;
    TensorType type;
    std::vector<uint64_t> ne;
    uint64_t n_bytes = 0;
    std::span<const uint8_t> data;
    TensorFill fill;
    std::optional<uint64_t> fixed_offset;  // set by copy_of
  };
  struct Layout {
    std::vector<uint8_t> header;    // magic … tensor infos, padded to the data section
    std::vector<uint64_t> offsets;  // per tensor, relative to the data section
    uint64_t total_bytes = 0;
  };
  util::Result<Layout> layout() const;
  static uint64_t tensor_bytes(const PendingTensor& t);
  util::Status fill_tensors(const Layout& layout, uint8_t* base) const;

  uint32_t version_;
  std::vector<std::pair<std::string, MetaValue>> metadata_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace gguf
