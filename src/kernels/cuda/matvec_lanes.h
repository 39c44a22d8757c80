// Per-lane arithmetic of the CUDA decode matvecs over 8-bit activations (matvec.cu), written as
// __host__ __device__ code so that the CPU tests run it lane by lane (tests/kernels/
// cuda_lanes_test.cpp): the same loads, unpacking and integer dot products, with the CUDA
// intrinsics (dp4a, funnel shifts, __ldg) emulated on the host.
//
// The unit of work is a "piece" of a weight block: what one lane reads with 16-byte loads and
// multiplies with the matching 8-bit activations (act_q8.h). A row of n_blocks blocks has
// n_blocks · kPieces pieces; a team of lanes takes pieces lane, lane + n_lanes, … and each lane
// keeps one f32 partial sum per token, which the kernel then adds across the team.
//
// Loads. Q4_K and Q5_K blocks are 144 and 176 bytes, multiples of 16: their pieces are aligned
// 16-byte loads of whole quant chunks. The other formats' blocks are 18, 20, 22, 24, 34, 136 or
// 210 bytes, so their quants sit at any even offset; a lane loads the aligned 16-byte chunks that
// cover its bytes and shifts them into place (load_window), never byte by byte; the scattered
// scales are 2- or 4-byte loads. In the rows next to the end of the weights ("guarded" rows) a
// chunk that crosses that end is read in 2-byte pieces instead, so that no load touches memory
// past the tensor.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/act_q8.h"
#include "kernels/cuda/rounding.h"
#include "kernels/op_args.h"
#include "tensor/blocks.h"

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#endif
#if !defined(__CUDA_ARCH__)
#include <cstring>

#include "tensor/fp16.h"
#endif

// A rarely taken path, kept out of line where nvcc compiles it.
#if defined(__CUDACC__)
#define HR_TAIL_CALL __noinline__ __host__ __device__ inline
#else
#define HR_TAIL_CALL inline
#endif

// Full unrolling of the short loops below: nvcc's pragma in device code, GCC's in plain C++ (the
// host pass of nvcc accepts neither).
#if defined(__CUDA_ARCH__)
#define HR_UNROLL _Pragma("unroll")
#define HR_NO_UNROLL _Pragma("unroll 1")
#elif defined(__CUDACC__)
#define HR_UNROLL
#define HR_NO_UNROLL
#else
#define HR_UNROLL _Pragma("GCC unroll 16")
#define HR_NO_UNROLL _Pragma("GCC unroll 1")
#endif

namespace kernels::cuda {

// --- Host checks of the loads (tests) ----------------------------------------------------------

#if !defined(__CUDA_ARCH__)
// A GPU faults on a load that is not aligned to its size and must not read outside the buffers it
// was given; the host emulation counts such loads so that a test fails on them. Bounds are checked
// only while ranges are registered.
struct HostLoadCheck {
  struct Range {
    uintptr_t begin = 0, end = 0;
  };
  Range ranges[4];
  int n_ranges = 0;
  long long misaligned = 0;
  long long outside = 0;
};
inline HostLoadCheck& host_load_check() {
  static thread_local HostLoadCheck check;
  return check;
}
inline void host_check_load(const void* p, size_t bytes) {
  HostLoadCheck& c = host_load_check();
  const auto a = reinterpret_cast<uintptr_t>(p);
  if (a % bytes != 0) ++c.misaligned;
  if (c.n_ranges == 0) return;
  for (int i = 0; i < c.n_ranges; ++i) {
    if (a >= c.ranges[i].begin && a + bytes <= c.ranges[i].end) return;
  }
  ++c.outside;
}
#endif

// --- Loads and the CUDA intrinsics, with host emulations ---------------------------------------

struct Words4 {
  uint32_t w[4];
};
struct Floats2 {
  float x, y;
};
struct Floats4 {
  float x, y, z, w;
};

// 16 bytes at a 16-byte aligned address (one ld.global.nc.v4.u32).
HR_HOST_DEVICE inline Words4 load16(const void* p) {
#if defined(__CUDA_ARCH__)
  const uint4 v = __ldg(static_cast<const uint4*>(p));
  return {{v.x, v.y, v.z, v.w}};
#else
  host_check_load(p, 16);
  Words4 r;
  std::memcpy(r.w, p, 16);
  return r;
#endif
}

HR_HOST_DEVICE inline uint32_t load_u16(const void* p) {
#if defined(__CUDA_ARCH__)
  return __ldg(static_cast<const unsigned short*>(p));
#else
  host_check_load(p, 2);
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
#endif
}

HR_HOST_DEVICE inline uint32_t load_u32(const void* p) {
#if defined(__CUDA_ARCH__)
  return __ldg(static_cast<const unsigned int*>(p));
#else
  host_check_load(p, 4);
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
#endif
}

HR_HOST_DEVICE inline float load_f32(const float* p) {
#if defined(__CUDA_ARCH__)
  return __ldg(p);
#else
  host_check_load(p, 4);
  return *p;
#endif
}

HR_HOST_DEVICE inline Floats4 load_f32x4(const float* p) {
#if defined(__CUDA_ARCH__)
  const float4 v = __ldg(reinterpret_cast<const float4*>(p));
  return {v.x, v.y, v.z, v.w};
#else
  host_check_load(p, 16);
  return {p[0], p[1], p[2], p[3]};
#endif
}

HR_HOST_DEVICE inline Floats2 load_f32x2(const float* p) {
#if defined(__CUDA_ARCH__)
  const float2 v = __ldg(reinterpret_cast<const float2*>(p));
  return {v.x, v.y};
#else
  host_check_load(p, 8);
  return {p[0], p[1]};
#endif
}

// c + Σ_i a_i·b_i over the four signed bytes of a and b.
HR_HOST_DEVICE inline int dp4a(uint32_t a, uint32_t b, int c) {
#if defined(__CUDA_ARCH__)
  return __dp4a(static_cast<int>(a), static_cast<int>(b), c);
#else
  for (int i = 0; i < 4; ++i) {
    c += static_cast<int8_t>(a >> (8 * i)) * static_cast<int8_t>(b >> (8 * i));
  }
  return c;
#endif
}

// The low 32 bits of (hi:lo) >> shift, shift in 0..31.
HR_HOST_DEVICE inline uint32_t funnel_right(uint32_t lo, uint32_t hi, int shift) {
#if defined(__CUDA_ARCH__)
  return __funnelshift_r(lo, hi, static_cast<unsigned int>(shift));
#else
  return static_cast<uint32_t>(((static_cast<uint64_t>(hi) << 32) | lo) >> shift);
#endif
}

// Byte i of the result is byte (selector >> 4i) & 7 of the 8 bytes (hi:lo); selector nibbles < 8.
HR_HOST_DEVICE inline uint32_t byte_perm(uint32_t lo, uint32_t hi, uint32_t selector) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(lo, hi, selector);
#else
  const uint64_t bytes = (static_cast<uint64_t>(hi) << 32) | lo;
  uint32_t r = 0;
  for (int i = 0; i < 4; ++i) {
    const uint32_t b = static_cast<uint32_t>(bytes >> (8 * ((selector >> (4 * i)) & 7))) & 0xffu;
    r |= b << (8 * i);
  }
  return r;
#endif
}

