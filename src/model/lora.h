// LoRA adapters, applied unmerged: model::LoraAdapter reads one in the GGUF form llama.cpp's
// converter writes (convert_lora_to_gguf.py) and checks it against the base model;
// model::LoraBank holds adapters in slots on the lanes of the layers they adapt and adds, after
// each adapted product, every token's own term: y = W·x + scale·B·(A·x).
//
// The file: general.type "adapter", adapter.type "lora", general.architecture the base model's,
// adapter.lora.alpha, and for each adapted matrix W of the base (named as in the base file) a
// pair W.lora_a {n_cols, rank} and W.lora_b {rank, n_rows}, so that W' = W + s·B·A with
// s = user scale × alpha / rank (alpha 0: the user scale alone, as llama.cpp does).
//
// Targets: the attention's q, k, v and output projections and the MLP's gate, up and down. A
// Gemma 4 KV-shared layer computes no K or V — it attends to its source layer's cache — so an
// update of its k or v projection changes nothing: such pairs are checked and left out (counted
// in LoraAdapter::n_ignored); an adapter that should change what those layers see adapts the
// source layer's k and v.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/file.h"
#include "kernels/buffer.h"
#include "kernels/ops.h"
#include "model/spec.h"
#include "util/result.h"

namespace model {

struct Batch;

enum class LoraTarget { kQ, kK, kV, kO, kGate, kUp, kDown };
inline constexpr int kLoraTargets = 7;
// The base tensor's name in layer il: "blk.{il}.attn_q.weight", …
std::string lora_base_tensor(int il, LoraTarget target);

// One adapted matrix: A {n_cols, rank} and B {rank, n_rows} in the adapter's file.
struct LoraPair {
  int il = 0;
  LoraTarget target = LoraTarget::kQ;
  const gguf::TensorInfo* a = nullptr;
  const gguf::TensorInfo* b = nullptr;
  int rank = 0;
  int64_t n_cols = 0, n_rows = 0;
};

class LoraAdapter {
 public:
  // Opens `path` and checks it against the base model (its file and spec). Errors are one line
  // naming the file and the tensor: not an adapter, another architecture, a tensor the base model
  // has not or of another shape (an adapter for another base model), a pair missing its other
  // half or of two ranks, a target headroom does not adapt.
  static util::Result<LoraAdapter> open(const std::string& path, const gguf::File& base,
                                        const Spec& spec);

  const std::string& path() const { return path_; }
  float alpha() const { return alpha_; }
  int max_rank() const { return max_rank_; }
  // The pairs applied (KV-shared layers' k and v left out), in file order.
  const std::vector<LoraPair>& pairs() const { return pairs_; }
  int n_ignored() const { return n_ignored_; }
  // alpha / rank of a pair (1 with alpha 0): multiplied into B when the adapter is attached.
  float factor(const LoraPair& p) const { return alpha_ == 0.0f ? 1.0f : alpha_ / p.rank; }
  // Bytes of the applied pairs as the model holds them (f32).
  size_t bytes() const;

 private:
  std::string path_;
  std::shared_ptr<const gguf::File> file_;  // the pairs point into it
  float alpha_ = 0;
  int max_rank_ = 0;
  std::vector<LoraPair> pairs_;
  int n_ignored_ = 0;
};

// How many adapters a model holds at once and their largest rank. The planner prices max_loras
// slots, each with room for an adapter of rank max_rank on every target of every layer; none when
// max_loras is 0.
struct LoraLimits {
  int max_loras = 0;
  int max_rank = 0;
  bool enabled() const { return max_loras > 0 && max_rank > 0; }
};

// Bytes of one slot for the layers `holds` selects (a device's share of a split run).
size_t lora_slot_bytes(const Spec& spec, int max_rank, const std::function<bool(int il)>& holds);
// Working memory of a lane for batches of up to max_batch tokens: what its ops read (the scratch
// and each slot's per-token scales) and, on a device, the page-locked host side of the scales.
struct LoraWorkspace {
  size_t ops_bytes = 0;
  size_t staging_bytes = 0;
};
LoraWorkspace lora_workspace_bytes(const LoraLimits& limits, int max_batch, bool device);

class LoraBank {
 public:
  // Lane i computes on backends[i]; layer il runs on lane lane_of[il]. Allocates the slots and
  // the working memory each lane needs: exactly what the planner priced.
  util::Status init(const Spec& spec, const LoraLimits& limits, int max_batch,
                    std::vector<kernels::Backend*> backends, std::vector<int> lane_of);

  // Holds `adapter` in a free slot — its matrices as f32, B times alpha / rank, copied to the
  // lanes of their layers — and returns the slot (Batch::adapter's values).
  util::Result<int> attach(const LoraAdapter& adapter);
  void detach(int slot);

  // Per pass: the slots the batch's tokens use, with each token's scale in a row per slot on
  // every lane. A batch without adapter tokens makes the pass the base model's, op for op.
  void begin(const Batch& batch);
  // Whether some token of this pass runs under an adapter that adapts (il, target).
  bool adapts(int il, LoraTarget target) const;
  // y += the terms of (il, target) of every adapter in the pass (x, y in lane's memory).
  void apply(int lane, int il, LoraTarget target, const float* x, float* y, int n_tokens);

  size_t pool_bytes() const;  // the slots, every lane
  LoraWorkspace workspace_bytes() const;

 private:
  struct Lane {
    kernels::Backend* ops = nullptr;
    kernels::Buffer pool;  // [max_loras] slots of slot_bytes
    size_t slot_bytes = 0;
    kernels::Buffer scratch;        // [max_batch][max_rank]
    kernels::Staged<float> scales;  // [max_loras][n_tokens of the pass]
  };
  struct Place {
    size_t a = 0, b = 0;  // offsets of A and B in a slot, in floats
    int64_t n_cols = 0, n_rows = 0;
    bool exists = false;
  };
  Place& place(int il, LoraTarget t) { return places_[il * kLoraTargets + static_cast<int>(t)]; }
  const Place& place(int il, LoraTarget t) const {
    return places_[il * kLoraTargets + static_cast<int>(t)];
  }

  LoraLimits limits_;
  int max_batch_ = 0;
  std::vector<Lane> lanes_;
  std::vector<int> lane_of_;
  std::vector<Place> places_;            // [il][target]
  std::vector<std::vector<int>> ranks_;  // [slot][il · kLoraTargets + target], 0: not adapted
  std::vector<bool> used_;               // [slot]
  std::vector<int> in_pass_;             // slots the current pass's tokens use
  int n_tokens_ = 0;
  std::vector<kernels::LoraTerm> terms_;  // apply()'s, kept to allocate nothing per call
};

}  // namespace model
