// The quantization mixes: llama.cpp's per-tensor type rules (llama-quant.cpp), restated.
#include "convert/quant_mix.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <numeric>

#include "gguf/types.h"

namespace convert {
namespace {

// general.file_type codes (llama_ftype) of the mixes the rules below name.
enum Code : uint32_t {
  kAllF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ8_0 = 7,
  kQ5_0 = 8,
  kQ5_1 = 9,
  kQ2_K = 10,
  kQ3_K_S = 11,
  kQ3_K_M = 12,
  kQ3_K_L = 13,
  kQ4_K_S = 14,
  kQ4_K_M = 15,
  kQ5_K_S = 16,
  kQ5_K_M = 17,
  kQ6_K = 18,
  kQ2_K_S = 21,
  kIQ4_NL = 25,
  kIQ4_XS = 30,
  kBF16 = 32,
  kTQ1_0 = 36,
  kTQ2_0 = 37,
  kMXFP4_MOE = 38,
  kNVFP4 = 39,
};

const std::vector<FileType> kFileTypes = {
    {"F32", kAllF32, DType::kF32, "32-bit floats: no rounding at all"},
    {"F16", kF16, DType::kF16, "16-bit floats"},
    {"BF16", kBF16, DType::kBF16, "bfloat16: the range of f32, 8 bits of mantissa"},
    {"Q8_0", kQ8_0, DType::kQ8_0, "8.5 bpw, near lossless"},
    {"Q6_K", kQ6_K, DType::kQ6_K, "6.56 bpw, output Q6_K"},
    {"Q5_K_M", kQ5_K_M, DType::kQ5_K, "5.5 bpw; attn_v and half of ffn_down Q6_K"},
    {"Q5_K_S", kQ5_K_S, DType::kQ5_K, "5.5 bpw"},
    {"Q5_1", kQ5_1, DType::kQ5_1, "6 bpw (scale and min per 32)"},
    {"Q5_0", kQ5_0, DType::kQ5_0, "5.5 bpw (scale per 32)"},
    {"Q4_K_M", kQ4_K_M, DType::kQ4_K, "4.5 bpw; attn_v and half of ffn_down Q6_K (recommended)"},
    {"Q4_K_S", kQ4_K_S, DType::kQ4_K, "4.5 bpw; a few attn_v and ffn_down Q5_K"},
    {"Q4_1", kQ4_1, DType::kQ4_1, "5 bpw (scale and min per 32)"},
    {"Q4_0", kQ4_0, DType::kQ4_0, "4.5 bpw (scale per 32)"},
    {"IQ4_XS", kIQ4_XS, DType::kIQ4_XS, "4.25 bpw non-linear"},
    {"IQ4_NL", kIQ4_NL, DType::kIQ4_NL, "4.5 bpw non-linear"},
    {"MXFP4_MOE", kMXFP4_MOE, DType::kMXFP4, "experts MXFP4, the rest Q8_0"},
    {"NVFP4", kNVFP4, DType::kNVFP4, "4.5 bpw FP4 with E4M3 scales per 16"},
    {"Q3_K_L", kQ3_K_L, DType::kQ3_K, "3.44 bpw; attn_v, attn_output, ffn_down Q5_K"},
    {"Q3_K_M", kQ3_K_M, DType::kQ3_K, "3.44 bpw; attn_v, attn_output, ffn_down Q4_K/Q5_K"},
    {"Q3_K_S", kQ3_K_S, DType::kQ3_K, "3.44 bpw"},
    {"Q2_K", kQ2_K, DType::kQ2_K, "2.63 bpw; attn_v, attn_output, ffn_down Q3_K/Q4_K"},
    {"Q2_K_S", kQ2_K_S, DType::kQ2_K, "2.63 bpw; needs an importance matrix"},
    {"TQ2_0", kTQ2_0, DType::kTQ2_0, "2.06 bpw ternary (for ternary-trained models)"},
    {"TQ1_0", kTQ1_0, DType::kTQ1_0, "1.69 bpw ternary (for ternary-trained models)"},
};

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

bool contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

// Broad roles of tensors, as llama.cpp's rules name them (checked in this order).
enum class Role {
  kTokenEmbd,
  kAttnQ,
  kAttnV,
  kAttnK,
  kAttnQkv,
  kAttnKvB,
  kAttnOutput,
  kFfnUp,
  kFfnGate,
  kFfnDown,
  kOutput,
  kOther
};

bool is_token_embd(std::string_view name) {
  return name == "token_embd.weight" || name == "per_layer_token_embd.weight";
}

Role role_of(std::string_view name) {
  if (name == "output.weight") return Role::kOutput;
  if (is_token_embd(name)) return Role::kTokenEmbd;
  if (contains(name, "attn_qkv.weight")) return Role::kAttnQkv;
  if (contains(name, "attn_kv_b.weight")) return Role::kAttnKvB;
  if (contains(name, "attn_v.weight")) return Role::kAttnV;
  if (contains(name, "attn_k.weight")) return Role::kAttnK;
  if (contains(name, "attn_q.weight")) return Role::kAttnQ;
  if (contains(name, "attn_output.weight")) return Role::kAttnOutput;
  if (contains(name, "ffn_up")) return Role::kFfnUp;
  if (contains(name, "ffn_gate")) return Role::kFfnGate;
  if (contains(name, "ffn_down")) return Role::kFfnDown;
  return Role::kOther;
}

bool is_attn_v_like(Role r) {  // the tensors most sensitive to quantization
  return r == Role::kAttnV || r == Role::kAttnQkv || r == Role::kAttnKvB;
}

// The layer of "blk.N.…", or -1.
int layer_of(std::string_view name) {
  int il = -1;
  std::sscanf(std::string(name).c_str(), "blk.%d.", &il);
  return il;
}

// The first and last eighth of the layers, and every third layer between.
bool use_more_bits(int il, int n_layer) {
  return il < n_layer / 8 || il >= 7 * n_layer / 8 || (il - n_layer / 8) % 3 == 2;
}

int effective_dims(const TensorDesc& t) {
  int n = static_cast<int>(t.ne.size());
  while (n > 1 && t.ne[static_cast<size_t>(n - 1)] == 1) --n;
  return n;
}

// The state of one pass over the tensors in llama.cpp's order (its counters).
struct MixState {
  const ModelFacts& facts;
  const MixOptions& options;
  int n_attention_wv = 0;
  int i_attention_wv = 0;
  int i_ffn_down = 0;
  bool tied_embeddings = true;  // until output.weight is seen

