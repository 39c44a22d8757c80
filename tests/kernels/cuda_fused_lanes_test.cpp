// The CUDA residual_norm, top_k and scatter kernels (src/kernels/cuda/fused.cu) run on the host
// thread by thread and lane by lane: their arithmetic from fused_lanes.h, their shuffles and
// barriers repeated here on arrays in the kernels' order, against independent truth — the composed
// residual_norm on kernels::ref::RefBackend, kernels::quantize_act_rows, ref::top_k and memcpy.
// Plain C++: it needs no GPU and no CUDA toolkit, and runs in CI.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kernels/act_q8.h"
#include "kernels/cuda/fused_lanes.h"
#include "kernels/ref/ref.h"
#include "testing/testing.h"

namespace {

namespace fused = kernels::cuda::fused;
using kernels::ResidualNorm;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<float> random_normal(size_t n, std::mt19937& rng, float mean, float sd) {
  std::normal_distribution<float> dist(mean, sd);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

using testing_util::same_bits;

// The first index where two float arrays differ in their bits, or −1.
int64_t first_difference(const std::vector<float>& a, const std::vector<float>& b) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return static_cast<int64_t>(i);
  }
  return -1;
}

// --- The warp and block steps of the kernels, on arrays ---------------------------------------

// What every lane holds after __shfl_xor_sync butterflies with offsets 16, 8, 4, 2, 1, each lane
// combining its value with its partner's: op(own, partner's).
template <class T, class Op>
std::array<T, 32> butterfly(std::array<T, 32> v, Op op) {
  for (int offset = 16; offset > 0; offset /= 2) {
    std::array<T, 32> next;
    for (int l = 0; l < 32; ++l) next[l] = op(v[l], v[l ^ offset]);
    v = next;
  }
  return v;
}

// fused.cu's block_sum: each warp's butterfly, lane 0's total per warp, then sum_in_order.
double block_sum(const std::vector<double>& per_thread) {
  const int n_warps = static_cast<int>(per_thread.size() / 32);
  std::vector<double> totals(n_warps);
  for (int w = 0; w < n_warps; ++w) {
    std::array<double, 32> v;
    std::copy_n(per_thread.begin() + 32 * w, 32, v.begin());
    totals[w] = butterfly(v, [](double a, double b) { return a + b; })[0];
  }
  return fused::sum_in_order(totals.data(), n_warps);
}

// fused.cu's quantize_act_warp for the block starting at row index first (values y, one per lane).
void quantize_act_warp(const std::array<float, 32>& y, int64_t first, int64_t n, int row,
                       void* q8) {
  std::array<float, 32> magnitude;
  for (int l = 0; l < 32; ++l) magnitude[l] = fused::act_q8_lane_magnitude(y[l]);
  const auto amax = butterfly(magnitude, [](float a, float b) { return fmaxf(a, b); });
  std::array<int, 32> q;
  for (int l = 0; l < 32; ++l) {
    q[l] = kernels::act_q8_quant(y[l], amax[l]);  // each lane rounds with its own maximum
    kernels::act_q8_quants(q8, n, row)[first + l] = static_cast<int8_t>(q[l]);
  }
  const auto sum = butterfly(q, [](int a, int b) { return a + b; });
  fused::act_q8_block_scales(amax[0], sum[0],
                             kernels::act_q8_scales(q8, n, row) + 2 * (first / kernels::kActBlock));
}

