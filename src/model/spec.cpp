// model::Spec from GGUF metadata: the llama and Gemma 4 hyperparameter rules (spec §1, §3.5).
#include "model/spec.h"

#include <cmath>
#include <cstring>

#include "kernels/ops.h"
#include "model/metadata.h"
#include "util/log.h"

namespace model {
namespace {

// Frequencies of RoPE pairs: theta^(-2i/n_rot) divided by an optional per-pair factor (ggml's
// rope_freqs semantics; a factor of 1e30 switches a pair off).
std::vector<float> rope_inv_freq(float theta, int n_rot, const std::vector<float>& factors) {
  std::vector<float> inv(n_rot / 2);
  for (int i = 0; i < n_rot / 2; ++i) {
    double f = std::pow(static_cast<double>(theta), -2.0 * i / n_rot);
    if (!factors.empty()) f /= factors[i];
    inv[i] = static_cast<float>(f);
  }
  return inv;
}

// The f32 values of a small global tensor such as rope_freqs.weight (read from the mapping).
util::Result<std::vector<float>> read_f32_vector(const Metadata& meta, std::string_view name,
                                                 size_t expected) {
  const gguf::TensorInfo* t = meta.file().find_tensor(name);
  if (t->type != gguf::TensorType::kF32 || t->n_elements != expected) {
    return meta.error(
        fmt::format("tensor '{}' must be F32 with {} values (found {} with {}) — "
                    "re-convert the model",
                    name, expected, gguf::tensor_type_name(t->type), t->n_elements));
  }
  std::vector<float> out(expected);
  std::memcpy(out.data(), t->data.data(), expected * sizeof(float));
  return out;
}

int vocab_size(const gguf::File& file) {
  if (const auto* t = file.find_tensor("token_embd.weight")) return static_cast<int>(t->ne[1]);
  if (const auto* v = file.find("tokenizer.ggml.tokens")) return static_cast<int>(v->array_size());
  return 0;
}

util::Status check_heads(const Metadata& meta, const LayerSpec& l) {
  if (l.n_head <= 0 || l.n_head_kv <= 0 || l.head_dim <= 0 || l.n_head % l.n_head_kv != 0) {
    return meta.error(
        fmt::format("layer {}: {} query heads, {} KV heads, head dim {} are inconsistent "
                    "(query heads must be a positive multiple of KV heads)",
                    l.il, l.n_head, l.n_head_kv, l.head_dim));
  }
  if (l.head_dim > kMaxHeadDim) {
    return meta.error(fmt::format("layer {}: head dim {} is larger than the {} headroom supports",
                                  l.il, l.head_dim, kMaxHeadDim));
  }
  if (l.rope.n_rot % 2 != 0 || l.rope.n_rot > l.head_dim) {
    return meta.error(
        fmt::format("layer {}: RoPE dimension count {} must be even and at most the head "
                    "dim {}",
                    l.il, l.rope.n_rot, l.head_dim));
  }
  return {};
}

util::Result<Spec> llama_spec(const gguf::File& file) {
  Metadata meta(file, "llama");
  Spec s;
  s.arch = Arch::kLlama;
  HR_ASSIGN_OR_RETURN(int64_t n_layer, meta.integer("block_count", std::nullopt));
  HR_ASSIGN_OR_RETURN(int64_t n_embd, meta.integer("embedding_length", std::nullopt));
  HR_ASSIGN_OR_RETURN(int64_t n_ctx, meta.integer("context_length", 2048));
  HR_ASSIGN_OR_RETURN(s.rms_eps, meta.number("attention.layer_norm_rms_epsilon", 1e-5f));
  HR_ASSIGN_OR_RETURN(int64_t n_expert, meta.integer("expert_count", 0));
  if (n_expert > 0) {
    return meta.error("llama mixture-of-experts models (Mixtral-style) are not supported yet");
  }
  s.n_layer = static_cast<int>(n_layer);
  s.n_embd = static_cast<int>(n_embd);
  s.n_ctx_train = static_cast<int>(n_ctx);
  HR_ASSIGN_OR_RETURN(auto n_head, meta.per_layer("attention.head_count", s.n_layer, std::nullopt));
  HR_ASSIGN_OR_RETURN(auto n_head_kv, meta.per_layer("attention.head_count_kv", s.n_layer,
                                                     n_head.empty() ? 0 : n_head[0]));
  HR_ASSIGN_OR_RETURN(auto n_ff, meta.per_layer("feed_forward_length", s.n_layer, std::nullopt));
  const int64_t default_head_dim = n_head.empty() || n_head[0] == 0 ? 0 : n_embd / n_head[0];
  HR_ASSIGN_OR_RETURN(int64_t head_dim, meta.integer("attention.key_length", default_head_dim));
  HR_ASSIGN_OR_RETURN(int64_t n_rot, meta.integer("rope.dimension_count", head_dim));
  HR_ASSIGN_OR_RETURN(float theta, meta.number("rope.freq_base", 10000.0f));

  // Linear RoPE scaling divides every frequency by the factor; other schemes are not supported.
  float freq_scale = 1.0f;
  if (const gguf::Value* v = file.find("llama.rope.scaling.type")) {
    std::string_view type = v->as_string().value_or("");
    if (type == "linear") {
      HR_ASSIGN_OR_RETURN(float factor, meta.number("rope.scaling.factor", 1.0f));
      if (factor > 0) freq_scale = 1.0f / factor;
    } else if (type != "none" && !type.empty()) {
      return meta.error(
          fmt::format("RoPE scaling '{}' is not supported (supported: none, linear)", type));
    }
  }
  std::vector<float> factors;
  if (file.find_tensor("rope_freqs.weight")) {
    HR_ASSIGN_OR_RETURN(factors,
                        read_f32_vector(meta, "rope_freqs.weight", static_cast<size_t>(n_rot / 2)));
  }
  RopeSpec rope{.style = RopeStyle::kAdjacent,
                .theta = theta,
                .n_rot = static_cast<int>(n_rot),
                .inv_freq = rope_inv_freq(theta, static_cast<int>(n_rot), factors)};
  for (float& f : rope.inv_freq) f *= freq_scale;

  for (int il = 0; il < s.n_layer; ++il) {
    LayerSpec l;
    l.il = il;
    l.kind = AttentionKind::kFull;
    l.n_head = n_head[il];
    l.n_head_kv = n_head_kv[il];
    l.head_dim = static_cast<int>(head_dim);
    l.kv_source = il;
    l.n_ff = n_ff[il];
    l.rope = rope;
    HR_TRY(check_heads(meta, l));
    s.layers.push_back(std::move(l));
  }
  s.attention_scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  s.tied_output = file.find_tensor("output.weight") == nullptr;
  s.n_vocab = vocab_size(file);
  return s;
}

// KV sharing (§1.3): a shared layer reads the cache of the last non-shared layer of its kind
// (HF rule). llama.cpp uses a fixed formula instead; both agree on real Gemma 4 files, and a
// disagreement is reported because the two engines would then compute different things.
util::Status assign_kv_sources(const Metadata& meta, Spec& s, int n_shared) {
  const int first_shared = s.n_layer - n_shared;
  if (n_shared < 0 || first_shared < 0) {
    return meta.error(
        fmt::format("shared_kv_layers {} exceeds the layer count {}", n_shared, s.n_layer));
  }
  for (auto& l : s.layers) {
    l.kv_source = l.il;
    if (l.il < first_shared) continue;
    int source = -1;
    for (int j = first_shared - 1; j >= 0; --j) {
      if (s.layers[j].kind == l.kind) {
        source = j;
        break;
      }
    }
    if (source < 0) {
      return meta.error(
          fmt::format("layer {} shares KV but no earlier {} layer owns a cache — the "
                      "layer pattern is inconsistent",
                      l.il, attention_kind_name(l.kind)));
    }
    const int llama_cpp_source = l.is_sliding() ? first_shared - 2 : first_shared - 1;
    if (source != llama_cpp_source) {
      util::log_warn(
          "{}: layer {} reads the KV cache of layer {} (Hugging Face rule); llama.cpp would "
          "use layer {} for this unusual layer pattern",
          meta.file().name(), l.il, source, llama_cpp_source);
    }
    const LayerSpec& src = s.layers[source];
    if (src.head_dim != l.head_dim || src.n_head_kv != l.n_head_kv) {
      return meta.error(
          fmt::format("layer {} shares the KV cache of layer {} but their head geometry "
                      "differs",
                      l.il, source));
    }
    l.kv_source = source;
  }
  return {};
}

// Gemma 4's layers as its metadata describes them (spec §1, §2.5), read alike for a model and for
// its assistant drafter (whose keys sit under its own prefix): each layer's kind, heads, head dim,
// window, FFN width and RoPE. Sources of KV, experts and V projections are the caller's. The
// head and RoPE sizes are checked before the RoPE tables are sized by them.
util::Result<std::vector<LayerSpec>> gemma4_layers(const Metadata& meta, int L) {
  HR_ASSIGN_OR_RETURN(auto n_head, meta.per_layer("attention.head_count", L, std::nullopt));
  HR_ASSIGN_OR_RETURN(auto n_head_kv, meta.per_layer("attention.head_count_kv", L, std::nullopt));
  HR_ASSIGN_OR_RETURN(auto n_ff, meta.per_layer("feed_forward_length", L, std::nullopt));
  HR_ASSIGN_OR_RETURN(int64_t hd_full, meta.integer("attention.key_length", std::nullopt));
  HR_ASSIGN_OR_RETURN(int64_t hd_swa, meta.integer("attention.key_length_swa", hd_full));
  HR_ASSIGN_OR_RETURN(int64_t vd_full, meta.integer("attention.value_length", hd_full));
  HR_ASSIGN_OR_RETURN(int64_t vd_swa, meta.integer("attention.value_length_swa", hd_swa));
  if (vd_full != hd_full || vd_swa != hd_swa) {
    return meta.error(
        "key and value head dims differ; Gemma 4 requires key_length == value_length");
  }
  HR_ASSIGN_OR_RETURN(int64_t window, meta.integer("attention.sliding_window", 0));
  HR_ASSIGN_OR_RETURN(auto sliding, meta.per_layer_bool("attention.sliding_window_pattern", L));
  HR_ASSIGN_OR_RETURN(float theta_full, meta.number("rope.freq_base", 1e6f));
  HR_ASSIGN_OR_RETURN(float theta_swa, meta.number("rope.freq_base_swa", 1e4f));
  HR_ASSIGN_OR_RETURN(int64_t rot_full, meta.integer("rope.dimension_count", hd_full));
  HR_ASSIGN_OR_RETURN(int64_t rot_swa, meta.integer("rope.dimension_count_swa", hd_swa));
  for (const auto& [rot, hd] : {std::pair{rot_full, hd_full}, std::pair{rot_swa, hd_swa}}) {
    if (rot < 0 || rot % 2 != 0 || rot > hd || hd > kMaxHeadDim) {
      return meta.error(
          fmt::format("RoPE dimension count {} must be even and at most the head "
                      "dim {} (at most {})",
                      rot, hd, kMaxHeadDim));
    }
  }

  // Full layers use proportional RoPE (§2.5): the file's rope_freqs switches pairs off; without
  // it, the released partial_rotary_factor 0.25 is applied directly.
  std::vector<float> factors;
  if (meta.file().find_tensor("rope_freqs.weight")) {
    HR_ASSIGN_OR_RETURN(
        factors, read_f32_vector(meta, "rope_freqs.weight", static_cast<size_t>(rot_full / 2)));
  } else {
    factors.assign(rot_full / 2, 1e30f);
    for (int64_t i = 0; i < rot_full / 8; ++i) factors[i] = 1.0f;
  }
  const RopeSpec rope_full{
      .style = RopeStyle::kRotateHalf,
      .theta = theta_full,
      .n_rot = static_cast<int>(rot_full),
      .inv_freq = rope_inv_freq(theta_full, static_cast<int>(rot_full), factors)};
  const RopeSpec rope_swa{.style = RopeStyle::kRotateHalf,
                          .theta = theta_swa,
                          .n_rot = static_cast<int>(rot_swa),
                          .inv_freq = rope_inv_freq(theta_swa, static_cast<int>(rot_swa), {})};
  std::vector<LayerSpec> layers;
  for (int il = 0; il < L; ++il) {
    LayerSpec l;
    l.il = il;
    l.kind = sliding[il] ? AttentionKind::kSliding : AttentionKind::kFull;
    l.n_head = n_head[il];
    l.n_head_kv = n_head_kv[il];
    l.head_dim = static_cast<int>(l.is_sliding() ? hd_swa : hd_full);
    l.window = l.is_sliding() ? static_cast<int>(window) : 0;
    l.kv_source = il;
    l.n_ff = n_ff[il];
    l.rope = l.is_sliding() ? rope_swa : rope_full;
    if (l.is_sliding() && l.window <= 0) {
      return meta.error("sliding layers need attention.sliding_window > 0 — re-convert the model");
    }
    HR_TRY(check_heads(meta, l));
    layers.push_back(std::move(l));
  }
  return layers;
}

util::Result<Spec> gemma4_spec(const gguf::File& file) {
  Metadata meta(file, "gemma4");
  Spec s;
  s.arch = Arch::kGemma4;
  HR_ASSIGN_OR_RETURN(int64_t n_layer, meta.integer("block_count", std::nullopt));
  HR_ASSIGN_OR_RETURN(int64_t n_embd, meta.integer("embedding_length", std::nullopt));
  HR_ASSIGN_OR_RETURN(int64_t n_ctx, meta.integer("context_length", 131072));
  HR_ASSIGN_OR_RETURN(s.rms_eps, meta.number("attention.layer_norm_rms_epsilon", 1e-6f));
  HR_ASSIGN_OR_RETURN(s.final_logit_softcap, meta.number("final_logit_softcapping", 0.0f));
  HR_ASSIGN_OR_RETURN(int64_t ple, meta.integer("embedding_length_per_layer_input", 0));
  HR_ASSIGN_OR_RETURN(int64_t n_shared, meta.integer("attention.shared_kv_layers", 0));
  HR_ASSIGN_OR_RETURN(int64_t n_expert, meta.integer("expert_count", 0));
  HR_ASSIGN_OR_RETURN(int64_t n_expert_used, meta.integer("expert_used_count", 0));
  HR_ASSIGN_OR_RETURN(int64_t n_ff_exp, meta.integer("expert_feed_forward_length", 0));
  s.n_layer = static_cast<int>(n_layer);
  HR_ASSIGN_OR_RETURN(s.layers, gemma4_layers(meta, s.n_layer));
  s.n_embd = static_cast<int>(n_embd);
  s.n_ctx_train = static_cast<int>(n_ctx);
  s.n_embd_per_layer = static_cast<int>(ple);

  for (LayerSpec& l : s.layers) {
    if (!file.find_tensor(fmt::format("blk.{}.ffn_gate_inp.weight", l.il))) continue;
    l.n_expert = static_cast<int>(n_expert);
    l.n_expert_used = static_cast<int>(n_expert_used);
    l.n_ff_exp = static_cast<int>(n_ff_exp);
    if (l.n_expert <= 0 || l.n_expert_used <= 0 || l.n_expert_used > l.n_expert ||
        l.n_ff_exp <= 0) {
      return meta.error(
          fmt::format("layer {} has a router but expert_count {}, expert_used_count {}, "
                      "expert_feed_forward_length {} are inconsistent",
                      l.il, n_expert, n_expert_used, n_ff_exp));
    }
    if (l.n_expert > kernels::kMaxExperts) {
      return meta.error(fmt::format("layer {}: {} experts; headroom routes at most {}", l.il,
                                    n_expert, kernels::kMaxExperts));
    }
  }
  HR_TRY(assign_kv_sources(meta, s, static_cast<int>(n_shared)));
  for (auto& l : s.layers) {
    l.has_v_proj =
        !l.owns_kv() || file.find_tensor(fmt::format("blk.{}.attn_v.weight", l.il)) != nullptr;
  }
  // llama.cpp parity: exact fp32 sqrt(H), not HF's bf16-rounded constant (spec §2.1, §8.5).
  s.embed_scale = std::sqrt(static_cast<float>(s.n_embd));
  s.attention_scale = 1.0f;
  s.tied_output = file.find_tensor("output.weight") == nullptr;
  s.n_vocab = vocab_size(file);
  return s;
}

// A drafter layer's widths as its tensors have them (the planner prices them before the weights
// are bound), and the projections' against the two hidden widths.
util::Status check_drafter_layer(const Metadata& meta, const LayerSpec& l, int64_t n_embd,
                                 int64_t n_embd_out) {
  const gguf::File& file = meta.file();
  auto rows = [&](const std::string& name, int64_t cols) -> int64_t {
    const gguf::TensorInfo* t = file.find_tensor(name);
    return t != nullptr && t->n_dims == 2 && static_cast<int64_t>(t->ne[0]) == cols
               ? static_cast<int64_t>(t->ne[1])
               : -1;
  };
  const std::string q = fmt::format("blk.{}.attn_q.weight", l.il);
  const std::string gate = fmt::format("blk.{}.ffn_gate.weight", l.il);
  if (rows(q, n_embd) != int64_t{l.n_head} * l.head_dim || rows(gate, n_embd) != l.n_ff) {
    return meta.error(
        fmt::format("layer {}: {} and {} must be {{{}, {}}} and {{{}, {}}} as the metadata says — "
                    "re-convert the drafter",
                    l.il, q, gate, n_embd, int64_t{l.n_head} * l.head_dim, n_embd, l.n_ff));
  }
  if (l.il == 0 && rows("nextn.pre_projection.weight", 2 * n_embd_out) != n_embd) {
    return meta.error(
        fmt::format("nextn.pre_projection.weight must be {{{}, {}}} (2 × embedding_length_out, "
                    "embedding_length) — re-convert the drafter",
                    2 * n_embd_out, n_embd));
  }
  return {};
}

// A Gemma 4 assistant drafter (docs/gemma4-assistant.md §2): Gemma 4's layer keys under its own
// prefix, Q-only layers, no PLE or MoE, and the target's hidden width as embedding_length_out.
util::Result<Spec> gemma4_assistant_spec(const gguf::File& file) {
  Metadata meta(file, "gemma4-assistant");
  Spec s;
  s.arch = Arch::kGemma4Assistant;
  HR_ASSIGN_OR_RETURN(int64_t n_layer, meta.integer("block_count", std::nullopt));
  HR_ASSIGN_OR_RETURN(int64_t n_embd, meta.integer("embedding_length", std::nullopt));
  HR_ASSIGN_OR_RETURN(int64_t n_embd_out, meta.integer("embedding_length_out", std::nullopt));
  HR_ASSIGN_OR_RETURN(int64_t n_ctx, meta.integer("context_length", 131072));
  HR_ASSIGN_OR_RETURN(s.rms_eps, meta.number("attention.layer_norm_rms_epsilon", 1e-6f));
  // Each layer has its query matrix: a block count beyond the file's tensors is refused before
  // anything is sized by it.
  if (n_layer <= 0 || n_embd <= 0 || n_embd_out <= 0 ||
      n_layer > static_cast<int64_t>(file.tensors().size())) {
    return meta.error(
        fmt::format("block_count {}, embedding_length {}, embedding_length_out {} "
                    "must be positive and block_count at most the tensors' count",
                    n_layer, n_embd, n_embd_out));
  }
  s.n_layer = static_cast<int>(n_layer);
  HR_ASSIGN_OR_RETURN(s.layers, gemma4_layers(meta, s.n_layer));
  s.n_embd = static_cast<int>(n_embd);
  s.n_embd_out = static_cast<int>(n_embd_out);
  s.n_ctx_train = static_cast<int>(n_ctx);
  for (LayerSpec& l : s.layers) {
    l.kv_source = -1;  // the target's cache
    l.has_v_proj = false;
    // A drafter query sees keys before its own position (pos − W, pos): W ≥ 2 keeps a key.
    if (l.is_sliding() && l.window < 2) {
      return meta.error("sliding layers need attention.sliding_window ≥ 2 — re-convert the model");
    }
    HR_TRY(check_drafter_layer(meta, l, s.n_embd, n_embd_out));
  }
  s.embed_scale = std::sqrt(static_cast<float>(s.n_embd_out));  // the target's embedding, scaled
  s.attention_scale = 1.0f;
  s.tied_output = true;
  s.n_vocab = vocab_size(file);
  return s;
}

// The checks and the name every architecture's spec gets.
util::Result<Spec> finish_spec(const gguf::File& file, std::string_view arch,
                               util::Result<Spec> spec) {
  if (!spec) return spec;
  HR_ASSIGN_OR_RETURN(auto name, file.get_string("general.name"));
  spec->name = name ? std::string(*name) : std::string(arch);
  if (spec->n_vocab <= 0) {
    return util::errorf("model: {}: cannot tell the vocabulary size (no token_embd.weight)",
                        file.name());
  }
  return spec;
}

constexpr std::string_view kAssistantArch = "gemma4-assistant";

}  // namespace

std::string_view arch_name(Arch arch) {
  switch (arch) {
    case Arch::kLlama:
      return "llama";
    case Arch::kGemma4:
      return "gemma4";
    case Arch::kGemma4Assistant:
      return kAssistantArch;
  }
  return "?";
}

std::string_view supported_arch_names() {
  return "llama, gemma4";
}

std::string_view attention_kind_name(AttentionKind kind) {
  return kind == AttentionKind::kSliding ? "sliding" : "full";
}

int Spec::n_layer_owning_kv() const {
  int n = 0;
  for (const auto& l : layers) n += l.owns_kv();
  return n;
}

int Spec::max_head_dim() const {
  int m = 0;
  for (const auto& l : layers) m = std::max(m, l.head_dim);
  return m;
}

util::Result<Spec> spec_from_gguf(const gguf::File& file) {
  HR_ASSIGN_OR_RETURN(auto arch, file.get_string("general.architecture"));
  if (!arch) {
    return util::errorf(
        "model: {}: general.architecture is missing — this GGUF holds no model "
        "(a vocabulary-only file?)",
        file.name());
  }
  if (*arch == kAssistantArch) {
    return util::errorf(
        "model: {}: a Gemma 4 assistant (MTP) drafter, not a model to run alone — give it with "
        "--draft-model beside the Gemma 4 model it drafts for",
        file.name());
  }
  util::Result<Spec> spec =
      util::errorf("model: {}: unsupported architecture '{}' — headroom runs: {}", file.name(),
                   *arch, supported_arch_names());
  if (*arch == "llama") spec = llama_spec(file);
  if (*arch == "gemma4") spec = gemma4_spec(file);
  return finish_spec(file, *arch, std::move(spec));
}

util::Result<Spec> drafter_spec_from_gguf(const gguf::File& file) {
  HR_ASSIGN_OR_RETURN(auto arch, file.get_string("general.architecture"));
  if (arch.value_or("") != kAssistantArch) {
    return util::errorf(
        "model: {}: architecture '{}' is not a drafter headroom runs (Gemma 4 assistant drafters, "
        "'{}')",
        file.name(), arch.value_or("(none)"), kAssistantArch);
  }
  return finish_spec(file, *arch, gemma4_assistant_spec(file));
}

}  // namespace model