  uint32_t ftype() const { return options.file_type.code; }
  int n_gqa() const { return facts.n_head_kv > 0 ? facts.n_head / facts.n_head_kv : 1; }
  bool is_70b() const {
    return facts.arch == "llama" && facts.n_layer == 80 && facts.n_head != facts.n_head_kv;
  }
  // Layer index of a per-layer FFN tensor: the counter on dense models, the name on MoE models
  // (their expert tensors are not in layer order everywhere).
  int ffn_layer(int counter, std::string_view name) const {
    return facts.n_expert > 1 ? layer_of(name) : counter;
  }
};

// llama.cpp's llama_tensor_get_type_impl for the file types above.
DType mix_rule(MixState& st, DType type, const TensorDesc& t, Role role) {
  const uint32_t ft = st.ftype();
  const std::string& arch = st.facts.arch;
  const int n_expert = st.facts.n_expert;
  if (role == Role::kOutput || (st.tied_embeddings && role == Role::kTokenEmbd)) {
    const int64_t block = tensor::block_values(type);
    if (ft == kMXFP4_MOE) return DType::kQ8_0;
    if (arch == "falcon" || t.ne[0] % block != 0) return DType::kQ8_0;
    return type != DType::kQ8_0 ? DType::kQ6_K : type;
  }
  if (ft == kMXFP4_MOE) {  // experts MXFP4, everything else Q8_0
    return t.ne.size() > 2 && t.ne[2] > 1 ? DType::kMXFP4 : DType::kQ8_0;
  }
  if (role == Role::kTokenEmbd) {
    if (ft == kTQ1_0 || ft == kTQ2_0) return DType::kQ4_K;
    return type;
  }
  if (is_attn_v_like(role)) {
    if (ft == kQ2_K) {
      type = st.n_gqa() >= 4 ? DType::kQ4_K : DType::kQ3_K;
    } else if (ft == kQ2_K_S && st.n_gqa() >= 4) {
      type = DType::kQ4_K;
    } else if (ft == kQ3_K_M) {
      type = st.i_attention_wv < 2 ? DType::kQ5_K : DType::kQ4_K;
    } else if (ft == kQ3_K_L) {
      type = DType::kQ5_K;
    } else if ((ft == kIQ4_NL || ft == kIQ4_XS) && st.n_gqa() >= 4) {
      type = DType::kQ5_K;
    } else if ((ft == kQ4_K_M || ft == kQ5_K_M) &&
               use_more_bits(st.i_attention_wv, st.n_attention_wv)) {
      type = DType::kQ6_K;
    } else if (ft == kQ4_K_S && st.i_attention_wv < 4) {
      type = DType::kQ5_K;
    }
    // 70B llama: 8 heads share each attn_v, so it is 8× smaller than attn_q; more bits are cheap.
    if (st.is_70b() && (type == DType::kQ3_K || type == DType::kQ4_K)) type = DType::kQ5_K;
    if (n_expert == 8) type = DType::kQ8_0;
    ++st.i_attention_wv;
    return type;
  }
  if (role == Role::kAttnK) return n_expert == 8 ? DType::kQ8_0 : type;
  if (role == Role::kFfnDown) {
    const int il = st.ffn_layer(st.i_ffn_down, t.name);
    const int n = st.facts.n_layer;
    ++st.i_ffn_down;
    if (ft == kQ2_K) return DType::kQ3_K;
    if (ft == kQ2_K_S) return il < n / 8 ? DType::kQ4_K : type;
    if (ft == kQ3_K_M) {
      if (il < n / 16) return DType::kQ5_K;
      return arch != "falcon" || use_more_bits(il, n) ? DType::kQ4_K : DType::kQ3_K;
    }
    if (ft == kQ3_K_L) return arch == "falcon" ? DType::kQ4_K : DType::kQ5_K;
    if (ft == kQ4_K_M) {
      if (arch == "falcon") {
        return il < n / 16 ? DType::kQ6_K : use_more_bits(il, n) ? DType::kQ5_K : DType::kQ4_K;
      }
      return use_more_bits(il, n) ? DType::kQ6_K : type;
    }
    if (il < n / 8 && (ft == kIQ4_NL || ft == kIQ4_XS) && !st.options.has_imatrix) {
      return DType::kQ5_K;
    }
    if (ft == kQ5_K_M) return use_more_bits(il, n) ? DType::kQ6_K : type;
    if (ft == kQ4_K_S && arch != "falcon" && il < n / 8) return DType::kQ5_K;
    if ((ft == kQ4_0 || ft == kQ5_0) && st.options.has_imatrix && il < n / 8) {
      // Guards the first ffn_down layers, where Q4_0 / Q5_0 misbehave even with an imatrix.
      return ft == kQ4_0 ? DType::kQ4_1 : DType::kQ5_1;
    }
    return type;
  }
  if (role == Role::kAttnOutput) {
    if (arch == "falcon") return ft == kQ3_K_L ? DType::kQ4_K : type;
    if (n_expert == 8) {
      const bool bump = ft == kQ2_K || ft == kQ3_K_S || ft == kQ3_K_M || ft == kIQ4_NL ||
                        ft == kQ4_K_S || ft == kQ4_K_M || ft == kIQ4_XS;
      return bump ? DType::kQ5_K : type;
    }
    if (ft == kQ2_K) return DType::kQ3_K;
    if (ft == kQ3_K_M) return DType::kQ4_K;
    if (ft == kQ3_K_L) return DType::kQ5_K;
    return type;
  }
  if (role == Role::kAttnQkv) {
    if (ft == kQ3_K_M || ft == kQ3_K_L) return DType::kQ4_K;
    if (ft == kQ4_K_M) return DType::kQ5_K;
    if (ft == kQ5_K_M) return DType::kQ6_K;
    return type;
  }
  return type;
}

// Types whose rows are 256-value super-blocks fall back to a 32-value type when a row is not a
// whole number of them (and to F16 when it is not a whole number of 32 either).
DType fallback_for(DType wanted, int64_t row_length, bool* used) {
  *used = false;
  if (row_length % tensor::block_values(wanted) == 0) return wanted;
  *used = true;
  DType fallback;
  switch (wanted) {
    case DType::kIQ4_XS:
      fallback = DType::kIQ4_NL;
      break;
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kTQ1_0:
    case DType::kTQ2_0:
      fallback = DType::kQ4_0;
      break;
    case DType::kQ4_K:
      fallback = DType::kQ5_0;
      break;
    case DType::kQ5_K:
      fallback = DType::kQ5_1;
      break;
    case DType::kQ6_K:
      fallback = DType::kQ8_0;
      break;
    default:
      fallback = DType::kF16;
      break;
  }
  return row_length % tensor::block_values(fallback) == 0 ? fallback : DType::kF16;
}

bool is_quantized_type(DType t) {
  return t != DType::kF32 && t != DType::kF16 && t != DType::kBF16;
}

bool kept(const KeepTensors& keep, std::string_view name, bool tied) {
  if (name == "output.weight") return keep.output;
  if (name == "token_embd.weight") return keep.token_embd || (tied && keep.output);
  if (name == "per_layer_token_embd.weight") return keep.per_layer_token_embd;
  return false;
}

}  // namespace

const std::vector<FileType>& file_types() {
  return kFileTypes;
}

util::Result<FileType> parse_file_type(std::string_view name) {
  std::string key = upper(name);
  if (key == "Q3_K" || key == "Q4_K" || key == "Q5_K") key += "_M";  // llama.cpp's aliases
  for (const FileType& f : kFileTypes) {
    if (f.name == key) return f;
  }
  std::string names;
  for (const FileType& f : kFileTypes) names += (names.empty() ? "" : ", ") + std::string(f.name);
  return util::errorf("quantize: unknown type '{}' — choose one of {}", name, names);
}

util::Result<TensorTypeOverride> parse_tensor_type_override(std::string_view text) {
  const size_t eq = text.rfind('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == text.size()) {
    return util::errorf("quantize: --tensor-type '{}' is not REGEX=TYPE (e.g. attn_v=q8_0)", text);
  }
  const std::string pattern(text.substr(0, eq));
  const auto type = gguf::tensor_type_from_name(text.substr(eq + 1));
  if (!type || !tensor::can_quantize(*type) || *type == DType::kQ8_K) {
    return util::errorf("quantize: --tensor-type '{}': '{}' is not a type headroom writes", text,
                        text.substr(eq + 1));
  }
  try {
    return TensorTypeOverride{pattern, std::regex(pattern), *type};
  } catch (const std::regex_error& e) {
    return util::errorf("quantize: --tensor-type '{}': bad regular expression ({})", text,
                        e.what());
  }
}

util::Status parse_keep(std::string_view text, KeepTensors* keep) {
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    const std::string_view what = text.substr(start, end - start);
    if (what == "output") {
      keep->output = true;
    } else if (what == "token_embd") {
      keep->token_embd = true;
    } else if (what == "per_layer_token_embd") {
      keep->per_layer_token_embd = true;
    } else if (what == "embeddings") {
      keep->output = keep->token_embd = keep->per_layer_token_embd = true;
    } else {
      return util::errorf(
          "quantize: --keep '{}' — use output, token_embd, per_layer_token_embd "
          "or embeddings (all three)",
          what);
    }
    start = end + 1;
  }
  return {};
}

