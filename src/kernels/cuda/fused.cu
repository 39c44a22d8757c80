// CUDA kernels of the residual stream (residual_norm), the device top-k and the step scatter, one
// launch each. Their arithmetic lives in fused_lanes.h, which
// tests/kernels/cuda_fused_lanes_test.cpp runs thread by thread on the host against the reference;
// this file adds the launch shapes, the shuffles and the barriers (the test repeats those on
// arrays). tests/kernels/cuda_fused_test.cpp runs the kernels themselves on a GPU.
//
// residual_norm: one block per row, each thread holding up to `per_thread` values of the row in
//   registers from the first load to the last write (fused_lanes.h: value k of thread t is index
//   t + k·blockDim), so x and the branches are read once and each array is written once. Block
//   sums of squares (in double, as ref::rmsnorm: per thread in k order, a warp butterfly, then the
//   warp totals in warp order) separate the phases, at most four. Every f32 operation is the
//   composed default's (ops.cpp), rounded alone and in its order, so the results are the
//   reference's bits unless a double sum of squares, added in another order, rounds to another f32
//   factor (a relative 1e-16 against an f32 half-ulp: about one row in 10^8). An 8-bit output is
//   written by a warp per 32 values: shuffle maximum, per-lane rounding, shuffle integer sum, which
//   are quantize_act_block's bytes because neither the maximum nor the sum depends on the order.
//   Decode has few rows, so this kernel is latency-bound; each phase issues its loads together.
//
// top_k: one block of 8 warps per row (fused_lanes.h describes the warps' lists and buffers). A
//   warp reads 1024 values per step (16-byte loads when the row allows) and keeps only values that
//   beat its list's last entry, so after its first few steps it mostly compares and moves on: on
//   random logits of Gemma's vocabulary the host test counts 3 merges per warp for k = 1 and 12 for
//   k = 40 (each merge ranks 33 to 64 kept values by counting, then places them by binary search).
//   The warps' lists are merged at the end by position (each entry's rank among all lists). The
//   worst case is a row sorted ascending (every value kept: correct, many merges). One
//   multiprocessor reads each row, which bounds the speed (277 µs for 262144 logits under ncu on an
//   H200, 4 % of an E2B token: bench/RESULTS.md); the next
//   step would split a row over a thread-block cluster (sm_90) and merge the blocks' lists through
//   distributed shared memory.
//
// scatter: one block per piece up to max_pieces; blocks past the count, read on the device, return
//   at once, so a recorded graph stays valid while the count changes. Each block copies in words
//   as wide as both ends' alignment allows (16, 8, 4 or 1 bytes).
#include <cstdint>

#include "kernels/act_q8.h"
#include "kernels/cuda/fused_lanes.h"
#include "kernels/cuda/launch.h"