// fused.cu's residual_norm_kernel<kPer> for every row, thread by thread between the barriers.
template <int kPer>
void run_residual_rows(const ResidualNorm& a, int threads) {
  const int n_warps = threads / 32;
  for (int row = 0; row < a.n_rows; ++row) {
    std::vector<fused::ResidualLane<kPer>> lanes(threads);
    std::vector<double> sq0(threads), sq1(threads), part(threads);
    for (int t = 0; t < threads; ++t) {
      double sq[2] = {0.0, 0.0};
      fused::residual_load(a, row, t, threads, lanes[t], sq);
      sq0[t] = sq[0];
      sq1[t] = sq[1];
    }
    float inv[2] = {1.0f, 1.0f};
    if (fused::residual_branch_normed(a, 0))
      inv[0] = fused::rms_inverse(block_sum(sq0), a.n, a.eps);
    if (fused::residual_branch_normed(a, 1))
      inv[1] = fused::rms_inverse(block_sum(sq1), a.n, a.eps);
    for (int t = 0; t < threads; ++t)
      part[t] = fused::residual_branch_sum(a, row, t, threads, inv, lanes[t]);
    const float inv_sum =
        a.sum_norm != nullptr ? fused::rms_inverse(block_sum(part), a.n, a.eps) : 1.0f;
    const bool x_norm = fused::residual_needs_x_norm(a);
    for (int t = 0; t < threads; ++t)
      part[t] = fused::residual_update_x(a, row, t, threads, inv_sum, x_norm, lanes[t]);
    const float inv_x = x_norm ? fused::rms_inverse(block_sum(part), a.n, a.eps) : 1.0f;
    for (int j = 0; j < a.n_out; ++j) {
      const ResidualNorm::Output& o = a.out[j];
      for (int k = 0; k < kPer; ++k) {
        for (int w = 0; w < n_warps; ++w) {
          const int64_t first = 32 * w + static_cast<int64_t>(k) * threads;
          std::array<float, 32> y{};
          for (int l = 0; l < 32; ++l) {
            const int64_t i = first + l;
            if (i >= a.n) continue;
            y[l] = fused::residual_output(o, lanes[32 * w + l].x[k], inv_x, i);
            if (o.y != nullptr) o.y[row * a.n + i] = y[l];
          }
          if (o.y_q8 == nullptr || first >= a.n) continue;
          ASSERT_LE(first + 32, a.n) << "a warp's 8-bit block would be missing lanes";
          quantize_act_warp(y, first, a.n, row, o.y_q8);
        }
      }
    }
  }
}

void run_residual_kernel(const ResidualNorm& a) {
  ASSERT_TRUE(fused::residual_norm_fits(a.n));
  const fused::ResidualShape shape = fused::residual_norm_shape(a.n);
  switch (shape.per_thread) {
    case 4:
      return run_residual_rows<4>(a, shape.threads);
    case 8:
      return run_residual_rows<8>(a, shape.threads);
    case 16:
      return run_residual_rows<16>(a, shape.threads);
    case 32:
      return run_residual_rows<32>(a, shape.threads);
    default:
      FAIL() << "no kernel instance for " << shape.per_thread << " values per thread";
  }
}

// --- residual_norm ----------------------------------------------------------------------------

struct OutputSpec {
  bool normalize = false;
  bool weight = false;
  float scale = 1.0f;
  bool mul = false;
  bool y = true;
  bool q8 = false;
};

struct ResidualCase {
  std::string name;
  int64_t n = 0;
  int n_rows = 0;
  bool norm0 = false;
  bool branch1 = false;
  bool norm1 = false;
  bool sum_norm = false;
  float x_scale = 1.0f;
  std::vector<OutputSpec> outs;
  bool branch0 = true;  // false: no residual step, only the outputs of x
};

// Every array of one call, so the reference and the kernel each get their own copy.
struct ResidualData {
  std::vector<float> x, branch0, branch1, norm0, norm1, sum_norm;
  std::vector<std::vector<float>> w, mul, y;
  std::vector<std::vector<uint8_t>> q8;

  ResidualNorm args(const ResidualCase& c) {
    ResidualNorm a;
    a.n = c.n;
    a.n_rows = c.n_rows;
    a.eps = 1e-6f;
    a.x = x.data();
    a.branch[0] = c.branch0 ? branch0.data() : nullptr;
    a.branch[1] = c.branch1 ? branch1.data() : nullptr;
    a.branch_norm[0] = c.norm0 ? norm0.data() : nullptr;
    a.branch_norm[1] = c.norm1 ? norm1.data() : nullptr;
    a.sum_norm = c.sum_norm ? sum_norm.data() : nullptr;
    a.x_scale = c.x_scale;
    a.n_out = static_cast<int>(c.outs.size());
    for (size_t j = 0; j < c.outs.size(); ++j) {
      const OutputSpec& s = c.outs[j];
      ResidualNorm::Output& o = a.out[j];
      o.normalize = s.normalize;
      o.w = s.weight ? w[j].data() : nullptr;
      o.scale = s.scale;
      o.mul = s.mul ? mul[j].data() : nullptr;
      o.y = s.y ? y[j].data() : nullptr;
      o.y_q8 = s.q8 ? q8[j].data() : nullptr;
    }
    return a;
  }
};

