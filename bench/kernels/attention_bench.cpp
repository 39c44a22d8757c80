// CPU decode attention at depth: one query token over a cache of f16 K/V, on the geometries of
// Gemma 4's layers (bench/RESULTS.md, "31B at depth 4096…": 31B falls behind llama.cpp there).
//
// BM_DecodeAttention/<shape>: n_head query heads over n_head_kv KV heads of head_dim, reading
// n_cells cells (a sliding layer's window, or a full layer's depth), T = 1, the CPU's best SIMD
// level, 2 threads; each call reads a cache that is not in the CPU's caches, as each layer of a
// decode step does.
// BM_PrefillAttention/<shape>: the last 64 positions of those cells as 64 query tokens of one
// sequence (a prefill's micro-batch at depth), causal.
//
//   ninja -C build attention_bench
//   build/bench/kernels/attention_bench --benchmark_repetitions=3
//   --benchmark_report_aggregates_only=true
// Counters: K/V GB/s (cache bytes read per second, 10^9) and GFLOP/s (4·n_head·n_cells·head_dim:
// q·k and the weighted sum of v).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>
#include <vector>

#include "kernels/cpu/backend.h"
#include "tensor/quantize.h"
#include "util/thread_pool.h"

namespace {

struct Shape {
  const char* name;
  int n_head, n_head_kv, head_dim, n_cells;
};

// Gemma 4 (spec §1.1) at depth 4096: sliding layers read their window, full layers the depth.
constexpr Shape kShapes[] = {
    {"e2b_sliding", 8, 1, 256, 512},    {"e2b_full", 8, 1, 512, 4096},
    {"26b_sliding", 16, 8, 256, 1024},  {"26b_full", 16, 2, 512, 4096},
    {"31b_sliding", 32, 16, 256, 1024}, {"31b_full", 32, 4, 512, 4096},
};

// Caches of one layer shape, enough of them that together they exceed the last-level cache (as a
// decode step's layers do): each call reads a cache the previous calls pushed out of it.
constexpr size_t kColdBytes = size_t{96} << 20;

struct Caches {
  std::vector<std::vector<uint8_t>> k, v;  // per copy
  std::vector<std::vector<const uint8_t*>> k_blocks, v_blocks;
  std::vector<kernels::KvSpan> spans;
  std::vector<int32_t> cell_pos;
};

Caches make_caches(const Shape& s, std::mt19937& rng) {
  constexpr int kCellsPerBlock = 16;
  const size_t row_bytes =
      tensor::row_bytes(tensor::DType::kF16, int64_t{s.n_head_kv} * s.head_dim);
  const size_t bytes = 2 * row_bytes * s.n_cells;
  const size_t copies = (kColdBytes + bytes - 1) / bytes;
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> row(static_cast<size_t>(s.n_head_kv) * s.head_dim);
  Caches c;
  c.cell_pos.resize(s.n_cells);
  for (int i = 0; i < s.n_cells; ++i) c.cell_pos[i] = i;
  c.k.resize(copies);
  c.v.resize(copies);
  c.k_blocks.resize(copies);
  c.v_blocks.resize(copies);
  for (size_t copy = 0; copy < copies; ++copy) {
    for (auto* cache : {&c.k[copy], &c.v[copy]}) {
      cache->resize(row_bytes * s.n_cells);
      for (int i = 0; i < s.n_cells; ++i) {
        for (auto& x : row) x = dist(rng);
        (void)tensor::quantize_row(tensor::DType::kF16, row.data(), cache->data() + i * row_bytes,
                                   static_cast<int64_t>(row.size()));
      }
    }
    for (int i = 0; i < s.n_cells; i += kCellsPerBlock) {
      c.k_blocks[copy].push_back(c.k[copy].data() + i * row_bytes);
      c.v_blocks[copy].push_back(c.v[copy].data() + i * row_bytes);
    }
    c.spans.push_back({.k_type = tensor::DType::kF16,
                       .v_type = tensor::DType::kF16,
                       .n_head_kv = s.n_head_kv,
                       .head_dim = s.head_dim,
                       .n_cells = s.n_cells,
                       .cells_per_block = kCellsPerBlock,
                       .k_blocks = c.k_blocks[copy].data(),
                       .v_blocks = c.v_blocks[copy].data(),
                       .k_row_bytes = row_bytes,
                       .v_row_bytes = row_bytes,
                       .cell_pos = c.cell_pos.data()});
  }
  return c;
}

void BM_DecodeAttention(benchmark::State& state) {
  const Shape& s = kShapes[state.range(0)];
  std::mt19937 rng(1);
  const Caches caches = make_caches(s, rng);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> q(static_cast<size_t>(s.n_head) * s.head_dim), out(q.size());
  for (auto& x : q) x = dist(rng);
  const int32_t pos = s.n_cells;
  util::ThreadPool pool(2);
  kernels::cpu::CpuBackend cpu(pool, 1, s.head_dim);
  size_t copy = 0;
  for (auto _ : state) {
    const kernels::KvSpan* span = &caches.spans[copy];
    copy = (copy + 1) % caches.spans.size();
    cpu.attention({.n_tokens = 1,
                   .n_head = s.n_head,
                   .head_dim = s.head_dim,
                   .q = q.data(),
                   .out = out.data(),
                   .pos = &pos,
                   .kv = &span,
                   .scale = 1.0f / 16});
    benchmark::DoNotOptimize(out.data());
  }
  const double calls = static_cast<double>(state.iterations());
  const double kv_bytes = 2.0 * static_cast<double>(caches.k[0].size());
  state.counters["KV_GB/s"] =
      benchmark::Counter(calls * kv_bytes / 1e9, benchmark::Counter::kIsRate);
  state.counters["GFLOP/s"] = benchmark::Counter(
      calls * 4.0 * s.n_head * s.n_cells * s.head_dim / 1e9, benchmark::Counter::kIsRate);
  state.SetLabel(s.name);
}

void BM_PrefillAttention(benchmark::State& state) {
  const Shape& s = kShapes[state.range(0)];
  constexpr int kTokens = 64;
  std::mt19937 rng(1);
  const Caches caches = make_caches(s, rng);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> q(static_cast<size_t>(kTokens) * s.n_head * s.head_dim), out(q.size());
  for (auto& x : q) x = dist(rng);
  std::vector<int32_t> pos(kTokens);
  for (int t = 0; t < kTokens; ++t) pos[t] = s.n_cells - kTokens + t;
  util::ThreadPool pool(2);
  kernels::cpu::CpuBackend cpu(pool, kTokens, s.head_dim);
  std::vector<const kernels::KvSpan*> spans(kTokens);
  size_t copy = 0;
  for (auto _ : state) {
    std::fill(spans.begin(), spans.end(), &caches.spans[copy]);
    copy = (copy + 1) % caches.spans.size();
    cpu.attention({.n_tokens = kTokens,
                   .n_head = s.n_head,
                   .head_dim = s.head_dim,
                   .q = q.data(),
                   .out = out.data(),
                   .pos = pos.data(),
                   .kv = spans.data(),
                   .scale = 1.0f / 16});
    benchmark::DoNotOptimize(out.data());
  }
  double cells = 0;  // cells the tokens see
  for (int t = 0; t < kTokens; ++t) cells += pos[t] + 1;
  state.counters["GFLOP/s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * 4.0 * s.n_head * cells * s.head_dim / 1e9,
      benchmark::Counter::kIsRate);
  state.SetLabel(s.name);
}

BENCHMARK(BM_DecodeAttention)->DenseRange(0, std::size(kShapes) - 1)->UseRealTime();
BENCHMARK(BM_PrefillAttention)->DenseRange(0, std::size(kShapes) - 1)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