namespace kernels::cuda::detail {
namespace {

static_assert(fused::kTopKMax == kMaxTopK, "fused_lanes.h keeps launch.h's top-k limit");

constexpr unsigned int kFullMask = 0xffffffffu;

__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

__device__ __forceinline__ int warp_sum(int v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}

// --- residual_norm --------------------------------------------------------------------------

// The block's sum of every thread's v. `warp_totals` is this reduction's own shared row, written
// once, so no barrier is needed after the threads read it.
__device__ __forceinline__ double block_sum(double v, double* warp_totals) {
  v = warp_sum(v);
  if (threadIdx.x % 32 == 0) warp_totals[threadIdx.x / 32] = v;
  __syncthreads();
  return fused::sum_in_order(warp_totals, blockDim.x / 32);
}

// The 8-bit form of the warp's 32 consecutive values: v is this lane's, at row index i.
__device__ __forceinline__ void quantize_act_warp(float v, int64_t i, int64_t n, int row,
                                                  void* q8) {
  const float amax = warp_max(fused::act_q8_lane_magnitude(v));
  const int q = act_q8_quant(v, amax);
  act_q8_quants(q8, n, row)[i] = static_cast<int8_t>(q);
  const int sum = warp_sum(q);
  if (threadIdx.x % 32 == 0)
    fused::act_q8_block_scales(amax, sum, act_q8_scales(q8, n, row) + 2 * (i / kActBlock));
}

template <int kPer>
__device__ __forceinline__ void write_output(const ResidualNorm& a, const ResidualNorm::Output& o,
                                             int row, float inv_x,
                                             const fused::ResidualLane<kPer>& lane) {
  const int64_t base = static_cast<int64_t>(row) * a.n;
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    // With an 8-bit form n is a multiple of 32 (launch_residual_norm checks), so a warp's 32
    // indices are all inside the row or all past it, and its shuffles have every lane.
    const int64_t i = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
    if (i >= a.n) continue;
    const float y = fused::residual_output(o, lane.x[k], inv_x, i);
    if (o.y != nullptr) o.y[base + i] = y;
    if (o.y_q8 != nullptr) quantize_act_warp(y, i, a.n, row, o.y_q8);
  }
}

template <int kPer>
__global__ void __launch_bounds__(fused::kResidualMaxThreads)
    residual_norm_kernel(const ResidualNorm a) {
  // One row per reduction: the two branches, the sum, x.
  __shared__ double warp_totals[4][fused::kResidualMaxThreads / 32];
  const int row = blockIdx.x, tid = threadIdx.x, threads = blockDim.x;
  fused::ResidualLane<kPer> lane;
  double sq[2] = {0.0, 0.0};
  fused::residual_load(a, row, tid, threads, lane, sq);
  float inv[2] = {1.0f, 1.0f};
  for (int b = 0; b < 2; ++b) {
    if (fused::residual_branch_normed(a, b))
      inv[b] = fused::rms_inverse(block_sum(sq[b], warp_totals[b]), a.n, a.eps);
  }
  const double sq_sum = fused::residual_branch_sum(a, row, tid, threads, inv, lane);
  const float inv_sum = a.sum_norm != nullptr
                            ? fused::rms_inverse(block_sum(sq_sum, warp_totals[2]), a.n, a.eps)
                            : 1.0f;
  const bool x_norm = fused::residual_needs_x_norm(a);
  const double sq_x = fused::residual_update_x(a, row, tid, threads, inv_sum, x_norm, lane);
  const float inv_x =
      x_norm ? fused::rms_inverse(block_sum(sq_x, warp_totals[3]), a.n, a.eps) : 1.0f;
  // Unrolled over the three slots so each Output is read from its fixed place in the parameters.
#pragma unroll
  for (int j = 0; j < 3; ++j) {
    if (j < a.n_out) write_output(a, a.out[j], row, inv_x, lane);
  }
}

// --- top_k ------------------------------------------------------------------------------------

constexpr int kTopKThreads = fused::kTopKWarps * 32;
constexpr int kTopKLanePart = fused::kTopKMax / 32;  // list entries per lane in a merge
constexpr int kTopKLaneBuffer = fused::kTopKBuffer / 32;

struct TopKShared {
  uint64_t lists[fused::kTopKWarps][fused::kTopKMax];  // each warp's best, largest key first
  uint64_t buffers[fused::kTopKWarps][fused::kTopKBuffer];
  int lens[fused::kTopKWarps];
};

// Merges the warp's `count` buffered keys into its list of `len` keys, keeping the best k, and
// returns the list's new length: the buffer is sorted in place by rank (its keys are distinct),
// then every entry of both takes its merged position (fused::topk_merged_position) and the first k
// are written. Not inlined: the unrolled scan calls it from 32 places, and it runs rarely.
__device__ __noinline__ int merge_buffer(uint64_t* list, int len, uint64_t* buffer, int count,
                                         int k) {
  const int lane = threadIdx.x % 32;
  uint64_t key[kTopKLaneBuffer];
  int rank[kTopKLaneBuffer];
  __syncwarp();  // the appends, before they are read
#pragma unroll
  for (int s = 0; s < kTopKLaneBuffer; ++s) {
    const int j = lane + 32 * s;
    if (j < count) {
      key[s] = buffer[j];
      rank[s] = fused::topk_rank_in_buffer(buffer, count, j);
    }
  }
  __syncwarp();
#pragma unroll
  for (int s = 0; s < kTopKLaneBuffer; ++s) {
    if (lane + 32 * s < count) buffer[rank[s]] = key[s];
  }
  __syncwarp();
  uint64_t listed[kTopKLanePart];
  int listed_at[kTopKLanePart], buffered_at[kTopKLaneBuffer];
#pragma unroll
  for (int s = 0; s < kTopKLanePart; ++s) {
    const int i = lane + 32 * s;
    listed_at[s] = k;  // not written
    if (i < len) {
      listed[s] = list[i];
      listed_at[s] = fused::topk_merged_position(i, listed[s], buffer, count);
    }
  }
#pragma unroll
  for (int s = 0; s < kTopKLaneBuffer; ++s) {
    const int j = lane + 32 * s;
    buffered_at[s] = k;
    if (j < count) {
      key[s] = buffer[j];
      buffered_at[s] = fused::topk_merged_position(j, key[s], list, len);
    }
  }
  __syncwarp();  // every read of the old list, before it is overwritten
#pragma unroll
  for (int s = 0; s < kTopKLanePart; ++s) {
    if (listed_at[s] < k) list[listed_at[s]] = listed[s];
  }
#pragma unroll
  for (int s = 0; s < kTopKLaneBuffer; ++s) {
    if (buffered_at[s] < k) list[buffered_at[s]] = key[s];
  }
  __syncwarp();
  return min(k, len + count);
}

// The lane's 32 values of group g (fused::topk_element's order); values past the row read as 0
// and are never admitted.
template <bool kVectorized>
__device__ __forceinline__ void load_group(const float* row, int64_t n, int64_t g, int lane,
                                           float (&v)[fused::kTopKPerLane]) {
  if constexpr (kVectorized) {
    const float4* row4 = reinterpret_cast<const float4*>(row);
#pragma unroll
    for (int u = 0; u < fused::kTopKPerLane / 4; ++u) {
      const int64_t first = fused::topk_element(g, lane, 4 * u, true);
      const float4 q = first < n ? __ldg(row4 + first / 4) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      v[4 * u] = q.x;
      v[4 * u + 1] = q.y;
      v[4 * u + 2] = q.z;
      v[4 * u + 3] = q.w;
    }
  } else {
#pragma unroll
    for (int s = 0; s < fused::kTopKPerLane; ++s) {
      const int64_t i = fused::topk_element(g, lane, s, false);
      v[s] = i < n ? __ldg(row + i) : 0.0f;
    }
  }
}

// Vectorized: the row starts 16-byte aligned and n is a multiple of 4 (every float4 is whole).
template <bool kVectorized>
__global__ void __launch_bounds__(kTopKThreads)
    top_k_kernel(const float* x, int64_t n, int k, int32_t* ids, float* values) {
  __shared__ TopKShared shared;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const float* row = x + static_cast<int64_t>(blockIdx.x) * n;
  uint64_t* list = shared.lists[warp];
  uint64_t* buffer = shared.buffers[warp];
  const unsigned int lanes_below = (1u << lane) - 1u;
  int len = 0, count = 0;
  float threshold = -INFINITY;  // the rank of list[k − 1] once the list is full
  const int64_t n_groups = (n + fused::kTopKGroup - 1) / fused::kTopKGroup;
  for (int64_t g = warp; g < n_groups; g += fused::kTopKWarps) {
    float v[fused::kTopKPerLane];
    load_group<kVectorized>(row, n, g, lane, v);
    const bool whole = (g + 1) * fused::kTopKGroup <= n;
    bool full = len == k, strict = true;
    bool any = false;
#pragma unroll
    for (int s = 0; s < fused::kTopKPerLane; ++s) {
      const bool inside = whole || fused::topk_element(g, lane, s, kVectorized) < n;
      any |= inside && fused::topk_admits(v[s], full, threshold, true);
    }
    if (!__any_sync(kFullMask, any)) continue;  // the common case once the list is full
#pragma unroll
    for (int s = 0; s < fused::kTopKPerLane; ++s) {
      const int64_t i = fused::topk_element(g, lane, s, kVectorized);
      const bool take = (whole || i < n) && fused::topk_admits(v[s], full, threshold, strict);
      const unsigned int taken = __ballot_sync(kFullMask, take);
      if (take)
        buffer[count + __popc(taken & lanes_below)] =
            fused::topk_key(v[s], static_cast<int32_t>(i));
      count += __popc(taken);
      if (count > fused::kTopKBuffer - 32) {
        len = merge_buffer(list, len, buffer, count, k);
        count = 0;
        full = len == k;
        if (full) threshold = fused::topk_key_rank(list[k - 1]);
        strict = false;
      }
    }
  }
  if (count > 0) len = merge_buffer(list, len, buffer, count, k);
  if (lane == 0) shared.lens[warp] = len;
  __syncthreads();

  const int64_t out = static_cast<int64_t>(blockIdx.x) * k;
  for (int c = threadIdx.x; c < fused::kTopKWarps * fused::kTopKMax; c += kTopKThreads) {
    const int w = c / fused::kTopKMax, i = c % fused::kTopKMax;
    if (i >= shared.lens[w]) continue;
    const int position = fused::topk_final_position(&shared.lists[0][0], fused::kTopKMax,
                                                    shared.lens, fused::kTopKWarps, w, i);
    if (position < k) {
      const int32_t index = fused::topk_key_index(shared.lists[w][i]);
      ids[out + position] = index;
      values[out + position] = row[index];
    }
  }
}

// --- scatter ----------------------------------------------------------------------------------

constexpr int kScatterThreads = 128;

__global__ void __launch_bounds__(kScatterThreads)
    scatter_kernel(const uint8_t* src, const ScatterPiece* pieces, const int32_t* n_pieces) {
  if (static_cast<int>(blockIdx.x) >= *n_pieces) return;
  const ScatterPiece piece = pieces[blockIdx.x];
  fused::scatter_copy_part(static_cast<uint8_t*>(piece.dst), src + piece.offset, piece.bytes,
                           threadIdx.x, blockDim.x);
}

}  // namespace

