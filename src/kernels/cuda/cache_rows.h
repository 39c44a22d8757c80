// Reading and writing KV cache rows (F32, F16, Q8_0, Q4_0) as the CUDA kernels do, in functions
// the host compiles too, so the CPU tests check them against tensor::dequantize_row and
// tensor::quantize_row.
//
// A row is one token's K (or V) for all KV heads. Reads decode a "unit" of 8 consecutive values
// (16 bytes of f16); writes encode one value (F32, F16) or one 32-value block (Q8_0, Q4_0). The
// float operations are the reference's, in its order, spelled with mul_rn/add_rn/div_rn so that
// nvcc cannot contract them into fused multiply-adds (the stores promise the reference's bits).
// Pointers follow the CUDA backend's contract: rows aligned to their type (4 bytes for F32, 2 for
// the others); 16-byte loads are used where the address allows them.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cuda/rounding.h"
#include "kernels/op_args.h"
#include "tensor/blocks.h"
#include "tensor/fp16.h"
#if defined(__CUDACC__)
#include "kernels/cuda/decode.cuh"
#endif

namespace kernels::cuda {

// --- Bits and loads ------------------------------------------------------------------------------

HR_HOST_DEVICE inline float float_from_bits(uint32_t bits) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
#endif
}

// The 16-bit float rules of tensor/fp16.h (the device copies in decode.cuh are bit-identical).
HR_HOST_DEVICE inline float half_to_float(uint16_t h) {
#ifdef __CUDA_ARCH__
  return f16_to_f32(h);
#else
  return tensor::f16_to_f32(h);
#endif
}
HR_HOST_DEVICE inline uint16_t float_to_half(float f) {
#ifdef __CUDA_ARCH__
  return f32_to_f16(f);
#else
  return tensor::f32_to_f16(f);
#endif
}

// The cache is not written while attention reads it, so the device loads go through the
// read-only path.
HR_HOST_DEVICE inline uint16_t load_u16(const uint8_t* p) {
#ifdef __CUDA_ARCH__
  return __ldg(reinterpret_cast<const unsigned short*>(p));
#else
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
#endif
}
HR_HOST_DEVICE inline float load_f32(const uint8_t* p) {
#ifdef __CUDA_ARCH__
  return __ldg(reinterpret_cast<const float*>(p));
#else
  float v;
  std::memcpy(&v, p, sizeof v);
  return v;
#endif
}
HR_HOST_DEVICE inline bool aligned_16(const uint8_t* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}
// 16 bytes at p (16-byte aligned) as four little-endian words: one load instruction on the device.
HR_HOST_DEVICE inline void load_16_bytes(const uint8_t* p, uint32_t (&w)[4]) {
#ifdef __CUDA_ARCH__
  const uint4 v = __ldg(reinterpret_cast<const uint4*>(p));
  w[0] = v.x;
  w[1] = v.y;
  w[2] = v.z;
  w[3] = v.w;
#else
  std::memcpy(w, p, sizeof w);
#endif
}

// --- Reading
// ---------------------------------------------------------------------------------------

// Value i of a cache row: tensor::dequantize_row's result, computed alone.
HR_HOST_DEVICE inline float cache_value_at(DType t, const uint8_t* row, int i) {
  switch (t) {
    case DType::kF32:
      return load_f32(row + 4 * static_cast<int64_t>(i));
    case DType::kF16:
      return half_to_float(load_u16(row + 2 * static_cast<int64_t>(i)));
    case DType::kQ8_0: {
      const uint8_t* block = row + sizeof(tensor::BlockQ8_0) * (i / 32);
      const int pair = load_u16(block + 2 + ((i % 32) & ~1));  // qs start 2 bytes in: 2-byte loads
      const auto q = static_cast<int8_t>(static_cast<uint8_t>(pair >> (8 * (i % 2))));
      return mul_rn(static_cast<float>(q), half_to_float(load_u16(block)));
    }
    case DType::kQ4_0: {
      const uint8_t* block = row + sizeof(tensor::BlockQ4_0) * (i / 32);
      const int j = i % 32, byte_index = j % 16;
      const int pair = load_u16(block + 2 + (byte_index & ~1));
      const int byte = (pair >> (8 * (byte_index % 2))) & 0xff;
      const int q = j < 16 ? byte & 0x0f : byte >> 4;
      return mul_rn(static_cast<float>(q - 8), half_to_float(load_u16(block)));
    }
    default:
      return 0.0f;  // refused on the host before launch
  }
}

