// Device-side decoding of the GGUF block formats (tensor/blocks.h) and the f16/bf16 conversions,
// shared by every CUDA kernel that reads weights or the KV cache.
//
// The unit of decoding is 8 consecutive values of a row ("unit" u holds values [8u, 8u + 8)).
// Every quantized block holds a whole number of units (32, 64 or 256 values), so a unit never
// straddles two blocks; the plain float types (one value per "block") may end in a partial unit,
// whose missing values decode to 0.
//
// Bit-exact with tensor/dequantize*.cpp: the same integer unpacking and the same float operations
// in the same order. The multiplies and adds are spelled __fmul_rn/__fadd_rn/__fsub_rn because
// nvcc would otherwise contract `a * b - c` into one fused multiply-add, which rounds once instead
// of twice and changes the last bit of a value (get_rows promises the reference's bits).
#pragma once

#include <cstdint>

#include "gguf/types.h"
#include "tensor/blocks.h"

namespace kernels::cuda {

using DType = gguf::TensorType;

// --- 16-bit floats: the integer rules of tensor/fp16.h, written with CUDA's bit casts ----------

__device__ __forceinline__ float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return __uint_as_float(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0) return __uint_as_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
  if (mantissa == 0) return __uint_as_float(sign);
  const int top = 31 - __clz(static_cast<int>(mantissa));  // index of the highest set bit
  const uint32_t f32_exponent = static_cast<uint32_t>(top + 103);
  const uint32_t f32_mantissa = (mantissa << (23 - top)) & 0x7fffffu;
  return __uint_as_float(sign | (f32_exponent << 23) | f32_mantissa);
}

