// CUDA kernels for every op but matmul/get_rows: RMSNorm, RoPE, attention over the paged cache,
// cache writes, the elementwise ops and MoE routing. Each is the reference's loop nest spread over
// threads; where the reference's float arithmetic can be repeated exactly it is (same operations,
// same order, no fused multiply-adds: __fmul_rn/__fadd_rn are never contracted), so rope,
// store_kv, get_rows, copies and the exact elementwise ops give the reference's bits.
#include <cfloat>
#include <cmath>

#include "kernels/cuda/decode.cuh"
#include "kernels/cuda/launch.h"

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

__device__ __forceinline__ float warp_sum(float v) {
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

// --- Attention: one block per (head, token), online softmax ----------------------------------
//
// Warp w of the block scans cells w, w + kAttnWarps, … of the token's cache. For a visible cell,
// its lanes form q·k over the head's dims (K decoded value by value from the stored row, so the
// cache is never copied), reduce it with shuffles, and fold the cell into the warp's running
// maximum m, sum l and accumulator acc[head_dim] (shared memory, one row per warp, each lane
// owning dims lane, lane + 32, …). At the end the warps' (m, l, acc) are merged. Reads: the
// visible cells' K and V rows once. Shared memory: (1 + kAttnWarps) · head_dim floats.

constexpr int kAttnWarps = 8;

__device__ __forceinline__ const uint8_t* cell_row(const uint8_t* const* blocks,
                                                   int cells_per_block, size_t row_bytes,
                                                   int cell) {
  return blocks[cell / cells_per_block] + static_cast<size_t>(cell % cells_per_block) * row_bytes;
}

__global__ void __launch_bounds__(32 * kAttnWarps) attention_kernel(AttentionBatch b, int t0) {
  extern __shared__ float smem[];
  const int h = blockIdx.x, t = t0 + blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int d = b.head_dim;
  float* q_s = smem;                      // [d]
  float* acc_all = smem + d;              // [kAttnWarps][d]
  float* m_l = acc_all + kAttnWarps * d;  // [kAttnWarps] maxima, then [kAttnWarps] sums
  float* acc = acc_all + warp * d;

  const KvSpan kv = *b.kv[t];
  const int group = b.n_head / kv.n_head_kv;
  const int first = (h / group) * kv.head_dim;  // this head's KV head within a cache row
  const int32_t q_pos = b.pos[t];
  const int32_t until = b.attend_until ? b.attend_until[t] : q_pos;
  const int64_t offset = (static_cast<int64_t>(t) * b.n_head + h) * d;
  for (int i = threadIdx.x; i < d; i += blockDim.x) q_s[i] = b.q[offset + i];
  for (int i = lane; i < d; i += 32) acc[i] = 0.0f;
  __syncthreads();

  float m = -INFINITY, l = 0.0f;
  for (int c = warp; c < kv.n_cells; c += kAttnWarps) {
    const int32_t p = kv.cell_pos[c];
    if (!key_visible(p, q_pos, until, b.window)) continue;  // warp-uniform
    const uint8_t* k_row = cell_row(kv.k_blocks, kv.cells_per_block, kv.k_row_bytes, c);
    float dot = 0.0f;
    for (int i = lane; i < d; i += 32)
      dot = fmaf(q_s[i], cache_value(kv.k_type, k_row, first + i), dot);
    const float s = warp_sum(dot) * b.scale;
    const float m_new = fmaxf(m, s);
    const float correction = expf(m - m_new);  // 0 for the first visible cell (m = −inf)
    const float weight = expf(s - m_new);
    l = l * correction + weight;
    const uint8_t* v_row = cell_row(kv.v_blocks, kv.cells_per_block, kv.v_row_bytes, c);
    for (int i = lane; i < d; i += 32) {
      acc[i] = acc[i] * correction + weight * cache_value(kv.v_type, v_row, first + i);
    }
    m = m_new;
  }
  if (lane == 0) {
    m_l[warp] = m;
    m_l[kAttnWarps + warp] = l;
  }
  __syncthreads();

  float* out = b.out + offset;
  float max_all = -INFINITY;
#pragma unroll
  for (int w = 0; w < kAttnWarps; ++w) max_all = fmaxf(max_all, m_l[w]);
  if (max_all == -INFINITY) {  // nothing visible: the reference writes zeros
    for (int i = threadIdx.x; i < d; i += blockDim.x) out[i] = 0.0f;
    return;
  }
  float factor[kAttnWarps];
  float denom = 0.0f;
#pragma unroll
  for (int w = 0; w < kAttnWarps; ++w) {
    factor[w] = m_l[w] == -INFINITY ? 0.0f : expf(m_l[w] - max_all);
    denom += m_l[kAttnWarps + w] * factor[w];
  }
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    float o = 0.0f;
#pragma unroll
    for (int w = 0; w < kAttnWarps; ++w) o += acc_all[w * d + i] * factor[w];
    out[i] = o / denom;
  }
}

// --- store_kv: the reference quantizers (tensor/quantize.cpp), one thread per value or block --

