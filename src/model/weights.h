// Tensor binding: asks the file for each tensor by name, layer and expected shape, once.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gguf/file.h"
#include "kernels/buffer.h"
#include "kernels/ops.h"
#include "util/result.h"

namespace model {

// Where bound tensor data lives. The CPU binds straight into the file mapping; other devices
// copy the bytes they are given and return their own pointer.
class TensorPlacer {
 public:
  virtual ~TensorPlacer() = default;
  // Returns a device pointer holding `bytes`, or an error (out of memory, …).
  virtual util::Result<const void*> place(std::string_view name, std::span<const uint8_t> bytes) = 0;
};

// Places each tensor in a backend's memory (a GPU's): one allocation per tensor, uploaded once,
// held as long as the placer.
class BackendPlacer final : public TensorPlacer {
 public:
  explicit BackendPlacer(kernels::Backend& backend) : backend_(backend) {}
  util::Result<const void*> place(std::string_view name, std::span<const uint8_t> bytes) override;
  size_t bytes() const { return bytes_; }

 private:
  kernels::Backend& backend_;
  std::vector<kernels::Buffer> buffers_;
  size_t bytes_ = 0;
};

// Binds tensors from a GGUF file, checking shape and type and naming the first mismatch.
class Binder {
 public:
  Binder(const gguf::File& file, TensorPlacer* placer) : file_(file), placer_(placer) {}

  // A 2-D (or 3-D, rows = ne1·ne2) matrix with ne[0] == n_cols and ne[1] == n_rows.
  util::Result<kernels::Matrix> matrix(const std::string& name, int64_t n_cols, int64_t n_rows, int64_t n_mats = 1);
  std::optional<util::Result<kernels::Matrix>> optional_matrix(const std::string& name, int64_t n_cols,
                                                               int64_t n_rows, int64_t n_mats = 1);
  // A vector of n f32 values (converted to f32 if stored otherwise).
  util::Result<const float*> vector(const std::string& name, int64_t n);
  std::optional<util::Result<const float*>> optional_vector(const std::string& name, int64_t n);
  // A one-value tensor read on the host (never placed): a scalar the host itself multiplies with.
  std::optional<util::Result<float>> optional_scalar(const std::string& name);
  bool has(const std::string& name) const { return file_.find_tensor(name) != nullptr; }

  static std::string layer_name(int il, std::string_view suffix);  // "blk.{il}.{suffix}"

 private:
  util::Result<const gguf::TensorInfo*> find(const std::string& name) const;
  util::Status check_shape(const gguf::TensorInfo& t, std::initializer_list<int64_t> expected) const;

  const gguf::File& file_;
  TensorPlacer* placer_;                              // null: bind into the mapping (host)
  std::vector<std::unique_ptr<float[]>> converted_;   // norms stored as f16/bf16, converted once
};

}  // namespace model
