// Random-weight GGUF models of real and tiny shapes (spec §1, §7), seeded and deterministic.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/writer.h"
#include "util/result.h"

namespace model {

// Every dimension of a synthetic model. Configs as data: each shape is a row of values.
struct SynthShape {
  std::string arch;  // "llama" or "gemma4"
  std::string name;
  int n_layer = 0, n_embd = 0, n_vocab = 0, n_ctx = 0;
  int n_head = 0;
  int n_head_kv_sliding = 0, n_head_kv_full = 0;
  int head_dim_sliding = 0, head_dim_full = 0;
  std::vector<int> n_ff;      // per layer
  std::vector<bool> sliding;  // per layer (gemma4)
  int window = 0;
  int n_shared_kv = 0;       // trailing KV-shared layers
  bool k_eq_v = false;       // full layers without attn_v
  int n_embd_per_layer = 0;  // PLE width P
  int n_expert = 0, n_expert_used = 0, n_ff_exp = 0;
  float rope_theta = 10000, rope_theta_swa = 10000;
  float rms_eps = 1e-5f;
  float final_softcap = 0;
  float weight_std = 0.02f;  // N(0, std) for matrices
};

// Shape names per architecture, e.g. gemma4: tiny-e, tiny-moe, tiny-dense-keqv, e2b, e4b, 26b-a4b,
// 31b.
std::vector<std::string> synth_shape_names(std::string_view arch);
util::Result<SynthShape> synth_shape(std::string_view arch, std::string_view name);

struct SynthOptions {
  std::string arch = "gemma4";
  std::string shape = "tiny-e";
  std::string type = "f32";  // a tensor type (f32, f16, q8_0, q4_k …) or a mix: q4_k_m
  uint64_t seed = 1;
  std::string vocab_path;          // copy tokenizer.* from this GGUF (sets the vocabulary size)
  bool shared_kv_tensors = false;  // also write (unused, garbage) K/V tensors on KV-shared layers
  bool zero_ple = false;           // all-zero per-layer-embedding table (a §7.4 check)
  bool no_weights = false;         // leave tensor data unwritten (sparse file; for plans and sizes)
  // Stored as tokenizer.chat_template with the built-in gemma4 vocabulary (the CLI passes Gemma
  // 4's template, which model/ cannot see: chat/ sits above it).
  std::string chat_template;
};

// A writer holding the whole model; tensor data is generated while writing.
util::Result<gguf::Writer> synth_writer(const SynthOptions& options);
// The same for a shape of the caller's (options.arch and options.shape are not read).
util::Result<gguf::Writer> synth_writer(const SynthOptions& options, SynthShape shape);

}  // namespace model
