// kernels::cpu dot products: one stored weight row against activation rows that were converted
// once per matmul to the weight type's partner format (8-bit blocks for the quantized types), so
// the inner loop is an integer dot product.
//
// Instruction sets are chosen at run time from the CPU's features (cpu_isa()); every level has
// the same results contract, and tests compare each level the CPU supports with kernels::ref.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tensor/dtype.h"

namespace kernels::cpu {

using tensor::DType;

// Ordered: a CPU that supports a level supports every level before it.
enum class Isa { kScalar, kAvx2, kAvx512, kAvx512Vnni };

std::string_view isa_name(Isa isa);
// The best level this CPU supports. HEADROOM_ISA=scalar|avx2|avx512|avx512vnni caps it (bench,
// tests, and users who want to compare); a cap above the CPU's level is ignored.
Isa cpu_isa();
bool cpu_supports(Isa isa);

// out[t * out_stride] = Σ_c w[c] · x_t[c] for t < n_tokens, where x_t = x + t * x_stride bytes
// is one activation row in the partner format. n is the row length in values.
// Batch-invariant: the value for token t does not depend on n_tokens (same order of operations
// for every t), so tiling tokens never changes a result.
using DotFn = void (*)(int64_t n, const void* w, const void* x, size_t x_stride, int n_tokens,
                       float* out, size_t out_stride);

// Converts one f32 activation row to the partner format (n values).
using PartnerFn = void (*)(const float* x, void* out, int64_t n);

// out[t * out_stride + r] = Σ_c w_r[c] · x_t[c] for kDotRows consecutive weight rows (w_r = w +
// r * w_stride bytes) and n_tokens activation rows. Each value is bit for bit what DotFn gives
// that row and token (same operations in the same order); blocking rows with tokens only shares
// loads and unpacking in prefill. Decode stays on DotFn: one weight stream at a time is faster
// there (kernels/cpu/matmul.cpp).
inline constexpr int kDotRows = 4;
using DotRowsFn = void (*)(int64_t n, const void* w, size_t w_stride, const void* x,
                           size_t x_stride, int n_tokens, float* out, size_t out_stride);

struct DotKernel {
  DType partner = DType::kF32;  // the activation format `dot` reads
  PartnerFn to_partner = nullptr;
  DotFn dot = nullptr;
  DotRowsFn dot_rows = nullptr;  // optional: kDotRows rows at a time
};

// The kernel for a weight type at an instruction-set level, or a kernel with dot == nullptr
// when this level has none for the type (the caller then tries a lower level; kScalar covers
// every type in the list of issue #6).
DotKernel dot_kernel(DType weight, Isa isa);

namespace detail {
// Each file registers its own types; dot_kernel() asks them in turn.
DotKernel dot_kernel_simple(DType weight,
                            Isa isa);  // dot_simple.cpp: F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1
DotKernel dot_kernel_kquant(DType weight, Isa isa);  // dot_kquant.cpp: Q4_K Q5_K Q6_K IQ4_XS
}  // namespace detail

}  // namespace kernels::cpu
