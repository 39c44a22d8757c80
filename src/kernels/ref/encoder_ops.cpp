// Reference ops of the audio encoder (kernels/ops.h, "the audio encoder's ops"): plain loops,
// the truth the defaults in kernels/ops.cpp run on host backends.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/ref/ref.h"

namespace kernels::ref {

void clamp(float* y, float lo, float hi, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::min(std::max(y[i], lo), hi);
}

void relu(float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = y[i] > 0.0f ? y[i] : 0.0f;
}

void silu_inplace(float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = silu(y[i]);
}

// y[r][i] = (x[r][i] − mean_i x[r]) / sqrt(var_i x[r] + eps) · w[i], statistics in double.
void layer_norm(const float* x, const float* w, float* y, int64_t n, int64_t n_rows, float eps) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < n; ++i) mean += xr[i];
    mean /= static_cast<double>(n);
    for (int64_t i = 0; i < n; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    const double inv = 1.0 / std::sqrt(var / static_cast<double>(n) + eps);
    for (int64_t i = 0; i < n; ++i) yr[i] = static_cast<float>((xr[i] - mean) * inv) * w[i];
  }
}

// out[r][i] = x[r][i] · sigmoid(x[r][n + i])
void glu(const float* x, float* out, int64_t n, int64_t n_rows) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* a = x + r * 2 * n;
    for (int64_t i = 0; i < n; ++i) out[r * n + i] = a[i] / (1.0f + std::exp(-a[n + i]));
  }
}

// y[t][c] = Σ_j w[c][j] · x[t − K + 1 + j][c], terms before time 0 dropped.
void depthwise_conv1d(const float* x, const float* w, float* y, int64_t n_tokens,
                      int64_t n_channels, int kernel) {
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t c = 0; c < n_channels; ++c) {
      double sum = 0;
      for (int j = 0; j < kernel; ++j) {
        const int64_t s = t - kernel + 1 + j;
        if (s >= 0) sum += static_cast<double>(w[c * kernel + j]) * x[s * n_channels + c];
      }
      y[t * n_channels + c] = static_cast<float>(sum);
    }
  }
}

void im2col_3x3_s2(const Im2Col3x3S2& a) {
  const int64_t f_out = (a.n_freq + 1) / 2, c_in = a.n_channels;
  for (int64_t t = 0; t < a.t_out_count; ++t) {
    for (int64_t f = 0; f < f_out; ++f) {
      float* row = a.out + (t * f_out + f) * c_in * 9;
      for (int64_t c = 0; c < c_in; ++c) {
        for (int i = 0; i < 3; ++i) {
          const int64_t ti = 2 * (a.t_out_first + t) + i - 1;
          for (int j = 0; j < 3; ++j) {
            const int64_t fi = 2 * f + j - 1;
            const bool inside = ti >= 0 && ti < a.t_valid && fi >= 0 && fi < a.n_freq;
            row[(c * 3 + i) * 3 + j] =
                inside ? a.x[((ti - a.t_first) * a.n_freq + fi) * c_in + c] : 0.0f;
          }
        }
      }
    }
  }
}

// Two passes per (token, head): capped scores of the visible keys, then the softmax-weighted sum.
void local_attention(const LocalAttention& a) {
  const int d = a.head_dim;
  std::vector<double> score(a.window), acc(d);
  for (int t = 0; t < a.n_tokens; ++t) {
    for (int h = 0; h < a.n_head; ++h) {
      const float* q = a.q + (static_cast<int64_t>(t) * a.n_head + h) * d;
      const int n = std::min(a.window, t + 1);  // distances 0 .. n − 1
      double max_score = -INFINITY;
      for (int dist = 0; dist < n; ++dist) {
        const float* k = a.k + (static_cast<int64_t>(t - dist) * a.n_head + h) * d;
        const float* r = a.rel + (static_cast<int64_t>(dist) * a.n_head + h) * d;
        double dot = 0;
        for (int i = 0; i < d; ++i)
          dot += static_cast<double>(q[i]) * (static_cast<double>(k[i]) + r[i]);
        score[dist] = a.softcap * std::tanh(dot / a.softcap);
        max_score = std::max(max_score, score[dist]);
      }
      std::fill(acc.begin(), acc.end(), 0.0);
      double denom = 0;
      for (int dist = 0; dist < n; ++dist) {
        const double w = std::exp(score[dist] - max_score);
        denom += w;
        const float* v = a.v + (static_cast<int64_t>(t - dist) * a.n_head + h) * d;
        for (int i = 0; i < d; ++i) acc[i] += w * v[i];
      }
      float* out = a.out + (static_cast<int64_t>(t) * a.n_head + h) * d;
      for (int i = 0; i < d; ++i) out[i] = static_cast<float>(acc[i] / denom);
    }
  }
}

void RefBackend::clamp(float* y, float lo, float hi, int64_t n) {
  ref::clamp(y, lo, hi, n);
}

}  // namespace kernels::ref
