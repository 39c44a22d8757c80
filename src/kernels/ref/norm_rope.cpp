// Reference RMSNorm, RoPE and the elementwise ops.
#include <cmath>
#include <cstring>

#include "kernels/ref/ref.h"

namespace kernels::ref {

// y[r][i] = x[r][i] / sqrt(mean_i(x[r]²) + eps) · w[i]
void rmsnorm(const float* x, const float* w, float* y, int64_t n, int64_t n_rows, float eps) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(xr[i]) * xr[i];
    const float inv = static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(n) + eps));
    for (int64_t i = 0; i < n; ++i) yr[i] = xr[i] * inv * (w ? w[i] : 1.0f);
  }
}

// x: [T][n_head][head_dim]. Pair i (i < n_rot/2) turns by angle pos·inv_freq[i]:
// adjacent style pairs (2i, 2i+1); rotate-half style pairs (i, i + n_rot/2).
void rope(float* x, int n_tokens, int n_head, int head_dim, const int32_t* pos, const RopeParams& p) {
  const int half = p.n_rot / 2;
  for (int t = 0; t < n_tokens; ++t) {
    for (int h = 0; h < n_head; ++h) {
      float* v = x + (static_cast<int64_t>(t) * n_head + h) * head_dim;
      for (int i = 0; i < half; ++i) {
        const double angle = static_cast<double>(pos[t]) * p.inv_freq[i];
        const float c = static_cast<float>(std::cos(angle));
        const float s = static_cast<float>(std::sin(angle));
        const int a = p.style == RopeStyle::kAdjacent ? 2 * i : i;
        const int b = p.style == RopeStyle::kAdjacent ? 2 * i + 1 : i + half;
        const float x0 = v[a], x1 = v[b];
        v[a] = x0 * c - x1 * s;
        v[b] = x1 * c + x0 * s;
      }
    }
  }
}

float gelu(float x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
}

float silu(float x) { return x / (1.0f + std::exp(-x)); }

void silu_mul(const float* gate, const float* up, float* out, int64_t n, int64_t n_rows, int64_t stride) {
  for (int64_t r = 0; r < n_rows; ++r) {
    for (int64_t i = 0; i < n; ++i) out[r * n + i] = silu(gate[r * stride + i]) * up[r * stride + i];
  }
}

void gelu_mul(const float* gate, const float* up, float* out, int64_t n, int64_t n_rows, int64_t stride) {
  for (int64_t r = 0; r < n_rows; ++r) {
    for (int64_t i = 0; i < n; ++i) out[r * n + i] = gelu(gate[r * stride + i]) * up[r * stride + i];
  }
}

void RefBackend::add(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}
void RefBackend::mul(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] *= x[i];
}
void RefBackend::scale(float* y, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] *= s;
}
void RefBackend::softcap(float* y, float cap, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = cap * std::tanh(y[i] / cap);
}
void RefBackend::copy(float* y, const float* x, int64_t n) {
  if (y != x) std::memmove(y, x, n * sizeof(float));
}
void RefBackend::copy_rows(float* y, int64_t ys, const float* x, int64_t xs, int64_t n, int64_t rows) {
  for (int64_t r = 0; r < rows; ++r) std::memmove(y + r * ys, x + r * xs, n * sizeof(float));
}

}  // namespace kernels::ref