// Refused (cudaErrorInvalidValue): a row wider than one block holds (fused::residual_norm_fits:
// 32768 values, beyond every model's n_embd), no x, or an 8-bit output for a width that has none
// (its warps would shuffle with lanes missing). The backend checks these first, with a message.
static_assert(kResidualNormMaxWidth ==
              int64_t{fused::kResidualMaxThreads} * fused::kResidualMaxPerThread);

cudaError_t launch_residual_norm(const ResidualNorm& a, cudaStream_t stream) {
  if (a.n <= 0 || a.n_rows <= 0) return cudaSuccess;
  if (!fused::residual_norm_fits(a.n) || a.x == nullptr) return cudaErrorInvalidValue;
  for (int j = 0; j < a.n_out; ++j) {
    if (a.out[j].y_q8 != nullptr && !act_q8_fits(a.n)) return cudaErrorInvalidValue;
  }
  const fused::ResidualShape shape = fused::residual_norm_shape(a.n);
  const auto rows = static_cast<unsigned int>(a.n_rows);
  switch (shape.per_thread) {
    case 4:
      residual_norm_kernel<4><<<rows, shape.threads, 0, stream>>>(a);
      break;
    case 8:
      residual_norm_kernel<8><<<rows, shape.threads, 0, stream>>>(a);
      break;
    case 16:
      residual_norm_kernel<16><<<rows, shape.threads, 0, stream>>>(a);
      break;
    default:
      residual_norm_kernel<32><<<rows, shape.threads, 0, stream>>>(a);
      break;
  }
  return cudaGetLastError();
}

