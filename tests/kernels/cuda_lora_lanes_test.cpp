// The CUDA LoRA kernels (src/kernels/cuda/lora.cu) run on the host lane by lane: their arithmetic
// from lora_lanes.h, the warp's butterfly sum repeated on an array, against kernels::ref::lora.
// Plain C++: it needs no GPU and no CUDA toolkit.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/cuda/lora_lanes.h"
#include "kernels/ref/ref.h"

namespace {

namespace lanes = kernels::cuda::lora;

// What lane 0 holds after lora_a_kernel's __shfl_xor_sync butterfly (offsets 16 … 1).
float warp_sum(std::array<float, 32> v) {
  for (int offset = 16; offset > 0; offset /= 2) {
    std::array<float, 32> next;
    for (int l = 0; l < 32; ++l) next[l] = v[l] + v[l ^ offset];
    v = next;
  }
  return v[0];
}

// The two kernels of one adapter over every token, as lora.cu launches them.
std::vector<float> run_lanes(const std::vector<float>& a, const std::vector<float>& b, int rank,
                             const std::vector<float>& scale, const std::vector<float>& x,
                             std::vector<float> y, int64_t cols, int64_t rows, int T) {
  std::vector<float> h(static_cast<size_t>(T) * rank, NAN);
  for (int t = 0; t < T; ++t) {
    if (scale[t] == 0.0f) continue;
    for (int k = 0; k < rank; ++k) {
      std::array<float, 32> shares;
      for (int lane = 0; lane < 32; ++lane)
        shares[lane] = lanes::a_share(a.data() + k * cols, x.data() + t * cols, cols, lane);
      h[t * rank + k] = warp_sum(shares) * scale[t];
    }
  }
  for (int t = 0; t < T; ++t) {
    if (scale[t] == 0.0f) continue;
    for (int64_t r = 0; r < rows; ++r)
      y[t * rows + r] += lanes::b_value(b.data() + r * rank, h.data() + t * rank, rank);
  }
  return y;
}

TEST(CudaLoraLanes, MatchReferenceAndSkipOtherTokens) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 0.5f);
  auto random = [&](size_t n) {
    std::vector<float> v(n);
    for (float& f : v) f = dist(rng);
    return v;
  };
  // Widths below, at and well above a warp's 32 columns.
  for (const int64_t cols : {int64_t{5}, int64_t{32}, int64_t{1000}}) {
    const int64_t rows = 70;
    const int rank = 6, T = 4;
    const auto a = random(rank * cols), b = random(rows * rank), x = random(T * cols),
               y0 = random(T * rows);
    const std::vector<float> scale = {1.0f, 0.0f, -0.5f, 2.0f};
    const auto got = run_lanes(a, b, rank, scale, x, y0, cols, rows, T);
    std::vector<float> want = y0;
    const kernels::LoraTerm term{a.data(), b.data(), rank, scale.data()};
    kernels::ref::lora({.terms = &term,
                        .n_terms = 1,
                        .n_cols = cols,
                        .n_rows = rows,
                        .x = x.data(),
                        .y = want.data(),
                        .n_tokens = T});
    for (size_t i = 0; i < want.size(); ++i) {
      const bool skipped = scale[i / rows] == 0.0f;
      if (skipped) {
        EXPECT_EQ(got[i], y0[i]) << "cols " << cols << " at " << i;
      } else {
        EXPECT_NEAR(got[i], want[i], 1e-5 * (1 + std::fabs(want[i])))
            << "cols " << cols << " at " << i;
      }
    }
  }
}

}  // namespace