bool allows_quantization(const TensorDesc& t) {
  if (effective_dims(t) < 2) return false;
  const std::string_view name = t.name;
  if (name.size() < 6 || name.substr(name.size() - 6) != "weight") return false;
  static constexpr std::string_view kLeftAlone[] = {"_norm.weight",
                                                    "ffn_gate_inp.weight",
                                                    "ffn_gate_tid2eid.weight",
                                                    "altup",
                                                    "laurel",
                                                    "per_layer_model_proj",
                                                    "ssm_conv1d",
                                                    "shortconv.conv.weight",
                                                    "indexer.k_proj.weight",
                                                    "indexer.q_proj.weight",
                                                    "time_mix_first.weight",
                                                    "time_mix_w0.weight",
                                                    "time_mix_w1.weight",
                                                    "time_mix_w2.weight",
                                                    "time_mix_v0.weight",
                                                    "time_mix_v1.weight",
                                                    "time_mix_v2.weight",
                                                    "time_mix_a0.weight",
                                                    "time_mix_a1.weight",
                                                    "time_mix_a2.weight",
                                                    "time_mix_g1.weight",
                                                    "time_mix_g2.weight",
                                                    "time_mix_decay_w1.weight",
                                                    "time_mix_decay_w2.weight",
                                                    "time_mix_lerp_fused.weight",
                                                    "attn_rel_b.weight",
                                                    ".position_embd",
                                                    "sam.pos_embd",
                                                    "sam.neck.",
                                                    "sam.net_",
                                                    ".rel_pos",
                                                    ".patch_embd",
                                                    ".patch_merger",
                                                    "a.rvq.codebook",
                                                    "mm.a.code_embd"};
  for (std::string_view part : kLeftAlone) {
    if (contains(name, part)) return false;
  }
  return name != "position_embd.weight" && name != "token_types.weight";
}

