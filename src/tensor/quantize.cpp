// Reference quantizers for the 16-bit floats and the 32-value block types (plain and
// importance-weighted), and the dispatcher. The K-quants and Q8_K are in quantize_k.cpp, the
// codebook, ternary and FP4 types in quantize_nonlinear.cpp.
#include "tensor/quantize.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "tensor/fp16.h"
#include "tensor/quantize_search.h"

namespace tensor {
namespace {

// The value of largest magnitude in a block, with its sign (the first one on ties). Symmetric
// types map it to the most negative level, which has one step more room than the positive side.
float signed_absmax(const float* x, int n) {
  float amax = 0.0f;
  float max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

// float → int, truncating toward zero, as the reference's C casts do. A block of subnormal values
// makes 1 / d overflow to inf and the products inf or nan, where a C++ cast is undefined; those
// give 0, which is also what the reference's cast yields on x86 (and such a block's f16 scale
// rounds to 0, so its levels decode to 0 whatever they are).
int truncate_to_int(float v) {
  return v > -2147483648.0f && v < 2147483648.0f ? static_cast<int>(v) : 0;
}

void min_max(const float* x, int n, float* min, float* max) {
  *min = FLT_MAX;
  *max = -FLT_MAX;
  for (int j = 0; j < n; ++j) {
    if (x[j] < *min) *min = x[j];
    if (x[j] > *max) *max = x[j];
  }
}

void store_qh(uint32_t qh, uint8_t (&out)[4]) {
  for (int k = 0; k < 4; ++k) out[k] = static_cast<uint8_t>(qh >> (8 * k));
}

// The row's mean square: the importance-weighted 32-value quantizers weigh each value by
// importance · sqrt(σ² + x²), σ² taken over the whole row.
float row_sigma2(const float* x, int64_t n) {
  float sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += x[j] * x[j];
  return sum / static_cast<float>(n);
}

void importance_weights(const float* importance, const float* x, float sigma2, float* weights) {
  for (int j = 0; j < 32; ++j) weights[j] = importance[j] * std::sqrt(sigma2 + x[j] * x[j]);
}

// Symmetric 32-value blocks with importance (Q4_0: nmax 8, Q5_0: nmax 16): a weighted fit of the
// scale; `store` packs the levels (0..2·nmax-1) and the scale.
template <class Block, class Store>
void quantize_symmetric_weighted(const float* src, Block* dst, int64_t n, const float* importance,
                                 int nmax, Store store) {
  const float sigma2 = row_sigma2(src, n);
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* x = src + 32 * b;
    float weights[32];
    int8_t levels[32];
    importance_weights(importance + 32 * b, x, sigma2, weights);
    const float d = search::fit_symmetric(32, nmax, x, weights, levels);
    dst[b].d = f32_to_f16(d);
    store(levels, dst[b]);
  }
}

// 32-value blocks with a min and importance (Q4_1: nmax 15, Q5_1: nmax 31).
template <class Block, class Store>
void quantize_scale_min_weighted(const float* src, Block* dst, int64_t n, const float* importance,
                                 int nmax, Store store) {
  const float sigma2 = row_sigma2(src, n);
  const search::ScaleMinSearch fit{.nmax = nmax, .rmin = -0.9f, .rdelta = 0.05f, .nstep = 36};
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* x = src + 32 * b;
    float weights[32];
    uint8_t levels[32];
    importance_weights(importance + 32 * b, x, sigma2, weights);
    float min;
    const float d = search::fit_scale_min(fit, 32, x, weights, levels, &min);
    dst[b].d = f32_to_f16(d);
    dst[b].m = f32_to_f16(-min);
    store(levels, dst[b]);
  }
}

template <class Level>
void pack_4bit(const Level* levels, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>(levels[j] | levels[j + 16] << 4);
}

// Low nibbles as 4-bit blocks, the fifth bits of values j and j + 16 at bits j and j + 16 of qh.
template <class Level>
void pack_5bit(const Level* levels, uint8_t* qs, uint8_t (&qh_bytes)[4]) {
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    qs[j] = static_cast<uint8_t>((levels[j] & 0x0f) | (levels[j + 16] & 0x0f) << 4);
    qh |= static_cast<uint32_t>((levels[j] >> 4) & 1) << j;
    qh |= static_cast<uint32_t>((levels[j + 16] >> 4) & 1) << (j + 16);
  }
  store_qh(qh, qh_bytes);
}

