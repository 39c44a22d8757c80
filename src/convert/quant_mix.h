// Which type each tensor of a model gets when it is quantized: the file types (Q4_K_M, Q8_0, …)
// and their standard mixes as llama.cpp composes them, per-tensor overrides and kept tensors.
//
// A mix is more than one type: the tensors the output is most sensitive to get more bits (the
// output projection Q6_K; in Q4_K_M, attn_v and ffn_down of the first and last eighth of the
// layers and every third layer between them Q6_K), and tensors whose rows are not whole blocks
// of the type fall back to a 32-value type. headroom follows llama.cpp's rules so a Q4_K_M made
// here has the same per-tensor types as one made there, and other runtimes read it the same way.
#pragma once

#include <cstdint>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/dtype.h"
#include "util/result.h"

namespace convert {

using tensor::DType;

// A GGUF file type (general.file_type): a default tensor type, and the mix rules keyed on it.
struct FileType {
  std::string_view name;  // "Q4_K_M", as llama.cpp's quantize spells it
  uint32_t code;          // general.file_type (llama_ftype)
  DType default_type;
  std::string_view description;
};

// The file types headroom writes: every type its kernels read, and the mixes made of them.
const std::vector<FileType>& file_types();
// "q4_k_m" → its FileType (case-insensitive; "Q4_K" is Q4_K_M as in llama.cpp); otherwise an
// error listing the choices.
util::Result<FileType> parse_file_type(std::string_view name);

// One `--tensor-type REGEX=TYPE`: tensors whose name matches (anywhere) get TYPE.
struct TensorTypeOverride {
  std::string pattern;
  std::regex regex;
  DType type;
};
util::Result<TensorTypeOverride> parse_tensor_type_override(std::string_view text);

// Tensors `--keep` leaves in their source type.
struct KeepTensors {
  bool output = false;                // output.weight (and token_embd.weight when tied to it)
  bool token_embd = false;            // token_embd.weight
  bool per_layer_token_embd = false;  // per_layer_token_embd.weight (Gemma 3n / 4 PLE table)
};
// "output", "token_embd", "per_layer_token_embd", or "embeddings" for all three; comma lists too.
util::Status parse_keep(std::string_view text, KeepTensors* keep);

struct MixOptions {
  FileType file_type;
  std::vector<TensorTypeOverride> overrides;  // first match wins
  KeepTensors keep;
  bool pure = false;         // one type for every quantizable tensor: no mix rules
  bool has_imatrix = false;  // a few rules differ when an importance matrix is given
};

// What the mix rules need of the model (from its metadata).
struct ModelFacts {
  std::string arch;   // general.architecture
  int n_layer = 0;    // {arch}.block_count
  int n_head = 0;     // {arch}.attention.head_count (layer 0 where per layer)
  int n_head_kv = 0;  // {arch}.attention.head_count_kv (layer 0 where per layer)
  int n_expert = 0;   // {arch}.expert_count
};

struct TensorDesc {
  std::string name;
  DType type = DType::kF32;  // the source type
  std::vector<int64_t> ne;   // ne[0] is the row length
};

struct TensorChoice {
  DType type = DType::kF32;  // the output type
  bool quantized = false;    // false: copied as it is (norms, 1-D tensors, kept tensors, …)
  bool fallback = false;     // the wanted type did not fit the row length: a fallback was used
  DType wanted = DType::kF32;
  std::string why;  // short reason, for the progress line and the report
};

// The output type of every tensor (same order as `tensors`). Errors: a kept or overridden tensor
// whose type cannot be written, a type requiring an importance matrix when none is given.
util::Result<std::vector<TensorChoice>> choose_types(const ModelFacts& facts,
                                                     const std::vector<TensorDesc>& tensors,
                                                     const MixOptions& options);

// Whether llama.cpp would quantize this tensor at all (2-D and up, named *weight, not a norm,
// router, positional embedding, or one of the small per-layer tensors it leaves alone).
bool allows_quantization(const TensorDesc& tensor);

}  // namespace convert
