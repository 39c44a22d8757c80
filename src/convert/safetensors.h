// Safetensors files (the Hugging Face weight format) and checkpoints made of them: an 8-byte
// header length, a JSON header naming each tensor's dtype, shape and byte range, then the data.
// Like gguf::File, a file is validated once when it opens — every range inside the data, every
// size equal to its shape — so readers trust it afterwards.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tensor/dtype.h"
#include "util/mapped_file.h"
#include "util/result.h"

namespace convert {

struct SafeTensor {
  std::string name;
  std::string dtype;           // as stored: "BF16", "F16", "F32", "I64", …
  std::vector<int64_t> shape;  // PyTorch order: the last axis is contiguous
  std::span<const uint8_t> data;
  std::string file;  // the file holding it, for error messages

  int64_t n_elements() const;
  // The GGUF type holding the same values (F32, F16, BF16), or an error naming the tensor.
  util::Result<tensor::DType> gguf_type() const;
};

class SafetensorsFile {
 public:
  // Maps and validates `path`.
  static util::Result<SafetensorsFile> open(const std::string& path);
  // Validates bytes that stay alive elsewhere (for tests and fuzzing).
  static util::Result<SafetensorsFile> parse(std::span<const uint8_t> bytes, std::string_view name);

  const std::vector<SafeTensor>& tensors() const { return tensors_; }
  const std::unordered_map<std::string, std::string>& metadata() const { return metadata_; }
  const util::MappedFile* mapping() const { return mapping_.get(); }

 private:
  std::shared_ptr<util::MappedFile> mapping_;
  std::vector<SafeTensor> tensors_;
  std::unordered_map<std::string, std::string> metadata_;
};

// A checkpoint directory: model.safetensors, or shards listed by model.safetensors.index.json
// (every listed shard must exist and hold the tensors the index puts in it).
class Checkpoint {
 public:
  static util::Result<Checkpoint> open(const std::string& dir);

  const SafeTensor* find(std::string_view name) const;
  // All tensors, in file order then header order.
  const std::vector<const SafeTensor*>& tensors() const { return order_; }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  std::vector<SafetensorsFile> files_;
  std::vector<const SafeTensor*> order_;
  std::unordered_map<std::string_view, const SafeTensor*> index_;
};

}  // namespace convert