// float → int truncating toward zero; 0 where the C++ cast would be undefined (see quantize.cpp).
__device__ __forceinline__ int truncate_to_int(float v) {
  return v > -2147483648.0f && v < 2147483648.0f ? static_cast<int>(v) : 0;
}

__device__ void quantize_block_q8_0(const float* src, tensor::BlockQ8_0* dst) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = fmaxf(amax, fabsf(src[j]));
  const float d = __fdiv_rn(amax, 127.0f);
  const float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
  dst->d = f32_to_f16(d);
  for (int j = 0; j < 32; ++j)
    dst->qs[j] = static_cast<int8_t>(truncate_to_int(roundf(__fmul_rn(src[j], id))));
}

__device__ void quantize_block_q4_0(const float* src, tensor::BlockQ4_0* dst) {
  float amax = 0.0f, max = 0.0f;  // the value of largest magnitude, the first one on ties
  for (int j = 0; j < 32; ++j) {
    if (amax < fabsf(src[j])) {
      amax = fabsf(src[j]);
      max = src[j];
    }
  }
  const float d = __fdiv_rn(max, -8.0f);
  const float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
  dst->d = f32_to_f16(d);
  for (int j = 0; j < 16; ++j) {
    const int q0 = min(15, truncate_to_int(__fadd_rn(__fmul_rn(src[j], id), 8.5f)));
    const int q1 = min(15, truncate_to_int(__fadd_rn(__fmul_rn(src[j + 16], id), 8.5f)));
    dst->qs[j] = static_cast<uint8_t>(q0 | q1 << 4);
  }
}

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

// --- MoE routing: one warp per token, the CPU backend's double arithmetic ----------------------

__global__ void __launch_bounds__(32)
    moe_route_kernel(const float* __restrict__ logits, int n_expert, int k,
                     const float* __restrict__ expert_scale, int32_t* ids, float* weights) {
  __shared__ double prob[kMaxExperts];
  __shared__ bool taken[kMaxExperts];
  const int t = blockIdx.x, lane = threadIdx.x;
  const float* l = logits + static_cast<int64_t>(t) * n_expert;
  float max_logit = -FLT_MAX;
  for (int e = lane; e < n_expert; e += 32) max_logit = fmaxf(max_logit, l[e]);
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    max_logit = fmaxf(max_logit, __shfl_xor_sync(kFullMask, max_logit, offset));
  }
  for (int e = lane; e < n_expert; e += 32) {
    prob[e] = exp(static_cast<double>(l[e]) - static_cast<double>(max_logit));
    taken[e] = false;
  }
  __syncwarp();
  double sum = 0;
  if (lane == 0) {
    for (int e = 0; e < n_expert; ++e) sum += prob[e];  // in expert order, as the reference
  }
  sum = __shfl_sync(kFullMask, sum, 0);
  for (int e = lane; e < n_expert; e += 32) prob[e] /= sum;
  __syncwarp();
  int32_t* out_ids = ids + static_cast<int64_t>(t) * k;
  for (int j = 0; j < k; ++j) {
    // Arg-max over the experts not taken yet; ties go to the lower id.
    double best_p = -1.0;
    int best_e = 0x7fffffff;
    for (int e = lane; e < n_expert; e += 32) {
      if (!taken[e] && prob[e] > best_p) {  // ascending e: a tie keeps the lower id
        best_p = prob[e];
        best_e = e;
      }
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
      const double other_p = __shfl_xor_sync(kFullMask, best_p, offset);
      const int other_e = __shfl_xor_sync(kFullMask, best_e, offset);
      if (other_p > best_p || (other_p == best_p && other_e < best_e)) {
        best_p = other_p;
        best_e = other_e;
      }
    }
    if (lane == 0) {
      taken[best_e] = true;
      out_ids[j] = best_e;
    }
    __syncwarp();
  }
  if (lane == 0) {
    double selected = 0;
    for (int j = 0; j < k; ++j) selected += prob[out_ids[j]];
    selected = fmax(selected, 6.103515625e-5);  // llama.cpp's floor on the renormaliser
    for (int j = 0; j < k; ++j) {
      const int32_t e = out_ids[j];
      const double w = prob[e] / selected * (expert_scale ? expert_scale[e] : 1.0f);
      weights[static_cast<int64_t>(t) * k + j] = static_cast<float>(w);
    }
  }
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

size_t attention_shared_bytes(int head_dim) {
  return (static_cast<size_t>(1 + kAttnWarps) * head_dim + 2 * kAttnWarps) * sizeof(float);
}

cudaError_t launch_attention(const AttentionBatch& batch, cudaStream_t stream) {
  if (batch.n_tokens <= 0 || batch.n_head <= 0) return cudaSuccess;
  const size_t shared =
      attention_shared_bytes(batch.head_dim);  // ≤ 37 KB at kMaxHeadDim: no opt-in
  for (int t0 = 0; t0 < batch.n_tokens; t0 += kMaxGridY) {
    const int nt = batch.n_tokens - t0 < kMaxGridY ? batch.n_tokens - t0 : kMaxGridY;
    attention_kernel<<<dim3(batch.n_head, nt), 32 * kAttnWarps, shared, stream>>>(batch, t0);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
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
