// CUDA kernels for every op but matmul/get_rows and attention: RMSNorm, RoPE, cache writes, the
// elementwise ops and MoE routing. Each is the reference's loop nest spread over
// threads; where the reference's float arithmetic can be repeated exactly it is (same operations,
// same order, no fused multiply-adds: __fmul_rn/__fadd_rn are never contracted), so rope,
// store_kv, get_rows, copies and the exact elementwise ops give the reference's bits.
#include <cfloat>
#include <cmath>

#include "kernels/cuda/cache_rows.h"
#include "kernels/cuda/decode.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/moe_route.cuh"

namespace kernels::cuda::detail {
namespace {

constexpr unsigned int kFullMask = 0xffffffffu;
// Grid dimensions y and z are limited to 65535: launchers that put tokens there go in slices.
constexpr int kMaxGridY = 65535;

unsigned int blocks_for(int64_t n, int64_t per_block) {
  return static_cast<unsigned int>((n + per_block - 1) / per_block);
}

// Blocks for a grid-stride loop over n items: enough to fill any GPU, never past the limit.
unsigned int stride_blocks(int64_t n, int threads) {
  const int64_t wanted = (n + threads - 1) / threads;
  return static_cast<unsigned int>(wanted < 65536 ? (wanted > 0 ? wanted : 1) : 65536);
}

__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

// --- RMSNorm: one block per row; the sum of squares in double, as the reference -------------

constexpr int kNormThreads = 256;

__global__ void __launch_bounds__(kNormThreads)
    rmsnorm_kernel(const float* x, const float* __restrict__ w, float* y, int64_t n, float eps) {
  __shared__ double partial[kNormThreads / 32];
  __shared__ float inv_shared;
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * n;
  float* yr = y + static_cast<int64_t>(blockIdx.x) * n;
  double sum = 0;
  for (int64_t i = threadIdx.x; i < n; i += kNormThreads) sum += static_cast<double>(xr[i]) * xr[i];
  sum = warp_sum(sum);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = sum;
  __syncthreads();  // also orders every read of x above before the writes of y below (in place)
  if (threadIdx.x == 0) {
    double total = 0;
    for (int i = 0; i < kNormThreads / 32; ++i) total += partial[i];
    inv_shared = static_cast<float>(1.0 / sqrt(total / static_cast<double>(n) + eps));
  }
  __syncthreads();
  const float inv = inv_shared;
  for (int64_t i = threadIdx.x; i < n; i += kNormThreads) {
    yr[i] = __fmul_rn(__fmul_rn(xr[i], inv), w ? w[i] : 1.0f);
  }
}

// --- RoPE: one thread per (token, head, pair); angles in double as the reference -------------

__global__ void rope_kernel(float* x, int n_tokens, int n_head, int head_dim,
                            const int32_t* __restrict__ pos, RopeParams p) {
  const int half = p.n_rot / 2;
  const int64_t total = static_cast<int64_t>(n_tokens) * n_head * half;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int i = static_cast<int>(idx % half);
    const int64_t token_head = idx / half;  // t · n_head + h
    const int t = static_cast<int>(token_head / n_head);
    float* v = x + token_head * head_dim;
    const double angle = static_cast<double>(pos[t]) * p.inv_freq[i];
    const float c = static_cast<float>(cos(angle));
    const float s = static_cast<float>(sin(angle));
    const int a = p.style == RopeStyle::kAdjacent ? 2 * i : i;
    const int b = p.style == RopeStyle::kAdjacent ? 2 * i + 1 : i + half;
    const float x0 = v[a], x1 = v[b];
    v[a] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
    v[b] = __fadd_rn(__fmul_rn(x1, c), __fmul_rn(x0, s));
  }
}

// --- store_kv: the reference quantizers (cache_rows.h), one thread per value or block ------

// Grid: (values or blocks of a row / blockDim, tokens of the slice, 2: K then V).
__global__ void store_kv_kernel(DType k_type, DType v_type, int kv_dim, const float* __restrict__ k,
                                const float* __restrict__ v, const KvWrite* __restrict__ dst) {
  const int t = blockIdx.y;
  const bool is_v = blockIdx.z == 1;
  const DType type = is_v ? v_type : k_type;
  const float* src = (is_v ? v : k) + static_cast<int64_t>(t) * kv_dim;
  uint8_t* out = is_v ? dst[t].v : dst[t].k;
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  switch (type) {
    case DType::kF32:
      if (i < kv_dim) reinterpret_cast<float*>(out)[i] = src[i];
      break;
    case DType::kF16:
      if (i < kv_dim) reinterpret_cast<uint16_t*>(out)[i] = f32_to_f16(src[i]);
      break;
    case DType::kQ8_0:
      if (i < kv_dim / 32)
        quantize_block_q8_0(src + 32 * i, reinterpret_cast<tensor::BlockQ8_0*>(out) + i);
      break;
    case DType::kQ4_0:
      if (i < kv_dim / 32)
        quantize_block_q4_0(src + 32 * i, reinterpret_cast<tensor::BlockQ4_0*>(out) + i);
      break;
    default:
      break;  // refused on the host
  }
}

// --- Elementwise -------------------------------------------------------------------------------

__global__ void elementwise_kernel(Elementwise op, float* y, const float* __restrict__ x, float s,
                                   int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    switch (op) {
      case Elementwise::kAdd:
        y[i] = __fadd_rn(y[i], x[i]);
        break;
      case Elementwise::kMul:
        y[i] = __fmul_rn(y[i], x[i]);
        break;
      case Elementwise::kScale:
        y[i] = __fmul_rn(y[i], s);
        break;
      case Elementwise::kSoftcap:
        y[i] = __fmul_rn(s, tanhf(__fdiv_rn(y[i], s)));
        break;
    }
  }
}

