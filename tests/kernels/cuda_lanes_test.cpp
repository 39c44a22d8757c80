// The per-lane arithmetic of the CUDA decode matvecs (src/kernels/cuda/matvec_lanes.h), run lane
// by lane on the host: teams of lanes summed as a warp would, against the float64 dot of the
// tensor:: dequantizers' weights with the dequantized 8-bit activations, on random rows quantized
// by tensor::quantize_row. Also the emulated intrinsics, the unaligned window loads, the GLU
// activations against kernels::ref and a warp's quantization of a block against
// quantize_act_block. Plain C++: it runs on every machine, GPU or not.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/act_q8.h"
#include "kernels/cuda/matvec_lanes.h"
#include "kernels/ref/ref.h"
#include "tensor/dequantize.h"
#include "tensor/dtype.h"
#include "tensor/k_scales.h"
#include "tensor/quantize.h"

namespace {

using kernels::cuda::ActQ8Rows;
using kernels::cuda::host_load_check;
using kernels::cuda::HostLoadCheck;
using kernels::cuda::Q8Matrix;
using tensor::DType;

constexpr DType kQ8Types[] = {DType::kQ4_0, DType::kQ4_1,   DType::kQ5_0, DType::kQ5_1,
                              DType::kQ8_0, DType::kIQ4_NL, DType::kQ4_K, DType::kQ5_K,
                              DType::kQ6_K, DType::kIQ4_XS};

// Bytes with a given start alignment, sized exactly: the host load checks see any read past them.
class AlignedBytes {
 public:
  explicit AlignedBytes(size_t n, size_t offset = 0) : storage_(n + offset + 64) {
    const auto base = reinterpret_cast<uintptr_t>(storage_.data());
    data_ = storage_.data() + ((64 - base % 64) % 64) + offset;
    size_ = n;
  }
  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  std::vector<uint8_t> storage_;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Registers the buffers a run may read and checks, on scope exit, that no load was misaligned or
// outside them.
class LoadBounds {
 public:
  LoadBounds(std::initializer_list<const AlignedBytes*> buffers) {
    HostLoadCheck& c = host_load_check();
    c = HostLoadCheck{};
    for (const AlignedBytes* b : buffers) {
      const auto begin = reinterpret_cast<uintptr_t>(b->data());
      c.ranges[c.n_ranges++] = {begin, begin + b->size()};
    }
  }
  ~LoadBounds() {
    const HostLoadCheck& c = host_load_check();
    EXPECT_EQ(c.misaligned, 0) << "loads a GPU would fault on (not aligned to their size)";
    EXPECT_EQ(c.outside, 0) << "loads outside the weights and activations";
    host_load_check() = HostLoadCheck{};
  }
};

std::vector<float> random_floats(size_t n, std::mt19937& rng, float mean = 0.0f, float sd = 1.0f) {
  std::normal_distribution<float> dist(mean, sd);
  std::vector<float> v(n);
  for (auto& f : v) f = dist(rng);
  return v;
}

// --- The intrinsics' host emulations -----------------------------------------------------------

TEST(CudaLanes, Dp4aIsTheSignedByteDotProduct) {
  std::mt19937 rng(1);
  for (int i = 0; i < 20000; ++i) {
    const uint32_t a = rng(), b = rng();
    const int c = static_cast<int>(rng() % 2001) - 1000;
    int8_t ab[4], bb[4];
    std::memcpy(ab, &a, 4);
    std::memcpy(bb, &b, 4);
    int want = c;
    for (int k = 0; k < 4; ++k) want += int{ab[k]} * int{bb[k]};
    ASSERT_EQ(kernels::cuda::dp4a(a, b, c), want) << std::hex << a << " " << b;
  }
}

TEST(CudaLanes, SubBytesSubtractsEachByteModulo256) {
  std::mt19937 rng(2);
  for (int i = 0; i < 20000; ++i) {
    const uint32_t a = rng(), b = rng();
    uint32_t want = 0;
    for (int k = 0; k < 4; ++k) {
      const uint32_t d = ((a >> (8 * k)) - (b >> (8 * k))) & 0xffu;
      want |= d << (8 * k);
    }
    ASSERT_EQ(kernels::cuda::sub_bytes(a, b), want) << std::hex << a << " " << b;
  }
}

TEST(CudaLanes, Iq4LevelsLookUpTheCodebook) {
  std::mt19937 rng(3);
  for (int i = 0; i < 20000; ++i) {
    const uint32_t q = rng() & 0x0f0f0f0fu;
    const uint32_t got = kernels::cuda::iq4_levels(q);
    for (int k = 0; k < 4; ++k) {
      ASSERT_EQ(static_cast<int8_t>(got >> (8 * k)), tensor::kIq4NlLevels[(q >> (8 * k)) & 0xf])
          << std::hex << q;
    }
  }
}

TEST(CudaLanes, KScalesUnpackAsTensorDoes) {
  std::mt19937 rng(4);
  for (int i = 0; i < 5000; ++i) {
    uint8_t bytes[12];
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    uint32_t words[3];
    std::memcpy(words, bytes, 12);
    for (int j = 0; j < 8; ++j) {
      int scale = -1, min = -1;
      kernels::cuda::k4_scale_min(words, j, &scale, &min);
      const tensor::KScaleMin want = tensor::k4_scale_min(bytes, j);
      ASSERT_EQ(scale, want.scale) << "sub-block " << j;
      ASSERT_EQ(min, want.min) << "sub-block " << j;
    }
  }
}

// --- Unaligned windows ------------------------------------------------------------------------

template <int kWords>
void check_windows(const AlignedBytes& bytes, size_t first, size_t last, bool guarded) {
  const uint8_t* end = bytes.data() + bytes.size();
  for (size_t at = first; at + 4 * kWords <= last; at += 2) {
    uint32_t got[kWords];
    kernels::cuda::load_window<kWords>(bytes.data() + at, end, guarded, got);
    uint32_t want[kWords];
    std::memcpy(want, bytes.data() + at, sizeof(want));
    for (int k = 0; k < kWords; ++k) {
      ASSERT_EQ(got[k], want[k]) << "window of " << 4 * kWords << " bytes at " << at << ", word "
                                 << k << (guarded ? " (guarded)" : "");
    }
  }
}

TEST(CudaLanes, WindowsReadEveryEvenOffsetFromAlignedChunks) {
  std::mt19937 rng(5);
  for (const size_t size : {size_t{96}, size_t{98}, size_t{110}, size_t{126}}) {
    AlignedBytes bytes(size);
    for (size_t i = 0; i < size; ++i) bytes.data()[i] = static_cast<uint8_t>(rng());
    LoadBounds bounds{&bytes};
    // Unguarded windows may read the chunk after their bytes: keep them 32 bytes from the end.
    check_windows<4>(bytes, 0, size - kernels::cuda::kWindowOverread, false);
    check_windows<8>(bytes, 0, size - kernels::cuda::kWindowOverread, false);
    // Guarded ones reach the last byte, whatever the size's alignment.
    check_windows<4>(bytes, 0, size, true);
    check_windows<8>(bytes, 0, size, true);
  }
}

// --- Rows of every q8 type against the dequantized truth ---------------------------------------

// Where a block keeps its quants (zeroing them leaves what a quant of 0 stands for: the offset
// that the kernels add separately, through the activations' block sums).
struct QuantBytes {
  int begin, end;
};
QuantBytes quant_bytes(DType type) {
  switch (type) {
    case DType::kQ4_0:
    case DType::kIQ4_NL:
      return {2, 18};
    case DType::kQ4_1:
      return {4, 20};
    case DType::kQ5_0:
      return {2, 22};
    case DType::kQ5_1:
      return {4, 24};
    case DType::kQ8_0:
      return {2, 34};
    case DType::kQ4_K:
      return {16, 144};
    case DType::kQ5_K:
      return {16, 176};
    case DType::kQ6_K:
      return {0, 192};
    case DType::kIQ4_XS:
      return {8, 136};
    default:
      return {0, 0};
  }
}

// The activations as the truth reads them: d·q per value (double, exact).
std::vector<double> dequantize_act_row(const uint8_t* q8, int64_t n_cols, int t) {
  const int8_t* q = kernels::act_q8_quants(q8, n_cols, t);
  const float* s = kernels::act_q8_scales(q8, n_cols, t);
  std::vector<double> a(n_cols);
  for (int64_t i = 0; i < n_cols; ++i) a[i] = static_cast<double>(s[2 * (i / 32)]) * q[i];
  return a;
}

// The team's sum as the kernels take it: a butterfly over the lanes of each warp (xor offsets
// below the team size), then the warps in order.
float team_sum(const std::vector<float>& lanes) {
  const int n = static_cast<int>(lanes.size());
  const int width = std::min(n, 32);
  std::vector<float> v = lanes;
  for (int offset = width / 2; offset > 0; offset /= 2) {
    std::vector<float> next = v;
    for (int l = 0; l < n; ++l) next[l] = v[l] + v[l ^ offset];
    v = next;
  }
  float sum = v[0];
  for (int w = 1; w < n / 32; ++w) sum += v[32 * w];
  return sum;
}

struct RowCase {
  DType type;
  int64_t n_blocks;
  int n_rows;
  size_t row_pad;  // bytes between rows past the packed row
  int n_tok;
  int team;
};

std::string describe(const RowCase& c) {
  return std::string(tensor::dtype_name(c.type)) + " blocks " + std::to_string(c.n_blocks) +
         " rows " + std::to_string(c.n_rows) + " pad " + std::to_string(c.row_pad) + " tokens " +
         std::to_string(c.n_tok) + " team " + std::to_string(c.team);
}

// Runs every lane of a team over each row and checks the team's sums against the truth. Returns
// how many (row, token) results a wrong activation block (the first and last blocks swapped)
// would have moved outside the tolerance: the check's power to see an indexing bug.
template <int kTok>
int check_rows(const RowCase& c, std::mt19937& rng) {
  const kernels::cuda::Q8Layout layout = kernels::cuda::q8_layout(c.type);
  const int64_t n_cols = c.n_blocks * layout.block_values;
  const size_t packed = static_cast<size_t>(tensor::row_bytes(c.type, n_cols));
  EXPECT_EQ(packed, static_cast<size_t>(c.n_blocks * layout.block_bytes)) << describe(c);
  const size_t row_bytes = packed + c.row_pad;
  // Offsets and mins matter: the rows are not centred on 0.
  AlignedBytes weights(row_bytes * c.n_rows);
  std::vector<std::vector<float>> x(c.n_rows), zero(c.n_rows);
  for (int r = 0; r < c.n_rows; ++r) {
    const std::vector<float> src =
        random_floats(n_cols, rng, std::uniform_real_distribution<float>(-0.5f, 0.5f)(rng));
    uint8_t* row = weights.data() + r * row_bytes;
    EXPECT_TRUE(tensor::quantize_row(c.type, src.data(), row, n_cols).ok());
    x[r].resize(n_cols);
    EXPECT_TRUE(tensor::dequantize_row(c.type, row, x[r].data(), n_cols).ok());
    std::vector<uint8_t> zeroed(row, row + packed);
    const QuantBytes qb = quant_bytes(c.type);
    for (int64_t b = 0; b < c.n_blocks; ++b) {
      std::fill(zeroed.begin() + b * layout.block_bytes + qb.begin,
                zeroed.begin() + b * layout.block_bytes + qb.end, 0);
    }
    AlignedBytes aligned(packed);
    std::memcpy(aligned.data(), zeroed.data(), packed);
    zero[r].resize(n_cols);
    EXPECT_TRUE(tensor::dequantize_row(c.type, aligned.data(), zero[r].data(), n_cols).ok());
  }
  const size_t act_row = kernels::act_q8_row_bytes(n_cols);
  AlignedBytes act(act_row * c.n_tok);
  const std::vector<float> act_f32 = random_floats(n_cols * c.n_tok, rng);
  kernels::quantize_act_rows(act_f32.data(), n_cols, c.n_tok, act.data());

  const Q8Matrix m{weights.data(), weights.data() + weights.size(), row_bytes, c.n_blocks, c.type};
  const ActQ8Rows rows{act.data(), act_row, n_cols};
  int sensitive = 0;
  LoadBounds bounds{&weights, &act};
  for (int r = 0; r < c.n_rows; ++r) {
    std::vector<std::vector<float>> lanes(kTok, std::vector<float>(c.team));
    for (int lane = 0; lane < c.team; ++lane) {
      float acc[kTok] = {};
      kernels::cuda::q8_row_dot<kTok>(m, r, rows, c.n_tok, lane, c.team, acc);
      for (int t = 0; t < kTok; ++t) lanes[t][lane] = acc[t];
    }
    const int64_t n_pieces = c.n_blocks * layout.pieces;
    for (int t = 0; t < kTok; ++t) {
      if (t >= c.n_tok) {
        for (int lane = 0; lane < c.team; ++lane) EXPECT_EQ(lanes[t][lane], 0.0f);
        continue;
      }
      const std::vector<double> a = dequantize_act_row(act.data(), n_cols, t);
      double truth = 0, magnitude = 0, swapped = 0;
      for (int64_t i = 0; i < n_cols; ++i) {
        truth += x[r][i] * a[i];
        magnitude += (std::fabs(x[r][i]) + std::fabs(zero[r][i])) * std::fabs(a[i]);
        // Activation block 0 and the last one exchanged.
        const int64_t last = n_cols / 32 - 1, blk = i / 32;
        const int64_t j = blk == 0 ? last * 32 + i % 32 : blk == last ? i % 32 : i;
        swapped += x[r][i] * a[j];
      }
      // f32 rounding: each piece's terms carry a few roundings of at most the magnitude of its
      // products before they cancel (the offset terms included, hence |x| + |zero-quant value|),
      // and the lane and team sums at most one rounding per piece: n_pieces + 16 units of 2^-24
      // of Σ (|x| + |x₀|)·|a| bounds the whole.
      const double tolerance = (static_cast<double>(n_pieces) + 16.0) * 0x1p-24 * magnitude;
      const float got = team_sum(lanes[t]);
      EXPECT_LE(std::fabs(got - truth), tolerance)
          << describe(c) << " row " << r << " token " << t << ": " << got << " vs " << truth;
      if (std::fabs(swapped - truth) > tolerance) ++sensitive;
    }
  }
  return sensitive;
}

RowCase random_case(DType type, std::mt19937& rng) {
  const kernels::cuda::Q8Layout layout = kernels::cuda::q8_layout(type);
  const int max_blocks = layout.block_values == 256 ? 12 : 96;
  RowCase c;
  c.type = type;
  c.n_blocks = std::uniform_int_distribution<int>(2, max_blocks)(rng);
  c.n_rows = 2 * std::uniform_int_distribution<int>(0, 4)(rng) + 1;
  // Padded rows keep the blocks' alignment; the formats read through windows get pads of every
  // size they allow, the others whole 16 bytes.
  c.row_pad = static_cast<size_t>(std::uniform_int_distribution<int>(0, 3)(rng)) *
              static_cast<size_t>(layout.block_align);
  c.n_tok = std::uniform_int_distribution<int>(1, kernels::kActQ8MaxTokens)(rng);
  c.team = 1 << std::uniform_int_distribution<int>(0, 7)(rng);
  return c;
}

TEST(CudaLanes, LayoutsMatchTheBlockFormats) {
  for (DType type : kQ8Types) {
    ASSERT_TRUE(kernels::cuda::has_q8_lanes(type)) << tensor::dtype_name(type);
    const kernels::cuda::Q8Layout layout = kernels::cuda::q8_layout(type);
    EXPECT_EQ(tensor::row_bytes(type, layout.block_values), layout.block_bytes)
        << tensor::dtype_name(type);
    EXPECT_EQ(layout.block_bytes % layout.block_align, 0) << tensor::dtype_name(type);
  }
  EXPECT_FALSE(kernels::cuda::has_q8_lanes(DType::kF16));
  EXPECT_FALSE(kernels::cuda::has_q8_lanes(DType::kQ2_K));
  EXPECT_EQ(kernels::cuda::q8_layout(DType::kF32).pieces, 0);
}

class CudaLanesRows : public ::testing::TestWithParam<DType> {};

TEST_P(CudaLanesRows, TeamSumsEqualTheDequantizedDot) {
  const DType type = GetParam();
  std::mt19937 rng(100 + static_cast<int>(type));
  int sensitive = 0, results = 0;
  for (int seed = 0; seed < 24; ++seed) {
    RowCase c = random_case(type, rng);
    if (seed % 2 == 0) {
      sensitive += check_rows<kernels::kActQ8MaxTokens>(c, rng);
    } else {
      c.n_tok = 1;
      sensitive += check_rows<1>(c, rng);
    }
    results += c.n_rows * c.n_tok;
    if (::testing::Test::HasFailure()) return;
  }
  // The tolerance is tight enough to see an activation block read in the wrong place.
  EXPECT_GE(sensitive, results * 9 / 10) << sensitive << " of " << results;
}

// The rows next to the end of the weights read their last chunks guarded; those far from it read
// the chunk after their bytes: both must stay inside the tensor, whatever its last row's alignment.
TEST_P(CudaLanesRows, RowsAtTheEndOfTheWeightsStayInside) {
  const DType type = GetParam();
  std::mt19937 rng(200 + static_cast<int>(type));
  for (int n_blocks = 1; n_blocks <= 9; ++n_blocks) {
    RowCase c{type, n_blocks, 3, 0, 2, 8};
    check_rows<2>(c, rng);
    if (::testing::Test::HasFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CudaLanesRows, ::testing::ValuesIn(kQ8Types),
                         [](const ::testing::TestParamInfo<DType>& param) {
                           return std::string(tensor::dtype_name(param.param));
                         });

// --- Epilogues ---------------------------------------------------------------------------------

TEST(CudaLanes, GluActivationsAreTheReferenceOnes) {
  std::mt19937 rng(6);
  const std::vector<float> xs = random_floats(20000, rng, 0.0f, 4.0f);
  for (float x : xs) {
    ASSERT_EQ(kernels::cuda::glu_activation(kernels::GluActivation::kGelu, x),
              kernels::ref::gelu(x))
        << x;
    ASSERT_EQ(kernels::cuda::glu_activation(kernels::GluActivation::kSilu, x),
              kernels::ref::silu(x))
        << x;
  }
}

// A warp quantizing one block (one value per lane, the magnitude and the quant sum reduced across
// lanes in butterfly order) writes quantize_act_block's bytes.
TEST(CudaLanes, WarpQuantizationWritesTheBlockFormat) {
  std::mt19937 rng(7);
  for (int i = 0; i < 3000; ++i) {
    std::vector<float> x = random_floats(32, rng, 0.0f, std::exp2(static_cast<float>(i % 20 - 10)));
    if (i % 7 == 0) x[i % 32] = 0.0f;
    if (i % 11 == 0) std::fill(x.begin(), x.end(), 0.0f);
    float amax[32];
    for (int l = 0; l < 32; ++l) amax[l] = kernels::cuda::act_q8_lane_magnitude(x[l]);
    for (int offset = 16; offset > 0; offset /= 2) {
      float next[32];
      for (int l = 0; l < 32; ++l) next[l] = std::fmax(amax[l], amax[l ^ offset]);
      std::copy(next, next + 32, amax);
    }
    int8_t q[32];
    int sum = 0;
    for (int l = 0; l < 32; ++l) {
      const int v = kernels::act_q8_quant(x[l], amax[l]);
      q[l] = static_cast<int8_t>(v);
      sum += v;
    }
    float scales[2];
    kernels::cuda::act_q8_block_scales(amax[0], sum, scales);
    int8_t want_q[32];
    float want_scales[2];
    kernels::quantize_act_block(x.data(), want_q, want_scales);
    ASSERT_EQ(std::memcmp(q, want_q, 32), 0) << "block " << i;
    ASSERT_EQ(std::memcmp(scales, want_scales, sizeof(scales)), 0) << "block " << i;
  }
}

}  // namespace