// Each byte of a minus the same byte of b, modulo 256, without borrows between bytes.
HR_HOST_DEVICE inline uint32_t sub_bytes(uint32_t a, uint32_t b) {
  return ((a | 0x80808080u) - (b & 0x7f7f7f7fu)) ^ ((a ^ ~b) & 0x80808080u);
}

// Exact (every f16 is an f32): the hardware conversion on the device, tensor/fp16.h on the host.
HR_HOST_DEVICE inline float half_to_float(uint32_t h) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(static_cast<unsigned short>(h)));
#else
  return tensor::f16_to_f32(static_cast<uint16_t>(h));
#endif
}

// --- Unaligned quants from aligned 16-byte chunks ----------------------------------------------

// out[k] = bytes [s + 4k, s + 4k + 4) of the words w (little-endian), s in 0..15: two rounds of
// selects by whole words (registers cannot be indexed at run time), then funnel shifts.
template <int kWords>
HR_HOST_DEVICE inline void shift_words(const uint32_t (&w)[kWords + 4], int s,
                                       uint32_t (&out)[kWords]) {
  const int word = s / 4, bits = 8 * (s % 4);
  uint32_t by2[kWords + 2], by1[kWords + 1];
  HR_UNROLL
  for (int i = 0; i < kWords + 2; ++i) by2[i] = (word & 2) ? w[i + 2] : w[i];
  HR_UNROLL
  for (int i = 0; i < kWords + 1; ++i) by1[i] = (word & 1) ? by2[i + 1] : by2[i];
  HR_UNROLL
  for (int k = 0; k < kWords; ++k) out[k] = funnel_right(by1[k], by1[k + 1], bits);
}

// The bytes of the chunk at q before `end`, 2 at a time; 0 from `end` on. Not inlined on the
// device: inlined into every window, its loads would hold registers in the hot loop too.
HR_TAIL_CALL Words4 load_chunk_tail(const uint8_t* q, const uint8_t* end) {
  const auto a = reinterpret_cast<uintptr_t>(q), e = reinterpret_cast<uintptr_t>(end);
  Words4 r{{0, 0, 0, 0}};
  for (int i = 0; i < 8; ++i) {
    if (a + 2 * i < e) r.w[i / 2] |= load_u16(q + 2 * i) << (16 * (i % 2));
  }
  return r;
}

// The 16-byte chunk at aligned q; guarded, one that crosses `end` (the end of the weights, an even
// address) through load_chunk_tail. The branch depends on addresses only, never on loaded data,
// so it does not hold up the loads that a lane has in flight.
HR_HOST_DEVICE inline Words4 load_chunk(const uint8_t* q, const uint8_t* end, bool guarded) {
  if (guarded && reinterpret_cast<uintptr_t>(q) + 16 > reinterpret_cast<uintptr_t>(end))
    return load_chunk_tail(q, end);
  return load16(q);
}

