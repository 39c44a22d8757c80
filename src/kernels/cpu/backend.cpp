// CpuBackend: the threaded ops. Every op computes each output row from its own inputs only, in the
// same order whatever the batch or thread count, so results never depend on either.
#include "kernels/cpu/backend.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace kernels::cpu {
namespace {

// Elementwise work below this many values runs on the calling thread: waking workers costs more.
constexpr int64_t kMinParallel = 1 << 14;

// Calls fn(begin, end) over [0, n) in chunks spread over the pool.
template <class F>
void parallel_ranges(util::ThreadPool& pool, int64_t n, F&& fn) {
  if (n < kMinParallel || pool.size() == 1) {
    fn(int64_t{0}, n);
    return;
  }
  const int n_chunks = pool.size() * 4;
  const int64_t chunk = (n + n_chunks - 1) / n_chunks;
  pool.parallel_for(n_chunks, [&](int c, int) {
    const int64_t begin = c * chunk, end = std::min(n, begin + chunk);
    if (begin < end) fn(begin, end);
  });
}

}  // namespace

CpuBackend::CpuBackend(util::ThreadPool& pool, int max_tokens, int64_t max_cols)
    : pool_(pool),
      max_tokens_(max_tokens),
      max_cols_(max_cols),
      scratch_(matmul_scratch_bytes(max_tokens, max_cols, pool.size())) {}

void CpuBackend::matmul(const Matrix& w, const float* x, float* y, int n_tokens) {
  // Batches are bounded by the micro-batch and widths by the model (both planned): split a
  // larger call rather than allocate.
  for (int t0 = 0; t0 < n_tokens; t0 += max_tokens_) {
    const int nt = std::min(max_tokens_, n_tokens - t0);
    if (w.n_cols > max_cols_) {
      ref::matmul(w, x + static_cast<int64_t>(t0) * w.n_cols,
                  y + static_cast<int64_t>(t0) * w.n_rows, nt);
    } else {
      cpu::matmul(w, x + static_cast<int64_t>(t0) * w.n_cols,
                  y + static_cast<int64_t>(t0) * w.n_rows, nt, pool_, scratch_.data());
    }
  }
}

void CpuBackend::rmsnorm(const float* x, const float* w, float* y, int64_t n, int64_t n_rows,
                         float eps) {
  if (n * n_rows < kMinParallel) return ref::rmsnorm(x, w, y, n, n_rows, eps);
  pool_.parallel_for(static_cast<int>(n_rows),
                     [&](int r, int) { ref::rmsnorm(x + r * n, w, y + r * n, n, 1, eps); });
}

// The reference rotation with each (token, pair) angle computed once for all heads, not per head.
void CpuBackend::rope(float* x, int n_tokens, int n_head, int head_dim, const int32_t* pos,
                      const RopeParams& p) {
  const int half = p.n_rot / 2;
  pool_.parallel_for(n_tokens, [&](int t, int) {
    float cs[512], sn[512];  // n_rot / 2 ≤ 512: head dims are at most 1024 (model::Spec checks)
    for (int i = 0; i < half; ++i) {
      const double angle = static_cast<double>(pos[t]) * p.inv_freq[i];
      cs[i] = static_cast<float>(std::cos(angle));
      sn[i] = static_cast<float>(std::sin(angle));
    }
    for (int h = 0; h < n_head; ++h) {
      float* v = x + (static_cast<int64_t>(t) * n_head + h) * head_dim;
      for (int i = 0; i < half; ++i) {
        const int a = p.style == RopeStyle::kAdjacent ? 2 * i : i;
        const int b = p.style == RopeStyle::kAdjacent ? 2 * i + 1 : i + half;
        const float x0 = v[a], x1 = v[b];
        v[a] = x0 * cs[i] - x1 * sn[i];
        v[b] = x1 * cs[i] + x0 * sn[i];
      }
    }
  });
}

void CpuBackend::softcap(float* y, float cap, int64_t n) {
  parallel_ranges(pool_, n, [&](int64_t b, int64_t e) { ref_.softcap(y + b, cap, e - b); });
}

void CpuBackend::silu_mul(const float* g, const float* u, float* o, int64_t n, int64_t rows,
                          int64_t stride) {
  if (rows > 1) {
    pool_.parallel_for(static_cast<int>(rows), [&](int r, int) {
      ref::silu_mul(g + r * stride, u + r * stride, o + r * n, n, 1, stride);
    });
    return;
  }
  parallel_ranges(pool_, n, [&](int64_t b, int64_t e) {
    ref::silu_mul(g + b, u + b, o + b, e - b, 1, stride);
  });
}

void CpuBackend::gelu_mul(const float* g, const float* u, float* o, int64_t n, int64_t rows,
                          int64_t stride) {
  if (rows > 1) {
    pool_.parallel_for(static_cast<int>(rows), [&](int r, int) {
      ref::gelu_mul(g + r * stride, u + r * stride, o + r * n, n, 1, stride);
    });
    return;
  }
  parallel_ranges(pool_, n, [&](int64_t b, int64_t e) {
    ref::gelu_mul(g + b, u + b, o + b, e - b, 1, stride);
  });
}

}  // namespace kernels::cpu
