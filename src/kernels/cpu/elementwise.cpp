// CpuBackend's elementwise ops and RMSNorm: AVX2 loops (row tails masked, never scalar, so a
// value does not depend on where a row was cut) and the portable loops of the reference.
//
// Exact with the reference: add, mul, scale, copy (same single IEEE operation per value).
// Approximate, within the tolerances tests/kernels/cpu_backend_test.cpp states: silu_mul,
// gelu_mul (x·sigmoid(y) with a polynomial exp, ≤ 1e-6 relative), softcap (polynomial tanh),
// rmsnorm (the sum of squares in double as the reference, in another order: last-bit changes).
#include <cmath>
#include <cstring>

#include "kernels/cpu/backend.h"
#include "kernels/cpu/simd.h"
#include "kernels/ref/ref.h"

namespace kernels::cpu {
namespace {

#if HR_HAS_AVX2_PATH
namespace avx2 {

// o[i] = op(a[i], b[i]) for i < n; a, b, o may alias exactly (in place).
template <class Op>
HR_AVX2 void map(float* o, const float* a, const float* b, int64_t n, Op op) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(o + i, op(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  }
  if (i < n) {
    const __m256i m = simd::tail_mask(n - i);
    _mm256_maskstore_ps(o + i, m, op(_mm256_maskload_ps(a + i, m), _mm256_maskload_ps(b + i, m)));
  }
}

struct Add {
  HR_AVX2 __m256 operator()(__m256 y, __m256 x) const { return _mm256_add_ps(y, x); }
};
struct Mul {
  HR_AVX2 __m256 operator()(__m256 y, __m256 x) const { return _mm256_mul_ps(y, x); }
};
struct Scale {
  float s;
  HR_AVX2 __m256 operator()(__m256 y, __m256) const { return _mm256_mul_ps(y, _mm256_set1_ps(s)); }
};
struct Softcap {
  float cap;
  HR_AVX2 __m256 operator()(__m256 y, __m256) const {
    // cap · tanh(y / cap), divided as the reference does.
    const __m256 c = _mm256_set1_ps(cap);
    return _mm256_mul_ps(c, simd::tanh(_mm256_div_ps(y, c)));
  }
};
// silu(g)·u = g·sigmoid(g)·u.
struct SiluMul {
  HR_AVX2 __m256 operator()(__m256 g, __m256 u) const {
    return _mm256_mul_ps(_mm256_mul_ps(g, simd::sigmoid(g)), u);
  }
};
// gelu(g)·u with the tanh form of spec §0.1 rewritten without cancellation:
// 0.5·g·(1 + tanh(z)) = g·sigmoid(2z), z = √(2/π)·(g + 0.044715·g³).
struct GeluMul {
  HR_AVX2 __m256 operator()(__m256 g, __m256 u) const {
    const __m256 g3 = _mm256_mul_ps(_mm256_mul_ps(g, g), g);
    const __m256 z2 = _mm256_mul_ps(_mm256_set1_ps(2.0f * 0.7978845608028654f),
                                    _mm256_fmadd_ps(_mm256_set1_ps(0.044715f), g3, g));
    return _mm256_mul_ps(_mm256_mul_ps(g, simd::sigmoid(z2)), u);
  }
};

HR_AVX2 void rmsnorm_row(const float* x, const float* w, float* y, int64_t n, float eps) {
  __m256d acc0 = _mm256_setzero_pd(), acc1 = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
    const __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
    acc0 = _mm256_fmadd_pd(lo, lo, acc0);
    acc1 = _mm256_fmadd_pd(hi, hi, acc1);
  }
  const __m256d acc = _mm256_add_pd(acc0, acc1);
  __m128d s = _mm_add_pd(_mm256_castpd256_pd128(acc), _mm256_extractf128_pd(acc, 1));
  double sum = _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
  for (; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float inv = static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(n) + eps));
  const __m256 vinv = _mm256_set1_ps(inv);
  // y = (x · inv) · w, the reference's order: exact given the same inv.
  i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), vinv);
    if (w) v = _mm256_mul_ps(v, _mm256_loadu_ps(w + i));
    _mm256_storeu_ps(y + i, v);
  }
  for (; i < n; ++i) y[i] = x[i] * inv * (w ? w[i] : 1.0f);
}

}  // namespace avx2
#endif  // HR_HAS_AVX2_PATH

}  // namespace

void CpuBackend::add(float* y, const float* x, int64_t n) {
  for_ranges(n, [&](int64_t b, int64_t e) {
#if HR_HAS_AVX2_PATH
    if (avx2()) return avx2::map(y + b, y + b, x + b, e - b, avx2::Add{});
#endif
    for (int64_t i = b; i < e; ++i) y[i] += x[i];
  });
}