// kWords·4 bytes at p (an even address) from the aligned chunks that cover them. Unguarded, the
// chunk after the last one needed is read whatever p's offset (one load fewer to predicate); the
// caller guarantees that it lies before `end`.
template <int kWords>
HR_HOST_DEVICE inline void load_window(const uint8_t* p, const uint8_t* end, bool guarded,
                                       uint32_t (&out)[kWords]) {
  static_assert(kWords % 4 == 0, "whole chunks");
  const int s = static_cast<int>(reinterpret_cast<uintptr_t>(p) % 16);
  const uint8_t* q = p - s;
  uint32_t w[kWords + 4];
  HR_UNROLL
  for (int c = 0; c <= kWords / 4; ++c) {
    Words4 chunk{{0, 0, 0, 0}};
    if (!guarded || c < kWords / 4 || s != 0) chunk = load_chunk(q + 16 * c, end, guarded);
    HR_UNROLL
    for (int i = 0; i < 4; ++i) w[4 * c + i] = chunk.w[i];
  }
  shift_words<kWords>(w, s, out);
}

// Rows ending closer than this to the end of the weights are read guarded: an unguarded window
// also reads the chunk after its bytes, up to 16 bytes past the row's last byte.
inline constexpr int64_t kWindowOverread = 32;

// --- 8-bit activations -------------------------------------------------------------------------

// Rows of 8-bit activations (act_q8.h) that a product reads, one per token.
struct ActQ8Rows {
  const uint8_t* data = nullptr;  // row 0 (16-byte aligned)
  size_t row_bytes = 0;           // act_q8_row_bytes(n_cols)
  int64_t n_cols = 0;
  HR_HOST_DEVICE const uint8_t* quants(int t) const { return data + t * row_bytes; }
  HR_HOST_DEVICE const float* scales(int t) const {
    return reinterpret_cast<const float*>(quants(t) + n_cols);
  }
};

// The integer dot of a lane's four weight words with 16 activation quants at column `col`.
HR_HOST_DEVICE inline int dot16(const uint32_t* q, const uint8_t* quants, int64_t col) {
  const Words4 a = load16(quants + col);
  int s = 0;
  HR_UNROLL
  for (int k = 0; k < 4; ++k) s = dp4a(q[k], a.w[k], s);
  return s;
}

// --- Shared unpacking ----------------------------------------------------------------------------

// Byte i (0..11) of the 12 packed scale bytes of a Q4_K/Q5_K block, held in three words.
HR_HOST_DEVICE inline int k_scale_byte(const uint32_t* s, int i) {
  const uint32_t w = i < 4 ? s[0] : i < 8 ? s[1] : s[2];
  return static_cast<int>((w >> (8 * (i % 4))) & 0xffu);
}

// Scale and min (0..63) of sub-block j of a Q4_K/Q5_K block (tensor/k_scales.h's layout).
HR_HOST_DEVICE inline void k4_scale_min(const uint32_t* s, int j, int* scale, int* min) {
  if (j < 4) {
    *scale = k_scale_byte(s, j) & 63;
    *min = k_scale_byte(s, j + 4) & 63;
  } else {
    *scale = (k_scale_byte(s, j + 4) & 0x0f) | ((k_scale_byte(s, j - 4) >> 6) << 4);
    *min = (k_scale_byte(s, j + 4) >> 4) | ((k_scale_byte(s, j) >> 6) << 4);
  }
}

// Bits 0..3 of x moved to bit 4 of bytes 0..3 (the fifth bits of four Q5_0/Q5_1 values).
HR_HOST_DEVICE inline uint32_t spread_fifth_bits(uint32_t x) {
  return ((x & 1u) | ((x & 2u) << 7) | ((x & 4u) << 14) | ((x & 8u) << 21)) << 4;
}

// The IQ4_NL/IQ4_XS level of each of the four nibble indices (one per byte, 0..15) of q, as
// signed bytes: two byte permutations of the 16-byte codebook, picked by each index's bit 3.
HR_HOST_DEVICE constexpr uint32_t pack_iq4_levels(int first) {
  uint32_t word = 0;
  for (int i = 3; i >= 0; --i)
    word = word << 8 | static_cast<uint8_t>(tensor::kIq4NlLevels[first + i]);
  return word;
}
HR_HOST_DEVICE inline uint32_t iq4_levels(uint32_t q) {
  constexpr uint32_t kTable[4] = {pack_iq4_levels(0), pack_iq4_levels(4), pack_iq4_levels(8),
                                  pack_iq4_levels(12)};
  const uint32_t low3 = q & 0x07070707u;
  const uint32_t packed = low3 | (low3 >> 4);
  const uint32_t selector = (packed & 0xffu) | ((packed >> 8) & 0xff00u);
  const uint32_t first = byte_perm(kTable[0], kTable[1], selector);
  const uint32_t second = byte_perm(kTable[2], kTable[3], selector);
  const uint32_t high = ((q >> 3) & 0x01010101u) * 0xffu;
  return (first & ~high) | (second & high);
}

