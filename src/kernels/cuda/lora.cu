// CUDA LoRA terms (ops.h: lora): two launches per adapter — a warp per (token, rank row) for
// h = scale · A · x into the scratch, then a thread per (token, output row) adding B · h to y.
// Tokens whose scale is 0 return at once, so a batch pays only for the tokens of each adapter.
// Bytes per call and adapter: A and B (rank × (n_cols + n_rows) f32) per token that uses it, read
// through the cache, and the x and y rows of those tokens.
#include "kernels/cuda/launch.h"
#include "kernels/cuda/lora_lanes.h"

namespace kernels::cuda::detail {
namespace {

constexpr unsigned int kFullMask = 0xffffffffu;
constexpr int kWarpsPerBlock = 8;
constexpr int kRowsPerBlock = 256;
// Grid dimension y (the tokens) is limited to 65535: longer batches go in slices.
constexpr int kMaxGridY = 65535;

// Grid: (rank rows / kWarpsPerBlock, tokens of the slice).
__global__ void lora_a_kernel(const float* __restrict__ a, const float* __restrict__ x,
                              const float* __restrict__ scale, float* __restrict__ h,
                              int64_t n_cols, int rank, int first_token) {
  const int lane = threadIdx.x % lora::kWarpSize;
  const int k = blockIdx.x * kWarpsPerBlock + threadIdx.x / lora::kWarpSize;
  const int t = first_token + static_cast<int>(blockIdx.y);
  // Whole warps leave together: k and t are the same for every lane of a warp.
  if (k >= rank) return;
  const float s = scale[t];
  if (s == 0.0f) return;
  float v = lora::a_share(a + static_cast<int64_t>(k) * n_cols, x + t * n_cols, n_cols, lane);
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(kFullMask, v, offset);
  if (lane == 0) h[static_cast<int64_t>(t) * rank + k] = v * s;
}

// Grid: (output rows / kRowsPerBlock, tokens of the slice).
__global__ void lora_b_kernel(const float* __restrict__ b, const float* __restrict__ h,
                              const float* __restrict__ scale, float* __restrict__ y,
                              int64_t n_rows, int rank, int first_token) {
  const int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int t = first_token + static_cast<int>(blockIdx.y);
  if (r >= n_rows || scale[t] == 0.0f) return;
  y[t * n_rows + r] += lora::b_value(b + r * rank, h + static_cast<int64_t>(t) * rank, rank);
}

}  // namespace

cudaError_t launch_lora(const LoraDelta& d, cudaStream_t stream) {
  for (int i = 0; i < d.n_terms; ++i) {
    const LoraTerm& term = d.terms[i];
    for (int first = 0; first < d.n_tokens; first += kMaxGridY) {
      const unsigned int n = static_cast<unsigned int>(
          d.n_tokens - first < kMaxGridY ? d.n_tokens - first : kMaxGridY);
      const dim3 a_grid((term.rank + kWarpsPerBlock - 1) / kWarpsPerBlock, n);
      lora_a_kernel<<<a_grid, kWarpsPerBlock * lora::kWarpSize, 0, stream>>>(
          term.a, d.x, term.scale, d.scratch, d.n_cols, term.rank, first);
      const dim3 b_grid(static_cast<unsigned int>((d.n_rows + kRowsPerBlock - 1) / kRowsPerBlock),
                        n);
      lora_b_kernel<<<b_grid, kRowsPerBlock, 0, stream>>>(term.b, d.scratch, term.scale, d.y,
                                                          d.n_rows, term.rank, first);
      if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
    }
  }
  return cudaSuccess;
}

}  // namespace kernels::cuda::detail