void quantize_row_f32(const float* src, float* dst, int64_t n) {
  if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

// Behind one signature: encoders that take importance, and those that have no use for it (their
// reference quantizers ignore it too).
template <class Block, void (*Encode)(const float*, Block*, int64_t, const float*)>
void encode_weighted(const float* src, void* dst, int64_t n, const float* importance) {
  Encode(src, static_cast<Block*>(dst), n, importance);
}
template <class Block, void (*Encode)(const float*, Block*, int64_t)>
void encode_plain(const float* src, void* dst, int64_t n, const float*) {
  Encode(src, static_cast<Block*>(dst), n);
}

using QuantizeRowFn = void (*)(const float* src, void* dst, int64_t n, const float* importance);

QuantizeRowFn find_quantizer(DType type) {
  switch (type) {
    case DType::kF32:
      return encode_plain<float, quantize_row_f32>;
    case DType::kF16:
      return encode_plain<uint16_t, quantize_row_f16>;
    case DType::kBF16:
      return encode_plain<uint16_t, quantize_row_bf16>;
    case DType::kQ4_0:
      return encode_weighted<BlockQ4_0, quantize_row_q4_0>;
    case DType::kQ4_1:
      return encode_weighted<BlockQ4_1, quantize_row_q4_1>;
    case DType::kQ5_0:
      return encode_weighted<BlockQ5_0, quantize_row_q5_0>;
    case DType::kQ5_1:
      return encode_weighted<BlockQ5_1, quantize_row_q5_1>;
    case DType::kQ8_0:
      return encode_plain<BlockQ8_0, quantize_row_q8_0>;
    case DType::kQ2_K:
      return encode_weighted<BlockQ2_K, quantize_row_q2_k>;
    case DType::kQ3_K:
      return encode_weighted<BlockQ3_K, quantize_row_q3_k>;
    case DType::kQ4_K:
      return encode_weighted<BlockQ4_K, quantize_row_q4_k>;
    case DType::kQ5_K:
      return encode_weighted<BlockQ5_K, quantize_row_q5_k>;
    case DType::kQ6_K:
      return encode_weighted<BlockQ6_K, quantize_row_q6_k>;
    case DType::kQ8_K:
      return encode_plain<BlockQ8_K, quantize_row_q8_k>;
    case DType::kIQ4_NL:
      return encode_weighted<BlockIQ4_NL, quantize_row_iq4_nl>;
    case DType::kIQ4_XS:
      return encode_weighted<BlockIQ4_XS, quantize_row_iq4_xs>;
    case DType::kTQ1_0:
      return encode_plain<BlockTQ1_0, quantize_row_tq1_0>;
    case DType::kTQ2_0:
      return encode_plain<BlockTQ2_0, quantize_row_tq2_0>;
    case DType::kMXFP4:
      return encode_plain<BlockMXFP4, quantize_row_mxfp4>;
    case DType::kNVFP4:
      return encode_plain<BlockNVFP4, quantize_row_nvfp4>;
    default:
      return nullptr;
  }
}

}  // namespace

void quantize_row_f16(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_f16(src[i]);
}

void quantize_row_bf16(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
}

void quantize_row_q4_0(const float* src, BlockQ4_0* dst, int64_t n, const float* importance) {
  if (importance) {
    return quantize_symmetric_weighted(
        src, dst, n, importance, 8,
        [](const int8_t* l, BlockQ4_0& block) { pack_4bit(l, block.qs); });
  }
  for (int64_t b = 0; b < n / BlockQ4_0::kValues; ++b, src += BlockQ4_0::kValues) {
    // The extreme value becomes level 0, i.e. q - 8 = -8.
    const float d = signed_absmax(src, BlockQ4_0::kValues) / -8;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = f32_to_f16(d);
    for (int j = 0; j < 16; ++j) {
      // Adding 8.5 then truncating rounds half up; the extreme value lands on 16 and is clamped.
      const int q0 = std::min(15, truncate_to_int(src[j] * id + 8.5f));
      const int q1 = std::min(15, truncate_to_int(src[j + 16] * id + 8.5f));
      dst[b].qs[j] = static_cast<uint8_t>(q0 | q1 << 4);
    }
  }
}

void quantize_row_q4_1(const float* src, BlockQ4_1* dst, int64_t n, const float* importance) {
  if (importance) {
    return quantize_scale_min_weighted(
        src, dst, n, importance, 15,
        [](const uint8_t* l, BlockQ4_1& block) { pack_4bit(l, block.qs); });
  }
  for (int64_t b = 0; b < n / BlockQ4_1::kValues; ++b, src += BlockQ4_1::kValues) {
    float min, max;
    min_max(src, BlockQ4_1::kValues, &min, &max);
    const float d = (max - min) / 15;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = f32_to_f16(d);
    dst[b].m = f32_to_f16(min);
    for (int j = 0; j < 16; ++j) {
      const int q0 = std::min(15, truncate_to_int((src[j] - min) * id + 0.5f));
      const int q1 = std::min(15, truncate_to_int((src[j + 16] - min) * id + 0.5f));
      dst[b].qs[j] = static_cast<uint8_t>(q0 | q1 << 4);
    }
  }
}