// --- Per-type pieces ---------------------------------------------------------------------------
//
// Q8Lane<T> gives, for weight type T:
//   kBlockValues, kBlockBytes, kPieces (per block), kUnroll (pieces a lane loads before it uses
//   them, for one token: the loads in flight), kBlockAlign (the alignment its loads need of a
//   block's start);
//   Piece load(block, piece, end, guarded): the piece's weight bytes (and scales) in registers;
//   dot<kTok>(piece data, piece, block index, activations, n_tok, acc): acc[t] += the piece's
//   values · token t's activations, for t < n_tok.
// Weight value i of the block meets activation column kBlockValues·block + i; activation block
// b's scales are (d, s) = (its step, d·Σq), so a format with an offset adds offset·s once per
// activation block.

template <DType T>
struct Q8Lane;

// Q4_K and Q5_K: the lane of piece p = 2c + h holds qs bytes [32c + 16h, +16): values 64c + 16h +
// i (low nibbles, sub-block 2c) and 64c + 32 + 16h + i (high nibbles, sub-block 2c + 1). The lane
// with h = 0 adds both sub-blocks' min terms.
template <int kTok>
HR_HOST_DEVICE inline void k4_piece_dot(const Words4& head, const uint32_t (&lo)[4],
                                        const uint32_t (&hi)[4], int piece, int64_t block,
                                        const ActQ8Rows& x, int n_tok, float (&acc)[kTok]) {
  const int c = piece / 2, h = piece % 2;
  const float d = half_to_float(head.w[0] & 0xffffu), dmin = half_to_float(head.w[0] >> 16);
  int sc0, m0, sc1, m1;
  k4_scale_min(head.w + 1, 2 * c, &sc0, &m0);
  k4_scale_min(head.w + 1, 2 * c + 1, &sc1, &m1);
  const int64_t col = 256 * block + 64 * c + 16 * h;
  const int64_t act_block = 8 * block + 2 * c;  // the low nibbles'; the high ones' is next
  HR_UNROLL
  for (int t = 0; t < kTok; ++t) {
    if (t >= n_tok) break;
    const int i0 = dot16(lo, x.quants(t), col), i1 = dot16(hi, x.quants(t), col + 32);
    const Floats4 s = load_f32x4(x.scales(t) + 2 * act_block);  // d0, s0, d1, s1
    float v = d * (static_cast<float>(sc0 * i0) * s.x + static_cast<float>(sc1 * i1) * s.z);
    if (h == 0) v -= dmin * (static_cast<float>(m0) * s.y + static_cast<float>(m1) * s.w);
    acc[t] += v;
  }
}

template <>
struct Q8Lane<DType::kQ4_K> {
  static constexpr int kBlockValues = 256, kBlockBytes = 144, kPieces = 8, kUnroll = 4;
  static constexpr int kBlockAlign = 16;
  struct Piece {
    Words4 head;  // d, dmin, the 12 scale bytes
    Words4 qs;
  };
  HR_HOST_DEVICE static Piece load(const uint8_t* block, int piece, const uint8_t*, bool) {
    return {load16(block), load16(block + 16 + 16 * piece)};
  }
  template <int kTok>
  HR_HOST_DEVICE static void dot(const Piece& w, int piece, int64_t block, const ActQ8Rows& x,
                                 int n_tok, float (&acc)[kTok]) {
    uint32_t lo[4], hi[4];
    HR_UNROLL
    for (int k = 0; k < 4; ++k) {
      lo[k] = w.qs.w[k] & 0x0f0f0f0fu;
      hi[k] = (w.qs.w[k] >> 4) & 0x0f0f0f0fu;
    }
    k4_piece_dot(w.head, lo, hi, piece, block, x, n_tok, acc);
  }
};

template <>
struct Q8Lane<DType::kQ5_K> {
  static constexpr int kBlockValues = 256, kBlockBytes = 176, kPieces = 8, kUnroll = 3;
  static constexpr int kBlockAlign = 16;
  struct Piece {
    Words4 head;
    Words4 qh;  // fifth bits of qh bytes [16h, +16): bit 2c of the low, 2c + 1 of the high values
    Words4 qs;
  };
  HR_HOST_DEVICE static Piece load(const uint8_t* block, int piece, const uint8_t*, bool) {
    return {load16(block), load16(block + 16 + 16 * (piece % 2)), load16(block + 48 + 16 * piece)};
  }
  template <int kTok>
  HR_HOST_DEVICE static void dot(const Piece& w, int piece, int64_t block, const ActQ8Rows& x,
                                 int n_tok, float (&acc)[kTok]) {
    const int c = piece / 2;
    uint32_t lo[4], hi[4];
    HR_UNROLL
    for (int k = 0; k < 4; ++k) {
      lo[k] = (w.qs.w[k] & 0x0f0f0f0fu) | (((w.qh.w[k] >> (2 * c)) & 0x01010101u) << 4);
      hi[k] = ((w.qs.w[k] >> 4) & 0x0f0f0f0fu) | (((w.qh.w[k] >> (2 * c + 1)) & 0x01010101u) << 4);
    }
    k4_piece_dot(w.head, lo, hi, piece, block, x, n_tok, acc);
  }
};