void CpuBackend::mul(float* y, const float* x, int64_t n) {
  for_ranges(n, [&](int64_t b, int64_t e) {
#if HR_HAS_AVX2_PATH
    if (avx2()) return avx2::map(y + b, y + b, x + b, e - b, avx2::Mul{});
#endif
    for (int64_t i = b; i < e; ++i) y[i] *= x[i];
  });
}

void CpuBackend::scale(float* y, float s, int64_t n) {
  for_ranges(n, [&](int64_t b, int64_t e) {
#if HR_HAS_AVX2_PATH
    if (avx2()) return avx2::map(y + b, y + b, y + b, e - b, avx2::Scale{s});
#endif
    for (int64_t i = b; i < e; ++i) y[i] *= s;
  });
}

void CpuBackend::softcap(float* y, float cap, int64_t n) {
  for_ranges(n, [&](int64_t b, int64_t e) {
#if HR_HAS_AVX2_PATH
    if (avx2()) return avx2::map(y + b, y + b, y + b, e - b, avx2::Softcap{cap});
#endif
    for (int64_t i = b; i < e; ++i) y[i] = cap * std::tanh(y[i] / cap);
  });
}

void CpuBackend::clamp(float* y, float lo, float hi, int64_t n) {
  for_ranges(n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = std::min(std::max(y[i], lo), hi);
  });
}

void CpuBackend::copy(float* y, const float* x, int64_t n) {
  if (y == x) return;
  // Overlapping ranges keep memmove's meaning only when copied in one piece.
  if (y < x + n && x < y + n) return static_cast<void>(std::memmove(y, x, n * sizeof(float)));
  for_ranges(n, [&](int64_t b, int64_t e) {
    std::memmove(y + b, x + b, static_cast<size_t>(e - b) * sizeof(float));
  });
}

void CpuBackend::copy_rows(float* y, int64_t ys, const float* x, int64_t xs, int64_t n,
                           int64_t rows) {
  const int64_t y_span = (rows - 1) * ys + n, x_span = (rows - 1) * xs + n;
  if (rows > 0 && y < x + x_span && x < y + y_span) {
    // Overlapping blocks: row by row in order, as the reference.
    for (int64_t r = 0; r < rows; ++r) std::memmove(y + r * ys, x + r * xs, n * sizeof(float));
    return;
  }
  for_rows(rows, n, [&](int64_t r) {
    std::memmove(y + r * ys, x + r * xs, static_cast<size_t>(n) * sizeof(float));
  });
}

void CpuBackend::silu_mul(const float* g, const float* u, float* o, int64_t n, int64_t rows,
                          int64_t stride) {
  // One row (decode) is cut into ranges; several rows go one per task.
  auto part = [&](int64_t r, int64_t b, int64_t e) {
    const float *gr = g + r * stride + b, *ur = u + r * stride + b;
    float* orow = o + r * n + b;
#if HR_HAS_AVX2_PATH
    if (avx2()) return avx2::map(orow, gr, ur, e - b, avx2::SiluMul{});
#endif
    for (int64_t i = 0; i < e - b; ++i) orow[i] = ref::silu(gr[i]) * ur[i];
  };
  if (rows == 1) return for_ranges(n, [&](int64_t b, int64_t e) { part(0, b, e); });
  for_rows(rows, n, [&](int64_t r) { part(r, 0, n); });
}

void CpuBackend::gelu_mul(const float* g, const float* u, float* o, int64_t n, int64_t rows,
                          int64_t stride) {
  auto part = [&](int64_t r, int64_t b, int64_t e) {
    const float *gr = g + r * stride + b, *ur = u + r * stride + b;
    float* orow = o + r * n + b;
#if HR_HAS_AVX2_PATH
    if (avx2()) return avx2::map(orow, gr, ur, e - b, avx2::GeluMul{});
#endif
    for (int64_t i = 0; i < e - b; ++i) orow[i] = ref::gelu(gr[i]) * ur[i];
  };
  if (rows == 1) return for_ranges(n, [&](int64_t b, int64_t e) { part(0, b, e); });
  for_rows(rows, n, [&](int64_t r) { part(r, 0, n); });
}

void CpuBackend::rmsnorm(const float* x, const float* w, float* y, int64_t n, int64_t n_rows,
                         float eps) {
  for_rows(n_rows, n, [&](int64_t r) {
#if HR_HAS_AVX2_PATH
    if (avx2()) return avx2::rmsnorm_row(x + r * n, w, y + r * n, n, eps);
#endif
    ref::rmsnorm(x + r * n, w, y + r * n, n, 1, eps);
  });
}

}  // namespace kernels::cpu
