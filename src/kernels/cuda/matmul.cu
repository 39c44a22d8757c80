// CUDA matmul and get_rows for every weight type the reference decodes.
//
//   y[t][r] = Σ_c W[r][c] · x[t][c]    W: [n_rows][n_cols] stored, x: [T][n_cols], y: [T][n_rows]
//
// Two kernels, both reading each stored weight byte from device memory once per call:
// - matvec (T ≤ 8, decode): one warp per weight row (kMatvecRows). Lane l walks the row's 8-value
//   units l, l + 32, …, decodes each in registers (decode.cuh), multiplies it with the same 8
//   columns of every token's activations (two 16-byte loads, re-read from L1/L2: they are shared
//   by all rows) and keeps one f32 sum per token; a warp-shuffle reduction ends the row. Bytes
//   moved ≈ the weight matrix plus T·n_cols·4 of activations plus T·n_rows·4 of output. On an
//   H100 f32 weights stream at 97 % of the device copy rate, but the quantized types reach only
//   15–30 %: the value-by-value decode (byte loads, per-unit scale unpacking) is instruction- and
//   latency-bound, not bandwidth-bound. Next: integer dot products on activations quantized to
//   8 bits once per call, with 4-byte loads of whole blocks (bench/RESULTS.md, issue #9).
// - tiled (T > 8, prefill): a 64-row × 64-token output tile per block of 256 threads. Per step of
//   32 columns, each thread decodes one weight unit into shared memory (so a weight is decoded
//   once per 64 tokens, not once per token) and the block stages the 64 tokens' activations
//   beside it; each thread then accumulates a 4×4 block of outputs in f32 FMAs. This is a plain
//   shared-memory SIMT kernel: no tensor cores yet (WMMA/mma on f16 tiles would come with a GPU
//   to test them on), so prefill runs at the f32 FMA rate.
// Accumulation is f32 in both (the reference's is double): results agree within f32 summation
// error, which tests/kernels/cuda_backend_test.cpp bounds as the CPU tests do.
#include "kernels/cuda/decode.cuh"
#include "kernels/cuda/launch.h"

