// model::Model — a loaded architecture: bound weights plus its forward pass over a batch.
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "gguf/file.h"
#include "kernels/ops.h"
#include "kv/cache.h"
#include "kv/geometry.h"
#include "model/lora.h"
#include "model/placement.h"
#include "model/spec.h"
#include "model/weights.h"
#include "util/aligned_buffer.h"
#include "util/result.h"

namespace model {

// One forward pass: any mix of sequences (slots) and positions, e.g. a prefill micro-batch of
// one sequence or one decode token from each of 32 sequences.
struct Batch {
  std::span<const int32_t> tokens;  // [T]
  std::span<const int32_t> pos;     // [T] position of each token in its sequence
  std::span<const int32_t> slot;    // [T] KV cache slot (sequence) of each token
  std::span<const uint8_t> output;  // [T] 1 where logits are wanted; empty = last token only
  // LoRA (model/lora.h): per token, the adapter slot it runs under (Model::attach_lora; −1: the
  // base model) and its scale. Both empty when no token of the batch uses an adapter.
  std::span<const int32_t> adapter;      // [T]
  std::span<const float> adapter_scale;  // [T]
  // Rows whose input is an embedding instead of a token's (the soft tokens of an image or audio
  // clip, mm/): where embedded[t] is 1, row t of `embeddings` ([T][n_embd], host memory) is the
  // row's input as it is — not scaled like a token's embedding. Both empty: every row is a token.
  std::span<const uint8_t> embedded;
  std::span<const float> embeddings;
  // [T] each, or both empty: the image each token sees both ways on sliding-window layers, its
  // first and last positions (kernels::AttentionBatch::attend_from/attend_until) — its own
  // position for a token outside such an image. Empty: every token is causal.
  std::span<const int32_t> attend_from, attend_until;
  int size() const { return static_cast<int>(tokens.size()); }
  bool has_adapters() const {
    return std::any_of(adapter.begin(), adapter.end(), [](int32_t a) { return a >= 0; });
  }
  bool has_embeddings() const { return !embedded.empty(); }
};

// The token id the ops see for a row whose input is an embedding: what a model's per-token tables
// read there. Gemma 4's per-layer inputs take the pad token's row (0) for soft tokens, as Hugging
// Face's Gemma4Model (pad_token_id in place of the placeholder) and llama.cpp (row 0) do.
inline constexpr int32_t kEmbeddedRowToken = 0;

// What a forward pass hands back for the rows that want output (Batch::output), in batch order.
struct Outputs {
  // The most candidates top_k may ask for (a GPU selects them; kernels::Backend::top_k).
  static constexpr int kMaxTopK = 64;
  // [n_out][n_vocab]: every logit of each row when top_k is 0; otherwise working memory whose
  // contents are left unspecified.
  float* logits = nullptr;
  // 1..kMaxTopK: only each row's top_k largest logits, largest first (ties: the lower id first) —
  // all that greedy and top-k sampling read, and all that leaves a GPU.
  int top_k = 0;
  int32_t* top_ids = nullptr;   // [n_out][top_k]
  float* top_logits = nullptr;  // [n_out][top_k]
  // [n_out][n_embd], or null: each row's hidden state after the final norm, before the head — what
  // a Gemma 4 assistant drafter starts from (model/assistant.h). On a backend with memory of its
  // own the model must be loaded with LoadOptions::hidden (the rows come back through page-locked
  // memory, with the pass's other outputs).
  float* hidden = nullptr;
};

// A named intermediate of a forward pass, with llama.cpp's names (attn_norm, Qcur, Kcur, Vcur,
// attn_out, ffn_inp, ffn_out, l_out, result_norm) so dumps line up with a reference: rows
// [n_tokens][width] of the pass's tokens, in host memory, valid during the call; layer -1 for
// the whole model's.
struct TracedTensor {
  std::string_view name;
  int layer = -1;
  int n_tokens = 0;
  int64_t width = 0;
  const float* data = nullptr;
};
// Sees every traced tensor of every pass (LoadOptions::trace). Tracing reads device tensors back,
// so it is for finding where two computations diverge, not for speed.
using TraceHook = std::function<void(const TracedTensor&)>;

// Per-layer cache geometry of a model, in the form the KV cache and the planner read.
std::vector<kv::LayerGeometry> kv_layers(const Spec& spec);

class Model {
 public:
  virtual ~Model() = default;
  virtual const Spec& spec() const = 0;
  // Evaluates `batch` (at most max_batch() tokens, positions already reserved in `cache`) and
  // hands back what `out` asks for the tokens flagged in `batch.output`.
  virtual util::Status forward(const Batch& batch, kv::Cache& cache, const Outputs& out) = 0;
  // The same, writing whole logits [n_outputs][n_vocab].
  util::Status forward(const Batch& batch, kv::Cache& cache, float* logits) {
    return forward(batch, cache, Outputs{.logits = logits});
  }
  virtual int max_batch() const = 0;
  // Bytes of activation scratch this model allocated for max_batch() tokens.
  virtual size_t workspace_bytes() const = 0;
  // Bytes of weights copied into the backend's own memory (a GPU's); 0 when they stay mapped.
  virtual size_t placed_weight_bytes() const { return 0; }
  // Bytes of page-locked host memory a device lane stages through (model/stage.h).
  virtual size_t staging_bytes() const { return 0; }