// Round to nearest even, as tensor::f32_to_f16 (same branches, same constants).
__device__ __forceinline__ uint16_t f32_to_f16(float f) {
  const uint32_t bits = __float_as_uint(f);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u)
    return static_cast<uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
  if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (magnitude >= 0x38800000u) {
    uint32_t h = (((magnitude >> 23) - 112) << 10) | ((magnitude >> 13) & 0x3ffu);
    const uint32_t rest = magnitude & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  if (magnitude <= 0x33000000u) return sign;
  const uint32_t e = magnitude >> 23;
  const uint32_t m = (magnitude & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126 - e;
  uint32_t h = m >> shift;
  const uint32_t rest = m & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  if (rest > half || (rest == half && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

__device__ __forceinline__ float bf16_to_f32(uint16_t h) {
  return __uint_as_float(static_cast<uint32_t>(h) << 16);
}

__device__ __forceinline__ uint16_t f32_to_bf16(float f) {
  const uint32_t bits = __float_as_uint(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

// --- Codebooks, packed into 64-bit constants so a lookup stays in registers --------------------

// Byte q of lo (q < 8) or hi (q >= 8), as a signed level.
__host__ __device__ constexpr int packed_level(uint64_t lo, uint64_t hi, int q) {
  return static_cast<int8_t>(static_cast<uint8_t>((q < 8 ? lo : hi) >> (8 * (q & 7))));
}
constexpr uint64_t pack_levels(const int8_t* levels) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | static_cast<uint8_t>(levels[i]);
  return v;
}
inline constexpr uint64_t kIq4Lo = pack_levels(tensor::kIq4NlLevels);
inline constexpr uint64_t kIq4Hi = pack_levels(tensor::kIq4NlLevels + 8);
inline constexpr uint64_t kFp4Lo = pack_levels(tensor::kFp4Levels);
inline constexpr uint64_t kFp4Hi = pack_levels(tensor::kFp4Levels + 8);

constexpr bool levels_packed_right() {
  for (int q = 0; q < 16; ++q) {
    if (packed_level(kIq4Lo, kIq4Hi, q) != tensor::kIq4NlLevels[q]) return false;
    if (packed_level(kFp4Lo, kFp4Hi, q) != tensor::kFp4Levels[q]) return false;
  }
  return true;
}
static_assert(levels_packed_right(), "the packed codebooks must equal tensor/blocks.h's tables");

__device__ __forceinline__ float iq4_level(int q) {
  return static_cast<float>(packed_level(kIq4Lo, kIq4Hi, q));
}
__device__ __forceinline__ float fp4_level(int q) {
  return static_cast<float>(packed_level(kFp4Lo, kFp4Hi, q));
}

// Nibble j (0..31) of a 16-byte "Q4_0 order" array: low nibbles are values 0..15, high 16..31.
__device__ __forceinline__ int nibble32(const uint8_t* qs, int j) {
  return j < 16 ? qs[j] & 0x0f : qs[j - 16] >> 4;
}

__device__ __forceinline__ uint32_t load_u32_bytes(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}

// Scale and min of sub-block j of a Q4_K/Q5_K block (tensor/k_scales.h).
__device__ __forceinline__ void k4_scale_min(const uint8_t* s, int j, int* scale, int* min) {
  if (j < 4) {
    *scale = s[j] & 63;
    *min = s[j + 4] & 63;
  } else {
    *scale = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
    *min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

__device__ __forceinline__ int q3_k_scale(const uint8_t* scales, int s) {
  const int low = s < 8 ? scales[s] & 0x0f : scales[s - 8] >> 4;
  const int high = (scales[8 + s % 4] >> (2 * (s / 4))) & 0x3;
  return low | (high << 4);
}

// --- Per-type unit decoders --------------------------------------------------------------------

// Values per block of each type the CUDA kernels decode; 0 for the others.
__host__ __device__ constexpr int unit_block_values(DType t) {
  switch (t) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
      return 1;
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kQ8_0:
    case DType::kIQ4_NL:
    case DType::kMXFP4:
      return 32;
    case DType::kNVFP4:
      return 64;
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kQ8_K:
    case DType::kIQ4_XS:
    case DType::kTQ1_0:
    case DType::kTQ2_0:
      return 256;
    default:
      return 0;
  }
}

// v = values [8u, 8u + 8) of `row`, a row of n values of type T.
template <DType T>
__device__ __forceinline__ void decode_unit(const uint8_t* row, int64_t u, int64_t n,
                                            float (&v)[8]) {
  constexpr int kBlock = unit_block_values(T);
  static_assert(kBlock > 0, "no CUDA decoder for this type");
  if constexpr (kBlock == 1) {
    // Plain floats: the last unit may be partial.
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int64_t i = 8 * u + j;
      if (i >= n) {
        v[j] = 0.0f;
      } else if constexpr (T == DType::kF32) {
        v[j] = reinterpret_cast<const float*>(row)[i];
      } else if constexpr (T == DType::kF16) {
        v[j] = f16_to_f32(reinterpret_cast<const uint16_t*>(row)[i]);
      } else {
        v[j] = bf16_to_f32(reinterpret_cast<const uint16_t*>(row)[i]);
      }
    }
  } else {
    constexpr int kUnits = kBlock / 8;
    const int64_t b = u / kUnits;
    const int i0 = static_cast<int>(u % kUnits) * 8;  // first value of the unit within its block
    if constexpr (T == DType::kQ4_0) {
      const auto& blk = reinterpret_cast<const tensor::BlockQ4_0*>(row)[b];
      const float d = f16_to_f32(blk.d);
#pragma unroll
      for (int j = 0; j < 8; ++j)
        v[j] = __fmul_rn(static_cast<float>(nibble32(blk.qs, i0 + j) - 8), d);
    } else if constexpr (T == DType::kQ4_1) {
      const auto& blk = reinterpret_cast<const tensor::BlockQ4_1*>(row)[b];
      const float d = f16_to_f32(blk.d), m = f16_to_f32(blk.m);
#pragma unroll
      for (int j = 0; j < 8; ++j)
        v[j] = __fadd_rn(__fmul_rn(static_cast<float>(nibble32(blk.qs, i0 + j)), d), m);
    } else if constexpr (T == DType::kQ5_0) {
      const auto& blk = reinterpret_cast<const tensor::BlockQ5_0*>(row)[b];
      const float d = f16_to_f32(blk.d);
      const uint32_t qh = load_u32_bytes(blk.qh);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int i = i0 + j;  // bit i of qh is the fifth bit of value i
        const int q = nibble32(blk.qs, i) | static_cast<int>((qh >> i) & 1u) << 4;
        v[j] = __fmul_rn(static_cast<float>(q - 16), d);
      }
    } else if constexpr (T == DType::kQ5_1) {
      const auto& blk = reinterpret_cast<const tensor::BlockQ5_1*>(row)[b];
      const float d = f16_to_f32(blk.d), m = f16_to_f32(blk.m);
      const uint32_t qh = load_u32_bytes(blk.qh);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int i = i0 + j;
        const int q = nibble32(blk.qs, i) | static_cast<int>((qh >> i) & 1u) << 4;
        v[j] = __fadd_rn(__fmul_rn(static_cast<float>(q), d), m);
      }
    } else if constexpr (T == DType::kQ8_0) {
      const auto& blk = reinterpret_cast<const tensor::BlockQ8_0*>(row)[b];
      const float d = f16_to_f32(blk.d);
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = __fmul_rn(static_cast<float>(blk.qs[i0 + j]), d);
    } else if constexpr (T == DType::kIQ4_NL) {
      const auto& blk = reinterpret_cast<const tensor::BlockIQ4_NL*>(row)[b];
      const float d = f16_to_f32(blk.d);
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = __fmul_rn(d, iq4_level(nibble32(blk.qs, i0 + j)));
    } else if constexpr (T == DType::kMXFP4) {
      const auto& blk = reinterpret_cast<const tensor::BlockMXFP4*>(row)[b];
      // 2^(e - 128): e = 0 and 1 are f32 subnormals.
      const uint32_t bits =
          blk.e < 2 ? 0x00200000u << blk.e : static_cast<uint32_t>(blk.e - 1) << 23;
      const float d = __uint_as_float(bits);
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = __fmul_rn(fp4_level(nibble32(blk.qs, i0 + j)), d);
    } else if constexpr (T == DType::kNVFP4) {
      const auto& blk = reinterpret_cast<const tensor::BlockNVFP4*>(row)[b];
      const int sub = i0 / 16;  // a unit is half of a 16-value sub-block
      const uint8_t x = blk.d[sub];
      float d;
      if (x == 0 || x == 0x7f) {
        d = 0.0f;
      } else if (((x >> 3) & 0xfu) == 0) {
        d = __fmul_rn(static_cast<float>(x & 0x7u), 0x1p-10f);
      } else {
        d = __uint_as_float((((x >> 3) & 0xfu) + 119) << 23 | (x & 0x7u) << 20);
      }
      const uint8_t* qs = blk.qs + 8 * sub;
      const bool high = (i0 % 16) >= 8;
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = __fmul_rn(fp4_level(high ? qs[j] >> 4 : qs[j] & 0x0f), d);
    } else if constexpr (T == DType::kQ2_K) {
      const auto& blk = reinterpret_cast<const tensor::BlockQ2_K*>(row)[b];
      const float d = f16_to_f32(blk.d), dmin = f16_to_f32(blk.dmin);
      const int s = i0 / 16, l0 = i0 % 16;
      const uint8_t* qs = blk.qs + 32 * (s / 8) + 16 * (s % 2);
      const int shift = 2 * ((s % 8) / 2);
      const float dl = __fmul_rn(d, static_cast<float>(blk.scales[s] & 0x0f));
      const float ml = __fmul_rn(dmin, static_cast<float>(blk.scales[s] >> 4));
#pragma unroll
      for (int j = 0; j < 8; ++j)
        v[j] = __fsub_rn(__fmul_rn(dl, static_cast<float>((qs[l0 + j] >> shift) & 0x3)), ml);
    } else if constexpr (T == DType::kQ3_K) {
      const auto& blk = reinterpret_cast<const tensor::BlockQ3_K*>(row)[b];
      const float d = f16_to_f32(blk.d);
      const int s = i0 / 16, l0 = i0 % 16;
      const int offset = 16 * (s % 2);
      const uint8_t* qs = blk.qs + 32 * (s / 8) + offset;
      const uint8_t* hmask = blk.hmask + offset;
      const int shift = 2 * ((s % 8) / 2);
      const int high_bit = 1 << (s / 2);
      const float dl = __fmul_rn(d, static_cast<float>(q3_k_scale(blk.scales, s) - 32));
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int l = l0 + j;
        const int q = ((qs[l] >> shift) & 0x3) - ((hmask[l] & high_bit) ? 0 : 4);
        v[j] = __fmul_rn(dl, static_cast<float>(q));
      }
    } else if constexpr (T == DType::kQ4_K || T == DType::kQ5_K) {
      // Chunk c of 64 values: sub-block 2c in the low nibbles of qs[32c..], 2c + 1 in the high.
      const int c = i0 / 64, w0 = i0 % 64;
      const bool high = w0 >= 32;
      const int l0 = w0 % 32;
      const uint8_t* scales;
      const uint8_t* qs;
      float d, dmin;
      int fifth_bit = 0;
      const uint8_t* qh = nullptr;
      if constexpr (T == DType::kQ4_K) {
        const auto& blk = reinterpret_cast<const tensor::BlockQ4_K*>(row)[b];
        d = f16_to_f32(blk.d);
        dmin = f16_to_f32(blk.dmin);
        scales = blk.scales;
        qs = blk.qs + 32 * c;
      } else {
        const auto& blk = reinterpret_cast<const tensor::BlockQ5_K*>(row)[b];
        d = f16_to_f32(blk.d);
        dmin = f16_to_f32(blk.dmin);
        scales = blk.scales;
        qs = blk.qs + 32 * c;
        qh = blk.qh;
        fifth_bit = (high ? 2 : 1) << (2 * c);
      }
      int sc, mn;
      k4_scale_min(scales, 2 * c + (high ? 1 : 0), &sc, &mn);
      const float d1 = __fmul_rn(d, static_cast<float>(sc));
      const float m1 = __fmul_rn(dmin, static_cast<float>(mn));
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int l = l0 + j;
        int q = high ? qs[l] >> 4 : qs[l] & 0x0f;
        if constexpr (T == DType::kQ5_K) q += (qh[l] & fifth_bit) ? 16 : 0;
        v[j] = __fsub_rn(__fmul_rn(d1, static_cast<float>(q)), m1);
      }
    } else if constexpr (T == DType::kQ6_K) {
      const auto& blk = reinterpret_cast<const tensor::BlockQ6_K*>(row)[b];
      const float d = f16_to_f32(blk.d);
      const int half = i0 / 128, w0 = i0 % 128;
      const int quarter = w0 / 32, l0 = w0 % 32;
      const uint8_t* ql = blk.ql + 64 * half + 32 * (quarter & 1);
      const uint8_t* qh = blk.qh + 32 * half;
      // (d * scale) * q: the reference rounds the product d * scale first.
      const float ds =
          __fmul_rn(d, static_cast<float>(blk.scales[8 * half + l0 / 16 + 2 * quarter]));
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int l = l0 + j;
        const int low = quarter >= 2 ? ql[l] >> 4 : ql[l] & 0x0f;
        const int q = (low | ((qh[l] >> (2 * quarter)) & 0x3) << 4) - 32;
        v[j] = __fmul_rn(ds, static_cast<float>(q));
      }
    } else if constexpr (T == DType::kQ8_K) {
      const auto& blk = reinterpret_cast<const tensor::BlockQ8_K*>(row)[b];
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = __fmul_rn(blk.d, static_cast<float>(blk.qs[i0 + j]));
    } else if constexpr (T == DType::kIQ4_XS) {
      const auto& blk = reinterpret_cast<const tensor::BlockIQ4_XS*>(row)[b];
      const float d = f16_to_f32(blk.d);
      const int sub = i0 / 32, w0 = i0 % 32;
      const int low = (blk.scales_l[sub / 2] >> (4 * (sub % 2))) & 0x0f;
      const int high = (blk.scales_h >> (2 * sub)) & 0x3;
      const float dl = __fmul_rn(d, static_cast<float>((low | high << 4) - 32));
#pragma unroll
      for (int j = 0; j < 8; ++j)
        v[j] = __fmul_rn(dl, iq4_level(nibble32(blk.qs + 16 * sub, w0 + j)));
    } else if constexpr (T == DType::kTQ1_0) {
      const auto& blk = reinterpret_cast<const tensor::BlockTQ1_0*>(row)[b];
      const float d = f16_to_f32(blk.d);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        // Value i is digit k of one byte: qs[0..31] give values 0..159 (32 per digit), qs[32..47]
        // values 160..239 (16 per digit), qh[0..3] values 240..255 (4 per digit).
        const int i = i0 + j;
        int k;
        uint8_t byte;
        if (i < 160) {
          k = i / 32;
          byte = blk.qs[i % 32];
        } else if (i < 240) {
          k = (i - 160) / 16;
          byte = blk.qs[32 + (i - 160) % 16];
        } else {
          k = (i - 240) / 4;
          byte = blk.qh[(i - 240) % 4];
        }
        const int pow3 = k == 0 ? 1 : k == 1 ? 3 : k == 2 ? 9 : k == 3 ? 27 : 81;
        const int digit = (static_cast<uint8_t>(byte * pow3) * 3) >> 8;  // mod 256 on purpose
        v[j] = __fmul_rn(static_cast<float>(digit - 1), d);
      }
    } else if constexpr (T == DType::kTQ2_0) {
      const auto& blk = reinterpret_cast<const tensor::BlockTQ2_0*>(row)[b];
      const float d = f16_to_f32(blk.d);
      const int group = i0 / 128, k = (i0 % 128) / 32, m0 = i0 % 32;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int q = (blk.qs[32 * group + m0 + j] >> (2 * k)) & 0x3;
        v[j] = __fmul_rn(static_cast<float>(q - 1), d);
      }
    }
  }
}

