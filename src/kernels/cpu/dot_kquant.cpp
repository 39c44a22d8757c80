// Dot kernels of the 256-value super-block types (Q4_K, Q5_K, Q6_K, IQ4_XS) against Q8_K
// activations, whose per-16 sums (bsums) make the Q4_K / Q5_K min term and the Q6_K −32 offset one
// small product per super-block. Levels: portable scalar, AVX2, and AVX-512 VNNI (the AVX2 code
// with vpdpwssd, same integers; dot_kquant_x86.inc). AVX-512 without VNNI has no kernels here:
// dot_kernel() steps down to AVX2.
//
// Each weight super-block is read once for a tile of tokens (4 on AVX2, 8 with AVX-512's 32
// registers), one 32-quant chunk at a time; every token keeps its own accumulators, updated in the
// same order whatever the tile, so its result never depends on the batch.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "kernels/cpu/dot.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/tiles.h"
#include "tensor/blocks.h"
#include "tensor/fp16.h"
#include "tensor/quantize.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace kernels::cpu::detail {
namespace {

using tensor::BlockIQ4_XS;
using tensor::BlockQ4_K;
using tensor::BlockQ5_K;
using tensor::BlockQ6_K;
using tensor::BlockQ8_K;
using tensor::f16_to_f32;

void to_q8_k(const float* x, void* out, int64_t n) {
  tensor::quantize_row_q8_k(x, static_cast<BlockQ8_K*>(out), n);
}

// The 6-bit scale and min of sub-block j of a Q4_K / Q5_K super-block (layout in blocks.h).
void scale_min(const uint8_t* scales, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = scales[j] & 63;
    *m = scales[j + 4] & 63;
  } else {
    *sc = (scales[j + 4] & 0x0F) | ((scales[j - 4] >> 6) << 4);
    *m = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
  }
}

// --- Portable scalar kernels ---------------------------------------------------------------------

// Q4_K / Q5_K: the 256 unsigned quants in value order, and the 8 scales and mins.
struct ScalarQ45Unpacked {
  uint8_t q[256];
  int sc[8], m[8];
  float d, dmin;
};

void unpack_scales(const uint8_t* scales, ScalarQ45Unpacked& u) {
  for (int j = 0; j < 8; ++j) scale_min(scales, j, &u.sc[j], &u.m[j]);
}

struct ScalarQ4K {
  using Block = BlockQ4_K;
  using Unpacked = ScalarQ45Unpacked;
  static void unpack(const Block& b, Unpacked& u) {
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        u.q[64 * c + l] = b.qs[32 * c + l] & 0x0F;
        u.q[64 * c + 32 + l] = b.qs[32 * c + l] >> 4;
      }
    }
    unpack_scales(b.scales, u);
    u.d = f16_to_f32(b.d);
    u.dmin = f16_to_f32(b.dmin);
  }
  static float token(const Unpacked& u, const BlockQ8_K& y);
};

struct ScalarQ5K {
  using Block = BlockQ5_K;
  using Unpacked = ScalarQ45Unpacked;
  static void unpack(const Block& b, Unpacked& u) {
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        u.q[64 * c + l] = (b.qs[32 * c + l] & 0x0F) | ((b.qh[l] >> (2 * c)) & 1) << 4;
        u.q[64 * c + 32 + l] = (b.qs[32 * c + l] >> 4) | ((b.qh[l] >> (2 * c + 1)) & 1) << 4;
      }
    }
    unpack_scales(b.scales, u);
    u.d = f16_to_f32(b.d);
    u.dmin = f16_to_f32(b.dmin);
  }
  static float token(const Unpacked& u, const BlockQ8_K& y) { return ScalarQ4K::token(u, y); }
};

// d·y.d · Σ_j sc_j Σ q·y − dmin·y.d · Σ_j m_j · (the 32 activations of sub-block j summed).
float ScalarQ4K::token(const Unpacked& u, const BlockQ8_K& y) {
  int sumi = 0, mins = 0;
  for (int j = 0; j < 8; ++j) {
    int dot = 0;
    for (int i = 32 * j; i < 32 * j + 32; ++i) dot += u.q[i] * y.qs[i];
    sumi += u.sc[j] * dot;
    mins += u.m[j] * (y.bsums[2 * j] + y.bsums[2 * j + 1]);
  }
  return u.d * y.d * static_cast<float>(sumi) - u.dmin * y.d * static_cast<float>(mins);
}

