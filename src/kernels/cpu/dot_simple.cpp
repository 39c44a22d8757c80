// Dot kernels of the 32-value block types (against Q8_0 / Q8_1 activations) and of the float
// types (against f32 activations), at the portable scalar level and with x86 SIMD.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <type_traits>

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

using tensor::f16_to_f32;

// --- Activation partners ------------------------------------------------------------------------

void to_f32(const float* x, void* out, int64_t n) {
  std::memcpy(out, x, n * sizeof(float));
}

void to_q8_0(const float* x, void* out, int64_t n) {
  tensor::quantize_row_q8_0(x, static_cast<tensor::BlockQ8_0*>(out), n);
}

// Q8_1: Q8_0's rounding plus s = d · Σq, which the offset formats' min term needs.
void q8_1_block(const float* x, tensor::BlockQ8_1& out) {
  tensor::BlockQ8_0 q;
  tensor::quantize_row_q8_0(x, &q, 32);
  int sum = 0;
  for (int j = 0; j < 32; ++j) sum += q.qs[j];
  out.d = q.d;
  out.s = tensor::f32_to_f16(f16_to_f32(q.d) * static_cast<float>(sum));
  std::memcpy(out.qs, q.qs, 32);
}

void to_q8_1(const float* x, void* out, int64_t n) {
  auto* blocks = static_cast<tensor::BlockQ8_1*>(out);
  for (int64_t b = 0; b < n / 32; ++b) q8_1_block(x + b * 32, blocks[b]);
}

// --- Portable scalar kernels ---------------------------------------------------------------------

// One block as 32 integers (q − offset for the signed formats, q for the offset formats).
void unpack(const tensor::BlockQ8_0& b, int q[32]) {
  for (int j = 0; j < 32; ++j) q[j] = b.qs[j];
}
void unpack(const tensor::BlockQ4_0& b, int q[32]) {
  for (int j = 0; j < 16; ++j) {
    q[j] = (b.qs[j] & 0x0F) - 8;
    q[j + 16] = (b.qs[j] >> 4) - 8;
  }
}
int fifth_bit(const uint8_t qh[4], int j) {
  return (qh[j / 8] >> (j % 8)) & 1;
}
void unpack(const tensor::BlockQ5_0& b, int q[32]) {
  for (int j = 0; j < 16; ++j) {
    q[j] = ((b.qs[j] & 0x0F) | fifth_bit(b.qh, j) << 4) - 16;
    q[j + 16] = ((b.qs[j] >> 4) | fifth_bit(b.qh, j + 16) << 4) - 16;
  }
}
void unpack(const tensor::BlockQ4_1& b, int q[32]) {
  for (int j = 0; j < 16; ++j) {
    q[j] = b.qs[j] & 0x0F;
    q[j + 16] = b.qs[j] >> 4;
  }
}
void unpack(const tensor::BlockQ5_1& b, int q[32]) {
  for (int j = 0; j < 16; ++j) {
    q[j] = (b.qs[j] & 0x0F) | fifth_bit(b.qh, j) << 4;
    q[j + 16] = (b.qs[j] >> 4) | fifth_bit(b.qh, j + 16) << 4;
  }
}

template <class Block, bool kOffset>
void scalar_q(int64_t n, const void* w, const void* x, size_t x_stride, int n_tokens, float* out,
              size_t out_stride) {
  using XBlock = std::conditional_t<kOffset, tensor::BlockQ8_1, tensor::BlockQ8_0>;
  const auto* wb = static_cast<const Block*>(w);
  for (int t = 0; t < n_tokens; ++t) {
    const auto* xb = reinterpret_cast<const XBlock*>(static_cast<const uint8_t*>(x) + t * x_stride);
    float sum = 0.0f;
    for (int64_t b = 0; b < n / 32; ++b) {
      int q[32];
      unpack(wb[b], q);
      int dot = 0;
      for (int j = 0; j < 32; ++j) dot += q[j] * xb[b].qs[j];
      sum += f16_to_f32(wb[b].d) * f16_to_f32(xb[b].d) * static_cast<float>(dot);
      if constexpr (kOffset) sum += f16_to_f32(wb[b].m) * f16_to_f32(xb[b].s);
    }
    out[t * out_stride] = sum;
  }
}

