// CPU matmul throughput per weight type.
//
// BM_Matmul: a 4096 × 4096 matrix times T = 1 (decode) or T = 128 (prefill) activation rows, at
// the scalar level and the best SIMD level of this CPU, on 1 and 2 threads, with the reference
// kernel (kernels::ref) as the baseline.
// BM_E2bLayers: the seven matrices of a Gemma 4 E2B layer (q 2048×1536, k and v 256×1536,
// o 1536×2048, gate and up 6144×1536, down 1536×6144). Decode (T = 1) runs through 12 copies of
// the layer, ~240–450 MB, so the weights come from DRAM as in a real model; prefill (T = 128)
// runs one layer. Best SIMD level, 2 threads.
// BM_31bLayer: decode through the seven matrices of a Gemma 4 31B sliding layer (q 8192×5376, k
// and v 4096×5376, o 5376×8192, gate and up 21504×5376, down 5376×21504; 270 MB in Q4_K), and
// its down projection alone, whose activation row (24 KiB of Q8_K) does not stay in L1 beside
// the weight stream.
//
//   ninja -C build matmul_bench
//   build/bench/kernels/matmul_bench --benchmark_repetitions=3
//   --benchmark_report_aggregates_only=true [--benchmark_filter=E2b]
// Counters: weight GB/s (stored weight bytes read per second, 10^9) and GFLOP/s (2·rows·cols·T).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cpu/dot.h"
#include "kernels/cpu/matmul.h"
#include "kernels/ref/ref.h"
#include "tensor/quantize.h"
#include "util/aligned_buffer.h"
#include "util/thread_pool.h"

namespace {

constexpr int64_t kRows = 4096, kCols = 4096;

struct Data {
  std::vector<uint8_t> weights;
  kernels::Matrix m;
  std::vector<float> x;
};

const Data& data(tensor::DType type) {
  static std::vector<std::pair<tensor::DType, Data>> cache;
  for (auto& [t, d] : cache) {
    if (t == type) return d;
  }
  Data d;
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> row(kCols);
  const size_t row_bytes = tensor::row_bytes(type, kCols);
  d.weights.resize(row_bytes * kRows);
  for (int64_t r = 0; r < kRows; ++r) {
    for (auto& v : row) v = dist(rng);
    (void)tensor::quantize_row(type, row.data(), d.weights.data() + r * row_bytes, kCols);
  }
  d.m = {d.weights.data(), type, kCols, kRows, row_bytes};
  d.x.resize(kCols * 128);
  for (auto& v : d.x) v = dist(rng);
  cache.emplace_back(type, std::move(d));
  return cache.back().second;
}

void report(benchmark::State& state, const Data& d, int n_tokens) {
  const double iterations = static_cast<double>(state.iterations());
  state.counters["weight_GB/s"] =
      benchmark::Counter(iterations * d.weights.size() / 1e9, benchmark::Counter::kIsRate);
  state.counters["GFLOP/s"] = benchmark::Counter(iterations * 2.0 * kRows * kCols * n_tokens / 1e9,
                                                 benchmark::Counter::kIsRate);
}

// args: type, tokens, threads, level (−1 = ref::matmul)
void BM_Matmul(benchmark::State& state) {
  const auto type = static_cast<tensor::DType>(state.range(0));
  const int n_tokens = static_cast<int>(state.range(1)), threads = static_cast<int>(state.range(2));
  const int level = static_cast<int>(state.range(3));
  const Data& d = data(type);
  std::vector<float> y(static_cast<size_t>(kRows) * n_tokens);
  if (level < 0) {
    for (auto _ : state) kernels::ref::matmul(d.m, d.x.data(), y.data(), n_tokens);
  } else {
    util::ThreadPool pool(threads);
    util::AlignedBuffer scratch(kernels::cpu::matmul_scratch_bytes(n_tokens, kCols, threads));
    for (auto _ : state)
      kernels::cpu::matmul(d.m, d.x.data(), y.data(), n_tokens, pool, scratch.data(),
                           static_cast<kernels::cpu::Isa>(level));
  }
  std::string label(tensor::dtype_name(type));
  label += ' ';
  label += level < 0 ? std::string_view("ref")
                     : kernels::cpu::isa_name(static_cast<kernels::cpu::Isa>(level));
  state.SetLabel(label);
  report(state, d, n_tokens);
}

void args(benchmark::internal::Benchmark* b) {
  using tensor::DType;
  const int best = static_cast<int>(kernels::cpu::cpu_isa());
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_1,
                  DType::kQ5_0, DType::kQ5_1, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    const int64_t type = static_cast<int64_t>(t);
    b->Args({type, 1, 1, -1});
    for (int64_t tokens : {1, 128}) {
      b->Args({type, tokens, 1, 0});
      for (int64_t threads : {1, 2}) b->Args({type, tokens, threads, best});
    }
  }
}

// A layer's matrices as {rows, cols}.
using Shapes = std::vector<std::pair<int64_t, int64_t>>;

// Gemma 4 E2B: q 2048×1536, k and v 256×1536, o 1536×2048, gate and up 6144×1536, down 1536×6144.
const Shapes kE2b = {{2048, 1536}, {256, 1536},  {256, 1536}, {1536, 2048},
                     {6144, 1536}, {6144, 1536}, {1536, 6144}};
