// The 8-bit form of activations that a device's decode matmuls read (integer dot products).
//
// A row of n_cols f32 values (n_cols a multiple of 32) becomes n_cols int8 quants followed by
// n_cols / 32 pairs (d, s) of f32: block b's values are ≈ d·q, and s = d·Σq is the block's sum,
// which weight formats with an offset or a minimum need (Q4_0's −8, Q4_K's min). Rows are
// act_q8_row_bytes(n_cols) apart, so every row's quants start 16-byte aligned.
//
// The op that produces activations writes this form beside its f32 rows when it is given a
// destination (ops.h: the `*_q` pointers), for at most kActQ8MaxTokens rows; the matmuls after it
// read it instead of the f32 rows. quantize_act_block is the one definition of the rounding: the
// CUDA kernels run it one lane per value, the tests and the emulated GPU run it on the host.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/op_args.h"

namespace kernels {

inline constexpr int kActBlock = 32;
// Decode batches up to this many tokens read 8-bit activations; larger ones read f32 rows.
inline constexpr int kActQ8MaxTokens = 8;

// Whether rows of n_cols values have an 8-bit form.
HR_HOST_DEVICE constexpr bool act_q8_fits(int64_t n_cols) {
  return n_cols > 0 && n_cols % kActBlock == 0;
}
// Bytes of one row's 8-bit form (16-byte multiple).
HR_HOST_DEVICE constexpr size_t act_q8_row_bytes(int64_t n_cols) {
  return (static_cast<size_t>(n_cols) + static_cast<size_t>(n_cols / kActBlock) * 8 + 15) / 16 * 16;
}
HR_HOST_DEVICE inline int8_t* act_q8_quants(void* rows, int64_t n_cols, int row) {
  return static_cast<int8_t*>(rows) + static_cast<size_t>(row) * act_q8_row_bytes(n_cols);
}
HR_HOST_DEVICE inline const int8_t* act_q8_quants(const void* rows, int64_t n_cols, int row) {
  return static_cast<const int8_t*>(rows) + static_cast<size_t>(row) * act_q8_row_bytes(n_cols);
}
// The (d, s) pair of each block of a row: [n_cols / 32][2].
HR_HOST_DEVICE inline float* act_q8_scales(void* rows, int64_t n_cols, int row) {
  return reinterpret_cast<float*>(act_q8_quants(rows, n_cols, row) + n_cols);
}
HR_HOST_DEVICE inline const float* act_q8_scales(const void* rows, int64_t n_cols, int row) {
  return reinterpret_cast<const float*>(act_q8_quants(rows, n_cols, row) + n_cols);
}

// One value of a block whose largest magnitude is amax: its quant (round half to even).
HR_HOST_DEVICE inline int act_q8_quant(float x, float amax) {
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  return static_cast<int>(rintf(x * id));
}

// Quantizes 32 values: q[i] = round(x[i] / d) with d = max|x| / 127; scales = {d, d·Σq}. The
// maximum and the integer sum do not depend on the order they are taken in, so a warp that
// reduces them across its lanes writes the same bytes.
HR_HOST_DEVICE inline void quantize_act_block(const float* x, int8_t* q, float* scales) {
  float amax = 0.0f;
  for (int i = 0; i < kActBlock; ++i) amax = fmaxf(amax, fabsf(x[i]));
  int sum = 0;
  for (int i = 0; i < kActBlock; ++i) {
    const int v = act_q8_quant(x[i], amax);
    q[i] = static_cast<int8_t>(v);
    sum += v;
  }
  scales[0] = amax / 127.0f;
  scales[1] = scales[0] * static_cast<float>(sum);
}

// n_rows rows of x [n_rows][n_cols] into their 8-bit form at `out` (the host's loop).
inline void quantize_act_rows(const float* x, int64_t n_cols, int n_rows, void* out) {
  for (int r = 0; r < n_rows; ++r) {
    int8_t* q = act_q8_quants(out, n_cols, r);
    float* s = act_q8_scales(out, n_cols, r);
    for (int64_t b = 0; b < n_cols / kActBlock; ++b) {
      quantize_act_block(x + r * n_cols + b * kActBlock, q + b * kActBlock, s + 2 * b);
    }
  }
}

}  // namespace kernels
