// The kernel launchers of the CUDA backend (defined in matmul.cu, matvec.cu, attention.cu,
// fused.cu, lora.cu and ops.cu), called by backend.cpp. Internal to src/kernels/cuda: it names CUDA
// runtime types, backend.h does not.
//
// Every launcher enqueues its kernels on `stream` and returns cudaGetLastError() after the
// launch (an invalid configuration shows at once; a fault inside a kernel only at the next
// synchronization). Arguments have been checked by the caller: types are ones the kernels decode,
// pointers are device pointers, sizes are non-negative and fit the grid limits.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/op_args.h"

namespace kernels::cuda::detail {

// Whether matmul/get_rows decode this weight type (the types tensor::dequantize_row decodes).
bool can_decode(DType type);
// Whether store_kv writes / attention reads this cache type (F32, F16, Q8_0, Q4_0).
bool is_cache_type(DType type);

// Token counts up to this use the matrix-vector kernel; larger ones the tiled kernel.
inline constexpr int kMatvecMaxTokens = 8;
// Largest head_dim attention takes (its shared memory holds a few rows of this many floats).
inline constexpr int kMaxHeadDim = 1024;

cudaError_t launch_matmul(const Matrix& w, const float* x, float* y, int n_tokens,
                          cudaStream_t stream);
cudaError_t launch_get_rows(const Matrix& table, const int32_t* ids, int n, float scale, float* out,
                            cudaStream_t stream);

cudaError_t launch_rmsnorm(const float* x, const float* w, float* y, int64_t n, int64_t n_rows,
                           float eps, cudaStream_t stream);
cudaError_t launch_rope(float* x, int n_tokens, int n_head, int head_dim, const int32_t* pos,
                        const RopeParams& p, cudaStream_t stream);
// n_sm: the GPU's multiprocessors, which size the split of a decode batch's context.
cudaError_t launch_attention(const AttentionBatch& batch, int n_sm, cudaStream_t stream);
cudaError_t launch_store_kv(DType k_type, DType v_type, int kv_dim, const float* k, const float* v,
                            const KvWrite* dst, int n_tokens, cudaStream_t stream);

enum class Elementwise { kAdd, kMul, kScale, kSoftcap };
// y = y op x (add, mul) or y = op(y, s) (scale: y·s, softcap: s·tanh(y/s)).
cudaError_t launch_elementwise(Elementwise op, float* y, const float* x, float s, int64_t n,
                               cudaStream_t stream);
// y = min(max(y, lo), hi)
cudaError_t launch_clamp(float* y, float lo, float hi, int64_t n, cudaStream_t stream);
enum class Activation { kSilu, kGelu };
cudaError_t launch_act_mul(Activation act, const float* gate, const float* up, float* out,
                           int64_t n, int64_t n_rows, int64_t stride, cudaStream_t stream);
// memmove semantics per row, rows in order (as the reference), also when ranges overlap.
cudaError_t launch_copy_rows(float* y, int64_t y_stride, const float* x, int64_t x_stride,
                             int64_t n, int64_t n_rows, cudaStream_t stream);
cudaError_t launch_moe_route(const float* logits, int n_tokens, int n_expert, int k,
                             const float* expert_scale, int32_t* ids, float* weights,
                             cudaStream_t stream);

// --- The fused decode ops (ops.h), one launch each, attention two ----------------------------

// matvec.cu: products over 8-bit activations (act_q8.h) with integer dot products for the types
// has_q8_matvec names, the f32 matvec for the others and the tiled kernel above kMatvecMaxTokens.
bool has_q8_matvec(DType type);
cudaError_t launch_matmuls(const MatmulOut* outs, int n, Activations x, int n_tokens,
                           cudaStream_t stream);
cudaError_t launch_matmul_glu(const GluMatmul& a, cudaStream_t stream);
cudaError_t launch_moe_glu(const MoeGlu& a, cudaStream_t stream);
cudaError_t launch_moe_down(const MoeDown& a, cudaStream_t stream);

// attention.cu (launch_attention above lives there too).
cudaError_t launch_attn_prep(const AttnPrep& a, cudaStream_t stream);

// fused.cu
// The widest row residual_norm's one block per row holds.
inline constexpr int64_t kResidualNormMaxWidth = 32768;
cudaError_t launch_residual_norm(const ResidualNorm& a, cudaStream_t stream);
// Largest k the device selection keeps per row.
inline constexpr int kMaxTopK = 64;
cudaError_t launch_top_k(const float* x, int64_t n, int n_rows, int k, int32_t* ids, float* values,
                         cudaStream_t stream);
cudaError_t launch_scatter(const uint8_t* src, const ScatterPiece* pieces, const int32_t* n_pieces,
                           int max_pieces, cudaStream_t stream);

// lora.cu: the LoRA terms of one product, two launches per adapter (A · x, then B · h added).
cudaError_t launch_lora(const LoraDelta& a, cudaStream_t stream);

}  // namespace kernels::cuda::detail