// A unit as 8 bytes at p (2-byte aligned) of int8 quants or nibbles: four 2-byte loads.
HR_HOST_DEVICE inline void load_8_bytes(const uint8_t* p, int (&bytes)[8]) {
  for (int k = 0; k < 4; ++k) {
    const int pair = load_u16(p + 2 * k);
    bytes[2 * k] = pair & 0xff;
    bytes[2 * k + 1] = pair >> 8;
  }
}

// Kept out of line on the device: heads whose size is not a multiple of 8 are rare, and inlined
// this loop of switches would multiply the attention kernel's code.
#if defined(__CUDACC__)
#define HR_OUT_OF_LINE __noinline__
#else
#define HR_OUT_OF_LINE
#endif

// v[j] = value i0 + j of a cache row for j < n_valid, 0 beyond, read value by value.
HR_HOST_DEVICE HR_OUT_OF_LINE inline void load_cache_values(DType t, const uint8_t* row, int i0,
                                                            int n_valid, float (&v)[8]) {
  for (int j = 0; j < 8; ++j) v[j] = j < n_valid ? cache_value_at(t, row, i0 + j) : 0.0f;
}

// v[j] = value i0 + j of a cache row for j < n_valid, 0 beyond. A whole unit starting at a
// multiple of 8 (every unit of a head whose size is a multiple of 8) is read with the widest loads
// its type allows; anything else value by value.
HR_HOST_DEVICE inline void load_cache_unit(DType t, const uint8_t* row, int i0, int n_valid,
                                           float (&v)[8]) {
  if (n_valid < 8 || i0 % 8 != 0) return load_cache_values(t, row, i0, n_valid, v);
  switch (t) {
    case DType::kF32: {
      const uint8_t* p = row + 4 * static_cast<int64_t>(i0);
      if (aligned_16(p)) {
        uint32_t w[4];
        load_16_bytes(p, w);
        for (int j = 0; j < 4; ++j) v[j] = float_from_bits(w[j]);
        load_16_bytes(p + 16, w);
        for (int j = 0; j < 4; ++j) v[4 + j] = float_from_bits(w[j]);
      } else {
        for (int j = 0; j < 8; ++j) v[j] = load_f32(p + 4 * j);
      }
      return;
    }
    case DType::kF16: {
      const uint8_t* p = row + 2 * static_cast<int64_t>(i0);
      if (aligned_16(p)) {
        uint32_t w[4];
        load_16_bytes(p, w);
        for (int k = 0; k < 4; ++k) {
          v[2 * k] = half_to_float(static_cast<uint16_t>(w[k] & 0xffffu));
          v[2 * k + 1] = half_to_float(static_cast<uint16_t>(w[k] >> 16));
        }
      } else {
        for (int j = 0; j < 8; ++j) v[j] = half_to_float(load_u16(p + 2 * j));
      }
      return;
    }
    case DType::kQ8_0: {
      const uint8_t* block = row + sizeof(tensor::BlockQ8_0) * (i0 / 32);
      const float d = half_to_float(load_u16(block));
      int bytes[8];
      load_8_bytes(block + 2 + i0 % 32, bytes);
      for (int j = 0; j < 8; ++j) {
        v[j] = mul_rn(static_cast<float>(static_cast<int8_t>(static_cast<uint8_t>(bytes[j]))), d);
      }
      return;
    }
    case DType::kQ4_0: {
      // Values 0..15 of a block are the low nibbles of qs[0..15], values 16..31 the high ones.
      const uint8_t* block = row + sizeof(tensor::BlockQ4_0) * (i0 / 32);
      const float d = half_to_float(load_u16(block));
      const int j0 = i0 % 32;
      int bytes[8];
      load_8_bytes(block + 2 + j0 % 16, bytes);
      for (int j = 0; j < 8; ++j) {
        const int q = j0 < 16 ? bytes[j] & 0x0f : bytes[j] >> 4;
        v[j] = mul_rn(static_cast<float>(q - 8), d);
      }
      return;
    }
    default:
      for (int j = 0; j < 8; ++j) v[j] = 0.0f;  // refused on the host before launch
  }
}

