// f32 operations rounded one by one on the host and the device alike: nvcc would otherwise contract
// a product and a sum into one fused multiply-add, which rounds once instead of twice, so kernels
// that promise the reference's bits (or the lane tests' host runs) spell their arithmetic with
// these.
#pragma once

#include "kernels/op_args.h"

namespace kernels::cuda {

HR_HOST_DEVICE inline float mul_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

HR_HOST_DEVICE inline float add_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

HR_HOST_DEVICE inline float sub_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

HR_HOST_DEVICE inline float div_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

}  // namespace kernels::cuda