// Random activations (branches of another scale than x, as an attention output is) and norm
// weights around 1; outputs prefilled with a NaN pattern so an unwritten value shows.
ResidualData random_residual_data(const ResidualCase& c, uint32_t seed) {
  std::mt19937 rng(seed);
  const size_t total = static_cast<size_t>(c.n) * c.n_rows;
  ResidualData d;
  d.x = random_normal(total, rng, 0.0f, 2.0f);
  d.branch0 = random_normal(total, rng, 0.1f, 0.3f);
  d.branch1 = random_normal(total, rng, -0.2f, 5.0f);
  d.norm0 = random_normal(c.n, rng, 1.0f, 0.4f);
  d.norm1 = random_normal(c.n, rng, 0.8f, 0.4f);
  d.sum_norm = random_normal(c.n, rng, 1.2f, 0.3f);
  for (size_t j = 0; j < c.outs.size(); ++j) {
    d.w.push_back(random_normal(c.n, rng, 1.0f, 0.5f));
    d.mul.push_back(random_normal(c.n, rng, 0.0f, 1.5f));
    d.y.emplace_back(total, kNaN);
    d.q8.emplace_back(kernels::act_q8_row_bytes(c.n) * c.n_rows, uint8_t{0xA5});
  }
  return d;
}

std::vector<ResidualCase> residual_cases() {
  const OutputSpec norm_q8{.normalize = true, .weight = true, .q8 = true};
  return {
      // After attention (Gemma 4 E2B): the branch's post-norm, then the FFN's input norm + 8-bit.
      {"attention_e2b", 1536, 3, true, false, false, false, 1.0f, {norm_q8}},
      // After a MoE FFN (26B-A4B): two normed branches, their sum normed, the layer scale; the next
      // layer's input, x's own 8-bit form (y null) and a scaled, multiplied copy.
      {"moe_ffn_26b",
       2816,
       2,
       true,
       true,
       true,
       true,
       0.7f,
       {norm_q8,
        {.y = false, .q8 = true},
        {.normalize = false, .scale = 0.5f, .mul = true, .y = true, .q8 = true}}},
      // llama: the branch is added as it is, one weighted norm, no 8-bit form.
      {"llama_plain_add",
       4096,
       4,
       false,
       false,
       false,
       false,
       1.0f,
       {{.normalize = true, .weight = true}}},
      // Gemma 4's per-layer input: a norm without weight, scaled and multiplied.
      {"weightless_norm_scaled",
       1536,
       2,
       true,
       false,
       false,
       false,
       1.0f,
       {{.normalize = true, .weight = false, .scale = 0.125f, .mul = true, .q8 = true}}},
      // A width with no 8-bit form, a branch[1] added without a norm, then a sum norm.
      {"odd_width",
       100,
       5,
       false,
       true,
       false,
       true,
       1.5f,
       {{.normalize = true, .weight = true}, {.normalize = false, .scale = 3.0f}}},
      {"one_block", 32, 1, true, true, true, false, 1.0f, {norm_q8}},
      {"residual_only", 640, 2, true, true, false, true, 0.25f, {}},
      // Wider rows: 8, 16 and 32 values per thread.
      {"gemma4_31b_width", 5376, 2, true, false, false, false, 1.0f, {norm_q8}},
      {"width_12000", 12000, 1, true, true, true, true, 1.0f, {norm_q8, {.y = false, .q8 = true}}},
      {"width_20000", 20000, 1, true, false, false, false, 0.5f, {norm_q8}},
      // A layer's first input norm: no branch, x untouched, its norm and its own 8-bit form.
      {"outputs_only",
       1536,
       3,
       false,
       false,
       false,
       false,
       1.0f,
       {norm_q8, {.y = false, .q8 = true}},
       false},
  };
}

