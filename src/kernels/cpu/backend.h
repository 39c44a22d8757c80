// kernels::cpu::CpuBackend — every op of the interface on the CPU: SIMD matmul (matmul.h),
// one-pass attention over the paged cache, and the small ops, spread over a thread pool.
#pragma once

#include "kernels/cpu/matmul.h"
#include "kernels/ops.h"
#include "kernels/ref/ref.h"
#include "util/aligned_buffer.h"
#include "util/thread_pool.h"

namespace kernels::cpu {

class CpuBackend final : public Backend {
 public:
  // Reserves matmul's scratch for batches of up to `max_tokens` rows of up to `max_cols` values,
  // once: the token loop allocates nothing.
  CpuBackend(util::ThreadPool& pool, int max_tokens, int64_t max_cols);

  std::string_view name() const override { return "cpu"; }
  size_t scratch_bytes() const override { return scratch_.size(); }

  void matmul(const Matrix& w, const float* x, float* y, int n_tokens) override;
  void get_rows(const Matrix& t, const int32_t* ids, int n, float s, float* out) override {
    ref::get_rows(t, ids, n, s, out);
  }
  void rmsnorm(const float* x, const float* w, float* y, int64_t n, int64_t n_rows,
               float eps) override;
  void rope(float* x, int n_tokens, int n_head, int head_dim, const int32_t* pos,
            const RopeParams& p) override;
  void attention(const AttentionBatch& batch) override;
  void store_kv(DType kt, DType vt, int kv_dim, const float* k, const float* v, const KvWrite* dst,
                int n) override {
    ref::store_kv(kt, vt, kv_dim, k, v, dst, n);
  }
  void add(float* y, const float* x, int64_t n) override { ref_.add(y, x, n); }
  void mul(float* y, const float* x, int64_t n) override { ref_.mul(y, x, n); }
  void scale(float* y, float s, int64_t n) override { ref_.scale(y, s, n); }
  void softcap(float* y, float cap, int64_t n) override;
  void silu_mul(const float* g, const float* u, float* o, int64_t n, int64_t rows,
                int64_t stride) override;
  void gelu_mul(const float* g, const float* u, float* o, int64_t n, int64_t rows,
                int64_t stride) override;
  void copy(float* y, const float* x, int64_t n) override { ref_.copy(y, x, n); }
  void moe_route(const float* l, int t, int e, int k, const float* s, int32_t* ids,
                 float* w) override {
    ref::moe_route(l, t, e, k, s, ids, w);
  }
  void copy_rows(float* y, int64_t ys, const float* x, int64_t xs, int64_t n,
                 int64_t rows) override {
    ref_.copy_rows(y, ys, x, xs, n, rows);
  }

 private:
  util::ThreadPool& pool_;
  int max_tokens_;
  int64_t max_cols_;
  util::AlignedBuffer scratch_;
  ref::RefBackend ref_;  // the ops too small to gain from threads or SIMD
};

}  // namespace kernels::cpu
