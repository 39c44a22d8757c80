// Dot kernels for the 256-value super-block types (Q4_K, Q5_K, Q6_K, IQ4_XS) against Q8_K
// activations. None yet: dot_kernel() reports no kernel and matmul() takes its dequantizing path.
#include "kernels/cpu/dot.h"

namespace kernels::cpu::detail {

DotKernel dot_kernel_kquant(DType, Isa) {
  return {};
}

}  // namespace kernels::cpu::detail
