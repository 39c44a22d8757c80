// Reference quantizers: f32 rows to GGUF block formats, following the published algorithms of the
// GGUF ecosystem's reference row quantizers, so the files headroom writes load in other GGUF tools
// and keep the quality those tools would give.
//
// The algorithms (not the code) follow llama.cpp's quantize_row_*_ref: Q4_0..Q8_0 take the block's
// extreme value as the scale; Q4_K and Q5_K search scale and min per 32-value sub-block by
// weighted least squares over a sweep of candidate scales; Q6_K searches a symmetric scale per 16
// values with |x|^2 weighting; the sub-block scales are then quantized against one f16 scale.
// Float operations keep the reference order, so results match the reference's bytes (see
// tests/tensor/quantize_test.cpp for which types are checked byte for byte).
#pragma once

#include <cstdint>

#include "tensor/blocks.h"
#include "tensor/dtype.h"
#include "util/result.h"

namespace tensor {

// In every function below, `n` counts values (a multiple of the block size) and src must hold
// finite values (the dispatcher checks both).
void quantize_row_f16(const float* src, uint16_t* dst, int64_t n);
void quantize_row_bf16(const float* src, uint16_t* dst, int64_t n);
void quantize_row_q4_0(const float* src, BlockQ4_0* dst, int64_t n);
void quantize_row_q4_1(const float* src, BlockQ4_1* dst, int64_t n);
void quantize_row_q5_0(const float* src, BlockQ5_0* dst, int64_t n);
void quantize_row_q5_1(const float* src, BlockQ5_1* dst, int64_t n);
void quantize_row_q8_0(const float* src, BlockQ8_0* dst, int64_t n);
void quantize_row_q4_k(const float* src, BlockQ4_K* dst, int64_t n);
void quantize_row_q5_k(const float* src, BlockQ5_K* dst, int64_t n);
void quantize_row_q6_k(const float* src, BlockQ6_K* dst, int64_t n);
// Activations for K-quant dot products: x = d * q with q in -127..127 and f32 d, plus the sums of
// each 16 quants.
void quantize_row_q8_k(const float* src, BlockQ8_K* dst, int64_t n);

// Encodes n values from src into row_bytes(type, n) bytes at dst. Errors, leaving dst untouched:
// a type it cannot write (named), n not a whole number of blocks, dst misaligned for the block
// struct, or a non-finite source value for a block type (named with its index; F16/BF16 keep
// inf and nan as they are).
util::Status quantize_row(DType type, const float* src, void* dst, int64_t n);

}  // namespace tensor