// Q6_K: piece p = 4·half + 2·pair + g holds ql bytes [64·half + 32·pair + 16g, +16) and the qh
// bytes [32·half + 16g, +16) of the same values: low nibbles are values 128·half + 32·pair + 16g
// + i (sub-block 8·half + 2·pair + g), high nibbles the values 64 further (sub-block + 4).
template <>
struct Q8Lane<DType::kQ6_K> {
  static constexpr int kBlockValues = 256, kBlockBytes = 210, kPieces = 8, kUnroll = 2;
  static constexpr int kBlockAlign = 2;
  struct Piece {
    uint32_t ql[4], qh[4];
    uint32_t scales_lo, scales_hi;  // the two scale bytes of each nibble half's sub-block pair
    uint32_t d;
  };
  HR_HOST_DEVICE static Piece load(const uint8_t* block, int piece, const uint8_t* end,
                                   bool guarded) {
    const int half = piece / 4, pair = (piece / 2) % 2, g = piece % 2;
    Piece w;
    load_window<4>(block + 64 * half + 32 * pair + 16 * g, end, guarded, w.ql);
    load_window<4>(block + 128 + 32 * half + 16 * g, end, guarded, w.qh);
    w.scales_lo = load_u16(block + 192 + 8 * half + 2 * pair);
    w.scales_hi = load_u16(block + 196 + 8 * half + 2 * pair);
    w.d = load_u16(block + 208);
    return w;
  }
  template <int kTok>
  HR_HOST_DEVICE static void dot(const Piece& w, int piece, int64_t block, const ActQ8Rows& x,
                                 int n_tok, float (&acc)[kTok]) {
    const int half = piece / 4, pair = (piece / 2) % 2, g = piece % 2;
    const float d = half_to_float(w.d);
    const int sc_lo = static_cast<int8_t>(w.scales_lo >> (8 * g));
    const int sc_hi = static_cast<int8_t>(w.scales_hi >> (8 * g));
    uint32_t lo[4], hi[4];  // q − 32 as signed bytes
    HR_UNROLL
    for (int k = 0; k < 4; ++k) {
      const uint32_t q_lo =
          (w.ql[k] & 0x0f0f0f0fu) | (((w.qh[k] >> (2 * pair)) & 0x03030303u) << 4);
      const uint32_t q_hi =
          ((w.ql[k] >> 4) & 0x0f0f0f0fu) | (((w.qh[k] >> (4 + 2 * pair)) & 0x03030303u) << 4);
      lo[k] = sub_bytes(q_lo, 0x20202020u);
      hi[k] = sub_bytes(q_hi, 0x20202020u);
    }
    const int64_t col = 256 * block + 128 * half + 32 * pair + 16 * g;
    HR_UNROLL
    for (int t = 0; t < kTok; ++t) {
      if (t >= n_tok) break;
      const int i0 = dot16(lo, x.quants(t), col), i1 = dot16(hi, x.quants(t), col + 64);
      const float d0 = load_f32(x.scales(t) + 2 * (col / 32));
      const float d1 = load_f32(x.scales(t) + 2 * ((col + 64) / 32));
      acc[t] += d * (static_cast<float>(sc_lo * i0) * d0 + static_cast<float>(sc_hi * i1) * d1);
    }
  }
};

// Q8_0: one piece per block, its 32 quants.
template <>
struct Q8Lane<DType::kQ8_0> {
  static constexpr int kBlockValues = 32, kBlockBytes = 34, kPieces = 1, kUnroll = 2;
  static constexpr int kBlockAlign = 2;
  struct Piece {
    uint32_t qs[8];
    uint32_t d;
  };
  HR_HOST_DEVICE static Piece load(const uint8_t* block, int, const uint8_t* end, bool guarded) {
    Piece w;
    load_window<8>(block + 2, end, guarded, w.qs);
    w.d = load_u16(block);
    return w;
  }
  template <int kTok>
  HR_HOST_DEVICE static void dot(const Piece& w, int, int64_t block, const ActQ8Rows& x, int n_tok,
                                 float (&acc)[kTok]) {
    const float d = half_to_float(w.d);
    HR_UNROLL
    for (int t = 0; t < kTok; ++t) {
      if (t >= n_tok) break;
      const int i =
          dot16(w.qs, x.quants(t), 32 * block) + dot16(w.qs + 4, x.quants(t), 32 * block + 16);
      acc[t] += d * load_f32(x.scales(t) + 2 * block) * static_cast<float>(i);
    }
  }
};

// The 32-value nibble formats (Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL): one piece per block, byte j of qs
// holding value j (low nibble) and j + 16 (high nibble). Given the quants of values 0..15 and
// 16..31 as bytes, dot_nibble_block adds d·(d8·Σq·q8) + offset·s8 per token — the offset being
// the value a quant of 0 stands for, times d or alone: Q4_0 −8d, Q5_0 −16d, Q4_1/Q5_1 m.
template <int kTok>
HR_HOST_DEVICE inline void dot_nibble_block(const uint32_t (&lo)[4], const uint32_t (&hi)[4],
                                            float d, float offset, int64_t block,
                                            const ActQ8Rows& x, int n_tok, float (&acc)[kTok]) {
  HR_UNROLL
  for (int t = 0; t < kTok; ++t) {
    if (t >= n_tok) break;
    const int i = dot16(lo, x.quants(t), 32 * block) + dot16(hi, x.quants(t), 32 * block + 16);
    const Floats2 s = load_f32x2(x.scales(t) + 2 * block);
    acc[t] += d * s.x * static_cast<float>(i) + offset * s.y;
  }
}