// --- Writing: tensor::quantize_row's encoders (tensor/quantize.cpp), one block at a time
// -----------

// float → int truncating toward zero; 0 where the C++ cast would be undefined (as quantize.cpp).
HR_HOST_DEVICE inline int truncate_to_int(float v) {
  return v > -2147483648.0f && v < 2147483648.0f ? static_cast<int>(v) : 0;
}

HR_HOST_DEVICE inline void quantize_block_q8_0(const float* src, tensor::BlockQ8_0* dst) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = fmaxf(amax, fabsf(src[j]));
  const float d = div_rn(amax, 127.0f);
  const float id = d != 0.0f ? div_rn(1.0f, d) : 0.0f;
  dst->d = float_to_half(d);
  for (int j = 0; j < 32; ++j) {
    dst->qs[j] = static_cast<int8_t>(truncate_to_int(roundf(mul_rn(src[j], id))));
  }
}

HR_HOST_DEVICE inline void quantize_block_q4_0(const float* src, tensor::BlockQ4_0* dst) {
  float amax = 0.0f, max = 0.0f;  // the value of largest magnitude, the first one on ties
  for (int j = 0; j < 32; ++j) {
    if (amax < fabsf(src[j])) {
      amax = fabsf(src[j]);
      max = src[j];
    }
  }
  const float d = div_rn(max, -8.0f);
  const float id = d != 0.0f ? div_rn(1.0f, d) : 0.0f;
  dst->d = float_to_half(d);
  for (int j = 0; j < 16; ++j) {
    const int q0 = truncate_to_int(add_rn(mul_rn(src[j], id), 8.5f));
    const int q1 = truncate_to_int(add_rn(mul_rn(src[j + 16], id), 8.5f));
    dst->qs[j] = static_cast<uint8_t>((q0 < 15 ? q0 : 15) | (q1 < 15 ? q1 : 15) << 4);
  }
}

// What one thread writes of a row of n values: a value (F32, F16) or a 32-value block.
HR_HOST_DEVICE inline int cache_store_items(DType t, int n) {
  return t == DType::kQ8_0 || t == DType::kQ4_0 ? n / 32 : n;
}

// Writes item `item` of the row `src` into the cache row `dst`.
HR_HOST_DEVICE inline void store_cache_item(DType t, const float* src, uint8_t* dst, int item) {
  switch (t) {
    case DType::kF32:
      reinterpret_cast<float*>(dst)[item] = src[item];
      break;
    case DType::kF16:
      reinterpret_cast<uint16_t*>(dst)[item] = float_to_half(src[item]);
      break;
    case DType::kQ8_0:
      quantize_block_q8_0(src + 32 * item, reinterpret_cast<tensor::BlockQ8_0*>(dst) + item);
      break;
    case DType::kQ4_0:
      quantize_block_q4_0(src + 32 * item, reinterpret_cast<tensor::BlockQ4_0*>(dst) + item);
      break;
    default:
      break;  // refused on the host before launch
  }
}

}  // namespace kernels::cuda
