// model::Spec — a model's hyperparameters per layer, read once from GGUF; everyone else reads this.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "gguf/file.h"
#include "util/result.h"

namespace model {

enum class Arch {
  kLlama,
  kGemma4,
  // Gemma 4's assistant (multi-token prediction) drafter: not a model of its own; it drafts for a
  // Gemma 4 target, reading the target's KV cache and hidden state (model/assistant.h).
  kGemma4Assistant,
};
std::string_view arch_name(Arch arch);
// "llama, gemma4" — for errors that list what is supported.
std::string_view supported_arch_names();

enum class AttentionKind { kFull, kSliding };
std::string_view attention_kind_name(AttentionKind kind);

// How RoPE pairs dimensions inside a head of length head_dim.
enum class RopeStyle {
  kAdjacent,    // llama ("NORM"): rotates (x[2i], x[2i+1])
  kRotateHalf,  // NeoX / Gemma: rotates (x[i], x[i + n_rot/2])
};

struct RopeSpec {
  RopeStyle style = RopeStyle::kAdjacent;
  float theta = 10000.0f;  // frequency base
  int n_rot = 0;           // dims of the head that take part (even; ≤ head_dim)
  // Angle per unit position of pair i (size n_rot/2): theta^(-2i/n_rot) / freq_factor[i].
  // Gemma 4's proportional RoPE shows up here as pairs whose frequency is ~0 (§2.5).
  std::vector<float> inv_freq;
};

// The largest head dimension the kernels accept (their per-head buffers live on the stack).
inline constexpr int kMaxHeadDim = 1024;

struct LayerSpec {
  int il = 0;
  AttentionKind kind = AttentionKind::kFull;
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;   // same for K, V and Q (GGUF key_length == value_length)
  int window = 0;     // sliding window W: keys q-W+1..q are visible; 0 on full layers
  int kv_source = 0;  // layer whose K/V cache this layer attends to; == il when it owns its cache
  int n_ff = 0;       // dense FFN width
  bool has_v_proj = true;  // false: V is the raw K projection (Gemma 4 attention_k_eq_v, §2.3)
  RopeSpec rope;
  // Mixture of experts (Gemma 4 26B-A4B): routed experts on top of the dense FFN.
  int n_expert = 0;
  int n_expert_used = 0;
  int n_ff_exp = 0;

  bool owns_kv() const { return kv_source == il; }
  bool is_sliding() const { return kind == AttentionKind::kSliding; }
  bool is_moe() const { return n_expert > 0; }
  int q_dim() const { return n_head * head_dim; }
  int kv_dim() const { return n_head_kv * head_dim; }
};

struct Spec {
  Arch arch = Arch::kLlama;
  std::string name;  // general.name, or the architecture
  int n_layer = 0;
  int n_embd = 0;  // H
  int n_vocab = 0;
  int n_ctx_train = 0;
  float rms_eps = 1e-5f;
  float embed_scale = 1.0f;       // token embeddings are multiplied by this (Gemma: sqrt(H))
  float attention_scale = 1.0f;   // q·k multiplier (llama: 1/sqrt(head_dim); Gemma 4: 1)
  float final_logit_softcap = 0;  // 0 = none; Gemma 4: 30
  bool tied_output = false;       // logits use token_embd (no output.weight)
  int n_embd_per_layer = 0;       // Gemma 4 per-layer-embedding width P (0 = none)
  // A Gemma 4 assistant drafter: the target's hidden width N_b, which its input and output rows
  // have (n_embd is the drafter's own width); 0 for every other model.
  int n_embd_out = 0;
  std::vector<LayerSpec> layers;

  int n_layer_owning_kv() const;
  int max_head_dim() const;
};

// Reads the hyperparameters of a supported architecture from the file's metadata and tensor
// table (it does not read weights, except Gemma 4's 1 KB rope_freqs table). A drafter file
// (gemma4-assistant) is refused with a line saying to give it with --draft-model.
util::Result<Spec> spec_from_gguf(const gguf::File& file);
// The same for a Gemma 4 assistant drafter (docs/gemma4-assistant.md §2): its layers read the
// target's cache (kv_source −1; model::Assistant resolves which target layer) and own no K/V.
util::Result<Spec> drafter_spec_from_gguf(const gguf::File& file);

// What part of the model a tensor belongs to, for inventories (inspect, plan).
enum class TensorClass {
  kTokenEmbedding,     // token_embd: gathered by row (and read whole when tied to the output)
  kPerLayerEmbedding,  // Gemma 4 PLE: per_layer_token_embd (gathered) and its projections
  kAttention,
  kFeedForward,
  kExperts,  // MoE expert matrices and router
  kNorm,     // norm weights and small per-layer scales
  kOutput,   // output.weight
  kOther,    // rope_freqs and anything unrecognized
};
std::string_view tensor_class_name(TensorClass cls);
constexpr int kTensorClassCount = 8;

struct TensorClassification {
  TensorClass cls = TensorClass::kOther;
  int layer = -1;  // blk.N → N; -1 for global tensors
  // Read into host values when the model loads (RoPE factors into the spec, per-layer output
  // scales): never placed in a GPU's memory; it stays in the file mapping wherever the model runs.
  bool host_value = false;
};
TensorClassification classify_tensor(std::string_view name);

}  // namespace model