// Gemma 4 31B, a sliding layer: q 8192×5376, k and v 4096×5376, o 5376×8192, gate and up
// 21504×5376, down 5376×21504.
const Shapes k31b = {{8192, 5376},  {4096, 5376},  {4096, 5376}, {5376, 8192},
                     {21504, 5376}, {21504, 5376}, {5376, 21504}};

// A layer's matrices, `copies` copies of them. Each matrix repeats 64 rows quantized from random
// normal values: what is timed is the stream, and a 31B layer (479 M weights) would take long to
// quantize row by row.
struct Layers {
  std::vector<std::vector<uint8_t>> weights;
  std::vector<kernels::Matrix> matrices;
  size_t bytes = 0;
  double flops_per_token = 0;
};

const Layers& layers(const Shapes& shapes, tensor::DType type, int copies) {
  static std::vector<std::tuple<const Shapes*, tensor::DType, int, Layers>> cache;
  for (auto& [s, t, c, l] : cache) {
    if (s == &shapes && t == type && c == copies) return l;
  }
  constexpr int64_t kDistinctRows = 64;
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<std::vector<uint8_t>> one;
  for (auto [rows, cols] : shapes) {
    const size_t row_bytes = tensor::row_bytes(type, cols);
    std::vector<uint8_t> w(row_bytes * rows);
    std::vector<float> row(cols);
    for (int64_t r = 0; r < rows; ++r) {
      if (r < kDistinctRows) {
        for (auto& v : row) v = dist(rng);
        (void)tensor::quantize_row(type, row.data(), w.data() + r * row_bytes, cols);
      } else {
        std::copy_n(w.data() + r % kDistinctRows * row_bytes, row_bytes, w.data() + r * row_bytes);
      }
    }
    one.push_back(std::move(w));
  }
  Layers l;
  for (int c = 0; c < copies; ++c) {
    for (size_t i = 0; i < one.size(); ++i) l.weights.push_back(one[i]);
  }
  for (size_t i = 0; i < l.weights.size(); ++i) {
    const auto [rows, cols] = shapes[i % one.size()];
    l.matrices.push_back({l.weights[i].data(), type, cols, rows,
                          static_cast<size_t>(tensor::row_bytes(type, cols))});
    l.bytes += l.weights[i].size();
    if (i < one.size()) l.flops_per_token += 2.0 * static_cast<double>(rows * cols);
  }
  cache.emplace_back(&shapes, type, copies, std::move(l));
  return std::get<3>(cache.back());
}

// Every matrix of `l` times `n_tokens` activation rows, 2 threads; `copies` as in layers().
void run_layers(benchmark::State& state, const Layers& l, int n_tokens, int copies) {
  int64_t max_cols = 0, max_rows = 0;
  for (const auto& m : l.matrices) {
    max_cols = std::max(max_cols, m.n_cols);
    max_rows = std::max(max_rows, m.n_rows);
  }
  util::ThreadPool pool(2);
  util::AlignedBuffer scratch(kernels::cpu::matmul_scratch_bytes(n_tokens, max_cols, 2));
  std::vector<float> x(static_cast<size_t>(n_tokens) * max_cols),
      y(static_cast<size_t>(n_tokens) * max_rows);
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (auto& v : x) v = dist(rng);
  for (auto _ : state) {
    for (const auto& m : l.matrices)
      kernels::cpu::matmul(m, x.data(), y.data(), n_tokens, pool, scratch.data());
  }
  const double iterations = static_cast<double>(state.iterations());
  state.counters["weight_GB/s"] = benchmark::Counter(
      iterations * static_cast<double>(l.bytes) / 1e9, benchmark::Counter::kIsRate);
  state.counters["GFLOP/s"] = benchmark::Counter(
      iterations * l.flops_per_token * n_tokens * copies / 1e9, benchmark::Counter::kIsRate);
  std::string label(tensor::dtype_name(l.matrices.front().type));
  label += ' ';
  label += kernels::cpu::isa_name(kernels::cpu::cpu_isa());
  state.SetLabel(label);
}

// args: type, tokens
void BM_E2bLayers(benchmark::State& state) {
  const auto type = static_cast<tensor::DType>(state.range(0));
  const int n_tokens = static_cast<int>(state.range(1));
  const int copies = n_tokens == 1 ? 12 : 1;
  run_layers(state, layers(kE2b, type, copies), n_tokens, copies);
}

// Its down projection alone (65 MB in Q4_K): the long activation row (24 KiB of Q8_K).
const Shapes k31bDown = {{5376, 21504}};

// args: type, 0 = the layer / 1 = its down projection. Decode only: past any cache.
void BM_31bLayer(benchmark::State& state) {
  const auto type = static_cast<tensor::DType>(state.range(0));
  run_layers(state, layers(state.range(1) ? k31bDown : k31b, type, 1), 1, 1);
}

void e2b_args(benchmark::internal::Benchmark* b) {
  using tensor::DType;
  for (DType t :
       {DType::kF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    for (int64_t tokens : {1, 128}) b->Args({static_cast<int64_t>(t), tokens});
  }
}

void b31_args(benchmark::internal::Benchmark* b) {
  using tensor::DType;
  for (DType t : {DType::kQ8_0, DType::kQ4_K, DType::kQ6_K}) {
    for (int64_t part : {0, 1}) b->Args({static_cast<int64_t>(t), part});
  }
}

}  // namespace

BENCHMARK(BM_E2bLayers)->Apply(e2b_args)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_31bLayer)->Apply(b31_args)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Matmul)->Apply(args)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