util::Result<std::vector<TensorChoice>> choose_types(const ModelFacts& facts,
                                                     const std::vector<TensorDesc>& tensors,
                                                     const MixOptions& options) {
  MixState st{facts, options};
  for (const TensorDesc& t : tensors) {
    const Role r = role_of(t.name);
    if (is_attn_v_like(r)) ++st.n_attention_wv;
    if (r == Role::kOutput) st.tied_embeddings = false;
  }
  // The rules count attn_v and ffn tensors as they meet them, in llama.cpp's order: tensors
  // outside the blocks first, then by layer, by name within a layer.
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const int la = layer_of(tensors[a].name);
    const int lb = layer_of(tensors[b].name);
    return la != lb ? la < lb : tensors[a].name < tensors[b].name;
  });
  const DType default_type = options.file_type.default_type;
  std::vector<TensorChoice> out(tensors.size());
  for (size_t i : order) {
    const TensorDesc& t = tensors[i];
    TensorChoice& c = out[i];
    c.type = c.wanted = t.type;
    if (!allows_quantization(t)) {
      c.why = "not a quantized tensor";
      continue;
    }
    if (kept(options.keep, t.name, st.tied_embeddings)) {
      c.why = "kept (--keep)";
      continue;
    }
    DType type = default_type;
    const TensorTypeOverride* manual = nullptr;
    for (const TensorTypeOverride& o : options.overrides) {
      if (std::regex_search(t.name, o.regex)) {
        manual = &o;
        break;
      }
    }
    if (manual) {
      type = manual->type;
      c.why = "--tensor-type " + manual->pattern;
    } else if (is_quantized_type(default_type) && !options.pure) {
      type = mix_rule(st, type, t, role_of(t.name));
      c.why = type == default_type ? "" : "mix";
    }
    c.wanted = type;
    if (is_quantized_type(type)) type = fallback_for(type, t.ne[0], &c.fallback);
    if (c.fallback) {
      c.why = fmt::format("rows of {} are not whole {} blocks: {}", t.ne[0],
                          tensor::dtype_name(c.wanted), tensor::dtype_name(type));
    }
    // Q2_K_S's Q2_K tensors are too coarse without an importance matrix (llama.cpp refuses too).
    if (options.file_type.code == kQ2_K_S && type == DType::kQ2_K && !options.has_imatrix &&
        !is_token_embd(t.name) && t.name != "output.weight") {
      return util::errorf(
          "quantize: {} needs an importance matrix for {} — pass --imatrix FILE "
          "or choose Q2_K",
          options.file_type.name, t.name);
    }
    c.type = type;
    c.quantized = type != t.type;
  }
  return out;
}

}  // namespace convert
