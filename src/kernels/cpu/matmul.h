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

#include "kernels/cpu/dot.h"
#include "kernels/ops.h"
#include "util/thread_pool.h"

namespace kernels::cpu {

// Bytes of scratch matmul() needs for up to `max_tokens` rows of up to `max_cols` values on a
// pool of `n_threads`.
size_t matmul_scratch_bytes(int max_tokens, int64_t max_cols, int n_threads);

// `scratch` is 64-byte aligned and at least matmul_scratch_bytes(n_tokens, w.n_cols, pool.size()).
// Kernels come from dot_kernel(w.type, isa); a type with none at any level is dequantized one row
// at a time (per-thread scratch) and dotted in f32. `isa` defaults to the CPU's (benchmarks and
// tests pass lower levels to compare).
void matmul(const Matrix& w, const float* x, float* y, int n_tokens, util::ThreadPool& pool,
            void* scratch, Isa isa = cpu_isa());

// Weight bytes per second that decode (one token) reaches for `type` on every thread of `pool`:
// - kCache: each thread re-reads its own ~160 KiB of rows with the dot kernel — the kernels'
//   ceiling with memory taken out, which tells compute-bound decode from bandwidth-bound;
// - kMemory: matmul() of one token over a 256 MiB matrix — the kernels streaming from memory as
//   decode does, without the rest of a model's step around them.
// Takes ~30 ms (kCache) or a few hundred (kMemory). 0 when no level has a dot kernel for the type.
enum class Residence { kCache, kMemory };
double decode_rate(DType type, Residence where, util::ThreadPool& pool, Isa isa = cpu_isa());

}  // namespace kernels::cpu
