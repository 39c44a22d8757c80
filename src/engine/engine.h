// engine::Engine — a loaded model with its KV cache and backend, ready to evaluate tokens.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gguf/file.h"
#include "kernels/ops.h"
#include "kv/cache.h"
#include "model/model.h"
#include "model/spec.h"
#include "util/result.h"

namespace engine {

struct EngineOptions {
  std::string model_path;
  int n_ctx = 0;        // 0: the model's training context, capped at 4096
  int n_ubatch = 512;   // micro-batch size for prefill
  int n_slots = 1;      // sequences held at once
  tensor::DType k_type = tensor::DType::kF16;
  tensor::DType v_type = tensor::DType::kF16;
};

class Engine {
 public:
  static util::Result<std::unique_ptr<Engine>> load(const EngineOptions& options);

  const model::Spec& spec() const { return spec_; }
  const gguf::File& file() const { return file_; }
  kv::Cache& cache() { return cache_; }
  model::Model& model() { return *model_; }
  int n_ctx() const { return cache_.config().n_ctx; }
  int n_ubatch() const { return options_.n_ubatch; }

  // Evaluates `ids` for `slot` at positions n_past.. in micro-batches of n_ubatch tokens (or one
  // token at a time when `one_by_one`). Writes the last position's logits to `logits` [n_vocab],
  // or every position's ([ids.size()][n_vocab]) when `all_logits`.
  util::Status eval(int slot, std::span<const int32_t> ids, int n_past, bool all_logits, bool one_by_one,
                    std::vector<float>& logits);

 private:
  Engine() = default;
  EngineOptions options_;
  gguf::File file_;
  model::Spec spec_;
  std::unique_ptr<kernels::Backend> backend_;
  std::unique_ptr<model::Model> model_;
  kv::Cache cache_;
};

}  // namespace engine
