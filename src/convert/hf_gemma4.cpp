// Gemma4ForCausalLM / Gemma4ForConditionalGeneration checkpoints → GGUF "gemma4" text models, as
// llama.cpp's converter writes them (spec §3): per-layer head dims, KV heads and FFN widths,
// proportional RoPE through a synthesized rope_freqs, renamed scalars and fused experts. The
// vision and audio towers are left out (they go to a separate mmproj file).
#include <nlohmann/json.hpp>

#include <set>

#include "convert/hf_model.h"

namespace convert {
namespace {

// Per-layer facts from config.json (spec §1.3).
struct Layer {
  bool sliding;
  int64_t head_dim;
  int64_t n_head_kv;
  int64_t n_ff;
  bool shares_kv;  // KV-shared layers borrow K/V: their k/v tensors are optional and unused
  bool has_v;      // attention_k_eq_v full layers have no v_proj
};

gguf::MetaValue i32_array(const std::vector<int64_t>& v) {
  std::vector<int32_t> a(v.begin(), v.end());
  return gguf::MetaValue::array_i32(a);
}

bool is_multimodal_tower(const std::string& name) {
  for (const char* p : {"model.vision_tower.", "model.embed_vision.", "model.audio_tower.",
                        "model.embed_audio.", "model.multi_modal_projector."}) {
    if (name.starts_with(p)) return true;
  }
  return false;
}

}  // namespace

util::Result<HfConversion> convert_gemma4_checkpoint(const HfConfig& c, const Checkpoint& ckpt) {
  HfConversion out;
  out.arch = "gemma4";
  out.vocab = VocabStyle::kGemma4;
  HR_ASSIGN_OR_RETURN(const int64_t H, c.integer("hidden_size"));
  HR_ASSIGN_OR_RETURN(const int64_t L, c.integer("num_hidden_layers"));
  HR_ASSIGN_OR_RETURN(const int64_t n_ff_base, c.integer("intermediate_size"));
  HR_ASSIGN_OR_RETURN(const int64_t n_head, c.integer("num_attention_heads"));
  HR_ASSIGN_OR_RETURN(const int64_t n_head_kv, c.integer("num_key_value_heads"));
  HR_ASSIGN_OR_RETURN(const int64_t hd_swa, c.integer("head_dim"));
  HR_ASSIGN_OR_RETURN(const int64_t V, c.integer("vocab_size"));
  const int64_t hd_full = c.integer_or("global_head_dim", hd_swa);
  const int64_t n_head_kv_full = c.integer_or("num_global_key_value_heads", n_head_kv);
  const int64_t n_shared = c.integer_or("num_kv_shared_layers", 0);
  const int64_t P = c.integer_or("hidden_size_per_layer_input", 0);
  const int64_t V_ple = c.integer_or("vocab_size_per_layer_input", V);
  const bool double_wide = c.boolean_or("use_double_wide_mlp", false);
  const bool k_eq_v = c.boolean_or("attention_k_eq_v", false);
  const bool moe = c.boolean_or("enable_moe_block", false);
  const int64_t n_expert = moe ? c.integer_or("num_experts", 0) : 0;
  const int64_t n_expert_used = moe ? c.integer_or("top_k_experts", 0) : 0;
  const int64_t n_ff_exp =
      moe ? c.integer_or("moe_intermediate_size", c.integer_or("expert_intermediate_size", 0)) : 0;
  if (!c.has("layer_types") || !c.json["layer_types"].is_array() ||
      static_cast<int64_t>(c.json["layer_types"].size()) != L) {
    return util::errorf("convert: {}: layer_types must list all {} layers", c.file, L);
  }
  if (moe && (n_expert <= 0 || n_expert_used <= 0 || n_ff_exp <= 0)) {
    return util::errorf(
        "convert: {}: enable_moe_block needs num_experts, top_k_experts and "
        "moe_intermediate_size",
        c.file);
  }
  const int64_t first_shared = L - n_shared;
  std::vector<Layer> layers;
  for (int64_t il = 0; il < L; ++il) {
    const std::string type = c.json["layer_types"][static_cast<size_t>(il)].get<std::string>();
    if (type != "sliding_attention" && type != "full_attention") {
      return util::errorf(
          "convert: {}: layer {} has type '{}' (sliding_attention or "
          "full_attention expected)",
          c.file, il, type);
    }
    const bool sliding = type == "sliding_attention";
    layers.push_back({sliding, sliding ? hd_swa : hd_full, sliding ? n_head_kv : n_head_kv_full,
                      double_wide && il >= first_shared ? 2 * n_ff_base : n_ff_base,
                      il >= first_shared, sliding || !k_eq_v});
  }
  const nlohmann::json rope =
      c.has("rope_parameters") ? c.json["rope_parameters"] : nlohmann::json::object();
  const nlohmann::json rope_full = rope.value("full_attention", nlohmann::json::object());
  const nlohmann::json rope_swa = rope.value("sliding_attention", nlohmann::json::object());
  if (rope_full.value("rope_type", "proportional") != "proportional") {
    return util::errorf("convert: {}: full-attention rope_type '{}' (Gemma 4 uses proportional)",
                        c.file, rope_full.value("rope_type", ""));
  }

  auto key = [&](const std::string& k, gguf::MetaValue v) {
    out.metadata.emplace_back("gemma4." + k, std::move(v));
  };
  auto u32 = [](int64_t v) { return gguf::MetaValue::u32(static_cast<uint32_t>(v)); };
  key("block_count", u32(L));
  key("context_length", u32(c.integer_or("max_position_embeddings", 131072)));
  key("embedding_length", u32(H));
  std::vector<int64_t> ff, kv;
  std::vector<bool> pattern;
  for (const Layer& l : layers) {
    ff.push_back(l.n_ff);
    kv.push_back(l.n_head_kv);
    pattern.push_back(l.sliding);
  }
  key("feed_forward_length", double_wide ? i32_array(ff) : u32(n_ff_base));
  key("attention.head_count", u32(n_head));
  key("attention.head_count_kv",
      c.has("num_global_key_value_heads") ? i32_array(kv) : u32(n_head_kv));
  key("rope.freq_base", gguf::MetaValue::f32(rope_full.value("rope_theta", 1e6f)));
  key("rope.freq_base_swa", gguf::MetaValue::f32(rope_swa.value("rope_theta", 1e4f)));
  key("attention.layer_norm_rms_epsilon",
      gguf::MetaValue::f32(static_cast<float>(c.number_or("rms_norm_eps", 1e-6))));
  if (moe) {
    key("expert_count", u32(n_expert));
    key("expert_used_count", u32(n_expert_used));
    key("expert_feed_forward_length", u32(n_ff_exp));
  }
  key("attention.key_length", u32(hd_full));
  key("attention.value_length", u32(hd_full));
  key("attention.key_length_swa", u32(hd_swa));
  key("attention.value_length_swa", u32(hd_swa));
  if (c.has("final_logit_softcapping")) {
    key("final_logit_softcapping",
        gguf::MetaValue::f32(static_cast<float>(c.number_or("final_logit_softcapping", 0))));
  }
  key("attention.sliding_window", u32(c.integer_or("sliding_window", 512)));
  key("attention.shared_kv_layers", u32(n_shared));
  key("embedding_length_per_layer_input", u32(P));
  key("attention.sliding_window_pattern", gguf::MetaValue::array_bool(pattern));
  key("rope.dimension_count", u32(hd_full));
  key("rope.dimension_count_swa",
      u32(static_cast<int64_t>(static_cast<double>(hd_swa) *
                               rope_swa.value("partial_rotary_factor", 1.0))));
  out.facts = {"gemma4", static_cast<int>(L), static_cast<int>(n_head), static_cast<int>(n_head_kv),
               static_cast<int>(n_expert)};

  // The text model's tensors live under model.language_model. (multimodal) or model. (text-only).
  const std::string prefix =
      ckpt.find("model.language_model.embed_tokens.weight") ? "model.language_model." : "model.";
  std::set<std::string_view> used;
  auto take = [&](const std::string& hf, const std::string& gguf_name,
                  const std::vector<int64_t>& shape, bool required,
                  int64_t n_rows = -1) -> util::Status {
    const SafeTensor* t = ckpt.find(prefix + hf);
    if (!t) {
      if (!required) return {};
      return util::errorf(
          "convert: {} has no tensor {}{} — incomplete checkpoint (a missing shard?)", ckpt.dir(),
          prefix, hf);
    }
    used.insert(t->name);
    HR_TRY(check_shape(*t, shape));
    HR_ASSIGN_OR_RETURN(SourceTensor s, checkpoint_tensor(*t, gguf_name, nullptr, n_rows));
    out.tensors.push_back(std::move(s));
    return {};
  };
  HR_TRY(take("embed_tokens.weight", "token_embd.weight", {V, H}, true));
  // Proportional RoPE on full layers: the first `rotated` pairs turn, the rest are switched off
  // with a factor of 1e30 (spec §2.5).
  const int64_t rotated = static_cast<int64_t>(static_cast<double>(hd_full) *
                                               rope_full.value("partial_rotary_factor", 1.0) / 2);
  std::vector<float> factors(static_cast<size_t>(hd_full / 2), 1e30f);
  std::fill(factors.begin(), factors.begin() + rotated, 1.0f);
  out.tensors.push_back(f32_tensor("rope_freqs.weight", std::move(factors)));
  if (P > 0) {
    HR_TRY(
        take("embed_tokens_per_layer.weight", "per_layer_token_embd.weight", {V_ple, L * P}, true));
    HR_TRY(
        take("per_layer_model_projection.weight", "per_layer_model_proj.weight", {L * P, H}, true));
    HR_TRY(take("per_layer_projection_norm.weight", "per_layer_proj_norm.weight", {P}, true));
  }
  for (int64_t il = 0; il < L; ++il) {
    const Layer& l = layers[static_cast<size_t>(il)];
    const std::string hf = "layers." + std::to_string(il) + ".";
    const std::string blk = "blk." + std::to_string(il) + ".";
    const bool kv_required = !l.shares_kv;
    HR_TRY(take(hf + "input_layernorm.weight", blk + "attn_norm.weight", {H}, true));
    HR_TRY(take(hf + "self_attn.q_proj.weight", blk + "attn_q.weight", {n_head * l.head_dim, H},
                true));
    HR_TRY(take(hf + "self_attn.k_proj.weight", blk + "attn_k.weight",
                {l.n_head_kv * l.head_dim, H}, kv_required));
    if (l.has_v) {
      HR_TRY(take(hf + "self_attn.v_proj.weight", blk + "attn_v.weight",
                  {l.n_head_kv * l.head_dim, H}, kv_required));
    }
    HR_TRY(take(hf + "self_attn.o_proj.weight", blk + "attn_output.weight",
                {H, n_head * l.head_dim}, true));
    HR_TRY(take(hf + "self_attn.q_norm.weight", blk + "attn_q_norm.weight", {l.head_dim}, true));
    HR_TRY(take(hf + "self_attn.k_norm.weight", blk + "attn_k_norm.weight", {l.head_dim},
                kv_required));
    HR_TRY(take(hf + "post_attention_layernorm.weight", blk + "post_attention_norm.weight", {H},
                true));
    HR_TRY(take(hf + "pre_feedforward_layernorm.weight", blk + "ffn_norm.weight", {H}, true));
    HR_TRY(take(hf + "mlp.gate_proj.weight", blk + "ffn_gate.weight", {l.n_ff, H}, true));
    HR_TRY(take(hf + "mlp.up_proj.weight", blk + "ffn_up.weight", {l.n_ff, H}, true));
    HR_TRY(take(hf + "mlp.down_proj.weight", blk + "ffn_down.weight", {H, l.n_ff}, true));
    HR_TRY(take(hf + "post_feedforward_layernorm.weight", blk + "post_ffw_norm.weight", {H}, true));
    HR_TRY(take(hf + "layer_scalar", blk + "layer_output_scale.weight", {1}, false));
    if (moe) {
      HR_TRY(take(hf + "router.proj.weight", blk + "ffn_gate_inp.weight", {n_expert, H}, true));
      HR_TRY(take(hf + "router.scale", blk + "ffn_gate_inp.scale", {H}, true));
      HR_TRY(take(hf + "router.per_expert_scale", blk + "ffn_down_exps.scale", {n_expert}, false));
      HR_TRY(take(hf + "pre_feedforward_layernorm_2.weight", blk + "pre_ffw_norm_2.weight", {H},
                  true));
      HR_TRY(take(hf + "post_feedforward_layernorm_1.weight", blk + "post_ffw_norm_1.weight", {H},
                  true));
      HR_TRY(take(hf + "post_feedforward_layernorm_2.weight", blk + "post_ffw_norm_2.weight", {H},
                  true));
      HR_TRY(take(hf + "experts.gate_up_proj", blk + "ffn_gate_up_exps.weight",
                  {n_expert, 2 * n_ff_exp, H}, true));
      HR_TRY(take(hf + "experts.down_proj", blk + "ffn_down_exps.weight", {n_expert, H, n_ff_exp},
                  true));
    }
    if (P > 0) {
      HR_TRY(take(hf + "per_layer_input_gate.weight", blk + "inp_gate.weight", {P, H}, true));
      HR_TRY(take(hf + "per_layer_projection.weight", blk + "proj.weight", {H, P}, true));
      HR_TRY(take(hf + "post_per_layer_input_norm.weight", blk + "post_norm.weight", {H}, true));
    }
  }
  HR_TRY(take("norm.weight", "output_norm.weight", {H}, true));
  if (const SafeTensor* head = ckpt.find("lm_head.weight")) {
    used.insert(head->name);
    HR_TRY(check_shape(*head, {V, H}));
    HR_ASSIGN_OR_RETURN(SourceTensor s, checkpoint_tensor(*head, "output.weight"));
    out.tensors.push_back(std::move(s));
  }
  for (const SafeTensor* t : ckpt.tensors()) {
    if (used.contains(t->name)) continue;
    if (is_multimodal_tower(t->name)) {
      ++out.skipped_tensors;
      continue;
    }
    return util::errorf(
        "convert: tensor {} in {} is not part of a Gemma 4 text model — is this "
        "checkpoint another architecture or variant?",
        t->name, t->file);
  }
  return out;
}

}  // namespace convert
