// Hugging Face checkpoints as GGUF models: each architecture turns config.json and the
// checkpoint's tensors into llama.cpp's metadata keys and tensor names (what its converter
// writes), with the transformations it applies (Q/K row permutation for llama's RoPE, synthesized
// rope_freqs, Gemma 4's renamed scalars and fused experts).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "convert/hf_tokenizer.h"
#include "convert/quant_mix.h"
#include "convert/safetensors.h"
#include "convert/tensor_source.h"
#include "gguf/writer.h"

namespace convert {

// What an architecture's converter produces: keys, tensors to write, and the facts the
// quantization mix needs.
struct HfConversion {
  std::string arch;  // general.architecture
  VocabStyle vocab = VocabStyle::kLlama;
  std::vector<std::pair<std::string, gguf::MetaValue>> metadata;  // {arch}.* keys
  std::vector<SourceTensor> tensors;
  ModelFacts facts;
  int skipped_tensors = 0;  // vision/audio towers (they belong in a separate mmproj file)
};

// The model config: config.json, with a multimodal checkpoint's text_config merged over it.
struct HfConfig {
  const nlohmann::json& json;
  std::string file;  // for error messages

  bool has(const std::string& key) const;
  util::Result<int64_t> integer(const std::string& key) const;  // required
  int64_t integer_or(const std::string& key, int64_t fallback) const;
  double number_or(const std::string& key, double fallback) const;
  bool boolean_or(const std::string& key, bool fallback) const;
};

// A checkpoint tensor as a source: the GGUF name, ggml shape (the reversed PyTorch shape), the
// type the converter writes when not quantizing. `row_of` maps an output row to the source row
// (permutations, trimming); null keeps rows as they are. Errors: a dtype headroom cannot read.
util::Result<SourceTensor> checkpoint_tensor(const SafeTensor& t, std::string gguf_name,
                                             std::function<int64_t(int64_t)> row_of = nullptr,
                                             int64_t n_rows = -1);

// One-line error for a tensor whose shape is not what the config implies.
util::Status check_shape(const SafeTensor& t, const std::vector<int64_t>& expected);

// llama's Q and K rows as llama.cpp's converter writes them: output row r of a head_dim-wide head
// comes from checkpoint row rope_pair_rows(head_dim)(r) (HF rotates halves, llama.cpp pairs).
std::function<int64_t(int64_t)> rope_pair_rows(int64_t head_dim);

// f32 values as a source (synthesized tensors such as rope_freqs).
SourceTensor f32_tensor(std::string name, std::vector<float> values);

util::Result<HfConversion> convert_llama_checkpoint(const HfConfig& config, const Checkpoint& ckpt);
util::Result<HfConversion> convert_gemma4_checkpoint(const HfConfig& config,
                                                     const Checkpoint& ckpt);

}  // namespace convert
