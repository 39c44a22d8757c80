// kernels::cpu::CpuBackend — every op of the interface on the CPU: SIMD matmul (matmul.h),
// one-pass attention over the paged, quantized cache (attention.cpp), and the small ops
// (elementwise.cpp, backend.cpp), with AVX2 paths chosen at run time and a portable scalar path.
//
// Results contract (the scheduler's "32 concurrent = alone" rests on it): every output row is
// computed from its own inputs only, by one thread, in an order that depends on neither the
// batch nor the thread count, so both change nothing, bit for bit.
//
// Fused, to save passes over memory: attention decodes each K/V block of the cache in registers
// inside the q·k and weighted-sum loops (no dequantized copy of the cache); store_kv quantizes
// new rows straight into their cache cells; silu_mul/gelu_mul read gate and up once; get_rows
// scales while it decodes.
#pragma once

#include <algorithm>

#include "kernels/cpu/dot.h"
#include "kernels/cpu/matmul.h"
#include "kernels/ops.h"
#include "util/aligned_buffer.h"
#include "util/thread_pool.h"

namespace kernels::cpu {

class CpuBackend final : public Backend {
 public:
  // Reserves matmul's scratch for batches of up to `max_tokens` rows of up to `max_cols` values,
  // once: the token loop allocates nothing. `isa` picks the instruction set of the small ops and
  // attention as well as matmul (tests pass kScalar to check the portable path).
  CpuBackend(util::ThreadPool& pool, int max_tokens, int64_t max_cols, Isa isa = cpu_isa());

  std::string_view name() const override { return "cpu"; }
  size_t scratch_bytes() const override { return scratch_.size(); }

  void matmul(const Matrix& w, const float* x, float* y, int n_tokens) override;
  void get_rows(const Matrix& t, const int32_t* ids, int n, float s, float* out) override;
  void rmsnorm(const float* x, const float* w, float* y, int64_t n, int64_t n_rows,
               float eps) override;
  void rope(float* x, int n_tokens, int n_head, int head_dim, const int32_t* pos,
            const RopeParams& p) override;
  void attention(const AttentionBatch& batch) override;
  void store_kv(DType kt, DType vt, int kv_dim, const float* k, const float* v, const KvWrite* dst,
                int n) override;
  void add(float* y, const float* x, int64_t n) override;
  void mul(float* y, const float* x, int64_t n) override;
  void scale(float* y, float s, int64_t n) override;
  void softcap(float* y, float cap, int64_t n) override;
  void clamp(float* y, float lo, float hi, int64_t n) override;
  void silu_mul(const float* g, const float* u, float* o, int64_t n, int64_t rows,
                int64_t stride) override;
  void gelu_mul(const float* g, const float* u, float* o, int64_t n, int64_t rows,
                int64_t stride) override;
  void copy(float* y, const float* x, int64_t n) override;
  void moe_route(const float* l, int t, int e, int k, const float* s, int32_t* ids,
                 float* w) override;
  void copy_rows(float* y, int64_t ys, const float* x, int64_t xs, int64_t n,
                 int64_t rows) override;
  void lora(const LoraDelta& a) override;  // lora.cpp

 private:
  // Work below this many values (or value-sized steps) runs on the calling thread: waking the
  // workers costs more than it saves.
  static constexpr int64_t kMinParallel = 1 << 14;

  bool avx2() const { return isa_ >= Isa::kAvx2; }
  bool avx512() const { return isa_ >= Isa::kAvx512; }

  // fn(begin, end) over [0, n) on the pool, in chunks whose bounds are multiples of 64 values:
  // an elementwise op then gives the same value at every index whatever the split.
  template <class F>
  void for_ranges(int64_t n, F&& fn) {
    if (n < kMinParallel || pool_.size() == 1) {
      fn(int64_t{0}, n);
      return;
    }
    const int n_chunks = pool_.size() * 4;
    const int64_t chunk = ((n + n_chunks - 1) / n_chunks + 63) / 64 * 64;
    pool_.parallel_for(n_chunks, [&](int c, int) {
      const int64_t begin = c * chunk, end = std::min(n, begin + chunk);
      if (begin < end) fn(begin, end);
    });
  }
  // fn(row) for each of n_rows rows of `row_cost` values each, on the pool when big enough.
  template <class F>
  void for_rows(int64_t n_rows, int64_t row_cost, F&& fn) {
    if (n_rows == 1 || n_rows * row_cost < kMinParallel || pool_.size() == 1) {
      for (int64_t r = 0; r < n_rows; ++r) fn(r);
      return;
    }
    pool_.parallel_for(static_cast<int>(n_rows), [&](int r, int) { fn(r); });
  }

  util::ThreadPool& pool_;
  int max_tokens_;
  int64_t max_cols_;
  Isa isa_;
  util::AlignedBuffer scratch_;
};

}  // namespace kernels::cpu
