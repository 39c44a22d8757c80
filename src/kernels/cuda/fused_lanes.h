// The arithmetic of the residual-stream, top-k and scatter kernels (fused.cu) as functions g++ also
// compiles: tests/kernels/cuda_fused_lanes_test.cpp runs them thread by thread and lane by lane on
// the host against the reference, so an indexing or rounding mistake shows without a GPU.
//
// Nothing here calls a CUDA intrinsic outside `#ifdef __CUDA_ARCH__`; the shuffles, ballots and
// barriers between these steps live in fused.cu, and the host test repeats them on arrays.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/act_q8.h"
#include "kernels/cuda/rounding.h"
#include "kernels/op_args.h"

// Unrolls the loop that follows in device code, so per-thread arrays indexed by the loop counter
// stay in registers; host compilers (g++, and nvcc's host pass) would warn about the pragma.
#if defined(__CUDA_ARCH__)
#define HR_FUSED_UNROLL _Pragma("unroll")
#else
#define HR_FUSED_UNROLL
#endif
#if defined(__CUDACC__)
#define HR_FUSED_INLINE __forceinline__
#else
#define HR_FUSED_INLINE inline
#endif

namespace kernels::cuda::fused {

inline constexpr int kWarpSize = 32;

// --- Rounding: each f32 operation rounded on its own (rounding.h), as the reference's loops
// round them.

// v² in double is exact (24-bit mantissas), so a fused multiply-add that adds it to a sum rounds
// exactly as the reference's separate add does.
HR_HOST_DEVICE inline double square(float v) {
  return static_cast<double>(v) * static_cast<double>(v);
}

// A block's total from its warps' totals, added in warp order: every thread of the block computes
// it the same way, so no broadcast is needed.
HR_HOST_DEVICE inline double sum_in_order(const double* warp_totals, int n_warps) {
  double total = 0.0;
  for (int w = 0; w < n_warps; ++w) total += warp_totals[w];
  return total;
}

// ref::rmsnorm's factor 1 / sqrt(mean(x²) + eps) of a row of n values, from its sum of squares.
HR_HOST_DEVICE inline float rms_inverse(double sum_sq, int64_t n, float eps) {
  return static_cast<float>(1.0 / sqrt(sum_sq / static_cast<double>(n) + eps));
}

// ref::rmsnorm's product for one value: (x · inv) · w, in that order.
HR_HOST_DEVICE inline float normed(float x, float inv, float w) {
  return mul_rn(mul_rn(x, inv), w);
}

// --- 8-bit activations (act_q8.h), a warp per 32-value block: lane l holds value l, the warp takes
// the maximum of act_q8_lane_magnitude over its lanes, each lane rounds its value with
// act_q8_quant, the warp adds the quants, and lane 0 writes act_q8_block_scales.

// fmaxf ignores a NaN, as quantize_act_block's running maximum (from 0) does, so the maximum over
// the lanes in any order equals the reference's.
HR_HOST_DEVICE inline float act_q8_lane_magnitude(float v) {
  return fmaxf(0.0f, fabsf(v));
}

// The block's (d, s) as quantize_act_block writes them, from its maximum and its quants' sum.
HR_HOST_DEVICE inline void act_q8_block_scales(float amax, int quant_sum, float* scales) {
  scales[0] = div_rn(amax, 127.0f);
  scales[1] = mul_rn(scales[0], static_cast<float>(quant_sum));
}

// --- residual_norm: one block of `threads` threads per row; value k of thread t is the row's index
// t + k·threads, so a warp's 32 values at each k are consecutive (one 8-bit block when the row
// width is a multiple of 32), and the values stay in that thread's registers from the first load
// to the last write. Between the phases below the block sums each norm's squares (thread partials
// in k order, a warp butterfly, then sum_in_order) and turns them into a factor (rms_inverse).

inline constexpr int kResidualMaxThreads = 1024;
inline constexpr int kResidualMinPerThread = 4;
inline constexpr int kResidualMaxPerThread = 32;

struct ResidualShape {
  int threads = 0;     // a multiple of 32
  int per_thread = 0;  // 4, 8, 16 or 32: the kernel's template instance
};

// Whether a row of n values fits one block's registers (n_embd of every known model does).
HR_HOST_DEVICE constexpr bool residual_norm_fits(int64_t n) {
  return n > 0 && n <= int64_t{kResidualMaxThreads} * kResidualMaxPerThread;
}

// The fewest values per thread that fit the row into one block, then the fewest threads.
HR_HOST_DEVICE constexpr ResidualShape residual_norm_shape(int64_t n) {
  int per = kResidualMinPerThread;
  while (per < kResidualMaxPerThread && n > int64_t{kResidualMaxThreads} * per) per *= 2;
  const int64_t threads = (n + per - 1) / per;
  return {static_cast<int>((threads + kWarpSize - 1) / kWarpSize * kWarpSize), per};
}

// What one thread holds of its row between the phases.
template <int kPer>
struct ResidualLane {
  float b0[kPer];  // branch[0], then the branch sum b
  float b1[kPer];  // branch[1]
  float x[kPer];   // x, then the updated x
};

HR_HOST_DEVICE inline bool residual_branch_normed(const ResidualNorm& a, int branch) {
  return a.branch[branch] != nullptr && a.branch_norm[branch] != nullptr;
}

// Whether some output normalizes x (they all share one factor: the norm of the updated x).
HR_HOST_DEVICE inline bool residual_needs_x_norm(const ResidualNorm& a) {
  for (int j = 0; j < a.n_out; ++j) {
    if (a.out[j].y != nullptr && a.out[j].normalize) return true;
  }
  return false;
}

// Phase 1: loads the thread's values of x and the branches, and adds the squares of the branches
// that have a norm to sq[0], sq[1].
template <int kPer>
HR_HOST_DEVICE HR_FUSED_INLINE void residual_load(const ResidualNorm& a, int row, int tid,
                                                  int threads, ResidualLane<kPer>& lane,
                                                  double sq[2]) {
  const int64_t base = static_cast<int64_t>(row) * a.n;
  const bool norm0 = residual_branch_normed(a, 0), norm1 = residual_branch_normed(a, 1);
  HR_FUSED_UNROLL
  for (int k = 0; k < kPer; ++k) {
    const int64_t i = tid + static_cast<int64_t>(k) * threads;
    if (i >= a.n) continue;
    lane.x[k] = a.x[base + i];
    lane.b0[k] = a.branch[0] != nullptr ? a.branch[0][base + i] : 0.0f;
    lane.b1[k] = a.branch[1] != nullptr ? a.branch[1][base + i] : 0.0f;
    if (norm0) sq[0] += square(lane.b0[k]);
    if (norm1) sq[1] += square(lane.b1[k]);
  }
}

// Phase 2: b = norm(branch[0]) + norm(branch[1]) with the branches' factors inv[0], inv[1]. The
// normalized branch[1] is written back, as the composed default's in-place rmsnorm leaves it.
// Returns the thread's part of Σb² when the sum has a norm of its own.
template <int kPer>
HR_HOST_DEVICE HR_FUSED_INLINE double residual_branch_sum(const ResidualNorm& a, int row, int tid,
                                                          int threads, const float inv[2],
                                                          ResidualLane<kPer>& lane) {
  const int64_t base = static_cast<int64_t>(row) * a.n;
  const bool norm0 = residual_branch_normed(a, 0), norm1 = residual_branch_normed(a, 1);
  double sq = 0.0;
  if (a.branch[0] == nullptr) return sq;  // no residual step: only the outputs of x
  HR_FUSED_UNROLL
  for (int k = 0; k < kPer; ++k) {
    const int64_t i = tid + static_cast<int64_t>(k) * threads;
    if (i >= a.n) continue;
    float b = norm0 ? normed(lane.b0[k], inv[0], a.branch_norm[0][i]) : lane.b0[k];
    if (a.branch[1] != nullptr) {
      float b1 = lane.b1[k];
      if (norm1) {
        b1 = normed(b1, inv[1], a.branch_norm[1][i]);
        a.branch[1][base + i] = b1;
      }
      b = add_rn(b, b1);
    }
    lane.b0[k] = b;
    if (a.sum_norm != nullptr) sq += square(b);
  }
  return sq;
}

// Phase 3: b = norm(b; sum_norm) with factor inv_sum, written over branch[0]; x = (x + b) ·
// x_scale, written back (without branch[0], x stays as it is). Returns the thread's part of Σx²
// when `x_squares` (an output normalizes).
template <int kPer>
HR_HOST_DEVICE HR_FUSED_INLINE double residual_update_x(const ResidualNorm& a, int row, int tid,
                                                        int threads, float inv_sum, bool x_squares,
                                                        ResidualLane<kPer>& lane) {
  const int64_t base = static_cast<int64_t>(row) * a.n;
  double sq = 0.0;
  HR_FUSED_UNROLL
  for (int k = 0; k < kPer; ++k) {
    const int64_t i = tid + static_cast<int64_t>(k) * threads;
    if (i >= a.n) continue;
    if (a.branch[0] != nullptr) {
      const float b =
          a.sum_norm != nullptr ? normed(lane.b0[k], inv_sum, a.sum_norm[i]) : lane.b0[k];
      a.branch[0][base + i] = b;
      float x = add_rn(lane.x[k], b);
      if (a.x_scale != 1.0f) x = mul_rn(x, a.x_scale);
      a.x[base + i] = x;
      lane.x[k] = x;
    }
    if (x_squares) sq += square(lane.x[k]);
  }
  return sq;
}

// Phase 4, per output and value: y = (normalize ? norm(x; w) : x) · scale ⊙ mul, with the updated
// x's factor inv_x; x itself when the output has no y (only its 8-bit form is wanted).
HR_HOST_DEVICE inline float residual_output(const ResidualNorm::Output& o, float x, float inv_x,
                                            int64_t i) {
  if (o.y == nullptr) return x;
  float y = o.normalize ? normed(x, inv_x, o.w != nullptr ? o.w[i] : 1.0f) : x;
  if (o.scale != 1.0f) y = mul_rn(y, o.scale);
  if (o.mul != nullptr) y = mul_rn(y, o.mul[i]);
  return y;
}

// --- top_k: one block of kTopKWarps warps per row. Warp w reads the row in groups of kTopKGroup
// consecutive values (groups w, w + kTopKWarps, …, so a warp meets indices in increasing order),
// 32 per lane. Each value a warp admits goes to its buffer; a full buffer is merged into the
// warp's list, the best k it has seen, whose last entry is the bar later values must pass. At the
// end the warps' lists are merged by position. Values are compared as keys (topk_key): one integer
// per (value, index) pair whose order is ref::top_k's, with no two equal.

inline constexpr int kTopKMax = 64;  // = detail::kMaxTopK (launch.h needs the CUDA headers)
inline constexpr int kTopKWarps = 8;
inline constexpr int kTopKPerLane = 32;
inline constexpr int kTopKGroup = kWarpSize * kTopKPerLane;
// Candidates a warp holds before merging them; a merge starts once more than kTopKBuffer − 32 are
// held, so the 32 that one step can add always fit.
inline constexpr int kTopKBuffer = 64;

// The rank ref::top_k sorts by: a NaN counts as −inf.
HR_HOST_DEVICE inline float topk_rank(float v) {
  return v != v ? -INFINITY : v;
}

HR_HOST_DEVICE inline uint32_t float_bits(float v) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(v);
#else
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return bits;
#endif
}