TEST(CudaFusedLanes, ResidualShapeCoversEveryRowWithWholeWarps) {
  for (int64_t n = 1; n <= int64_t{fused::kResidualMaxThreads} * fused::kResidualMaxPerThread;
       n += (n < 4096 ? 1 : 97)) {
    const fused::ResidualShape s = fused::residual_norm_shape(n);
    ASSERT_TRUE(fused::residual_norm_fits(n));
    ASSERT_EQ(s.threads % 32, 0) << n;
    ASSERT_LE(s.threads, fused::kResidualMaxThreads) << n;
    ASSERT_GE(int64_t{s.threads} * s.per_thread, n) << n;
    ASSERT_LT(int64_t{s.threads - 32} * s.per_thread, n) << n << ": a warp with nothing to do";
    const bool fewest = s.per_thread == fused::kResidualMinPerThread ||
                        n > int64_t{fused::kResidualMaxThreads} * (s.per_thread / 2);
    ASSERT_TRUE(fewest) << n << ": " << s.per_thread << " values per thread where half fit";
  }
  EXPECT_FALSE(fused::residual_norm_fits(
      int64_t{fused::kResidualMaxThreads} * fused::kResidualMaxPerThread + 1));
  EXPECT_FALSE(fused::residual_norm_fits(0));
}

// Every f32 operation is the composed default's in its order, so the expected result is the
// reference's bits: x, both branches and each y exactly, and the 8-bit forms byte for byte equal
// to quantize_act_rows of the reference's y (x where y is null). The only step computed in another
// order is the double sum of squares; it could round to another f32 factor about once in 10^8
// rows, and these seeds are fixed, so any difference is a defect.
TEST(CudaFusedLanes, ResidualNormIsTheComposedDefaultBitForBit) {
  uint32_t seed = 1;
  for (const ResidualCase& c : residual_cases()) {
    SCOPED_TRACE(c.name);
    ResidualData want = random_residual_data(c, seed);
    ResidualData got = random_residual_data(c, seed);
    ++seed;
    kernels::ref::RefBackend ref;
    ref.residual_norm(want.args(c));
    run_residual_kernel(got.args(c));
    if (HasFatalFailure()) return;

    EXPECT_EQ(first_difference(got.x, want.x), -1) << "x";
    EXPECT_EQ(first_difference(got.branch0, want.branch0), -1) << "branch[0] (b written back)";
    EXPECT_EQ(first_difference(got.branch1, want.branch1), -1) << "branch[1]";
    for (size_t j = 0; j < c.outs.size(); ++j) {
      SCOPED_TRACE("output " + std::to_string(j));
      if (c.outs[j].y) {
        EXPECT_EQ(first_difference(got.y[j], want.y[j]), -1) << "y";
      }
      if (!c.outs[j].q8) continue;
      std::vector<uint8_t> q8(want.q8[j].size(), uint8_t{0xA5});
      kernels::quantize_act_rows(c.outs[j].y ? want.y[j].data() : want.x.data(), c.n, c.n_rows,
                                 q8.data());
      EXPECT_TRUE(got.q8[j] == q8) << "8-bit form differs from quantize_act_rows";
    }
  }
}

