// K-quant dot kernels (Q4_K, Q5_K, Q6_K, IQ4_XS against Q8_K activations), single thread: a
// 4096 × 4096 weight matrix times T = 1 activation row (decode, one matrix-vector product) or
// T = 32 rows, at the portable scalar level, AVX2 and (where the CPU has it) AVX-512 VNNI, with
// ref::matmul (dequantize a row, accumulate in double) as the baseline. The timed loop is what
// matmul does on one thread: convert the T rows to Q8_K once, then one dot call per weight row.
//
//   cmake --build build --target kquant_dot_bench
//   build/bench/kernels/kquant_dot_bench --benchmark_repetitions=3
//   --benchmark_report_aggregates_only=true
// Single thread, so rates are per CPU second (the machine is shared). Counters: rows/s (weight
// rows × T dotted per second) and weight GB/s (stored weight bytes read per second, 10^9).
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/dot.h"
#include "kernels/ref/ref.h"
#include "tensor/blocks.h"
#include "tensor/fp16.h"
#include "tensor/quantize.h"
#include "util/aligned_buffer.h"

namespace {

using tensor::DType;

constexpr int64_t kRows = 4096, kCols = 4096;
constexpr int kMaxTokens = 32;

struct Data {
  util::AlignedBuffer weights;
  kernels::Matrix m;
  std::vector<float> x;
};

// Random normal weights through the reference quantizer; IQ4_XS has none, so its blocks are
// random bytes with small f16 scales.
Data make(DType type) {
  Data d;
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const size_t row_bytes = static_cast<size_t>(tensor::row_bytes(type, kCols));
  d.weights = util::AlignedBuffer(row_bytes * kRows);
  auto* bytes = static_cast<uint8_t*>(d.weights.data());
  if (type == DType::kIQ4_XS) {
    for (size_t i = 0; i < row_bytes * kRows; ++i) bytes[i] = static_cast<uint8_t>(rng());
    for (size_t off = 0; off < row_bytes * kRows; off += sizeof(tensor::BlockIQ4_XS)) {
      const uint16_t scale = tensor::f32_to_f16(0.01f);
      std::memcpy(bytes + off + offsetof(tensor::BlockIQ4_XS, d), &scale, 2);
    }
  } else {
    std::vector<float> row(kCols);
    for (int64_t r = 0; r < kRows; ++r) {
      for (auto& v : row) v = dist(rng);
      (void)tensor::quantize_row(type, row.data(), bytes + r * row_bytes, kCols);
    }
  }
  d.m = {bytes, type, kCols, kRows, row_bytes};
  d.x.resize(static_cast<size_t>(kCols) * kMaxTokens);
  for (auto& v : d.x) v = dist(rng);
  return d;
}

const Data& data(DType type) {
  static std::vector<std::pair<DType, Data>> cache;
  for (auto& [t, d] : cache) {
    if (t == type) return d;
  }
  cache.emplace_back(type, make(type));
  return cache.back().second;
}

// args: type, tokens, level (−1 = ref::matmul)
void BM_KquantDot(benchmark::State& state) {
  const auto type = static_cast<DType>(state.range(0));
  const int n_tokens = static_cast<int>(state.range(1)), level = static_cast<int>(state.range(2));
  const Data& d = data(type);
  std::vector<float> y(static_cast<size_t>(kRows) * n_tokens);
  if (level < 0) {
    for (auto _ : state) kernels::ref::matmul(d.m, d.x.data(), y.data(), n_tokens);
  } else {
    const kernels::cpu::DotKernel k =
        kernels::cpu::dot_kernel(type, static_cast<kernels::cpu::Isa>(level));
    const size_t stride = static_cast<size_t>(tensor::row_bytes(k.partner, kCols));
    util::AlignedBuffer partner(stride * n_tokens);
    auto* p = static_cast<uint8_t*>(partner.data());
    for (auto _ : state) {
      for (int t = 0; t < n_tokens; ++t)
        k.to_partner(d.x.data() + t * kCols, p + t * stride, kCols);
      for (int64_t r = 0; r < kRows; ++r) {
        k.dot(kCols, static_cast<const uint8_t*>(d.m.data) + r * d.m.row_bytes, p, stride, n_tokens,
              y.data() + r, kRows);
      }
      benchmark::DoNotOptimize(y.data());
    }
  }
  std::string label(tensor::dtype_name(type));
  label += ' ';
  label += level < 0 ? std::string_view("ref")
                     : kernels::cpu::isa_name(static_cast<kernels::cpu::Isa>(level));
  state.SetLabel(label);
  const double iterations = static_cast<double>(state.iterations());
  state.counters["rows/s"] =
      benchmark::Counter(iterations * kRows * n_tokens, benchmark::Counter::kIsRate);
  state.counters["weight_GB/s"] = benchmark::Counter(
      iterations * static_cast<double>(d.m.row_bytes * kRows) / 1e9, benchmark::Counter::kIsRate);
}

// The activation conversion alone (one 4096-value row to Q8_K): what T rows add to a product.
void BM_ToQ8K(benchmark::State& state) {
  const Data& d = data(DType::kQ4_K);
  const kernels::cpu::DotKernel k = kernels::cpu::dot_kernel(DType::kQ4_K, kernels::cpu::cpu_isa());
  std::vector<uint8_t> out(static_cast<size_t>(tensor::row_bytes(DType::kQ8_K, kCols)));
  for (auto _ : state) {
    k.to_partner(d.x.data(), out.data(), kCols);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["values/s"] = benchmark::Counter(static_cast<double>(state.iterations()) * kCols,
                                                  benchmark::Counter::kIsRate);
}

void args(benchmark::internal::Benchmark* b) {
  const int best = static_cast<int>(kernels::cpu::cpu_isa());
  for (DType t : {DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kIQ4_XS}) {
    const int64_t type = static_cast<int64_t>(t);
    for (int64_t tokens : {1, kMaxTokens}) {
      b->Args({type, tokens, -1});
      for (int level = 0; level <= best; ++level) {
        // AVX-512 without VNNI runs the AVX2 kernels: no separate row.
        if (level != static_cast<int>(kernels::cpu::Isa::kAvx512)) b->Args({type, tokens, level});
      }
    }
  }
}

}  // namespace

BENCHMARK(BM_KquantDot)->Apply(args)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ToQ8K)->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