  // LoRA adapters (model/lora.h), held in the slots LoadOptions::lora provides: attach_lora makes
  // `adapter` usable by Batch::adapter under the slot it returns; detach_lora frees the slot.
  virtual util::Result<int> attach_lora(const LoraAdapter& adapter) = 0;
  virtual void detach_lora(int slot) = 0;
  // Bytes of the adapter slots (every lane's), allocated when the model loads.
  virtual size_t lora_pool_bytes() const = 0;
};

struct LoadOptions {
  int max_batch = 512;  // largest micro-batch the workspace is sized for
  // Null: weights stay in the host mapping, or go to the backend's memory when it has its own.
  TensorPlacer* placer = nullptr;
  // Where each part runs (model/lanes.h): the parts `placement` puts on the host (device 0) while
  // its main device is another (a split run) run on `host`, a backend computing in host memory,
  // on weights in the file mapping; the backend given to load_model runs the rest. An empty
  // placement (or no host backend) runs everything there.
  kernels::Backend* host = nullptr;
  Placement placement;
  TraceHook trace;  // null: no tracing, and a traced step costs one test of this
  LoraLimits lora;  // adapter slots (none by default)
  // A drafter's layers read another model's cache and write none: the cache layer each layer
  // reads. Empty: each layer reads (and writes) its own.
  std::vector<int> cache_layers;
  // Passes may ask for Outputs::hidden: on a device, page-locked rows for max_batch hidden states
  // (priced by staging_bytes with the same flag).
  bool hidden = false;
};

// Shared by the architectures' forward passes.
kernels::RopeStyle to_kernel(RopeStyle style);
// Fills rows[] with the batch indices whose logits are wanted; returns how many.
int gather_output_rows(const Batch& batch, int32_t* rows);

// Binds weights and builds the architecture's forward pass on `backend`.
util::Result<std::unique_ptr<Model>> load_model(const gguf::File& file, const Spec& spec,
                                                kernels::Backend& backend,
                                                const LoadOptions& options);

// Scratch sizes for planning: activation bytes a model needs for `max_batch` tokens, on a device
// (with the 8-bit activations, attention's split states and the logits chunk a GPU's decode
// uses) or in host memory.
size_t workspace_bytes(const Spec& spec, int max_batch, bool device);
// Page-locked host memory a device lane stages its passes through (model/stage.h): zero for a host.
// `hidden`: LoadOptions::hidden.
size_t staging_bytes(const Spec& spec, int max_batch, bool device, bool hidden = false);
// The widest input of any matrix product of the forward pass (the CPU kernels size their
// activation scratch with it).
int64_t max_matmul_cols(const Spec& spec);

}  // namespace model
