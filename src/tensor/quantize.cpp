// Reference quantizers for the 16-bit floats and the 32-value block types, and the dispatcher.
// The K-quants and Q8_K are in quantize_k.cpp.
#include "tensor/quantize.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "tensor/fp16.h"

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

template <class Block, void (*Encode)(const float*, Block*, int64_t)>
void encode_erased(const float* src, void* dst, int64_t n) {
  Encode(src, static_cast<Block*>(dst), n);
}

void quantize_row_f32(const float* src, float* dst, int64_t n) {
  if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

using QuantizeRowFn = void (*)(const float* src, void* dst, int64_t n);

QuantizeRowFn find_quantizer(DType type) {
  switch (type) {
    case DType::kF32:
      return encode_erased<float, quantize_row_f32>;
    case DType::kF16:
      return encode_erased<uint16_t, quantize_row_f16>;
    case DType::kBF16:
      return encode_erased<uint16_t, quantize_row_bf16>;
    case DType::kQ4_0:
      return encode_erased<BlockQ4_0, quantize_row_q4_0>;
    case DType::kQ4_1:
      return encode_erased<BlockQ4_1, quantize_row_q4_1>;
    case DType::kQ5_0:
      return encode_erased<BlockQ5_0, quantize_row_q5_0>;
    case DType::kQ5_1:
      return encode_erased<BlockQ5_1, quantize_row_q5_1>;
    case DType::kQ8_0:
      return encode_erased<BlockQ8_0, quantize_row_q8_0>;
    case DType::kQ4_K:
      return encode_erased<BlockQ4_K, quantize_row_q4_k>;
    case DType::kQ5_K:
      return encode_erased<BlockQ5_K, quantize_row_q5_k>;
    case DType::kQ6_K:
      return encode_erased<BlockQ6_K, quantize_row_q6_k>;
    case DType::kQ8_K:
      return encode_erased<BlockQ8_K, quantize_row_q8_k>;
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

void quantize_row_q4_0(const float* src, BlockQ4_0* dst, int64_t n) {
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

void quantize_row_q4_1(const float* src, BlockQ4_1* dst, int64_t n) {
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

void quantize_row_q5_0(const float* src, BlockQ5_0* dst, int64_t n) {
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

void quantize_row_q5_1(const float* src, BlockQ5_1* dst, int64_t n) {
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

util::Status quantize_row(DType type, const float* src, void* dst, int64_t n) {
  const QuantizeRowFn encode = find_quantizer(type);
  if (encode == nullptr) {
    return util::errorf(
        "tensor: cannot quantize to {} (no encoder for this type) — choose one of F32, F16, "
        "BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, Q8_K",
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
  encode(src, dst, n);
  return {};
}

}  // namespace tensor
