// kernels::cpu::matmul — weight × activations for every stored type, SIMD and threaded.
//
// Contract (the CPU backend and the scheduler rely on it):
// - y[t] = W · x[t] for t < n_tokens, same meaning as kernels::ref::matmul.
// - Batch-invariant: y[t] depends only on W and x[t], never on n_tokens or on the other rows
//   of x, so a request's greedy output is identical alone or batched with 31 others.
// - No allocation: activations are quantized into `scratch`, sized by matmul_scratch_bytes().
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/ops.h"
#include "util/thread_pool.h"

namespace kernels::cpu {

// Bytes of scratch matmul() needs for up to `max_tokens` rows of up to `max_cols` values.
size_t matmul_scratch_bytes(int max_tokens, int64_t max_cols);

void matmul(const Matrix& w, const float* x, float* y, int n_tokens, util::ThreadPool& pool, void* scratch);

}  // namespace kernels::cpu