HR_HOST_DEVICE inline void split_nibbles(const uint32_t (&qs)[4], uint32_t (&lo)[4],
                                         uint32_t (&hi)[4]) {
  HR_UNROLL
  for (int k = 0; k < 4; ++k) {
    lo[k] = qs[k] & 0x0f0f0f0fu;
    hi[k] = (qs[k] >> 4) & 0x0f0f0f0fu;
  }
}

template <>
struct Q8Lane<DType::kQ4_0> {
  static constexpr int kBlockValues = 32, kBlockBytes = 18, kPieces = 1, kUnroll = 4;
  static constexpr int kBlockAlign = 2;
  struct Piece {
    uint32_t qs[4];
    uint32_t d;
  };
  HR_HOST_DEVICE static Piece load(const uint8_t* block, int, const uint8_t* end, bool guarded) {
    Piece w;
    load_window<4>(block + 2, end, guarded, w.qs);
    w.d = load_u16(block);
    return w;
  }
  template <int kTok>
  HR_HOST_DEVICE static void dot(const Piece& w, int, int64_t block, const ActQ8Rows& x, int n_tok,
                                 float (&acc)[kTok]) {
    uint32_t lo[4], hi[4];
    split_nibbles(w.qs, lo, hi);
    const float d = half_to_float(w.d);
    dot_nibble_block(lo, hi, d, -8.0f * d, block, x, n_tok, acc);
  }
};

template <>
struct Q8Lane<DType::kQ4_1> {
  static constexpr int kBlockValues = 32, kBlockBytes = 20, kPieces = 1, kUnroll = 4;
  static constexpr int kBlockAlign = 4;
  struct Piece {
    uint32_t qs[4];
    uint32_t dm;  // d | m << 16
  };
  HR_HOST_DEVICE static Piece load(const uint8_t* block, int, const uint8_t* end, bool guarded) {
    Piece w;
    load_window<4>(block + 4, end, guarded, w.qs);
    w.dm = load_u32(block);
    return w;
  }
  template <int kTok>
  HR_HOST_DEVICE static void dot(const Piece& w, int, int64_t block, const ActQ8Rows& x, int n_tok,
                                 float (&acc)[kTok]) {
    uint32_t lo[4], hi[4];
    split_nibbles(w.qs, lo, hi);
    dot_nibble_block(lo, hi, half_to_float(w.dm & 0xffffu), half_to_float(w.dm >> 16), block, x,
                     n_tok, acc);
  }
};

// The fifth bits of Q5_0/Q5_1: bit j of qh belongs to value j.
HR_HOST_DEVICE inline void add_fifth_bits(uint32_t qh, uint32_t (&lo)[4], uint32_t (&hi)[4]) {
  HR_UNROLL
  for (int k = 0; k < 4; ++k) {
    lo[k] |= spread_fifth_bits(qh >> (4 * k));
    hi[k] |= spread_fifth_bits(qh >> (16 + 4 * k));
  }
}

template <>
struct Q8Lane<DType::kQ5_0> {
  static constexpr int kBlockValues = 32, kBlockBytes = 22, kPieces = 1, kUnroll = 4;
  static constexpr int kBlockAlign = 2;
  struct Piece {
    uint32_t qs[4];
    uint32_t qh;
    uint32_t d;
  };
  HR_HOST_DEVICE static Piece load(const uint8_t* block, int, const uint8_t* end, bool guarded) {
    Piece w;
    load_window<4>(block + 6, end, guarded, w.qs);
    w.qh = load_u16(block + 2) | load_u16(block + 4) << 16;
    w.d = load_u16(block);
    return w;
  }
  template <int kTok>
  HR_HOST_DEVICE static void dot(const Piece& w, int, int64_t block, const ActQ8Rows& x, int n_tok,
                                 float (&acc)[kTok]) {
    uint32_t lo[4], hi[4];
    split_nibbles(w.qs, lo, hi);
    add_fifth_bits(w.qh, lo, hi);
    const float d = half_to_float(w.d);
    dot_nibble_block(lo, hi, d, -16.0f * d, block, x, n_tok, acc);
  }
};

template <>
struct Q8Lane<DType::kQ5_1> {
  static constexpr int kBlockValues = 32, kBlockBytes = 24, kPieces = 1, kUnroll = 4;
  static constexpr int kBlockAlign = 4;
  struct Piece {
    uint32_t qs[4];
    uint32_t qh;
    uint32_t dm;
  };
  HR_HOST_DEVICE static Piece load(const uint8_t* block, int, const uint8_t* end, bool guarded) {
    Piece w;
    load_window<4>(block + 8, end, guarded, w.qs);
    w.qh = load_u32(block + 4);
    w.dm = load_u32(block);
    return w;
  }
  template <int kTok>
  HR_HOST_DEVICE static void dot(const Piece& w, int, int64_t block, const ActQ8Rows& x, int n_tok,
                                 float (&acc)[kTok]) {
    uint32_t lo[4], hi[4];
    split_nibbles(w.qs, lo, hi);
    add_fifth_bits(w.qh, lo, hi);
    dot_nibble_block(lo, hi, half_to_float(w.dm & 0xffffu), half_to_float(w.dm >> 16), block, x,
                     n_tok, acc);
  }
};