// One value of a KV cache row (f32, f16, q8_0 or q4_0: the cache types kv:: allows), for
// attention, which reads a head's slice of a row value by value.
__device__ __forceinline__ float cache_value(DType t, const uint8_t* row, int i) {
  switch (t) {
    case DType::kF32:
      return reinterpret_cast<const float*>(row)[i];
    case DType::kF16:
      return f16_to_f32(reinterpret_cast<const uint16_t*>(row)[i]);
    case DType::kQ8_0: {
      const auto& blk = reinterpret_cast<const tensor::BlockQ8_0*>(row)[i / 32];
      return __fmul_rn(static_cast<float>(blk.qs[i % 32]), f16_to_f32(blk.d));
    }
    case DType::kQ4_0: {
      const auto& blk = reinterpret_cast<const tensor::BlockQ4_0*>(row)[i / 32];
      return __fmul_rn(static_cast<float>(nibble32(blk.qs, i % 32) - 8), f16_to_f32(blk.d));
    }
    default:
      return 0.0f;  // refused on the host before launch
  }
}

// --- Dispatch on a runtime weight type ---------------------------------------------------------

template <DType T>
struct TypeTag {
  static constexpr DType value = T;
};

// Calls f(TypeTag<T>{}) for a type this file decodes, or returns cudaErrorInvalidValue for one it
// does not (the backend refuses those before launching).
template <class F>
cudaError_t with_decodable_type(DType type, F&& f) {
  switch (type) {
#define HR_DECODABLE(name) \
  case DType::name:        \
    return f(TypeTag<DType::name>{});
    HR_DECODABLE(kF32)
    HR_DECODABLE(kF16)
    HR_DECODABLE(kBF16)
    HR_DECODABLE(kQ4_0)
    HR_DECODABLE(kQ4_1)
    HR_DECODABLE(kQ5_0)
    HR_DECODABLE(kQ5_1)
    HR_DECODABLE(kQ8_0)
    HR_DECODABLE(kQ2_K)
    HR_DECODABLE(kQ3_K)
    HR_DECODABLE(kQ4_K)
    HR_DECODABLE(kQ5_K)
    HR_DECODABLE(kQ6_K)
    HR_DECODABLE(kQ8_K)
    HR_DECODABLE(kIQ4_NL)
    HR_DECODABLE(kIQ4_XS)
    HR_DECODABLE(kTQ1_0)
    HR_DECODABLE(kTQ2_0)
    HR_DECODABLE(kMXFP4)
    HR_DECODABLE(kNVFP4)
#undef HR_DECODABLE
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace kernels::cuda