// The q8 step alone, on blocks chosen to stress it: magnitudes from 1e-30 to 1e30, a block of
// zeros (d = 0), ties at ±max, values on rounding midpoints, a single large outlier.
TEST(CudaFusedLanes, WarpQuantizationWritesQuantizeActBlocksBytes) {
  std::mt19937 rng(7);
  constexpr int kBlocks = 64;
  constexpr int64_t n = 32 * kBlocks;
  std::vector<float> x(n * 2);
  for (int b = 0; b < 2 * kBlocks; ++b) {
    const float scale = std::pow(10.0f, static_cast<float>(b % 61) - 30.0f);
    std::normal_distribution<float> dist(0.0f, scale);
    for (int l = 0; l < 32; ++l) x[b * 32 + l] = dist(rng);
  }
  for (int l = 0; l < 32; ++l) {
    x[3 * 32 + l] = 0.0f;                                    // d = 0
    x[5 * 32 + l] = l % 2 ? 4.0f : -4.0f;                    // every lane at ±max
    x[7 * 32 + l] = (static_cast<float>(l) - 15.5f) * 0.5f;  // q·d midpoints
    x[9 * 32 + l] = l == 17 ? 1e6f : 1e-3f * static_cast<float>(l);
  }
  std::vector<uint8_t> want(kernels::act_q8_row_bytes(n) * 2, 0), got(want.size(), 0);
  kernels::quantize_act_rows(x.data(), n, 2, want.data());
  for (int row = 0; row < 2; ++row) {
    for (int b = 0; b < kBlocks; ++b) {
      std::array<float, 32> y;
      std::copy_n(x.begin() + row * n + b * 32, 32, y.begin());
      quantize_act_warp(y, 32 * b, n, row, got.data());
    }
  }
  EXPECT_TRUE(got == want);
}

// --- top_k ------------------------------------------------------------------------------------

// ref::top_k's order on (value, index): true when a comes first.
bool ranks_before(float a, int32_t ia, float b, int32_t ib) {
  const float ra = std::isnan(a) ? -kInf : a, rb = std::isnan(b) ? -kInf : b;
  return ra > rb || (ra == rb && ia < ib);
}

TEST(CudaFusedLanes, TopKKeysOrderAsTheReferenceDoes) {
  const std::vector<float> specials = {kNaN,
                                       -kNaN,
                                       -kInf,
                                       kInf,
                                       -0.0f,
                                       0.0f,
                                       1.0f,
                                       -1.0f,
                                       std::numeric_limits<float>::denorm_min(),
                                       -std::numeric_limits<float>::denorm_min(),
                                       std::numeric_limits<float>::max(),
                                       std::numeric_limits<float>::lowest(),
                                       3.5f,
                                       -3.5f};
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 10.0f);
  std::vector<float> values = specials;
  for (int i = 0; i < 200; ++i) values.push_back(dist(rng));
  const std::vector<int32_t> indices = {0, 1, 2, 1000, 262143, 0x7fffffff};
  for (float a : values) {
    for (int32_t ia : indices) {
      const uint64_t ka = fused::topk_key(a, ia);
      ASSERT_NE(ka, 0u);
      ASSERT_EQ(fused::topk_key_index(ka), ia);
      const float rank = fused::topk_key_rank(ka);
      ASSERT_TRUE(rank == fused::topk_rank(a)) << a << " came back as " << rank;
      for (float b : specials) {
        for (int32_t ib : indices) {
          if (ia == ib) continue;  // a row has one value per index
          ASSERT_EQ(ka > fused::topk_key(b, ib), ranks_before(a, ia, b, ib))
              << a << "@" << ia << " vs " << b << "@" << ib;
        }
      }
    }
  }
}

TEST(CudaFusedLanes, TopKGroupsCoverTheirValuesOnce) {
  for (bool vectorized : {false, true}) {
    for (int64_t g : {int64_t{0}, int64_t{1}, int64_t{255}}) {
      std::vector<int> seen(fused::kTopKGroup, 0);
      for (int lane = 0; lane < 32; ++lane) {
        for (int s = 0; s < fused::kTopKPerLane; ++s) {
          const int64_t i = fused::topk_element(g, lane, s, vectorized);
          ASSERT_GE(i, g * fused::kTopKGroup);
          ASSERT_LT(i, (g + 1) * fused::kTopKGroup);
          ++seen[i - g * fused::kTopKGroup];
          if (!vectorized) continue;
          if (s % 4 == 0) {
            ASSERT_EQ(i % 4, 0);  // a float4's first component
          } else {
            ASSERT_EQ(i, fused::topk_element(g, lane, s - 1, true) + 1);
          }
        }
      }
      for (int c : seen) ASSERT_EQ(c, 1);
    }
  }
}