namespace kernels::cuda::detail {
namespace {

// Matvec geometry: warps per block, and weight rows per warp (each activation load serves every
// row of its warp). Measured on an H100 (bench/RESULTS.md, 16384 × 14336): 1, 2 and 4 rows per
// warp were within 20 % of each other; 1 was fastest for the quantized types (fewest registers,
// most warps in flight) and within 1 % for f32, so it is kept. The 16-byte activation loads
// (load_x8) were the change that mattered: they cut L1 traffic 4× against value-by-value loads.
constexpr int kMatvecWarps = 4;
constexpr int kMatvecRows = 1;

// xv = x[c0, c0 + 8): two 16-byte loads when the row allows (vec), else value by value with the
// values past n_cols read as 0 (only plain float types end in a partial unit).
__device__ __forceinline__ void load_x8(const float* __restrict__ x, int64_t c0, int64_t n_cols,
                                        bool vec, float (&xv)[8]) {
  if (vec) {
    const float4 a = __ldg(reinterpret_cast<const float4*>(x + c0));
    const float4 b = __ldg(reinterpret_cast<const float4*>(x + c0) + 1);
    xv[0] = a.x, xv[1] = a.y, xv[2] = a.z, xv[3] = a.w;
    xv[4] = b.x, xv[5] = b.y, xv[6] = b.z, xv[7] = b.w;
  } else {
#pragma unroll
    for (int j = 0; j < 8; ++j) xv[j] = c0 + j < n_cols ? __ldg(x + c0 + j) : 0.0f;
  }
}

template <DType T>
__global__ void __launch_bounds__(32 * kMatvecWarps)
    matvec_kernel(const uint8_t* __restrict__ w, int64_t n_cols, int64_t n_rows, size_t row_bytes,
                  const float* __restrict__ x, float* __restrict__ y, int n_tokens) {
  const int lane = threadIdx.x % 32;
  const int64_t r0 =
      (static_cast<int64_t>(blockIdx.x) * kMatvecWarps + threadIdx.x / 32) * kMatvecRows;
  if (r0 >= n_rows) return;  // the whole warp leaves together: the shuffles below stay full-warp
  const int64_t n_units = (n_cols + 7) / 8;
  // 16-byte activation loads need every token's row 16-byte aligned: n_cols % 4 == 0 and an
  // aligned x; whole units need n_cols % 8 == 0.
  const bool vec = n_cols % 8 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0;
  float acc[kMatvecRows][kMatvecMaxTokens];
#pragma unroll
  for (int i = 0; i < kMatvecRows; ++i) {
#pragma unroll
    for (int t = 0; t < kMatvecMaxTokens; ++t) acc[i][t] = 0.0f;
  }

  for (int64_t u = lane; u < n_units; u += 32) {
    float v[kMatvecRows][8];
#pragma unroll
    for (int i = 0; i < kMatvecRows; ++i) {
      // Rows past the end (warp-uniform) repeat the last row; their sums are never stored.
      const int64_t r = r0 + i < n_rows ? r0 + i : n_rows - 1;
      decode_unit<T>(w + r * row_bytes, u, n_cols, v[i]);
    }
    const int64_t c0 = 8 * u;
#pragma unroll
    for (int t = 0; t < kMatvecMaxTokens; ++t) {
      if (t < n_tokens) {
        float xv[8];
        load_x8(x + t * n_cols, c0, n_cols, vec, xv);
#pragma unroll
        for (int i = 0; i < kMatvecRows; ++i) {
          float s = 0.0f;
#pragma unroll
          for (int j = 0; j < 8; ++j) s = fmaf(v[i][j], xv[j], s);
          acc[i][t] += s;
        }
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kMatvecRows; ++i) {
#pragma unroll
    for (int t = 0; t < kMatvecMaxTokens; ++t) {
      if (t < n_tokens) {
        float s = acc[i][t];
#pragma unroll
        for (int offset = 16; offset > 0; offset /= 2) s += __shfl_xor_sync(0xffffffffu, s, offset);
        if (lane == 0 && r0 + i < n_rows) y[t * n_rows + r0 + i] = s;
      }
    }
  }
}

constexpr int kTileRows = 64;    // weight rows per block
constexpr int kTileTokens = 64;  // tokens per block
constexpr int kTileK = 32;       // columns per step: 4 units of 8
constexpr int kTileThreads = 256;
static_assert(kTileRows * (kTileK / 8) == kTileThreads, "one weight unit per thread per step");
static_assert(kTileTokens * kTileK % kTileThreads == 0, "whole activation loads per thread");

template <DType T>
__global__ void __launch_bounds__(kTileThreads)
    matmul_tiled_kernel(const uint8_t* __restrict__ w, int64_t n_cols, int64_t n_rows,
                        size_t row_bytes, const float* __restrict__ x, float* __restrict__ y,
                        int n_tokens) {
  // Column-major tiles ([k][row], [k][token]) padded to 65 so that both the stores below and the
  // reads of the product loop hit 32 different banks.
  __shared__ float ws[kTileK][kTileRows + 1];
  __shared__ float xs[kTileK][kTileTokens + 1];
  const int tid = threadIdx.x;
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * kTileRows;
  const int t0 = blockIdx.y * kTileTokens;
  // Outputs of this thread: rows r0 + tr + 16i, tokens t0 + tt + 16k (i, k < 4). Adjacent threads
  // take adjacent rows, so the final stores of a warp are two runs of 16 consecutive floats.
  const int tr = tid % 16, tt = tid / 16;
  // Weight loading: row r0 + load_row, unit load_unit of each 32-column step.
  const int load_row = tid / 4, load_unit = tid % 4;
  const int64_t wr = r0 + load_row;
  const uint8_t* wrow = w + wr * row_bytes;
  const int64_t n_units = (n_cols + 7) / 8;

  float acc[4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int k = 0; k < 4; ++k) acc[i][k] = 0.0f;
  }

  for (int64_t k0 = 0; k0 < n_cols; k0 += kTileK) {
    float v[8];
    const int64_t u = k0 / 8 + load_unit;
    if (wr < n_rows && u < n_units) {
      decode_unit<T>(wrow, u, n_cols, v);
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = 0.0f;
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) ws[load_unit * 8 + j][load_row] = v[j];
#pragma unroll
    for (int p = 0; p < kTileTokens * kTileK / kTileThreads; ++p) {
      const int idx = p * kTileThreads + tid;
      const int tok = idx / kTileK, c = idx % kTileK;  // a warp reads 32 consecutive columns
      const int64_t col = k0 + c;
      const int tg = t0 + tok;
      xs[c][tok] = (tg < n_tokens && col < n_cols) ? __ldg(x + tg * n_cols + col) : 0.0f;
    }
    __syncthreads();
#pragma unroll 8
    for (int kk = 0; kk < kTileK; ++kk) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = ws[kk][tr + 16 * i];
#pragma unroll
      for (int k = 0; k < 4; ++k) b[k] = xs[kk][tt + 16 * k];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int k = 0; k < 4; ++k) acc[i][k] = fmaf(a[i], b[k], acc[i][k]);
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int64_t r = r0 + tr + 16 * i;
      const int t = t0 + tt + 16 * k;
      if (r < n_rows && t < n_tokens) y[t * n_rows + r] = acc[i][k];
    }
  }
}

// out[i] = scale · row ids[i]: one block per output row; bit-exact with ref::get_rows.
template <DType T>
__global__ void get_rows_kernel(const uint8_t* __restrict__ table, int64_t n_cols, size_t row_bytes,
                                const int32_t* __restrict__ ids, float scale,
                                float* __restrict__ out) {
  const uint8_t* row = table + static_cast<int64_t>(ids[blockIdx.x]) * row_bytes;
  float* o = out + static_cast<int64_t>(blockIdx.x) * n_cols;
  const int64_t n_units = (n_cols + 7) / 8;
  for (int64_t u = threadIdx.x; u < n_units; u += blockDim.x) {
    float v[8];
    decode_unit<T>(row, u, n_cols, v);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int64_t c = 8 * u + j;
      if (unit_block_values(T) > 1 || c < n_cols)
        o[c] = scale != 1.0f ? __fmul_rn(v[j], scale) : v[j];
    }
  }
}