// Q6_K: the 256 unsigned quants 0..63 in value order (layout in blocks.h) and the 16 scales.
struct ScalarQ6K {
  using Block = BlockQ6_K;
  struct Unpacked {
    uint8_t q[256];
    int sc[16];
    float d;
  };
  static void unpack(const Block& b, Unpacked& u) {
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = b.ql + 64 * h;
      const uint8_t* qh = b.qh + 32 * h;
      uint8_t* q = u.q + 128 * h;
      for (int l = 0; l < 32; ++l) {
        q[l] = (ql[l] & 0x0F) | (qh[l] & 3) << 4;
        q[l + 32] = (ql[l + 32] & 0x0F) | ((qh[l] >> 2) & 3) << 4;
        q[l + 64] = (ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4;
        q[l + 96] = (ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4;
      }
    }
    for (int s = 0; s < 16; ++s) u.sc[s] = b.scales[s];
    u.d = f16_to_f32(b.d);
  }
  // d·y.d · Σ_s sc_s Σ (q − 32)·y, the −32 applied once through the bsums.
  static float token(const Unpacked& u, const BlockQ8_K& y) {
    int sumi = 0;
    for (int s = 0; s < 16; ++s) {
      int dot = 0;
      for (int i = 16 * s; i < 16 * s + 16; ++i) dot += u.q[i] * y.qs[i];
      sumi += u.sc[s] * (dot - 32 * y.bsums[s]);
    }
    return u.d * y.d * static_cast<float>(sumi);
  }
};

// IQ4_XS: the 256 signed levels in value order and the 8 signed scales (ls − 32).
struct ScalarIq4Xs {
  using Block = BlockIQ4_XS;
  struct Unpacked {
    int8_t q[256];
    int sc[8];
    float d;
  };
  static void unpack(const Block& b, Unpacked& u) {
    for (int sub = 0; sub < 8; ++sub) {
      // Low nibbles are values 0..15 of the sub-block, high nibbles 16..31.
      const uint8_t* qs = b.qs + 16 * sub;
      for (int j = 0; j < 16; ++j) {
        u.q[32 * sub + j] = tensor::kIq4NlLevels[qs[j] & 0x0F];
        u.q[32 * sub + 16 + j] = tensor::kIq4NlLevels[qs[j] >> 4];
      }
      const int low = (b.scales_l[sub / 2] >> (4 * (sub % 2))) & 0x0F;
      const int high = (b.scales_h >> (2 * sub)) & 3;
      u.sc[sub] = (low | high << 4) - 32;
    }
    u.d = f16_to_f32(b.d);
  }
  static float token(const Unpacked& u, const BlockQ8_K& y) {
    int sumi = 0;
    for (int sub = 0; sub < 8; ++sub) {
      int dot = 0;
      for (int i = 32 * sub; i < 32 * sub + 32; ++i) dot += u.q[i] * y.qs[i];
      sumi += u.sc[sub] * dot;
    }
    return u.d * y.d * static_cast<float>(sumi);
  }
};

// Each weight super-block unpacked once for a tile of tokens; every token adds the blocks'
// contributions in block order, whatever the tile.
template <class Kernel>
void scalar_dot(int64_t n, const void* w, const void* x, size_t x_stride, int n_tokens, float* out,
                size_t out_stride) {
  constexpr int kTile = 4;
  const auto* wb = static_cast<const typename Kernel::Block*>(w);
  for (int t0 = 0; t0 < n_tokens; t0 += kTile) {
    const int nt = std::min(kTile, n_tokens - t0);
    float sum[kTile] = {};
    for (int64_t b = 0; b < n / 256; ++b) {
      typename Kernel::Unpacked u;
      Kernel::unpack(wb[b], u);
      for (int i = 0; i < nt; ++i) {
        const auto* y = reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(x) +
                                                           (t0 + i) * x_stride);
        sum[i] += Kernel::token(u, y[b]);
      }
    }
    for (int i = 0; i < nt; ++i) out[(t0 + i) * out_stride] = sum[i];
  }
}

DotKernel scalar_kernel(DType weight) {
  switch (weight) {
    case DType::kQ4_K:
      return {DType::kQ8_K, to_q8_k, scalar_dot<ScalarQ4K>};
    case DType::kQ5_K:
      return {DType::kQ8_K, to_q8_k, scalar_dot<ScalarQ5K>};
    case DType::kQ6_K:
      return {DType::kQ8_K, to_q8_k, scalar_dot<ScalarQ6K>};
    case DType::kIQ4_XS:
      return {DType::kQ8_K, to_q8_k, scalar_dot<ScalarIq4Xs>};
    default:
      return {};
  }
}

// --- x86 SIMD kernels ----------------------------------------------------------------------------

#if defined(__x86_64__)
using simd::RowPrefetch;

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
namespace avx2 {
#include "kernels/cpu/dot_kquant_x86.inc"

DotKernel kernel(DType weight) {
  switch (weight) {
    case DType::kQ4_K:
      return {DType::kQ8_K, to_q8_k, dot<Q45<false, BlockQ4_K>>};
    case DType::kQ5_K:
      return {DType::kQ8_K, to_q8_k, dot<Q45<true, BlockQ5_K>>};
    case DType::kQ6_K:
      return {DType::kQ8_K, to_q8_k, dot<Q6>};
    case DType::kIQ4_XS:
      return {DType::kQ8_K, to_q8_k, dot<Iq4Xs>};
    default:
      return {};
  }
}
}  // namespace avx2
#pragma GCC pop_options

HR_AVX512_VNNI_BEGIN
namespace avx512 {
#include "kernels/cpu/dot_kquant_avx512.inc"

DotKernel kernel(DType weight) {
  switch (weight) {
    case DType::kQ4_K:
      return {DType::kQ8_K, avx512::to_q8_k, dot<Q45x2<false, BlockQ4_K>>};
    case DType::kQ5_K:
      return {DType::kQ8_K, avx512::to_q8_k, dot<Q45x2<true, BlockQ5_K>>};
    case DType::kQ6_K:
      return {DType::kQ8_K, avx512::to_q8_k, dot<Q6x2>};
    case DType::kIQ4_XS:
      return {DType::kQ8_K, avx512::to_q8_k, dot<Iq4Xsx2>};
    default:
      return {};
  }
}
}  // namespace avx512
HR_AVX512_VNNI_END
#endif

}  // namespace

DotKernel dot_kernel_kquant(DType weight, Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return scalar_kernel(weight);
#if defined(__x86_64__)
    case Isa::kAvx2:
      return avx2::kernel(weight);
    case Isa::kAvx512Vnni:
      return avx512::kernel(weight);
#endif
    default:
      return {};  // AVX-512 without VNNI: the AVX2 kernels (dot_kernel() steps down)
  }
}

}  // namespace kernels::cpu::detail