// Indices must fit the int32 ids (and the keys' 32 index bits): a longer row is refused.
cudaError_t launch_top_k(const float* x, int64_t n, int n_rows, int k, int32_t* ids, float* values,
                         cudaStream_t stream) {
  if (n_rows <= 0) return cudaSuccess;
  if (n <= 0 || n > INT32_MAX || k <= 0 || k > kMaxTopK || k > n) return cudaErrorInvalidValue;
  const bool vectorized = n % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0;
  const auto rows = static_cast<unsigned int>(n_rows);
  if (vectorized)
    top_k_kernel<true><<<rows, kTopKThreads, 0, stream>>>(x, n, k, ids, values);
  else
    top_k_kernel<false><<<rows, kTopKThreads, 0, stream>>>(x, n, k, ids, values);
  return cudaGetLastError();
}

cudaError_t launch_scatter(const uint8_t* src, const ScatterPiece* pieces, const int32_t* n_pieces,
                           int max_pieces, cudaStream_t stream) {
  if (max_pieces <= 0) return cudaSuccess;
  scatter_kernel<<<static_cast<unsigned int>(max_pieces), kScatterThreads, 0, stream>>>(src, pieces,
                                                                                        n_pieces);
  return cudaGetLastError();
}

}  // namespace kernels::cuda::detail