// One warp of top_k_kernel: its list, its buffer, and the kernel's control state.
struct TopKWarp {
  std::vector<uint64_t> list = std::vector<uint64_t>(fused::kTopKMax, 0);
  std::vector<uint64_t> buffer = std::vector<uint64_t>(fused::kTopKBuffer, 0);
  int len = 0;
  int count = 0;
  float threshold = -kInf;
  int merges = 0;
};

// fused.cu's merge_buffer: lanes read and rank the buffer, write it sorted, take every entry's
// merged position from the old arrays, then write the first k.
void merge_buffer(TopKWarp& w, int k) {
  std::vector<uint64_t> keys(w.buffer.begin(), w.buffer.begin() + w.count);
  std::vector<int> rank(w.count);
  for (int j = 0; j < w.count; ++j)
    rank[j] = fused::topk_rank_in_buffer(w.buffer.data(), w.count, j);
  for (int j = 0; j < w.count; ++j) w.buffer[rank[j]] = keys[j];
  std::vector<std::pair<int, uint64_t>> writes;
  for (int i = 0; i < w.len; ++i) {
    writes.emplace_back(fused::topk_merged_position(i, w.list[i], w.buffer.data(), w.count),
                        w.list[i]);
  }
  for (int j = 0; j < w.count; ++j) {
    writes.emplace_back(fused::topk_merged_position(j, w.buffer[j], w.list.data(), w.len),
                        w.buffer[j]);
  }
  std::set<int> positions;
  for (const auto& [position, key] : writes) {
    ASSERT_TRUE(positions.insert(position).second) << "two entries merged to " << position;
    if (position < k) w.list[position] = key;
  }
  w.len = std::min(k, w.len + w.count);
  ++w.merges;
}

// fused.cu's top_k_kernel for one row; returns the merges its warps did.
int run_top_k_row(const float* row, int64_t n, int k, bool vectorized, int32_t* ids,
                  float* values) {
  std::vector<TopKWarp> warps(fused::kTopKWarps);
  const int64_t n_groups = (n + fused::kTopKGroup - 1) / fused::kTopKGroup;
  for (int wi = 0; wi < fused::kTopKWarps; ++wi) {
    TopKWarp& w = warps[wi];
    for (int64_t g = wi; g < n_groups; g += fused::kTopKWarps) {
      const bool whole = (g + 1) * fused::kTopKGroup <= n;
      const auto inside = [&](int lane, int s) {
        return whole || fused::topk_element(g, lane, s, vectorized) < n;
      };
      const auto value = [&](int lane, int s) {
        return inside(lane, s) ? row[fused::topk_element(g, lane, s, vectorized)] : 0.0f;
      };
      bool full = w.len == k, strict = true, any = false;
      for (int lane = 0; lane < 32; ++lane) {
        for (int s = 0; s < fused::kTopKPerLane; ++s)
          any |= inside(lane, s) && fused::topk_admits(value(lane, s), full, w.threshold, true);
      }
      if (!any) continue;
      for (int s = 0; s < fused::kTopKPerLane; ++s) {
        int taken = 0;
        for (int lane = 0; lane < 32; ++lane) {  // the ballot's order: by lane
          if (!inside(lane, s) || !fused::topk_admits(value(lane, s), full, w.threshold, strict))
            continue;
          const int64_t i = fused::topk_element(g, lane, s, vectorized);
          w.buffer[w.count + taken++] = fused::topk_key(row[i], static_cast<int32_t>(i));
        }
        w.count += taken;
        if (w.count > fused::kTopKBuffer - 32) {
          merge_buffer(w, k);
          w.count = 0;
          full = w.len == k;
          if (full) w.threshold = fused::topk_key_rank(w.list[k - 1]);
          strict = false;
        }
      }
    }
    if (w.count > 0) merge_buffer(w, k);
  }
  std::vector<uint64_t> lists(fused::kTopKWarps * fused::kTopKMax);
  std::vector<int> lens(fused::kTopKWarps);
  int merges = 0;
  for (int wi = 0; wi < fused::kTopKWarps; ++wi) {
    std::copy(warps[wi].list.begin(), warps[wi].list.end(), lists.begin() + wi * fused::kTopKMax);
    lens[wi] = warps[wi].len;
    merges += warps[wi].merges;
  }
  for (int w = 0; w < fused::kTopKWarps; ++w) {
    for (int i = 0; i < lens[w]; ++i) {
      const int position = fused::topk_final_position(lists.data(), fused::kTopKMax, lens.data(),
                                                      fused::kTopKWarps, w, i);
      if (position >= k) continue;
      const int32_t index = fused::topk_key_index(lists[w * fused::kTopKMax + i]);
      EXPECT_EQ(ids[position], -1) << "position " << position << " written twice";
      ids[position] = index;
      values[position] = row[index];
    }
  }
  return merges;
}

