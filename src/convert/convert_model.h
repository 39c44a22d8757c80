// headroom convert: a Hugging Face checkpoint directory (config.json, tokenizer, *.safetensors)
// to one GGUF file, optionally quantized in the same pass.
#pragma once

#include <string>
#include <vector>

#include "convert/hf_tokenizer.h"
#include "convert/quant_mix.h"
#include "convert/tensor_source.h"
#include "util/result.h"
#include "util/thread_pool.h"

namespace convert {

struct ConvertOptions {
  // auto (BF16 when the checkpoint is BF16, else F16), f32, f16, bf16, or any quantize type
  // (q8_0, q4_k_m, …; the mix rules then apply, with `mix`'s overrides).
  std::string outtype = "auto";
  MixOptions mix;            // its file_type is set from outtype
  std::string imatrix_path;  // optional, for quantized outtypes
  std::string name;          // general.name; default: the directory's name
};

struct ConvertResult {
  std::string arch;
  VocabInfo vocab;
  std::vector<TensorChoice> choices;
  WriteTotals totals;
  int skipped_tensors = 0;  // vision/audio tensors left for an mmproj file
};

// Errors are one line naming the file and tensor: no config.json, an unsupported architecture,
// missing shards or tensors, shapes that disagree with the config, unreadable dtypes. The output
// is written under a temporary name and renamed when complete.
util::Result<ConvertResult> convert_checkpoint(const std::string& dir, const std::string& out,
                                               const ConvertOptions& options,
                                               util::ThreadPool& pool, const ProgressFn& progress);

// The float type a converter writes a tensor in before any quantization: F32 for 1-D tensors,
// norms, routers and non-weight tensors (as llama.cpp's converter), `matrices` otherwise.
DType converted_float_type(const SourceTensor& t, size_t source_dims, DType matrices);

}  // namespace convert
