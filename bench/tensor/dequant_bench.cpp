// Throughput of the scalar reference dequantizers (tensor::dequantize_row), one benchmark per type.
//
// Matrix: 256 rows of 4096 values (1 Mi values, 4 MiB of f32 output), decoded row by row through
// the dispatcher as a matmul or embedding lookup would. The input is real quantized data: the
// 2048 x 8 tensor_e of ../shared/testdata/quant/<TYPE>.gguf (eight kinds of rows, from Gaussian to
// sparse to a magnitude ramp), tiled to fill the matrix, so scales and values are realistic and
// no NaN or denormal slows a type down artificially.
//
// Reported: bytes_per_second = f32 bytes written (the headline figure in bench/RESULTS.md), and
// in_bytes_per_second = quantized bytes read, which is what a bandwidth-bound kernel cares about.
//
// Run (Release build):
//   build/bench/tensor/dequant_bench --benchmark_repetitions=3
//       --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>

#include "gguf/file.h"
#include "tensor/dequantize.h"
#include "tensor/dtype.h"

namespace {

constexpr int64_t kRowLength = 4096;
constexpr int64_t kRows = 256;

// Page-aligned buffers, as runtime buffers are. With two plain heap vectors the distance between
// input and output can land a few bytes past a multiple of 4096, and on this machine glibc's
// `rep movsb` memcpy then drops from ~25 to ~2 GB/s, which would make the F32 row (a memcpy)
// measure that accident instead of the copy.
template <class T>
std::unique_ptr<T[], decltype(&std::free)> page_aligned(size_t count) {
  const size_t bytes = (count * sizeof(T) + 4095) / 4096 * 4096;
  return {static_cast<T*>(std::aligned_alloc(4096, bytes)), &std::free};
}

void dequantize_matrix(benchmark::State& state, const std::string& type_name) {
  const std::string path =
      std::string(HEADROOM_SHARED_DIR) + "/testdata/quant/" + type_name + ".gguf";
  auto file = gguf::File::open(path);
  if (!file.ok()) {
    state.SkipWithError(file.error().message().c_str());
    return;
  }
  const gguf::TensorInfo* tile = file->find_tensor("tensor_e.weight");
  if (tile == nullptr) {
    state.SkipWithError((path + " has no tensor_e.weight").c_str());
    return;
  }
  const tensor::DType type = tile->type;
  const auto row_bytes = static_cast<size_t>(tensor::row_bytes(type, kRowLength));
  // Tile tensor_e's bytes over the whole matrix; 4096-value rows are whole blocks for every type.
  const size_t matrix_bytes = row_bytes * kRows;
  auto matrix_storage = page_aligned<uint8_t>(matrix_bytes);
  const std::span<uint8_t> matrix(matrix_storage.get(), matrix_bytes);
  for (size_t at = 0; at < matrix.size(); at += tile->data.size()) {
    const size_t n = std::min(tile->data.size(), matrix.size() - at);
    std::copy(tile->data.begin(), tile->data.begin() + static_cast<ptrdiff_t>(n),
              matrix.begin() + static_cast<ptrdiff_t>(at));
  }
  const auto n_values = static_cast<size_t>(kRowLength * kRows);
  auto out_storage = page_aligned<float>(n_values);
  const std::span<float> out(out_storage.get(), n_values);
  std::fill(out.begin(), out.end(), 0.0f);  // fault the pages in before timing
  for (auto _ : state) {
    for (int64_t r = 0; r < kRows; ++r) {
      auto status = tensor::dequantize_row(type, matrix.data() + r * row_bytes,
                                           out.data() + r * kRowLength, kRowLength);
      if (!status.ok()) {
        state.SkipWithError(status.error().message().c_str());
        return;
      }
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * kRowLength * kRows *
                          static_cast<int64_t>(sizeof(float)));
  state.counters["in_bytes_per_second"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * static_cast<double>(matrix.size()),
      benchmark::Counter::kIsRate, benchmark::Counter::kIs1024);
}

const char* const kTypes[] = {"F32",    "F16",   "BF16",  "Q4_0",  "Q4_1", "Q5_0", "Q5_1",
                              "Q8_0",   "Q2_K",  "Q3_K",  "Q4_K",  "Q5_K", "Q6_K", "IQ4_NL",
                              "IQ4_XS", "TQ1_0", "TQ2_0", "MXFP4", "NVFP4"};

[[maybe_unused]] const bool kRegistered = [] {
  for (const char* type : kTypes) {
    benchmark::RegisterBenchmark((std::string("Dequantize/") + type).c_str(), dequantize_matrix,
                                 std::string(type))
        ->Unit(benchmark::kMicrosecond);
  }
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
