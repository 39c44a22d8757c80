// dot_kernel(): the kernel for a weight type at the highest level at or below the one asked for.
#include "kernels/cpu/dot.h"

namespace kernels::cpu {

DotKernel dot_kernel(DType weight, Isa isa) {
  for (int level = static_cast<int>(isa); level >= 0; --level) {
    const Isa at = static_cast<Isa>(level);
    for (auto* find : {detail::dot_kernel_simple, detail::dot_kernel_kquant}) {
      const DotKernel k = find(weight, at);
      if (k.dot != nullptr) return k;
    }
  }
  return {};
}

}  // namespace kernels::cpu
