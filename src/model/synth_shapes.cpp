// The shapes synth can write: Gemma 4 variants (spec §1.1) and tiny configs (§7), llama sizes.
#include <algorithm>

#include "model/synth.h"

namespace model {
namespace {

std::vector<bool> pattern(int n_layer, int period) {  // true = sliding; every period-th layer is full
  std::vector<bool> p(n_layer);
  for (int i = 0; i < n_layer; ++i) p[i] = (i % period) != period - 1;
  return p;
}

SynthShape gemma4_base(std::string name) {
  SynthShape s;
  s.arch = "gemma4";
  s.name = std::move(name);
  s.rope_theta = 1e6f;
  s.rope_theta_swa = 1e4f;
  s.rms_eps = 1e-6f;
  s.final_softcap = 30.0f;
  s.head_dim_sliding = 256;
  s.head_dim_full = 512;
  s.n_vocab = 262144;
  return s;
}

std::vector<SynthShape> gemma4_shapes() {
  std::vector<SynthShape> out;
  {  // E2B: (4 sliding + 1 full) × 7, 20 KV-shared layers with double-wide MLP, PLE 256.
    SynthShape s = gemma4_base("e2b");
    s.n_layer = 35, s.n_embd = 1536, s.n_head = 8, s.n_head_kv_sliding = 1, s.n_head_kv_full = 1;
    s.sliding = pattern(35, 5), s.window = 512, s.n_shared_kv = 20, s.n_embd_per_layer = 256;
    s.n_ff.assign(35, 6144);
    std::fill(s.n_ff.begin() + 15, s.n_ff.end(), 12288);
    s.n_ctx = 131072;
    out.push_back(s);
  }
  {  // E4B: (5 + 1) × 7, 18 KV-shared layers, PLE 256.
    SynthShape s = gemma4_base("e4b");
    s.n_layer = 42, s.n_embd = 2560, s.n_head = 8, s.n_head_kv_sliding = 2, s.n_head_kv_full = 2;
    s.sliding = pattern(42, 6), s.window = 512, s.n_shared_kv = 18, s.n_embd_per_layer = 256;
    s.n_ff.assign(42, 10240);
    s.n_ctx = 131072;
    out.push_back(s);
  }
  {  // 31B dense: full layers have 4 KV heads and no V projection.
    SynthShape s = gemma4_base("31b");
    s.n_layer = 60, s.n_embd = 5376, s.n_head = 32, s.n_head_kv_sliding = 16, s.n_head_kv_full = 4;
    s.sliding = pattern(60, 6), s.window = 1024, s.k_eq_v = true;
    s.n_ff.assign(60, 21504);
    s.n_ctx = 262144;
    out.push_back(s);
  }
  {  // 26B-A4B: 128 experts, top 8, on every layer beside a 2112-wide dense MLP.
    SynthShape s = gemma4_base("26b-a4b");
    s.n_layer = 30, s.n_embd = 2816, s.n_head = 16, s.n_head_kv_sliding = 8, s.n_head_kv_full = 2;
    s.sliding = pattern(30, 6), s.window = 1024, s.k_eq_v = true;
    s.n_ff.assign(30, 2112);
    s.n_expert = 128, s.n_expert_used = 8, s.n_ff_exp = 704;
    s.n_ctx = 262144;
    out.push_back(s);
  }
  {  // §7.1 tiny-e: PLE, KV sharing of both kinds, double-wide MLP on the shared layers.
    SynthShape s = gemma4_base("tiny-e");
    s.n_layer = 8, s.n_embd = 128, s.n_head = 4, s.n_head_kv_sliding = 2, s.n_head_kv_full = 2;
    s.head_dim_sliding = 32, s.head_dim_full = 64;
    s.sliding = {true, true, false, true, false, true, true, false};
    s.window = 8, s.n_shared_kv = 3, s.n_embd_per_layer = 16, s.n_vocab = 512, s.n_ctx = 256;
    s.n_ff = {256, 256, 256, 256, 256, 512, 512, 512};
    s.weight_std = 0.05f;
    out.push_back(s);
  }
  {  // §7.2 tiny-moe: MoE with per-expert scale, k_eq_v, per-type KV heads.
    SynthShape s = gemma4_base("tiny-moe");
    s.n_layer = 6, s.n_embd = 128, s.n_head = 4, s.n_head_kv_sliding = 2, s.n_head_kv_full = 1;
    s.head_dim_sliding = 32, s.head_dim_full = 64;
    s.sliding = {true, true, false, true, true, false};
    s.window = 8, s.k_eq_v = true, s.n_vocab = 512, s.n_ctx = 256;
    s.n_ff.assign(6, 96);
    s.n_expert = 8, s.n_expert_used = 2, s.n_ff_exp = 32;
    s.weight_std = 0.05f;
    out.push_back(s);
    s.name = "tiny-dense-keqv";  // the 31B-like variant: tiny-moe without MoE
    s.n_expert = s.n_expert_used = s.n_ff_exp = 0;
    out.push_back(s);
  }
  return out;
}

SynthShape llama_base(std::string name, int n_layer, int n_embd, int n_head, int n_head_kv, int n_ff, int n_vocab) {
  SynthShape s;
  s.arch = "llama";
  s.name = std::move(name);
  s.n_layer = n_layer, s.n_embd = n_embd, s.n_head = n_head;
  s.n_head_kv_sliding = s.n_head_kv_full = n_head_kv;
  s.head_dim_sliding = s.head_dim_full = n_embd / n_head;
  s.n_ff.assign(n_layer, n_ff);
  s.sliding.assign(n_layer, false);
  s.n_vocab = n_vocab;
  s.n_ctx = 2048;
  return s;
}

std::vector<SynthShape> llama_shapes() {
  std::vector<SynthShape> out;
  out.push_back(llama_base("tiny", 5, 64, 8, 4, 172, 512));     // stories260K's dimensions
  out.push_back(llama_base("25m", 8, 512, 8, 4, 1536, 512));    // the "llama 25.7M" of peer-baselines.md
  out.push_back(llama_base("1b", 16, 2048, 32, 8, 8192, 128256));
  out.push_back(llama_base("8b", 32, 4096, 32, 8, 14336, 128256));
  out[2].rope_theta = out[3].rope_theta = 500000.0f;
  out[2].n_ctx = out[3].n_ctx = 131072;
  return out;
}

std::vector<SynthShape> shapes_of(std::string_view arch) {
  if (arch == "gemma4") return gemma4_shapes();
  if (arch == "llama") return llama_shapes();
  return {};
}

}  // namespace

std::vector<std::string> synth_shape_names(std::string_view arch) {
  std::vector<std::string> names;
  for (const auto& s : shapes_of(arch)) names.push_back(s.name);
  return names;
}

util::Result<SynthShape> synth_shape(std::string_view arch, std::string_view name) {
  auto shapes = shapes_of(arch);
  if (shapes.empty()) return util::errorf("synth: unknown architecture '{}' — use llama or gemma4", arch);
  for (auto& s : shapes) {
    if (s.name == name) return s;
  }
  std::string list;
  for (const auto& s : shapes) list += (list.empty() ? "" : ", ") + s.name;
  return util::errorf("synth: unknown {} shape '{}' — choose one of: {}", arch, name, list);
}

}  // namespace model