// Runs the kernel (both load orders where the row allows 16-byte loads) and ref::top_k on rows of
// n values and expects the same ids and the same value bits.
void expect_top_k_matches(const std::vector<float>& x, int64_t n, int k, const std::string& what) {
  const int n_rows = static_cast<int>(x.size() / n);
  std::vector<int32_t> want_ids(static_cast<size_t>(n_rows) * k);
  std::vector<float> want_values(want_ids.size());
  kernels::ref::top_k(x.data(), n, n_rows, k, want_ids.data(), want_values.data());
  for (bool vectorized : {false, true}) {
    if (vectorized && n % 4 != 0) continue;  // launch_top_k reads such rows a float at a time
    SCOPED_TRACE(what + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
                 (vectorized ? " float4" : " float"));
    std::vector<int32_t> ids(want_ids.size(), -1);
    std::vector<float> values(want_ids.size(), 0.0f);
    for (int r = 0; r < n_rows; ++r) {
      run_top_k_row(x.data() + r * n, n, k, vectorized, ids.data() + r * k, values.data() + r * k);
    }
    ASSERT_EQ(ids, want_ids);
    ASSERT_TRUE(same_bits(values, want_values));
  }
}

// Values from a small set, so most of a row ties with something: both zeros, both infinities,
// NaNs of both signs, and a few numbers.
std::vector<float> tied_values(size_t n, std::mt19937& rng) {
  const std::vector<float> pool = {kNaN, -kNaN, -kInf, kInf, -0.0f, 0.0f, 1.0f, -1.0f, 2.5f, 7.0f};
  std::uniform_int_distribution<size_t> pick(0, pool.size() - 1);
  std::vector<float> v(n);
  for (float& f : v) f = pool[pick(rng)];
  return v;
}

TEST(CudaFusedLanes, TopKOfRandomLogitsIsTheReferences) {
  std::mt19937 rng(21);
  constexpr int64_t kVocab = 262144;  // Gemma's
  const std::vector<float> logits = random_normal(2 * kVocab, rng, 0.0f, 3.0f);
  for (int k : {1, 40, 64}) expect_top_k_matches(logits, kVocab, k, "logits");
  // Odd widths: partial last groups, rows that do not start 16-byte aligned.
  for (int64_t n : {int64_t{1001}, int64_t{4099}, int64_t{70000}}) {
    const std::vector<float> x = random_normal(3 * n, rng, 1.0f, 1.0f);
    for (int k : {1, 40, 64}) expect_top_k_matches(x, n, k, "odd width");
  }
}

TEST(CudaFusedLanes, TopKBreaksTiesByIndexAndRanksNanLowest) {
  std::mt19937 rng(22);
  for (int64_t n : {int64_t{64}, int64_t{100}, int64_t{1024}, int64_t{5000}, int64_t{40000}}) {
    const std::vector<float> x = tied_values(4 * n, rng);
    for (int k : {1, 7, 40, 64}) expect_top_k_matches(x, n, k, "ties");
  }
  // Few numbers in a sea of −inf and NaN (a masked row): fewer finite values than k.
  std::vector<float> masked(50000, -kInf);
  for (size_t i = 0; i < masked.size(); i += 7) masked[i] = kNaN;
  for (size_t i : {size_t{3}, size_t{49999}, size_t{20000}, size_t{777}}) masked[i] = 1.0f;
  for (int k : {1, 40, 64}) expect_top_k_matches(masked, 50000, k, "masked");
}