void quantize_row_q5_0(const float* src, BlockQ5_0* dst, int64_t n, const float* importance) {
  if (importance) {
    return quantize_symmetric_weighted(
        src, dst, n, importance, 16,
        [](const int8_t* l, BlockQ5_0& block) { pack_5bit(l, block.qs, block.qh); });
  }
  for (int64_t b = 0; b < n / BlockQ5_0::kValues; ++b, src += BlockQ5_0::kValues) {
    const float d = signed_absmax(src, BlockQ5_0::kValues) / -16;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = f32_to_f16(d);
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      const int q0 = std::min(31, truncate_to_int(src[j] * id + 16.5f));
      const int q1 = std::min(31, truncate_to_int(src[j + 16] * id + 16.5f));
      dst[b].qs[j] = static_cast<uint8_t>((q0 & 0x0f) | (q1 & 0x0f) << 4);
      qh |= static_cast<uint32_t>(q0 >> 4) << j;
      qh |= static_cast<uint32_t>(q1 >> 4) << (j + 16);
    }
    store_qh(qh, dst[b].qh);
  }
}

void quantize_row_q5_1(const float* src, BlockQ5_1* dst, int64_t n, const float* importance) {
  if (importance) {
    return quantize_scale_min_weighted(
        src, dst, n, importance, 31,
        [](const uint8_t* l, BlockQ5_1& block) { pack_5bit(l, block.qs, block.qh); });
  }
  for (int64_t b = 0; b < n / BlockQ5_1::kValues; ++b, src += BlockQ5_1::kValues) {
    float min, max;
    min_max(src, BlockQ5_1::kValues, &min, &max);
    const float d = (max - min) / 31;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = f32_to_f16(d);
    dst[b].m = f32_to_f16(min);
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      // (max - min) * id rounds to at most 31.5 - ε, so the clamp never changes a result; it
      // only keeps a stray 32 from spilling into the next bit.
      const int q0 = std::min(31, truncate_to_int((src[j] - min) * id + 0.5f));
      const int q1 = std::min(31, truncate_to_int((src[j + 16] - min) * id + 0.5f));
      dst[b].qs[j] = static_cast<uint8_t>((q0 & 0x0f) | (q1 & 0x0f) << 4);
      qh |= static_cast<uint32_t>(q0 >> 4) << j;
      qh |= static_cast<uint32_t>(q1 >> 4) << (j + 16);
    }
    store_qh(qh, dst[b].qh);
  }
}

void quantize_row_q8_0(const float* src, BlockQ8_0* dst, int64_t n) {
  for (int64_t b = 0; b < n / BlockQ8_0::kValues; ++b, src += BlockQ8_0::kValues) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(src[j]));
    const float d = amax / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = f32_to_f16(d);
    // Rounds half away from zero (std::round), as the reference does; the scale is applied in
    // f32, before d is narrowed to f16.
    for (int j = 0; j < 32; ++j)
      dst[b].qs[j] = static_cast<int8_t>(truncate_to_int(std::round(src[j] * id)));
  }
}

bool uses_importance(DType type) {
  switch (type) {
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kIQ4_NL:
    case DType::kIQ4_XS:
      return true;
    default:
      return false;
  }
}

util::Status quantize_row(DType type, const float* src, void* dst, int64_t n,
                          const float* importance) {
  const QuantizeRowFn encode = find_quantizer(type);
  if (encode == nullptr) {
    return util::errorf(
        "tensor: cannot quantize to {} (no encoder for this type) — choose one of F32, F16, "
        "BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, "
        "TQ1_0, TQ2_0, MXFP4, NVFP4",
        dtype_name(type));
  }
  HR_TRY(check_row_length(type, n));
  HR_TRY(check_block_alignment(type, dst));
  // Block types derive scales from the extremes of each block: one inf or nan would poison the
  // whole block (and is undefined behaviour in the float → int steps), so refuse it up front.
  if (type != DType::kF32 && type != DType::kF16 && type != DType::kBF16) {
    for (int64_t i = 0; i < n; ++i) {
      if (!std::isfinite(src[i])) {
        return util::errorf(
            "tensor: cannot quantize {} at index {} to {} — the source tensor holds a non-finite "
            "value; fix or clamp it before quantizing",
            src[i], i, dtype_name(type));
      }
    }
  }
  encode(src, dst, n, uses_importance(type) ? importance : nullptr);
  return {};
}

}  // namespace tensor