__global__ void clamp_kernel(float* y, float lo, float hi, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] = fminf(fmaxf(y[i], lo), hi);
  }
}

// ref::silu and ref::gelu, operation for operation (expf/tanhf are CUDA's, within 2 ulp).
__device__ __forceinline__ float silu(float x) {
  return __fdiv_rn(x, __fadd_rn(1.0f, expf(-x)));
}
__device__ __forceinline__ float gelu(float x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  const float cube = __fmul_rn(__fmul_rn(__fmul_rn(0.044715f, x), x), x);
  const float z = __fmul_rn(kSqrt2OverPi, __fadd_rn(x, cube));
  return __fmul_rn(__fmul_rn(0.5f, x), __fadd_rn(1.0f, tanhf(z)));
}

__global__ void act_mul_kernel(Activation act, const float* gate, const float* up, float* out,
                               int64_t n, int64_t n_rows, int64_t stride) {
  const int64_t total = n * n_rows;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = idx / n, i = idx % n;
    const float g = gate[r * stride + i], u = up[r * stride + i];
    out[idx] = __fmul_rn(act == Activation::kSilu ? silu(g) : gelu(g), u);
  }
}

// Rows that do not overlap: every value copied independently.
__global__ void copy_rows_kernel(float* __restrict__ y, int64_t y_stride,
                                 const float* __restrict__ x, int64_t x_stride, int64_t n,
                                 int64_t n_rows) {
  const int64_t total = n * n_rows;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = idx / n, i = idx % n;
    y[r * y_stride + i] = x[r * x_stride + i];
  }
}

// Overlapping source and destination: one block, rows in order, each row a memmove in chunks of
// blockDim values, walked away from the overlap (backwards when the destination lies after the
// source) so a chunk is read entirely before any of its values can be overwritten.
__global__ void copy_rows_overlapping_kernel(float* y, int64_t y_stride, const float* x,
                                             int64_t x_stride, int64_t n, int64_t n_rows) {
  const int64_t chunk = blockDim.x;
  const int64_t n_chunks = (n + chunk - 1) / chunk;
  for (int64_t r = 0; r < n_rows; ++r) {
    float* yr = y + r * y_stride;
    const float* xr = x + r * x_stride;
    const bool backwards = yr > xr;
    for (int64_t step = 0; step < n_chunks; ++step) {
      const int64_t c = backwards ? n_chunks - 1 - step : step;
      const int64_t i = c * chunk + threadIdx.x;
      const float value = i < n ? xr[i] : 0.0f;
      __syncthreads();  // every read of the chunk before any write
      if (i < n) yr[i] = value;
      __syncthreads();  // every write before the next chunk's reads
    }
  }
}

// --- MoE routing: one warp per token, the CPU backend's double arithmetic (moe_route.cuh) -----

__global__ void __launch_bounds__(32)
    moe_route_kernel(const float* __restrict__ logits, int n_expert, int k,
                     const float* __restrict__ expert_scale, int32_t* ids, float* weights) {
  __shared__ MoeRouteScratch scratch;
  const int64_t t = blockIdx.x;
  route_token(logits + t * n_expert, n_expert, k, expert_scale, scratch, ids + t * k,
              weights + t * k);
}

bool ranges_overlap(const void* a, int64_t a_bytes, const void* b, int64_t b_bytes) {
  const auto a0 = reinterpret_cast<uintptr_t>(a), b0 = reinterpret_cast<uintptr_t>(b);
  return a0 < b0 + static_cast<uintptr_t>(b_bytes) && b0 < a0 + static_cast<uintptr_t>(a_bytes);
}

