// CPU decode attention at depth: one query token over a cache of f16 K/V, on the geometries of
// Gemma 4's layers (bench/RESULTS.md, "31B at depth 4096…": 31B falls behind llama.cpp there).
//
// BM_DecodeAttention/<shape>: n_head query heads over n_head_kv KV heads of head_dim, reading
// n_cells cells (a sliding layer's window, or a full layer's depth), T = 1, the CPU's best SIMD
// level, 2 threads.
//
//   ninja -C build attention_bench
//   build/bench/kernels/attention_bench --benchmark_repetitions=3
//   --benchmark_report_aggregates_only=true
// Counters: K/V GB/s (cache bytes read per second, 10^9) and GFLOP/s (4·n_head·n_cells·head_dim:
// q·k and the weighted sum of v).
#include <benchmark/benchmark.h>

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

void BM_DecodeAttention(benchmark::State& state) {
  const Shape& s = kShapes[state.range(0)];
  constexpr int kCellsPerBlock = 16;
  const size_t row_bytes =
      tensor::row_bytes(tensor::DType::kF16, int64_t{s.n_head_kv} * s.head_dim);
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> row(static_cast<size_t>(s.n_head_kv) * s.head_dim);
  std::vector<uint8_t> k(row_bytes * s.n_cells), v(row_bytes * s.n_cells);
  for (int c = 0; c < s.n_cells; ++c) {
    for (auto* cache : {&k, &v}) {
      for (auto& x : row) x = dist(rng);
      (void)tensor::quantize_row(tensor::DType::kF16, row.data(), cache->data() + c * row_bytes,
                                 static_cast<int64_t>(row.size()));
    }
  }
  std::vector<const uint8_t*> k_blocks, v_blocks;
  for (int c = 0; c < s.n_cells; c += kCellsPerBlock) {
    k_blocks.push_back(k.data() + c * row_bytes);
    v_blocks.push_back(v.data() + c * row_bytes);
  }
  std::vector<int32_t> cell_pos(s.n_cells);
  for (int c = 0; c < s.n_cells; ++c) cell_pos[c] = c;
  const kernels::KvSpan span{.k_type = tensor::DType::kF16,
                             .v_type = tensor::DType::kF16,
                             .n_head_kv = s.n_head_kv,
                             .head_dim = s.head_dim,
                             .n_cells = s.n_cells,
                             .cells_per_block = kCellsPerBlock,
                             .k_blocks = k_blocks.data(),
                             .v_blocks = v_blocks.data(),
                             .k_row_bytes = row_bytes,
                             .v_row_bytes = row_bytes,
                             .cell_pos = cell_pos.data()};
  const kernels::KvSpan* spans[] = {&span};
  std::vector<float> q(static_cast<size_t>(s.n_head) * s.head_dim), out(q.size());
  for (auto& x : q) x = dist(rng);
  const int32_t pos = s.n_cells;
  util::ThreadPool pool(2);
  kernels::cpu::CpuBackend cpu(pool, 1, s.head_dim);
  const kernels::AttentionBatch batch{.n_tokens = 1,
                                      .n_head = s.n_head,
                                      .head_dim = s.head_dim,
                                      .q = q.data(),
                                      .out = out.data(),
                                      .pos = &pos,
                                      .kv = spans,
                                      .scale = 1.0f / 16};
  for (auto _ : state) {
    cpu.attention(batch);
    benchmark::DoNotOptimize(out.data());
  }
  const double calls = static_cast<double>(state.iterations());
  state.counters["KV_GB/s"] = benchmark::Counter(calls * 2.0 * static_cast<double>(k.size()) / 1e9,
                                                 benchmark::Counter::kIsRate);
  state.counters["GFLOP/s"] = benchmark::Counter(
      calls * 4.0 * s.n_head * s.n_cells * s.head_dim / 1e9, benchmark::Counter::kIsRate);
  state.SetLabel(s.name);
}

BENCHMARK(BM_DecodeAttention)->DenseRange(0, std::size(kShapes) - 1)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