template <DType kType>
void scalar_float(int64_t n, const void* w, const void* x, size_t x_stride, int n_tokens,
                  float* out, size_t out_stride) {
  for (int t = 0; t < n_tokens; ++t) {
    const auto* xr = reinterpret_cast<const float*>(static_cast<const uint8_t*>(x) + t * x_stride);
    float sum = 0.0f;
    for (int64_t c = 0; c < n; ++c) {
      float wc;
      if constexpr (kType == DType::kF32) {
        wc = static_cast<const float*>(w)[c];
      } else if constexpr (kType == DType::kF16) {
        wc = f16_to_f32(static_cast<const uint16_t*>(w)[c]);
      } else {
        wc = std::bit_cast<float>(static_cast<uint32_t>(static_cast<const uint16_t*>(w)[c]) << 16);
      }
      sum += wc * xr[c];
    }
    out[t * out_stride] = sum;
  }
}

DotKernel scalar_kernel(DType weight) {
  switch (weight) {
    case DType::kF32:
      return {DType::kF32, to_f32, scalar_float<DType::kF32>};
    case DType::kF16:
      return {DType::kF32, to_f32, scalar_float<DType::kF16>};
    case DType::kBF16:
      return {DType::kF32, to_f32, scalar_float<DType::kBF16>};
    case DType::kQ8_0:
      return {DType::kQ8_0, to_q8_0, scalar_q<tensor::BlockQ8_0, false>};
    case DType::kQ4_0:
      return {DType::kQ8_0, to_q8_0, scalar_q<tensor::BlockQ4_0, false>};
    case DType::kQ5_0:
      return {DType::kQ8_0, to_q8_0, scalar_q<tensor::BlockQ5_0, false>};
    case DType::kQ4_1:
      return {DType::kQ8_1, to_q8_1, scalar_q<tensor::BlockQ4_1, true>};
    case DType::kQ5_1:
      return {DType::kQ8_1, to_q8_1, scalar_q<tensor::BlockQ5_1, true>};
    default:
      return {};
  }
}

// --- x86 SIMD kernels ----------------------------------------------------------------------------

#if defined(__x86_64__)
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
namespace avx2 {
#include "kernels/cpu/dot_simple_x86.inc"

DotKernel kernel(DType weight) {
  switch (weight) {
    case DType::kF32:
      return {DType::kF32, to_f32, dot_float<F32>};
    case DType::kF16:
      return {DType::kF32, to_f32, dot_float<F16>};
    case DType::kBF16:
      return {DType::kF32, to_f32, dot_float<BF16>};
    case DType::kQ8_0:
      return {DType::kQ8_0, to_q8_0, dot_q<Q8_0>, dot_q_rows<Q8_0>};
    case DType::kQ4_0:
      return {DType::kQ8_0, to_q8_0, dot_q<Q4_0>, dot_q_rows<Q4_0>};
    case DType::kQ5_0:
      return {DType::kQ8_0, to_q8_0, dot_q<Q5_0>, dot_q_rows<Q5_0>};
    case DType::kQ4_1:
      return {DType::kQ8_1, to_q8_1, dot_q<Q4_1>, dot_q_rows<Q4_1>};
    case DType::kQ5_1:
      return {DType::kQ8_1, to_q8_1, dot_q<Q5_1>, dot_q_rows<Q5_1>};
    default:
      return {};
  }
}
}  // namespace avx2
#pragma GCC pop_options

HR_AVX512_VNNI_BEGIN
namespace avx512 {
#include "kernels/cpu/dot_simple_avx512.inc"

// Every type in 512-bit registers; the activation converters are the AVX2 level's.
DotKernel kernel(DType weight) {
  switch (weight) {
    case DType::kF32:
      return {DType::kF32, to_f32, dot_float<F32x16>, dot_float_rows<F32x16>};
    case DType::kF16:
      return {DType::kF32, to_f32, dot_float<F16x16>, dot_float_rows<F16x16>};
    case DType::kBF16:
      return {DType::kF32, to_f32, dot_float<BF16x16>, dot_float_rows<BF16x16>};
    case DType::kQ8_0:
      return {DType::kQ8_0, avx2::to_q8_0, dot_q<Q8_0x2>, dot_q_rows<Q8_0x2>};
    case DType::kQ4_0:
      return {DType::kQ8_0, avx2::to_q8_0, dot_q<Q4_0x2>, dot_q_rows<Q4_0x2>};
    case DType::kQ5_0:
      return {DType::kQ8_0, avx2::to_q8_0, dot_q<Q5_0x2>, dot_q_rows<Q5_0x2>};
    case DType::kQ4_1:
      return {DType::kQ8_1, avx2::to_q8_1, dot_q<Q4_1x2>, dot_q_rows<Q4_1x2>};
    case DType::kQ5_1:
      return {DType::kQ8_1, avx2::to_q8_1, dot_q<Q5_1x2>, dot_q_rows<Q5_1x2>};
    default:
      return {};
  }
}
}  // namespace avx512
HR_AVX512_VNNI_END
#endif

}  // namespace

DotKernel dot_kernel_simple(DType weight, Isa isa) {
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
