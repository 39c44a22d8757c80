// kernels::ref::lora, the truth the backend table holds every backend's LoRA terms to, against
// the merged weights a LoRA adapter stands for: y + s · (B · A) · x, with the product B · A formed
// first in long double — the other order of the same algebra.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/ref/ref.h"

namespace {

std::vector<float> random_floats(size_t n, std::mt19937& rng, float sd) {
  std::normal_distribution<float> dist(0.0f, sd);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

TEST(RefLora, EqualsMergedWeightsPerTokenAdapter) {
  std::mt19937 rng(23);
  const int64_t cols = 37, rows = 29;
  const int T = 7;
  const int ranks[2] = {3, 8};
  const std::vector<float> x = random_floats(T * cols, rng, 1.0f);
  const std::vector<float> y0 = random_floats(T * rows, rng, 1.0f);
  std::vector<std::vector<float>> a, b, scale;
  std::vector<kernels::LoraTerm> terms;
  for (int i = 0; i < 2; ++i) {
    a.push_back(random_floats(ranks[i] * cols, rng, 0.5f));
    b.push_back(random_floats(rows * ranks[i], rng, 0.5f));
    // Token t runs under adapter t % 3 (2: none), with a scale of its own.
    std::vector<float> s(T, 0.0f);
    for (int t = 0; t < T; ++t) s[t] = t % 3 == i ? 0.25f * static_cast<float>(t + 1) : 0.0f;
    scale.push_back(std::move(s));
  }
  for (int i = 0; i < 2; ++i)
    terms.push_back({a[i].data(), b[i].data(), ranks[i], scale[i].data()});
  std::vector<float> y = y0;
  kernels::ref::lora({.terms = terms.data(),
                      .n_terms = 2,
                      .n_cols = cols,
                      .n_rows = rows,
                      .x = x.data(),
                      .y = y.data(),
                      .n_tokens = T});
  for (int t = 0; t < T; ++t) {
    const int adapter = t % 3;
    for (int64_t r = 0; r < rows; ++r) {
      long double want = y0[t * rows + r];
      if (adapter < 2) {
        const int rank = ranks[adapter];
        for (int64_t c = 0; c < cols; ++c) {
          long double merged = 0;  // (B · A)[r][c]
          for (int k = 0; k < rank; ++k)
            merged += static_cast<long double>(b[adapter][r * rank + k]) * a[adapter][k * cols + c];
          want += scale[adapter][t] * merged * x[t * cols + c];
        }
      }
      EXPECT_NEAR(y[t * rows + r], static_cast<double>(want), 2e-6 * (1 + std::fabs(double(want))))
          << "token " << t << " row " << r;
    }
    if (adapter == 2) {
      EXPECT_EQ(std::memcmp(y.data() + t * rows, y0.data() + t * rows, rows * sizeof(float)), 0)
          << "token " << t << " runs under no adapter, yet its row changed";
    }
  }
}

}  // namespace