template <>
struct Q8Lane<DType::kIQ4_NL> {
  static constexpr int kBlockValues = 32, kBlockBytes = 18, kPieces = 1, kUnroll = 4;
  static constexpr int kBlockAlign = 2;
  using Piece = Q8Lane<DType::kQ4_0>::Piece;
  HR_HOST_DEVICE static Piece load(const uint8_t* block, int piece, const uint8_t* end,
                                   bool guarded) {
    return Q8Lane<DType::kQ4_0>::load(block, piece, end, guarded);
  }
  template <int kTok>
  HR_HOST_DEVICE static void dot(const Piece& w, int, int64_t block, const ActQ8Rows& x, int n_tok,
                                 float (&acc)[kTok]) {
    uint32_t lo[4], hi[4];
    split_nibbles(w.qs, lo, hi);
    HR_UNROLL
    for (int k = 0; k < 4; ++k) {
      lo[k] = iq4_levels(lo[k]);
      hi[k] = iq4_levels(hi[k]);
    }
    dot_nibble_block(lo, hi, half_to_float(w.d), 0.0f, block, x, n_tok, acc);
  }
};

// IQ4_XS: piece p is sub-block p (32 values), its qs bytes [16p, +16) in Q4_0's nibble order.
template <>
struct Q8Lane<DType::kIQ4_XS> {
  static constexpr int kBlockValues = 256, kBlockBytes = 136, kPieces = 8, kUnroll = 4;
  static constexpr int kBlockAlign = 4;
  struct Piece {
    uint32_t qs[4];
    uint32_t head;      // d | scales_h << 16
    uint32_t scales_l;  // the low nibbles of the eight sub-block scales
  };
  HR_HOST_DEVICE static Piece load(const uint8_t* block, int piece, const uint8_t* end,
                                   bool guarded) {
    Piece w;
    load_window<4>(block + 8 + 16 * piece, end, guarded, w.qs);
    w.head = load_u32(block);
    w.scales_l = load_u32(block + 4);
    return w;
  }
  template <int kTok>
  HR_HOST_DEVICE static void dot(const Piece& w, int piece, int64_t block, const ActQ8Rows& x,
                                 int n_tok, float (&acc)[kTok]) {
    const int scale = static_cast<int>(((w.scales_l >> (4 * piece)) & 0xfu) |
                                       (((w.head >> (16 + 2 * piece)) & 0x3u) << 4));
    const float dl = half_to_float(w.head & 0xffffu) * static_cast<float>(scale - 32);
    uint32_t lo[4], hi[4];
    split_nibbles(w.qs, lo, hi);
    HR_UNROLL
    for (int k = 0; k < 4; ++k) {
      lo[k] = iq4_levels(lo[k]);
      hi[k] = iq4_levels(hi[k]);
    }
    dot_nibble_block(lo, hi, dl, 0.0f, 8 * block + piece, x, n_tok, acc);
  }
};

// --- A lane's share of a row -------------------------------------------------------------------

// acc[t] += the pieces lane, lane + n_lanes, … of one row's n_blocks blocks times token t's
// activations. Each round loads kRounds pieces before using any, so that several 16-byte loads
// are in flight. `guarded`: the row ends within kWindowOverread bytes of `end`.
template <DType T, int kTok>
HR_HOST_DEVICE inline void q8_row_lane_dot(const uint8_t* row, int64_t n_blocks, const uint8_t* end,
                                           bool guarded, const ActQ8Rows& x, int n_tok, int lane,
                                           int n_lanes, float (&acc)[kTok]) {
  using L = Q8Lane<T>;
  // With several tokens each piece already issues kTok activation loads: fewer pieces per round
  // keep the registers in bounds.
  constexpr int kRounds = kTok == 1 ? L::kUnroll : (L::kUnroll + 1) / 2;
  const int64_t n_pieces = n_blocks * L::kPieces;
  const int64_t stride = static_cast<int64_t>(n_lanes) * kRounds;
  HR_NO_UNROLL
  for (int64_t p0 = lane; p0 < n_pieces; p0 += stride) {
    typename L::Piece w[kRounds];
    HR_UNROLL
    for (int u = 0; u < kRounds; ++u) {
      const int64_t p = p0 + static_cast<int64_t>(u) * n_lanes;
      if (p < n_pieces) {
        w[u] = L::load(row + (p / L::kPieces) * L::kBlockBytes, static_cast<int>(p % L::kPieces),
                       end, guarded);
      }
    }
    HR_UNROLL
    for (int u = 0; u < kRounds; ++u) {
      const int64_t p = p0 + static_cast<int64_t>(u) * n_lanes;
      if (p < n_pieces) {
        L::template dot<kTok>(w[u], static_cast<int>(p % L::kPieces), p / L::kPieces, x, n_tok,
                              acc);
      }
    }
  }
}