// Bytes spanned by n_rows rows of n floats, `stride` apart.
int64_t span_bytes(int64_t n, int64_t n_rows, int64_t stride) {
  return n_rows == 0 || n == 0 ? 0
                               : ((n_rows - 1) * stride + n) * static_cast<int64_t>(sizeof(float));
}

}  // namespace

bool is_cache_type(DType type) {
  return type == DType::kF32 || type == DType::kF16 || type == DType::kQ8_0 || type == DType::kQ4_0;
}

cudaError_t launch_rmsnorm(const float* x, const float* w, float* y, int64_t n, int64_t n_rows,
                           float eps, cudaStream_t stream) {
  if (n_rows <= 0 || n <= 0) return cudaSuccess;
  rmsnorm_kernel<<<static_cast<unsigned int>(n_rows), kNormThreads, 0, stream>>>(x, w, y, n, eps);
  return cudaGetLastError();
}

cudaError_t launch_rope(float* x, int n_tokens, int n_head, int head_dim, const int32_t* pos,
                        const RopeParams& p, cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(n_tokens) * n_head * (p.n_rot / 2);
  if (total <= 0) return cudaSuccess;
  rope_kernel<<<stride_blocks(total, 256), 256, 0, stream>>>(x, n_tokens, n_head, head_dim, pos, p);
  return cudaGetLastError();
}

cudaError_t launch_store_kv(DType k_type, DType v_type, int kv_dim, const float* k, const float* v,
                            const KvWrite* dst, int n_tokens, cudaStream_t stream) {
  if (n_tokens <= 0 || kv_dim <= 0) return cudaSuccess;
  constexpr int kThreads = 128;
  for (int t0 = 0; t0 < n_tokens; t0 += kMaxGridY) {
    const int nt = n_tokens - t0 < kMaxGridY ? n_tokens - t0 : kMaxGridY;
    const dim3 grid(blocks_for(kv_dim, kThreads), nt, 2);
    store_kv_kernel<<<grid, kThreads, 0, stream>>>(k_type, v_type, kv_dim,
                                                   k + static_cast<int64_t>(t0) * kv_dim,
                                                   v + static_cast<int64_t>(t0) * kv_dim, dst + t0);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

cudaError_t launch_elementwise(Elementwise op, float* y, const float* x, float s, int64_t n,
                               cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  elementwise_kernel<<<stride_blocks(n, 256), 256, 0, stream>>>(op, y, x, s, n);
  return cudaGetLastError();
}

cudaError_t launch_clamp(float* y, float lo, float hi, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  clamp_kernel<<<stride_blocks(n, 256), 256, 0, stream>>>(y, lo, hi, n);
  return cudaGetLastError();
}

cudaError_t launch_act_mul(Activation act, const float* gate, const float* up, float* out,
                           int64_t n, int64_t n_rows, int64_t stride, cudaStream_t stream) {
  if (n <= 0 || n_rows <= 0) return cudaSuccess;
  act_mul_kernel<<<stride_blocks(n * n_rows, 256), 256, 0, stream>>>(act, gate, up, out, n, n_rows,
                                                                     stride);
  return cudaGetLastError();
}

cudaError_t launch_copy_rows(float* y, int64_t y_stride, const float* x, int64_t x_stride,
                             int64_t n, int64_t n_rows, cudaStream_t stream) {
  if (n <= 0 || n_rows <= 0 || (y == x && y_stride == x_stride)) return cudaSuccess;
  if (ranges_overlap(y, span_bytes(n, n_rows, y_stride), x, span_bytes(n, n_rows, x_stride))) {
    copy_rows_overlapping_kernel<<<1, 1024, 0, stream>>>(y, y_stride, x, x_stride, n, n_rows);
  } else {
    copy_rows_kernel<<<stride_blocks(n * n_rows, 256), 256, 0, stream>>>(y, y_stride, x, x_stride,
                                                                         n, n_rows);
  }
  return cudaGetLastError();
}

cudaError_t launch_moe_route(const float* logits, int n_tokens, int n_expert, int k,
                             const float* expert_scale, int32_t* ids, float* weights,
                             cudaStream_t stream) {
  if (n_tokens <= 0) return cudaSuccess;
  moe_route_kernel<<<static_cast<unsigned int>(n_tokens), 32, 0, stream>>>(
      logits, n_expert, k, expert_scale, ids, weights);
  return cudaGetLastError();
}

}  // namespace kernels::cuda::detail