TEST(CudaFusedLanes, TopKOfOrderedConstantAndTinyRows) {
  const int64_t n = 20000;
  std::vector<float> ascending(n), descending(n), constant(n, 0.5f), all_nan(n, kNaN);
  for (int64_t i = 0; i < n; ++i) {
    ascending[i] = static_cast<float>(i) * 0.25f - 100.0f;
    descending[i] = -ascending[i];
  }
  for (int k : {1, 40, 64}) {
    expect_top_k_matches(ascending, n, k, "ascending");
    expect_top_k_matches(descending, n, k, "descending");
    expect_top_k_matches(constant, n, k, "constant");
    expect_top_k_matches(all_nan, n, k, "all NaN");
  }
  std::mt19937 rng(23);
  const std::vector<float> x = random_normal(64 * 3, rng, 0.0f, 1.0f);
  expect_top_k_matches(x, 64, 64, "k = n");
  expect_top_k_matches(x, 1, 1, "one value per row");
  expect_top_k_matches(x, 3, 2, "three values per row");
}

// The kernel's cost rests on a full list admitting few values: on random logits a warp should
// merge a handful of times, not once per group (as it would if its bar never rose: ~1000 merges).
TEST(CudaFusedLanes, TopKOfRandomLogitsMergesRarely) {
  std::mt19937 rng(24);
  constexpr int64_t kVocab = 262144;
  const std::vector<float> logits = random_normal(kVocab, rng, 0.0f, 3.0f);
  for (int k : {1, 40, 64}) {
    std::vector<int32_t> ids(k, -1);
    std::vector<float> values(k);
    const int merges = run_top_k_row(logits.data(), kVocab, k, true, ids.data(), values.data());
    // A warp admits about k·(1 + ln(32768 / k)) of its values in random order and merges them 33
    // or more at a time, plus the merge that first fills its list and the last one; twice that
    // leaves room for chance (k = 1: 24 merges, 40: 93, 64: 124 with this seed).
    const double admitted = k * (1.0 + std::log(32768.0 / k));
    EXPECT_LE(merges, fused::kTopKWarps * (2.0 * admitted / 33.0 + 3.0)) << "k=" << k;
  }
}

// --- scatter ----------------------------------------------------------------------------------

TEST(CudaFusedLanes, ScatterThreadsCopyEveryByteOnceAtEveryAlignment) {
  std::mt19937 rng(31);
  std::vector<uint8_t> src(8192);
  for (uint8_t& b : src) b = static_cast<uint8_t>(rng());
  std::uniform_int_distribution<uint32_t> offset(0, 4095), length(0, 700);
  std::set<int> word_sizes;
  for (int threads : {128, 32, 7}) {
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<uint8_t> want(2048, 0x5A), got(2048, 0x5A);
      ASSERT_EQ(reinterpret_cast<uintptr_t>(got.data()) % 16, 0u);
      ASSERT_EQ(reinterpret_cast<uintptr_t>(src.data()) % 16, 0u);
      // Both ends on a multiple of 16, 8, 4 or 1 bytes in turn, so every word width is used.
      const uint32_t grain = std::array<uint32_t, 4>{16, 8, 4, 1}[trial % 4];
      const uint32_t bytes = length(rng);
      const uint32_t dst_at =
          std::uniform_int_distribution<uint32_t>(0, 2048 - bytes)(rng) / grain * grain;
      const uint32_t src_at = offset(rng) / grain * grain;
      word_sizes.insert(fused::scatter_word_bytes(got.data() + dst_at, src.data() + src_at));
      std::memcpy(want.data() + dst_at, src.data() + src_at, bytes);
      for (int t = 0; t < threads; ++t)
        fused::scatter_copy_part(got.data() + dst_at, src.data() + src_at, bytes, t, threads);
      ASSERT_TRUE(got == want) << bytes << " bytes, src+" << src_at << " to dst+" << dst_at << ", "
                               << threads << " threads";
    }
  }
  EXPECT_EQ(word_sizes, (std::set<int>{1, 4, 8, 16})) << "every word width exercised";
}

}  // namespace
