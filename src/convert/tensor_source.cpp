// Converting source tensors into a GGUF writer: row chunks on every thread, written in place.
#include "convert/tensor_source.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <optional>

#include "tensor/quantize.h"

namespace convert {
namespace {

// Values each task converts (about 64 KiB of f32): small enough to balance the threads and keep
// scratch small, large enough that the per-task overhead vanishes.
constexpr int64_t kValuesPerTask = 16384;
// Tasks per parallel_for call: progress is reported between calls.
constexpr int kTasksPerWindowPerThread = 8;

std::vector<uint64_t> to_u64(const std::vector<int64_t>& ne) {
  return {ne.begin(), ne.end()};
}

// The importance of tensor `src`'s columns for the chosen type: null when the type has no use
// for it or the matrix has no entry (counted); an error when the entry's size does not fit.
util::Result<const float*> importance_for(const SourceTensor& src, DType type,
                                          const ImportanceMatrix* imatrix, WriteTotals& totals) {
  if (!imatrix || !tensor::uses_importance(type)) return static_cast<const float*>(nullptr);
  const std::vector<float>* entry = imatrix->find(src.name);
  if (!entry) {
    ++totals.n_without_importance;
    return static_cast<const float*>(nullptr);
  }
  const int64_t n_expert = src.ne.size() > 2 ? src.ne[2] : 1;
  if (static_cast<int64_t>(entry->size()) != src.ne[0] * n_expert) {
    if (src.name == "token_embd.weight" || src.name == "per_layer_token_embd.weight") {
      ++totals.n_without_importance;  // embeddings are looked up, not multiplied: no imatrix row
      return static_cast<const float*>(nullptr);
    }
    return util::errorf(
        "imatrix entry {} has {} values but the tensor has {} columns × {} "
        "experts — the imatrix was made for another model",
        src.name, entry->size(), src.ne[0], n_expert);
  }
  return entry->data();
}

// Fills `out` with the tensor converted to `type`, rows in parallel chunks.
util::Status convert_rows(const SourceTensor& src, DType type, const float* importance,
                          const ConvertContext& ctx, const WriteProgress& at,
                          std::span<uint8_t> out) {
  const int64_t ne0 = src.ne[0];
  const int64_t n_rows = src.n_rows();
  const int64_t rows_per_row_of_experts = src.ne.size() > 1 ? src.ne[1] : 1;
  const int64_t out_row_bytes = tensor::row_bytes(type, ne0);
  const int64_t rows_per_task = std::max<int64_t>(1, kValuesPerTask / std::max<int64_t>(ne0, 1));
  const int64_t n_tasks = (n_rows + rows_per_task - 1) / rows_per_task;
  util::ThreadPool& pool = *ctx.pool;
  std::vector<std::unique_ptr<float[]>> scratch(static_cast<size_t>(pool.size()));
  for (auto& s : scratch) s = std::make_unique<float[]>(static_cast<size_t>(rows_per_task * ne0));
  std::mutex error_mutex;
  std::optional<util::Error> error;
  auto run_task = [&](int64_t task, int thread) {
    const int64_t first = task * rows_per_task;
    const int64_t count = std::min(rows_per_task, n_rows - first);
    float* rows = scratch[static_cast<size_t>(thread)].get();
    util::Status s = src.read_rows(first, count, rows);
    for (int64_t i = 0; s && i < count; ++i) {
      const int64_t r = first + i;
      const float* imp = importance ? importance + (r / rows_per_row_of_experts) * ne0 : nullptr;
      s = tensor::quantize_row(type, rows + i * ne0, out.data() + r * out_row_bytes, ne0, imp);
      if (!s) s = std::move(s).error().with_context(fmt::format("row {}", r));
    }
    if (!s) {
      std::lock_guard lock(error_mutex);
      if (!error) error = std::move(s).error();
    }
  };
  const int64_t window = static_cast<int64_t>(pool.size()) * kTasksPerWindowPerThread;
  WriteProgress progress = at;
  for (int64_t first = 0; first < n_tasks && !error; first += window) {
    const int n = static_cast<int>(std::min(window, n_tasks - first));
    pool.parallel_for(n, [&](int task, int thread) { run_task(first + task, thread); });
    if (ctx.progress) {
      progress.fraction = static_cast<double>(first + n) / static_cast<double>(n_tasks);
      ctx.progress(progress);
    }
  }
  if (error) return *error;
  return {};
}

}  // namespace

int64_t SourceTensor::n_rows() const {
  int64_t n = 1;
  for (size_t d = 1; d < ne.size(); ++d) n *= ne[d];
  return n;
}

int64_t SourceTensor::n_elements() const {
  return ne.empty() ? 0 : ne[0] * n_rows();
}

util::Status add_converted_tensors(gguf::Writer& writer, std::vector<SourceTensor>& sources,
                                   const std::vector<TensorChoice>& choices,
                                   const ConvertContext& context, WriteTotals& totals) {
  for (size_t i = 0; i < sources.size(); ++i) {
    SourceTensor& src = sources[i];
    const TensorChoice& choice = choices[i];
    totals.bytes_in += static_cast<uint64_t>(tensor::row_bytes(src.type, src.ne[0]) * src.n_rows());
    totals.bytes_out +=
        static_cast<uint64_t>(tensor::row_bytes(choice.type, src.ne[0]) * src.n_rows());
    totals.n_elements += static_cast<uint64_t>(src.n_elements());
    if (choice.fallback) ++totals.n_fallback;
    const WriteProgress at{i, sources.size(), &src, &choice, 0};
    if (choice.type == src.type && !src.raw.empty()) {  // copied as stored
      writer.add_tensor(src.name, choice.type, to_u64(src.ne),
                        [&src, context, at](std::span<uint8_t> out) -> util::Status {
                          std::copy(src.raw.begin(), src.raw.end(), out.begin());
                          if (context.progress)
                            context.progress({at.index, at.count, at.tensor, at.choice, 1.0});
                          if (src.done) src.done();
                          return {};
                        });
      continue;
    }
    HR_ASSIGN_OR_RETURN(const float* importance,
                        importance_for(src, choice.type, context.imatrix, totals));
    writer.add_tensor(src.name, choice.type, to_u64(src.ne),
                      [&src, type = choice.type, importance, context, at](std::span<uint8_t> out) {
                        if (context.progress) context.progress(at);
                        util::Status s = convert_rows(src, type, importance, context, at, out);
                        if (src.done) src.done();
                        return s;
                      });
  }
  return {};
}

}  // namespace convert
