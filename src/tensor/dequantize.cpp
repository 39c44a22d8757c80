// Scalar reference dequantizers for the plain float types, the 32-value block types, the codebook,
// ternary and FP4 types, and the dispatcher. The K-quants are in dequantize_k.cpp.
#include "tensor/dequantize.h"

#include <cstdint>
#include <cstring>

#include "tensor/fp16.h"
#include "tensor/fp8_scales.h"

namespace tensor {
namespace {

// The fifth bits of a Q5_0/Q5_1 block as one little-endian u32 (bytes, as the block is only
// 2-byte aligned).
uint32_t load_qh(const uint8_t (&qh)[4]) {
  return static_cast<uint32_t>(qh[0]) | static_cast<uint32_t>(qh[1]) << 8 |
         static_cast<uint32_t>(qh[2]) << 16 | static_cast<uint32_t>(qh[3]) << 24;
}

// One base-3 digit of a TQ1_0 byte: the byte is a fixed-point fraction of 3^5 (or 3^4); times
// 3^k moves digit k to the top, and the top "trit" is floor(3 * fraction).
int tq1_digit(uint8_t byte, int k) {
  static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
  const uint8_t shifted = static_cast<uint8_t>(byte * kPow3[k]);  // mod 256 on purpose
  return (shifted * 3) >> 8;
}

template <class Block, void (*Decode)(const Block*, float*, int64_t)>
void decode_erased(const void* src, float* dst, int64_t n) {
  Decode(static_cast<const Block*>(src), dst, n);
}

}  // namespace

void dequantize_row_f32(const float* src, float* dst, int64_t n) {
  if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void dequantize_row_f16(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(src[i]);
}

void dequantize_row_bf16(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
}

void dequantize_row_q4_0(const BlockQ4_0* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / BlockQ4_0::kValues; ++b, dst += BlockQ4_0::kValues) {
    const BlockQ4_0& block = src[b];
    const float d = f16_to_f32(block.d);
    for (int j = 0; j < 16; ++j) {
      dst[j] = static_cast<float>((block.qs[j] & 0x0f) - 8) * d;
      dst[j + 16] = static_cast<float>((block.qs[j] >> 4) - 8) * d;
    }
  }
}

void dequantize_row_q4_1(const BlockQ4_1* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / BlockQ4_1::kValues; ++b, dst += BlockQ4_1::kValues) {
    const BlockQ4_1& block = src[b];
    const float d = f16_to_f32(block.d);
    const float m = f16_to_f32(block.m);
    for (int j = 0; j < 16; ++j) {
      dst[j] = static_cast<float>(block.qs[j] & 0x0f) * d + m;
      dst[j + 16] = static_cast<float>(block.qs[j] >> 4) * d + m;
    }
  }
}

void dequantize_row_q5_0(const BlockQ5_0* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / BlockQ5_0::kValues; ++b, dst += BlockQ5_0::kValues) {
    const BlockQ5_0& block = src[b];
    const float d = f16_to_f32(block.d);
    const uint32_t qh = load_qh(block.qh);
    for (int j = 0; j < 16; ++j) {
      const int high0 = static_cast<int>((qh >> j) & 1u) << 4;
      const int high1 = static_cast<int>((qh >> (j + 16)) & 1u) << 4;
      dst[j] = static_cast<float>(((block.qs[j] & 0x0f) | high0) - 16) * d;
      dst[j + 16] = static_cast<float>(((block.qs[j] >> 4) | high1) - 16) * d;
    }
  }
}

void dequantize_row_q5_1(const BlockQ5_1* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / BlockQ5_1::kValues; ++b, dst += BlockQ5_1::kValues) {
    const BlockQ5_1& block = src[b];
    const float d = f16_to_f32(block.d);
    const float m = f16_to_f32(block.m);
    const uint32_t qh = load_qh(block.qh);
    for (int j = 0; j < 16; ++j) {
      const int high0 = static_cast<int>((qh >> j) & 1u) << 4;
      const int high1 = static_cast<int>((qh >> (j + 16)) & 1u) << 4;
      dst[j] = static_cast<float>((block.qs[j] & 0x0f) | high0) * d + m;
      dst[j + 16] = static_cast<float>((block.qs[j] >> 4) | high1) * d + m;
    }
  }
}

void dequantize_row_q8_0(const BlockQ8_0* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / BlockQ8_0::kValues; ++b, dst += BlockQ8_0::kValues) {
    const BlockQ8_0& block = src[b];
    const float d = f16_to_f32(block.d);
    for (int j = 0; j < 32; ++j) dst[j] = static_cast<float>(block.qs[j]) * d;
  }
}

void dequantize_row_iq4_nl(const BlockIQ4_NL* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / BlockIQ4_NL::kValues; ++b, dst += BlockIQ4_NL::kValues) {
    const BlockIQ4_NL& block = src[b];
    const float d = f16_to_f32(block.d);
    for (int j = 0; j < 16; ++j) {
      dst[j] = d * static_cast<float>(kIq4NlLevels[block.qs[j] & 0x0f]);
      dst[j + 16] = d * static_cast<float>(kIq4NlLevels[block.qs[j] >> 4]);
    }
  }
}

void dequantize_row_iq4_xs(const BlockIQ4_XS* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / BlockIQ4_XS::kValues; ++b) {
    const BlockIQ4_XS& block = src[b];
    const float d = f16_to_f32(block.d);
    for (int sub = 0; sub < 8; ++sub, dst += 32) {
      const int low = (block.scales_l[sub / 2] >> (4 * (sub % 2))) & 0x0f;
      const int high = (block.scales_h >> (2 * sub)) & 0x3;
      const float dl = d * static_cast<float>((low | high << 4) - 32);
      const uint8_t* qs = block.qs + 16 * sub;
      for (int j = 0; j < 16; ++j) {
        dst[j] = dl * static_cast<float>(kIq4NlLevels[qs[j] & 0x0f]);
        dst[j + 16] = dl * static_cast<float>(kIq4NlLevels[qs[j] >> 4]);
      }
    }
  }
}

