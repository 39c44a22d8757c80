// headroom convert --lora: a Hugging Face PEFT LoRA adapter (adapter_config.json with r,
// lora_alpha and target_modules; adapter_model.safetensors) to the GGUF form llama.cpp's
// converter writes (model/lora.h), checked against the base model's GGUF as it goes: every
// adapted module mapped to the base's tensor name, its shape checked, llama's Q and K rows put in
// the RoPE order the base's conversion gave them.
#pragma once

#include <string>

#include "convert/tensor_source.h"
#include "util/result.h"

namespace convert {

struct LoraConvertOptions {
  std::string base;             // the base model's GGUF
  std::string outtype = "f32";  // f32, f16 or bf16 (as llama.cpp's converter, f32 by default)
  std::string name;             // general.name; default: the directory's name
};

struct LoraConvertResult {
  std::string arch;
  int n_pairs = 0;
  int max_rank = 0;
  double alpha = 0;
  WriteTotals totals;
};

// Errors are one line naming the file and tensor: no adapter_config.json or safetensors, DoRA
// or per-module alphas (which the GGUF form cannot carry), a module headroom does not adapt, a
// tensor the base model has not or of another shape, a pair missing a half or of two ranks. The
// output is written under a temporary name and renamed when complete.
util::Result<LoraConvertResult> convert_lora(const std::string& peft_dir, const std::string& out,
                                             const LoraConvertOptions& options,
                                             util::ThreadPool& pool, const ProgressFn& progress);

}  // namespace convert
