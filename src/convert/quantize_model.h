// Quantizing a GGUF model file into another: every tensor in the type its mix chooses, the
// source's metadata carried over (with the new file type), one tensor in memory at a time.
#pragma once

#include <string>
#include <vector>

#include "convert/imatrix.h"
#include "convert/quant_mix.h"
#include "convert/tensor_source.h"
#include "gguf/file.h"
#include "util/result.h"

namespace convert {

struct QuantizeOptions {
  MixOptions mix;
  std::string imatrix_path;       // empty: no importance matrix
  bool allow_requantize = false;  // quantize tensors that are already quantized
};

// What the mix rules read from a model's metadata.
util::Result<ModelFacts> model_facts(const gguf::File& file);

// The file's tensors as sources (read through the mapping, released once written).
std::vector<SourceTensor> gguf_sources(const gguf::File& file);

// The types `options` give each tensor of `file`, checked: a tensor already quantized that would
// be quantized again needs allow_requantize.
util::Result<std::vector<TensorChoice>> plan_quantization(const gguf::File& file,
                                                          const std::vector<SourceTensor>& sources,
                                                          const QuantizeOptions& options);

// The quantize metadata keys llama.cpp writes: general.file_type, general.quantization_version,
// and where an importance matrix was used, quantize.imatrix.*.
void set_quantization_metadata(gguf::Writer& writer, const FileType& file_type,
                               const std::string& imatrix_path, const ImportanceMatrix* imatrix);

struct QuantizeResult {
  std::vector<TensorChoice> choices;
  WriteTotals totals;
};

// Reads `in`, writes `out` (under a temporary name, renamed at the end: nothing half-written on
// error). Errors name the file and tensor.
util::Result<QuantizeResult> quantize_model(const std::string& in, const std::string& out,
                                            const QuantizeOptions& options, util::ThreadPool& pool,
                                            const ProgressFn& progress);

}  // namespace convert