void dequantize_row_tq1_0(const BlockTQ1_0* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / BlockTQ1_0::kValues; ++b) {
    const BlockTQ1_0& block = src[b];
    const float d = f16_to_f32(block.d);
    // qs[0..31] then qs[32..47], each group digit by digit; then qh digit by digit.
    for (int k = 0; k < 5; ++k) {
      for (int m = 0; m < 32; ++m) *dst++ = static_cast<float>(tq1_digit(block.qs[m], k) - 1) * d;
    }
    for (int k = 0; k < 5; ++k) {
      for (int m = 32; m < 48; ++m) *dst++ = static_cast<float>(tq1_digit(block.qs[m], k) - 1) * d;
    }
    for (int k = 0; k < 4; ++k) {
      for (int m = 0; m < 4; ++m) *dst++ = static_cast<float>(tq1_digit(block.qh[m], k) - 1) * d;
    }
  }
}

void dequantize_row_tq2_0(const BlockTQ2_0* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / BlockTQ2_0::kValues; ++b) {
    const BlockTQ2_0& block = src[b];
    const float d = f16_to_f32(block.d);
    for (int group = 0; group < 64; group += 32) {
      for (int k = 0; k < 4; ++k) {
        for (int m = 0; m < 32; ++m) {
          const int q = (block.qs[group + m] >> (2 * k)) & 0x3;
          *dst++ = static_cast<float>(q - 1) * d;
        }
      }
    }
  }
}

void dequantize_row_mxfp4(const BlockMXFP4* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / BlockMXFP4::kValues; ++b, dst += BlockMXFP4::kValues) {
    const BlockMXFP4& block = src[b];
    const float d = mxfp4_half_scale(block.e);
    for (int j = 0; j < 16; ++j) {
      dst[j] = static_cast<float>(kFp4Levels[block.qs[j] & 0x0f]) * d;
      dst[j + 16] = static_cast<float>(kFp4Levels[block.qs[j] >> 4]) * d;
    }
  }
}

void dequantize_row_nvfp4(const BlockNVFP4* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / BlockNVFP4::kValues; ++b) {
    const BlockNVFP4& block = src[b];
    for (int sub = 0; sub < 4; ++sub, dst += 16) {
      const float d = nvfp4_half_scale(block.d[sub]);
      const uint8_t* qs = block.qs + 8 * sub;
      for (int j = 0; j < 8; ++j) {
        dst[j] = static_cast<float>(kFp4Levels[qs[j] & 0x0f]) * d;
        dst[j + 8] = static_cast<float>(kFp4Levels[qs[j] >> 4]) * d;
      }
    }
  }
}

DequantizeRowFn find_dequantizer(DType type) {
  switch (type) {
    case DType::kF32:
      return decode_erased<float, dequantize_row_f32>;
    case DType::kF16:
      return decode_erased<uint16_t, dequantize_row_f16>;
    case DType::kBF16:
      return decode_erased<uint16_t, dequantize_row_bf16>;
    case DType::kQ4_0:
      return decode_erased<BlockQ4_0, dequantize_row_q4_0>;
    case DType::kQ4_1:
      return decode_erased<BlockQ4_1, dequantize_row_q4_1>;
    case DType::kQ5_0:
      return decode_erased<BlockQ5_0, dequantize_row_q5_0>;
    case DType::kQ5_1:
      return decode_erased<BlockQ5_1, dequantize_row_q5_1>;
    case DType::kQ8_0:
      return decode_erased<BlockQ8_0, dequantize_row_q8_0>;
    case DType::kQ2_K:
      return decode_erased<BlockQ2_K, dequantize_row_q2_k>;
    case DType::kQ3_K:
      return decode_erased<BlockQ3_K, dequantize_row_q3_k>;
    case DType::kQ4_K:
      return decode_erased<BlockQ4_K, dequantize_row_q4_k>;
    case DType::kQ5_K:
      return decode_erased<BlockQ5_K, dequantize_row_q5_k>;
    case DType::kQ6_K:
      return decode_erased<BlockQ6_K, dequantize_row_q6_k>;
    case DType::kQ8_K:
      return decode_erased<BlockQ8_K, dequantize_row_q8_k>;
    case DType::kIQ4_NL:
      return decode_erased<BlockIQ4_NL, dequantize_row_iq4_nl>;
    case DType::kIQ4_XS:
      return decode_erased<BlockIQ4_XS, dequantize_row_iq4_xs>;
    case DType::kTQ1_0:
      return decode_erased<BlockTQ1_0, dequantize_row_tq1_0>;
    case DType::kTQ2_0:
      return decode_erased<BlockTQ2_0, dequantize_row_tq2_0>;
    case DType::kMXFP4:
      return decode_erased<BlockMXFP4, dequantize_row_mxfp4>;
    case DType::kNVFP4:
      return decode_erased<BlockNVFP4, dequantize_row_nvfp4>;
    default:
      return nullptr;
  }
}

util::Status dequantize_row(DType type, const void* src, float* dst, int64_t n) {
  const DequantizeRowFn decode = find_dequantizer(type);
  if (decode == nullptr) {
    return util::errorf(
        "tensor: cannot dequantize {} tensors (no decoder for this type) — requantize the model "
        "to a supported type such as Q4_K, Q8_0 or F16",
        dtype_name(type));
  }
  HR_TRY(check_row_length(type, n));
  HR_TRY(check_block_alignment(type, src));
  decode(src, dst, n);
  return {};
}

}  // namespace tensor
