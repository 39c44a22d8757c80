// synth: metadata, tensor table, type policy and seeded random weights for a SynthShape.
#include "model/synth.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <thread>

#include "model/synth_vocab.h"
#include "tensor/quantize.h"

namespace model {
namespace {

using gguf::MetaValue;
using tensor::DType;

// How a tensor's values are drawn (spec §7.3, §9).
struct Init {
  enum Kind { kNormal, kNormPlusOne, kUniform, kRopeFreqs } kind = kNormal;
  float a = 0.02f;  // normal: std; uniform: low
  float b = 0;      // uniform: high
  float mult = 1;   // norm weights: (1 + N(0, 0.1)) · mult
};

struct SynthTensor {
  std::string name;
  std::vector<uint64_t> ne;
  Init init;
  bool matrix = true;  // a weight matrix (quantized per the type policy) or a small f32 tensor
};

// splitmix64: a tiny, well-mixed generator; one per row so rows can fill in parallel.
struct Rng {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return (next() >> 11) * (1.0 / 9007199254740992.0); }
  double normal() {  // Box–Muller
    double u1 = uniform(), u2 = uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
};

uint64_t hash_name(std::string_view s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

void draw_row(const Init& init, Rng& rng, int64_t row, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    switch (init.kind) {
      case Init::kNormal: out[i] = static_cast<float>(rng.normal() * init.a); break;
      case Init::kNormPlusOne: out[i] = static_cast<float>((1.0 + 0.1 * rng.normal()) * init.mult); break;
      case Init::kUniform: out[i] = static_cast<float>(init.a + (init.b - init.a) * rng.uniform()); break;
      case Init::kRopeFreqs:  // proportional RoPE, partial factor 0.25 (§2.5): n/4 pairs on, the rest off
        out[i] = (row * n + i) < n / 4 ? 1.0f : 1e30f;
        break;
    }
  }
}

// --- type policy --------------------------------------------------------------------------------

struct TypePolicy {
  DType base = DType::kF32;
  bool k_m_mix = false;  // Q4_K_M-style: Q6_K for output/embeddings and some attn_v / ffn_down
};

util::Result<TypePolicy> parse_type(std::string_view text) {
  std::string lower;
  for (char c : text) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "q4_k_m") return TypePolicy{DType::kQ4_K, true};
  auto t = gguf::tensor_type_from_name(lower);
  if (!t) return util::errorf("synth: unknown type '{}' — use f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, "
                              "q4_k, q5_k, q6_k or the mix q4_k_m", text);
  return TypePolicy{*t, false};
}

// llama.cpp's "use more bits" layers for Q4_K_M: the first and last eighth, and every third between.
bool use_more_bits(int il, int n_layer) {
  return il < n_layer / 8 || il >= 7 * n_layer / 8 || (il - n_layer / 8) % 3 == 2;
}

DType fit_block(DType wanted, uint64_t row_length) {
  const auto block = gguf::tensor_type_info(wanted).block_size;
  if (row_length % block == 0) return wanted;
  if (block == 256 && row_length % 32 == 0) return DType::kQ8_0;
  return DType::kF16;  // e.g. tiny PLE widths of 16 (spec §9)
}

DType type_for(const SynthTensor& t, const TypePolicy& policy, int n_layer) {
  if (!t.matrix) return DType::kF32;
  // Routers stay f32, as the ecosystem's quantizer leaves them.
  if (t.name.find("ffn_gate_inp.weight") != std::string::npos) return DType::kF32;
  DType want = policy.base;
  if (policy.k_m_mix) {
    int il = -1;
    if (t.name.rfind("blk.", 0) == 0) il = std::atoi(t.name.c_str() + 4);
    const bool embedding = t.name == "token_embd.weight" || t.name == "output.weight" ||
                           t.name == "per_layer_token_embd.weight";
    const bool sensitive = t.name.find("attn_v.weight") != std::string::npos ||
                           t.name.find("ffn_down") != std::string::npos;
    if (embedding || (sensitive && il >= 0 && use_more_bits(il, n_layer))) want = DType::kQ6_K;
  }
  return fit_block(want, t.ne[0]);
}

uint32_t file_type_code(const TypePolicy& p) {
  if (p.k_m_mix) return 15;  // MOSTLY_Q4_K_M
  switch (p.base) {
    case DType::kF32: return 0;
    case DType::kF16: return 1;
    case DType::kQ4_0: return 2;
    case DType::kQ4_1: return 3;
    case DType::kQ8_0: return 7;
    case DType::kQ5_0: return 8;
    case DType::kQ5_1: return 9;
    case DType::kQ2_K: return 10;
    case DType::kQ3_K: return 12;
    case DType::kQ4_K: return 14;
    case DType::kQ5_K: return 16;
    case DType::kQ6_K: return 18;
    case DType::kBF16: return 32;
    default: return 0;
  }
}

// --- tensor tables ------------------------------------------------------------------------------

std::vector<SynthTensor> gemma4_tensors(const SynthShape& s, const SynthOptions& o) {
  const uint64_t H = s.n_embd, V = s.n_vocab, P = s.n_embd_per_layer, L = s.n_layer;
  const Init w{Init::kNormal, s.weight_std};
  const Init norm{Init::kNormPlusOne};
  std::vector<SynthTensor> t;
  t.push_back({"token_embd.weight", {H, V}, w});
  // output_norm ×16 keeps random-weight logits large enough that a missing softcap shows (§9).
  t.push_back({"output_norm.weight", {H}, {Init::kNormPlusOne, 0, 0, 16}, false});
  const bool any_full = std::count(s.sliding.begin(), s.sliding.end(), false) > 0;
  if (any_full) t.push_back({"rope_freqs.weight", {uint64_t(s.head_dim_full / 2)}, {Init::kRopeFreqs}, false});
  if (P > 0) {
    t.push_back({"per_layer_token_embd.weight", {L * P, V}, o.zero_ple ? Init{Init::kNormal, 0} : w});
    t.push_back({"per_layer_model_proj.weight", {H, L * P}, w});
    t.push_back({"per_layer_proj_norm.weight", {P}, norm, false});
  }
  const int first_shared = s.n_layer - s.n_shared_kv;
  for (int il = 0; il < s.n_layer; ++il) {
    const bool swa = s.sliding[il];
    const uint64_t hd = swa ? s.head_dim_sliding : s.head_dim_full;
    const uint64_t nkv = swa ? s.n_head_kv_sliding : s.n_head_kv_full;
    const uint64_t ff = s.n_ff[il];
    auto name = [&](const char* suffix) { return "blk." + std::to_string(il) + "." + suffix; };
    t.push_back({name("attn_norm.weight"), {H}, norm, false});
    t.push_back({name("attn_q.weight"), {H, s.n_head * hd}, w});
    t.push_back({name("attn_q_norm.weight"), {hd}, norm, false});
    if (il < first_shared || o.shared_kv_tensors) {
      t.push_back({name("attn_k.weight"), {H, nkv * hd}, w});
      if (swa || !s.k_eq_v) t.push_back({name("attn_v.weight"), {H, nkv * hd}, w});
      // k_norm ×0.25: attention scale 1.0 would otherwise amplify rounding noise (§9).
      t.push_back({name("attn_k_norm.weight"), {hd}, {Init::kNormPlusOne, 0, 0, 0.25f}, false});
    }
    t.push_back({name("attn_output.weight"), {s.n_head * hd, H}, w});
    t.push_back({name("post_attention_norm.weight"), {H}, norm, false});
    t.push_back({name("ffn_norm.weight"), {H}, norm, false});
    t.push_back({name("ffn_gate.weight"), {H, ff}, w});
    t.push_back({name("ffn_up.weight"), {H, ff}, w});
    t.push_back({name("ffn_down.weight"), {ff, H}, w});
    t.push_back({name("post_ffw_norm.weight"), {H}, norm, false});
    t.push_back({name("layer_output_scale.weight"), {1}, {Init::kUniform, 0.5f, 1.0f}, false});
    if (P > 0) {
      t.push_back({name("inp_gate.weight"), {H, P}, w});
      t.push_back({name("proj.weight"), {P, H}, w});
      t.push_back({name("post_norm.weight"), {H}, norm, false});
    }
    if (s.n_expert > 0) {
      const uint64_t E = s.n_expert, F = s.n_ff_exp;
      t.push_back({name("ffn_gate_inp.weight"), {H, E}, {Init::kNormal, 1.0f}});  // N(0,1): no near-ties (§9)
      t.push_back({name("ffn_gate_inp.scale"), {H}, {Init::kUniform, 0.9f, 1.1f}, false});
      t.push_back({name("pre_ffw_norm_2.weight"), {H}, norm, false});
      t.push_back({name("post_ffw_norm_1.weight"), {H}, norm, false});
      t.push_back({name("post_ffw_norm_2.weight"), {H}, norm, false});
      t.push_back({name("ffn_gate_up_exps.weight"), {H, 2 * F, E}, w});
      t.push_back({name("ffn_down_exps.weight"), {F, H, E}, w});
      t.push_back({name("ffn_down_exps.scale"), {E}, {Init::kUniform, 0.5f, 1.5f}, false});
    }
  }
  return t;
}

std::vector<SynthTensor> llama_tensors(const SynthShape& s) {
  const uint64_t H = s.n_embd, V = s.n_vocab, hd = s.head_dim_full;
  const Init w{Init::kNormal, s.weight_std};
  const Init norm{Init::kNormPlusOne};
  std::vector<SynthTensor> t;
  t.push_back({"token_embd.weight", {H, V}, w});
  t.push_back({"output_norm.weight", {H}, norm, false});
  t.push_back({"output.weight", {H, V}, w});
  for (int il = 0; il < s.n_layer; ++il) {
    auto name = [&](const char* suffix) { return "blk." + std::to_string(il) + "." + suffix; };
    t.push_back({name("attn_norm.weight"), {H}, norm, false});
    t.push_back({name("attn_q.weight"), {H, s.n_head * hd}, w});
    t.push_back({name("attn_k.weight"), {H, s.n_head_kv_full * hd}, w});
    t.push_back({name("attn_v.weight"), {H, s.n_head_kv_full * hd}, w});
    t.push_back({name("attn_output.weight"), {s.n_head * hd, H}, w});
    t.push_back({name("ffn_norm.weight"), {H}, norm, false});
    t.push_back({name("ffn_gate.weight"), {H, uint64_t(s.n_ff[il])}, w});
    t.push_back({name("ffn_up.weight"), {H, uint64_t(s.n_ff[il])}, w});
    t.push_back({name("ffn_down.weight"), {uint64_t(s.n_ff[il]), H}, w});
  }
  return t;
}

// --- metadata -----------------------------------------------------------------------------------

MetaValue per_layer_or_scalar(const std::vector<int>& v) {
  if (std::all_of(v.begin(), v.end(), [&](int x) { return x == v[0]; })) return MetaValue::u32(v[0]);
  std::vector<int32_t> values(v.begin(), v.end());  // signed, as the Python writer does (spec §9)
  return MetaValue::array_i32(values);
}

void write_gemma4_metadata(gguf::Writer& w, const SynthShape& s) {
  const std::string p = "gemma4.";
  std::vector<int> kv_heads(s.n_layer);
  for (int i = 0; i < s.n_layer; ++i) kv_heads[i] = s.sliding[i] ? s.n_head_kv_sliding : s.n_head_kv_full;
  w.set(p + "context_length", MetaValue::u32(s.n_ctx));
  w.set(p + "embedding_length", MetaValue::u32(s.n_embd));
  w.set(p + "block_count", MetaValue::u32(s.n_layer));
  w.set(p + "feed_forward_length", per_layer_or_scalar(s.n_ff));
  w.set(p + "attention.head_count", MetaValue::u32(s.n_head));
  w.set(p + "attention.head_count_kv", per_layer_or_scalar(kv_heads));
  w.set(p + "attention.key_length", MetaValue::u32(s.head_dim_full));
  w.set(p + "attention.value_length", MetaValue::u32(s.head_dim_full));
  w.set(p + "attention.key_length_swa", MetaValue::u32(s.head_dim_sliding));
  w.set(p + "attention.value_length_swa", MetaValue::u32(s.head_dim_sliding));
  w.set(p + "attention.layer_norm_rms_epsilon", MetaValue::f32(s.rms_eps));
  w.set(p + "attention.sliding_window", MetaValue::u32(s.window));
  w.set(p + "attention.sliding_window_pattern", MetaValue::array_bool(s.sliding));
  w.set(p + "attention.shared_kv_layers", MetaValue::u32(s.n_shared_kv));
  w.set(p + "embedding_length_per_layer_input", MetaValue::u32(s.n_embd_per_layer));
  w.set(p + "rope.freq_base", MetaValue::f32(s.rope_theta));
  w.set(p + "rope.freq_base_swa", MetaValue::f32(s.rope_theta_swa));
  w.set(p + "rope.dimension_count", MetaValue::u32(s.head_dim_full));
  w.set(p + "rope.dimension_count_swa", MetaValue::u32(s.head_dim_sliding));
  w.set(p + "final_logit_softcapping", MetaValue::f32(s.final_softcap));
  if (s.n_expert > 0) {
    w.set(p + "expert_count", MetaValue::u32(s.n_expert));
    w.set(p + "expert_used_count", MetaValue::u32(s.n_expert_used));
    w.set(p + "expert_feed_forward_length", MetaValue::u32(s.n_ff_exp));
  }
}

void write_llama_metadata(gguf::Writer& w, const SynthShape& s) {
  const std::string p = "llama.";
  w.set(p + "context_length", MetaValue::u32(s.n_ctx));
  w.set(p + "embedding_length", MetaValue::u32(s.n_embd));
  w.set(p + "block_count", MetaValue::u32(s.n_layer));
  w.set(p + "feed_forward_length", per_layer_or_scalar(s.n_ff));
  w.set(p + "attention.head_count", MetaValue::u32(s.n_head));
  w.set(p + "attention.head_count_kv", MetaValue::u32(s.n_head_kv_full));
  w.set(p + "rope.dimension_count", MetaValue::u32(s.head_dim_full));
  w.set(p + "rope.freq_base", MetaValue::f32(s.rope_theta));
  w.set(p + "attention.layer_norm_rms_epsilon", MetaValue::f32(s.rms_eps));
  w.set(p + "vocab_size", MetaValue::u32(s.n_vocab));
}

// Fills `out` with the tensor's rows: drawn, then converted to the stored type, rows in parallel.
util::Status fill_tensor(const SynthTensor& t, DType type, uint64_t seed, std::span<uint8_t> out) {
  const int64_t n_cols = static_cast<int64_t>(t.ne[0]);
  const int64_t n_rows = static_cast<int64_t>(out.size() / gguf::tensor_type_info(type).block_bytes *
                                              gguf::tensor_type_info(type).block_size / n_cols);
  const size_t row_bytes = out.size() / n_rows;
  const uint64_t base = seed ^ hash_name(t.name);
  const int n_threads = static_cast<int>(std::clamp<int64_t>(n_rows / 64, 1, std::thread::hardware_concurrency()));
  std::vector<util::Status> status(n_threads);
  auto work = [&](int tid) {
    std::vector<float> row(n_cols);
    for (int64_t r = tid; r < n_rows; r += n_threads) {
      Rng rng{base + 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(r + 1)};
      draw_row(t.init, rng, r, row.data(), n_cols);
      util::Status s = tensor::quantize_row(type, row.data(), out.data() + r * row_bytes, n_cols);
      if (!s) {
        status[tid] = std::move(s);
        return;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int i = 1; i < n_threads; ++i) threads.emplace_back(work, i);
  work(0);
  for (auto& th : threads) th.join();
  for (auto& s : status) HR_TRY(std::move(s));
  return {};
}

}  // namespace

util::Result<gguf::Writer> synth_writer(const SynthOptions& options) {
  HR_ASSIGN_OR_RETURN(SynthShape shape, synth_shape(options.arch, options.shape));
  return synth_writer(options, std::move(shape));
}

util::Result<gguf::Writer> synth_writer(const SynthOptions& options, SynthShape shape) {
  HR_ASSIGN_OR_RETURN(TypePolicy policy, parse_type(options.type));
  gguf::Writer w;
  w.set("general.architecture", MetaValue::string(shape.arch));
  w.set("general.name", MetaValue::string(fmt::format("headroom synth {} {} {}", shape.arch, shape.name, options.type)));
  w.set("general.file_type", MetaValue::u32(file_type_code(policy)));
  w.set("general.quantization_version", MetaValue::u32(2));

  std::optional<gguf::File> vocab;
  if (!options.vocab_path.empty()) {
    HR_ASSIGN_OR_RETURN(gguf::File f, gguf::File::open(options.vocab_path));
    const gguf::Value* tokens = f.find("tokenizer.ggml.tokens");
    if (!tokens || !tokens->is_array()) {
      return util::errorf("synth: {} has no tokenizer.ggml.tokens — pass a vocabulary GGUF", options.vocab_path);
    }
    shape.n_vocab = static_cast<int>(tokens->array_size());
    vocab = std::move(f);
  }
  if (shape.arch == "gemma4") write_gemma4_metadata(w, shape);
  else write_llama_metadata(w, shape);
  if (vocab) {
    for (const auto& kv : vocab->metadata()) {
      if (kv.key.rfind("tokenizer.", 0) == 0) w.set(std::string(kv.key), MetaValue::from(kv.value));
    }
  } else if (shape.arch == "gemma4") {
    HR_TRY(write_gemma4_vocab(w, shape.n_vocab, options.chat_template));
  } else {
    HR_TRY(write_llama_vocab(w, shape.n_vocab));
  }

  auto tensors = shape.arch == "gemma4" ? gemma4_tensors(shape, options) : llama_tensors(shape);
  for (auto& t : tensors) {
    const DType type = type_for(t, policy, shape.n_layer);
    if (options.no_weights) {
      w.add_tensor(t.name, type, t.ne, [](std::span<uint8_t>) -> util::Status { return {}; });
      continue;
    }
    auto spec = std::make_shared<SynthTensor>(t);
    const uint64_t seed = options.seed;
    w.add_tensor(t.name, type, t.ne, [spec, type, seed](std::span<uint8_t> out) { return fill_tensor(*spec, type, seed, out); });
  }
  return w;
}

}  // namespace model
