// Tensors on their way into a GGUF file: where each one's values come from (a GGUF tensor, a
// safetensors tensor, a transform of one), and how a writer turns them into the chosen type —
// row chunks converted on every thread straight into the output, so memory stays bounded by
// one tensor whatever the model's size.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "convert/imatrix.h"
#include "convert/quant_mix.h"
#include "gguf/writer.h"
#include "util/result.h"
#include "util/thread_pool.h"

namespace convert {

// One tensor to write: its name and shape in the output, its type at the source, and a reader
// of its values as f32 rows. The reader must be safe to call from several threads at once.
struct SourceTensor {
  std::string name;
  std::vector<int64_t> ne;   // ggml order: ne[0] is the row length
  DType type = DType::kF32;  // the source type (what "keep" keeps)
  // Writes rows [first, first + count) (each ne[0] values) to out.
  std::function<util::Status(int64_t first, int64_t count, float* out)> read_rows;
  // The stored bytes, when the source already holds exactly what the output wants for an
  // unchanged type (copied without decoding); may be empty.
  std::span<const uint8_t> raw;
  // Called once the tensor is written: the source may drop its pages (may be empty).
  std::function<void()> done;

  int64_t n_rows() const;
  int64_t n_elements() const;
  TensorDesc desc() const { return {name, type, ne}; }
};

// Progress of a write, reported from the calling thread: tensor `index` of `count`, and the
// share of that tensor done (0 at its start, 1 at its end).
struct WriteProgress {
  size_t index = 0;
  size_t count = 0;
  const SourceTensor* tensor = nullptr;
  const TensorChoice* choice = nullptr;
  double fraction = 0;
};
using ProgressFn = std::function<void(const WriteProgress&)>;

struct ConvertContext {
  util::ThreadPool* pool = nullptr;
  const ImportanceMatrix* imatrix = nullptr;  // may be null
  ProgressFn progress;                        // may be empty
};

// What writing converted, for the summary line.
struct WriteTotals {
  uint64_t bytes_in = 0;   // the sources' bytes in their own types
  uint64_t bytes_out = 0;  // the output's tensor bytes
  uint64_t n_elements = 0;
  int n_fallback = 0;            // tensors whose wanted type did not fit their rows
  int n_without_importance = 0;  // quantized tensors the imatrix had no entry for
};

// Adds every tensor to `writer` in the type `choices` gives it (same order as `sources`). The
// conversion runs when the writer writes; `totals` (which must outlive that) is filled as it
// goes. Errors now: an importance entry whose size does not fit its tensor.
util::Status add_converted_tensors(gguf::Writer& writer, std::vector<SourceTensor>& sources,
                                   const std::vector<TensorChoice>& choices,
                                   const ConvertContext& context, WriteTotals& totals);

}  // namespace convert
