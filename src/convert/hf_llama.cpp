// LlamaForCausalLM checkpoints → GGUF "llama": llama.cpp's names, its Q/K row permutation, and
// Llama 3's rope_freqs.
#include <nlohmann/json.hpp>

#include <cmath>
#include <numbers>
#include <set>

#include "convert/hf_model.h"

namespace convert {

// HF stores Q and K rows for rotate-half RoPE (pairs i, i + d/2); llama.cpp's llama rotates
// adjacent pairs (2i, 2i + 1). Within each head, output row 2j + k comes from row k·d/2 + j.
std::function<int64_t(int64_t)> rope_pair_rows(int64_t head_dim) {
  const int64_t half = head_dim / 2;
  return [head_dim, half](int64_t r) {
    const int64_t head = r / head_dim;
    const int64_t within = r % head_dim;
    return head * head_dim + (within % 2) * half + within / 2;
  };
}

namespace {

// Llama 3's frequency factors (rope_type "llama3"): long wavelengths slowed by `factor`, short
// ones kept, a smooth blend between — one factor per rotated pair, as llama.cpp writes them.
std::vector<float> llama3_rope_factors(const nlohmann::json& rope, double theta, int64_t head_dim) {
  const double factor = rope.value("factor", 8.0);
  const double low = rope.value("low_freq_factor", 1.0);
  const double high = rope.value("high_freq_factor", 4.0);
  const double old_ctx = rope.value("original_max_position_embeddings", 8192.0);
  const double low_wavelen = old_ctx / low;
  const double high_wavelen = old_ctx / high;
  std::vector<float> out;
  for (int64_t i = 0; i < head_dim; i += 2) {
    const float freq = static_cast<float>(1.0 / std::pow(theta, static_cast<double>(i) / head_dim));
    const double wavelen = 2 * std::numbers::pi / freq;
    if (wavelen < high_wavelen) {
      out.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      out.push_back(static_cast<float>(factor));
    } else {
      const double smooth = (old_ctx / wavelen - low) / (high - low);
      out.push_back(static_cast<float>(1 / ((1 - smooth) / factor + smooth)));
    }
  }
  return out;
}

}  // namespace

util::Result<HfConversion> convert_llama_checkpoint(const HfConfig& c, const Checkpoint& ckpt) {
  HfConversion out;
  out.arch = "llama";
  out.vocab = VocabStyle::kLlama;
  HR_ASSIGN_OR_RETURN(const int64_t n_embd, c.integer("hidden_size"));
  HR_ASSIGN_OR_RETURN(const int64_t n_layer, c.integer("num_hidden_layers"));
  HR_ASSIGN_OR_RETURN(const int64_t n_ff, c.integer("intermediate_size"));
  HR_ASSIGN_OR_RETURN(const int64_t n_head, c.integer("num_attention_heads"));
  HR_ASSIGN_OR_RETURN(const int64_t n_vocab, c.integer("vocab_size"));
  const int64_t n_head_kv = c.integer_or("num_key_value_heads", n_head);
  const int64_t head_dim = c.integer_or("head_dim", n_embd / n_head);
  if (n_head <= 0 || n_head_kv <= 0 || head_dim <= 0 || head_dim % 2 != 0 ||
      n_head % n_head_kv != 0) {
    return util::errorf(
        "convert: {}: {} heads, {} KV heads of {} dims is not a llama attention "
        "shape",
        c.file, n_head, n_head_kv, head_dim);
  }
  const nlohmann::json rope = c.has("rope_scaling") && c.json["rope_scaling"].is_object()
                                  ? c.json["rope_scaling"]
                              : c.has("rope_parameters") ? c.json["rope_parameters"]
                                                         : nlohmann::json::object();
  const double theta = rope.value("rope_theta", c.number_or("rope_theta", 10000.0));
  auto key = [&](const char* k, gguf::MetaValue v) {
    out.metadata.emplace_back(std::string("llama.") + k, std::move(v));
  };
  key("block_count", gguf::MetaValue::u32(static_cast<uint32_t>(n_layer)));
  key("context_length",
      gguf::MetaValue::u32(static_cast<uint32_t>(c.integer_or("max_position_embeddings", 4096))));
  key("embedding_length", gguf::MetaValue::u32(static_cast<uint32_t>(n_embd)));
  key("feed_forward_length", gguf::MetaValue::u32(static_cast<uint32_t>(n_ff)));
  key("attention.head_count", gguf::MetaValue::u32(static_cast<uint32_t>(n_head)));
  key("attention.head_count_kv", gguf::MetaValue::u32(static_cast<uint32_t>(n_head_kv)));
  key("rope.freq_base", gguf::MetaValue::f32(static_cast<float>(theta)));
  key("attention.layer_norm_rms_epsilon",
      gguf::MetaValue::f32(static_cast<float>(c.number_or("rms_norm_eps", 1e-5))));
  if (c.has("head_dim")) {
    key("attention.key_length", gguf::MetaValue::u32(static_cast<uint32_t>(head_dim)));
    key("attention.value_length", gguf::MetaValue::u32(static_cast<uint32_t>(head_dim)));
  }
  key("vocab_size", gguf::MetaValue::u32(static_cast<uint32_t>(n_vocab)));
  key("rope.dimension_count", gguf::MetaValue::u32(static_cast<uint32_t>(head_dim)));
  const std::string rope_type = rope.value("rope_type", rope.value("type", ""));
  if (rope_type == "linear" && rope.contains("factor")) {
    key("rope.scaling.type", gguf::MetaValue::string("linear"));
    key("rope.scaling.factor", gguf::MetaValue::f32(rope["factor"].get<float>()));
  } else if (!rope_type.empty() && rope_type != "default" && rope_type != "llama3") {
    return util::errorf(
        "convert: {}: rope type '{}' is not supported for llama (supported: "
        "default, linear, llama3)",
        c.file, rope_type);
  }
  out.facts = {"llama", static_cast<int>(n_layer), static_cast<int>(n_head),
               static_cast<int>(n_head_kv), 0};

  // Tensors: the checkpoint's names (HF "model." prefix) → llama.cpp's, shapes checked.
  std::set<std::string_view> used;
  auto take = [&](const std::string& hf, const std::string& gguf_name,
                  const std::vector<int64_t>& shape, bool required,
                  std::function<int64_t(int64_t)> rows = nullptr) -> util::Status {
    const SafeTensor* t = ckpt.find(hf);
    if (!t) {
      if (!required) return {};
      return util::errorf("convert: {} has no tensor {} — incomplete checkpoint (a missing shard?)",
                          ckpt.dir(), hf);
    }
    used.insert(t->name);
    HR_TRY(check_shape(*t, shape));
    HR_ASSIGN_OR_RETURN(SourceTensor s, checkpoint_tensor(*t, gguf_name, std::move(rows)));
    out.tensors.push_back(std::move(s));
    return {};
  };
  HR_TRY(take("model.embed_tokens.weight", "token_embd.weight", {n_vocab, n_embd}, true));
  if (rope_type == "llama3") {
    out.tensors.push_back(
        f32_tensor("rope_freqs.weight", llama3_rope_factors(rope, theta, head_dim)));
  }
  const int64_t q_rows = n_head * head_dim;
  const int64_t kv_rows = n_head_kv * head_dim;
  for (int64_t il = 0; il < n_layer; ++il) {
    const std::string hf = "model.layers." + std::to_string(il) + ".";
    const std::string blk = "blk." + std::to_string(il) + ".";
    HR_TRY(take(hf + "input_layernorm.weight", blk + "attn_norm.weight", {n_embd}, true));
    HR_TRY(take(hf + "self_attn.q_proj.weight", blk + "attn_q.weight", {q_rows, n_embd}, true,
                rope_pair_rows(head_dim)));
    HR_TRY(take(hf + "self_attn.k_proj.weight", blk + "attn_k.weight", {kv_rows, n_embd}, true,
                rope_pair_rows(head_dim)));
    HR_TRY(take(hf + "self_attn.v_proj.weight", blk + "attn_v.weight", {kv_rows, n_embd}, true));
    HR_TRY(
        take(hf + "self_attn.o_proj.weight", blk + "attn_output.weight", {n_embd, q_rows}, true));
    HR_TRY(take(hf + "post_attention_layernorm.weight", blk + "ffn_norm.weight", {n_embd}, true));
    HR_TRY(take(hf + "mlp.gate_proj.weight", blk + "ffn_gate.weight", {n_ff, n_embd}, true));
    HR_TRY(take(hf + "mlp.up_proj.weight", blk + "ffn_up.weight", {n_ff, n_embd}, true));
    HR_TRY(take(hf + "mlp.down_proj.weight", blk + "ffn_down.weight", {n_embd, n_ff}, true));
  }
  HR_TRY(take("model.norm.weight", "output_norm.weight", {n_embd}, true));
  const bool tied = c.boolean_or("tie_word_embeddings", false);
  HR_TRY(take("lm_head.weight", "output.weight", {n_vocab, n_embd}, !tied));
  // Anything else is not part of a llama text model: refuse rather than drop it silently.
  for (const SafeTensor* t : ckpt.tensors()) {
    if (!used.contains(t->name) && !t->name.ends_with("rotary_emb.inv_freq")) {
      return util::errorf(
          "convert: tensor {} in {} is not part of a llama model — is this "
          "checkpoint another architecture?",
          t->name, t->file);
    }
  }
  return out;
}

}  // namespace convert
