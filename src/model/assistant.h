// model::Assistant — Gemma 4's assistant (multi-token prediction) drafter, as llama.cpp reads its
// GGUF (architecture gemma4-assistant; docs/gemma4-assistant.md). It has no KV cache of its own:
// each of its layers is a query-only attention into the target's cache (sliding layers read the
// target's last layer that owns a sliding cache, full layers the last that owns a full one), fed
// by the target's hidden state after its final norm. One step drafts one token per sequence:
//   x0 = W_pre · [E_target[token] · √N_b ; h]     (N_b: the target's width)
//   each layer: q = rope(norm(W_q · norm(x)), P); attention over the target's keys before P;
//     x += norm(W_o · att); x = (x + norm(FFN(norm(x)))) · layer_output_scale
//   y = norm(x); logits = E_drafter · y; h_next = W_post · y
// where P is the position of `token`, the same for every step of a round; h is the target's
// hidden state at P − 1 in the first step and the previous step's h_next after it.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "gguf/file.h"
#include "kernels/ops.h"
#include "kv/cache.h"
#include "model/model.h"
#include "model/spec.h"
#include "util/result.h"

namespace model {

// One drafter step for T sequences, one row each.
struct DraftBatch {
  std::span<const int32_t> tokens;  // [T] the token each row drafts after (at position pos + 1)
  std::span<const int32_t> pos;     // [T] the last position of the sequence in the target's cache
  std::span<const int32_t> slot;    // [T] the sequence's slot in the target's cache
  const float* hidden = nullptr;    // [T][n_embd_out] in host memory
  int size() const { return static_cast<int>(tokens.size()); }
};

// The target layer each drafter layer reads: the last layer of the target that owns a cache of
// the layer's kind. An error names a drafter that does not fit the target (widths, vocabulary,
// head geometry of the layer it reads).
util::Result<std::vector<int>> assistant_cache_layers(const Spec& drafter, const Spec& target);

class Assistant {
 public:
  virtual ~Assistant() = default;
  virtual const Spec& spec() const = 0;
  // Evaluates one step for every row of `batch` (at most max_batch()), reading the target's
  // `cache`: `out` as a model's outputs (every row wants output), and each row's h_next into
  // hidden_next ([T][n_embd_out], host memory; it may be batch.hidden).
  virtual util::Status step(const DraftBatch& batch, kv::Cache& cache, const Outputs& out,
                            float* hidden_next) = 0;
  virtual int max_batch() const = 0;
  // Bytes of activations it allocated: the ops' and, on a device, its page-locked staging.
  virtual size_t workspace_bytes() const = 0;
  // Bytes of weights copied into a device's memory (0 on a host: they stay in the file mapping).
  virtual size_t placed_weight_bytes() const = 0;
};

// Binds the drafter's weights on `backend`, which holds the target's cache (the target's token
// embedding stays in the target's file mapping: the host gathers a row per drafted token).
util::Result<std::unique_ptr<Assistant>> load_assistant(const gguf::File& file, const Spec& spec,
                                                        const gguf::File& target_file,
                                                        const Spec& target_spec,
                                                        kernels::Backend& backend, int max_batch);

// The planner's figures for max_batch rows: the activations in the memory of the ops (a device's,
// or the host's), and the page-locked host memory a device stages its steps through (0 on a host).
size_t assistant_workspace_bytes(const Spec& spec, int max_batch, bool device);
size_t assistant_staging_bytes(const Spec& spec, int max_batch, bool device);

}  // namespace model