// A weight matrix as the q8 products read it.
struct Q8Matrix {
  const uint8_t* data = nullptr;  // 16-byte aligned
  const uint8_t* end = nullptr;   // the end of the tensor's bytes: no load reaches past it
  size_t row_bytes = 0;
  int64_t n_blocks = 0;  // weight blocks per row
  DType type = DType::kF32;
};

template <DType T, int kTok>
HR_HOST_DEVICE inline void q8_row_dot_typed(const Q8Matrix& m, int64_t r, const ActQ8Rows& x,
                                            int n_tok, int lane, int n_lanes, float (&acc)[kTok]) {
  const uint8_t* row = m.data + r * m.row_bytes;
  const uint8_t* row_end = row + m.n_blocks * Q8Lane<T>::kBlockBytes;
  // Formats of whole 16-byte chunks never read past their rows.
  const bool guarded = Q8Lane<T>::kBlockAlign < 16 && m.end - row_end < kWindowOverread;
  q8_row_lane_dot<T, kTok>(row, m.n_blocks, m.end, guarded, x, n_tok, lane, n_lanes, acc);
}

// The types with pieces above, and a visitor over them (the kernels switch on a matrix's type,
// uniformly for a whole thread block).
HR_HOST_DEVICE constexpr bool has_q8_lanes(DType type) {
  switch (type) {
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kQ8_0:
    case DType::kIQ4_NL:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kIQ4_XS:
      return true;
    default:
      return false;
  }
}

template <class F>
HR_HOST_DEVICE inline void visit_q8_type(DType type, F&& f) {
  switch (type) {
    case DType::kQ4_0:
      return f.template operator()<DType::kQ4_0>();
    case DType::kQ4_1:
      return f.template operator()<DType::kQ4_1>();
    case DType::kQ5_0:
      return f.template operator()<DType::kQ5_0>();
    case DType::kQ5_1:
      return f.template operator()<DType::kQ5_1>();
    case DType::kQ8_0:
      return f.template operator()<DType::kQ8_0>();
    case DType::kIQ4_NL:
      return f.template operator()<DType::kIQ4_NL>();
    case DType::kQ4_K:
      return f.template operator()<DType::kQ4_K>();
    case DType::kQ5_K:
      return f.template operator()<DType::kQ5_K>();
    case DType::kQ6_K:
      return f.template operator()<DType::kQ6_K>();
    case DType::kIQ4_XS:
      return f.template operator()<DType::kIQ4_XS>();
    default:
      return;
  }
}

// Lane `lane` of a team of n_lanes: its partial dot of row r of m with each token's activations
// (acc[t] += …). The team's sum over its lanes is the row's product.
template <int kTok>
HR_HOST_DEVICE inline void q8_row_dot(const Q8Matrix& m, int64_t r, const ActQ8Rows& x, int n_tok,
                                      int lane, int n_lanes, float (&acc)[kTok]) {
  visit_q8_type(m.type,
                [&]<DType T>() { q8_row_dot_typed<T, kTok>(m, r, x, n_tok, lane, n_lanes, acc); });
}

// Pieces in one row of n_blocks blocks of `type`, and a block's size and alignment (0 for a type
// without pieces).
struct Q8Layout {
  int block_values = 0, block_bytes = 0, pieces = 0, block_align = 0;
};
HR_HOST_DEVICE inline Q8Layout q8_layout(DType type) {
  Q8Layout layout;
  visit_q8_type(type, [&]<DType T>() {
    using L = Q8Lane<T>;
    layout = {L::kBlockValues, L::kBlockBytes, L::kPieces, L::kBlockAlign};
  });
  return layout;
}

// --- Epilogues ---------------------------------------------------------------------------------

// The gate's activation, operation for operation as ref::gelu (tanh approximation) and ref::silu.
HR_HOST_DEVICE inline float glu_activation(GluActivation act, float x) {
  if (act == GluActivation::kSilu) return div_rn(x, add_rn(1.0f, expf(-x)));
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  const float cube = mul_rn(mul_rn(mul_rn(0.044715f, x), x), x);
  const float z = mul_rn(kSqrt2OverPi, add_rn(x, cube));
  return mul_rn(mul_rn(0.5f, x), add_rn(1.0f, tanhf(z)));
}

// A warp quantizing a 32-value block, one value per lane (act_q8.h): every lane takes the block's
// largest magnitude (a max-reduction, which any order gives alike), quantizes its own value, and
// the integer sum of the quants (likewise order-free) gives the block's scales.
HR_HOST_DEVICE inline float act_q8_lane_magnitude(float x) {
  return fmaxf(0.0f, fabsf(x));
}
HR_HOST_DEVICE inline void act_q8_block_scales(float amax, int quant_sum, float* scales) {
  scales[0] = amax / 127.0f;
  scales[1] = scales[0] * static_cast<float>(quant_sum);
}

}  // namespace kernels::cuda