HR_HOST_DEVICE inline float bits_float(uint32_t bits) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(bits);
#else
  float v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
#endif
}

// (value, index) as one key, larger = earlier in ref::top_k's order: the rank's bits mapped to an
// unsigned order (−0 as +0, which compare equal) above the complement of the index (so of two
// equal ranks the lower index is larger). No real key is 0.
HR_HOST_DEVICE inline uint64_t topk_key(float v, int32_t index) {
  float r = topk_rank(v);
  if (r == 0.0f) r = 0.0f;
  const uint32_t bits = float_bits(r);
  const uint32_t ordered = (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
  return static_cast<uint64_t>(ordered) << 32 |
         static_cast<uint32_t>(~static_cast<uint32_t>(index));
}

HR_HOST_DEVICE inline int32_t topk_key_index(uint64_t key) {
  return static_cast<int32_t>(~static_cast<uint32_t>(key));
}

// The rank a key was made from (a NaN's is −inf, −0's is +0).
HR_HOST_DEVICE inline float topk_key_rank(uint64_t key) {
  const uint32_t ordered = static_cast<uint32_t>(key >> 32);
  return bits_float((ordered & 0x80000000u) != 0 ? ordered & 0x7fffffffu : ~ordered);
}

// The row index of value `slot` (< kTopKPerLane) of `lane` in group g. Vectorized rows are read a
// float4 per lane at a time (slot 4u + c is component c of the lane's u-th float4, the float4s of
// a step consecutive across the lanes), the others a float per lane; either way group g is
// exactly the values [g·kTopKGroup, (g + 1)·kTopKGroup).
HR_HOST_DEVICE inline int64_t topk_element(int64_t group, int lane, int slot, bool vectorized) {
  if (vectorized) {
    const int64_t float4_index = group * (kTopKGroup / 4) + kWarpSize * (slot / 4) + lane;
    return 4 * float4_index + slot % 4;
  }
  return group * kTopKGroup + static_cast<int64_t>(kWarpSize) * slot + lane;
}

// Whether a warp must keep value v as a candidate. Until its list holds k entries, every value;
// then only values that rank above the list's last, `threshold`. `strict` (a tie loses) holds at
// the start of a group, when every listed value has a lower index than the group's; after a
// merge inside the group a listed value may have a higher index than one still to come, and a
// tie is kept (the merge orders it by index).
HR_HOST_DEVICE inline bool topk_admits(float v, bool list_full, float threshold, bool strict) {
  if (!list_full) return true;
  const float r = topk_rank(v);
  return strict ? r > threshold : r >= threshold;
}

// Entries of buffer[0, count) with a larger key than buffer[j]: j's place in the sorted buffer.
HR_HOST_DEVICE inline int topk_rank_in_buffer(const uint64_t* buffer, int count, int j) {
  const uint64_t key = buffer[j];
  int before = 0;
  for (int m = 0; m < count; ++m) before += buffer[m] > key ? 1 : 0;
  return before;
}

// Entries of sorted[0, len) (largest first) with a larger key than `key`.
HR_HOST_DEVICE inline int topk_count_greater(const uint64_t* sorted, int len, uint64_t key) {
  int lo = 0, hi = len;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (sorted[mid] > key)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

// Where entry `index` of one sorted list lands when merged with another sorted list: its own
// index plus the other's entries before it (keys are distinct, so every entry gets its own place).
HR_HOST_DEVICE inline int topk_merged_position(int index, uint64_t key, const uint64_t* other,
                                               int other_len) {
  return index + topk_count_greater(other, other_len, key);
}

// Where entry i of list w lands among all n_lists sorted lists (list v holds lens[v] keys at
// lists + v·stride): the final order of the block.
HR_HOST_DEVICE inline int topk_final_position(const uint64_t* lists, int stride, const int* lens,
                                              int n_lists, int w, int i) {
  const uint64_t key = lists[w * stride + i];
  int position = i;
  for (int v = 0; v < n_lists; ++v) {
    if (v != w) position += topk_count_greater(lists + v * stride, lens[v], key);
  }
  return position;
}

// --- scatter: one block per piece, thread t of T copying words t, t + T, … then the tail bytes.

// The widest word (16, 8, 4 or 1 bytes) both ends of a copy are aligned to.
HR_HOST_DEVICE inline int scatter_word_bytes(const void* dst, const void* src) {
  const uintptr_t both = reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src);
  return both % 16 == 0 ? 16 : both % 8 == 0 ? 8 : both % 4 == 0 ? 4 : 1;
}

template <int kBytes>
HR_HOST_DEVICE inline void copy_word(uint8_t* dst, const uint8_t* src) {
#ifdef __CUDA_ARCH__
  if constexpr (kBytes == 16) {
    *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
  } else if constexpr (kBytes == 8) {
    *reinterpret_cast<uint2*>(dst) = *reinterpret_cast<const uint2*>(src);
  } else if constexpr (kBytes == 4) {
    *reinterpret_cast<uint32_t*>(dst) = *reinterpret_cast<const uint32_t*>(src);
  } else {
    *dst = *src;
  }
#else
  std::memcpy(dst, src, kBytes);
#endif
}

template <int kBytes>
HR_HOST_DEVICE inline void copy_words(uint8_t* dst, const uint8_t* src, uint32_t bytes, int tid,
                                      int threads) {
  const uint32_t n_words = bytes / kBytes;
  for (uint32_t w = tid; w < n_words; w += threads)
    copy_word<kBytes>(dst + w * kBytes, src + w * kBytes);
  for (uint32_t b = n_words * kBytes + tid; b < bytes; b += threads) dst[b] = src[b];
}

// Thread `tid` of `threads`' share of copying `bytes` from src to dst.
HR_HOST_DEVICE inline void scatter_copy_part(uint8_t* dst, const uint8_t* src, uint32_t bytes,
                                             int tid, int threads) {
  switch (scatter_word_bytes(dst, src)) {
    case 16:
      return copy_words<16>(dst, src, bytes, tid, threads);
    case 8:
      return copy_words<8>(dst, src, bytes, tid, threads);
    case 4:
      return copy_words<4>(dst, src, bytes, tid, threads);
    default:
      return copy_words<1>(dst, src, bytes, tid, threads);
  }
}

}  // namespace kernels::cuda::fused
