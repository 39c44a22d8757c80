// Run-time choice of the instruction-set level, from the CPU's features and HEADROOM_ISA.
#include <cstdlib>
#include <string>

#include "kernels/cpu/dot.h"

namespace kernels::cpu {
namespace {

Isa detect() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                    __builtin_cpu_supports("f16c");
  if (!avx2) return Isa::kScalar;
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl");
  if (!avx512) return Isa::kAvx2;
  return __builtin_cpu_supports("avx512vnni") ? Isa::kAvx512Vnni : Isa::kAvx512;
#else
  return Isa::kScalar;
#endif
}

}  // namespace

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
    case Isa::kAvx512Vnni:
      return "avx512vnni";
  }
  return "?";
}

bool cpu_supports(Isa isa) {
  static const Isa best = detect();
  return isa <= best;
}

Isa cpu_isa() {
  static const Isa chosen = [] {
    Isa best = detect();
    if (const char* cap = std::getenv("HEADROOM_ISA")) {
      for (Isa level : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Vnni}) {
        if (isa_name(level) == cap && level < best) best = level;
      }
    }
    return best;
  }();
  return chosen;
}

}  // namespace kernels::cpu
