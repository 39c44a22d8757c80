// Importance matrices (llama.cpp's imatrix files): per weight tensor, the mean square of each
// input column's activations over a calibration text. Quantizers weigh each weight's error by
// its column's importance, so the columns that carry large activations keep their precision.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "util/result.h"

namespace convert {

struct ImportanceMatrix {
  // Tensor name → importance per column, n_expert × row length for expert tensors (expert-major).
  std::unordered_map<std::string, std::vector<float>> columns;
  std::string dataset;  // the first calibration dataset named in the file, if any
  int64_t chunk_count = 0;

  const std::vector<float>* find(std::string_view tensor) const;
};

// Reads an imatrix in the GGUF format (tensors NAME.in_sum2 and NAME.counts, F32) or the legacy
// binary format. Each entry becomes in_sum2 / count per expert (1 where an expert saw no
// tokens). Errors name the file and the entry: not an imatrix, unpaired or mis-typed tensors,
// truncation, non-finite or negative values.
util::Result<ImportanceMatrix> load_imatrix(const std::string& path);

}  // namespace convert