unsigned int blocks_for(int64_t n, int64_t per_block) {
  return static_cast<unsigned int>((n + per_block - 1) / per_block);
}

}  // namespace

bool can_decode(DType type) {
  return unit_block_values(type) > 0;
}

cudaError_t launch_matmul(const Matrix& w, const float* x, float* y, int n_tokens,
                          cudaStream_t stream) {
  if (n_tokens <= 0 || w.n_rows == 0) return cudaSuccess;
  const auto* data = static_cast<const uint8_t*>(w.data);
  return with_decodable_type(w.type, [&](auto tag) {
    constexpr DType T = decltype(tag)::value;
    if (n_tokens <= kMatvecMaxTokens) {
      matvec_kernel<T>
          <<<blocks_for(w.n_rows, kMatvecWarps * kMatvecRows), 32 * kMatvecWarps, 0, stream>>>(
              data, w.n_cols, w.n_rows, w.row_bytes, x, y, n_tokens);
    } else {
      const dim3 grid(blocks_for(w.n_rows, kTileRows), blocks_for(n_tokens, kTileTokens));
      matmul_tiled_kernel<T><<<grid, kTileThreads, 0, stream>>>(data, w.n_cols, w.n_rows,
                                                                w.row_bytes, x, y, n_tokens);
    }
    return cudaGetLastError();
  });
}

cudaError_t launch_get_rows(const Matrix& table, const int32_t* ids, int n, float scale, float* out,
                            cudaStream_t stream) {
  if (n <= 0 || table.n_cols == 0) return cudaSuccess;
  const auto* data = static_cast<const uint8_t*>(table.data);
  return with_decodable_type(table.type, [&](auto tag) {
    constexpr DType T = decltype(tag)::value;
    get_rows_kernel<T><<<static_cast<unsigned int>(n), 128, 0, stream>>>(
        data, table.n_cols, table.row_bytes, ids, scale, out);
    return cudaGetLastError();
  });
}

}  // namespace kernels::cuda::detail
